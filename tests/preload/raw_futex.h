/*
 * A FUTEX_WAKE made with a raw system call (the `syscall` instruction), which does not go
 * through libc's syscall(), so no interposer sees it: as a process that is not preloaded, or
 * the kernel's own wake of a thread-id word, wakes. For the preload library's tests.
 */
#ifndef UFUTEX_TESTS_RAW_FUTEX_H
#define UFUTEX_TESTS_RAW_FUTEX_H

#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>

/* FUTEX_WAKE (`op`: with or without FUTEX_PRIVATE_FLAG) of up to `n` waiters of `u`: the
 * kernel's answer (-errno on failure), or -ENOSYS where there is no raw call for this
 * architecture here (x86-64 only). */
static inline long raw_futex_wake(uint32_t *u, int op, int n)
{
#if defined(__x86_64__)
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_futex), "D"(u), "S"((long)op), "d"((long)n)
			 : "rcx", "r11", "memory");
	return r;
#else
	(void)u;
	(void)op;
	(void)n;
	return -ENOSYS;
#endif
}

#endif
