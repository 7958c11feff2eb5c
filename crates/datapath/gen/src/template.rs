//! Per-flow frame templates and the per-packet patching.
//!
//! A [`Template`] is the first [`PREFIX`] bytes of the flow's unfragmented
//! frame (Ethernet, IP and UDP/TCP headers, the 8-byte sequence number
//! zeroed, the 4-byte flow id, zeros), built once with
//! `flowsteer_wire::build::FrameBuilder`, with every per-packet field
//! (lengths, IPv4 identification, TCP sequence number, checksums) zeroed,
//! plus two partial one's complement sums: the IPv4 header's and the
//! transport checksum's (pseudo-header addresses and protocol, L4 header,
//! flow id).
//!
//! Emitting a packet is one fixed-size copy of the template and a handful of
//! 16-bit stores; the checksums are completed from the partial sums plus the
//! changed words (RFC 1071 arithmetic: the sum is order-independent, so the
//! partial sum plus the new words is the full sum; no RFC 1624 subtraction is
//! needed since the template's fields are zero). All checksums are correct,
//! IPv4 UDP included (it could be 0, but computing it costs ~1 ns).
//!
//! Every frame buffer keeps the invariant that its bytes from [`PREFIX`] on
//! are zero: every emit writes only below `PREFIX`, and the payload past the
//! 12-byte sequence header is zero. So padding a frame to its length costs
//! nothing.

use flowsteer_wire::build::{FrameBuilder, L4Spec, DEFAULT_WINDOW};
use flowsteer_wire::checksum::{pseudo_header_sum, sum};
use flowsteer_wire::ipv6::NH_FRAGMENT;
use flowsteer_wire::tcp;

use crate::config::{FRAG_UDP_PAYLOAD, MTU};
use crate::flow::{FlowSpec, Kind};

/// Bytes of a frame a template covers (the longest header stack, IPv6/TCP,
/// plus the sequence header is 86 bytes).
pub(crate) const PREFIX: usize = 88;
/// Capacity of a frame buffer: a 9000-byte jumbo frame plus VLAN tag and FCS room.
pub const FRAME_CAPACITY: usize = 9018;

const ETH: usize = 14;
/// Length of the sequence header at the start of every payload.
pub(crate) const SEQ_HEADER_LEN: usize = 12;
/// UDP datagram length of fragmented datagrams.
pub(crate) const FRAG_DATAGRAM_LEN: usize = 8 + FRAG_UDP_PAYLOAD;

/// A frame buffer.
pub(crate) type Buf = [u8; FRAME_CAPACITY];

/// One flow's precomputed frame prefix (94 bytes).
#[derive(Clone, Debug)]
pub(crate) struct Template {
    bytes: [u8; PREFIX],
    /// Folded sum of the IPv4 header (length, ident, checksum zeroed).
    ip_sum: u16,
    /// Folded sum of pseudo-header addresses + protocol, L4 header (length,
    /// TCP seq and checksum zeroed) and the flow id.
    l4_sum: u16,
    pub(crate) kind: Kind,
}

/// End-around-carry fold without complement.
#[inline]
fn fold64(mut x: u64) -> u16 {
    while x > 0xffff {
        x = (x & 0xffff) + (x >> 16);
    }
    x as u16
}

/// The checksum to store for the (unfolded, < 2^32) sum `x`.
#[inline]
fn csum32(x: u32) -> u16 {
    let x = (x & 0xffff) + (x >> 16);
    let x = (x & 0xffff) + (x >> 16);
    !(x as u16)
}

/// The UDP form: 0 is sent as 0xffff (RFC 768).
#[inline]
fn udp_csum32(x: u32) -> u16 {
    match csum32(x) {
        0 => 0xffff,
        c => c,
    }
}

#[inline]
fn seq_words(seq: u64) -> u32 {
    ((seq >> 48) as u32) + ((seq >> 32) as u32 & 0xffff) + ((seq >> 16) as u32 & 0xffff) + (seq as u32 & 0xffff)
}

#[inline]
fn put16(buf: &mut Buf, at: usize, v: u16) {
    if let Some(d) = buf.get_mut(at..at + 2) {
        d.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
fn put32(buf: &mut Buf, at: usize, v: u32) {
    if let Some(d) = buf.get_mut(at..at + 4) {
        d.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
fn put64(buf: &mut Buf, at: usize, v: u64) {
    if let Some(d) = buf.get_mut(at..at + 8) {
        d.copy_from_slice(&v.to_be_bytes());
    }
}

fn zero(b: &mut [u8], from: usize, to: usize) {
    if let Some(d) = b.get_mut(from..to) {
        d.fill(0);
    }
}

impl Template {
    /// Builds flow `flow_id`'s template; `scratch` is reused (cleared).
    pub(crate) fn build(spec: &FlowSpec, flow_id: u32, scratch: &mut Vec<u8>) -> Template {
        let kind = spec.kind;
        let t = &spec.tuple;
        let (sport, dport) = t.ports.unwrap_or((0, 0));
        let mut payload = [0u8; SEQ_HEADER_LEN];
        payload[8..].copy_from_slice(&flow_id.to_be_bytes());
        let l4 = if kind.is_tcp() {
            L4Spec::Tcp { sport, dport, seq: 0, ack: spec.tcp_ack, flags: tcp::ACK | tcp::PSH, window: DEFAULT_WINDOW }
        } else {
            L4Spec::Udp { sport, dport }
        };
        let b = FrameBuilder { l4, flow_label: spec.flow_label, ..FrameBuilder::raw(t.src, t.dst, t.proto, &payload) };
        scratch.clear();
        b.write(scratch);

        let mut bytes = [0u8; PREFIX];
        let n = scratch.len().min(PREFIX);
        bytes[..n].copy_from_slice(&scratch[..n]);

        let l3 = ETH;
        let l4_off = l4_offset(kind);
        let ip_sum = if kind.is_v6() {
            zero(&mut bytes, l3 + 4, l3 + 6); // payload length
            0
        } else {
            zero(&mut bytes, l3 + 2, l3 + 6); // total length, identification
            zero(&mut bytes, l3 + 10, l3 + 12); // header checksum
            fold64(sum(&bytes[l3..l3 + 20], 0))
        };
        if kind.is_tcp() {
            zero(&mut bytes, l4_off + 4, l4_off + 8); // sequence number
            zero(&mut bytes, l4_off + 16, l4_off + 18); // checksum
        } else {
            zero(&mut bytes, l4_off + 4, l4_off + 8); // length, checksum
        }
        let l4_end = payload_offset(kind) + SEQ_HEADER_LEN;
        let l4_sum = fold64(sum(&bytes[l4_off..l4_end], pseudo_header_sum(t.src, t.dst, t.proto, 0)));
        Template { bytes, ip_sum, l4_sum, kind }
    }

    /// Shortest frame that holds this flow's headers and sequence header.
    #[inline]
    pub(crate) fn min_len(&self) -> usize {
        payload_offset(self.kind) + SEQ_HEADER_LEN
    }

    /// Writes the unfragmented packet `seq` of this flow, `len` bytes long
    /// (`min_len()..=MAX_FRAME_LEN`), into `buf`.
    ///
    /// Branch-free in the flow kind: with flows drawn at random (Zipf) the
    /// IPv4/IPv6 and UDP/TCP branches mispredicted and cost ~2x; offsets and
    /// values are now computed from the kind bits instead. For IPv6 the
    /// IPv4-only stores (identification, header checksum) land on the
    /// sequence number's bytes, which are written last.
    #[inline]
    pub(crate) fn emit_whole(&self, buf: &mut Buf, seq: u64, len: usize) {
        if let Some(d) = buf.first_chunk_mut::<PREFIX>() {
            *d = self.bytes;
        }
        let v6 = usize::from(self.kind.is_v6());
        let tcp = usize::from(self.kind.is_tcp());
        let l4_off = ETH + 20 + 20 * v6;
        let pay_off = l4_off + 8 + 12 * tcp;

        // IPv4 total length at 16 / IPv6 payload length at 18.
        put16(buf, ETH + 2 + 2 * v6, (len - ETH - 40 * v6) as u16);
        let total = (len - ETH) as u32;
        let ident = seq as u16;
        let ip_csum = csum32(u32::from(self.ip_sum) + total + u32::from(ident));
        // IPv4 identification at 18 and header checksum at 24; IPv6: dummies.
        put16(buf, (ETH + 4) * (1 - v6) + pay_off * v6, ident);
        put16(buf, (ETH + 10) * (1 - v6) + (pay_off + 2) * v6, ip_csum);

        // UDP: length and checksum at l4+4, l4+6. TCP: sequence number at
        // l4+4, checksum at l4+16.
        let l4_len = (len - l4_off) as u32;
        let s32 = seq as u32;
        let tcp_mask = 0u32.wrapping_sub(tcp as u32);
        let sum = u32::from(self.l4_sum)
            + seq_words(seq)
            + l4_len * (2 - tcp as u32)
            + (((s32 >> 16) + (s32 & 0xffff)) & tcp_mask);
        let c = csum32(sum);
        // UDP sends a computed 0 as 0xffff (RFC 768); TCP keeps 0.
        let c = c | ((u16::from(c == 0) * 0xffff) & !(tcp_mask as u16));
        put32(buf, l4_off + 4, (s32 & tcp_mask) | (((l4_len << 16) | u32::from(c)) & !tcp_mask));
        put16(buf, l4_off + 6 + 10 * tcp, c);
        put64(buf, pay_off, seq);
    }

    /// Writes the fragment at datagram offset `offset` of datagram `seq`
    /// (a [`FRAG_DATAGRAM_LEN`]-byte UDP datagram) into `buf`. Returns the
    /// frame length and the next fragment's offset (None after the last).
    pub(crate) fn emit_fragment(&self, buf: &mut Buf, seq: u64, offset: usize) -> (usize, Option<usize>) {
        let kind = self.kind;
        if let Some(d) = buf.first_chunk_mut::<PREFIX>() {
            *d = self.bytes;
        }
        let dlen = FRAG_DATAGRAM_LEN;
        let chunk = frag_chunk(kind);
        let clen = chunk.min(dlen.saturating_sub(offset));
        let next = offset + clen;
        let more = next < dlen;
        let udp_csum = udp_csum32(u32::from(self.l4_sum) + seq_words(seq) + 2 * dlen as u32);
        let frame_len = if kind.is_v6() {
            // IPv6 header | Fragment header | fragment data.
            let frag_hdr = ETH + 40;
            let data = frag_hdr + 8;
            put16(buf, ETH + 4, (8 + clen) as u16);
            if offset == 0 {
                // Shift UDP header + sequence header behind the Fragment header.
                buf.copy_within(frag_hdr..frag_hdr + 8 + SEQ_HEADER_LEN, data);
                put16(buf, data + 4, dlen as u16);
                put16(buf, data + 6, udp_csum);
                put64(buf, data + 8, seq);
            } else {
                zero(buf, data, PREFIX);
            }
            buf[ETH + 6] = NH_FRAGMENT;
            buf[frag_hdr] = flowsteer_wire::proto::UDP;
            buf[frag_hdr + 1] = 0;
            put16(buf, frag_hdr + 2, (offset as u16 & 0xfff8) | u16::from(more));
            put32(buf, frag_hdr + 4, seq as u32);
            data + clen
        } else {
            let data = ETH + 20;
            let total = (20 + clen) as u16;
            let ident = seq as u16;
            let flags = ((offset / 8) as u16 & 0x1fff) | if more { 0x2000 } else { 0 };
            put16(buf, ETH + 2, total);
            put16(buf, ETH + 4, ident);
            put16(buf, ETH + 6, flags);
            let c = csum32(u32::from(self.ip_sum) + u32::from(total) + u32::from(ident) + u32::from(flags));
            put16(buf, ETH + 10, c);
            if offset == 0 {
                put16(buf, data + 4, dlen as u16);
                put16(buf, data + 6, udp_csum);
                put64(buf, data + 8, seq);
            } else {
                zero(buf, data, PREFIX);
            }
            data + clen
        };
        (frame_len, more.then_some(next))
    }
}

#[inline]
fn l4_offset(kind: Kind) -> usize {
    if kind.is_v6() {
        ETH + 40
    } else {
        ETH + 20
    }
}

#[inline]
fn payload_offset(kind: Kind) -> usize {
    l4_offset(kind) + if kind.is_tcp() { 20 } else { 8 }
}

/// Fragment data per full fragment: the MTU minus the IP header (and the
/// IPv6 Fragment header), rounded down to a multiple of 8.
fn frag_chunk(kind: Kind) -> usize {
    let room = if kind.is_v6() { MTU - 48 } else { MTU - 20 };
    room / 8 * 8
}
