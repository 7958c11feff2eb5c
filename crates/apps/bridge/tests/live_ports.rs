//! A member port removed and added back through the control API, several
//! times, while hosts 1 and 2 exchange sequenced UDP flows and host 3 keeps
//! sending frames from new source MACs: the flows between 1 and 2 lose and
//! reorder nothing; after each removal the port has no entry in the table
//! and (AF_XDP) no XDP program; after each addition host 3 is reachable;
//! the counters add up. Root only; prints "skipped: <reason>" otherwise.

mod common;

use common::{assert_conserved, fdb, ok, ping, random_mac, raw_frames, start, udp_flow, xdp_attached};
use flowsteer_bridge::{PortKind, PortSpec, Request};
use flowsteer_netns::Star;

const FLOW: u32 = 20_000;
const FLOW_RATE: u32 = 5_000;
const ROUNDS: usize = 4;

fn churn(kind: PortKind, tag: &str) {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let star = Star::new(tag, 3).unwrap();
    let bridge = start(&star, kind, 3, |_| {});
    let ctl = bridge.control();
    for (a, b) in [(1, 2), (2, 1), (3, 1)] {
        assert!(ping(&star, a, b), "ping {a} -> {b}");
    }
    let flows = [udp_flow(&star, 1, 2, 40_001, FLOW, FLOW_RATE), udp_flow(&star, 2, 1, 40_002, FLOW, FLOW_RATE)];
    // New sources from host 3 all along: learning events for its port are
    // in flight whenever it is removed.
    let noise = raw_frames(&star, 3, [0x02, 0xee, 0, 0, 0, 3], 30_000, 8_000, |i| random_mac(3, i));

    let dev3 = star.hub_dev(3).to_string();
    for round in 0..ROUNDS {
        ok(ctl.as_ref(), Request::PortDel { iface: dev3.clone() });
        let rows = fdb(ctl.as_ref());
        assert!(!rows.iter().any(|r| r.port == dev3), "round {round}: entries of the removed port: {rows:?}");
        if kind == PortKind::Afxdp {
            assert!(!xdp_attached(&star, 3), "round {round}: XDP program left on the removed port");
        }
        ok(ctl.as_ref(), Request::PortAdd { port: PortSpec { kind, iface: dev3.clone() } });
        assert!(ping(&star, 3, 1), "round {round}: host 3 unreachable after the port came back");
    }

    assert_eq!(noise.join().unwrap().unwrap(), 30_000);
    for (f, what) in flows.into_iter().zip(["1 -> 2", "2 -> 1"]) {
        f.wait().assert_complete_with(FLOW, what, ctl.as_ref());
    }
    let s = common::stats(ctl.as_ref());
    assert_conserved(&s);
    let rows3: Vec<_> = s.ports.iter().filter(|p| p.name == dev3).collect();
    assert_eq!(rows3.len(), ROUNDS + 1, "{rows3:?}");
    assert!(rows3[0].member && rows3[1..].iter().all(|p| !p.member), "{rows3:?}");
    let end = bridge.stop();
    assert_conserved(&end);
    for i in 1..=3 {
        assert!(!xdp_attached(&star, i), "XDP program left on port {i}");
    }
}

#[test]
fn afxdp_port_removed_and_added_back_under_traffic() {
    churn(PortKind::Afxdp, "cx");
}

#[test]
fn afpacket_port_removed_and_added_back_under_traffic() {
    churn(PortKind::Afpacket, "cp");
}
