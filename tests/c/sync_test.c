/* The C ABI of the ufutex mutex and condvar: return values, an exact counter under
 * contention, timeouts and a broadcast that wakes every waiter.
 *
 * cc -Iinclude tests/c/sync_test.c -Ltarget/release -lufutex -lpthread -o sync_test
 * sync_test [lock|trylock|unlock]: only a process's first mutex call of that kind.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deadline.h"
#include "ufutex.h"

#define CHECK(expr)                                                                      \
	do {                                                                             \
		if (!(expr)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

#define THREADS 8
#define ITERS 100000
#define WAITERS 6

static ufutex_mutex_t lock = UFUTEX_MUTEX_INIT;
static ufutex_cond_t cond = UFUTEX_COND_INIT;
static unsigned long counter;
static int go;
static int waiting;
static int woken;

static void *count(void *arg)
{
	(void)arg;
	for (int i = 0; i < ITERS; i++) {
		CHECK(ufutex_mutex_lock(&lock) == 0);
		unsigned long v = counter;
		__asm__ volatile("" ::: "memory");
		counter = v + 1;
		CHECK(ufutex_mutex_unlock(&lock) == 0);
	}
	return NULL;
}

static void *wait_for_go(void *arg)
{
	(void)arg;
	CHECK(ufutex_mutex_lock(&lock) == 0);
	waiting++;
	while (!go)
		CHECK(ufutex_cond_wait(&cond, &lock) == 0);
	woken++;
	CHECK(ufutex_mutex_unlock(&lock) == 0);
	return NULL;
}

static void *try_while_held(void *arg)
{
	(void)arg;
	CHECK(ufutex_mutex_trylock(&lock) == EBUSY);
	struct timespec soon = ts_after_now(CLOCK_MONOTONIC, 20 * 1000000ULL);
	CHECK(ufutex_mutex_timedlock(&lock, &soon) == ETIMEDOUT);
	return NULL;
}

/* A process whose first mutex call is `op` (the library then looks glibc's single-thread flag
 * up, and makes the call again): the same answers as any later call. */
static int first_call(const char *op)
{
	if (strcmp(op, "lock") == 0) {
		CHECK(ufutex_mutex_lock(&lock) == 0);
		CHECK(ufutex_mutex_trylock(&lock) == EBUSY);
	} else if (strcmp(op, "trylock") == 0) {
		CHECK(ufutex_mutex_trylock(&lock) == 0);
		CHECK(ufutex_mutex_trylock(&lock) == EBUSY);
	} else if (strcmp(op, "unlock") == 0) {
		CHECK(ufutex_mutex_unlock(&lock) == EPERM);
		CHECK(ufutex_mutex_lock(&lock) == 0);
	} else {
		fprintf(stderr, "usage: sync_test [lock|trylock|unlock]\n");
		return 2;
	}
	CHECK(ufutex_mutex_unlock(&lock) == 0);
	CHECK(ufutex_mutex_unlock(&lock) == EPERM);
	printf("sync_test %s first: ok\n", op);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return first_call(argv[1]);
	pthread_t t[THREADS];
	struct timespec bad = { .tv_sec = 0, .tv_nsec = 1000000000L };
	struct timespec neg = { .tv_sec = -1, .tv_nsec = 0 };

	CHECK(sizeof(ufutex_mutex_t) == 2);

	/* Argument checks: pthread-style errno values, never -1. */
	CHECK(ufutex_mutex_lock(NULL) == EINVAL);
	CHECK(ufutex_mutex_unlock(&lock) == EPERM);
	CHECK(ufutex_mutex_timedlock(&lock, NULL) == EINVAL);
	CHECK(ufutex_mutex_timedlock(&lock, &bad) == EINVAL);
	CHECK(ufutex_mutex_timedlock(&lock, &neg) == EINVAL);
	CHECK(ufutex_cond_wait(&cond, &lock) == EPERM);
	CHECK(ufutex_cond_signal(NULL) == EINVAL);
	CHECK(ufutex_cond_broadcast(NULL) == EINVAL);

	/* While the process has one thread (glibc says so, and the mutex then takes no atomic
	 * read-modify-write): the same answers. */
	CHECK(ufutex_mutex_lock(&lock) == 0);
	CHECK(ufutex_mutex_trylock(&lock) == EBUSY);
	CHECK(ufutex_mutex_unlock(&lock) == 0);
	CHECK(ufutex_mutex_unlock(&lock) == EPERM);

	/* trylock and timedlock against a lock held by this thread (taken while it was alone: a
	 * thread started later sees it held). */
	CHECK(ufutex_mutex_trylock(&lock) == 0);
	CHECK(pthread_create(&t[0], NULL, try_while_held, NULL) == 0);
	CHECK(pthread_join(t[0], NULL) == 0);
	struct timespec soon = ts_after_now(CLOCK_MONOTONIC, 5 * 1000000ULL);
	CHECK(ufutex_cond_timedwait(&cond, &lock, &soon) == ETIMEDOUT);
	CHECK(ufutex_cond_timedwait(&cond, &lock, &bad) == EINVAL);
	CHECK(ufutex_mutex_unlock(&lock) == 0);
	struct timespec later = ts_after_now(CLOCK_MONOTONIC, 1000 * 1000000ULL);
	CHECK(ufutex_mutex_timedlock(&lock, &later) == 0);
	CHECK(ufutex_mutex_unlock(&lock) == 0);

	/* An exact counter. */
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, count, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(counter == (unsigned long)THREADS * ITERS);

	/* Broadcast wakes every waiter (one woken, the rest requeued onto the mutex). */
	for (int i = 0; i < WAITERS; i++)
		CHECK(pthread_create(&t[i], NULL, wait_for_go, NULL) == 0);
	for (;;) {
		CHECK(ufutex_mutex_lock(&lock) == 0);
		int all = waiting == WAITERS;
		if (all) {
			go = 1;
			CHECK(ufutex_cond_broadcast(&cond) == 0);
		}
		CHECK(ufutex_mutex_unlock(&lock) == 0);
		if (all)
			break;
		sched_yield();
	}
	for (int i = 0; i < WAITERS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(woken == WAITERS);

	printf("sync_test: ok\n");
	return 0;
}
