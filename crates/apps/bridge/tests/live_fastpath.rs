//! The kernel fast path (XDP, `--fast-path auto` on AF_XDP ports) between
//! real hosts: learned unicast leaves the program without a worker (its
//! counters say so), the table and its kernel copy agree, a MAC that moves
//! to another host is followed within a publish interval plus a second,
//! aging removes an idle entry from both while traffic that only the fast
//! path sees keeps its own, an egress whose peer cannot take redirected
//! frames is served by the workers (and the bridge says how to fix it),
//! and the counters add up: received = fast-forwarded + forwarded +
//! flooded + dropped. Root only; prints "skipped: <reason>" otherwise.

mod common;

use common::{assert_conserved, fdb, host_ethtool, ping, raw_frames, start, stats, udp_flow_to, FramesFrom};
use flowsteer_bridge::{Bridge, PortKind};
use flowsteer_netns::Star;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Turns GRO on on host i's veth: a veth takes frames an XDP program
/// redirects into it only while its peer (here the host's end) has GRO on
/// or an XDP program.
fn gro_on(star: &Star, i: usize) {
    host_ethtool(star, i, &["gro", "on"]);
}

/// The frames port `name` forwarded in the kernel so far.
fn fast(bridge: &Bridge, name: &str) -> u64 {
    bridge.stats().ports.iter().filter(|p| p.name == name).map(|p| p.fast_forwarded).sum()
}

/// True when the kernel copy of the table has the same (MAC, VLAN, port)
/// rows as the table, within `wait`.
fn mirrors_agree(bridge: &Bridge, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        let mut table: Vec<(String, u16, String)> =
            fdb(bridge.control().as_ref()).into_iter().map(|r| (r.mac, r.vlan, r.port)).collect();
        let mut kernel: Vec<(String, u16, String)> =
            bridge.fast_path_fdb().expect("a fast path").into_iter().map(|(m, v, p)| (m.to_string(), v, p)).collect();
        table.sort();
        kernel.sort();
        if table == kernel {
            return true;
        }
        if Instant::now() >= deadline {
            println!("table {table:?}\nkernel {kernel:?}");
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn prepared(tag: &str) -> Option<Star> {
    if common::skip_without_ethtool() {
        return None;
    }
    let star = Star::new(tag, 3).unwrap();
    for i in 1..=3 {
        gro_on(&star, i);
    }
    Some(star)
}

/// Learned unicast between real hosts goes through the kernel; the table
/// and its kernel copy agree; a MAC move is followed at once.
#[test]
fn learned_unicast_leaves_in_the_kernel_and_moves_are_followed() {
    let _one = common::one_at_a_time();
    let Some(star) = prepared("fpu") else { return };
    let bridge = start(&star, PortKind::Afxdp, 3, |_| {});
    let ctl = bridge.control();
    for p in &stats(ctl.as_ref()).ports {
        assert_eq!(p.fast_path, "xdp", "{p:?}");
    }
    for (a, b) in [(1, 2), (2, 1), (1, 3), (3, 1)] {
        assert!(ping(&star, a, b), "ping {a} -> {b}");
    }
    assert!(mirrors_agree(&bridge, Duration::from_millis(100)), "the kernel copy differs from the table");

    // 10,000 datagrams 3 -> 1 with full checksums (checksum offload off on
    // host 3) and 10,000 1 -> 2 with the host's default checksum offload
    // (partial checksums, which the program completes): all arrive, in
    // order, accepted by the receivers' kernels; both go through the kernel.
    let (p1, p3) = (star.hub_dev(1).to_string(), star.hub_dev(3).to_string());
    host_ethtool(&star, 3, &["tx", "off"]);
    let before = fast(&bridge, &p3);
    let to1 = IpAddr::V4(star.v4(1));
    let got = udp_flow_to(&star, 3, 1, to1, 43_001, 10_000, 20_000, 200).wait();
    got.assert_complete_with(10_000, "3 -> 1, full checksums", ctl.as_ref());
    let through_kernel = fast(&bridge, &p3) - before;
    assert!(through_kernel >= 9_900, "only {through_kernel} of 10,000 went through the kernel");
    let to2 = IpAddr::V4(star.v4(2));
    let before = fast(&bridge, &p1);
    udp_flow_to(&star, 1, 2, to2, 43_002, 10_000, 20_000, 200).wait().assert_complete_with(
        10_000,
        "1 -> 2, partial checksums",
        ctl.as_ref(),
    );
    let through_kernel = fast(&bridge, &p1) - before;
    assert!(
        through_kernel >= 9_900,
        "only {through_kernel} of 10,000 partial-checksum datagrams went through the kernel"
    );

    // Host 2's MAC shows up behind host 3's port: frames to it follow
    // within a publish interval plus a second.
    let (mac1, mac2) = (star.mac(1), star.mac(2));
    raw_frames(&star, 3, [0xff; 6], 1, 1_000, move |_| mac2).join().unwrap().unwrap();
    let moved = Instant::now();
    loop {
        let rows = fdb(ctl.as_ref());
        if rows.iter().any(|r| r.mac == star.mac_text(2) && r.port == p3) {
            break;
        }
        assert!(moved.elapsed() < Duration::from_secs(10), "the move was not learned: {rows:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(mirrors_agree(&bridge, Duration::from_secs(5)), "the kernel copy missed the move");
    // Host 1's test frames only (the kernel's own neighbour discovery
    // floods to every host at times of its choosing).
    let to2 = FramesFrom::start(&star, 2, mac1, Some(0x88b5));
    let to3 = FramesFrom::start(&star, 3, mac1, Some(0x88b5));
    raw_frames(&star, 1, mac2, 200, 10_000, move |_| mac1).join().unwrap().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while to3.count() < 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(to2.stop(Duration::from_millis(200)), 0, "frames to the moved MAC still reached its old host");
    assert_eq!(to3.stop(Duration::ZERO), 200, "frames to the moved MAC did not all reach its new host");

    let end = bridge.stop();
    assert_conserved(&end);
}

/// Aging removes an idle station from the table and from its kernel copy;
/// a station whose frames only the fast path sees stays.
#[test]
fn aging_sees_the_fast_paths_traffic() {
    let _one = common::one_at_a_time();
    let Some(star) = prepared("fpa") else { return };
    let bridge = start(&star, PortKind::Afxdp, 3, |c| c.ageing_s = 2);
    let ctl = bridge.control();
    // One broadcast frame from each host teaches the table; no IP at all
    // (a ping would have its host's kernel probe ARP seconds later).
    for i in 1..=3 {
        let mac = star.mac(i);
        raw_frames(&star, i, [0xff; 6], 1, 1_000, move |_| mac).join().unwrap().unwrap();
    }
    let (mac1, mac2) = (star.mac(1), star.mac(2));
    // Hosts 1 and 2 send to each other for 6 s, through the kernel only
    // (each source is learned on its port, each destination known); host
    // 3 says nothing after its ping.
    let (p1, p2) = (star.hub_dev(1).to_string(), star.hub_dev(2).to_string());
    let before = fast(&bridge, &p1) + fast(&bridge, &p2);
    let talk = [
        raw_frames(&star, 1, mac2, 6_000, 1_000, move |_| mac1),
        raw_frames(&star, 2, mac1, 6_000, 1_000, move |_| mac2),
    ];
    std::thread::sleep(Duration::from_secs(5));
    let rows = fdb(ctl.as_ref());
    for i in [1, 2] {
        assert!(rows.iter().any(|r| r.mac == star.mac_text(i)), "host {i} aged out while it talked: {rows:?}");
    }
    assert!(!rows.iter().any(|r| r.mac == star.mac_text(3)), "host 3 did not age out: {rows:?}");
    assert!(mirrors_agree(&bridge, Duration::from_millis(100)), "aging left the kernel copy behind");
    for t in talk {
        t.join().unwrap().unwrap();
    }
    let through = fast(&bridge, &p1) + fast(&bridge, &p2) - before;
    assert!(through >= 11_000, "only {through} of 12,000 frames went through the kernel");
    let end = bridge.stop();
    assert_conserved(&end);
}

/// An egress whose peer has neither GRO nor an XDP program would drop
/// every redirected frame: the bridge says so and the workers serve it.
#[test]
fn an_egress_that_cannot_take_redirects_is_served_by_the_workers() {
    let _one = common::one_at_a_time();
    let Some(star) = prepared("fpg") else { return };
    host_ethtool(&star, 2, &["gro", "off"]);
    let bridge = start(&star, PortKind::Afxdp, 3, |_| {});
    let p2 = star.hub_dev(2).to_string();
    assert!(
        bridge.warnings().iter().any(|w| w.contains(&p2) && w.contains("gro on")),
        "no warning: {:?}",
        bridge.warnings()
    );
    let ctl = bridge.control();
    assert!(ping(&star, 1, 2) && ping(&star, 2, 1));
    host_ethtool(&star, 1, &["tx", "off"]);
    let to2 = IpAddr::V4(star.v4(2));
    udp_flow_to(&star, 1, 2, to2, 43_003, 5_000, 20_000, 200).wait().assert_complete_with(
        5_000,
        "1 -> 2",
        ctl.as_ref(),
    );
    // GRO on at run time: within a second the kernel takes over.
    gro_on(&star, 2);
    std::thread::sleep(Duration::from_millis(1_500));
    let p1 = star.hub_dev(1).to_string();
    let before = fast(&bridge, &p1);
    udp_flow_to(&star, 1, 2, to2, 43_004, 5_000, 20_000, 200).wait().assert_complete_with(
        5_000,
        "1 -> 2 after gro on",
        ctl.as_ref(),
    );
    assert!(fast(&bridge, &p1) - before >= 4_900, "the kernel did not take over");
    let end = bridge.stop();
    assert_conserved(&end);
}

/// TCP between hosts with default offloads, through the kernel: 100 MB
/// each way, byte-exact, over IPv4 and IPv6, nearly every data frame
/// forwarded by the program (its partial checksum completed there).
#[test]
fn tcp_with_default_offloads_goes_through_the_kernel() {
    let _one = common::one_at_a_time();
    if common::skip_without_ethtool() {
        return;
    }
    let star = Star::with_ipv6("fpt", 2).unwrap();
    for i in 1..=2 {
        gro_on(&star, i);
    }
    let bridge = start(&star, PortKind::Afxdp, 2, |_| {});
    assert!(ping(&star, 1, 2) && ping(&star, 2, 1));
    let (p1, p2) = (star.hub_dev(1).to_string(), star.hub_dev(2).to_string());
    let before = fast(&bridge, &p1) + fast(&bridge, &p2);
    let received_before: u64 = bridge.stats().ports.iter().map(|p| p.received).sum();
    for v6 in [false, true] {
        let addr = |h: usize| if v6 { IpAddr::V6(star.v6(h)) } else { IpAddr::V4(star.v4(h)) };
        let limit = Duration::from_secs(60);
        let there = common::tcp_transfer(&star, 1, 2, addr(2), 44_001, 100_000_000, limit);
        let back = common::tcp_transfer(&star, 2, 1, addr(1), 44_002, 100_000_000, limit);
        for (what, t) in [("1 -> 2", there), ("2 -> 1", back)] {
            let t = t.join().unwrap();
            assert_eq!(t.received, t.sent, "tcp {what} v6={v6}: bytes and digest");
        }
    }
    let s = bridge.stats();
    let kernel = fast(&bridge, &p1) + fast(&bridge, &p2) - before;
    let all = s.ports.iter().map(|p| p.received).sum::<u64>() - received_before;
    assert!(kernel * 100 >= all * 99, "only {kernel} of {all} frames went through the kernel");
    let end = bridge.stop();
    assert_conserved(&end);
}
