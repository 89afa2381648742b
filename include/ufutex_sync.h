/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ufutex_sync.h - the ufutex handoff mutex and requeueing condition variable.
 *
 * pthread-like: every function returns 0 on success or an errno value (it never returns -1
 * and never sets errno). Deadlines are absolute CLOCK_MONOTONIC times. Objects are private to
 * the process (no process-shared variant).
 */
#ifndef UFUTEX_SYNC_H
#define UFUTEX_SYNC_H

#include <stdint.h>
#include <time.h>

struct timespec; /* complete in <time.h> under POSIX; declared here for strict ISO C modes */

#ifdef __cplusplus
extern "C" {
#endif

/**
 * typedef ufutex_mutex_t - a mutex in one byte.
 *
 * Uncontended lock and unlock are one atomic instruction each. A contended lock spins briefly,
 * then sleeps on the lock byte itself (an 8-bit ufutex word). A waiter that keeps losing the
 * lock to other threads asks for a handoff, and the next unlock passes the lock to it
 * directly. Initialise with UFUTEX_MUTEX_INIT (all zero); no destroy is needed. Not
 * recursive; the owner is not recorded, so unlocking a mutex another thread holds is not
 * detected.
 */
typedef struct ufutex_mutex {
	uint8_t __state;
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

#ifdef __cplusplus
}
#endif

#endif /* UFUTEX_SYNC_H */
