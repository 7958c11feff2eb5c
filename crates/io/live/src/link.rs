//! An interface's state and counters, asked of the kernel by index over
//! rtnetlink (`RTM_GETLINK`): whether it still exists and is up, its
//! `rx_packets` / `tx_packets` / `rx_dropped` / `tx_dropped` (the kernel's
//! `rtnl_link_stats64`, core drops included), and for a veth its peer, which
//! may live in another network namespace (asked with
//! `IFLA_TARGET_NETNSID`).
//!
//! By index, not by name: a new interface of the same name is not ours.
//! Netlink answers for the namespace the socket was created in, so a
//! [`LinkReader`] made in one thread may be used from any other.
//!
//! [`LinkWatcher`] is the event side, as `ip monitor link`: a socket in
//! the `RTMGRP_LINK` group that the kernel writes to whenever a link
//! changes (up, down, carrier, MTU, a new or deleted interface), read
//! without blocking, so its owner re-reads its links at once instead of
//! polling them.
//!
//! (sysfs, `/sys/class/net`, shows the namespace it was mounted in, not
//! the thread's: a thread that entered another namespace reads it here.)
//!
//! By name only where a name is all there is ([`LinkReader::read_name`]:
//! what the user typed, to learn the index and the link type).

use crate::nl::{self, attrs, messages, u16_at, u32_at, u64_at, Request, NLMSG_ERROR, NLMSG_HDRLEN};
use rustix::net::{recv, send, RecvFlags, SendFlags};
use std::io;
use std::os::fd::OwnedFd;

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const IFINFOMSG_LEN: usize = 16;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINK: u16 = 5;
const IFLA_LINKINFO: u16 = 18;
const IFLA_STATS64: u16 = 23;
const IFLA_LINK_NETNSID: u16 = 37;
const IFLA_TARGET_NETNSID: u16 = 46;
const IFLA_INFO_KIND: u16 = 1;
const RTM_DELLINK: u16 = 17;
const IFF_UP: u32 = 1;
/// The driver signals the link is operational (carrier).
const IFF_LOWER_UP: u32 = 1 << 16;
/// `RTMGRP_LINK`: link change notifications.
const RTMGRP_LINK: u32 = 1;
/// `IFF_LOOPBACK`, in [`LinkInfo::flags`].
pub const IFF_LOOPBACK: u32 = 0x8;
/// `ARPHRD_ETHER`, the [`LinkInfo::link_type`] of Ethernet (veth, tap,
/// dummy, bond, VLAN and physical NICs alike).
pub const ARPHRD_ETHER: u16 = 1;
/// Longest interface name (`IFNAMSIZ` less its NUL).
const IFNAME_MAX: usize = 15;

/// What the kernel says about one interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkInfo {
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Has carrier (`IFF_LOWER_UP`): the driver says the link works; a
    /// veth has it while its peer is up.
    pub carrier: bool,
    /// The interface's index (`ifi_index`).
    pub ifindex: u32,
    /// `ifi_type`: the link type, an `ARPHRD_*` number ([`ARPHRD_ETHER`];
    /// 772 loopback, 65534 none (tun, wireguard), 768 ipip, 778 gre, ...).
    pub link_type: u16,
    /// `ifi_flags`: `IFF_*` ([`IFF_LOOPBACK`], ...).
    pub flags: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    /// `IFLA_IFNAME`: the interface's name.
    pub name: String,
    /// `IFLA_ADDRESS` when it is a 6-byte (Ethernet) address.
    pub mac: Option<[u8; 6]>,
    /// `IFLA_INFO_KIND` ("veth", "vlan", ...); empty for a physical device.
    pub kind: String,
    /// `IFLA_LINK`: for a veth, its peer's index.
    pub link: Option<u32>,
    /// `IFLA_LINK_NETNSID`: the namespace of `link`, when not this one.
    pub link_netnsid: Option<i32>,
}

/// A netlink socket that reads interfaces by index.
#[derive(Debug)]
pub struct LinkReader {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl LinkReader {
    /// A route netlink socket in the calling thread's network namespace.
    pub fn new() -> io::Result<LinkReader> {
        Ok(LinkReader { fd: nl::socket(None)?, seq: 0, buf: vec![0; nl::RECV_BUF] })
    }

    /// The interface of index `ifindex` (in namespace `netnsid` as this
    /// one numbers it, or this one); `None` when there is none.
    pub fn read(&mut self, ifindex: u32, netnsid: Option<i32>) -> io::Result<Option<LinkInfo>> {
        self.seq = self.seq.wrapping_add(1);
        let req = request(ifindex, netnsid, self.seq);
        self.ask(&req)
    }

    /// The interface named `name` in this reader's namespace; `None` when
    /// there is none (a name longer than an interface name can be included).
    pub fn read_name(&mut self, name: &str) -> io::Result<Option<LinkInfo>> {
        if name.is_empty() || name.len() > IFNAME_MAX || name.contains('\0') {
            return Ok(None);
        }
        self.seq = self.seq.wrapping_add(1);
        let req = request_name(name, self.seq);
        self.ask(&req)
    }

    /// Sends `req` (sequence number `self.seq`) and reads its answer.
    fn ask(&mut self, req: &[u8]) -> io::Result<Option<LinkInfo>> {
        send(&self.fd, req, SendFlags::empty())?;
        loop {
            let (n, _) = recv(&self.fd, &mut self.buf[..], RecvFlags::empty())?;
            match parse_answer(&self.buf[..n.min(self.buf.len())], self.seq) {
                Answer::Link(info) => return Ok(Some(info)),
                Answer::Error(e) if e == libc_enodev() => return Ok(None),
                Answer::Error(e) => return Err(io::Error::from_raw_os_error(e)),
                Answer::Other => continue,
            }
        }
    }
}

/// Link change notifications (`RTMGRP_LINK`) of the calling thread's
/// network namespace, read without blocking.
///
/// The kernel queues one message per change in the socket's receive
/// buffer; when the owner reads too late and the buffer overflowed, the
/// read fails with `ENOBUFS`, which [`LinkWatcher::changed`] reports as a
/// change too (something was missed: read every link again).
#[derive(Debug)]
pub struct LinkWatcher {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl LinkWatcher {
    /// A route netlink socket subscribed to link changes.
    pub fn new() -> io::Result<LinkWatcher> {
        let fd = nl::socket(None)?;
        rustix::net::bind(&fd, &rustix::net::netlink::SocketAddrNetlink::new(0, RTMGRP_LINK))?;
        Ok(LinkWatcher { fd, buf: vec![0; nl::RECV_BUF] })
    }

    /// Whether any link changed since the last call: takes every
    /// notification waiting, never blocks.
    pub fn changed(&mut self) -> io::Result<bool> {
        let mut changed = false;
        loop {
            match recv(&self.fd, &mut self.buf[..], RecvFlags::DONTWAIT) {
                Ok((n, _)) => {
                    let b = &self.buf[..n.min(self.buf.len())];
                    changed |= messages(b).map_while(Result::ok).any(|m| m.typ == RTM_NEWLINK || m.typ == RTM_DELLINK);
                }
                Err(rustix::io::Errno::AGAIN) => return Ok(changed),
                Err(rustix::io::Errno::NOBUFS) => changed = true,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl std::os::fd::AsFd for LinkWatcher {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn libc_enodev() -> i32 {
    rustix::io::Errno::NODEV.raw_os_error()
}

/// `RTM_GETLINK` for one index, with the target namespace when given.
fn request(ifindex: u32, netnsid: Option<i32>, seq: u32) -> Vec<u8> {
    // struct ifinfomsg: family, pad, type, index, flags, change.
    let mut ifinfo = [0u8; IFINFOMSG_LEN];
    ifinfo[4..8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    let req = Request::new(RTM_GETLINK, seq).fixed(&ifinfo);
    match netnsid {
        Some(ns) => req.attr(IFLA_TARGET_NETNSID, &ns.to_ne_bytes()).bytes(),
        None => req.bytes(),
    }
}

/// `RTM_GETLINK` for one name (index 0: the kernel looks the name up).
fn request_name(name: &str, seq: u32) -> Vec<u8> {
    let mut ifname = name.as_bytes().to_vec();
    ifname.push(0);
    Request::new(RTM_GETLINK, seq).fixed(&[0u8; IFINFOMSG_LEN]).attr(IFLA_IFNAME, &ifname).bytes()
}

enum Answer {
    Link(LinkInfo),
    /// A positive errno.
    Error(i32),
    /// Not the answer to our request.
    Other,
}

fn parse_answer(b: &[u8], seq: u32) -> Answer {
    for msg in messages(b).map_while(Result::ok).filter(|m| m.seq == seq) {
        match msg.typ {
            NLMSG_ERROR => return Answer::Error(msg.errno().unwrap_or(0)),
            RTM_NEWLINK => return parse_link(msg.bytes),
            _ => {}
        }
    }
    Answer::Other
}

fn parse_link(msg: &[u8]) -> Answer {
    let Some(flags) = u32_at(msg, NLMSG_HDRLEN + 8) else { return Answer::Other };
    let mut info = LinkInfo {
        up: flags & IFF_UP != 0,
        carrier: flags & IFF_LOWER_UP != 0,
        ifindex: u32_at(msg, NLMSG_HDRLEN + 4).unwrap_or(0),
        link_type: u16_at(msg, NLMSG_HDRLEN + 2).unwrap_or(0),
        flags,
        ..LinkInfo::default()
    };
    for (typ, p) in attrs(msg.get(NLMSG_HDRLEN + IFINFOMSG_LEN..).unwrap_or(&[])) {
        match typ {
            IFLA_STATS64 => {
                info.rx_packets = u64_at(p, 0).unwrap_or(0);
                info.tx_packets = u64_at(p, 8).unwrap_or(0);
                info.rx_dropped = u64_at(p, 6 * 8).unwrap_or(0);
                info.tx_dropped = u64_at(p, 7 * 8).unwrap_or(0);
            }
            IFLA_ADDRESS => info.mac = p.try_into().ok(),
            IFLA_IFNAME => info.name = String::from_utf8_lossy(p).trim_end_matches('\0').to_string(),
            IFLA_LINK => info.link = u32_at(p, 0),
            IFLA_LINK_NETNSID => info.link_netnsid = u32_at(p, 0).map(|v| v as i32),
            IFLA_LINKINFO => {
                if let Some((_, kind)) = attrs(p).find(|(t, _)| *t == IFLA_INFO_KIND) {
                    info.kind = String::from_utf8_lossy(kind).trim_end_matches('\0').to_string();
                }
            }
            _ => {}
        }
    }
    Answer::Link(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_layout() {
        let r = request(7, Some(3), 9);
        assert_eq!(r.len(), 40);
        assert_eq!(u32_at(&r, 0), Some(40));
        assert_eq!(u16_at(&r, 4), Some(RTM_GETLINK));
        assert_eq!(u32_at(&r, 8), Some(9));
        assert_eq!(u32_at(&r, 20), Some(7));
        assert_eq!((u16_at(&r, 32), u16_at(&r, 34), u32_at(&r, 36)), (Some(8), Some(IFLA_TARGET_NETNSID), Some(3)));
        assert_eq!(request(7, None, 9).len(), 32);
        let r = request_name("veth0", 4);
        // 16 header + 16 ifinfomsg + 4 + "veth0\0" padded to 8.
        assert_eq!(r.len(), 44);
        assert_eq!((u32_at(&r, 8), u32_at(&r, 20)), (Some(4), Some(0)));
        assert_eq!((u16_at(&r, 32), u16_at(&r, 34)), (Some(10), Some(IFLA_IFNAME)));
        assert_eq!(&r[36..44], b"veth0\0\0\0");
    }

    #[test]
    fn truncated_answers_are_not_links() {
        assert!(matches!(parse_answer(&[], 1), Answer::Other));
        assert!(matches!(parse_answer(&[40, 0, 0, 0, 16, 0], 1), Answer::Other));
    }

    #[test]
    fn loopback_is_read_and_a_missing_index_is_none() {
        let mut r = LinkReader::new().unwrap();
        // Index 1 is the loopback of every namespace.
        let lo = r.read(1, None).unwrap().expect("lo");
        assert!(lo.up && lo.carrier);
        assert_eq!((lo.ifindex, lo.link_type, lo.name.as_str()), (1, 772, "lo"));
        assert!(lo.flags & IFF_LOOPBACK != 0);
        assert_eq!(r.read(0x7fff_fff0, None).unwrap(), None);
        let by_name = r.read_name("lo").unwrap().expect("lo by name");
        assert_eq!((by_name.ifindex, by_name.link_type, by_name.flags), (1, 772, lo.flags));
        for missing in ["fs-no-such-if", "", "a-name-too-long-to-be-one"] {
            assert_eq!(r.read_name(missing).unwrap(), None, "{missing}");
        }
    }
}
