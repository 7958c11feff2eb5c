//! Test frames, sans-IO: templates built once, a 16-byte stamp written per
//! frame, and the receiver's check of what came back.
//!
//! # Frame layout
//!
//! Ethernet II, IPv4 (20 bytes) or IPv6 (40 bytes), UDP, then the stamp:
//!
//! | bytes | field |
//! |---|---|
//! | 0..2 | magic [`STAMP_MAGIC`] |
//! | 2..4 | stream id (the flow's index) |
//! | 4..8 | sequence number: the frame's index in the trial, over all flows |
//! | 8..16 | transmit time, ns of `CLOCK_MONOTONIC` |
//!
//! then zero padding up to the frame size. Frame sizes count the 4-byte FCS,
//! as RFC 2544 does: a 64-byte frame is 60 bytes handed to the interface.
//! The smallest frame is 64 bytes for IPv4 and [`MIN_FRAME_IPV6`] for IPv6
//! (the IPv6 header leaves no room for the stamp in 64).
//!
//! Every checksum is valid (the Linux bridge's netfilter hook drops IPv4
//! frames with a bad header checksum silently): the IPv4 header checksum is
//! in the template, the UDP checksum is the template's sum over the pseudo
//! header, the UDP header and the zero stamp, plus the stamp's words,
//! folded per frame ([`Template::write`]). A frame that already holds its
//! template, sent again from the same transmit buffer, gets only its
//! sequence number and time rewritten and its checksum updated from the
//! old one ([`Template::restamp`], RFC 1624): the same work whatever the
//! frame size.

use std::net::IpAddr;

use flowsteer_wire::build::FrameBuilder;
use flowsteer_wire::checksum::{fold, pseudo_header_sum, sum};
use serde::Serialize;

/// First two bytes of every stamp.
pub const STAMP_MAGIC: u16 = 0xf52a;
/// Stamp length.
pub const STAMP_LEN: usize = 16;
/// Ethernet FCS, counted in frame sizes but not handed to the interface.
pub const FCS_LEN: usize = 4;
/// Smallest IPv4 frame (RFC 2544).
pub const MIN_FRAME_IPV4: u16 = 64;
/// Smallest IPv6 frame: 14 + 40 + 8 + 16 bytes of stamp + FCS.
pub const MIN_FRAME_IPV6: u16 = 82;
/// Largest frame (untagged, MTU 1500).
pub const MAX_FRAME: u16 = 1518;
/// IMIX: 7 of 64, 4 of 594, 1 of 1518 bytes, interleaved.
pub const IMIX_PATTERN: [u16; 12] = [64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 64, 594];

/// A frame size of a sweep. In JSON: the number of bytes, or `"imix"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameSize {
    /// Every frame this many bytes (FCS included).
    Fixed(u16),
    /// The 7:4:1 mix of 64/594/1518 bytes ([`IMIX_PATTERN`]).
    Imix,
}

impl Serialize for FrameSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FrameSize::Fixed(n) => s.serialize_u16(*n),
            FrameSize::Imix => s.serialize_str("imix"),
        }
    }
}

impl FrameSize {
    /// The RFC 2544 section 9 sizes and IMIX.
    pub const DEFAULTS: [FrameSize; 8] = [
        FrameSize::Fixed(64),
        FrameSize::Fixed(128),
        FrameSize::Fixed(256),
        FrameSize::Fixed(512),
        FrameSize::Fixed(1024),
        FrameSize::Fixed(1280),
        FrameSize::Fixed(1518),
        FrameSize::Imix,
    ];

    /// Parses `64` or `imix`.
    pub fn parse(s: &str) -> Result<FrameSize, FrameError> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(FrameSize::Imix);
        }
        let n: u16 = s.parse().map_err(|_| FrameError::BadSize(s.to_string()))?;
        if !(MIN_FRAME_IPV4..=MAX_FRAME).contains(&n) {
            return Err(FrameError::SizeOutOfRange { size: n, min: MIN_FRAME_IPV4 });
        }
        Ok(FrameSize::Fixed(n))
    }

    /// The sizes, one per frame slot of the pattern.
    pub fn pattern(&self) -> Vec<u16> {
        match self {
            FrameSize::Fixed(n) => vec![*n],
            FrameSize::Imix => IMIX_PATTERN.to_vec(),
        }
    }

    /// Mean size in bytes (FCS included).
    pub fn mean_bytes(&self) -> f64 {
        let p = self.pattern();
        p.iter().map(|&n| f64::from(n)).sum::<f64>() / p.len() as f64
    }

    /// A label: `64` or `imix`.
    pub fn label(&self) -> String {
        match self {
            FrameSize::Fixed(n) => n.to_string(),
            FrameSize::Imix => "imix".to_string(),
        }
    }

    /// Theoretical maximum frames/s on a link of `bits_per_s`: each frame
    /// also takes 8 bytes of preamble and 12 of inter-frame gap.
    pub fn line_rate_fps(&self, bits_per_s: f64) -> f64 {
        bits_per_s / ((self.mean_bytes() + 20.0) * 8.0)
    }
}

/// Bad frame parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not a number or `imix`.
    #[error("frame size '{0}': expected a number of bytes or imix")]
    BadSize(String),
    /// Outside the range.
    #[error("frame size {size}: must be {min}..=1518 bytes (FCS included)")]
    SizeOutOfRange {
        /// The size asked for.
        size: u16,
        /// The smallest of the family.
        min: u16,
    },
    /// No flows.
    #[error("flows must be 1..=65536, stream ids (first + flows) at most 65536")]
    Flows,
    /// Source and destination of different families.
    #[error("source and destination addresses must both be IPv4 or both IPv6")]
    MixedFamilies,
}

/// The flows of a trial: one per stream id, differing in source port and
/// source address (the last octet or group counts up from `src_ip`).
/// Flow `i` carries stream id `stream_base + i`, so two generators sharing
/// a receiver path (the two directions of a bidirectional trial) never
/// send the same stream id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowSpec {
    /// Source MAC (the generator's interface).
    pub src_mac: [u8; 6],
    /// Destination MAC (the receiver's interface).
    pub dst_mac: [u8; 6],
    /// First source address.
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// First source port; flow `i` uses `src_port + i` (wrapping) unless
    /// `src_ports` names its port.
    pub src_port: u16,
    /// Source port per flow (e.g. from an RSS spread planner); empty:
    /// `src_port + i`.
    pub src_ports: Vec<u16>,
    /// Stream id of flow 0 (`stream_base + flows` at most 65536).
    pub stream_base: u16,
    /// Destination port (the receiver claims it).
    pub dst_port: u16,
    /// Number of flows, 1..=65536 (default 16).
    pub flows: u32,
    /// Source address per flow (round robin when shorter than `flows`);
    /// empty: counted up from `src_ip`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub src_addrs: Vec<IpAddr>,
}

impl FlowSpec {
    /// Source address of flow `i`.
    pub fn src_addr(&self, i: u32) -> IpAddr {
        if !self.src_addrs.is_empty() {
            return self.src_addrs[i as usize % self.src_addrs.len()];
        }
        nth_addr(self.src_ip, i)
    }

    /// Source port of flow `i`.
    pub fn sport(&self, i: u32) -> u16 {
        self.src_ports.get(i as usize).copied().unwrap_or_else(|| self.src_port.wrapping_add(i as u16))
    }
}

fn nth_addr(base: IpAddr, i: u32) -> IpAddr {
    match base {
        IpAddr::V4(a) => {
            let o = a.octets();
            // The last octet counts within the /24, skipping .0 and .255.
            let last = 1 + (u32::from(o[3]).wrapping_sub(1).wrapping_add(i) % 254) as u8;
            IpAddr::from([o[0], o[1], o[2], last])
        }
        IpAddr::V6(a) => {
            let mut s = a.segments();
            s[7] = s[7].wrapping_add(i as u16);
            IpAddr::from(s)
        }
    }
}

/// One pre-built frame: the bytes with a zero stamp and where to patch.
#[derive(Debug, Clone)]
pub struct Template {
    bytes: Vec<u8>,
    stamp_at: usize,
    csum_at: usize,
    base_sum: u64,
    stream: u16,
    sport: u16,
}

impl Template {
    /// The frame bytes (zero stamp).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Length handed to the interface (frame size minus FCS).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The UDP source port.
    pub fn sport(&self) -> u16 {
        self.sport
    }

    /// The stream id the stamp carries.
    pub fn stream(&self) -> u16 {
        self.stream
    }

    /// Writes the frame with its stamp into `out` (at least [`Template::len`]
    /// bytes; the rest is left alone).
    pub fn write(&self, out: &mut [u8], seq: u32, ts_ns: u64) {
        let Some(dst) = out.get_mut(..self.bytes.len()) else { return };
        dst.copy_from_slice(&self.bytes);
        let mut stamp = [0u8; STAMP_LEN];
        stamp[0..2].copy_from_slice(&STAMP_MAGIC.to_be_bytes());
        stamp[2..4].copy_from_slice(&self.stream.to_be_bytes());
        stamp[4..8].copy_from_slice(&seq.to_be_bytes());
        stamp[8..16].copy_from_slice(&ts_ns.to_be_bytes());
        dst[self.stamp_at..self.stamp_at + STAMP_LEN].copy_from_slice(&stamp);
        let mut csum = fold(sum(&stamp, self.base_sum));
        if csum == 0 {
            // UDP: a computed 0 is sent as all ones (0 means "none").
            csum = 0xffff;
        }
        dst[self.csum_at..self.csum_at + 2].copy_from_slice(&csum.to_be_bytes());
    }

    /// Rewrites the sequence number and transmit time of a frame this
    /// template already wrote into `frame` (by [`Template::write`] or an
    /// earlier `restamp`), and updates its UDP checksum incrementally from
    /// the one in the frame (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m') over
    /// the six changed 16-bit words) instead of summing the stamp again. The
    /// rest of the frame (headers, stream id, padding) is left as it is. A
    /// `frame` shorter than the template is left alone.
    pub fn restamp(&self, frame: &mut [u8], seq: u32, ts_ns: u64) {
        let Some(dst) = frame.get_mut(..self.bytes.len()) else { return };
        let mut new = [0u8; 12];
        new[0..4].copy_from_slice(&seq.to_be_bytes());
        new[4..12].copy_from_slice(&ts_ns.to_be_bytes());
        let fields = self.stamp_at + 4..self.stamp_at + STAMP_LEN;
        let old_csum = u16::from_be_bytes([dst[self.csum_at], dst[self.csum_at + 1]]);
        let mut acc = u64::from(!old_csum);
        for w in dst[fields.clone()].chunks_exact(2) {
            acc += u64::from(!u16::from_be_bytes([w[0], w[1]]));
        }
        let mut csum = fold(sum(&new, acc));
        if csum == 0 {
            csum = 0xffff;
        }
        dst[fields].copy_from_slice(&new);
        dst[self.csum_at..self.csum_at + 2].copy_from_slice(&csum.to_be_bytes());
    }
}

/// The frames of a trial: a template per (flow, pattern slot); frame `seq`
/// uses flow `seq % flows` and size slot `seq % pattern`.
#[derive(Debug, Clone)]
pub struct FrameSet {
    flows: u32,
    pattern: usize,
    templates: Vec<Template>,
}

impl FrameSet {
    /// Builds the templates.
    pub fn new(spec: &FlowSpec, size: FrameSize) -> Result<FrameSet, FrameError> {
        if spec.flows == 0 || u64::from(spec.flows) + u64::from(spec.stream_base) > 65536 {
            return Err(FrameError::Flows);
        }
        if spec.src_ip.is_ipv4() != spec.dst_ip.is_ipv4()
            || spec.src_addrs.iter().any(|a| a.is_ipv4() != spec.dst_ip.is_ipv4())
        {
            return Err(FrameError::MixedFamilies);
        }
        let v6 = spec.src_ip.is_ipv6();
        let min = if v6 { MIN_FRAME_IPV6 } else { MIN_FRAME_IPV4 };
        let pattern = size.pattern();
        for &n in &pattern {
            if n < min || n > MAX_FRAME {
                return Err(FrameError::SizeOutOfRange { size: n, min });
            }
        }
        let hdr = 14 + if v6 { 40 } else { 20 } + 8;
        let mut templates = Vec::with_capacity(spec.flows as usize * pattern.len());
        for flow in 0..spec.flows {
            for &n in &pattern {
                let payload = vec![0u8; usize::from(n) - FCS_LEN - hdr];
                let src = spec.src_addr(flow);
                let sport = spec.sport(flow);
                let b = FrameBuilder {
                    src_mac: spec.src_mac,
                    dst_mac: spec.dst_mac,
                    ..FrameBuilder::udp(src, spec.dst_ip, sport, spec.dst_port, &payload)
                };
                let mut bytes = b.build();
                let csum_at = hdr - 2;
                bytes[csum_at] = 0;
                bytes[csum_at + 1] = 0;
                let udp_len = (bytes.len() - (hdr - 8)) as u32;
                let base_sum = sum(&bytes[hdr - 8..], pseudo_header_sum(src, spec.dst_ip, 17, udp_len));
                let stream = spec.stream_base.wrapping_add(flow as u16);
                templates.push(Template { bytes, stamp_at: hdr, csum_at, base_sum, stream, sport });
            }
        }
        Ok(FrameSet { flows: spec.flows, pattern: pattern.len(), templates })
    }

    /// The template of frame `seq`.
    pub fn template(&self, seq: u32) -> &Template {
        &self.templates[self.index(seq)]
    }

    /// Which template frame `seq` uses: `0..`[`FrameSet::len`].
    pub fn index(&self, seq: u32) -> usize {
        let flow = (seq % self.flows) as usize;
        let slot = (seq as usize) % self.pattern;
        flow * self.pattern + slot
    }

    /// Template `index` (`None` past the end).
    pub fn by_index(&self, index: usize) -> Option<&Template> {
        self.templates.get(index)
    }

    /// Number of templates: frame `seq` and frame `seq + k * len()` use the
    /// same one (the flows times the size pattern).
    pub fn len(&self) -> usize {
        self.templates.len()
    }

    /// Never empty (at least one flow and one size).
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    /// Flows.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// Largest frame, bytes handed to the interface.
    pub fn max_len(&self) -> usize {
        self.templates.iter().map(Template::len).max().unwrap_or(0)
    }
}

/// A stamp read back from a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Stream id.
    pub stream: u16,
    /// Sequence number.
    pub seq: u32,
    /// Transmit time, ns.
    pub ts_ns: u64,
}

/// Reads the stamp of a frame built by [`FrameSet`]; `None` for any other
/// frame (wrong EtherType, protocol, destination port or magic, too short).
pub fn read_stamp(frame: &[u8], dst_port: u16) -> Option<Stamp> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let (proto, l4) = match ethertype {
        0x0800 if frame.get(14)? == &0x45 => (*frame.get(23)?, 34),
        0x86dd => (*frame.get(20)?, 54),
        _ => return None,
    };
    if proto != 17 || u16::from_be_bytes([*frame.get(l4 + 2)?, *frame.get(l4 + 3)?]) != dst_port {
        return None;
    }
    let s = frame.get(l4 + 8..l4 + 8 + STAMP_LEN)?;
    if u16::from_be_bytes([s[0], s[1]]) != STAMP_MAGIC {
        return None;
    }
    Some(Stamp {
        stream: u16::from_be_bytes([s[2], s[3]]),
        seq: u32::from_be_bytes([s[4], s[5], s[6], s[7]]),
        ts_ns: u64::from_be_bytes([s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_wire::{parse_frame, LinkType, ParseOptions};

    fn spec(v6: bool) -> FlowSpec {
        let (s, d): (IpAddr, IpAddr) = if v6 {
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
        } else {
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
        };
        FlowSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: s,
            dst_ip: d,
            src_port: 1000,
            dst_port: 7000,
            flows: 4,
            src_ports: Vec::new(),
            stream_base: 0,
            src_addrs: Vec::new(),
        }
    }

    fn udp_ok(frame: &[u8], v6: bool) -> bool {
        let l3 = 14;
        let (src, dst, l4): (IpAddr, IpAddr, usize) = if v6 {
            let s: [u8; 16] = frame[22..38].try_into().unwrap();
            let d: [u8; 16] = frame[38..54].try_into().unwrap();
            (s.into(), d.into(), l3 + 40)
        } else {
            let s: [u8; 4] = frame[26..30].try_into().unwrap();
            let d: [u8; 4] = frame[30..34].try_into().unwrap();
            (s.into(), d.into(), l3 + 20)
        };
        let udp_len = u16::from_be_bytes([frame[l4 + 4], frame[l4 + 5]]) as usize;
        let seg = &frame[l4..l4 + udp_len];
        fold(sum(seg, pseudo_header_sum(src, dst, 17, udp_len as u32))) == 0
    }

    #[test]
    fn stamped_frames_have_valid_checksums_and_read_back() {
        for v6 in [false, true] {
            let size = if v6 { FrameSize::Fixed(MIN_FRAME_IPV6) } else { FrameSize::Imix };
            let set = FrameSet::new(&spec(v6), size).unwrap();
            let mut buf = [0u8; 2048];
            for seq in [0u32, 1, 7, 11, 12, 0xffff_ffff] {
                let t = set.template(seq);
                t.write(&mut buf, seq, 0x0123_4567_89ab_cdef ^ u64::from(seq));
                let f = &buf[..t.len()];
                assert!(udp_ok(f, v6), "v6 {v6} seq {seq}");
                if !v6 {
                    assert_eq!(flowsteer_wire::build::ipv4_header_checksum(&f[14..34]).to_be_bytes(), [f[24], f[25]]);
                }
                assert!(parse_frame(f, LinkType::Ethernet, &ParseOptions::default()).is_ok());
                let st = read_stamp(f, 7000).unwrap();
                assert_eq!((st.stream, st.seq), ((seq % 4) as u16, seq));
                assert_eq!(st.ts_ns, 0x0123_4567_89ab_cdef ^ u64::from(seq));
                assert_eq!(read_stamp(f, 7001), None);
            }
        }
    }

    proptest::proptest! {
        /// Restamping a frame, again and again, gives the bytes a full write
        /// of the new stamp gives: headers, stamp and checksum.
        #[test]
        fn restamp_matches_a_full_write(
            v6 in proptest::bool::ANY,
            size in 0usize..12,
            stamps in proptest::collection::vec((proptest::num::u32::ANY, proptest::num::u64::ANY), 1..8),
            first in proptest::num::u32::ANY,
        ) {
            let set = FrameSet::new(&spec(v6), if v6 { FrameSize::Fixed(MIN_FRAME_IPV6 + size as u16 * 7) } else { FrameSize::Imix }).unwrap();
            let t = set.template(first.wrapping_mul(12).wrapping_add(size as u32));
            let mut inplace = vec![0u8; t.len()];
            t.write(&mut inplace, first, 0);
            let mut full = vec![0u8; t.len()];
            for &(seq, ts) in &stamps {
                t.restamp(&mut inplace, seq, ts);
                t.write(&mut full, seq, ts);
                proptest::prop_assert_eq!(&inplace, &full);
                proptest::prop_assert!(udp_ok(&inplace, v6));
            }
        }
    }

    #[test]
    fn restamp_keeps_the_checksum_valid_through_the_all_ones_case() {
        // Find a stamp whose checksum is the "computed 0, sent as 0xffff"
        // case, then restamp from and to it.
        let set = FrameSet::new(&spec(false), FrameSize::Fixed(64)).unwrap();
        let t = set.template(0);
        let mut buf = vec![0u8; t.len()];
        let csum_of = |b: &[u8]| u16::from_be_bytes([b[40], b[41]]);
        let mut found = None;
        for ts in 0..200_000u64 {
            t.write(&mut buf, 0, ts);
            if csum_of(&buf) == 0xffff {
                found = Some(ts);
                break;
            }
        }
        let ts = found.expect("some timestamp sums to zero");
        let mut full = buf.clone();
        t.restamp(&mut buf, 16, 5);
        t.write(&mut full, 16, 5);
        assert_eq!(buf, full);
        t.restamp(&mut buf, 0, ts);
        assert_eq!(csum_of(&buf), 0xffff);
        assert!(udp_ok(&buf, false));
        // A short buffer is left alone.
        let mut short = [0u8; 10];
        t.restamp(&mut short, 1, 1);
        assert_eq!(short, [0u8; 10]);
    }

    #[test]
    fn stream_base_and_planned_source_ports_reach_the_frames() {
        let spec = FlowSpec { stream_base: 4, src_ports: vec![40000, 40001, 50000, 7], ..spec(false) };
        let set = FrameSet::new(&spec, FrameSize::Fixed(64)).unwrap();
        for seq in 0..8u32 {
            let t = set.template(seq);
            let mut buf = vec![0u8; t.len()];
            t.write(&mut buf, seq, 1);
            assert!(udp_ok(&buf, false));
            let st = read_stamp(&buf, 7000).unwrap();
            assert_eq!(u32::from(st.stream), 4 + seq % 4);
            let sport = u16::from_be_bytes([buf[34], buf[35]]);
            assert_eq!(sport, spec.src_ports[(seq % 4) as usize]);
        }
        // Stream ids past 65535 are refused.
        let over = FlowSpec { stream_base: 65533, src_ports: Vec::new(), ..spec.clone() };
        assert_eq!(FrameSet::new(&over, FrameSize::Fixed(64)).unwrap_err(), FrameError::Flows);
        let fits = FlowSpec { stream_base: 65532, src_ports: Vec::new(), ..spec };
        assert!(FrameSet::new(&fits, FrameSize::Fixed(64)).is_ok());
    }

    #[test]
    fn sizes_count_the_fcs_and_imix_is_7_4_1() {
        let set = FrameSet::new(&spec(false), FrameSize::Fixed(64)).unwrap();
        assert_eq!(set.template(0).len(), 60);
        let imix: Vec<usize> =
            (0..12).map(|s| FrameSet::new(&spec(false), FrameSize::Imix).unwrap().template(s).len()).collect();
        assert_eq!(imix.iter().filter(|&&l| l == 60).count(), 7);
        assert_eq!(imix.iter().filter(|&&l| l == 590).count(), 4);
        assert_eq!(imix.iter().filter(|&&l| l == 1514).count(), 1);
        assert!((FrameSize::Imix.mean_bytes() - 4342.0 / 12.0).abs() < 1e-9);
    }

    #[test]
    fn sizes_parse_and_ipv6_needs_room_for_the_stamp() {
        assert_eq!(FrameSize::parse("IMIX"), Ok(FrameSize::Imix));
        assert_eq!(FrameSize::parse("128"), Ok(FrameSize::Fixed(128)));
        assert!(FrameSize::parse("63").is_err() && FrameSize::parse("1519").is_err() && FrameSize::parse("x").is_err());
        assert!(matches!(FrameSet::new(&spec(true), FrameSize::Fixed(64)), Err(FrameError::SizeOutOfRange { .. })));
    }

    #[test]
    fn line_rate_of_64_byte_frames_on_10g() {
        assert!((FrameSize::Fixed(64).line_rate_fps(10e9) - 14_880_952.38).abs() < 1.0);
    }
}
