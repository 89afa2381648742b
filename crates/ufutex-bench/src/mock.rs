//! A mock competitor for the workload tests: a futex emulated with one Mutex + Condvar, simple
//! enough to be obviously right, so the tests check the workloads' own logic (setup, counting,
//! verification, release) rather than a real implementation.

use crate::competitor::{Competitor, Op, Wait, Word};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

struct Entry {
    addr: usize,
    mask: u64,
    id: u64,
    index: usize,
}

#[derive(Default)]
struct State {
    queue: Vec<Entry>,
    woken: HashMap<u64, usize>,
    next_id: u64,
}

#[derive(Default)]
pub struct Mock {
    state: Mutex<State>,
    cv: Condvar,
    waits: AtomicU64,
    /// How many of the next waits first sleep 20 ms elsewhere (asleep, but not yet queued: like
    /// a waiter held up on a lock on its way to the queue).
    pub late: AtomicU64,
    /// Whether `queued` says it cannot count (as the kernel cannot).
    uncounted: bool,
}

impl Mock {
    /// A mock whose `queued` cannot count, as the kernel's.
    pub fn uncounted() -> Mock {
        Mock { uncounted: true, ..Mock::default() }
    }

    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Queue one waiter on `entries` (address, mask, index) and sleep until woken.
    fn sleep(&self, mut st: MutexGuard<'_, State>, entries: &[(usize, u64)]) -> usize {
        let id = st.next_id;
        st.next_id += 1;
        for (index, &(addr, mask)) in entries.iter().enumerate() {
            st.queue.push(Entry { addr, mask, id, index });
        }
        loop {
            if let Some(i) = st.woken.remove(&id) {
                return i;
            }
            st = self.cv.wait(st).unwrap();
        }
    }

    fn wake_addr(st: &mut State, addr: usize, n: usize, mask: u64) -> usize {
        let mut woken = 0;
        while woken < n {
            let Some(pos) = st.queue.iter().position(|e| e.addr == addr && e.mask & mask != 0) else { break };
            let (id, index) = (st.queue[pos].id, st.queue[pos].index);
            st.queue.retain(|e| e.id != id);
            st.woken.insert(id, index);
            woken += 1;
        }
        woken
    }
}

impl Competitor for Mock {
    type Waitv<'a> = Vec<(&'a AtomicU32, u32)>;

    fn name(&self) -> String {
        "mock".into()
    }
    fn unsupported(&self, _op: Op) -> Option<String> {
        None
    }
    fn wait<W: Word>(&self, w: &W, expected: u64, mask: u64) -> Wait {
        self.waits.fetch_add(1, Ordering::Relaxed);
        if self.late.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let st = self.lock();
        if w.get() != expected {
            return Wait::Mismatch;
        }
        self.sleep(st, &[(w as *const W as usize, mask)]);
        Wait::Woken
    }
    fn wake<W: Word>(&self, w: &W, n: usize, mask: u64) -> usize {
        let woken = Mock::wake_addr(&mut self.lock(), w as *const W as usize, n, mask);
        self.cv.notify_all();
        woken
    }
    fn prepare_waitv<'a>(&'a self, entries: &[(&'a AtomicU32, u32)]) -> Self::Waitv<'a> {
        entries.to_vec()
    }
    fn waitv(&self, v: &Self::Waitv<'_>) -> Result<usize, Wait> {
        let st = self.lock();
        if v.iter().any(|(w, e)| w.load(Ordering::SeqCst) != *e) {
            return Err(Wait::Mismatch);
        }
        let entries: Vec<(usize, u64)> = v.iter().map(|(w, _)| (*w as *const AtomicU32 as usize, u64::MAX)).collect();
        Ok(self.sleep(st, &entries))
    }
    fn requeue(
        &self,
        from: &AtomicU32,
        expected: u32,
        to: &AtomicU32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, Wait> {
        let mut st = self.lock();
        if from.load(Ordering::SeqCst) != expected {
            return Err(Wait::Mismatch);
        }
        let (f, t) = (from as *const AtomicU32 as usize, to as *const AtomicU32 as usize);
        let woken = Mock::wake_addr(&mut st, f, nr_wake, u64::MAX);
        let mut moved = 0;
        for e in st.queue.iter_mut().filter(|e| e.addr == f) {
            if moved == nr_requeue {
                break;
            }
            e.addr = t;
            moved += 1;
        }
        drop(st);
        self.cv.notify_all();
        Ok(woken + moved)
    }
    fn queued(&self) -> Option<usize> {
        // Like ufutex, count queued entries (a waitv queues one per word).
        (!self.uncounted).then(|| self.lock().queue.len())
    }
}
