use super::*;
use flowsteer_capture::CaptureWriter;
use flowsteer_wire::build::{
    ipv4_fragments, ipv4_header_checksum, ipv6_fragments, pppoe_frame, udp_frame, FrameBuilder, Ipv6Ext,
};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const TCP: u8 = 6;
const UDP: u8 = 17;

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// A fresh directory, removed on drop (with what is in it).
struct Dir(tempfile::TempDir);

impl Dir {
    fn new(tag: &str) -> Dir {
        Dir(tempfile::Builder::new().prefix(&format!("fs-{tag}-")).tempdir().unwrap())
    }

    fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.path().join(name)
    }

    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.0.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = CaptureWriter::create(path, 1).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(1_000_000 + i as u64, f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        v.push(p.data.to_vec());
    }
    v
}

fn options(input: &Path, output: &Path) -> DefragOptions {
    DefragOptions {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        no_flush: false,
        keep_malformed: false,
        reasm: ReasmConfig::default(),
        stop: None,
        progress: None,
    }
}

/// An IPv4 fragment (Ethernet frame) of protocol `proto` carrying
/// `payload` at byte `offset` of its datagram.
fn frag4(proto: u8, id: u16, offset: u16, more: bool, payload: &[u8], options: &[u8]) -> Vec<u8> {
    let mut f =
        FrameBuilder { ident: id, ipv4_options: options, ..FrameBuilder::raw(A.into(), B.into(), proto, payload) }
            .build();
    let flags = (offset / 8) | if more { 0x2000 } else { 0 };
    f[20..22].copy_from_slice(&flags.to_be_bytes());
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let c = ipv4_header_checksum(&f[14..14 + ihl]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

/// The crafted frames: what may be written and what never may.
struct Crafted {
    whole: Vec<u8>,
    arp: Vec<u8>,
    /// A datagram's three fragments and its UDP payload.
    fragments: Vec<Vec<u8>>,
    /// Offset-0 TCP fragment of 8 bytes, without the whole TCP header (RFC 1858).
    tiny_first: Vec<u8>,
    /// TCP fragment at offset 8 (RFC 1858 §3.2).
    tcp_at_8: Vec<u8>,
    /// A fragment the capture cut short of its IP length.
    cut_fragment: Vec<u8>,
    /// An IPv4 fragment cut inside its header (options): the parser refuses it.
    header_cut_fragment: Vec<u8>,
    /// An IPv6 offset-0 fragment whose extension chain runs past the
    /// fragment (RFC 7112): the parser refuses it.
    chain_cut_fragment: Vec<u8>,
    /// Not fragments, refused by the parser: total length below the
    /// header, and version 5.
    bad_total_len: Vec<u8>,
    bad_version: Vec<u8>,
}

fn crafted() -> Crafted {
    let whole = udp_frame(A.into(), B.into(), 1, 2, b"whole");
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    let fragments = ipv4_fragments(A, B, 5, 6, 77, &[0x5a; 2992], 1000);
    let mut cut_fragment = ipv4_fragments(A, B, 5, 6, 78, &[0x5b; 2992], 1000).remove(1);
    cut_fragment.truncate(14 + 20 + 100);
    let mut header_cut_fragment = frag4(UDP, 79, 0, true, &[0; 16], &[1, 1, 1, 1]);
    header_cut_fragment.truncate(14 + 22);
    let ext = [Ipv6Ext::Fragment { offset: 0, more: true, id: 80 }, Ipv6Ext::DestOpts { len: 16 }];
    let mut chain_cut_fragment =
        FrameBuilder { ipv6_ext: &ext, ..FrameBuilder::raw(v6("fd00::1").into(), v6("fd00::2").into(), UDP, &[0; 8]) }
            .build();
    // The payload ends 8 bytes into the 16-byte Destination Options header.
    chain_cut_fragment[18..20].copy_from_slice(&16u16.to_be_bytes());
    chain_cut_fragment.truncate(14 + 40 + 16);
    let mut bad_total_len = udp_frame(A.into(), B.into(), 3, 4, b"bad length");
    bad_total_len[16..18].copy_from_slice(&10u16.to_be_bytes());
    let mut bad_version = udp_frame(A.into(), B.into(), 3, 4, b"bad version");
    bad_version[14] = 0x55;
    Crafted {
        whole,
        arp,
        fragments,
        tiny_first: frag4(TCP, 81, 0, true, &[0; 8], &[]),
        tcp_at_8: frag4(TCP, 82, 8, true, &[0; 8], &[]),
        cut_fragment,
        header_cut_fragment,
        chain_cut_fragment,
        bad_total_len,
        bad_version,
    }
}

impl Crafted {
    fn capture(&self) -> Vec<Vec<u8>> {
        let mut v = vec![self.whole.clone(), self.arp.clone(), self.fragments[0].clone()];
        v.extend([
            self.tiny_first.clone(),
            self.tcp_at_8.clone(),
            self.cut_fragment.clone(),
            self.header_cut_fragment.clone(),
            self.chain_cut_fragment.clone(),
            self.bad_total_len.clone(),
            self.bad_version.clone(),
        ]);
        v.extend(self.fragments[1..].iter().cloned());
        v
    }
}

/// The packet law, from the report's own fields.
fn check_laws(r: &DefragReport) {
    assert!(r.conservation_ok, "{r:#?}");
    let drops: u64 = r.dropped.values().sum();
    assert_eq!(r.packets_dropped, drops + r.unparseable_dropped + r.fragments_too_long_for_pppoe);
    assert_eq!(
        r.packets_in,
        r.written_unchanged
            + (r.fragments_reassembled - r.fragments_too_long_for_pppoe)
            + r.packets_dropped
            + r.pending_at_end,
        "{r:#?}"
    );
    assert_eq!(r.packets_out, r.written_unchanged + r.datagrams_reassembled - r.datagrams_too_long_for_pppoe);
    assert_eq!(r.unparseable, r.unparseable_by_reason.values().sum::<u64>());
    assert_eq!(r.unparseable, r.unparseable_kept + r.unparseable_dropped);
}

#[test]
fn rejected_and_unparseable_fragments_never_reach_the_output() {
    let d = Dir::new("rules");
    let c = crafted();
    let (input, output) = (d.join("in.pcap"), d.join("out.pcap"));
    write_pcap(&input, &c.capture());
    let datagram = ipv4_fragments(A, B, 5, 6, 77, &[0x5a; 2992], 5000).remove(0);

    let r = defrag_file(&options(&input, &output)).unwrap();
    check_laws(&r);
    assert_eq!(read_pcap(&output), [c.whole.clone(), c.arp.clone(), datagram.clone()]);
    assert_eq!(r.packets_in, 12);
    assert_eq!((r.written_unchanged, r.datagrams_reassembled, r.packets_out), (2, 1, 3));
    assert_eq!(r.dropped["tiny_first"], 2, "{r:#?}");
    assert_eq!(r.dropped["truncated"], 1, "{r:#?}");
    assert_eq!((r.unparseable, r.unparseable_fragments, r.unparseable_kept, r.unparseable_dropped), (4, 2, 0, 4));
    assert_eq!(r.unparseable_by_reason["truncated_ipv4"], 1, "{r:#?}");
    assert_eq!(r.unparseable_by_reason["truncated_ipv6_ext"], 1, "{r:#?}");
    assert_eq!(r.unparseable_by_reason["bad_total_len"], 1, "{r:#?}");
    assert_eq!(r.unparseable_by_reason["bad_version"], 1, "{r:#?}");
    assert_eq!(r.packets_dropped, 3 + 4);
    assert!(r.warnings.iter().any(|w| w.contains("4 frames did not parse and were dropped")), "{:?}", r.warnings);

    // Kept malformed frames: the two that are no fragments, nothing else.
    let r = defrag_file(&DefragOptions { keep_malformed: true, ..options(&input, &output) }).unwrap();
    check_laws(&r);
    assert_eq!(
        read_pcap(&output),
        [c.whole.clone(), c.arp.clone(), c.bad_total_len.clone(), c.bad_version.clone(), datagram]
    );
    assert_eq!((r.unparseable, r.unparseable_fragments, r.unparseable_kept, r.unparseable_dropped), (4, 2, 2, 2));
    assert_eq!(r.written_unchanged, 4);
    assert_eq!(r.packets_dropped, 3 + 2);
    assert_eq!(d.names(), ["in.pcap", "out.pcap"]);
}

#[test]
fn unsupported_link_types_are_dropped_unless_kept() {
    let d = Dir::new("linktype");
    let (input, output) = (d.join("in.pcap"), d.join("out.pcap"));
    let frames = [vec![1u8, 2, 3, 4, 5], vec![6u8; 40]];
    let mut w = CaptureWriter::create(&input, 147).unwrap();
    for f in &frames {
        w.write_packet(1_000, f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
    let r = defrag_file(&options(&input, &output)).unwrap();
    check_laws(&r);
    assert_eq!(r.unparseable_by_reason["unsupported_link_type"], 2);
    assert_eq!((r.packets_out, r.linktype), (0, 147));
    assert!(read_pcap(&output).is_empty());
    let r = defrag_file(&DefragOptions { keep_malformed: true, ..options(&input, &output) }).unwrap();
    check_laws(&r);
    assert_eq!(r.unparseable_kept, 2);
    assert_eq!(read_pcap(&output), frames);
}

#[test]
fn pppoe_fragments_are_reassembled_with_the_length_set() {
    let d = Dir::new("pppoe");
    let (input, output) = (d.join("in.pcap"), d.join("out.pcap"));
    let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let mut frames: Vec<Vec<u8>> =
        ipv4_fragments(A, B, 7, 8, 90, &payload, 1000).iter().map(|f| pppoe_frame(4, &f[14..])).collect();
    frames.extend(
        ipv6_fragments(v6("fd00::1"), v6("fd00::2"), 7, 8, 91, &payload, 1000).iter().map(|f| pppoe_frame(4, &f[14..])),
    );
    frames.reverse();
    frames.push(pppoe_frame(4, &udp_frame(A.into(), B.into(), 7, 8, b"whole")[14..]));
    write_pcap(&input, &frames);
    let r = defrag_file(&options(&input, &output)).unwrap();
    check_laws(&r);
    assert_eq!((r.datagrams_reassembled, r.unfragmented, r.non_ip), (2, 1, 0), "{r:#?}");
    let out = read_pcap(&output);
    assert_eq!(out.len(), 3);
    for f in &out {
        let p = parse_frame(f, LinkType::Ethernet, &ParseOptions::default()).unwrap();
        let ip = p.inner.unwrap();
        assert!(ip.frag.is_none());
        let pppoe_len = usize::from(u16::from_be_bytes([f[18], f[19]]));
        assert_eq!(pppoe_len, ip.ip_total_len + 2);
        assert_eq!(f.len(), ip.l3_offset + ip.ip_total_len);
    }
    assert_eq!(&out[0][out[0].len() - 3000..], &payload[..]);
}

#[test]
fn pppoe_length_field_limits() {
    let mut f = pppoe_frame(4, &udp_frame(A.into(), B.into(), 7, 8, b"x")[14..]);
    assert!(set_pppoe_length(&mut f, 22, 65_533));
    assert_eq!(&f[18..20], &[0xff, 0xff]);
    assert!(!set_pppoe_length(&mut f, 22, 65_534));
    assert!(!set_pppoe_length(&mut f, 3, 10));
}

#[test]
fn the_input_is_never_the_output() {
    let d = Dir::new("same");
    let input = d.join("in.pcap");
    write_pcap(&input, &crafted().capture());
    let before = std::fs::read(&input).unwrap();
    let hard = d.join("hard.pcap");
    std::fs::hard_link(&input, &hard).unwrap();
    let link = d.join("link.pcap");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    for (i, o) in [(&input, &input), (&input, &hard), (&input, &link), (&link, &input)] {
        match defrag_file(&options(i, o)) {
            Err(DefragError::Output(OutputError::SameAsInput { output, input })) => {
                assert_eq!((&output, &input), (o, i));
            }
            other => panic!("{} -> {}: {other:?}", i.display(), o.display()),
        }
    }
    assert_eq!(std::fs::read(&input).unwrap(), before);
    assert_eq!(d.names(), ["hard.pcap", "in.pcap", "link.pcap"]);
}

#[test]
fn a_failure_midway_leaves_the_previous_output() {
    let d = Dir::new("midway");
    let (input, output) = (d.join("in.pcap"), d.join("out.pcap"));
    write_pcap(&input, &crafted().capture());
    // A record claiming 2 GiB: malformed, after the packets before it.
    let mut bytes = std::fs::read(&input).unwrap();
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
    bytes.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
    std::fs::write(&input, &bytes).unwrap();
    std::fs::write(&output, b"the previous output").unwrap();
    match defrag_file(&options(&input, &output)) {
        Err(DefragError::BadRecord { packets: 12, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(&output).unwrap(), b"the previous output");
    assert_eq!(d.names(), ["in.pcap", "out.pcap"]);
}

#[test]
fn a_stop_request_writes_nothing() {
    let d = Dir::new("stop");
    let (input, output) = (d.join("in.pcap"), d.join("out.pcap"));
    write_pcap(&input, &crafted().capture());
    std::fs::write(&output, b"the previous output").unwrap();
    let stop = Arc::new(AtomicBool::new(true));
    let err = defrag_file(&DefragOptions { stop: Some(stop), ..options(&input, &output) }).unwrap_err();
    assert!(matches!(err, DefragError::Interrupted { packets: 0, .. }), "{err:?}");
    assert!(err.to_string().starts_with(&*output.to_string_lossy()), "{err}");
    assert_eq!(std::fs::read(&output).unwrap(), b"the previous output");
    assert_eq!(d.names(), ["in.pcap", "out.pcap"]);
}

/// A pcapng capture with an Ethernet interface (`eth0`, nanoseconds) and a
/// BSD loopback one (`lo0`, microseconds), each carrying one fragmented
/// datagram (fragments in reverse order) and one whole packet.
fn mixed_link_capture(path: &Path) -> (Vec<u8>, Vec<u8>) {
    use flowsteer_capture::{NgInterface, PcapNgWriter};
    let mut w = PcapNgWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    let eth = w.add_interface(&NgInterface { linktype: 1, name: "eth0".into(), tsresol: 9 }).unwrap();
    let lo = w.add_interface(&NgInterface { linktype: 0, name: "lo0".into(), tsresol: 6 }).unwrap();
    let p_eth: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let p_lo: Vec<u8> = (0..2000u32).map(|i| (i * 7) as u8).collect();
    let mut ts = 1_000_000_000u64;
    for (iface, link, payload) in [(eth, LinkType::Ethernet, &p_eth), (lo, LinkType::Null, &p_lo)] {
        for f in ipv4_fragments(A, B, 5, 6, 9, payload, 1000).iter().rev() {
            let g = flowsteer_wire::build::convert_link(f, link);
            w.write_packet(iface, ts, &g, g.len() as u32).unwrap();
            ts += 1000;
        }
        let whole = flowsteer_wire::build::convert_link(&udp_frame(A.into(), B.into(), 1, 2, b"x"), link);
        w.write_packet(iface, ts, &whole, whole.len() as u32).unwrap();
        ts += 1000;
    }
    w.finish().unwrap();
    (p_eth, p_lo)
}

#[test]
fn mixed_link_types_go_to_pcapng_one_interface_each() {
    let d = Dir::new("ng-out");
    let (input, output) = (d.join("in.pcapng"), d.join("out.pcapng"));
    let (p_eth, p_lo) = mixed_link_capture(&input);
    let r = defrag_file(&options(&input, &output)).unwrap();
    check_laws(&r);
    assert_eq!((r.output_format, r.linktypes.as_slice()), ("pcapng", &[1u32, 0][..]));
    assert_eq!((r.datagrams_reassembled, r.unfragmented, r.packets_out), (2, 2, 4));
    let mut reader = CaptureReader::open(&output).unwrap();
    assert_eq!(reader.format(), Format::PcapNg);
    let mut got = Vec::new();
    while let Some(p) = reader.next_packet().unwrap() {
        let link = LinkType::from_pcap(p.linktype).unwrap();
        let parsed = parse_frame(p.data, link, &ParseOptions::default()).unwrap();
        let l4 = parsed.outer.unwrap().l4_offset.unwrap();
        got.push((p.linktype, p.if_name.to_string(), p.tsresol, p.data[l4 + 8..].to_vec()));
    }
    let want = [
        (1, "eth0".to_string(), 9, p_eth),
        (1, "eth0".to_string(), 9, b"x".to_vec()),
        (0, "lo0".to_string(), 6, p_lo),
        (0, "lo0".to_string(), 6, b"x".to_vec()),
    ];
    assert_eq!(got, want);
}

#[test]
fn mixed_link_types_into_pcap_are_refused() {
    let d = Dir::new("pcap-mixed");
    let (input, output) = (d.join("in.pcapng"), d.join("out.pcap"));
    mixed_link_capture(&input);
    let e = defrag_file(&options(&input, &output)).unwrap_err();
    assert!(matches!(e, DefragError::MixedLinkTypes { first: 1, other: 0, .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("write pcapng instead") && text.contains("out.pcapng"), "{text}");
    assert_eq!(d.names(), ["in.pcapng"]);
}

#[test]
fn a_pcap_output_refuses_only_a_second_link_type_it_would_write() {
    use flowsteer_capture::{NgInterface, PcapNgWriter};
    let d = Dir::new("pcap-dropped-link");
    let (input, output) = (d.join("in.pcapng"), d.join("out.pcap"));
    let mut w = PcapNgWriter::new(std::fs::File::create(&input).unwrap()).unwrap();
    let eth = w.add_interface(&NgInterface { linktype: 1, name: String::new(), tsresol: 6 }).unwrap();
    let other = w.add_interface(&NgInterface { linktype: 147, name: String::new(), tsresol: 6 }).unwrap();
    w.write_packet(other, 1_000, b"unparsed", 8).unwrap();
    let f = udp_frame(A.into(), B.into(), 1, 2, b"x");
    w.write_packet(eth, 2_000, &f, f.len() as u32).unwrap();
    w.finish().unwrap();
    // The 147 packet is dropped: one link type is written, pcap is fine.
    let r = defrag_file(&options(&input, &output)).unwrap();
    check_laws(&r);
    assert_eq!((r.packets_out, r.linktype, r.linktypes.as_slice()), (1, 1, &[1u32][..]));
    assert_eq!(read_pcap(&output), [f]);
    // Kept, it would be a second link type in one pcap: refused.
    let e = defrag_file(&DefragOptions { keep_malformed: true, ..options(&input, &output) }).unwrap_err();
    assert!(matches!(e, DefragError::MixedLinkTypes { first: 147, other: 1, .. }), "{e:?}");
}

#[test]
fn progress_counts_every_byte_of_the_input() {
    let d = Dir::new("progress");
    let (input, output) = (d.join("in.pcap"), d.join("out.pcap"));
    write_pcap(&input, &crafted().capture());
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    defrag_file(&DefragOptions { progress: Some(read.clone()), ..options(&input, &output) }).unwrap();
    let len = std::fs::metadata(&input).unwrap().len();
    assert_eq!(read.load(std::sync::atomic::Ordering::Relaxed), len);
}
