//! The thread's "inside the dispatcher" flag (see `interpose.rs`): one byte of thread-local
//! storage, read and written on every `syscall()` the program makes.
//!
//! On x86-64 it lives in the library's static TLS block and is reached at a fixed offset from
//! the thread pointer, learned once by the dynamic linker (the initial-exec model): two
//! instructions. A Rust `thread_local!` in a shared library uses the general-dynamic model
//! instead, a call to `__tls_get_addr` on every access: 11 more instructions a call, and on a
//! cold call a page of `ld.so`'s code and one of its data besides. Stable Rust cannot choose
//! the model, hence the assembly. The initial-exec model needs the block allocated when the
//! thread starts: true of every library loaded with the program, as `LD_PRELOAD` loads this
//! one (`readelf -d` shows the `STATIC_TLS` flag that says so). Elsewhere a `thread_local!`.

#[cfg(target_arch = "x86_64")]
mod imp {
    // One byte in `.tbss` (zero at every thread's start: not inside). Global so that every
    // codegen unit links to it, hidden so that it is not exported from the library.
    std::arch::global_asm!(
        ".pushsection .tbss.ufutex_preload_inside,\"awT\",@nobits",
        ".globl ufutex_preload_inside",
        ".hidden ufutex_preload_inside",
        ".type ufutex_preload_inside,@object",
        ".size ufutex_preload_inside,1",
        "ufutex_preload_inside:",
        ".zero 1",
        ".popsection",
    );

    /// Set the flag to `new`; what it was.
    #[inline(always)]
    pub(crate) fn replace(new: bool) -> bool {
        let old: u32;
        // SAFETY: reads the flag's offset from its GOT entry (which the dynamic linker filled
        // with the offset of this library's static TLS block plus the byte's, relocation
        // R_X86_64_TPOFF64), then reads and writes that one byte at FS:offset, which is this
        // thread's copy of `ufutex_preload_inside`: memory of the thread's static TLS, private
        // to it, live from the thread's start to its end. No other memory, stack or flags.
        unsafe {
            std::arch::asm!(
                "mov {off}, qword ptr [rip + ufutex_preload_inside@GOTTPOFF]",
                "movzx {old:e}, byte ptr fs:[{off}]",
                "mov byte ptr fs:[{off}], {new}",
                off = out(reg) _,
                old = out(reg) old,
                new = in(reg_byte) u8::from(new),
                options(nostack, preserves_flags),
            );
        }
        old != 0
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use std::cell::Cell;

    std::thread_local! {
        static INSIDE: Cell<bool> = const { Cell::new(false) };
    }

    /// Set the flag to `new`; what it was. A thread whose thread-locals are gone (exiting)
    /// reads it as set, so that its calls pass through.
    pub(crate) fn replace(new: bool) -> bool {
        INSIDE.try_with(|inside| inside.replace(new)).unwrap_or(true)
    }
}

pub(crate) use imp::replace;

#[cfg(test)]
mod tests {
    use super::replace;

    #[test]
    fn each_thread_has_its_own_flag_clear_at_its_start() {
        assert!(!replace(true), "clear at the thread's start");
        assert!(replace(true), "set stays set");
        let other = std::thread::spawn(|| (replace(true), replace(false))).join().unwrap();
        assert_eq!(other, (false, true), "another thread's flag starts clear and is its own");
        assert!(replace(false), "ours is still set");
        assert!(!replace(false));
    }
}
