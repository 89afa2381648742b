//! The kernel futex as loom sees it, so that the Linux parker (`linux.rs`) — its SLEEPING and
//! BELLED flags and the bell ring — is model-checked unchanged (the models are at the end of
//! `linux.rs`).
//!
//! One loom mutex stands for the kernel's hash-bucket locks: a wait compares every word and
//! queues itself in one critical section, a wake dequeues and unparks in another, which is the
//! guarantee the real futex gives (its compare happens under the bucket lock, ordered with the
//! waker by the kernel's barriers). A timed wait that would sleep times out at once instead:
//! loom picks every point where that can happen, as with the crate's loom parker.

use crate::deadline::Timeout;
use crate::primitive::AtomicU32;
use loom::sync::Mutex;
use loom::thread::Thread;
use std::sync::atomic::Ordering;

pub(crate) use super::KernelWait;

struct Sleeper {
    id: usize,
    words: Vec<usize>,
    /// The bits a wake must meet (`u32::MAX` for a plain wait).
    bits: u32,
    thread: Thread,
}

#[derive(Default)]
struct Kernel {
    next_id: usize,
    sleepers: Vec<Sleeper>,
    /// Sleepers woken and the word that woke each, until each asks ([`wait_all`]).
    woken: Vec<(usize, usize)>,
}

loom::lazy_static! {
    static ref KERNEL: Mutex<Kernel> = Mutex::new(Kernel::default());
}

fn addr(w: *const AtomicU32) -> usize {
    w as usize
}

/// Sleep while every `(word, value)` still matches, until a wake names one of the words (and
/// meets `bits`): `Ok(index of that word)`, or why not.
fn wait_all(words: &[(&AtomicU32, u32)], bits: u32, timeout: Option<&Timeout>) -> Result<usize, KernelWait> {
    let id = {
        let mut k = KERNEL.lock().unwrap();
        // Relaxed under the kernel lock: the lock orders this compare with every wake.
        if words.iter().any(|(w, v)| w.load(Ordering::Relaxed) != *v) {
            return Err(KernelWait::Retry); // EAGAIN
        }
        if timeout.is_some() {
            return Err(KernelWait::TimedOut);
        }
        let id = k.next_id;
        k.next_id += 1;
        let a = words.iter().map(|(w, _)| addr(*w)).collect();
        k.sleepers.push(Sleeper { id, words: a, bits, thread: loom::thread::current() });
        id
    };
    loop {
        loom::thread::park();
        let mut k = KERNEL.lock().unwrap();
        // Woken: by which word.
        if let Some(at) = k.woken.iter().position(|&(s, _)| s == id) {
            let (_, by) = k.woken.swap_remove(at);
            return Ok(words.iter().position(|(w, _)| addr(*w) == by).unwrap_or(0));
        }
    }
}

pub(crate) fn has_waitv() -> bool {
    true
}

pub(crate) fn wait(word: &AtomicU32, val: u32, timeout: Option<&Timeout>) -> KernelWait {
    wait_all(&[(word, val)], u32::MAX, timeout).err().unwrap_or(KernelWait::Retry)
}

/// `FUTEX_WAIT_BITSET`.
pub(crate) fn wait_bits(word: &AtomicU32, val: u32, bits: u32, timeout: Option<&Timeout>) -> KernelWait {
    wait_all(&[(word, val)], bits, timeout).err().unwrap_or(KernelWait::Retry)
}

/// `futex_waitv` over `head` and then `tail`; the model has one kind of word (private and
/// shared alike).
pub(crate) fn waitv(
    head: &[super::Watch<'_>],
    tail: &[super::Watch<'_>],
    timeout: Option<&Timeout>,
) -> Result<usize, KernelWait> {
    let words: Vec<(&AtomicU32, u32)> = head.iter().chain(tail).map(|w| (w.word, w.val)).collect();
    wait_all(&words, u32::MAX, timeout)
}

/// The shared futex (the process-shared table's park words): in the model, the same kind of
/// word as a private one.
pub(crate) fn wait_shared(word: &AtomicU32, val: u32, timeout: Option<&Timeout>) -> KernelWait {
    wait(word, val, timeout)
}

/// [`wake_addr`] for the shared futex: how many sleepers it woke.
pub(crate) fn wake_shared(word: &AtomicU32, n: i32) -> usize {
    wake_addr(word, n)
}

/// Wake up to `n` sleepers that listen to `word`, oldest first: how many.
pub(crate) fn wake_addr(word: *const AtomicU32, n: i32) -> usize {
    wake_matching(word, n, u32::MAX)
}

/// `FUTEX_WAKE_BITSET` of as many sleepers on `word` as `bits` has bits, oldest first, whose
/// bits meet `bits`.
pub(crate) fn wake_bits(word: &AtomicU32, bits: u32) {
    wake_matching(word, bits.count_ones() as i32, bits);
}

fn wake_matching(word: *const AtomicU32, n: i32, bits: u32) -> usize {
    let mut k = KERNEL.lock().unwrap();
    let k = &mut *k;
    let (mut left, woken) = (n, &mut k.woken);
    let a = addr(word);
    k.sleepers.retain(|s| {
        if left > 0 && s.words.contains(&a) && s.bits & bits != 0 {
            left -= 1;
            woken.push((s.id, a));
            s.thread.unpark();
            false
        } else {
            true
        }
    });
    (n - left) as usize
}

pub(crate) fn wake(word: &AtomicU32, n: i32) {
    wake_addr(word, n);
}
