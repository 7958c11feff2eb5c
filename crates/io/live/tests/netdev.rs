//! XDP features of a veth pair read over generic netlink, live (root only;
//! skipped with a printed reason otherwise). The lab's namespaces and veths
//! are removed when it is dropped, also when an assertion fails.

use flowsteer_live::netdev::{NetdevReader, XdpFeatures};
use flowsteer_netns::{skip_reason, Lab, LabConfig, Side};
use std::path::Path;
use std::process::Command;

fn ethtool() -> Option<&'static str> {
    ["/usr/sbin/ethtool", "/sbin/ethtool", "/usr/bin/ethtool"].into_iter().find(|p| Path::new(p).exists())
}

/// Runs `ethtool ARGS` inside a side's namespace; its stdout.
fn ethtool_in(lab: &Lab, side: Side, ethtool: &str, args: &[&str]) -> String {
    let out = Command::new("ip").args(["netns", "exec", lab.ns(side), ethtool]).args(args).output().unwrap();
    assert!(out.status.success(), "ethtool {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether GRO is on for a side's veth (`ethtool -k`).
fn gro(lab: &Lab, side: Side, ethtool: &str) -> bool {
    let k = ethtool_in(lab, side, ethtool, &["-k", lab.dev(side)]);
    let line = k.lines().find(|l| l.starts_with("generic-receive-offload:")).expect("a GRO line in ethtool -k");
    line.split_whitespace().nth(1) == Some("on")
}

fn set_gro(lab: &Lab, side: Side, ethtool: &str, on: bool) {
    ethtool_in(lab, side, ethtool, &["-K", lab.dev(side), "gro", if on { "on" } else { "off" }]);
}

/// A reader made inside a side's namespace (then used from this thread);
/// `None` when the kernel has no "netdev" family.
fn reader_in(lab: &Lab, side: Side) -> Option<NetdevReader> {
    lab.run_in(side, NetdevReader::new).unwrap().unwrap()
}

#[test]
fn a_veth_takes_redirected_frames_only_while_its_peer_has_gro_on() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let Some(ethtool) = ethtool() else {
        println!("skipped: ethtool is not installed");
        return;
    };
    let lab = Lab::new("xdpf", &LabConfig::default()).unwrap();
    let Some(mut in_a) = reader_in(&lab, Side::A) else {
        println!("skipped: this kernel has no \"netdev\" generic netlink family (Linux < 6.3)");
        return;
    };
    let mut in_b = reader_in(&lab, Side::B).expect("the family, as in A");
    let (a, b) = (lab.ifindex(Side::A).unwrap(), lab.ifindex(Side::B).unwrap());
    let features = |r: &mut NetdevReader, i: u32| -> XdpFeatures { r.xdp_features(i).unwrap().expect("the veth") };

    // The kernel's defaults: a new veth has GRO off (Linux 6.18), so
    // neither end takes redirected frames.
    let default_gro = gro(&lab, Side::B, ethtool);
    let at_rest = features(&mut in_a, a);
    println!("defaults: B's GRO {}; A's xdp_features {at_rest}", if default_gro { "on" } else { "off" });
    assert!(at_rest.basic() && at_rest.redirect(), "{at_rest:?}");
    assert_eq!(at_rest.ndo_xmit(), default_gro, "{at_rest:?}");
    assert_eq!(at_rest.ndo_xmit_sg(), default_gro, "{at_rest:?}");

    set_gro(&lab, Side::B, ethtool, false);
    assert!(!features(&mut in_a, a).ndo_xmit());

    // B's GRO decides A's flag, not B's own.
    set_gro(&lab, Side::B, ethtool, true);
    let on = features(&mut in_a, a);
    println!("B's GRO on: A's xdp_features {on}, B's {}", features(&mut in_b, b));
    assert!(on.ndo_xmit() && on.ndo_xmit_sg(), "{on:?}");
    assert_eq!(on.bits() & !(4 | 64), at_rest.bits() & !(4 | 64), "only the xmit bits change");
    assert!(!features(&mut in_b, b).ndo_xmit());

    set_gro(&lab, Side::B, ethtool, false);
    let off = features(&mut in_a, a);
    assert!(!off.ndo_xmit() && !off.ndo_xmit_sg(), "{off:?}");

    // And the other way round.
    set_gro(&lab, Side::A, ethtool, true);
    assert!(features(&mut in_b, b).ndo_xmit());
    assert!(!features(&mut in_a, a).ndo_xmit());

    // No such index in A's namespace.
    assert_eq!(in_a.xdp_features(0x7fff_fff0).unwrap(), None);
}
