//! Reading the caller's memory without trusting it: the `copy_from_user` of the C ABI.
//!
//! The kernel answers `EFAULT` when a futex call must read a word (or a `futex_waitv` array, or
//! a timespec) that is not mapped. We must too, and a mismatching wait must still cost a load,
//! not a system call. Two ways to read:
//!
//! - **x86_64 and aarch64: exception fixup**, as the kernel's own exception table. Each load
//!   is one instruction at a known address. Natively it is inline at its caller, listed with
//!   its fixup in a table of the library (`inline_load_u32!`, `inline_load_other!`; section
//!   `ufutex_fx_table`); under valgrind, and for the write probes, it is the first
//!   instruction of a tiny assembly function
//!   (`ufutex_fx_load{8,16,32,64}`, `ufutex_fx_touch…`), called through a pointer. A
//!   `SIGSEGV`/`SIGBUS` handler, installed once before the first such access, looks at the
//!   faulting instruction pointer: if it is one of ours, it rewrites the saved context to
//!   resume at its fixup, which reports "fault" to the caller; otherwise it hands the signal on
//!   to whatever handler was there before (see `chain`). A successful read is a plain load:
//!   on x86_64 also a sequentially consistent atomic load of an aligned word, on aarch64 a
//!   relaxed one — enough, as each read here is a first look (a failing wait's `EAGAIN`, an
//!   argument's copy) that the core repeats with its own ordered load where the answer must
//!   hold against wakers (`calls.rs`: `holding`).
//! - **elsewhere, or with `UFUTEX_FAULT_PROBE=syscall`: a probe syscall.** `process_vm_readv`
//!   on our own pid copies the bytes or fails with `EFAULT`; ~2.5 µs a read here (it pins the
//!   page), so a mismatching wait costs more than the kernel's. x86_64 builds compile it too, and
//!   the unit tests and a CI run of the C suite exercise it.
//!
//! A call that reads many words (`futex_waitv`) reads them through [`ReadPages`]: the fault-safe
//! read once a 4 KiB block, plain loads for the other words of a block that read, as memory
//! found mapped stays mapped for the call (the C ABI's contract).
//!
//! What the handler does is async-signal-safe: it reads the saved context and static data
//! written before it was installed, writes the saved context, and otherwise calls `sigaction`,
//! `raise` or the previous handler, as a chaining handler must.

use crate::word::Size;

/// The read touched memory that is not mapped readable: the call fails with `EFAULT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fault;

/// Read the word at `addr` at `size`, zero-extended; `Err(Fault)` if it is not readable.
/// `addr` must be aligned to the size (validated before).
#[inline(always)] // the load in its caller, the first read's set-up out of line: a hint left it a call
pub(crate) fn read_word(addr: usize, size: Size) -> Result<u64, Fault> {
    debug_assert_eq!(addr % size.bytes(), 0);
    match read_word_at_once(addr, size) {
        Some(r) => r,
        None => read_word_first(addr, size),
    }
}

/// [`read_word`] when reads are not ready (the first read of the process installs the fault
/// handler) or go through the probe syscall.
#[cold]
#[inline(never)]
fn read_word_first(addr: usize, size: Size) -> Result<u64, Fault> {
    #[cfg(ufutex_fixup)]
    if fixup::enabled() {
        return fixup::load(addr, size);
    }
    probe::read(addr, size)
}

/// The fast paths' dispatch on how reads go ([`fixup::mode`]): where reads are ready, return
/// `Some($read)` from the enclosing function, with `$mode` bound to the mode — the native mode
/// first, told with one compare of the mode's byte in memory and passed as the constant;
/// where they are not (the process's first read, or every read through the probe syscall),
/// fall through to the caller's slower answer. A macro, not a function taking a closure:
/// shared through a closure, this dispatch brought back `ufutex_waitv`'s frame (three saved
/// registers and a stack adjustment, sixtieth session).
macro_rules! return_when_ready {
    (|$mode:ident| $read:expr) => {
        #[cfg(ufutex_fixup)]
        {
            let now = fixup::mode();
            if now == fixup::DIRECT {
                let $mode = fixup::DIRECT;
                return Some($read);
            }
            std::hint::cold_path();
            if now != fixup::NOT_READY {
                let $mode = now;
                return Some($read);
            }
        }
    };
}

/// [`read_word`] for a fast path that has a slower way to fall back on: `None` if reads are not
/// ready to be done without a call (the first read of the process, which installs the fault
/// handler, or every read when they go through the probe syscall).
#[inline(always)]
pub(crate) fn read_word_at_once(addr: usize, size: Size) -> Option<Result<u64, Fault>> {
    debug_assert_eq!(addr % size.bytes(), 0);
    return_when_ready!(|mode| fixup::load_as(mode, addr, size));
    None
}

/// What a caller's 32-bit word held, against a value ([`compare_u32_at_once`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compared {
    Equal,
    Differs,
    /// The word does not read.
    Fault,
}

/// [`read_word_at_once`] of a 32-bit word, compared with `val`: `None` if reads are not ready
/// to be done without a call. Natively one instruction compares the word in memory, and a
/// fault resumes at the caller's answer to it ([`fixup::compare_u32_as`]), with no value or
/// fault flag carried out of the read (the C ABI's failing wait: BENCHMARKS.md, eighty-eighth
/// session).
#[inline(always)]
pub(crate) fn compare_u32_at_once(addr: usize, val: u32) -> Option<Compared> {
    debug_assert_eq!(addr % 4, 0);
    return_when_ready!(|mode| fixup::compare_u32_as(mode, addr, val));
    let _ = val;
    None
}

/// `N` consecutive 8-byte fields of a caller's struct at `at` (any alignment), each one load:
/// `None` if any does not read, or if the struct would run past the end of the address space.
/// Every field is read before any is looked at.
#[inline(always)]
pub(crate) fn read_u64s<const N: usize>(at: usize) -> Option<[u64; N]> {
    match read_u64s_ready(at) {
        Some(fields) => fields,
        None => read_u64s_first(at),
    }
}

/// [`read_u64s`] for a fast path that has a slower way to fall back on: also `None` if reads are
/// not ready to be done without a call (as [`read_word_at_once`]). Natively the mode is asked
/// once for all the fields and each load is one instruction ([`fixup::load_u64s_as`]): a
/// one-entry failing waitv through the C ABI reads its entry so, with no frame (BENCHMARKS.md,
/// sixtieth session).
#[inline(always)]
pub(crate) fn read_u64s_at_once<const N: usize>(at: usize) -> Option<[u64; N]> {
    read_u64s_ready(at).flatten()
}

/// [`read_u64s`] if reads are ready (`Some`), else `None`.
#[inline(always)]
fn read_u64s_ready<const N: usize>(at: usize) -> Option<Option<[u64; N]>> {
    const { assert!(N > 0) };
    if at.checked_add(N * 8 - 1).is_none() {
        return Some(None);
    }
    return_when_ready!(|mode| fixup::load_u64s_as(mode, at));
    None
}

/// [`read_u64s`] when reads are not ready: field by field through [`read_u64`] (the first read
/// of the process installs the fault handler; or the probe syscall).
#[cold]
#[inline(never)]
fn read_u64s_first<const N: usize>(at: usize) -> Option<[u64; N]> {
    let mut fields = [0; N];
    for (i, field) in fields.iter_mut().enumerate() {
        *field = read_u64(at + 8 * i).ok()?;
    }
    Some(fields)
}

/// Read 8 bytes at `addr` (any alignment): a field of a caller's struct.
#[inline]
pub(crate) fn read_u64(addr: usize) -> Result<u64, Fault> {
    #[cfg(ufutex_fixup)]
    if fixup::enabled() {
        return fixup::load(addr, Size::U64);
    }
    probe::read_bytes::<8>(addr).map(u64::from_ne_bytes)
}

/// Whether the word at `addr` of `size` may be written, without changing it: `Err(Fault)` if
/// a store there would fault (read-only or unmapped). The kernel's write-back of a NUMA node
/// word fails with `EFAULT` on such memory; this lets the C ABI answer the same instead of
/// crashing on its own write. `addr` must be aligned to the size.
pub(crate) fn check_writable(addr: usize, size: Size) -> Result<(), Fault> {
    debug_assert_eq!(addr % size.bytes(), 0);
    #[cfg(ufutex_fixup)]
    if fixup::enabled() {
        return fixup::touch(addr, size);
    }
    probe::writable(addr)
}

/// The smallest page size on Linux: every page is a whole number of these blocks, and an aligned
/// word of at most 8 bytes lies inside one.
const BLOCK: usize = 4096;

/// Reads of one call's words that pay the fault-safe read once a 4 KiB block instead of once a
/// word: the words of a `futex_waitv` array mostly share pages. Once a word of a block has read
/// without a fault, the block is mapped readable, and the other words there are read with plain
/// atomic loads — sound because memory found mapped stays mapped for the call (the C ABI's
/// contract, see `calls`), which is why [`ReadPages::new`] is `unsafe`.
///
/// It remembers the last block only: words that alternate between blocks take the fault-safe read
/// at each switch (the same answers, only not faster).
pub(crate) struct ReadPages {
    /// The base of the block last read without a fault, or [`ReadPages::NONE`].
    block: usize,
}

impl ReadPages {
    /// No block is known readable. Not a block base, and its bit 11 is set, which the mask of
    /// [`ReadPages::cached`] always clears: no address matches it (0 would: NULL's block).
    const NONE: usize = 0x800;

    /// No block known readable yet.
    ///
    /// # Safety
    /// - every block a word read through this value without a fault stays mapped readable for
    ///   as long as this value lives (for the C ABI: keep it inside one call).
    #[inline(always)]
    pub(crate) unsafe fn new() -> ReadPages {
        ReadPages { block: Self::NONE }
    }

    /// The word of `size` at `addr`, zero-extended, if `addr` is aligned to the size and in the
    /// block known readable; `None` otherwise (any `addr`: nothing is read then). One masked
    /// compare tells both: the mask keeps the bits below the size (0 when aligned) and those of
    /// the block.
    #[inline(always)]
    pub(crate) fn cached(&self, addr: usize, size: Size) -> Option<u64> {
        if addr & Self::mask(size) != self.block {
            return None;
        }
        // SAFETY:
        // - `addr` is aligned to `size` (the mask kept its low bits, and they are 0 as the
        //   block's are), so the word lies inside the block `self.block`;
        // - a word of that block read without a fault through `self` (`first_in_block` is what
        //   sets `block`), so the block was mapped readable, and it stays so while `self` lives
        //   (`new`'s contract): `from_raw`'s readable atomic of that size;
        // - the load is atomic (SeqCst, as the fault-safe `mov`): the caller's other threads may
        //   write the word meanwhile, a race the kernel tolerates too.
        Some(unsafe { crate::word::WordRef::from_raw(addr, size) }.load())
    }

    /// The mask of [`ReadPages::cached`]'s one compare for a word of `size`: it keeps the bits
    /// below the size (0 when aligned) and those of the block.
    #[inline(always)]
    pub(crate) fn mask(size: Size) -> usize {
        !(BLOCK - size.bytes())
    }

    /// Whether a block is known readable: [`ReadPages::known_block`] is then a block's base.
    #[inline(always)]
    pub(crate) fn knows_block(&self) -> bool {
        self.block != Self::NONE
    }

    /// The base of the block known readable, or a value that no [`ReadPages::mask`] gives for
    /// any address (bit 11 set) when none is: an address `addr` with
    /// `addr & ReadPages::mask(size) == known_block()` is aligned to `size` and readable while
    /// `self` lives, as in `cached`.
    #[inline(always)]
    pub(crate) fn known_block(&self) -> usize {
        self.block
    }

    /// The word of `size` at `addr` (aligned to the size), zero-extended; `Err(Fault)` if it is
    /// not readable. As [`read_word`], with a plain load in the known block.
    #[inline(always)]
    pub(crate) fn read(&mut self, addr: usize, size: Size) -> Result<u64, Fault> {
        debug_assert_eq!(addr % size.bytes(), 0);
        match self.cached(addr, size) {
            Some(v) => Ok(v),
            None => self.first_in_block(addr, size),
        }
    }

    /// [`ReadPages::read`] of a word outside the known block: the fault-safe read, which on
    /// success makes its block the known one.
    #[inline(never)]
    fn first_in_block(&mut self, addr: usize, size: Size) -> Result<u64, Fault> {
        let v = read_word(addr, size)?;
        self.block = addr & !(BLOCK - 1);
        Ok(v)
    }
}

/// The environment variable that turns the fault handler off (value `syscall`), read once at the
/// first read of caller memory: every read is then checked with the probe syscall instead. For
/// programs whose own SIGSEGV handling cannot chain (and to test the portable path). Only where
/// the handler exists (x86_64 and aarch64 Linux): elsewhere every read takes the probe syscall
/// anyway.
#[cfg(any(test, ufutex_fixup))]
pub(crate) const PROBE_ENV: &str = "UFUTEX_FAULT_PROBE";

/// The portable way: ask the kernel to copy from our own address space (elsewhere than x86_64
/// and aarch64, or with `UFUTEX_FAULT_PROBE=syscall`).
pub(crate) mod probe {
    use super::Fault;
    use crate::word::Size;

    /// Copy `N` bytes from `addr` (any alignment).
    pub(crate) fn read_bytes<const N: usize>(addr: usize) -> Result<[u8; N], Fault> {
        let mut out = [0u8; N];
        let local = libc::iovec { iov_base: out.as_mut_ptr().cast(), iov_len: N };
        let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: N };
        // SAFETY:
        // - `local` describes `out`, writable for N bytes for the whole call;
        // - `remote` is only read by the kernel, which checks it and reports EFAULT instead of
        //   faulting; our own pid is always accessible to us.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if n == N as isize {
            Ok(out)
        } else {
            Err(Fault)
        }
    }

    /// `MADV_POPULATE_WRITE` (Linux 5.14).
    const MADV_POPULATE_WRITE: libc::c_int = 23;

    /// Whether the page holding `addr` is mapped writable: `MADV_POPULATE_WRITE` faults it in
    /// for writing, as the store that follows would (EINVAL: not writable; ENOMEM: unmapped).
    /// Kernels without it answer EINVAL for any page; that is told apart once, on a page known
    /// writable, and there the check passes (the store may then fault, as before).
    pub(crate) fn writable(addr: usize) -> Result<(), Fault> {
        use std::sync::atomic::AtomicU8;
        static SUPPORTED: AtomicU8 = AtomicU8::new(0); // `primitive::asked_once`
        let page = 4096usize; // the smallest page size: any page size is a multiple of it
        let populate = |at: usize| {
            // SAFETY: madvise only inspects and populates the mapping at the page-aligned
            // address; it never changes memory contents (a private page may be copied on write,
            // keeping its contents).
            unsafe { libc::madvise((at & !(page - 1)) as *mut libc::c_void, 1, MADV_POPULATE_WRITE) }
        };
        let supported = crate::primitive::asked_once(&SUPPORTED, || {
            let probe = AtomicU8::new(0); // on this thread's stack: writable
            populate(probe.as_ptr() as usize) == 0
        });
        if populate(addr) == 0 || !supported {
            Ok(())
        } else {
            Err(Fault)
        }
    }

    /// Read a word of `size` at `addr`, zero-extended.
    pub(crate) fn read(addr: usize, size: Size) -> Result<u64, Fault> {
        Ok(match size {
            Size::U8 => u64::from(u8::from_ne_bytes(read_bytes::<1>(addr)?)),
            Size::U16 => u64::from(u16::from_ne_bytes(read_bytes::<2>(addr)?)),
            Size::U32 => u64::from(u32::from_ne_bytes(read_bytes::<4>(addr)?)),
            Size::U64 => u64::from_ne_bytes(read_bytes::<8>(addr)?),
        })
    }
}

#[cfg(ufutex_fixup)]
mod fixup {
    use super::Fault;
    use crate::once::{Once, Run};
    use crate::word::Size;
    use std::cell::UnsafeCell;
    use std::mem::MaybeUninit;
    use std::sync::atomic::{AtomicU8, Ordering};

    // Each function's first instruction is its only memory access (a load, or for the
    // `touch` functions an atomic add of 0: a write that changes nothing); a fault there resumes at
    // `ufutex_fx_fixup`, which returns (0, 1). The stack is untouched before the load, so the
    // fixup's `ret` returns to the caller. Symbols are hidden: every copy of the library in a
    // process has its own. (Natively, loads are inline: `inline_load_u32!`, `inline_load_other!`;
    // these functions serve the write probes, and the loads under valgrind.)
    //
    // `fx_fn!(name, instructions…)`: one such function, as assembly text: global but hidden,
    // typed and sized as a function (so that debuggers and profilers name it).
    macro_rules! fx_fn {
        ($name:literal, $($insn:literal),+ $(,)?) => {
            concat!(
                ".globl ", $name, "\n.hidden ", $name, "\n.type ", $name, ",%function\n", $name, ":\n",
                $($insn, "\n",)+
                ".size ", $name, ", . - ", $name,
            )
        };
    }
    /// The table of inline loads (`inline_load_u32!`, `inline_load_other!`): pairs of 32-bit
    /// offsets, each from its own field, to a load and to its fixup. The entry here names no
    /// load (both offsets lead into the table, where no instruction runs); it makes sure the
    /// section, and the `__start_`/`__stop_` symbols the handler reads, exist in every link.
    /// Retained (`R`): only those symbols refer to the section. (`%progbits`: the spelling both
    /// architectures' assemblers take.)
    macro_rules! fx_table_base {
        () => {
            concat!(
                ".pushsection ufutex_fx_table,\"aR\",%progbits\n",
                ".balign 4\n",
                "ufutex_fx_table_base:\n",
                ".long ufutex_fx_table_base - .\n",
                ".long ufutex_fx_table_base - .\n",
                ".popsection",
            )
        };
    }

    #[cfg(target_arch = "x86_64")]
    core::arch::global_asm!(
        ".pushsection .text.ufutex_fx,\"ax\",@progbits",
        ".p2align 4",
        fx_fn!("ufutex_fx_load8", "movzx eax, byte ptr [rdi]", "xor edx, edx", "ret"),
        fx_fn!("ufutex_fx_load16", "movzx eax, word ptr [rdi]", "xor edx, edx", "ret"),
        fx_fn!("ufutex_fx_load32", "mov eax, dword ptr [rdi]", "xor edx, edx", "ret"),
        fx_fn!("ufutex_fx_load64", "mov rax, qword ptr [rdi]", "xor edx, edx", "ret"),
        fx_fn!("ufutex_fx_touch8", "lock add byte ptr [rdi], 0", "xor eax, eax", "xor edx, edx", "ret"),
        fx_fn!("ufutex_fx_touch16", "lock add word ptr [rdi], 0", "xor eax, eax", "xor edx, edx", "ret"),
        fx_fn!("ufutex_fx_touch32", "lock add dword ptr [rdi], 0", "xor eax, eax", "xor edx, edx", "ret"),
        fx_fn!("ufutex_fx_touch64", "lock add qword ptr [rdi], 0", "xor eax, eax", "xor edx, edx", "ret"),
        fx_table_base!(),
        fx_fn!("ufutex_fx_fixup", "xor eax, eax", "mov edx, 1", "ret"),
        ".popsection",
    );

    // aarch64: the same functions (natively the loads are inline here too, and these serve the
    // write probes and the loads under valgrind). A load is the function's first instruction, as
    // above. A write probe is an exclusive load and store of the value read
    // (`ldxr`/`stxr`, looping while another thread's write breaks the exclusive pair: so no
    // write is lost and no value changes); it faults at its first instruction (unmapped) or
    // at its second (the store, on a read-only page), and nothing was written either way:
    // the handler resumes both at the fixup (`is_probe_access`). They return in X0:X1 (a
    // 16-byte struct of two integers, AAPCS64) and change X0–X3 and the flags only, which the
    // caller of an `extern "C"` function does not expect kept.
    #[cfg(target_arch = "aarch64")]
    core::arch::global_asm!(
        ".pushsection .text.ufutex_fx,\"ax\",%progbits",
        ".p2align 4",
        fx_fn!("ufutex_fx_load8", "ldrb w0, [x0]", "mov x1, #0", "ret"),
        fx_fn!("ufutex_fx_load16", "ldrh w0, [x0]", "mov x1, #0", "ret"),
        fx_fn!("ufutex_fx_load32", "ldr w0, [x0]", "mov x1, #0", "ret"),
        fx_fn!("ufutex_fx_load64", "ldr x0, [x0]", "mov x1, #0", "ret"),
        fx_fn!(
            "ufutex_fx_touch8",
            "ldxrb w2, [x0]",
            "stxrb w3, w2, [x0]",
            "cbnz w3, ufutex_fx_touch8",
            "mov x0, #0",
            "mov x1, #0",
            "ret"
        ),
        fx_fn!(
            "ufutex_fx_touch16",
            "ldxrh w2, [x0]",
            "stxrh w3, w2, [x0]",
            "cbnz w3, ufutex_fx_touch16",
            "mov x0, #0",
            "mov x1, #0",
            "ret"
        ),
        fx_fn!(
            "ufutex_fx_touch32",
            "ldxr w2, [x0]",
            "stxr w3, w2, [x0]",
            "cbnz w3, ufutex_fx_touch32",
            "mov x0, #0",
            "mov x1, #0",
            "ret"
        ),
        fx_fn!(
            "ufutex_fx_touch64",
            "ldxr x2, [x0]",
            "stxr w3, x2, [x0]",
            "cbnz w3, ufutex_fx_touch64",
            "mov x0, #0",
            "mov x1, #0",
            "ret"
        ),
        fx_table_base!(),
        fx_fn!("ufutex_fx_fixup", "mov x0, #0", "mov x1, #1", "ret"),
        ".popsection",
    );

    /// An inline load block's entries in the table of inline loads (section `ufutex_fx_table`,
    /// read by [`fixup_of`]): for each load's label, the offsets, each from its own field, to
    /// the load and to the block's fixup at label 4 (`fixup_at_4!`). (`%progbits`: the
    /// spelling both architectures' assemblers take.) A label must stay on its load: the
    /// padding the build puts before jumps may not come between them (as it did before a
    /// compare fused with its jump: `compare_u32_as`); `scripts/fault-table.py` checks the
    /// shipped libraries' entries for it.
    macro_rules! fx_entries {
        ($($load:literal),+) => {
            concat!(
                ".pushsection ufutex_fx_table,\"aR\",%progbits\n",
                ".balign 4\n",
                $(".long ", $load, " - .\n", ".long 4f - .\n",)+
                ".popsection",
            )
        };
    }

    /// The part of an inline load's block after its loads: the fixup at label 4, in a cold
    /// section, which zeroes the value, sets the fault flag and jumps back to label 3, after
    /// the loads. (One string, so that both blocks below use it.)
    #[cfg(target_arch = "x86_64")]
    macro_rules! fixup_at_4 {
        () => {
            concat!(
                ".pushsection .text.unlikely.ufutex_fx,\"ax\",@progbits\n",
                "4:\n",
                "xor {v:e}, {v:e}\n",
                "mov {f:e}, 1\n",
                "jmp 3b\n",
                ".popsection",
            )
        };
    }

    /// [`fixup_at_4!`] on aarch64: the same fixup (a write of a W register zeroes the whole X).
    #[cfg(target_arch = "aarch64")]
    macro_rules! fixup_at_4 {
        () => {
            concat!(
                ".pushsection .text.unlikely.ufutex_fx,\"ax\",%progbits\n",
                "4:\n",
                "mov {v:w}, #0\n",
                "mov {f:w}, #1\n",
                "b 3b\n",
                ".popsection",
            )
        };
    }

    /// An inline fault-safe load at `$addr`, `$load` the instruction (`{v}` from `[{a}]`): the
    /// load at a local label, with an entry in the table of inline loads (section
    /// `ufutex_fx_table`, read by [`fixup_of`]): the offsets, each from its own field, to the load
    /// and to its fixup (`fixup_at_4!`). `(value, faulted)`, faulted 0 or 1. `{f}` is written
    /// before the load, so it cannot share `{a}`'s register; `{v}` may (it is written by the load
    /// or, after a fault, by the fixup, when `{a}` is no longer needed). Numeric labels from 2 (0
    /// and 1 read as binary in Intel syntax); each copy of the block has its own. Offsets, not
    /// addresses: the table needs no relocation in a shared library.
    ///
    /// # Safety
    /// The handler is installed, and reading at `addr` has no effect but the load.
    #[cfg(target_arch = "x86_64")]
    macro_rules! inline_load {
        ($addr:expr, $load:literal) => {{
            let (v, f): (u64, u64);
            std::arch::asm!(
                "xor {f:e}, {f:e}",
                concat!("2: ", $load),
                "3:",
                fx_entries!("2b"),
                fixup_at_4!(),
                a = in(reg) $addr,
                v = lateout(reg) v,
                f = out(reg) f,
                options(nostack, readonly),
            );
            (v, f)
        }};
    }

    /// [`inline_load!`] of the 32-bit word at `$addr`.
    #[cfg(target_arch = "x86_64")]
    macro_rules! inline_load_u32 {
        ($addr:expr) => {
            inline_load!($addr, "mov {v:e}, dword ptr [{a}]")
        };
    }

    /// [`inline_load!`] of 8 bytes at `$addr`, any alignment (a field of a caller's struct).
    #[cfg(target_arch = "x86_64")]
    macro_rules! inline_load_u64 {
        ($addr:expr) => {
            inline_load!($addr, "mov {v}, qword ptr [{a}]")
        };
    }

    /// [`inline_load_u64!`] of three consecutive fields from `$at` in one block, with one fault
    /// flag: `(v0, v1, v2, faulted)`. A fault of any load resumes at the fixup, after the loads
    /// (the values are then meaningless). One flag instead of three keeps two registers free, so
    /// that `ufutex_waitv`'s one-entry shortcut, which keeps the call's five arguments for its
    /// tail call, needs no saved register (three blocks took four pushes and pops at its entry).
    ///
    /// # Safety
    /// As [`inline_load!`], for each of the three loads.
    #[cfg(target_arch = "x86_64")]
    macro_rules! inline_load_u64x3 {
        ($at:expr) => {{
            let (v0, v1, v2, f): (u64, u64, u64, u64);
            std::arch::asm!(
                "xor {f:e}, {f:e}",
                "2: mov {v}, qword ptr [{a}]",
                "5: mov {v1}, qword ptr [{a} + 8]",
                "6: mov {v2}, qword ptr [{a} + 16]",
                "3:",
                fx_entries!("2b", "5b", "6b"),
                fixup_at_4!(),
                a = in(reg) $at,
                v = out(reg) v0,
                v1 = out(reg) v1,
                v2 = lateout(reg) v2,
                f = out(reg) f,
                options(nostack, readonly),
            );
            (v0, v1, v2, f)
        }};
    }

    /// [`inline_load!`] of a word of 8, 16 or 64 bits (size code `$code`: 0, 1 or 3), the load
    /// picked by compares inside the block; each of the three loads has its table entry.
    ///
    /// # Safety
    /// As [`inline_load!`].
    #[cfg(target_arch = "x86_64")]
    macro_rules! inline_load_other {
        ($addr:expr, $code:expr) => {{
            let (v, f): (u64, u64);
            std::arch::asm!(
                "xor {f:e}, {f:e}",
                "cmp {c:e}, 1",
                "jb 2f",
                "je 5f",
                "6: mov {v}, qword ptr [{a}]",
                "jmp 3f",
                "5: movzx {v:e}, word ptr [{a}]",
                "jmp 3f",
                "2: movzx {v:e}, byte ptr [{a}]",
                "3:",
                fx_entries!("2b", "5b", "6b"),
                fixup_at_4!(),
                a = in(reg) $addr,
                c = in(reg) $code,
                v = lateout(reg) v,
                f = out(reg) f,
                options(nostack, readonly),
            );
            (v, f)
        }};
    }

    /// [`inline_load!`] on aarch64: the same block.
    ///
    /// # Safety
    /// As on x86_64.
    #[cfg(target_arch = "aarch64")]
    macro_rules! inline_load {
        ($addr:expr, $load:literal) => {{
            let (v, f): (u64, u64);
            std::arch::asm!(
                "mov {f:w}, #0",
                concat!("2: ", $load),
                "3:",
                fx_entries!("2b"),
                fixup_at_4!(),
                a = in(reg) $addr,
                v = lateout(reg) v,
                f = out(reg) f,
                options(nostack, readonly, preserves_flags),
            );
            (v, f)
        }};
    }

    /// [`inline_load_u32!`] on aarch64: one `ldr` of a W register.
    #[cfg(target_arch = "aarch64")]
    macro_rules! inline_load_u32 {
        ($addr:expr) => {
            inline_load!($addr, "ldr {v:w}, [{a}]")
        };
    }

    /// [`inline_load_u64!`] on aarch64: one `ldr` of an X register (unaligned loads of normal
    /// memory are allowed in user space).
    #[cfg(target_arch = "aarch64")]
    macro_rules! inline_load_u64 {
        ($addr:expr) => {
            inline_load!($addr, "ldr {v}, [{a}]")
        };
    }

    /// [`inline_load_other!`] on aarch64: `ldrb`, `ldrh` or an `ldr` of an X register, picked
    /// by compares inside the block, each with its table entry.
    ///
    /// # Safety
    /// As on x86_64.
    #[cfg(target_arch = "aarch64")]
    macro_rules! inline_load_other {
        ($addr:expr, $code:expr) => {{
            let (v, f): (u64, u64);
            std::arch::asm!(
                "mov {f:w}, #0",
                "cmp {c:w}, #1",
                "b.lo 2f",
                "b.eq 5f",
                "6: ldr {v}, [{a}]",
                "b 3f",
                "5: ldrh {v:w}, [{a}]",
                "b 3f",
                "2: ldrb {v:w}, [{a}]",
                "3:",
                fx_entries!("2b", "5b", "6b"),
                fixup_at_4!(),
                a = in(reg) $addr,
                c = in(reg) $code,
                v = lateout(reg) v,
                f = out(reg) f,
                options(nostack, readonly),
            );
            (v, f)
        }};
    }

    /// What the assembly returns, in RAX:RDX (SysV: a 16-byte struct of two integers).
    #[repr(C)]
    struct Loaded {
        value: u64,
        faulted: u64,
    }

    unsafe extern "C" {
        fn ufutex_fx_load8(addr: usize) -> Loaded;
        fn ufutex_fx_load16(addr: usize) -> Loaded;
        fn ufutex_fx_load32(addr: usize) -> Loaded;
        fn ufutex_fx_load64(addr: usize) -> Loaded;
        fn ufutex_fx_touch8(addr: usize) -> Loaded;
        fn ufutex_fx_touch16(addr: usize) -> Loaded;
        fn ufutex_fx_touch32(addr: usize) -> Loaded;
        fn ufutex_fx_touch64(addr: usize) -> Loaded;
        fn ufutex_fx_fixup() -> Loaded;
    }

    /// Whether reads go through the fixup loads: installs the handler on first use, unless the
    /// environment says `UFUTEX_FAULT_PROBE=syscall`.
    #[inline]
    pub(super) fn enabled() -> bool {
        install();
        // Relaxed: written inside `INSTALL.call`, whose completion we observed (Acquire).
        MODE.load(Ordering::Relaxed) != NOT_READY
    }

    /// Whether reads go through the fixup loads, without installing anything: `false` until the
    /// first [`enabled`].
    #[inline(always)]
    pub(super) fn ready() -> bool {
        mode() != NOT_READY
    }

    /// How reads go now (`MODE`), without installing anything: [`NOT_READY`] until the first
    /// [`enabled`] (and always in probe mode).
    #[inline(always)]
    pub(super) fn mode() -> u8 {
        // Relaxed: set once, inside the Once, before any read depends on it; a thread that sees
        // NOT_READY takes the slow way, which calls `enabled` (and so observes the Once).
        MODE.load(Ordering::Relaxed)
    }

    /// One of the fixup functions, one per word size.
    type Access = unsafe extern "C" fn(usize) -> Loaded;
    const LOADS: [Access; 4] = [ufutex_fx_load8, ufutex_fx_load16, ufutex_fx_load32, ufutex_fx_load64];
    const TOUCHES: [Access; 4] = [ufutex_fx_touch8, ufutex_fx_touch16, ufutex_fx_touch32, ufutex_fx_touch64];

    /// Run the `size` member of `fns` on `addr`: the value read, or `Fault`.
    #[inline]
    fn access(fns: &[Access; 4], addr: usize, size: Size) -> Result<u64, Fault> {
        debug_assert!(ready());
        let f = fns[size.bytes().trailing_zeros() as usize];
        // SAFETY:
        // - each function makes one access to `addr` and nothing else: a load, or an atomic
        //   add of 0 (it stores the value it read, so no other thread's write is lost and no
        //   value changes); an access to any address either succeeds or faults, and the fault
        //   is turned into `faulted = 1` by the handler `install` put in place (it is: callers
        //   come after `enabled` returned true, so the Once ran and installed it);
        // - the access has no Rust-visible memory effect: it goes through registers, outside
        //   the Rust abstract machine, on memory the caller passed as a futex word, as the
        //   kernel would read (or write back) it.
        let r = unsafe { f(addr) };
        if r.faulted == 0 {
            Ok(r.value)
        } else {
            Err(Fault)
        }
    }

    /// One fixup load. Call only after [`enabled`] or [`ready`] returned `true`.
    ///
    /// Natively the load is inline, at the caller (`inline_load_u32!`, `inline_load_other!`), with
    /// an entry in the table of inline loads that the handler looks the faulting instruction up
    /// in: no call (a call cost the C ABI's failing wait ~1 ns of its ~4.6: the call and return,
    /// and the size picked in the callee).
    ///
    /// Under valgrind the load is a call of the size's function ([`call_load`]).
    #[inline(always)]
    pub(super) fn load(addr: usize, size: Size) -> Result<u64, Fault> {
        load_as(MODE.load(Ordering::Relaxed), addr, size)
    }

    /// [`load`] in `mode`, which the caller read (a fast path reads it once: [`mode`]).
    #[inline(always)]
    pub(super) fn load_as(mode: u8, addr: usize, size: Size) -> Result<u64, Fault> {
        debug_assert!(mode != NOT_READY);
        let (value, faulted): (u64, u64);
        // SAFETY:
        // - the handler is installed (`enabled` or `ready` returned true: the mode is not
        //   NOT_READY), so a fault of the load resumes at its fixup, with `faulted = 1`;
        // - inline (`inline_load_u32!`, `inline_load_other!`, see there): one load of `addr` at
        //   the word's size, which reads memory the caller passed as a futex word, as the kernel
        //   would read it; `on_fault` finds it in the table of inline loads;
        // - the call (under valgrind): [`call_load`] of the size's load function.
        unsafe {
            if mode == DIRECT {
                // 32 bits, the common size, on its own; the others picked inside one block. (A
                // `match` of four blocks became a jump table, whose indirect jump cost as much
                // as the call this replaces.)
                (value, faulted) =
                    if size == Size::U32 { inline_load_u32!(addr) } else { inline_load_other!(addr, size as u32) };
            } else {
                // (Under valgrind only: out of the way of the inline load's path.)
                std::hint::cold_path();
                (value, faulted) = call_load(LOADS[size as usize], addr);
            }
        }
        if faulted == 0 {
            Ok(value)
        } else {
            Err(Fault)
        }
    }

    /// The 32-bit word at `addr` compared with `val`, in `mode`, which the caller read.
    ///
    /// Natively (x86-64) one `cmp` of the word in memory and a jump (a failing compare, the
    /// common answer of a fast path, falls through): the table of inline loads
    /// lists the `cmp`, whose fixup is the caller's own answer to a fault (an `asm goto` label),
    /// so neither the value nor a fault flag leaves the block. Elsewhere [`load_as`], compared.
    #[inline(always)]
    pub(super) fn compare_u32_as(mode: u8, addr: usize, val: u32) -> super::Compared {
        use super::Compared;
        debug_assert!(mode != NOT_READY);
        #[cfg(target_arch = "x86_64")]
        if mode == DIRECT {
            let mut answer = Compared::Differs;
            // SAFETY:
            // - the handler is installed (the mode is not NOT_READY), and the `cmp` at label 2
            //   is listed in the table of inline loads with the `fault` label as its fixup: a
            //   fault of it resumes there, with every register as the block found it (the
            //   handler changes only the instruction pointer), and no output is expected of the
            //   block on any of its exits;
            // - the `cmp` reads the 4 bytes at `addr`, memory the caller passed as a futex word,
            //   as the kernel would read it, and writes only the flags.
            unsafe {
                std::arch::asm!(
                    "2: cmp dword ptr [{a}], {v:e}",
                    // Not a fused pair: the build pads jumps off 32-byte boundaries
                    // (`.cargo/config.toml`), and before a `cmp` fused with its `je` the padding
                    // went between label 2 and the `cmp`, whose fault the table then did not
                    // name. A jump alone is padded after the `cmp`, or the `cmp` takes prefixes:
                    // either way label 2 stays on it.
                    "nop",
                    "je {equal}",
                    ".pushsection ufutex_fx_table,\"aR\",%progbits",
                    ".balign 4",
                    ".long 2b - .",
                    ".long {fault} - .",
                    ".popsection",
                    a = in(reg) addr,
                    v = in(reg) val,
                    equal = label { answer = Compared::Equal },
                    fault = label { answer = Compared::Fault },
                    options(nostack, readonly),
                );
            }
            return answer;
        }
        match load_as(mode, addr, Size::U32) {
            Ok(v) if v == u64::from(val) => Compared::Equal,
            Ok(_) => Compared::Differs,
            Err(Fault) => Compared::Fault,
        }
    }

    /// `N` loads of 8 bytes from `at` on (any alignment: the fields of a caller's struct) in
    /// `mode`, which the caller read: `None` if any faulted. Natively each is one instruction
    /// and its table entry, with no compare of sizes (`load_as`'s blocks pick among three);
    /// every load is made before any result is looked at. The caller checked that the last
    /// byte's address does not overflow.
    #[inline(always)]
    pub(super) fn load_u64s_as<const N: usize>(mode: u8, at: usize) -> Option<[u64; N]> {
        debug_assert!(mode != NOT_READY);
        let (mut fields, mut faulted) = ([0; N], 0);
        #[cfg(target_arch = "x86_64")]
        if N == 3 && mode == DIRECT {
            // SAFETY: as below, for each of the three loads of the one block.
            let (v0, v1, v2, f) = unsafe { inline_load_u64x3!(at) };
            (fields[0], fields[1], fields[2]) = (v0, v1, v2);
            return (f == 0).then_some(fields);
        }
        for (i, field) in fields.iter_mut().enumerate() {
            let addr = at + 8 * i;
            // SAFETY: the mode is not NOT_READY, so the handler is installed and a fault of the
            // load resumes at its fixup with `faulted = 1` (`inline_load!`; under valgrind
            // `call_load` of the 64-bit load function, as in `load_as`); the one load reads
            // memory the caller passed as its struct, as the kernel would read it, and has no
            // other effect.
            let (v, f) = unsafe {
                if mode == DIRECT {
                    inline_load_u64!(addr)
                } else {
                    std::hint::cold_path();
                    call_load(LOADS[Size::U64 as usize], addr)
                }
            };
            (*field, faulted) = (v, faulted | f);
        }
        (faulted == 0).then_some(fields)
    }

    /// A call of load function `f` on `addr`, made in assembly: `(value, faulted)`. It names
    /// the only registers the load functions, the fixup and the call change, so that a caller
    /// keeps its own values in the others and needs no saved registers for the call (a Rust
    /// call would claim every caller-saved register). On aarch64 it also puts the link register
    /// back, so that a caller with no other call needs no frame (`ufutex_wait`'s failing path).
    /// Through a register, not a direct call: valgrind translates a direct call and its target
    /// as one block, and a fault in the target is then reported at the call, where the handler
    /// would not recognise it.
    ///
    /// # Safety
    /// `f` is one of [`LOADS`], and the handler is installed: the function makes one load of
    /// `addr` or faults and returns through `ufutex_fx_fixup` (as in [`access`]).
    #[inline(always)]
    unsafe fn call_load(f: Access, addr: usize) -> (u64, u64) {
        let (value, faulted): (u64, u64);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: (x86_64) the load functions and the fixup write only RAX, RDX and the flags
        // and read only RDI, the block's operands (flags are clobbered unless `preserves_flags`
        // is given, and it is not); without `nostack` a block may push the return address, and
        // the stack is aligned for a call on entry to it (the reference's guarantee).
        unsafe {
            std::arch::asm!(
                "call {f}",
                f = in(reg) f as usize,
                in("rdi") addr,
                lateout("rax") value,
                lateout("rdx") faulted,
            );
        }
        #[cfg(target_arch = "aarch64")]
        // SAFETY: (aarch64) the load functions and the fixup read only X0 and write only X0
        // and X1 (`ldr`/`mov`/`ret`, above), and none touches the stack or X16; the call
        // writes the link register X30, which the block keeps in X16 across it and puts back,
        // so that X30 leaves the block as it came in (a caller that makes no other call keeps
        // its return address there and needs no frame). `f` is not in X16: an `out` operand
        // shares no register with an input. If `f` is in X30, `blr` reads it before it writes
        // X30, and the value put back is `f`, as it came in.
        unsafe {
            std::arch::asm!(
                "mov x16, x30",
                "blr {f}",
                "mov x30, x16",
                f = in(reg) f as usize,
                inout("x0") addr => value,
                lateout("x1") faulted,
                out("x16") _,
                options(nostack, readonly),
            );
        }
        (value, faulted)
    }

    /// One fixup write probe: an atomic add of 0 at `addr` (on aarch64 an exclusive load and
    /// store of the value read), which needs write access and changes nothing. Call only after
    /// [`enabled`] returned `true`.
    #[inline]
    pub(super) fn touch(addr: usize, size: Size) -> Result<(), Fault> {
        access(&TOUCHES, addr, size).map(|_| ())
    }

    /// The previous dispositions of SIGSEGV and SIGBUS, written once before our handler is
    /// installed and only read afterwards (by the handler).
    struct Saved(UnsafeCell<MaybeUninit<[libc::sigaction; 2]>>);
    // SAFETY: written only inside `INSTALL.call`, which runs once per process (a forked child
    // may take a run over, from a thread the child does not have), before the handler that
    // reads it is installed.
    unsafe impl Sync for Saved {}
    static SAVED: Saved = Saved(UnsafeCell::new(MaybeUninit::uninit()));
    static INSTALL: Once = Once::new();
    /// How reads go, in one byte so that a fast path asks once: [`NOT_READY`] (not installed
    /// yet, or every read through the probe syscall), [`DIRECT`] (the fixup loads, inline)
    /// or [`INDIRECT`] (the fixup loads, functions called through a pointer: under valgrind).
    #[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
    static MODE: AtomicU8 = AtomicU8::new(NOT_READY);
    pub(super) const NOT_READY: u8 = 0;
    pub(super) const DIRECT: u8 = 1;
    pub(super) const INDIRECT: u8 = 2;
    const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

    #[inline]
    fn install() {
        INSTALL.call(install_now);
    }

    /// Save the dispositions of [`SIGNALS`], then install ours. A run taken over in a child
    /// (`Run::TakenOver`: the parent forked while another of its threads was here) may find ours
    /// installed already: that signal's saved disposition, written before ours was installed,
    /// stays as the child inherited it (saving ours would chain the handler to itself).
    #[cold]
    fn install_now(_: Run) {
        if std::env::var_os(super::PROBE_ENV).is_some_and(|v| v == "syscall") {
            return; // no handler: every read takes the probe syscall
        }
        let saved = SAVED.0.get().cast::<libc::sigaction>();
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY:
            // - `now` is a zeroed sigaction (a valid value), which sigaction with a null new
            //   action only overwrites with the current one;
            // - `saved.add(i)` is within the static array, written by no one else (`Once`).
            unsafe {
                let mut now: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut now);
                if now.sa_sigaction != on_fault as *const () as usize {
                    saved.add(i).write(now);
                }
            }
        }
        for &sig in &SIGNALS {
            // SAFETY:
            // - `sa` is fully initialised (zeroed, then the handler, flags and an empty mask);
            // - `on_fault` has the three-argument signature SA_SIGINFO promises;
            // - SAVED is complete: the handler can only run after this call installs it.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_fault as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
        MODE.store(if under_valgrind() { INDIRECT } else { DIRECT }, Ordering::Relaxed);
    }

    /// Whether this process runs under valgrind: its "client request" RUNNING_ON_VALGRIND
    /// (0x1001), made through the instruction sequence valgrind recognises on each architecture
    /// (four rotations of one register by 128 bits in all, then a no-op that names the request):
    /// valgrind answers with the depth of valgrinds it runs under; natively the sequence changes
    /// nothing and the answer register keeps its 0.
    fn under_valgrind() -> bool {
        let request: [u64; 6] = [0x1001, 0, 0, 0, 0, 0];
        let depth: u64;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: (x86_64: RDI rotated, then `xchg rbx, rbx`; the request's address in RAX, the
        // answer in RDX) natively the rotations return RDI to its value and the exchange of RBX
        // with itself does nothing; under valgrind the sequence reads the six words at RAX (our
        // array, alive for the block) and writes RDX only. RDI is declared clobbered anyway.
        unsafe {
            std::arch::asm!(
                "rol rdi, 3", "rol rdi, 13", "rol rdi, 61", "rol rdi, 51", "xchg rbx, rbx",
                in("rax") request.as_ptr(),
                inout("rdx") 0u64 => depth,
                inout("rdi") 0u64 => _,
                options(nostack, preserves_flags),
            );
        }
        #[cfg(target_arch = "aarch64")]
        // SAFETY: (aarch64: X12 rotated, then `orr x10, x10, x10`; the request's address in X4,
        // the answer in X3) natively the rotations return X12 to its value and the `orr` of X10
        // with itself does nothing; under valgrind the sequence reads the six words at X4 (our
        // array, alive for the block) and writes X3 only. X12 and X10 are declared clobbered.
        unsafe {
            std::arch::asm!(
                "ror x12, x12, #3", "ror x12, x12, #13", "ror x12, x12, #51", "ror x12, x12, #61",
                "orr x10, x10, x10",
                in("x4") request.as_ptr(),
                inout("x3") 0u64 => depth,
                inout("x12") 0u64 => _,
                inout("x10") 0u64 => _,
                options(nostack, preserves_flags),
            );
        }
        depth != 0
    }

    /// Whether `ip` is an access of one of the fixup functions: a load's first instruction, or
    /// a write probe's (on aarch64 also the exclusive store, its second).
    fn is_probe_access(ip: usize) -> bool {
        let at = |f: &Access| *f as *const () as usize;
        let second = if cfg!(target_arch = "aarch64") { 4 } else { 0 };
        LOADS.iter().any(|f| at(f) == ip) || TOUCHES.iter().any(|f| at(f) == ip || at(f) + second == ip)
    }

    unsafe extern "C" {
        // The bounds of the table of inline loads (`inline_load_u32!`, `inline_load_other!`),
        // which the linker defines for a section named like a C identifier; never written.
        static __start_ufutex_fx_table: [i32; 0];
        static __stop_ufutex_fx_table: [i32; 0];
    }

    /// The bounds of the table of inline loads, `[start, stop)`. (Only the addresses of the
    /// linker's symbols are taken.)
    fn table() -> (usize, usize) {
        (&raw const __start_ufutex_fx_table as usize, &raw const __stop_ufutex_fx_table as usize)
    }

    /// The fixup of the inline load at `ip`, if there is one (a walk of the table of inline
    /// loads: a fault in ours is rare, and the handler may take its time).
    fn fixup_of(ip: usize) -> Option<usize> {
        let (start, stop) = table();
        let mut at = start;
        while at + 8 <= stop {
            // SAFETY: `at` and `at + 4` are 4-aligned fields of an entry of the table, which lies
            // between the two symbols, in this library's read-only data, never written.
            let (load, fixup) = unsafe { (*(at as *const i32), *((at + 4) as *const i32)) };
            if at.wrapping_add_signed(load as isize) == ip {
                return Some((at + 4).wrapping_add_signed(fixup as isize));
            }
            at += 8;
        }
        None
    }

    /// How many inline loads the table lists (the entry that names none left out).
    #[cfg(test)]
    pub(super) fn inline_loads() -> usize {
        let (start, stop) = table();
        (stop - start) / 8 - 1
    }

    extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let uc = ctx.cast::<libc::ucontext_t>();
        // SAFETY:
        // - the kernel passes a valid ucontext_t for an SA_SIGINFO handler; we read and write
        //   only the saved instruction pointer, which sigreturn restores.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            let rip = &mut (*uc).uc_mcontext.gregs[libc::REG_RIP as usize];
            if is_probe_access(*rip as usize) {
                *rip = ufutex_fx_fixup as *const () as usize as i64;
                return;
            }
            if let Some(fixup) = fixup_of(*rip as usize) {
                *rip = fixup as i64;
                return;
            }
        }
        // SAFETY: as above (the saved PC).
        #[cfg(target_arch = "aarch64")]
        unsafe {
            let pc = &mut (*uc).uc_mcontext.pc;
            if is_probe_access(*pc as usize) {
                *pc = ufutex_fx_fixup as *const () as usize as u64;
                return;
            }
            if let Some(fixup) = fixup_of(*pc as usize) {
                *pc = fixup as u64;
                return;
            }
        }
        // SAFETY: called from the handler with the handler's own arguments.
        unsafe { chain(sig, info, ctx) }
    }

    /// Hand a fault that is not ours to the disposition that was there before us.
    ///
    /// - a function: call it as it asked to be called (with or without siginfo);
    /// - `SIG_DFL`: put it back and return; a hardware fault re-executes and takes the default
    ///   action (the core dump points at the real fault); a sent signal is raised again, to be
    ///   delivered when we return;
    /// - `SIG_IGN`: a sent signal is dropped; a hardware fault cannot be ignored (the kernel
    ///   would force the default), so it is treated as `SIG_DFL`.
    ///
    /// Approximations, as in every chaining handler: the previous handler runs with our signal
    /// mask (SIGSEGV/SIGBUS blocked), not its own `sa_mask`, and its `SA_RESETHAND` is not
    /// applied.
    ///
    /// # Safety
    /// - call only from `on_fault`, with its arguments.
    unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let i = if sig == libc::SIGSEGV { 0 } else { 1 };
        // SAFETY: SAVED was fully written before the handler was installed (install_slow).
        let old: &libc::sigaction = unsafe { &(*SAVED.0.get()).assume_init_ref()[i] };
        // SAFETY: `info` is the kernel's siginfo for this signal.
        let sent = unsafe { (*info).si_code } <= 0;
        let h = old.sa_sigaction;
        if h == libc::SIG_IGN && sent {
            return;
        }
        if h == libc::SIG_DFL || h == libc::SIG_IGN {
            // SAFETY: sigaction and raise are async-signal-safe; `old` is a valid sigaction.
            unsafe {
                libc::sigaction(sig, old, std::ptr::null_mut());
                if sent {
                    libc::raise(sig);
                }
            }
            return;
        }
        // SAFETY: `h` is the handler the program installed, called with the arguments its
        // SA_SIGINFO flag says it takes.
        unsafe {
            if old.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(h);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
                f(sig);
            }
        }
    }
}

/// Three fresh pages for tests: readable and writable, inaccessible (PROT_NONE: kept reserved,
/// so no other test's mapping can land there, unlike an unmapped hole), readable and writable.
/// Their bases; leaked on purpose.
#[cfg(test)]
pub(crate) fn pages_around_a_hole() -> [usize; 3] {
    // SAFETY: an anonymous mapping of three fresh pages, the middle one made inaccessible; no Rust
    // object lives there.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            3 * BLOCK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        assert_eq!(libc::mprotect(p.cast::<u8>().add(BLOCK).cast(), BLOCK, libc::PROT_NONE), 0);
        [p as usize, p as usize + BLOCK, p as usize + 2 * BLOCK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A readable page, then a page that faults.
    fn mapped_then_hole() -> (usize, usize) {
        let [page, hole, _] = pages_around_a_hole();
        (page, hole)
    }

    /// A page holding 0x1122_3344_5566_7788 and a hole: `read` gives every size of the first
    /// and a fault for the hole and for the top of the address space.
    fn reads_mapped_words_and_holes(read: fn(usize, Size) -> Result<u64, Fault>) -> (usize, usize) {
        let (page, hole) = mapped_then_hole();
        // SAFETY: `page` is a fresh writable page of ours.
        unsafe { *(page as *mut u64) = 0x1122_3344_5566_7788 };
        assert_eq!(read(page, Size::U8), Ok(0x88));
        assert_eq!(read(page, Size::U16), Ok(0x7788));
        assert_eq!(read(page, Size::U32), Ok(0x5566_7788));
        assert_eq!(read(page, Size::U64), Ok(0x1122_3344_5566_7788));
        for size in [Size::U8, Size::U16, Size::U32, Size::U64] {
            assert_eq!(read(hole, size), Err(Fault));
            assert_eq!(read(usize::MAX - 7, size), Err(Fault));
        }
        (page, hole)
    }

    #[test]
    fn reads_mapped_words_and_reports_holes() {
        let (page, hole) = reads_mapped_words_and_holes(read_word);
        // The fast paths' reads (inline loads, each with its own table entry; none at once when
        // every read takes the probe syscall).
        let at_once = cfg!(ufutex_fixup) && std::env::var_os(PROBE_ENV).is_none_or(|v| v != "syscall");
        for (size, want) in
            [(Size::U8, 0x88), (Size::U16, 0x7788), (Size::U32, 0x5566_7788), (Size::U64, 0x1122_3344_5566_7788)]
        {
            let (good, bad) = (read_word_at_once(page, size), read_word_at_once(hole, size));
            assert_eq!((good, bad), if at_once { (Some(Ok(want)), Some(Err(Fault))) } else { (None, None) });
        }
        assert_eq!(read_u64(page + 1), Ok(0x0011_2233_4455_6677));
        assert_eq!(read_u64(hole - 4), Err(Fault)); // straddles into the hole

        // The compare where the word lies (`compare_u32_at_once`): its three answers, the fault
        // through the block's own label.
        let compared = [0x5566_7788, 0x5566_7789, 0].map(|v| compare_u32_at_once(page, v));
        let want = [Compared::Equal, Compared::Differs, Compared::Differs];
        assert_eq!(compared, if at_once { want.map(Some) } else { [None; 3] });
        for v in [0, 0x5566_7788, u32::MAX] {
            assert_eq!(compare_u32_at_once(hole, v), at_once.then_some(Compared::Fault));
            assert_eq!(compare_u32_at_once(usize::MAX - 3, v), at_once.then_some(Compared::Fault));
        }
    }

    /// A caller's struct of `N` 8-byte fields reads all or nothing, at any alignment: whole in
    /// the page, it reads as written; with any field running into the hole, or past the top of
    /// the address space, it is `None`. `read` is one of the ways to read it.
    fn struct_reads_all_or_nothing<const N: usize>(read: impl Fn(usize) -> Option<[u64; N]>) {
        let [_, hole, after] = pages_around_a_hole();
        let tail = hole - 64;
        for (i, b) in (tail..hole).enumerate() {
            // SAFETY: the page's last 64 bytes, ours and writable.
            unsafe { *(b as *mut u8) = 0x40 + i as u8 };
        }
        let size = N * 8;
        for at in [hole - size, hole - size - 3] {
            // SAFETY: `[at, at + size)` lies in the page (above); unaligned reads of plain bytes.
            let want: [u64; N] = std::array::from_fn(|i| unsafe { ((at + 8 * i) as *const u64).read_unaligned() });
            assert_eq!(read(at), Some(want), "{N} fields at {} before the hole", hole - at);
        }
        // Each field in turn the first to run into the hole, and the last to come out of it (by
        // one byte, and wholly in it): a fault of any one field is seen.
        for field in 0..N {
            for into in [1, 8] {
                let at = hole - 8 * field - 8 + into;
                assert_eq!(read(at), None, "field {field} of {N} the first {into} bytes into the hole");
                let at = after - 8 * field - into;
                assert_eq!(read(at), None, "field {field} of {N} the last, {into} bytes in the hole");
            }
        }
        for at in [usize::MAX - size + 2, usize::MAX - 3] {
            assert_eq!(read(at), None, "past the top, from {:#x}", at);
        }
    }

    #[test]
    fn structs_read_all_or_nothing() {
        struct_reads_all_or_nothing::<1>(read_u64s);
        struct_reads_all_or_nothing::<2>(read_u64s);
        struct_reads_all_or_nothing::<3>(read_u64s);
        let at_once = cfg!(ufutex_fixup) && std::env::var_os(PROBE_ENV).is_none_or(|v| v != "syscall");
        if at_once {
            struct_reads_all_or_nothing::<3>(read_u64s_at_once);
        } else {
            let (page, _) = mapped_then_hole();
            assert_eq!(read_u64s_at_once::<3>(page), None, "reads are never at once in probe mode");
        }
    }

    /// [`structs_read_all_or_nothing`] in each mode of the fixup loads: inline, and the calls
    /// that stand for them under valgrind.
    #[cfg(ufutex_fixup)]
    #[test]
    fn structs_read_all_or_nothing_in_each_mode() {
        if !fixup::enabled() {
            return; // every read takes the probe syscall
        }
        for mode in [fixup::DIRECT, fixup::INDIRECT] {
            if mode == fixup::DIRECT && fixup::mode() != fixup::DIRECT {
                continue; // under valgrind: its own mode only
            }
            let read =
                |at: usize| if at.checked_add(3 * 8 - 1).is_some() { fixup::load_u64s_as::<3>(mode, at) } else { None };
            struct_reads_all_or_nothing::<3>(read);
        }
    }

    /// Natively (not under valgrind, not in probe mode) the fast paths read inline, on x86_64
    /// and aarch64 alike: the mode is DIRECT once the handler is installed, and the table the
    /// handler looks faults up in lists inline loads (at least one block of each kind's).
    #[cfg(ufutex_fixup)]
    #[test]
    fn natively_the_reads_are_inline_loads_in_the_table() {
        if std::env::var_os(PROBE_ENV).is_some_and(|v| v == "syscall") {
            return;
        }
        assert!(fixup::enabled());
        let valgrind = std::env::var_os("LD_PRELOAD").is_some_and(|v| v.to_string_lossy().contains("vgpreload"));
        assert_eq!(fixup::mode() == fixup::DIRECT, !valgrind, "mode {}", fixup::mode());
        assert!(fixup::inline_loads() >= 4, "the table lists {} inline loads", fixup::inline_loads());
    }

    /// The calls that stand for the inline loads under valgrind, taken natively: every size read,
    /// and a fault for the hole.
    #[cfg(ufutex_fixup)]
    #[test]
    fn the_valgrind_mode_calls_read_and_report_holes() {
        if !fixup::enabled() {
            return; // every read takes the probe syscall
        }
        reads_mapped_words_and_holes(|addr, size| fixup::load_as(fixup::INDIRECT, addr, size));
    }

    /// On aarch64 the valgrind mode's call (`blr`) hands the link register back as it found
    /// it, so that a C entry point that makes no other call needs no frame for its return
    /// address: X30 read right before and right after the (always inlined) load, of a word and
    /// of a hole, is the same.
    #[cfg(all(ufutex_fixup, target_arch = "aarch64"))]
    #[test]
    fn the_valgrind_mode_call_keeps_the_link_register() {
        if !fixup::enabled() {
            return;
        }
        let (word, hole) = mapped_then_hole();
        for addr in [word, hole] {
            let (before, after): (usize, usize);
            // SAFETY: copies X30 into a register; no memory, no other effect.
            unsafe { std::arch::asm!("mov {}, x30", out(reg) before, options(nomem, nostack, preserves_flags)) };
            let read = fixup::load_as(fixup::INDIRECT, addr, Size::U32);
            // SAFETY: as above.
            unsafe { std::arch::asm!("mov {}, x30", out(reg) after, options(nomem, nostack, preserves_flags)) };
            assert_eq!(read.is_err(), addr == hole);
            assert_eq!(before, after, "X30 changed across the call");
        }
    }

    #[test]
    fn probe_reads_mapped_words_and_reports_holes() {
        let (_, hole) = reads_mapped_words_and_holes(probe::read);
        assert_eq!(probe::read_bytes::<8>(hole - 4), Err(Fault)); // straddles into the hole
    }

    /// A page holding 0x1122_3344_5566_7788 and a hole: `check` passes the first at every size
    /// and changes nothing, faults the hole, and faults the first once it is read-only.
    fn write_checks_change_nothing(check: fn(usize, Size) -> Result<(), Fault>) {
        let (page, hole) = mapped_then_hole();
        // SAFETY: `page` is a fresh writable page of ours.
        unsafe { *(page as *mut u64) = 0x1122_3344_5566_7788 };
        for size in [Size::U8, Size::U16, Size::U32, Size::U64] {
            assert_eq!(check(page, size), Ok(()));
            assert_eq!(check(hole, size), Err(Fault));
        }
        assert_eq!(read_word(page, Size::U64), Ok(0x1122_3344_5566_7788), "unchanged");
        // SAFETY: our own page, made read-only; it stays mapped (leaked).
        assert_eq!(unsafe { libc::mprotect(page as *mut libc::c_void, 4096, libc::PROT_READ) }, 0);
        for size in [Size::U8, Size::U16, Size::U32, Size::U64] {
            assert_eq!(check(page, size), Err(Fault), "read-only");
        }
        assert_eq!(read_word(page, Size::U64), Ok(0x1122_3344_5566_7788), "still readable");
    }

    #[test]
    fn write_checks_change_nothing_and_report_read_only_pages() {
        write_checks_change_nothing(check_writable);
    }

    #[test]
    fn probe_write_checks_change_nothing_and_report_read_only_pages() {
        write_checks_change_nothing(|a, _| probe::writable(a));
    }

    #[test]
    fn faults_from_many_threads_at_once() {
        let (_, hole) = mapped_then_hole();
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(move || (0..10_000).all(|_| read_word(hole, Size::U32) == Err(Fault))))
            .collect();
        assert!(threads.into_iter().all(|t| t.join().unwrap()));
    }

    #[test]
    fn read_pages_load_plainly_only_in_a_block_that_read() {
        let [page, hole, after] = pages_around_a_hole();
        // SAFETY: our own fresh pages, written before any read; leaked, so they stay mapped for
        // as long as `words` lives.
        let mut words = unsafe {
            *(page as *mut u32).add(1) = 7;
            *(after as *mut u32) = 9;
            ReadPages::new()
        };
        assert_eq!(words.cached(page + 4, Size::U32), None, "no block is known at first");
        assert_eq!(words.cached(0, Size::U8), None, "nor NULL's");
        assert_eq!(words.read(page, Size::U32), Ok(0));
        assert_eq!(words.cached(page + 4, Size::U32), Some(7), "the block that read");
        assert_eq!(words.cached(page + 4, Size::U64), None, "misaligned for the size");
        assert_eq!(words.cached(page + 2, Size::U32), None, "misaligned");
        assert_eq!(words.cached(page + 2, Size::U16), Some(0));
        assert_eq!(words.cached(page + BLOCK - 8, Size::U64), Some(0), "the block's last word");
        assert_eq!(words.cached(hole, Size::U32), None, "the next block is not known");
        assert_eq!(words.read(hole, Size::U32), Err(Fault));
        assert_eq!(words.cached(page + 4, Size::U32), Some(7), "a fault leaves the known block");
        assert_eq!(words.read(after, Size::U32), Ok(9));
        assert_eq!(words.cached(page + 4, Size::U32), None, "one block is remembered");
        assert_eq!(words.read(page + 4, Size::U32), Ok(7));
        assert_eq!(words.read(0, Size::U32), Err(Fault), "NULL is read, and faults");
    }
}
