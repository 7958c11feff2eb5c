//! The fast path, rule by rule. One catalogue of frames, each with the
//! outcome it must get, runs twice:
//!
//! * through the eBPF interpreter of `prog/tests.rs` (no root): every
//!   frame, runts included, every prefix of every frame (no read past
//!   `data_end`), and every instruction and branch of the program covered;
//! * through the kernel with BPF_PROG_TEST_RUN (root): the loaded program
//!   over real maps, its verdict, its counters and the `seen` it stores.
//!   Frames shorter than 14 bytes are the interpreter's only: the kernel
//!   refuses them (EINVAL, measured on 6.18, also behind XDP metadata);
//!   so are frames the test run would not show the program whole
//!   ([`KERNEL_LINEAR`]).
//!
//! Both check the frame the program leaves: untouched, or for a partial
//! checksum it completes (rule f), the frame with its TCP/UDP checksum
//! computed in full by `flowsteer_wire::checksum` over the segment the IP
//! header gives.
//!
//! Under BPF_PROG_TEST_RUN (no live frames) a redirect is decided, not
//! carried out: the fast path returns XDP_REDIRECT (4) when `tx` holds the
//! egress port; the slow path, the claim policy [`Claim::Frames`], returns
//! XDP_PASS (2: no socket in the XSKMAP, its fallback) or XDP_DROP (1) for
//! a frame longer than a socket frame. A device map entry needs a real
//! device: the port table is written inside a lab namespace, with its
//! veth's ifindex.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};

use flowsteer_netns::{skip_reason, Lab, LabConfig, Side};
use flowsteer_wire::build::{FrameBuilder, Ipv6Ext, VlanTag};
use flowsteer_wire::checksum::{fold, pseudo_header_sum, transport_checksum, udp_checksum};
use flowsteer_wire::offload::locate_l4;
use flowsteer_wire::proto;

use super::*;
use crate::prog::tests::{FastMaps, Verdict, Vm, MAPS};
use crate::prog::{self, Claim, Maps, XdpReasons, CLAIM_ENTRIES};
use crate::sys::Insn;
use crate::xdp::{XDP_DROP, XDP_PASS};
use crate::{AttachConfig, XdpMode, XdpProgram};

// ---------------------------------------------------------------- the bridge

/// Port ids: the program's own port, an egress, an egress switched off,
/// one whose device map entry is missing, one with no frame limit.
const INGRESS: u32 = 1;
const EGRESS: u32 = 2;
const OFF: u32 = 3;
const NO_TX: u32 = 4;
const UNLIMITED: u32 = 5;
/// A port id the FDB may name but the port table does not hold.
const BEYOND: u32 = 99;
const MAX_PORTS: u32 = 8;
/// The egresses take MTU 1500 + 18.
const MAX_FRAME: u32 = 1518;
/// A `max_frame` above what the program checks.
const NO_LIMIT: u32 = 100_000;
/// The slow path's frame limit: a 2048-byte socket frame less headroom.
const SOCKET_ROOM: u32 = 1792;

const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const HOST_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const HOST_C: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0c];
const HOST_D: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0d];
const HOST_E: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0e];
const HOST_F: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0f];
const HOST_G: [u8; 6] = [0x02, 0, 0, 0, 0, 0x10];
const HOST_H: [u8; 6] = [0x02, 0, 0, 0, 0, 0x11];
const UNKNOWN: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];
const BROADCAST: [u8; 6] = [0xff; 6];
const MULTICAST: [u8; 6] = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01];

/// The FDB mirror: A on the ingress port (the usual source), B behind
/// the egress (the usual destination), C behind the port switched off, D
/// on the ingress port too (a destination there), E elsewhere (a source
/// that moved), F behind the port without device, G on a port beyond the
/// table, H behind the port without frame limit.
fn learned() -> Vec<([u8; 6], u32)> {
    vec![
        (HOST_A, INGRESS),
        (HOST_B, EGRESS),
        (HOST_C, OFF),
        (HOST_D, INGRESS),
        (HOST_E, OFF),
        (HOST_F, NO_TX),
        (HOST_G, BEYOND),
        (HOST_H, UNLIMITED),
    ]
}

/// The port table: (id, max_frame, enabled, has a device map entry).
fn port_table() -> Vec<(u32, u32, bool, bool)> {
    vec![
        (INGRESS, MAX_FRAME, true, true),
        (EGRESS, MAX_FRAME, true, true),
        (OFF, MAX_FRAME, false, true),
        (NO_TX, MAX_FRAME, true, false),
        (UNLIMITED, NO_LIMIT, true, true),
    ]
}

// ---------------------------------------------------------------- frames

const V4_SRC: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const IP_HEADERS: usize = 14 + 20;

#[derive(Clone, Copy, PartialEq, Eq)]
enum L4 {
    Udp,
    Tcp,
}

/// A → B, complete checksums, `payload` bytes of transport payload.
fn ip_frame(l4: L4, v6: bool, vlans: &[VlanTag], ext: &[Ipv6Ext], payload: usize) -> Vec<u8> {
    let (s, d): (IpAddr, IpAddr) = if v6 { (V6_SRC.into(), V6_DST.into()) } else { (V4_SRC.into(), V4_DST.into()) };
    let data = vec![0x5a; payload];
    let b = match l4 {
        L4::Udp => FrameBuilder::udp(s, d, 40000, 9000, &data),
        L4::Tcp => FrameBuilder::tcp(s, d, 40000, 80, 1, 0x18, &data),
    };
    FrameBuilder { src_mac: HOST_A, dst_mac: HOST_B, vlans, ipv6_ext: ext, ..b }.build()
}

fn udp4() -> Vec<u8> {
    ip_frame(L4::Udp, false, &[], &[], 32)
}

/// `f` between other MACs.
fn macs(mut f: Vec<u8>, src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f
}

/// `f` with its TCP/UDP checksum field set to `v`.
fn csum_field(mut f: Vec<u8>, v: u16) -> Vec<u8> {
    let l = locate_l4(&f).expect("a TCP/UDP frame");
    let at = l.l4_offset + l.csum_offset();
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
    f
}

/// The checksum field a local sender with checksum offload leaves: the
/// folded pseudo-header sum, not complemented (`fold` complements).
fn partial(f: Vec<u8>) -> Vec<u8> {
    let l = locate_l4(&f).expect("a TCP/UDP frame");
    let sum = !fold(pseudo_header_sum(l.src, l.dst, l.proto, l.l4_len() as u32));
    csum_field(f, sum)
}

/// `f` with its TCP/UDP checksum field complete, computed in full over the
/// segment (the IP header's length; Ethernet padding left as it is):
/// what the fast path must leave in a partial frame it forwards.
fn completed(mut f: Vec<u8>) -> Vec<u8> {
    let l = locate_l4(&f).expect("a TCP/UDP frame");
    let (at, end) = (l.checksum_at(), l.l4_end);
    f[at..at + 2].fill(0);
    let segment = &f[l.l4_offset..end];
    let c = match l.proto {
        proto::UDP => udp_checksum(l.src, l.dst, segment),
        _ => transport_checksum(l.src, l.dst, l.proto, segment),
    };
    csum_field(f, c)
}

/// Whether the TCP/UDP checksum of `f` verifies as it is.
fn verifies(f: &[u8]) -> bool {
    let l = locate_l4(f).expect("a TCP/UDP frame");
    transport_checksum(l.src, l.dst, l.proto, &f[l.l4_offset..l.l4_end]) == 0
}

/// `f` with `d` added (ones' complement) to the 16-bit word of its TCP/UDP
/// payload at `at` (an even offset into the segment), which adds `d` to
/// the segment's sum.
fn add_to_payload(mut f: Vec<u8>, at: usize, d: u16) -> Vec<u8> {
    let l = locate_l4(&f).expect("a TCP/UDP frame");
    let i = l.payload_offset() + at;
    assert!((i - l.l4_offset).is_multiple_of(2) && i + 2 <= l.l4_end, "a whole word of the payload");
    let w = u64::from(u16::from_be_bytes([f[i], f[i + 1]]));
    let w = !fold(w + u64::from(d));
    f[i..i + 2].copy_from_slice(&w.to_be_bytes());
    f
}

/// A partial frame whose field, the pseudo-header sum, is also its complete
/// checksum: it verifies as it is (a payload word adjusted to make it so).
fn partial_that_verifies(f: Vec<u8>) -> Vec<u8> {
    let f = partial(f);
    let l = locate_l4(&f).expect("a TCP/UDP frame");
    // Adding the checksum the segment lacks to a payload word makes its
    // sum with the pseudo header ones' complement zero.
    let lack = transport_checksum(l.src, l.dst, l.proto, &f[l.l4_offset..l.l4_end]);
    let f = add_to_payload(f, 0, lack);
    assert!(verifies(&f));
    f
}

/// A partial frame whose complete checksum computes to 0 (for UDP sent as
/// 0xffff, 0 meaning none; for TCP left 0).
fn partial_completing_to_zero(f: Vec<u8>) -> Vec<u8> {
    let f = csum_field(f, 0);
    let l = locate_l4(&f).expect("a TCP/UDP frame");
    let c = transport_checksum(l.src, l.dst, l.proto, &f[l.l4_offset..l.l4_end]);
    let f = add_to_payload(f, 0, c);
    let l = locate_l4(&f).expect("a TCP/UDP frame");
    assert_eq!(transport_checksum(l.src, l.dst, l.proto, &f[l.l4_offset..l.l4_end]), 0);
    partial(f)
}

/// A bare IPv4 frame `f` (IHL 5) whose total length now leaves `l4_len`
/// bytes to TCP/UDP, with the checksum field set to the pseudo-header sum
/// for that length; the frame's bytes are otherwise left as they are.
fn v4_claiming(f: Vec<u8>, l4_len: u16) -> Vec<u8> {
    let f = poke(f, 14 + 2, &(20 + l4_len).to_be_bytes());
    let (src, dst) = (Ipv4Addr::new(f[26], f[27], f[28], f[29]), Ipv4Addr::new(f[30], f[31], f[32], f[33]));
    let p = !fold(pseudo_header_sum(src.into(), dst.into(), f[14 + 9], l4_len.into()));
    let at = 34 + if f[14 + 9] == proto::TCP { 16 } else { 6 };
    poke(f, at, &p.to_be_bytes())
}

/// `f` with byte `at` set to `v`.
fn poke(mut f: Vec<u8>, at: usize, v: &[u8]) -> Vec<u8> {
    f[at..at + v.len()].copy_from_slice(v);
    f
}

/// An IPv6 packet whose next header is `nh`, carrying 16 bytes of it.
fn ipv6_next(nh: u8) -> Vec<u8> {
    let b = FrameBuilder::raw(V6_SRC.into(), V6_DST.into(), nh, &[0u8; 16]);
    FrameBuilder { src_mac: HOST_A, dst_mac: HOST_B, ..b }.build()
}

/// A frame of `ethertype` carrying 46 bytes, A → B.
fn ether(ethertype: u16) -> Vec<u8> {
    let mut f = [HOST_B, HOST_A].concat();
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.resize(60, 0x11);
    f
}

/// What the fast path must do with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// Forwarded to this port, untouched.
    Fast(u32),
    /// Forwarded to this port, its partial checksum completed.
    Completed(u32),
    /// Handed to the slow path for this reason (a counter slot).
    Slow(i32),
}

struct Case {
    name: String,
    frame: Vec<u8>,
    want: Want,
    /// The frame as the program must leave it.
    out: Vec<u8>,
    /// Whether the kernel runs it too: BPF_PROG_TEST_RUN shows the program
    /// only the first [`KERNEL_LINEAR`] bytes of a frame.
    kernel: bool,
}

/// BPF_PROG_TEST_RUN puts at most a page less XDP headroom and the shared
/// info (4096 - 256 - 320 bytes on x86-64) between data and data_end and
/// the rest of a longer frame into fragments the program does not see
/// (measured on 6.18: it takes 5,000-byte frames, and the fast path
/// forwards them). A live frame of a native-XDP veth is never longer (MTU
/// up to about 3,500).
const KERNEL_LINEAR: usize = 3520;

fn case(name: impl Into<String>, frame: Vec<u8>, want: Want) -> Case {
    // The fast path forwards no frame shorter than the Ethernet minimum
    // (rule a): one the catalogue builds shorter goes padded with zeros, as
    // a NIC delivers it (the padding is after the IP packet, never summed).
    let frame = match want {
        Want::Fast(_) | Want::Completed(_) if frame.len() < MIN_FORWARD_FRAME as usize => {
            let mut f = frame;
            f.resize(MIN_FORWARD_FRAME as usize, 0);
            f
        }
        _ => frame,
    };
    let out = match want {
        Want::Completed(_) => completed(frame.clone()),
        _ => frame.clone(),
    };
    if let Want::Completed(_) = want {
        assert!(out != frame && verifies(&out), "a partial checksum that needs completing");
    }
    Case { name: name.into(), kernel: frame.len() <= KERNEL_LINEAR, frame, want, out }
}

/// A partial frame of `l4` over IPv4 or IPv6 with `payload` bytes,
/// completed and forwarded: to the egress, or when longer than its
/// `max_frame` to the port without limit.
fn completes(l4: L4, v6: bool, vlans: &[VlanTag], payload: usize) -> Case {
    let f = partial(ip_frame(l4, v6, vlans, &[], payload));
    let name = format!(
        "partial {}{}{}, {payload} bytes of payload",
        if l4 == L4::Tcp { "TCP" } else { "UDP" },
        if v6 { "v6" } else { "v4" },
        ["", " under 802.1Q", " under QinQ"][vlans.len()]
    );
    if f.len() > MAX_FRAME as usize {
        case(name, macs(f, HOST_A, HOST_H), Want::Completed(UNLIMITED))
    } else {
        case(name, f, Want::Completed(EGRESS))
    }
}

/// Every rule true (→ fast) and each condition false in turn (→ slow,
/// with its reason).
fn catalogue() -> Vec<Case> {
    use slot::*;
    let fast = Want::Fast(EGRESS);
    let slow = Want::Slow;
    let q = [VlanTag::dot1q(7)];
    let qinq = [VlanTag::dot1ad(100), VlanTag::dot1q(7)];
    let hop = [Ipv6Ext::HopByHop { len: 8 }];
    let tcp4 = || ip_frame(L4::Tcp, false, &[], &[], 32);
    let udp6 = || ip_frame(L4::Udp, true, &[], &[], 32);
    let tcp6 = || ip_frame(L4::Tcp, true, &[], &[], 32);
    // A TCP segment whose pseudo-header sum folds to 0xffff: its partial
    // checksum can be written 0xffff or 0x0000 (ones' complement zero).
    // 10.0.0.1 -> 245.228.0.0, 20 bytes: 0x0a00 + 0x0001 + 0xf5e4 + 6 + 20.
    let all_ones = {
        let b = FrameBuilder::tcp(
            Ipv4Addr::new(10, 0, 0, 1).into(),
            Ipv4Addr::new(245, 228, 0, 0).into(),
            1,
            2,
            0,
            0x10,
            &[],
        );
        FrameBuilder { src_mac: HOST_A, dst_mac: HOST_B, ..b }.build()
    };
    let mut cases = vec![
        // All rules pass.
        case("learned unicast, UDPv4", udp4(), fast),
        case("learned unicast, TCPv4", tcp4(), fast),
        case("learned unicast, UDPv6", udp6(), fast),
        case("learned unicast, TCPv6", tcp6(), fast),
        case("ARP to a learned MAC", ether(0x0806), fast),
        case(
            "ICMP echo (no L4 checksum to check)",
            {
                let b = FrameBuilder::raw(V4_SRC.into(), V4_DST.into(), 1, &[8, 0, 0xf7, 0xff, 0, 0, 0, 0]);
                FrameBuilder { src_mac: HOST_A, dst_mac: HOST_B, ..b }.build()
            },
            fast,
        ),
        case("ICMPv6", ipv6_next(58), fast),
        case("exactly max_frame bytes", ip_frame(L4::Udp, false, &[], &[], MAX_FRAME as usize - IP_HEADERS - 8), fast),
        case(
            "a port without frame limit",
            macs(ip_frame(L4::Udp, false, &[], &[], 1700), HOST_A, HOST_H),
            Want::Fast(UNLIMITED),
        ),
        // Rule a.
        case("multicast destination", macs(udp4(), HOST_A, MULTICAST), slow(SLOW_NOT_UNICAST)),
        case("broadcast destination", macs(ether(0x0806), HOST_A, BROADCAST), slow(SLOW_NOT_UNICAST)),
        case("a broadcast of 42 bytes", macs(ether(0x0806)[..42].to_vec(), HOST_A, BROADCAST), slow(SLOW_NOT_UNICAST)),
        case("learned unicast of 14 bytes (a bare header)", ether(0x88b5)[..14].to_vec(), slow(SLOW_SHORT)),
        case("ARP of 42 bytes, unpadded", ether(0x0806)[..42].to_vec(), slow(SLOW_SHORT)),
        case("learned unicast of 59 bytes", ether(0x88b5)[..59].to_vec(), slow(SLOW_SHORT)),
        case("learned unicast of 60 bytes", ether(0x88b5), fast),
        case(
            "partial UDPv4 of 7 bytes, unpadded (49 bytes)",
            partial(ip_frame(L4::Udp, false, &[], &[], 7)),
            slow(SLOW_SHORT),
        ),
        // Rule b.
        case("unknown destination", macs(udp4(), HOST_A, UNKNOWN), slow(SLOW_UNKNOWN_DST)),
        // Rule c.
        case("destination on the ingress port", macs(udp4(), HOST_A, HOST_D), slow(SLOW_SAME_PORT)),
        // Rule d.
        case("unknown source", macs(udp4(), UNKNOWN, HOST_B), slow(SLOW_SRC_NOT_HERE)),
        case("source learned on another port", macs(udp4(), HOST_E, HOST_B), slow(SLOW_SRC_NOT_HERE)),
        // Rule e.
        case("egress switched off", macs(udp4(), HOST_A, HOST_C), slow(SLOW_EGRESS_OFF)),
        case("egress beyond the port table", macs(udp4(), HOST_A, HOST_G), slow(SLOW_EGRESS_OFF)),
        case(
            "one byte over max_frame",
            ip_frame(L4::Udp, false, &[], &[], MAX_FRAME as usize - IP_HEADERS - 7),
            slow(SLOW_TOO_BIG),
        ),
        case(
            "longer than a socket frame too (slow path drops it)",
            ip_frame(L4::Udp, false, &[], &[], 1800),
            slow(SLOW_TOO_BIG),
        ),
        // Rule f: partial checksums, completed.
        case("partial TCPv4", partial(tcp4()), Want::Completed(EGRESS)),
        case("partial UDPv4", partial(udp4()), Want::Completed(EGRESS)),
        case("partial TCPv6", partial(tcp6()), Want::Completed(EGRESS)),
        case("partial UDPv6", partial(udp6()), Want::Completed(EGRESS)),
        case(
            "partial UDPv4 under an IPv4 option (IHL 6)",
            partial({
                let b = FrameBuilder::udp(V4_SRC.into(), V4_DST.into(), 1, 2, &[1, 2, 3]);
                FrameBuilder { src_mac: HOST_A, dst_mac: HOST_B, ipv4_options: &[1, 1, 1, 0], ..b }.build()
            }),
            Want::Completed(EGRESS),
        ),
        case("partial UDPv4 under 802.1Q", partial(ip_frame(L4::Udp, false, &q, &[], 32)), Want::Completed(EGRESS)),
        case("partial TCPv6 under QinQ", partial(ip_frame(L4::Tcp, true, &qinq, &[], 32)), Want::Completed(EGRESS)),
        case(
            "partial TCP summing to 0xffff, written 0xffff",
            csum_field(all_ones.clone(), 0xffff),
            Want::Completed(EGRESS),
        ),
        case(
            "partial TCP summing to 0xffff, written 0x0000",
            csum_field(all_ones.clone(), 0x0000),
            Want::Completed(EGRESS),
        ),
        case(
            "partial UDPv4 of 2 bytes in a frame padded to 60 (padding not summed)",
            {
                let mut f = partial(ip_frame(L4::Udp, false, &[], &[], 2));
                f.resize(60, 0xab);
                f
            },
            Want::Completed(EGRESS),
        ),
        case(
            "partial TCPv4 of no payload in a frame padded to 60 (padding not summed)",
            {
                let mut f = partial(ip_frame(L4::Tcp, false, &[], &[], 0));
                f.resize(60, 0xcd);
                f
            },
            Want::Completed(EGRESS),
        ),
        case(
            "partial UDPv4 completing to 0: sent as 0xffff",
            partial_completing_to_zero(ip_frame(L4::Udp, false, &[], &[], 40)),
            Want::Completed(EGRESS),
        ),
        case(
            "partial UDPv6 completing to 0: sent as 0xffff",
            partial_completing_to_zero(ip_frame(L4::Udp, true, &[], &[], 41)),
            Want::Completed(EGRESS),
        ),
        case(
            "partial TCPv4 completing to 0: left 0",
            partial_completing_to_zero(ip_frame(L4::Tcp, false, &[], &[], 40)),
            Want::Completed(EGRESS),
        ),
        case(
            "the largest segment the test run shows whole, 3,400 bytes of UDPv4",
            macs(partial(ip_frame(L4::Udp, false, &[], &[], 3400)), HOST_A, HOST_H),
            Want::Completed(UNLIMITED),
        ),
        case(
            format!("a segment of exactly {MAX_CSUM_SEGMENT} bytes (TCPv4)"),
            macs(partial(ip_frame(L4::Tcp, false, &[], &[], MAX_CSUM_SEGMENT as usize - 20)), HOST_A, HOST_H),
            Want::Completed(UNLIMITED),
        ),
        {
            // Completed, then the redirect fails: the slow path gets the
            // frame with its checksum complete.
            let f = macs(partial(udp4()), HOST_A, HOST_F);
            Case {
                out: completed(f.clone()),
                ..case("partial UDPv4 to the egress without a device map entry", f, slow(SLOW_REDIRECT_FAILED))
            }
        },
        // Rule f: partial checksums left as they are: they verify.
        case(
            "partial UDPv4 that verifies as it is",
            partial_that_verifies(ip_frame(L4::Udp, false, &[], &[], 64)),
            fast,
        ),
        case(
            "partial TCPv6 that verifies as it is",
            partial_that_verifies(ip_frame(L4::Tcp, true, &[], &[], 301)),
            fast,
        ),
        // Rule f: partial checksums the program leaves to the slow path.
        case(
            format!("a segment of {} bytes, over the bound (UDPv4)", MAX_CSUM_SEGMENT + 1),
            macs(partial(ip_frame(L4::Udp, false, &[], &[], MAX_CSUM_SEGMENT as usize - 7)), HOST_A, HOST_H),
            slow(SLOW_PARTIAL_CSUM),
        ),
        case(
            format!(
                "an IP length over the bound ({} bytes of UDP) in a frame cut at 3,000 bytes",
                MAX_CSUM_SEGMENT + 1
            ),
            macs(partial(ip_frame(L4::Udp, false, &[], &[], MAX_CSUM_SEGMENT as usize - 7)), HOST_A, HOST_H)[..3000]
                .to_vec(),
            slow(SLOW_PARTIAL_CSUM),
        ),
        case("UDPv4 whose IP length leaves 7 bytes", v4_claiming(udp4(), 7), slow(SLOW_PARTIAL_CSUM)),
        case("TCPv4 whose IP length leaves 19 bytes", v4_claiming(tcp4(), 19), slow(SLOW_PARTIAL_CSUM)),
        case(
            "UDPv4 whose length field is not the IP's",
            poke(partial(udp4()), 34 + 4, &(8u16 + 30).to_be_bytes()),
            slow(SLOW_PARTIAL_CSUM),
        ),
        case(
            "partial UDPv4 cut one byte short of its IP length",
            {
                let f = partial(ip_frame(L4::Udp, false, &[], &[], 100));
                f[..f.len() - 1].to_vec()
            },
            slow(SLOW_PARTIAL_CSUM),
        ),
        // Rule f: complete checksums and the rest go on.
        case("complete TCP summing to 0xffff", all_ones, fast),
        case("complete UDPv4 under 802.1Q", ip_frame(L4::Udp, false, &q, &[], 32), fast),
        case("complete TCPv6 under QinQ", ip_frame(L4::Tcp, true, &qinq, &[], 32), fast),
        case("UDPv4 without checksum (0)", csum_field(udp4(), 0), fast),
        case("an IPv4 fragment (MF) with a partial-looking field", poke(partial(udp4()), 14 + 6, &[0x20, 0]), fast),
        case("an IPv4 fragment (offset)", poke(partial(udp4()), 14 + 6, &[0, 0x10]), fast),
        case(
            "ARP under 802.1Q",
            {
                let mut f = ether(0x8100);
                f.splice(14..14, [0, 7, 0x08, 0x06]);
                f
            },
            fast,
        ),
        // Rule f: what the check cannot read.
        case("IPv6 with a Hop-by-Hop header", partial(ip_frame(L4::Udp, true, &[], &hop, 32)), slow(SLOW_UNPARSED)),
        case(
            "IPv6 with a Fragment header",
            ip_frame(L4::Udp, true, &[], &[Ipv6Ext::Fragment { offset: 0, more: true, id: 7 }], 32),
            slow(SLOW_UNPARSED),
        ),
        case(
            "IPv6 with a Destination Options header",
            ip_frame(L4::Tcp, true, &[], &[Ipv6Ext::DestOpts { len: 16 }], 32),
            slow(SLOW_UNPARSED),
        ),
        case("IPv4 IHL 4", poke(udp4(), 14, &[0x44]), slow(SLOW_UNPARSED)),
        case("IPv4 total length shorter than its header", poke(udp4(), 14 + 2, &[0, 19]), slow(SLOW_UNPARSED)),
        case(
            "three VLAN tags (0x8100 inside)",
            ip_frame(L4::Udp, false, &[VlanTag::dot1ad(1), VlanTag::dot1q(2), VlanTag::dot1q(3)], &[], 32),
            slow(SLOW_UNPARSED),
        ),
        case(
            "three VLAN tags (0x88a8 inside)",
            ip_frame(L4::Udp, false, &[VlanTag::dot1ad(1), VlanTag::dot1q(2), VlanTag::dot1ad(3)], &[], 32),
            slow(SLOW_UNPARSED),
        ),
        // Rule g.
        case("egress without a device map entry", macs(udp4(), HOST_A, HOST_F), slow(SLOW_REDIRECT_FAILED)),
    ];
    for l4 in [L4::Tcp, L4::Udp] {
        for v6 in [false, true] {
            for payload in [0, 1, 2, 3, 4, 5, 511, 512, 513, 1024, 1400, 1458] {
                cases.push(completes(l4, v6, &[], payload));
            }
        }
    }
    for payload in [7, 513, 1400] {
        cases.push(completes(L4::Udp, true, &q, payload));
        cases.push(completes(L4::Tcp, false, &qinq, payload));
    }
    // Segments past each number of whole chunks (the longest for the
    // interpreter only).
    for chunks in 3..MAX_CSUM_SEGMENT as usize / 512 {
        cases.push(completes(L4::Udp, false, &[], chunks * 512 + 100 - 8));
    }
    for nh in IPV6_EXT_HEADERS {
        cases.push(case(
            format!("IPv6 next header {nh} (an extension header)"),
            ipv6_next(nh as u8),
            slow(SLOW_UNPARSED),
        ));
    }
    cases
}

/// Frames shorter than an Ethernet header: the interpreter's only.
fn runts() -> Vec<Case> {
    (0..14)
        .map(|n| case(format!("runt of {n} bytes"), udp4()[..n].to_vec(), Want::Slow(slot::SLOW_NOT_UNICAST)))
        .collect()
}

/// The verdict and counters a frame must get: fast → XDP_REDIRECT counted
/// `fast_forwarded` (and `fast_csum_completed` when its checksum was
/// completed); slow → its reason plus the claim policy's outcome:
/// XDP_PASS (no socket) or, longer than a socket frame, XDP_DROP.
fn expected(c: &Case) -> (Verdict, Vec<i32>) {
    match c.want {
        Want::Fast(port) => (Verdict::Forward(port), vec![slot::FAST_FORWARDED]),
        Want::Completed(port) => (Verdict::Forward(port), vec![slot::FAST_FORWARDED, slot::FAST_CSUM_COMPLETED]),
        Want::Slow(reason) if c.frame.len() > SOCKET_ROOM as usize => {
            (Verdict::Drop, vec![slot::DROPPED_TOO_BIG, reason])
        }
        Want::Slow(reason) => (Verdict::Pass, vec![slot::PASSED_NO_SOCKET, reason]),
    }
}

// ---------------------------------------------------------------- the interpreter

const FAST_FD: i32 = 201;
/// 1,000 s after boot, plus a bit.
const NOW_NS: u64 = 1_000 * NS_PER_S + 123;

fn vm_program() -> Vec<Insn> {
    prog::program(MAPS, &Claim::Frames, Some(SOCKET_ROOM), Some(FastPathRefs::placeholder(INGRESS, FAST_FD)))
}

fn vm(p: &[Insn]) -> Vm {
    let mut vm = Vm::new(p, &Claim::Frames);
    // No socket: the slow path passes, as under BPF_PROG_TEST_RUN.
    vm.sockets.clear();
    let mut fast = FastMaps {
        refs: Some(FastPathRefs::placeholder(INGRESS, FAST_FD)),
        ports: vec![[0u8; 16]; MAX_PORTS as usize],
        tx: vec![None; MAX_PORTS as usize],
        now_ns: NOW_NS,
        ..FastMaps::default()
    };
    for (mac, port) in learned() {
        fast.fdb.push((fdb_key(mac, 0), fdb_value(port, 0, 0)));
    }
    for (id, max_frame, enabled, has_tx) in port_table() {
        let v = &mut fast.ports[id as usize];
        put32(v, PORT_IFINDEX, 100 + id);
        put32(v, PORT_MAX_FRAME, max_frame);
        put32(v, PORT_FLAGS, if enabled { PORT_FLAG_ENABLED } else { 0 });
        fast.tx[id as usize] = has_tx.then_some(100 + id);
    }
    vm.fast = fast;
    vm
}

fn vm_seen(vm: &Vm, mac: [u8; 6]) -> u64 {
    let (_, v) = vm.fast.fdb.iter().find(|(k, _)| *k == fdb_key(mac, 0)).expect("in the FDB");
    fdb_seen_of(v)
}

#[test]
fn interpreter_every_rule_true_and_each_false_in_turn() {
    let p = vm_program();
    let mut vm = vm(&p);
    for c in catalogue().iter().chain(&runts()) {
        let (verdict, bumped) = vm.exec(&p, &c.frame, 0);
        let (want_verdict, mut want_slots) = expected(c);
        want_slots.sort_unstable();
        assert_eq!((verdict, bumped), (want_verdict, want_slots), "{}", c.name);
        assert!(vm.frame_out == c.out, "{}: the frame as the program left it", c.name);
    }
    // The counters add up.
    let c = vm.counters;
    let reasons = XdpReasons {
        passed_no_socket: c[slot::PASSED_NO_SOCKET as usize],
        dropped_too_big: c[slot::DROPPED_TOO_BIG as usize],
        fast_forwarded: c[slot::FAST_FORWARDED as usize],
        slow_not_unicast: c[slot::SLOW_NOT_UNICAST as usize],
        slow_short: c[slot::SLOW_SHORT as usize],
        slow_unknown_dst: c[slot::SLOW_UNKNOWN_DST as usize],
        slow_same_port: c[slot::SLOW_SAME_PORT as usize],
        slow_src_not_here: c[slot::SLOW_SRC_NOT_HERE as usize],
        slow_egress_off: c[slot::SLOW_EGRESS_OFF as usize],
        slow_too_big: c[slot::SLOW_TOO_BIG as usize],
        slow_unparsed: c[slot::SLOW_UNPARSED as usize],
        slow_partial_csum: c[slot::SLOW_PARTIAL_CSUM as usize],
        slow_redirect_failed: c[slot::SLOW_REDIRECT_FAILED as usize],
        fast_csum_completed: c[slot::FAST_CSUM_COMPLETED as usize],
        ..XdpReasons::default()
    };
    assert_eq!(reasons.totals().seen() as usize, catalogue().len() + runts().len());
    assert!(reasons.conservation_ok(true), "{reasons:?}");
    let completed = catalogue().iter().filter(|c| matches!(c.want, Want::Completed(_))).count();
    assert_eq!(reasons.fast_csum_completed as usize, completed);
}

/// Rule d's store: `seen` becomes the current second for a source that
/// passes rule d (forwarded or not), once per second.
#[test]
fn interpreter_seen_is_stored_once_per_second() {
    let p = vm_program();
    let mut vm = vm(&p);
    assert_eq!(vm_seen(&vm, HOST_A), 0);
    vm.exec(&p, &udp4(), 0);
    assert_eq!((vm_seen(&vm, HOST_A), vm.fast.fdb_stores), (1_000, 1));
    vm.fast.now_ns += NS_PER_S / 2;
    vm.exec(&p, &udp4(), 0);
    assert_eq!((vm_seen(&vm, HOST_A), vm.fast.fdb_stores), (1_000, 1), "same second: no store");
    vm.fast.now_ns += NS_PER_S;
    vm.exec(&p, &macs(udp4(), HOST_A, HOST_C), 0);
    assert_eq!((vm_seen(&vm, HOST_A), vm.fast.fdb_stores), (1_001, 2), "rule d passed, egress off: stored");
    vm.fast.now_ns += NS_PER_S;
    vm.exec(&p, &macs(udp4(), HOST_E, HOST_B), 0);
    vm.exec(&p, &macs(udp4(), HOST_A, HOST_D), 0);
    assert_eq!(vm.fast.fdb_stores, 2, "a source on another port, a destination on the ingress port: no store");
    assert_eq!(vm_seen(&vm, HOST_B), 0, "destinations are not sources");
}

/// Every prefix of every frame: no read or write past `data_end` (the
/// interpreter panics on one), and the whole frame's outcome or the slow
/// path; a checksum completed only when the cut left the segment whole.
#[test]
fn interpreter_truncated_frames_take_the_slow_path_without_reading_past_the_end() {
    let p = vm_program();
    let mut vm = vm(&p);
    for c in catalogue() {
        let (whole, why) = vm.exec(&p, &c.frame, 0);
        for len in 0..c.frame.len() {
            let (v, bumped) = vm.exec(&p, &c.frame[..len], 0);
            let ok = match v {
                Verdict::Pass => true,
                // The slow path drops what is longer than a socket frame.
                Verdict::Drop => v == whole || len > SOCKET_ROOM as usize,
                // Shorter than the egress's limit, a frame too big for it fits.
                Verdict::Forward(_) => v == whole || why.contains(&slot::SLOW_TOO_BIG),
                _ => v == whole,
            };
            assert!(ok, "{} cut to {len}: {v:?} {bumped:?}", c.name);
            // A checksum is completed only over a whole segment.
            if bumped.contains(&slot::FAST_CSUM_COMPLETED) {
                assert!(vm.frame_out == completed(c.frame[..len].to_vec()), "{} cut to {len}", c.name);
            }
            if len < 14 {
                assert!(bumped.contains(&slot::SLOW_NOT_UNICAST), "{} cut to {len}", c.name);
            }
        }
    }
}

/// Over the catalogue, its runts, its prefixes and the seen updates, every
/// instruction runs and every conditional jump goes both ways, except the
/// null checks of the counter lookups (an array never returns null for a
/// key in range; the verifier wants them anyway).
#[test]
fn interpreter_the_frames_exercise_every_path() {
    let p = vm_program();
    let mut vm = vm(&p);
    vm.sockets = vec![1];
    for c in catalogue().iter().chain(&runts()) {
        for len in 0..=c.frame.len() {
            vm.exec(&p, &c.frame[..len], 0);
        }
        vm.fast.now_ns += NS_PER_S;
        vm.exec(&p, &c.frame, 0);
        // The slow path with a socket on the queue.
        vm.exec(&p, &c.frame, 1);
    }
    let counter_lookup =
        |at: usize| p[..at].iter().rev().find(|i| i.code == LD_DW_IMM).is_some_and(|i| i.imm == MAPS.counters);
    for (at, i) in p.iter().enumerate() {
        assert!(vm.executed[at], "instruction {at} ({:#x}) never ran", i.code);
        let conditional = matches!(i.code, JGT_X | JGT_K | JEQ_K | JEQ_X | JNE_K | JNE_X | JLT_K | JLT_X | JSET_K);
        let null_check = i.code == JEQ_K && at > 0 && p[at - 1].code == CALL && counter_lookup(at);
        if conditional && !null_check {
            assert_eq!(vm.taken[at], [true, true], "jump at {at} went one way only");
        }
    }
}

#[test]
fn the_program_jumps_forward_only_and_refers_to_its_maps() {
    for claim in [Claim::Frames, Claim::All, Claim::nothing(), Claim::udp(&[9000])] {
        for max in [None, Some(SOCKET_ROOM)] {
            let p = prog::program(MAPS, &claim, max, Some(FastPathRefs::placeholder(INGRESS, FAST_FD)));
            assert!(p.len() < 1024, "{claim:?}: {} insns", p.len());
            for (at, i) in p.iter().enumerate() {
                if matches!(i.code & 0x07, 0x05) && !matches!(i.code, CALL | EXIT) {
                    let to = at as i64 + 1 + i64::from(i.off);
                    assert!(to > at as i64 && (to as usize) < p.len(), "jump at {at} goes to {to}");
                }
                if i.code == LD_DW_IMM {
                    let known = [MAPS.xsks, MAPS.counters, MAPS.claims, FAST_FD, FAST_FD + 1, FAST_FD + 2];
                    assert!(known.contains(&i.imm), "{}", i.imm);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- the listing

const LISTING: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/fastpath.listing");
const BLESS: &str = "FLOWSTEER_BLESS";

fn listing_file() -> String {
    format!(
        "; The XDP program of a bridge port with the kernel fast path, as\n\
         ; flowsteer_xsk::program_listing(&Claim::Frames, Some({SOCKET_ROOM}), Some({INGRESS})) renders it:\n\
         ; ingress port {INGRESS}, every frame claimed for the slow path (AF_XDP frames of 2048 bytes).\n\
         ; The rules a-g are described in src/fastpath.rs. Checked by the unit test\n\
         ; fastpath::tests::the_listing_matches_the_golden_file; after a change to the program,\n\
         ; regenerate with `{BLESS}=1 cargo test -p flowsteer-xsk --lib the_listing` and review the diff.\n\
         ;\n\
         ; Registers: r6 ctx, r9 the frame (for a partial checksum: the TCP/UDP segment), r7 the\n\
         ; egress port, r8 the source's FDB entry, then the IP protocol (for a partial checksum: the\n\
         ; segment's length), then a counter slot; r5 the header being read, r3 data_end; r0 sums.\n\
         ; Stack: fp-8 counter key, fp-16 destination key, fp-24 source key, fp-28 port key;\n\
         ; for a partial checksum fp-40 the pseudo-header sum P, fp-48 the IP protocol.\n\n{}",
        crate::program_listing(&Claim::Frames, Some(SOCKET_ROOM), Some(INGRESS))
    )
}

#[test]
fn the_listing_matches_the_golden_file() {
    let text = listing_file();
    if std::env::var_os(BLESS).is_some() {
        std::fs::write(LISTING, &text).expect("writing the listing");
        return;
    }
    let golden = std::fs::read_to_string(LISTING).unwrap_or_default();
    if golden != text {
        let (g, t): (Vec<&str>, Vec<&str>) = (golden.lines().collect(), text.lines().collect());
        let line = (0..g.len().max(t.len())).find(|&n| g.get(n) != t.get(n)).map_or(0, |n| n + 1);
        panic!(
            "src/fastpath.listing is not the program's listing (first difference at line {line}); if the change \
             is intended, regenerate it with `{BLESS}=1 cargo test -p flowsteer-xsk --lib the_listing` and review the diff"
        );
    }
}

// ---------------------------------------------------------------- the kernel

/// The program loaded over real maps, the port table written inside a lab
/// namespace (a device map entry needs a real device).
struct Kernel {
    lab: Lab,
    maps: Arc<FastPathMaps>,
    prog: OwnedFd,
    counters: OwnedFd,
    _xsks: OwnedFd,
    _claims: OwnedFd,
    cpus: usize,
}

fn kernel(tag: &str) -> Option<Kernel> {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return None;
    }
    let lab = Lab::new(tag, &LabConfig::default()).expect("lab");
    let maps = Arc::new(FastPathMaps::new(64, MAX_PORTS).expect("maps"));
    let ifindex = lab.ifindex(Side::A).expect("ifindex");
    let m = Arc::clone(&maps);
    lab.run_in(Side::A, move || -> Result<(), Error> {
        for (id, max_frame, enabled, has_tx) in port_table() {
            m.port_set(id, ifindex, max_frame, enabled)?;
            if !has_tx {
                m.tx.delete(&id.to_ne_bytes()).map_err(|e| Error::os(&e, "tx".into()))?;
            }
        }
        Ok(())
    })
    .expect("in the lab")
    .expect("port table");
    for (mac, port) in learned() {
        // fdb_set refuses ports beyond the table; the program must cope anyway.
        maps.fdb.update(&fdb_key(mac, 0), &fdb_value(port, 0, 0), BPF_ANY).expect("fdb");
    }
    let xsks = sys::xskmap_create(4, "fs_fp_xsks").expect("xskmap");
    let counters = sys::percpu_array_u64_create(slot::COUNT, "fs_fp_count").expect("counters");
    let claims = sys::array_u32_create(CLAIM_ENTRIES, "fs_fp_claim").expect("claims");
    let m = Maps { xsks: xsks.as_raw_fd(), counters: counters.as_raw_fd(), claims: claims.as_raw_fd() };
    let p = prog::program(m, &Claim::Frames, Some(SOCKET_ROOM), Some(maps.refs(INGRESS)));
    let prog = prog::load(&p, "test").unwrap_or_else(|e| panic!("{e}"));
    let cpus = sys::possible_cpus().unwrap_or(0);
    Some(Kernel { lab, maps, prog, counters, _xsks: xsks, _claims: claims, cpus })
}

impl Kernel {
    fn slots(&self) -> Vec<u64> {
        (0..slot::COUNT).map(|s| sys::percpu_u64_sum(&self.counters, s, self.cpus).expect("counter")).collect()
    }

    /// Runs `frame` once: the action, the counter slots it added one to,
    /// and the frame as the program left it.
    fn run(&self, frame: &[u8]) -> (u32, Vec<i32>, Vec<u8>) {
        let before = self.slots();
        let mut out = vec![0u8; 2 * MAX_CSUM_SEGMENT as usize];
        let r = sys::prog_test_run(&self.prog, frame, &mut out, None, 1).expect("BPF_PROG_TEST_RUN");
        out.truncate(r.data_len);
        let after = self.slots();
        let mut bumped = Vec::new();
        for s in 0..after.len() {
            assert!(after[s] - before[s] <= 1, "slot {s} counted {} times", after[s] - before[s]);
            if after[s] != before[s] {
                bumped.push(s as i32);
            }
        }
        (r.retval, bumped, out)
    }
}

fn action(v: Verdict) -> u32 {
    match v {
        Verdict::Pass => XDP_PASS as u32,
        Verdict::Drop => XDP_DROP as u32,
        Verdict::Redirect(_) | Verdict::Forward(_) => XDP_REDIRECT as u32,
    }
}

#[test]
fn kernel_every_rule_true_and_each_false_in_turn() {
    let Some(k) = kernel("fpk") else { return };
    let cases: Vec<Case> = catalogue().into_iter().filter(|c| c.kernel).collect();
    for c in &cases {
        let (retval, bumped, out) = k.run(&c.frame);
        let (verdict, mut slots) = expected(c);
        slots.sort_unstable();
        assert_eq!((retval, bumped), (action(verdict), slots), "{}", c.name);
        assert!(out == c.out, "{}: the frame as the program left it", c.name);
    }
    let r = prog::read_reasons(&k.counters, k.cpus).expect("counters");
    assert_eq!(r.totals().seen() as usize, cases.len());
    assert!(r.conservation_ok(true), "{r:?}");
    let count = |f: fn(&Want) -> bool| cases.iter().filter(|c| f(&c.want)).count() as u64;
    assert_eq!(r.fast_forwarded, count(|w| matches!(w, Want::Fast(_) | Want::Completed(_))));
    assert_eq!(r.fast_csum_completed, count(|w| matches!(w, Want::Completed(_))));
    // The kernel refuses frames shorter than an Ethernet header, so the
    // runt rule is checked by the interpreter only.
    let mut out = [0u8; 64];
    let err = sys::prog_test_run(&k.prog, &udp4()[..13], &mut out, None, 1).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
}

#[test]
fn kernel_seen_becomes_the_current_second() {
    let Some(k) = kernel("fps") else { return };
    assert_eq!(k.maps.fdb_seen(HOST_A, 0).unwrap(), Some(0));
    let before = now_s();
    let (retval, ..) = k.run(&udp4());
    let after = now_s();
    assert_eq!(retval, XDP_REDIRECT as u32);
    let seen = k.maps.fdb_seen(HOST_A, 0).unwrap().unwrap();
    assert!(before <= seen && seen <= after, "{before} <= {seen} <= {after}");
    assert_eq!(k.maps.fdb_seen(HOST_B, 0).unwrap(), Some(0), "the destination's is not touched");
    // A source on another port keeps its seen.
    k.run(&macs(udp4(), HOST_E, HOST_B));
    assert_eq!(k.maps.fdb_seen(HOST_E, 0).unwrap(), Some(0));
}

/// The verifier takes the program with and without the fast path, for
/// every claim and frame limit, and for the lowest and highest port id.
#[test]
fn kernel_verifier_accepts_the_program_with_and_without_the_fast_path() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let maps = FastPathMaps::new(16, 4).unwrap();
    let xsks = sys::xskmap_create(4, "fs_fp_xsks").unwrap();
    let counters = sys::percpu_array_u64_create(slot::COUNT, "fs_fp_count").unwrap();
    let claims = sys::array_u32_create(CLAIM_ENTRIES, "fs_fp_claim").unwrap();
    let m = Maps { xsks: xsks.as_raw_fd(), counters: counters.as_raw_fd(), claims: claims.as_raw_fd() };
    let listeners = Claim::Ports { udp: vec![9000, 53], tcp: vec![80], fragments: crate::Fragments::Claim };
    for claim in [Claim::Frames, Claim::All, Claim::nothing(), listeners] {
        for max in [None, Some(SOCKET_ROOM)] {
            for fast in [None, Some(maps.refs(0)), Some(maps.refs(3))] {
                let p = prog::program(m, &claim, max, fast);
                if let Err(e) = prog::load(&p, "test") {
                    panic!("{claim:?} {max:?} {fast:?}: {e}");
                }
            }
        }
    }
}

/// Native XDP on a veth with the fast path, then detach.
#[test]
fn kernel_native_attach_on_a_veth_and_detach() {
    let Some(k) = kernel("fpa") else { return };
    let dev = k.lab.dev(Side::B).to_string();
    let fast = FastPathAttach::new(Arc::clone(&k.maps), INGRESS);
    let cfg = AttachConfig {
        mode: XdpMode::Native,
        claim: Claim::Frames,
        max_frame_len: Some(SOCKET_ROOM),
        fast_path: Some(fast.clone()),
        ..AttachConfig::default()
    };
    let shown = |lab: &Lab| {
        let out = std::process::Command::new("ip")
            .args(["-n", lab.ns(Side::B), "link", "show", lab.dev(Side::B)])
            .output()
            .expect("ip");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (d, c) = (dev.clone(), cfg.clone());
    let prog = k.lab.run_in(Side::B, move || XdpProgram::attach(&d, &c)).unwrap().unwrap();
    assert_eq!(prog.mode(), XdpMode::Native);
    assert_eq!(prog.fast_path(), Some(&fast));
    assert!(shown(&k.lab).contains("prog/xdp"), "{}", shown(&k.lab));
    assert_eq!(prog.listing(), crate::program_listing(&Claim::Frames, Some(SOCKET_ROOM), Some(INGRESS)));
    let r = prog.counter_reasons().unwrap();
    assert!(r.conservation_ok(true), "{r:?}");
    drop(prog);
    assert!(!shown(&k.lab).contains("prog/xdp"), "still attached: {}", shown(&k.lab));

    // A port id beyond the maps' slots is refused before anything is loaded.
    let mut bad = cfg;
    bad.fast_path = Some(FastPathAttach::new(Arc::clone(&k.maps), MAX_PORTS));
    let err = k.lab.run_in(Side::B, move || XdpProgram::attach(&dev, &bad)).unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
}

// ---------------------------------------------------------------- the maps' API

fn root_or_skip() -> bool {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return false;
    }
    true
}

#[test]
fn fdb_set_keeps_seen_delete_and_walk() {
    if !root_or_skip() {
        return;
    }
    let maps = FastPathMaps::new(16, 8).unwrap();
    let (before, t) = (now_s(), HOST_A);
    maps.fdb_set(t, 0, 1, false).unwrap();
    let e = maps.fdb_entry(t, 0).unwrap().unwrap();
    assert!(e.seen >= before && e.seen <= now_s(), "a new entry starts at now: {e:?}");
    assert_eq!((e.port, e.is_static), (1, false));
    // The program's store, then a move and a static flag: seen is kept.
    maps.fdb.update(&fdb_key(t, 0), &fdb_value(1, 0, 42), BPF_ANY).unwrap();
    maps.fdb_set(t, 0, 2, true).unwrap();
    assert_eq!(
        maps.fdb_entry(t, 0).unwrap(),
        Some(FastFdbEntry { mac: t, vlan: 0, port: 2, is_static: true, seen: 42 })
    );
    assert_eq!(maps.fdb_seen(t, 0).unwrap(), Some(42));
    // Another VLAN is another key.
    assert_eq!(maps.fdb_seen(t, 5).unwrap(), None);
    maps.fdb_set(t, 5, 3, false).unwrap();
    maps.fdb_set(HOST_B, 0, 4, false).unwrap();
    let all = maps.fdb_entries().unwrap();
    let keys: Vec<([u8; 6], u16, u32)> = all.iter().map(|e| (e.mac, e.vlan, e.port)).collect();
    assert_eq!(keys, vec![(HOST_A, 0, 2), (HOST_A, 5, 3), (HOST_B, 0, 4)]);
    assert!(maps.fdb_delete(t, 0).unwrap());
    assert!(!maps.fdb_delete(t, 0).unwrap(), "already gone");
    assert_eq!(maps.fdb_seen(t, 0).unwrap(), None);
    assert_eq!(maps.fdb_entries().unwrap().len(), 2);
    // Port ids beyond the slots are refused.
    assert_eq!(maps.fdb_set(t, 0, 8, false).unwrap_err().kind(), ErrorKind::InvalidConfig);
}

#[test]
fn a_full_fdb_refuses_new_entries_and_still_replaces() {
    if !root_or_skip() {
        return;
    }
    let maps = FastPathMaps::new(2, 4).unwrap();
    maps.fdb_set(HOST_A, 0, 1, false).unwrap();
    maps.fdb_set(HOST_B, 0, 2, false).unwrap();
    let err = maps.fdb_set(HOST_C, 0, 3, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TableFull, "{err}");
    assert!(err.to_string().contains("02:00:00:00:00:0c"), "{err}");
    maps.fdb_set(HOST_A, 0, 3, true).unwrap();
    assert_eq!(maps.fdb_entries().unwrap().len(), 2);
    assert_eq!(maps.fdb_entry(HOST_C, 0).unwrap(), None);
}

#[test]
fn sizes_are_checked() {
    for (entries, ports) in [(0, 4), (MAX_FDB_ENTRIES + 1, 4), (16, 0), (16, MAX_PORT_SLOTS + 1)] {
        let err = FastPathMaps::new(entries, ports).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{entries} {ports}: {err}");
    }
    if !flowsteer_netns::is_root() {
        let err = FastPathMaps::new(16, 4).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotPermitted, "{err}");
    }
}

/// A device map entry's ifindex is resolved in the writer's namespace:
/// the lab's veth from inside the lab; an ifindex that does not exist
/// there is refused.
#[test]
fn port_set_resolves_the_ifindex_where_it_is_written() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("fpns", &LabConfig::default()).expect("lab");
    let ifindex = lab.ifindex(Side::A).unwrap();
    let maps = Arc::new(FastPathMaps::new(16, 8).unwrap());
    let m = Arc::clone(&maps);
    let (ok, missing, zero, beyond) = lab
        .run_in(Side::A, move || {
            (
                m.port_set(2, ifindex, 1518, true),
                m.port_set(3, 99_999, 1518, true),
                m.port_set(3, 0, 1518, true),
                m.port_set(8, ifindex, 1518, true),
            )
        })
        .unwrap();
    ok.unwrap();
    assert_eq!(maps.port(2).unwrap(), FastPort { ifindex, max_frame: 1518, enabled: true, tx_ifindex: Some(ifindex) });
    assert_eq!(missing.unwrap_err().kind(), ErrorKind::NoSuchInterface);
    assert_eq!(zero.unwrap_err().kind(), ErrorKind::InvalidConfig);
    assert_eq!(beyond.unwrap_err().kind(), ErrorKind::InvalidConfig);
    assert_eq!(maps.port(3).unwrap(), FastPort::default(), "a refused write leaves the slot empty");
    let m = Arc::clone(&maps);
    lab.run_in(Side::A, move || m.port_set(2, ifindex, 9018, false)).unwrap().unwrap();
    assert_eq!(maps.port(2).unwrap(), FastPort { ifindex, max_frame: 9018, enabled: false, tx_ifindex: Some(ifindex) });
    maps.port_clear(2).unwrap();
    assert_eq!(maps.port(2).unwrap(), FastPort::default());
    maps.port_clear(2).unwrap();
}

// ---------------------------------------------------------------- cost

/// Nanoseconds per run of the loaded program on `frame` under
/// BPF_PROG_TEST_RUN: the best of five rounds of 10^6 runs each. The runs
/// of a round share one buffer, so a frame the program changes is measured
/// changed from the second run on.
fn cost_ns(k: &Kernel, frame: &[u8]) -> u32 {
    const REPEAT: u32 = 1_000_000;
    let mut out = vec![0u8; 4096];
    (0..5)
        .map(|_| sys::prog_test_run(&k.prog, frame, &mut out, None, REPEAT).expect("BPF_PROG_TEST_RUN").duration_ns)
        .min()
        .unwrap_or(0)
}

/// Mean nanoseconds of single runs on a fresh copy of `frame` (each call
/// copies it in), timer overhead included: for frames the program changes.
fn cost_once_ns(k: &Kernel, frame: &[u8]) -> f64 {
    const CALLS: u32 = 100_000;
    let mut out = vec![0u8; 4096];
    let total: u64 = (0..CALLS)
        .map(|_| {
            u64::from(sys::prog_test_run(&k.prog, frame, &mut out, None, 1).expect("BPF_PROG_TEST_RUN").duration_ns)
        })
        .sum();
    total as f64 / f64::from(CALLS)
}

/// The cost per frame of the fast path's paths, printed, not asserted (a
/// measurement, not a test: run it alone, in release,
/// `cargo test -p flowsteer-xsk --release --lib cost -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement: prints ns per frame, asserts nothing about time"]
fn kernel_cost_per_frame() {
    let Some(k) = kernel("fpc") else { return };
    let frames = [
        ("complete UDPv4, 32 bytes", ip_frame(L4::Udp, false, &[], &[], 32)),
        ("complete UDPv4, 1400 bytes", ip_frame(L4::Udp, false, &[], &[], 1400)),
        ("complete TCPv6, 1400 bytes", ip_frame(L4::Tcp, true, &[], &[], 1400)),
        ("partial UDPv4, 32 bytes", partial(ip_frame(L4::Udp, false, &[], &[], 32))),
        ("partial UDPv4, 1400 bytes", partial(ip_frame(L4::Udp, false, &[], &[], 1400))),
        ("partial TCPv6, 1400 bytes", partial(ip_frame(L4::Tcp, true, &[], &[], 1400))),
        ("partial UDPv4 that verifies, 1400 bytes", partial_that_verifies(ip_frame(L4::Udp, false, &[], &[], 1400))),
        ("partial TCPv6 that verifies, 1400 bytes", partial_that_verifies(ip_frame(L4::Tcp, true, &[], &[], 1400))),
        ("partial TCPv4 that verifies, 1458 bytes", partial_that_verifies(ip_frame(L4::Tcp, false, &[], &[], 1458))),
    ];
    println!("{:44} {:>9} {:>13}", "frame", "10^6 runs", "single runs");
    for (name, f) in &frames {
        println!("{name:44} {:6} ns {:10.1} ns", cost_ns(&k, f), cost_once_ns(&k, f));
    }
}

/// The verifier's work on the bridge's program stays far below its limit
/// of 10^6 instructions: the checksum completion is written so that the
/// verifier's states meet again after every piece of the sum (measured on
/// 6.18: about 62,000; a bounded loop of 8-byte loads instead took
/// 781,000, one of 4-byte loads was refused, E2BIG).
#[test]
fn kernel_verifier_work_stays_small() {
    let Some(k) = kernel("fpv") else { return };
    let xsks = sys::xskmap_create(4, "fs_fp_xsks").expect("xskmap");
    let counters = sys::percpu_array_u64_create(slot::COUNT, "fs_fp_count").expect("counters");
    let claims = sys::array_u32_create(CLAIM_ENTRIES, "fs_fp_claim").expect("claims");
    let m = Maps { xsks: xsks.as_raw_fd(), counters: counters.as_raw_fd(), claims: claims.as_raw_fd() };
    let p = prog::program(m, &Claim::Frames, Some(SOCKET_ROOM), Some(k.maps.refs(INGRESS)));
    // Log level 1: the kernel writes more than it keeps (ENOSPC when the
    // buffer cannot take all of it); on a successful load it keeps only the
    // statistics line.
    let mut log = vec![0u8; 1 << 24];
    sys::prog_load_xdp(&p, "GPL", "fs_fp_stats", Some(&mut log)).expect("loads");
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]).into_owned();
    let processed: u64 = text
        .split_once("processed ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no statistics in the verifier log: {text}"));
    assert!(processed < 250_000, "{} instructions, {processed} processed by the verifier: {text}", p.len());
}
