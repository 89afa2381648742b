/*
 * futex_waitv under the preload library, woken every way the kernel's own is: a thread waits
 * with futex_waitv (through libc's syscall()) on a vector of private words, or of private
 * words and words of a MAP_SHARED page, and the main thread wakes one entry with
 *  - futex_wake or FUTEX_WAKE through syscall() (which the library takes, or, for a shared word
 *    in its default mode, passes to the kernel);
 *  - a raw FUTEX_WAKE (raw_futex.h: the `syscall` instruction, which no interposer sees), as a
 *    process that is not preloaded, or the kernel's own wake of a thread-id word, wakes;
 * and the waitv must return that entry's index, as the kernel's does. Under the library, a
 * vector that mixes private and shared words waits on the private ones in ufutex and on the
 * shared ones in the kernel (or, with UFUTEX_PRELOAD_SHARED=table, in ufutex's shared table),
 * and the thread sleeps on all of them; before, a private wake of such a vector was lost.
 *
 * No timing decides a result: the main thread repeats its wake until the waiter has returned,
 * so it never depends on the waiter being asleep first; a wake that cannot reach the waiter
 * leaves it to its 10 s timeout, which fails the scenario. Prints one line per scenario; exits
 * 1 if any failed.
 *
 *     waitv_watch       (no arguments)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../c/deadline.h"
#include "../c/proc.h"
#include "raw_futex.h"

enum { SYS_WAITV = 449, SYS_WAKE2 = 454 };
enum { F2_U32 = 0x02, F2_PRIVATE = 0x80, MAX = 128 };

struct waitv {
	uint64_t val, uaddr;
	uint32_t flags, reserved;
};

/* Private words, and words of a shared page. */
static uint32_t priv[MAX];
static uint32_t *shared;

static struct waitv vec[MAX];
static unsigned nr;
static long result;
static int result_errno;
static atomic_int returned;
static atomic_int waiter_tid;

static void *waiter(void *arg)
{
	(void)arg;
	atomic_store(&waiter_tid, (int)syscall(SYS_gettid));
	struct timespec t = ts_after_now(CLOCK_MONOTONIC, 10000000000ULL);
	long r = syscall(SYS_WAITV, vec, nr, 0, &t, CLOCK_MONOTONIC);
	result = r;
	result_errno = r < 0 ? errno : 0;
	atomic_store(&returned, 1);
	return NULL;
}

/* How the main thread wakes the entry's word. */
enum how { WAKE2, LEGACY, RAW };

static long wake(uint32_t *u, int is_private, enum how how)
{
	switch (how) {
	case WAKE2:
		return syscall(SYS_WAKE2, u, 0xffffffffUL, 1, F2_U32 | (is_private ? F2_PRIVATE : 0));
	case LEGACY:
		return syscall(SYS_futex, u, is_private ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE, 1, NULL, NULL, 0);
	case RAW: {
		long r = raw_futex_wake(u, is_private ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE, 1);
		return r == -ENOSYS ? syscall(SYS_futex, u, is_private ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE, 1, NULL, NULL, 0) : r;
	}
	}
	return -1;
}

/* Whether thread `tid` of this process is asleep (state S in /proc): in the waitv's sleep, past
 * its comparisons of the values. */
static int asleep(int tid)
{
	return thread_sleeps(getpid(), tid);
}

static const char *how_name[] = {"futex_wake", "FUTEX_WAKE", "a raw FUTEX_WAKE"};

/*
 * A waitv of `n` entries, entry i shared where `shared_at` has bit i (the first 64 entries
 * only), woken at entry `at` by `how`; with `change`, the word is changed first (as a waker
 * does before it wakes), once the waiter is asleep (so that its waitv compared the value it
 * expected). Returns 0 if the waitv returned `at`.
 */
static int scenario(unsigned n, uint64_t shared_at, unsigned at, enum how how, int change)
{
	memset(priv, 0, sizeof priv);
	memset(shared, 0, 4096);
	for (unsigned i = 0; i < n; i++) {
		int sh = i < 64 && (shared_at >> i & 1);
		vec[i] = (struct waitv){.val = 0,
					.uaddr = (uintptr_t)(sh ? &shared[i] : &priv[i]),
					.flags = F2_U32 | (sh ? 0 : F2_PRIVATE)};
	}
	nr = n;
	atomic_store(&returned, 0);
	atomic_store(&waiter_tid, 0);
	pthread_t t;
	if (pthread_create(&t, NULL, waiter, NULL) != 0)
		return 1;
	int sh = at < 64 && (shared_at >> at & 1);
	uint32_t *u = sh ? &shared[at] : &priv[at];
	struct timespec pause = {0, 1000000};
	if (change) {
		while (!atomic_load(&returned) && !(atomic_load(&waiter_tid) && asleep(atomic_load(&waiter_tid))))
			nanosleep(&pause, NULL);
		__atomic_store_n(u, 1, __ATOMIC_SEQ_CST);
	}
	while (!atomic_load(&returned)) {
		if (wake(u, !sh, how) < 0)
			break;
		nanosleep(&pause, NULL);
	}
	pthread_join(t, NULL);
	const char *kind = shared_at == 0 ? "private" : "private and shared";
	if (result != (long)at) {
		printf("waitv of %u %s words, %s%s of entry %u: returned %ld (errno %d), not %u FAILED\n", n,
		       kind, change ? "a change and " : "", how_name[how], at, result, result_errno, at);
		return 1;
	}
	printf("waitv of %u %s words, %s%s of entry %u: ok\n", n, kind, change ? "a change and " : "",
	       how_name[how], at);
	return 0;
}

int main(void)
{
	shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return 2;
	int failed = 0;
	for (enum how how = WAKE2; how <= RAW; how++) {
		/* Private words only. */
		failed |= scenario(3, 0, 1, how, 0);
		/* Private words with a shared one between them: each kind of entry. */
		failed |= scenario(3, 0x2, 2, how, 0);
		failed |= scenario(3, 0x2, 0, how, 0);
		failed |= scenario(3, 0x2, 1, how, 0);
	}
	/* The most entries: words past what one sleep of the library watches in the kernel are
	 * looked at between short sleeps, so a change and a wake of one still ends the waitv. */
	failed |= scenario(MAX, 0, MAX - 1, RAW, 1);
	failed |= scenario(MAX, 0, MAX - 2, RAW, 0);
	failed |= scenario(MAX, 0x5, 2, RAW, 1);
	failed |= scenario(MAX, 0x5, MAX - 1, WAKE2, 0);
	return failed;
}
