//! What may become a member port (`flowsteer_bridge::admit`), live, in a
//! star's hub:
//!
//! * the loopback (AF_PACKET and AF_XDP) and a tun device (no Ethernet
//!   header) are refused, at start and by `port add`, with the reason; the
//!   ports opened before the refusal are closed (their locks released);
//! * a second bridge on an AF_PACKET port another bridge serves is refused,
//!   naming the port and the other's pid, until that port leaves the first
//!   (`port del`) or the first stops; a port a second bridge took cannot be
//!   added back to the first; a lock file exists while a port is a member
//!   and is removed with it;
//! * an interface of the same name in another namespace is another port.
//!
//! Root only (skipped with a printed reason otherwise).

mod common;

use common::{ok, ping, start};
use flowsteer_bridge::admit::lock_path;
use flowsteer_bridge::{Bridge, BridgeConfig, BridgeError, PortKind, PortSpec, Request, Response};
use flowsteer_netns::Star;
use std::path::PathBuf;

fn spec(kind: PortKind, iface: &str) -> PortSpec {
    PortSpec { kind, iface: iface.to_string() }
}

/// Starts a bridge over `ports` in the hub.
fn try_start(star: &Star, ports: Vec<PortSpec>) -> Result<Bridge, BridgeError> {
    let cfg = BridgeConfig { ports, ..BridgeConfig::default() };
    star.run_in(0, move || Bridge::start(cfg)).expect("enter hub")
}

/// The refusal of a bridge that should not start: (interface, message).
fn refused(r: Result<Bridge, BridgeError>) -> (String, String) {
    match r {
        Err(BridgeError::Port { iface, message }) => (iface, message),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(b) => panic!("started: {:?}", b.stats().ports.iter().map(|p| &p.name).collect::<Vec<_>>()),
    }
}

/// The lock file of the hub's `iface`.
fn lock_of(star: &Star, iface: &str) -> PathBuf {
    let iface = iface.to_string();
    star.run_in(0, move || lock_path(&iface)).unwrap().expect("lock path")
}

fn error(r: Response) -> String {
    match r {
        Response::Error { message } => message,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn loopback_and_a_tun_device_are_refused_at_start_with_the_reason() {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let star = Star::new("adl", 2).unwrap();
    common::sh(&["ip", "-n", star.hub_ns(), "tuntap", "add", "mode", "tun", "name", "fsadmtun"]);
    common::sh(&["ip", "-n", star.hub_ns(), "link", "set", "fsadmtun", "up"]);
    let dev1 = star.hub_dev(1).to_string();
    for kind in [PortKind::Afpacket, PortKind::Afxdp] {
        // Second: the first port is opened, then closed again.
        let (iface, msg) = refused(try_start(&star, vec![spec(kind, &dev1), spec(kind, "lo")]));
        assert_eq!(iface, "lo");
        assert!(msg.contains("lo is a loopback interface") && msg.contains("flood"), "{kind:?}: {msg}");
        assert!(!lock_of(&star, &dev1).exists(), "{kind:?}: the lock of the port opened first was kept");
        assert!(!common::xdp_attached(&star, 1), "{kind:?}: XDP program left on the port opened first");

        let (iface, msg) = refused(try_start(&star, vec![spec(kind, "fsadmtun"), spec(kind, &dev1)]));
        assert_eq!(iface, "fsadmtun");
        assert!(msg.contains("fsadmtun is not an Ethernet interface (tun device, link type 65534"), "{kind:?}: {msg}");
    }
    // A missing interface keeps its own error.
    let (iface, msg) =
        refused(try_start(&star, vec![spec(PortKind::Afpacket, "fs-no-such"), spec(PortKind::Afpacket, &dev1)]));
    assert_eq!(iface, "fs-no-such");
    assert!(!msg.contains("Ethernet") && !msg.contains("bridge"), "{msg}");

    // The refusals left nothing behind: the ports make a bridge.
    let bridge = start(&star, PortKind::Afpacket, 2, |_| {});
    assert!(ping(&star, 1, 2), "ping through the bridge");
    drop(bridge);
}

#[test]
fn loopback_and_a_tun_device_are_refused_by_port_add() {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let star = Star::new("ada", 2).unwrap();
    common::sh(&["ip", "-n", star.hub_ns(), "tuntap", "add", "mode", "tun", "name", "fsadmtun"]);
    let bridge = start(&star, PortKind::Afpacket, 2, |_| {});
    let ctl = bridge.control();
    for kind in [PortKind::Afpacket, PortKind::Afxdp] {
        let msg = error(ctl.request(Request::PortAdd { port: spec(kind, "lo") }));
        assert!(msg.contains("lo is a loopback interface"), "{kind:?}: {msg}");
        let msg = error(ctl.request(Request::PortAdd { port: spec(kind, "fsadmtun") }));
        assert!(msg.contains("fsadmtun is not an Ethernet interface"), "{kind:?}: {msg}");
    }
    let s = common::stats(ctl.as_ref());
    assert_eq!(s.ports.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), [star.hub_dev(1), star.hub_dev(2)]);
    assert!(ping(&star, 1, 2), "ping through the bridge");
    common::assert_conserved(&bridge.stop());
}

#[test]
fn a_second_bridge_on_a_port_is_refused_until_the_first_lets_it_go() {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let star = Star::new("ado", 4).unwrap();
    let af = |i: usize| spec(PortKind::Afpacket, star.hub_dev(i));
    let lock = |i: usize| lock_of(&star, star.hub_dev(i));
    let pid = std::process::id();

    let first = try_start(&star, vec![af(1), af(2), af(3)]).expect("first bridge");
    for i in 1..=3 {
        let text = std::fs::read_to_string(lock(i)).unwrap_or_else(|e| panic!("lock of port {i}: {e}"));
        assert_eq!(text, format!("{pid}\n{}\n", star.hub_dev(i)), "port {i}");
    }
    // The same process counts as another bridge: a lock is per open file.
    let (iface, msg) = refused(try_start(&star, vec![af(4), af(3)]));
    assert_eq!(iface, star.hub_dev(3));
    let holder = format!("another flowsteer bridge (pid {pid}) serves {}", star.hub_dev(3));
    assert!(msg.contains(&holder) && msg.contains(&lock(3).display().to_string()), "{msg}");
    assert!(!lock(4).exists(), "the refused bridge kept the lock of the port it opened first");
    assert!(ping(&star, 1, 3), "the first bridge still serves its ports");

    // Removed from the first: its lock goes, and the second may take it.
    let c1 = first.control();
    ok(c1.as_ref(), Request::PortDel { iface: star.hub_dev(3).to_string() });
    assert!(!lock(3).exists(), "lock file of a removed port");
    let second = try_start(&star, vec![af(4), af(3)]).expect("second bridge, once the port was removed");
    let msg = error(c1.request(Request::PortAdd { port: af(3) }));
    assert!(msg.contains(&holder), "{msg}");
    assert!(ping(&star, 4, 3) && ping(&star, 1, 2), "each bridge serves its own ports");

    // Stopped: its locks go.
    common::assert_conserved(&second.stop());
    assert!(!lock(3).exists() && !lock(4).exists(), "lock files of a stopped bridge");
    ok(c1.as_ref(), Request::PortAdd { port: af(3) });
    assert!(ping(&star, 3, 1), "the port added back to the first bridge");
    let (iface, _) = refused(try_start(&star, vec![af(4), af(1)]));
    assert_eq!(iface, star.hub_dev(1));
    common::assert_conserved(&first.stop());
    assert!((1..=4).all(|i| !lock(i).exists()), "lock files of a stopped bridge");
    let third = try_start(&star, vec![af(4), af(1)]).expect("a bridge after the first stopped");
    assert!(ping(&star, 4, 1));
    drop(third);
}

#[test]
fn an_interface_of_the_same_name_in_another_namespace_is_another_port() {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let (a, b) = (Star::new("adn", 2).unwrap(), Star::new("adn", 2).unwrap());
    // b's first port takes the name of a's.
    let name = a.hub_dev(1).to_string();
    common::sh(&["ip", "-n", b.hub_ns(), "link", "set", "dev", b.hub_dev(1), "down"]);
    common::sh(&["ip", "-n", b.hub_ns(), "link", "set", "dev", b.hub_dev(1), "name", &name]);
    common::sh(&["ip", "-n", b.hub_ns(), "link", "set", "dev", &name, "up"]);
    let on_a = start(&a, PortKind::Afpacket, 2, |_| {});
    let on_b = try_start(&b, vec![spec(PortKind::Afpacket, &name), spec(PortKind::Afpacket, b.hub_dev(2))])
        .expect("the same name in another namespace");
    assert_ne!(lock_of(&a, &name), lock_of(&b, &name));
    assert!(ping(&a, 1, 2) && ping(&b, 1, 2), "both bridges serve their ports");
    drop(on_b);
    drop(on_a);
}
