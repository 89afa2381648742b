/*
 * Futex calls through syscall(), as unmodified programs make them: the legacy SYS_futex
 * operations (private and shared, with FUTEX_CLOCK_REALTIME) and the futex2 calls, single-
 * threaded for every result and errno, then with sleeping threads. It prints one line per
 * call; run with and without LD_PRELOAD=libufutex_preload.so, the two transcripts must be the
 * same (tests/preload/run.sh). Exits 1 if a threaded scenario fails its own checks.
 *
 *     legacy            (no arguments)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
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
#define F2_U32_PRIVATE 0x82

static int failures;

static void show(const char *what, long r)
{
	printf("%-44s %ld %s\n", what, r, r == -1 ? strerror(errno) : "");
}

#define CALL(what, expr)            \
	do {                        \
		errno = 0;          \
		long r_ = (expr);   \
		show(what, r_);     \
	} while (0)

static long futex(uint32_t *u, int op, uint32_t val, const void *t, uint32_t *u2, uint32_t val3)
{
	return syscall(SYS_futex, u, op, val, t, u2, val3);
}

static void single_threaded(void)
{
	static uint32_t w[4] __attribute__((aligned(64)));
	struct timespec rel = {0, 1000000}, bad = {0, -1}, past = {0, 0};
	char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (int priv = 0; priv < 2; priv++) {
		int P = priv ? FUTEX_PRIVATE_FLAG : 0;
		printf("-- %s\n", priv ? "private" : "shared");
		w[0] = 1;
		CALL("WAIT mismatch", futex(&w[0], FUTEX_WAIT | P, 0, NULL, NULL, 0));
		CALL("WAIT 1 ms", futex(&w[0], FUTEX_WAIT | P, 1, &rel, NULL, 0));
		CALL("WAIT bad timespec", futex(&w[0], FUTEX_WAIT | P, 1, &bad, NULL, 0));
		CALL("WAIT unreadable timespec", futex(&w[0], FUTEX_WAIT | P, 1, none, NULL, 0));
		CALL("WAIT misaligned", futex((uint32_t *)((char *)&w[0] + 1), FUTEX_WAIT | P, 1, NULL, NULL, 0));
		CALL("WAIT CLOCK_REALTIME", futex(&w[0], FUTEX_WAIT | P | FUTEX_CLOCK_REALTIME, 1, &rel, NULL, 0));
		CALL("WAIT unmapped word", futex((uint32_t *)none, FUTEX_WAIT | P, 1, NULL, NULL, 0));
		CALL("WAKE nobody", futex(&w[0], FUTEX_WAKE | P, 1, NULL, NULL, 0));
		CALL("WAKE nr 0", futex(&w[0], FUTEX_WAKE | P, 0, NULL, NULL, 0));
		CALL("WAKE nr INT_MAX", futex(&w[0], FUTEX_WAKE | P, INT_MAX, NULL, NULL, 0));
		CALL("WAKE misaligned", futex((uint32_t *)((char *)&w[0] + 2), FUTEX_WAKE | P, 1, NULL, NULL, 0));
		CALL("WAKE NULL", futex(NULL, FUTEX_WAKE | P, 1, NULL, NULL, 0));
		CALL("REQUEUE to NULL", futex(&w[0], FUTEX_REQUEUE | P, 1, (void *)1L, NULL, 0));
		CALL("CMP_REQUEUE mismatch, to NULL", futex(&w[0], FUTEX_CMP_REQUEUE | P, 1, (void *)1L, NULL, 2));
		CALL("WAKE_OP of NULL", futex(NULL, FUTEX_WAKE_OP | P, 1, (void *)1L, &w[1], FUTEX_OP(FUTEX_OP_ADD, 0, 0, 0)));
		CALL("WAKE CLOCK_REALTIME", futex(&w[0], FUTEX_WAKE | P | FUTEX_CLOCK_REALTIME, 1, NULL, NULL, 0));
		struct timespec mono = ts_after_now(CLOCK_MONOTONIC, 1000000), real = ts_after_now(CLOCK_REALTIME, 1000000);
		CALL("WAIT_BITSET mono", futex(&w[0], FUTEX_WAIT_BITSET | P, 1, &mono, NULL, FUTEX_BITSET_MATCH_ANY));
		CALL("WAIT_BITSET real", futex(&w[0], FUTEX_WAIT_BITSET | P | FUTEX_CLOCK_REALTIME, 1, &real, NULL, 1));
		CALL("WAIT_BITSET past", futex(&w[0], FUTEX_WAIT_BITSET | P, 1, &past, NULL, 2));
		CALL("WAIT_BITSET bitset 0", futex(&w[0], FUTEX_WAIT_BITSET | P, 1, &past, NULL, 0));
		CALL("WAIT_BITSET mismatch", futex(&w[0], FUTEX_WAIT_BITSET | P, 7, NULL, NULL, ~0u));
		CALL("WAIT_BITSET bad timespec", futex(&w[0], FUTEX_WAIT_BITSET | P, 1, &bad, NULL, ~0u));
		CALL("WAKE_BITSET", futex(&w[0], FUTEX_WAKE_BITSET | P, 1, NULL, NULL, 5));
		CALL("WAKE_BITSET bitset 0", futex(&w[0], FUTEX_WAKE_BITSET | P, 1, NULL, NULL, 0));
		CALL("REQUEUE nobody", futex(&w[0], FUTEX_REQUEUE | P, 1, (void *)1L, &w[1], 0));
		CALL("REQUEUE misaligned target", futex(&w[0], FUTEX_REQUEUE | P, 1, (void *)1L, (uint32_t *)((char *)&w[1] + 1), 0));
		CALL("CMP_REQUEUE", futex(&w[0], FUTEX_CMP_REQUEUE | P, 1, (void *)1L, &w[1], 1));
		CALL("CMP_REQUEUE mismatch", futex(&w[0], FUTEX_CMP_REQUEUE | P, 1, (void *)1L, &w[1], 2));
		CALL("CMP_REQUEUE unmapped", futex((uint32_t *)none, FUTEX_CMP_REQUEUE | P, 1, (void *)1L, &w[1], 2));
		CALL("CMP_REQUEUE misaligned source", futex((uint32_t *)((char *)&w[0] + 2), FUTEX_CMP_REQUEUE | P, 1, (void *)1L, &w[1], 1));
		CALL("CMP_REQUEUE negative count", futex(&w[0], FUTEX_CMP_REQUEUE | P, 1, (void *)-1L, &w[1], 1));
		w[1] = 5;
		CALL("WAKE_OP ADD 3, old == 5", futex(&w[0], FUTEX_WAKE_OP | P, 1, (void *)1L, &w[1], FUTEX_OP(FUTEX_OP_ADD, 3, FUTEX_OP_CMP_EQ, 5)));
		printf("%-44s %u\n", "  word after", w[1]);
		CALL("WAKE_OP OR 1<<4, old > 100", futex(&w[0], FUTEX_WAKE_OP | P, 0, (void *)0L, &w[1], FUTEX_OP((FUTEX_OP_OR | FUTEX_OP_OPARG_SHIFT), 4, FUTEX_OP_CMP_GT, 100)));
		printf("%-44s %u\n", "  word after", w[1]);
		CALL("WAKE_OP unknown op", futex(&w[0], FUTEX_WAKE_OP | P, 1, (void *)1L, &w[1], FUTEX_OP(6, 1, 0, 0)));
		CALL("WAKE_OP unmapped second word", futex(&w[0], FUTEX_WAKE_OP | P, 1, (void *)1L, (uint32_t *)none, FUTEX_OP(0, 1, 0, 0)));
		printf("%-44s %u\n", "  word after", w[1]);
	}
	printf("-- futex2\n");
	w[2] = 3;
	CALL("futex_wait mismatch", syscall(SYS_WAIT2, &w[2], 2UL, ~0UL >> 32, F2_U32_PRIVATE, NULL, 0));
	struct timespec mono = ts_after_now(CLOCK_MONOTONIC, 1000000);
	CALL("futex_wait 1 ms", syscall(SYS_WAIT2, &w[2], 3UL, ~0UL >> 32, F2_U32_PRIVATE, &mono, CLOCK_MONOTONIC));
	CALL("futex_wait shared mismatch", syscall(SYS_WAIT2, &w[2], 2UL, ~0UL >> 32, 0x02, NULL, 0));
	CALL("futex_wait bad flags", syscall(SYS_WAIT2, &w[2], 2UL, ~0UL >> 32, 0x40, NULL, 0));
	CALL("futex_wake", syscall(SYS_WAKE2, &w[2], ~0UL >> 32, 1, F2_U32_PRIVATE));
	CALL("futex_wake shared", syscall(SYS_WAKE2, &w[2], ~0UL >> 32, 1, 0x02));
	CALL("futex_wake nr -1", syscall(SYS_WAKE2, &w[2], ~0UL >> 32, -1, F2_U32_PRIVATE));
	CALL("futex_wake NULL", syscall(SYS_WAKE2, NULL, ~0UL >> 32, 1, F2_U32_PRIVATE));
	CALL("futex_wake NULL shared", syscall(SYS_WAKE2, NULL, ~0UL >> 32, 1, 0x02));
	struct { uint64_t val, uaddr; uint32_t flags, reserved; } v[2] = {
		{2, (uintptr_t)&w[2], F2_U32_PRIVATE, 0}, {0, (uintptr_t)&w[3], F2_U32_PRIVATE, 0}};
	CALL("futex_waitv mismatch", syscall(SYS_WAITV, v, 2, 0, NULL, 0));
	/* Each entry's key in index order, its node word included: a NUMA entry whose node word
	 * is unmapped (EFAULT) before a later entry's misalignment (EINVAL). */
	char *nonode = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	typeof(v[0]) keys[2] = {{0, (uintptr_t)nonode, F2_U32_PRIVATE | 0x04, 0},
				{0, (uintptr_t)&w[3] + 1, F2_U32_PRIVATE, 0}};
	CALL("futex_waitv NUMA node unmapped, then misaligned", syscall(SYS_WAITV, keys, 2, 0, NULL, 0));
	munmap(nonode, 4096);
	/* A shared word on read-only private memory, where nobody can wait, fails the call (the
	 * kernel cannot key it; before it compares any value, which tests/preload/fuzz_calls.c
	 * checks in the default mode: the shared table answers a mismatch there first). */
	uint32_t *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct timespec zero = {0, 0};
	v[0].val = 3;
	v[1] = (typeof(v[1])){0, (uintptr_t)ro, 0x02, 0};
	CALL("futex_waitv, a shared word read-only", syscall(SYS_WAITV, v, 2, 0, &zero, CLOCK_MONOTONIC));
	munmap(ro, 4096);
	v[0].val = 2;
	v[1] = (typeof(v[1])){0, (uintptr_t)&w[3], F2_U32_PRIVATE, 0};
	CALL("futex_requeue mismatch", syscall(SYS_REQUEUE2, v, 0, 1, 1));
	v[0].val = 3;
	CALL("futex_requeue", syscall(SYS_REQUEUE2, v, 0, 1, 1));
	printf("-- prctl(PR_FUTEX_HASH) is compared by run.sh through its own checks\n");
	munmap(none, 4096);
}

/* ---- threads ---- */

struct sleeper {
	uint32_t *word;
	uint32_t val;
	int op;
	long ret;
	volatile int done;
};

static void *sleep_on(void *p)
{
	struct sleeper *s = p;
	while ((s->ret = futex(s->word, s->op, s->val, NULL, NULL, FUTEX_BITSET_MATCH_ANY)) == -1 && errno == EINTR)
		;
	__atomic_store_n(&s->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* The same with futex_wait (futex2); `op` is ignored: a private 32-bit word. */
static void *sleep_on2(void *p)
{
	struct sleeper *s = p;
	while ((s->ret = syscall(SYS_WAIT2, s->word, (unsigned long)s->val, ~0UL >> 32, F2_U32_PRIVATE, NULL, 0)) == -1 &&
	       errno == EINTR)
		;
	__atomic_store_n(&s->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

#define EXPECT(cond)                                                          \
	do {                                                                  \
		if (!(cond)) {                                                \
			printf("FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                           \
		}                                                             \
	} while (0)

/* Wake `word` with `op` until `n` were woken in total (sleepers may not be asleep yet). */
static long wake_until(uint32_t *word, int op, int n)
{
	long woken = 0;
	for (int i = 0; i < 100000 && woken < n; i++) {
		long r = futex(word, op, (uint32_t)(n - woken), NULL, NULL, FUTEX_BITSET_MATCH_ANY);
		if (r > 0)
			woken += r;
		else
			usleep(100);
	}
	return woken;
}

static void threaded(void)
{
	static uint32_t a __attribute__((aligned(64))), b __attribute__((aligned(64)));
	pthread_t t[3];
	struct sleeper s[3];
	for (int priv = 0; priv < 2; priv++) {
		int P = priv ? FUTEX_PRIVATE_FLAG : 0;
		/* WAIT + WAKE */
		s[0] = (struct sleeper){&a, 0, FUTEX_WAIT | P, 1, 0};
		pthread_create(&t[0], NULL, sleep_on, &s[0]);
		EXPECT(wake_until(&a, FUTEX_WAKE | P, 1) == 1);
		pthread_join(t[0], NULL);
		EXPECT(s[0].ret == 0);
		/* WAIT_BITSET + WAKE_BITSET */
		s[0] = (struct sleeper){&a, 0, FUTEX_WAIT_BITSET | P, 1, 0};
		pthread_create(&t[0], NULL, sleep_on, &s[0]);
		EXPECT(wake_until(&a, FUTEX_WAKE_BITSET | P, 1) == 1);
		pthread_join(t[0], NULL);
		EXPECT(s[0].ret == 0);
		/* CMP_REQUEUE two sleepers from a to b, then wake b. */
		for (int i = 0; i < 2; i++) {
			s[i] = (struct sleeper){&a, 0, FUTEX_WAIT | P, 1, 0};
			pthread_create(&t[i], NULL, sleep_on, &s[i]);
		}
		long moved = 0;
		for (int i = 0; i < 100000 && moved < 2; i++) {
			long r = futex(&a, FUTEX_CMP_REQUEUE | P, 0, (void *)(long)INT_MAX, &b, 0);
			moved += r > 0 ? r : 0;
			if (r <= 0)
				usleep(100);
		}
		EXPECT(moved == 2);
		EXPECT(futex(&a, FUTEX_WAKE | P, INT_MAX, NULL, NULL, 0) == 0);
		EXPECT(wake_until(&b, FUTEX_WAKE | P, 2) == 2);
		for (int i = 0; i < 2; i++) {
			pthread_join(t[i], NULL);
			EXPECT(s[i].ret == 0);
		}
		/* WAKE_OP: one sleeper on a, one on b; SET b = 1 if it was 0: both woken. */
		b = 0;
		s[0] = (struct sleeper){&a, 0, FUTEX_WAIT | P, 1, 0};
		s[1] = (struct sleeper){&b, 0, FUTEX_WAIT | P, 1, 0};
		pthread_create(&t[0], NULL, sleep_on, &s[0]);
		pthread_create(&t[1], NULL, sleep_on, &s[1]);
		usleep(20000);
		long woken = 0;
		for (int i = 0; i < 100000 && woken < 2 && !(s[0].done && s[1].done); i++) {
			long r = futex(&a, FUTEX_WAKE_OP | P, 1, (void *)1L, &b, FUTEX_OP(FUTEX_OP_SET, 0, FUTEX_OP_CMP_EQ, 0));
			woken += r > 0 ? r : 0;
			if (woken < 2)
				usleep(100);
		}
		pthread_join(t[0], NULL);
		pthread_join(t[1], NULL);
		EXPECT(woken == 2 && s[0].ret == 0 && s[1].ret == 0);
		/* A wake that bypasses syscall() (a raw system call) still reaches a sleeper. */
		a = 0;
		s[0] = (struct sleeper){&a, 0, FUTEX_WAIT | P, 1, 0};
		pthread_create(&t[0], NULL, sleep_on, &s[0]);
		for (int i = 0; i < 100000 && !__atomic_load_n(&s[0].done, __ATOMIC_SEQ_CST); i++) {
			if (priv)
				raw_futex_wake(&a, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1);
			else
				futex(&a, FUTEX_WAKE, 1, NULL, NULL, 0);
			usleep(100);
		}
		pthread_join(t[0], NULL);
		EXPECT(s[0].ret == 0);
	}
	/* futex_wake with a negative count wakes one (the kernel stops after the first). */
	a = 0;
	s[0] = (struct sleeper){&a, 0, 0, 1, 0};
	pthread_create(&t[0], NULL, sleep_on2, &s[0]);
	long woken = 0;
	for (int i = 0; i < 100000 && woken == 0; i++) {
		long r = syscall(SYS_WAKE2, &a, ~0UL >> 32, -1, F2_U32_PRIVATE);
		EXPECT(r == 0 || r == 1);
		woken += r > 0 ? r : 0;
		if (!woken)
			usleep(100);
	}
	pthread_join(t[0], NULL);
	EXPECT(woken == 1 && s[0].ret == 0);
	/* A private NULL word is a key like any other: a requeue moves a sleeper there, and a
	 * wake of NULL wakes it. */
	s[0] = (struct sleeper){&a, 0, FUTEX_WAIT_PRIVATE, 1, 0};
	pthread_create(&t[0], NULL, sleep_on, &s[0]);
	long moved = 0;
	for (int i = 0; i < 100000 && moved == 0; i++) {
		long r = futex(&a, FUTEX_REQUEUE_PRIVATE, 0, (void *)1L, NULL, 0);
		moved += r > 0 ? r : 0;
		if (!moved)
			usleep(100);
	}
	EXPECT(moved == 1);
	EXPECT(wake_until(NULL, FUTEX_WAKE_PRIVATE, 1) == 1);
	pthread_join(t[0], NULL);
	EXPECT(s[0].ret == 0);
	printf("-- threads: %s\n", failures ? "FAILED" : "ok");
}

/* ---- fork: the child has none of its parent's private waiters (its own memory, as the
 * kernel keys private futexes), so a wake of one there finds nobody at first, and then takes
 * the child's own sleeper. Also with glibc's _Fork, which runs no atfork handler. ---- */

pid_t _Fork(void); /* glibc 2.34 and later */

static void forked(const char *how, pid_t (*make_child)(void))
{
	static uint32_t w __attribute__((aligned(64)));
	__atomic_store_n(&w, 0, __ATOMIC_SEQ_CST); /* (the last round's sleepers are joined) */
	enum { N = 40 };
	pthread_t t[N];
	struct sleeper s[N];
	for (int i = 0; i < N; i++) {
		s[i] = (struct sleeper){&w, 0, FUTEX_WAIT_PRIVATE, 1, 0};
		pthread_create(&t[i], NULL, sleep_on, &s[i]);
	}
	usleep(50000); /* most are asleep by now (one that is not makes the check weaker only) */
	fflush(stdout);
	pid_t pid = make_child();
	if (pid == 0) {
		if (futex(&w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0) != 0)
			_exit(2);
		struct sleeper c = {&w, 0, FUTEX_WAIT_PRIVATE, 1, 0};
		pthread_t ct;
		pthread_create(&ct, NULL, sleep_on, &c);
		long woken = wake_until(&w, FUTEX_WAKE_PRIVATE, 1);
		for (int i = 0; i < 100000 && !__atomic_load_n(&c.done, __ATOMIC_SEQ_CST); i++)
			usleep(100);
		_exit(woken == 1 && c.done && c.ret == 0 ? 0 : 1);
	}
	int st = 0;
	EXPECT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		printf("   %s: the child's status %#x\n", how, st);
	/* The parent's sleepers are all still there: they wake (or find the word changed). */
	__atomic_store_n(&w, 1, __ATOMIC_SEQ_CST);
	for (int i = 0, all = 0; i < 100000 && !all; i++) {
		futex(&w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
		all = 1;
		for (int k = 0; k < N; k++)
			all &= __atomic_load_n(&s[k].done, __ATOMIC_SEQ_CST);
		if (!all)
			usleep(100);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		EXPECT(s[i].ret == 0 || s[i].ret == -1); /* woken, or EAGAIN: never asleep */
	}
	printf("-- %s: %s\n", how, failures ? "FAILED" : "ok");
}

/* ---- a thread-id word: the kernel clears it and wakes it (CLONE_CHILD_CLEARTID) when the
 * thread exits; a waiter on it through syscall(SYS_futex, FUTEX_WAIT) must see that. ---- */

#if defined(__x86_64__)
/* The child runs without a C runtime (no TLS): it only spins a while and exits by a raw call. */
static int bare_child(void *arg)
{
	volatile long *spin = arg;
	for (long i = 0; i < *spin; i++)
		__asm__ volatile("" ::: "memory");
	__asm__ volatile("syscall" ::"a"((long)SYS_exit), "D"(0L) : "rcx", "r11", "memory");
	return 0;
}

static void tid_word(void)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));
	static volatile long spin = 20000000;
	static pid_t ctid;
	int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
		    CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID;
	pid_t tid = clone(bare_child, stack + sizeof stack, flags, (void *)&spin, NULL, NULL, &ctid);
	EXPECT(tid > 0);
	long waits = 0;
	for (pid_t v; (v = __atomic_load_n(&ctid, __ATOMIC_ACQUIRE)) != 0; waits++) {
		long r = futex((uint32_t *)&ctid, FUTEX_WAIT, (uint32_t)v, NULL, NULL, 0);
		EXPECT(r == 0 || errno == EAGAIN || errno == EINTR);
	}
	printf("-- thread-id word: cleared and woken at exit\n");
}
#else
static void tid_word(void)
{
	printf("-- thread-id word: cleared and woken at exit\n"); /* x86_64 only: a bare clone */
}
#endif

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	single_threaded();
	threaded();
	forked("fork", fork);
	forked("_Fork", _Fork);
	tid_word();
	return failures ? 1 : 0;
}
