//! Outcomes of a wait that did not end in a wake.

use std::fmt;

/// Why a wait returned without being woken.
///
/// The C ABI maps these to `EAGAIN`, `ETIMEDOUT` and `EINTR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitError {
    /// The word did not hold the expected value (checked atomically with queueing).
    WouldBlock,
    /// The deadline passed before a waker dequeued this waiter.
    TimedOut,
    /// A signal handler ran that was not installed with `SA_RESTART`.
    Interrupted,
}

impl WaitError {
    /// The errno the kernel's futex2 calls return for this outcome.
    pub fn errno(self) -> i32 {
        match self {
            WaitError::WouldBlock => libc::EAGAIN,
            WaitError::TimedOut => libc::ETIMEDOUT,
            WaitError::Interrupted => libc::EINTR,
        }
    }
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitError::WouldBlock => "futex word did not hold the expected value",
            WaitError::TimedOut => "futex wait timed out",
            WaitError::Interrupted => "futex wait interrupted by a signal",
        })
    }
}

impl std::error::Error for WaitError {}

impl From<WaitError> for std::io::Error {
    fn from(e: WaitError) -> Self {
        std::io::Error::from_raw_os_error(e.errno())
    }
}
