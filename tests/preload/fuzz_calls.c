/*
 * Random futex calls through syscall(), one thread, as an unmodified program makes them: the
 * legacy SYS_futex operations and the futex2 calls, with arguments good and bad (addresses
 * aligned or not, NULL, unmapped, read-only, in the kernel's half; values that match or not;
 * timeouts absent, past, short, malformed or unmapped; unknown operations and flag bits). One
 * line per call: what was asked, the result and the errno. Run with and without
 * LD_PRELOAD=libufutex_preload.so, the transcripts must be the same (tests/preload/run.sh):
 * the library answers every call as the kernel would, in the same order of checks.
 *
 * No call may sleep long: a wait whose value could match gets a timeout, so the worst a call
 * costs is a short timed-out wait. The priority-inheritance operations are left out (the
 * library passes them to the kernel, and a random owner id could name another process).
 *
 *     fuzz_calls SEED CALLS [no-readonly]
 *
 * no-readonly: no address in read-only memory, for the library's shared table, which answers
 * a process-shared word there as any other (documented in ufutex.h) where the kernel says
 * EFAULT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../c/rng.h"

enum { SYS_WAITV = 449, SYS_WAKE2 = 454, SYS_WAIT2 = 455, SYS_REQUEUE2 = 456 };

struct waitv2 {
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};

static unsigned pick(unsigned n)
{
	return (unsigned)below(n);
}

static uint64_t *words;      /* a page of words whose values stay small (0..3) */
static uint64_t *readonly;   /* a page mapped read-only (it reads 0) */
static int no_readonly;     /* the third argument */
static char *unmapped;       /* a page without access (PROT_NONE): reads fault as on no page */

/* An address and what it is, for the transcript. */
static void *address(const char **what)
{
	switch (pick(12)) {
	case 0: *what = "NULL"; return NULL;
	case 1: *what = "unmapped"; return unmapped + 8 * pick(4);
	case 2:
		if (!no_readonly) {
			*what = "readonly";
			return readonly + pick(4);
		}
		*what = "word";
		return &words[pick(4)];
	case 3: *what = "kernel"; return (void *)0xffff800000001000ULL;
	case 4: *what = "odd"; return (char *)&words[pick(4)] + 1 + pick(3);
	case 5: *what = "half"; return (char *)&words[pick(4)] + 4;
	default: *what = "word"; return &words[pick(4)];
	}
}

/* A value: mostly one the words hold (so it may match), sometimes anything. */
static uint64_t value(void)
{
	switch (pick(8)) {
	case 0: return rnd();
	case 1: return 0x100000000ULL + pick(4);
	case 2: return (uint64_t)-1;
	default: return pick(4);
	}
}

/* Whether a wait on `at` for `val` (`bytes` wide) could sleep: the address reads and matches. */
static int could_sleep(void *at, uint64_t val, unsigned bytes)
{
	if (at == NULL || (uintptr_t)at >= 0xffff800000000000ULL || ((uintptr_t)at & (bytes - 1)))
		return 0;
	if ((char *)at >= unmapped && (char *)at < unmapped + 4096)
		return 0;
	uint64_t have = 0;
	memcpy(&have, at, bytes);
	uint64_t mask = bytes == 8 ? ~0ULL : (1ULL << (8 * bytes)) - 1;
	return (have & mask) == (val & mask) || val > mask;
}

static struct timespec ts;

/* A timeout for a call, relative or absolute on `clock`; never NULL when `must` is set. */
static const struct timespec *timeout(int absolute, clockid_t clock, int must, const char **what)
{
	struct timespec now;
	clock_gettime(clock == CLOCK_REALTIME ? CLOCK_REALTIME : CLOCK_MONOTONIC, &now);
	switch (pick(must ? 6 : 7)) {
	case 0: *what = "past"; ts = absolute ? (struct timespec){ now.tv_sec - 1, now.tv_nsec } : (struct timespec){ 0, 0 }; break;
	case 1: *what = "short"; ts = absolute ? now : (struct timespec){ 0, 200000 };
		if (absolute) { ts.tv_nsec += 200000; if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; } }
		break;
	case 2: *what = "nsec=1e9"; ts = (struct timespec){ absolute ? now.tv_sec : 0, 1000000000 }; break;
	case 3: *what = "sec<0"; ts = (struct timespec){ -1, 0 }; break;
	case 4: *what = "unmapped"; return (const struct timespec *)unmapped;
	case 5: *what = "zero"; ts = (struct timespec){ 0, 0 }; break;
	default: *what = "none"; return NULL;
	}
	return &ts;
}

static void report(long r)
{
	/* the result, and the words after it (a wake-op changes one) */
	printf(" -> %ld %s [%llx %llx %llx %llx]\n", r, r == -1 ? strerror(errno) : "", (unsigned long long)words[0],
	       (unsigned long long)words[1], (unsigned long long)words[2], (unsigned long long)words[3]);
	fflush(stdout);
}

static void legacy(void)
{
	static const int ops[] = { FUTEX_WAIT, FUTEX_WAKE, 2 /* FUTEX_FD, gone */, FUTEX_REQUEUE,
				   FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP, FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET,
				   14, 15, 127 };
	int base = ops[pick(sizeof ops / sizeof ops[0])];
	int op = base;
	if (pick(2))
		op |= FUTEX_PRIVATE_FLAG;
	if (pick(4) == 0)
		op |= FUTEX_CLOCK_REALTIME;
	if (pick(16) == 0)
		op |= 1 << (9 + pick(20));
	const char *aw, *bw, *tw = "-";
	void *a = address(&aw), *b = address(&bw);
	uint64_t val = value();
	uint32_t val3 = pick(3) ? (uint32_t)value() : (uint32_t)rnd();
	const struct timespec *t = NULL;
	long arg4;
	int waits = base == FUTEX_WAIT || base == FUTEX_WAIT_BITSET;
	if (base == FUTEX_WAKE_OP) /* an operation that never changes a word beyond 0..3 */
		val3 = FUTEX_OP(pick(6), pick(4), pick(7), pick(4)) | (pick(8) == 0 ? (uint32_t)(8 << 28) : 0);
	if (waits) {
		int bitset = base == FUTEX_WAIT_BITSET;
		clockid_t c = (op & FUTEX_CLOCK_REALTIME) ? CLOCK_REALTIME : CLOCK_MONOTONIC;
		t = timeout(bitset, c, could_sleep(a, (uint32_t)val, 4), &tw);
		arg4 = (long)t;
	} else {
		arg4 = pick(4) ? (long)pick(4) : (long)rnd();
	}
	printf("futex op=%#x %s %s val=%#llx arg4=%s val3=%#x", op, aw, bw, (unsigned long long)(uint32_t)val,
	       waits ? tw : "n", val3);
	report(syscall(SYS_futex, a, op, (uint32_t)val, arg4, b, val3));
}

static unsigned flags2(void)
{
	unsigned f = 2; /* 32-bit: the library answers other sizes, which the kernel refuses */
	if (pick(3))
		f |= 0x80; /* FUTEX2_PRIVATE */
	if (pick(12) == 0)
		f |= 4 << pick(3); /* NUMA, MPOL, or a bit the kernel does not know */
	if (pick(16) == 0)
		f |= 1u << (8 + pick(24));
	return f;
}

static uint64_t mask2(void)
{
	switch (pick(6)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return 1ULL << 40;
	default: return 0xffffffff;
	}
}

static clockid_t clock2(const char **what)
{
	switch (pick(8)) {
	case 0: *what = "realtime"; return CLOCK_REALTIME;
	case 1: *what = "boottime"; return CLOCK_BOOTTIME;
	case 2: *what = "-1"; return -1;
	default: *what = "monotonic"; return CLOCK_MONOTONIC;
	}
}

static void fill(struct waitv2 *v, unsigned n, const char **what, int *sleeps)
{
	*sleeps = 0;
	for (unsigned i = 0; i < n; i++) {
		void *at = address(&what[i]);
		v[i] = (struct waitv2){ value(), (uint64_t)(uintptr_t)at, flags2(), pick(10) ? 0 : 1 };
		*sleeps |= could_sleep(at, v[i].val, 4);
	}
}

static void futex2(void)
{
	const char *aw, *tw = "-", *cw = "-";
	void *a;
	unsigned f;
	uint64_t val, m;
	const struct timespec *t;
	clockid_t c;
	struct waitv2 v[4] = { 0 };
	const char *vw[4] = { "-", "-", "-", "-" };
	int sleeps;
	switch (pick(4)) {
	case 0:
		a = address(&aw);
		val = value();
		m = mask2();
		f = flags2();
		c = clock2(&cw);
		t = timeout(1, c, could_sleep(a, val, 1u << (f & 3)), &tw);
		printf("futex_wait %s val=%#llx mask=%#llx flags=%#x %s %s", aw, (unsigned long long)val,
		       (unsigned long long)m, f, tw, cw);
		report(syscall(SYS_WAIT2, a, val, m, f, t, c));
		break;
	case 1: {
		a = address(&aw);
		m = mask2();
		f = flags2();
		int nr = pick(4) ? (int)pick(3) : (int)rnd();
		printf("futex_wake %s mask=%#llx nr=%d flags=%#x", aw, (unsigned long long)m, nr, f);
		report(syscall(SYS_WAKE2, a, m, nr, f));
		break;
	}
	case 2: {
		fill(v, 2, vw, &sleeps);
		f = pick(8) ? 0 : 1;
		int w = pick(4) ? (int)pick(3) : -1, r = pick(4) ? (int)pick(3) : -1;
		printf("futex_requeue %s/%#x %s/%#x flags=%#x %d %d", vw[0], v[0].flags, vw[1], v[1].flags, f, w, r);
		report(syscall(SYS_REQUEUE2, pick(16) ? (void *)v : (void *)unmapped, f, w, r));
		break;
	}
	default: {
		/* 129 to 1024 entries: the library takes them, the kernel refuses them (not asked here) */
		unsigned n = pick(4) ? 1 + pick(4) : pick(2) ? 0 : 1025;
		fill(v, n > 4 ? 4 : n, vw, &sleeps);
		f = pick(8) ? 0 : 1;
		c = clock2(&cw);
		t = timeout(1, c, sleeps || n > 4, &tw);
		printf("futex_waitv n=%u %s/%#x %s/%#x %s/%#x %s/%#x flags=%#x %s %s", n, vw[0], v[0].flags, vw[1],
		       v[1].flags, vw[2], v[2].flags, vw[3], v[3].flags, f, tw, cw);
		/* 1025 entries: refused for their count before the vector is read */
		report(syscall(SYS_WAITV, pick(16) ? (void *)v : (void *)unmapped, n, f, t, c));
		break;
	}
	}
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "no-readonly"))) {
		fprintf(stderr, "usage: %s SEED CALLS [no-readonly]\n", argv[0]);
		return 2;
	}
	rng_state = strtoull(argv[1], NULL, 0) | 1;
	long calls = strtol(argv[2], NULL, 0);
	no_readonly = argc == 4;
	words = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	readonly = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unmapped = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (words == MAP_FAILED || readonly == MAP_FAILED || unmapped == MAP_FAILED ) {
		perror("mmap");
		return 2;
	}
	for (long i = 0; i < calls; i++) {
		printf("%ld ", i);
		if (pick(2))
			legacy();
		else
			futex2();
		for (int w = 0; w < 4; w++) /* a wake-op may have changed a word; keep them small */
			words[w] &= 3;
	}
	return 0;
}
