/*
 * The header against the kernel's own: struct ufutex_waitv must be struct futex_waitv, and the
 * flag values the FUTEX2_* ones. Compiling this file is the test (it also runs, trivially).
 */
#include <linux/futex.h>
#include <stddef.h>
#include <stdio.h>
#include <ufutex.h>

_Static_assert(sizeof(struct ufutex_waitv) == sizeof(struct futex_waitv), "size");
_Static_assert(_Alignof(struct ufutex_waitv) == _Alignof(struct futex_waitv), "alignment");
_Static_assert(offsetof(struct ufutex_waitv, val) == offsetof(struct futex_waitv, val), "val");
_Static_assert(offsetof(struct ufutex_waitv, uaddr) == offsetof(struct futex_waitv, uaddr), "uaddr");
_Static_assert(offsetof(struct ufutex_waitv, flags) == offsetof(struct futex_waitv, flags), "flags");
_Static_assert(offsetof(struct ufutex_waitv, __reserved) == offsetof(struct futex_waitv, __reserved),
	       "__reserved");
_Static_assert(UFUTEX_SIZE_U32 == FUTEX_32, "FUTEX_32");
_Static_assert(UFUTEX_PRIVATE == FUTEX_PRIVATE_FLAG, "FUTEX2_PRIVATE is FUTEX_PRIVATE_FLAG");
_Static_assert(UFUTEX_WAITV_MAX >= FUTEX_WAITV_MAX, "we take at least the kernel's vector");
#ifdef FUTEX2_SIZE_U8 /* newer uapi headers */
_Static_assert(UFUTEX_SIZE_U8 == FUTEX2_SIZE_U8 && UFUTEX_SIZE_U16 == FUTEX2_SIZE_U16, "sizes");
_Static_assert(UFUTEX_SIZE_U32 == FUTEX2_SIZE_U32 && UFUTEX_SIZE_U64 == FUTEX2_SIZE_U64, "sizes");
_Static_assert(UFUTEX_SIZE_MASK == FUTEX2_SIZE_MASK && UFUTEX_NUMA == FUTEX2_NUMA, "mask, numa");
_Static_assert(UFUTEX_PRIVATE == FUTEX2_PRIVATE, "private");
#endif
#ifdef FUTEX2_MPOL
_Static_assert(UFUTEX_MPOL == FUTEX2_MPOL, "mpol");
#endif
_Static_assert(UFUTEX_VALID_MASK == (UFUTEX_SIZE_MASK | UFUTEX_NUMA | UFUTEX_MPOL | UFUTEX_PRIVATE), "valid");
_Static_assert(UFUTEX_SIZE_U8 == 0 && UFUTEX_SIZE_U16 == 1 && UFUTEX_SIZE_U64 == 3, "futex2 values");
_Static_assert(UFUTEX_NUMA == 4 && UFUTEX_MPOL == 8 && UFUTEX_NO_NODE == -1, "futex2 values");

int main(void)
{
	puts("abi_layout: ok");
	return 0;
}
