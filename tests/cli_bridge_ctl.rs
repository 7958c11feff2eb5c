//! `flowsteer bridge-ctl` against a fake bridge served in this process:
//! what each command asks, what it prints, its exit codes (0 done, 1 the
//! bridge answered an error, 2 bad arguments, 3 no bridge).

#[allow(dead_code)] // only `flowsteer` and `TempDir` are used here
mod common;

use common::{flowsteer, TempDir};
use flowsteer_bridge::api::{
    BridgeStats, FdbRow, LinkRow, PortKind, PortSpec, PortStats, VlanMember, VlanRow, STATS_SCHEMA,
};
use flowsteer_bridge::{ctl, Control, Request, Response};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Fake {
    asked: Mutex<Vec<Request>>,
}

impl Control for Fake {
    fn request(&self, req: Request) -> Response {
        self.asked.lock().unwrap().push(req.clone());
        match req {
            Request::FdbShow => Response::Fdb {
                entries: vec![
                    FdbRow {
                        mac: "02:00:00:00:00:01".into(),
                        port: "veth0".into(),
                        vlan: 10,
                        is_static: true,
                        kind: "static".into(),
                        age_s: 0,
                    },
                    FdbRow {
                        mac: "02:00:00:00:00:02".into(),
                        port: "veth1".into(),
                        vlan: 0,
                        is_static: false,
                        kind: "learned".into(),
                        age_s: 12,
                    },
                    FdbRow {
                        mac: "02:00:00:00:00:03".into(),
                        port: "veth1".into(),
                        vlan: 0,
                        is_static: false,
                        kind: "extern_learn".into(),
                        age_s: 3,
                    },
                ],
            },
            Request::LinkShow => Response::Links {
                links: vec![
                    LinkRow {
                        name: "veth0".into(),
                        kind: "afxdp".into(),
                        up: true,
                        state: "forwarding".into(),
                        learning: true,
                        flood: true,
                        mcast_flood: true,
                        bcast_flood: true,
                        isolated: false,
                        max_learned: 0,
                        learned_entries: 3,
                        fast_path: "xdp".into(),
                    },
                    LinkRow {
                        name: "veth1".into(),
                        kind: "afpacket".into(),
                        up: false,
                        state: "blocking".into(),
                        learning: false,
                        flood: false,
                        mcast_flood: true,
                        bcast_flood: false,
                        isolated: true,
                        max_learned: 100,
                        learned_entries: 0,
                        fast_path: "off (afpacket port: the workers forward)".into(),
                    },
                ],
            },
            Request::VlanShow => Response::Vlans {
                filtering: true,
                protocol: "802.1q".into(),
                ports: vec![
                    VlanRow {
                        name: "veth0".into(),
                        pvid: Some(1),
                        vlans: vec![VlanMember { vid: 1, untagged: true }, VlanMember { vid: 10, untagged: false }],
                    },
                    VlanRow { name: "veth10".into(), pvid: None, vlans: vec![] },
                ],
            },
            Request::Stats => Response::Stats {
                stats: Box::new(BridgeStats {
                    schema: STATS_SCHEMA.into(),
                    ports: vec![PortStats {
                        name: "veth0".into(),
                        kind: "afxdp".into(),
                        received: 7,
                        forwarded: 7,
                        ..Default::default()
                    }],
                    conservation_ok: true,
                    ..Default::default()
                }),
            },
            Request::PortDel { iface } => Response::Error { message: format!("{iface} is not a member port") },
            _ => Response::Ok { detail: "done".into() },
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn no_bridge_is_exit_3_with_what_to_do() {
    let out = flowsteer(&["bridge-ctl", "--ctl", "/nonexistent", "stats"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("/nonexistent") && err.contains("is the bridge running? (--ctl PATH)"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_macs_vids_and_words_are_usage_errors() {
    for (args, says) in [
        (&["fdb", "add", "02:00:00:00:00", "veth0"][..], "MAC address"),
        (&["fdb", "add", "02:00:00:00:00:01", "vlan", "4095", "veth0"], "1..=4094"),
        (&["fdb", "add", "02:00:00:00:00:01", "vlan", "10"], "which port"),
        (&["fdb", "add", "02:00:00:00:00:01", "veth0", "veth1"], "one interface"),
        (&["fdb", "del", "02:00:00:00:00:01", "dev", "veth0"], "no dev"),
        (&["fdb", "flush", "vlan", "3", "sticky"], "dynamic and static"),
        (&["fdb", "add", "02:00:00:00:00:01", "veth0", "static", "sticky"], "one type only"),
        (&["fdb", "add", "02:00:00:00:00:01", "veth0", "dynamic"], "learned entries come from traffic"),
        (&["port", "add", "xdp:veth0"], "afxdp:IFACE"),
        (&["link", "set", "veth0", "learning", "off"], "starts with dev IFACE"),
        (&["link", "set", "dev", "veth0", "learning", "maybe"], "expected on or off"),
        (&["link", "set", "dev", "veth0", "colour", "on"], "port flag"),
        (&["link", "set", "dev", "veth0", "state", "up"], "port state"),
        (&["link", "set", "dev", "veth0", "learning", "off", "flood"], "in pairs"),
        (&["vlan", "add", "dev", "veth0", "vid", "4095"], "1 <= N <= M <= 4094"),
        (&["vlan", "add", "dev", "veth0", "vid", "10-12", "pvid"], "one VLAN"),
        (&["vlan", "add", "dev", "veth0", "vid", "10", "tagged"], "unexpected"),
        (&["vlan", "add", "dev", "veth0", "vlan", "10"], "expected vid"),
        (&["vlan", "del", "dev", "veth0", "vid", "0"], "1 <= N"),
    ] {
        let mut argv = vec!["bridge-ctl", "--ctl", "/nonexistent"];
        argv.extend_from_slice(args);
        let out = flowsteer(&argv);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn each_command_asks_its_request_and_prints_the_answer() {
    let dir = TempDir::new("bridge-ctl", "fake");
    let sock = dir.path("ctl.sock");
    let fake = Arc::new(Fake::default());
    let _server = ctl::serve(&sock, fake.clone()).unwrap();
    let run = |args: &[&str]| {
        let mut argv = vec!["bridge-ctl", "--ctl", sock.to_str().unwrap()];
        argv.extend_from_slice(args);
        flowsteer(&argv)
    };

    let out = run(&["fdb", "show"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        "02:00:00:00:00:01 dev veth0 vlan 10 master flowsteer static\n\
         02:00:00:00:00:02 dev veth1 age 12s master flowsteer\n\
         02:00:00:00:00:03 dev veth1 age 3s master flowsteer extern_learn\n"
    );
    let out = run(&["fdb", "show", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[1]["mac"], "02:00:00:00:00:02");
    assert_eq!((rows[1]["port"].as_str(), rows[1]["vlan"].as_u64()), (Some("veth1"), Some(0)));
    assert_eq!((rows[0]["static"].as_bool(), rows[1]["age_s"].as_u64()), (Some(true), Some(12)));
    assert_eq!((rows[0]["kind"].as_str(), rows[2]["kind"].as_str()), (Some("static"), Some("extern_learn")));

    let out = run(&["link", "show"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        "veth0 afxdp link up state forwarding learning on flood on mcast_flood on bcast_flood on isolated off \
         max_learned 0 learned 3 fast_path xdp\n\
         veth1 afpacket link down state blocking learning off flood off mcast_flood on bcast_flood off isolated on \
         max_learned 100 learned 0 fast_path off (afpacket port: the workers forward)\n"
    );
    let out = run(&["link", "show", "--json"]);
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(links[1]["state"], "blocking");
    assert_eq!((links[1]["isolated"].as_bool(), links[1]["max_learned"].as_u64()), (Some(true), Some(100)));

    let out = run(&["vlan", "show"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        "vlan_filtering on vlan_protocol 802.1q\n\
         port    vlan-id\n\
         veth0   1 PVID Egress Untagged\n\
         \x20       10\n\
         veth10  (none)\n"
    );
    let out = run(&["vlan", "show", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((doc["filtering"].as_bool(), doc["protocol"].as_str()), (Some(true), Some("802.1q")));
    assert_eq!((doc["ports"][0]["pvid"].as_u64(), doc["ports"][0]["vlans"][1]["vid"].as_u64()), (Some(1), Some(10)));

    let out = run(&["stats"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["veth0", "afxdp", "no", "no", "-", "0", "7", "0", "7", "0", "0", "0", "0", "0", "-", "-"]),
        "{stdout}"
    );
    assert!(stdout.contains("conservation: ok"), "{stdout}");
    let out = run(&["stats", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((doc["schema"].as_str(), doc["ports"][0]["received"].as_u64()), (Some(STATS_SCHEMA), Some(7)));

    for args in [
        &["port", "add", "afpacket:veth2"][..],
        &["fdb", "add", "02:00:00:00:00:0A", "vlan", "10", "veth0"],
        &["fdb", "add", "02:00:00:00:00:0b", "dev", "veth1", "vlan", "20"],
        &["fdb", "add", "02:00:00:00:00:0c", "veth1"],
        &["fdb", "del", "02:00:00:00:00:0a", "vlan", "10"],
        &["fdb", "del", "02:00:00:00:00:0c"],
        &["fdb", "flush", "dev", "veth0"],
        &["fdb", "flush"],
        &["fdb", "add", "02:00:00:00:00:0d", "dev", "veth1", "sticky"],
        &["fdb", "add", "02:00:00:00:00:0e", "veth1", "vlan", "5", "extern_learn"],
        &["fdb", "flush", "vlan", "5", "veth1", "static", "dynamic"],
        &["fdb", "flush", "static"],
        &["link", "set", "dev", "veth1", "learning", "off", "state", "2", "max_learned", "0"],
        &["vlan", "add", "dev", "veth1", "vid", "10", "pvid", "untagged"],
        &["vlan", "add", "dev", "veth1", "vid", "20-30"],
        &["vlan", "del", "dev", "veth1", "vid", "20-30"],
        &["vlan", "filtering", "on"],
    ] {
        let out = run(args);
        assert_eq!((out.status.code(), text(&out.stdout)), (Some(0), "done\n".into()), "{args:?}");
    }
    let out = run(&["port", "del", "veth9"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "error: the bridge answered: veth9 is not a member port\n");

    let mac = |m: &str| m.to_string();
    assert_eq!(
        fake.asked.lock().unwrap()[8..],
        [
            Request::PortAdd { port: PortSpec { kind: PortKind::Afpacket, iface: "veth2".into() } },
            Request::FdbAdd { mac: mac("02:00:00:00:00:0a"), vlan: 10, iface: "veth0".into(), kind: "static".into() },
            Request::FdbAdd { mac: mac("02:00:00:00:00:0b"), vlan: 20, iface: "veth1".into(), kind: "static".into() },
            Request::FdbAdd { mac: mac("02:00:00:00:00:0c"), vlan: 0, iface: "veth1".into(), kind: "static".into() },
            Request::FdbDel { mac: mac("02:00:00:00:00:0a"), vlan: 10 },
            Request::FdbDel { mac: mac("02:00:00:00:00:0c"), vlan: 0 },
            Request::FdbFlush { iface: Some("veth0".into()), vlan: None, dynamic: false, statics: false },
            Request::FdbFlush { iface: None, vlan: None, dynamic: false, statics: false },
            Request::FdbAdd { mac: mac("02:00:00:00:00:0d"), vlan: 0, iface: "veth1".into(), kind: "sticky".into() },
            Request::FdbAdd {
                mac: mac("02:00:00:00:00:0e"),
                vlan: 5,
                iface: "veth1".into(),
                kind: "extern_learn".into()
            },
            Request::FdbFlush { iface: Some("veth1".into()), vlan: Some(5), dynamic: true, statics: true },
            Request::FdbFlush { iface: None, vlan: None, dynamic: false, statics: true },
            Request::LinkSet {
                iface: "veth1".into(),
                settings: [("learning", "off"), ("state", "2"), ("max_learned", "0")]
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .to_vec()
            },
            Request::VlanAdd { iface: "veth1".into(), vid: 10, vid_end: 10, pvid: true, untagged: true },
            Request::VlanAdd { iface: "veth1".into(), vid: 20, vid_end: 30, pvid: false, untagged: false },
            Request::VlanDel { iface: "veth1".into(), vid: 20, vid_end: 30 },
            Request::VlanFiltering { on: true },
            Request::PortDel { iface: "veth9".into() },
        ]
    );
}
