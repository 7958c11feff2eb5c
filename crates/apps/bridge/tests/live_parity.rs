//! The Linux bridge's rules, shown by frames counted at four real hosts:
//! ingress rules (group and zero sources, priority tags, a foreign TPID),
//! per-port flags (learning, flood, mcast_flood, bcast_flood, isolated),
//! port states, carrier loss, run-time VLANs and FDB entry types. Each
//! rule on both port kinds, and on AF_XDP with the kernel fast path on and
//! off.
//!
//! Frames are written by hand (AF_PACKET in a host: this kernel has no
//! 802.1Q module and no `flower` classifier) with ethertype 0x88b5, a
//! marker and a case number; a sniffer (an AF_PACKET ring) in every host
//! counts, per case, the marked frames that arrived and the tags they
//! carried, so every host's expected count is checked, zero included.
//! Root only; prints "skipped: <reason>" otherwise.

mod common;

use common::{assert_conserved, fdb, host_ethtool, ok, port, start, stats, stats_when, Sniffer};
use flowsteer_afpacket::TxSocket;
use flowsteer_bridge::{Bridge, Control, FastPath, PortKind, Request, Response};
use flowsteer_netns::Star;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HOSTS: usize = 4;
/// Frames per case.
const N: u32 = 20;
const MARKER: &[u8; 4] = b"FSPT";
const ETHERTYPE: u16 = 0x88b5;
const BROADCAST: [u8; 6] = [0xff; 6];
const MULTICAST: [u8; 6] = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x42];
const UNKNOWN: [u8; 6] = [0x02, 0xee, 0xee, 0xee, 0xee, 0x01];

/// A tag as it sits in a frame: TPID and TCI.
type Tag = (u16, u16);

/// What a host's sniffer saw of each case: the tags of every marked frame.
type Seen = Arc<Mutex<BTreeMap<u32, Vec<Vec<Tag>>>>>;

/// The marked frames one host received, by case.
struct MarkSniffer {
    seen: Seen,
    _sniffer: Sniffer,
}

/// The tags and case of a marked frame, or `None`.
fn marked(frame: &[u8]) -> Option<(u32, Vec<Tag>)> {
    let mut at = 12;
    let mut tags = Vec::new();
    loop {
        let et = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        if et == 0x8100 || et == 0x88a8 {
            tags.push((et, u16::from_be_bytes([*frame.get(at + 2)?, *frame.get(at + 3)?])));
            at += 4;
            continue;
        }
        if et != ETHERTYPE || frame.get(at + 2..at + 6)? != MARKER {
            return None;
        }
        let case = u32::from_be_bytes(frame.get(at + 6..at + 10)?.try_into().ok()?);
        return Some((case, tags));
    }
}

/// A sniffer on host `i`'s veth: every marked frame it receives (not the
/// ones it sends), with its tags as they were on the wire (the kernel's
/// receive path takes the outer tag out; it is put back in front).
fn sniff(star: &Star, i: usize) -> MarkSniffer {
    let seen: Seen = Arc::default();
    let se = seen.clone();
    let sniffer = Sniffer::start(star, i, move |f, meta| {
        if f.len() < 12 {
            return;
        }
        let mut frame = f[..12].to_vec();
        if let Some(tag) = meta.vlan {
            let tpid = if tag.tpid == 0 { 0x8100 } else { tag.tpid };
            frame.extend_from_slice(&tpid.to_be_bytes());
            frame.extend_from_slice(&tag.tci.to_be_bytes());
        }
        frame.extend_from_slice(&f[12..]);
        if let Some((case, tags)) = marked(&frame) {
            se.lock().unwrap().entry(case).or_default().push(tags);
        }
    });
    MarkSniffer { seen, _sniffer: sniffer }
}

/// `N` marked frames of `case` from host `from`: `dst`, source `src`,
/// the tags in order (outermost first).
fn send(star: &Star, from: usize, case: u32, dst: [u8; 6], src: [u8; 6], tags: &[Tag]) {
    let dev = star.host_dev(from);
    let tags = tags.to_vec();
    star.run_in(from, move || {
        let mut tx = TxSocket::open(&dev, &Default::default()).unwrap();
        let frames: Vec<Vec<u8>> = (0..N)
            .map(|seq| {
                let mut f = Vec::with_capacity(64);
                f.extend_from_slice(&dst);
                f.extend_from_slice(&src);
                for (tpid, tci) in &tags {
                    f.extend_from_slice(&tpid.to_be_bytes());
                    f.extend_from_slice(&tci.to_be_bytes());
                }
                f.extend_from_slice(&ETHERTYPE.to_be_bytes());
                f.extend_from_slice(MARKER);
                f.extend_from_slice(&case.to_be_bytes());
                f.extend_from_slice(&seq.to_be_bytes());
                f.resize(f.len().max(60), 0);
                f
            })
            .collect();
        let mut sent = 0;
        while sent < frames.len() {
            sent += tx.send_batch(&frames[sent..]);
        }
    })
    .unwrap();
}

struct Lab {
    star: Star,
    sniffers: Vec<MarkSniffer>,
    bridge: Option<Bridge>,
    ctl: Arc<dyn Control>,
    what: String,
}

impl Lab {
    fn dev(&self, i: usize) -> String {
        self.star.hub_dev(i).to_string()
    }

    fn mac(&self, i: usize) -> [u8; 6] {
        self.star.mac(i)
    }

    /// Sends case `case` from host `from` and checks what each host got:
    /// `want[i - 1]` frames at host i (the sender's own count is ignored),
    /// and, when given, the tags each arrived with.
    fn expect(&self, case: u32, from: usize, dst: [u8; 6], src: [u8; 6], tags: &[Tag], want: [u32; HOSTS]) {
        self.expect_tags(case, from, dst, src, tags, &want, None);
    }

    #[allow(clippy::too_many_arguments)]
    fn expect_tags(
        &self,
        case: u32,
        from: usize,
        dst: [u8; 6],
        src: [u8; 6],
        tags: &[Tag],
        want: &[u32],
        want_tags: Option<&[(usize, Vec<Tag>)]>,
    ) {
        let before = port(&stats(self.ctl.as_ref()), &self.dev(from)).received;
        send(&self.star, from, case, dst, src, tags);
        let from_dev = self.dev(from);
        let s = stats_when(self.ctl.as_ref(), |s| port(s, &from_dev).received >= before + u64::from(N));
        assert_eq!(
            port(&s, &from_dev).received - before,
            u64::from(N),
            "{}: case {case}: the bridge's intake",
            self.what
        );
        // Let whatever was forwarded arrive (and what must not, not arrive).
        let deadline = Instant::now() + Duration::from_secs(2);
        let count = |i: usize| self.sniffers[i - 1].seen.lock().unwrap().get(&case).map_or(0, Vec::len) as u32;
        let hosts = self.sniffers.len();
        while Instant::now() < deadline && (1..=hosts).any(|i| i != from && count(i) < want[i - 1]) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        let got: Vec<u32> = (1..=hosts).map(|i| if i == from { want[i - 1] } else { count(i) }).collect();
        assert_eq!(got, want, "{}: case {case} from host {from}: frames at hosts 1..", self.what);
        for (host, tags) in want_tags.unwrap_or(&[]) {
            let seen = self.sniffers[host - 1].seen.lock().unwrap();
            let all = seen.get(&case).cloned().unwrap_or_default();
            assert!(
                all.iter().all(|t| t == tags),
                "{}: case {case} at host {host}: tags {all:?}, want {tags:?}",
                self.what
            );
        }
        assert_conserved(&stats(self.ctl.as_ref()));
    }

    fn ok(&self, req: Request) -> String {
        ok(self.ctl.as_ref(), req)
    }

    fn refused(&self, req: Request) -> String {
        match self.ctl.request(req.clone()) {
            Response::Error { message } => message,
            other => panic!("{}: {req:?} was not refused: {other:?}", self.what),
        }
    }

    fn link_set(&self, i: usize, settings: &[(&str, &str)]) {
        let settings = settings.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        self.ok(Request::LinkSet { iface: self.dev(i), settings });
    }

    fn dropped(&self, i: usize, reason: &str) -> u64 {
        port(&stats(self.ctl.as_ref()), &self.dev(i)).dropped.get(reason).copied().unwrap_or(0)
    }

    /// The port the MAC table has `mac` on (in `vlan`), if any, and its kind.
    fn fdb_port(&self, mac: [u8; 6], vlan: u16) -> Option<(String, String)> {
        let text = flowsteer_fdb::Mac(mac).to_string();
        fdb(self.ctl.as_ref()).into_iter().find(|r| r.mac == text && r.vlan == vlan).map(|r| (r.port, r.kind))
    }

    /// [`Lab::fdb_port`] once it names `port` (`None`: once the entry is
    /// gone), or as it is after 10 s. Workers hand what they learn to the
    /// table's writer thread, and a link event reaches it within a tick: on
    /// a loaded machine either lands a little after the frames were counted.
    fn fdb_port_becomes(&self, mac: [u8; 6], vlan: u16, port: Option<&str>) -> Option<(String, String)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = self.fdb_port(mac, vlan);
            if now.as_ref().map(|p| p.0.as_str()) == port || Instant::now() > deadline {
                return now;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(b) = self.bridge.take() {
            let s = b.stop();
            if !std::thread::panicking() {
                assert_conserved(&s);
            }
        }
    }
}

fn lab(kind: PortKind, fast: FastPath, tag: &str) -> Option<Lab> {
    if common::skip_without_ethtool() {
        return None;
    }
    let star = Star::new(tag, HOSTS).unwrap();
    if fast == FastPath::Xdp {
        // The fast path redirects into a veth only while its peer has GRO on.
        for i in 1..=HOSTS {
            host_ethtool(&star, i, &["gro", "on"]);
        }
    }
    let sniffers = (1..=HOSTS).map(|i| sniff(&star, i)).collect();
    let bridge = start(&star, kind, HOSTS, |c| c.fast_path = fast);
    let ctl = bridge.control();
    if fast == FastPath::Xdp {
        for p in stats(ctl.as_ref()).ports {
            assert_eq!(p.fast_path, "xdp", "{p:?}");
        }
    }
    let what = format!("{kind:?}, fast path {fast:?}");
    Some(Lab { star, sniffers, bridge: Some(bridge), ctl, what })
}

/// Every host announces itself (a broadcast from its own MAC): the table
/// learns where each is.
fn announce(l: &Lab, case: u32) {
    for i in 1..=HOSTS {
        let mut want = [N; HOSTS];
        want[i - 1] = 0;
        l.expect(case + i as u32, i, BROADCAST, l.mac(i), &[], want);
    }
    for i in 1..=HOSTS {
        assert_eq!(
            l.fdb_port_becomes(l.mac(i), 0, Some(&l.dev(i))).map(|p| p.0),
            Some(l.dev(i)),
            "{}: host {i} learned",
            l.what
        );
    }
}

fn rules(kind: PortKind, fast: FastPath, tag: &str) {
    let _one = common::one_at_a_time();
    let Some(l) = lab(kind, fast, tag) else { return };
    announce(&l, 0);
    let (m1, m2, m3, m4) = (l.mac(1), l.mac(2), l.mac(3), l.mac(4));
    let all_but = |i: usize| {
        let mut w = [N; HOSTS];
        w[i - 1] = 0;
        w
    };

    // Known unicast reaches its host alone.
    l.expect(10, 1, m2, m1, &[], [0, N, 0, 0]);

    // Sources no station has: dropped at the ingress, counted, never learned.
    let bad0 = l.dropped(1, "bad_src");
    for (case, src) in [(20, MULTICAST), (21, BROADCAST), (22, [0u8; 6])] {
        l.expect(case, 1, BROADCAST, src, &[], [0; HOSTS]);
        l.expect(case + 10, 1, m2, src, &[], [0; HOSTS]);
    }
    assert_eq!(l.dropped(1, "bad_src") - bad0, 6 * u64::from(N), "{}", l.what);

    // learning off: a new source is not learned (frames to it flood);
    // known entries still forward.
    let roamer = [0x02, 0xaa, 0, 0, 0, 0x01];
    l.link_set(1, &[("learning", "off")]);
    l.expect(40, 1, m2, roamer, &[], [0, N, 0, 0]);
    assert_eq!(l.fdb_port(roamer, 0), None, "{}: learned with learning off", l.what);
    l.expect(41, 2, roamer, m2, &[], all_but(2));
    l.link_set(1, &[("learning", "on")]);
    l.expect(42, 1, m2, roamer, &[], [0, N, 0, 0]);
    assert_eq!(l.fdb_port_becomes(roamer, 0, Some(&l.dev(1))).map(|p| p.0), Some(l.dev(1)));
    l.expect(43, 2, roamer, m2, &[], [N, 0, 0, 0]);

    // Flood flags act at egress, per kind of frame; known unicast is not flooding.
    l.link_set(3, &[("flood", "off")]);
    l.link_set(4, &[("mcast_flood", "off"), ("bcast_flood", "off")]);
    l.expect(50, 1, UNKNOWN, m1, &[], [0, N, 0, N]);
    l.expect(51, 1, MULTICAST, m1, &[], [0, N, N, 0]);
    l.expect(52, 1, BROADCAST, m1, &[], [0, N, N, 0]);
    l.expect(53, 1, m3, m1, &[], [0, 0, N, 0]);
    l.expect(54, 1, m4, m1, &[], [0, 0, 0, N]);
    l.link_set(3, &[("flood", "on")]);
    l.link_set(4, &[("mcast_flood", "on"), ("bcast_flood", "on")]);

    // Isolated ports talk only to non-isolated ones.
    l.link_set(1, &[("isolated", "on")]);
    l.link_set(2, &[("isolated", "on")]);
    let iso0 = l.dropped(1, "isolated");
    l.expect(60, 1, BROADCAST, m1, &[], [0, 0, N, N]);
    l.expect(61, 1, m2, m1, &[], [0; HOSTS]);
    assert_eq!(l.dropped(1, "isolated") - iso0, u64::from(N), "{}", l.what);
    l.expect(62, 3, m2, m3, &[], [0, N, 0, 0]);
    l.expect(63, 2, m3, m2, &[], [0, 0, N, 0]);
    l.link_set(1, &[("isolated", "off")]);
    l.link_set(2, &[("isolated", "off")]);
    l.expect(64, 1, m2, m1, &[], [0, N, 0, 0]);

    // States: blocking neither learns nor forwards (and loses its
    // dynamic entries); learning learns but forwards nothing.
    l.link_set(3, &[("state", "blocking")]);
    assert_eq!(l.fdb_port_becomes(m3, 0, None), None, "{}: blocking keeps its entries", l.what);
    let st0 = l.dropped(3, "port_state");
    l.expect(70, 3, BROADCAST, m3, &[], [0; HOSTS]);
    l.expect(71, 3, m1, m3, &[], [0; HOSTS]);
    assert_eq!(l.dropped(3, "port_state") - st0, 2 * u64::from(N), "{}", l.what);
    assert_eq!(l.fdb_port(m3, 0), None, "{}: learned while blocking", l.what);
    l.expect(72, 1, BROADCAST, m1, &[], [0, N, 0, N]);
    l.expect(73, 1, m3, m1, &[], [0, N, 0, N]);
    l.link_set(3, &[("state", "learning")]);
    l.expect(74, 3, m1, m3, &[], [0; HOSTS]);
    assert_eq!(
        l.fdb_port_becomes(m3, 0, Some(&l.dev(3))).map(|p| p.0),
        Some(l.dev(3)),
        "{}: not learned in learning",
        l.what
    );
    l.expect(75, 1, m3, m1, &[], [0; HOSTS]);
    l.link_set(3, &[("state", "forwarding")]);
    l.expect(76, 1, m3, m1, &[], [0, 0, N, 0]);
    l.expect(77, 3, m1, m3, &[], [N, 0, 0, 0]);

    // Entry types: static and sticky never move; a learned one does.
    let (st, sk) = ([0x02, 0x5a, 0, 0, 0, 1], [0x02, 0x5a, 0, 0, 0, 2]);
    let add = |mac: [u8; 6], i: usize, kind: &str| Request::FdbAdd {
        mac: flowsteer_fdb::Mac(mac).to_string(),
        vlan: 0,
        iface: l.dev(i),
        kind: kind.into(),
    };
    l.ok(add(st, 1, "static"));
    l.ok(add(sk, 1, "sticky"));
    l.expect(80, 2, m3, st, &[], [0, 0, N, 0]);
    l.expect(81, 2, m3, sk, &[], [0, 0, N, 0]);
    assert_eq!(l.fdb_port(st, 0), Some((l.dev(1), "static".into())));
    assert_eq!(l.fdb_port(sk, 0), Some((l.dev(1), "sticky".into())));
    l.expect(82, 4, st, m4, &[], [N, 0, 0, 0]);
    l.expect(83, 4, sk, m4, &[], [N, 0, 0, 0]);
    l.expect(84, 2, m3, roamer, &[], [0, 0, N, 0]);
    assert_eq!(
        l.fdb_port_becomes(roamer, 0, Some(&l.dev(2))).map(|p| p.0),
        Some(l.dev(2)),
        "{}: a learned entry moves",
        l.what
    );

    // Carrier: host 4's end goes down, the hub's port loses carrier: down
    // in stats, its learned entries flushed (the static one kept), no
    // frame sent to it; back by itself when the carrier returns.
    l.ok(add([0x02, 0x5a, 0, 0, 0, 4], 4, "static"));
    let host4 = l.star.host_dev(4);
    common::sh(&["ip", "-n", l.star.host_ns(4), "link", "set", &host4, "down"]);
    let dev4 = l.dev(4);
    let s = stats_when(l.ctl.as_ref(), |s| !port(s, &dev4).up);
    assert!(!port(&s, &dev4).up, "{}: carrier loss not seen: {:?}", l.what, port(&s, &dev4));
    assert_eq!(l.fdb_port_becomes(m4, 0, None), None, "{}: learned entry kept on a port without carrier", l.what);
    assert!(l.fdb_port([0x02, 0x5a, 0, 0, 0, 4], 0).is_some(), "{}: static entry flushed", l.what);
    let tx4 = port(&s, &dev4).transmitted;
    l.expect(90, 1, BROADCAST, m1, &[], [0, N, N, 0]);
    assert_eq!(port(&stats(l.ctl.as_ref()), &dev4).transmitted, tx4, "{}: sent to a port without carrier", l.what);
    common::sh(&["ip", "-n", l.star.host_ns(4), "link", "set", &host4, "up"]);
    let s = stats_when(l.ctl.as_ref(), |s| port(s, &dev4).up);
    assert!(port(&s, &dev4).up, "{}: carrier return not seen", l.what);
    l.expect(91, 1, BROADCAST, m1, &[], [0, N, N, N]);
}

fn vlans(kind: PortKind, fast: FastPath, tag: &str) {
    let _one = common::one_at_a_time();
    let Some(l) = lab(kind, fast, tag) else { return };
    let (m1, m2, m3) = (l.mac(1), l.mac(2), l.mac(3));
    // Kept while filtering is off, applied when it is switched on: hosts
    // 1 and 4 in VLAN 1 (the default PVID), host 2 in VLAN 1 untagged and
    // VLAN 10 tagged, host 3 in VLAN 10 alone (its PVID, untagged).
    let vlan = |i: usize, vid: u16, pvid: bool, untagged: bool| Request::VlanAdd {
        iface: l.dev(i),
        vid,
        vid_end: vid,
        pvid,
        untagged,
    };
    l.ok(vlan(2, 10, false, false));
    l.ok(vlan(3, 10, true, true));
    l.ok(Request::VlanDel { iface: l.dev(3), vid: 1, vid_end: 1 });
    // Still one learning domain: the VLANs do not apply yet.
    l.expect(100, 1, BROADCAST, m1, &[], [0, N, N, N]);
    l.ok(Request::VlanFiltering { on: true });
    if fast == FastPath::Xdp {
        let s = stats(l.ctl.as_ref());
        assert!(s.ports.iter().all(|p| p.fast_path.contains("VLAN filtering")), "{:?}", s.ports);
    }
    l.expect(101, 1, BROADCAST, m1, &[], [0, N, 0, N]);
    // A priority tag (VID 0, priority 5) is untagged: VLAN 1, out untagged.
    l.expect_tags(102, 1, BROADCAST, m1, &[(0x8100, 0xa000)], &[0, N, 0, N], Some(&[(2, vec![]), (4, vec![])]));
    // An 802.1ad tag on an 802.1Q bridge is payload: VLAN 1, kept intact.
    let s_tag = vec![(0x88a8, 10)];
    l.expect_tags(103, 1, BROADCAST, m1, &s_tag, &[0, N, 0, N], Some(&[(2, s_tag.clone()), (4, s_tag.clone())]));
    // Tagged VLAN 10 from host 2: to host 3 untagged, nowhere else.
    l.expect_tags(104, 2, BROADCAST, m2, &[(0x8100, 0x200a)], &[0, 0, N, 0], Some(&[(3, vec![])]));
    // Untagged from host 3 (PVID 10): to host 2 tagged 10, priority 0.
    l.expect_tags(105, 3, BROADCAST, m3, &[], &[0, N, 0, 0], Some(&[(2, vec![(0x8100, 10)])]));
    // Tagged VLAN 10 from host 1, not a member: dropped there.
    let v0 = l.dropped(1, "vlan");
    l.expect(106, 1, BROADCAST, m1, &[(0x8100, 10)], [0; HOSTS]);
    assert_eq!(l.dropped(1, "vlan") - v0, u64::from(N), "{}", l.what);
    // Known unicast within VLAN 10; host 3's address is unknown in VLAN
    // 1, so a frame to it from there floods VLAN 1 and never crosses.
    l.expect(107, 2, m3, m2, &[(0x8100, 10)], [0, 0, N, 0]);
    l.expect(108, 1, m3, m1, &[], [0, N, 0, N]);
    // FDB entries the ports cannot carry are refused.
    let entry = |vlan: u16, i: usize| Request::FdbAdd {
        mac: "02:5b:00:00:00:01".into(),
        vlan,
        iface: l.dev(i),
        kind: "static".into(),
    };
    let why = l.refused(entry(10, 1));
    assert!(why.contains("not a member of VLAN 10"), "{why}");
    assert!(l.refused(entry(0, 1)).contains("name the entry's VLAN"));
    l.ok(entry(10, 2));
    // Removing VLAN 10 from host 2's port: its tagged frames are dropped;
    // VLAN 1 is not disturbed.
    l.ok(Request::VlanDel { iface: l.dev(2), vid: 10, vid_end: 10 });
    assert_eq!(l.fdb_port_becomes([0x02, 0x5b, 0, 0, 0, 1], 10, None), None, "entries of a removed VLAN stay");
    l.expect(109, 2, BROADCAST, m2, &[(0x8100, 10)], [0; HOSTS]);
    l.expect(110, 2, BROADCAST, m2, &[], [N, 0, 0, N]);
    // Filtering off again: one domain, tags carried untouched.
    l.ok(Request::VlanFiltering { on: false });
    l.expect_tags(111, 2, BROADCAST, m2, &[(0x8100, 10)], &[N, 0, N, N], Some(&[(1, vec![(0x8100, 10)])]));
    assert!(l.refused(entry(10, 2)).contains("VLAN filtering is off"));
}

#[test]
fn rules_afpacket() {
    rules(PortKind::Afpacket, FastPath::Off, "prp");
}

#[test]
fn rules_afxdp() {
    rules(PortKind::Afxdp, FastPath::Off, "prx");
}

#[test]
fn rules_afxdp_fast_path() {
    rules(PortKind::Afxdp, FastPath::Xdp, "prf");
}

#[test]
fn vlans_afpacket() {
    vlans(PortKind::Afpacket, FastPath::Off, "pvp");
}

#[test]
fn vlans_afxdp() {
    vlans(PortKind::Afxdp, FastPath::Off, "pvx");
}

#[test]
fn vlans_afxdp_fast_path() {
    vlans(PortKind::Afxdp, FastPath::Auto, "pvf");
}

/// An 802.1ad bridge: S-tags are the VLAN tag, an 802.1Q tag is payload.
#[test]
fn an_8021ad_bridge_reads_s_tags() {
    let _one = common::one_at_a_time();
    if common::skip_without_ethtool() {
        return;
    }
    let star = Star::new("pad", 3).unwrap();
    let sniffers: Vec<MarkSniffer> = (1..=3).map(|i| sniff(&star, i)).collect();
    let (d1, d2) = (star.hub_dev(1).to_string(), star.hub_dev(2).to_string());
    let bridge = start(&star, PortKind::Afpacket, 3, |c| {
        c.vlan_filtering = true;
        c.vlan_protocol = flowsteer_bridge::VlanProtocol::Dot1Ad;
        c.port_vlans.insert(d1.clone(), flowsteer_bridge::PortVlans::parse("20:pvid=1").unwrap());
        c.port_vlans.insert(d2.clone(), flowsteer_bridge::PortVlans::parse("20").unwrap());
    });
    let ctl = bridge.control();
    let l = Lab { star, sniffers, bridge: Some(bridge), ctl, what: "802.1ad".into() };
    let m1 = l.mac(1);
    // S-tag 20 from host 1: to host 2 tagged (an S-tag), not to host 3 (VLAN 1 only).
    l.expect_tags(1, 1, BROADCAST, m1, &[(0x88a8, 20)], &[0, N, 0], Some(&[(2, vec![(0x88a8, 20)])]));
    // A C-tag is payload here: PVID 1, to host 3 untagged with its C-tag intact.
    l.expect_tags(2, 1, BROADCAST, m1, &[(0x8100, 20)], &[0, 0, N], Some(&[(3, vec![(0x8100, 20)])]));
}
