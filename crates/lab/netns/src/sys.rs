//! The two system calls the lab needs: setns(2) and if_nametoindex(3).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::AsRawFd;

use crate::error::NetnsError;

pub fn setns_by_name(ns: &str) -> Result<(), NetnsError> {
    let path = format!("/run/netns/{ns}");
    let f =
        std::fs::File::open(&path).map_err(|error| NetnsError::OpenNamespace { ns: ns.to_string(), path, error })?;
    // SAFETY: `f` is an open namespace file descriptor for the duration of
    // the call; setns only changes the calling thread's network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(NetnsError::Setns { ns: ns.to_string(), error: std::io::Error::last_os_error() })
    }
}

pub fn ifindex(dev: &str) -> Result<u32, NetnsError> {
    let name = CString::new(dev).map_err(|_| NetnsError::BadInterfaceName(dev.to_string()))?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx == 0 {
        Err(NetnsError::NoInterface { dev: dev.to_string(), error: std::io::Error::last_os_error() })
    } else {
        Ok(idx)
    }
}

/// A raw ICMP (IPv4) or ICMPv6 socket in the calling thread's namespace,
/// wrapped as a `UdpSocket` for its `send_to` / `recv_from` / timeouts:
/// those are plain sendto(2) / recvfrom(2), which raw sockets take
/// (IPv4 receives include the IP header; the port of an address is 0).
pub fn raw_icmp_socket(v6: bool) -> std::io::Result<std::net::UdpSocket> {
    use std::os::fd::FromRawFd;
    let (family, proto) = if v6 { (libc::AF_INET6, libc::IPPROTO_ICMPV6) } else { (libc::AF_INET, libc::IPPROTO_ICMP) };
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(family, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else; UdpSocket only
    // issues sendto/recvfrom/setsockopt(SO_RCVTIMEO)/close on it here.
    Ok(unsafe { std::net::UdpSocket::from_raw_fd(fd) })
}
