//! Reference-counted lifetime (Windows handles, POSIX unlink + last close): a counted object
//! lives while some process holds a handle to it, and dies — removed as [`Namespace::remove`]
//! removes — when its last holder lets go, whether by dropping its last handle or by dying.
//!
//! ```text
//!   object slot:  holders = the processes that hold it (not handles: those are counted here)
//!   ledger file:  ns-<name>+<nonce>.<n>, one per process slot n of the shared table:
//!                 owner (that process), len, entries [(object slot, generation, state)]
//! ```
//!
//! A process counts itself in once per object, in an entry of its own ledger, and counts its
//! handles in process memory: a second open or a clone of a handle writes nothing shared.
//! Taking or giving back a process's reference happens under the namespace's changers' lock
//! (`table.rs`), with an intent in the header (the entry, and the holders before), so a changer
//! killed half-way is finished by whoever takes the lock over: only it changed the holders, so
//! they are the count before or the count after, and that tells which.
//!
//! A process that dies holding references gives them back through its ledger: its successor in
//! the shared table's slot reaps the ledger before it adopts it, and [`Namespace::open`] and
//! [`Namespace::reap`] reap the ledgers of every dead process. A ledger names its namespace by
//! the namespace's random nonce, so a ledger of a namespace that was unlinked (and a new one
//! made under the name) is never read against the new one.
//!
//! A forked child inherits its parent's handles but not its references: they do not keep the
//! object alive, and dropping them gives nothing back (the parent's stay counted). Nor does it
//! use its copy of the parent's books of them, which a fork may have caught in the middle of a
//! change by another thread: it makes its own at its first counted call ([`Books`]).

use super::table::{Entry, Found, Key, Ledgers, Open, Ref, Table, TableError, E_FREE};
use super::{wake_all, NamedError, Namespace};
use crate::shared::lock::{Life, Liveness, Owner};
use crate::shared::process::Proc;
use crate::shared::{self, SharedError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Entries of a ledger: the most counted objects one process holds in one namespace at once
/// (handles to one object count once). Past it a counted open fails with
/// [`NamedError::Full`]; plain objects do not count.
///
/// # Examples
/// ```
/// assert_eq!(ufutex::named::HELD_MAX, 65536);
/// ```
pub const HELD_MAX: usize = 1 << 16;
const PAGE: usize = 4096;
const LEDGER_MAGIC: u64 = 0x5546_5554_584c_4731; // "UFUTXLG1"
const LEN: usize = PAGE + HELD_MAX * std::mem::size_of::<Entry>();

/// A ledger file's first page.
#[repr(C)]
struct LedgerHeader {
    magic: AtomicU64,
    /// The namespace's nonce.
    nonce: AtomicU64,
    /// Its process (an owner word of the shared table), 0 none.
    owner: AtomicU64,
    /// Entries in use are below this.
    len: AtomicU32,
}

/// One mapped ledger: its header and entries (a leaked mapping, never unmapped).
#[derive(Clone, Copy)]
struct Ledger {
    header: &'static LedgerHeader,
    entries: &'static [Entry],
}

/// This process's ledger in the namespace, and the handles it has.
struct Mine {
    ledger: Ledger,
    number: u32,
    free: Vec<u32>,
    /// (object slot, generation) → (entry, handles).
    held: HashMap<(u32, u32), (u32, u64)>,
}

/// One process's books of a namespace's references: the ledgers it mapped, and its own
/// ledger and handles. Each process makes its own at its first counted call: a forked child
/// copied its parent's, maybe in the middle of a change (a lock held by a thread the child does
/// not have, a map half rebuilt), so it leaves them alone, never locked, read or freed. The
/// parent's handles hold nothing in the child anyway, and its mappings are made again.
struct Books {
    /// The process (its owner in the shared table) whose books these are.
    owner: Owner,
    mapped: Mutex<HashMap<u32, Ledger>>,
    mine: Mutex<Option<Mine>>,
}

/// A namespace's references, as this process keeps them.
pub(crate) struct Holders {
    /// Ledger files' paths, less the number.
    prefix: String,
    nonce: u64,
    /// This process's [`Books`] (null before its first counted call), leaked; in a forked
    /// child until it makes its own, its parent's.
    books: AtomicPtr<Books>,
}

impl Holders {
    pub(crate) fn new(prefix: String, nonce: u64) -> Holders {
        Holders { prefix, nonce, books: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// The books of the process `p`, made the first time. Threads that race to make them each
    /// make a set; the first published is kept and the others dropped (never used: no thread
    /// waits for another here, so none waits for a thread a fork left behind).
    fn books(&self, p: &Proc) -> &Books {
        loop {
            let b = self.books.load(Ordering::Acquire);
            // SAFETY: a published `Books` is leaked, never freed (in a child, the parent's too);
            // only its `owner`, set before it was published, is read before it is known ours.
            if let Some(b) = unsafe { b.as_ref() }.filter(|b| b.owner == p.me) {
                return b;
            }
            let fresh = Box::into_raw(Box::new(Books {
                owner: p.me,
                mapped: Mutex::new(HashMap::new()),
                mine: Mutex::new(None),
            }));
            // Release: a thread that loads the pointer sees the books behind it.
            if self.books.compare_exchange(b, fresh, Ordering::Release, Ordering::Relaxed).is_err() {
                // SAFETY: made above and never published: nobody else knows of it.
                drop(unsafe { Box::from_raw(fresh) });
            }
        }
    }

    /// Ledger `n`, mapped (and made, if `make`, when there is none) by the process `p`.
    fn ledger(&self, p: &Proc, n: u32, make: bool) -> Option<Ledger> {
        let mut m = self.books(p).mapped.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = m.get(&n) {
            return Some(*l);
        }
        let path = format!("{}{n}", self.prefix);
        if !make && std::fs::symlink_metadata(&path).is_err() {
            return None;
        }
        let l = shared::file::with_owned_file(&path, |fd, _| map_ledger(fd, self.nonce)).ok()?;
        m.insert(n, l);
        Some(l)
    }
}

impl Ledgers for Holders {
    fn entries(&self, ledger: u32) -> Option<&[Entry]> {
        let p = shared::process::proc().ok()?;
        self.ledger(p, ledger, false).map(|l| l.entries)
    }
}

/// Map a ledger file (under its flock): size and stamp it if it is new or of another namespace.
fn map_ledger(fd: libc::c_int, nonce: u64) -> Result<Ledger, SharedError> {
    if shared::file::file_size(fd)? != LEN {
        shared::file::set_len_zeroed(fd, LEN)?;
    }
    let p = shared::file::map_shared(fd, LEN, 0)?;
    // SAFETY: the mapping is LEN bytes, page-aligned: a header page of atomics, then HELD_MAX
    // entries of atomics (any bit pattern is valid); it is never unmapped.
    let l = unsafe {
        Ledger {
            header: &*(p as *const LedgerHeader),
            entries: std::slice::from_raw_parts((p as *const u8).add(PAGE) as *const Entry, HELD_MAX),
        }
    };
    if l.header.magic.load(Ordering::Acquire) != LEDGER_MAGIC || l.header.nonce.load(Ordering::Relaxed) != nonce {
        // A new ledger, or one of a namespace that was unlinked: nothing in it is ours to read.
        for e in l.entries.iter().take(l.header.len.load(Ordering::Relaxed).min(HELD_MAX as u32) as usize) {
            e.state.store(E_FREE, Ordering::Relaxed);
        }
        l.header.owner.store(0, Ordering::Relaxed);
        l.header.len.store(0, Ordering::Relaxed);
        l.header.nonce.store(nonce, Ordering::Relaxed);
        l.header.magic.store(LEDGER_MAGIC, Ordering::Release);
    }
    Ok(l)
}

/// Give back every reference of ledger `n` (its owner dead) under the changers' lock, and free
/// it. The caller holds the lock.
fn reap_locked(t: &Table<'_>, n: u32, l: Ledger) {
    let len = l.header.len.load(Ordering::Relaxed).min(HELD_MAX as u32);
    for index in 0..len {
        if l.entries[index as usize].state.load(Ordering::Relaxed) != E_FREE {
            t.drop_ref(Ref { ledger: n, entries: l.entries, index }, &wake_all);
        }
    }
    l.header.len.store(0, Ordering::Relaxed);
    l.header.owner.store(0, Ordering::Relaxed);
}

impl Namespace {
    /// This process's ledger, adopted the first time (after reaping what the slot's dead
    /// previous owner left in it).
    fn mine<'m>(&self, p: &Proc, m: &'m mut Option<Mine>) -> Result<&'m mut Mine, NamedError> {
        if m.is_some() {
            return Ok(m.as_mut().expect("checked"));
        }
        let n = p.me.slot;
        // Before the ledger exists: a reaper that reads 0 here finds no ledger but a live one's.
        self.header.ledgers.store(1, Ordering::Release);
        let ledger = self.holders.ledger(p, n, true).ok_or(NamedError::Shared(SharedError::Access))?;
        let t = self.table();
        t.locked(p.me, p, &wake_all, || {
            if ledger.header.owner.load(Ordering::Relaxed) != p.me.word() {
                reap_locked(&t, n, ledger);
                ledger.header.owner.store(p.me.word(), Ordering::Relaxed);
            }
        })?;
        Ok(m.insert(Mine { ledger, number: n, free: Vec::new(), held: HashMap::new() }))
    }

    /// Open or create the counted object `key` (`init`: kind with [`super::table::COUNTED`],
    /// word, aux) and take a handle to it: what it is, and whether it existed.
    #[inline(never)]
    pub(crate) fn hold(&self, key: Key<'_>, init: (u32, u32, u32), how: Open) -> Result<(Found, bool), NamedError> {
        let p = shared::process::proc()?;
        let mut guard = self.holders.books(p).mine.lock().unwrap_or_else(|e| e.into_inner());
        let me = self.mine(p, &mut guard)?;
        // An object this process holds already: one more handle, nothing shared written.
        if let Some(f) = self.table().lookup(key).filter(|f| f.kind == init.0) {
            if let Some((_, handles)) = me.held.get_mut(&(f.slot, f.gen)) {
                if how == Open::CreateNew {
                    return Err(NamedError::Exists);
                }
                *handles += 1;
                return Ok((f, true));
            }
        }
        let index = match me.free.pop() {
            Some(i) => i,
            None => {
                let len = me.ledger.header.len.load(Ordering::Relaxed);
                if len as usize >= HELD_MAX {
                    return Err(NamedError::Full);
                }
                len
            }
        };
        // The entry is below `len` before the lock's holder writes it (a reaper reads up to it).
        me.ledger.header.len.fetch_max(index + 1, Ordering::Relaxed);
        let r = Ref { ledger: me.number, entries: me.ledger.entries, index };
        let t = self.table();
        // (Nothing else of this process takes a reference meanwhile: we hold `mine`. So an
        // object found under the lock is one we do not hold yet.)
        let got = t.locked(p.me, p, &wake_all, || {
            let (f, existed) = t.create_locked(key, init, how, Some(r), p)?;
            if existed {
                t.add_ref(r, f);
            }
            Ok::<_, TableError>((f, existed))
        });
        match got.map_err(NamedError::from).and_then(|r| r.map_err(NamedError::from)) {
            Ok((f, existed)) => {
                me.held.insert((f.slot, f.gen), (index, 1));
                Ok((f, existed))
            }
            Err(e) => {
                me.free.push(index);
                Err(e)
            }
        }
    }

    /// One more handle to the counted object `(slot, gen)` this process holds (a clone).
    pub(crate) fn hold_again(&self, slot: u32, gen: u32) {
        let Ok(p) = shared::process::proc() else { return };
        let mut guard = self.holders.books(p).mine.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(me) = guard.as_mut() {
            if let Some((_, h)) = me.held.get_mut(&(slot, gen)) {
                *h += 1;
            }
        }
    }

    /// Let go of one handle to the counted object `(slot, gen)`: with this process's last, its
    /// reference is given back, and with the last holder's, the object dies. Whether this
    /// process held a handle to it.
    pub(crate) fn let_go(&self, slot: u32, gen: u32) -> Result<bool, NamedError> {
        let p = shared::process::proc()?;
        let mut guard = self.holders.books(p).mine.lock().unwrap_or_else(|e| e.into_inner());
        // (In a forked child the inherited handles hold nothing: its books are its own.)
        let Some(me) = guard.as_mut() else { return Ok(false) };
        let Some((index, handles)) = me.held.get_mut(&(slot, gen)) else { return Ok(false) };
        *handles -= 1;
        if *handles > 0 {
            return Ok(true);
        }
        let index = *index;
        me.held.remove(&(slot, gen));
        let r = Ref { ledger: me.number, entries: me.ledger.entries, index };
        let t = self.table();
        t.locked(p.me, p, &wake_all, || t.drop_ref(r, &wake_all))?;
        me.free.push(index);
        Ok(true)
    }

    /// Give back the references of every process that died holding some (its ledger's), so
    /// that objects they alone held die now. [`Namespace::open`] does this too; a process's
    /// successor in the shared table does it for that ledger. How many ledgers were reaped.
    ///
    /// Never reaps a live process's references (the shared table's liveness lock says who
    /// lives, safe against PID reuse).
    ///
    /// # Errors
    /// `Shared(_)` if the shared table or the user's directory cannot be used.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-reap-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let (ev, _) = ns.counted().event(1, Open::CreateNew, true, false).unwrap();
    /// assert_eq!(ns.reap(), Ok(0)); // only this process held one, and it lives
    /// ev.set().unwrap();
    /// drop(ev);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn reap(&self) -> Result<usize, NamedError> {
        if self.header.ledgers.load(Ordering::Acquire) == 0 {
            return Ok(0); // no process ever held a counted object here
        }
        let (dir, stem) = self.holders.prefix.rsplit_once('/').ok_or(NamedError::Invalid)?;
        let entries = std::fs::read_dir(dir).map_err(|_| NamedError::Shared(SharedError::Access))?;
        let numbers: Vec<u32> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|f| f.strip_prefix(stem)?.parse().ok())
            .collect();
        let mut reaped = 0;
        let p = shared::process::proc()?;
        for n in numbers {
            let Some(l) = self.holders.ledger(p, n, false) else { continue };
            let owner = l.header.owner.load(Ordering::Relaxed);
            if owner == 0 {
                continue;
            }
            if Owner::of(owner) == p.me || p.life(Owner::of(owner)) == Life::Alive {
                continue;
            }
            let t = self.table();
            t.locked(p.me, p, &wake_all, || {
                if l.header.owner.load(Ordering::Relaxed) == owner {
                    reap_locked(&t, n, l);
                    reaped += 1;
                }
            })?;
        }
        Ok(reaped)
    }
}

/// A counted object's handle: it keeps the object alive while it lives (in this process: the
/// object dies when every process that held it dropped its last handle or died). Use it as the
/// handle it holds (`Deref`); clone it for another handle. It does not stop
/// [`Namespace::remove`], which removes the object now; a forked child's copy holds nothing.
///
/// # Examples
/// ```
/// use ufutex::named::{NamedError, Namespace, Open};
/// let name = format!("doc-held-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_2000 + std::process::id() as u64;
/// let (sem, _) = ns.counted().semaphore(key, Open::CreateNew, 0).unwrap();
/// let other = sem.clone();
/// drop(sem);
/// other.post(2).unwrap(); // still alive: `other` holds it
/// ns.remove(key).unwrap(); // removed now, held or not
/// assert_eq!(other.value(), Err(NamedError::Removed));
/// drop(other);
/// Namespace::unlink(&name).unwrap();
/// ```
pub struct Held<'ns, T: Handle<'ns>> {
    handle: T,
    ns: &'ns Namespace,
}

/// What a counted object's handle can be: [`super::Semaphore`], [`super::Event`],
/// [`super::Mutex`], [`super::Word`]. Sealed: no other type implements it.
///
/// # Examples
/// ```
/// use ufutex::named::{Handle, Held, Namespace, Open};
/// // Any counted handle's plain handle (valid while the object lives).
/// fn plain<'ns, T: Handle<'ns>>(h: &Held<'ns, T>) -> T {
///     **h
/// }
/// let name = format!("doc-handle-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_2100 + std::process::id() as u64;
/// let (m, _) = ns.counted().mutex(key, Open::CreateNew).unwrap();
/// plain(&m).lock(None).unwrap();
/// m.unlock().unwrap();
/// drop(m);
/// Namespace::unlink(&name).unwrap();
/// ```
pub trait Handle<'ns>: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn id(&self) -> (u32, u32);
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

impl<'ns, T: Handle<'ns>> Held<'ns, T> {
    pub(crate) fn new(handle: T, ns: &'ns Namespace) -> Held<'ns, T> {
        Held { handle, ns }
    }

    /// Let go of the handle now, reporting what dropping it would ignore. With this process's
    /// last handle its reference is given back; with the last holder's, the object dies.
    ///
    /// # Errors
    /// `Shared(_)` if the shared table could not be used to give the reference back (it stays
    /// counted until this process dies and its ledger is reaped).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-held-close-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_2200 + std::process::id() as u64;
    /// let (ev, _) = ns.counted().event(key, Open::CreateNew, true, true).unwrap();
    /// ev.close().unwrap(); // the last handle: it dies
    /// let gone = ns.counted().event(key, Open::Existing, true, true).unwrap_err();
    /// assert_eq!(gone, NamedError::NotFound);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn close(self) -> Result<(), NamedError> {
        let (slot, gen) = self.handle.id();
        let ns = self.ns;
        std::mem::forget(self);
        ns.let_go(slot, gen).map(drop)
    }
}

impl<'ns, T: Handle<'ns>> std::ops::Deref for Held<'ns, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.handle
    }
}

impl<'ns, T: Handle<'ns>> Clone for Held<'ns, T> {
    fn clone(&self) -> Self {
        let (slot, gen) = self.handle.id();
        self.ns.hold_again(slot, gen);
        Held { handle: self.handle, ns: self.ns }
    }
}

impl<'ns, T: Handle<'ns>> Drop for Held<'ns, T> {
    fn drop(&mut self) {
        let (slot, gen) = self.handle.id();
        // (A failure here leaves this process's reference counted until it dies and its ledger
        // is reaped; `close` reports it.)
        let _ = self.ns.let_go(slot, gen);
    }
}

impl<'ns, T: Handle<'ns> + std::fmt::Debug> std::fmt::Debug for Held<'ns, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Held").field(&self.handle).finish()
    }
}
