//! The GF(2) planner: every planned tuple lands where the plan says, checked
//! with the bit-by-bit reference hash.

use flowsteer_plan::plan::{plan, PlanRequest, DEFAULT_MAX_CANDIDATES};
use flowsteer_rss::{reference, Fields, HashInput, HashTypes, Impl, QueueId, Reta, RssConfig, RssKey};
use flowsteer_wire::proto;

fn config(queues: usize, types: HashTypes) -> RssConfig {
    RssConfig::new(RssKey::microsoft(), types, Reta::round_robin(128, queues).unwrap())
}

fn req(src: &str, dst: &str, sport: Option<&str>, dport: Option<&str>, proto: u8, buckets: u16) -> PlanRequest {
    PlanRequest {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        sport: sport.map(|s| s.parse().unwrap()),
        dport: dport.map(|s| s.parse().unwrap()),
        proto,
        buckets: (0..buckets).map(QueueId).collect(),
        per_bucket: 1,
        max_candidates: DEFAULT_MAX_CANDIDATES,
    }
}

fn verify(cfg: &RssConfig, p: &flowsteer_plan::plan::Plan) {
    for a in &p.assignments {
        let ports = if p.fields == Fields::FourTuple { Some((a.sport, a.dport)) } else { None };
        let input = HashInput::build(a.src, a.dst, ports);
        let h = reference(cfg.key().as_bytes(), input.as_bytes());
        assert_eq!(h, a.hash, "{a:?}");
        assert_eq!(cfg.reta.queue_for(h), a.bucket, "{a:?}");
    }
}

#[test]
fn seeds_case_eight_clients_eight_buckets() {
    // "8 client addresses in 10.11.2.0/24 that, sending to 10.11.2.1 port
    // 8080, land on 8 distinct buckets."
    let cfg = config(8, HashTypes::default());
    let p = plan(&cfg, &req("10.11.2.0/24", "10.11.2.1", None, Some("8080"), proto::UDP, 8)).unwrap();
    assert!(p.unreachable.is_empty(), "{:?}", p.unreachable);
    assert_eq!(p.assignments.len(), 8);
    assert_eq!(p.fields, Fields::TwoTuple);
    let mut buckets: Vec<u16> = p.assignments.iter().map(|a| a.bucket.0).collect();
    buckets.sort();
    assert_eq!(buckets, (0..8).collect::<Vec<_>>());
    for a in &p.assignments {
        let s = a.src.to_string();
        assert!(s.starts_with("10.11.2."), "{s}");
        assert_ne!(s, "10.11.2.0");
        assert_ne!(s, "10.11.2.1");
        assert_ne!(s, "10.11.2.255");
    }
    verify(&cfg, &p);
}

#[test]
fn source_ports_for_a_fixed_pair_four_tuple() {
    let cfg = config(16, HashTypes::parse("all").unwrap());
    let mut r = req("192.0.2.10", "198.51.100.1", Some("1024-65535"), Some("443"), proto::TCP, 16);
    r.per_bucket = 4;
    let p = plan(&cfg, &r).unwrap();
    assert_eq!(p.fields, Fields::FourTuple);
    assert!(p.unreachable.is_empty(), "{:?}", p.unreachable);
    assert_eq!(p.assignments.len(), 64);
    for a in &p.assignments {
        assert!(a.sport >= 1024);
        assert_eq!(a.dport, 443);
    }
    let mut ports: Vec<u16> = p.assignments.iter().map(|a| a.sport).collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 64, "tuples are distinct");
    verify(&cfg, &p);
}

#[test]
fn ipv6_two_and_four_tuple() {
    let cfg = config(4, HashTypes::default());
    let p = plan(&cfg, &req("2001:db8:1::/64", "2001:db8::1", None, Some("53"), proto::UDP, 4)).unwrap();
    assert_eq!(p.fields, Fields::TwoTuple);
    assert_eq!(p.assignments.len(), 4);
    verify(&cfg, &p);
    let p = plan(&cfg, &req("2001:db8::2", "2001:db8::1", Some("30000-40000"), Some("80"), proto::TCP, 4)).unwrap();
    assert_eq!(p.fields, Fields::FourTuple);
    assert_eq!(p.assignments.len(), 4);
    assert!(p.assignments.iter().all(|a| (30000..=40000).contains(&a.sport)));
    verify(&cfg, &p);
}

#[test]
fn too_few_free_bits_is_explained() {
    // A /30 has 2 host bits; 8 buckets need 3 bucket bits (and 2 of the 4
    // addresses are network/broadcast).
    let cfg = config(8, HashTypes::default());
    let p = plan(&cfg, &req("10.0.0.0/30", "10.0.1.1", None, None, proto::UDP, 8)).unwrap();
    assert!(p.assignments.len() <= 2);
    assert!(!p.unreachable.is_empty());
    assert!(p.unreachable.iter().any(|(_, why)| why.contains("free bits")), "{:?}", p.unreachable);
    verify(&cfg, &p);
}

#[test]
fn four_tuple_without_ports_is_an_error() {
    let cfg = config(8, HashTypes::default());
    let e = plan(&cfg, &req("10.0.0.0/24", "10.0.1.1", None, Some("80"), proto::TCP, 8)).unwrap_err();
    assert!(e.to_string().contains("--sport"), "{e}");
    let e = plan(&cfg, &req("10.0.0.0/24", "::1", None, None, proto::UDP, 8)).unwrap_err();
    assert!(e.to_string().contains("IPv4"), "{e}");
    let mut r = req("10.0.0.0/24", "10.0.1.1", None, None, proto::UDP, 8);
    r.buckets = vec![QueueId(9)];
    assert!(plan(&cfg, &r).is_err());
}

#[test]
fn rps_scaling_and_every_impl_agree() {
    let cfg = config(4, HashTypes::default()).with_mapping(flowsteer_rss::Mapping::RpsScale).with_impl(Impl::Reference);
    let p = plan(&cfg, &req("10.1.0.0/16", "10.2.0.1", None, None, proto::UDP, 4)).unwrap();
    assert_eq!(p.assignments.len(), 4);
    for a in &p.assignments {
        let h = reference(cfg.key().as_bytes(), HashInput::build(a.src, a.dst, None).as_bytes());
        assert_eq!(flowsteer_rss::reta::rps_scale(h, 4), u32::from(a.bucket.0));
    }
}

#[test]
fn random_key_plans_too() {
    let key = RssKey::random(52).unwrap();
    let cfg = RssConfig::new(key, HashTypes::default(), Reta::round_robin(512, 16).unwrap());
    let mut r = req("172.16.0.0/20", "172.16.255.1", None, None, proto::UDP, 16);
    r.per_bucket = 3;
    let p = plan(&cfg, &r).unwrap();
    assert_eq!(p.assignments.len(), 48, "{:?}", p.unreachable);
    verify(&cfg, &p);
}

/// UDP under the default hash types is hashed on the 2-tuple: ports given as
/// ranges do not pick the bucket, and each tuple carries the first port of
/// each range instead of failing the range check.
#[test]
fn ports_the_hash_ignores_take_the_range_start() {
    let cfg = config(64, HashTypes::default());
    let p = plan(&cfg, &req("198.51.100.0/24", "192.0.2.1", Some("1024-65535"), Some("443"), proto::UDP, 64)).unwrap();
    assert_eq!(p.fields, Fields::TwoTuple);
    assert!(p.ports_ignored);
    assert!(p.unreachable.is_empty(), "{:?}", p.unreachable);
    assert_eq!(p.assignments.len(), 64);
    for a in &p.assignments {
        assert_eq!((a.sport, a.dport), (1024, 443), "{a:?}");
    }
    verify(&cfg, &p);
    // Ports the hash covers are not "ignored".
    let tcp = plan(&cfg, &req("198.51.100.10", "192.0.2.1", Some("1024-65535"), Some("443"), proto::TCP, 64)).unwrap();
    assert!(!tcp.ports_ignored);
    assert_eq!(tcp.fields, Fields::FourTuple);
}

/// One source and one destination under a 2-tuple hash: one hash value, so
/// one bucket is served and every other one is unreachable for that reason.
#[test]
fn fixed_addresses_under_a_two_tuple_hash_reach_one_bucket() {
    let cfg = config(64, HashTypes::default());
    let p = plan(&cfg, &req("198.51.100.10/32", "192.0.2.1", Some("1024-65535"), Some("443"), proto::UDP, 64)).unwrap();
    assert!(p.ports_ignored);
    assert_eq!(p.free_bits, 0);
    assert_eq!(p.assignments.len(), 1);
    let a = p.assignments[0];
    assert_eq!((a.sport, a.dport), (1024, 443));
    verify(&cfg, &p);
    assert_eq!(p.unreachable.len(), 63);
    for (b, why) in &p.unreachable {
        assert_ne!(*b, a.bucket);
        assert!(why.contains("ignores ports") && why.contains("addresses are fixed"), "{why}");
        assert!(why.contains(&format!("(bucket {})", a.bucket.0)), "{why}");
    }
}
