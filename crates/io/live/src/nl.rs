//! Netlink framing shared by the interface readers ([`link`](crate::link)
//! over rtnetlink, [`netdev`](crate::netdev) over generic netlink): the
//! socket, requests built attribute by attribute, and bounds-checked walks
//! over messages (`nlmsghdr`) and attributes (`nlattr`), each padded to 4
//! bytes. A short or garbled answer ends a walk or gives `None`; nothing
//! here indexes or panics.
//!
//! Numbers are in host byte order, as netlink's are.

use rustix::net::{socket_with, sockopt, AddressFamily, Protocol, SocketFlags, SocketType};
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

pub(crate) const NLMSG_HDRLEN: usize = 16;
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLM_F_REQUEST: u16 = 1;
const NLA_HDRLEN: usize = 4;
/// Strips `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER` from an attribute type.
const NLA_TYPE_MASK: u16 = 0x3fff;
/// Longest answer read: one link's attributes are a few KiB, a generic
/// netlink family's description about one.
pub(crate) const RECV_BUF: usize = 32 * 1024;
/// The kernel answers at once; this only bounds a broken socket.
pub(crate) const RECV_TIMEOUT: Duration = Duration::from_secs(2);

/// A netlink socket of `protocol` (`None`: `NETLINK_ROUTE`, which is 0
/// and so not a rustix `Protocol`) in the calling thread's network
/// namespace, whose receives give up after [`RECV_TIMEOUT`].
pub(crate) fn socket(protocol: Option<Protocol>) -> io::Result<OwnedFd> {
    let fd = socket_with(AddressFamily::NETLINK, SocketType::RAW, SocketFlags::CLOEXEC, protocol)?;
    sockopt::set_socket_timeout(&fd, sockopt::Timeout::Recv, Some(RECV_TIMEOUT))?;
    Ok(fd)
}

/// `n` rounded up to netlink's 4-byte alignment.
pub(crate) fn align(n: usize) -> usize {
    (n + 3) & !3
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// One request: a message header, the family's fixed header, attributes.
pub(crate) struct Request(Vec<u8>);

impl Request {
    /// A request of message type `typ` (`NLM_F_REQUEST` set).
    pub(crate) fn new(typ: u16, seq: u32) -> Request {
        let mut m = Vec::with_capacity(64);
        m.extend_from_slice(&0u32.to_ne_bytes()); // length, set by `bytes`
        m.extend_from_slice(&typ.to_ne_bytes());
        m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel fills it in
        Request(m)
    }

    /// Appends a family header (`ifinfomsg`, `genlmsghdr`, ...), padded.
    pub(crate) fn fixed(mut self, header: &[u8]) -> Request {
        self.0.extend_from_slice(header);
        self.0.resize(align(self.0.len()), 0);
        self
    }

    /// Appends attribute `typ` with `payload`, padded to 4 bytes.
    pub(crate) fn attr(mut self, typ: u16, payload: &[u8]) -> Request {
        let len = (NLA_HDRLEN + payload.len()) as u16;
        self.0.extend_from_slice(&len.to_ne_bytes());
        self.0.extend_from_slice(&typ.to_ne_bytes());
        self.0.extend_from_slice(payload);
        self.0.resize(align(self.0.len()), 0);
        self
    }

    /// The bytes to send, length filled in.
    pub(crate) fn bytes(mut self) -> Vec<u8> {
        let len = (self.0.len() as u32).to_ne_bytes();
        self.0[..4].copy_from_slice(&len);
        self.0
    }
}

/// One message of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Msg<'a> {
    pub(crate) typ: u16,
    pub(crate) seq: u32,
    /// The whole message, header included.
    pub(crate) bytes: &'a [u8],
}

impl<'a> Msg<'a> {
    /// What follows the message header.
    pub(crate) fn payload(&self) -> &'a [u8] {
        self.bytes.get(NLMSG_HDRLEN..).unwrap_or(&[])
    }

    /// For an `NLMSG_ERROR`: the errno, positive (0 is an acknowledgement);
    /// `None` when the message is too short to hold it.
    pub(crate) fn errno(&self) -> Option<i32> {
        u32_at(self.payload(), 0).map(|e| (e as i32).wrapping_neg())
    }
}

/// A message header that claims less than a header, or more than the
/// datagram holds: the rest of the datagram cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadFrame;

/// The messages of datagram `b`, in order; a bad header gives one
/// `Err(BadFrame)` and ends the walk.
pub(crate) fn messages(b: &[u8]) -> impl Iterator<Item = Result<Msg<'_>, BadFrame>> {
    let mut at = 0usize;
    let mut done = false;
    std::iter::from_fn(move || {
        if done || at >= b.len() {
            return None;
        }
        let msg = (|| {
            let len = u32_at(b, at)? as usize;
            let bytes = b.get(at..at.checked_add(len)?).filter(|_| len >= NLMSG_HDRLEN)?;
            Some(Msg { typ: u16_at(b, at + 4)?, seq: u32_at(b, at + 8)?, bytes })
        })();
        match msg {
            Some(m) => {
                at += align(m.bytes.len());
                Some(Ok(m))
            }
            None => {
                done = true;
                Some(Err(BadFrame))
            }
        }
    })
}

/// The attributes in `b`: (type, payload), stopping at the first bad one.
pub(crate) fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(b, at)?);
        let typ = u16_at(b, at + 2)? & NLA_TYPE_MASK;
        if len < NLA_HDRLEN {
            return None;
        }
        let payload = b.get(at + NLA_HDRLEN..at + len)?;
        at += align(len);
        Some((typ, payload))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_padded_and_carries_its_length() {
        let r = Request::new(0x10, 5).fixed(&[3, 1]).attr(2, b"netdev\0").attr(1, &7u32.to_ne_bytes()).bytes();
        // 16 header + 4 (2 padded) + 12 (4 + 7 padded) + 8.
        assert_eq!(r.len(), 40);
        assert_eq!(u32_at(&r, 0), Some(40));
        assert_eq!((u16_at(&r, 4), u16_at(&r, 6), u32_at(&r, 8)), (Some(0x10), Some(NLM_F_REQUEST), Some(5)));
        assert_eq!(&r[16..20], &[3, 1, 0, 0]);
        assert_eq!((u16_at(&r, 20), u16_at(&r, 22)), (Some(11), Some(2)));
        assert_eq!(&r[24..32], b"netdev\0\0");
        assert_eq!((u16_at(&r, 32), u16_at(&r, 34), u32_at(&r, 36)), (Some(8), Some(1), Some(7)));
    }

    #[test]
    fn attributes_are_walked_at_4_byte_steps_and_masked() {
        let m = Request::new(1, 1).attr(1, &[9]).attr(0x8000 | 4, &[1, 2, 3, 4, 5]).attr(6, &[]).bytes();
        let got: Vec<_> = attrs(&m[NLMSG_HDRLEN..]).collect();
        assert_eq!(got, vec![(1, &[9][..]), (4, &[1, 2, 3, 4, 5][..]), (6, &[][..])]);
    }

    #[test]
    fn bad_attributes_end_the_walk() {
        // Shorter than its header, longer than the buffer, cut header.
        assert_eq!(attrs(&[2, 0, 1, 0, 8, 0, 1, 0]).count(), 0);
        assert_eq!(attrs(&[8, 0, 1, 0, 1, 2, 3, 4, 40, 0, 2, 0, 1]).count(), 1);
        assert_eq!(attrs(&[8, 0, 1]).count(), 0);
        assert_eq!(attrs(&[]).count(), 0);
    }

    #[test]
    fn messages_are_split_and_bad_framing_is_reported_once() {
        let mut d = Request::new(20, 1).fixed(&[1]).bytes();
        d.extend(Request::new(21, 2).bytes());
        let got: Vec<_> = messages(&d).map(|m| m.map(|m| (m.typ, m.seq, m.bytes.len()))).collect();
        assert_eq!(got, vec![Ok((20, 1, 20)), Ok((21, 2, 16))]);
        assert_eq!(messages(&[]).count(), 0);
        // A header claiming 8 bytes, one claiming more than there is, a cut one.
        let mut short = Request::new(20, 1).bytes();
        short[0] = 8;
        let mut long = Request::new(20, 1).bytes();
        long[0] = 200;
        for bad in [&short[..], &long[..], &[16, 0, 0][..]] {
            assert_eq!(messages(bad).collect::<Vec<_>>(), vec![Err(BadFrame)]);
        }
        let mut tail = Request::new(20, 1).bytes();
        tail.extend([1, 2, 3]);
        assert_eq!(messages(&tail).filter(Result::is_err).count(), 1);
    }

    #[test]
    fn errno_is_positive_and_needs_its_four_bytes() {
        let m = Request::new(NLMSG_ERROR, 1).fixed(&(-19i32).to_ne_bytes()).bytes();
        let msg = messages(&m).next().unwrap().unwrap();
        assert_eq!(msg.errno(), Some(19));
        let none = Request::new(NLMSG_ERROR, 1).bytes();
        assert_eq!(messages(&none).next().unwrap().unwrap().errno(), None);
    }
}
