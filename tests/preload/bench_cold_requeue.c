/*
 * perf bench futex requeue's cold call, timed call by call: THREADS threads sleep on one word
 * (FUTEX_WAIT_PRIVATE through syscall(), as perf's do), the main thread sleeps SLEEP_MS (perf's
 * 100 ms), then moves them to a second word one call at a time (FUTEX_CMP_REQUEUE_PRIVATE of one,
 * perf's default), timing every call. Run it as it is for the kernel, and with
 * LD_PRELOAD=libufutex_preload.so for ufutex.
 *
 * With WARM > 0, the main thread first reads WARM pages of a buffer of its own (written before
 * the sleep, nothing the futex calls use): how much of the first call's time is the memory
 * system waking up after the sleep, paid by whatever touches memory first, rather than the
 * pages the call itself needs (BENCHMARKS.md, eighty-fourth session).
 *
 * Prints, over the rounds, the median [min .. max] in ns of the whole loop, the first call,
 * the second, and the median of the calls after it. Each call's time includes one read of the
 * clock: on x86_64 the TSC (calibrated against CLOCK_MONOTONIC at the start), which touches no
 * memory; a read of CLOCK_MONOTONIC right after the first call cost ~0.5 us more and showed as
 * the second call's (BENCHMARKS.md, eighty-fifth session). Not a test: no assertion, but a call that
 * fails or moves more than one waiter ends the program with status 1.
 *
 *     bench_cold_requeue [ROUNDS [THREADS [SLEEP_MS [WARM]]]]   (defaults 15 128 100 0)
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "../c/deadline.h"
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

enum { MAX_THREADS = 1024, PAGE = 4096 };
static uint32_t from, to;
static int started;
static volatile long sink; /* keeps the warming reads */

static void *sleeper(void *arg)
{
	(void)arg;
	__atomic_fetch_add(&started, 1, __ATOMIC_SEQ_CST);
	/* Until the round's end releases the words (a wake or a requeue may also end a sleep). */
	while (__atomic_load_n(&from, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&to, __ATOMIC_SEQ_CST) == 0)
		syscall(SYS_futex, &from, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	return NULL;
}

#if defined(__x86_64__)
static double ticks_per_ns = 1;

/* The TSC's ticks a ns, over 50 ms of CLOCK_MONOTONIC. */
static void calibrate(void)
{
	double t0 = now_ns();
	unsigned long long c0 = __rdtsc();
	usleep(50000);
	ticks_per_ns = (double)(__rdtsc() - c0) / (now_ns() - t0);
}

/* Now, in ns from an arbitrary start. */
static double stamp(void)
{
	return (double)__rdtsc() / ticks_per_ns;
}
#else
static void calibrate(void)
{
}

static double stamp(void)
{
	return now_ns();
}
#endif

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void line(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp);
	printf("%-18s %10.0f [%.0f .. %.0f]\n", what, v[n / 2], v[0], v[n - 1]);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 15, n = argc > 2 ? atoi(argv[2]) : 128;
	int sleep_ms = argc > 3 ? atoi(argv[3]) : 100, warm = argc > 4 ? atoi(argv[4]) : 0;
	if (rounds < 1 || n < 1 || n > MAX_THREADS || sleep_ms < 0 || warm < 0) {
		fprintf(stderr, "usage: %s [ROUNDS [THREADS (1..%d) [SLEEP_MS [WARM]]]]\n", argv[0], MAX_THREADS);
		return 2;
	}
	calibrate();
	volatile char *buffer = warm ? calloc((size_t)warm, PAGE) : NULL;
	double *total = calloc((size_t)rounds, sizeof(double)), *first = calloc((size_t)rounds, sizeof(double));
	double *second = calloc((size_t)rounds, sizeof(double)), *later = calloc((size_t)rounds, sizeof(double));
	double *call = calloc((size_t)n + 1, sizeof(double));
	static pthread_t t[MAX_THREADS];
	for (int r = 0; r < rounds; r++) {
		from = to = 0;
		started = 0;
		for (int i = 0; i < n; i++)
			pthread_create(&t[i], NULL, sleeper, NULL);
		while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < n)
			usleep(1000);
		for (int p = 0; p < warm; p++)
			buffer[(size_t)p * PAGE] = 1;
		usleep((useconds_t)sleep_ms * 1000); /* the sleepers are asleep well before its end */
		for (int p = 0; p < warm; p++)
			sink += buffer[(size_t)p * PAGE];
		int moved = 0, calls = 0;
		double t0 = stamp(), at = t0;
		while (moved < n && calls < n) {
			long got = syscall(SYS_futex, &from, FUTEX_CMP_REQUEUE_PRIVATE, 0, (void *)1, &to, 0);
			double t1 = stamp();
			if (got < 0 || got > 1) {
				perror("FUTEX_CMP_REQUEUE_PRIVATE");
				return 1;
			}
			moved += (int)got;
			call[calls++] = t1 - at;
			at = t1;
		}
		total[r] = at - t0;
		first[r] = call[0];
		second[r] = calls > 1 ? call[1] : 0;
		if (calls > 2) {
			qsort(call + 2, (size_t)calls - 2, sizeof(double), cmp);
			later[r] = call[2 + (calls - 2) / 2];
		}
		__atomic_store_n(&from, 1, __ATOMIC_SEQ_CST);
		__atomic_store_n(&to, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &to, FUTEX_WAKE_PRIVATE, MAX_THREADS, NULL, NULL, 0);
		syscall(SYS_futex, &from, FUTEX_WAKE_PRIVATE, MAX_THREADS, NULL, NULL, 0);
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
	}
	printf("%d rounds, %d threads, %d ms asleep, %d pages read first: ns, median [min .. max]\n", rounds, n,
	       sleep_ms, warm);
	line("whole loop", total, rounds);
	line("first call", first, rounds);
	line("second call", second, rounds);
	line("later (median)", later, rounds);
	return 0;
}
