//! Waking waiters on one word. The (B) side of the protocol in `wait.rs`.

use crate::key::Key;
use crate::primitive::{fence, Ordering};
use crate::queue::Step;
use crate::table::Table;
use crate::table::WakeList;
use crate::tables::Tables;
use crate::word::WordRef;

/// The untyped wake every front end calls.
#[inline]
pub(crate) fn wake_word(domain: &Tables, word: WordRef, n: usize, mask: u64) -> usize {
    wake_key(domain, Key::private(word.addr()), n, mask)
}

/// [`wake_word`] with the key given: its node picks the table (NUMA, see `numa.rs`).
#[inline]
pub(crate) fn wake_key(domain: &Tables, key: Key, n: usize, mask: u64) -> usize {
    wake_key_more(domain, key, n, mask, false).0
}

/// [`wake_word`], also telling whether a matching waiter was left queued (as seen under the
/// bucket lock): a lock's unlock uses it to keep its "parked" bit.
#[inline]
pub(crate) fn wake_word_more(domain: &Tables, word: WordRef, n: usize, mask: u64) -> (usize, bool) {
    wake_key_more(domain, Key::private(word.addr()), n, mask, true)
}

#[inline]
fn wake_key_more(domain: &Tables, key: Key, n: usize, mask: u64, want_more: bool) -> (usize, bool) {
    if n == 0 {
        return (0, false);
    }
    fence(Ordering::SeqCst); // (B)
    let Some(table) = domain.table_if_any(&key) else {
        return (0, false); // no table yet: nobody ever queued in this slot of the domain
    };
    // (B): Relaxed after the fence; 0 means no waiter and a current table (table.rs invariant).
    if table.bucket(&key).waiters().load(Ordering::Relaxed) == 0 {
        return (0, false);
    }
    wake_locked(domain, table, key, n, mask, want_more)
}

#[inline(never)]
fn wake_locked<'d>(
    domain: &'d Tables,
    mut table: &'d Table,
    key: Key,
    n: usize,
    mask: u64,
    want_more: bool,
) -> (usize, bool) {
    let mut more = false;
    let list = loop {
        let mut g = table.bucket(&key).lock();
        if !domain.is_current(table) {
            drop(g);
            table = domain.table(&key);
            continue;
        }
        let mut list = WakeList::new();
        let mut left = n;
        let pick = |k: &Key, m: u64| {
            let matches = *k == key && m & mask != 0;
            match () {
                _ if left == 0 && !(want_more && matches) => match want_more {
                    true => Step::Skip, // keep looking for one more match
                    false => Step::Stop,
                },
                _ if left == 0 => {
                    more = true;
                    Step::Stop
                }
                _ if matches => {
                    left -= 1;
                    Step::Take
                }
                _ => Step::Skip,
            }
        };
        // SAFETY: `g` holds the bucket lock; each taken node goes straight into `list`.
        unsafe { g.queue().take(pick, |node| list.push(node)) };
        // Relaxed under the lock: the dequeuer drops the count for the nodes it took.
        g.waiters().fetch_sub(list.len() as u32, Ordering::Relaxed);
        break list;
    };
    let woken = list.len();
    list.unpark_all();
    (woken, more)
}
