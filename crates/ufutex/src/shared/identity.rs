//! The identity of a process-shared word: what object backs its page, found afresh for each
//! operation that queues or dequeues (never cached: an address can be unmapped and something
//! else mapped there between two operations, and nothing would tell us; the exception is a
//! mapping promised to stay — the library's own, or one the user registered: `known.rs`).
//!
//! The kernel's rule (`get_futex_key`, see `shared/notes/shared-futex.md` §1) copied with what
//! userspace can see through `PROCMAP_QUERY` (Linux ≥ 6.11; the text of `/proc/self/maps`
//! before that):
//! - a `MAP_SHARED` mapping (memfd, `shm_open`, a file, `MAP_SHARED|MAP_ANONYMOUS`, SysV): the
//!   object — device, inode and the byte offset in it — so two mappings at different addresses,
//!   in any processes, meet. SysV segments report their shmid as the inode, which can equal a
//!   memfd's inode on the same internal mount: they are a class of their own (name `/SYSV…`);
//! - a read-only `MAP_PRIVATE` file mapping: the file, as the kernel keys an un-COWed page (a
//!   page that was written while writable and then made read-only keys by process in the kernel;
//!   we cannot see that, and key it by the file);
//! - any other private memory (heap, stack, writable `MAP_PRIVATE`): the process and address
//!   ([`Class::Local`]), so it never meets another process nor a private futex;
//! - read-only private anonymous memory: `Fault`, as the kernel's.

use super::SharedError;
use crate::once::RacyWord;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// What kind of object a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub(crate) enum Class {
    /// A file or shmem object (memfd, `shm_open`, shared anonymous, a regular file).
    Object = 1,
    /// A SysV shared memory segment (its inode number is its shmid).
    SysV = 2,
    /// Process-private memory: `dev` is the process slot, `ino` its generation, `off` the address.
    Local = 3,
}

/// A shared word's key: equal for every mapping of the same byte of the same object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SharedKey {
    pub(crate) class: Class,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) off: u64,
}

impl SharedKey {
    /// The bucket of a table of `buckets` (a power of two) buckets.
    pub(crate) fn bucket(&self, buckets: u32) -> u32 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut h = (self.class as u64).wrapping_mul(K);
        for w in [self.dev, self.ino, self.off] {
            h = (h ^ w).wrapping_mul(K);
            h ^= h >> 29;
        }
        (h >> 32) as u32 & (buckets - 1)
    }
}

/// What the kernel reports about the mapping that covers an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vma {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) flags: u64,
    pub(crate) offset: u64,
    pub(crate) inode: u64,
    pub(crate) dev: u64,
    pub(crate) sysv: bool,
}

const VMA_WRITABLE: u64 = 0x02;
const VMA_SHARED: u64 = 0x08;

/// The key of the word at `addr`, from the mapping that covers it; `local` names this process
/// (slot, generation) for process-private memory.
pub(crate) fn classify(addr: usize, vma: &Vma, local: (u32, u32)) -> Result<SharedKey, SharedError> {
    let object = |class| SharedKey { class, dev: vma.dev, ino: vma.inode, off: vma.offset + (addr as u64 - vma.start) };
    if vma.flags & VMA_SHARED != 0 {
        return Ok(object(if vma.sysv { Class::SysV } else { Class::Object }));
    }
    if vma.flags & VMA_WRITABLE == 0 {
        // The kernel's read-only rules: an un-COWed file page keys by the file; a read-only
        // anonymous page is EFAULT ("will never change").
        return if vma.inode != 0 { Ok(object(Class::Object)) } else { Err(SharedError::Fault) };
    }
    Ok(SharedKey { class: Class::Local, dev: u64::from(local.0), ino: u64::from(local.1), off: addr as u64 })
}

/// `struct procmap_query` (include/uapi/linux/fs.h).
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

const PROCMAP_QUERY: libc::c_ulong = 0xC068_6611; // _IOWR('f', 17, 104 bytes)
const _: () = assert!(std::mem::size_of::<ProcmapQuery>() == 104);

/// Ask the kernel about the mapping covering `addr` through `maps_fd` (this process's
/// `/proc/self/maps`, opened after any fork): `PROCMAP_QUERY`, or the maps text if the kernel
/// predates it.
///
/// The mapping's name is asked for only where it can change the key ([`needs_name`]): making
/// it is a third of the query's cost (0.66 µs without, 0.97–1.14 µs with, on the project's
/// hosts). So the query goes without it first, and again with it for a shared mapping on a
/// mount where a SysV segment may live; an address in one of the last ranges that needed the
/// name (a hint, [`NAMED`]) is asked with it at once. Either way the answer is the kernel's for the
/// query that produced it.
pub(crate) fn query(maps_fd: libc::c_int, addr: usize) -> Result<Vma, SharedError> {
    if NAMED.covers(addr) {
        return ask(maps_fd, addr, true).map(|(vma, _)| vma);
    }
    let (vma, page_size) = ask(maps_fd, addr, false)?;
    if !needs_name(&vma, page_size, shm_dev()) {
        return Ok(vma);
    }
    // Remembered here only, where the hint missed: a hit writes nothing shared.
    let (vma, _) = ask(maps_fd, addr, true)?;
    NAMED.set(vma.start, vma.end);
    Ok(vma)
}

/// One `PROCMAP_QUERY` for `addr`, with the mapping's name (`named`; only to tell a SysV
/// segment, `Vma::sysv`) or without it (`sysv` is then false): the mapping and its page size.
fn ask(maps_fd: libc::c_int, addr: usize, named: bool) -> Result<(Vma, u64), SharedError> {
    // Not zeroed: the kernel writes the name, and only its bytes are read (zeroing 4 KiB cost
    // more than the rest of our side of the query, and wrote a whole page of stack).
    let mut name = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut q = ProcmapQuery {
        size: std::mem::size_of::<ProcmapQuery>() as u64,
        query_addr: addr as u64,
        ..Default::default()
    };
    if named {
        q.vma_name_size = name.len() as u32;
        q.vma_name_addr = name.as_mut_ptr() as u64;
    }
    // SAFETY: `q` is a valid procmap_query; with `named`, its name buffer (`name`, 4096 bytes)
    // outlives the call and the kernel writes at most `vma_name_size` bytes of it; without, no
    // buffer is named (size and address 0) and the kernel writes only `q`.
    let r = unsafe { libc::ioctl(maps_fd, PROCMAP_QUERY as _, &mut q as *mut ProcmapQuery) };
    if r != 0 {
        return match super::segment::errno() {
            libc::ENOENT => Err(SharedError::Fault),
            libc::ENOTTY | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS => query_text(addr).map(|v| (v, 0)),
            e => Err(SharedError::from_errno(e)),
        };
    }
    let len = if named { (q.vma_name_size as usize).min(name.len()) } else { 0 };
    // SAFETY: on success the kernel has written the mapping's name, its NUL included, to the
    // first `vma_name_size` bytes of `name` (0 when the mapping has none; never more than the
    // buffer, or the call fails with ENAMETOOLONG): those bytes are initialised. Without
    // `named`, `len` is 0.
    let written = unsafe { std::slice::from_raw_parts(name.as_ptr().cast::<u8>(), len) };
    let vma = Vma {
        start: q.vma_start,
        end: q.vma_end,
        flags: q.vma_flags,
        offset: q.vma_offset,
        inode: q.inode,
        dev: device(q.dev_major.into(), q.dev_minor.into()),
        sysv: written.starts_with(b"/SYSV"),
    };
    Ok((vma, q.vma_page_size))
}

/// A device number as [`Vma::dev`] holds it, whichever source gave it (the query, `fstat`, the
/// maps text): they must agree, or [`needs_name`] would not find the shm mount.
fn device(major: u64, minor: u64) -> u64 {
    (major << 32) | minor
}

/// Whether a mapping's key depends on its name: a SysV segment (always a shared mapping) lives
/// on the kernel's internal shm mount, next to memfds and shared anonymous memory whose inode
/// numbers can equal a segment's id, or, with `SHM_HUGETLB`, on an internal hugetlbfs mount
/// next to `MFD_HUGETLB` memfds — whose pages are bigger than the base page. `page_size`: the
/// mapping's (0 when unknown: the maps text, which has the name anyway); `shm`: the shm mount's
/// device, `None` when it could not be learnt (then every shared mapping needs the name).
fn needs_name(vma: &Vma, page_size: u64, shm: Option<u64>) -> bool {
    if vma.flags & VMA_SHARED == 0 || page_size == 0 {
        return false;
    }
    page_size != base_page() || shm.is_none_or(|d| d == vma.dev)
}

/// `statfs`'s `f_type` of tmpfs (and of the kernel's internal shm mount).
#[cfg(not(ufutex_loom))]
pub(crate) const TMPFS_MAGIC: libc::c_long = 0x0102_1994;

/// The key of byte `off` of the file `fd` as a `MAP_SHARED` mapping of it would have it
/// ([`query`] and [`classify`]), where the file alone tells it: on tmpfs. Its `fstat` gives
/// the superblock's device and the inode's number (`generic_fillattr`), which are what
/// `PROCMAP_QUERY` reports for a mapping of the file (`i_sb->s_dev`, `i_ino`), and a file
/// opened by path is never a SysV segment (those need their name: [`needs_name`]). Elsewhere
/// `None`, and the caller asks the kernel: btrfs reports a subvolume's device through `fstat`
/// and the filesystem's through the query, overlayfs the file it shows against the file it
/// maps. `known`: the file's `fstat`, if the caller made it already (its device and inode,
/// and whether it is a regular file, never change for an open file).
#[cfg(not(ufutex_loom))]
pub(crate) fn file_key(fd: libc::c_int, known: Option<&libc::stat>, off: u64) -> Option<SharedKey> {
    // SAFETY: an all-zero statfs is a valid out-buffer.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open (the caller's); `fs` is a valid out-buffer.
    if unsafe { libc::fstatfs(fd, &mut fs) } != 0 || fs.f_type as libc::c_long != TMPFS_MAGIC {
        return None;
    }
    let asked;
    let st = match known {
        Some(st) => st,
        None => {
            asked = super::file::status(fd).ok()?;
            &asked
        }
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let dev = device(libc::major(st.st_dev).into(), libc::minor(st.st_dev).into());
    Some(SharedKey { class: Class::Object, dev, ino: st.st_ino, off })
}

/// The base page size.
fn base_page() -> u64 {
    static PAGE: RacyWord = RacyWord::new();
    PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(page).ok().filter(|&p| p > 0).unwrap_or(4096)
    })
}

/// The device of the kernel's internal shm mount (where memfds, shared anonymous memory and
/// SysV segments live), in [`Vma::dev`]'s encoding: learnt once, from a memfd's `fstat`. `None`
/// if that failed (no `memfd_create`, a seccomp filter): every shared mapping is then asked
/// with its name, as before this was learnt.
fn shm_dev() -> Option<u64> {
    // (Devices are numbered far below 2^63.)
    static DEV: RacyWord = RacyWord::new();
    DEV.get_or_make_option(learn_shm_dev, |_| {})
}

/// [`shm_dev`], learnt now.
fn learn_shm_dev() -> Option<u64> {
    // SAFETY: a NUL-terminated literal name; the fd is ours, closed below.
    let fd = unsafe { libc::memfd_create(c"ufutex-shm-dev".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is open; `st` is a buffer of the size fstat writes.
    let ok = unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0;
    // SAFETY: `fd` is ours and not used after this.
    unsafe { libc::close(fd) };
    // SAFETY: fstat succeeded, so it wrote the whole struct.
    let dev = ok.then(|| unsafe { st.assume_init() }.st_dev)?;
    Some(device(libc::major(dev).into(), libc::minor(dev).into()))
}

/// The last few mappings whose query needed the name ([`query`]), so that a process working on
/// several memfd or shared anonymous regions does not ask twice for each: a query in one of them
/// asks for the name at once. Only a hint: a stale or torn range costs one query more or one name
/// made for nothing, never a wrong answer.
struct Named {
    ranges: [(AtomicU64, AtomicU64); NAMED_RANGES],
    /// The next entry [`Named::set`] replaces (round robin).
    next: AtomicUsize,
}

const NAMED_RANGES: usize = 8;

static NAMED: Named = Named::new();

impl Named {
    const fn new() -> Named {
        Named { ranges: [const { (AtomicU64::new(0), AtomicU64::new(0)) }; NAMED_RANGES], next: AtomicUsize::new(0) }
    }

    fn covers(&self, addr: usize) -> bool {
        // Relaxed: a hint (see the type).
        let addr = addr as u64;
        self.ranges
            .iter()
            .any(|(start, end)| start.load(Ordering::Relaxed) <= addr && addr < end.load(Ordering::Relaxed))
    }

    fn set(&self, start: u64, end: u64) {
        // Relaxed: a hint (see the type); a reader between the two stores sees an odd range.
        let (s, e) = &self.ranges[self.next.fetch_add(1, Ordering::Relaxed) % NAMED_RANGES];
        s.store(start, Ordering::Relaxed);
        e.store(end, Ordering::Relaxed);
    }
}

/// [`query`] from the text of `/proc/self/maps` (kernels before 6.11).
fn query_text(addr: usize) -> Result<Vma, SharedError> {
    let text = std::fs::read_to_string("/proc/self/maps").map_err(|_| SharedError::Fault)?;
    text.lines().find_map(|l| parse_maps_line(l, addr as u64)).ok_or(SharedError::Fault)
}

/// One line of `/proc/PID/maps` — `start-end perms offset major:minor inode [path]` — if it
/// covers `addr`.
fn parse_maps_line(line: &str, addr: u64) -> Option<Vma> {
    let mut f = line.split_ascii_whitespace();
    let (start, end) = f.next()?.split_once('-')?;
    let (start, end) = (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?);
    if !(start..end).contains(&addr) {
        return None;
    }
    let perms = f.next()?.as_bytes();
    let offset = u64::from_str_radix(f.next()?, 16).ok()?;
    let (major, minor) = f.next()?.split_once(':')?;
    let dev = device(u64::from_str_radix(major, 16).ok()?, u64::from_str_radix(minor, 16).ok()?);
    let inode = f.next()?.parse().ok()?;
    let path = f.next().unwrap_or("");
    let mut flags = 0;
    if perms.get(1) == Some(&b'w') {
        flags |= VMA_WRITABLE;
    }
    if perms.get(3) == Some(&b's') {
        flags |= VMA_SHARED;
    }
    Some(Vma { start, end, flags, offset, inode, dev, sysv: path.starts_with("/SYSV") })
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    fn maps_fd() -> libc::c_int {
        // SAFETY: a NUL-terminated literal path.
        unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }
    }

    fn key(addr: usize) -> Result<SharedKey, SharedError> {
        let fd = maps_fd();
        let r = query(fd, addr).and_then(|v| classify(addr, &v, (7, 9)));
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        r
    }

    fn map(len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> usize {
        // SAFETY: a fresh mapping; nothing else refers to it.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, off) };
        assert_ne!(p, libc::MAP_FAILED);
        p as usize
    }

    const RW: i32 = libc::PROT_READ | libc::PROT_WRITE;

    #[test]
    fn two_mappings_of_a_memfd_meet_at_the_same_byte() {
        // SAFETY: a NUL-terminated literal name.
        let fd = unsafe { libc::memfd_create(c"ufx-id".as_ptr(), libc::MFD_CLOEXEC) };
        // SAFETY: `fd` is a fresh memfd.
        assert_eq!(unsafe { libc::ftruncate(fd, 8192) }, 0);
        let a = map(8192, RW, libc::MAP_SHARED, fd, 0);
        let b = map(4096, RW, libc::MAP_SHARED, fd, 4096);
        let ka = key(a + 4096 + 64).unwrap();
        let kb = key(b + 64).unwrap();
        assert_eq!(ka, kb);
        assert_eq!(ka.class, Class::Object);
        assert_ne!(key(a + 64).unwrap(), ka);
    }

    #[test]
    fn private_memory_is_local_and_read_only_anonymous_memory_faults() {
        let heap = Box::new(0u32);
        let k = key(&*heap as *const u32 as usize).unwrap();
        assert_eq!((k.class, k.dev, k.ino), (Class::Local, 7, 9));
        let ro = map(4096, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        assert_eq!(key(ro), Err(SharedError::Fault));
        let anon = map(4096, RW, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0);
        assert_eq!(key(anon).unwrap().class, Class::Object);
        let anon2 = map(4096, RW, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0);
        assert_ne!(key(anon).unwrap(), key(anon2).unwrap(), "each shared anonymous mapping is its own object");
    }

    /// A fresh private SysV segment of one page, attached `n` times and removed at once (it
    /// lives on while attached): the addresses, to give to [`detach`].
    fn sysv_attached(n: usize) -> Vec<usize> {
        // SAFETY: plain SysV calls on a segment of our own.
        unsafe {
            let id = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600);
            assert!(id >= 0);
            let at: Vec<usize> = (0..n).map(|_| libc::shmat(id, std::ptr::null(), 0) as usize).collect();
            assert!(at.iter().all(|&a| a != usize::MAX), "shmat");
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
            at
        }
    }

    fn detach(at: Vec<usize>) {
        for a in at {
            // SAFETY: `a` is an attachment made by `sysv_attached`, no longer used.
            unsafe { libc::shmdt(a as *const libc::c_void) };
        }
    }

    #[test]
    fn sysv_segments_are_their_own_class() {
        let at = sysv_attached(2);
        let (ka, kb) = (key(at[0] + 8).unwrap(), key(at[1] + 8).unwrap());
        assert_eq!(ka, kb, "one segment attached twice is one object");
        assert_eq!(ka.class, Class::SysV);
        detach(at);
    }

    #[test]
    fn the_name_is_asked_only_where_a_sysv_segment_may_live() {
        let shm = 0x1;
        let vma = |flags, dev| Vma { start: 0, end: 4096, flags, offset: 0, inode: 9, dev, sysv: false };
        let page = base_page();
        let shared = VMA_SHARED | VMA_WRITABLE;
        assert!(needs_name(&vma(shared, shm), page, Some(shm)), "memfd, SysV, shared anonymous");
        assert!(!needs_name(&vma(shared, 0x1b), page, Some(shm)), "a file or a tmpfs (shm_open) mapping");
        assert!(!needs_name(&vma(VMA_WRITABLE, shm), page, Some(shm)), "private memory: never SysV");
        assert!(needs_name(&vma(shared, 0x2c), 2 << 20, Some(shm)), "hugetlbfs: SHM_HUGETLB or MFD_HUGETLB");
        assert!(needs_name(&vma(shared, 0x1b), page, None), "the shm mount unknown: every shared mapping");
        assert!(!needs_name(&vma(shared, shm), 0, Some(shm)), "the maps text, which has the name");
        assert!(shm_dev().is_some(), "memfd_create and fstat work here");
    }

    #[test]
    fn a_file_mapping_keys_by_the_file_without_its_name() {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!("ufutex-identity-{}", std::process::id()));
        let f = std::fs::File::options().read(true).write(true).create_new(true).open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        f.set_len(8192).unwrap();
        let a = map(8192, RW, libc::MAP_SHARED, f.as_raw_fd(), 0);
        let b = map(4096, RW, libc::MAP_SHARED, f.as_raw_fd(), 4096);
        let fd = maps_fd();
        let (va, page) = ask(fd, a + 4096 + 8, false).unwrap();
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        assert!(!needs_name(&va, page, shm_dev()), "a regular file is on no shm or hugetlbfs mount");
        let (ka, kb) = (key(a + 4096 + 8).unwrap(), key(b + 8).unwrap());
        assert_eq!(ka, kb, "two mappings of one file meet");
        assert_eq!(ka.class, Class::Object);
        assert_ne!(key(a + 8).unwrap(), ka);
    }

    #[test]
    fn a_memfd_and_a_sysv_segment_keep_their_classes_whatever_the_hint() {
        let at = sysv_attached(1);
        let s = at[0];
        // SAFETY: a NUL-terminated literal name; `fd` is a fresh memfd.
        let fd = unsafe { libc::memfd_create(c"ufx-hint".as_ptr(), libc::MFD_CLOEXEC) };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::ftruncate(fd, 4096) }, 0);
        let m = map(4096, RW, libc::MAP_SHARED, fd, 0);
        // Each query finds the hint on the other's range, or on its own (asked again).
        for _ in 0..3 {
            assert_eq!(key(s + 8).unwrap().class, Class::SysV);
            assert_eq!(key(m + 8).unwrap().class, Class::Object);
            assert_eq!(key(m + 16).unwrap().class, Class::Object);
            assert_eq!(key(s + 16).unwrap().class, Class::SysV);
        }
        detach(at);
    }

    #[test]
    fn the_hint_keeps_the_last_ranges_that_needed_the_name() {
        let named = Named::new();
        assert!(!named.covers(0) && !named.covers(4096));
        for r in 1..=NAMED_RANGES as u64 {
            named.set(r << 20, (r << 20) + 8192);
        }
        assert!((1..=NAMED_RANGES as u64).all(|r| named.covers((r << 20) as usize + 8191)));
        assert!(!named.covers((1 << 20) + 8192), "the end is outside");
        named.set(1 << 40, (1 << 40) + 4096);
        assert!(!named.covers((1 << 20) + 8), "the oldest range made room");
        assert!(named.covers((1 << 40) + 8) && named.covers((2 << 20) + 8));
    }

    #[test]
    fn unmapped_is_a_fault_and_the_text_parser_agrees_with_the_query() {
        let p = map(4096, RW, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0);
        let fd = maps_fd();
        let (v, t) = (query(fd, p + 12).unwrap(), query_text(p + 12).unwrap());
        assert_eq!((t.start, t.end, t.offset, t.inode, t.dev), (v.start, v.end, v.offset, v.inode, v.dev));
        let bits = VMA_WRITABLE | VMA_SHARED;
        assert_eq!(t.flags & bits, v.flags & bits);
        // SAFETY: our own mapping, no longer used.
        unsafe { libc::munmap(p as *mut libc::c_void, 4096) };
        assert_eq!(query(fd, p + 12), Err(SharedError::Fault));
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        assert!(parse_maps_line("zz-1 rw-p 0 00:00 0", 5).is_none());
        let v = parse_maps_line("1000-3000 rw-s 00002000 00:01 42 /SYSV00000000 (deleted)", 0x1004).unwrap();
        assert_eq!((v.start, v.offset, v.inode, v.dev, v.sysv), (0x1000, 0x2000, 42, 1, true));
    }
}
