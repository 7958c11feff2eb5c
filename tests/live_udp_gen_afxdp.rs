//! `flowsteer udp-gen --afxdp IFACE`, live: the binary sends from an
//! AF_XDP socket on one end of a veth pair (in a namespace of the lab) to a
//! kernel UDP socket on the other end, which counts what the kernel
//! accepted (valid checksums and lengths only). The IPv4 run starts with no
//! neighbour entry, so the binary resolves it first.
//!
//! Root only (skipped with a printed reason otherwise).

use flowsteer_netns::{skip_reason, Lab, LabConfig, Side};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_flowsteer");

/// Sends `count` datagrams of `size` bytes from side A to a socket on side
/// B bound on `peer`; returns (datagrams the socket got, their sizes, the
/// JSON report).
fn send(lab: &Lab, peer: IpAddr, port: u16, count: u64, size: usize) -> (u64, Vec<usize>, serde_json::Value) {
    // The socket reads while the generator sends (its receive buffer
    // holds a few hundred datagrams), until 500 ms pass without one.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = lab.spawn_in(Side::B, move || {
        let s = UdpSocket::bind(SocketAddr::new(peer, port)).expect("bind the counting socket");
        // Room for every datagram (about 1 KiB of buffer each), so a reader
        // the machine's load delays still gets them all: the test is about
        // what the generator sent, not how fast this thread reads.
        rustix::net::sockopt::set_socket_recv_buffer_size_force(&s, 8 << 20).expect("SO_RCVBUFFORCE");
        s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        ready_tx.send(()).unwrap();
        let mut got = 0u64;
        let mut sizes = Vec::new();
        let mut buf = [0u8; 2048];
        while let Ok(n) = s.recv(&mut buf) {
            got += 1;
            if !sizes.contains(&n) {
                sizes.push(n);
            }
        }
        (got, sizes)
    });
    ready_rx.recv().expect("the counting socket is bound");
    let out = Command::new("ip")
        .args(["netns", "exec", lab.ns(Side::A), BIN, "udp-gen", "--afxdp", lab.dev(Side::A)])
        .args(["--remote", &peer.to_string(), "--port", &port.to_string()])
        .args(["--count", &count.to_string(), "--rate", "50000", "--size", &size.to_string(), "--json"])
        .output()
        .expect("run flowsteer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "udp-gen failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let (got, sizes) = reader.join().expect("reader thread").expect("enter namespace B");
    (got, sizes, doc)
}

fn check(doc: &serde_json::Value, count: u64) {
    assert_eq!(doc["sent"], count, "{doc}");
    let a = &doc["afxdp"];
    assert_eq!(a["sent"], count, "{doc}");
    assert_eq!(a["completed"], count, "every frame completed: {doc}");
    assert_eq!(a["in_flight"], 0, "{doc}");
    assert_eq!(a["add_up"], true, "{doc}");
}

#[test]
fn afxdp_udp_gen_reaches_a_kernel_socket_v4_and_v6() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let lab = Lab::new("ugx", &LabConfig::default()).expect("lab");
    // No neighbour entry for the peer: udp-gen must resolve it.
    let peer4 = IpAddr::V4(lab.v4(Side::B));
    lab.ip_in(Side::A, &["neigh", "del", &peer4.to_string(), "dev", lab.dev(Side::A)]).expect("neigh del");
    let (got, sizes, doc) = send(&lab, peer4, 7001, 1000, 100);
    check(&doc, 1000);
    assert_eq!(got, 1000, "the kernel socket got every datagram");
    assert_eq!(sizes, vec![100], "datagrams of --size bytes");

    let peer6 = IpAddr::V6(lab.v6(Side::B));
    let (got, sizes, doc) = send(&lab, peer6, 7002, 1000, 64);
    check(&doc, 1000);
    assert_eq!(got, 1000);
    assert_eq!(sizes, vec![64]);
}

#[test]
fn afxdp_udp_gen_refuses_a_missing_interface_and_echo() {
    let out = Command::new(BIN)
        .args([
            "udp-gen",
            "--afxdp",
            "fsnosuch0",
            "--remote",
            "10.201.0.2",
            "--port",
            "9",
            "--count",
            "1",
            "--dst-mac",
            "02:00:00:00:00:01",
            // 10.201.0.2 may be routed here (the lab is not up): not what this checks.
            "--allow-routed",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("fsnosuch0") && !err.contains("panicked"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let out = Command::new(BIN)
        .args(["udp-gen", "--afxdp", "lo", "--echo", "--remote", "127.0.0.1", "--port", "9", "--count", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--echo") && err.contains("--afxdp"), "{err}");
}
