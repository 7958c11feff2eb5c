//! Every system call and every raw-memory access of the crate. The rest of
//! the crate is safe code built on these wrappers: the ring mapping is only
//! reachable through bounds-checked accessors.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::cbpf::SockFilter;

// `SockFilter` is handed to the kernel as `struct sock_filter`.
const _: () = assert!(std::mem::size_of::<SockFilter>() == std::mem::size_of::<libc::sock_filter>());
const _: () = assert!(std::mem::align_of::<SockFilter>() == std::mem::align_of::<libc::sock_filter>());

/// The calling thread's last OS error number.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// `if_nametoindex(3)`; 0 when there is no such interface.
pub fn ifindex(name: &str) -> u32 {
    let Ok(c) = CString::new(name) else { return 0 };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// `socket(AF_PACKET, SOCK_RAW, 0)`: protocol 0 receives nothing until
/// `bind` names a protocol, so no frame of another interface slips in.
pub fn packet_socket() -> Result<OwnedFd, i32> {
    // SAFETY: plain system call; the returned descriptor is checked and then owned.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt_raw(fd: RawFd, level: i32, name: i32, ptr: *const libc::c_void, len: usize) -> Result<(), i32> {
    // SAFETY: the callers pass a pointer to `len` readable bytes that live
    // across the call; the kernel copies them.
    let rc = unsafe { libc::setsockopt(fd, level, name, ptr, len as libc::socklen_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

pub fn setsockopt_int(fd: &OwnedFd, level: i32, name: i32, value: i32) -> Result<(), i32> {
    setsockopt_raw(fd.as_raw_fd(), level, name, (&value as *const i32).cast(), std::mem::size_of::<i32>())
}

pub fn set_rx_ring(fd: &OwnedFd, req: &libc::tpacket_req3) -> Result<(), i32> {
    setsockopt_raw(
        fd.as_raw_fd(),
        libc::SOL_PACKET,
        libc::PACKET_RX_RING,
        (req as *const libc::tpacket_req3).cast(),
        std::mem::size_of::<libc::tpacket_req3>(),
    )
}

/// Hands a classic BPF program to the kernel (`SO_ATTACH_FILTER` or
/// `PACKET_FANOUT_DATA`); the kernel copies and checks it.
pub fn set_program(fd: &OwnedFd, level: i32, name: i32, prog: &[SockFilter]) -> Result<(), i32> {
    let len = u16::try_from(prog.len()).map_err(|_| libc::EINVAL)?;
    let fprog = libc::sock_fprog { len, filter: prog.as_ptr() as *mut libc::sock_filter };
    setsockopt_raw(
        fd.as_raw_fd(),
        level,
        name,
        (&fprog as *const libc::sock_fprog).cast(),
        std::mem::size_of::<libc::sock_fprog>(),
    )
}

/// `PACKET_STATISTICS` for TPACKET_V3 (the kernel resets them on read).
pub fn packet_stats(fd: &OwnedFd) -> Result<libc::tpacket_stats_v3, i32> {
    let mut st = libc::tpacket_stats_v3 { tp_packets: 0, tp_drops: 0, tp_freeze_q_cnt: 0 };
    let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `st` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(st)
    } else {
        Err(errno())
    }
}

/// Binds a packet socket to `ifindex` for `protocol` (host order).
pub fn bind_ll(fd: &OwnedFd, ifindex: u32, protocol: u16) -> Result<(), i32> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll of the length given.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// `poll(2)` for readability; `Ok(false)` on timeout or signal.
pub fn poll_readable(fd: &OwnedFd, timeout: Duration) -> Result<bool, i32> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN | libc::POLLERR, revents: 0 };
    // SAFETY: `p` is one valid pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    match rc {
        n if n > 0 => Ok(p.revents & (libc::POLLIN | libc::POLLERR) != 0),
        0 => Ok(false),
        _ => match errno() {
            libc::EINTR => Ok(false),
            e => Err(e),
        },
    }
}

/// `sendmmsg(2)` of whole frames on a bound packet socket. Returns how many
/// of the leading frames were sent, or the errno of the first one.
pub fn sendmmsg(
    fd: &OwnedFd,
    frames: &[&[u8]],
    heads: Option<&[[u8; crate::vnet::VNET_HDR_LEN]]>,
) -> Result<usize, i32> {
    if frames.is_empty() {
        return Ok(0);
    }
    // Each message: its offload header (PACKET_VNET_HDR) when given, then the frame.
    let per = if heads.is_some() { 2 } else { 1 };
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(frames.len() * per);
    for (i, f) in frames.iter().enumerate() {
        if let Some(h) = heads.and_then(|h| h.get(i)) {
            iov.push(libc::iovec { iov_base: h.as_ptr() as *mut libc::c_void, iov_len: h.len() });
        }
        iov.push(libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() });
    }
    if iov.len() != frames.len() * per {
        return Err(libc::EINVAL);
    }
    let mut msgs: Vec<libc::mmsghdr> = iov
        .chunks_exact_mut(per)
        .map(|v| {
            // SAFETY: msghdr is plain old data; all-zero is a valid value
            // (no address: the socket is bound).
            let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
            hdr.msg_iov = v.as_mut_ptr();
            hdr.msg_iovlen = per;
            libc::mmsghdr { msg_hdr: hdr, msg_len: 0 }
        })
        .collect();
    let vlen = u32::try_from(msgs.len()).unwrap_or(u32::MAX);
    // SAFETY: `msgs` holds `vlen` headers whose iovecs point into `frames`
    // and `heads`, all alive until the call returns; the kernel only reads
    // them.
    let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), vlen, 0) };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(rc as usize)
    }
}

/// A shared mapping of a packet ring. Reads go through bounds-checked
/// accessors; block status words are accessed atomically (the kernel hands
/// blocks back and forth through them).
#[derive(Debug)]
pub struct RingMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone (the pointer is never
// shared outside it) and the kernel side synchronises through the atomic
// status words, so moving it to another thread is sound.
unsafe impl Send for RingMap {}

impl RingMap {
    pub fn map(fd: &OwnedFd, len: usize, lock: bool) -> Result<RingMap, i32> {
        let flags = libc::MAP_SHARED | if lock { libc::MAP_LOCKED } else { 0 };
        // SAFETY: a fresh shared mapping of the socket's ring; the result is checked.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd.as_raw_fd(), 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(errno());
        }
        Ok(RingMap { ptr: ptr.cast(), len })
    }

    fn status_word(&self, off: usize) -> Option<&AtomicU32> {
        if !off.is_multiple_of(4) || off.checked_add(4)? > self.len {
            return None;
        }
        // SAFETY: in bounds and 4-byte aligned (the mapping is page aligned);
        // the word lives as long as `self`.
        Some(unsafe { &*(self.ptr.add(off) as *const AtomicU32) })
    }

    /// Acquire-load of the u32 at `off` (a block status word).
    pub fn load_acquire(&self, off: usize) -> Option<u32> {
        self.status_word(off).map(|w| w.load(Ordering::Acquire))
    }

    /// Release-store of the u32 at `off`: hands a block back to the kernel
    /// after every read of it.
    pub fn store_release(&self, off: usize, value: u32) {
        if let Some(w) = self.status_word(off) {
            w.store(value, Ordering::Release);
        }
    }

    /// A copy of the plain-old-data value at `off`, if it lies in the map.
    pub fn read<T: Copy>(&self, off: usize) -> Option<T> {
        if off.checked_add(std::mem::size_of::<T>())? > self.len {
            return None;
        }
        // SAFETY: in bounds; read_unaligned copes with any alignment, and the
        // callers only instantiate this with kernel ABI structs of integers
        // (every bit pattern valid). The block is owned by user space while read.
        Some(unsafe { std::ptr::read_unaligned(self.ptr.add(off) as *const T) })
    }

    /// The bytes `off..off + len`, if they lie in the map.
    pub fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds; the caller reads only blocks the kernel handed
        // to user space (status TP_STATUS_USER), which the kernel does not
        // write until they are handed back after the borrow ends.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) })
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `map`, unmapped once.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}
