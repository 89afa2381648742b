//! A child process of a unit test: reaped with a bound, so that a child that hangs fails its
//! test instead of the suite, and killed and reaped if the test fails before it joins it.

use std::time::{Duration, Instant};

/// How long [`Child::join`] waits for the child to exit.
const REAP_WITHIN: Duration = Duration::from_secs(40);

/// A forked child, killed and reaped if the test fails before joining it.
pub(crate) struct Child(pub(crate) libc::pid_t);

impl Child {
    /// Reap the child and return its exit status (it must exit within [`REAP_WITHIN`], and
    /// normally).
    pub(crate) fn join(self) -> i32 {
        self.join_within(REAP_WITHIN)
    }

    /// [`Child::join`], the child given `within` to exit.
    pub(crate) fn join_within(self, within: Duration) -> i32 {
        let start = Instant::now();
        let mut status = 0;
        loop {
            // SAFETY: our own child; `status` is a valid out-parameter.
            let r = unsafe { libc::waitpid(self.0, &mut status, libc::WNOHANG) };
            assert!(r >= 0, "waitpid failed");
            if r == self.0 {
                break;
            }
            assert!(start.elapsed() < within, "child {} never exited", self.0);
            std::thread::sleep(Duration::from_millis(1));
        }
        std::mem::forget(self); // reaped: nothing left for Drop
        assert!(libc::WIFEXITED(status), "child did not exit normally: {status:#x}");
        libc::WEXITSTATUS(status)
    }
}

impl Drop for Child {
    /// Kill and reap a child the test did not join (it failed first).
    fn drop(&mut self) {
        // SAFETY: our own child, not yet reaped (`join` forgets it), so the pid is still
        // ours: killing and reaping it touches no other process.
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
            libc::waitpid(self.0, std::ptr::null_mut(), 0);
        }
    }
}
