/*
 * The C ABI test suite: every call, every word size, every errno of the header, timeouts on
 * both clocks, a 1024-entry waitv, requeue counts, the hash-slot calls, and process-shared
 * words across fork (shared anonymous memory, a memfd mapped twice, requeue, mixed waitv). Built against the
 * *installed* header and library:
 *
 *     cc -O1 -g -pthread ufutex_test.c $(pkg-config --cflags --libs ufutex)
 *
 * No assertion depends on timing: threads that must be asleep before a wake are found by
 * waking until the wake reports one (a wake never reads or changes the word).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <ufutex.h>
#include <unistd.h>

#include "deadline.h"

static int failures;

#define CHECK(cond)                                                                      \
	do {                                                                                 \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                              \
		}                                                                                \
	} while (0)

/* A call must fail with -1 and this errno. */
#define FAILS(call, err)                                                                          \
	do {                                                                                          \
		errno = 0;                                                                                \
		long r_ = (call);                                                                         \
		int e_ = errno;                                                                           \
		if (r_ != -1 || e_ != (err)) {                                                            \
			fprintf(stderr, "%s:%d: %s: got %ld errno %d (%s), want -1 errno %d (%s)\n", __FILE__, \
				__LINE__, #call, r_, e_, strerror(e_), (err), strerror(err));                \
			failures++;                                                                       \
		}                                                                                         \
	} while (0)

#define P(size) (UFUTEX_PRIVATE | (size))
static const unsigned sizes[4] = {UFUTEX_SIZE_U8, UFUTEX_SIZE_U16, UFUTEX_SIZE_U32, UFUTEX_SIZE_U64};
static const unsigned long maxval[4] = {0xff, 0xffff, 0xffffffffUL, ~0UL};

/* A page that faults on every access (kept reserved, so nothing else is mapped there). */
static void *inaccessible;
/* An address that is never mapped: below mmap_min_addr, and not NULL. (A hole punched into a
 * mapping can be refilled by any later mmap, e.g. a sanitizer's allocator.) */
static void *const unmapped = (void *)0x8000;
/* The end of a writable page that is followed by an inaccessible one. */
static char *edge;

static void make_bad_pages(void)
{
	inaccessible = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(inaccessible != MAP_FAILED);
	char *two = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(two != MAP_FAILED && mprotect(two + 4096, 4096, PROT_NONE) == 0);
	edge = two + 4096;
}

static int not_before(clockid_t clk, struct timespec deadline)
{
	struct timespec now;
	clock_gettime(clk, &now);
	return now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
}

/* Wake `uaddr` until a waiter is woken (it may not have queued yet); returns what was woken. */
static long wake_one_eventually(void *uaddr, unsigned long mask, unsigned flags)
{
	long r;
	while ((r = ufutex_wake(uaddr, mask, 1, flags)) == 0)
		sched_yield();
	return r;
}

/* ---- the fault handler chains to the program's (run first: before any call installs it) ---- */

static sigjmp_buf jump;
static volatile sig_atomic_t handled;
static void *volatile fault_addr;

static void on_segv(int sig, siginfo_t *info, void *ctx)
{
	(void)sig;
	(void)ctx;
	handled++;
	fault_addr = info->si_addr;
	siglongjmp(jump, 1);
}

/* Run `child` in a fresh process; returns its wait status. */
static int in_child(int (*child)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit no_core = {0, 0};
		setrlimit(RLIMIT_CORE, &no_core);
		_exit(child());
	}
	int status = 0;
	waitpid(pid, &status, 0);
	return status;
}

/* A handler installed before ufutex's: ufutex's faults do not reach it, the program's do. */
static int child_with_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	errno = 0;
	if (ufutex_wait(inaccessible, 0, 1, P(UFUTEX_SIZE_U32), NULL, 0) != -1 || errno != EFAULT || handled)
		return 2;
	if (sigsetjmp(jump, 1) == 0) {
		(void)*(volatile int *)inaccessible;
		return 3;
	}
	return handled == 1 && fault_addr == inaccessible ? 0 : 4;
}

/* No handler before: the program's own fault still kills it with SIGSEGV. */
static int child_default(void)
{
	errno = 0;
	if (ufutex_wait(unmapped, 0, 1, P(UFUTEX_SIZE_U64), NULL, 0) != -1 || errno != EFAULT)
		return 2;
	(void)*(volatile int *)inaccessible;
	return 3;
}

/* A SIGSEGV sent by kill() is delivered as before, not swallowed. */
static int child_sent(void)
{
	errno = 0;
	if (ufutex_wait(unmapped, 0, 1, P(UFUTEX_SIZE_U64), NULL, 0) != -1 || errno != EFAULT)
		return 2;
	kill(getpid(), SIGSEGV);
	return 3;
}

static void test_fault_chaining(void)
{
#if defined(__SANITIZE_ADDRESS__)
	fprintf(stderr, "   skipped (AddressSanitizer reports the deliberate faults)\n");
	return;
#endif
	if (getenv("UFUTEX_TEST_VALGRIND")) { /* memcheck reports the deliberate faults */
		fprintf(stderr, "   skipped (UFUTEX_TEST_VALGRIND)\n");
		return;
	}
	CHECK(in_child(child_with_handler) == 0);
	int st = in_child(child_default);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
	st = in_child(child_sent);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

/* ---- errno tables ---------------------------------------------------------------------- */

static void test_wait_errors(void)
{
	uint64_t w = 0;
	struct timespec past = {0, 0}, bad_ns = {0, 1000000000L}, neg_ns = {0, -1}, neg_s = {-1, 0};
	char *mis = (char *)&w + 1;

	FAILS(ufutex_wait(&w, 0, 1, P(UFUTEX_SIZE_U32) | 0x10, NULL, 0), EINVAL);   /* unknown bit */
	FAILS(ufutex_wait(&w, 0, 1, P(UFUTEX_SIZE_U32) | 0x100, NULL, 0), EINVAL);  /* unknown bit */
	for (int s = 0; s < 3; s++) {
		FAILS(ufutex_wait(&w, maxval[s] + 1, 1, P(sizes[s]), NULL, 0), EINVAL); /* val too wide */
		FAILS(ufutex_wait(&w, 0, maxval[s] + 1, P(sizes[s]), NULL, 0), EINVAL); /* mask too wide */
	}
	FAILS(ufutex_wait(&w, 0, 0, P(UFUTEX_SIZE_U64), NULL, 0), EINVAL);                 /* mask 0 */
	/* As the kernel, the timeout is set up before the mask is looked at. */
	FAILS(ufutex_wait(&w, 0, 0, P(UFUTEX_SIZE_U64), inaccessible, CLOCK_MONOTONIC), EFAULT);
	FAILS(ufutex_wait(&w, 0, 1, P(UFUTEX_SIZE_U64), &past, CLOCK_BOOTTIME), EINVAL);   /* clock */
	FAILS(ufutex_wait(&w, 0, 1, P(UFUTEX_SIZE_U64), &past, CLOCK_PROCESS_CPUTIME_ID), EINVAL);
	FAILS(ufutex_wait(&w, 0, 1, P(UFUTEX_SIZE_U64), &bad_ns, CLOCK_MONOTONIC), EINVAL);
	FAILS(ufutex_wait(&w, 0, 1, P(UFUTEX_SIZE_U64), &neg_ns, CLOCK_REALTIME), EINVAL);
	FAILS(ufutex_wait(&w, 0, 1, P(UFUTEX_SIZE_U64), &neg_s, CLOCK_MONOTONIC), EINVAL);
	FAILS(ufutex_wait(&w, 0, 1, P(UFUTEX_SIZE_U64), inaccessible, CLOCK_MONOTONIC), EFAULT);
	for (int s = 1; s < 4; s++)
		FAILS(ufutex_wait(mis, 0, 1, P(sizes[s]), NULL, 0), EINVAL);            /* misaligned */
	FAILS(ufutex_wait(NULL, 0, 1, P(UFUTEX_SIZE_U32), NULL, 0), EFAULT);             /* NULL */
	FAILS(ufutex_wait(NULL, 0, 1, P(UFUTEX_SIZE_U8), NULL, 0), EFAULT);
	FAILS(ufutex_wait(inaccessible, 0, 1, P(UFUTEX_SIZE_U32), NULL, 0), EFAULT);     /* unmapped */
	FAILS(ufutex_wait(unmapped, 0, 1, P(UFUTEX_SIZE_U16), NULL, 0), EFAULT);
	FAILS(ufutex_wait((void *)0xffff800000000000UL, 0, 1, P(UFUTEX_SIZE_U64), NULL, 0), EFAULT);
	FAILS(ufutex_wait(&w, 1, 1, UFUTEX_SIZE_U32, NULL, 0), EAGAIN);                  /* shared */
	FAILS(ufutex_wait((char *)&w + 4, 0, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, NULL, 0), EINVAL);
	FAILS(ufutex_wait(NULL, 0, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, NULL, 0), EFAULT);
	w = 5;
	FAILS(ufutex_wait(&w, 4, 1, P(UFUTEX_SIZE_U64), NULL, 0), EAGAIN);                /* mismatch */
	FAILS(ufutex_wait(&w, 5, 1, P(UFUTEX_SIZE_U64), &past, CLOCK_MONOTONIC), ETIMEDOUT);
	/* The clock is not looked at without a timeout: a mismatch still says EAGAIN. */
	FAILS(ufutex_wait(&w, 4, 1, P(UFUTEX_SIZE_U64), NULL, 12345), EAGAIN);
}

static void test_wake_errors(void)
{
	uint32_t w = 0;
	FAILS(ufutex_wake(&w, 1, 1, P(UFUTEX_SIZE_U32) | 0x40), EINVAL);
	FAILS(ufutex_wake(&w, 0x100, 1, P(UFUTEX_SIZE_U8)), EINVAL);
	FAILS(ufutex_wake(&w, 0x10000, 1, P(UFUTEX_SIZE_U16)), EINVAL);
	FAILS(ufutex_wake(&w, 0x100000000UL, 1, P(UFUTEX_SIZE_U32)), EINVAL);
	FAILS(ufutex_wake(&w, 0, 1, P(UFUTEX_SIZE_U32)), EINVAL);
	FAILS(ufutex_wake(&w, 1, -1, P(UFUTEX_SIZE_U32)), EINVAL);
	FAILS(ufutex_wake(&w, 1, INT_MIN, P(UFUTEX_SIZE_U32)), EINVAL);
	FAILS(ufutex_wake((char *)&w + 2, 1, 1, P(UFUTEX_SIZE_U32)), EINVAL);
	FAILS(ufutex_wake(NULL, 1, 1, P(UFUTEX_SIZE_U32)), EFAULT);
	CHECK(ufutex_wake(&w, 1, 1, UFUTEX_SIZE_U32) == 0);                                    /* shared */
	uint64_t pair = 0;
	FAILS(ufutex_wake((char *)&pair + 4, 1, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA), EINVAL); /* pair misaligned */
	CHECK(ufutex_wake(&pair, 1, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA) == 0);          /* node 0 */
	CHECK(ufutex_wake(&w, 1, 0, P(UFUTEX_SIZE_U32)) == 0);
	/* A private wake never reads the word: waking unmapped memory is fine, as in the kernel. */
	CHECK(ufutex_wake(unmapped, 1, INT_MAX, P(UFUTEX_SIZE_U64)) == 0);
	CHECK(ufutex_wake(inaccessible, ~0UL, 1, P(UFUTEX_SIZE_U64)) == 0);
}

static void test_waitv_errors(void)
{
	uint32_t a = 1, b = 2;
	struct ufutex_waitv v[2] = {
		{.val = 1, .uaddr = (uintptr_t)&a, .flags = P(UFUTEX_SIZE_U32)},
		{.val = 2, .uaddr = (uintptr_t)&b, .flags = P(UFUTEX_SIZE_U32)},
	};
	struct ufutex_waitv e[2];
	struct timespec past = {0, 0}, bad = {-1, 0};

	FAILS(ufutex_waitv(v, 2, 1, NULL, 0), EINVAL);                           /* call flags */
	FAILS(ufutex_waitv(v, 0, 0, NULL, 0), EINVAL);                           /* 0 entries */
	FAILS(ufutex_waitv(v, UFUTEX_WAITV_MAX + 1, 0, NULL, 0), EINVAL);        /* too many */
	FAILS(ufutex_waitv(NULL, 1, 0, NULL, 0), EINVAL);                        /* NULL array */
	FAILS(ufutex_waitv(v, 2, 0, &past, CLOCK_TAI), EINVAL);                  /* clock */
	FAILS(ufutex_waitv(v, 2, 0, &bad, CLOCK_REALTIME), EINVAL);              /* timespec */
	FAILS(ufutex_waitv(v, 2, 0, unmapped, CLOCK_REALTIME), EFAULT);          /* timespec */
	FAILS(ufutex_waitv(inaccessible, 2, 0, NULL, 0), EFAULT);                /* array */
	/* Entry by entry, as the kernel: entry 0 is checked before entry 1 is read. */
	struct ufutex_waitv *last = (struct ufutex_waitv *)(edge - sizeof(struct ufutex_waitv));
	*last = v[0];
	FAILS(ufutex_waitv(last, 2, 0, NULL, 0), EFAULT);
	FAILS(ufutex_requeue(last, 0, 1, 1), EFAULT);
	last->__reserved = 1;
	FAILS(ufutex_waitv(last, 2, 0, NULL, 0), EINVAL);
	FAILS(ufutex_requeue(last, 0, 1, 1), EINVAL);
	memcpy(e, v, sizeof(v)); e[1].__reserved = 1;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EINVAL);
	memcpy(e, v, sizeof(v)); e[1].flags |= 0x20;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EINVAL);
	memcpy(e, v, sizeof(v)); e[1].val = 0x100000000ULL;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EINVAL);
	memcpy(e, v, sizeof(v)); e[1].uaddr += 1;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EINVAL);
	memcpy(e, v, sizeof(v)); e[1].uaddr = 0;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EFAULT);
	memcpy(e, v, sizeof(v)); e[1].uaddr = (uintptr_t)inaccessible;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EFAULT);
	memcpy(e, v, sizeof(v)); e[1].flags = UFUTEX_SIZE_U32; e[1].val = 3; /* shared, mismatching */
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EAGAIN);
	memcpy(e, v, sizeof(v)); e[1].flags = UFUTEX_SIZE_U32; e[1].uaddr = (uintptr_t)inaccessible;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EFAULT);
	/* Values in index order: a mismatch at 0 is found before the fault at 1. */
	memcpy(e, v, sizeof(v)); e[0].val = 9; e[1].uaddr = (uintptr_t)inaccessible;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EAGAIN);
	memcpy(e, v, sizeof(v)); e[1].val = 3;
	FAILS(ufutex_waitv(e, 2, 0, NULL, 0), EAGAIN);
	FAILS(ufutex_waitv(v, 2, 0, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	FAILS(ufutex_waitv(v, 2, 0, &past, CLOCK_REALTIME), ETIMEDOUT);
}

static void test_requeue_errors(void)
{
	uint16_t a = 7, b = 0;
	struct ufutex_waitv v[2] = {
		{.val = 7, .uaddr = (uintptr_t)&a, .flags = P(UFUTEX_SIZE_U16)},
		{.val = 0, .uaddr = (uintptr_t)&b, .flags = P(UFUTEX_SIZE_U16)},
	};
	struct ufutex_waitv e[2];

	FAILS(ufutex_requeue(v, 1, 1, 1), EINVAL);
	FAILS(ufutex_requeue(NULL, 0, 1, 1), EINVAL);
	FAILS(ufutex_requeue(inaccessible, 0, 1, 1), EFAULT);
	memcpy(e, v, sizeof(v)); e[0].__reserved = 3;
	FAILS(ufutex_requeue(e, 0, 1, 1), EINVAL);
	memcpy(e, v, sizeof(v)); e[0].val = 0x10000;
	FAILS(ufutex_requeue(e, 0, 1, 1), EINVAL);
	memcpy(e, v, sizeof(v)); e[1].flags = P(UFUTEX_SIZE_U32);
	FAILS(ufutex_requeue(e, 0, 1, 1), EINVAL);                                  /* flags differ */
	FAILS(ufutex_requeue(v, 0, -1, 1), EINVAL);
	FAILS(ufutex_requeue(v, 0, 1, -1), EINVAL);
	memcpy(e, v, sizeof(v)); e[1].uaddr += 1;
	FAILS(ufutex_requeue(e, 0, 1, 1), EINVAL);
	memcpy(e, v, sizeof(v)); e[0].uaddr = 0;
	FAILS(ufutex_requeue(e, 0, 1, 1), EFAULT);
	memcpy(e, v, sizeof(v)); e[0].flags = e[1].flags = UFUTEX_SIZE_U16; /* shared, nobody waits */
	CHECK(ufutex_requeue(e, 0, 1, 1) == 0);
	e[0].val = 6;
	FAILS(ufutex_requeue(e, 0, 1, 1), EAGAIN);
	memcpy(e, v, sizeof(v)); e[0].flags = UFUTEX_SIZE_U16;              /* shared and private */
	FAILS(ufutex_requeue(e, 0, 1, 1), EINVAL);
	memcpy(e, v, sizeof(v)); e[0].uaddr = (uintptr_t)unmapped;
	FAILS(ufutex_requeue(e, 0, 1, 1), EFAULT);
	memcpy(e, v, sizeof(v)); e[0].val = 6;
	FAILS(ufutex_requeue(e, 0, 1, 1), EAGAIN);
	/* The target is never read. */
	memcpy(e, v, sizeof(v)); e[1].uaddr = (uintptr_t)inaccessible;
	CHECK(ufutex_requeue(e, 0, 1, 1) == 0);
	CHECK(ufutex_requeue(v, 0, 0, 0) == 0);
}

static void test_slots_errors(void)
{
	FAILS(ufutex_hash_set_slots(64, 1), EINVAL);
	FAILS(ufutex_hash_set_slots(1, 0), EINVAL);
	FAILS(ufutex_hash_set_slots(3, 0), EINVAL);
	FAILS(ufutex_hash_set_slots(96, 0), EINVAL);
	FAILS(ufutex_hash_set_slots(1UL << 40, 0), ENOMEM);
}

/* ---- every size, for real ---------------------------------------------------------------- */

struct waiter {
	void *uaddr;
	unsigned long val, mask;
	unsigned flags;
	long ret;
	int err;
};

static void *wait_thread(void *p)
{
	struct waiter *w = p;
	errno = 0;
	w->ret = ufutex_wait(w->uaddr, w->val, w->mask, w->flags, NULL, 0);
	w->err = errno;
	return NULL;
}

static void test_every_size(void)
{
	/* Words packed together: a wait compares only its own bytes. */
	union {
		uint64_t all;
		uint8_t b[8];
	} mem = {.all = 0};
	for (int s = 0; s < 4; s++) {
		unsigned long top = maxval[s];
		unsigned flags = P(sizes[s]);
		void *word = &mem;
		mem.all = ~0ULL;
		/* The value is compared at the word's width: the same value at 8 bytes mismatches. */
		struct timespec past = {0, 0};
		FAILS(ufutex_wait(word, top, 1, flags, &past, CLOCK_MONOTONIC), ETIMEDOUT);
		FAILS(ufutex_wait(word, top - 1, 1, flags, &past, CLOCK_MONOTONIC), EAGAIN);
		if (s < 3)
			FAILS(ufutex_wait(word, top + 1, 1, flags, &past, CLOCK_MONOTONIC), EINVAL);

		/* A thread sleeps on the word; masks that share no bit do not wake it. */
		struct waiter w = {.uaddr = word, .val = top, .mask = 0x3, .flags = flags};
		pthread_t t;
		pthread_create(&t, NULL, wait_thread, &w);
		CHECK(ufutex_wake(word, 0x4, INT_MAX, flags) == 0);
		CHECK(wake_one_eventually(word, 0x2, flags) == 1);
		pthread_join(t, NULL);
		CHECK(w.ret == 0);
		CHECK(ufutex_wake(word, 0x3, INT_MAX, flags) == 0);
	}
	/* A byte word beside other bytes: only its own byte matters. */
	mem.all = 0;
	mem.b[3] = 9;
	FAILS(ufutex_wait(&mem.b[3], 0, 1, P(UFUTEX_SIZE_U8), NULL, 0), EAGAIN);
	struct timespec past = {0, 0};
	FAILS(ufutex_wait(&mem.b[2], 0, 1, P(UFUTEX_SIZE_U8), &past, CLOCK_REALTIME), ETIMEDOUT);
}

/* ---- timeouts on both clocks -------------------------------------------------------------- */

static void test_timeouts(void)
{
	static const clockid_t clocks[2] = {CLOCK_MONOTONIC, CLOCK_REALTIME};
	for (int c = 0; c < 2; c++) {
		uint32_t w = 0;
		struct timespec d = ts_after_now(clocks[c], 20 * 1000 * 1000);
		FAILS(ufutex_wait(&w, 0, ~0U, P(UFUTEX_SIZE_U32), &d, clocks[c]), ETIMEDOUT);
		CHECK(not_before(clocks[c], d)); /* never early */
		uint8_t x = 1;
		uint64_t y = 2;
		struct ufutex_waitv v[2] = {
			{.val = 1, .uaddr = (uintptr_t)&x, .flags = P(UFUTEX_SIZE_U8)},
			{.val = 2, .uaddr = (uintptr_t)&y, .flags = P(UFUTEX_SIZE_U64)},
		};
		d = ts_after_now(clocks[c], 10 * 1000 * 1000);
		FAILS(ufutex_waitv(v, 2, 0, &d, clocks[c]), ETIMEDOUT);
		CHECK(not_before(clocks[c], d));
	}
}

/* ---- signals: EINTR without SA_RESTART ---------------------------------------------------- */

static void on_usr1(int sig)
{
	(void)sig;
}

static void test_eintr(void)
{
	/* The portable parker (a library built with the fallback-parker feature, as CI does for
	 * valgrind, which lacks the futex_wait syscall) sleeps in a condition variable that
	 * resumes after a signal: it cannot report EINTR. */
	if (getenv("UFUTEX_TEST_VALGRIND")) {
		fprintf(stderr, "   skipped (UFUTEX_TEST_VALGRIND)\n");
		return;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1; /* no SA_RESTART */
	sigaction(SIGUSR1, &sa, NULL);
	uint32_t word = 0;
	struct waiter w = {.uaddr = &word, .val = 0, .mask = ~0U, .flags = P(UFUTEX_SIZE_U32), .ret = 1};
	pthread_t t;
	pthread_create(&t, NULL, wait_thread, &w);
	/* Signal until the wait returns (a signal that lands before it queues is just lost). */
	for (;;) {
		pthread_kill(t, SIGUSR1);
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
		if (pthread_tryjoin_np(t, NULL) == 0)
			break;
	}
	CHECK(w.ret == -1 && w.err == EINTR);
}

/* With SA_RESTART the wait goes on through signals and ends only in the wake. */
static void test_sa_restart(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
	uint16_t word = 0;
	struct waiter w = {.uaddr = &word, .val = 0, .mask = 1, .flags = P(UFUTEX_SIZE_U16), .ret = 1};
	pthread_t t;
	pthread_create(&t, NULL, wait_thread, &w);
	for (int i = 0; i < 5; i++) {
		pthread_kill(t, SIGUSR2);
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	int joined = 0;
	while (!joined && ufutex_wake(&word, 1, 1, P(UFUTEX_SIZE_U16)) == 0)
		joined = pthread_tryjoin_np(t, NULL) == 0; /* a wrong EINTR must not hang the test */
	if (!joined)
		pthread_join(t, NULL);
	CHECK(w.ret == 0);
}

/* ---- waitv with 1024 entries -------------------------------------------------------------- */

struct vwaiter {
	struct ufutex_waitv *v;
	unsigned n;
	long ret;
	int err;
};

static void *waitv_thread(void *p)
{
	struct vwaiter *w = p;
	errno = 0;
	w->ret = ufutex_waitv(w->v, w->n, 0, NULL, 0);
	w->err = errno;
	return NULL;
}

static void test_waitv_1024(void)
{
	enum { N = UFUTEX_WAITV_MAX };
	uint64_t *words = calloc(N, sizeof(uint64_t));
	struct ufutex_waitv *v = calloc(N, sizeof(*v));
	for (unsigned i = 0; i < N; i++) {
		unsigned s = i % 4;
		words[i] = i & maxval[s];
		v[i] = (struct ufutex_waitv){.val = i & maxval[s], .uaddr = (uintptr_t)&words[i], .flags = P(sizes[s])};
	}
	static const unsigned ks[] = {0, 1, 2, 3, 511, 1021, 1022, N - 1};
	for (unsigned j = 0; j < sizeof(ks) / sizeof(ks[0]); j++) {
		unsigned k = ks[j];
		struct vwaiter w = {.v = v, .n = N};
		pthread_t t;
		pthread_create(&t, NULL, waitv_thread, &w);
		CHECK(wake_one_eventually(&words[k], ~0UL >> (64 - 8 * (1u << (k % 4))), P(sizes[k % 4])) == 1);
		pthread_join(t, NULL);
		CHECK(w.ret == (long)k);
		if (w.ret != (long)k)
			fprintf(stderr, "waitv woken on %u returned %ld (errno %d)\n", k, w.ret, w.err);
	}
	/* The last entry mismatching, or unmapped. */
	v[N - 1].val ^= 1;
	FAILS(ufutex_waitv(v, N, 0, NULL, 0), EAGAIN);
	v[N - 1].val ^= 1;
	v[N - 1].uaddr = (uintptr_t)inaccessible;
	FAILS(ufutex_waitv(v, N, 0, NULL, 0), EFAULT);
	free(v);
	free(words);
}

/* ---- requeue counts ----------------------------------------------------------------------- */

static void test_requeue_counts(void)
{
	enum { T = 5 };
	for (int s = 0; s < 4; s++) {
		uint64_t a = 0, b = 0, c = 0;
		unsigned flags = P(sizes[s]);
		struct waiter w[T];
		pthread_t t[T];
		for (int i = 0; i < T; i++) {
			w[i] = (struct waiter){.uaddr = &a, .val = 0, .mask = 1, .flags = flags, .ret = 1};
			pthread_create(&t[i], NULL, wait_thread, &w[i]);
		}
		struct ufutex_waitv ab[2] = {{.val = 0, .uaddr = (uintptr_t)&a, .flags = flags},
					     {.val = 0, .uaddr = (uintptr_t)&b, .flags = flags}};
		struct ufutex_waitv bc[2] = {{.val = 0, .uaddr = (uintptr_t)&b, .flags = flags},
					     {.val = 0, .uaddr = (uintptr_t)&c, .flags = flags}};
		/* Move everyone to b as they arrive: each call returns how many it moved. */
		long moved = 0;
		while (moved < T) {
			long r = ufutex_requeue(ab, 0, 0, INT_MAX);
			CHECK(r >= 0);
			moved += r;
			if (r == 0)
				sched_yield();
		}
		CHECK(moved == T);
		CHECK(ufutex_wake(&a, 1, INT_MAX, flags) == 0);
		/* Wake 2 of b, move 2 more to c: 4; one stays on b. */
		CHECK(ufutex_requeue(bc, 0, 2, 2) == 4);
		CHECK(ufutex_wake(&b, 1, INT_MAX, flags) == 1);
		CHECK(ufutex_wake(&c, 1, 1, flags) == 1);
		CHECK(ufutex_wake(&c, 1, INT_MAX, flags) == 1);
		CHECK(ufutex_wake(&c, 1, INT_MAX, flags) == 0);
		for (int i = 0; i < T; i++) {
			pthread_join(t[i], NULL);
			CHECK(w[i].ret == 0);
		}
	}
}

/* FUTEX_OP(op, oparg, cmp, cmparg), as linux/futex.h encodes it. */
#define OP(op, oparg, cmp, cmparg) \
	((((op) & 0xfu) << 28) | (((cmp) & 0xfu) << 24) | (((oparg) & 0xfffu) << 12) | ((cmparg) & 0xfffu))

/* ufutex_wake_op: the operation is applied to the second word; the first word's waiters are
 * woken; the second word's only when the old value compared true; errors in the kernel's order. */
static void test_wake_op(void)
{
	const unsigned f = P(UFUTEX_SIZE_U32);
	uint32_t a = 0, b = 0;
	struct waiter wa = {.uaddr = &a, .val = 0, .mask = ~0U, .flags = f, .ret = 1};
	struct waiter wb = {.uaddr = &b, .val = 0, .mask = ~0U, .flags = f, .ret = 1};
	pthread_t ta, tb;
	pthread_create(&ta, NULL, wait_thread, &wa);
	pthread_create(&tb, NULL, wait_thread, &wb);
	struct ufutex_waitv probe_a[2] = {{.uaddr = (uintptr_t)&a, .flags = f}, {.uaddr = (uintptr_t)&a, .flags = f}};
	struct ufutex_waitv probe_b[2] = {{.uaddr = (uintptr_t)&b, .flags = f}, {.uaddr = (uintptr_t)&b, .flags = f}};
	while (ufutex_requeue(probe_a, 0, 0, INT_MAX) == 0 || ufutex_requeue(probe_b, 0, 0, INT_MAX) == 0)
		sched_yield(); /* both asleep (a requeue onto itself finds them) */
	/* ADD 0 to b, compare old == 1: false, so only a's waiter. */
	CHECK(ufutex_wake_op(&a, &b, 1, 1, OP(1, 0, 0, 1), f) == 1);
	pthread_join(ta, NULL);
	CHECK(wa.ret == 0 && b == 0);
	/* SET b = 7, compare old == 0: true; a has nobody left, b's waiter is woken. */
	CHECK(ufutex_wake_op(&a, &b, 1, 1, OP(0, 7, 0, 0), f) == 1);
	pthread_join(tb, NULL);
	CHECK(wb.ret == 0 && b == 7);
	/* OPARG_SHIFT: OR (1 << 4); compare old > 6 true; nobody waits. */
	CHECK(ufutex_wake_op(&a, &b, 1, 1, OP(8 | 2, 4, 4, 6), f) == 0 && b == (7 | 16));

	FAILS(ufutex_wake_op(&a, &b, 1, 1, 0, P(UFUTEX_SIZE_U64)), EINVAL);
	FAILS(ufutex_wake_op(&a, &b, 1, 1, 0, f | UFUTEX_NUMA), EINVAL);
	FAILS(ufutex_wake_op(&a, &b, -1, 1, 0, f), EINVAL);
	FAILS(ufutex_wake_op((char *)&a + 1, &b, 1, 1, 0, f), EINVAL);
	FAILS(ufutex_wake_op(NULL, &b, 1, 1, 0, f), EFAULT);
	FAILS(ufutex_wake_op(&a, unmapped, 1, 1, 0, f), EFAULT);
	FAILS(ufutex_wake_op(&a, edge, 1, 1, 0, f), EFAULT); /* an inaccessible page */
	/* Process-shared words in private memory: as the kernel's, this process's own. */
	CHECK(ufutex_wake_op(&a, &b, 1, 1, OP(0, 0, 0, 0), UFUTEX_SIZE_U32) == 0 && b == 0);
	b = 3;
	FAILS(ufutex_wake_op(&a, &b, 1, 1, OP(5, 1, 0, 0), f), ENOSYS);
	CHECK(b == 3); /* an unknown op writes nothing */
}

/* ---- hash slots (last: the large table is final) ----------------------------------------- */

static void test_slots(void)
{
	CHECK(ufutex_hash_get_slots() >= 2);
	CHECK(ufutex_hash_set_slots(64, 0) == 0);
	CHECK(ufutex_hash_get_slots() == 64);
	/* Waiters survive a resize. */
	uint32_t word = 0;
	struct waiter w = {.uaddr = &word, .val = 0, .mask = ~0U, .flags = P(UFUTEX_SIZE_U32)};
	pthread_t t;
	pthread_create(&t, NULL, wait_thread, &w);
	struct ufutex_waitv probe[2] = {{.val = 0, .uaddr = (uintptr_t)&word, .flags = P(UFUTEX_SIZE_U32)},
					{.val = 0, .uaddr = (uintptr_t)&word, .flags = P(UFUTEX_SIZE_U32)}};
	while (ufutex_requeue(probe, 0, 0, INT_MAX) == 0) /* requeue onto itself: finds it queued */
		sched_yield();
	CHECK(ufutex_hash_set_slots(2, 0) == 0);
	CHECK(ufutex_hash_get_slots() == 2);
	CHECK(ufutex_wake(&word, 1, 1, P(UFUTEX_SIZE_U32)) == 1);
	pthread_join(t, NULL);
	CHECK(w.ret == 0);
	CHECK(ufutex_hash_set_slots(0, 0) == 0);
	CHECK(ufutex_hash_get_slots() == 0);
	FAILS(ufutex_hash_set_slots(64, 0), EBUSY);
	FAILS(ufutex_hash_set_slots(0, 0), EBUSY);
	FAILS(ufutex_hash_set_slots(3, 0), EINVAL); /* checked before the large table's finality */
	CHECK(ufutex_hash_get_slots() == 0);
	word = 1;
	FAILS(ufutex_wait(&word, 0, 1, P(UFUTEX_SIZE_U32), NULL, 0), EAGAIN);
}

/* Whether `name` is one of the comma-separated names in UFUTEX_TEST_SKIP: tests that a
 * runner cannot serve (under qemu-user, .ci/test.d/48-aarch64.sh). */
static int skipped(const char *name)
{
	const char *list = getenv("UFUTEX_TEST_SKIP");
	size_t n = strlen(name);
	for (const char *at = list; at && *at;) {
		const char *end = strchr(at, ',');
		size_t len = end ? (size_t)(end - at) : strlen(at);
		if (len == n && strncmp(at, name, n) == 0)
			return 1;
		at = end ? end + 1 : NULL;
	}
	return 0;
}

/* Each test says its name first, so a hang or a crash points at it. */
#define RUN(test)                                                                \
	do {                                                                     \
		if (skipped(#test)) {                                            \
			fprintf(stderr, "-- %s: skipped (UFUTEX_TEST_SKIP)\n", #test); \
			break;                                                   \
		}                                                                \
		fprintf(stderr, "-- %s\n", #test);                               \
		test();                                                          \
	} while (0)

/* UFUTEX_NUMA: the word is followed by a node word of its size; -1 is resolved to the caller's
 * node and written back by every call (a failing wait and a wake of 0 included); an impossible
 * node is EINVAL; the node picks the table, so a waiter is found through the same pair. */
struct numa_pair32 {
	uint32_t word, node;
} __attribute__((aligned(8)));

static void *numa_waiter(void *arg)
{
	struct numa_pair32 *p = arg;
	long r = ufutex_wait(p, 0, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, NULL, 0);
	return (void *)(intptr_t)(r == 0 ? 0 : errno);
}

static void test_numa(void)
{
	struct timespec past = {0, 0};
	struct numa_pair32 p = {5, UINT32_MAX};
	FAILS(ufutex_wait(&p, 4, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, NULL, 0), EAGAIN);
	CHECK(p.node != UINT32_MAX);                                  /* written back on EAGAIN */
	p.node = UINT32_MAX;
	CHECK(ufutex_wake(&p, 1, 0, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA) == 0);
	CHECK(p.node != UINT32_MAX);                                  /* and by a wake of 0 */
	p.node = UINT32_MAX;
	FAILS(ufutex_wait(&p, 5, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	CHECK(p.node != UINT32_MAX);
	p.node = 1u << 20;                                            /* no such node */
	FAILS(ufutex_wait(&p, 5, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, NULL, 0), EINVAL);
	FAILS(ufutex_wake(&p, 1, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA), EINVAL);

	struct {
		uint8_t word, node;
	} __attribute__((aligned(2))) q = {1, 0xff};
	FAILS(ufutex_wait(&q, 0, 1, P(UFUTEX_SIZE_U8) | UFUTEX_NUMA, NULL, 0), EAGAIN);
	CHECK(q.node != 0xff);

	/* waitv resolves every entry's node before it compares any value. */
	uint32_t plain = 1;
	p.node = UINT32_MAX;
	struct ufutex_waitv v[2] = {
		{.val = 5, .uaddr = (uintptr_t)&p, .flags = P(UFUTEX_SIZE_U32) | UFUTEX_NUMA},
		{.val = 0, .uaddr = (uintptr_t)&plain, .flags = P(UFUTEX_SIZE_U32)},
	};
	FAILS(ufutex_waitv(v, 2, 0, NULL, 0), EAGAIN);
	CHECK(p.node != UINT32_MAX);

	/* UFUTEX_MPOL alone: the policy's node where one covers the word, else a private word. */
	FAILS(ufutex_wait(&plain, 0, 1, P(UFUTEX_SIZE_U32) | UFUTEX_MPOL, NULL, 0), EAGAIN);

	/* A sleeper on a NUMA pair is woken through the same pair. */
	struct numa_pair32 s = {0, UINT32_MAX};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, numa_waiter, &s) == 0);
	long woken = 0;
	for (int i = 0; i < 20000 && woken == 0; i++) {
		woken = ufutex_wake(&s, 1, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA);
		if (woken == 0)
			usleep(100);
	}
	void *ret;
	CHECK(pthread_join(t, &ret) == 0);
	CHECK(woken == 1 && ret == NULL);

	/* A node of -1 on a read-only page cannot be written back: EFAULT, as from the kernel. A
	 * node already set is only read. */
	struct numa_pair32 *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	ro[0] = (struct numa_pair32){0, UINT32_MAX};
	ro[1] = (struct numa_pair32){0, 0};
	CHECK(mprotect(ro, 4096, PROT_READ) == 0);
	FAILS(ufutex_wake(&ro[0], 1, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA), EFAULT);
	FAILS(ufutex_wait(&ro[0], 0, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, &past, CLOCK_MONOTONIC), EFAULT);
	CHECK(ro[0].node == UINT32_MAX);
	CHECK(ufutex_wake(&ro[1], 1, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA) == 0);
	FAILS(ufutex_wait(&ro[1], 1, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, NULL, 0), EAGAIN);
	CHECK(munmap(ro, 4096) == 0);
}

/* ---- no memory: ENOMEM, never an abort ------------------------------------------------------ */

/* The process's address-space size now, from /proc/self/status; 0 if unknown. */
static unsigned long vm_size(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long kb = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmSize: %lu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* Under an address-space limit 16 MiB above what the process uses, a table of 2^20 buckets
 * (64 MiB, more than glibc serves from address space it already holds) cannot be had: a NUMA
 * node's first table (the current size) is ENOMEM for the call that needs it, and set_slots
 * to another size that large fails with ENOMEM and changes nothing. */
static int child_no_memory(void)
{
	struct timespec past = {0, 0};
	CHECK(ufutex_hash_set_slots(1UL << 20, 0) == 0); /* 64 MiB, while memory can be had */
	unsigned long vm = vm_size();
	CHECK(vm != 0);
	struct rlimit tight = {vm + (16UL << 20), vm + (16UL << 20)};
	CHECK(setrlimit(RLIMIT_AS, &tight) == 0);
	FAILS(ufutex_hash_set_slots(1UL << 19, 0), ENOMEM); /* 32 MiB: from brk, also limited */
	CHECK(ufutex_hash_get_slots() == 1L << 20);
	uint32_t word = 0;
	FAILS(ufutex_wait(&word, 0, ~0U, P(UFUTEX_SIZE_U32), &past, CLOCK_MONOTONIC), ETIMEDOUT);
	struct numa_pair32 p = {0, 0};
	FAILS(ufutex_wait(&p, 0, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA, &past, CLOCK_MONOTONIC), ENOMEM);
	CHECK(ufutex_wake(&p, 1, 1, P(UFUTEX_SIZE_U32) | UFUTEX_NUMA) == 0); /* a wake needs no table */
	CHECK(ufutex_hash_set_slots(64, 0) == 0);                             /* smaller: fits */
	return failures;
}

/* Under a limit 96 KiB above what the process uses, a waitv of 1024 entries (128 KiB of waiter
 * nodes) is ENOMEM, not an abort, and nothing is left queued: with the limit lifted the same
 * waitv times out. */
static int child_no_memory_waitv(void)
{
	enum { N = UFUTEX_WAITV_MAX };
	static uint32_t words[N];
	static struct ufutex_waitv v[N];
	struct timespec past = {0, 0};
	for (unsigned i = 0; i < N; i++)
		v[i] = (struct ufutex_waitv){.val = 0, .uaddr = (uintptr_t)&words[i], .flags = P(UFUTEX_SIZE_U32)};
	FAILS(ufutex_waitv(v, 1, 0, &past, CLOCK_MONOTONIC), ETIMEDOUT); /* this thread's data exists */
	unsigned long vm = vm_size();
	CHECK(vm != 0);
	struct rlimit tight = {vm + (96UL << 10), RLIM_INFINITY}, loose = {RLIM_INFINITY, RLIM_INFINITY};
	CHECK(setrlimit(RLIMIT_AS, &tight) == 0);
	FAILS(ufutex_waitv(v, N, 0, &past, CLOCK_MONOTONIC), ENOMEM);
	CHECK(setrlimit(RLIMIT_AS, &loose) == 0);
	FAILS(ufutex_waitv(v, N, 0, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	CHECK(ufutex_wake(&words[0], ~0U, 1, P(UFUTEX_SIZE_U32)) == 0); /* nothing left queued */
	return failures;
}

static void test_no_memory(void)
{
#ifdef __SANITIZE_ADDRESS__
	return; /* ASan reserves terabytes of shadow: an address-space limit breaks it, not us */
#endif
	if (getenv("UFUTEX_TEST_VALGRIND"))
		return; /* valgrind manages the client's address space itself */
	int status = in_child(child_no_memory);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	status = in_child(child_no_memory_waitv);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- process-shared words (no UFUTEX_PRIVATE), across fork ------------------------------------
 *
 * main points UFUTEX_SHARED_DIR at a fresh 0700 directory before any shared call, so the tests
 * make their own shared table and never touch the user's. Every wait has a deadline (seconds
 * ahead, from now); the parent waits for a child to be queued by requeueing the child's word
 * onto itself (which counts the waiters and wakes none), or by waking until one is woken, both
 * in bounded loops; children report with their exit status, which the parent checks. */

static char shared_dir[64];
static pid_t shared_dir_owner;

static void remove_shared_dir(void)
{
	if (getpid() != shared_dir_owner || !shared_dir[0])
		return;
	char path[96];
	snprintf(path, sizeof path, "%s/table", shared_dir);
	unlink(path);
	rmdir(shared_dir);
	shared_dir[0] = 0;
}

static void make_shared_dir(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(shared_dir, sizeof shared_dir, "%s/ufutex-test-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	if (!mkdtemp(shared_dir) || chmod(shared_dir, 0700) != 0) {
		perror("ufutex_test: mkdtemp");
		exit(2);
	}
	shared_dir_owner = getpid();
	atexit(remove_shared_dir);
	setenv("UFUTEX_SHARED_DIR", shared_dir, 1);
	unsetenv("UFUTEX_SHARED"); /* these tests are for the default mode, ufutex's own table */
}

/* A deadline `secs` seconds from now on CLOCK_MONOTONIC: long enough for any machine, short
 * enough that a lost wakeup fails the test instead of hanging it. */
#define SHARED_DEADLINE_S 20
static struct timespec soon(void)
{
	return ts_after_now(CLOCK_MONOTONIC, SHARED_DEADLINE_S * 1000000000L);
}

/* A child's report: 0 when `r` is what it wanted, else 100 + errno, or 98 for another value
 * (99 is valgrind's --error-exitcode in CI). */
static int report(long r, int err, long want)
{
	if (r == want)
		return 0;
	if (r == -1)
		return err > 0 && err < 100 ? 100 + err : 97;
	return 98;
}

static pid_t spawn(int (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		_exit(fn(arg));
	CHECK(pid > 0);
	return pid;
}

/* The child's exit status; killed and -1 if it is still running after the wait deadline plus
 * a margin (a hang), 1000 + signal if a signal ended it. */
static int reap(pid_t pid)
{
	int st = 0;
	for (int i = 0; i < (SHARED_DEADLINE_S + 30) * 1000; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
		if (r < 0)
			return -2;
		usleep(1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

#define CHILD_OK(pid)                                                                             \
	do {                                                                                      \
		int st_ = reap(pid);                                                              \
		if (st_ != 0) {                                                                   \
			fprintf(stderr, "%s:%d: child reported %d (100+errno: a failed call; 99: valgrind found errors in it)\n", __FILE__, \
				__LINE__, st_);                                                   \
			failures++;                                                               \
		}                                                                                 \
	} while (0)

/* How many threads wait on the word (shared or private, as `flags` say): a requeue of the word
 * onto itself counts them and wakes or moves none. `val` is what the word holds. */
static long shared_waiters(void *uaddr, uint64_t val, unsigned flags)
{
	struct ufutex_waitv self[2] = {{.val = val, .uaddr = (uintptr_t)uaddr, .flags = flags},
				       {.val = 0, .uaddr = (uintptr_t)uaddr, .flags = flags}};
	return ufutex_requeue(self, 0, 0, INT_MAX);
}

/* Until `n` threads wait on the word (bounded: ~SHARED_DEADLINE_S / 2 seconds): whether they do. */
static int until_waiters(void *uaddr, uint64_t val, unsigned flags, long n)
{
	for (int i = 0; i < SHARED_DEADLINE_S * 500; i++) {
		long r = shared_waiters(uaddr, val, flags);
		if (r >= n)
			return r == n;
		if (r < 0) {
			fprintf(stderr, "until_waiters: requeue failed, errno %d\n", errno);
			return 0;
		}
		usleep(1000);
	}
	fprintf(stderr, "until_waiters: nobody came\n");
	return 0;
}

/* Wake until one waiter is woken (bounded): what the last wake returned. */
static long shared_wake_one(void *uaddr, unsigned long mask, unsigned flags)
{
	long r = 0;
	for (int i = 0; i < SHARED_DEADLINE_S * 500 && r == 0; i++) {
		r = ufutex_wake(uaddr, mask, 1, flags);
		if (r == 0)
			usleep(1000);
	}
	return r;
}

/* ---- fork: a child has none of its parent's private waiters ------------------------------ */

/* In the child: nobody waits on the word its parent's 40 threads wait on (private memory: the
 * child's own copy, as with the kernel's private futex); a thread of the child's waits there
 * and one wake takes exactly it. */
static int child_own_waiter(void *p)
{
	uint32_t *word = p;
	const unsigned f = P(UFUTEX_SIZE_U32);
	if (shared_waiters(word, 0, f) != 0)
		return 90;
	struct waiter w = {.uaddr = word, .val = 0, .mask = ~0U, .flags = f};
	pthread_t t;
	if (pthread_create(&t, NULL, wait_thread, &w) != 0)
		return 91;
	if (!until_waiters(word, 0, f, 1))
		return 92;
	if (ufutex_wake(word, ~0U, 1, f) != 1)
		return 93;
	pthread_join(t, NULL);
	return report(w.ret, w.err, 0);
}

/* The parent's sleepers of test_fork_private, under a name of their own: in the forked child
 * (which does not have these threads) their thread-local allocations are unreachable, and
 * tests/c/valgrind.supp suppresses exactly those leaks. (Not a tail call, so that the frame
 * stays on the stack.) */
__attribute__((noinline)) static void *fork_sleeper(void *p)
{
	void *r = wait_thread(p);
	__asm__ volatile("" ::: "memory");
	return r;
}

static void test_fork_private(void)
{
	static uint32_t word;
	const unsigned f = P(UFUTEX_SIZE_U32);
	enum { N = 40 };
	struct waiter w[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		w[i] = (struct waiter){.uaddr = &word, .val = 0, .mask = ~0U, .flags = f};
		CHECK(pthread_create(&t[i], NULL, fork_sleeper, &w[i]) == 0);
	}
	CHECK(until_waiters(&word, 0, f, N));
	pid_t pid = spawn(child_own_waiter, &word);
	CHILD_OK(pid);
	CHECK(shared_waiters(&word, 0, f) == N); /* the parent's waiters are where they were */
	__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
	CHECK(ufutex_wake(&word, ~0U, INT_MAX, f) == N);
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		CHECK(w[i].ret == 0);
	}
}

static void *map_shared_anon(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	memset(p, 0, 4096);
	return p;
}

/* Without a waiter: a wake is 0 at every size and count; a mismatch is EAGAIN; a matching value
 * with a past deadline is ETIMEDOUT; the argument errors; private memory (heap) too. */
static void test_shared_no_waiter(void)
{
	struct timespec past = {0, 0};
	uint64_t *shm = map_shared_anon();
	uint64_t *heap = calloc(2, sizeof(uint64_t));
	uint64_t *words[2] = {shm, heap};
	for (int m = 0; m < 2; m++) {
		uint64_t *w = words[m];
		for (int s = 0; s < 4; s++) {
			unsigned f = sizes[s];
			*w = ~0ULL;
			CHECK(ufutex_wake(w, maxval[s], 0, f) == 0);
			CHECK(ufutex_wake(w, maxval[s], INT_MAX, f) == 0);
			CHECK(ufutex_wake(w, 1, 1, f) == 0);
			FAILS(ufutex_wait(w, maxval[s] - 1, maxval[s], f, NULL, 0), EAGAIN);
			FAILS(ufutex_wait(w, maxval[s], 1, f, &past, CLOCK_MONOTONIC), ETIMEDOUT);
			FAILS(ufutex_wait(w, maxval[s], 1, f, &past, CLOCK_REALTIME), ETIMEDOUT);
			if (s > 0) {
				FAILS(ufutex_wait((char *)w + 1, 0, 1, f, NULL, 0), EINVAL);
				FAILS(ufutex_wake((char *)w + 1, 1, 1, f), EINVAL);
			}
			if (s < 3)
				FAILS(ufutex_wait(w, maxval[s] + 1, 1, f, NULL, 0), EINVAL);
			FAILS(ufutex_wait(w, 0, 0, f, NULL, 0), EINVAL);
			FAILS(ufutex_wake(w, 0, 1, f), EINVAL);
			FAILS(ufutex_wake(w, 1, -1, f), EINVAL);
			/* Timed waits on both clocks, a little ahead: ETIMEDOUT, never early. */
			if (s == 2) {
				struct timespec d = ts_after_now(CLOCK_REALTIME, 5 * 1000 * 1000);
				FAILS(ufutex_wait(w, maxval[s], 1, f, &d, CLOCK_REALTIME), ETIMEDOUT);
				CHECK(not_before(CLOCK_REALTIME, d));
			}
		}
		/* Stale wakes do not linger: after them, a wait still times out. */
		*w = 0;
		FAILS(ufutex_wait(w, 0, ~0UL, UFUTEX_SIZE_U64, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	}
	/* NULL, unmapped, inaccessible: EFAULT; a shared wake reads the word, as the kernel's. */
	for (int s = 0; s < 4; s++) {
		FAILS(ufutex_wait(NULL, 0, 1, sizes[s], NULL, 0), EFAULT);
		FAILS(ufutex_wake(NULL, 1, 1, sizes[s]), EFAULT);
		FAILS(ufutex_wait(unmapped, 0, 1, sizes[s], NULL, 0), EFAULT);
		FAILS(ufutex_wake(unmapped, 1, 1, sizes[s]), EFAULT);
		FAILS(ufutex_wait(inaccessible, 0, 1, sizes[s], &past, CLOCK_MONOTONIC), EFAULT);
		FAILS(ufutex_wake(inaccessible, 1, 0, sizes[s]), EFAULT);
	}
	/* Read-only private anonymous memory "never changes": a wait that would queue is EFAULT,
	 * as from the kernel. */
	uint32_t *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	FAILS(ufutex_wait(ro, 0, 1, UFUTEX_SIZE_U32, &past, CLOCK_MONOTONIC), EFAULT);
	munmap(ro, 4096);
	/* A NUMA pair: the node word is resolved and written back as for a private word. */
	struct numa_pair32_s {
		uint32_t word, node;
	} __attribute__((aligned(8))) *np = (void *)shm;
	np->word = 3;
	np->node = UINT32_MAX;
	FAILS(ufutex_wait(np, 2, 1, UFUTEX_SIZE_U32 | UFUTEX_NUMA, NULL, 0), EAGAIN);
	CHECK(np->node != UINT32_MAX);
	CHECK(ufutex_wake(np, 1, 1, UFUTEX_SIZE_U32 | UFUTEX_NUMA) == 0);
	/* FUTEX_WAKE_OP on shared words, nobody waiting: the operation is made. */
	uint32_t *w32 = (uint32_t *)shm;
	w32[1] = 5;
	CHECK(ufutex_wake_op(&w32[0], &w32[1], 1, 1, OP(1, 2, 0, 5), UFUTEX_SIZE_U32) == 0 && w32[1] == 7);
	/* waitv: shared entries with private ones; requeue with nobody waiting. */
	uint32_t priv = 1;
	shm[0] = 2;
	struct ufutex_waitv v[2] = {{.val = 1, .uaddr = (uintptr_t)&priv, .flags = P(UFUTEX_SIZE_U32)},
				    {.val = 2, .uaddr = (uintptr_t)shm, .flags = UFUTEX_SIZE_U64}};
	FAILS(ufutex_waitv(v, 2, 0, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	v[1].val = 3;
	FAILS(ufutex_waitv(v, 2, 0, NULL, 0), EAGAIN);
	struct ufutex_waitv rq[2] = {{.val = 2, .uaddr = (uintptr_t)shm, .flags = UFUTEX_SIZE_U64},
				     {.val = 0, .uaddr = (uintptr_t)heap, .flags = UFUTEX_SIZE_U64}};
	CHECK(ufutex_requeue(rq, 0, 1, INT_MAX) == 0);
	rq[0].val = 1;
	FAILS(ufutex_requeue(rq, 0, 1, INT_MAX), EAGAIN);
	free(heap);
	munmap(shm, 4096);
}

struct sw {
	void *uaddr;
	uint64_t val;
	unsigned long mask;
	unsigned flags;
	long want;
	long ret; /* of a thread's wait */
	int err;
};

static void *timed_wait_thread(void *p)
{
	struct sw *a = p;
	struct timespec d = soon();
	errno = 0;
	a->ret = ufutex_wait(a->uaddr, a->val, a->mask, a->flags, &d, CLOCK_MONOTONIC);
	a->err = errno;
	return NULL;
}

static int child_wait(void *p)
{
	struct sw *a = p;
	struct timespec d = soon();
	errno = 0;
	long r = ufutex_wait(a->uaddr, a->val, a->mask, a->flags, &d, CLOCK_MONOTONIC);
	return report(r, errno, a->want);
}

static int child_wake(void *p)
{
	struct sw *a = p;
	return report(shared_wake_one(a->uaddr, a->mask, a->flags), errno, 1);
}

/* MAP_SHARED | MAP_ANONYMOUS inherited across fork: a child waits, the parent wakes; then the
 * parent waits and a child wakes. */
static void test_shared_fork_u32(void)
{
	uint32_t *w = map_shared_anon();
	const unsigned f = UFUTEX_SIZE_U32;
	struct sw a = {.uaddr = w, .val = 0, .mask = ~0U, .flags = f, .want = 0};
	pid_t pid = spawn(child_wait, &a);
	CHECK(shared_wake_one(w, ~0U, f) == 1);
	CHILD_OK(pid);
	CHECK(ufutex_wake(w, ~0U, INT_MAX, f) == 0);

	pid = spawn(child_wake, &a);
	struct timespec d = soon();
	errno = 0;
	long r = ufutex_wait(w, 0, ~0U, f, &d, CLOCK_MONOTONIC);
	CHECK(r == 0);
	if (r != 0)
		fprintf(stderr, "parent's wait: %ld errno %d\n", r, errno);
	CHILD_OK(pid);
	munmap(w, 4096);
}

struct memfd_arg {
	int fd;
	unsigned off, s;
};

/* The child maps the memfd again — only its second page, at an address of the kernel's choice
 * (the parent's mapping is still there, so it differs) — and waits on the word. */
static int child_memfd_wait(void *p)
{
	struct memfd_arg *a = p;
	char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 4096);
	if (m == MAP_FAILED)
		return 96;
	struct timespec d = soon();
	errno = 0;
	long r = ufutex_wait(m + a->off, maxval[a->s], 0x3, sizes[a->s], &d, CLOCK_MONOTONIC);
	return report(r, errno, 0);
}

static void test_shared_memfd_sizes(void)
{
	int fd = memfd_create("ufutex_test", MFD_CLOEXEC);
	CHECK(fd >= 0 && ftruncate(fd, 2 * 4096) == 0);
	char *m = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	for (unsigned s = 0; s < 4; s++) {
		struct memfd_arg a = {.fd = fd, .off = 64 + 8 * s, .s = s};
		char *word = m + 4096 + a.off;
		memset(word, 0xff, 8);
		pid_t pid = spawn(child_memfd_wait, &a);
		if (until_waiters(word, maxval[s], sizes[s], 1)) {
			CHECK(ufutex_wake(word, 0x4, INT_MAX, sizes[s]) == 0);  /* no common mask bit */
			CHECK(ufutex_wake(m + a.off, 0x3, INT_MAX, sizes[s]) == 0); /* other page */
			CHECK(ufutex_wake(word, 0x2, INT_MAX, sizes[s]) == 1);
		} else {
			CHECK(!"the child never queued");
		}
		CHILD_OK(pid);
		CHECK(ufutex_wake(word, 0x3, INT_MAX, sizes[s]) == 0);
	}
	munmap(m, 2 * 4096);
	close(fd);
}

/* The parent registers its mapping of the memfd (its words' identity is then known without a
 * query); the child maps it again, unregistered, and waits: the parent's wake through the
 * registered mapping finds it. Then the errors. */
static void test_shared_registered(void)
{
	int fd = memfd_create("ufutex_test", MFD_CLOEXEC);
	CHECK(fd >= 0 && ftruncate(fd, 2 * 4096) == 0);
	char *m = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK(ufutex_shared_register(m, 2 * 4096) == 0);
	errno = 0;
	CHECK(ufutex_shared_register(m + 4096, 4096) == -1 && errno == EINVAL); /* overlaps */
	const unsigned s = 2; /* 32 bits */
	struct memfd_arg a = {.fd = fd, .off = 128, .s = s};
	char *word = m + 4096 + a.off;
	memset(word, 0xff, 8);
	pid_t pid = spawn(child_memfd_wait, &a);
	if (until_waiters(word, maxval[s], sizes[s], 1))
		CHECK(ufutex_wake(word, 0x3, INT_MAX, sizes[s]) == 1);
	else
		CHECK(!"the child never queued");
	CHILD_OK(pid);
	CHECK(ufutex_shared_unregister(m) == 0);
	errno = 0;
	CHECK(ufutex_shared_unregister(m) == -1 && errno == EINVAL);
	uint32_t heap = 0;
	errno = 0;
	CHECK(ufutex_shared_register(&heap, sizeof heap) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(ufutex_shared_register(m, 0) == -1 && errno == EINVAL);
	munmap(m, 2 * 4096);
	close(fd);
}

/* A shared word on the child's heap is the child's own: the parent's wake at the same address
 * (its own heap) never reaches it. The child waits on [heap word, MAP_SHARED word] (queued in
 * that order), so once the parent sees it on the second, it is on the first too. */
struct heap_arg {
	uint32_t *heap, *shm;
};

static int child_heap_wait(void *p)
{
	struct heap_arg *a = p;
	struct ufutex_waitv v[2] = {{.val = 0, .uaddr = (uintptr_t)a->heap, .flags = UFUTEX_SIZE_U32},
				    {.val = 0, .uaddr = (uintptr_t)a->shm, .flags = UFUTEX_SIZE_U32}};
	struct timespec d = soon();
	errno = 0;
	long r = ufutex_waitv(v, 2, 0, &d, CLOCK_MONOTONIC);
	return report(r, errno, 1);
}

static void test_shared_heap_is_local(void)
{
	struct heap_arg a = {.heap = calloc(1, sizeof(uint32_t)), .shm = map_shared_anon()};
	pid_t pid = spawn(child_heap_wait, &a);
	if (until_waiters(a.shm, 0, UFUTEX_SIZE_U32, 1)) {
		CHECK(ufutex_wake(a.heap, ~0U, INT_MAX, UFUTEX_SIZE_U32) == 0);
		CHECK(ufutex_wake(a.heap, ~0U, INT_MAX, P(UFUTEX_SIZE_U32)) == 0);
		CHECK(shared_waiters(a.heap, 0, UFUTEX_SIZE_U32) == 0);
		CHECK(ufutex_wake(a.shm, ~0U, INT_MAX, UFUTEX_SIZE_U32) == 1);
	} else {
		CHECK(!"the child never queued");
	}
	CHILD_OK(pid);
	/* Within one process a shared word on the heap works, and never meets a private word. */
	struct sw t = {.uaddr = a.heap, .val = 0, .mask = ~0U, .flags = UFUTEX_SIZE_U32, .ret = 1};
	pthread_t th;
	pthread_create(&th, NULL, timed_wait_thread, &t);
	if (until_waiters(a.heap, 0, UFUTEX_SIZE_U32, 1)) {
		CHECK(ufutex_wake(a.heap, ~0U, INT_MAX, P(UFUTEX_SIZE_U32)) == 0);
		CHECK(ufutex_wake(a.heap, ~0U, INT_MAX, UFUTEX_SIZE_U32) == 1);
	} else {
		CHECK(!"the thread never queued");
	}
	pthread_join(th, NULL);
	CHECK(t.ret == 0);
	free(a.heap);
	munmap(a.shm, 4096);
}

/* Requeue across processes: two children wait on a; the parent moves them to b (each call
 * reports what it moved), then wakes them through b. */
static void test_shared_requeue_fork(void)
{
	uint64_t *m = map_shared_anon();
	uint16_t *a = (uint16_t *)&m[1], *b = (uint16_t *)&m[9];
	const unsigned f = UFUTEX_SIZE_U16;
	struct sw arg = {.uaddr = a, .val = 0, .mask = 0xffff, .flags = f, .want = 0};
	pid_t pid[2] = {spawn(child_wait, &arg), spawn(child_wait, &arg)};
	struct ufutex_waitv ab[2] = {{.val = 0, .uaddr = (uintptr_t)a, .flags = f},
				     {.val = 0, .uaddr = (uintptr_t)b, .flags = f}};
	long moved = 0;
	for (int i = 0; i < SHARED_DEADLINE_S * 500 && moved < 2; i++) {
		long r = ufutex_requeue(ab, 0, 0, INT_MAX);
		CHECK(r >= 0);
		moved += r > 0 ? r : 0;
		if (r <= 0)
			usleep(1000);
	}
	CHECK(moved == 2);
	CHECK(ufutex_wake(a, 0xffff, INT_MAX, f) == 0);
	CHECK(shared_waiters(b, 0, f) == 2);
	*a = 1;
	FAILS(ufutex_requeue(ab, 0, 1, 1), EAGAIN);
	ab[0].flags = UFUTEX_PRIVATE | f;
	FAILS(ufutex_requeue(ab, 0, 1, 1), EINVAL); /* entries' flags differ */
	CHECK(ufutex_wake(b, 0xffff, 1, f) == 1);
	CHECK(ufutex_wake(b, 0xffff, INT_MAX, f) == 1);
	CHECK(ufutex_wake(b, 0xffff, INT_MAX, f) == 0);
	CHILD_OK(pid[0]);
	CHILD_OK(pid[1]);
	munmap(m, 4096);
}

/* FUTEX_WAKE_OP across processes: a child waits on each word; the operation on the second word
 * decides whether its child is woken, always after the first's. The errors come in the kernel's
 * order: both words' pages before the operation. */
static void test_shared_wake_op_fork(void)
{
	uint32_t *m = map_shared_anon();
	uint32_t *a = &m[0], *b = &m[33]; /* two buckets, most likely */
	const unsigned f = UFUTEX_SIZE_U32;
	struct sw wa = {.uaddr = a, .val = 0, .mask = ~0U, .flags = f, .want = 0};
	struct sw wb = {.uaddr = b, .val = 0, .mask = ~0U, .flags = f, .want = 0};
	pid_t pa = spawn(child_wait, &wa), pb = spawn(child_wait, &wb);
	CHECK(until_waiters(a, 0, f, 1) && until_waiters(b, 0, f, 1));
	/* ADD 0 to b, compare old == 1: false, so only a's waiter. */
	CHECK(ufutex_wake_op(a, b, 1, 1, OP(1, 0, 0, 1), f) == 1);
	CHILD_OK(pa);
	CHECK(*b == 0 && shared_waiters(b, 0, f) == 1);
	/* SET b = 7, compare old == 0: true; a has nobody left, b's waiter is woken. */
	CHECK(ufutex_wake_op(a, b, 1, 1, OP(0, 7, 0, 0), f) == 1);
	CHILD_OK(pb);
	CHECK(*b == 7 && shared_waiters(b, 7, f) == 0);
	/* One word as both: its waiter is woken once, by the first wake. */
	struct sw wc = {.uaddr = b, .val = 7, .mask = ~0U, .flags = f, .want = 0};
	pid_t pc = spawn(child_wait, &wc);
	CHECK(until_waiters(b, 7, f, 1));
	CHECK(ufutex_wake_op(b, b, 1, 1, OP(0, 7, 0, 7), f) == 1);
	CHILD_OK(pc);

	uint32_t *ro = mmap(NULL, 4096, PROT_READ, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	FAILS(ufutex_wake_op(unmapped, b, 1, 1, OP(5, 1, 0, 0), f), EFAULT);
	FAILS(ufutex_wake_op(a, unmapped, 1, 1, OP(5, 1, 0, 0), f), EFAULT);
	FAILS(ufutex_wake_op(a, ro, 1, 1, 0, f), EFAULT); /* the second word is written */
	CHECK(ufutex_wake_op(ro, b, 1, 1, OP(0, 7, 0, 7), f) == 0); /* the first is not */
	FAILS(ufutex_wake_op(a, b, 1, 1, OP(5, 1, 0, 0), f), ENOSYS);
	CHECK(*b == 7); /* an unknown op writes nothing */
	FAILS(ufutex_wake_op(a, b, 1, 1, OP(1, 1, 6, 0), f), ENOSYS);
	CHECK(*b == 8); /* an unknown comparison comes after the write */
	munmap(ro, 4096);
	munmap(m, 4096);
}

/* A waitv mixing a private and a shared entry: woken through either. In a child: [private word
 * of its own, shared U16 word], woken by the parent through the shared one (index 1). In this
 * process: a thread woken through the private one (index 0). */
static int child_mixed_waitv(void *p)
{
	uint16_t *shm = p;
	uint32_t priv = 0;
	struct ufutex_waitv v[2] = {{.val = 0, .uaddr = (uintptr_t)&priv, .flags = P(UFUTEX_SIZE_U32)},
				    {.val = 5, .uaddr = (uintptr_t)shm, .flags = UFUTEX_SIZE_U16}};
	struct timespec d = soon();
	errno = 0;
	long r = ufutex_waitv(v, 2, 0, &d, CLOCK_MONOTONIC);
	return report(r, errno, 1);
}

struct mixed {
	struct ufutex_waitv v[2];
	long ret;
	int err;
};

static void *mixed_thread(void *p)
{
	struct mixed *m = p;
	struct timespec d = soon();
	errno = 0;
	m->ret = ufutex_waitv(m->v, 2, 0, &d, CLOCK_MONOTONIC);
	m->err = errno;
	return NULL;
}

static void test_shared_waitv_mixed(void)
{
	uint16_t *shm = map_shared_anon();
	*shm = 5;
	pid_t pid = spawn(child_mixed_waitv, shm);
	if (until_waiters(shm, 5, UFUTEX_SIZE_U16, 1))
		CHECK(ufutex_wake(shm, 0xffff, INT_MAX, UFUTEX_SIZE_U16) == 1);
	else
		CHECK(!"the child never queued");
	CHILD_OK(pid);

	uint32_t priv = 0;
	struct mixed m = {.v = {{.val = 0, .uaddr = (uintptr_t)&priv, .flags = P(UFUTEX_SIZE_U32)},
				{.val = 5, .uaddr = (uintptr_t)shm, .flags = UFUTEX_SIZE_U16}},
			  .ret = -2};
	pthread_t t;
	pthread_create(&t, NULL, mixed_thread, &m);
	if (until_waiters(shm, 5, UFUTEX_SIZE_U16, 1)) /* queued on the shared entry: on both */
		CHECK(ufutex_wake(&priv, ~0U, INT_MAX, P(UFUTEX_SIZE_U32)) == 1);
	else
		CHECK(!"the thread never queued");
	pthread_join(t, NULL);
	CHECK(m.ret == 0);
	if (m.ret != 0)
		fprintf(stderr, "mixed waitv: %ld errno %d\n", m.ret, m.err);
	CHECK(shared_waiters(shm, 5, UFUTEX_SIZE_U16) == 0); /* the shared entry was taken out */
	munmap(shm, 4096);
}

/* Named objects: open flags and their answers, a semaphore, an event and a raw word across a
 * fork, and a named mutex whose owner is killed while holding it (EOWNERDEAD). */
static void test_named(void)
{
	CHECK(ufutex_ns_open("bad/name") == NULL && errno == EINVAL);
	ufutex_ns_t *ns = ufutex_ns_open("c-suite");
	CHECK(ns != NULL);
	if (!ns)
		return;
	CHECK(ufutex_ns_open("c-suite") == ns);
	struct ufutex_obj s, s2, e, m, w;
	FAILS(ufutex_sem_open(ns, 1, 0, 0, &s), ENOENT);
	CHECK(ufutex_sem_open(ns, 1, UFUTEX_CREAT, 1, &s) == 0);
	CHECK(ufutex_sem_open(ns, 1, UFUTEX_CREAT, 9, &s2) == 1); /* it existed */
	FAILS(ufutex_sem_open(ns, 1, UFUTEX_CREAT | UFUTEX_EXCL, 0, &s2), EEXIST);
	FAILS(ufutex_event_open(ns, 1, UFUTEX_CREAT, 0, 0, &e), EINVAL); /* another kind */
	FAILS(ufutex_sem_open(ns, 1, UFUTEX_EXCL, 0, &s2), EINVAL);      /* EXCL alone */
	CHECK(ufutex_sem_trywait(&s) == 0);
	FAILS(ufutex_sem_trywait(&s), EAGAIN);
	struct timespec past = ts_before_now(CLOCK_MONOTONIC, 1);
	FAILS(ufutex_sem_wait(&s, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	FAILS(ufutex_sem_post(NULL, 1), EFAULT);
	struct ufutex_obj bogus = {(ufutex_ns_t *)&s, 0, 0};
	FAILS(ufutex_sem_post(&bogus, 1), EINVAL);

	/* By name (UFUTEX_BYNAME): found again by the same string at another address; apart from
	 * keys; removed by name. */
	char again[] = "jobs";
	const uint64_t jobs = (uint64_t)(uintptr_t) "jobs";
	CHECK(ufutex_sem_open(ns, jobs, UFUTEX_BYNAME | UFUTEX_CREAT | UFUTEX_EXCL, 1, &s2) == 0);
	CHECK(ufutex_sem_open(ns, (uint64_t)(uintptr_t)again, UFUTEX_BYNAME, 0, &w) == 1);
	CHECK(w.slot == s2.slot && w.gen == s2.gen);
	FAILS(ufutex_sem_open(ns, jobs, 0, 0, &w), ENOENT); /* the number is another key */
	FAILS(ufutex_sem_open(ns, 0, UFUTEX_BYNAME, 0, &w), EFAULT);
	CHECK(ufutex_obj_remove_name(ns, "jobs") == 0);
	FAILS(ufutex_sem_trywait(&s2), EIDRM);

	/* A child waits on the semaphore and sets the event; we post and wait for the event. */
	CHECK(ufutex_event_open(ns, 2, UFUTEX_CREAT | UFUTEX_EXCL, 0, 0, &e) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		ufutex_ns_t *n = ufutex_ns_open("c-suite");
		struct ufutex_obj cs, ce;
		struct timespec t = ts_after_now(CLOCK_MONOTONIC, 20000000000L);
		int ok = n && ufutex_sem_open(n, 1, 0, 0, &cs) == 1 && ufutex_event_open(n, 2, 0, 0, 0, &ce) == 1 &&
			 ufutex_sem_wait(&cs, &t, CLOCK_MONOTONIC) == 0 && ufutex_event_set(&ce) == 0;
		_exit(ok ? 0 : 1);
	}
	CHECK(ufutex_sem_post(&s, 1) == 0);
	struct timespec t = ts_after_now(CLOCK_MONOTONIC, 20000000000L);
	CHECK(ufutex_event_wait(&e, &t, CLOCK_MONOTONIC) == 0);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* A raw word: a shared futex word. */
	uint32_t *word = NULL;
	CHECK(ufutex_word_open(ns, 3, UFUTEX_CREAT, &w, &word) == 0 && word && *word == 0);
	CHECK(ufutex_wake(word, 0xffffffffUL, 1, UFUTEX_SIZE_U32) == 0);
	/* Raw words of other sizes: the size is part of the kind. */
	void *w64 = NULL, *w8 = NULL;
	struct ufutex_obj o64, o8;
	CHECK(ufutex_word_open_sized(ns, 5, UFUTEX_CREAT, UFUTEX_SIZE_U64, &o64, &w64) == 0 && w64 &&
	      ((uintptr_t)w64 & 7) == 0 && *(uint64_t *)w64 == 0);
	FAILS(ufutex_word_open_sized(ns, 5, 0, UFUTEX_SIZE_U32, &o8, &w8), EINVAL); /* another size */
	FAILS(ufutex_word_open_sized(ns, 5, 0, 7, NULL, &w8), EINVAL);            /* no such size first */
	FAILS(ufutex_word_open_sized(ns, 5, 0, UFUTEX_SIZE_U64, NULL, &w8), EFAULT); /* then out */
	CHECK(ufutex_word_open_sized(ns, 6, UFUTEX_CREAT, UFUTEX_SIZE_U8, &o8, &w8) == 0 && *(uint8_t *)w8 == 0);
	*(uint64_t *)w64 = 1ULL << 40;
	FAILS(ufutex_wait(w64, 0, ~0UL, UFUTEX_SIZE_U64, NULL, 0), EAGAIN);
	CHECK(ufutex_wake(w64, ~0UL, 1, UFUTEX_SIZE_U64) == 0);
	CHECK(ufutex_obj_remove(ns, 5) == 0 && *(uint64_t *)w64 == UINT64_MAX);
	CHECK(ufutex_obj_remove(ns, 6) == 0 && *(uint8_t *)w8 == UINT8_MAX);

	/* A mutex whose owner dies holding it. */
	CHECK(ufutex_nmutex_open(ns, 4, UFUTEX_CREAT, &m) == 0);
	uint32_t *held = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(held != MAP_FAILED);
	pid = fork();
	if (pid == 0) {
		ufutex_ns_t *n = ufutex_ns_open("c-suite");
		struct ufutex_obj cm;
		if (!n || ufutex_nmutex_open(n, 4, 0, &cm) != 1 || ufutex_nmutex_lock(&cm, NULL, 0) != 0)
			_exit(1);
		__atomic_store_n(held, 1, __ATOMIC_SEQ_CST);
		for (;;)
			pause();
	}
	for (int i = 0; i < 20000 && !__atomic_load_n(held, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	FAILS(ufutex_nmutex_trylock(&m), EBUSY);
	FAILS(ufutex_nmutex_unlock(&m), EPERM);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
	CHECK(ufutex_nmutex_lock(&m, &t, CLOCK_MONOTONIC) == EOWNERDEAD);
	CHECK(ufutex_nmutex_lock(&m, NULL, 0) == 0); /* recursive */
	CHECK(ufutex_nmutex_unlock(&m) == 0 && ufutex_nmutex_unlock(&m) == 0);
	FAILS(ufutex_nmutex_unlock(&m), EPERM);
	munmap(held, 4096);

	for (uint64_t k = 1; k <= 4; k++)
		CHECK(ufutex_obj_remove(ns, k) == 0);
	FAILS(ufutex_obj_remove(ns, 1), ENOENT);
	FAILS(ufutex_sem_post(&s, 1), EIDRM);
	CHECK(*word == 0xffffffffu);
	CHECK(ufutex_ns_unlink("c-suite") == 0);
	FAILS(ufutex_ns_unlink("c-suite"), ENOENT);
}

/* ---- named objects: a handle's kind, and ufutex_wait_any ---- */

/* The calls that take a handle, each expecting one kind (0 semaphore, 1 event, 2 mutex). A
 * deadline of now: a call that wrongly went on would not block. */
static long k_sem_post(const struct ufutex_obj *o) { return ufutex_sem_post(o, 1); }
static long k_sem_wait(const struct ufutex_obj *o)
{
	struct timespec now = ts_after_now(CLOCK_MONOTONIC, 0);
	return ufutex_sem_wait(o, &now, CLOCK_MONOTONIC);
}
static long k_sem_trywait(const struct ufutex_obj *o) { return ufutex_sem_trywait(o); }
static long k_event_set(const struct ufutex_obj *o) { return ufutex_event_set(o); }
static long k_event_reset(const struct ufutex_obj *o) { return ufutex_event_reset(o); }
static long k_event_pulse(const struct ufutex_obj *o) { return ufutex_event_pulse(o); }
static long k_event_wait(const struct ufutex_obj *o)
{
	struct timespec now = ts_after_now(CLOCK_REALTIME, 0);
	return ufutex_event_wait(o, &now, CLOCK_REALTIME);
}
static long k_nmutex_lock(const struct ufutex_obj *o)
{
	struct timespec now = ts_after_now(CLOCK_MONOTONIC, 0);
	return ufutex_nmutex_lock(o, &now, CLOCK_MONOTONIC);
}
static long k_nmutex_trylock(const struct ufutex_obj *o) { return ufutex_nmutex_trylock(o); }
static long k_nmutex_unlock(const struct ufutex_obj *o) { return ufutex_nmutex_unlock(o); }

static const struct {
	const char *name;
	long (*call)(const struct ufutex_obj *);
	int kind;
} handle_calls[] = {
	{"sem_post", k_sem_post, 0},       {"sem_wait", k_sem_wait, 0},         {"sem_trywait", k_sem_trywait, 0},
	{"event_set", k_event_set, 1},     {"event_reset", k_event_reset, 1},   {"event_pulse", k_event_pulse, 1},
	{"event_wait", k_event_wait, 1},   {"nmutex_lock", k_nmutex_lock, 2},   {"nmutex_trylock", k_nmutex_trylock, 2},
	{"nmutex_unlock", k_nmutex_unlock, 2},
};

/* Every call on a handle of another kind (the other two, and raw words of every size) fails with
 * EINVAL and changes nothing; the order of the handle's checks: NULL (EFAULT), foreign namespace
 * (EINVAL), removed (EIDRM), kind (EINVAL), then the timeout. */
static void test_named_kinds(void)
{
	ufutex_ns_t *ns = ufutex_ns_open("c-kinds");
	CHECK(ns != NULL);
	if (!ns)
		return;
	/* 0 semaphore (count 1), 1 event (auto, unsignaled), 2 mutex, then raw words of 8 to 64 bits
	 * holding 0. */
	struct ufutex_obj h[7];
	void *word[7] = {0};
	CHECK(ufutex_sem_open(ns, 1, UFUTEX_CREAT | UFUTEX_EXCL, 1, &h[0]) == 0);
	CHECK(ufutex_event_open(ns, 2, UFUTEX_CREAT | UFUTEX_EXCL, 0, 0, &h[1]) == 0);
	CHECK(ufutex_nmutex_open(ns, 3, UFUTEX_CREAT | UFUTEX_EXCL, &h[2]) == 0);
	for (int s = 0; s < 4; s++)
		CHECK(ufutex_word_open_sized(ns, 4 + s, UFUTEX_CREAT | UFUTEX_EXCL, sizes[s], &h[3 + s], &word[3 + s]) == 0);
	for (size_t c = 0; c < sizeof handle_calls / sizeof handle_calls[0]; c++)
		for (int k = 0; k < 7; k++) {
			if (k == handle_calls[c].kind)
				continue;
			errno = 0;
			long r = handle_calls[c].call(&h[k]);
			if (r != -1 || errno != EINVAL) {
				fprintf(stderr, "%s:%d: %s on a handle of kind %d: got %ld errno %d, want EINVAL\n", __FILE__,
					__LINE__, handle_calls[c].name, k, r, errno);
				failures++;
			}
		}
	/* Nothing changed: the count is still 1, the event unsignaled, the mutex free, the words 0. */
	CHECK(ufutex_sem_trywait(&h[0]) == 0);
	FAILS(ufutex_sem_trywait(&h[0]), EAGAIN);
	FAILS(k_event_wait(&h[1]), ETIMEDOUT);
	CHECK(ufutex_nmutex_trylock(&h[2]) == 0 && ufutex_nmutex_unlock(&h[2]) == 0);
	CHECK(*(uint8_t *)word[3] == 0 && *(uint16_t *)word[4] == 0 && *(uint32_t *)word[5] == 0 &&
	      *(uint64_t *)word[6] == 0);

	/* The order. */
	struct timespec now = ts_after_now(CLOCK_MONOTONIC, 0);
	struct ufutex_obj foreign = {(ufutex_ns_t *)&now, h[0].slot, h[0].gen};
	FAILS(ufutex_sem_wait(NULL, inaccessible, 99), EFAULT);
	FAILS(ufutex_sem_wait(&foreign, inaccessible, 99), EINVAL);
	FAILS(ufutex_nmutex_lock(&h[0], inaccessible, CLOCK_MONOTONIC), EINVAL); /* kind before timeout */
	FAILS(ufutex_sem_wait(&h[0], inaccessible, CLOCK_MONOTONIC), EFAULT);    /* the right kind: timeout */
	FAILS(ufutex_sem_wait(&h[0], &now, 99), EINVAL);
	FAILS(ufutex_sem_wait(&h[0], &now, CLOCK_MONOTONIC), ETIMEDOUT);
	for (uint64_t k = 1; k <= 7; k++)
		CHECK(ufutex_obj_remove(ns, k) == 0);
	/* Removed: EIDRM, before the kind and the timeout; a new object in the slot does not revive
	 * the handle, whatever its kind. */
	FAILS(ufutex_sem_post(&h[0], 1), EIDRM);
	FAILS(ufutex_event_set(&h[0]), EIDRM);
	FAILS(ufutex_nmutex_lock(&h[0], inaccessible, 99), EIDRM);
	FAILS(ufutex_sem_wait(&h[0], inaccessible, 99), EIDRM);
	struct ufutex_obj again;
	CHECK(ufutex_nmutex_open(ns, 1, UFUTEX_CREAT | UFUTEX_EXCL, &again) == 0);
	FAILS(ufutex_nmutex_trylock(&h[0]), EIDRM);
	FAILS(ufutex_sem_trywait(&h[0]), EIDRM);
	CHECK(ufutex_obj_remove(ns, 1) == 0);
	CHECK(ufutex_ns_unlink("c-kinds") == 0);
}

/* A thread's ufutex_wait_any and its result. */
struct any_call {
	const struct ufutex_waitable *objs;
	unsigned n;
	long ret;
	int err;
};

static void *any_thread(void *p)
{
	struct any_call *c = p;
	struct timespec t = soon();
	errno = 0;
	c->ret = ufutex_wait_any(c->objs, c->n, &t, CLOCK_MONOTONIC);
	c->err = errno;
	return NULL;
}

/* Run ufutex_wait_any in a thread until it sleeps: entry n - 1 must be the raw 32-bit word
 * `probe` (holding 0, val 0), whose waiters shared_waiters counts. Whether it slept. */
static int any_asleep(pthread_t *t, struct any_call *c, void *probe)
{
	CHECK(pthread_create(t, NULL, any_thread, c) == 0);
	return until_waiters(probe, 0, UFUTEX_SIZE_U32, 1);
}

/* A child that takes mutex `key` of namespace "c-any", says so in *held, and waits to be killed. */
static void hold_until_killed(uint64_t key, uint32_t *held)
{
	ufutex_ns_t *n = ufutex_ns_open("c-any");
	struct ufutex_obj cm;
	if (!n || ufutex_nmutex_open(n, key, 0, &cm) != 1 || ufutex_nmutex_lock(&cm, NULL, 0) != 0)
		_exit(1);
	__atomic_store_n(held, 1, __ATOMIC_SEQ_CST);
	for (;;)
		pause();
}

/* ufutex_wait_any: which index, what it takes, raw words of every size, a wake from another
 * thread, removal before and while waiting, a timeout on both clocks, the argument errors in
 * their order, and a mutex whose owner was killed holding it. */
static void test_wait_any(void)
{
	ufutex_ns_t *ns = ufutex_ns_open("c-any");
	CHECK(ns != NULL);
	if (!ns)
		return;
	enum { SEM0 = 1, EV, SEM2, MTX, PROBE, DEAD, W8, W16, W32, W64 };
	struct ufutex_obj sem0, ev, sem2, mtx, probe, dead, w[4];
	void *wp[4];
	uint32_t *probe_word;
	CHECK(ufutex_sem_open(ns, SEM0, UFUTEX_CREAT | UFUTEX_EXCL, 0, &sem0) == 0);
	CHECK(ufutex_event_open(ns, EV, UFUTEX_CREAT | UFUTEX_EXCL, 0, 0, &ev) == 0);
	CHECK(ufutex_sem_open(ns, SEM2, UFUTEX_CREAT | UFUTEX_EXCL, 1, &sem2) == 0);
	CHECK(ufutex_nmutex_open(ns, MTX, UFUTEX_CREAT | UFUTEX_EXCL, &mtx) == 0);
	CHECK(ufutex_word_open(ns, PROBE, UFUTEX_CREAT | UFUTEX_EXCL, &probe, &probe_word) == 0);
	CHECK(ufutex_nmutex_open(ns, DEAD, UFUTEX_CREAT | UFUTEX_EXCL, &dead) == 0);
	for (int s = 0; s < 4; s++)
		CHECK(ufutex_word_open_sized(ns, W8 + s, UFUTEX_CREAT | UFUTEX_EXCL, sizes[s], &w[s], &wp[s]) == 0);
	struct timespec now = ts_after_now(CLOCK_MONOTONIC, 0);

	/* The ready semaphore at index 2 of 3 is taken, and only it. */
	struct ufutex_waitable three[3] = {{sem0, 0}, {ev, 0}, {sem2, 0}};
	CHECK(ufutex_wait_any(three, 3, &now, CLOCK_MONOTONIC) == 2);
	FAILS(ufutex_sem_trywait(&sem2), EAGAIN);
	FAILS(ufutex_wait_any(three, 3, &now, CLOCK_MONOTONIC), ETIMEDOUT);
	/* The lowest ready index wins: both semaphores posted, the first is taken. */
	CHECK(ufutex_sem_post(&sem0, 1) == 0 && ufutex_sem_post(&sem2, 1) == 0);
	CHECK(ufutex_wait_any(three, 3, NULL, 0) == 0);
	CHECK(ufutex_wait_any(three, 3, NULL, 0) == 2);

	/* An auto event set by another thread while the call sleeps: its signal is taken. */
	struct ufutex_waitable evs[3] = {{sem0, 0}, {ev, 0}, {probe, 0}};
	struct any_call c = {evs, 3, 0, 0};
	pthread_t t;
	CHECK(any_asleep(&t, &c, probe_word));
	CHECK(ufutex_event_set(&ev) == 0);
	pthread_join(t, NULL);
	CHECK(c.ret == 1);
	FAILS(ufutex_event_wait(&ev, &now, CLOCK_MONOTONIC), ETIMEDOUT);

	/* A mutex: a free one is taken; one the caller holds is taken again (recursively). */
	struct ufutex_waitable mx[2] = {{sem0, 0}, {mtx, 0}};
	CHECK(ufutex_wait_any(mx, 2, &now, CLOCK_MONOTONIC) == 1);
	CHECK(ufutex_wait_any(mx, 2, &now, CLOCK_MONOTONIC) == 1);
	CHECK(ufutex_nmutex_unlock(&mtx) == 0 && ufutex_nmutex_unlock(&mtx) == 0);
	FAILS(ufutex_nmutex_unlock(&mtx), EPERM);

	/* Raw words of every size: ready at once when they differ from val; else until another
	 * thread changes them (and wakes them, as for any shared futex word). */
	for (int s = 0; s < 4; s++) {
		struct ufutex_waitable one[2] = {{w[s], 1}, {probe, 0}};
		CHECK(ufutex_wait_any(one, 1, &now, CLOCK_MONOTONIC) == 0); /* holds 0, not 1 */
		one[0].val = 0;
		FAILS(ufutex_wait_any(one, 1, &now, CLOCK_MONOTONIC), ETIMEDOUT);
		struct any_call wc = {one, 2, 0, 0};
		CHECK(any_asleep(&t, &wc, probe_word));
		uint64_t v = maxval[s] - 1; /* every byte used, and not the removed mark */
		switch (s) {
		case 0: __atomic_store_n((uint8_t *)wp[s], (uint8_t)v, __ATOMIC_SEQ_CST); break;
		case 1: __atomic_store_n((uint16_t *)wp[s], (uint16_t)v, __ATOMIC_SEQ_CST); break;
		case 2: __atomic_store_n((uint32_t *)wp[s], (uint32_t)v, __ATOMIC_SEQ_CST); break;
		default: __atomic_store_n((uint64_t *)wp[s], v, __ATOMIC_SEQ_CST); break;
		}
		CHECK(ufutex_wake(wp[s], maxval[s], INT_MAX, sizes[s]) >= 0);
		pthread_join(t, NULL);
		CHECK(wc.ret == 0);
		if (wc.ret != 0)
			fprintf(stderr, "wait_any on a %d-bit word: %ld errno %d\n", 8 << s, wc.ret, wc.err);
		one[0].val = v; /* the value it holds now: not ready */
		FAILS(ufutex_wait_any(one, 1, &now, CLOCK_MONOTONIC), ETIMEDOUT);
	}

	/* A timeout, on both clocks: ETIMEDOUT, never early. */
	for (int k = 0; k < 2; k++) {
		clockid_t clk = k ? CLOCK_REALTIME : CLOCK_MONOTONIC;
		struct timespec d = ts_after_now(clk, 2 * 1000 * 1000);
		FAILS(ufutex_wait_any(three, 3, &d, clk), ETIMEDOUT);
		CHECK(not_before(clk, d));
	}

	/* The errors, in their order. */
	struct ufutex_waitable bad_val8[1] = {{w[0], 0x100}}, bad_val32[1] = {{w[2], 1ULL << 32}};
	struct ufutex_waitable bad_sem[1] = {{sem0, 1}};
	struct ufutex_waitable foreign[1] = {{{(ufutex_ns_t *)&now, sem0.slot, sem0.gen}, 0}};
	FAILS(ufutex_wait_any(three, 0, &now, CLOCK_MONOTONIC), EINVAL);
	FAILS(ufutex_wait_any(NULL, 0, &now, CLOCK_MONOTONIC), EINVAL); /* the count first */
	FAILS(ufutex_wait_any(three, UFUTEX_WAITV_MAX + 1, &now, CLOCK_MONOTONIC), EINVAL);
	FAILS(ufutex_wait_any(NULL, 1, &now, CLOCK_MONOTONIC), EFAULT);
	FAILS(ufutex_wait_any(inaccessible, 1, &now, CLOCK_MONOTONIC), EFAULT);
	FAILS(ufutex_wait_any(foreign, 1, &now, CLOCK_MONOTONIC), EINVAL);
	FAILS(ufutex_wait_any(bad_val8, 1, &now, CLOCK_MONOTONIC), EINVAL);
	FAILS(ufutex_wait_any(bad_val32, 1, &now, CLOCK_MONOTONIC), EINVAL);
	FAILS(ufutex_wait_any(bad_sem, 1, &now, CLOCK_MONOTONIC), EINVAL);
	FAILS(ufutex_wait_any(three, 3, inaccessible, CLOCK_MONOTONIC), EFAULT);
	FAILS(ufutex_wait_any(three, 3, &now, 99), EINVAL);
	FAILS(ufutex_wait_any(bad_val8, 1, inaccessible, CLOCK_MONOTONIC), EINVAL); /* entries first */
	/* Entry by entry: a bad entry 0 decides before an unreadable entry 1; a good one does not. */
	struct ufutex_waitable *tail = (struct ufutex_waitable *)(edge - sizeof(struct ufutex_waitable));
	memcpy(tail, bad_sem, sizeof *tail);
	FAILS(ufutex_wait_any(tail, 2, &now, CLOCK_MONOTONIC), EINVAL);
	memcpy(tail, &three[0], sizeof *tail);
	FAILS(ufutex_wait_any(tail, 2, &now, CLOCK_MONOTONIC), EFAULT);
	/* 1024 entries are read and waited on: the last one is ready. */
	struct ufutex_waitable *many = calloc(UFUTEX_WAITV_MAX, sizeof *many);
	CHECK(many != NULL);
	if (many) {
		for (int i = 0; i < UFUTEX_WAITV_MAX; i++)
			many[i] = (struct ufutex_waitable){i % 2 ? ev : sem0, 0};
		many[UFUTEX_WAITV_MAX - 1] = (struct ufutex_waitable){w[3], 5};
		CHECK(ufutex_wait_any(many, UFUTEX_WAITV_MAX, &now, CLOCK_MONOTONIC) == UFUTEX_WAITV_MAX - 1);
		free(many);
	}

	/* A mutex whose owner was killed holding it: taken, and said so. */
	uint32_t *held = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(held != MAP_FAILED);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		hold_until_killed(DEAD, held);
	for (int i = 0; i < 20000 && !__atomic_load_n(held, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	struct ufutex_waitable dm[2] = {{sem0, 0}, {dead, 0}};
	FAILS(ufutex_wait_any(dm, 2, &now, CLOCK_MONOTONIC), ETIMEDOUT); /* held by a live owner */
	kill(pid, SIGKILL);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
	struct timespec t20 = soon();
	long r = ufutex_wait_any(dm, 2, &t20, CLOCK_MONOTONIC);
	CHECK(r == (1 | UFUTEX_WAIT_ABANDONED));
	CHECK(ufutex_nmutex_unlock(&dead) == 0); /* we own it, once */
	FAILS(ufutex_nmutex_unlock(&dead), EPERM);
	CHECK(ufutex_wait_any(dm, 2, &now, CLOCK_MONOTONIC) == 1); /* free now, not abandoned */
	CHECK(ufutex_nmutex_unlock(&dead) == 0);
	munmap(held, 4096);

	/* Removed before the call: EIDRM, entry by entry (a bad val at entry 0 decides first), and
	 * before the timeout; removed while the call sleeps: EIDRM, nothing taken. */
	CHECK(ufutex_obj_remove(ns, EV) == 0);
	struct ufutex_waitable gone[2] = {{ev, 0}, {w[0], 0x100}};
	FAILS(ufutex_wait_any(gone, 2, &now, CLOCK_MONOTONIC), EIDRM);
	FAILS(ufutex_wait_any(gone, 1, inaccessible, 99), EIDRM);
	struct ufutex_waitable gone2[2] = {{w[0], 0x100}, {ev, 0}};
	FAILS(ufutex_wait_any(gone2, 2, &now, CLOCK_MONOTONIC), EINVAL);
	struct ufutex_waitable rm[3] = {{sem0, 0}, {sem2, 0}, {probe, 0}};
	struct any_call rc = {rm, 3, 0, 0};
	CHECK(any_asleep(&t, &rc, probe_word));
	CHECK(ufutex_obj_remove(ns, SEM2) == 0);
	pthread_join(t, NULL);
	CHECK(rc.ret == -1 && rc.err == EIDRM);
	FAILS(ufutex_sem_trywait(&sem0), EAGAIN);

	uint64_t keys[] = {SEM0, MTX, PROBE, DEAD, W8, W16, W32, W64};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		CHECK(ufutex_obj_remove(ns, keys[i]) == 0);
	CHECK(ufutex_ns_unlink("c-any") == 0);
}


/* Counted objects (UFUTEX_COUNTED): one handle per counted open, the object dies with the last
 * ufutex_obj_close of the last process that holds it, or with that process's death; a counted
 * and a plain object are different kinds; close's errors. */
static void test_named_counted(void)
{
	ufutex_ns_t *ns = ufutex_ns_open("c-counted");
	CHECK(ns != NULL);
	if (!ns)
		return;
	const unsigned int C = UFUTEX_COUNTED;
	struct ufutex_obj a, b, p, ev, w;
	uint32_t *word = NULL;
	CHECK(ufutex_sem_open(ns, 1, UFUTEX_CREAT | C, 2, &a) == 0);
	CHECK(ufutex_sem_open(ns, 1, C, 0, &b) == 1); /* a second handle */
	FAILS(ufutex_sem_open(ns, 1, UFUTEX_CREAT, 0, &p), EINVAL); /* a plain open of it */
	FAILS(ufutex_sem_open(ns, 1, UFUTEX_CREAT | UFUTEX_EXCL | C, 0, &p), EEXIST);
	FAILS(ufutex_sem_open(ns, 1, C, 0, NULL), EFAULT); /* (its handle given back) */
	CHECK(ufutex_obj_close(&a) == 0);
	CHECK(ufutex_sem_trywait(&b) == 0); /* alive while a handle is */
	CHECK(ufutex_obj_close(&b) == 0);
	FAILS(ufutex_sem_trywait(&b), EIDRM); /* died with the last */
	FAILS(ufutex_sem_open(ns, 1, C, 0, &a), ENOENT);
	FAILS(ufutex_obj_close(&b), EBADF); /* closed already */
	FAILS(ufutex_obj_close(NULL), EFAULT);
	struct ufutex_obj bogus = {(ufutex_ns_t *)&a, 0, 0};
	FAILS(ufutex_obj_close(&bogus), EINVAL);

	/* Unreadable handles and names, unwritable out-pointers: EFAULT, never a crash, and an open
	 * whose out-pointer cannot be written creates nothing. */
	FAILS(ufutex_obj_close(inaccessible), EFAULT);
	FAILS(ufutex_sem_post(inaccessible, 1), EFAULT);
	FAILS(ufutex_nmutex_unlock(inaccessible), EFAULT);
	errno = 0;
	CHECK(ufutex_ns_open(inaccessible) == NULL && errno == EFAULT);
	FAILS(ufutex_ns_unlink(inaccessible), EFAULT);
	void *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	FAILS(ufutex_sem_open(ns, 5, UFUTEX_CREAT | C, 0, ro), EFAULT);
	FAILS(ufutex_sem_open(ns, 5, UFUTEX_CREAT, 0, inaccessible), EFAULT);
	FAILS(ufutex_sem_open(ns, 5, 0, 0, &a), ENOENT); /* nothing was created */
	FAILS(ufutex_word_open_sized(ns, 5, UFUTEX_CREAT, UFUTEX_SIZE_U8, &a, ro), EFAULT);
	FAILS(ufutex_word_open_sized(ns, 5, UFUTEX_CREAT, UFUTEX_SIZE_U8, ro, (void **)&word), EFAULT);
	FAILS(ufutex_word_open_sized(ns, 5, 0, UFUTEX_SIZE_U8, &a, (void **)&word), ENOENT);
	munmap(ro, 4096);
	CHECK(ufutex_sem_open(ns, 2, UFUTEX_CREAT, 0, &p) == 0);
	FAILS(ufutex_obj_close(&p), EBADF); /* a plain object's handle */
	CHECK(ufutex_obj_remove(ns, 2) == 0);
	/* Removed now while held: its handles fail; closing it still lets go. */
	CHECK(ufutex_word_open_sized(ns, 3, UFUTEX_CREAT | C, UFUTEX_SIZE_U32, &w, (void **)&word) == 0);
	CHECK(word != NULL && *word == 0);
	CHECK(ufutex_obj_remove(ns, 3) == 0);
	CHECK(ufutex_obj_close(&w) == 0);
	FAILS(ufutex_obj_close(&w), EBADF);

	/* Held by a child too: alive after we let go, until the child is killed; the next process
	 * to open the namespace gives the dead child's handle back. */
	CHECK(ufutex_event_open(ns, 4, UFUTEX_CREAT | C, 1, 0, &ev) == 0);
	uint32_t *held = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(held != MAP_FAILED);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		ufutex_ns_t *n = ufutex_ns_open("c-counted");
		struct ufutex_obj ce;
		if (!n || ufutex_event_open(n, 4, C, 0, 0, &ce) != 1)
			_exit(1);
		__atomic_store_n(held, 1, __ATOMIC_SEQ_CST);
		for (;;)
			pause();
	}
	for (int i = 0; i < 20000 && !__atomic_load_n(held, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	CHECK(ufutex_obj_close(&ev) == 0);
	CHECK(ufutex_event_set(&ev) == 0); /* the child holds it */
	kill(pid, SIGKILL);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
	CHECK(ufutex_ns_open("c-counted") == ns); /* an open gives dead processes' handles back */
	FAILS(ufutex_event_set(&ev), EIDRM);
	FAILS(ufutex_event_open(ns, 4, C, 0, 0, &ev), ENOENT);
	munmap(held, 4096);
	CHECK(ufutex_ns_unlink("c-counted") == 0);
}

int main(void)
{
	make_shared_dir(); /* before any shared call */
	make_bad_pages();
	RUN(test_fault_chaining);
	RUN(test_wait_errors);
	RUN(test_wake_errors);
	RUN(test_waitv_errors);
	RUN(test_requeue_errors);
	RUN(test_slots_errors);
	RUN(test_no_memory); /* before test_slots makes the table large and final */
	RUN(test_every_size);
	RUN(test_timeouts);
	RUN(test_eintr);
	RUN(test_sa_restart);
	RUN(test_waitv_1024);
	RUN(test_requeue_counts);
	RUN(test_wake_op);
	RUN(test_slots);
	RUN(test_numa);
	RUN(test_shared_no_waiter);
	RUN(test_shared_fork_u32);
	RUN(test_shared_memfd_sizes);
	RUN(test_shared_registered);
	RUN(test_shared_heap_is_local);
	RUN(test_shared_requeue_fork);
	RUN(test_shared_wake_op_fork);
	RUN(test_shared_waitv_mixed);
	RUN(test_fork_private);
	RUN(test_named);
	RUN(test_named_kinds);
	RUN(test_wait_any);
	RUN(test_named_counted);
	remove_shared_dir();
	if (failures) {
		fprintf(stderr, "ufutex_test: %d failure(s)\n", failures);
		return 1;
	}
	puts("ufutex_test: ok");
	return 0;
}
