//! Live AF_XDP tests, each in its own throw-away lab (two namespaces joined
//! by a veth pair). They need root; without it they print why and pass.
//! Every test is bounded by a packet count and a deadline.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowsteer_netns::{skip_reason, Lab, LabConfig, Side, Star};
use flowsteer_wire::build::FrameBuilder;
use flowsteer_wire::checksum;
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use flowsteer_xsk::{
    AttachConfig, BindMode, Claim, ErrorKind, FastPathAttach, FastPathMaps, PortConfig, XdpMode, XdpPort, XdpProgram,
    XskConfig, XskSocket, TX_TAG_NONE,
};

const PORT: u16 = 47000;
const DEADLINE: Duration = Duration::from_secs(15);

fn lab(tag: &str, queues: u16) -> Option<Lab> {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return None;
    }
    Some(Lab::new(tag, &LabConfig { queues, mtu: 1500 }).expect("lab"))
}

fn payload(seq: u32, len: usize) -> Vec<u8> {
    let mut p = seq.to_be_bytes().to_vec();
    p.extend((0..len.saturating_sub(4)).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8));
    p
}

/// Sends `n` datagrams from `flows` sockets (distinct source ports) in A to
/// B:PORT; payload = sequence number + pattern. Returns the count sent.
fn send_from_a(lab: &Lab, n: u32, flows: u32) -> std::thread::JoinHandle<Result<u32, String>> {
    let (a4, peer4) = (lab.v4(Side::A), lab.v4(Side::B));
    let h = lab.spawn_in(Side::A, move || -> Result<u32, String> {
        let socks: Vec<UdpSocket> = (0..flows)
            .map(|_| {
                let s = UdpSocket::bind((a4, 0)).map_err(|e| e.to_string())?;
                s.connect((peer4, PORT)).map_err(|e| e.to_string())?;
                Ok(s)
            })
            .collect::<Result<_, String>>()?;
        for seq in 0..n {
            socks[(seq % flows) as usize].send(&payload(seq, 32)).map_err(|e| format!("send: {e}"))?;
            if seq % 256 == 255 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(n)
    });
    // Flatten the namespace-entry error into the closure's.
    std::thread::spawn(move || {
        h.join().map_err(|_| "sender panicked".to_string())?.map_err(|e| e.to_string()).and_then(|r| r)
    })
}

#[derive(Default, Debug)]
struct Rx {
    /// Matching datagrams per socket.
    per_socket: Vec<u64>,
    /// Everything else the sockets saw (IPv6 MLD/RS of the peer...), per socket.
    others: Vec<u64>,
    /// Non-IP frames (ARP...) that reached a socket.
    non_ip: u64,
    seqs: BTreeMap<u32, u32>,
}

/// One pass over all sockets (up to 64 frames each); returns frames seen.
fn receive_once(socks: &mut [XskSocket], rx: &mut Rx) -> usize {
    rx.per_socket.resize(socks.len(), 0);
    rx.others.resize(socks.len(), 0);
    let mut got = 0;
    for (i, s) in socks.iter_mut().enumerate() {
        got += s.rx_burst(64, &mut |f: &[u8]| match parse_frame(f, LinkType::Ethernet, &ParseOptions::new()) {
            Ok(p) => match p.outer {
                Some(l3) if l3.tuple.ports.map(|p| p.1) == Some(PORT) => {
                    let at = l3.l4_offset.unwrap_or(0) + 8;
                    let seq = f.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    *rx.seqs.entry(seq.unwrap_or(u32::MAX)).or_default() += 1;
                    rx.per_socket[i] += 1;
                }
                Some(_) => rx.others[i] += 1,
                None => {
                    rx.non_ip += 1;
                    rx.others[i] += 1;
                }
            },
            Err(_) => rx.others[i] += 1,
        });
    }
    got
}

/// Polls all sockets until `want` matching datagrams arrived in total or `within` passed.
fn receive(socks: &mut [XskSocket], want: u64, rx: &mut Rx, within: Duration) {
    let end = Instant::now() + within;
    while rx.per_socket.iter().sum::<u64>() < want && Instant::now() < end {
        if receive_once(socks, rx) == 0 {
            let _ = socks[0].wait_rx(Duration::from_millis(2));
        }
    }
}

fn check_receive_totals(socks: &[XskSocket], rx: &Rx, n: u32) {
    assert_eq!(rx.per_socket.iter().sum::<u64>(), u64::from(n), "{rx:?}");
    assert_eq!(rx.seqs.len() as u32, n, "every sequence number once");
    assert!(rx.seqs.iter().all(|(&s, &c)| s < n && c == 1), "no duplicates, no strangers");
    for (i, s) in socks.iter().enumerate() {
        let st = s.stats().unwrap();
        println!("queue {}: {} datagrams, {} other frames, {:?}", s.queue(), rx.per_socket[i], rx.others[i], st);
        assert_eq!(st.rx_packets, rx.per_socket[i] + rx.others[i], "received = matched + other");
        assert_eq!(st.rx_bad_descs, 0);
        assert_eq!(st.kernel.rx_drops(), 0, "kernel drops: {:?}", st.kernel);
        assert_eq!(st.kernel.rx_invalid_descs, 0);
        let a = s.frame_account();
        assert!(a.is_complete(), "{a:?}");
        assert_eq!((a.rx, a.tx, a.free), (2048, 0, a.total - 2048), "{a:?}");
    }
}

/// Opens a port claiming UDP to PORT (unless `cfg` says otherwise).
fn open_port(lab: &Lab, side: Side, queues: Vec<u32>, mut cfg: PortConfig) -> XdpPort {
    if cfg.attach.claim == Claim::nothing() {
        cfg.attach.claim = Claim::udp(&[PORT]);
    }
    let dev = lab.dev(side).to_string();
    lab.run_in(side, move || XdpPort::open(&dev, &queues, &cfg)).unwrap().unwrap()
}

#[test]
fn receive_one_queue_native_every_datagram_twice_round_the_fill_ring() {
    let Some(lab) = lab("xr1", 1) else { return };
    let mut port = open_port(&lab, Side::B, vec![0], PortConfig::with_mode(XdpMode::Auto));
    assert_eq!(port.program().mode(), XdpMode::Native, "veth has native XDP");
    assert_eq!(port.sockets()[0].bind_mode(), BindMode::Copy, "veth has no zero-copy");
    // Two rounds of 2000: 4000 frames through a 2048-frame receive pool, so
    // every frame is recycled through the fill ring at least once.
    let n = 2000;
    let mut rx = Rx::default();
    for round in 0..2u32 {
        let sender = send_from_a(&lab, n, 8);
        receive(port.sockets_mut(), u64::from(n) * u64::from(round + 1), &mut rx, DEADLINE);
        assert_eq!(sender.join().unwrap(), Ok(n));
    }
    assert_eq!(rx.per_socket[0], 2 * u64::from(n));
    assert!(rx.seqs.iter().all(|(&s, &c)| s < n && c == 2), "each sequence number once per round");
    let st = port.sockets()[0].stats().unwrap();
    assert_eq!(st.rx_packets, rx.per_socket[0] + rx.others[0]);
    assert_eq!(st.kernel.rx_drops(), 0, "{:?}", st.kernel);
    let a = port.sockets()[0].frame_account();
    assert!(a.is_complete() && a.rx == 2048 && a.tx == 0, "{a:?}");
}

#[test]
fn receive_two_queues_skb_mode_sum_over_sockets() {
    let Some(lab) = lab("xr2", 2) else { return };
    let mut port = open_port(&lab, Side::B, vec![0, 1], PortConfig::with_mode(XdpMode::Skb));
    assert_eq!(port.program().mode(), XdpMode::Skb);
    let n = 2000;
    let sender = send_from_a(&lab, n, 32);
    let mut rx = Rx::default();
    receive(port.sockets_mut(), u64::from(n), &mut rx, DEADLINE);
    assert_eq!(sender.join().unwrap(), Ok(n));
    check_receive_totals(port.sockets(), &rx, n);
    // Measured: in generic mode veth does not record the rx queue (no NAPI),
    // so every frame reports rx_queue_index 0 whatever the sender's queue.
    assert_eq!(rx.per_socket, [u64::from(n), 0], "veth generic XDP: everything on queue 0");
}

#[test]
fn receive_two_queues_native_sum_over_sockets() {
    let Some(lab) = lab("xr3", 2) else { return };
    let mut port = open_port(&lab, Side::B, vec![0, 1], PortConfig::with_mode(XdpMode::Native));
    assert_eq!(port.program().mode(), XdpMode::Native);
    let n = 2000;
    // 32 sockets: each picks its tx queue (= the veth rx queue in native
    // mode) by its own random hash, so both queues get some (all on one
    // queue: p = 2^-31).
    let sender = send_from_a(&lab, n, 32);
    let mut rx = Rx::default();
    receive(port.sockets_mut(), u64::from(n), &mut rx, DEADLINE);
    assert_eq!(sender.join().unwrap(), Ok(n));
    check_receive_totals(port.sockets(), &rx, n);
    assert!(rx.per_socket.iter().all(|&c| c > 0), "both queues used: {:?}", rx.per_socket);
}

#[test]
fn arp_still_reaches_the_kernel_with_the_program_attached() {
    let Some(lab) = lab("xarp", 1) else { return };
    let mut port = open_port(&lab, Side::B, vec![0], PortConfig::default());
    let peer4 = lab.v4(Side::B).to_string();
    // A forgets B's MAC: it must ask with ARP, which B's kernel answers only
    // if the XDP program lets the request pass.
    lab.ip_in(Side::A, &["neigh", "del", &peer4, "dev", lab.dev(Side::A)]).unwrap();
    let (a4, b4ip) = (lab.v4(Side::A), lab.v4(Side::B));
    let sock = lab.run_in(Side::A, move || UdpSocket::bind((a4, 0))).unwrap().unwrap();
    sock.connect((b4ip, PORT)).unwrap();
    let mut rx = Rx::default();
    for attempt in 0..20u32 {
        sock.send(&payload(attempt, 32)).unwrap();
        receive(port.sockets_mut(), 1, &mut rx, Duration::from_millis(250));
        if rx.per_socket[0] > 0 {
            break;
        }
    }
    assert!(rx.per_socket[0] > 0, "no datagram reached the XSK: ARP was not answered ({rx:?})");
    assert_eq!(rx.non_ip, 0, "ARP must go to the kernel, not to the XSK");
    let out = Command::new("ip").args(["-n", lab.ns(Side::A), "neigh", "show", &peer4]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let m = lab.mac(Side::B);
    let mac = format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
    assert!(text.contains(&mac) && !text.contains("PERMANENT"), "A learnt B's MAC through ARP: {text}");
}

#[test]
fn transmit_frames_arrive_byte_exact_and_every_frame_completes() {
    let Some(lab) = lab("xtx", 1) else { return };
    let dev_a = lab.dev(Side::A).to_string();
    let mut xsk = lab.run_in(Side::A, move || XskSocket::open(&dev_a, 0, &XskConfig::default())).unwrap().unwrap();
    assert_eq!(xsk.bind_mode(), BindMode::Copy);
    let (a4, peer4) = (lab.v4(Side::A), lab.v4(Side::B));
    let n: u32 = 3000; // more than the 2048 transmit frames: they must recycle
    let flows = 4u16;
    let len_of = |seq: u32| 18 + (seq as usize * 37) % 1455; // 18..=1472 (MTU 1500)
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|seq| {
            let p = payload(seq, len_of(seq));
            let sport = 40000 + (seq % u32::from(flows)) as u16;
            FrameBuilder {
                src_mac: lab.mac(Side::A),
                dst_mac: lab.mac(Side::B),
                ..FrameBuilder::udp(IpAddr::V4(a4), IpAddr::V4(peer4), sport, PORT, &p)
            }
            .build()
        })
        .collect();

    // Receiver in B: a kernel UDP socket, bounded by count and deadline.
    let got = Arc::new(AtomicUsize::new(0));
    let rcv = UdpSocketIn::open(&lab, peer4);
    let got2 = Arc::clone(&got);
    let reader = std::thread::spawn(move || {
        let mut out: Vec<(u32, Vec<u8>, std::net::SocketAddr)> = Vec::new();
        let end = Instant::now() + DEADLINE;
        let mut buf = vec![0u8; 2048];
        while out.len() < n as usize && Instant::now() < end {
            if let Ok((len, from)) = rcv.0.recv_from(&mut buf) {
                let seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                out.push((seq, buf[..len].to_vec(), from));
                got2.fetch_add(1, Ordering::Release);
            }
        }
        out
    });

    // Closed loop: at most 64 datagrams ahead of the reader, so B's socket
    // buffer never overflows on a busy machine.
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let mut sent = 0usize;
    let end = Instant::now() + DEADLINE;
    while sent < refs.len() && Instant::now() < end {
        if sent - got.load(Ordering::Acquire) >= 64 {
            xsk.tx_complete();
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let upto = (sent + 32).min(refs.len());
        sent += xsk.tx_burst(&refs[sent..upto]);
    }
    while xsk.tx_in_flight() > 0 && Instant::now() < end {
        if xsk.tx_complete() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let out = reader.join().unwrap();
    assert_eq!(sent, n as usize);
    assert_eq!(out.len(), n as usize, "every frame reached B's kernel socket");
    let mut seen = vec![false; n as usize];
    for (seq, data, from) in &out {
        assert!((*seq as usize) < seen.len() && !seen[*seq as usize], "seq {seq} once");
        seen[*seq as usize] = true;
        assert_eq!(data, &payload(*seq, len_of(*seq)), "payload of {seq} byte-exact");
        assert_eq!(from.ip(), IpAddr::V4(a4));
        assert_eq!(from.port(), 40000 + (*seq % u32::from(flows)) as u16);
    }
    let st = xsk.stats().unwrap();
    println!("{st:?}");
    assert_eq!((st.tx_packets, st.tx_completed, st.tx_rejected), (u64::from(n), u64::from(n), 0));
    assert_eq!(st.tx_bytes, frames.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!((st.kernel.tx_invalid_descs, st.tx_bad_completions, st.tx_kick_errors), (0, 0, 0));
    let a = xsk.frame_account();
    assert!(a.is_complete(), "{a:?}");
    assert_eq!((a.tx, a.free, a.rx), (0, a.total - 2048, 2048), "all transmit frames back in the free list");

    // Frames that cannot be sent are refused and counted, not lost.
    let big = vec![0u8; 2049];
    assert_eq!(xsk.tx_burst(&[&[], &big]), 2);
    let st = xsk.stats().unwrap();
    assert_eq!((st.tx_rejected, st.tx_packets), (2, u64::from(n)));
    assert!(xsk.frame_account().is_complete());
}

#[test]
fn prepared_frames_are_sent_in_place_and_come_back_intact_with_their_tag() {
    let Some(lab) = lab("xprep", 1) else { return };
    let dev_a = lab.dev(Side::A).to_string();
    // 128 transmit frames (384 - 256 lent for receive), all in flight at
    // once: fewer than B's socket buffer holds.
    let tx_frames = 128u32;
    let cfg = XskConfig { frame_count: 384, rx_ring: 256, tx_ring: 128, copy_tx_budget: 128, ..XskConfig::default() };
    let mut xsk = lab.run_in(Side::A, move || XskSocket::open(&dev_a, 0, &cfg)).unwrap().unwrap();
    // 128 where the kernel has XDP_MAX_TX_SKB_BUDGET (6.17), else its 32.
    assert!(matches!(xsk.tx_budget(), 32 | 128), "{}", xsk.tx_budget());
    let (a4, peer4) = (lab.v4(Side::A), lab.v4(Side::B));
    // The template: sequence number 0 in the first 4 payload bytes, the
    // rest a fixed pattern; UDP checksum 0 (none, valid for IPv4).
    let body = |seq: u32| -> Vec<u8> {
        let mut p = seq.to_be_bytes().to_vec();
        p.extend((0..60u32).map(|i| (i * 7) as u8));
        p
    };
    let mut template = FrameBuilder {
        src_mac: lab.mac(Side::A),
        dst_mac: lab.mac(Side::B),
        ..FrameBuilder::udp(IpAddr::V4(a4), IpAddr::V4(peer4), 40000, PORT, &body(0))
    }
    .build();
    template[40] = 0;
    template[41] = 0;
    let seq_at = 42;
    const TAG: u32 = 7;
    let rcv = UdpSocketIn::open(&lab, peer4);
    let mut got: Vec<u32> = Vec::new();
    let recv_round = |want: usize, got: &mut Vec<u32>| {
        let mut buf = [0u8; 2048];
        let end = Instant::now() + DEADLINE;
        let mut n = 0;
        while n < want && Instant::now() < end {
            if let Ok(len) = rcv.0.recv(&mut buf) {
                let seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                assert_eq!(&buf[..len], &body(seq)[..], "payload of {seq} byte-exact");
                got.push(seq);
                n += 1;
            }
        }
    };
    let drain = |xsk: &mut XskSocket| {
        let end = Instant::now() + DEADLINE;
        while xsk.tx_in_flight() > 0 && Instant::now() < end {
            if xsk.tx_complete() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    // Round 0 writes every transmit frame whole; rounds 1..8 find each one
    // as it was sent, tag included, and rewrite only the sequence number.
    let (mut seq, mut fresh, mut intact) = (0u32, 0u32, 0u32);
    for round in 0..8 {
        let mut queued = 0;
        let end = Instant::now() + DEADLINE;
        while queued < tx_frames as usize && Instant::now() < end {
            queued += xsk.tx_prepared(tx_frames as usize - queued, &mut |buf, tag| {
                if *tag == TAG {
                    assert_eq!(buf[..seq_at], template[..seq_at], "headers as last sent");
                    assert_eq!(buf[seq_at + 4..template.len()], template[seq_at + 4..], "pattern as last sent");
                    intact += 1;
                } else {
                    assert_eq!(*tag, TX_TAG_NONE);
                    buf[..template.len()].copy_from_slice(&template);
                    *tag = TAG;
                    fresh += 1;
                }
                buf[seq_at..seq_at + 4].copy_from_slice(&seq.to_be_bytes());
                seq += 1;
                Some(template.len())
            });
        }
        assert_eq!(queued, tx_frames as usize, "round {round}");
        recv_round(tx_frames as usize, &mut got);
        drain(&mut xsk);
    }
    assert_eq!((fresh, intact), (tx_frames, 7 * tx_frames), "each frame written once, then reused");
    got.sort_unstable();
    assert_eq!(got, (0..seq).collect::<Vec<_>>(), "every frame arrived once");

    // A frame sent by copy (tx_burst) has unknown bytes for tx_prepared.
    let mut other = template.clone();
    other[seq_at..seq_at + 4].copy_from_slice(&seq.to_be_bytes());
    assert_eq!(xsk.tx_burst(&[&other]), 1);
    recv_round(1, &mut got);
    drain(&mut xsk);
    let mut none = 0;
    let offered = xsk.tx_prepared(tx_frames as usize, &mut |_, tag| {
        none += u32::from(*tag == TX_TAG_NONE);
        None
    });
    assert_eq!((offered, none), (0, 1), "only the copied frame lost its tag");
    // Lengths out of range are refused, counted, and send nothing.
    assert_eq!(xsk.tx_prepared(1, &mut |_, _| Some(0)), 0);
    assert_eq!(xsk.tx_prepared(1, &mut |buf, _| Some(buf.len() + 1)), 0);

    let st = xsk.stats().unwrap();
    let n = u64::from(seq) + 1;
    assert_eq!((st.tx_packets, st.tx_completed, st.tx_rejected), (n, n, 2));
    assert_eq!((st.kernel.tx_invalid_descs, st.tx_bad_completions, st.tx_kick_errors), (0, 0, 0));
    let a = xsk.frame_account();
    assert!(a.is_complete(), "{a:?}");
    assert_eq!((a.tx, a.free, a.rx), (0, tx_frames, 256));
}

/// A UDP socket created inside a namespace, with a read timeout.
struct UdpSocketIn(UdpSocket);

impl UdpSocketIn {
    fn open(lab: &Lab, addr: Ipv4Addr) -> UdpSocketIn {
        let s = lab.run_in(Side::B, move || UdpSocket::bind((addr, PORT))).unwrap().unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        UdpSocketIn(s)
    }
}

fn link_show(lab: &Lab, side: Side) -> String {
    let out = Command::new("ip").args(["-n", lab.ns(side), "link", "show", lab.dev(side)]).output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn lifecycle_detach_on_drop_already_attached_and_missing_interface() {
    let Some(lab) = lab("xlc", 1) else { return };
    let dev = lab.dev(Side::B).to_string();
    for (mode, word) in [(XdpMode::Native, "xdp "), (XdpMode::Skb, "xdpgeneric")] {
        let d = dev.clone();
        let cfg = AttachConfig { mode, ..AttachConfig::default() };
        let prog = lab.run_in(Side::B, move || XdpProgram::attach(&d, &cfg)).unwrap().unwrap();
        assert_eq!(prog.mode(), mode);
        let shown = link_show(&lab, Side::B);
        assert!(shown.contains("prog/xdp") && shown.contains(word), "attached in {mode:?}: {shown}");

        // A second program on the same interface is refused, clearly.
        let d = dev.clone();
        let err = lab.run_in(Side::B, move || XdpProgram::attach(&d, &AttachConfig::default())).unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyAttached, "{err}");
        assert!(err.to_string().contains(&dev) && err.to_string().contains("already has an XDP program"), "{err}");
        // Advice that works: `ip link set ... xdp off` cannot remove a program
        // attached through a BPF link; the message says how to find its owner.
        for off in ["xdp", "xdpgeneric"] {
            Command::new("ip").args(["-n", lab.ns(Side::B), "link", "set", "dev", &dev, off, "off"]).output().unwrap();
        }
        assert!(link_show(&lab, Side::B).contains("prog/xdp"), "still attached after `ip link set ... xdp off`");
        let msg = err.to_string();
        assert!(msg.contains("bpftool link show") && msg.contains("BPF link"), "{msg}");

        drop(prog);
        let shown = link_show(&lab, Side::B);
        assert!(!shown.contains("prog/xdp") && !shown.contains("xdp"), "detached after drop: {shown}");
    }

    // The port detaches too, sockets and all.
    let port = open_port(&lab, Side::B, vec![0], PortConfig::default());
    assert!(link_show(&lab, Side::B).contains("prog/xdp"));
    let (prog, socks) = port.into_parts();
    drop(socks);
    assert!(link_show(&lab, Side::B).contains("prog/xdp"), "the program outlives the sockets");
    drop(prog);
    assert!(!link_show(&lab, Side::B).contains("xdp"));

    // Missing interfaces are named.
    let errs = lab
        .run_in(Side::B, || {
            [
                XdpProgram::attach("fsgone0", &AttachConfig::default()).unwrap_err(),
                XdpPort::open("fsgone1", &[0], &PortConfig::default()).unwrap_err(),
                XskSocket::open("fsgone2", 0, &XskConfig::default()).unwrap_err(),
            ]
        })
        .unwrap();
    for (i, e) in errs.iter().enumerate() {
        assert_eq!(e.kind(), ErrorKind::NoSuchInterface, "{e}");
        assert!(e.to_string().contains(&format!("fsgone{i}")) && e.to_string().contains("does not exist"), "{e}");
    }
}

#[test]
fn bind_modes_zero_copy_refused_on_veth_auto_falls_back_and_queues_are_checked() {
    let Some(lab) = lab("xbm", 1) else { return };
    let dev = lab.dev(Side::B).to_string();
    let (e_zc, auto, e_q, e_busy) = lab
        .run_in(Side::B, move || {
            let zc = XskSocket::open(&dev, 0, &XskConfig { bind: BindMode::ZeroCopy, ..XskConfig::default() });
            let auto = XskSocket::open(&dev, 0, &XskConfig::default());
            let q = XskSocket::open(&dev, 5, &XskConfig { bind: BindMode::Copy, ..XskConfig::default() });
            let busy = XskSocket::open(&dev, 0, &XskConfig { bind: BindMode::Copy, ..XskConfig::default() });
            (zc.unwrap_err(), auto, q.unwrap_err(), busy.unwrap_err())
        })
        .unwrap();
    assert_eq!(e_zc.kind(), flowsteer_xsk::ErrorKind::Unsupported, "{e_zc}");
    assert!(e_zc.to_string().contains("zero-copy"), "{e_zc}");
    let auto = auto.unwrap();
    assert_eq!(auto.bind_mode(), BindMode::Copy);
    assert_eq!(e_q.kind(), ErrorKind::InvalidConfig, "{e_q}");
    assert!(e_q.to_string().contains("queue 5"), "{e_q}");
    assert_eq!(e_busy.kind(), ErrorKind::Busy, "{e_busy}");
    let a = auto.frame_account();
    assert!(a.is_complete(), "{a:?}");
    assert_eq!((a.total, a.rx, a.free, a.tx), (4096, 2048, 2048, 0));
}

/// Runs the check below as user `nobody` (a child process of this test
/// binary, through `setpriv`): every entry point must say that AF_XDP needs root.
#[test]
fn without_root_the_error_says_so() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let Ok(exe) = std::env::current_exe() else { return };
    let status = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"])
        .arg(&exe)
        .args(["--exact", "unprivileged_child", "--include-ignored", "--nocapture", "--test-threads=1"])
        .env("FLOWSTEER_XSK_UNPRIVILEGED_CHILD", "1")
        .output();
    let out = match status {
        Ok(o) => o,
        Err(e) => {
            println!("skipped: setpriv is not available ({e})");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(out.status.success() && text.contains("1 passed"), "child failed: {text}");
}

#[test]
#[ignore = "run by without_root_the_error_says_so as user nobody"]
fn unprivileged_child() {
    assert!(std::env::var_os("FLOWSTEER_XSK_UNPRIVILEGED_CHILD").is_some(), "only as the child of the root test");
    assert!(!flowsteer_netns::is_root());
    let errs = [
        XdpProgram::attach("lo", &AttachConfig::default()).unwrap_err(),
        XskSocket::open("lo", 0, &XskConfig::default()).unwrap_err(),
        XdpPort::open("lo", &[0], &PortConfig::default()).unwrap_err(),
    ];
    for e in errs {
        assert_eq!(e.kind(), ErrorKind::NotPermitted, "{e}");
        assert!(e.to_string().starts_with(flowsteer_xsk::NEED_ROOT), "{e}");
        println!("{e}");
    }
}

/// `reflect_burst`: B answers every datagram from A by rewriting the
/// received UMEM frame in place (MACs, addresses and ports swapped, UDP
/// checksum afresh) and transmitting that same frame. A's kernel socket
/// gets every echo byte-exact, and every frame is back where it belongs.
#[test]
fn reflect_echoes_in_place_and_every_frame_comes_back() {
    let Some(lab) = lab("xrf", 1) else { return };
    let mut port = open_port(&lab, Side::B, vec![0], PortConfig::with_mode(XdpMode::Native));
    let (a4, peer4) = (lab.v4(Side::A), lab.v4(Side::B));
    const N: u32 = 3000; // more than the 2,048 receive frames: they must cycle
    let client = lab
        .run_in(Side::A, move || {
            let s = UdpSocket::bind((a4, 0)).unwrap();
            s.connect((peer4, PORT)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            s
        })
        .unwrap();
    let sock = &mut port.sockets_mut()[0];
    let opts = ParseOptions::default();
    let (mut got, mut buf) = (0u32, [0u8; 2048]);
    let deadline = Instant::now() + DEADLINE;
    let mut sent = 0u32;
    while got < N && Instant::now() < deadline {
        while sent < N && sent < got + 64 {
            client.send(&payload(sent, 100)).unwrap();
            sent += 1;
        }
        let _ = sock.wait_rx(Duration::from_millis(5));
        sock.reflect_burst(64, &mut |frame, len| {
            let f = &mut frame[..len];
            let l3 = parse_frame(f, LinkType::Ethernet, &opts).ok()?.outer?;
            // Only our UDP datagrams (IPv6 neighbour discovery may pass by).
            if l3.tuple.proto != 17 || l3.tuple.ports.map(|p| p.1) != Some(PORT) || !l3.tuple.src.is_ipv4() {
                return None;
            }
            let l4 = l3.l4_offset?;
            let (d, s) = f.split_at_mut(6);
            d.swap_with_slice(&mut s[..6]);
            let ip = l3.l3_offset + 12;
            let (x, y) = f[ip..ip + 8].split_at_mut(4);
            x.swap_with_slice(y);
            let (p, q) = f[l4..l4 + 4].split_at_mut(2);
            p.swap_with_slice(q);
            f[l4 + 6] = 0;
            f[l4 + 7] = 0;
            let end = l3.l3_offset + l3.ip_total_len;
            let c = flowsteer_wire::checksum::udp_checksum(l3.tuple.dst, l3.tuple.src, &f[l4..end]);
            f[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
            Some(len)
        });
        sock.tx_complete();
        while let Ok(n) = client.recv(&mut buf) {
            assert_eq!(&buf[..n], &payload(got, 100)[..], "echo {got}");
            got += 1;
        }
    }
    assert_eq!(got, N, "echoes received");
    let until = Instant::now() + Duration::from_secs(2);
    while sock.tx_in_flight() > 0 && Instant::now() < until {
        sock.tx_complete();
    }
    let st = sock.stats().unwrap();
    assert_eq!((st.tx_packets, st.tx_completed, st.tx_rejected), (u64::from(N), u64::from(N), 0), "{st:?}");
    let acct = sock.frame_account();
    assert!(acct.is_complete(), "{acct:?}");
    assert_eq!(acct.tx, 0, "{acct:?}");
}

/// With UDP to PORT claimed: UDP to another port reaches a kernel socket,
/// a TCP connection to a kernel listener works, ping (IPv4 and IPv6) is
/// answered; only the claimed datagrams reach the socket, and the
/// program's counters say so (every claimed datagram redirected, the rest
/// passed, nothing dropped).
#[test]
fn the_kernel_keeps_everything_not_claimed_and_the_counters_say_so() {
    let Some(lab) = lab("xclm", 1) else { return };
    let (a4, b4) = (lab.v4(Side::A), lab.v4(Side::B));
    let (kernel_udp, kernel_tcp) = (PORT + 1, PORT + 2);
    let udp_rx = lab.run_in(Side::B, move || UdpSocket::bind((b4, kernel_udp))).unwrap().unwrap();
    udp_rx.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let listener = lab.run_in(Side::B, move || std::net::TcpListener::bind((b4, kernel_tcp))).unwrap().unwrap();
    let mut port = open_port(&lab, Side::B, vec![0], PortConfig::with_mode(XdpMode::Native));
    // Nothing is redirected or dropped before traffic starts; the peer's
    // own IPv6 chatter (neighbour and router solicitations, MLD reports)
    // may already have been passed to the kernel, so passes are a baseline.
    let at_open = port.program().counter_reasons().unwrap();
    let open_totals = at_open.totals();
    assert_eq!((open_totals.redirected, open_totals.dropped), (0, 0), "{at_open:?}");

    // The kernel: ping, TCP, UDP to another port.
    assert!(lab.ping(Side::A, b4.into(), Duration::from_secs(5)).unwrap(), "ping over IPv4");
    assert!(lab.ping(Side::A, lab.v6(Side::B).into(), Duration::from_secs(5)).unwrap(), "ping over IPv6");
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).unwrap();
        c.write_all(&buf).unwrap();
    });
    let reply = lab
        .run_in(Side::A, move || {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect_timeout(&(b4, kernel_tcp).into(), Duration::from_secs(5))?;
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            c.write_all(b"hello")?;
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf)?;
            Ok::<_, std::io::Error>(buf)
        })
        .unwrap()
        .expect("TCP to the kernel");
    assert_eq!(&reply, b"hello");
    server.join().unwrap();
    let sender = lab.run_in(Side::A, move || UdpSocket::bind((a4, 0))).unwrap().unwrap();
    for i in 0..50u32 {
        sender.send_to(&payload(i, 32), (b4, kernel_udp)).unwrap();
    }
    let mut buf = [0u8; 64];
    let mut kernel_got = 0;
    while kernel_got < 50 && udp_rx.recv(&mut buf).is_ok() {
        kernel_got += 1;
    }
    assert_eq!(kernel_got, 50, "UDP to an unclaimed port reaches the kernel socket");

    // The socket: the claimed datagrams, and nothing else.
    let n = 200;
    let h = send_from_a(&lab, n, 4);
    let mut rx = Rx::default();
    receive(port.sockets_mut(), u64::from(n), &mut rx, DEADLINE);
    assert_eq!(h.join().unwrap(), Ok(n));
    assert_eq!(rx.per_socket[0], u64::from(n));
    assert_eq!((rx.others[0], rx.non_ip), (0, 0), "nothing unclaimed reached the socket");

    let r = port.program().counter_reasons().unwrap();
    let c = r.totals();
    println!("{r:?}\n{c:?}");
    assert_eq!(c.redirected, u64::from(n), "{r:?}");
    assert_eq!(c.dropped, 0, "{r:?}");
    // 2 pings + 50 datagrams + at least 4 TCP segments (SYN, ACK, data, FIN) in.
    assert!(r.passed_unclaimed >= at_open.passed_unclaimed + 2 + 50 + 4, "{r:?}");
    assert_eq!((r.passed_unparsed, r.passed_no_socket), (0, 0), "{r:?}");
    assert_eq!(c.seen(), c.passed + c.redirected);
    assert_eq!(port.sockets()[0].stats().unwrap().kernel.rx_drops(), 0);
}

/// MTU 9000 on a veth: opening refuses, naming the numbers; with the drops
/// allowed it warns, and claimed frames longer than a socket frame are
/// dropped by the program and counted (not by the kernel: its socket
/// statistics stay 0), while long frames the kernel keeps still reach it.
/// Native XDP is refused on such a veth (the error says why); auto falls
/// back to generic mode.
#[test]
fn an_mtu_beyond_the_socket_frame_is_refused_then_its_drops_are_counted() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let lab = Lab::new("xmtu", &LabConfig { queues: 1, mtu: 9000 }).expect("lab");
    let dev = lab.dev(Side::B).to_string();
    let claim = Claim::udp(&[PORT]);
    let cfg = PortConfig { attach: AttachConfig { claim, ..AttachConfig::default() }, ..PortConfig::default() };
    let (d, c) = (dev.clone(), cfg.clone());
    let err = lab.run_in(Side::B, move || XdpPort::open(&d, &[0], &c)).unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::MtuTooLarge, "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&dev) && msg.contains("MTU 9000") && msg.contains("9018") && msg.contains("1792"), "{msg}");
    assert!(!link_show(&lab, Side::B).contains("xdp"), "nothing left attached after the refusal");

    let (d, mut c) = (dev.clone(), cfg.clone());
    c.attach.mode = XdpMode::Native;
    c.allow_mtu_drops = true;
    let err = lab.run_in(Side::B, move || XdpPort::open(&d, &[0], &c)).unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("MTU is too large"), "{err}");

    let (d, mut c) = (dev.clone(), cfg);
    c.allow_mtu_drops = true;
    let mut port = lab.run_in(Side::B, move || XdpPort::open(&d, &[0], &c)).unwrap().unwrap();
    assert_eq!(port.program().mode(), XdpMode::Skb, "auto falls back to generic XDP");
    assert_eq!(port.mtu(), 9000);
    assert_eq!(port.warnings().len(), 1);
    assert!(port.warnings()[0].contains("dropped_too_big"), "{:?}", port.warnings());
    assert_eq!(port.program().max_frame_len(), Some(1792));

    let (a4, b4) = (lab.v4(Side::A), lab.v4(Side::B));
    let kernel = lab.run_in(Side::B, move || UdpSocket::bind((b4, PORT + 1))).unwrap().unwrap();
    kernel.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let sender = lab.run_in(Side::A, move || UdpSocket::bind((a4, 0))).unwrap().unwrap();
    // 42 bytes of headers: 1750 of payload make exactly 1792 bytes.
    let sizes = [100usize, 1750, 1751, 4000, 8000];
    for (seq, len) in sizes.iter().enumerate() {
        sender.send_to(&payload(seq as u32, *len), (b4, PORT)).unwrap();
    }
    sender.send_to(&payload(99, 8000), (b4, PORT + 1)).unwrap();
    let mut rx = Rx::default();
    receive(port.sockets_mut(), 2, &mut rx, DEADLINE);
    assert_eq!(rx.per_socket[0], 2, "the two frames that fit");
    assert_eq!(rx.seqs.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
    let mut buf = vec![0u8; 9000];
    let n = kernel.recv(&mut buf).expect("the kernel gets its long datagram");
    assert_eq!(&buf[..n], &payload(99, 8000)[..]);
    let r = port.program().counter_reasons().unwrap();
    println!("{r:?}");
    assert_eq!((r.dropped_too_big, r.redirected), (3, 2), "{r:?}");
    assert_eq!(port.sockets()[0].stats().unwrap().kernel.rx_dropped, 0, "dropped before the kernel saw them");
}

/// Dropping the program detaches it even while another copy of the link's
/// file is open (as a child forked meanwhile holds one until it execs).
#[test]
fn drop_detaches_while_a_copy_of_the_link_is_open() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let lab = Lab::new("xlnk", &LabConfig { queues: 1, mtu: 1500 }).expect("lab");
    let dev = lab.dev(Side::B).to_string();
    let shown = || {
        let out = Command::new("ip").args(["-n", lab.ns(Side::B), "link", "show", &dev]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let d = dev.clone();
    let prog = lab.run_in(Side::B, move || XdpProgram::attach(&d, &AttachConfig::default())).unwrap().unwrap();
    let copy = prog.link().try_clone_to_owned().unwrap();
    assert!(shown().contains("prog/xdp"), "{}", shown());
    drop(prog);
    assert!(!shown().contains("prog/xdp"), "still attached: {}", shown());
    drop(copy);
}

// ---------------------------------------------------------------- the fast path

/// `ethtool ARGS` inside namespace `ns`; the output, or why it failed.
fn ethtool_in(ns: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool"])
        .args(args)
        .output()
        .map_err(|e| format!("ip netns exec ... ethtool: {e}"))?;
    if !out.status.success() {
        return Err(format!("ethtool {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The sum of `ethtool -S DEV` counters whose name contains one of `words`.
fn ethtool_sum(ns: &str, dev: &str, words: &[&str]) -> u64 {
    let text = ethtool_in(ns, &["-S", dev]).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| words.iter().any(|w| name.contains(w)))
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .sum()
}

/// A counter of the `Udp:` lines of `/proc/net/snmp` in namespace `ns`.
fn udp_snmp(ns: &str, name: &str) -> u64 {
    let out = Command::new("ip").args(["netns", "exec", ns, "cat", "/proc/net/snmp"]).output().expect("ip netns exec");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (lines.next().unwrap_or_default(), lines.next().unwrap_or_default());
    let at = names.split_whitespace().position(|n| n == name).unwrap_or_else(|| panic!("no Udp {name}: {text}"));
    values.split_whitespace().nth(at).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("Udp {name}: {text}"))
}

/// The bridge's kernel fast path between two veths. Three namespaces: A
/// and B, and M between them (a `Star` with two hosts, M its hub) with
/// veths A-M1 and M2-B. The fast-path program runs in native mode on M1
/// (port 1) and M2 (port 2), no AF_XDP socket anywhere, the maps hold A's
/// MAC as learned on port 1 and B's on port 2, both ports enabled. A and B
/// know each other's MAC statically (ARP is broadcast: the slow path, and
/// M's kernel does not bridge).
///
/// 1. A sends UDP with full checksums (`ethtool -K h1 tx off`) while B's
///    veth has GRO off (veth's default): the program redirects every
///    datagram (`fast_forwarded`), but a redirect into a veth whose peer
///    has neither an XDP program nor GRO is dropped. Measured on 6.18: by
///    the ingress veth M1 (`rx_queue_0_drops` in `ethtool -S`, RX dropped
///    in `ip -s link`), not as `xdp_xmit_err` of the egress.
/// 2. `ethtool -K h2 gro on`: every datagram arrives, byte-exact (B's
///    kernel verifies the checksum: an XDP frame carries no offload state).
/// 3. Default checksum offload on A again (`tx on`): every datagram carries
///    a partial checksum (the field holds the pseudo-header sum), which the
///    program completes before the redirect (`fast_forwarded` and
///    `fast_csum_completed`, nothing on the slow path): every datagram
///    arrives, byte-exact, accepted by B's UDP socket, which verifies the
///    checksum in software (an XDP frame carries no offload state), and
///    B's `InCsumErrors` stays where it was. Payloads of 18 (a 60-byte
///    frame) to 1,472 bytes (the most a 1,500-byte MTU carries), odd and
///    even. (A datagram whose
///    pseudo-header sum is its complete checksum, 1 in 65,535, is
///    forwarded as it is, not counted completed: the test counts them.)
/// 4. Frames shorter than 60 bytes go to the slow path (`slow_short`): a
///    redirect would send them unpadded.
#[test]
fn fast_path_forwards_learned_unicast_and_completes_partial_checksums() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    if !Command::new("ethtool").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!("skipped: ethtool is not installed (apt-get install ethtool)");
        return;
    }
    const N: u32 = 200;
    const MAX_FRAME: u32 = 1500 + 18;
    let star = Star::new("xfp", 2).expect("star");
    let (ns_a, ns_b, hub) = (star.host_ns(1).to_string(), star.host_ns(2).to_string(), star.hub_ns().to_string());
    let (m1, m2) = (star.hub_dev(1).to_string(), star.hub_dev(2).to_string());
    let maps = Arc::new(FastPathMaps::new(1024, 8).expect("maps"));

    // Programs and port table in M: the device map resolves ifindexes in
    // the namespace of the thread that writes them.
    let m = Arc::clone(&maps);
    let (d1, d2) = (m1.clone(), m2.clone());
    let (p1, p2) = star
        .run_in(0, move || -> Result<(XdpProgram, XdpProgram), flowsteer_xsk::Error> {
            let attach = |dev: &str, port: u32| {
                let cfg = AttachConfig {
                    mode: XdpMode::Native,
                    claim: Claim::Frames,
                    max_frame_len: Some(1792),
                    fast_path: Some(FastPathAttach::new(Arc::clone(&m), port)),
                    ..AttachConfig::default()
                };
                XdpProgram::attach(dev, &cfg)
            };
            let (p1, p2) = (attach(&d1, 1)?, attach(&d2, 2)?);
            m.port_set(1, p1.ifindex(), MAX_FRAME, true)?;
            m.port_set(2, p2.ifindex(), MAX_FRAME, true)?;
            Ok((p1, p2))
        })
        .expect("in M")
        .expect("attach and port table");
    assert_eq!((p1.mode(), p2.mode()), (XdpMode::Native, XdpMode::Native));
    maps.fdb_set(star.mac(1), 0, 1, false).unwrap();
    maps.fdb_set(star.mac(2), 0, 2, false).unwrap();
    for (ns, dev, peer) in [(&ns_a, "h1", 2), (&ns_b, "h2", 1)] {
        let (ip, mac) = (star.v4(peer).to_string(), star.mac_text(peer));
        flowsteer_netns::ip(&["-n", ns, "neigh", "replace", &ip, "lladdr", &mac, "dev", dev, "nud", "permanent"])
            .unwrap();
    }
    let (a4, b4) = (star.v4(1), star.v4(2));
    let rx = star.run_in(2, move || UdpSocket::bind((b4, PORT))).unwrap().unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let tx = star.run_in(1, move || UdpSocket::bind((a4, 0))).unwrap().unwrap();
    // Sends N datagrams from sequence number `first`, `len(seq)` bytes
    // each, 32 at a time; after each 32, reads what arrives (closed loop:
    // B's socket buffer holds about 200 such datagrams, XDP frames being
    // page-sized skbs). Returns the datagrams B got.
    let exchange = |first: u32, len: &dyn Fn(u32) -> usize| {
        let (mut got, mut buf, mut sent) = (Vec::new(), [0u8; 2048], 0);
        for chunk in (first..first + N).collect::<Vec<u32>>().chunks(32) {
            for &seq in chunk {
                tx.send_to(&payload(seq, len(seq)), (b4, PORT)).unwrap();
            }
            sent += chunk.len();
            let end = Instant::now() + Duration::from_secs(2);
            while got.len() < sent && Instant::now() < end {
                match rx.recv(&mut buf) {
                    Ok(n) => got.push(buf[..n].to_vec()),
                    // Nothing within the read timeout: nothing is coming.
                    Err(_) => break,
                }
            }
        }
        got
    };

    // 1. Full checksums, GRO off on B's veth: redirected, then dropped.
    ethtool_in(&ns_a, &["-K", "h1", "tx", "off"]).expect("tx checksum offload off on A");
    let before = flowsteer_xsk::now_s();
    assert!(exchange(0, &|_| 64).is_empty(), "a veth whose peer has neither XDP nor GRO takes no redirects");
    let r = p1.counter_reasons().unwrap();
    println!("1. GRO off on h2: {r:?}");
    assert_eq!(r.fast_forwarded, u64::from(N), "{r:?}");
    assert_eq!(r.slow_path(), 0, "{r:?}");
    let dropped = ethtool_sum(&hub, &m1, &["drops"]) + ethtool_sum(&hub, &m2, &["xmit_err"]);
    println!("   M1 ethtool -S drops + M2 xdp_xmit_err: {dropped}");
    assert!(dropped >= u64::from(N), "the kernel counts the lost redirects: {dropped}");
    let seen = maps.fdb_seen(star.mac(1), 0).unwrap().unwrap();
    assert!(seen >= before, "A's seen was stored: {seen} >= {before}");

    // 2. GRO on B's veth: every datagram arrives, byte-exact.
    ethtool_in(&ns_b, &["-K", "h2", "gro", "on"]).expect("GRO on on B");
    let got = exchange(N, &|_| 64);
    assert_eq!(got.len(), N as usize, "every datagram crossed M in the fast path");
    for (i, d) in got.iter().enumerate() {
        let seq = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
        assert!((N..2 * N).contains(&seq) && d[..] == payload(seq, 64)[..], "datagram {i} (seq {seq})");
    }
    let r = p1.counter_reasons().unwrap();
    println!("2. GRO on on h2: {r:?}; M2 xdp_xmit {}", ethtool_sum(&hub, &m2, &["xdp_xmit"]));
    assert_eq!((r.fast_forwarded, r.slow_path()), (2 * u64::from(N), 0), "{r:?}");

    // 3. The host's default checksum offload: partial checksums, completed
    // in the fast path.
    // From 18 bytes: a 60-byte frame, the shortest the fast path forwards.
    const LENS: [usize; 10] = [18, 19, 20, 21, 64, 333, 511, 512, 1400, 1472];
    let len = |seq: u32| LENS[seq as usize % LENS.len()];
    ethtool_in(&ns_a, &["-K", "h1", "tx", "on"]).expect("tx checksum offload on on A");
    let csum_errors = udp_snmp(&ns_b, "InCsumErrors");
    let got = exchange(2 * N, &len);
    let r = p1.counter_reasons().unwrap();
    println!("3. partial checksums: {r:?}");
    assert_eq!(got.len(), N as usize, "every datagram crossed M in the fast path, its checksum completed: {r:?}");
    for (i, d) in got.iter().enumerate() {
        let seq = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
        assert!((2 * N..3 * N).contains(&seq) && d[..] == payload(seq, len(seq))[..], "datagram {i} (seq {seq})");
    }
    assert_eq!(udp_snmp(&ns_b, "InCsumErrors"), csum_errors, "B's kernel found no bad checksum");
    assert_eq!(r.fast_forwarded, 3 * u64::from(N), "{r:?}");
    // The datagrams whose partial checksum is already the complete one.
    let sport = tx.local_addr().unwrap().port();
    let complete_already = (2 * N..3 * N)
        .filter(|&seq| {
            let data = payload(seq, len(seq));
            let ulen = (8 + data.len()) as u16;
            let d = [&sport.to_be_bytes()[..], &PORT.to_be_bytes(), &ulen.to_be_bytes(), &[0, 0], &data].concat();
            let (s, t) = (IpAddr::from(a4), IpAddr::from(b4));
            let full = checksum::udp_checksum(s, t, &d);
            let partial = !checksum::fold(checksum::pseudo_header_sum(s, t, 17, ulen.into()));
            u32::from(full) % 0xffff == u32::from(partial) % 0xffff
        })
        .count() as u64;
    assert_eq!(r.fast_csum_completed, u64::from(N) - complete_already, "every partial checksum completed: {r:?}");
    assert_eq!(r.slow_path(), 0, "{r:?}");
    assert_eq!(r.totals().seen(), 3 * u64::from(N));
    assert!(r.conservation_ok(true), "{r:?}");

    // 4. Frames shorter than 60 bytes (UDP payloads of 4 to 17 bytes: a
    // veth does not pad them) take the slow path: a redirect would send
    // them unpadded. No socket here, so M's kernel gets them (and drops
    // them: not its address); B gets none.
    let got = exchange(3 * N, &|seq| 4 + seq as usize % 14);
    let r = p1.counter_reasons().unwrap();
    println!("4. short frames: {r:?}");
    assert!(got.is_empty(), "{} short frames crossed M", got.len());
    assert_eq!((r.slow_short, r.slow_path()), (u64::from(N), u64::from(N)), "{r:?}");
    assert_eq!(r.fast_forwarded, 3 * u64::from(N), "{r:?}");
    assert!(r.conservation_ok(true), "{r:?}");
    let r2 = p2.counter_reasons().unwrap();
    assert!(r2.conservation_ok(true), "{r2:?}");
}
