//! The CLI's only system calls outside the library crates.
#![allow(unsafe_code)]

/// Restores the default SIGPIPE action, so `flowsteer ... | head` ends
/// quietly when the reader goes away, as C tools do (Rust ignores SIGPIPE
/// and `println!` would then panic on EPIPE).
pub fn default_sigpipe() {
    // SAFETY: called once at start-up before any thread is spawned; sets a
    // signal disposition to SIG_DFL, no handler code runs in our process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The interface that holds `ip` as one of its addresses on this host (in
/// this network namespace), or `None`.
pub fn iface_with_addr(ip: std::net::IpAddr) -> Option<String> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list it allocates; we free it
    // below with freeifaddrs and read it only in between.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() && found.is_none() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() && !ifa.ifa_name.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family field says
            // which sockaddr_* it is; we read only the matching type.
            let addr = unsafe {
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
                    }
                    _ => None,
                }
            };
            if addr == Some(ip) {
                // SAFETY: ifa_name is a NUL-terminated string owned by the list.
                let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
                found = Some(name.to_string_lossy().into_owned());
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once; no reference
    // into the list outlives this call (the name was copied).
    unsafe { libc::freeifaddrs(head) };
    found
}
