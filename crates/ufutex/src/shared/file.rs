//! Where the user's shared table segment lives, and how it is created and opened safely: a
//! regular file owned by the user with no group/other permission bits, created `O_EXCL` mode
//! 0600 and opened `O_NOFOLLOW` (anything else is `EACCES`), initialised under an exclusive
//! `flock` with its magic published last (a creator that died before publishing is redone),
//! and mapped only after its header is checked against the file (else `ENOTRECOVERABLE`).

use super::segment::{errno, Header, Layout, Segment, LIVENESS_BASE, MAGIC, NONE, PAGE, VERSION};
use super::SharedError;
use std::ffi::CString;
use std::sync::atomic::Ordering;

impl Segment {
    /// Open (or create) the user's segment and map it.
    pub(crate) fn open() -> Result<Segment, SharedError> {
        with_owned_file(&segment_path()?, |fd, _| Segment::map_locked(fd))
    }

    fn map_locked(fd: libc::c_int) -> Result<Segment, SharedError> {
        let size = file_size(fd)?;
        if let Some(layout) = Segment::usable(fd, size)? {
            return Segment::mmap(fd, layout);
        }
        // Start again from nothing when the segment cannot be used as it is and nobody uses it:
        // its creator died before publishing it (creators hold the flock we now hold until they
        // have), or its header is of another version of ufutex or corrupt, and no process holds
        // a liveness lock in it (every process that ever claimed a slot in it is dead).
        if size != 0 {
            if anyone_alive(fd) {
                return Err(SharedError::NotRecoverable); // in use by someone: never pulled away
            }
            set_len(fd, 0)?;
        }
        // A new segment: make it ours.
        let layout = Layout::from_env();
        set_len(fd, layout.len())?;
        let seg = Segment::mmap(fd, layout)?;
        for b in 0..layout.buckets {
            let b = seg.bucket(b)?;
            b.head.store(NONE, Ordering::Relaxed);
            b.tail.store(NONE, Ordering::Relaxed);
            b.pending.store(NONE, Ordering::Relaxed);
        }
        let h = seg.header();
        h.version.store(VERSION, Ordering::Relaxed);
        h.procs.store(layout.procs, Ordering::Relaxed);
        h.records.store(layout.records, Ordering::Relaxed);
        h.buckets.store(layout.buckets, Ordering::Relaxed);
        h.len.store(layout.len() as u64, Ordering::Relaxed);
        // Release: a process that sees the magic sees the fields (the flock also orders it).
        h.magic.store(MAGIC, Ordering::Release);
        Ok(seg)
    }

    /// The segment's layout, if its header is published and describes exactly this file
    /// (`size` bytes). The header is read, not mapped: a corrupt one never sizes a mapping, and
    /// the creator published it under the flock the caller holds, so the read sees all of it.
    fn usable(fd: libc::c_int, size: usize) -> Result<Option<Layout>, SharedError> {
        if size < PAGE {
            return Ok(None);
        }
        use std::mem::offset_of;
        // `Header` up to its `len`, the last field read here.
        let mut h = [0u8; offset_of!(Header, len) + 8];
        read_at(fd, &mut h, 0)?;
        let word = |at| u32_at(&h, at);
        let layout = Layout {
            procs: word(offset_of!(Header, procs)),
            records: word(offset_of!(Header, records)),
            buckets: word(offset_of!(Header, buckets)),
        };
        let ok = u64_at(&h, offset_of!(Header, magic)) == MAGIC
            && word(offset_of!(Header, version)) == VERSION
            && layout.valid()
            && u64_at(&h, offset_of!(Header, len)) == layout.len() as u64
            && size == layout.len();
        Ok(ok.then_some(layout))
    }

    /// Map `layout.len()` bytes of `fd`.
    fn mmap(fd: libc::c_int, layout: Layout) -> Result<Segment, SharedError> {
        Ok(Segment { base: map_shared(fd, layout.len(), 0)?, layout })
    }
}

/// Whether any open file description holds a liveness lock in the segment file `fd` (whose
/// own description holds none): a live process that claimed a slot. If the probe itself fails,
/// say yes (never pull a segment from under someone).
fn anyone_alive(fd: libc::c_int) -> bool {
    // SAFETY: an all-zero flock is a valid value of the plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = LIVENESS_BASE;
    fl.l_len = 0; // to the end of the file's offsets: every slot of any layout
                  // SAFETY: `fl` is a valid flock the kernel overwrites with a conflicting lock, if any.
    let r = unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut fl) };
    r != 0 || fl.l_type != libc::F_UNLCK as libc::c_short
}

/// Open (or create, 0600 `O_EXCL`) the user's file at `path` without following a symlink,
/// check it is safely owned (`EACCES`), and run `f` on it under an exclusive `flock` (creators
/// and openers are serialised: a creator publishes its header before anyone looks). The
/// descriptor is closed afterwards (mappings outlive it). `f` also gets the file's status as
/// checked, before the flock: its device and inode are the file's for good, its size may have
/// changed since (a creator held the flock).
pub(crate) fn with_owned_file<T>(
    path: &str,
    f: impl FnOnce(libc::c_int, &libc::stat) -> Result<T, SharedError>,
) -> Result<T, SharedError> {
    let cpath = CString::new(path).map_err(|_| SharedError::Invalid)?;
    let flags = libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // The file is there but once: open it, and create it only if it is not (a failed call costs
    // a path walk). A creator that wins the race between our two calls made it: open that.
    // SAFETY: `cpath` is a NUL-terminated string that outlives the calls.
    let mut fd = unsafe { libc::open(cpath.as_ptr(), flags) };
    if fd < 0 && errno() == libc::ENOENT {
        // SAFETY: as above.
        fd = unsafe { libc::open(cpath.as_ptr(), flags | libc::O_CREAT | libc::O_EXCL, 0o600) };
        if fd < 0 && errno() == libc::EEXIST {
            // SAFETY: as above.
            fd = unsafe { libc::open(cpath.as_ptr(), flags) };
        }
    }
    if fd < 0 {
        return Err(open_error(errno()));
    }
    let r = check_owner(fd).and_then(|st| {
        // SAFETY: `fd` is open; flock has no memory arguments.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            return Err(SharedError::from_errno(errno()));
        }
        let r = f(fd, &st);
        // SAFETY: as above.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        r
    });
    // SAFETY: `fd` is ours and open; nothing else uses it.
    unsafe { libc::close(fd) };
    r
}

/// Where the user's segment lives: `$UFUTEX_SHARED_DIR/table` if set (tests, deployments that
/// choose), else `$XDG_RUNTIME_DIR/ufutex-table`, else `/dev/shm/ufutex-<uid>/table` (the
/// directory created 0700 and checked like the file).
pub(crate) fn segment_path() -> Result<String, SharedError> {
    user_file("table")
}

/// The path of the user's file `stem` beside the shared table (see [`segment_path`]).
pub(crate) fn user_file(stem: &str) -> Result<String, SharedError> {
    if let Some(d) = std::env::var_os("UFUTEX_SHARED_DIR").filter(|d| !d.is_empty()) {
        return Ok(format!("{}/{stem}", d.to_string_lossy()));
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Ok(format!("{}/ufutex-{stem}", d.to_string_lossy()));
    }
    // SAFETY: geteuid has no arguments and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = format!("/dev/shm/ufutex-{uid}");
    let cdir = CString::new(dir.clone()).map_err(|_| SharedError::Invalid)?;
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `cdir` is NUL-terminated and outlives the calls; `st` is a valid out-buffer;
    // lstat does not follow a symlink planted in /dev/shm. The directory is looked at first and
    // made only if it is not there (each failed call costs a path walk: ~3 µs in a new process).
    let mut looked = unsafe { libc::lstat(cdir.as_ptr(), &mut st) };
    if looked != 0 && errno() == libc::ENOENT {
        // SAFETY: as above.
        if unsafe { libc::mkdir(cdir.as_ptr(), 0o700) } != 0 && errno() != libc::EEXIST {
            return Err(open_error(errno()));
        }
        // SAFETY: as above.
        looked = unsafe { libc::lstat(cdir.as_ptr(), &mut st) };
    }
    if looked != 0 {
        return Err(open_error(errno()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != uid || st.st_mode & 0o077 != 0 {
        return Err(SharedError::Access);
    }
    Ok(format!("{dir}/{stem}"))
}

/// The file must be a regular file owned by us with no group/other permission bits: its
/// status if it is.
fn check_owner(fd: libc::c_int) -> Result<libc::stat, SharedError> {
    let st = status(fd)?;
    // SAFETY: geteuid has no arguments and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != uid || st.st_mode & 0o077 != 0 {
        return Err(SharedError::Access);
    }
    Ok(st)
}

/// Set the size of the open file `fd` to `len` bytes (growing adds zeroes).
pub(crate) fn set_len(fd: libc::c_int, len: usize) -> Result<(), SharedError> {
    let len = libc::off_t::try_from(len).map_err(|_| SharedError::NoMemory)?;
    // SAFETY: `fd` is open for writing (the callers opened it so); ftruncate has no memory
    // arguments.
    if unsafe { libc::ftruncate(fd, len) } != 0 {
        return Err(SharedError::from_errno(errno()));
    }
    Ok(())
}

/// Make the open file `fd` `len` bytes of zeroes: truncated to 0 first, so that nothing of what
/// it held (a dead creator's half-written header, another namespace's ledger) is left.
pub(crate) fn set_len_zeroed(fd: libc::c_int, len: usize) -> Result<(), SharedError> {
    set_len(fd, 0)?;
    set_len(fd, len)
}

/// A new shared read-write mapping of `len` bytes of the open file `fd` from `off` (a multiple
/// of the page size). The caller keeps it for as long as it holds references into it (the
/// segment and the namespaces: for good).
pub(crate) fn map_shared(fd: libc::c_int, len: usize, off: usize) -> Result<*mut u8, SharedError> {
    let off = libc::off_t::try_from(off).map_err(|_| SharedError::NoMemory)?;
    // SAFETY: a fresh mapping at an address the kernel chooses; no existing memory is affected.
    let p =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, off) };
    if p == libc::MAP_FAILED {
        return Err(match errno() {
            libc::ENOMEM => SharedError::NoMemory,
            _ => SharedError::Fault,
        });
    }
    Ok(p.cast())
}

/// Read `buf.len()` bytes of the open file `fd` at `off` (short at its end: the rest zero).
pub(crate) fn read_at(fd: libc::c_int, buf: &mut [u8], off: usize) -> Result<(), SharedError> {
    let off = libc::off_t::try_from(off).map_err(|_| SharedError::Invalid)?;
    buf.fill(0);
    // SAFETY: `buf` is writable for its length for the call; `fd` is open.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), off) };
    if n < 0 {
        return Err(SharedError::from_errno(errno()));
    }
    Ok(())
}

/// The native-endian `u32` at byte `at` of `b` (a header read with [`read_at`]).
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The native-endian `u64` at byte `at` of `b` (a header read with [`read_at`]).
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

pub(crate) fn file_size(fd: libc::c_int) -> Result<usize, SharedError> {
    Ok(status(fd)?.st_size as usize)
}

/// The open file `fd`'s status (`fstat`).
pub(crate) fn status(fd: libc::c_int) -> Result<libc::stat, SharedError> {
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `st` is a valid out-buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(SharedError::from_errno(errno()));
    }
    Ok(st)
}

/// An errno from opening the segment or its directory.
fn open_error(e: i32) -> SharedError {
    match e {
        // A symlink where the segment should be (O_NOFOLLOW), something else than a file, or
        // no permission.
        libc::ELOOP | libc::EACCES | libc::EPERM | libc::EISDIR => SharedError::Access,
        // The segment cannot be created: no memory or space, a directory that is missing or
        // read-only, no file descriptor left.
        _ => SharedError::NoMemory,
    }
}
