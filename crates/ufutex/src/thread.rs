//! Per-thread state: the parker, the waitv node vector (grown to the largest vector the thread
//! used), and the domains the thread has waited on (their automatic sizing counts threads).
//! A few hundred bytes plus the waitv nodes.
//!
//! A thread's first plain wait allocates nothing, so that it may come from a signal handler that
//! interrupted the allocator (the kernel's futex is async-signal-safe, and we are its drop-in):
//! - the state lives in the thread's static TLS, made in place on first use and dropped at the
//!   thread's exit by a `pthread_key_t` destructor ([`storage`]). std's `thread_local!` with a
//!   destructor registers it on first use through `__cxa_thread_atexit_impl`, which allocates
//!   and takes the dynamic loader's lock (the key is made, and the object that holds its
//!   destructor kept loaded, once per process);
//! - the first [`INLINE_DOMAINS`] domains it counts itself in are kept inline.
//!
//! What still allocates in a wait: the growth of process-wide structures (the process's first
//! wait installs the fork handlers and makes the key; an automatic table that grows with the
//! threads), and a waitv of more entries than the thread used before. The node pool's chunks
//! (one per 512 threads at once) and the group records come from the kernel (`pages.rs`).

use crate::parker::{Park, Parker};
use crate::primitive::{AtomicUsize, Ordering};
use crate::table::Node;
use std::cell::{RefCell, UnsafeCell};
use std::sync::Arc;

pub(crate) struct ThreadData {
    pub(crate) parker: Parker,
    /// The node of this thread's plain waits, made by the first (see [`ThreadData::plain_node`]).
    plain: UnsafeCell<Option<Plain>>,
    waitv_nodes: UnsafeCell<Vec<Node>>,
    /// Thread counters of the domains this thread has waited on; decremented on exit.
    domains: RefCell<Domains>,
}

/// How many domains a thread counts itself in without allocating.
const INLINE_DOMAINS: usize = 4;

/// The thread counters of the domains a thread has waited on: the first [`INLINE_DOMAINS`]
/// inline, the rest in a vector.
struct Domains {
    inline: [Option<Arc<AtomicUsize>>; INLINE_DOMAINS],
    more: Vec<Arc<AtomicUsize>>,
}

impl Domains {
    const fn new() -> Domains {
        Domains { inline: [const { None }; INLINE_DOMAINS], more: Vec::new() }
    }

    fn contains(&self, threads: &Arc<AtomicUsize>) -> bool {
        self.inline.iter().flatten().chain(&self.more).any(|d| Arc::ptr_eq(d, threads))
    }

    /// Forget the counters of domains that were dropped (we hold the last reference), so that
    /// a long-lived thread that waits on many short-lived domains does not accumulate them.
    fn forget_dropped(&mut self) {
        for d in &mut self.inline {
            if d.as_ref().is_some_and(|d| Arc::strong_count(d) == 1) {
                *d = None;
            }
        }
        self.more.retain(|d| Arc::strong_count(d) > 1);
    }

    fn push(&mut self, threads: Arc<AtomicUsize>) {
        match self.inline.iter_mut().find(|d| d.is_none()) {
            Some(free) => *free = Some(threads),
            None => self.more.push(threads),
        }
    }

    /// Every counter held, taken out.
    fn drain(&mut self) -> impl Iterator<Item = Arc<AtomicUsize>> + '_ {
        self.inline.iter_mut().filter_map(Option::take).chain(self.more.drain(..))
    }
}

impl ThreadData {
    fn new() -> ThreadData {
        ThreadData {
            parker: Parker::new(),
            plain: UnsafeCell::new(None),
            waitv_nodes: UnsafeCell::new(Vec::new()),
            domains: RefCell::new(Domains::new()),
        }
    }

    /// The node of this thread's plain waits: idle between episodes, reused by each (an
    /// episode ends with `Node::reclaim`), made by the first (the parker's address is final
    /// by then). In the process-wide pool (`node_pool`), beside the other threads' nodes; in
    /// the thread's own memory under loom, or if the pool cannot grow.
    ///
    /// # Safety
    /// As [`ThreadData::waitv_nodes`]: the thread is between episodes.
    pub(crate) unsafe fn plain_node(&self) -> &Node {
        // SAFETY: between episodes only this thread touches the cell (contract); once made, the
        // node stays where it is for the life of the `ThreadData`.
        let plain = unsafe { &mut *self.plain.get() };
        match plain.get_or_insert_with(|| Plain::new(&self.parker)) {
            #[cfg(not(ufutex_loom))]
            Plain::Pooled(slot) => slot.node(),
            Plain::Own(node) => node,
        }
    }

    /// Count this thread as a user of the domain whose counter is `threads`; returns the new
    /// count the first time, `None` after.
    pub(crate) fn register(&self, threads: &Arc<AtomicUsize>) -> Option<usize> {
        let mut domains = self.domains.borrow_mut();
        if domains.contains(threads) {
            return None;
        }
        domains.forget_dropped();
        domains.push(threads.clone());
        // Relaxed: a sizing hint; the resize it may trigger is serialised by the domain's lock.
        Some(threads.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// `n` waiter nodes for a waitv, node `i` for entry `i`; `None` if memory for them cannot be
    /// had (the C ABI's `ENOMEM`).
    ///
    /// # Safety
    /// No node of this thread is in use (queued, or woken and awaiting its unpark): the
    /// thread is between episodes.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn waitv_nodes(&self, n: usize) -> Option<&[Node]> {
        // SAFETY: between episodes nothing else references the vector (contract), so growing
        // it (which may move nodes) is sound, and the thread is its only user.
        let v = unsafe { &mut *self.waitv_nodes.get() };
        v.try_reserve(n.saturating_sub(v.len())).ok()?;
        while v.len() < n {
            v.push(Node::new(&self.parker)?); // (within the capacity just reserved)
        }
        Some(&v[..n])
    }
}

/// Where a thread's plain-wait node is.
enum Plain {
    #[cfg(not(ufutex_loom))]
    Pooled(crate::node_pool::Slot),
    Own(Box<Node>),
}

impl Plain {
    /// A node for the thread of `parker` (in place in its `ThreadData`: its address is stable
    /// for the node's life).
    fn new(parker: &Parker) -> Plain {
        #[cfg(not(ufutex_loom))]
        if let Some(slot) = crate::node_pool::Slot::take(parker) {
            return Plain::Pooled(slot);
        }
        // A record's memory is as vital as the box's: out of it, abort as `Box::new` does.
        let node = Node::new(parker).unwrap_or_else(|| std::alloc::handle_alloc_error(crate::group::LAYOUT));
        Plain::Own(Box::new(node))
    }
}

impl Drop for ThreadData {
    fn drop(&mut self) {
        for d in self.domains.get_mut().drain() {
            d.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Run `f` with this thread's data. A thread whose data cannot be had (its storage torn down
/// at its exit, as for a wait inside another TLS destructor; being made, for a signal handler
/// that interrupted the making; no key for its destructor) gets a temporary one on the stack:
/// it lives through the whole operation, which is all an episode needs.
#[cfg(not(ufutex_loom))]
pub(crate) fn with_thread<R>(f: impl FnOnce(&ThreadData) -> R) -> R {
    match storage::current() {
        // SAFETY: this thread's data, live: it is dropped only by its exit destructor, which
        // cannot run while the thread is in this call (nor in a handler's).
        Some(td) => f(unsafe { &*td }),
        None => f(&ThreadData::new()),
    }
}

/// [`with_thread`] under loom: loom's thread-locals, one ThreadData per model thread, so an
/// unpark that leaked from one episode into the next would be seen by the models.
#[cfg(ufutex_loom)]
pub(crate) fn with_thread<R>(f: impl FnOnce(&ThreadData) -> R) -> R {
    loom::thread_local! {
        static THREAD: ThreadData = ThreadData::new();
    }
    let mut f = Some(f);
    if let Ok(r) = THREAD.try_with(|t| (f.take().expect("called once"))(t)) {
        return r;
    }
    (f.take().expect("not called by try_with"))(&ThreadData::new())
}

/// Each thread's [`ThreadData`], in its static TLS: made in place on first use, dropped by a
/// `pthread_key_t` destructor when the thread exits (see the module docs for why not std's
/// TLS destructor). A signal handler may interrupt any step on its thread and ask for the data
/// itself: the state cell says how far the thread got, each change fenced for the handler.
#[cfg(not(ufutex_loom))]
mod storage {
    use super::ThreadData;
    use std::cell::{Cell, UnsafeCell};
    use std::mem::MaybeUninit;
    use std::sync::atomic::{compiler_fence, AtomicUsize, Ordering};

    /// Where a thread's data stands.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub(super) enum State {
        Unmade,
        /// Being made: a handler that interrupted the making uses a temporary.
        Making,
        Live,
        /// Dropped at the thread's exit: later calls (other exit destructors) use a temporary.
        Gone,
    }

    struct Slot {
        state: Cell<State>,
        data: UnsafeCell<MaybeUninit<ThreadData>>,
    }

    impl Slot {
        fn set(&self, state: State) {
            // A handler on this thread sees the steps in program order.
            compiler_fence(Ordering::SeqCst);
            self.state.set(state);
            compiler_fence(Ordering::SeqCst);
        }
    }

    std::thread_local! {
        // Needs no drop (`MaybeUninit`), so std registers no destructor for it: the key's
        // destructor drops the data.
        static SLOT: Slot = const { Slot { state: Cell::new(State::Unmade), data: UnsafeCell::new(MaybeUninit::uninit()) } };
    }

    /// The key whose destructor drops an exiting thread's data: the key + 1, 0 until made.
    static KEY: AtomicUsize = AtomicUsize::new(0);

    /// This thread's data, made now if need be; `None` where a temporary must serve.
    #[inline]
    pub(super) fn current() -> Option<*const ThreadData> {
        SLOT.with(|slot| match slot.state.get() {
            State::Live => Some(slot.data.get().cast::<ThreadData>().cast_const()),
            State::Unmade => make(slot),
            State::Making | State::Gone => None,
        })
    }

    /// Make this thread's data in its slot, with the exit destructor armed first.
    #[cold]
    fn make(slot: &Slot) -> Option<*const ThreadData> {
        let key = key()?;
        slot.set(State::Making);
        // Any non-null value arms the destructor; glibc keeps the first 32 keys' values in the
        // thread itself, so this allocates nothing unless the process made 32 keys before ours.
        // SAFETY: `key` is a live key of this process.
        if unsafe { libc::pthread_setspecific(key, std::ptr::from_ref(slot).cast()) } != 0 {
            slot.set(State::Unmade);
            return None;
        }
        // SAFETY: Making: nothing else touches the slot's data (a handler of this thread makes
        // a temporary), and it was never made, so nothing is overwritten.
        let td: *const ThreadData = unsafe { (*slot.data.get()).write(ThreadData::new()) };
        slot.set(State::Live);
        Some(td)
    }

    /// The key, made by the first thread that needs it. Key creation in glibc takes no lock and
    /// allocates nothing (a compare-and-swap over its table of keys), so a handler may make it;
    /// two racers each make one, and the loser deletes its own.
    fn key() -> Option<libc::pthread_key_t> {
        // Acquire: pairs with the publishing exchange (the key is made before it is seen).
        let k = KEY.load(Ordering::Acquire);
        if k != 0 {
            return Some((k - 1) as libc::pthread_key_t);
        }
        let mut made: libc::pthread_key_t = 0;
        // SAFETY: `made` is a valid place for the key; `destroy` has the destructor's signature.
        if unsafe { libc::pthread_key_create(&mut made, Some(destroy)) } != 0 {
            return None;
        }
        match KEY.compare_exchange(0, made as usize + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                keep_loaded();
                Some(made)
            }
            Err(won) => {
                // SAFETY: `made` is ours, and no thread has a value for it.
                unsafe { libc::pthread_key_delete(made) };
                Some((won - 1) as libc::pthread_key_t)
            }
        }
    }

    /// Keep the shared object that holds [`destroy`] loaded for the rest of the process (where
    /// it is one: `libufutex.so`, the preload library, or a user's library built on this
    /// crate): a `dlclose` that unloaded it would leave threads that waited to call the key's
    /// destructor at an address where nothing is mapped. (std's TLS destructors hold their
    /// object the same way.) Once per process, when the key is made; a failure leaves it as it
    /// was, and the main program cannot be unloaded anyway.
    fn keep_loaded() {
        // SAFETY: an all-zero `Dl_info` is a valid place for dladdr's answer.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: `destroy` is code of this object; `info` is valid for writes.
        if unsafe { libc::dladdr(destroy as *const libc::c_void, &mut info) } == 0 || info.dli_fname.is_null() {
            return;
        }
        // RTLD_NOLOAD: the object loaded already, found by its name, not loaded again;
        // RTLD_NODELETE: never unloaded from now on. The handle is never closed.
        // SAFETY: `dli_fname` is the NUL-terminated name the loader keeps for the object.
        unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
    }

    /// The key's destructor, run by an exiting thread (after its TLS destructors: a wait in one
    /// of those still finds its data).
    extern "C" fn destroy(_: *mut libc::c_void) {
        let _ = SLOT.try_with(|slot| {
            if slot.state.get() == State::Live {
                slot.set(State::Gone);
                // SAFETY: Live until just now: made in place and never dropped; Gone from here
                // on, so no later call of this thread reaches it.
                unsafe { (*slot.data.get()).assume_init_drop() };
            }
        });
    }

    #[cfg(test)]
    pub(super) fn state() -> State {
        SLOT.with(|s| s.state.get())
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;

    fn counters(n: usize) -> Vec<Arc<AtomicUsize>> {
        (0..n).map(|_| Arc::new(AtomicUsize::new(0))).collect()
    }

    #[test]
    fn a_thread_counts_itself_in_once_and_out_at_its_exit() {
        // More than fit inline: the spilled ones too.
        let domains = counters(INLINE_DOMAINS + 2);
        // Joined by `pthread_join`, which returns after the thread's exit destructors (a scope's
        // end does not wait for them).
        std::thread::scope(|s| {
            s.spawn(|| {
                with_thread(|td| {
                    for d in &domains {
                        assert_eq!(td.register(d), Some(1));
                        assert_eq!(td.register(d), None, "counted once");
                    }
                });
                assert_eq!(storage::state(), storage::State::Live);
            })
            .join()
            .unwrap();
        });
        for d in &domains {
            assert_eq!(d.load(SeqCst), 0, "counted out when the thread exited");
            assert_eq!(Arc::strong_count(d), 1, "the thread's references went with it");
        }
    }

    #[test]
    fn counters_of_dropped_domains_are_forgotten_inline_and_beyond() {
        let mut domains = Domains::new();
        let all = counters(INLINE_DOMAINS + 2);
        for d in &all {
            domains.push(d.clone());
        }
        let kept = all[1].clone();
        let spilled = all[INLINE_DOMAINS + 1].clone();
        drop(all);
        domains.forget_dropped();
        let left: Vec<_> = domains.drain().collect();
        assert_eq!(left.len(), 2);
        assert!(left.iter().any(|d| Arc::ptr_eq(d, &kept)) && left.iter().any(|d| Arc::ptr_eq(d, &spilled)));
        // Freed inline places are taken again before the vector.
        let mut domains = Domains::new();
        domains.push(kept.clone());
        assert!(domains.more.is_empty() && domains.contains(&kept));
    }

    /// An exit destructor that runs after ours and waits gets a temporary; one that runs before
    /// ours (std's TLS destructors) still finds the thread's data.
    #[test]
    fn waits_in_exit_destructors_before_and_after_ours() {
        static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        static KEY: AtomicUsize = AtomicUsize::new(0);
        /// Where the thread's own data is.
        static LIVE: AtomicUsize = AtomicUsize::new(0);
        fn data() -> usize {
            with_thread(|td| td as *const ThreadData as usize)
        }
        struct Before;
        impl Drop for Before {
            fn drop(&mut self) {
                let own = data() == LIVE.load(SeqCst);
                SEEN.lock().unwrap().push(format!("before {:?} {own}", storage::state()));
            }
        }
        std::thread_local! { static BEFORE: Before = const { Before }; }
        extern "C" fn after(_: *mut libc::c_void) {
            if storage::state() == storage::State::Live {
                // Our key has the higher index (glibc runs them in order): set the value again,
                // and glibc's next round runs this after ours.
                // SAFETY: a live key; any non-null value arms its destructor.
                unsafe {
                    libc::pthread_setspecific(
                        KEY.load(SeqCst) as libc::pthread_key_t,
                        std::ptr::dangling::<libc::c_void>(),
                    )
                };
                return;
            }
            let temporary = data() != LIVE.load(SeqCst);
            SEEN.lock().unwrap().push(format!("after {:?} {temporary}", storage::state()));
        }
        std::thread::spawn(|| {
            LIVE.store(data(), SeqCst);
            BEFORE.with(|_| ());
            let mut key = 0;
            // SAFETY: a valid place for the key; `after` has the destructor's signature.
            assert_eq!(unsafe { libc::pthread_key_create(&mut key, Some(after)) }, 0);
            KEY.store(key as usize, SeqCst);
            // SAFETY: a live key; any non-null value arms its destructor.
            assert_eq!(unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) }, 0);
        })
        .join()
        .unwrap();
        assert_eq!(*SEEN.lock().unwrap(), ["before Live true", "after Gone true"]);
    }
}
