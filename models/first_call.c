/*
 * What a process's first futex call costs once it has a second thread: the program starts an
 * idle thread, then times its first FUTEX_WAKE_PRIVATE (no waiters) and a second one, through
 * libc's syscall(). Run plainly for the kernel, and with LD_PRELOAD=libufutex_preload.so for
 * ufutex, in a fresh process each time (the first call is the point). Not part of the library,
 * and not a test: a measurement that each session can run again (BENCHMARKS.md, seventy-first
 * session: the library's one-time membarrier registration, made at the first call in a
 * process with two threads, waited for an RCU grace period, 8-24 ms here).
 *
 *   cc -O2 -pthread -o first_call models/first_call.c
 *   ./first_call                                   (the kernel)
 *   LD_PRELOAD=target/dist/libufutex_preload.so ./first_call
 *
 * Prints the two calls' times in microseconds.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void *idle(void *arg) {
    (void)arg;
    usleep(100000);
    return NULL;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(void) {
    static uint32_t word;
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    double times[2];
    for (int i = 0; i < 2; i++) {
        double start = now_us();
        long r = syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        times[i] = now_us() - start;
        if (r != 0) {
            fprintf(stderr, "FUTEX_WAKE_PRIVATE: %ld\n", r);
            return 1;
        }
    }
    printf("first %.1f us, second %.1f us\n", times[0], times[1]);
    pthread_join(t, NULL);
    return 0;
}
