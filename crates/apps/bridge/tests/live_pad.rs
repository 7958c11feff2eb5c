//! Frames below the Ethernet minimum: the bridge pads them with zeros to
//! 60 bytes on the way out (a NIC would; a veth, an AF_PACKET socket and an
//! AF_XDP socket do not), and counts them per egress port (`tx_padded`).
//!
//! Host 1 writes frames of 14, 42, 59, 60, 61 and 100 bytes by hand
//! (AF_PACKET, ethertype 0x88b5) to host 2 (learned unicast) and to the
//! broadcast address (flooded to hosts 2 and 3); a sniffer (an AF_PACKET
//! ring) on hosts 2 and 3 checks every frame of host 1: 60 bytes long when
//! it was shorter, its own bytes intact and zeros after; a frame of 60
//! bytes or more exactly as sent. The counters: `tx_padded` of each egress
//! is the number of short frames sent out of it. No IP traffic crosses
//! the bridge (the hosts are learned from hand-written frames; IPv6 is off
//! in a `Star`), so nothing else short is padded.
//!
//! On `afxdp:` ports the kernel fast path is on and live (GRO on the
//! hosts' veths, so their peers take redirects): it forwards learned
//! unicast of 60 bytes or more itself, and leaves shorter frames to the
//! workers, which pad them. Root only; prints "skipped: <reason>" otherwise.

mod common;

use common::{assert_conserved, host_ethtool, port, start, stats, stats_when, Sniffer};
use flowsteer_afpacket::TxSocket;
use flowsteer_bridge::{Control, PortKind};
use flowsteer_netns::Star;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Frames per length and destination.
const N: u16 = 10;
const LENS: [usize; 6] = [14, 42, 59, 60, 61, 100];
const SHORT: usize = 3;
const MIN: usize = 60;
/// The length of the frames the hosts are learned from (not in `LENS`).
const LEARN: usize = 64;
const MARKER: &[u8; 4] = b"FSPD";
const ETHERTYPE: u16 = 0x88b5;
const BROADCAST: [u8; 6] = [0xff; 6];

/// Frame `seq` of `len` bytes from `src` to `dst`: the header, then (room
/// permitting) the marker, the length, the sequence number and a filler.
/// A 14-byte frame is the header alone.
fn frame(dst: [u8; 6], src: [u8; 6], len: usize, seq: u16) -> Vec<u8> {
    let mut f = [&dst[..], &src, &ETHERTYPE.to_be_bytes()].concat();
    if len > 14 {
        f.extend_from_slice(MARKER);
        f.extend_from_slice(&(len as u16).to_be_bytes());
        f.extend_from_slice(&seq.to_be_bytes());
        f.resize(len, 0xa5);
    }
    f.truncate(len);
    f
}

/// What a sniffer checks of each of host 1's frames: its length as sent
/// (read from the frame, 14 without a marker) and whether it arrived as it
/// must: `max(len, 60)` bytes, the frame's own bytes intact, zeros after.
fn check(f: &[u8], src: [u8; 6]) -> Option<(bool, usize, bool)> {
    if f.len() < 14 || f[6..12] != src || f[12..14] != ETHERTYPE.to_be_bytes() {
        return None;
    }
    let dst: [u8; 6] = f[..6].try_into().ok()?;
    let broadcast = dst == BROADCAST;
    let (len, seq) = match f.get(14..18) {
        Some(m) if m == MARKER => {
            let len = usize::from(u16::from_be_bytes([f[18], f[19]]));
            (len, u16::from_be_bytes([f[20], f[21]]))
        }
        _ => (14, 0),
    };
    let want = frame(dst, src, len, seq);
    let intact = f.len() == len.max(MIN) && f[..len] == want[..] && f[len..].iter().all(|b| *b == 0);
    Some((broadcast, len, intact))
}

/// Per (broadcast, length sent): frames that arrived as they must, and
/// frames that did not.
type Seen = Arc<Mutex<BTreeMap<(bool, usize), (u32, u32)>>>;

/// The frames from `src` host `i` receives, judged by [`check`].
struct PadSniffer {
    seen: Seen,
    _sniffer: Sniffer,
}

impl PadSniffer {
    fn count(&self, broadcast: bool, len: usize) -> (u32, u32) {
        self.seen.lock().unwrap().get(&(broadcast, len)).copied().unwrap_or_default()
    }
}

fn sniff(star: &Star, i: usize, src: [u8; 6]) -> PadSniffer {
    let seen: Seen = Arc::default();
    let se = seen.clone();
    let sniffer = Sniffer::start(star, i, move |f, _| {
        if let Some((broadcast, len, intact)) = check(f, src) {
            let mut seen = se.lock().unwrap();
            let e = seen.entry((broadcast, len)).or_default();
            if intact {
                e.0 += 1;
            } else {
                e.1 += 1;
                eprintln!("host frame of {len} bytes arrived as {} bytes: {f:02x?}", f.len());
            }
        }
    });
    PadSniffer { seen, _sniffer: sniffer }
}

/// Sends `frames` from host `from`, every one (the kernel takes them all
/// unless its queue is full: retried).
fn send(star: &Star, from: usize, frames: Vec<Vec<u8>>) {
    let dev = star.host_dev(from);
    star.run_in(from, move || {
        let mut tx = TxSocket::open(&dev, &Default::default()).unwrap();
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while sent < frames.len() && Instant::now() < deadline {
            sent += tx.send_batch(&frames[sent..]);
        }
        assert_eq!(sent, frames.len(), "host {from} sent every frame");
    })
    .unwrap();
}

/// Waits (10 s at most) until `done` holds.
fn wait_for(done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn padding(kind: PortKind, tag: &str) {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let star = Star::new(tag, 3).unwrap();
    let fast_live = kind == PortKind::Afxdp && common::no_ethtool().is_none();
    if fast_live {
        // The fast path redirects into a veth only while its peer has GRO on.
        for i in 1..=3 {
            host_ethtool(&star, i, &["gro", "on"]);
        }
    }
    let bridge = start(&star, kind, 3, |_| {});
    let ctl: Arc<dyn Control> = bridge.control();
    let (mac1, mac2, mac3) = (star.mac(1), star.mac(2), star.mac(3));
    let sniffers = [sniff(&star, 2, mac1), sniff(&star, 3, mac1)];

    // Every host is learned from one broadcast frame of LEARN bytes (no
    // ARP: no IP traffic crosses the bridge), then host 1's own frames
    // start from a known count of padded frames (none).
    for (i, mac) in [(2, mac2), (3, mac3), (1, mac1)] {
        send(&star, i, vec![frame(BROADCAST, mac, LEARN, 0)]);
    }
    // Host 1's learning frame, flooded to 2 and 3, is seen by both sniffers.
    wait_for(|| sniffers.iter().all(|s| s.count(true, LEARN).0 == 1));
    wait_for(|| common::fdb(ctl.as_ref()).len() == 3);
    assert_eq!(common::fdb(ctl.as_ref()).len(), 3, "hosts learned: {:?}", common::fdb(ctl.as_ref()));
    let before = stats(ctl.as_ref());
    let padded_before = |i: usize| port(&before, star.hub_dev(i)).tx_padded;
    assert_eq!((padded_before(2), padded_before(3)), (0, 0), "nothing short crossed yet");

    // Learned unicast to host 2, then broadcast to hosts 2 and 3: N frames
    // of every length each.
    for dst in [mac2, BROADCAST] {
        let frames = LENS.iter().flat_map(|&len| (0..N).map(move |seq| frame(dst, mac1, len, seq))).collect();
        send(&star, 1, frames);
    }
    let n = u32::from(N);
    let want = |host: usize, broadcast: bool| if host == 2 || broadcast { n } else { 0 };
    wait_for(|| {
        sniffers.iter().zip([2, 3]).all(|(s, h)| {
            LENS.iter().all(|&l| [false, true].iter().all(|&b| s.count(b, l).0 + s.count(b, l).1 >= want(h, b)))
        })
    });
    std::thread::sleep(Duration::from_millis(100));
    for (s, host) in sniffers.iter().zip([2, 3]) {
        for broadcast in [false, true] {
            for len in LENS {
                let (good, bad) = s.count(broadcast, len);
                let what = if broadcast { "broadcast" } else { "unicast" };
                println!("{kind:?}: host {host}: {what} of {len} bytes: {good} arrived as they must, {bad} did not");
                assert_eq!(bad, 0, "{kind:?}: host {host}: {what} frames of {len} bytes not padded or not intact");
                assert_eq!(good, want(host, broadcast), "{kind:?}: host {host}: {what} frames of {len} bytes");
            }
        }
    }

    // Every short frame is counted once per port it went out of.
    let short = u64::from(N) * SHORT as u64;
    let dev1 = star.hub_dev(1).to_string();
    let sent = 2 * u64::from(N) * LENS.len() as u64 + 1;
    let s = stats_when(ctl.as_ref(), |s| port(s, &dev1).received >= sent);
    let padded = |i: usize| port(&s, star.hub_dev(i)).tx_padded;
    let p1 = port(&s, &dev1);
    println!(
        "{kind:?}: tx_padded port 2 {}, port 3 {}; port 1 received {}, fast_fwd {}, forwarded {}, flooded {}",
        padded(2),
        padded(3),
        p1.received,
        p1.fast_forwarded,
        p1.forwarded,
        p1.flooded
    );
    assert_eq!((padded(1), padded(2), padded(3)), (0, 2 * short, short), "{kind:?}: tx_padded per port");
    assert_eq!(p1.received, sent, "{p1:?}");
    // The fast path never forwards a short frame: at most the long unicast ones.
    assert!(p1.fast_forwarded <= u64::from(N) * (LENS.len() - SHORT) as u64, "{p1:?}");
    assert_conserved(&s);
    drop(sniffers);
    let end = bridge.stop();
    assert_conserved(&end);
}

#[test]
fn afxdp_ports_pad_short_frames_to_60_bytes() {
    padding(PortKind::Afxdp, "pdx");
}

#[test]
fn afpacket_ports_pad_short_frames_to_60_bytes() {
    padding(PortKind::Afpacket, "pdp");
}
