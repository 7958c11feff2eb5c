//! Where the kernel would send a packet to one address, asked over
//! rtnetlink (`RTM_GETROUTE`, as `ip route get ADDR [from SRC]`): the
//! route's type (local, unicast, ...), its gateway, the outgoing interface
//! and source address it picks, and (a second request with
//! `RTM_F_FIB_MATCH`, Linux >= 4.13) the prefix length of the routing
//! table entry that matched, so a default route is told from a connected
//! network. No route (and an unreachable, prohibit or blackhole one) is
//! the kernel's errno, [`LiveError::NoRoute`].
//!
//! The answer is for the calling thread's network namespace and policy
//! rules, exactly what a socket of this process would get; nothing is
//! guessed from addresses and prefixes.

use crate::error::LiveError;
use crate::link::LinkReader;
use crate::nl::{self, attrs, messages, u16_at, u32_at, Request, NLMSG_ERROR, NLMSG_HDRLEN};
use rustix::net::{recv, send, RecvFlags, SendFlags};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
/// `struct rtmsg`: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
const RTMSG_LEN: usize = 12;
const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PREFSRC: u16 = 7;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
/// `struct rtnexthop`: len, flags, hops, ifindex; its attributes follow.
const RTNH_LEN: usize = 8;
/// Answer with the routing table entry that matched, not the resolved route.
const RTM_F_FIB_MATCH: u32 = 0x2000;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// `rtm_type`: what the kernel does with a packet to the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// `RTN_UNICAST`: sent out of an interface, directly or through a gateway.
    Unicast,
    /// `RTN_LOCAL`: an address of this host (loopback included).
    Local,
    /// `RTN_BROADCAST`: a broadcast address of a connected network.
    Broadcast,
    /// `RTN_MULTICAST`.
    Multicast,
    /// Any other `RTN_*` number (the kernel answers the unreachable,
    /// prohibit and blackhole types with an error instead).
    Other(u8),
}

impl RouteKind {
    fn from_rtn(t: u8) -> RouteKind {
        match t {
            1 => RouteKind::Unicast,
            2 => RouteKind::Local,
            3 => RouteKind::Broadcast,
            5 => RouteKind::Multicast,
            t => RouteKind::Other(t),
        }
    }
}

/// The kernel's route to one destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The destination asked about.
    pub dst: IpAddr,
    pub kind: RouteKind,
    /// The next hop when the destination is not on a directly connected
    /// network (`RTA_GATEWAY`, `RTA_VIA` for a next hop of the other
    /// family, or the first path of a multipath route).
    pub gateway: Option<IpAddr>,
    /// The outgoing interface's index (`RTA_OIF`).
    pub oif: Option<u32>,
    /// Its name, when the kernel still knows the index.
    pub dev: Option<String>,
    /// The source address the kernel picks (`RTA_PREFSRC`).
    pub src: Option<IpAddr>,
    /// The routing table (`RTA_TABLE`, else `rtm_table`).
    pub table: u32,
    /// Prefix length of the routing table entry that matched (0: a
    /// default route); `None` when the kernel did not say.
    pub prefix_len: Option<u8>,
}

impl Route {
    /// An address of this host: loopback, or one of its interfaces'.
    pub fn is_local(&self) -> bool {
        self.kind == RouteKind::Local
    }

    /// Not on a directly connected network: the route has a gateway, or it
    /// is a default route (a device-only one included, as a VPN's or a
    /// point-to-point link's). Local addresses never are.
    pub fn is_routed(&self) -> bool {
        !self.is_local() && (self.gateway.is_some() || self.is_default())
    }

    /// Matched a default route (prefix length 0).
    pub fn is_default(&self) -> bool {
        self.prefix_len == Some(0)
    }
}

/// As `ip route get` prints it: `198.51.100.1 via 192.0.2.1 dev eth0 src
/// 192.0.2.2`.
impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            RouteKind::Local => write!(f, "local {}", self.dst)?,
            RouteKind::Broadcast => write!(f, "broadcast {}", self.dst)?,
            RouteKind::Multicast => write!(f, "multicast {}", self.dst)?,
            RouteKind::Unicast | RouteKind::Other(_) => write!(f, "{}", self.dst)?,
        }
        if let Some(gw) = self.gateway {
            write!(f, " via {gw}")?;
        }
        match (&self.dev, self.oif) {
            (Some(dev), _) => write!(f, " dev {dev}")?,
            (None, Some(i)) => write!(f, " dev #{i}")?,
            (None, None) => {}
        }
        if let Some(src) = self.src {
            write!(f, " src {src}")?;
        }
        Ok(())
    }
}

/// The route the kernel would give a packet to `dst` (from `src`, when
/// given, for policy rules that select on the source; `src` must then be an
/// address of this host, or the kernel refuses with `EINVAL`).
pub fn get(dst: IpAddr, src: Option<IpAddr>) -> Result<Route, LiveError> {
    let netlink = |error: io::Error| LiveError::Netlink { what: format!("route to {dst}"), error };
    let fd = nl::socket(None).map_err(netlink)?;
    let mut buf = vec![0u8; nl::RECV_BUF];
    // The kernel's answer to request `seq`: a route, or a positive errno.
    let mut ask = |seq: u32, flags: u32| -> io::Result<Result<Route, i32>> {
        send(&fd, &request(dst, src, flags, seq), SendFlags::empty())?;
        loop {
            let (n, _) = recv(&fd, &mut buf[..], RecvFlags::empty())?;
            match parse_answer(&buf[..n.min(buf.len())], seq) {
                Answer::Route(r) => return Ok(Ok(r)),
                Answer::Error(e) => return Ok(Err(e)),
                Answer::Other => continue,
            }
        }
    };
    let mut route =
        ask(1, 0).map_err(netlink)?.map_err(|e| LiveError::NoRoute { dst, error: io::Error::from_raw_os_error(e) })?;
    // The entry that matched, for its prefix length; a kernel without
    // RTM_F_FIB_MATCH ignores the flag and answers the resolved route
    // again (a full-length prefix).
    route.prefix_len = match ask(2, RTM_F_FIB_MATCH) {
        Ok(Ok(entry)) => entry.prefix_len,
        _ => None,
    };
    if let Some(oif) = route.oif {
        route.dev = LinkReader::new().ok().and_then(|mut r| r.read(oif, None).ok().flatten()).map(|l| l.name);
    }
    Ok(route)
}

fn addr_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// `RTM_GETROUTE` for `dst` (and `src`), with `rtm_flags`.
fn request(dst: IpAddr, src: Option<IpAddr>, flags: u32, seq: u32) -> Vec<u8> {
    let (family, bits) = match dst {
        IpAddr::V4(_) => (AF_INET, 32u8),
        IpAddr::V6(_) => (AF_INET6, 128u8),
    };
    let mut rtmsg = [0u8; RTMSG_LEN];
    rtmsg[0] = family;
    rtmsg[1] = bits;
    // A source of the other family would be refused: leave it out.
    let src = src.filter(|s| s.is_ipv6() == dst.is_ipv6());
    if src.is_some() {
        rtmsg[2] = bits;
    }
    rtmsg[8..12].copy_from_slice(&flags.to_ne_bytes());
    let req = Request::new(RTM_GETROUTE, seq).fixed(&rtmsg).attr(RTA_DST, &addr_bytes(dst));
    match src {
        Some(s) => req.attr(RTA_SRC, &addr_bytes(s)).bytes(),
        None => req.bytes(),
    }
}

enum Answer {
    Route(Route),
    /// A positive errno.
    Error(i32),
    /// Not the answer to our request.
    Other,
}

fn parse_answer(b: &[u8], seq: u32) -> Answer {
    for msg in messages(b).map_while(Result::ok).filter(|m| m.seq == seq) {
        match msg.typ {
            NLMSG_ERROR => return Answer::Error(msg.errno().unwrap_or(0)),
            RTM_NEWROUTE => {
                if let Some(r) = parse_route(msg.bytes) {
                    return Answer::Route(r);
                }
            }
            _ => {}
        }
    }
    Answer::Other
}

/// An address attribute of `family`.
fn addr(family: u8, p: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(p.get(..4)?).ok()?))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(p.get(..16)?).ok()?))),
        _ => None,
    }
}

/// `RTA_VIA`: `struct rtvia`, a 16-bit family and the address.
fn via(p: &[u8]) -> Option<IpAddr> {
    let family = u8::try_from(u16_at(p, 0)?).ok()?;
    addr(family, p.get(2..)?)
}

/// The gateway of the first path of `RTA_MULTIPATH` (`rtnexthop`s).
fn first_hop_gateway(family: u8, p: &[u8]) -> Option<IpAddr> {
    let len = usize::from(u16_at(p, 0)?);
    let hop_attrs = p.get(RTNH_LEN..len)?;
    attrs(hop_attrs).find_map(|(t, a)| match t {
        RTA_GATEWAY => addr(family, a),
        RTA_VIA => via(a),
        _ => None,
    })
}

fn parse_route(msg: &[u8]) -> Option<Route> {
    let rtm = msg.get(NLMSG_HDRLEN..NLMSG_HDRLEN + RTMSG_LEN)?;
    let (family, dst_len, table, rtn) = (rtm[0], rtm[1], rtm[4], rtm[7]);
    let mut r = Route {
        dst: if family == AF_INET6 { IpAddr::V6(Ipv6Addr::UNSPECIFIED) } else { IpAddr::V4(Ipv4Addr::UNSPECIFIED) },
        kind: RouteKind::from_rtn(rtn),
        gateway: None,
        oif: None,
        dev: None,
        src: None,
        table: u32::from(table),
        prefix_len: Some(dst_len),
    };
    let mut multipath = None;
    for (typ, p) in attrs(msg.get(NLMSG_HDRLEN + RTMSG_LEN..).unwrap_or(&[])) {
        match typ {
            RTA_DST => r.dst = addr(family, p).unwrap_or(r.dst),
            RTA_OIF => r.oif = u32_at(p, 0),
            RTA_GATEWAY => r.gateway = addr(family, p),
            RTA_VIA => r.gateway = via(p),
            RTA_PREFSRC => r.src = addr(family, p),
            RTA_TABLE => r.table = u32_at(p, 0).unwrap_or(r.table),
            RTA_MULTIPATH => multipath = first_hop_gateway(family, p),
            _ => {}
        }
    }
    r.gateway = r.gateway.or(multipath);
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `RTM_NEWROUTE` answer: rtmsg fields, then attributes.
    fn answer(seq: u32, family: u8, dst_len: u8, rtn: u8, attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut rtmsg = [0u8; RTMSG_LEN];
        (rtmsg[0], rtmsg[1], rtmsg[4], rtmsg[7]) = (family, dst_len, 254, rtn);
        let mut req = Request::new(RTM_NEWROUTE, seq).fixed(&rtmsg);
        for (t, p) in attrs {
            req = req.attr(*t, p);
        }
        req.bytes()
    }

    fn route(b: &[u8], seq: u32) -> Route {
        match parse_answer(b, seq) {
            Answer::Route(r) => r,
            _ => panic!("no route in the answer"),
        }
    }

    #[test]
    fn request_layout() {
        let r = request("198.51.100.1".parse().unwrap(), None, RTM_F_FIB_MATCH, 7);
        // 16 header + 12 rtmsg + 8 RTA_DST.
        assert_eq!(r.len(), 36);
        assert_eq!((u16_at(&r, 4), u32_at(&r, 8)), (Some(RTM_GETROUTE), Some(7)));
        assert_eq!(&r[16..20], &[AF_INET, 32, 0, 0]);
        assert_eq!(u32_at(&r, 24), Some(RTM_F_FIB_MATCH));
        assert_eq!((u16_at(&r, 28), u16_at(&r, 30)), (Some(8), Some(RTA_DST)));
        assert_eq!(&r[32..36], &[198, 51, 100, 1]);
        let r = request("2001:db8::1".parse().unwrap(), Some("fd00::2".parse().unwrap()), 0, 1);
        assert_eq!(r.len(), 16 + 12 + 20 + 20);
        assert_eq!(&r[16..19], &[AF_INET6, 128, 128]);
        // A source of the other family is left out.
        let r = request("2001:db8::1".parse().unwrap(), Some("10.0.0.1".parse().unwrap()), 0, 1);
        assert_eq!((r.len(), r[18]), (48, 0));
    }

    #[test]
    fn answers_are_parsed() {
        let b = answer(
            3,
            AF_INET,
            32,
            1,
            &[
                (RTA_DST, vec![198, 51, 100, 1]),
                (RTA_OIF, 2u32.to_ne_bytes().to_vec()),
                (RTA_GATEWAY, vec![192, 0, 2, 1]),
                (RTA_PREFSRC, vec![192, 0, 2, 2]),
                (RTA_TABLE, 254u32.to_ne_bytes().to_vec()),
            ],
        );
        let r = route(&b, 3);
        assert_eq!(r.dst, "198.51.100.1".parse::<IpAddr>().unwrap());
        assert_eq!((r.kind, r.oif, r.table), (RouteKind::Unicast, Some(2), 254));
        assert_eq!(r.gateway, Some("192.0.2.1".parse().unwrap()));
        assert_eq!(r.src, Some("192.0.2.2".parse().unwrap()));
        assert!(r.is_routed() && !r.is_local());
        assert_eq!(r.to_string(), "198.51.100.1 via 192.0.2.1 dev #2 src 192.0.2.2");
        // Another sequence number is not ours.
        assert!(matches!(parse_answer(&b, 4), Answer::Other));

        // A connected network; then the same as its default route, device only.
        let mut r = route(&answer(1, AF_INET, 32, 1, &[(RTA_DST, vec![192, 0, 2, 9])]), 1);
        r.dev = Some("eth0".into());
        assert!(!r.is_routed());
        assert_eq!(r.to_string(), "192.0.2.9 dev eth0");
        r.prefix_len = Some(0);
        assert!(r.is_routed() && r.is_default());

        let local = route(&answer(1, AF_INET6, 128, 2, &[(RTA_DST, Ipv6Addr::LOCALHOST.octets().to_vec())]), 1);
        assert!(local.is_local() && !local.is_routed());
        assert_eq!(local.to_string(), "local ::1");

        // An IPv4 route through an IPv6 next hop (RTA_VIA).
        let mut v = (u16::from(AF_INET6)).to_ne_bytes().to_vec();
        v.extend("fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        let r = route(&answer(1, AF_INET, 32, 1, &[(RTA_VIA, v)]), 1);
        assert_eq!(r.gateway, Some("fe80::1".parse().unwrap()));
    }

    #[test]
    fn a_multipath_route_gives_its_first_gateway() {
        let hop = |gw: [u8; 4]| {
            let mut h = 16u16.to_ne_bytes().to_vec();
            h.extend([0, 0]);
            h.extend(3i32.to_ne_bytes());
            h.extend(8u16.to_ne_bytes());
            h.extend(RTA_GATEWAY.to_ne_bytes());
            h.extend(gw);
            h
        };
        let mut mp = hop([10, 0, 0, 1]);
        mp.extend(hop([10, 0, 0, 2]));
        let r = route(&answer(1, AF_INET, 32, 1, &[(RTA_MULTIPATH, mp)]), 1);
        assert_eq!(r.gateway, Some("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn errors_and_garbage() {
        let e = Request::new(NLMSG_ERROR, 5).fixed(&(-101i32).to_ne_bytes()).bytes();
        assert!(matches!(parse_answer(&e, 5), Answer::Error(101)));
        assert!(matches!(parse_answer(&[], 1), Answer::Other));
        // Cut inside the rtmsg.
        let b = answer(1, AF_INET, 32, 1, &[]);
        assert!(matches!(parse_answer(&b[..20], 1), Answer::Other));
        // Short address attributes are ignored.
        let r = route(&answer(1, AF_INET, 32, 1, &[(RTA_GATEWAY, vec![1, 2]), (RTA_VIA, vec![2])]), 1);
        assert_eq!(r.gateway, None);
    }

    #[test]
    fn loopback_is_local() {
        let v6 = crate::queues::iface_with_addr(IpAddr::V6(Ipv6Addr::LOCALHOST)).is_some();
        for dst in ["127.0.0.1", "127.0.0.2", "::1"].into_iter().filter(|d| v6 || *d != "::1") {
            let r = get(dst.parse().unwrap(), None).unwrap();
            assert!(r.is_local() && !r.is_routed(), "{dst}: {r:?}");
            assert_eq!(r.dev.as_deref(), Some("lo"), "{dst}: {r:?}");
        }
        let r = get("127.0.0.1".parse().unwrap(), Some("127.0.0.1".parse().unwrap())).unwrap();
        assert!(r.is_local());
    }
}
