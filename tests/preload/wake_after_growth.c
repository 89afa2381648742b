/*
 * The first wake of many threads in a fresh process, whose automatic table grew under them as
 * they arrived: their nodes have one home bucket per table they were first queued in, and the
 * threads sleep on those homes' bells (the preload's waits watch the program's word, so they
 * take no ring slot). Each round is a new process: THREADS threads wait on a word through
 * syscall() (FUTEX_WAIT_PRIVATE, as perf's and Rust std's do), and the main thread, once all
 * have started and a moment has passed for them to fall asleep, sets the word and wakes them
 * all at once — or, in every other round, first requeues them all to a second word
 * (FUTEX_CMP_REQUEUE, moves keep their homes) and wakes that one. Every thread must return
 * (none left asleep: a lost wakeup shows as the round's deadline passing), and the wakes and
 * requeues must account for each thread at most once.
 *
 * Run it as it is for the kernel, and with LD_PRELOAD=libufutex_preload.so for ufutex.
 *
 *     wake_after_growth [ROUNDS [THREADS]]   (defaults 12 128)
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "../c/deadline.h"

enum { MAX_THREADS = 1024, DEADLINE_S = 60 };
static unsigned word, word2;
static int started, returned;

static void *sleeper(void *arg)
{
	(void)arg;
	__atomic_fetch_add(&started, 1, __ATOMIC_SEQ_CST);
	/* Until the round's end releases it: a wake, or a requeue to word2 and its wake. */
	while (__atomic_load_n(&word, __ATOMIC_SEQ_CST) == 0)
		syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	__atomic_fetch_add(&returned, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* One round in this (fresh) process: 0 if every thread returned, each counted at most once. */
static int round_of(int threads, int requeue)
{
	pthread_t t[MAX_THREADS];
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, sleeper, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < threads)
		usleep(1000);
	usleep(20000); /* most of them asleep by now; a late one finds the word changed */
	long moved = 0, woken;
	if (requeue) {
		/* All onto word2 while word still reads 0 (the compare), then release and wake. */
		moved = syscall(SYS_futex, &word, FUTEX_CMP_REQUEUE_PRIVATE, 0, (void *)(long)INT_MAX, &word2, 0);
		__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
		woken = syscall(SYS_futex, &word2, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
		/* Threads the requeue did not find (not asleep yet) are on word, or about to see 1. */
		woken += syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	} else {
		__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
		woken = syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	}
	if (moved < 0 || woken < 0 || moved > threads || woken > threads) {
		fprintf(stderr, "round: moved %ld, woken %ld of %d threads\n", moved, woken, threads);
		return 1;
	}
	double until = now_ns() + DEADLINE_S * 1e9;
	while (__atomic_load_n(&returned, __ATOMIC_SEQ_CST) < threads) {
		if (now_ns() > until) {
			fprintf(stderr, "round: %d of %d threads returned after %d s (woken %ld, moved %ld)\n",
				__atomic_load_n(&returned, __ATOMIC_SEQ_CST), threads, DEADLINE_S, woken, moved);
			return 1;
		}
		usleep(1000);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 12, threads = argc > 2 ? atoi(argv[2]) : 128;
	if (rounds < 1 || threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "usage: wake_after_growth [ROUNDS [THREADS <= %d]]\n", MAX_THREADS);
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			exit(round_of(threads, r % 2)); /* (exit: the preload's statistics, if asked, print) */
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "wake_after_growth: round %d failed (status %d)\n", r, st);
			return 1;
		}
	}
	printf("wake_after_growth: %d rounds of %d threads, each a fresh process: every thread returned\n", rounds,
	       threads);
	return 0;
}
