/*
 * A futex wait that a signal interrupts, through libc's syscall(): what it returns, or whether
 * it goes on sleeping, must be the kernel's answer. The kernel has three:
 *  - a wait that may be restarted (-ERESTARTSYS: the legacy FUTEX_WAIT and FUTEX_WAIT_BITSET
 *    without a timeout, futex2's futex_wait and futex_waitv with or without one) sleeps on
 *    after a handler installed with SA_RESTART, and fails with EINTR after one without;
 *  - a legacy wait with a timeout (-ERESTART_RESTARTBLOCK) fails with EINTR after any handler,
 *    SA_RESTART or not;
 *  - a signal that runs no handler (stopped by SIGSTOP, then SIGCONT) ends no wait.
 *
 * For each call, timeout (none, relative, absolute on either clock), signal and word (private,
 * or in a MAP_SHARED page), a thread waits on a word; the main thread waits until /proc shows
 * it asleep, signals it, waits until the handler ran (or the thread was stopped and continued),
 * then, once the thread has returned or sleeps again, wakes the word until it has returned (the
 * word keeps its value: a wait that went on sleeping ends only by a wake, with 0). One line per
 * case: how the wait ended — no timing decides it, so the transcript is the same wherever it
 * runs. The timeouts are 10 s: a wait that ends by its timeout instead shows ETIMEDOUT.
 *
 *     signals       (no arguments)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../c/deadline.h"
#include "../c/proc.h"

enum { SYS_WAITV = 449, SYS_WAIT2 = 455 };
enum { F2_U32 = 0x02, F2_PRIVATE = 0x80 };

struct waitv {
	uint64_t val, uaddr;
	uint32_t flags, reserved;
};

enum call { LEGACY_WAIT, LEGACY_WAIT_BITSET, FUTEX_WAIT2, FUTEX_WAITV, CALLS };
static const char *const call_name[CALLS] = { "FUTEX_WAIT", "FUTEX_WAIT_BITSET", "futex_wait", "futex_waitv" };

enum timeout { NONE, RELATIVE, MONOTONIC, REALTIME, TIMEOUTS };
static const char *const timeout_name[TIMEOUTS] = { "none", "relative", "monotonic", "realtime" };

enum how { RESTARTING, PLAIN, STOPPED, HOWS };
static const char *const how_name[HOWS] = { "SA_RESTART handler", "handler without SA_RESTART",
					    "SIGSTOP then SIGCONT" };

static uint32_t private_word;
static uint32_t *shared_word;

/* The case the waiter runs. */
static enum call call;
static enum timeout timeout;
static uint32_t *word;
static int shared;
static long result;
static int result_errno;
static atomic_int returned;
static atomic_int waiter_tid;
static atomic_int handled;

static void handler(int sig)
{
	(void)sig;
	atomic_fetch_add(&handled, 1);
}

static long wait_once(void)
{
	int private_flag = shared ? 0 : FUTEX_PRIVATE_FLAG;
	clockid_t clock = timeout == REALTIME ? CLOCK_REALTIME : CLOCK_MONOTONIC;
	struct timespec rel = { 10, 0 }, abs = ts_after_now(clock, 10000000000ULL);
	const struct timespec *ts = timeout == NONE ? NULL : timeout == RELATIVE ? &rel : &abs;
	int clock_flag = timeout == REALTIME ? FUTEX_CLOCK_REALTIME : 0;
	switch (call) {
	case LEGACY_WAIT: return syscall(SYS_futex, word, FUTEX_WAIT | private_flag, 0, ts, NULL, 0);
	case LEGACY_WAIT_BITSET:
		return syscall(SYS_futex, word, FUTEX_WAIT_BITSET | private_flag | clock_flag, 0, ts, NULL,
			       FUTEX_BITSET_MATCH_ANY);
	case FUTEX_WAIT2:
		return syscall(SYS_WAIT2, word, 0UL, 0xffffffffUL, F2_U32 | (shared ? 0 : F2_PRIVATE), ts, clock);
	case FUTEX_WAITV: {
		struct waitv v = { 0, (uintptr_t)word, F2_U32 | (shared ? 0 : F2_PRIVATE), 0 };
		return syscall(SYS_WAITV, &v, 1U, 0U, ts, clock);
	}
	default: return -1;
	}
}

static void *waiter(void *arg)
{
	(void)arg;
	atomic_store(&waiter_tid, (int)syscall(SYS_gettid));
	errno = 0;
	result = wait_once();
	result_errno = result == -1 ? errno : 0;
	atomic_store(&returned, 1);
	return NULL;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* Whether the combination is one the kernel takes (futex2 calls have no relative timeout:
 * futex_wait's and futex_waitv's are absolute; the legacy FUTEX_WAIT's is relative only). */
static int valid(enum call c, enum timeout t)
{
	return c == LEGACY_WAIT ? t == NONE || t == RELATIVE : t != RELATIVE;
}

static int run_case(enum how how)
{
	pid_t pid = getpid();
	atomic_store(&returned, 0);
	atomic_store(&waiter_tid, 0);
	atomic_store(&handled, 0);
	*word = 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = how == RESTARTING ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);

	pthread_t t;
	if (pthread_create(&t, NULL, waiter, NULL) != 0)
		return -1;
	int tid;
	while (!(tid = atomic_load(&waiter_tid)))
		sched_yield();
	while (!thread_sleeps(pid, tid) && !atomic_load(&returned))
		pause_ms(1);
	/* (A wait that did not sleep is a case the kernel refused: nothing to signal.) */
	int early = atomic_load(&returned);
	if (!early && how == STOPPED) {
		/* SIGSTOP stops the whole process, this thread too: a child sends the SIGCONT. */
		pid_t child = fork();
		if (child == 0) {
			kill(pid, SIGSTOP);
			pause_ms(20);
			kill(pid, SIGCONT);
			_exit(0);
		}
		int status;
		while (waitpid(child, &status, 0) == -1 && errno == EINTR)
			;
	} else if (!early) {
		pthread_kill(t, SIGUSR1);
		while (!atomic_load(&handled))
			pause_ms(1);
	}
	/* The wait ended, or sleeps again: wake it (the word stays 0, so a wait that went on
	 * sleeping can only end by a wake) until it returns. */
	while (!atomic_load(&returned) && !thread_sleeps(pid, tid))
		pause_ms(1);
	while (!atomic_load(&returned)) {
		syscall(SYS_futex, word, FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG), 1, NULL, NULL, 0);
		pause_ms(1);
	}
	pthread_join(t, NULL);
	printf("%-17s timeout %-9s %-7s %-26s: %s -> %ld%s%s\n", call_name[call], timeout_name[timeout],
	       shared ? "shared" : "private", how_name[how],
	       early ? "did not sleep" : result == 0 ? "slept on until woken" : "ended", result,
	       result ? " " : "", result ? strerror(result_errno) : "");
	return 0;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	shared_word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared_word == MAP_FAILED)
		return 2;
	for (call = 0; call < CALLS; call++)
		for (timeout = 0; timeout < TIMEOUTS; timeout++) {
			if (!valid(call, timeout))
				continue;
			for (shared = 0; shared < 2; shared++) {
				word = shared ? shared_word : &private_word;
				for (enum how how = 0; how < HOWS; how++)
					if (run_case(how))
						return 2;
			}
		}
	return 0;
}
