//! The competitors: one implementation of [`Competitor`] per futex implementation. Workloads are
//! generic over it, so each competitor's loop is compiled on its own (no dynamic dispatch in the
//! measured path).

use crate::sys;
use std::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use std::hint::black_box;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use ufutex::preload::UfutexWaitv;
use ufutex::{Domain, DomainConfig, Slots};

/// A futex word of any size the workloads use.
pub trait Word: ufutex::Futex + crate::shm::Zeroed + Sync + Send + 'static {
    fn get(&self) -> u64;
    fn set(&self, v: u64);
    fn value(v: u64) -> Self::Value;
    fn as_u32(&self) -> Option<&AtomicU32>;
}

macro_rules! word {
    ($t:ty, $v:ty, $as32:expr) => {
        impl Word for $t {
            #[inline]
            fn get(&self) -> u64 {
                self.load(Ordering::Acquire) as u64
            }
            #[inline]
            fn set(&self, v: u64) {
                self.store(v as $v, Ordering::Release)
            }
            #[inline]
            fn value(v: u64) -> $v {
                v as $v
            }
            #[inline]
            fn as_u32(&self) -> Option<&AtomicU32> {
                $as32(self)
            }
        }
    };
}
word!(AtomicU8, u8, |_| None);
word!(AtomicU16, u16, |_| None);
word!(AtomicU32, u32, Some);
word!(AtomicU64, u64, |_| None);

/// How a wait returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Woken,
    Mismatch,
    /// Interrupted or spuriously returned (legacy futex, parking_lot); callers re-check.
    Other,
}

/// An operation a workload needs; competitors say which they cannot do and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    WaitWake,
    /// Waits and wakes with a bitset mask.
    Mask,
    Waitv,
    Requeue,
    /// Words of 8, 16 or 64 bits.
    Sizes,
}

/// "Every word" mask.
pub const ANY: u64 = u32::MAX as u64;

/// One futex implementation under test.
pub trait Competitor: Sync {
    /// A prepared waitv vector (built outside the measured loop).
    type Waitv<'a>: Sync
    where
        Self: 'a;

    fn name(&self) -> String;
    /// `Some(reason)` when this competitor cannot run `op`.
    fn unsupported(&self, op: Op) -> Option<String>;
    fn wait<W: Word>(&self, w: &W, expected: u64, mask: u64) -> Wait;
    fn wake<W: Word>(&self, w: &W, n: usize, mask: u64) -> usize;
    fn prepare_waitv<'a>(&'a self, entries: &[(&'a AtomicU32, u32)]) -> Self::Waitv<'a>;
    /// A waitv vector of words of any size, where the competitor has one (`None`: it has not).
    fn prepare_waitv_sized<'a, W: Word>(&'a self, _entries: &[(&'a W, u64)]) -> Option<Self::Waitv<'a>> {
        None
    }
    /// The woken index, or the reason it returned.
    fn waitv(&self, v: &Self::Waitv<'_>) -> Result<usize, Wait>;
    fn requeue(
        &self,
        from: &AtomicU32,
        expected: u32,
        to: &AtomicU32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, Wait>;
    /// Exactly how many waiters are queued, when the implementation can tell.
    fn queued(&self) -> Option<usize> {
        None
    }
}

/// Where a [`Ufutex`] competitor's calls go.
pub trait Home: Send + Sync + 'static {
    fn domain(&self) -> &Domain;
}

/// The process default domain, reached as the free functions (`ufutex::wake`, ...) reach it: a
/// static, so that its tables' address is a constant in the measured loop, as in a caller's.
pub struct DefaultHome;

impl Home for DefaultHome {
    #[inline]
    fn domain(&self) -> &Domain {
        Domain::default_domain()
    }
}

/// A domain of its own, held by value as a caller holds one (a `Domain` is a handle to its
/// boxed tables).
impl Home for Domain {
    #[inline]
    fn domain(&self) -> &Domain {
        self
    }
}

/// ufutex, through the process default domain ([`DefaultHome`]) or a domain of its own (the
/// default type). The choice is the type's, so a fast path's figure is ufutex's call and not
/// also a look at which domain (a compare and a branch that a caller does not run).
pub struct Ufutex<H: Home = Domain> {
    home: H,
    label: String,
}

impl Ufutex<DefaultHome> {
    pub fn default_domain() -> Self {
        Ufutex { home: DefaultHome, label: "ufutex".into() }
    }
}

impl Ufutex {
    pub fn with_slots(slots: Slots) -> std::io::Result<Self> {
        let label = match slots {
            Slots::Auto => "ufutex[auto]".to_string(),
            Slots::Large => "ufutex[large]".to_string(),
            Slots::Fixed(n) => format!("ufutex[{n}]"),
        };
        Ok(Ufutex { home: Domain::new(DomainConfig::new().slots(slots))?, label })
    }

    pub fn labelled(mut self, label: &str) -> Self {
        self.label = label.into();
        self
    }
}

impl<H: Home> Ufutex<H> {
    #[inline]
    pub fn domain(&self) -> &Domain {
        self.home.domain()
    }
}

fn ufutex_mask(mask: u64) -> u64 {
    if mask == ANY {
        ufutex::MATCH_ANY
    } else {
        mask
    }
}

impl<H: Home> Competitor for Ufutex<H> {
    type Waitv<'a> = Vec<ufutex::WaitEntry<'a>>;

    fn name(&self) -> String {
        self.label.clone()
    }
    fn unsupported(&self, _op: Op) -> Option<String> {
        None
    }
    #[inline]
    fn wait<W: Word>(&self, w: &W, expected: u64, mask: u64) -> Wait {
        match self.domain().wait_bitset(w, W::value(expected), ufutex_mask(mask), None) {
            Ok(()) => Wait::Woken,
            Err(ufutex::WaitError::WouldBlock) => Wait::Mismatch,
            Err(_) => Wait::Other,
        }
    }
    #[inline]
    fn wake<W: Word>(&self, w: &W, n: usize, mask: u64) -> usize {
        self.domain().wake_bitset(w, n, ufutex_mask(mask))
    }
    fn prepare_waitv<'a>(&'a self, entries: &[(&'a AtomicU32, u32)]) -> Self::Waitv<'a> {
        entries.iter().map(|&(w, v)| ufutex::WaitEntry::new(w, v)).collect()
    }
    fn prepare_waitv_sized<'a, W: Word>(&'a self, entries: &[(&'a W, u64)]) -> Option<Self::Waitv<'a>> {
        Some(entries.iter().map(|&(w, v)| ufutex::WaitEntry::new(w, W::value(v))).collect())
    }
    #[inline]
    fn waitv(&self, v: &Self::Waitv<'_>) -> Result<usize, Wait> {
        match self.domain().waitv(v, None) {
            Ok(i) => Ok(i),
            Err(ufutex::WaitError::WouldBlock) => Err(Wait::Mismatch),
            Err(_) => Err(Wait::Other),
        }
    }
    fn requeue(
        &self,
        from: &AtomicU32,
        expected: u32,
        to: &AtomicU32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, Wait> {
        self.domain().requeue(from, expected, to, nr_wake, nr_requeue).map_err(|e| match e {
            ufutex::WaitError::WouldBlock => Wait::Mismatch,
            _ => Wait::Other,
        })
    }
    fn queued(&self) -> Option<usize> {
        Some(self.domain().queued_waiters())
    }
}

fn kernel_wait_result(r: std::io::Result<usize>) -> Wait {
    match r {
        Ok(_) => Wait::Woken,
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Wait::Mismatch,
        Err(_) => Wait::Other,
    }
}

/// The kernel's futex2 syscalls on 32-bit words: private (`FUTEX2_PRIVATE`), or process-shared
/// (without it: the kernel keys the word by the object behind its page).
pub struct Kernel {
    pub label: String,
    /// futex2 flags of every call: [`sys::FLAGS_U32`] or [`sys::FLAGS_U32_SHARED`].
    flags: u32,
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel { label: "kernel".into(), flags: sys::FLAGS_U32 }
    }
}

impl Kernel {
    /// The process-shared variant, `kernel-shared`.
    pub fn shared() -> Self {
        Kernel { label: "kernel-shared".into(), flags: sys::FLAGS_U32_SHARED }
    }
}

impl Competitor for Kernel {
    type Waitv<'a> = Vec<sys::FutexWaitv>;

    fn name(&self) -> String {
        self.label.clone()
    }
    fn unsupported(&self, op: Op) -> Option<String> {
        let s = sys::kernel_support();
        if let Some(r) = &s.futex2 {
            return Some(r.clone());
        }
        match op {
            Op::Sizes => s.small_sizes.clone(),
            _ => None,
        }
    }
    #[inline]
    fn wait<W: Word>(&self, w: &W, expected: u64, mask: u64) -> Wait {
        match w.as_u32() {
            Some(w) => kernel_wait_result(sys::futex2_wait(w, expected as u32, mask, self.flags)),
            None => Wait::Other,
        }
    }
    #[inline]
    fn wake<W: Word>(&self, w: &W, n: usize, mask: u64) -> usize {
        w.as_u32().and_then(|w| sys::futex2_wake(w, n, mask, self.flags).ok()).unwrap_or(0)
    }
    fn prepare_waitv<'a>(&'a self, entries: &[(&'a AtomicU32, u32)]) -> Self::Waitv<'a> {
        entries.iter().map(|&(w, v)| sys::FutexWaitv::new(w, v, self.flags)).collect()
    }
    #[inline]
    fn waitv(&self, v: &Self::Waitv<'_>) -> Result<usize, Wait> {
        sys::futex2_waitv(v).map_err(|e| kernel_wait_result(Err(e)))
    }
    fn requeue(
        &self,
        from: &AtomicU32,
        expected: u32,
        to: &AtomicU32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, Wait> {
        sys::futex2_requeue(from, expected, to, nr_wake, nr_requeue, self.flags).map_err(|e| kernel_wait_result(Err(e)))
    }
}

/// ufutex through its C ABI (`libufutex.so`'s `ufutex_wait`, `ufutex_wake`, `ufutex_waitv`,
/// `ufutex_requeue`), on private words of every size: each call goes through a function pointer
/// the optimiser cannot see through, as a C program's call into the shared library does, and
/// pays the same validation and fault-safe reads. Named only with `--impl` (the report's fast
/// path and waitv steps name it, to judge the C ABI against the Rust path in the same run).
pub struct UfutexC;

type CWait =
    unsafe extern "C" fn(*mut c_void, c_ulong, c_ulong, c_uint, *const libc::timespec, libc::clockid_t) -> c_long;
type CWake = unsafe extern "C" fn(*mut c_void, c_ulong, c_int, c_uint) -> c_long;
type CWaitv = unsafe extern "C" fn(*mut UfutexWaitv, c_uint, c_uint, *const libc::timespec, libc::clockid_t) -> c_long;
type CRequeue = unsafe extern "C" fn(*mut UfutexWaitv, c_uint, c_int, c_int) -> c_long;

impl UfutexC {
    pub const NAME: &'static str = "ufutex-c";

    /// The flags of a private word of `W`'s size (`FUTEX2_SIZE_*` is log2 of the bytes).
    fn flags<W>() -> u32 {
        std::mem::size_of::<W>().trailing_zeros() | sys::FUTEX2_PRIVATE
    }

    /// "Every bit" at `W`'s size (the C ABI, like the kernel, refuses a mask wider than the word).
    fn mask<W>(mask: u64) -> c_ulong {
        let all = u64::MAX >> (64 - 8 * std::mem::size_of::<W>());
        (if mask == ANY { all } else { mask }) as c_ulong
    }

    fn entry(w: &AtomicU32, v: u32) -> UfutexWaitv {
        UfutexWaitv { val: v.into(), uaddr: w.as_ptr() as u64, flags: Self::flags::<u32>(), reserved: 0 }
    }
}

/// What a C call that returned -1 says: its errno as a [`Wait`] (read as a C caller reads it).
#[inline]
pub(crate) fn c_failure() -> Wait {
    // SAFETY: `__errno_location` returns this thread's errno, valid for the thread's life.
    match unsafe { *libc::__errno_location() } {
        libc::EAGAIN => Wait::Mismatch,
        _ => Wait::Other,
    }
}

impl Competitor for UfutexC {
    type Waitv<'a> = Vec<UfutexWaitv>;

    fn name(&self) -> String {
        Self::NAME.into()
    }
    fn unsupported(&self, _op: Op) -> Option<String> {
        None
    }
    #[inline]
    fn wait<W: Word>(&self, w: &W, expected: u64, mask: u64) -> Wait {
        let f: CWait = black_box(ufutex::preload::ufutex_wait);
        let at = std::ptr::from_ref(w).cast_mut().cast();
        // SAFETY: `w` is a live word of `W`'s size, as the flags say; no timeout.
        match unsafe { f(at, expected as c_ulong, Self::mask::<W>(mask), Self::flags::<W>(), std::ptr::null(), 0) } {
            0 => Wait::Woken,
            _ => c_failure(),
        }
    }
    #[inline]
    fn wake<W: Word>(&self, w: &W, n: usize, mask: u64) -> usize {
        let f: CWake = black_box(ufutex::preload::ufutex_wake);
        let at = std::ptr::from_ref(w).cast_mut().cast();
        // SAFETY: as in `wait`; a private wake never reads the word.
        usize::try_from(unsafe { f(at, Self::mask::<W>(mask), sys::c_count(n), Self::flags::<W>()) }).unwrap_or(0)
    }
    fn prepare_waitv<'a>(&'a self, entries: &[(&'a AtomicU32, u32)]) -> Self::Waitv<'a> {
        entries.iter().map(|&(w, v)| Self::entry(w, v)).collect()
    }
    fn prepare_waitv_sized<'a, W: Word>(&'a self, entries: &[(&'a W, u64)]) -> Option<Self::Waitv<'a>> {
        let entry = |&(w, v): &(&W, u64)| UfutexWaitv {
            val: v,
            uaddr: std::ptr::from_ref(w) as u64,
            flags: Self::flags::<W>(),
            reserved: 0,
        };
        Some(entries.iter().map(entry).collect())
    }
    #[inline]
    fn waitv(&self, v: &Self::Waitv<'_>) -> Result<usize, Wait> {
        let f: CWaitv = black_box(ufutex::preload::ufutex_waitv);
        let n = c_uint::try_from(v.len()).unwrap_or(c_uint::MAX);
        // SAFETY: `v` holds `n` entries naming words that the caller keeps alive for the call
        // (`prepare_waitv` borrowed them for `'a`); the C ABI only reads the vector.
        match unsafe { f(v.as_ptr().cast_mut(), n, 0, std::ptr::null(), 0) } {
            i @ 0.. => Ok(i as usize),
            _ => Err(c_failure()),
        }
    }
    fn requeue(
        &self,
        from: &AtomicU32,
        expected: u32,
        to: &AtomicU32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, Wait> {
        let f: CRequeue = black_box(ufutex::preload::ufutex_requeue);
        let mut pair = [Self::entry(from, expected), Self::entry(to, 0)];
        // SAFETY: `pair` is two entries naming live words, as `ufutex_requeue` reads them.
        match unsafe { f(pair.as_mut_ptr(), 0, sys::c_count(nr_wake), sys::c_count(nr_requeue)) } {
            n @ 0.. => Ok(n as usize),
            _ => Err(c_failure()),
        }
    }
    fn queued(&self) -> Option<usize> {
        Some(Domain::default_domain().queued_waiters())
    }
}

/// ufutex's process-shared futexes (`ufutex::shared`): its per-user shared table, keyed by the
/// object behind the word's page. It cannot count its queue.
pub struct UfutexShared;

fn shared_wait_result(r: Result<(), ufutex::shared::SharedError>) -> Wait {
    match r {
        Ok(()) => Wait::Woken,
        Err(ufutex::shared::SharedError::WouldBlock) => Wait::Mismatch,
        Err(_) => Wait::Other,
    }
}

/// Why ufutex's shared table cannot be used here, probed once (a wake on a word in a shared
/// mapping opens the segment).
fn shared_table_unusable() -> Option<String> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(|| {
        if std::env::var_os("UFUTEX_SHARED").is_some_and(|v| v == "kernel") {
            return Some("UFUTEX_SHARED=kernel is set: ufutex's shared calls would be the kernel's".into());
        }
        let words = match crate::shm::Words::<AtomicU32>::new(1, true) {
            Ok(w) => w,
            Err(e) => return Some(format!("memfd for the probe: {e}")),
        };
        ufutex::shared::wake(&words[0], 1).err().map(|e| format!("ufutex's shared table: {e} (errno {})", e.errno()))
    })
    .clone()
}

impl Competitor for UfutexShared {
    type Waitv<'a> = Vec<ufutex::WaitEntry<'a>>;

    fn name(&self) -> String {
        "ufutex-shared".into()
    }
    fn unsupported(&self, _op: Op) -> Option<String> {
        shared_table_unusable()
    }
    #[inline]
    fn wait<W: Word>(&self, w: &W, expected: u64, mask: u64) -> Wait {
        shared_wait_result(ufutex::shared::wait_bitset(w, W::value(expected), ufutex_mask(mask), None))
    }
    #[inline]
    fn wake<W: Word>(&self, w: &W, n: usize, mask: u64) -> usize {
        ufutex::shared::wake_bitset(w, n, ufutex_mask(mask)).unwrap_or(0)
    }
    fn prepare_waitv<'a>(&'a self, entries: &[(&'a AtomicU32, u32)]) -> Self::Waitv<'a> {
        entries.iter().map(|&(w, v)| ufutex::WaitEntry::new(w, v)).collect()
    }
    #[inline]
    fn waitv(&self, v: &Self::Waitv<'_>) -> Result<usize, Wait> {
        ufutex::shared::waitv(v, None).map_err(|e| shared_wait_result(Err(e)))
    }
    fn requeue(
        &self,
        from: &AtomicU32,
        expected: u32,
        to: &AtomicU32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, Wait> {
        ufutex::shared::requeue(from, expected, to, nr_wake, nr_requeue).map_err(|e| shared_wait_result(Err(e)))
    }
}

/// A thin wrapper over the legacy FUTEX_WAIT/FUTEX_WAKE, in the style of the atomic-wait crate:
/// wait and wake on a 32-bit word, nothing else.
pub struct AtomicWaitStyle;

impl Competitor for AtomicWaitStyle {
    type Waitv<'a> = ();

    fn name(&self) -> String {
        "atomic-wait".into()
    }
    fn unsupported(&self, op: Op) -> Option<String> {
        match op {
            Op::WaitWake => None,
            Op::Mask => Some("the atomic-wait API has no bitset masks".into()),
            Op::Waitv => Some("the atomic-wait API has no wait-on-many".into()),
            Op::Requeue => Some("the atomic-wait API has no requeue".into()),
            Op::Sizes => Some("atomic-wait is 32-bit only".into()),
        }
    }
    #[inline]
    fn wait<W: Word>(&self, w: &W, expected: u64, _mask: u64) -> Wait {
        match w.as_u32() {
            Some(w) => kernel_wait_result(sys::legacy_wait(w, expected as u32)),
            None => Wait::Other,
        }
    }
    #[inline]
    fn wake<W: Word>(&self, w: &W, n: usize, _mask: u64) -> usize {
        w.as_u32().and_then(|w| sys::legacy_wake(w, n).ok()).unwrap_or(0)
    }
    fn prepare_waitv<'a>(&'a self, _entries: &[(&'a AtomicU32, u32)]) -> Self::Waitv<'a> {}
    fn waitv(&self, _v: &()) -> Result<usize, Wait> {
        Err(Wait::Other)
    }
    fn requeue(&self, _: &AtomicU32, _: u32, _: &AtomicU32, _: usize, _: usize) -> Result<usize, Wait> {
        Err(Wait::Other)
    }
}

/// parking_lot_core's park/unpark keyed by the word's address (the mask rides in the token).
pub struct ParkingLotCore;

impl Competitor for ParkingLotCore {
    type Waitv<'a> = ();

    fn name(&self) -> String {
        "parking_lot_core".into()
    }
    fn unsupported(&self, op: Op) -> Option<String> {
        match op {
            Op::Waitv => Some("parking_lot_core cannot park on several keys".into()),
            _ => None,
        }
    }
    #[inline]
    fn wait<W: Word>(&self, w: &W, expected: u64, mask: u64) -> Wait {
        let key = w as *const W as usize;
        // SAFETY:
        // - the validate/before_sleep/timed_out callbacks neither panic nor call into
        //   parking_lot (they only load an atomic), as `park` requires.
        let r = unsafe {
            parking_lot_core::park(
                key,
                || w.get() == expected,
                || {},
                |_, _| {},
                parking_lot_core::ParkToken(mask as usize),
                None,
            )
        };
        match r {
            parking_lot_core::ParkResult::Unparked(_) => Wait::Woken,
            parking_lot_core::ParkResult::Invalid => Wait::Mismatch,
            parking_lot_core::ParkResult::TimedOut => Wait::Other,
        }
    }
    #[inline]
    fn wake<W: Word>(&self, w: &W, n: usize, mask: u64) -> usize {
        use parking_lot_core::FilterOp;
        let key = w as *const W as usize;
        let mut left = n;
        // SAFETY:
        // - the filter and callback neither panic nor call into parking_lot.
        let r = unsafe {
            parking_lot_core::unpark_filter(
                key,
                |t| {
                    if left == 0 {
                        FilterOp::Stop
                    } else if t.0 as u64 & mask != 0 {
                        left -= 1;
                        FilterOp::Unpark
                    } else {
                        FilterOp::Skip
                    }
                },
                |_| parking_lot_core::DEFAULT_UNPARK_TOKEN,
            )
        };
        r.unparked_threads
    }
    fn prepare_waitv<'a>(&'a self, _entries: &[(&'a AtomicU32, u32)]) -> Self::Waitv<'a> {}
    fn waitv(&self, _v: &()) -> Result<usize, Wait> {
        Err(Wait::Other)
    }
    fn requeue(
        &self,
        from: &AtomicU32,
        expected: u32,
        to: &AtomicU32,
        nr_wake: usize,
        _nr_requeue: usize,
    ) -> Result<usize, Wait> {
        use parking_lot_core::RequeueOp;
        let op = if nr_wake == 0 { RequeueOp::RequeueAll } else { RequeueOp::UnparkOneRequeueRest };
        // SAFETY:
        // - the validate and callback closures neither panic nor call into parking_lot.
        let r = unsafe {
            parking_lot_core::unpark_requeue(
                from as *const AtomicU32 as usize,
                to as *const AtomicU32 as usize,
                || if from.load(Ordering::Acquire) == expected { op } else { RequeueOp::Abort },
                |_, _| parking_lot_core::DEFAULT_UNPARK_TOKEN,
            )
        };
        if r.unparked_threads + r.requeued_threads == 0 && from.load(Ordering::Acquire) != expected {
            return Err(Wait::Mismatch);
        }
        Ok(r.unparked_threads + r.requeued_threads)
    }
}

/// Competitor names accepted by `--impl` for the futex workloads (private runs).
pub const NAMES: &[&str] = &["ufutex", "ufutex-domain", "kernel", "atomic-wait", "parking_lot_core"];

/// Competitors run only when `--impl` names them.
pub const EXPLICIT_NAMES: &[&str] = &[UfutexC::NAME];

/// The process-shared competitors (`--shared` runs), and the baseline of those runs.
pub const SHARED_NAMES: &[&str] = &["ufutex-shared", "kernel-shared"];
pub const SHARED_BASELINE: &str = "kernel-shared";

/// The competitor a `--shared` run uses for `name`: `Ok(shared name)`, or `Err(reason)` when
/// it has no process-shared mode.
pub fn shared_variant(name: &str) -> Result<&'static str, String> {
    match name {
        "ufutex" | "ufutex-shared" => Ok("ufutex-shared"),
        "kernel" | "kernel-shared" => Ok("kernel-shared"),
        other => Err(format!("{other} has no process-shared mode; left out of --shared runs")),
    }
}

/// A competitor picked on the command line (static dispatch through [`dispatch!`]).
pub enum AnyCompetitor {
    Ufutex(Ufutex),
    UfutexDefault(Ufutex<DefaultHome>),
    UfutexC(UfutexC),
    Kernel(Kernel),
    UfutexShared(UfutexShared),
    AtomicWait(AtomicWaitStyle),
    ParkingLot(ParkingLotCore),
}

impl AnyCompetitor {
    /// Build one by name; `domain_slots` is the size of the `ufutex-domain` table.
    pub fn by_name(name: &str, domain_slots: Slots) -> std::io::Result<Self> {
        Ok(match name {
            "ufutex" => AnyCompetitor::UfutexDefault(Ufutex::default_domain()),
            "ufutex-domain" => AnyCompetitor::Ufutex(Ufutex::with_slots(domain_slots)?),
            UfutexC::NAME => AnyCompetitor::UfutexC(UfutexC),
            "kernel" => AnyCompetitor::Kernel(Kernel::default()),
            "ufutex-shared" => AnyCompetitor::UfutexShared(UfutexShared),
            "kernel-shared" => AnyCompetitor::Kernel(Kernel::shared()),
            "atomic-wait" => AnyCompetitor::AtomicWait(AtomicWaitStyle),
            "parking_lot_core" => AnyCompetitor::ParkingLot(ParkingLotCore),
            other => return Err(std::io::Error::other(format!("unknown competitor {other:?}"))),
        })
    }

    pub fn name(&self) -> String {
        dispatch!(self, c => c.name())
    }

    pub fn unsupported(&self, op: Op) -> Option<String> {
        dispatch!(self, c => c.unsupported(op))
    }
}

/// Run `$body` with `$c` bound to the concrete competitor inside an [`AnyCompetitor`].
#[macro_export]
macro_rules! dispatch {
    ($any:expr, $c:ident => $body:expr) => {
        match $any {
            $crate::competitor::AnyCompetitor::Ufutex($c) => $body,
            $crate::competitor::AnyCompetitor::UfutexDefault($c) => $body,
            $crate::competitor::AnyCompetitor::UfutexC($c) => $body,
            $crate::competitor::AnyCompetitor::Kernel($c) => $body,
            $crate::competitor::AnyCompetitor::UfutexShared($c) => $body,
            $crate::competitor::AnyCompetitor::AtomicWait($c) => $body,
            $crate::competitor::AnyCompetitor::ParkingLot($c) => $body,
        }
    };
}
pub use dispatch;
