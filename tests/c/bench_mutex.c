/*
 * The C ABI's uncontended mutex against glibc's pthread mutex, in one run, alternating: a lock,
 * an increment and an unlock, N times, five rounds. With a second argument the process first
 * starts an idle thread, as a multi-threaded program (glibc's mutexes take no atomic
 * instruction while the process has one thread, and neither does ufutex's). Prints ns per
 * lock and unlock and pthread's time over ufutex's (> 1: ufutex faster).
 * Not a test: no assertion.
 *
 *     bench_mutex [N [threaded]]      (default N = 10^7, one thread)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ufutex.h>
#include "deadline.h"
#include <unistd.h>

static ufutex_mutex_t um = UFUTEX_MUTEX_INIT;
static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000000;
	pthread_t t;
	if (argc > 2 && pthread_create(&t, NULL, idle, NULL) != 0)
		return 2;
	for (int r = 0; r < 5; r++) {
		double t0 = now_ns();
		for (long i = 0; i < n; i++) {
			ufutex_mutex_lock(&um);
			counter++;
			ufutex_mutex_unlock(&um);
		}
		double t1 = now_ns();
		for (long i = 0; i < n; i++) {
			pthread_mutex_lock(&pm);
			counter++;
			pthread_mutex_unlock(&pm);
		}
		double t2 = now_ns();
		printf("ufutex %.2f ns  pthread %.2f ns  pthread/ufutex %.2f\n", (t1 - t0) / n, (t2 - t1) / n,
		       (t2 - t1) / (t1 - t0));
	}
	return 0;
}
