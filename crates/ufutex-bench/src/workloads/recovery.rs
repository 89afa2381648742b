//! `recovery`: how long ufutex's shared table takes to recover a bucket lock whose owner died.
//!
//! Each repetition runs in a forked child with a fresh table (a fresh 0700 directory as
//! `UFUTEX_SHARED_DIR`, set before its first shared call: a process opens its table once). The
//! child claims its own slot (a shared wait that times out at once), then forks a grandchild
//! with `UFUTEX_SHARED_DIE_AT=locked`, which starts a shared wait on a word of a `MAP_SHARED`
//! mapping and `SIGKILL`s itself right after taking the word's bucket lock. Once the grandchild
//! is reaped (dead), the child times one `shared::wake` on that word: the wake finds the lock
//! held by a dead owner, sleeps the probe interval, finds the owner dead, takes the lock over
//! and repairs the bucket. The child writes the time into a shared mapping and exits; any
//! surprise on the way is its exit status, and a failed repetition, never a hang.
//!
//! ufutex-shared only: the kernel's futex has no userspace lock to recover. The goal is
//! absolute (under 10 ms).

use super::{padded_words, Common};
use crate::child::{self, Exit};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::shm::Words;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The competitor, and the only one.
pub const COMPETITOR: &str = "ufutex-shared";

/// Child exit codes (0: measured).
const CLAIM_FAILED: i32 = 2;
const FORK_FAILED: i32 = 3;
const GRANDCHILD_LIVED: i32 = 4;
const WAKE_FAILED: i32 = 5;
const WOKE_A_GHOST: i32 = 6;

fn describe(e: Exit) -> String {
    match e {
        Exit::Code(CLAIM_FAILED) => "the child could not use the fresh shared table".into(),
        Exit::Code(FORK_FAILED) => "the child could not fork the dying grandchild".into(),
        Exit::Code(GRANDCHILD_LIVED) => {
            "the grandchild did not die holding the bucket lock (UFUTEX_SHARED_DIE_AT=locked not honoured?)".into()
        }
        Exit::Code(WAKE_FAILED) => "the shared wake after the owner's death failed".into(),
        Exit::Code(WOKE_A_GHOST) => "the shared wake woke a waiter that had died".into(),
        other => format!("the measuring child: {other}"),
    }
}

/// A fresh 0700 directory under the temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> io::Result<TempDir> {
        let template = std::env::temp_dir().join("ufutex-bench-recovery-XXXXXX");
        let mut bytes = CString::new(template.as_os_str().as_bytes()).map_err(io::Error::other)?.into_bytes_with_nul();
        // SAFETY: `bytes` is a writable NUL-terminated template ending in XXXXXX; mkdtemp
        // rewrites those six bytes in place and creates the directory 0700.
        if unsafe { libc::mkdtemp(bytes.as_mut_ptr() as *mut libc::c_char) }.is_null() {
            return Err(io::Error::last_os_error());
        }
        bytes.pop();
        Ok(TempDir(PathBuf::from(OsStr::from_bytes(&bytes))))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The measuring child: see the module docs. Returns its exit status.
fn measure(dir: &Path, word: &AtomicU32, spare: &AtomicU32, out: &AtomicU64, deadline: Instant) -> i32 {
    // A forked, single-threaded child: changing the environment races with nobody.
    std::env::set_var("UFUTEX_SHARED_DIR", dir);
    std::env::remove_var("UFUTEX_SHARED_DIE_AT");
    std::env::remove_var("UFUTEX_SHARED");
    // Claim this process's slot now (a wait that times out at once), so the timed wake below
    // is the recovery alone.
    match ufutex::shared::wait(spare, 0, Some(Instant::now().into())) {
        Err(ufutex::shared::SharedError::TimedOut) => {}
        _ => return CLAIM_FAILED,
    }
    // Read by the grandchild when it claims its slot; this process has claimed its own.
    std::env::set_var("UFUTEX_SHARED_DIE_AT", "locked");
    let grandchild = child::fork(|| {
        let _ = ufutex::shared::wait(word, 0, None);
        0 // only if it did not die
    });
    let Ok(mut grandchild) = grandchild else { return FORK_FAILED };
    match grandchild.wait_until(deadline) {
        Ok(Exit::Signal(libc::SIGKILL)) => {}
        _ => return GRANDCHILD_LIVED,
    }
    let start = Instant::now();
    let r = ufutex::shared::wake(word, 1);
    let ns = start.elapsed().as_nanos() as u64;
    match r {
        Ok(0) => {}
        Ok(_) => return WOKE_A_GHOST,
        Err(_) => return WAKE_FAILED,
    }
    out.store(ns.max(1), Ordering::SeqCst);
    0
}

/// One repetition: ms from the wake call to its return, the dead owner's lock recovered.
pub fn once() -> io::Result<f64> {
    let dir = TempDir::new()?;
    let words = padded_words(2, true)?;
    let out = Words::<AtomicU64>::new(1, true)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut kid = child::fork(|| measure(&dir.0, &words[0].0, &words[1].0, &out[0], deadline))?;
    match kid.wait_until(deadline + Duration::from_secs(1))? {
        Exit::Code(0) => {}
        e => return Err(io::Error::other(format!("{COMPETITOR}: recovery: {}", describe(e)))),
    }
    let ns = out[0].load(Ordering::SeqCst);
    if ns == 0 {
        return Err(io::Error::other(format!("{COMPETITOR}: recovery: the child reported no time")));
    }
    Ok(ns as f64 / 1e6)
}

pub fn run(common: &Common) -> io::Result<Bench> {
    let plan = Plan {
        workload: "recovery",
        case: common.case("bucket lock of a waiter killed holding it, taken over by one wake".into()),
        metrics: vec![Metric::lower("recovery", "ms")],
        baseline: common.baseline(),
    };
    let mut bench =
        common.scheduler().run(plan, &[COMPETITOR], |c| c.to_string(), |_| None, |_| once().map(|v| vec![v]))?;
    bench.notes.push(
        "each repetition: a fresh shared table (own UFUTEX_SHARED_DIR) in a fresh process; no kernel \
         baseline (the kernel's futex has no userspace lock to recover); goal: under 10 ms"
            .into(),
    );
    Ok(bench)
}
