//! `tcp::iperf::run` against real kernel peers in a star of two hosts: a
//! path that drops everything fails within iperf3's connect timeout with
//! iperf3's own words, and the stop flag ends a long run at once; either
//! way neither iperf3 is left running. Root and iperf3 only: skipped with
//! a printed reason otherwise.

use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowsteer_netns::Star;
use flowsteer_rfc2544::tcp::{self, iperf};

fn skip() -> bool {
    match tcp::skip_reason() {
        Some(why) => {
            println!("skipped: {why}");
            true
        }
        None => false,
    }
}

/// Processes in namespace `ns`.
fn pids(ns: &str) -> String {
    let out = Command::new("ip").args(["netns", "pids", ns]).output().expect("ip netns pids");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn test_of(star: &Star, seconds: u32) -> iperf::Test<'_> {
    iperf::Test {
        server_ns: star.host_ns(2),
        client_ns: star.host_ns(1),
        addr: star.v4(2),
        port: tcp::PORT,
        seconds,
        streams: 2,
    }
}

#[test]
fn a_path_that_drops_everything_fails_within_the_connect_timeout_in_iperf3s_words() {
    if skip() {
        return;
    }
    // Nothing joins the hub's two veths: host 1's ARP and SYN go nowhere.
    let star = Star::new("tcpd", 2).unwrap();
    let t0 = Instant::now();
    let e = iperf::run(&test_of(&star, 30), None).unwrap_err();
    let took = t0.elapsed();
    assert!(matches!(&e, iperf::IperfError::Client(_)), "{e:?}");
    assert!(e.to_string().starts_with("unable to connect to server"), "{e}");
    let bound = Duration::from_millis(iperf::CONNECT_TIMEOUT_MS.into()) + Duration::from_secs(5);
    assert!(took < bound, "{took:?}");
    assert_eq!((pids(star.host_ns(1)), pids(star.host_ns(2))), (String::new(), String::new()));
}

#[test]
fn the_stop_flag_ends_a_run_at_once_and_kills_both_iperf3s() {
    if skip() {
        return;
    }
    let star = Star::new("tcps", 2).unwrap();
    flowsteer_rfc2544::dut::linux_bridge(star.hub_ns(), &[star.hub_dev(1), star.hub_dev(2)]).unwrap();
    let to: IpAddr = star.v4(2).into();
    assert!(star.run_in(1, move || flowsteer_netns::ping(to, Duration::from_secs(10))).unwrap().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let setter = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            stop.store(true, Ordering::Relaxed);
        })
    };
    let t0 = Instant::now();
    let e = iperf::run(&test_of(&star, 30), Some(&stop)).unwrap_err();
    let took = t0.elapsed();
    setter.join().unwrap();
    assert!(matches!(e, iperf::IperfError::Stopped), "{e:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!((pids(star.host_ns(1)), pids(star.host_ns(2))), (String::new(), String::new()));
}
