//! The environment, read once when the library is loaded (`getenv`, no allocation).

use std::sync::atomic::{AtomicU8, Ordering};

const ENABLED: u8 = 1;
const STATS: u8 = 2;
const READ: u8 = 4;
const SHARED_TABLE: u8 = 8;

#[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
static FLAGS: AtomicU8 = AtomicU8::new(0);

fn env_is(name: &std::ffi::CStr, value: &[u8]) -> bool {
    // SAFETY: `name` is NUL-terminated; getenv returns NULL or a NUL-terminated string that
    // stays valid while the environment is not changed (we read it at once).
    let v = unsafe { libc::getenv(name.as_ptr()) };
    // SAFETY: as above, a non-null result is a valid C string.
    !v.is_null() && unsafe { std::ffi::CStr::from_ptr(v) }.to_bytes() == value
}

/// Read `UFUTEX_PRELOAD`, `UFUTEX_PRELOAD_STATS` and `UFUTEX_PRELOAD_SHARED`.
pub(crate) fn init() {
    // Process-shared words go to the kernel, which every process meets on, preloaded or not;
    // `UFUTEX_PRELOAD_SHARED=table` sends them to ufutex's shared table instead, for
    // deployments where every participant runs preloaded (or on ufutex) as the same user. Either
    // way every operation on a shared word goes to the same place, legacy and futex2 alike: the
    // kernel lets the two families meet on one word, and so must we.
    let table = env_is(c"UFUTEX_PRELOAD_SHARED", b"table");
    ufutex::preload::refuse_shared(!table);
    // A private wake, requeue or wake-op of a NULL word answers as the kernel's: NULL is a key
    // like any other (nobody waits there unless a requeue moved them).
    ufutex::preload::pass_null(true);
    let mut f = READ;
    if table {
        f |= SHARED_TABLE;
    }
    if !env_is(c"UFUTEX_PRELOAD", b"off") {
        f |= ENABLED;
    }
    if env_is(c"UFUTEX_PRELOAD_STATS", b"1") {
        f |= STATS;
    }
    // Relaxed: read at load time, before the program's threads exist; a thread that sees 0
    // reads the environment itself (below).
    FLAGS.store(f, Ordering::Relaxed);
}

fn flags() -> u8 {
    // Relaxed: see `init`.
    match FLAGS.load(Ordering::Relaxed) {
        0 => {
            init();
            FLAGS.load(Ordering::Relaxed)
        }
        f => f,
    }
}

/// Whether calls go to ufutex (`UFUTEX_PRELOAD` is not `off`).
pub(crate) fn enabled() -> bool {
    flags() & ENABLED != 0
}

/// Whether calls go to ufutex with no statistics to count, as read at load (`false` before: the
/// general way reads the environment then).
#[inline(always)]
pub(crate) fn plain() -> bool {
    // Relaxed: see `init`.
    FLAGS.load(Ordering::Relaxed) & (ENABLED | STATS) == ENABLED
}

/// Whether process-shared words go to ufutex's shared table (`UFUTEX_PRELOAD_SHARED=table`).
pub(crate) fn shared_table() -> bool {
    flags() & SHARED_TABLE != 0
}

/// Whether to print per-operation counts at exit (`UFUTEX_PRELOAD_STATS=1`).
pub(crate) fn stats() -> bool {
    flags() & STATS != 0
}
