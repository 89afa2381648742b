//! Child processes for the cross-process workloads: forked only while this process has one
//! thread (checked), running a closure that ends in `_exit`, reaped with a deadline (never a
//! hang) and killed if still running when their handle drops.

use std::io;
use std::time::{Duration, Instant};

/// How many threads this process has now (entries of /proc/self/task).
pub fn thread_count() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    fn from_status(st: libc::c_int) -> Exit {
        if libc::WIFEXITED(st) {
            Exit::Code(libc::WEXITSTATUS(st))
        } else {
            Exit::Signal(libc::WTERMSIG(st))
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit status {c}"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// A forked child, killed and reaped when dropped unless already reaped.
pub struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

/// Fork a child that runs `body` and `_exit`s with what it returns (70 if it panics). Refused
/// unless this process has exactly one thread: a child of a multithreaded process may only make
/// async-signal-safe calls, and `body` allocates. The child dies with its parent
/// (`PR_SET_PDEATHSIG`), so a parent that fails never leaves it behind.
pub fn fork(body: impl FnOnce() -> i32) -> io::Result<Child> {
    // A thread just joined may still be listed for a moment (it is reaped after it wakes its
    // joiner): look again for up to ~100 ms before refusing.
    let mut n = thread_count()?;
    for _ in 0..200 {
        if n == 1 {
            break;
        }
        std::thread::sleep(Duration::from_micros(500));
        n = thread_count()?;
    }
    if n != 1 {
        return Err(io::Error::other(format!("cannot fork a child: this process has {n} threads, not 1")));
    }
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the process is single-threaded (checked just above, and nothing here starts a
    // thread in between), so the child is a full copy in which any call is allowed.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: prctl with integer arguments; getppid has no preconditions.
        let orphan = unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 || libc::getppid() != parent
        };
        let code = if orphan { 71 } else { std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(70) };
        // SAFETY: ends the child at once, running none of the parent's destructors or atexit
        // handlers (they belong to the parent's state).
        unsafe { libc::_exit(code) };
    }
    Ok(Child { pid, reaped: false })
}

impl Child {
    /// How it ended, if it has (reaps it); `None` while it runs.
    pub fn try_wait(&mut self) -> io::Result<Option<Exit>> {
        if self.reaped {
            return Err(io::Error::other("child already reaped"));
        }
        let mut st = 0;
        // SAFETY: `st` is a valid out-parameter; `pid` is our unreaped child.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        match r {
            0 => Ok(None),
            r if r == self.pid => {
                self.reaped = true;
                Ok(Some(Exit::from_status(st)))
            }
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Wait until it ends, at most until `deadline` (then it is killed and that is an error).
    pub fn wait_until(&mut self, deadline: Instant) -> io::Result<Exit> {
        loop {
            if let Some(e) = self.try_wait()? {
                return Ok(e);
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(io::Error::other(format!("child {} did not end in time; killed", self.pid)));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// SIGKILL it and reap it.
    pub fn kill(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: signals our own unreaped child (its pid cannot be reused before we reap it);
        // then a blocking reap with a valid out-parameter.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut st = 0;
            libc::waitpid(self.pid, &mut st, 0);
        }
        self.reaped = true;
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_harness_is_multithreaded_so_fork_is_refused() {
        // Unit tests run beside the harness's threads; the forking workloads are exercised
        // through the binary (tests/cli.rs), which is single-threaded when it forks.
        if thread_count().unwrap() > 1 {
            let e = fork(|| 0).err().expect("refused");
            assert!(e.to_string().contains("threads"), "{e}");
        }
    }
}
