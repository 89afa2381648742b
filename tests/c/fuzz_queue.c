/*
 * Random sleepers, wakes and requeues through syscall(), with the queues' state known at each
 * call: sleepers fall asleep one at a time (each waits until /proc shows the last one asleep in
 * a futex call), so every queue's order is fixed, and each wake or requeue waits until every
 * sleeper it counted has returned. Sleepers wait with FUTEX_WAIT_BITSET, futex_wait (each
 * with a mask) or futex_waitv on two words. One line per call: what was asked, the result, and
 * which sleepers woke with what. Each is checked against a model of the kernel's queues:
 * oldest first; a wake honours masks, a requeue and a wake-op do not; a requeue onto the same
 * word leaves its waiters in place; a waitv's entries are queued apart, each counted when
 * taken (two of one waitv on one word count twice), and it returns the highest index taken.
 * A requeue to another word goes only to a word nobody waits on: the kernel keeps a requeued
 * waiter's place when both words share a hash bucket, so its order behind waiters already
 * there depends on the hash. Exits 1 on a mismatch. And the transcripts with and without
 * LD_PRELOAD=libufutex_preload.so must be the same (tests/preload/run.sh).
 *
 *     fuzz_queue SEED STEPS [shared | mixed | cross]
 *     fuzz_queue SEED STEPS [s|n|x]u8|u16|u32|u64   (built with -DFUZZ_ABI against libufutex)
 *
 * shared: process-shared words (in a MAP_SHARED mapping, the calls without the private flag):
 * the kernel's shared futexes, or with UFUTEX_PRELOAD_SHARED=table the library's shared table.
 * mixed: word 0 private, the others shared (a waitv may mix them; a requeue or wake-op takes
 * two of a kind). cross: shared words, half the sleepers in a forked child process.
 * u8 .. u64: private words of that size through the C ABI (ufutex_wait, _waitv, _wake,
 * _requeue; _wake_op for 32 bits), checked against the same model (40-c-abi); su8 .. su64:
 * process-shared ones (the library's shared table); xu8 .. xu64: the same, half the sleepers
 * in a forked child; nu8 .. nu64: UFUTEX_NUMA words on two virtual nodes, a futex per word
 * and node (waiters and wakers meet only on the same node).
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "rng.h"
#ifdef FUZZ_ABI
#include <ufutex.h> /* built against libufutex: the C ABI's calls instead of the system calls */
#endif

enum { SYS_WAITV = 449, SYS_WAKE2 = 454, SYS_WAIT2 = 455, SYS_REQUEUE2 = 456, WORDS = 3, SLOTS = 8 };
/* A futex is a word, or with NUMA (nu8 .. nu64) a word and a node: futex f is word f % WORDS
 * on node f / WORDS, each word followed by its node word. */
static int nodes = 1;
#define FUTEXES (WORDS * nodes)
/* The words, each private or process-shared (the third argument), and the calls' flags for
 * them: `F2` is a private word's futex2 (and C ABI) flags, its size with the private bit. */
static char *word_at[WORDS];
static int shared_word[WORDS];
#define WORD(f) aim(f)
#define PRIV(f) (shared_word[(f) % WORDS] ? 0 : FUTEX_PRIVATE_FLAG)
#define F2_OF(f) (shared_word[(f) % WORDS] ? F2 & ~0x80u : F2)
static unsigned F2 = 0x82; /* FUTEX2_SIZE_U32 | FUTEX2_PRIVATE */
static uint32_t ALL = 0xffffffff; /* every bit of a mask */
#ifdef FUZZ_ABI
static int abi; /* a size was asked for: the C ABI's calls */
#endif

struct waitv2 {
	uint64_t val, uaddr;
	uint32_t flags, reserved;
};

/* A sleeper: the driver writes a command into `pipe`; the sleeper waits, then reports. */
struct slot {
	pthread_t thread;
	pid_t pid, tid;     /* its process (the child's, for half of them with "cross") and thread */
	int pipe[2];
	int kind;           /* FUTEX_WAIT_BITSET, futex_wait, or futex_waitv of two words */
	int entries;        /* 1, or 2 for the waitv */
	int word[2];        /* each entry's word now (a requeue moves an entry) */
	uint32_t mask;      /* all bits for the waitv */
	int busy;           /* driver's view: a command given, its return not yet seen */
	long want;          /* the model's return for it, once woken (the waitv: the highest index) */
	long ret;           /* written by the sleeper before `returned` */
	int err;
	int returned;       /* set by the sleeper (atomic) */
};
enum { WAIT_BITSET, FUTEX_WAIT2, FUTEX_WAITV2 };

static struct slot *slots; /* in shared memory: a child's sleepers report there too */

/* The model: each word's queued entries (a sleeper and its entry), oldest first. */
struct entry {
	int slot, index;
};
static struct entry queue[WORDS * 2][2 * SLOTS];
static int queued[WORDS * 2];
static unsigned woken_now; /* the sleepers the current call woke */
static int failures;

static void model_append(int w, int i, int index)
{
	queue[w][queued[w]++] = (struct entry){ i, index };
}

static struct entry model_take(int w, int k)
{
	struct entry e = queue[w][k];
	memmove(&queue[w][k], &queue[w][k + 1], (size_t)(queued[w] - k - 1) * sizeof(struct entry));
	queued[w]--;
	return e;
}

/* Entry `e` is woken: its sleeper returns the highest index woken (0 for a single wait). */
static void model_woke(struct entry e)
{
	struct slot *s = &slots[e.slot];
	if (!(woken_now & (1u << e.slot)) || e.index > s->want)
		s->want = e.index;
	woken_now |= 1u << e.slot;
}

/* Wake up to `nr` entries of `w` (with `use_mask`, those whose mask meets `mask`): how many.
 * Each entry counts, two of one waitv too (the kernel wakes each of its futexes apart). */
static int model_wake(int w, int nr, uint32_t mask, int use_mask)
{
	int n = 0;
	for (int k = 0; k < queued[w] && n < nr;) {
		if (!use_mask || (slots[queue[w][k].slot].mask & mask)) {
			model_woke(model_take(w, k));
			n++;
		} else {
			k++;
		}
	}
	return n;
}

/* Requeue: wake `nr` entries of `w` (any mask), move `nr2` more to `w2` (in place if the same
 * word): woken + moved. */
static int model_requeue(int w, int w2, int nr, int nr2)
{
	int n = model_wake(w, nr, 0, 0);
	int moved = nr2 < queued[w] ? nr2 : queued[w];
	if (w != w2)
		for (int k = 0; k < moved; k++) {
			struct entry e = model_take(w, 0);
			model_append(w2, e.slot, e.index);
			slots[e.slot].word[e.index] = w2;
		}
	return n + moved;
}

/* After the call: a woken sleeper takes its other entries out of their queues as it returns. */
static void model_leave(void)
{
	for (int w = 0; w < FUTEXES; w++)
		for (int k = 0; k < queued[w];) {
			if (woken_now & (1u << queue[w][k].slot))
				model_take(w, k);
			else
				k++;
		}
}

/* ---- the calls: the system calls, or (FUZZ_ABI with a size argument) the C ABI's ---- */

/* Futex `f`'s word, its node word (with NUMA) set to the futex's node first: each call reads
 * it when made, and nothing else runs meanwhile (a sleeper calls once the driver let it). */
static void *aim(int f)
{
	char *at = word_at[f % WORDS];
	if (nodes > 1) {
		unsigned bytes = 1u << (F2 & 3);
		memset(at + bytes, 0, bytes);
		at[bytes] = (char)(f / WORDS); /* little-endian: the node's low byte */
	}
	return at;
}

static long call_wait(struct slot *s)
{
	int w0 = s->word[0], w1 = s->word[1];
	void *w = WORD(w0);
	struct waitv2 v[2] = { { 0, (uintptr_t)w, F2_OF(w0), 0 }, { 0, (uintptr_t)WORD(w1), F2_OF(w1), 0 } };
#ifdef FUZZ_ABI
	if (abi)
		return s->kind == FUTEX_WAITV2 ? ufutex_waitv((struct ufutex_waitv *)v, 2, 0, NULL, 0)
					       : ufutex_wait(w, 0, s->mask, F2_OF(w0), NULL, 0);
#endif
	if (s->kind == FUTEX_WAITV2)
		return syscall(SYS_WAITV, v, 2, 0, NULL, 0);
	if (s->kind == FUTEX_WAIT2)
		return syscall(SYS_WAIT2, w, 0UL, (unsigned long)s->mask, F2_OF(w0), NULL, 0);
	return syscall(SYS_futex, w, FUTEX_WAIT_BITSET | PRIV(w0), 0, NULL, NULL, s->mask);
}

/* A wake of `w`: legacy FUTEX_WAKE_BITSET or futex_wake (futex2). */
static long call_wake(int legacy, int w, int nr, uint32_t mask)
{
#ifdef FUZZ_ABI
	if (abi)
		return ufutex_wake(WORD(w), mask, nr, F2_OF(w));
#endif
	if (legacy)
		return syscall(SYS_futex, WORD(w), FUTEX_WAKE_BITSET | PRIV(w), nr, NULL, NULL, mask);
	return syscall(SYS_WAKE2, WORD(w), (unsigned long)mask, nr, F2_OF(w));
}

/* A requeue: FUTEX_CMP_REQUEUE, FUTEX_REQUEUE or futex_requeue (`how` 0, 1, 2). */
static long call_requeue(int how, int w, int w2, int nr, int nr2)
{
	struct waitv2 v[2] = { { 0, (uintptr_t)WORD(w), F2_OF(w), 0 }, { 0, (uintptr_t)WORD(w2), F2_OF(w2), 0 } };
#ifdef FUZZ_ABI
	if (abi)
		return ufutex_requeue((struct ufutex_waitv *)v, 0, nr, nr2);
#endif
	if (how == 0)
		return syscall(SYS_futex, WORD(w), FUTEX_CMP_REQUEUE | PRIV(w), nr, (void *)(long)nr2, WORD(w2), 0);
	if (how == 1)
		return syscall(SYS_futex, WORD(w), FUTEX_REQUEUE | PRIV(w), nr, (void *)(long)nr2, WORD(w2), 0);
	return syscall(SYS_REQUEUE2, v, 0, nr, nr2);
}

/* A wake-op that keeps the words 0 (an OR of 0) and whose comparison ("was 0") holds. */
static long call_wake_op(int w, int w2, int nr, int nr2)
{
	unsigned op = FUTEX_OP(FUTEX_OP_OR, 0, FUTEX_OP_CMP_EQ, 0);
#ifdef FUZZ_ABI
	if (abi)
		return ufutex_wake_op(WORD(w), WORD(w2), nr, nr2, op, F2_OF(w));
#endif
	return syscall(SYS_futex, WORD(w), FUTEX_WAKE_OP | PRIV(w), nr, (void *)(long)nr2, WORD(w2), op);
}

static void call_wake_all(int w)
{
#ifdef FUZZ_ABI
	if (abi) {
		ufutex_wake(WORD(w), ALL, SLOTS, F2_OF(w));
		return;
	}
#endif
	syscall(SYS_futex, WORD(w), FUTEX_WAKE | PRIV(w), SLOTS, NULL, NULL, 0);
}

static void *sleeper(void *p)
{
	struct slot *s = p;
	s->pid = getpid();
	__atomic_store_n(&s->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	char c;
	while (read(s->pipe[0], &c, 1) == 1) {
		long r;
		do
			r = call_wait(s);
		while (r == -1 && errno == EINTR);
		s->err = r == -1 ? errno : 0;
		s->ret = r;
		__atomic_store_n(&s->returned, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

/* Whether thread `tid` is asleep in a futex call (state S, in futex, futex_wait or futex_waitv:
 * the library's sleeps are those calls too, on words of its own). */
static int asleep_in_futex(pid_t pid, pid_t tid)
{
	if (!thread_sleeps(pid, tid))
		return 0;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", pid, tid);
	FILE *f = fopen(path, "r");
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
			    !asleep_in_futex(slots[i].pid, slots[i].tid))
				all = 0;
		if (all)
			return 1;
		settle();
	}
	return 0;
}

/* Report the sleepers that returned since the last call (waiting until `expect` have, and a
 * little longer for any extra), as " woke=[i:ret/errno ...]". */
static unsigned report_returns(long expect, long *rets)
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
			if (rets)
				printf(" %d:%ld/%d", i, s->ret, s->err);
			else
				printf(" %d", i); /* (the last round's results depend on timing) */
			set |= 1u << i;
			if (rets)
				rets[i] = s->ret;
			s->busy = 0;
			__atomic_store_n(&s->returned, 0, __ATOMIC_SEQ_CST);
		}
	}
	printf(" ]\n");
	fflush(stdout);
	return set;
}

/* The call returned `r` and woke the sleepers in `set`, each returning its own result: as the
 * model says? (`rets` holds what the woken returned, read by `report_returns`.) */
static void check(const char *what, long r, long want_r, unsigned set, const long *rets)
{
	int ok = r == want_r && set == woken_now;
	for (int i = 0; i < SLOTS; i++)
		if (set & woken_now & (1u << i))
			ok &= rets[i] == slots[i].want;
	if (ok)
		return;
	printf("MISMATCH %s: returned %ld, woke %#x; the model says %ld, %#x", what, r, set, want_r, woken_now);
	for (int i = 0; i < SLOTS; i++)
		if (woken_now & (1u << i))
			printf(" (%d returns %ld)", i, slots[i].want);
	printf("\n");
	failures++;
}

static uint32_t a_mask(void)
{
	static const uint32_t masks[] = { 0, 1, 2, 3, 4, 6 }; /* 0: every bit, at the word's size */
	uint32_t m = masks[below(sizeof masks / sizeof masks[0])];
	return m ? m : ALL;
}

/* A futex to requeue `w`'s sleepers to: `w` itself or one nobody waits on. */
static int requeue_target(int w)
{
	int w2 = (int)below(FUTEXES);
	/* (another futex: of another word, whose node word a call reads apart from the source's) */
	int other = w2 % WORDS != w % WORDS && queued[w2] == 0 && shared_word[w2 % WORDS] == shared_word[w % WORDS];
	return w2 == w || other ? w2 : w;
}

static void step(void)
{
	int free_slots = 0;
	for (int i = 0; i < SLOTS; i++)
		free_slots += !slots[i].busy;
	unsigned what = (unsigned)below(free_slots ? 10 : 6);
	int w = (int)below(FUTEXES), w2 = (int)below(FUTEXES);
	if (what >= 6) { /* a new sleeper */
		int i = (int)below(SLOTS); /* a free slot, from a random start (with "cross": either process) */
		while (slots[i].busy)
			i = (i + 1) % SLOTS;
		struct slot *s = &slots[i];
		s->kind = (int)below(3);
		s->entries = s->kind == FUTEX_WAITV2 ? 2 : 1;
		s->word[0] = w;
		/* another word, on any node */
		s->word[1] = (w % WORDS + 1 + (int)below(WORDS - 1)) % WORDS + WORDS * (int)below(nodes);
		s->mask = s->kind == FUTEX_WAITV2 ? ALL : a_mask();
		s->busy = 1;
		for (int e = 0; e < s->entries; e++)
			model_append(s->word[e], i, e);
		if (s->kind == FUTEX_WAITV2)
			printf("sleep %d on %d,%d futex_waitv\n", i, w, s->word[1]);
		else
			printf("sleep %d on %d mask=%#x %s\n", i, w, s->mask, s->kind == FUTEX_WAIT2 ? "futex_wait" : "WAIT_BITSET");
		if (write(s->pipe[1], "g", 1) != 1)
			abort();
		if (!all_settled()) {
			printf("MISMATCH a sleeper did not fall asleep\n");
			failures++;
		}
		return;
	}
	int nr = (int)below(4), nr2 = (int)below(4);
	uint32_t mask = a_mask();
	long r, want_r;
	const char *name;
	woken_now = 0;
	errno = 0;
	switch (what) {
	case 0: /* FUTEX_WAKE_BITSET (a count of at least one: its 0 wakes one) */
	case 1: /* futex_wake */
		nr = what == 0 && nr == 0 ? 1 : nr;
		name = what == 0 ? "WAKE_BITSET" : "futex_wake";
		r = call_wake(what == 0, w, nr, mask);
		printf("%s %d nr=%d mask=%#x -> %ld", name, w, nr, mask, r);
		want_r = model_wake(w, nr, mask, 1);
		break;
	case 2:
	case 3:
	case 4:
		w2 = requeue_target(w);
		name = what == 2 ? "CMP_REQUEUE" : what == 3 ? "REQUEUE" : "futex_requeue";
		r = call_requeue((int)what - 2, w, w2, nr, nr2);
		printf("%s %d->%d wake=%d move=%d -> %ld", name, w, w2, nr, nr2, r);
		want_r = model_requeue(w, w2, nr, nr2);
		break;
	default:
		/* wake-op: an OR of 0 keeps the words 0, and "was 0" holds: both words woken, up to
		 * each count (a count of 0 wakes one, as the kernel's loop), whatever the masks */
		name = "WAKE_OP";
#ifdef FUZZ_ABI
		if (abi && ((F2 & 3) != UFUTEX_SIZE_U32 || nodes > 1)) { /* the C ABI's wake-op is for 32-bit words: a futex_wake */
			name = "futex_wake";
			nr = nr ? nr : 1;
			r = call_wake(0, w, nr, mask);
			printf("%s %d nr=%d mask=%#x -> %ld", name, w, nr, mask, r);
			want_r = model_wake(w, nr, mask, 1);
			break;
		}
		if (abi) /* the C ABI's counts say how many, 0 none */
			nr = nr ? nr : 1, nr2 = nr2 ? nr2 : 1;
#endif
		if (shared_word[w2 % WORDS] != shared_word[w % WORDS]) /* both private or both shared */
			w2 = w;
		r = call_wake_op(w, w2, nr, nr2);
		printf("%s %d,%d nr=%d nr2=%d -> %ld", name, w, w2, nr, nr2, r);
		want_r = model_wake(w, nr ? nr : 1, 0, 0);
		want_r += model_wake(w2, nr2 ? nr2 : 1, 0, 0);
		break;
	}
	if (r == -1)
		printf(" %s", strerror(errno));
	model_leave();
	long rets[SLOTS] = { 0 };
	unsigned set = report_returns(__builtin_popcount(woken_now), rets);
	check(name, r, want_r, set, rets);
}

int main(int argc, char **argv)
{
	const char *mode = argc == 4 ? argv[3] : "private";
	int mixed = !strcmp(mode, "mixed"), cross = !strcmp(mode, "cross") || !strncmp(mode, "xu", 2);
	int shared = cross || !strcmp(mode, "shared") || !strncmp(mode, "su", 2);
	int size = 0; /* u8 .. u64 (su8 .. su64: shared; nu8 .. nu64: NUMA): the C ABI */
#ifdef FUZZ_ABI
	if (mode[0] == 'u' || ((mode[0] == 's' || mode[0] == 'n' || mode[0] == 'x') && mode[1] == 'u'))
		size = atoi(mode + (mode[0] != 'u') + 1);
	if (mode[0] == 'n' && size) {
		nodes = 2; /* two virtual nodes (read at the library's first NUMA call) */
		setenv("UFUTEX_NUMA_NODES", "2", 1);
	}
#endif
	int known = argc == 3 || shared || mixed || cross || size == 8 || size == 16 || size == 32 || size == 64;
	if (argc < 3 || argc > 4 || !known) {
		fprintf(stderr, "usage: %s SEED STEPS [shared | mixed | cross%s]\n", argv[0],
#ifdef FUZZ_ABI
			" | [s|n|x]u8 | ... | [s|n|x]u64 (the C ABI; s: shared, n: NUMA, x: shared, in two processes)"
#else
			""
#endif
		);
		return 2;
	}
	/* Shared words in a MAP_SHARED mapping, private ones in a private mapping; mixed: word 0
	 * private, the others shared. */
	char *priv = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *shm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (priv == MAP_FAILED || shm == MAP_FAILED)
		return 2;
	for (int w = 0; w < WORDS; w++) {
		shared_word[w] = shared || (mixed && w > 0);
		word_at[w] = (shared_word[w] ? shm : priv) + 16 * w;
	}
#ifdef FUZZ_ABI
	if (size) {
		abi = 1;
		F2 = UFUTEX_PRIVATE | (nodes > 1 ? UFUTEX_NUMA : 0) | (unsigned)__builtin_ctz((unsigned)size / 8);
		ALL = size >= 32 ? 0xffffffff : (1u << size) - 1;
	}
#endif
	setvbuf(stdout, NULL, _IOLBF, 0);
	rng_state = strtoull(argv[1], NULL, 0) | 1;
	long steps = strtol(argv[2], NULL, 0);
	slots = mmap(NULL, SLOTS * sizeof *slots, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (slots == MAP_FAILED)
		return 2;
	for (int i = 0; i < SLOTS; i++)
		if (pipe(slots[i].pipe))
			abort();
	/* cross: the upper half of the sleepers in a child process, which exits once its pipes
	 * close (forked before any thread exists) */
	int first = 0, last = SLOTS;
	pid_t child = -1;
	if (cross) {
		child = fork();
		if (child < 0)
			abort();
		first = child == 0 ? SLOTS / 2 : 0;
		last = child == 0 ? SLOTS : SLOTS / 2;
		for (int i = 0; i < SLOTS; i++) {
			int mine = i >= first && i < last; /* its sleeper lives in this process */
			if (child == 0)
				close(slots[i].pipe[1]); /* the child never drives */
			if (!mine)
				close(slots[i].pipe[0]);
		}
	}
	for (int i = first; i < last; i++)
		if (pthread_create(&slots[i].thread, NULL, sleeper, &slots[i]))
			abort();
	if (child == 0) {
		for (int i = first; i < last; i++)
			pthread_join(slots[i].thread, NULL);
		_exit(0);
	}
	for (int i = 0; i < SLOTS; i++)
		while (!__atomic_load_n(&slots[i].tid, __ATOMIC_SEQ_CST))
			settle();
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
		for (int f = 0; f < FUTEXES; f++)
			call_wake_all(f);
		settle();
	}
	report_returns(0, NULL);
	for (int i = 0; i < SLOTS; i++)
		close(slots[i].pipe[1]);
	for (int i = 0; i < (cross ? SLOTS / 2 : SLOTS); i++)
		pthread_join(slots[i].thread, NULL);
	if (cross && waitpid(child, NULL, 0) != child)
		failures++;
	printf("-- %d mismatches\n", failures);
	return failures ? 1 : 0;
}
