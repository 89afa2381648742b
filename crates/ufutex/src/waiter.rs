//! The waiter core, written once for every table (`engine.rs`) and shared by wait and waitv:
//! queue waiters if their words still hold the expected values (the waiter's half of the
//! (A)/(B) protocol, argued at the top of `wait.rs`), and take our own waiters out again after
//! a wake, a timeout or a signal, learning which of them a waker took.

use crate::engine::{Placed, WaitTable, Want};

/// The items of `it` in a vector, or `None` if memory for it cannot be had (a waitv's
/// vectors: the C ABI answers `ENOMEM` rather than abort). Nothing of `it` is consumed then.
pub(crate) fn try_collect<T>(it: impl ExactSizeIterator<Item = T>) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(it.len()).ok()?;
    v.extend(it);
    Some(v)
}

/// Why a waiter, or the waiter at some index of a wait, was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why<E> {
    /// Its word no longer held its value.
    Changed,
    /// No memory for the list of announced tables.
    NoMemory,
    /// The table failed.
    Table(E),
}

impl<E> From<E> for Why<E> {
    fn from(e: E) -> Self {
        Why::Table(e)
    }
}

/// Why [`enqueue_all`] did not queue every waiter: the waiters before `queued` are queued, the
/// rest not (and their counts taken back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unqueued<E> {
    pub(crate) queued: usize,
    pub(crate) why: Why<E>,
}

/// Queue one waiter, announcing it again whenever its table was replaced; what it was counted
/// in. Its table chooses (A)'s order for its bucket (`WaitTable::order_one`).
#[inline]
pub(crate) fn enqueue<'t, T: WaitTable>(
    t: &'t T,
    w: &Want<'_, T>,
    pays: crate::membarrier::Pays,
) -> Result<T::Announced<'t>, Why<T::Error>> {
    loop {
        let a = t.announce(w)?;
        if !t.order_one(a, w, pays) {
            continue; // the table was replaced: announce again
        }
        match t.place(a, w)? {
            Placed::Queued => return Ok(a),
            Placed::Changed => return Err(Why::Changed),
            Placed::Stale => {}
        }
    }
}

/// Queue every waiter of `wants` as [`enqueue`] does one, with one (A) order for all of them
/// (one barrier, not one per entry).
pub(crate) fn enqueue_all<T: WaitTable>(
    t: &T,
    wants: &[Want<'_, T>],
    pays: crate::membarrier::Pays,
) -> Result<(), Unqueued<T::Error>> {
    let none = |why| Unqueued { queued: 0, why };
    let mut announced = Vec::new();
    announced.try_reserve_exact(wants.len()).map_err(|_| none(Why::NoMemory))?;
    for (i, w) in wants.iter().enumerate() {
        match t.announce(w) {
            Ok(a) => announced.push(a),
            Err(e) => {
                withdraw(t, &wants[..i], &announced);
                return Err(none(Why::Table(e)));
            }
        }
    }
    t.order(pays);
    for (i, w) in wants.iter().enumerate() {
        loop {
            let stop = match t.place(announced[i], w) {
                Ok(Placed::Queued) => break,
                Ok(Placed::Stale) => match t.announce(w) {
                    Ok(a) => {
                        announced[i] = a;
                        t.order(pays);
                        continue;
                    }
                    Err(e) => Why::Table(e),
                },
                Ok(Placed::Changed) => Why::Changed,
                Err(e) => {
                    t.withdraw(announced[i], w);
                    Why::Table(e)
                }
            };
            withdraw(t, &wants[i + 1..], &announced[i + 1..]);
            return Err(Unqueued { queued: i, why: stop });
        }
    }
    Ok(())
}

/// Take back the counts of waiters announced and not to be placed.
fn withdraw<'t, T: WaitTable>(t: &'t T, wants: &[Want<'_, T>], announced: &[T::Announced<'t>]) {
    for (w, &a) in wants.iter().zip(announced) {
        t.withdraw(a, w);
    }
}

/// What [`take_back`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settled<E> {
    /// Waiters a waker had taken (each owes the thread a wake).
    pub(crate) woken: u32,
    /// The highest index among them.
    pub(crate) best: Option<usize>,
    /// The last failure of the table, if one could not be looked at.
    pub(crate) failed: Option<E>,
}

/// Take each of `waiters` (each queued once in this wait) out of its queue if it is still
/// there; learn which ones a waker took.
pub(crate) fn take_back<'w, T: WaitTable>(t: &T, waiters: impl Iterator<Item = T::Waiter<'w>>) -> Settled<T::Error> {
    let mut s = Settled { woken: 0, best: None, failed: None };
    for (position, w) in waiters.enumerate() {
        match t.dequeue_self(w) {
            Ok(true) => {
                s.woken += 1;
                s.best = s.best.max(Some(T::index(w, position)));
            }
            Ok(false) => {}
            Err(e) => s.failed = Some(e),
        }
    }
    s
}
