/*
 * Differential test against the running kernel: the same random calls go to the futex2 system
 * calls and to libufutex, restricted to what both support (32-bit words, private and
 * process-shared, no NUMA, at most 128 waitv entries), and must give the same result or the
 * same errno. This checks the validation order against the kernel itself rather than against
 * our reading of it. Shared words (no UFUTEX_PRIVATE) go to ufutex's own shared table (the
 * default mode; the table lives in a fresh UFUTEX_SHARED_DIR, removed at the end) and to the
 * kernel's shared futex: heap words (keyed by process and address on both sides), words in
 * MAP_SHARED | MAP_ANONYMOUS memory, and a read-only private anonymous page.
 *
 *     diff_kernel [CALLS [SEED]]      (default 200000 calls, seed 1)
 *
 * FUTEX_WAKE_OP (legacy SYS_futex), private and shared, is compared with ufutex_wake_op,
 * including the word it changes.
 * Single-threaded, so no call has a waiter to find; nothing can block: a NULL timeout goes
 * only with a vector or value that is sure to mismatch, other timeouts are in the past.
 * Where ufutex differs from the kernel on purpose, the input is not generated:
 *  - a NULL word in a wake or as the requeue target is EFAULT for us (API.md), 0 for the kernel;
 *  - a wake with nr < 0 is EINVAL for us (later mainline's choice), 0 for 6.18;
 *  - words in [TASK_SIZE, 2^56): the kernel's user limit depends on the paging mode;
 *  - sizes other than 32 bits, NUMA/MPOL flags, more than 128 waitv entries (ufutex takes
 *    every size and up to 1024 entries).
 * A known difference of shared words, generated, counted and printed as "known", not a failure:
 * a shared word in read-only private anonymous memory. The kernel looks the page up first and
 * answers EFAULT to every call ("a read-only anonymous page will never change"); ufutex's fast
 * paths do not ask what backs a page, so a wait, waitv or requeue that mismatches is EAGAIN, a
 * wake (nobody can be waiting there) returns 0, and a requeue whose target (or a wake-op whose
 * first word) is such a page goes on. A wait that would queue is EFAULT on both. Everything
 * else about shared words — the order in which waitv, requeue and wake-op find an unmapped
 * shared page (key by key, in index order, before any value or operation) included — must
 * agree. To make the known kind a failure, return 0 from
 * known_shared_difference().
 * Exits 0 when the kernel lacks the futex2 calls (ENOSYS), saying so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <ufutex.h>
#include <unistd.h>

#include "deadline.h"
#include "rng.h"

enum { SYS_WAITV = 449, SYS_WAKE = 454, SYS_WAIT = 455, SYS_REQUEUE = 456 };


enum { WORDS = 64 };
static uint32_t *arena, *shm;
static char *inaccessible, *unmapped, *readonly;
static long calls_compared, divergences, known_divergences;

static unsigned rand_flags(void)
{
	unsigned f = (below(2) ? UFUTEX_PRIVATE : 0) | UFUTEX_SIZE_U32;
	if (below(8) == 0) {
		static const unsigned unknown[] = {0x10, 0x20, 0x40, 0x100, 0x8000, 0x80000000u};
		f |= unknown[below(6)];
		if (below(2))
			f = (f & ~UFUTEX_SIZE_MASK) | (unsigned)below(4); /* any size: EINVAL regardless */
	}
	return f;
}

/* A word address both sides treat alike; `nonnull` leaves NULL out. */
static uint64_t rand_addr(int nonnull)
{
	switch (below(12)) {
	case 0: return nonnull ? (uint64_t)(uintptr_t)arena : 0;
	case 1: return (uint64_t)(uintptr_t)inaccessible + 4 * below(1024);
	case 2: return (uint64_t)(uintptr_t)unmapped + 4 * below(1024);
	case 3: return 0xffff800000000000ULL + 4 * below(1 << 20);
	case 4: return (uint64_t)(uintptr_t)arena + 1 + below(WORDS * 4 - 2); /* mostly misaligned */
	case 5: return 4 + 4 * below(1000);                                   /* below mmap_min_addr */
	case 6: return (uint64_t)(uintptr_t)readonly + 4 * below(1024);
	case 7: case 8: return (uint64_t)(uintptr_t)&shm[below(WORDS)];
	default: return (uint64_t)(uintptr_t)&arena[below(WORDS)];
	}
}

static int in_range(uint64_t a, const void *lo, size_t len)
{
	return a >= (uintptr_t)lo && a < (uintptr_t)lo + len && a % 4 == 0;
}

/* A valid, writable word: in the heap arena or the shared one. */
static int in_arena(uint64_t a)
{
	return in_range(a, arena, WORDS * 4) || in_range(a, shm, WORDS * 4);
}

/* A shared word on the read-only page: the first known difference. */
static int ro_shared(uint64_t a, unsigned flags)
{
	return !(flags & UFUTEX_PRIVATE) && in_range(a, readonly, 4096);
}

static int known_shared_difference(void)
{
	return 1;
}

static uint64_t rand_val(uint64_t a)
{
	if ((in_arena(a) || in_range(a, readonly, 4096)) && below(2))
		return *(uint32_t *)(uintptr_t)a;
	switch (below(4)) {
	case 0: return rnd();
	case 1: return 1ULL << 32 | below(4);
	default: return below(4);
	}
}

static unsigned long rand_mask(void)
{
	switch (below(6)) {
	case 0: return 0;
	case 1: return rnd();
	case 2: return 1UL << 32;
	default: return 0xffffffffUL >> below(32);
	}
}

static struct timespec ts;
/* A timeout that cannot block: past, invalid, unmapped, or NULL if `null_ok`. */
static const struct timespec *rand_timeout(int null_ok, clockid_t *clk)
{
	static const clockid_t clocks[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI, -1, 99};
	*clk = below(4) ? clocks[below(2)] : clocks[below(6)];
	switch (below(8)) {
	case 1: return (const struct timespec *)inaccessible;
	case 2: ts = (struct timespec){0, 1000000000L}; return &ts;
	case 3: ts = (struct timespec){-1, 0}; return &ts;
	case 4: ts = (struct timespec){0, -5}; return &ts;
	case 0:
		if (null_ok)
			return NULL;
		/* fall through - a past deadline on this call's clock, not the last call's */
	default: /* up to 1000 s in the past, from now (a fresh machine's monotonic clock is small) */
		ts = ts_before_now(*clk, below(1000ULL * 1000000000ULL));
		return &ts;
	}
}

/* Divergences grouped by (call, kernel outcome, ufutex outcome), with the first input of each. */
static struct {
	const char *op;
	long rk, ru;
	int ek, eu;
	long count;
	int known;
	char first[200];
} kinds[64];
static int nkinds;

/* Agreements by call and outcome: [call][0] successes, [call][errno] shared failures. */
static long agreed[5][128];

static int op_index(const char *op)
{
	if (strncmp(op, "wake_op", 7) == 0)
		return 4;
	return op[0] == 'r' ? 3 : op[0] == 'w' && op[2] == 'k' ? 1 : op[0] == 'w' && op[4] == 'v' ? 2 : 0;
}

/* `known`: the input is one of the known differences (see the top); a divergence there is
 * counted apart and does not fail the run. */
static void compare_known(const char *op, long rk, int ek, long ru, int eu, const char *detail, int known)
{
	calls_compared++;
	if (rk == ru && (rk != -1 || ek == eu)) {
		agreed[op_index(op)][rk == -1 && ek > 0 && ek < 128 ? ek : 0]++;
		return;
	}
	if (known)
		known_divergences++;
	else
		divergences++;
	if (rk != -1)
		ek = 0;
	if (ru != -1)
		eu = 0;
	for (int i = 0; i < nkinds; i++)
		if (kinds[i].op == op && kinds[i].rk == rk && kinds[i].ru == ru && kinds[i].ek == ek && kinds[i].eu == eu &&
		    kinds[i].known == known) {
			kinds[i].count++;
			return;
		}
	if (nkinds < 64) {
		kinds[nkinds].known = known;
		kinds[nkinds].op = op;
		kinds[nkinds].rk = rk;
		kinds[nkinds].ru = ru;
		kinds[nkinds].ek = ek;
		kinds[nkinds].eu = eu;
		kinds[nkinds].count = 1;
		snprintf(kinds[nkinds].first, sizeof kinds[nkinds].first, "%s", detail);
		nkinds++;
	}
}

static void print_divergences(void)
{
	for (int i = 0; i < nkinds; i++)
		fprintf(stderr, "%s %ld x: %s kernel %ld/%s ufutex %ld/%s, first: %s\n",
			kinds[i].known ? "known difference" : "diverges", kinds[i].count, kinds[i].op,
			kinds[i].rk, kinds[i].ek ? strerror(kinds[i].ek) : "-", kinds[i].ru,
			kinds[i].eu ? strerror(kinds[i].eu) : "-", kinds[i].first);
}

static void one_wait(void)
{
	unsigned flags = rand_flags();
	uint64_t a = rand_addr(0);
	uint64_t val = rand_val(a);
	/* NULL only when the value surely mismatches a valid word, or the flags are bad. */
	int null_ok = (in_arena(a) && *(uint32_t *)(uintptr_t)a != (uint32_t)val) ||
		      (flags & ~(unsigned)UFUTEX_PRIVATE) != UFUTEX_SIZE_U32;
	clockid_t clk;
	const struct timespec *t = rand_timeout(null_ok, &clk);
	unsigned long mask = rand_mask();
	char d[160];
	snprintf(d, sizeof d, "wait a=%#llx val=%#llx mask=%#lx flags=%#x ts=%p clk=%d", (unsigned long long)a,
		 (unsigned long long)val, mask, flags, (void *)t, clk);
	errno = 0;
	long rk = syscall(SYS_WAIT, (void *)(uintptr_t)a, val, mask, flags, t, clk);
	int ek = errno;
	errno = 0;
	long ru = ufutex_wait((void *)(uintptr_t)a, val, mask, flags, t, clk);
	compare_known("wait", rk, ek, ru, errno, d, known_shared_difference() && ro_shared(a, flags));
}

static void one_wake(void)
{
	unsigned flags = rand_flags();
	uint64_t a = rand_addr(1);
	unsigned long mask = rand_mask();
	int nr = below(4) ? (int)below(3) : INT_MAX;
	char d[128];
	snprintf(d, sizeof d, "wake a=%#llx mask=%#lx nr=%d flags=%#x", (unsigned long long)a, mask, nr, flags);
	errno = 0;
	long rk = syscall(SYS_WAKE, (void *)(uintptr_t)a, mask, nr, flags);
	int ek = errno;
	errno = 0;
	long ru = ufutex_wake((void *)(uintptr_t)a, mask, nr, flags);
	compare_known("wake", rk, ek, ru, errno, d, known_shared_difference() && ro_shared(a, flags));
}

static struct ufutex_waitv vec[129];

static void one_waitv(void)
{
	unsigned n = below(16) ? 1 + (unsigned)below(6) : (unsigned)below(129);
	for (unsigned i = 0; i < n; i++) {
		uint64_t a = rand_addr(0);
		vec[i] = (struct ufutex_waitv){.val = rand_val(a), .uaddr = a, .flags = rand_flags(),
					       .__reserved = below(16) ? 0 : 1};
	}
	clockid_t clk;
	const struct timespec *t = rand_timeout(1, &clk);
	if (!t && n) { /* the last entry surely mismatches: nothing can block */
		uint32_t *w = below(2) ? &arena[0] : &shm[0];
		vec[n - 1] = (struct ufutex_waitv){.val = *w + 1ULL, .uaddr = (uintptr_t)w,
						   .flags = (below(2) ? UFUTEX_PRIVATE : 0) | UFUTEX_SIZE_U32};
		vec[n - 1].val &= 0xffffffffULL;
	}
	int known = 0;
	for (unsigned i = 0; i < n; i++)
		known |= ro_shared(vec[i].uaddr, vec[i].flags);
	known &= known_shared_difference();
	unsigned flags = below(16) ? 0 : 1;
	struct ufutex_waitv *v = below(16) ? vec : (below(2) ? NULL : (struct ufutex_waitv *)inaccessible);
	if (!t && flags == 0 && v != vec)
		flags = 1; /* a NULL or unreadable array with NULL timeout: keep it non-blocking anyway */
	char d[128];
	snprintf(d, sizeof d, "waitv n=%u flags=%u v=%p ts=%p clk=%d e0={%#llx,%#llx,%#x,%u}", n, flags, (void *)v,
		 (void *)t, clk, (unsigned long long)vec[0].val, (unsigned long long)vec[0].uaddr, vec[0].flags,
		 vec[0].__reserved);
	errno = 0;
	long rk = syscall(SYS_WAITV, v, n, flags, t, clk);
	int ek = errno;
	errno = 0;
	long ru = ufutex_waitv(v, n, flags, t, clk);
	compare_known("waitv", rk, ek, ru, errno, d, known && v == vec);
}

static void one_requeue(void)
{
	for (int i = 0; i < 2; i++) {
		uint64_t a = rand_addr(i == 1);
		vec[i] = (struct ufutex_waitv){.val = rand_val(a), .uaddr = a, .flags = rand_flags(),
					       .__reserved = below(16) ? 0 : 1};
	}
	if (below(2))
		vec[1].flags = vec[0].flags;
	struct ufutex_waitv *v = below(16) ? vec : (below(2) ? NULL : (struct ufutex_waitv *)inaccessible);
	unsigned flags = below(16) ? 0 : 1;
	int nw = below(4) ? (int)below(3) : -1, nq = below(4) ? (int)below(3) : -1;
	char d[160];
	snprintf(d, sizeof d, "requeue flags=%u nw=%d nq=%d e0={%#llx,%#llx,%#x,%u} e1={%#llx,%#x,%u}", flags, nw, nq,
		 (unsigned long long)vec[0].val, (unsigned long long)vec[0].uaddr, vec[0].flags, vec[0].__reserved,
		 (unsigned long long)vec[1].uaddr, vec[1].flags, vec[1].__reserved);
	errno = 0;
	long rk = syscall(SYS_REQUEUE, v, flags, nw, nq);
	int ek = errno;
	errno = 0;
	long ru = ufutex_requeue(v, flags, nw, nq);
	int shared = !(vec[0].flags & UFUTEX_PRIVATE);
	int known = known_shared_difference() && v == vec && shared &&
		    (ro_shared(vec[0].uaddr, vec[0].flags) || ro_shared(vec[1].uaddr, vec[1].flags));
	compare_known("requeue", rk, ek, ru, errno, d, known);
}

/* The legacy FUTEX_WAKE_OP against ufutex_wake_op: 32-bit words, private or process-shared,
 * counts >= 0 (the kernel takes a negative count as 1, ufutex refuses it), no NULL word
 * (ufutex's contract). A shared first word on the read-only page is the known difference. */
static void one_wake_op(void)
{
	unsigned flags = below(2) ? UFUTEX_PRIVATE | UFUTEX_SIZE_U32 : UFUTEX_SIZE_U32;
	int kflags = flags & UFUTEX_PRIVATE ? FUTEX_PRIVATE_FLAG : 0;
	uint64_t a = rand_addr(1), b = rand_addr(1);
	int n1 = below(4) ? (int)below(3) : INT_MAX, n2 = below(4) ? (int)below(3) : INT_MAX;
	/* Mostly valid ops and comparisons, sometimes any of the 16 of each. */
	unsigned op = below(4) ? (unsigned)below(5) | (below(4) ? 0 : 8) : (unsigned)below(16);
	unsigned cmp = below(8) ? (unsigned)below(6) : (unsigned)below(16);
	unsigned enc = (op << 28) | (cmp << 24) | ((unsigned)below(4096) << 12) | (unsigned)below(4096);
	uint32_t saved[WORDS], saved_shm[WORDS];
	memcpy(saved, arena, sizeof saved);
	memcpy(saved_shm, shm, sizeof saved_shm);
	char d[128];
	snprintf(d, sizeof d, "wake_op a=%#llx b=%#llx n1=%d n2=%d op=%#x flags=%#x", (unsigned long long)a,
		 (unsigned long long)b, n1, n2, enc, flags);
	errno = 0;
	long rk = syscall(SYS_futex, (void *)(uintptr_t)a, FUTEX_WAKE_OP | kflags, n1, (void *)(uintptr_t)n2,
			  (void *)(uintptr_t)b, enc);
	int ek = errno;
	uint32_t after_kernel[WORDS], after_kernel_shm[WORDS];
	memcpy(after_kernel, arena, sizeof after_kernel);
	memcpy(after_kernel_shm, shm, sizeof after_kernel_shm);
	memcpy(arena, saved, sizeof saved);
	memcpy(shm, saved_shm, sizeof saved_shm);
	errno = 0;
	long ru = ufutex_wake_op((void *)(uintptr_t)a, (void *)(uintptr_t)b, n1, n2, enc, flags);
	int known = known_shared_difference() && ro_shared(a, flags);
	compare_known("wake_op", rk, ek, ru, errno, d, known);
	if (memcmp(after_kernel, arena, sizeof after_kernel) != 0 || memcmp(after_kernel_shm, shm, sizeof after_kernel_shm) != 0)
		compare_known("wake_op word", 0, 0, 1, 0, d, known); /* the operation changed the word differently */
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200000;
	rng_state = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
	if (!rng_state)
		rng_state = 1;
	if (syscall(SYS_WAKE, &rng_state, 1UL, 0, UFUTEX_PRIVATE | UFUTEX_SIZE_U32) == -1 && errno == ENOSYS) {
		puts("diff_kernel: this kernel has no futex2 calls; skipped");
		return 0;
	}
	/* Our own shared table, before any shared call: never the user's. */
	char dir[] = "/tmp/ufutex-diff-XXXXXX";
	if (!mkdtemp(dir) || chmod(dir, 0700) != 0)
		return 2;
	setenv("UFUTEX_SHARED_DIR", dir, 1);
	unsetenv("UFUTEX_SHARED");
	arena = aligned_alloc(64, WORDS * 4);
	shm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!arena || shm == MAP_FAILED)
		return 2;
	for (int i = 0; i < WORDS; i++) {
		arena[i] = (uint32_t)below(3);
		shm[i] = (uint32_t)below(3);
	}
	/* Read-only private anonymous, with values (written before it was made read-only). */
	uint32_t *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro == MAP_FAILED)
		return 2;
	for (int i = 0; i < 1024; i++)
		ro[i] = (uint32_t)below(3);
	if (mprotect(ro, 4096, PROT_READ) != 0)
		return 2;
	readonly = (char *)ro;
	inaccessible = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unmapped = (char *)0x8000; /* never mapped: below mmap_min_addr */
	if (inaccessible == MAP_FAILED)
		return 2;
	for (long i = 0; i < calls; i++) {
		switch (below(5)) {
		case 0: one_wait(); break;
		case 1: one_wake(); break;
		case 2: one_waitv(); break;
		case 3: one_wake_op(); break;
		default: one_requeue(); break;
		}
	}
	print_divergences();
	static const char *ops[5] = {"wait", "wake", "waitv", "requeue", "wake_op"};
	static const int errs[] = {EINVAL, EFAULT, EAGAIN, ETIMEDOUT, ENOSYS};
	for (int o = 0; o < 5; o++) {
		printf("  %-8s agreed: ok %ld", ops[o], agreed[o][0]);
		for (int i = 0; i < 5; i++)
			printf("  %s %ld", strerror(errs[i]), agreed[o][errs[i]]);
		printf("\n");
	}
	printf("diff_kernel: %ld calls compared, %ld divergences, %ld known differences (see the source)\n",
	       calls_compared, divergences, known_divergences);
	char table[64];
	snprintf(table, sizeof table, "%s/table", dir);
	unlink(table);
	rmdir(dir);
	return divergences ? 1 : 0;
}
