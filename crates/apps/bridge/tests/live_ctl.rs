//! The control socket and the metrics endpoint of a real bridge: after
//! traffic, the counters through the socket are what a scrape of /metrics
//! says, figure for figure, and `fdb show` through the socket lists each
//! host on its own port. Root only; prints "skipped: <reason>" otherwise.

mod common;

use common::{assert_conserved, expected, key, ping, samples, start, udp_sequence};
use flowsteer_bridge::api::BridgeStats;
use flowsteer_bridge::{ctl, metrics, PortKind, Request, Response};
use flowsteer_netns::Star;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

fn ctl_stats(path: &Path) -> BridgeStats {
    match ctl::request(path, &Request::Stats).unwrap() {
        Response::Stats { stats } => BridgeStats { uptime_s: 0.0, ..*stats },
        other => panic!("{other:?}"),
    }
}

fn scrape(addr: SocketAddr) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    body.to_string()
}

fn socket_and_scrape_agree(kind: PortKind, tag: &str) {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let star = Star::new(tag, 3).unwrap();
    let bridge = start(&star, kind, 3, |_| {});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.sock");
    let _ctl = ctl::serve(&path, bridge.control()).unwrap();
    let m = metrics::serve("127.0.0.1:0".parse().unwrap(), bridge.control()).unwrap();

    for (a, b) in [(1, 2), (2, 3), (3, 1)] {
        assert!(ping(&star, a, b), "ping {a} -> {b}");
    }
    udp_sequence(&star, 1, 2, 3_000, 10_000).assert_complete_with(3_000, "1 -> 2", bridge.control().as_ref());

    // Traffic has stopped; the counters settle (the kernel's drop counts
    // are copied now and then): take a scrape between two equal answers.
    let (s, text) = loop {
        let a = ctl_stats(&path);
        let text = scrape(m.local_addr());
        if ctl_stats(&path) == a {
            break (a, text);
        }
    };
    assert_conserved(&s);
    let mut got = samples(&common::parse(&text));
    let mut want = expected(&s);
    for m in [&mut got, &mut want] {
        m.remove(&key("uptime_seconds", &[]));
    }
    assert_eq!(got, want, "\n{text}");
    assert!(s.ports.iter().map(|p| p.received).sum::<u64>() >= 3_000);

    let Response::Fdb { entries } = ctl::request(&path, &Request::FdbShow).unwrap() else { panic!("not an fdb") };
    for i in 1..=3 {
        let row = entries.iter().find(|r| r.mac == star.mac_text(i)).unwrap_or_else(|| panic!("host {i}: {entries:?}"));
        assert_eq!(row.port, star.hub_dev(i));
    }
    drop(m);
    assert_conserved(&bridge.stop());
}

#[test]
fn afxdp_control_socket_and_metrics_agree() {
    socket_and_scrape_agree(PortKind::Afxdp, "mx");
}

#[test]
fn afpacket_control_socket_and_metrics_agree() {
    socket_and_scrape_agree(PortKind::Afpacket, "mp");
}
