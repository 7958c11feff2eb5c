//! An interface's XDP features, asked of the kernel by index over the
//! generic-netlink family "netdev" (`NETDEV_CMD_DEV_GET`, Linux 6.3 and
//! later): which XDP actions its driver runs, and whether it accepts frames
//! that XDP redirects to it. The numbers are those of
//! `include/uapi/linux/netdev.h` (generated from the kernel's
//! `Documentation/netlink/specs/netdev.yaml`) and
//! `include/uapi/linux/genetlink.h`.
//!
//! What the bridge asks it for: whether an `XDP_REDIRECT` into a port will
//! be taken ([`XdpFeatures::ndo_xmit`]). A veth accepts redirected frames
//! only while its *peer* has an XDP program attached or GRO on
//! (`veth_set_xdp_features` in `drivers/net/veth.c`): only then does the
//! peer run the NAPI that drains them; otherwise `veth_xdp_xmit` refuses
//! them and the redirect drops them. The kernel updates the flag when the
//! peer changes (XDP attached or detached, GRO toggled, queue counts
//! changed), so an answer holds when it is read, not after; ask again
//! after changing either end. A new veth has GRO off on both ends
//! (`veth_newlink`; seen on Linux 6.18), so by default neither end of a
//! pair has `ndo-xmit`.
//!
//! The flag is the kernel's bookkeeping, not a test of the path, and
//! misses two things (seen on Linux 6.18): it does not say whether the
//! peer is up (a down peer runs no NAPI, so redirects are refused while
//! the flag may be set), and GRO toggled on the peer *while it is down*
//! does not change it (`veth_set_features` returns early for a down
//! device), so it can stay set after GRO went off, or stay clear after
//! GRO went on. Trust it only with the peer up and its GRO set while up.
//!
//! The family's id is resolved once, when the reader is made
//! (`CTRL_CMD_GETFAMILY` to the controller); a kernel without the family
//! gives [`NetdevReader::new`] `Ok(None)`. Netlink answers for the
//! namespace the socket was created in, so a [`NetdevReader`] made in one
//! thread may be used from any other (one caller at a time: `&mut self`).

use crate::nl::{self, attrs, messages, u16_at, u32_at, u64_at, Msg, Request, NLMSG_ERROR};
use rustix::io::Errno;
use rustix::net::{netlink, recv, send, RecvFlags, SendFlags};
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;

/// `GENL_ID_CTRL`: the controller, which names the other families.
const GENL_ID_CTRL: u16 = 0x10;
const GENL_HDRLEN: usize = 4;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_VERSION: u8 = 2;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_FAMILY_NAME: &[u8] = b"netdev\0";
const NETDEV_FAMILY_VERSION: u8 = 1;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;

/// `enum netdev_xdp_act`: bit, and name as the kernel's spec spells it.
const FLAGS: [(u64, &str); 7] = [
    (1, "basic"),
    (2, "redirect"),
    (4, "ndo-xmit"),
    (8, "xsk-zerocopy"),
    (16, "hw-offload"),
    (32, "rx-sg"),
    (64, "ndo-xmit-sg"),
];

/// A device's `xdp_features` (`enum netdev_xdp_act` bits). Bits this
/// version does not name are kept, and shown in hex.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct XdpFeatures(u64);

impl XdpFeatures {
    pub const fn from_bits(bits: u64) -> XdpFeatures {
        XdpFeatures(bits)
    }

    pub const fn bits(self) -> u64 {
        self.0
    }

    /// `NETDEV_XDP_ACT_BASIC`: XDP_ABORTED, XDP_DROP, XDP_PASS and XDP_TX.
    pub const fn basic(self) -> bool {
        self.0 & 1 != 0
    }

    /// `NETDEV_XDP_ACT_REDIRECT`: a program on this device may return
    /// XDP_REDIRECT.
    pub const fn redirect(self) -> bool {
        self.0 & 2 != 0
    }

    /// `NETDEV_XDP_ACT_NDO_XMIT`: the device takes frames redirected to it
    /// by XDP (it implements `ndo_xdp_xmit` and can run it now; for a veth,
    /// its peer has an XDP program or GRO on).
    pub const fn ndo_xmit(self) -> bool {
        self.0 & 4 != 0
    }

    /// `NETDEV_XDP_ACT_XSK_ZEROCOPY`: AF_XDP sockets may bind zero-copy.
    pub const fn xsk_zerocopy(self) -> bool {
        self.0 & 8 != 0
    }

    /// `NETDEV_XDP_ACT_HW_OFFLOAD`: programs may run on the NIC itself.
    pub const fn hw_offload(self) -> bool {
        self.0 & 16 != 0
    }

    /// `NETDEV_XDP_ACT_RX_SG`: programs may receive multi-buffer frames.
    pub const fn rx_sg(self) -> bool {
        self.0 & 32 != 0
    }

    /// `NETDEV_XDP_ACT_NDO_XMIT_SG`: redirected multi-buffer frames are
    /// taken too.
    pub const fn ndo_xmit_sg(self) -> bool {
        self.0 & 64 != 0
    }

    /// The names of the bits set, in bit order (the spec's spelling).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        FLAGS.into_iter().filter(move |(bit, _)| self.0 & bit != 0).map(|(_, name)| name)
    }

    fn unnamed(self) -> u64 {
        self.0 & !FLAGS.iter().fold(0, |all, (bit, _)| all | bit)
    }
}

/// `basic redirect rx-sg`, `none` when empty, unnamed bits as `0x80`.
impl fmt::Display for XdpFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("none");
        }
        let mut sep = "";
        for name in self.names() {
            write!(f, "{sep}{name}")?;
            sep = " ";
        }
        if self.unnamed() != 0 {
            write!(f, "{sep}{:#x}", self.unnamed())?;
        }
        Ok(())
    }
}

impl fmt::Debug for XdpFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "XdpFeatures({self})")
    }
}

/// An answer the kernel would not send: the datagram is cut or garbled,
/// or lacks what the request asks for. Given as an `io::Error` of kind
/// `InvalidData` carrying this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Malformed {
    #[error("netlink answer: a message header runs past the datagram")]
    Frame,
    #[error("netlink answer: an error message too short for its errno")]
    ShortError,
    #[error("netlink answer: acknowledged without the answer asked for")]
    NoAnswer,
    #[error("netlink answer: shorter than its generic netlink header")]
    ShortGenl,
    #[error("generic netlink controller: no 2-byte CTRL_ATTR_FAMILY_ID in its answer")]
    NoFamilyId,
    #[error("netdev family: no 8-byte NETDEV_A_DEV_XDP_FEATURES in its answer")]
    NoXdpFeatures,
    #[error("netdev family: answered for interface {got}, not {asked}")]
    OtherDevice { asked: u32, got: u32 },
}

impl From<Malformed> for io::Error {
    fn from(m: Malformed) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, m)
    }
}

/// What one datagram says to request `seq`.
#[derive(Debug, PartialEq, Eq)]
enum Answer<T> {
    Reply(T),
    /// A positive errno.
    Errno(i32),
    /// Nothing for this request (a late answer to an earlier one).
    NotOurs,
}

/// The answer to request `seq` in datagram `b`: the first message of
/// type `typ` or `NLMSG_ERROR` carrying `seq`, read by `parse`.
fn answer<T>(
    b: &[u8],
    seq: u32,
    typ: u16,
    parse: impl FnOnce(&[u8]) -> Result<T, Malformed>,
) -> Result<Answer<T>, Malformed> {
    for msg in messages(b) {
        let msg: Msg<'_> = msg.map_err(|nl::BadFrame| Malformed::Frame)?;
        if msg.seq != seq {
            continue;
        }
        if msg.typ == NLMSG_ERROR {
            return match msg.errno().ok_or(Malformed::ShortError)? {
                0 => Err(Malformed::NoAnswer),
                e => Ok(Answer::Errno(e)),
            };
        }
        if msg.typ == typ {
            let attrs = msg.payload().get(GENL_HDRLEN..).ok_or(Malformed::ShortGenl)?;
            return parse(attrs).map(Answer::Reply);
        }
    }
    Ok(Answer::NotOurs)
}

/// A generic netlink request: `genlmsghdr` (cmd, version, reserved) first.
fn genl_request(family: u16, cmd: u8, version: u8, seq: u32) -> Request {
    Request::new(family, seq).fixed(&[cmd, version, 0, 0])
}

/// `CTRL_CMD_GETFAMILY` for "netdev".
fn family_request(seq: u32) -> Vec<u8> {
    genl_request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_VERSION, seq)
        .attr(CTRL_ATTR_FAMILY_NAME, NETDEV_FAMILY_NAME)
        .bytes()
}

fn parse_family(attrs_b: &[u8]) -> Result<u16, Malformed> {
    attrs(attrs_b).find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID).and_then(|(_, p)| u16_at(p, 0)).ok_or(Malformed::NoFamilyId)
}

/// `NETDEV_CMD_DEV_GET` for one index.
fn dev_request(family: u16, ifindex: u32, seq: u32) -> Vec<u8> {
    genl_request(family, NETDEV_CMD_DEV_GET, NETDEV_FAMILY_VERSION, seq)
        .attr(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes())
        .bytes()
}

fn parse_dev(attrs_b: &[u8], ifindex: u32) -> Result<XdpFeatures, Malformed> {
    let mut features = None;
    for (typ, p) in attrs(attrs_b) {
        match typ {
            NETDEV_A_DEV_IFINDEX => match u32_at(p, 0) {
                Some(got) if got != ifindex => return Err(Malformed::OtherDevice { asked: ifindex, got }),
                _ => {}
            },
            NETDEV_A_DEV_XDP_FEATURES => features = u64_at(p, 0).map(XdpFeatures),
            _ => {}
        }
    }
    features.ok_or(Malformed::NoXdpFeatures)
}

/// A generic netlink socket that reads devices' XDP features by index.
#[derive(Debug)]
pub struct NetdevReader {
    fd: OwnedFd,
    /// The "netdev" family's id on this kernel.
    family: u16,
    seq: u32,
    buf: Vec<u8>,
}

impl NetdevReader {
    /// A generic netlink socket in the calling thread's network namespace,
    /// with the "netdev" family resolved; `Ok(None)` when this kernel has
    /// no such family (before Linux 6.3), so XDP features cannot be read.
    pub fn new() -> io::Result<Option<NetdevReader>> {
        let mut reader =
            NetdevReader { fd: nl::socket(Some(netlink::GENERIC))?, family: 0, seq: 0, buf: vec![0; nl::RECV_BUF] };
        let seq = reader.next_seq();
        // The controller answers ENOENT for a family it does not know.
        match reader.ask(&family_request(seq), seq, GENL_ID_CTRL, Errno::NOENT, parse_family)? {
            Some(family) => {
                reader.family = family;
                Ok(Some(reader))
            }
            None => Ok(None),
        }
    }

    /// The XDP features of interface `ifindex`; `None` when there is none.
    pub fn xdp_features(&mut self, ifindex: u32) -> io::Result<Option<XdpFeatures>> {
        let seq = self.next_seq();
        let req = dev_request(self.family, ifindex, seq);
        self.ask(&req, seq, self.family, Errno::NODEV, |b| parse_dev(b, ifindex))
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Sends `req` and reads until its answer: `None` for errno `absent`.
    fn ask<T>(
        &mut self,
        req: &[u8],
        seq: u32,
        typ: u16,
        absent: Errno,
        parse: impl Fn(&[u8]) -> Result<T, Malformed>,
    ) -> io::Result<Option<T>> {
        send(&self.fd, req, SendFlags::empty())?;
        loop {
            let (n, _) = recv(&self.fd, &mut self.buf[..], RecvFlags::empty())?;
            match answer(&self.buf[..n.min(self.buf.len())], seq, typ, &parse)? {
                Answer::Reply(v) => return Ok(Some(v)),
                Answer::Errno(e) if e == absent.raw_os_error() => return Ok(None),
                Answer::Errno(e) => return Err(io::Error::from_raw_os_error(e)),
                Answer::NotOurs => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl::NLMSG_HDRLEN;

    const FAMILY: u16 = 0x1b;

    /// An answer as the kernel frames it: `genlmsghdr`, then attributes.
    fn reply(typ: u16, seq: u32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        attrs.iter().fold(genl_request(typ, 1, 1, seq), |r, (t, p)| r.attr(*t, p)).bytes()
    }

    fn error(seq: u32, errno: i32) -> Vec<u8> {
        // struct nlmsgerr: the negative errno, then the request's header.
        let mut body = (-errno).to_ne_bytes().to_vec();
        body.extend_from_slice(&[0; NLMSG_HDRLEN]);
        Request::new(NLMSG_ERROR, seq).fixed(&body).bytes()
    }

    /// A `DEV_GET` answer laid out as the kernel's: the u64 preceded by a
    /// `NETDEV_A_DEV_PAD` so that it sits 8-byte aligned.
    fn dev_reply(seq: u32, ifindex: u32, bits: u64) -> Vec<u8> {
        let (idx, bits) = (ifindex.to_ne_bytes(), bits.to_ne_bytes());
        reply(
            FAMILY,
            seq,
            &[(NETDEV_A_DEV_IFINDEX, &idx), (2, &[]), (NETDEV_A_DEV_XDP_FEATURES, &bits), (4, &[1, 0, 0, 0])],
        )
    }

    #[test]
    fn family_request_layout() {
        let r = family_request(7);
        // 16 header + 4 genl + 12 ("netdev\0" padded from 11).
        assert_eq!(r.len(), 32);
        assert_eq!((u32_at(&r, 0), u16_at(&r, 4), u32_at(&r, 8)), (Some(32), Some(GENL_ID_CTRL), Some(7)));
        assert_eq!(&r[16..20], &[CTRL_CMD_GETFAMILY, CTRL_VERSION, 0, 0]);
        assert_eq!((u16_at(&r, 20), u16_at(&r, 22)), (Some(11), Some(CTRL_ATTR_FAMILY_NAME)));
        assert_eq!(&r[24..32], b"netdev\0\0");
    }

    #[test]
    fn dev_request_layout() {
        let r = dev_request(FAMILY, 42, 9);
        assert_eq!(r.len(), 28);
        assert_eq!((u32_at(&r, 0), u16_at(&r, 4), u32_at(&r, 8)), (Some(28), Some(FAMILY), Some(9)));
        assert_eq!(&r[16..20], &[NETDEV_CMD_DEV_GET, NETDEV_FAMILY_VERSION, 0, 0]);
        assert_eq!((u16_at(&r, 20), u16_at(&r, 22), u32_at(&r, 24)), (Some(8), Some(NETDEV_A_DEV_IFINDEX), Some(42)));
    }

    #[test]
    fn family_id_is_read_among_other_attributes() {
        let a = reply(
            GENL_ID_CTRL,
            3,
            &[
                (CTRL_ATTR_FAMILY_NAME, NETDEV_FAMILY_NAME),
                (CTRL_ATTR_FAMILY_ID, &FAMILY.to_ne_bytes()),
                (3, &1u32.to_ne_bytes()),
            ],
        );
        assert_eq!(answer(&a, 3, GENL_ID_CTRL, parse_family), Ok(Answer::Reply(FAMILY)));
        let none = reply(GENL_ID_CTRL, 3, &[(CTRL_ATTR_FAMILY_NAME, NETDEV_FAMILY_NAME)]);
        assert_eq!(answer(&none, 3, GENL_ID_CTRL, parse_family), Err(Malformed::NoFamilyId));
        let short = reply(GENL_ID_CTRL, 3, &[(CTRL_ATTR_FAMILY_ID, &[1])]);
        assert_eq!(answer(&short, 3, GENL_ID_CTRL, parse_family), Err(Malformed::NoFamilyId));
    }

    #[test]
    fn a_kernel_without_the_family_answers_enoent() {
        let e = error(1, Errno::NOENT.raw_os_error());
        assert_eq!(answer(&e, 1, GENL_ID_CTRL, parse_family), Ok(Answer::Errno(Errno::NOENT.raw_os_error())));
    }

    #[test]
    fn xdp_features_are_read_past_the_pad_attribute() {
        let a = dev_reply(5, 42, 1 | 2 | 4 | 32 | 64);
        let got = answer(&a, 5, FAMILY, |b| parse_dev(b, 42));
        let Ok(Answer::Reply(f)) = got else { panic!("{got:?}") };
        assert!(f.basic() && f.redirect() && f.ndo_xmit() && f.rx_sg() && f.ndo_xmit_sg());
        assert!(!f.xsk_zerocopy() && !f.hw_offload());
        assert_eq!(f.bits(), 0x67);
    }

    #[test]
    fn a_missing_device_is_enodev() {
        let e = error(5, Errno::NODEV.raw_os_error());
        assert_eq!(answer(&e, 5, FAMILY, |b| parse_dev(b, 42)), Ok(Answer::Errno(Errno::NODEV.raw_os_error())));
    }

    #[test]
    fn answers_to_other_requests_are_passed_over() {
        let mut d = dev_reply(4, 42, 1);
        d.extend(dev_reply(5, 42, 7));
        assert_eq!(answer(&d, 5, FAMILY, |b| parse_dev(b, 42)), Ok(Answer::Reply(XdpFeatures(7))));
        assert_eq!(answer(&d, 6, FAMILY, |b| parse_dev(b, 42)), Ok(Answer::NotOurs));
        assert_eq!(answer(&[], 6, FAMILY, |b| parse_dev(b, 42)), Ok(Answer::NotOurs));
        // Our sequence number on a message of another type is not the answer.
        let other = reply(FAMILY + 1, 5, &[]);
        assert_eq!(answer(&other, 5, FAMILY, |b| parse_dev(b, 42)), Ok(Answer::NotOurs));
    }

    #[test]
    fn truncated_and_garbled_answers_are_errors() {
        let parse = |b: &[u8]| parse_dev(b, 42);
        let full = dev_reply(5, 42, 7);
        // Every cut of the datagram leaves its header claiming more than
        // there is: a frame error, never a panic or a wrong reply.
        for n in 1..full.len() {
            match answer(&full[..n], 5, FAMILY, parse) {
                Err(Malformed::Frame) => {}
                other => panic!("cut at {n}: {other:?}"),
            }
        }
        // A whole message whose attributes are cut short.
        // (header 16, genl 4, ifindex 8, pad 4, features 12 from byte 32).
        let mut cut = full[..40].to_vec();
        cut[..4].copy_from_slice(&40u32.to_ne_bytes());
        assert_eq!(answer(&cut, 5, FAMILY, parse), Err(Malformed::NoXdpFeatures));
        // A 4-byte features attribute.
        let narrow = reply(FAMILY, 5, &[(NETDEV_A_DEV_XDP_FEATURES, &[7, 0, 0, 0])]);
        assert_eq!(answer(&narrow, 5, FAMILY, parse), Err(Malformed::NoXdpFeatures));
        // No generic netlink header.
        let bare = Request::new(FAMILY, 5).bytes();
        assert_eq!(answer(&bare, 5, FAMILY, parse), Err(Malformed::ShortGenl));
        // Another device's answer.
        let other = dev_reply(5, 43, 7);
        assert_eq!(answer(&other, 5, FAMILY, parse), Err(Malformed::OtherDevice { asked: 42, got: 43 }));
        // An error message cut before its errno, and a bare acknowledgement.
        let short = Request::new(NLMSG_ERROR, 5).bytes();
        assert_eq!(answer(&short, 5, FAMILY, parse), Err(Malformed::ShortError));
        assert_eq!(answer(&error(5, 0), 5, FAMILY, parse), Err(Malformed::NoAnswer));
        // Noise.
        let noise: Vec<u8> = (0..200u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for n in 0..noise.len() {
            let _ = answer(&noise[..n], 5, FAMILY, parse);
        }
    }

    #[test]
    fn malformed_answers_are_invalid_data() {
        let e = io::Error::from(Malformed::NoXdpFeatures);
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("NETDEV_A_DEV_XDP_FEATURES"), "{e}");
    }

    #[test]
    fn features_are_listed_by_name() {
        assert_eq!(XdpFeatures::default().to_string(), "none");
        assert_eq!(XdpFeatures::from_bits(0x23).to_string(), "basic redirect rx-sg");
        assert_eq!(
            format!("{:?}", XdpFeatures::from_bits(0x7f)),
            "XdpFeatures(basic redirect ndo-xmit xsk-zerocopy hw-offload rx-sg ndo-xmit-sg)"
        );
        assert_eq!(XdpFeatures::from_bits(0x104).to_string(), "ndo-xmit 0x100");
        assert_eq!(XdpFeatures::from_bits(0x100).to_string(), "0x100");
        assert_eq!(XdpFeatures::from_bits(4).names().collect::<Vec<_>>(), ["ndo-xmit"]);
    }

    #[test]
    fn loopback_has_no_xdp_features_and_a_missing_index_is_none() {
        // Reading needs no privilege; only a kernel before 6.3 lacks the family.
        let Some(mut r) = NetdevReader::new().unwrap() else {
            println!("skipped: this kernel has no \"netdev\" generic netlink family (Linux < 6.3)");
            return;
        };
        // Index 1 is the loopback of every namespace.
        assert_eq!(r.xdp_features(1).unwrap(), Some(XdpFeatures::default()));
        assert_eq!(r.xdp_features(0x7fff_fff0).unwrap(), None);
    }
}
