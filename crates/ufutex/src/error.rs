//! Outcomes of a wait that did not end in a wake.

use std::fmt;

/// Why a wait returned without being woken.
///
/// None of these means a waker dequeued the waiter: a wait that was woken returns `Ok`. The
/// C ABI maps them to `EAGAIN`, `ETIMEDOUT` and `EINTR`; `From` gives the same as an
/// [`std::io::Error`].
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// use ufutex::WaitError;
/// let w = AtomicU32::new(1);
/// let e = ufutex::wait(&w, 0, None).unwrap_err();
/// assert_eq!(e, WaitError::WouldBlock);
/// let io: std::io::Error = e.into();
/// assert_eq!(io.raw_os_error(), Some(libc::EAGAIN));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitError {
    /// The word did not hold the expected value (checked atomically with queueing).
    WouldBlock,
    /// The deadline passed before a waker dequeued this waiter.
    TimedOut,
    /// A signal handler ran that was not installed with `SA_RESTART`; or the wait was called
    /// from a signal handler that interrupted its thread inside a wait or a bucket's critical
    /// section of this library, and did not queue (see the crate docs, "Signal handlers").
    Interrupted,
}

impl WaitError {
    /// The errno the kernel's futex2 calls return for this outcome (positive; one per variant).
    ///
    /// # Examples
    /// ```
    /// use ufutex::WaitError;
    /// assert_eq!(WaitError::WouldBlock.errno(), libc::EAGAIN);
    /// assert_eq!(WaitError::TimedOut.errno(), libc::ETIMEDOUT);
    /// assert_eq!(WaitError::Interrupted.errno(), libc::EINTR);
    /// ```
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
