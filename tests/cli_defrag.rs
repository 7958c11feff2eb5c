//! `flowsteer defrag`: the binary on captures built with flowsteer-wire.

use flowsteer_capture::{CaptureReader, CaptureWriter};
use flowsteer_wire::build::{ipv4_fragments, ipv4_header_checksum, ipv6_fragments, udp_frame, FrameBuilder, Ipv6Ext};
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A temporary file path removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        Tmp(std::env::temp_dir().join(format!("fs-defrag-{}-{n}-{tag}", std::process::id())))
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    let mut w = CaptureWriter::create(path, 1).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let ts = 1_700_000_000_000_000_000u64 + i as u64 * 1_000_000;
        w.write_packet(ts, f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
}

/// Frames with timestamps (ns).
fn write_capture_ts(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut w = CaptureWriter::create(path, 1).unwrap();
    for (ts, f) in frames {
        w.write_packet(*ts, f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
}

fn read_capture(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(p.linktype, 1);
        v.push((p.ts_nanos, p.data.to_vec()));
    }
    v
}

fn defrag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowsteer")).arg("defrag").args(args).output().unwrap()
}

fn defrag_json(input: &Path, output: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![input.to_str().unwrap(), "-o", output.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = defrag(&args);
    assert!(out.status.success(), "defrag failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn n(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no counter {key} in {v}"))
}

/// The document's counters add up (fragments and packets): every packet
/// read is written unchanged, in a written datagram, dropped for one
/// reason, or still pending.
fn check_laws(v: &serde_json::Value) {
    assert_eq!(v["schema"], "flowsteer.defrag.v2");
    assert_eq!(v["conservation_ok"], true, "{v}");
    let sum = |key: &str| v[key].as_object().unwrap().values().map(|x| x.as_u64().unwrap()).sum::<u64>();
    let dropped = sum("dropped");
    assert_eq!(n(v, "fragments_in"), n(v, "fragments_reassembled") + dropped + n(v, "pending_at_end"), "{v}");
    assert_eq!(n(v, "unparseable"), sum("unparseable_by_reason"), "{v}");
    assert_eq!(n(v, "unparseable"), n(v, "unparseable_kept") + n(v, "unparseable_dropped"), "{v}");
    let too_long = n(v, "fragments_too_long_for_pppoe");
    assert_eq!(n(v, "packets_dropped"), dropped + n(v, "unparseable_dropped") + too_long, "{v}");
    let unchanged = n(v, "unfragmented") + n(v, "atomic_fragments") + n(v, "non_ip") + n(v, "unparseable_kept");
    assert_eq!(n(v, "written_unchanged"), unchanged, "{v}");
    assert_eq!(
        n(v, "packets_in"),
        unchanged + (n(v, "fragments_reassembled") - too_long) + n(v, "packets_dropped") + n(v, "pending_at_end"),
        "{v}"
    );
    let datagrams_out = n(v, "datagrams_reassembled") - n(v, "datagrams_too_long_for_pppoe");
    assert_eq!(n(v, "packets_out"), unchanged + datagrams_out, "{v}");
}

fn payload(k: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 31 + 7 + k) & 0xff) as u8).collect()
}

/// Deterministic shuffle (xorshift).
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

/// UDP payload of an unfragmented Ethernet frame.
fn udp_payload(frame: &[u8]) -> Option<Vec<u8>> {
    let p = parse_frame(frame, LinkType::Ethernet, &ParseOptions::default()).ok()?;
    let l3 = p.outer?;
    if l3.frag.is_some() || l3.tuple.proto != 17 {
        return None;
    }
    let start = l3.l4_offset? + 8;
    frame.get(start..l3.l3_offset + l3.ip_total_len).map(<[u8]>::to_vec)
}

const V4A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const V4B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn v6a() -> Ipv6Addr {
    "fd00::1".parse().unwrap()
}

fn v6b() -> Ipv6Addr {
    "fd00::2".parse().unwrap()
}

#[test]
fn defrag_mixed_shuffled_v4_v6() {
    let input = Tmp::new("mixed-in.pcap");
    let output = Tmp::new("mixed-out.pcap");
    let mut whole = Vec::new();
    for i in 0..6u16 {
        whole.push(udp_frame(V4A.into(), V4B.into(), 1000 + i, 53, &payload(i as usize, 100 + i as usize)));
        whole.push(udp_frame(v6a().into(), v6b().into(), 2000 + i, 53, &payload(i as usize, 200)));
    }
    let mut datagrams: Vec<Vec<u8>> = Vec::new();
    let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
    for (k, (len, size)) in [(3000usize, 1000usize), (4416, 1480), (65_507, 1480), (1600, 512)].into_iter().enumerate()
    {
        let p = payload(10 + k, len);
        groups.push(ipv4_fragments(V4A, V4B, 4000, 9, 100 + k as u16, &p, size));
        datagrams.push(p);
        let p = payload(20 + k, len);
        groups.push(ipv6_fragments(v6a(), v6b(), 4000, 9, 7000 + k as u32, &p, size));
        datagrams.push(p);
    }
    // Shuffle the fragments of each datagram and interleave everything.
    let mut frames = whole.clone();
    for (g, frags) in groups.iter_mut().enumerate() {
        assert!(frags.len() > 1);
        shuffle(frags, 0x9e37_79b9_7f4a_7c15 ^ g as u64);
        frames.extend(frags.iter().cloned());
    }
    shuffle(&mut frames, 42);
    let fragments_in: usize = groups.iter().map(Vec::len).sum();
    write_capture(&input.0, &frames);

    let v = defrag_json(&input.0, &output.0, &[]);
    check_laws(&v);
    assert_eq!(n(&v, "packets_in") as usize, frames.len());
    assert_eq!(n(&v, "unfragmented") as usize, whole.len());
    assert_eq!(n(&v, "fragments_in") as usize, fragments_in);
    assert_eq!(n(&v, "datagrams_reassembled") as usize, datagrams.len());
    assert_eq!(n(&v, "fragments_reassembled") as usize, fragments_in);
    assert_eq!(n(&v, "packets_out") as usize, whole.len() + datagrams.len());
    assert_eq!(n(&v, "pending_at_end"), 0);
    assert_eq!(n(&v, "duplicates") + n(&v, "overlaps") + n(&v, "malformed"), 0);

    let out = read_capture(&output.0);
    assert_eq!(out.len(), whole.len() + datagrams.len());
    let mut got_whole = Vec::new();
    let mut got_payloads = Vec::new();
    for (_, f) in &out {
        if whole.contains(f) {
            got_whole.push(f.clone());
        } else {
            got_payloads.push(udp_payload(f).expect("reassembled packet is a whole UDP datagram"));
        }
    }
    // The whole packets unchanged, in their capture order.
    let whole_in_order: Vec<Vec<u8>> = frames.iter().filter(|f| whole.contains(f)).cloned().collect();
    assert_eq!(got_whole, whole_in_order);
    let mut want = datagrams.clone();
    want.sort();
    got_payloads.sort();
    assert_eq!(got_payloads, want);
    // Timestamps never go backwards (delivery order = capture order here).
    assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[test]
fn defrag_text_table() {
    let input = Tmp::new("text-in.pcap");
    let output = Tmp::new("text-out.pcap");
    let frames = ipv4_fragments(V4A, V4B, 1, 2, 9, &payload(0, 3000), 1000);
    write_capture(&input.0, &frames);
    let out = defrag(&[input.0.to_str().unwrap(), "-o", output.0.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("datagrams reassembled"), "{text}");
    assert!(text.contains("(ok)"), "{text}");
    assert_eq!(read_capture(&output.0).len(), 1);
}

#[test]
fn defrag_counts_duplicates_and_overlaps() {
    let input = Tmp::new("dup-in.pcap");
    let output = Tmp::new("dup-out.pcap");
    let dup_payload = payload(1, 3000);
    let mut dup = ipv4_fragments(V4A, V4B, 5, 6, 11, &dup_payload, 1000);
    dup.insert(1, dup[0].clone()); // exact duplicate: tolerated
    let ov_payload = payload(2, 3000);
    let big = ipv4_fragments(V4A, V4B, 5, 6, 12, &ov_payload, 1000);
    let small = ipv4_fragments(V4A, V4B, 5, 6, 12, &ov_payload, 504);
    // [0,1000) then [504,1008): overlap, the whole queue goes.
    let ov = [big[0].clone(), small[1].clone(), big[1].clone(), big[2].clone()];
    let v6_payload = payload(3, 4000);
    let mut v6 = ipv6_fragments(v6a(), v6b(), 5, 6, 99, &v6_payload, 1232);
    assert!(v6.len() > 2);
    v6.insert(2, v6[1].clone()); // duplicate before the datagram completes
    let mut frames = dup.clone();
    frames.extend(ov.iter().cloned());
    frames.extend(v6.iter().cloned());
    write_capture(&input.0, &frames);

    let v = defrag_json(&input.0, &output.0, &[]);
    check_laws(&v);
    assert_eq!(n(&v, "duplicates"), 2, "{v}");
    // The first two fragments of the queue are dropped by the overlap; the
    // two that follow start a new queue, flushed at the end.
    assert_eq!(n(&v, "overlaps"), 2, "{v}");
    assert_eq!(v["dropped_datagrams"]["overlap"], 1);
    assert_eq!(n(&v, "flushed_at_end"), 2, "{v}");
    assert_eq!(n(&v, "datagrams_reassembled"), 2);
    let out = read_capture(&output.0);
    let mut got: Vec<Vec<u8>> = out.iter().map(|(_, f)| udp_payload(f).unwrap()).collect();
    got.sort();
    let mut want = vec![dup_payload, v6_payload];
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn defrag_no_flush_leaves_pending() {
    let input = Tmp::new("pend-in.pcap");
    let output = Tmp::new("pend-out.pcap");
    let mut frames = ipv4_fragments(V4A, V4B, 7, 8, 21, &payload(5, 5000), 1480);
    frames.pop(); // the last fragment never comes
    let mut v6 = ipv6_fragments(v6a(), v6b(), 7, 8, 22, &payload(6, 5000), 1232);
    v6.remove(0);
    frames.extend(v6);
    frames.push(udp_frame(V4A.into(), V4B.into(), 7, 8, b"hello"));
    let held = frames.len() as u64 - 1;
    write_capture(&input.0, &frames);

    let v = defrag_json(&input.0, &output.0, &["--no-flush"]);
    check_laws(&v);
    assert_eq!(n(&v, "pending_at_end"), held, "{v}");
    assert_eq!(n(&v, "pending_datagrams_at_end"), 2);
    assert_eq!(n(&v, "flushed_at_end"), 0);
    assert_eq!(n(&v, "packets_out"), 1);

    let v = defrag_json(&input.0, &output.0, &[]);
    check_laws(&v);
    assert_eq!(n(&v, "pending_at_end"), 0);
    assert_eq!(n(&v, "flushed_at_end"), held);
    assert_eq!(read_capture(&output.0).len(), 1);
}

#[test]
fn defrag_timeout_uses_capture_clock() {
    let input = Tmp::new("to-in.pcap");
    let output = Tmp::new("to-out.pcap");
    let t0 = 1_700_000_000_000_000_000u64;
    let sec = 1_000_000_000u64;
    // 2992 + 8 bytes of UDP header: three fragments of 1000.
    let a = ipv4_fragments(V4A, V4B, 1, 2, 31, &payload(7, 2992), 1000);
    let b = ipv4_fragments(V4A, V4B, 1, 2, 32, &payload(8, 2992), 1000);
    assert_eq!((a.len(), b.len()), (3, 3));
    let frames = vec![
        (t0, a[0].clone()),
        (t0 + sec, a[1].clone()),
        (t0 + 3 * sec, a[2].clone()), // 3 s after the first: too late with --timeout 2
        (t0 + 10 * sec, b[0].clone()),
        (t0 + 10 * sec + 1, b[2].clone()),
        (t0 + 11 * sec, b[1].clone()), // in time
    ];
    write_capture_ts(&input.0, &frames);
    let v = defrag_json(&input.0, &output.0, &["--timeout", "2"]);
    check_laws(&v);
    // The first two fragments of `a` time out when the third arrives; that
    // one starts a new queue, which times out when `b` begins.
    assert_eq!(n(&v, "timed_out"), 3, "{v}");
    assert_eq!(v["dropped_datagrams"]["timed_out"], 2);
    assert_eq!(n(&v, "datagrams_reassembled"), 1);
    assert_eq!(n(&v, "flushed_at_end"), 0);
    let out = read_capture(&output.0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, t0 + 11 * sec, "the datagram carries the completing fragment's time");
    assert_eq!(udp_payload(&out[0].1).unwrap(), payload(8, 2992));
}

#[test]
fn defrag_passes_non_ip_and_atomic() {
    let input = Tmp::new("pass-in.pcap");
    let output = Tmp::new("pass-out.pcap");
    // ARP-like frame (not IP) and a frame that does not parse (IPv4 header
    // cut after its flags, which say it is no fragment).
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    let mut bad = udp_frame(V4A.into(), V4B.into(), 1, 2, b"x");
    bad.truncate(14 + 10);
    // IPv6 atomic fragment: Fragment header with offset 0, M=0 (RFC 6946).
    let ext = [Ipv6Ext::Fragment { offset: 0, more: false, id: 5 }];
    let udp = [0u8, 1, 0, 2, 0, 16, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    let atomic = FrameBuilder { ipv6_ext: &ext, ..FrameBuilder::raw(v6a().into(), v6b().into(), 17, &udp) }.build();
    let frames = vec![arp.clone(), bad.clone(), atomic.clone()];
    write_capture(&input.0, &frames);
    let v = defrag_json(&input.0, &output.0, &[]);
    check_laws(&v);
    assert_eq!(n(&v, "non_ip"), 1, "{v}");
    assert_eq!(n(&v, "atomic_fragments"), 1, "{v}");
    assert_eq!(n(&v, "fragments_in"), 0);
    assert_eq!((n(&v, "unparseable"), n(&v, "unparseable_dropped")), (1, 1), "{v}");
    assert_eq!(v["unparseable_by_reason"]["truncated_ipv4"], 1, "{v}");
    let out: Vec<Vec<u8>> = read_capture(&output.0).into_iter().map(|(_, f)| f).collect();
    assert_eq!(out, [arp, atomic], "the malformed frame is dropped");

    let v = defrag_json(&input.0, &output.0, &["--keep-malformed"]);
    check_laws(&v);
    assert_eq!((n(&v, "unparseable_kept"), n(&v, "written_unchanged")), (1, 3), "{v}");
    let out: Vec<Vec<u8>> = read_capture(&output.0).into_iter().map(|(_, f)| f).collect();
    assert_eq!(out, frames, "--keep-malformed writes it unchanged");
}

#[test]
fn defrag_truncated_capture_warns() {
    let input = Tmp::new("trunc-in.pcap");
    let output = Tmp::new("trunc-out.pcap");
    let mut frames = ipv4_fragments(V4A, V4B, 1, 2, 41, &payload(9, 3000), 1000);
    frames.push(udp_frame(V4A.into(), V4B.into(), 1, 2, b"tail"));
    write_capture(&input.0, &frames);
    let bytes = std::fs::read(&input.0).unwrap();
    std::fs::write(&input.0, &bytes[..bytes.len() - 5]).unwrap();
    let out = defrag(&[input.0.to_str().unwrap(), "-o", output.0.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let want = format!("warning: {}: capture truncated after {} packets", input.0.display(), frames.len() - 1);
    assert!(stderr.lines().any(|l| l == want), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    check_laws(&v);
    assert_eq!(v["truncated"], true);
    assert_eq!(read_capture(&output.0).len(), 1);
}

#[test]
fn defrag_bad_input_exits_1() {
    let input = Tmp::new("bad-in.pcap");
    let output = Tmp::new("bad-out.pcap");
    std::fs::write(&input.0, b"this is not a capture file at all\n").unwrap();
    let out = defrag(&[input.0.to_str().unwrap(), "-o", output.0.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains("not a pcap or pcapng"), "{stderr}");

    let missing = Tmp::new("missing.pcap");
    let out = defrag(&[missing.0.to_str().unwrap(), "-o", output.0.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stderr).unwrap().lines().count(), 1);
}

#[test]
fn defrag_unwritable_output_exits_1() {
    let input = Tmp::new("unw-in.pcap");
    write_capture(&input.0, &[udp_frame(V4A.into(), V4B.into(), 1, 2, b"x")]);
    let dir = Tmp::new("no-such-dir");
    let bad = dir.0.join("out.pcap");
    let out = defrag(&[input.0.to_str().unwrap(), "-o", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
}

#[test]
fn defrag_unsupported_linktype_dropped_unless_kept() {
    let input = Tmp::new("lt-in.pcap");
    let output = Tmp::new("lt-out.pcap");
    let frames = [vec![1u8, 2, 3, 4, 5], vec![6u8; 40]];
    let mut w = CaptureWriter::create(&input.0, 147).unwrap();
    for f in &frames {
        w.write_packet(1_000, f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
    let read_147 = |path: &Path| {
        let mut r = CaptureReader::open(path).unwrap();
        let mut got = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            assert_eq!(p.linktype, 147);
            got.push(p.data.to_vec());
        }
        got
    };
    let v = defrag_json(&input.0, &output.0, &[]);
    check_laws(&v);
    assert_eq!(v["unparseable_by_reason"]["unsupported_link_type"], 2);
    assert_eq!(n(&v, "unparseable_dropped"), 2);
    assert_eq!(v["linktype"], 147);
    assert!(read_147(&output.0).is_empty());
    let v = defrag_json(&input.0, &output.0, &["--keep-malformed"]);
    check_laws(&v);
    assert_eq!(n(&v, "unparseable_kept"), 2);
    assert_eq!(read_147(&output.0), frames);
}

#[test]
fn defrag_raw_ip_keeps_link_type() {
    let input = Tmp::new("raw-in.pcap");
    let output = Tmp::new("raw-out.pcap");
    let p = payload(4, 4000);
    let frames: Vec<Vec<u8>> =
        ipv4_fragments(V4A, V4B, 1, 2, 51, &p, 1480).into_iter().map(|f| f[14..].to_vec()).collect();
    let mut w = CaptureWriter::create(&input.0, 101).unwrap();
    for (i, f) in frames.iter().rev().enumerate() {
        w.write_packet(1_000 + i as u64, f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
    let v = defrag_json(&input.0, &output.0, &[]);
    check_laws(&v);
    assert_eq!(n(&v, "datagrams_reassembled"), 1);
    let mut r = CaptureReader::open(&output.0).unwrap();
    let pkt = r.next_packet().unwrap().unwrap();
    assert_eq!(pkt.linktype, 101);
    let parsed = parse_frame(pkt.data, LinkType::RawIp, &ParseOptions::default()).unwrap();
    let l3 = parsed.outer.unwrap();
    assert_eq!(l3.l3_offset, 0);
    assert_eq!(&pkt.data[l3.l4_offset.unwrap() + 8..], &p[..]);
    assert_eq!(l3.tuple.src, IpAddr::V4(V4A));
}

/// A fresh directory, removed on drop (with what is in it).
struct TmpDir(tempfile::TempDir);

impl TmpDir {
    fn new(tag: &str) -> TmpDir {
        TmpDir(tempfile::Builder::new().prefix(&format!("fs-{tag}-")).tempdir().unwrap())
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

/// A capture larger than the reader's 128 KiB buffer: reading it while
/// truncating it loses packets.
fn big_capture(path: &Path) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for i in 0..1500u16 {
        frames.push(udp_frame(V4A.into(), V4B.into(), 1000 + i, 53, &payload(i as usize, 200)));
        if i % 100 == 0 {
            frames.extend(ipv4_fragments(V4A, V4B, 7, 8, i, &payload(i as usize, 3000), 1000));
        }
    }
    write_capture(path, &frames);
    frames
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn defrag_refuses_to_overwrite_its_input() {
    let dir = TmpDir::new("same");
    let input = dir.join("trace.pcap");
    big_capture(&input);
    let before = std::fs::read(&input).unwrap();
    assert!(before.len() > 256 * 1024);
    let hard = dir.join("hard.pcap");
    std::fs::hard_link(&input, &hard).unwrap();
    let link = dir.join("link.pcap");
    std::os::unix::fs::symlink("trace.pcap", &link).unwrap();
    let dotted = dir.join(".").join("trace.pcap");
    // (input, output): the same path, another spelling of it, a hard link,
    // an output that is a symlink to the input, an input that is a symlink
    // to the output.
    for (i, o) in [(&input, &input), (&input, &dotted), (&input, &hard), (&input, &link), (&link, &input)] {
        let out = defrag(&[s(i), "-o", s(o)]);
        assert_eq!(out.status.code(), Some(1), "{} -> {}", i.display(), o.display());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: {}: the output is the input {}", o.display(), i.display())),
            "{stderr}"
        );
        assert_eq!(std::fs::read(&input).unwrap(), before, "{} -> {}", i.display(), o.display());
    }
    assert_eq!(dir.names(), ["hard.pcap", "link.pcap", "trace.pcap"], "no output, no temporary file");
}

#[test]
fn defrag_failure_midway_keeps_the_previous_output() {
    let dir = TmpDir::new("midway");
    let input = dir.join("in.pcap");
    let output = dir.join("out.pcap");
    let frames = big_capture(&input);
    // A record claiming 2 GiB after the packets: a malformed capture.
    let mut bytes = std::fs::read(&input).unwrap();
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
    bytes.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
    std::fs::write(&input, &bytes).unwrap();
    std::fs::write(&output, b"the previous output").unwrap();
    let out = defrag(&[s(&input), "-o", s(&output)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains(&format!("(after {} packets)", frames.len())), "{stderr}");
    assert!(std::fs::read(&output).unwrap() == b"the previous output", "the previous output was overwritten");
    assert_eq!(dir.names(), ["in.pcap", "out.pcap"], "no temporary file left");
    // The same without a previous output: none appears.
    std::fs::remove_file(&output).unwrap();
    assert_eq!(defrag(&[s(&input), "-o", s(&output)]).status.code(), Some(1));
    assert_eq!(dir.names(), ["in.pcap"]);
}

#[test]
fn defrag_interrupted_keeps_the_previous_output() {
    let dir = TmpDir::new("sigint");
    let source = dir.join("source.pcap");
    big_capture(&source);
    let bytes = std::fs::read(&source).unwrap();
    let fifo = dir.join("in.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let output = dir.join("out.pcap");
    std::fs::write(&output, b"the previous output").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["defrag", s(&fifo), "-o", s(&output)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Opening the FIFO waits for defrag to open it; the first half of the
    // capture goes in and defrag waits for the rest.
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    std::io::Write::write_all(&mut w, &bytes[..bytes.len() / 2]).unwrap();
    // Its temporary output exists once the header is read.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !dir.names().iter().any(|n| n.starts_with(".out.pcap.")) {
        assert!(std::time::Instant::now() < deadline, "no temporary output: {:?}", dir.names());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(std::fs::read(&output).unwrap() == b"the previous output", "the previous output was overwritten");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    // The rest of the capture, then the end of the input.
    let _ = std::io::Write::write_all(&mut w, &bytes[bytes.len() / 2..]);
    drop(w);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with(&format!("error: {}: interrupted", output.display())), "{stderr}");
    assert!(std::fs::read(&output).unwrap() == b"the previous output", "the previous output was overwritten");
    assert_eq!(dir.names(), ["in.fifo", "out.pcap", "source.pcap"], "no temporary file left");
}

/// An IPv4 fragment (Ethernet frame) of protocol `proto` carrying
/// `payload` at byte `offset` of its datagram, with IPv4 `options`.
fn frag4(proto: u8, id: u16, offset: u16, more: bool, payload: &[u8], options: &[u8]) -> Vec<u8> {
    let b =
        FrameBuilder { ident: id, ipv4_options: options, ..FrameBuilder::raw(V4A.into(), V4B.into(), proto, payload) };
    let mut f = b.build();
    let flags = (offset / 8) | if more { 0x2000 } else { 0 };
    f[20..22].copy_from_slice(&flags.to_be_bytes());
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let c = ipv4_header_checksum(&f[14..14 + ihl]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn defrag_never_writes_rejected_or_unparseable_fragments() {
    let input = Tmp::new("rules-in.pcap");
    let output = Tmp::new("rules-out.pcap");
    let whole = udp_frame(V4A.into(), V4B.into(), 1, 2, b"whole");
    let datagram = payload(3, 2992);
    let frags = ipv4_fragments(V4A, V4B, 5, 6, 77, &datagram, 1000);
    // Rejected by reassembly: a tiny first fragment (8 bytes of a TCP
    // header), a TCP fragment at offset 8 (RFC 1858), a fragment the
    // capture cut short of its IP length.
    let tiny_first = frag4(6, 81, 0, true, &[0; 8], &[]);
    let tcp_at_8 = frag4(6, 82, 8, true, &[0; 8], &[]);
    let mut cut = ipv4_fragments(V4A, V4B, 5, 6, 78, &payload(4, 2992), 1000).remove(1);
    cut.truncate(14 + 20 + 100);
    // Refused by the parser, and fragments: an IPv4 fragment cut inside its
    // options, an IPv6 first fragment whose extension chain runs past its
    // end (RFC 7112).
    let mut header_cut = frag4(17, 79, 0, true, &[0; 16], &[1, 1, 1, 1]);
    header_cut.truncate(14 + 22);
    let ext = [Ipv6Ext::Fragment { offset: 0, more: true, id: 80 }, Ipv6Ext::DestOpts { len: 16 }];
    let mut chain_cut =
        FrameBuilder { ipv6_ext: &ext, ..FrameBuilder::raw(v6a().into(), v6b().into(), 17, &[0; 8]) }.build();
    chain_cut[18..20].copy_from_slice(&16u16.to_be_bytes());
    chain_cut.truncate(14 + 40 + 16);
    // Refused by the parser, no fragment: total length below the header.
    let mut bad_len = udp_frame(V4A.into(), V4B.into(), 3, 4, b"bad length");
    bad_len[16..18].copy_from_slice(&10u16.to_be_bytes());
    let mut frames = vec![whole.clone(), frags[0].clone(), tiny_first, tcp_at_8, cut];
    frames.extend([header_cut, chain_cut, bad_len.clone()]);
    frames.extend(frags[1..].iter().cloned());
    write_capture(&input.0, &frames);

    for (extra, kept) in [(&[][..], vec![]), (&["--keep-malformed"][..], vec![bad_len])] {
        let v = defrag_json(&input.0, &output.0, extra);
        check_laws(&v);
        assert_eq!(n(&v, "packets_in"), 10);
        assert_eq!(v["dropped"]["tiny_first"], 2, "{v}");
        assert_eq!(v["dropped"]["truncated"], 1, "{v}");
        assert_eq!((n(&v, "unparseable"), n(&v, "unparseable_fragments")), (3, 2), "{v}");
        assert_eq!(n(&v, "unparseable_kept") as usize, kept.len(), "{v}");
        assert_eq!(n(&v, "packets_dropped") as usize, 3 + 3 - kept.len(), "{v}");
        let out: Vec<Vec<u8>> = read_capture(&output.0).into_iter().map(|(_, f)| f).collect();
        let mut want = vec![whole.clone()];
        want.extend(kept.iter().cloned());
        assert_eq!(out.len(), want.len() + 1, "{extra:?}");
        assert_eq!(&out[..want.len()], &want[..]);
        assert_eq!(udp_payload(&out[want.len()]).unwrap(), datagram);
        // Nothing in the output is a fragment.
        for f in &out {
            if let Ok(p) = parse_frame(f, LinkType::Ethernet, &ParseOptions::default()) {
                assert!(p.outer.is_none_or(|l3| l3.frag.is_none()), "{extra:?}: a fragment in the output");
            }
        }
    }
}

#[test]
fn defrag_reads_a_record_captured_beyond_its_original_length() {
    let input = Tmp::new("caplen-in.pcap");
    let output = Tmp::new("caplen-out.pcap");
    let whole = udp_frame(IpAddr::V4(V4A), IpAddr::V4(V4B), 7, 9, b"payload");
    let frags = ipv4_fragments(V4A, V4B, 1, 2, 77, &payload(1, 3000), 1480);
    // Little-endian microsecond pcap written by hand: the first record says
    // its packet was 20 bytes long but holds the whole frame.
    let mut v = Vec::new();
    for x in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    let mut records = vec![(whole.clone(), 20u32)];
    records.extend(frags.iter().map(|f| (f.clone(), f.len() as u32)));
    for (i, (data, orig)) in records.iter().enumerate() {
        for x in [1 + i as u32, 0, data.len() as u32, *orig] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(data);
    }
    std::fs::write(&input.0, v).unwrap();
    let out = defrag(&[input.0.to_str().unwrap(), "-o", output.0.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "defrag failed: {}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    check_laws(&doc);
    assert_eq!((n(&doc, "packets_in"), n(&doc, "packets_out"), n(&doc, "datagrams_reassembled")), (4, 2, 1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("1 record has a captured length above its original length").count(), 1, "{stderr}");
    let mut r = CaptureReader::open(&output.0).unwrap();
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!((p.data, p.orig_len), (&whole[..], whole.len() as u32));
    assert!(r.next_packet().unwrap().is_some());
    assert!(r.next_packet().unwrap().is_none());
    assert_eq!(r.stats().inconsistent_lengths, 0);
}

#[test]
fn defrag_reads_gzip_and_zstd_captures() {
    let plain = Tmp::new("plain.pcap");
    let frames = ipv4_fragments(V4A, V4B, 1, 2, 5, &payload(2, 5000), 1480);
    write_capture(&plain.0, &frames);
    let bytes = std::fs::read(&plain.0).unwrap();
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&bytes).unwrap();
        e.finish().unwrap()
    };
    let zst = ruzstd::encoding::compress_to_vec(&bytes[..], ruzstd::encoding::CompressionLevel::Fastest);
    for (data, compression) in [(gz, "gzip"), (zst, "zstd")] {
        let input = Tmp::new("compressed.pcap.x");
        let output = Tmp::new("out.pcap");
        std::fs::write(&input.0, data).unwrap();
        let v = defrag_json(&input.0, &output.0, &[]);
        check_laws(&v);
        assert_eq!(v["compression"], compression);
        assert_eq!((n(&v, "packets_in"), n(&v, "datagrams_reassembled")), (frames.len() as u64, 1));
        assert_eq!(read_capture(&output.0).len(), 1);
    }
}
