/*
 * Random sleepers, wakes and requeues through syscall(), with the queues' state known at each
 * call: sleepers fall asleep one at a time (each waits until /proc shows the last one asleep in
 * a futex call), so every queue's order is fixed, and each wake or requeue waits until every
 * sleeper it counted has returned. One line per call: what was asked, the result, and which
 * sleepers woke. Run with and without LD_PRELOAD=libufutex_preload.so, the transcripts must be
 * the same (tests/preload/run.sh): the same waiters woken, oldest first, masks honoured,
 * requeued waiters behind those already waiting on the target, the same counts.
 *
 *     fuzz_queue SEED STEPS [shared]
 *
 * shared: process-shared words (in a MAP_SHARED mapping, the calls without the private flag):
 * the kernel's shared futexes, or with UFUTEX_PRELOAD_SHARED=table the library's shared table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../c/rng.h"

enum { SYS_WAKE2 = 454, SYS_WAIT2 = 455, SYS_REQUEUE2 = 456, WORDS = 3, SLOTS = 8 };
/* The words, private or process-shared (the third argument), and the calls' flags for them. */
static uint32_t *words;
static int PRIV = FUTEX_PRIVATE_FLAG;
static unsigned F2 = 0x82; /* FUTEX2_SIZE_U32 | FUTEX2_PRIVATE */

struct waitv2 {
	uint64_t val, uaddr;
	uint32_t flags, reserved;
};

/* A sleeper: the driver writes a command into `pipe`; the sleeper waits, then reports. */
struct slot {
	pthread_t thread;
	pid_t tid;
	int pipe[2];
	int word, futex2;
	uint32_t mask;
	int busy;           /* driver's view: a command given, its return not yet seen */
	long ret;           /* written by the sleeper before `returned` */
	int err;
	int returned;       /* set by the sleeper (atomic) */
};

static struct slot slots[SLOTS];

/* The model: each word's sleepers, oldest first. */
static int queue[WORDS][SLOTS], queued[WORDS];
static int failures;

static void model_sleep(int w, int i)
{
	queue[w][queued[w]++] = i;
}

/* Take the `k`-th sleeper of word `w` out of the model. */
static int model_take(int w, int k)
{
	int i = queue[w][k];
	memmove(&queue[w][k], &queue[w][k + 1], (size_t)(queued[w] - k - 1) * sizeof(int));
	queued[w]--;
	return i;
}

/* Wake up to `nr` sleepers of `w` (those whose mask meets `mask`): the set, as bits. */
static unsigned model_wake(int w, int nr, uint32_t mask)
{
	unsigned woken = 0;
	for (int k = 0; k < queued[w] && nr > 0;) {
		if (slots[queue[w][k]].mask & mask) {
			woken |= 1u << model_take(w, k);
			nr--;
		} else {
			k++;
		}
	}
	return woken;
}

/* Requeue: wake `nr` of `w` (any mask), move `nr2` more to `w2` (in place if the same word);
 * `*moved` says how many moved. */
static unsigned model_requeue(int w, int w2, int nr, int nr2, int *moved)
{
	unsigned woken = model_wake(w, nr, ~0u);
	*moved = nr2 < queued[w] ? nr2 : queued[w];
	if (w != w2)
		for (int k = 0; k < *moved; k++) {
			int i = model_take(w, 0);
			model_sleep(w2, i);
			slots[i].word = w2;
		}
	return woken;
}

static void *sleeper(void *p)
{
	struct slot *s = p;
	__atomic_store_n(&s->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	char c;
	while (read(s->pipe[0], &c, 1) == 1) {
		uint32_t *w = &words[s->word];
		long r;
		do {
			if (s->futex2)
				r = syscall(SYS_WAIT2, w, 0UL, (unsigned long)s->mask, F2, NULL, 0);
			else
				r = syscall(SYS_futex, w, FUTEX_WAIT_BITSET | PRIV, 0, NULL, NULL, s->mask);
		} while (r == -1 && errno == EINTR);
		s->err = r == -1 ? errno : 0;
		s->ret = r;
		__atomic_store_n(&s->returned, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

/* Whether thread `tid` is asleep in a futex call (state S, in futex, futex_wait or futex_waitv:
 * the library's sleeps are those calls too, on words of its own). */
static int asleep_in_futex(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *close = strrchr(buf, ')');
	if (!close || close[1] != ' ' || close[2] != 'S')
		return 0;
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	long nr = -1;
	int ok = fscanf(f, "%ld", &nr) == 1;
	fclose(f);
	return ok && (nr == SYS_futex || nr == 449 || nr == SYS_WAIT2);
}

static void settle(void)
{
	struct timespec ms = {0, 1000000};
	nanosleep(&ms, NULL);
}

/* Wait (up to 10 s) until every busy slot is asleep or has returned. */
static int all_settled(void)
{
	for (int round = 0; round < 10000; round++) {
		int all = 1;
		for (int i = 0; i < SLOTS; i++)
			if (slots[i].busy && !__atomic_load_n(&slots[i].returned, __ATOMIC_SEQ_CST) &&
			    !asleep_in_futex(slots[i].tid))
				all = 0;
		if (all)
			return 1;
		settle();
	}
	return 0;
}

/* Report the sleepers that returned since the last call (waiting until `expect` have, and a
 * little longer for any extra), as " woke=[i:ret/errno ...]". */
static unsigned report_returns(long expect)
{
	unsigned set = 0;
	int seen = 0;
	for (int round = 0; round < 10000; round++) {
		seen = 0;
		for (int i = 0; i < SLOTS; i++)
			seen += slots[i].busy && __atomic_load_n(&slots[i].returned, __ATOMIC_SEQ_CST);
		if (seen >= expect)
			break;
		settle();
	}
	settle(); /* a wake that woke more than it counted shows here */
	printf(" woke=[");
	for (int i = 0; i < SLOTS; i++) {
		struct slot *s = &slots[i];
		if (s->busy && __atomic_load_n(&s->returned, __ATOMIC_SEQ_CST)) {
			printf(" %d:%ld/%d", i, s->ret, s->err);
			set |= 1u << i;
			s->busy = 0;
			__atomic_store_n(&s->returned, 0, __ATOMIC_SEQ_CST);
		}
	}
	printf(" ]\n");
	fflush(stdout);
	return set;
}

static void check(const char *what, long r, long want_r, unsigned set, unsigned want_set)
{
	if (r == want_r && set == want_set)
		return;
	printf("MISMATCH %s: returned %ld, woke %#x; the model says %ld, %#x\n", what, r, set, want_r, want_set);
	failures++;
}

static uint32_t a_mask(void)
{
	static const uint32_t masks[] = { 0xffffffff, 1, 2, 3, 4, 6 };
	return masks[below(sizeof masks / sizeof masks[0])];
}

/* A word to requeue `w`'s sleepers to: `w` itself or one nobody waits on. */
static int requeue_target(int w)
{
	int w2 = (int)below(WORDS);
	return w2 == w || queued[w2] == 0 ? w2 : w;
}

static void step(void)
{
	int free_slots = 0;
	for (int i = 0; i < SLOTS; i++)
		free_slots += !slots[i].busy;
	unsigned what = (unsigned)below(free_slots ? 10 : 6);
	int w = (int)below(WORDS), w2 = (int)below(WORDS);
	if (what >= 6) { /* a new sleeper */
		int i = 0;
		while (slots[i].busy)
			i++;
		struct slot *s = &slots[i];
		s->word = w;
		s->futex2 = (int)below(2);
		s->mask = a_mask();
		s->busy = 1;
		model_sleep(w, i);
		printf("sleep %d on %d mask=%#x %s\n", i, w, s->mask, s->futex2 ? "futex_wait" : "WAIT_BITSET");
		if (write(s->pipe[1], "g", 1) != 1)
			abort();
		if (!all_settled()) {
			printf("MISMATCH a sleeper did not fall asleep\n");
			failures++;
		}
		return;
	}
	int nr = (int)below(4), nr2 = (int)below(4), moved = 0;
	uint32_t mask = a_mask();
	unsigned want;
	long r, want_r;
	const char *name;
	errno = 0;
	switch (what) {
	case 0:
		nr = nr ? nr : 1;
		name = "WAKE_BITSET";
		r = syscall(SYS_futex, &words[w], FUTEX_WAKE_BITSET | PRIV, nr, NULL, NULL, mask);
		printf("%s %d nr=%d mask=%#x -> %ld", name, w, nr, mask, r);
		want = model_wake(w, nr, mask);
		want_r = __builtin_popcount(want);
		break;
	case 1:
		name = "futex_wake";
		r = syscall(SYS_WAKE2, &words[w], (unsigned long)mask, nr, F2);
		printf("%s %d nr=%d mask=%#x -> %ld", name, w, nr, mask, r);
		want = model_wake(w, nr, mask);
		want_r = __builtin_popcount(want);
		break;
	case 2:
	case 3:
	case 4:
		w2 = requeue_target(w);
		if (what == 2) {
			name = "CMP_REQUEUE";
			r = syscall(SYS_futex, &words[w], FUTEX_CMP_REQUEUE | PRIV, nr, (void *)(long)nr2, &words[w2], 0);
		} else if (what == 3) {
			name = "REQUEUE";
			r = syscall(SYS_futex, &words[w], FUTEX_REQUEUE | PRIV, nr, (void *)(long)nr2, &words[w2], 0);
		} else {
			struct waitv2 v[2] = { { 0, (uintptr_t)&words[w], F2, 0 }, { 0, (uintptr_t)&words[w2], F2, 0 } };
			name = "futex_requeue";
			r = syscall(SYS_REQUEUE2, v, 0, nr, nr2);
		}
		printf("%s %d->%d wake=%d move=%d -> %ld", name, w, w2, nr, nr2, r);
		want = model_requeue(w, w2, nr, nr2, &moved);
		want_r = __builtin_popcount(want) + moved;
		break;
	default:
		/* wake-op: an OR of 0 keeps the words 0, and "was 0" holds: both words woken, up to
		 * each count (a count of 0 wakes one, as the kernel's loop), whatever the masks */
		name = "WAKE_OP";
		r = syscall(SYS_futex, &words[w], FUTEX_WAKE_OP | PRIV, nr, (void *)(long)nr2, &words[w2],
			    FUTEX_OP(FUTEX_OP_OR, 0, FUTEX_OP_CMP_EQ, 0));
		printf("%s %d,%d nr=%d nr2=%d -> %ld", name, w, w2, nr, nr2, r);
		want = model_wake(w, nr ? nr : 1, ~0u);
		want |= model_wake(w2, nr2 ? nr2 : 1, ~0u);
		want_r = __builtin_popcount(want);
		break;
	}
	if (r == -1)
		printf(" %s", strerror(errno));
	unsigned set = report_returns(__builtin_popcount(want));
	check(name, r, want_r, set, want);
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "shared"))) {
		fprintf(stderr, "usage: %s SEED STEPS [shared]\n", argv[0]);
		return 2;
	}
	int shared = argc == 4;
	words = mmap(NULL, 4096, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
	if (words == MAP_FAILED)
		return 2;
	if (shared) {
		PRIV = 0;
		F2 = 0x02;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rng_state = strtoull(argv[1], NULL, 0) | 1;
	long steps = strtol(argv[2], NULL, 0);
	for (int i = 0; i < SLOTS; i++) {
		if (pipe(slots[i].pipe) || pthread_create(&slots[i].thread, NULL, sleeper, &slots[i]))
			abort();
		while (!__atomic_load_n(&slots[i].tid, __ATOMIC_SEQ_CST))
			settle();
	}
	for (long k = 0; k < steps; k++) {
		printf("%ld ", k);
		step();
	}
	/* Everyone home: wake every word until no sleeper is left. */
	printf("end");
	for (int round = 0; round < 10000; round++) {
		int left = 0;
		for (int i = 0; i < SLOTS; i++)
			left += slots[i].busy && !__atomic_load_n(&slots[i].returned, __ATOMIC_SEQ_CST);
		if (!left)
			break;
		for (int w = 0; w < WORDS; w++)
			syscall(SYS_futex, &words[w], FUTEX_WAKE | PRIV, SLOTS, NULL, NULL, 0);
		settle();
	}
	report_returns(0);
	for (int i = 0; i < SLOTS; i++) {
		close(slots[i].pipe[1]);
		pthread_join(slots[i].thread, NULL);
	}
	printf("-- %d mismatches\n", failures);
	return failures ? 1 : 0;
}
