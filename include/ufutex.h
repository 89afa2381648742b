/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ufutex.h - futex2 in userspace: a drop-in for the Linux futex2 system calls.
 *
 * A program that calls futex_wait/futex_wake/futex_waitv/futex_requeue through syscall(2)
 * switches to ufutex by renaming the call:
 *
 *     syscall(SYS_futex_wait, uaddr, val, mask, flags, timeout, clockid)
 *  -> ufutex_wait(uaddr, val, mask, flags, timeout, clockid)
 *
 * and gains 8, 16 and 64-bit words (the kernel takes only 32-bit ones), waits and wakes that
 * do not enter the kernel when they need not (a wait whose value already differs, a wake with
 * no waiters), and wait vectors of up to 1024 entries.
 *
 * Build with `cc app.c $(pkg-config --cflags --libs ufutex)`; for libufutex.a link it between
 * -Wl,-Bstatic and -Wl,-Bdynamic and add `pkg-config --static --libs-only-l ufutex` (README).
 *
 * Every call returns as the system call would through syscall(2): a non-negative result, or -1
 * with errno set. Arguments are checked in the kernel's order (kernel/futex/syscalls.c) and
 * rejected with the kernel's errno; tests/c/diff_kernel.c checks that against the running
 * kernel. Two deliberate differences: a wake with @nr < 0 is EINVAL (later mainline's choice;
 * 6.18 returns 0 or wakes one), and a NULL word is EFAULT even where the kernel would not read
 * it (a wake, a requeue target). libufutex_preload.so answers both as the kernel does.
 *
 * NUMA (UFUTEX_NUMA): the word is followed by a node word of the same size, the pair aligned to
 * twice the size. A node word of -1 (all ones at the size) is replaced by the caller's current
 * node — or, with UFUTEX_MPOL, the node of a preferred memory policy covering the word — and
 * written back by every call, a wake with @nr 0 and a wait that fails EAGAIN included; a node
 * that does not exist is EINVAL. The node picks one of the per-node wait tables (placed on
 * that node): waiters and wakers meet only through the same node. UFUTEX_MPOL without
 * UFUTEX_NUMA uses the policy's node when there is one. (The kernel also takes the home node of a
 * bind or preferred-many policy; user space cannot read a home node, so those count as none,
 * as they do in the kernel without one.) The node count comes from sysfs;
 * UFUTEX_NUMA_NODES=N in the environment makes N virtual nodes (for tests). A node word of -1
 * in memory that cannot be written fails with EFAULT, as the kernel's write-back does.
 *
 * Process-shared words (no UFUTEX_PRIVATE): waiters in different processes that map the same
 * object — a memfd, a shm_open object, a MAP_SHARED file, a SysV segment, or MAP_SHARED |
 * MAP_ANONYMOUS memory inherited across fork — meet, at any address in each process, with the
 * same calls, counts and errors as private words. A shared word in process-private memory
 * (heap, stack, writable MAP_PRIVATE) works within the process, keyed by process and address;
 * a shared word never meets a private word at the same address. Two modes, chosen once per
 * process by the environment at its first shared call:
 *
 *  - Default: ufutex's own per-user shared table, in a segment file every process of the user
 *    maps. Every size (U8/U16/U32/U64), masks, waitv entries that mix private and shared words
 *    (up to UFUTEX_WAITV_MAX), requeue. A shared wake with nobody waiting anywhere costs a
 *    fence and a load (no system call). The fastest; for processes of one user that all use
 *    ufutex (or libufutex_preload.so with UFUTEX_PRELOAD_SHARED=table).
 *  - UFUTEX_SHARED=kernel: every shared word goes to the kernel's futex on the word itself. It
 *    meets processes that call the futex system calls directly, processes of other users, and
 *    works in sandboxes that cannot open the segment. U32 is exact; U8 and U16 use their lane
 *    of the containing aligned u32 with the mask moved onto the lane (exact among words of the
 *    same size; overlapping words of other sizes may meet); U64 only with a mask of all ones
 *    (else EINVAL); requeue U32 only (else EINVAL); waitv only U32 entries, at most 128, all
 *    shared (a mix of private and shared entries is EINVAL).
 *
 * Never mix modes across processes that share words: a waiter in one mode and a waker in the
 * other do not see each other (the waiter sleeps on until its deadline).
 *
 * The segment (default mode) is $UFUTEX_SHARED_DIR/table if that variable is set, else
 * $XDG_RUNTIME_DIR/ufutex-table, else /dev/shm/ufutex-<uid>/table (the directory created with
 * mode 0700). It must be a regular file owned by the user with no group or other permission
 * bits, and not a symlink (else EACCES). Its capacities are fixed by the process that creates
 * it, from the environment (read only then): UFUTEX_SHARED_PROCS processes at once (default
 * 128), UFUTEX_SHARED_WAITERS waiting entries per process (default 2048; a waitv takes one per
 * entry), UFUTEX_SHARED_BUCKETS hash buckets (default 4096, rounded up to a power of two). A
 * process killed at any point leaves the table usable: a lock its dead owner held is taken over
 * after about a millisecond and its queue repaired; its waiters are not counted by a wake.
 * A segment whose header is corrupt or of another version of ufutex is started afresh by the
 * next process that opens it when no live process holds a slot in it; while one does, opening
 * it fails with ENOTRECOVERABLE (processes of two versions never share a table: they would not
 * see each other's waiters). Reset by hand (after ENOTRECOVERABLE from a corrupt queue, or to
 * change the capacities): remove the segment file when no process uses it; the next shared
 * call creates a fresh one. (Removing it while processes use it splits them: old and new users
 * stop meeting.)
 *
 * The errors shared words add, per call below: EACCES (the segment is not safely owned, as
 * above), ENOTRECOVERABLE (the segment is corrupt, or of another version and in use), ENOSPC (a capacity above is reached),
 * ENOMEM (the segment cannot be created or mapped), EFAULT (the word is not mapped — a shared
 * wake reads the word, as the kernel looks its page up — or lies in read-only private anonymous
 * memory, as the kernel). With UFUTEX_NUMA or UFUTEX_MPOL the node word is resolved and written
 * back as for a private word; the shared table itself has no per-node tables.
 *
 * Example: a parent and its child share a word in MAP_SHARED | MAP_ANONYMOUS memory.
 *
 *     uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
 *     *w = 0;
 *     if (fork() == 0) {
 *             __atomic_store_n(w, 1, __ATOMIC_SEQ_CST);
 *             ufutex_wake(w, ~0UL >> 32, INT_MAX, UFUTEX_SIZE_U32);  // no UFUTEX_PRIVATE
 *             _exit(0);
 *     }
 *     while (__atomic_load_n(w, __ATOMIC_SEQ_CST) == 0)
 *             ufutex_wait(w, 0, ~0UL >> 32, UFUTEX_SIZE_U32, NULL, 0);  // EAGAIN once it is 1
 *     wait(NULL);
 *
 * Unmapped memory: a call that must read a word, a timespec or a ufutex_waitv array that is
 * not mapped fails with EFAULT instead of crashing. On x86_64 and aarch64 the read is a single
 * load whose fault is caught: the first call that reads caller memory installs a SIGSEGV and SIGBUS
 * handler (SA_SIGINFO | SA_ONSTACK) that recognises faults of that load only and hands every
 * other fault to the handler that was installed before it (or to the default action). A
 * program that installs its own SIGSEGV handler later should chain to the previous one, as
 * handlers should; one that does not loses EFAULT (it sees the fault instead). Elsewhere, or
 * when the environment holds UFUTEX_FAULT_PROBE=syscall at the first such call (no handler is
 * installed then), every read is checked with process_vm_readv instead: a few microseconds.
 * Memory that was found mapped must stay mapped until the call returns (the kernel would
 * return EFAULT then; ufutex may crash). A private wake never reads the word: waking an
 * address that was just unmapped is fine, as with the kernel (a shared wake is EFAULT there,
 * as with the kernel).
 *
 * Signals: a signal handler may wake, as it may with the system calls (a semaphore's post),
 * whatever its thread was doing in the library. A wake, requeue or wake-op that interrupts its
 * thread inside a bucket's critical section (a few list operations under a lock) cannot take
 * that lock; it is deferred, returns 0 (nobody woken yet), and its waiters are woken by the
 * thread as soon as it leaves the critical section, before the interrupted call returns. A
 * deferred requeue wakes the waiters it would have moved; a deferred wake-op applies its
 * operation at once. A wait, waitv or requeue's wait called from a handler that interrupted
 * its thread inside a wait or a critical section of the library returns EINTR without queueing
 * (after the value check: a mismatch is still EAGAIN). The same holds while the thread sets up
 * the process's use of the shared table (its first process-shared wait or wake: the segment
 * and the process's slot), which a handler cannot wait for. A thread's first wait allocates
 * nothing (its waiter state is in its static TLS), so a handler may make it even where it
 * interrupted malloc(). What still allocates, and so is not safe from a handler that
 * interrupted the allocator: a wait that grows the library's process-wide state (the process's
 * first wait, which installs the fork handlers and makes the library's thread key; a thread's
 * first wait that grows an automatically sized table; one that needs the next chunk of 512
 * waiter nodes), a waitv of more entries than its thread used before, a thread's first wait in
 * a process that made 32 pthread keys before the library's (glibc allocates the values of later
 * keys), and a UFUTEX_NUMA call that interrupts its thread's first UFUTEX_NUMA call of the
 * process (the node topology is read). A thread's waiter state is dropped at its exit by a
 * destructor in the library, so once a thread has waited the library keeps itself loaded:
 * dlclose() leaves it in place. No call may be left with longjmp() or siglongjmp(): a waiter
 * would stay queued, where a later wake could take it instead of a real one.
 * libufutex_preload.so passes a futex call made from inside its own dispatch to the kernel;
 * leaving a wait by siglongjmp is not safe there either.
 *
 * Fork: a child made by fork() starts, as with the kernel's private futexes, with none of
 * the parent's waiters: the library's pthread_atfork handlers (installed at the process's
 * first wait) keep resizes out of the fork and, in the child, empty every queue and free
 * every lock, so a wake in the child reaches the child's own waiters and counts only them.
 * The parent's waiters are untouched. A child made without the handlers (glibc's _Fork(), a
 * raw clone() without CLONE_VM) gets the same fresh start from its first call that could
 * meet the parent's waiters (a page the library maps MADV_WIPEONFORK when it is loaded tells
 * it). If another thread held the library's domain lock at that fork (resizing a table,
 * setting up or querying a domain), the child takes the lock over; the one domain whose
 * state that thread was changing keeps its tables as they are in the child: it no longer
 * grows, and a resize of it fails with ENOTRECOVERABLE. (As glibc's own locks are left as
 * they were by _Fork, such a child should make only async-signal-safe calls, as POSIX says;
 * wait and wake are.) Either kind of fork may come while another thread makes one of the
 * library's first-use set-ups (installing the fork handlers or the fault handler, reading
 * the NUMA topology, mapping the shared table): the child makes it again itself, never
 * waiting for that thread; nor does a child wait for a thread that was opening or closing
 * counted named objects (it keeps its own books of them). A fork from a signal handler that
 * interrupted its thread inside the library leaves the queues as they are (the interrupted
 * call goes on in the child). Process-shared words are keyed by the object, so parent and
 * child meet on them as before.
 *
 * Out of memory for a wait-queue table, a call returns ENOMEM and changes nothing: a resize
 * (ufutex_hash_set_slots) keeps the old table, and a wait, waitv or requeue on a UFUTEX_NUMA
 * word whose node has no table yet fails before it queues. The plain table never needs memory
 * for a wait: it starts as a static one, and automatic growth that fails keeps its size.
 *
 * Private waiters and wakers meet in the process default table of the library; each copy of
 * the library in a process (a static and a shared one) has its own table. Shared words meet in
 * the user's shared table (or the kernel), whatever copy of the library makes the call.
 */
#ifndef UFUTEX_H
#define UFUTEX_H

#include <stdint.h>
#include <sys/types.h> /* clockid_t, also under strict ISO C */
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flags: the same values as the kernel's FUTEX2_* flags. */
#define UFUTEX_SIZE_U8 0x00
#define UFUTEX_SIZE_U16 0x01
#define UFUTEX_SIZE_U32 0x02
#define UFUTEX_SIZE_U64 0x03
#define UFUTEX_SIZE_MASK 0x03
/* Word followed by a same-size node word, the pair aligned to twice the size (see above). */
#define UFUTEX_NUMA 0x04
/* Node from the preferred memory policy covering the word, where there is one. */
#define UFUTEX_MPOL 0x08
/* Process-private word; without it the word is process-shared (see above). */
#define UFUTEX_PRIVATE 0x80
/* Every flag bit a word may carry; any other bit is EINVAL. */
#define UFUTEX_VALID_MASK 0x8f
/* Most entries of one ufutex_waitv call (the kernel allows 128). */
#define UFUTEX_WAITV_MAX 1024
/* Node word value meaning "the caller's current node". */
#define UFUTEX_NO_NODE (-1)

/**
 * struct ufutex_waitv - one word of ufutex_waitv() or ufutex_requeue().
 *
 * Layout-identical to the kernel's struct futex_waitv (24 bytes); @__reserved must be 0.
 */
struct ufutex_waitv {
	/* value the word must hold, at its size */
	uint64_t val;
	/* the word's address */
	uint64_t uaddr;
	/* UFUTEX_SIZE_* [| UFUTEX_PRIVATE] [| UFUTEX_NUMA] [| UFUTEX_MPOL] */
	uint32_t flags;
	/* must be zero */
	uint32_t __reserved;
};

#ifndef __cplusplus
_Static_assert(sizeof(struct ufutex_waitv) == 24, "struct ufutex_waitv must match struct futex_waitv");
_Static_assert(_Alignof(struct ufutex_waitv) == 8, "struct ufutex_waitv must be 8-byte aligned");
_Static_assert(__builtin_offsetof(struct ufutex_waitv, uaddr) == 8, "uaddr at offset 8");
_Static_assert(__builtin_offsetof(struct ufutex_waitv, flags) == 16, "flags at offset 16");
_Static_assert(__builtin_offsetof(struct ufutex_waitv, __reserved) == 20, "__reserved at offset 20");
#endif

/**
 * ufutex_wait() - wait on a futex word while it holds a value.
 * @uaddr:   the word; aligned to its size
 * @val:     the value to compare with, at the word's size
 * @mask:    wake mask; only wakes whose mask shares a bit with it count (not 0)
 * @flags:   UFUTEX_SIZE_* | UFUTEX_PRIVATE (without it: process-shared, see above)
 * @timeout: absolute time to give up at, on @clockid; NULL waits forever
 * @clockid: CLOCK_MONOTONIC or CLOCK_REALTIME (looked at only when @timeout is given)
 *
 * If *@uaddr == @val (compared atomically with queueing), sleep until a ufutex_wake() or
 * ufutex_requeue() whose mask shares a bit with @mask dequeues this thread, or until @timeout.
 * A return of 0 is never spurious. A signal handler installed with SA_RESTART does not end
 * the wait; one without it does (EINTR). It must not leave the wait with longjmp(), and a
 * wait that it calls while the wait goes on returns EINTR (see "Signals" above).
 *
 * Return: 0 when woken; -1 and errno:
 *  - EINVAL: unknown flag bits; @val or @mask wider than the size; @mask is 0; @clockid not
 *    CLOCK_MONOTONIC/CLOCK_REALTIME with a @timeout; tv_sec < 0 or tv_nsec outside [0, 1e9);
 *    @uaddr misaligned (for UFUTEX_NUMA: to twice the size); a node word naming no node;
 *    shared, UFUTEX_SHARED=kernel: a U64 word with a @mask other than all ones;
 *  - EFAULT: @timeout not mapped; @uaddr (or its node word) NULL, not mapped or in the
 *    kernel's half; shared: @uaddr in read-only private anonymous memory, when the value
 *    matches (a mismatch is EAGAIN without asking what backs the page; the kernel says
 *    EFAULT there too);
 *  - EAGAIN: *@uaddr != @val;
 *  - ETIMEDOUT: @timeout passed;
 *  - EINTR: a signal handler without SA_RESTART ran; or called from a signal handler that
 *    interrupted this thread inside the library (see "Signals" above);
 *  - shared words, default mode: EACCES, ENOTRECOVERABLE, ENOMEM (the segment, see above);
 *    ENOSPC (the process slots or this process's waiter records are all in use).
 */
long ufutex_wait(void *uaddr, unsigned long val, unsigned long mask, unsigned int flags,
		 const struct timespec *timeout, clockid_t clockid);

/**
 * ufutex_wake() - wake waiters of a futex word.
 * @uaddr: the word; aligned to its size; a private word is never read, a shared one is
 * @mask:  wake only waiters whose mask shares a bit with it (not 0)
 * @nr:    most waiters to wake; 0 wakes none, INT_MAX all
 * @flags: UFUTEX_SIZE_* | UFUTEX_PRIVATE (without it: process-shared, see above)
 *
 * Wakes up to @nr waiters on @uaddr, oldest first (for a shared word: in any process). Change
 * the word before waking. With no waiters this does not enter the kernel (a shared word in
 * UFUTEX_SHARED=kernel mode always does). A waiter whose process died is not counted.
 *
 * Return: the number woken (0 for a wake a signal handler made while its thread was inside
 * the library's critical section: deferred, see "Signals" above); -1 and errno:
 *  - EINVAL: unknown flag bits; @mask wider than the size or 0; @nr < 0; @uaddr misaligned;
 *    a node word naming no node; shared, UFUTEX_SHARED=kernel: a U64 word with a @mask other
 *    than all ones;
 *  - EFAULT: @uaddr NULL or in the kernel's half; a NUMA node word not mapped; shared: @uaddr
 *    not mapped (a private word itself is never read). A shared word in read-only private
 *    anonymous memory, where nobody can wait, is woken with 0 (the kernel says EFAULT);
 *  - shared words, default mode: EACCES, ENOTRECOVERABLE, ENOMEM (the segment, see above).
 */
long ufutex_wake(void *uaddr, unsigned long mask, int nr, unsigned int flags);

/**
 * ufutex_waitv() - wait on any of several futex words, of any sizes.
 * @waiters:    array of @nr_futexes entries; each entry's val, uaddr and flags as for
 *              ufutex_wait() (the mask is all bits)
 * @nr_futexes: 1 to UFUTEX_WAITV_MAX
 * @flags:      must be 0
 * @timeout:    absolute time to give up at, on @clockid; NULL waits forever
 * @clockid:    CLOCK_MONOTONIC or CLOCK_REALTIME (looked at only when @timeout is given)
 *
 * Queues on every entry in index order, each compared atomically with its queueing, and
 * sleeps until a waker dequeues this thread from one of them. Duplicates are allowed. Entries
 * may mix private and shared words (default mode; each is found as by ufutex_wait()); with
 * UFUTEX_SHARED=kernel, a vector with shared entries must hold only shared U32 entries, at most
 * 128.
 *
 * Return: the index of a woken entry (the highest among those a waker dequeued); -1 and errno:
 *  - EINVAL: @flags != 0; @nr_futexes 0 or above UFUTEX_WAITV_MAX; @waiters NULL; bad clock
 *    or timespec; an entry with unknown flag bits, a non-zero __reserved, a val wider than its
 *    size, or a misaligned uaddr; a node word naming no node; UFUTEX_SHARED=kernel with a
 *    shared entry: an entry that is not U32, private entries beside shared ones, or more
 *    than 128 entries;
 *  - EFAULT: @waiters or @timeout not mapped; an entry's uaddr (or node word) NULL, not mapped
 *    or in the kernel's half; a shared entry in read-only private anonymous memory;
 *  - EAGAIN: some entry's word does not hold its val (unless an earlier entry was woken
 *    meanwhile: its index is returned);
 *  - ETIMEDOUT, EINTR: as ufutex_wait();
 *  - ENOMEM: no memory to copy the entries, or for a node's first table (UFUTEX_NUMA); the
 *    shared segment cannot be mapped;
 *  - shared entries, default mode: EACCES, ENOTRECOVERABLE (the segment, see above); ENOSPC
 *    (the process slots, or this process's waiter records — one per shared entry — are all
 *    in use).
 */
long ufutex_waitv(struct ufutex_waitv *waiters, unsigned int nr_futexes, unsigned int flags,
		  const struct timespec *timeout, clockid_t clockid);

/**
 * ufutex_requeue() - wake waiters of one word and move others to another word.
 * @waiters:    two entries: [0] the source (its val is compared), [1] the target (its val is
 *              only checked to fit the size); both must carry identical flags (both private
 *              or both shared)
 * @flags:      must be 0
 * @nr_wake:    most waiters of the source to wake
 * @nr_requeue: most further waiters of the source to move to the target
 *
 * If *waiters[0].uaddr == waiters[0].val (compared with both queues locked), wakes up to
 * @nr_wake waiters of the source, oldest first, and moves up to @nr_requeue more behind the
 * target's waiters (a target that is the source: counted and left in their places, as the
 * kernel leaves them). The target word is never read. Shared words: waiters of any process are
 * woken or moved (a waiter whose process died is taken out, not moved or counted); with
 * UFUTEX_SHARED=kernel only U32 words.
 *
 * Return: woken + moved; -1 and errno:
 *  - EINVAL: @flags != 0; @waiters NULL; an entry with unknown flag bits, a non-zero
 *    __reserved or a val wider than its size; entries' flags differ; @nr_wake < 0 or
 *    @nr_requeue < 0; a misaligned uaddr; a node word naming no node; shared words with
 *    UFUTEX_SHARED=kernel: a size other than U32;
 *  - EFAULT: @waiters not mapped; a uaddr NULL or in the kernel's half; the source word (or a
 *    node word) not mapped;
 *  - EAGAIN: the source word does not hold waiters[0].val;
 *  - shared words, default mode: EACCES, ENOTRECOVERABLE, ENOMEM (the segment, see above).
 */
long ufutex_requeue(struct ufutex_waitv *waiters, unsigned int flags, int nr_wake, int nr_requeue);

/**
 * ufutex_wake_op() - wake waiters of two words, the second wake decided by an operation on the
 * second word (the legacy FUTEX_WAKE_OP, for 32-bit words).
 * @uaddr1: the first word (never read when private; a shared word's page is looked up)
 * @uaddr2: the second word, changed by @op
 * @nr1:    most waiters of @uaddr1 to wake
 * @nr2:    most waiters of @uaddr2 to wake, if the comparison holds
 * @op:     the operation word of linux/futex.h's FUTEX_OP(op, oparg, cmp, cmparg): SET, ADD, OR,
 *          ANDN or XOR with a 12-bit signed oparg (or 1 << oparg with FUTEX_OP_OPARG_SHIFT),
 *          then EQ, NE, LT, LE, GT or GE of the old value against a 12-bit signed cmparg
 * @flags:  UFUTEX_SIZE_U32, and UFUTEX_PRIVATE unless the words are process-shared
 *
 * With the queues of both words locked: applies the operation to *@uaddr2 atomically, wakes up
 * to @nr1 waiters of @uaddr1 (any mask), oldest first, and, if the old value of *@uaddr2
 * compares true, up to @nr2 waiters of @uaddr2. While nobody waits on either word, no queue is
 * locked: the operation alone, then a second look at @uaddr2's queue (a waiter that arrived
 * during the call, after the operation, may then be woken too). Without UFUTEX_PRIVATE both
 * words are process-shared: their queues are the shared table's (or the kernel's, with
 * UFUTEX_SHARED=kernel), and waiters in other processes are woken.
 *
 * Return: the number woken; -1 and errno:
 *  - EINVAL: unknown flag bits, a size other than 32 bits, UFUTEX_NUMA or UFUTEX_MPOL;
 *    @nr1 < 0 or @nr2 < 0; a misaligned word;
 *  - EFAULT: a word NULL or in the kernel's half; @uaddr2 not mapped writable; a shared
 *    @uaddr1 not mapped (as the kernel, each word's key in turn: @uaddr1's page before
 *    @uaddr2's alignment);
 *  - ENOSYS: an unknown op (nothing written) or comparison (the word was written, as the
 *    kernel does).
 */
long ufutex_wake_op(void *uaddr1, void *uaddr2, int nr1, int nr2, unsigned int op, unsigned int flags);

/**
 * ufutex_shared_register() - promise that a shared mapping stays, to skip identity queries.
 * @addr: the start of the range
 * @len:  its length in bytes
 *
 * Until ufutex_shared_unregister(@addr), the range stays mapped, to the same shared object, in
 * this process. Waits and wakes on process-shared words in it then skip the kernel query that
 * otherwise finds, for every operation that queues or dequeues, what object backs the word
 * (1-10 us). The range must be one mapping (mmap, shmat) of a shared object: a memfd, shm_open
 * or other file mapped MAP_SHARED, shared anonymous memory, a SysV segment. Other processes
 * need not register theirs. The promise is not checked: a range unmapped or replaced while
 * registered can make waits and wakes on its words miss each other (a waiter then sleeps until
 * its timeout). A forked child inherits the registrations.
 *
 * Return: 0; -1 and errno:
 *  - EINVAL: @len is 0; the range is private memory, spans more than one mapping or overlaps a
 *    registered range;
 *  - EFAULT: nothing is mapped at @addr;
 *  - ENOMEM: 256 ranges are registered (named namespaces count too).
 */
long ufutex_shared_register(const void *addr, size_t len);

/**
 * ufutex_shared_unregister() - end the promise of ufutex_shared_register() for a range.
 * @addr: the start of a registered range
 *
 * The range may be unmapped once this returns. No wait or wake on a word in it may be in flight
 * meanwhile.
 *
 * Return: 0; -1 and errno EINVAL if no registered range starts at @addr.
 */
long ufutex_shared_unregister(const void *addr);

/**
 * ufutex_hash_set_slots() - size the process default wait-queue table.
 * @slots: 0 for one large fixed table (final); a power of two >= 2 for that many buckets
 * @flags: must be 0
 *
 * The analogue of prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, slots, flags), for private
 * words only (the shared table is sized when its segment is created, see above). By default the
 * table sizes itself to the number of threads that wait; a fixed size stops that. Switching to
 * the large table is final. Queued waiters move to the new table.
 *
 * Return: 0; -1 and errno:
 *  - EINVAL: @flags != 0; @slots neither 0 nor a power of two >= 2;
 *  - EBUSY: the large table was chosen before;
 *  - ENOMEM: @slots is above 2^20 (a table of 64 MiB), or the table's memory cannot be had
 *    (nothing changes then);
 *  - ENOTRECOVERABLE: in a child made without the fork handlers while another thread of the
 *    parent was resizing the table ("Fork" above): the table stays as it is.
 */
long ufutex_hash_set_slots(unsigned long slots, unsigned long flags);

/**
 * ufutex_hash_get_slots() - the process default table's size.
 *
 * The analogue of prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS).
 *
 * Return: the number of buckets, or 0 for the large fixed table. Does not fail.
 */
long ufutex_hash_get_slots(void);

/*
 * The handoff mutex and the requeueing condition variable (ufutex::sync).
 *
 * pthread-like, unlike the calls above: every function returns 0 on success or an errno value
 * (it never returns -1 and never sets errno). Deadlines are absolute CLOCK_MONOTONIC times.
 * Objects are private to the process (no process-shared variant).
 */

/**
 * typedef ufutex_mutex_t - a mutex in two bytes: a state byte and a mode byte.
 *
 * An uncontended lock is one atomic instruction. The unlock is a plain store and a few loads
 * while no thread is about to sleep on the mutex (the mode byte counts those), and one atomic
 * instruction while one is; once they are gone, the plain store comes back. While the process
 * has a single thread (glibc's __libc_single_threaded),
 * lock and unlock are a plain load and store, as glibc's own mutexes do. A contended lock
 * spins briefly,
 * then sleeps on the lock byte itself (an 8-bit ufutex word). A waiter that keeps losing the
 * lock to other threads asks for a handoff, and the next unlock passes the lock to it
 * directly. Initialise with UFUTEX_MUTEX_INIT (all zero); no destroy is needed. Not
 * recursive; the owner is not recorded, so unlocking a mutex another thread holds is not
 * detected.
 */
typedef struct ufutex_mutex {
	uint16_t __state; /* the state byte, then the mode byte */
} ufutex_mutex_t;

/**
 * typedef ufutex_cond_t - a condition variable whose broadcast requeues.
 *
 * ufutex_cond_broadcast() wakes one waiter and moves the others onto the mutex, so each
 * unlock releases the next instead of all of them racing for the lock. Use one mutex with a
 * condition variable; with several it still works, but broadcasts then wake everyone at once.
 * Initialise with UFUTEX_COND_INIT (all zero); no destroy is needed.
 */
typedef struct ufutex_cond {
	uint32_t __seq;
	uintptr_t __mutex;
} ufutex_cond_t;

#define UFUTEX_MUTEX_INIT { 0 }
#define UFUTEX_COND_INIT { 0, 0 }

/**
 * ufutex_mutex_lock() - lock @m, waiting as long as it takes.
 * @m: the mutex.
 *
 * Return: 0, or EINVAL if @m is NULL.
 */
int ufutex_mutex_lock(ufutex_mutex_t *m);

/**
 * ufutex_mutex_trylock() - lock @m only if it is free.
 * @m: the mutex.
 *
 * Return: 0; EBUSY if @m is held (or being handed over); EINVAL if @m is NULL.
 */
int ufutex_mutex_trylock(ufutex_mutex_t *m);

/**
 * ufutex_mutex_timedlock() - lock @m, giving up at an absolute time.
 * @m: the mutex.
 * @abs_monotonic: the deadline, an absolute CLOCK_MONOTONIC time.
 *
 * The deadline is validated even when @m is free. A free mutex is taken even if the deadline
 * has passed.
 *
 * Return: 0; ETIMEDOUT if the deadline passed first; EINVAL if @m or @abs_monotonic is NULL,
 * or tv_nsec is outside [0, 999999999], or tv_sec is negative.
 */
int ufutex_mutex_timedlock(ufutex_mutex_t *m, const struct timespec *abs_monotonic);

/**
 * ufutex_mutex_unlock() - unlock @m, waking one waiter if any sleeps.
 * @m: the mutex, held by the caller.
 *
 * Return: 0; EPERM if @m is not locked; EINVAL if @m is NULL.
 */
int ufutex_mutex_unlock(ufutex_mutex_t *m);

/**
 * ufutex_cond_wait() - atomically unlock @m and wait on @c; relock @m before returning.
 * @c: the condition variable.
 * @m: the mutex, held by the caller.
 *
 * Wakeups may be spurious: wait in a loop that checks the condition.
 *
 * Return: 0; EPERM if @m is not locked; EINVAL if @c or @m is NULL.
 */
int ufutex_cond_wait(ufutex_cond_t *c, ufutex_mutex_t *m);

/**
 * ufutex_cond_timedwait() - ufutex_cond_wait(), giving up at an absolute time.
 * @c: the condition variable.
 * @m: the mutex, held by the caller.
 * @abs_monotonic: the deadline, an absolute CLOCK_MONOTONIC time.
 *
 * Return: 0; ETIMEDOUT if the deadline passed (@m is relocked either way); EPERM if @m is not
 * locked; EINVAL for a NULL pointer or a bad timespec (as ufutex_mutex_timedlock()).
 */
int ufutex_cond_timedwait(ufutex_cond_t *c, ufutex_mutex_t *m, const struct timespec *abs_monotonic);

/**
 * ufutex_cond_signal() - wake one waiter of @c, if any.
 * @c: the condition variable.
 *
 * Return: 0, or EINVAL if @c is NULL.
 */
int ufutex_cond_signal(ufutex_cond_t *c);

/**
 * ufutex_cond_broadcast() - wake every waiter of @c.
 * @c: the condition variable.
 *
 * One waiter is woken now; the others are requeued onto their mutex and woken one per unlock.
 *
 * Return: 0, or EINVAL if @c is NULL.
 */
int ufutex_cond_broadcast(ufutex_cond_t *c);

/*
 * Named objects: semaphores, events, mutexes and raw words found by a 64-bit key in a
 * namespace, a file of the user's beside the shared table (ns-<name>; the same location rules,
 * mode 0600 and EACCES checks as the shared table; a new one has 2^16 slots, or
 * UFUTEX_NAMED_SLOTS, a power of two of at least 32: a sparse file of 128 bytes per slot, which
 * grows by a level twice as large whenever its newest level is half used; a namespace meant for
 * millions of objects is faster made with that many slots at once). Looking an object up
 * takes no lock and no system call; operating on it enters the kernel only to sleep or wake. All
 * processes of a namespace trust each other (one user). An object is found by a 64-bit key, or,
 * with UFUTEX_BYNAME in an open's flags, by a name: the open's key is then the address of a
 * NUL-terminated string of 1 to 56 bytes, (uint64_t)(uintptr_t)"name" (read without trusting the
 * pointer: EFAULT if NULL or unreadable, EINVAL if empty, ENAMETOOLONG past 56 bytes). Names and
 * keys are apart: the name "5" and the key 5 are two objects.
 *
 * Lifetime: an object lives until it is removed (ufutex_obj_remove, like SysV's IPC_RMID), or,
 * opened with UFUTEX_COUNTED, while some process holds a handle to it: each counted open is one
 * handle, ufutex_obj_close lets go of one, and the object dies with the last handle of the last
 * process that holds it (like Windows handles). A process that dies lets go of its handles: the
 * next process that opens the namespace gives them back. A counted object is of another kind
 * than a plain one under the same key (EINVAL); ufutex_obj_remove removes either now.
 *
 * Conventions: -1 and errno on failure, like the futex calls. The open calls return 0 when they
 * created the object and 1 when it existed; flags: 0 (open: ENOENT if absent), UFUTEX_CREAT
 * (open or create), UFUTEX_CREAT | UFUTEX_EXCL (create: EEXIST if present); another kind under
 * the key is EINVAL. An open checks the namespace pointer (EINVAL), the flags (EINVAL), then that
 * its out-pointers can be written (EFAULT: NULL, unwritable or misaligned), and only then looks
 * the key up or creates it, so a failed open changes nothing. Pointers passed in (handles,
 * names) are read without trusting them: EFAULT, never a crash. A handle (struct ufutex_obj)
 * names its object until the object is removed,
 * then EIDRM, even after the key is reused. Deadlines are absolute on CLOCK_MONOTONIC or
 * CLOCK_REALTIME (NULL: none): ETIMEDOUT, EINTR as for ufutex_wait.
 *
 * A handle does not carry its object's kind: each call asks the object. A call on a handle
 * checks, in this order: a NULL or unreadable handle, EFAULT; a namespace pointer this library did not return,
 * EINVAL; a removed object, EIDRM; an object of another kind than the call's (ufutex_sem_post on
 * a mutex's handle, ufutex_nmutex_lock on an event's, ...), EINVAL; then the timeout as
 * ufutex_wait checks it (clock, then the timespec). Only then does the operation run.
 *
 * Crash safety: a process killed while creating or removing leaves the namespace consistent (the
 * next creator or remover finishes or undoes its change after about a millisecond). A process
 * killed holding a named mutex, or a thread that ends holding one (its process living on),
 * leaves it abandoned: the next ufutex_nmutex_lock takes it and returns EOWNERDEAD (a positive
 * value: the caller owns the mutex; what it protects may be inconsistent). A namespace of
 * another version or with a corrupt header is made afresh, empty, when no process has it open,
 * and gives ENOTRECOVERABLE while one does.
 */
#define UFUTEX_CREAT   0x1
#define UFUTEX_EXCL    0x2
#define UFUTEX_COUNTED 0x4 /* or'ed into an open's flags: a counted object (see Lifetime) */
#define UFUTEX_BYNAME  0x8 /* or'ed into an open's flags: the key is the address of a name */

typedef struct ufutex_ns ufutex_ns_t;

struct ufutex_obj {
	ufutex_ns_t *ns;
	uint32_t slot;
	uint32_t gen;
};

/* Open (or create) the namespace `name` (letters, digits, '.', '_', '-'; 1 to 64 bytes): the
 * same pointer for the same name in one process, valid for the life of the process. NULL and
 * errno: EINVAL (bad name), EFAULT (NULL), EACCES, ENOTRECOVERABLE, ENOMEM, EMFILE (64 names
 * already open in this process). */
ufutex_ns_t *ufutex_ns_open(const char *name);
/* Remove the namespace's file (processes that have it keep using it): ENOENT if none. */
long ufutex_ns_unlink(const char *name);
/* Remove the object `key` now: its handles fail with EIDRM, its waiters wake with EIDRM. */
long ufutex_obj_remove(ufutex_ns_t *ns, uint64_t key);
/* The same for the object named `name` (a name as UFUTEX_BYNAME reads it). */
long ufutex_obj_remove_name(ufutex_ns_t *ns, const char *name);
/* Let go of one handle from a UFUTEX_COUNTED open: with the last handle of the last process
 * that holds it, the object dies (as if removed). EBADF if this process holds no handle from a
 * counted open to that object (a plain object's handle, or one closed already); EFAULT (NULL),
 * EINVAL (a namespace pointer this library did not return). A forked child's inherited handles
 * are not its own: it opens the object again to hold it. */
long ufutex_obj_close(const struct ufutex_obj *obj);

/* Counting semaphores (count at most INT_MAX; ERANGE past it; EINVAL for a larger initial). */
long ufutex_sem_open(ufutex_ns_t *ns, uint64_t key, unsigned int flags, unsigned int initial,
		     struct ufutex_obj *out);
long ufutex_sem_post(const struct ufutex_obj *sem, unsigned int n);
long ufutex_sem_wait(const struct ufutex_obj *sem, const struct timespec *timeout, clockid_t clockid);
long ufutex_sem_trywait(const struct ufutex_obj *sem); /* EAGAIN at 0 */

/* Events: manual reset (a set releases every waiter and stays set) or auto reset (a set
 * releases one waiter, which resets it); a pulse releases the current waiters (all, or one) and
 * leaves it unsignaled. An existing event keeps its mode and state. */
long ufutex_event_open(ufutex_ns_t *ns, uint64_t key, unsigned int flags, int manual, int signaled,
		       struct ufutex_obj *out);
long ufutex_event_set(const struct ufutex_obj *ev);
long ufutex_event_reset(const struct ufutex_obj *ev);
long ufutex_event_pulse(const struct ufutex_obj *ev);
long ufutex_event_wait(const struct ufutex_obj *ev, const struct timespec *timeout, clockid_t clockid);

/* Mutexes with an owner (process and thread), recursive for their owner thread: lock returns 0
 * or EOWNERDEAD (see above); trylock EBUSY when held; unlock EPERM from a thread that does not
 * hold it. A dead owner is noticed within about 20 ms of sleeping on it. */
long ufutex_nmutex_open(ufutex_ns_t *ns, uint64_t key, unsigned int flags, struct ufutex_obj *out);
long ufutex_nmutex_lock(const struct ufutex_obj *m, const struct timespec *timeout, clockid_t clockid);
long ufutex_nmutex_trylock(const struct ufutex_obj *m);
long ufutex_nmutex_unlock(const struct ufutex_obj *m);

/* A raw 32-bit word (a new one holds 0): *word gets its address, a process-shared futex word
 * for ufutex_wait/ufutex_wake/ufutex_waitv (UFUTEX_SIZE_U32, without UFUTEX_PRIVATE). A removed
 * word holds 0xffffffff and its waiters are woken. */
long ufutex_word_open(ufutex_ns_t *ns, uint64_t key, unsigned int flags, struct ufutex_obj *out,
		      uint32_t **word);
/* The same at any size: size is UFUTEX_SIZE_U8, _U16, _U32 or _U64 (else EINVAL), and *word
 * points to a word of that size (8-aligned); use the same size flag with ufutex_wait & co. The
 * size is part of the word's kind: opening it at another size is EINVAL. A removed word holds
 * all ones at its size. */
long ufutex_word_open_sized(ufutex_ns_t *ns, uint64_t key, unsigned int flags, unsigned int size,
			    struct ufutex_obj *out, void **word);

/* One object of ufutex_wait_any: a handle of any kind, and for a raw word the value it is
 * ready to differ from. */
struct ufutex_waitable {
	struct ufutex_obj obj;
	uint64_t val; /* raw words: ready when the word != val, at the word's size (a wider val is
		       * EINVAL); semaphores, events, mutexes: must be 0 (reserved: EINVAL) */
};

#ifndef __cplusplus
_Static_assert(sizeof(struct ufutex_obj) == 16, "struct ufutex_obj: 16 bytes");
_Static_assert(sizeof(struct ufutex_waitable) == 24, "struct ufutex_waitable: 24 bytes");
_Static_assert(__builtin_offsetof(struct ufutex_waitable, val) == 16, "val at offset 16");
#endif

/* Or'ed into ufutex_wait_any's result when the object taken is an abandoned mutex (its owner
 * ended holding it): the caller owns the mutex, as after ufutex_nmutex_lock's EOWNERDEAD. */
#define UFUTEX_WAIT_ABANDONED 0x10000

/*
 * ufutex_wait_any() - wait until one of @n objects is ready, and take it (WaitForMultipleObjects
 * with bWaitAll FALSE).
 * @objs: @n entries (1 to UFUTEX_WAITV_MAX), any kinds, any namespaces; read once, at the call.
 * @timeout, @clockid: an absolute deadline, as for ufutex_sem_wait (NULL: none).
 *
 * Ready, and what is taken: a semaphore whose count is above 0 (one is taken); an event that is
 * signaled (an auto-reset one's signal is taken; a manual-reset one stays set) or is pulsed
 * while the call waits; a mutex that is free, held by the calling thread (taken once more,
 * recursively) or abandoned by its owner (taken: UFUTEX_WAIT_ABANDONED); a raw word that no
 * longer holds val (nothing is taken). The objects are looked at in index order and the first
 * ready one is taken, only that one: the result is the lowest index ready when the call looked.
 *
 * Return: the index (0 to @n - 1), or the index | UFUTEX_WAIT_ABANDONED for an abandoned mutex,
 * so that a switch on the index does not mistake it for a normal take:
 *
 *	long r = ufutex_wait_any(objs, 3, &deadline, CLOCK_MONOTONIC);
 *	if (r >= 0 && (r & UFUTEX_WAIT_ABANDONED))
 *		repair_state_of(r & ~UFUTEX_WAIT_ABANDONED);   (then as for a normal take)
 *
 * Or -1 and errno, checked in this order: EINVAL if @n is 0 or above UFUTEX_WAITV_MAX; EFAULT if
 * @objs is NULL; then each entry in index order, the first bad one deciding: EFAULT if it is
 * not readable, then its handle as a call on a handle checks it (EINVAL for a namespace this
 * library did not return, EIDRM if the object was removed, EINVAL for a kind this library does
 * not know), then EINVAL for a val wider than a raw word's size or a non-zero val of another
 * kind; then the timeout (EINVAL, EFAULT). While waiting: EIDRM if one of the objects was
 * removed (nothing was taken), ETIMEDOUT, EINTR as for ufutex_wait; ENOMEM if memory for the
 * call's copy of @objs cannot be had.
 */
long ufutex_wait_any(const struct ufutex_waitable *objs, unsigned int n, const struct timespec *timeout,
		     clockid_t clockid);

#ifdef __cplusplus
}
#endif

#endif /* UFUTEX_H */
