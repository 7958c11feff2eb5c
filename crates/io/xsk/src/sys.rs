//! Every `unsafe` of the crate: the raw bpf(2) calls, the AF_XDP socket
//! options, the mmap'd rings and the UMEM area. Everything above this module
//! is safe code working with the small types defined here.
//!
//! The rings follow the kernel's single-producer / single-consumer protocol
//! (`include/uapi/linux/if_xdp.h`, `net/xdp/xsk_queue.h`): the producer
//! writes entries, then publishes them with a release store of its index;
//! the consumer reads the index with an acquire load, reads the entries, then
//! hands the slots back with a release store of its own index.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    pub code: u8,
    /// `dst | src << 4`.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_DELETE_ELEM: u32 = 3;
const BPF_MAP_GET_NEXT_KEY: u32 = 4;
const BPF_PROG_LOAD: u32 = 5;
#[cfg(test)]
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_LINK_CREATE: u32 = 28;
const BPF_LINK_DETACH: u32 = 34;

const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_MAP_TYPE_DEVMAP: u32 = 14;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type::BPF_XDP`.
pub(crate) const BPF_XDP: u32 = 37;

/// `bpf_attr` for BPF_MAP_CREATE (the leading fields the kernel needs; it
/// zero-extends a shorter attr).
#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `bpf_attr` for BPF_MAP_*_ELEM.
#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `bpf_attr` for BPF_PROG_LOAD up to `expected_attach_type`.
#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `bpf_attr` for BPF_PROG_TEST_RUN (`test`, up to `batch_size`, plus
/// explicit tail padding: the kernel checks that the bytes after the last
/// field it knows are zero).
#[cfg(test)]
#[repr(C)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `bpf_attr` for BPF_LINK_CREATE (XDP needs only these four).
#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `bpf_attr` for BPF_LINK_DETACH.
#[repr(C)]
struct LinkDetachAttr {
    link_fd: u32,
}

/// bpf(2). `T` is one of the `#[repr(C)]` attr structs above, which have no
/// padding, so every byte the kernel reads is initialised.
fn bpf<T>(cmd: u32, attr: &mut T) -> io::Result<i64> {
    // SAFETY: `attr` points to a live, fully initialised, exclusively
    // borrowed struct of exactly `size_of::<T>()` bytes; the kernel reads at
    // most that many and writes back only into fields of it (BPF_PROG_TEST_RUN
    // fills in retval, duration and the output sizes). Pointers inside the
    // attr (insns, license, log buffer, key, value, test data) are set by the
    // callers to buffers that outlive this call and are as long as the sizes
    // the kernel is told (or, for map elements, as the map's key and value
    // sizes: see `Map`).
    let ret = unsafe {
        libc::syscall(libc::SYS_bpf, libc::c_long::from(cmd), attr as *mut T, std::mem::size_of::<T>() as libc::c_long)
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn fd_from(ret: i64) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(ret).map_err(|_| io::Error::other("bpf returned an out-of-range fd"))?;
    // SAFETY: the kernel just returned this new descriptor to us and nobody
    // else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(name.bytes().take(15)) {
        *o = b;
    }
    out
}

fn map_create(map_type: u32, key_size: u32, value_size: u32, max_entries: u32, name: &str) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_flags: 0,
        inner_map_fd: 0,
        numa_node: 0,
        map_name: name16(name),
    };
    fd_from(bpf(BPF_MAP_CREATE, &mut attr)?)
}

/// Creates a BPF_MAP_TYPE_XSKMAP with `max_entries` slots (key: u32 rx
/// queue index, value: u32 XSK fd).
pub(crate) fn xskmap_create(max_entries: u32, name: &str) -> io::Result<OwnedFd> {
    map_create(BPF_MAP_TYPE_XSKMAP, 4, 4, max_entries, name)
}

/// Creates a BPF_MAP_TYPE_ARRAY of `max_entries` u32 values (key: u32
/// index), all zero.
pub(crate) fn array_u32_create(max_entries: u32, name: &str) -> io::Result<OwnedFd> {
    map_create(BPF_MAP_TYPE_ARRAY, 4, 4, max_entries, name)
}

/// Creates a BPF_MAP_TYPE_PERCPU_ARRAY of `max_entries` u64 values (one
/// per possible CPU per entry), all zero.
pub(crate) fn percpu_array_u64_create(max_entries: u32, name: &str) -> io::Result<OwnedFd> {
    map_create(BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, max_entries, name)
}

/// Room for the per-CPU values of one entry: the kernel writes one u64 per
/// possible CPU. The count is read from sysfs (where readable), and never
/// taken below `MAX_CPUS_ASSUMED` (Linux's largest NR_CPUS), so a misread
/// or missing count cannot make the kernel write past the buffer (64 KiB,
/// zeroed per lookup: about a microsecond).
const MAX_CPUS_ASSUMED: usize = 8192;

/// The per-CPU u64 values of `key` of a BPF_MAP_TYPE_PERCPU_ARRAY with
/// 8-byte values, summed over CPUs.
pub(crate) fn percpu_u64_sum(map: &OwnedFd, key: u32, possible_cpus: usize) -> io::Result<u64> {
    let mut values = vec![0u64; possible_cpus.max(MAX_CPUS_ASSUMED)];
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: values.as_mut_ptr() as u64,
        flags: 0,
    };
    // The kernel writes round_up(8, 8) * num_possible_cpus() bytes into
    // `values`, which holds at least that many (see MAX_CPUS_ASSUMED).
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr)?;
    Ok(values.iter().fold(0u64, |a, v| a.wrapping_add(*v)))
}

/// Stores `value` at `key` of a u32 -> u32 map (BPF_ANY).
pub(crate) fn map_update_u32(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        flags: 0,
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// Deletes `key` of a u32-keyed map.
pub(crate) fn map_delete_u32(map: &OwnedFd, key: u32) -> io::Result<()> {
    let mut attr =
        MapElemAttr { map_fd: map.as_raw_fd() as u32, _pad: 0, key: &key as *const u32 as u64, value: 0, flags: 0 };
    bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(|_| ())
}

/// `BPF_ANY`: create the element or replace it.
pub(crate) const BPF_ANY: u64 = 0;

/// A BPF map with fixed key and value sizes, one value per key (not a
/// per-CPU map): every element call checks that the buffers it hands the
/// kernel are exactly as long as the map's key and value, so the kernel
/// never reads or writes past them.
#[derive(Debug)]
pub(crate) struct Map {
    fd: OwnedFd,
    key_size: usize,
    value_size: usize,
}

impl Map {
    fn create(map_type: u32, key_size: u32, value_size: u32, max_entries: u32, name: &str) -> io::Result<Map> {
        let fd = map_create(map_type, key_size, value_size, max_entries, name)?;
        Ok(Map { fd, key_size: key_size as usize, value_size: value_size as usize })
    }

    /// A BPF_MAP_TYPE_HASH (preallocated: `max_entries` elements of kernel
    /// memory are reserved at creation; an insert beyond them fails with E2BIG).
    pub(crate) fn hash(key_size: u32, value_size: u32, max_entries: u32, name: &str) -> io::Result<Map> {
        Map::create(BPF_MAP_TYPE_HASH, key_size, value_size, max_entries, name)
    }

    /// A BPF_MAP_TYPE_ARRAY keyed by u32 index, all values zero.
    pub(crate) fn array(value_size: u32, max_entries: u32, name: &str) -> io::Result<Map> {
        Map::create(BPF_MAP_TYPE_ARRAY, 4, value_size, max_entries, name)
    }

    /// A BPF_MAP_TYPE_DEVMAP keyed by u32 index, value u32 ifindex (resolved
    /// by the kernel, when written, in the writing thread's network namespace).
    pub(crate) fn devmap(max_entries: u32, name: &str) -> io::Result<Map> {
        Map::create(BPF_MAP_TYPE_DEVMAP, 4, 4, max_entries, name)
    }

    pub(crate) fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    fn sized(&self, key: &[u8], value: Option<usize>) -> io::Result<()> {
        if key.len() != self.key_size || value.is_some_and(|v| v != self.value_size) {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        Ok(())
    }

    fn attr(&self, key: u64, value: u64, flags: u64) -> MapElemAttr {
        MapElemAttr { map_fd: self.fd.as_raw_fd() as u32, _pad: 0, key, value, flags }
    }

    /// Writes `value` at `key` (`flags`: [`BPF_ANY`], BPF_NOEXIST, BPF_EXIST).
    pub(crate) fn update(&self, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
        self.sized(key, Some(value.len()))?;
        let mut attr = self.attr(key.as_ptr() as u64, value.as_ptr() as u64, flags);
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
    }

    /// Reads `key` into `value`; false when there is no such element.
    pub(crate) fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
        self.sized(key, Some(value.len()))?;
        let mut attr = self.attr(key.as_ptr() as u64, value.as_mut_ptr() as u64, 0);
        absent_is_false(bpf(BPF_MAP_LOOKUP_ELEM, &mut attr))
    }

    /// Deletes `key`; false when there was no such element.
    pub(crate) fn delete(&self, key: &[u8]) -> io::Result<bool> {
        self.sized(key, None)?;
        let mut attr = self.attr(key.as_ptr() as u64, 0, 0);
        absent_is_false(bpf(BPF_MAP_DELETE_ELEM, &mut attr))
    }

    /// The key after `key` (the first key with None) into `next`; false at
    /// the end. A `key` no longer in the map restarts at the first key.
    pub(crate) fn next_key(&self, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
        self.sized(next, None)?;
        if let Some(k) = key {
            self.sized(k, None)?;
        }
        let mut attr = self.attr(key.map_or(0, |k| k.as_ptr() as u64), next.as_mut_ptr() as u64, 0);
        absent_is_false(bpf(BPF_MAP_GET_NEXT_KEY, &mut attr))
    }
}

fn absent_is_false(r: io::Result<i64>) -> io::Result<bool> {
    match r {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// What one BPF_PROG_TEST_RUN returned.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TestRun {
    /// The program's return value (for XDP: the action).
    pub retval: u32,
    /// Bytes of the frame after the run (copied into `data_out` up to its length).
    pub data_len: usize,
    /// Mean run time per repetition, in nanoseconds.
    pub duration_ns: u32,
}

/// Runs `prog` on `data_in` `repeat` times (BPF_PROG_TEST_RUN, no live
/// frames: for XDP a redirect is decided but not carried out) and copies the
/// frame as the program left it into `data_out`. `ctx_in` is the program's
/// context (for XDP a `struct xdp_md`: its `data` field reserves that many
/// leading bytes of `data_in` as metadata, which is how frames shorter than
/// the kernel's 14-byte minimum reach the program).
#[cfg(test)]
pub(crate) fn prog_test_run(
    prog: &OwnedFd,
    data_in: &[u8],
    data_out: &mut [u8],
    ctx_in: Option<&[u8]>,
    repeat: u32,
) -> io::Result<TestRun> {
    let len = |b: usize| u32::try_from(b).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
    let (ctx_ptr, ctx_len) = ctx_in.map_or((0, 0), |c| (c.as_ptr() as u64, c.len()));
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        retval: 0,
        data_size_in: len(data_in.len())?,
        data_size_out: len(data_out.len())?,
        data_in: data_in.as_ptr() as u64,
        data_out: data_out.as_mut_ptr() as u64,
        repeat,
        duration: 0,
        ctx_size_in: len(ctx_len)?,
        ctx_size_out: 0,
        ctx_in: ctx_ptr,
        ctx_out: 0,
        flags: 0,
        cpu: 0,
        batch_size: 0,
        _pad: 0,
    };
    // The kernel copies at most data_size_out bytes into data_out (ENOSPC
    // when the frame was longer) and writes the results back into `attr`.
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok(TestRun { retval: attr.retval, data_len: attr.data_size_out as usize, duration_ns: attr.duration })
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns()`.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists, so the call cannot fail (the result is checked anyway).
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// Loads an XDP program (expected_attach_type BPF_XDP). With `log`, the
/// verifier writes its log (NUL-terminated) into it (log_level 1).
pub(crate) fn prog_load_xdp(insns: &[Insn], license: &str, name: &str, log: Option<&mut [u8]>) -> io::Result<OwnedFd> {
    let license = CString::new(license).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let (log_level, log_size, log_buf) = match log {
        Some(buf) if !buf.is_empty() => {
            (1, u32::try_from(buf.len()).unwrap_or(u32::MAX).min(1 << 24), buf.as_mut_ptr() as u64)
        }
        _ => (0, 0, 0),
    };
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: u32::try_from(insns.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name16(name),
        prog_ifindex: 0,
        expected_attach_type: BPF_XDP,
    };
    // The verifier gives up with EAGAIN when a signal arrives while it
    // works (a child of another thread exiting, say); libbpf tries again
    // too (PROG_LOAD_ATTEMPTS).
    let mut attempts = PROG_LOAD_ATTEMPTS;
    loop {
        match bpf(BPF_PROG_LOAD, &mut attr) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && attempts > 1 => attempts -= 1,
            r => return fd_from(r?),
        }
    }
}

/// Times a program load is tried while the kernel answers EAGAIN.
const PROG_LOAD_ATTEMPTS: u32 = 5;

/// Attaches an XDP program to an interface through a bpf_link: the program
/// stays attached as long as the returned fd (or a copy of it) lives, or
/// until [`link_detach`].
pub(crate) fn link_create_xdp(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr =
        LinkCreateAttr { prog_fd: prog.as_raw_fd() as u32, target_ifindex: ifindex, attach_type: BPF_XDP, flags };
    fd_from(bpf(BPF_LINK_CREATE, &mut attr)?)
}

/// Detaches `link` from its hook now (kernel 5.9+), however many copies of
/// its file exist: closing only detaches once the last copy is closed, and
/// a process forked meanwhile holds a copy until it execs or exits.
pub(crate) fn link_detach(link: &OwnedFd) -> io::Result<()> {
    let mut attr = LinkDetachAttr { link_fd: link.as_raw_fd() as u32 };
    bpf(BPF_LINK_DETACH, &mut attr).map(|_| ())
}

/// if_nametoindex(3) in the calling thread's network namespace.
pub(crate) fn if_nametoindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

/// The MTU of `name` (SIOCGIFMTU on a socket of the calling thread's
/// network namespace; sysfs would show the namespace the process mounted).
pub(crate) fn if_mtu(name: &str) -> io::Result<u32> {
    if name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifreq` is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq with a NUL-terminated name (shorter
    // than IFNAMSIZ, checked above); SIOCGIFMTU writes only `ifr_mtu`.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFMTU succeeded, so the union holds `ifru_mtu`.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| io::Error::other("negative MTU"))
}

/// The highest possible CPU + 1 (`/sys/devices/system/cpu/possible`): at
/// least the number of CPUs the kernel sizes per-CPU map values for.
pub(crate) fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    cpu_list_end(&text).ok_or_else(|| io::Error::other(format!("cannot read the CPU list {:?}", text.trim())))
}

/// The highest CPU of a kernel CPU list (`0-3`, `0,2-5`) + 1.
fn cpu_list_end(text: &str) -> Option<usize> {
    let mut n = 0usize;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (usize, usize) = (lo.parse().ok()?, hi.parse().ok()?);
        if lo > hi {
            return None;
        }
        n = n.max(hi.checked_add(1)?);
    }
    (n > 0).then_some(n)
}

// ---------------------------------------------------------------- mappings

/// An owned memory mapping, unmapped on drop.
struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving the owner
// to another thread is fine (no thread-local state is involved).
unsafe impl Send for Mmap {}

impl Mmap {
    fn new(fd: RawFd, len: usize, offset: i64, flags: libc::c_int) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at an address of the kernel's choosing;
        // nothing else is affected. The result is checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset as libc::off_t)
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap { ptr: ptr.cast(), len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping this value created and still
        // owns; no reference into it outlives `self` (the borrow checker ties
        // every slice handed out to a borrow of the owner).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// The UMEM: one anonymous mapping split into equal frames, shared with the
/// kernel once registered. Frame ownership (who may touch which frame) is
/// tracked by the socket; this type only hands out bounds-checked slices.
pub(crate) struct UmemArea {
    map: Mmap,
}

impl UmemArea {
    pub(crate) fn new(len: usize) -> io::Result<UmemArea> {
        Ok(UmemArea { map: Mmap::new(-1, len, 0, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS)? })
    }

    /// `len` bytes at `offset`, or None when that range leaves the area.
    pub(crate) fn get(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        if end > self.map.len {
            return None;
        }
        // SAFETY: start..end lies inside the live mapping (checked above).
        // The kernel writes only to frames it owns (the fill ring hands them
        // over, the rx ring hands them back with an acquire on its producer
        // index); callers read only frames they own, so no write races the
        // returned slice for as long as it is borrowed.
        Some(unsafe { std::slice::from_raw_parts(self.map.ptr.add(start), len) })
    }

    /// Mutable form of [`UmemArea::get`].
    pub(crate) fn get_mut(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        if end > self.map.len {
            return None;
        }
        // SAFETY: as in `get`; `&mut self` makes this the only slice into the
        // area, and the kernel reads a tx frame only after its descriptor is
        // published with a release store, after this borrow ended.
        Some(unsafe { std::slice::from_raw_parts_mut(self.map.ptr.add(start), len) })
    }
}

/// One mmap'd AF_XDP ring of `T` entries (u64 addresses for the fill and
/// completion rings, `xdp_desc` for rx and tx). Used either as producer
/// (`push`/`submit`) or as consumer (`available`/`read`/`release`).
pub(crate) struct Ring<T> {
    map: Mmap,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    mask: u32,
    size: u32,
    /// Producer side: our published index; consumer side: last seen kernel index.
    cached_prod: u32,
    /// Consumer side: our released index; producer side: last seen kernel index.
    cached_cons: u32,
    /// Producer side: entries written but not yet published.
    pending: u32,
    _t: PhantomData<T>,
}

impl<T: Copy> Ring<T> {
    fn atomic(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is one of the producer/consumer/flags offsets the
        // kernel reported; `map_ring` checked that they lie inside the mapping
        // and are 4-byte aligned. The kernel accesses these words atomically
        // too, so an `AtomicU32` view is the right type.
        unsafe { &*(self.map.ptr.add(off) as *const AtomicU32) }
    }

    fn slot(&self, idx: u32) -> *mut T {
        // SAFETY: `idx & mask` < size and `map_ring` checked that
        // desc + size * size_of::<T>() fits in the mapping with T's alignment.
        unsafe { (self.map.ptr.add(self.desc) as *mut T).add((idx & self.mask) as usize) }
    }

    /// Ring capacity in entries.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// The kernel asked to be woken up (XDP_RING_NEED_WAKEUP).
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.atomic(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    // ---- producer side

    /// Writes one entry if there is room (published by `submit`).
    pub(crate) fn push(&mut self, v: T) -> bool {
        let used = self.cached_prod.wrapping_add(self.pending).wrapping_sub(self.cached_cons);
        if used >= self.size {
            self.cached_cons = self.atomic(self.consumer).load(Ordering::Acquire);
            let used = self.cached_prod.wrapping_add(self.pending).wrapping_sub(self.cached_cons);
            if used >= self.size {
                return false;
            }
        }
        let slot = self.slot(self.cached_prod.wrapping_add(self.pending));
        // SAFETY: the slot is inside the mapping (see `slot`) and free: the
        // kernel consumed it (its consumer index passed it, acquire-loaded).
        unsafe { slot.write_volatile(v) };
        self.pending += 1;
        true
    }

    /// Room for one more entry (refreshes the kernel's consumer index when
    /// the ring looks full).
    pub(crate) fn has_room(&mut self) -> bool {
        let used = self.cached_prod.wrapping_add(self.pending).wrapping_sub(self.cached_cons);
        if used < self.size {
            return true;
        }
        self.cached_cons = self.atomic(self.consumer).load(Ordering::Acquire);
        self.cached_prod.wrapping_add(self.pending).wrapping_sub(self.cached_cons) < self.size
    }

    /// Publishes the pushed entries to the kernel.
    pub(crate) fn submit(&mut self) {
        if self.pending == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(self.pending);
        self.pending = 0;
        self.atomic(self.producer).store(self.cached_prod, Ordering::Release);
    }

    /// Published entries the kernel has not consumed yet.
    pub(crate) fn unconsumed(&self) -> u32 {
        let cons = self.atomic(self.consumer).load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(cons).min(self.size)
    }

    // ---- consumer side

    /// Entries ready to read (refreshes the kernel's producer index).
    pub(crate) fn available(&mut self) -> u32 {
        self.cached_prod = self.atomic(self.producer).load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons).min(self.size)
    }

    /// Entries waiting without refreshing our view (for accounting).
    pub(crate) fn waiting(&self) -> u32 {
        self.atomic(self.producer).load(Ordering::Acquire).wrapping_sub(self.cached_cons).min(self.size)
    }

    /// The `i`-th unread entry (`i` < `available()`).
    pub(crate) fn read(&self, i: u32) -> T {
        let slot = self.slot(self.cached_cons.wrapping_add(i));
        // SAFETY: inside the mapping (see `slot`); for i < available() the
        // kernel finished writing it before its release store of the producer
        // index that `available` acquire-loaded. A larger `i` would only read
        // a stale entry, never out of bounds.
        unsafe { slot.read_volatile() }
    }

    /// Hands `n` read entries back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.atomic(self.consumer).store(self.cached_cons, Ordering::Release);
    }
}

/// Maps one ring of an XSK: `pgoff` is XDP_PGOFF_RX_RING etc., `off` the
/// kernel's offsets for it, `size` its entry count.
pub(crate) fn map_ring<T: Copy>(
    fd: &OwnedFd,
    pgoff: i64,
    off: &libc::xdp_ring_offset,
    size: u32,
    producer_side: bool,
) -> io::Result<Ring<T>> {
    let bad = |what: &str| io::Error::other(format!("kernel ring offsets are unusable ({what})"));
    let conv = |v: u64| usize::try_from(v).map_err(|_| bad("offset overflow"));
    let (producer, consumer, flags, desc) =
        (conv(off.producer)?, conv(off.consumer)?, conv(off.flags)?, conv(off.desc)?);
    let len =
        (size as usize).checked_mul(std::mem::size_of::<T>()).and_then(|b| b.checked_add(desc)).ok_or(bad("size"))?;
    for w in [producer, consumer, flags] {
        if w % 4 != 0 || w + 4 > len {
            return Err(bad("index word"));
        }
    }
    if desc % std::mem::align_of::<T>() != 0 || !size.is_power_of_two() {
        return Err(bad("descriptor alignment"));
    }
    let map = Mmap::new(fd.as_raw_fd(), len, pgoff, libc::MAP_SHARED | libc::MAP_POPULATE)?;
    let mut ring = Ring {
        map,
        producer,
        consumer,
        flags,
        desc,
        mask: size - 1,
        size,
        cached_prod: 0,
        cached_cons: 0,
        pending: 0,
        _t: PhantomData,
    };
    if producer_side {
        ring.cached_prod = ring.atomic(ring.producer).load(Ordering::Relaxed);
        ring.cached_cons = ring.atomic(ring.consumer).load(Ordering::Relaxed);
    } else {
        ring.cached_cons = ring.atomic(ring.consumer).load(Ordering::Relaxed);
        ring.cached_prod = ring.atomic(ring.producer).load(Ordering::Relaxed);
    }
    Ok(ring)
}

// ---------------------------------------------------------------- AF_XDP socket

pub(crate) fn xsk_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt<T>(fd: &OwnedFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live, initialised value of the size passed; the
    // kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r != 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// getsockopt(SOL_XDP) into a zero-initialised POD `T`; fails when the kernel
/// returns a different size (an older layout).
fn getsockopt<T: Copy>(fd: &OwnedFd, opt: libc::c_int, mut out: T) -> io::Result<T> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` is a valid, writable `T` of `len` bytes; the kernel
    // writes at most `len` bytes and reports how many.
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_XDP, opt, (&mut out as *mut T).cast(), &mut len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<T>() {
        return Err(io::Error::other(format!(
            "getsockopt({opt}) returned {len} bytes, expected {}",
            std::mem::size_of::<T>()
        )));
    }
    Ok(out)
}

pub(crate) fn set_ring_size(fd: &OwnedFd, opt: libc::c_int, entries: u32) -> io::Result<()> {
    setsockopt(fd, opt, &entries)
}

/// XDP_MAX_TX_SKB_BUDGET (Linux 6.17, `include/uapi/linux/if_xdp.h`; not
/// in the libc crate yet).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Frames one copy-mode sendto may send (32..=tx ring entries; the tx ring
/// must exist). Older kernels fail with ENOPROTOOPT.
pub(crate) fn set_tx_budget(fd: &OwnedFd, frames: u32) -> io::Result<()> {
    setsockopt(fd, XDP_MAX_TX_SKB_BUDGET, &frames)
}

/// XDP_UMEM_REG: aligned chunks of `chunk_size`, no extra headroom.
pub(crate) fn register_umem(fd: &OwnedFd, area: &UmemArea, chunk_size: u32) -> io::Result<()> {
    let reg = libc::xdp_umem_reg {
        addr: area.map.ptr as u64,
        len: area.map.len as u64,
        chunk_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(fd, libc::XDP_UMEM_REG, &reg)
}

pub(crate) fn mmap_offsets(fd: &OwnedFd) -> io::Result<libc::xdp_mmap_offsets> {
    let z = libc::xdp_ring_offset { producer: 0, consumer: 0, desc: 0, flags: 0 };
    getsockopt(fd, libc::XDP_MMAP_OFFSETS, libc::xdp_mmap_offsets { rx: z, tx: z, fr: z, cr: z })
}

pub(crate) fn xsk_bind(fd: &OwnedFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: `sa` is a valid sockaddr_xdp of the length passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if r != 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// XDP_OPTIONS: true when the socket runs in zero-copy mode.
pub(crate) fn xsk_zerocopy(fd: &OwnedFd) -> io::Result<bool> {
    let o = getsockopt(fd, libc::XDP_OPTIONS, libc::xdp_options { flags: 0 })?;
    Ok(o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
}

pub(crate) fn xsk_statistics(fd: &OwnedFd) -> io::Result<libc::xdp_statistics> {
    getsockopt(
        fd,
        libc::XDP_STATISTICS,
        libc::xdp_statistics {
            rx_dropped: 0,
            rx_invalid_descs: 0,
            tx_invalid_descs: 0,
            rx_ring_full: 0,
            rx_fill_ring_empty_descs: 0,
            tx_ring_empty_descs: 0,
        },
    )
}

/// Wakes the kernel's transmit path (`sendto(fd, NULL, 0, MSG_DONTWAIT)`).
pub(crate) fn kick_tx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length send with no buffer and no address is valid.
    let r = unsafe { libc::sendto(fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Wakes the driver's receive path (`recvfrom(fd, NULL, 0, MSG_DONTWAIT)`).
pub(crate) fn kick_rx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length receive with no buffer and no address is valid.
    let r = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// poll(2) for POLLIN; true when readable within `timeout_ms`.
pub(crate) fn poll_in(fd: &OwnedFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0 && p.revents & libc::POLLIN != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list_end("0-3\n"), Some(4));
        assert_eq!(cpu_list_end("0"), Some(1));
        assert_eq!(cpu_list_end("0,2-5,7"), Some(8));
        assert_eq!(cpu_list_end(""), None);
        assert_eq!(cpu_list_end("3-1"), None);
        assert_eq!(cpu_list_end("x"), None);
        assert!(possible_cpus().unwrap() >= 1);
    }
}
