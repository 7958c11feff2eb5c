//! The lab itself, live (root only; skipped with a printed reason otherwise).

use flowsteer_netns::{enter, skip_reason, Lab, LabConfig, Side};
use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

#[test]
fn udp_crosses_the_lab_and_everything_is_removed() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let (ns_names, devs);
    {
        let lab = Lab::new("t", &LabConfig { queues: 2, mtu: 1500 }).unwrap();
        ns_names = [lab.ns(Side::A).to_string(), lab.ns(Side::B).to_string()];
        devs = lab.dev(Side::A).to_string();
        assert!(lab.ifindex(Side::B).unwrap() > 0);
        let (peer4, a4) = (lab.v4(Side::B), lab.v4(Side::A));
        let rx = lab
            .run_in(Side::B, move || {
                let s = UdpSocket::bind((peer4, 0)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s
            })
            .unwrap();
        let port = rx.local_addr().unwrap().port();
        lab.run_in(Side::A, move || {
            let s = UdpSocket::bind((a4, 0)).unwrap();
            s.send_to(b"lab", (peer4, port)).unwrap();
        })
        .unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"lab");
        assert_eq!(from.ip(), std::net::IpAddr::V4(a4));
    }
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for n in &ns_names {
        assert!(!list.contains(n.as_str()), "{n} left behind");
    }
    let links = Command::new("ip").args(["link", "show", &devs]).output().unwrap();
    assert!(!links.status.success());
}

#[test]
fn entering_a_missing_namespace_is_an_error() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let e = enter("fs-no-such-namespace-x").unwrap_err().to_string();
    assert!(e.contains("fs-no-such-namespace-x"), "{e}");
}

#[test]
fn ping_crosses_the_lab_both_ip_versions_and_fails_on_a_dead_address() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let lab = Lab::new("png", &LabConfig::default()).unwrap();
    assert!(lab.ping(Side::A, lab.v4(Side::B).into(), Duration::from_secs(3)).unwrap());
    assert!(lab.ping(Side::B, lab.v6(Side::A).into(), Duration::from_secs(3)).unwrap());
    // Down the peer's link: no reply (the address stays inside the lab).
    lab.ip_in(Side::B, &["link", "set", lab.dev(Side::B), "down"]).unwrap();
    assert!(!lab.ping(Side::A, lab.v4(Side::B).into(), Duration::from_millis(400)).unwrap());
}
