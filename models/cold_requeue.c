/*
 * Where the time of `perf bench futex requeue` goes, call by call: 128 threads sleep on one word
 * (FUTEX_WAIT_PRIVATE, through libc's syscall(), as perf's do), the main thread sleeps 100 ms
 * (perf's own pause, which leaves the caches and TLBs cold), then requeues them one per call
 * (FUTEX_CMP_REQUEUE_PRIVATE, nr_requeue 1: perf's default -q 1) onto a second word, timing each
 * call with the TSC. Run plainly for the kernel, and with LD_PRELOAD=libufutex_preload.so for
 * ufutex. Not part of the library, and not a test: a measurement that each session can run again
 * (BENCHMARKS.md, sixty-fifth session). x86-64 only (the TSC).
 *
 *   cc -O2 -pthread -o cold_requeue models/cold_requeue.c
 *   ./cold_requeue ROUNDS                   (the kernel)
 *   LD_PRELOAD=target/dist/libufutex_preload.so ./cold_requeue ROUNDS
 *
 * PRE=1 in the environment makes one FUTEX_WAKE_PRIVATE of an unrelated word with no waiters
 * right before the first requeue (timed on its own as "pre"): how much of the first call's cost
 * any first futex call after the pause pays.
 *
 * Prints, per round, the TSC ticks of the first calls, of the last ones and of all 128.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

enum { SLEEPERS = 128, MAX_ROUNDS = 32 };

static uint32_t from_word, to_word, unrelated;
static volatile int asleep;
static uint64_t ticks[SLEEPERS][MAX_ROUNDS];
static uint64_t pre[MAX_ROUNDS];

static void *sleeper(void *unused) {
  (void)unused;
  __sync_fetch_and_add(&asleep, 1);
  while (__atomic_load_n(&to_word, __ATOMIC_ACQUIRE) == 0)
    syscall(SYS_futex, &from_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
  return NULL;
}

static void print_row(const char *label, int call, int rounds) {
  printf("%s %3d:", label, call);
  for (int r = 0; r < rounds; r++)
    printf(" %6lu", (unsigned long)ticks[call][r]);
  printf("\n");
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 6;
  if (rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: %s ROUNDS (1..%d)\n", argv[0], MAX_ROUNDS);
    return 2;
  }
  int warm = getenv("PRE") != NULL;
  /* Written once before any timing: a first write to a page of these faults (~2-16 us here),
   * and would land in the calls' times. Each round writes only its own column, so the calls a
   * round did not make stay 0 in it. */
  memset(ticks, 0, sizeof ticks);
  memset(pre, 0, sizeof pre);
  for (int r = 0; r < rounds; r++) {
    pthread_t threads[SLEEPERS];
    asleep = 0;
    from_word = to_word = 0;
    for (int i = 0; i < SLEEPERS; i++)
      if (pthread_create(&threads[i], NULL, sleeper, NULL) != 0) {
        perror("pthread_create");
        return 1;
      }
    while (asleep < SLEEPERS)
      usleep(1000);
    usleep(100000);
    uint64_t t0 = __rdtsc();
    if (warm)
      syscall(SYS_futex, &unrelated, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    uint64_t t = __rdtsc();
    pre[r] = t - t0;
    int moved = 0, call = 0;
    while (moved < SLEEPERS && call < SLEEPERS) {
      long n = syscall(SYS_futex, &from_word, FUTEX_CMP_REQUEUE_PRIVATE, 0, (void *)1L, &to_word, 0);
      uint64_t now = __rdtsc();
      ticks[call++][r] = now - t;
      t = now;
      if (n > 0)
        moved += (int)n;
    }
    /* A sleeper that had not gone to sleep yet when its call came is woken here too. */
    __atomic_store_n(&to_word, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &to_word, FUTEX_WAKE_PRIVATE, SLEEPERS, NULL, NULL, 0);
    syscall(SYS_futex, &from_word, FUTEX_WAKE_PRIVATE, SLEEPERS, NULL, NULL, 0);
    for (int i = 0; i < SLEEPERS; i++)
      pthread_join(threads[i], NULL);
  }
  if (warm) {
    printf("pre     :");
    for (int r = 0; r < rounds; r++)
      printf(" %6lu", (unsigned long)pre[r]);
    printf("\n");
  }
  for (int c = 0; c < 6; c++)
    print_row("call", c, rounds);
  for (int c = SLEEPERS - 3; c < SLEEPERS; c++)
    print_row("call", c, rounds);
  printf("total   :");
  for (int r = 0; r < rounds; r++) {
    uint64_t sum = 0;
    for (int c = 0; c < SLEEPERS; c++)
      sum += ticks[c][r];
    printf(" %6lu", (unsigned long)sum);
  }
  printf("\n");
  return 0;
}
