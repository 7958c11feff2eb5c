//! Every system call of the crate behind safe wrappers: socket options,
//! bind/connect, poll, CPU affinity, and batched `recvmmsg`/`sendmmsg` with
//! their ancillary data (`SO_RXQ_OVFL`, `IP_PKTINFO`, `IPV6_PKTINFO`).
//!
//! The batch types own every buffer the kernel writes into and rebuild the
//! `mmsghdr` pointers before each call, so no pointer outlives the storage it
//! points at.
#![allow(unsafe_code)]

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

pub use libc::pollfd as PollFd;

/// Options of `SOL_SOCKET` and friends used by the crate.
pub mod opt {
    pub const SOL_SOCKET: i32 = libc::SOL_SOCKET;
    pub const IPPROTO_IP: i32 = libc::IPPROTO_IP;
    pub const IPPROTO_IPV6: i32 = libc::IPPROTO_IPV6;
    pub const SO_REUSEPORT: i32 = libc::SO_REUSEPORT;
    pub const SO_INCOMING_CPU: i32 = libc::SO_INCOMING_CPU;
    pub const SO_RXQ_OVFL: i32 = libc::SO_RXQ_OVFL;
    pub const SO_RCVBUF: i32 = libc::SO_RCVBUF;
    pub const SO_RCVBUFFORCE: i32 = libc::SO_RCVBUFFORCE;
    pub const IP_PKTINFO: i32 = libc::IP_PKTINFO;
    pub const IPV6_RECVPKTINFO: i32 = libc::IPV6_RECVPKTINFO;
    pub const IPV6_V6ONLY: i32 = libc::IPV6_V6ONLY;
}

/// A new non-blocking-capable UDP socket (blocking by default; every I/O
/// call below passes `MSG_DONTWAIT`).
pub fn udp_socket(v6: bool) -> io::Result<OwnedFd> {
    let domain = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: plain system call with constant arguments; returns a new fd or -1.
    let fd = unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::IPPROTO_UDP) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with an `int` value.
pub fn set_int(fd: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the option value points at a live c_int whose size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The socket's kernel drop counter (`SO_MEMINFO`, `SK_MEMINFO_DROPS`): the
/// same number `SO_RXQ_OVFL` reports, readable at any time.
pub fn socket_drops(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut info = [0u32; 16];
    let mut len = size_of::<[u32; 16]>() as libc::socklen_t;
    // SAFETY: `info` is a live buffer of `len` bytes; the kernel writes at most that.
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_MEMINFO, info.as_mut_ptr().cast(), &mut len)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let idx = libc::SK_MEMINFO_DROPS as usize;
    if (len as usize) < (idx + 1) * 4 {
        return Err(io::Error::other("SO_MEMINFO reply too short"));
    }
    Ok(info[idx])
}

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `SO_ATTACH_REUSEPORT_CBPF`: the program's return value is the index of
/// the socket in the reuseport group (bind order); an index out of range
/// falls back to the kernel's hash selection.
pub fn attach_reuseport_cbpf(fd: BorrowedFd<'_>, prog: &[Insn]) -> io::Result<()> {
    let mut filter: Vec<libc::sock_filter> =
        prog.iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect();
    let fprog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_mut_ptr() };
    // SAFETY: `fprog` points at `filter`, which lives until after the call;
    // the kernel copies the program.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn from_sockaddr(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET if len as usize >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in of this length.
            let sin: libc::sockaddr_in = unsafe { std::ptr::read((storage as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 if len as usize >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6 of this length.
            let sin6: libc::sockaddr_in6 = unsafe { std::ptr::read((storage as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

pub fn bind(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let (sa, len) = to_sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr of `len` bytes for the call's duration.
    let rc = unsafe { libc::bind(fd.as_raw_fd(), (&sa as *const libc::sockaddr_storage).cast(), len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn connect(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let (sa, len) = to_sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr of `len` bytes for the call's duration.
    let rc = unsafe { libc::connect(fd.as_raw_fd(), (&sa as *const libc::sockaddr_storage).cast(), len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    // SAFETY: all-zero sockaddr_storage is valid.
    let mut sa: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `sa` and `len` are live and describe the buffer size.
    let rc = unsafe { libc::getsockname(fd.as_raw_fd(), (&mut sa as *mut libc::sockaddr_storage).cast(), &mut len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    from_sockaddr(&sa, len).ok_or_else(|| io::Error::other("getsockname: unknown address family"))
}

/// A `pollfd` waiting for input on `fd`.
pub fn poll_in(fd: BorrowedFd<'_>) -> PollFd {
    PollFd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }
}

/// A `pollfd` waiting for room to send on `fd`.
pub fn poll_out(fd: BorrowedFd<'_>) -> PollFd {
    PollFd { fd: fd.as_raw_fd(), events: libc::POLLOUT, revents: 0 }
}

/// The pollfd is ready (input, output or an error to collect).
pub fn ready(p: &PollFd) -> bool {
    p.revents & (p.events | libc::POLLERR | libc::POLLHUP) != 0
}

/// `poll(2)`; an interrupted call counts as a timeout.
pub fn poll(fds: &mut [PollFd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: `fds` is a live, exclusively borrowed array of pollfd of the length given.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(rc as usize)
}

/// The CPU the calling thread runs on.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: no arguments; returns the CPU number or -1.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

/// Pin the calling thread to one CPU.
pub fn pin_to_cpu(cpu: u32) -> io::Result<()> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu < CPU_SETSIZE was checked, so the bit lies inside the set.
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    // SAFETY: `set` is a live cpu_set_t of the size given; pid 0 = this thread.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CPUs this thread may run on.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    // SAFETY: all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t of the size given.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: every index is below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).map(|c| c as u32).collect())
}

/// The local address the kernel's routing picks to reach `remote` (connects
/// a throw-away UDP socket; sends nothing).
pub fn route_source(remote: &SocketAddr) -> io::Result<IpAddr> {
    let fd = udp_socket(remote.is_ipv6())?;
    connect(fd.as_fd(), remote)?;
    Ok(local_addr(fd.as_fd())?.ip())
}

/// The destination address of a received datagram (from `IP_PKTINFO` /
/// `IPV6_PKTINFO`); replies use it as their source so a socket bound to the
/// wildcard address answers from the address the peer talked to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PktInfo {
    V4 { addr: Ipv4Addr },
    V6 { addr: Ipv6Addr, ifindex: u32 },
}

/// What `recvmmsg` said about one datagram.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecvMeta {
    /// Bytes stored in the slot (at most the slot size).
    pub len: usize,
    /// The datagram was larger than the slot (`MSG_TRUNC`): the rest is lost.
    pub truncated: bool,
    /// The socket's cumulative kernel drop count when this datagram was queued
    /// (`SO_RXQ_OVFL`; absent while it is zero).
    pub overflow: Option<u32>,
    /// Destination address, when packet info was asked for.
    pub dst: Option<PktInfo>,
}

/// Control buffer per message: room for `SO_RXQ_OVFL` (16 bytes) and
/// `IPV6_PKTINFO` (36 bytes) with alignment.
const CTRL_WORDS: usize = 16;

/// Buffers for one `recvmmsg` call of up to `cap` datagrams of up to `slot`
/// bytes each, and for echoing them back with one `sendmmsg`.
///
/// Memory: `cap * (slot + ~300)` bytes, fixed at creation.
pub struct RecvBatch {
    cap: usize,
    slot: usize,
    bufs: Vec<u8>,
    names: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; CTRL_WORDS]>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    meta: Vec<RecvMeta>,
    name_lens: Vec<libc::socklen_t>,
    count: usize,
    // Echo side.
    s_ctrl: Vec<[u64; CTRL_WORDS]>,
    s_iovs: Vec<libc::iovec>,
    s_hdrs: Vec<libc::mmsghdr>,
    s_count: usize,
}

fn empty_iovec() -> libc::iovec {
    libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }
}

fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain old data (pointers may be null, lengths zero).
    unsafe { std::mem::zeroed() }
}

impl RecvBatch {
    pub fn new(cap: usize, slot: usize) -> RecvBatch {
        let cap = cap.max(1);
        let slot = slot.max(1);
        RecvBatch {
            cap,
            slot,
            bufs: vec![0u8; cap * slot],
            // SAFETY: all-zero sockaddr_storage is valid.
            names: vec![unsafe { std::mem::zeroed() }; cap],
            ctrl: vec![[0u64; CTRL_WORDS]; cap],
            iovs: vec![empty_iovec(); cap],
            hdrs: vec![empty_mmsghdr(); cap],
            meta: vec![RecvMeta::default(); cap],
            name_lens: vec![0; cap],
            count: 0,
            s_ctrl: vec![[0u64; CTRL_WORDS]; cap],
            s_iovs: vec![empty_iovec(); cap],
            s_hdrs: vec![empty_mmsghdr(); cap],
            s_count: 0,
        }
    }

    /// One `recvmmsg(MSG_DONTWAIT)` of up to `max` datagrams: `Ok(0)` when
    /// nothing is waiting.
    pub fn recv(&mut self, fd: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        let n = max.clamp(1, self.cap);
        let base = self.bufs.as_mut_ptr();
        for i in 0..n {
            // SAFETY: i * slot + slot <= bufs.len(), so the pointer stays in bounds.
            self.iovs[i] = libc::iovec { iov_base: unsafe { base.add(i * self.slot) }.cast(), iov_len: self.slot };
            let h = &mut self.hdrs[i];
            *h = empty_mmsghdr();
            h.msg_hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_iov = &mut self.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = self.ctrl[i].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = size_of::<[u64; CTRL_WORDS]>() as _;
        }
        // SAFETY: hdrs[..n] point at name, iovec, buffer and control storage
        // owned by `self`, valid and exclusively borrowed for the call.
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            self.count = 0;
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(0);
            }
            return Err(e);
        }
        let got = rc as usize;
        for i in 0..got {
            let h = &self.hdrs[i];
            let mut meta = RecvMeta {
                len: (h.msg_len as usize).min(self.slot),
                truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                overflow: None,
                dst: None,
            };
            self.name_lens[i] = h.msg_hdr.msg_namelen;
            // SAFETY: the kernel filled msg_control/msg_controllen of this
            // header; the CMSG_* helpers stay inside msg_controllen.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                while !c.is_null() {
                    let data = libc::CMSG_DATA(c);
                    match ((*c).cmsg_level, (*c).cmsg_type) {
                        (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                            meta.overflow = Some(std::ptr::read_unaligned(data.cast::<u32>()));
                        }
                        (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                            let p = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                            meta.dst = Some(PktInfo::V4 { addr: Ipv4Addr::from(p.ipi_addr.s_addr.to_ne_bytes()) });
                        }
                        (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                            let p = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                            meta.dst = Some(PktInfo::V6 {
                                addr: Ipv6Addr::from(p.ipi6_addr.s6_addr),
                                ifindex: p.ipi6_ifindex,
                            });
                        }
                        _ => {}
                    }
                    c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
                }
            }
            self.meta[i] = meta;
        }
        self.count = got;
        Ok(got)
    }

    pub fn meta(&self, i: usize) -> &RecvMeta {
        &self.meta[i]
    }

    /// The bytes of datagram `i` of the last `recv`.
    pub fn data(&self, i: usize) -> &[u8] {
        let m = &self.meta[i];
        &self.bufs[i * self.slot..i * self.slot + m.len]
    }

    /// Prepare one reply per datagram in `which` (indices of the last
    /// `recv`): the same bytes, to the sender, from the address the datagram
    /// was sent to when packet info is known. Returns the count prepared.
    pub fn prepare_echo(&mut self, which: &[usize]) -> usize {
        let base = self.bufs.as_mut_ptr();
        let mut k = 0;
        for &i in which.iter().take(self.cap) {
            if i >= self.count {
                continue;
            }
            let m = self.meta[i];
            // SAFETY: i < cap, so the slot lies inside `bufs`.
            self.s_iovs[k] = libc::iovec { iov_base: unsafe { base.add(i * self.slot) }.cast(), iov_len: m.len };
            let h = &mut self.s_hdrs[k];
            *h = empty_mmsghdr();
            h.msg_hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = self.name_lens[i];
            h.msg_hdr.msg_iov = &mut self.s_iovs[k];
            h.msg_hdr.msg_iovlen = 1;
            if let Some(dst) = m.dst {
                let ctrl = &mut self.s_ctrl[k];
                *ctrl = [0; CTRL_WORDS];
                h.msg_hdr.msg_control = ctrl.as_mut_ptr().cast();
                let (level, kind, payload) = match dst {
                    PktInfo::V4 { .. } => (libc::IPPROTO_IP, libc::IP_PKTINFO, size_of::<libc::in_pktinfo>()),
                    PktInfo::V6 { .. } => (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, size_of::<libc::in6_pktinfo>()),
                };
                // SAFETY: CMSG_SPACE/CMSG_LEN are pure size computations; the
                // control buffer (128 bytes) is larger than CMSG_SPACE of
                // either pktinfo struct (at most 40 bytes), and CMSG_FIRSTHDR
                // returns its start because msg_controllen covers one header.
                unsafe {
                    h.msg_hdr.msg_controllen = libc::CMSG_SPACE(payload as u32) as _;
                    let c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                    (*c).cmsg_level = level;
                    (*c).cmsg_type = kind;
                    (*c).cmsg_len = libc::CMSG_LEN(payload as u32) as _;
                    let data = libc::CMSG_DATA(c);
                    match dst {
                        PktInfo::V4 { addr } => {
                            let p = libc::in_pktinfo {
                                ipi_ifindex: 0,
                                ipi_spec_dst: libc::in_addr { s_addr: u32::from_ne_bytes(addr.octets()) },
                                ipi_addr: libc::in_addr { s_addr: 0 },
                            };
                            std::ptr::write_unaligned(data.cast::<libc::in_pktinfo>(), p);
                        }
                        PktInfo::V6 { addr, ifindex } => {
                            let p = libc::in6_pktinfo {
                                ipi6_addr: libc::in6_addr { s6_addr: addr.octets() },
                                ipi6_ifindex: ifindex,
                            };
                            std::ptr::write_unaligned(data.cast::<libc::in6_pktinfo>(), p);
                        }
                    }
                }
            }
            k += 1;
        }
        self.s_count = k;
        k
    }

    /// `sendmmsg(MSG_DONTWAIT)` of the prepared replies `from..`: the count
    /// sent (the first not sent is retried by the next call), or the error of
    /// the first one.
    pub fn send_prepared(&mut self, fd: BorrowedFd<'_>, from: usize) -> io::Result<usize> {
        if from >= self.s_count {
            return Ok(0);
        }
        let n = self.s_count - from;
        // SAFETY: s_hdrs[from..s_count] were built by prepare_echo and point
        // at storage owned by `self` that has not changed since.
        let rc = unsafe {
            libc::sendmmsg(fd.as_raw_fd(), self.s_hdrs.as_mut_ptr().add(from), n as libc::c_uint, libc::MSG_DONTWAIT)
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(rc as usize)
    }
}

/// Buffers for one `sendmmsg` on a connected socket: up to `cap` datagrams
/// of `size` bytes each. Memory: `cap * (size + 80)` bytes, fixed.
pub struct SendBatch {
    cap: usize,
    size: usize,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl SendBatch {
    pub fn new(cap: usize, size: usize) -> SendBatch {
        let cap = cap.max(1);
        SendBatch {
            cap,
            size,
            bufs: vec![0u8; cap * size.max(1)],
            iovs: vec![empty_iovec(); cap],
            hdrs: vec![empty_mmsghdr(); cap],
        }
    }

    /// Datagram `i`'s bytes, to fill before sending.
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.size..(i + 1) * self.size]
    }

    /// `sendmmsg(MSG_DONTWAIT)` of datagrams `from..to` on a connected
    /// socket: the count sent, or the error of the first one.
    pub fn send(&mut self, fd: BorrowedFd<'_>, from: usize, to: usize) -> io::Result<usize> {
        let to = to.min(self.cap);
        if from >= to {
            return Ok(0);
        }
        let base = self.bufs.as_mut_ptr();
        for i in from..to {
            // SAFETY: i < cap, so the slot lies inside `bufs`.
            self.iovs[i] = libc::iovec { iov_base: unsafe { base.add(i * self.size) }.cast(), iov_len: self.size };
            let h = &mut self.hdrs[i];
            *h = empty_mmsghdr();
            h.msg_hdr.msg_iov = &mut self.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: hdrs[from..to] point at iovecs and buffers owned by `self`.
        let rc = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr().add(from),
                (to - from) as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(rc as usize)
    }
}

/// `sendto` of one datagram (the self-test's probes).
pub fn send_to(fd: BorrowedFd<'_>, buf: &[u8], to: &SocketAddr) -> io::Result<usize> {
    let (sa, len) = to_sockaddr(to);
    // SAFETY: `buf` and `sa` are live for the call; lengths match.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            0,
            (&sa as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

/// Symbolic name of an errno value (for counters keyed by error).
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EAGAIN => "EAGAIN",
        libc::ENOBUFS => "ENOBUFS",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ENETDOWN => "ENETDOWN",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::ENOMEM => "ENOMEM",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EINTR => "EINTR",
        libc::EBADF => "EBADF",
        libc::ENOTCONN => "ENOTCONN",
        libc::EDESTADDRREQ => "EDESTADDRREQ",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

pub const EADDRNOTAVAIL: i32 = libc::EADDRNOTAVAIL;
pub const EADDRINUSE: i32 = libc::EADDRINUSE;
pub const EACCES: i32 = libc::EACCES;
pub const EPERM: i32 = libc::EPERM;
pub const EAGAIN: i32 = libc::EAGAIN;
pub const ENOBUFS: i32 = libc::ENOBUFS;
pub const EINTR: i32 = libc::EINTR;
