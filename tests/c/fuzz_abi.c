/*
 * A seeded random-call driver for the C ABI: random flags, sizes, values, masks, counts,
 * addresses (NULL, misaligned, inaccessible, unmapped, kernel-half, wild, valid), timespecs
 * and vectors, while two helper threads wake and wait on the same words. Every result must be
 * one the header allows for that call; nothing may crash or hang. Words are private or
 * process-shared (no UFUTEX_PRIVATE), on the heap, in MAP_SHARED | MAP_ANONYMOUS memory that a
 * forked helper process also waits on and wakes, or on a read-only private page; vectors mix
 * both kinds. The shared table lives in a fresh directory (UFUTEX_SHARED_DIR), removed at the
 * end. Afterwards, valid calls must still work (a full wait/wake, waitv and requeue round on
 * every size, private and shared).
 *
 *     fuzz_abi [CALLS [SEED]]      (default 1000000 calls, seed 1)
 *
 * No call can block for long: a wait or waitv that could match gets an absolute timeout in
 * the past or at most 50 us ahead; a NULL timeout goes only with call flags that are rejected.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <ufutex.h>
#include <unistd.h>

#include "deadline.h"
#include "rng.h"



enum { ARENA_WORDS = 64 };
static uint64_t *arena;         /* valid words, shared with the helpers */
static uint64_t *shm;           /* valid words in MAP_SHARED memory, shared with a helper process */
static char *readonly;          /* a PROT_READ private anonymous page */
static char *inaccessible;      /* PROT_NONE page */
static char *unmapped;          /* a hole */
static struct ufutex_waitv *vec; /* room for UFUTEX_WAITV_MAX + 1 entries */
static int stop;

static void die(const char *what, long r, int e)
{
	fprintf(stderr, "fuzz_abi: %s returned %ld errno %d (%s), seed state %llx\n", what, r, e, strerror(e),
		(unsigned long long)rng_state);
	exit(1);
}

static unsigned rand_flags(void)
{
	unsigned f;
	switch (below(16)) {
	case 0: return (unsigned)rnd();                           /* anything */
	case 1: f = UFUTEX_NUMA | (unsigned)below(4); break;
	case 2: f = UFUTEX_MPOL | (unsigned)below(4); break;
	case 3: f = (1u << (4 + below(28))) | (unsigned)below(4); break; /* unknown bit */
	default: f = (unsigned)below(4); break;
	}
	return below(5) < 2 ? f & ~(unsigned)UFUTEX_PRIVATE : f | UFUTEX_PRIVATE; /* 2 in 5 shared */
}

static unsigned size_bytes(unsigned flags)
{
	return 1u << (flags & UFUTEX_SIZE_MASK);
}

static uint64_t rand_addr(unsigned flags)
{
	unsigned sz = size_bytes(flags);
	switch (below(20)) {
	case 0: return 0;
	case 1: return (uint64_t)(uintptr_t)(inaccessible + below(4096 / sz) * sz);
	case 2: return (uint64_t)(uintptr_t)(unmapped + below(4096 / sz) * sz);
	case 3: return 0xffff800000000000ULL + below(1 << 20) * 8;
	case 4: return rnd();                                                  /* wild */
	case 5: return (uint64_t)(uintptr_t)arena + 1 + below(ARENA_WORDS * 8 - 2); /* maybe misaligned */
	case 6: return below(4096) & ~7ULL;                                    /* the zero page region */
	case 7: return (uint64_t)(uintptr_t)(readonly + below(4096 / sz) * sz);
	case 8: case 9: case 10: case 11: case 12:
		return (uint64_t)(uintptr_t)((char *)shm + below(ARENA_WORDS * 8 / sz) * sz);
	default: return (uint64_t)(uintptr_t)((char *)arena + below(ARENA_WORDS * 8 / sz) * sz);
	}
}

/* What the word at addr holds now, if it is in the arena (so that waits often match). */
static uint64_t rand_val(uint64_t addr, unsigned flags)
{
	uintptr_t a = (uintptr_t)addr, lo = (uintptr_t)arena, slo = (uintptr_t)shm;
	unsigned sz = size_bytes(flags);
	int in = (a >= lo && a + sz <= lo + ARENA_WORDS * 8) || (a >= slo && a + sz <= slo + ARENA_WORDS * 8);
	if (below(4) && in && a % sz == 0) {
		switch (sz) {
		case 1: return __atomic_load_n((uint8_t *)a, __ATOMIC_RELAXED);
		case 2: return __atomic_load_n((uint16_t *)a, __ATOMIC_RELAXED);
		case 4: return __atomic_load_n((uint32_t *)a, __ATOMIC_RELAXED);
		default: return __atomic_load_n((uint64_t *)a, __ATOMIC_RELAXED);
		}
	}
	switch (below(4)) {
	case 0: return rnd();
	case 1: return below(3);
	default: return rnd() & (sz == 8 ? ~0ULL : (1ULL << (8 * sz)) - 1);
	}
}

static unsigned long rand_mask(void)
{
	switch (below(8)) {
	case 0: return 0;
	case 1: return rnd();
	case 2: return ~0UL;
	default: return 1UL << below(8);
	}
}

static int rand_count(void)
{
	switch (below(8)) {
	case 0: return -(int)below(3) - 1;
	case 1: return INT_MIN;
	case 2: return INT_MAX;
	default: return (int)below(4);
	}
}

static struct timespec ts_store;

/* A timeout that cannot make a call block for long; `*null_ok` says whether NULL was chosen. */
static const struct timespec *rand_timeout(clockid_t *clk, int *is_null)
{
	*is_null = 0;
	*clk = below(8) ? (below(2) ? CLOCK_MONOTONIC : CLOCK_REALTIME) : (clockid_t)below(12);
	switch (below(12)) {
	case 0: *is_null = 1; return NULL;
	case 1: return (const struct timespec *)inaccessible;
	case 2: return (const struct timespec *)unmapped;
	case 3: ts_store = (struct timespec){.tv_sec = 0, .tv_nsec = 1000000000L + (long)below(10)}; break;
	case 4: ts_store = (struct timespec){.tv_sec = -(long)below(5) - 1, .tv_nsec = 0}; break;
	case 5: ts_store = (struct timespec){.tv_sec = 0, .tv_nsec = -1}; break;
	case 6: /* up to 50 us ahead on the chosen clock */
		if (*clk == CLOCK_MONOTONIC || *clk == CLOCK_REALTIME) {
			ts_store = ts_after_now(*clk, below(50000));
			break;
		}
		/* fall through */
	default: /* up to 1000 s in the past (clamped at the clock's epoch on a fresh machine) */
		ts_store = ts_before_now(*clk, below(1000ULL * 1000000000ULL));
		break;
	}
	return &ts_store;
}

/* Outcomes per call: [op][0] successes, [op][errno] failures (errno < 128). */
enum { OP_WAIT, OP_WAKE, OP_WAITV, OP_REQUEUE, OP_SLOTS, OP_WAKE_OP, OPS };
static long outcomes[OPS][128];

static void check(int op, const char *what, long r, int e, long max_ok, const char *errs)
{
	if (r >= 0 && r <= max_ok) {
		outcomes[op][0]++;
		return;
	}
	if (r == -1)
		for (const char *p = errs; *p; p++)
			if (*p == e) {
				outcomes[op][e]++;
				return;
			}
	die(what, r, e);
}

static void print_outcomes(void)
{
	static const char *ops[OPS] = {"wait", "wake", "waitv", "requeue", "set_slots", "wake_op"};
	static const int errs[] = {EINVAL, EFAULT, EOPNOTSUPP, EAGAIN, ETIMEDOUT, ENOMEM, ENOSYS};
	static const char *names[] = {"EINVAL", "EFAULT", "EOPNOTSUPP", "EAGAIN", "ETIMEDOUT", "ENOMEM", "ENOSYS"};
	for (int op = 0; op < OPS; op++) {
		printf("  %-9s ok %7ld", ops[op], outcomes[op][0]);
		for (int i = 0; i < 7; i++)
			if (outcomes[op][errs[i]])
				printf("  %s %ld", names[i], outcomes[op][errs[i]]);
		printf("\n");
	}
}

static const char wait_errs[] = {EINVAL, EFAULT, EOPNOTSUPP, EAGAIN, ETIMEDOUT, 0};
static const char wake_errs[] = {EINVAL, EFAULT, EOPNOTSUPP, 0};
static const char waitv_errs[] = {EINVAL, EFAULT, EOPNOTSUPP, EAGAIN, ETIMEDOUT, ENOMEM, 0};
static const char requeue_errs[] = {EINVAL, EFAULT, EOPNOTSUPP, EAGAIN, 0};
static const char slots_errs[] = {EINVAL, ENOMEM, 0};
static const char wake_op_errs[] = {EINVAL, EFAULT, EOPNOTSUPP, ENOSYS, 0};

static void one_wait(void)
{
	unsigned flags = rand_flags();
	uint64_t addr = rand_addr(flags);
	clockid_t clk;
	int is_null;
	const struct timespec *ts = rand_timeout(&clk, &is_null);
	if (is_null)
		flags |= 0x40; /* a NULL timeout only with a flag that is rejected */
	errno = 0;
	long r = ufutex_wait((void *)(uintptr_t)addr, rand_val(addr, flags), below(8) ? (size_bytes(flags) == 8 ? ~0UL : (1UL << (8 * size_bytes(flags))) - 1) : rand_mask(), flags, ts,
			     clk);
	check(OP_WAIT, "wait", r, errno, 0, wait_errs);
	if (is_null && r != -1)
		die("wait with a bad flag", r, errno);
}

/* FUTEX_WAKE_OP on two random words (the helpers sleep on and wake the arena's): any flags
 * (only private 32-bit words are valid), any counts, a mostly valid operation word. */
static void one_wake_op(void)
{
	unsigned flags = below(2) ? (UFUTEX_PRIVATE | UFUTEX_SIZE_U32) : rand_flags();
	int n1 = rand_count(), n2 = rand_count();
	unsigned op = below(4) ? (unsigned)below(5) | (below(4) ? 0 : 8) : (unsigned)below(16);
	unsigned cmp = below(8) ? (unsigned)below(6) : (unsigned)below(16);
	unsigned enc = (op << 28) | (cmp << 24) | ((unsigned)below(4096) << 12) | (unsigned)below(4096);
	errno = 0;
	long r = ufutex_wake_op((void *)(uintptr_t)rand_addr(flags), (void *)(uintptr_t)rand_addr(flags), n1, n2, enc,
				flags);
	check(OP_WAKE_OP, "wake_op", r, errno, n1 < 0 || n2 < 0 ? 0 : (long)n1 + n2, wake_op_errs);
}

static void one_wake(void)
{
	unsigned flags = rand_flags();
	errno = 0;
	int nr = rand_count();
	long r = ufutex_wake((void *)(uintptr_t)rand_addr(flags), rand_mask(), nr, flags);
	check(OP_WAKE, "wake", r, errno, nr < 0 ? 0 : nr, wake_errs);
}

static void fill_entries(unsigned n, int same_flags)
{
	unsigned f0 = rand_flags();
	for (unsigned i = 0; i < n; i++) {
		unsigned f = same_flags ? f0 : (below(4) ? f0 : rand_flags());
		uint64_t a = rand_addr(f);
		vec[i] = (struct ufutex_waitv){.val = rand_val(a, f), .uaddr = a, .flags = f,
					       .__reserved = below(32) ? 0 : (uint32_t)rnd()};
	}
}

static void one_waitv(void)
{
	unsigned n;
	switch (below(16)) {
	case 0: n = 0; break;
	case 1: n = UFUTEX_WAITV_MAX + (unsigned)below(2); break;
	case 2: n = 1 + (unsigned)below(UFUTEX_WAITV_MAX); break;
	default: n = 1 + (unsigned)below(8); break;
	}
	unsigned flags = below(16) ? 0 : (unsigned)rnd();
	clockid_t clk;
	int is_null;
	const struct timespec *ts = rand_timeout(&clk, &is_null);
	if (is_null && !flags)
		flags = 1;
	fill_entries(n <= UFUTEX_WAITV_MAX ? n : UFUTEX_WAITV_MAX, 0);
	struct ufutex_waitv *v = vec;
	switch (below(16)) {
	case 0: v = NULL; break;
	case 1: v = (struct ufutex_waitv *)inaccessible; break;
	case 2: v = (struct ufutex_waitv *)(unmapped + 4096 - 24 * below(3)); break;
	}
	errno = 0;
	long r = ufutex_waitv(v, n, flags, ts, clk);
	check(OP_WAITV, "waitv", r, errno, (long)n - 1, waitv_errs);
}

static void one_requeue(void)
{
	fill_entries(2, below(8) != 0);
	struct ufutex_waitv *v = below(16) ? vec : (below(2) ? NULL : (struct ufutex_waitv *)inaccessible);
	unsigned flags = below(16) ? 0 : (unsigned)rnd();
	int nw = rand_count(), nq = rand_count();
	errno = 0;
	long r = ufutex_requeue(v, flags, nw, nq);
	long max = (nw < 0 || nq < 0) ? 0 : (long)nw + nq;
	check(OP_REQUEUE, "requeue", r, errno, max, requeue_errs);
}

static void one_slots(void)
{
	unsigned long s = below(4) ? 1UL << (1 + below(12)) : rnd() % 5000 + 1; /* never 0: final */
	errno = 0;
	long r = ufutex_hash_set_slots(s, below(8) ? 0 : rnd());
	check(OP_SLOTS, "set_slots", r, errno, 0, slots_errs);
	r = ufutex_hash_get_slots();
	if (r < 2)
		die("get_slots", r, 0);
}

/* Helpers: one changes words and wakes them, one waits on them with short timeouts. */
static void *waker(void *p)
{
	uint64_t seed = (uintptr_t)p;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned i = (unsigned)(seed >> 33) % ARENA_WORDS;
		if ((seed >> 20) & 1)
			__atomic_add_fetch(&arena[i], 1, __ATOMIC_SEQ_CST);
		ufutex_wake(&arena[i], ~0UL, INT_MAX, UFUTEX_PRIVATE | UFUTEX_SIZE_U64);
		ufutex_wake(&arena[i], ~0UL >> 32, INT_MAX, UFUTEX_PRIVATE | UFUTEX_SIZE_U32);
		if ((seed >> 21) & 1)
			__atomic_add_fetch(&shm[i], 1, __ATOMIC_SEQ_CST);
		ufutex_wake(&shm[i], ~0UL, INT_MAX, UFUTEX_SIZE_U64);
		ufutex_wake(&shm[i], 0xff, INT_MAX, UFUTEX_SIZE_U8);
		struct timespec pause = {0, 20000};
		nanosleep(&pause, NULL);
	}
	return NULL;
}

static void *sleeper(void *p)
{
	uint64_t seed = (uintptr_t)p;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned i = (unsigned)(seed >> 33) % ARENA_WORDS;
		struct timespec t = ts_after_now(CLOCK_MONOTONIC, 200000);
		uint32_t *w = (uint32_t *)&arena[i];
		ufutex_wait(w, __atomic_load_n(w, __ATOMIC_SEQ_CST), 1, UFUTEX_PRIVATE | UFUTEX_SIZE_U32, &t,
			    CLOCK_MONOTONIC);
		/* A shared word, alone or beside a private one. */
		uint32_t *sw = (uint32_t *)&shm[i];
		struct ufutex_waitv v[2] = {
			{.val = __atomic_load_n(sw, __ATOMIC_SEQ_CST), .uaddr = (uintptr_t)sw, .flags = UFUTEX_SIZE_U32},
			{.val = __atomic_load_n(w, __ATOMIC_SEQ_CST), .uaddr = (uintptr_t)w,
			 .flags = UFUTEX_PRIVATE | UFUTEX_SIZE_U32},
		};
		ufutex_waitv(v, 1 + (unsigned)((seed >> 40) & 1), 0, &t, CLOCK_MONOTONIC);
	}
	return NULL;
}

/* The helper process: waits on and wakes the shared words until told to stop (or orphaned),
 * every wait 200 us at most. */
static volatile uint32_t *helper_stop; /* in shared memory */

static void helper_process(pid_t parent)
{
	uint64_t seed = 12345;
	while (!__atomic_load_n(helper_stop, __ATOMIC_RELAXED) && getppid() == parent) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned i = (unsigned)(seed >> 33) % ARENA_WORDS;
		unsigned s = (unsigned)(seed >> 50) & 3;
		char *w = (char *)&shm[i];
		if ((seed >> 20) & 1) {
			__atomic_add_fetch(&shm[i], 1, __ATOMIC_SEQ_CST);
			ufutex_wake(w, ~0UL >> (64 - 8 * (1u << s)), INT_MAX, s);
			continue;
		}
		struct timespec t = ts_after_now(CLOCK_MONOTONIC, 200000);
		uint64_t v = __atomic_load_n(&shm[i], __ATOMIC_SEQ_CST);
		uint64_t val = s == 3 ? v : v & ((1ULL << (8 * (1u << s))) - 1); /* little-endian */
		ufutex_wait(w, val, ~0UL >> (64 - 8 * (1u << s)), s, &t, CLOCK_MONOTONIC);
	}
	_exit(0);
}

struct rt {
	void *uaddr;
	unsigned flags;
	long ret;
};

static void *rt_wait(void *p)
{
	struct rt *r = p;
	struct timespec d;
	clock_gettime(CLOCK_MONOTONIC, &d);
	d.tv_sec += 60; /* woken at once below; the deadline only bounds a failure */
	r->ret = ufutex_wait(r->uaddr, 0, 1, r->flags, &d, CLOCK_MONOTONIC);
	return NULL;
}

/* After the storm: every call still does its job on every size, private and shared (on the
 * heap and in shared memory). */
static void still_works(void)
{
	for (unsigned k = 0; k < 12; k++) {
		unsigned s = k % 4;
		uint64_t ha = 0, hb = 0;
		uint64_t *sa = &shm[ARENA_WORDS], *sb = &shm[ARENA_WORDS + 8];
		*sa = *sb = 0;
		uint64_t *pa = k < 8 ? &ha : sa, *pb = k < 8 ? &hb : sb;
		unsigned flags = (k < 4 ? UFUTEX_PRIVATE : 0) | s;
		struct rt w = {.uaddr = pa, .flags = flags};
		pthread_t t;
		pthread_create(&t, NULL, rt_wait, &w);
		struct ufutex_waitv ab[2] = {{.uaddr = (uintptr_t)pa, .flags = flags}, {.uaddr = (uintptr_t)pb, .flags = flags}};
		long moved = 0;
		for (long i = 0; i < 10000000 && (moved = ufutex_requeue(ab, 0, 0, 1)) == 0; i++)
			sched_yield();
		if (moved != 1)
			die("still_works: requeue", moved, errno);
		if (ufutex_wake(pa, 1, 1, flags) != 0 || ufutex_wake(pb, 1, 1, flags) != 1)
			die("still_works: requeued waiter not on the target", 0, 0);
		pthread_join(t, NULL);
		if (w.ret != 0)
			die("still_works: wait", w.ret, 0);
		struct timespec past = {0, 0};
		errno = 0;
		if (ufutex_waitv(ab, 2, 0, &past, CLOCK_REALTIME) != -1 || errno != ETIMEDOUT)
			die("still_works: waitv", -1, errno);
	}
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 1000000;
	rng_state = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
	if (!rng_state)
		rng_state = 1;
	/* Our own shared table, before any shared call: never the user's. */
	char dir[] = "/tmp/ufutex-fuzz-XXXXXX";
	if (!mkdtemp(dir) || chmod(dir, 0700) != 0)
		die("mkdtemp", -1, errno);
	setenv("UFUTEX_SHARED_DIR", dir, 1);
	unsetenv("UFUTEX_SHARED");
	arena = aligned_alloc(64, ARENA_WORDS * 8);
	memset(arena, 0, ARENA_WORDS * 8);
	/* ARENA_WORDS fuzzed words, then room for still_works, then the helper's stop flag. */
	shm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	readonly = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED || readonly == MAP_FAILED)
		die("mmap", -1, errno);
	helper_stop = (volatile uint32_t *)&shm[4096 / 8 - 1];
	vec = calloc(UFUTEX_WAITV_MAX + 1, sizeof(*vec));
	inaccessible = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* Never mapped: below mmap_min_addr (a hole punched into a mapping can be refilled). */
	unmapped = (char *)0x8000;
	if (!arena || !vec || inaccessible == MAP_FAILED)
		die("setup", -1, errno);

	fflush(NULL);
	pid_t parent = getpid(), helper = fork();
	if (helper == 0)
		helper_process(parent);
	if (helper < 0)
		die("fork", -1, errno);
	pthread_t helpers[2];
	pthread_create(&helpers[0], NULL, waker, (void *)(uintptr_t)(rng_state + 1));
	pthread_create(&helpers[1], NULL, sleeper, (void *)(uintptr_t)(rng_state + 2));
	long counts[6] = {0};
	for (long i = 0; i < calls; i++) {
		unsigned op = (unsigned)below(1000);
		if (op < 350) {
			one_wait();
			counts[0]++;
		} else if (op < 610) {
			one_wake();
			counts[1]++;
		} else if (op < 650) {
			one_wake_op();
			counts[5]++;
		} else if (op < 850) {
			one_waitv();
			counts[2]++;
		} else if (op < 999) {
			one_requeue();
			counts[3]++;
		} else {
			one_slots();
			counts[4]++;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(helpers[i], NULL);
	__atomic_store_n(helper_stop, 1, __ATOMIC_RELAXED);
	int status = 0;
	if (waitpid(helper, &status, 0) != helper || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("helper process", status, errno);
	/* Wake anything the storm left queued on the arena (requeues may have moved helpers). */
	still_works();
	printf("fuzz_abi: %ld calls ok (wait %ld, wake %ld, waitv %ld, requeue %ld, slots %ld, wake_op %ld)\n", calls,
	       counts[0], counts[1], counts[2], counts[3], counts[4], counts[5]);
	print_outcomes();
	free(vec);
	free(arena);
	char table[64];
	snprintf(table, sizeof table, "%s/table", dir);
	unlink(table);
	rmdir(dir);
	return 0;
}
