/*
 * Process-shared futex words met by both families of futex calls at once, across processes:
 * a forked child waits on a word of a MAP_SHARED page with one family (the legacy SYS_futex
 * operations or the futex2 calls), and the parent wakes it, or requeues it and then wakes it,
 * with the other. The kernel keys both families' shared words alike, so they meet; under
 * LD_PRELOAD=libufutex_preload.so they must meet too, whether shared words go to the kernel
 * (the default) or to ufutex's shared table (UFUTEX_PRELOAD_SHARED=table). A wait must also be
 * reached by a wake made with a raw system call (no interposer sees it), as the kernel's own
 * wakes and processes that are not preloaded make them.
 *
 * No timing decides a result: the parent repeats its wake (or requeue) until the call reports
 * the child taken, so it never depends on the child having queued first, and a call that can
 * never find the child (the two families on different queues) reports 0 until the parent's
 * 10 s deadline, which fails the scenario. The child's wait has a 20 s timeout of its own, so
 * nothing hangs. Prints one line per scenario; exits 1 if any failed.
 *
 *     shared_mix        (no arguments)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../c/deadline.h"
#include "raw_futex.h"

enum { SYS_WAITV = 449, SYS_WAKE2 = 454, SYS_WAIT2 = 455, SYS_REQUEUE2 = 456 };
enum { F2_U32_SHARED = 0x02 };

struct waitv {
	uint64_t val, uaddr;
	uint32_t flags, reserved;
};

/* The shared page: the word waited on, the requeue target, a word nobody waits on (the
 * wake-op's first) and one nobody wakes (the waitv's second entry). */
static uint32_t *word, *target, *other, *spare;

static long futex(uint32_t *u, int op, uint32_t val, const void *t, uint32_t *u2, uint32_t val3)
{
	return syscall(SYS_futex, u, op, val, t, u2, val3);
}

/* A shared FUTEX_WAKE of one by a raw system call (raw_futex.h), as a process that is not
 * preloaded, or the kernel's own wake of a thread-id word, would wake; through syscall() where
 * there is no raw call. */
static long raw_wake(uint32_t *u)
{
	long r = raw_futex_wake(u, FUTEX_WAKE, 1);
	if (r == -ENOSYS)
		return futex(u, FUTEX_WAKE, 1, NULL, NULL, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* ---- the child's waits: each returns the call's result (0: woken), its timeout 20 s away */

enum wait_kind { W_WAIT, W_WAIT_BITSET, W_F2_WAIT, W_F2_WAIT_MASK, W_F2_WAITV };

static const char *wait_name[] = {"FUTEX_WAIT", "FUTEX_WAIT_BITSET 1", "futex_wait", "futex_wait mask 1",
				  "futex_waitv"};

static long child_wait(enum wait_kind k)
{
	struct timespec rel = {20, 0}, due = ts_after_now(CLOCK_MONOTONIC, 20000000000LL);
	struct waitv v[2] = {{0, (uintptr_t)word, F2_U32_SHARED, 0}, {0, (uintptr_t)spare, F2_U32_SHARED, 0}};
	switch (k) {
	case W_WAIT:
		return futex(word, FUTEX_WAIT, 0, &rel, NULL, 0);
	case W_WAIT_BITSET:
		return futex(word, FUTEX_WAIT_BITSET, 0, &due, NULL, 1);
	case W_F2_WAIT:
		return syscall(SYS_WAIT2, word, 0UL, 0xffffffffUL, F2_U32_SHARED, &due, CLOCK_MONOTONIC);
	case W_F2_WAIT_MASK:
		return syscall(SYS_WAIT2, word, 0UL, 1UL, F2_U32_SHARED, &due, CLOCK_MONOTONIC);
	case W_F2_WAITV:
		return syscall(SYS_WAITV, v, 2, 0, &due, CLOCK_MONOTONIC);
	}
	return -1;
}

/* ---- the parent's calls: each returns how many waiters it took (woken or moved) */

enum wake_kind {
	K_WAKE,
	K_WAKE_BITSET,
	K_F2_WAKE,
	K_F2_WAKE_MASK,
	K_WAKE_OP,
	K_CMP_REQUEUE,
	K_REQUEUE,
	K_F2_REQUEUE,
	K_RAW_WAKE
};

static const char *wake_name[] = {"FUTEX_WAKE", "FUTEX_WAKE_BITSET 1", "futex_wake", "futex_wake mask 1",
				  "FUTEX_WAKE_OP", "FUTEX_CMP_REQUEUE", "FUTEX_REQUEUE", "futex_requeue",
				  "a raw FUTEX_WAKE"};

static long take(enum wake_kind k, uint32_t *u)
{
	struct waitv pair[2] = {{0, (uintptr_t)u, F2_U32_SHARED, 0}, {0, (uintptr_t)target, F2_U32_SHARED, 0}};
	switch (k) {
	case K_WAKE:
		return futex(u, FUTEX_WAKE, 1, NULL, NULL, 0);
	case K_WAKE_BITSET:
		return futex(u, FUTEX_WAKE_BITSET, 1, NULL, NULL, 1);
	case K_F2_WAKE:
		return syscall(SYS_WAKE2, u, 0xffffffffUL, 1, F2_U32_SHARED);
	case K_F2_WAKE_MASK:
		return syscall(SYS_WAKE2, u, 1UL, 1, F2_U32_SHARED);
	case K_WAKE_OP:
		/* Wakes one of `other` (nobody), then one of `u` if `u` was 0 (adding 0 keeps it). */
		return futex(other, FUTEX_WAKE_OP, 1, (void *)1L, u, FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));
	case K_CMP_REQUEUE:
		return futex(u, FUTEX_CMP_REQUEUE, 0, (void *)1L, target, 0);
	case K_REQUEUE:
		return futex(u, FUTEX_REQUEUE, 0, (void *)1L, target, 0);
	case K_F2_REQUEUE:
		return syscall(SYS_REQUEUE2, pair, 0, 0, 1);
	case K_RAW_WAKE:
		return raw_wake(u);
	}
	return -1;
}

/* Repeat `k` on `u` until it takes one waiter, for at most 10 s: 1 if it did. */
static int take_one(enum wake_kind k, uint32_t *u, const char *what)
{
	double give_up = now_ns() + 10e9;
	struct timespec pause = {0, 1000000};
	for (;;) {
		long r = take(k, u);
		if (r == 1)
			return 1;
		if (r != 0) {
			printf("   %s returned %ld (%s)\n", what, r, r == -1 ? strerror(errno) : "more than one");
			return 0;
		}
		if (now_ns() > give_up) {
			printf("   %s found no waiter in 10 s\n", what);
			return 0;
		}
		nanosleep(&pause, NULL);
	}
}

struct scenario {
	enum wait_kind wait;
	enum wake_kind by;
	enum wake_kind then; /* after a requeue: the wake of the target */
};

static int run(struct scenario s, int requeued)
{
	*word = *target = *other = *spare = 0;
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 0;
	}
	if (pid == 0) {
		/* 0: woken (for waitv: index 0, the word). _exit: no atexit output from the child. */
		_exit(child_wait(s.wait) == 0 ? 0 : 1);
	}
	int ok = take_one(s.by, word, wake_name[s.by]);
	if (ok && requeued)
		ok = take_one(s.then, target, wake_name[s.then]);
	if (!ok)
		kill(pid, SIGKILL);
	int status = 0;
	waitpid(pid, &status, 0);
	if (ok && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		printf("   the child's %s did not return 0 (status %#x)\n", wait_name[s.wait], status);
		ok = 0;
	}
	if (requeued)
		printf("%-22s <- %-20s then %-20s %s\n", wait_name[s.wait], wake_name[s.by], wake_name[s.then],
		       ok ? "ok" : "FAILED");
	else
		printf("%-22s <- %-46s %s\n", wait_name[s.wait], wake_name[s.by], ok ? "ok" : "FAILED");
	return ok;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	uint32_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	word = &page[0];
	target = &page[16];
	other = &page[32];
	spare = &page[48];
	struct scenario wakes[] = {
		{W_WAIT, K_WAKE, 0},         {W_F2_WAIT, K_F2_WAKE, 0},          {W_WAIT, K_F2_WAKE, 0},
		{W_F2_WAIT, K_WAKE, 0},      {W_WAIT_BITSET, K_F2_WAKE_MASK, 0}, {W_F2_WAIT_MASK, K_WAKE_BITSET, 0},
		{W_F2_WAITV, K_WAKE, 0},     {W_F2_WAITV, K_WAKE_OP, 0},         {W_F2_WAIT, K_WAKE_OP, 0},
		{W_WAIT, K_RAW_WAKE, 0},     {W_F2_WAIT, K_RAW_WAKE, 0},         {W_WAIT_BITSET, K_RAW_WAKE, 0},
	};
	struct scenario requeues[] = {
		{W_WAIT, K_F2_REQUEUE, K_WAKE},        {W_F2_WAIT, K_CMP_REQUEUE, K_F2_WAKE},
		{W_F2_WAIT, K_REQUEUE, K_WAKE_BITSET}, {W_F2_WAITV, K_CMP_REQUEUE, K_WAKE_OP},
		{W_WAIT_BITSET, K_REQUEUE, K_F2_WAKE_MASK},
	};
	int failed = 0;
	for (size_t i = 0; i < sizeof wakes / sizeof wakes[0]; i++)
		failed += !run(wakes[i], 0);
	for (size_t i = 0; i < sizeof requeues / sizeof requeues[0]; i++)
		failed += !run(requeues[i], 1);
	printf("-- %d failed\n", failed);
	return failed ? 1 : 0;
}
