//! Deadlines: what the caller gives (`Deadline`) and what the parker hands the kernel
//! (`Timeout`, an absolute `timespec` on one clock).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// When a wait gives up.
///
/// `Monotonic` deadlines are immune to changes of the wall clock; `Realtime` deadlines follow
/// them (the kernel's `CLOCK_REALTIME` semantics). A `Duration` converts to a monotonic deadline
/// that far from now (one too far to represent to about a century); an `Instant` or a
/// `SystemTime` converts to the variant of its clock. A deadline already past times out at once,
/// after the value check.
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// use std::time::{Duration, UNIX_EPOCH};
/// use ufutex::{Deadline, WaitError};
/// let word = AtomicU32::new(0);
/// let r = ufutex::wait(&word, 0, Some(Duration::from_millis(1).into()));
/// assert_eq!(r, Err(ufutex::WaitError::TimedOut));
/// let past = Deadline::from(UNIX_EPOCH); // Deadline::Realtime
/// assert_eq!(ufutex::wait(&word, 0, Some(past)), Err(WaitError::TimedOut));
/// assert_eq!(ufutex::wait(&word, 1, Some(past)), Err(WaitError::WouldBlock));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// An instant of the monotonic clock (`CLOCK_MONOTONIC`).
    Monotonic(Instant),
    /// An instant of the wall clock (`CLOCK_REALTIME`).
    Realtime(SystemTime),
}

impl From<Duration> for Deadline {
    fn from(d: Duration) -> Self {
        let now = Instant::now();
        // A relative timeout too large to represent is as good as forever; clamp to ~100 years.
        Deadline::Monotonic(now.checked_add(d).unwrap_or(now + Duration::from_secs(100 * 365 * 86_400)))
    }
}

impl From<Instant> for Deadline {
    fn from(i: Instant) -> Self {
        Deadline::Monotonic(i)
    }
}

impl From<SystemTime> for Deadline {
    fn from(t: SystemTime) -> Self {
        Deadline::Realtime(t)
    }
}

/// The clock an absolute timeout is measured on. Four bytes: in a [`Timeout`] it fills what
/// would be padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Clock {
    Monotonic,
    Realtime,
}

impl Clock {
    pub(crate) fn id(self) -> libc::clockid_t {
        match self {
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
            Clock::Realtime => libc::CLOCK_REALTIME,
        }
    }

    /// The clock's current reading.
    pub(crate) fn now(self) -> Timespec {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY:
        // - `ts` is a valid, writable timespec for the duration of the call;
        // - both clock ids are supported on every Linux kernel.
        unsafe { libc::clock_gettime(self.id(), &mut ts) };
        Timespec { sec: ts.tv_sec, nsec: ts.tv_nsec as u32 }
    }
}

/// A normalised time: `nsec < 1e9`, `sec >= 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Timespec {
    pub(crate) sec: i64,
    pub(crate) nsec: u32,
}

impl Timespec {
    pub(crate) const ZERO: Timespec = Timespec { sec: 0, nsec: 0 };

    pub(crate) fn from_duration(d: Duration) -> Timespec {
        Timespec { sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX), nsec: d.subsec_nanos() }
    }

    pub(crate) fn saturating_add(self, d: Duration) -> Timespec {
        let add = Timespec::from_duration(d);
        let mut sec = self.sec.saturating_add(add.sec);
        let mut nsec = self.nsec + add.nsec;
        if nsec >= 1_000_000_000 {
            nsec -= 1_000_000_000;
            sec = sec.saturating_add(1);
        }
        Timespec { sec, nsec }
    }

    /// How long from `self` until `later`; zero if `later` is not later.
    #[cfg_attr(not(feature = "fallback-parker"), allow(dead_code))] // the portable parker's
    pub(crate) fn until(self, later: Timespec) -> Duration {
        if later <= self {
            return Duration::ZERO;
        }
        let (mut sec, nsec) = (later.sec - self.sec, later.nsec as i64 - self.nsec as i64);
        let nsec = if nsec < 0 {
            sec -= 1;
            (nsec + 1_000_000_000) as u32
        } else {
            nsec as u32
        };
        Duration::new(sec as u64, nsec)
    }

    #[cfg_attr(ufutex_loom, allow(dead_code))] // the kernel parker's
    pub(crate) fn to_libc(self) -> libc::timespec {
        libc::timespec { tv_sec: self.sec as libc::time_t, tv_nsec: self.nsec as libc::c_long }
    }
}

/// An absolute timeout on one clock, as the kernel's `futex_wait` takes it.
///
/// The time's two fields and a four-byte clock side by side, not a [`Timespec`] and the clock:
/// 16 bytes and no padding (a `Timespec` field's four bytes of padding, then the clock and seven
/// more, made 24). The C ABI's waitv, which hands its `Option<Timeout>` to its out-of-line parts
/// by reference, built it on the stack in a dozen moves of bytes, padding among them; now in
/// three stores. A one-entry failing waitv through the C ABI: 14.5 → 13.9 ns
/// (BENCHMARKS.md, fifty-ninth session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeout {
    sec: i64,
    nsec: u32,
    pub(crate) clock: Clock,
}

const _: () = assert!(std::mem::size_of::<Option<Timeout>>() == 16);

impl Timeout {
    pub(crate) const fn new(clock: Clock, at: Timespec) -> Timeout {
        Timeout { sec: at.sec, nsec: at.nsec, clock }
    }

    /// The time at which it passes, on [`Timeout::clock`].
    pub(crate) const fn at(&self) -> Timespec {
        Timespec { sec: self.sec, nsec: self.nsec }
    }

    /// Whether the deadline has passed.
    pub(crate) fn expired(&self) -> bool {
        self.clock.now() >= self.at()
    }

    /// Time left before the deadline (zero once passed).
    #[cfg_attr(not(feature = "fallback-parker"), allow(dead_code))] // the portable parker's
    pub(crate) fn remaining(&self) -> Duration {
        self.clock.now().until(self.at())
    }
}

impl From<Deadline> for Timeout {
    fn from(d: Deadline) -> Timeout {
        match d {
            Deadline::Monotonic(i) => {
                // `Instant` is CLOCK_MONOTONIC on Linux but does not expose its timespec: carry
                // the distance from now over to a fresh clock reading.
                let (now_i, now_ts) = (Instant::now(), Clock::Monotonic.now());
                let at = match i.checked_duration_since(now_i) {
                    Some(left) => now_ts.saturating_add(left),
                    None => Timespec::ZERO, // already passed
                };
                Timeout::new(Clock::Monotonic, at)
            }
            Deadline::Realtime(t) => {
                let at = match t.duration_since(UNIX_EPOCH) {
                    Ok(d) => Timespec::from_duration(d),
                    Err(_) => Timespec::ZERO, // before 1970: long passed
                };
                Timeout::new(Clock::Realtime, at)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespec_arithmetic_carries() {
        let t = Timespec { sec: 1, nsec: 999_999_999 };
        assert_eq!(t.saturating_add(Duration::from_nanos(2)), Timespec { sec: 2, nsec: 1 });
        assert_eq!(t.until(Timespec { sec: 3, nsec: 0 }), Duration::new(1, 1));
        assert_eq!(Timespec { sec: 3, nsec: 0 }.until(t), Duration::ZERO);
    }

    #[test]
    fn past_deadlines_are_expired() {
        let past = Timeout::from(Deadline::Realtime(UNIX_EPOCH));
        assert!(past.expired());
        let past = Timeout::from(Deadline::Monotonic(Instant::now()));
        assert!(past.expired());
        let future = Timeout::from(Deadline::from(Duration::from_secs(3600)));
        assert!(!future.expired());
    }
}
