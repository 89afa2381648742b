/*
 * The C ABI's no-syscall paths against the kernel's, in one run, interleaved: a wait whose
 * value differs and a wake with no waiters, plus the cost of the probe syscall
 * (process_vm_readv of 4 bytes) that the portable read path adds to every read, the EFAULT
 * path (a caught SIGSEGV for ufutex), and a waitv of 128 private 32-bit words whose last value
 * differs (EAGAIN after checking all 128; 1/32 as many calls) — and of 8- and 64-bit words
 * (ufutex only: the kernel's are 32-bit) — and FUTEX_WAKE_OP with nobody
 * waiting on private words and on words in MAP_SHARED memory (ADD 1 to the second, compare its
 * old value with 0). Prints medians in ns per call and ratios to the kernel.
 * Not a test: no assertion.
 *
 *     bench_fastpath [ROUNDS [CALLS]]      (default 15 rounds of 200000 calls)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <linux/futex.h>
#include <ufutex.h>
#include "deadline.h"
#include <unistd.h>

enum { KINDS = 15, WAITV = 7, WAITV_SIZES = 13, WAITV_N = 128 };
static const char *names[KINDS] = {"ufutex_wait EAGAIN",	 "kernel futex_wait EAGAIN", "ufutex_wake (none)",
				   "kernel futex_wake (none)", "process_vm_readv 4 B",	     "ufutex_wait EFAULT",
				   "kernel futex_wait EFAULT", "ufutex_waitv 128 EAGAIN",    "kernel futex_waitv 128 EAGAIN",
				   "ufutex_wake_op (none)",    "kernel FUTEX_WAKE_OP (none)", "ufutex_wake_op shared",
				   "kernel FUTEX_WAKE_OP shared", "ufutex_waitv 128 u8 EAGAIN",   "ufutex_waitv 128 u64 EAGAIN"};
static uint32_t word = 1, word2;
static uint32_t *shm; /* two words in MAP_SHARED | MAP_ANONYMOUS memory */
static void *inaccessible;
static const unsigned add1_eq0 = (1u << 28) | (1u << 12); /* FUTEX_OP(ADD, 1, EQ, 0) */
static uint32_t words[WAITV_N];
static struct ufutex_waitv vec[WAITV_N];
static uint64_t words64[WAITV_N];
static struct ufutex_waitv vec8[WAITV_N], vec64[WAITV_N];

static void one(int kind)
{
	switch (kind) {
	case 0: ufutex_wait(&word, 0, 0xffffffffUL, UFUTEX_SIZE_U32 | UFUTEX_PRIVATE, NULL, 0); break;
	case 1: syscall(455, &word, 0UL, 0xffffffffUL, 0x82U, NULL, 0); break;
	case 2: ufutex_wake(&word, 0xffffffffUL, 1, UFUTEX_SIZE_U32 | UFUTEX_PRIVATE); break;
	case 3: syscall(454, &word, 0xffffffffUL, 1, 0x82U); break;
	case 5: ufutex_wait(inaccessible, 0, 0xffffffffUL, UFUTEX_SIZE_U32 | UFUTEX_PRIVATE, NULL, 0); break;
	case 6: syscall(455, inaccessible, 0UL, 0xffffffffUL, 0x82U, NULL, 0); break;
	case 7: ufutex_waitv(vec, WAITV_N, 0, NULL, 0); break;
	case 8: syscall(449, vec, WAITV_N, 0U, NULL, 0); break;
	case 9: ufutex_wake_op(&word, &word2, 1, 1, add1_eq0, UFUTEX_SIZE_U32 | UFUTEX_PRIVATE); break;
	case 10: syscall(SYS_futex, &word, FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG, 1, (void *)1, &word2, add1_eq0); break;
	case 11: ufutex_wake_op(&shm[0], &shm[16], 1, 1, add1_eq0, UFUTEX_SIZE_U32); break;
	case 12: syscall(SYS_futex, &shm[0], FUTEX_WAKE_OP, 1, (void *)1, &shm[16], add1_eq0); break;
	case 13: ufutex_waitv(vec8, WAITV_N, 0, NULL, 0); break;
	case 14: ufutex_waitv(vec64, WAITV_N, 0, NULL, 0); break;
	case 4: {
		uint32_t out;
		struct iovec l = {&out, 4}, r = {&word, 4};
		process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	}
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 15;
	long calls = argc > 2 ? atol(argv[2]) : 200000;
	double *ns = calloc((size_t)rounds * KINDS, sizeof(double));
	inaccessible = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	shm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	for (int i = 0; i < WAITV_N; i++) { /* every value matches but the last */
		uint64_t val = i == WAITV_N - 1 ? 1 : 0, u64 = (uint64_t)(uintptr_t)&words64[i];
		vec[i] = (struct ufutex_waitv){.val = val,
					       .uaddr = (uint64_t)(uintptr_t)&words[i],
					       .flags = UFUTEX_SIZE_U32 | UFUTEX_PRIVATE};
		vec8[i] = (struct ufutex_waitv){.val = val, .uaddr = u64, .flags = UFUTEX_SIZE_U8 | UFUTEX_PRIVATE};
		vec64[i] = (struct ufutex_waitv){.val = val, .uaddr = u64, .flags = UFUTEX_SIZE_U64 | UFUTEX_PRIVATE};
	}
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < KINDS; k++) {
			long n = k == WAITV || k == WAITV + 1 || k >= WAITV_SIZES ? (calls + 31) / 32 : calls;
			double t0 = now_ns();
			for (long i = 0; i < n; i++)
				one(k);
			ns[k * rounds + r] = (now_ns() - t0) / n;
		}
	double med[KINDS];
	for (int k = 0; k < KINDS; k++) {
		qsort(ns + k * rounds, rounds, sizeof(double), cmp);
		med[k] = ns[k * rounds + rounds / 2];
	}
	printf("%-28s %10s %10s %10s\n", "call", "median ns", "min ns", "max ns");
	for (int k = 0; k < KINDS; k++)
		printf("%-28s %10.1f %10.1f %10.1f\n", names[k], med[k], ns[k * rounds], ns[k * rounds + rounds - 1]);
	printf("wait EAGAIN: ufutex/kernel = %.3f; with a probe syscall it would be %.3f\n", med[0] / med[1],
	       (med[0] + med[4]) / med[1]);
	printf("wake (none): ufutex/kernel = %.3f\n", med[2] / med[3]);
	printf("wait EFAULT (caught fault): ufutex/kernel = %.3f\n", med[5] / med[6]);
	printf("waitv 128 EAGAIN: ufutex/kernel = %.3f; u8 and u64 words against 32-bit: %.3f, %.3f\n", med[7] / med[8],
	       med[13] / med[7], med[14] / med[7]);
	printf("wake_op (none): ufutex/kernel = %.3f private, %.3f shared\n", med[9] / med[10], med[11] / med[12]);
	free(ns);
	return 0;
}
