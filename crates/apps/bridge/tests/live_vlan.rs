//! VLAN filtering between real hosts: hosts 1 and 2 in VLAN 10 (their
//! ports' PVID; host 2's port also takes VLAN 10 tagged), host 3 in VLAN
//! 20. 1 and 2 reach each other; 1 does not reach 3; frames host 2 tags
//! with VLAN 10 reach host 1 untagged; frames host 3 tags with VLAN 10 are
//! dropped at its port and counted `vlan`. Tagged frames are written by
//! hand (AF_PACKET in the host, tag offload off on the veths so the tag is
//! in the frame), which needs no VLAN subinterface (`8021q`). Root only;
//! prints "skipped: <reason>" otherwise.

mod common;

use common::{assert_conserved, ping, port, raw_frames_tagged, sh, start, udp_sequence, FramesFrom};
use flowsteer_bridge::{PortKind, PortVlans};
use flowsteer_netns::Star;
use std::time::Duration;

fn vlans(kind: PortKind, tag: &str) {
    let _one = common::one_at_a_time();
    if common::skip_without_ethtool() {
        return;
    }
    let star = Star::new(tag, 3).unwrap();
    for i in [2, 3] {
        let host_dev = star.host_dev(i);
        sh(&["ip", "netns", "exec", star.host_ns(i), "ethtool", "-K", &host_dev, "rxvlan", "off", "txvlan", "off"]);
        sh(&["ip", "netns", "exec", star.hub_ns(), "ethtool", "-K", star.hub_dev(i), "rxvlan", "off", "txvlan", "off"]);
    }
    let (d1, d2, d3) = (star.hub_dev(1).to_string(), star.hub_dev(2).to_string(), star.hub_dev(3).to_string());
    let bridge = start(&star, kind, 3, |c| {
        c.vlan_filtering = true;
        c.port_vlans.insert(d1.clone(), PortVlans::parse(":pvid=10").unwrap());
        c.port_vlans.insert(d2.clone(), PortVlans::parse("10:pvid=10").unwrap());
        c.port_vlans.insert(d3.clone(), PortVlans::parse(":pvid=20").unwrap());
    });
    let ctl = bridge.control();

    assert!(ping(&star, 1, 2) && ping(&star, 2, 1), "1 <-> 2 in VLAN 10");
    udp_sequence(&star, 1, 2, 2_000, 10_000).assert_complete_with(2_000, "1 -> 2", ctl.as_ref());

    let from1 = FramesFrom::start(&star, 3, star.mac(1), None);
    let to3 = star.v4(3).into();
    let reached = star.run_in(1, move || flowsteer_netns::ping(to3, Duration::from_secs(1))).unwrap().unwrap();
    assert!(!reached, "1 reached 3 across VLANs");
    assert_eq!(from1.stop(Duration::from_millis(100)), 0, "host 3 saw host 1's frames (VLAN 10 leaked into 20)");

    // Tagged VLAN 10 from host 2: to host 1 untagged.
    let mac2 = star.mac(2);
    let from2 = FramesFrom::start(&star, 1, mac2, Some(0x88b5));
    let tagged = raw_frames_tagged(&star, 2, star.mac(1), Some(10), 50, 10_000, move |_| mac2);
    assert_eq!(tagged.join().unwrap().unwrap(), 50);
    for _ in 0..500 {
        if from2.count() >= 50 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(from2.stop(Duration::from_millis(100)), 50, "host 2's tagged frames to host 1");

    // Tagged VLAN 10 from host 3, whose port has only VLAN 20: dropped there.
    let s0 = common::stats(ctl.as_ref());
    let from3 = FramesFrom::start(&star, 1, star.mac(3), None);
    let mac3 = star.mac(3);
    let tagged = raw_frames_tagged(&star, 3, star.mac(1), Some(10), 50, 10_000, move |_| mac3);
    assert_eq!(tagged.join().unwrap().unwrap(), 50);
    let before = port(&s0, &d3).dropped.get("vlan").copied().unwrap_or(0);
    let mut s = common::stats(ctl.as_ref());
    for _ in 0..200 {
        if port(&s, &d3).received >= port(&s0, &d3).received + 50 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        s = common::stats(ctl.as_ref());
    }
    assert_eq!(port(&s, &d3).dropped.get("vlan").copied().unwrap_or(0) - before, 50, "{:?}", port(&s, &d3));
    assert_eq!(from3.stop(Duration::from_millis(100)), 0, "host 1 got frames tagged into VLAN 10 on host 3's port");
    assert_conserved(&s);
    assert_conserved(&bridge.stop());
}

#[test]
fn afxdp_vlan_filtering() {
    vlans(PortKind::Afxdp, "vx");
}

#[test]
fn afpacket_vlan_filtering() {
    vlans(PortKind::Afpacket, "vp");
}
