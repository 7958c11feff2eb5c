//! The bridge between real kernel hosts: a star of namespaces, the bridge
//! running in the hub over the hub-side veths, for AF_XDP and AF_PACKET
//! ports. Root only; prints "skipped: <reason>" otherwise.

mod common;

use common::{assert_conserved, fdb, ping, start, udp_sequence};
use flowsteer_bridge::{PortKind, Request, Response};
use flowsteer_netns::{skip_reason, Star};
use std::time::{Duration, Instant};

fn three_hosts(kind: PortKind, tag: &str) {
    let _one = common::one_at_a_time();
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let star = Star::new(tag, 3).unwrap();
    let bridge = start(&star, kind, 3, |_| {});

    // Every pair reaches the other (ARP is flooded, replies are unicast).
    for (a, b) in [(1, 2), (1, 3), (2, 3), (2, 1), (3, 1), (3, 2)] {
        assert!(ping(&star, a, b), "ping {a} -> {b}");
    }

    // The table knows each host on its own port (the writer thread learns
    // what the workers hand it: on a loaded machine, a little later).
    let deadline = Instant::now() + Duration::from_secs(10);
    let rows = loop {
        let rows = fdb(bridge.control().as_ref());
        let all = (1..=3).all(|i| rows.iter().any(|r| r.mac == star.mac_text(i)));
        if all || Instant::now() > deadline {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for i in 1..=3 {
        let row = rows.iter().find(|r| r.mac == star.mac_text(i)).unwrap_or_else(|| panic!("host {i}: {rows:?}"));
        assert_eq!(row.port, star.hub_dev(i), "{rows:?}");
        assert!(!row.is_static);
    }
    let mut sorted = rows.clone();
    sorted.sort_by(|a, b| (&a.port, a.vlan, &a.mac).cmp(&(&b.port, b.vlan, &b.mac)));
    assert_eq!(rows, sorted);

    // Learned unicast between 1 and 2 does not reach 3; 10,000 datagrams
    // arrive complete and in order.
    let before = star.rx_packets(3).unwrap();
    let got = udp_sequence(&star, 1, 2, 10_000, 20_000);
    let after = star.rx_packets(3).unwrap();
    got.assert_complete_with(10_000, "1 -> 2", bridge.control().as_ref());
    assert!(after - before <= 20, "host 3 saw {} frames of a unicast stream", after - before);

    let live = bridge.stats();
    assert_conserved(&live);
    let p1 = live.ports.iter().find(|p| p.name == star.hub_dev(1)).unwrap();
    assert!(p1.forwarded >= 10_000, "{p1:?}");
    let p2 = live.ports.iter().find(|p| p.name == star.hub_dev(2)).unwrap();
    assert!(p2.transmitted >= 10_000, "{p2:?}");

    let end = bridge.stop();
    assert_conserved(&end);
    assert!(end.fdb.learned >= 3, "{:?}", end.fdb);
    // Nothing stays attached.
    for i in 1..=3 {
        let dev = star.hub_dev(i).to_string();
        let out =
            std::process::Command::new("ip").args(["-n", star.hub_ns(), "link", "show", "dev", &dev]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("xdp"), "{text}");
    }
}

#[test]
fn afxdp_three_hosts_ping_stream_isolation_counters() {
    three_hosts(PortKind::Afxdp, "bx");
}

#[test]
fn afpacket_three_hosts_ping_stream_isolation_counters() {
    three_hosts(PortKind::Afpacket, "bp");
}

#[test]
fn learned_entries_age_out_and_control_refuses_bad_input() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let star = Star::new("ba", 2).unwrap();
    let bridge = start(&star, PortKind::Afpacket, 2, |c| c.ageing_s = 2);
    assert!(ping(&star, 1, 2));
    std::thread::sleep(Duration::from_millis(50));
    assert!(fdb(bridge.control().as_ref()).iter().any(|r| r.mac == star.mac_text(1)));
    let ctl = bridge.control();
    let add = Request::FdbAdd {
        mac: "02:00:00:00:00:99".into(),
        vlan: 0,
        iface: star.hub_dev(2).into(),
        kind: "static".into(),
    };
    assert!(matches!(ctl.request(add), Response::Ok { .. }));
    for bad in [
        Request::FdbAdd { mac: "nonsense".into(), vlan: 0, iface: star.hub_dev(1).into(), kind: "static".into() },
        Request::FdbAdd {
            mac: "01:80:c2:00:00:00".into(),
            vlan: 0,
            iface: star.hub_dev(1).into(),
            kind: "static".into(),
        },
        Request::FdbAdd { mac: "02:00:00:00:00:01".into(), vlan: 0, iface: "nosuch0".into(), kind: "static".into() },
        Request::FdbDel { mac: "02:00:00:00:00:42".into(), vlan: 0 },
        Request::PortDel { iface: "nosuch0".into() },
    ] {
        assert!(matches!(ctl.request(bad.clone()), Response::Error { .. }), "{bad:?}");
    }
    // No traffic for longer than the ageing time: the learned entries go,
    // the static one stays.
    let deadline = Instant::now() + Duration::from_secs(6);
    loop {
        let rows = fdb(bridge.control().as_ref());
        if !rows.iter().any(|r| !r.is_static) {
            assert!(rows.iter().any(|r| r.is_static && r.mac == "02:00:00:00:00:99"), "{rows:?}");
            break;
        }
        assert!(Instant::now() < deadline, "not aged: {rows:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let s = bridge.stop();
    assert!(s.fdb.aged >= 2, "{:?}", s.fdb);
    assert_conserved(&s);
}
