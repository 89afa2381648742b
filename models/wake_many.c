/*
 * A model of waking many sleepers, in plain C on the kernel's futex calls: how long until all
 * of 128 sleeping threads ran again, for the kernel's own way (every thread on one word) and
 * for the ways ufutex's bells could work (BENCHMARKS.md cites it by mode). Not part of the
 * library, and not a test: a measurement that each session can run again.
 *
 *   cc -O2 -pthread -o wake_many models/wake_many.c
 *   ./wake_many REPS MODE WAKERS        (FAN=n in the environment for mode 300)
 *
 * WAKERS threads (1 or 2) each wake an equal share of the 128 sleepers, all at once. MODE:
 *    0  every sleeper waits on one word (FUTEX_WAIT); each waker FUTEX_WAKEs its share.
 *    B  (1..64) each sleeper waits with futex_waitv on its own word and one of B bells (a run of
 *       128/B consecutive sleepers per bell); each waker sets its sleepers' words, then rings
 *       every bell its share covers (B = 1: ufutex's one bell per bucket).
 *   -1  as 1, but each waker wakes each of its sleepers on its own word.
 *  100  three words per sleeper: its own, a run bell (sleepers 0-7, then the rest) and a bucket
 *       bell; each waker rings the bucket bell and the first run bell.
 *  101  as 100, but the first run also on three words; only the bucket bell is rung.
 *  200  each sleeper waits on the bucket bell alone with FUTEX_WAIT_BITSET, one bit per run
 *       (8, 8, 16, 32, 64 sleepers); a waker rings the bits of its share.
 *  201  each sleeper waits alone with FUTEX_WAIT_BITSET on one of four bell words, with a bit
 *       of its own (sleeper i: word i / 32, bit i % 32), so a ring of one bit wakes exactly one
 *       thread; a waker rings each word its share covers once, with its sleepers' bits there.
 *  202  as 201, but a waker wakes two words a call with FUTEX_WAKE_OP (every sleeper of both;
 *       the op adds 0 to the second word, and the compare, >= 0, holds while the model's
 *       sequences stay below 2^31).
 *  300  as 1, but passed on: a waker adds its share to a pending count and wakes FAN (default
 *       2) threads of the bell; each woken thread takes one off the count and, while some are
 *       pending, wakes FAN more (a thread woken for nothing passes it on too, then sleeps).
 *
 * Prints the median of the wakers' call (the first waker's) and of "until all ran" (from the
 * wakers' start to the last sleeper's return), in µs, with the range and quartiles.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 2
#endif
#ifndef FUTEX2_PRIVATE
#define FUTEX2_PRIVATE 128
#endif
#define SYS_FUTEX_WAITV 449

#define N 128
#define MAX_REPS 500
#define BUCKET_BELL 64 /* bells[BUCKET_BELL]: modes 100 and 101 */

static int mode, wakers = 2, fan = 2;
static uint32_t word, release_word, own[N], bells[N + 64];
static int arrived, done, pending, go;
static uint64_t t0, last;
static uint64_t call_ns[2];

static long futex(uint32_t *uaddr, int op, uint32_t val, uint32_t val3)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, val3);
}

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

static uint32_t load(uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

/* Sleep on words[0..n], each expecting its value: the index of the word that woke us, or -1. */
static long waitv(uint32_t **words, uint32_t *vals, int n)
{
	struct futex_waitv v[3];
	memset(v, 0, sizeof v);
	for (int i = 0; i < n; i++) {
		v[i].uaddr = (uintptr_t)words[i];
		v[i].val = vals[i];
		v[i].flags = FUTEX2_SIZE_U32 | FUTEX2_PRIVATE;
	}
	return syscall(SYS_FUTEX_WAITV, v, n, 0, NULL, CLOCK_MONOTONIC);
}

static int nbells(void)
{
	return mode > 0 && mode < 100 ? mode : 1;
}

/* Mode 200's bit for sleeper i: runs of 8, 8, 16, 32, 64. */
static int run_of(long i)
{
	return i < 8 ? 0 : 32 - __builtin_clz(i / 8);
}

static void sleep_until_woken(long i)
{
	if (mode == 0) {
		while (load(&word) == 0)
			futex(&word, FUTEX_WAIT_PRIVATE, 0, 0);
		return;
	}
	if (mode == 201 || mode == 202) {
		while (load(&own[i]) == 0) {
			uint32_t seq = load(&bells[i / 32]);
			if (load(&own[i]))
				break;
			futex(&bells[i / 32], FUTEX_WAIT_BITSET_PRIVATE, seq, 1u << (i % 32));
		}
		return;
	}
	if (mode == 200) {
		while (load(&own[i]) == 0) {
			uint32_t seq = load(&bells[0]);
			if (load(&own[i]))
				break;
			futex(&bells[0], FUTEX_WAIT_BITSET_PRIVATE, seq, 1u << run_of(i));
		}
		return;
	}
	uint32_t *bell = mode == 100 || mode == 101 ? &bells[i < 8 ? 0 : 1] : &bells[i / (N / nbells())];
	int n = mode == 101 || (mode == 100 && i >= 8) ? 3 : 2;
	while (load(&own[i]) == 0) {
		uint32_t *words[3] = { &own[i], bell, &bells[BUCKET_BELL] };
		uint32_t vals[3] = { 0, load(bell), load(&bells[BUCKET_BELL]) };
		long r = waitv(words, vals, n);
		if (mode == 300 && r == 1 && load(&own[i]) == 0 && __atomic_load_n(&pending, __ATOMIC_SEQ_CST) > 0)
			futex(bell, FUTEX_WAKE_PRIVATE, fan, 0); /* woken for nothing: pass it on */
	}
	if (mode == 300 && __atomic_sub_fetch(&pending, 1, __ATOMIC_SEQ_CST) > 0)
		futex(bell, FUTEX_WAKE_PRIVATE, fan, 0);
}

static void *sleeper(void *arg)
{
	long i = (long)arg;
	__atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
	sleep_until_woken(i);
	uint64_t t = now(), l = __atomic_load_n(&last, __ATOMIC_SEQ_CST);
	while (t > l && !__atomic_compare_exchange_n(&last, &l, t, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	__atomic_add_fetch(&done, 1, __ATOMIC_SEQ_CST);
	while (!load(&release_word))
		futex(&release_word, FUTEX_WAIT_PRIVATE, 0, 0);
	return NULL;
}

static void ring(uint32_t *bell)
{
	__atomic_add_fetch(bell, 1, __ATOMIC_SEQ_CST);
	futex(bell, FUTEX_WAKE_PRIVATE, INT_MAX, 0);
}

static void wake_share(int lo, int hi)
{
	if (mode == 0) {
		futex(&word, FUTEX_WAKE_PRIVATE, hi - lo, 0);
		return;
	}
	if (mode < 0) {
		for (int i = lo; i < hi; i++) {
			__atomic_store_n(&own[i], 1, __ATOMIC_SEQ_CST);
			futex(&own[i], FUTEX_WAKE_PRIVATE, 1, 0);
		}
		return;
	}
	for (int i = lo; i < hi; i++)
		__atomic_store_n(&own[i], 1, __ATOMIC_SEQ_CST);
	if (mode == 200) {
		uint32_t bits = 0;
		for (int i = lo; i < hi; i++)
			bits |= 1u << run_of(i);
		__atomic_add_fetch(&bells[0], 1, __ATOMIC_SEQ_CST);
		futex(&bells[0], FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, bits);
	} else if (mode == 201) {
		for (int w = lo / 32; w < (hi + 31) / 32; w++) {
			uint32_t bits = 0;
			for (int i = lo; i < hi; i++)
				if (i / 32 == w)
					bits |= 1u << (i % 32);
			__atomic_add_fetch(&bells[w], 1, __ATOMIC_SEQ_CST);
			futex(&bells[w], FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, bits);
		}
	} else if (mode == 202) {
		int last = (hi + 31) / 32;
		for (int w = lo / 32; w < last; w += 2) {
			__atomic_add_fetch(&bells[w], 1, __ATOMIC_SEQ_CST);
			if (w + 1 == last) {
				futex(&bells[w], FUTEX_WAKE_PRIVATE, INT_MAX, 0);
				break;
			}
			__atomic_add_fetch(&bells[w + 1], 1, __ATOMIC_SEQ_CST);
			syscall(SYS_futex, &bells[w], FUTEX_WAKE_OP_PRIVATE, INT_MAX, (void *)(long)INT_MAX, &bells[w + 1],
				FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_GE, 0));
		}
	} else if (mode == 300) {
		__atomic_add_fetch(&pending, hi - lo, __ATOMIC_SEQ_CST);
		__atomic_add_fetch(&bells[0], 1, __ATOMIC_SEQ_CST);
		futex(&bells[0], FUTEX_WAKE_PRIVATE, fan, 0);
	} else if (mode == 100 || mode == 101) {
		ring(&bells[BUCKET_BELL]);
		if (mode == 100)
			ring(&bells[0]);
	} else {
		int per = N / nbells();
		for (int b = lo / per; b < (hi + per - 1) / per; b++)
			ring(&bells[b]);
	}
}

static void *waker(void *arg)
{
	long k = (long)arg;
	while (!__atomic_load_n(&go, __ATOMIC_SEQ_CST))
		;
	uint64_t t = now();
	wake_share(k * (N / wakers), (k + 1) * (N / wakers));
	call_ns[k] = now() - t;
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s REPS MODE WAKERS\n", argv[0]);
		return 2;
	}
	int reps = atoi(argv[1]);
	mode = atoi(argv[2]);
	wakers = atoi(argv[3]);
	if (getenv("FAN"))
		fan = atoi(getenv("FAN"));
	if (reps < 1 || reps > MAX_REPS || wakers < 1 || wakers > 2) {
		fprintf(stderr, "REPS 1..%d, WAKERS 1 or 2\n", MAX_REPS);
		return 2;
	}
	static double all_ran[MAX_REPS], call[MAX_REPS];
	for (int r = 0; r < reps; r++) {
		pthread_t t[N], w[2];
		arrived = done = pending = go = 0;
		word = release_word = 0;
		last = 0;
		memset(own, 0, sizeof own);
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		for (long i = 0; i < N; i++)
			pthread_create(&t[i], &attr, sleeper, (void *)i);
		while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < N)
			usleep(1000);
		usleep(30000); /* let them all fall asleep */
		for (long k = 0; k < wakers; k++)
			pthread_create(&w[k], NULL, waker, (void *)k);
		usleep(2000);
		__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
		t0 = now();
		__atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
		for (int k = 0; k < wakers; k++)
			pthread_join(w[k], NULL);
		while (__atomic_load_n(&done, __ATOMIC_SEQ_CST) < N)
			usleep(50);
		all_ran[r] = (last - t0) / 1000.0;
		call[r] = call_ns[0] / 1000.0;
		__atomic_store_n(&release_word, 1, __ATOMIC_SEQ_CST);
		futex(&release_word, FUTEX_WAKE_PRIVATE, N, 0);
		for (int i = 0; i < N; i++)
			pthread_join(t[i], NULL);
	}
	qsort(all_ran, reps, sizeof(double), by_value);
	qsort(call, reps, sizeof(double), by_value);
	printf("mode %d, %d waker(s): call median %.0f us; all ran median %.0f us [%.0f .. %.0f] q1 %.0f q3 %.0f\n",
	       mode, wakers, call[reps / 2], all_ran[reps / 2], all_ran[0], all_ran[reps - 1], all_ran[reps / 4],
	       all_ran[3 * reps / 4]);
	return 0;
}
