//! RSS-spread flows, sans-IO: source ports chosen with the GF(2) planner
//! ([`flowsteer_plan::plan`], the solver behind `flowsteer plan`) so that
//! the flows of a trial land evenly on N receive queues of the device
//! under test's RSS configuration (key, hash types, indirection table).
//!
//! Flow `i` keeps its address (the last octet counts up from the first,
//! [`FlowSpec::src_addr`]) and gets a source port on which the
//! configuration's Toeplitz hash and RETA put it on queue `i % N`; so with
//! `flows` a multiple of N every queue carries `flows / N` flows, and
//! otherwise the counts differ by at most one. The planner runs once per
//! distinct source address, for the flows of that address.
//!
//! The frames stay what [`flowsteer_gen::frames::FrameSet`] builds (valid
//! checksums, the same stamp): only the source port per flow changes
//! ([`FlowSpec::src_ports`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use flowsteer_plan::plan::{plan, AddrRange, PlanError, PlanRequest, PortRange, DEFAULT_MAX_CANDIDATES};
use flowsteer_rss::{Fields, QueueId, RssConfig};
use flowsteer_wire::{proto, FlowTuple};

use flowsteer_gen::frames::FlowSpec;

/// The source ports the planner may use by default (the unprivileged ones).
pub const DEFAULT_SPORTS: PortRange = PortRange { lo: 1024, hi: 65535 };

/// Why the flows could not be spread.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpreadError {
    /// N was 0.
    #[error("spread over 0 queues: need at least 1")]
    NoQueues,
    /// N is more than the indirection table names.
    #[error("spread over {queues} queues: the indirection table names only {reta_queues}")]
    TooFewQueues { queues: u16, reta_queues: usize },
    /// Fewer flows than queues: some queue would get none.
    #[error("{flows} flow(s) cannot cover {queues} queues: need at least one flow per queue")]
    TooFewFlows { flows: u32, queues: u16 },
    /// The hash types leave the UDP ports out of the hash (or UDP unhashed):
    /// source ports cannot move a flow.
    #[error(
        "the hash types ({types}) do not hash UDP over {family} on its ports: source ports cannot choose the queue \
         (use hash types with udp4/udp6)"
    )]
    PortsNotHashed { types: String, family: &'static str },
    /// The planner refused the request.
    #[error("planner: {0}")]
    Plan(PlanError),
    /// The port range holds too few ports reaching a queue from an address.
    #[error("no source port in {lo}-{hi} from {src} lands on queue {queue}: {why}")]
    NoPort { lo: u16, hi: u16, src: IpAddr, queue: u16, why: String },
}

/// What to spread over: the device under test's RSS configuration, the
/// number of queues and the source ports allowed.
#[derive(Debug, Clone)]
pub struct SpreadSpec {
    /// Key, hash types and indirection table of the receiving port.
    pub config: RssConfig,
    /// Queues `0..queues` get the flows.
    pub queues: u16,
    /// Source ports the planner may use.
    pub sports: PortRange,
}

impl SpreadSpec {
    /// The source port of each flow of `spec` ([`spread_ports`]).
    pub fn ports(&self, spec: &FlowSpec) -> Result<Vec<u16>, SpreadError> {
        spread_ports(&self.config, spec, self.queues, self.sports)
    }
}

impl PartialEq for SpreadSpec {
    fn eq(&self, o: &SpreadSpec) -> bool {
        self.queues == o.queues
            && self.sports == o.sports
            && self.config.key().as_bytes() == o.config.key().as_bytes()
            && self.config.types == o.config.types
            && self.config.reta == o.config.reta
    }
}

impl serde::Serialize for SpreadSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("SpreadSpec", 5)?;
        st.serialize_field("queues", &self.queues)?;
        st.serialize_field("sports", &format!("{}-{}", self.sports.lo, self.sports.hi))?;
        st.serialize_field("hash_types", &self.config.types.to_string())?;
        st.serialize_field("reta_size", &self.config.reta.len())?;
        st.serialize_field(
            "key",
            &self.config.key().as_bytes().iter().map(|b| format!("{b:02x}")).collect::<String>(),
        )?;
        st.end()
    }
}

/// The queue flow `flow` of `spec` lands on under `config` (flowsteer-rss's
/// hash of its 4-tuple and the RETA).
pub fn queue_of(config: &RssConfig, spec: &FlowSpec, flow: u32) -> QueueId {
    let t = FlowTuple {
        src: spec.src_addr(flow),
        dst: spec.dst_ip,
        proto: proto::UDP,
        ports: Some((spec.sport(flow), spec.dst_port)),
    };
    config.place(&t, false).queue
}

/// A source port per flow of `spec` (`spec.src_ports` and `spec.src_port`
/// are ignored) such that flow `i` lands on queue `i % queues` of
/// `config`, taken from `sports`. Distinct flows of one address get
/// distinct ports.
pub fn spread_ports(
    config: &RssConfig,
    spec: &FlowSpec,
    queues: u16,
    sports: PortRange,
) -> Result<Vec<u16>, SpreadError> {
    if queues == 0 {
        return Err(SpreadError::NoQueues);
    }
    let reta_queues = config.queue_count();
    if usize::from(queues) > reta_queues {
        return Err(SpreadError::TooFewQueues { queues, reta_queues });
    }
    if spec.flows < u32::from(queues) {
        return Err(SpreadError::TooFewFlows { flows: spec.flows, queues });
    }
    let probe =
        FlowTuple { src: spec.src_ip, dst: spec.dst_ip, proto: proto::UDP, ports: Some((sports.lo, spec.dst_port)) };
    if config.types.fields_for(&probe, false) != Fields::FourTuple {
        let family = if spec.dst_ip.is_ipv4() { "IPv4" } else { "IPv6" };
        return Err(SpreadError::PortsNotHashed { types: config.types.to_string(), family });
    }
    let n = usize::from(queues);
    // Flows per source address, in flow order.
    let mut by_addr: BTreeMap<IpAddr, Vec<u32>> = BTreeMap::new();
    for f in 0..spec.flows {
        by_addr.entry(spec.src_addr(f)).or_default().push(f);
    }
    let mut ports = vec![0u16; spec.flows as usize];
    for (addr, flows) in by_addr {
        let mut need = vec![0usize; n];
        for &f in &flows {
            need[f as usize % n] += 1;
        }
        let req = PlanRequest {
            src: AddrRange::single(addr),
            dst: AddrRange::single(spec.dst_ip),
            sport: Some(sports),
            dport: Some(PortRange { lo: spec.dst_port, hi: spec.dst_port }),
            proto: proto::UDP,
            buckets: (0..queues).map(QueueId).collect(),
            per_bucket: need.iter().copied().max().unwrap_or(0),
            max_candidates: DEFAULT_MAX_CANDIDATES,
        };
        let p = plan(config, &req).map_err(SpreadError::Plan)?;
        let mut pool: Vec<Vec<u16>> = vec![Vec::new(); n];
        for a in &p.assignments {
            if let Some(v) = pool.get_mut(usize::from(a.bucket.0)) {
                if !v.contains(&a.sport) {
                    v.push(a.sport);
                }
            }
        }
        for (q, v) in pool.iter().enumerate() {
            if v.len() < need[q] {
                let why = p
                    .unreachable
                    .iter()
                    .find(|(b, _)| usize::from(b.0) == q)
                    .map_or_else(|| "too few solutions".to_string(), |(_, w)| w.clone());
                return Err(SpreadError::NoPort { lo: sports.lo, hi: sports.hi, src: addr, queue: q as u16, why });
            }
        }
        let mut taken = vec![0usize; n];
        for &f in &flows {
            let q = f as usize % n;
            ports[f as usize] = pool[q][taken[q]];
            taken[q] += 1;
        }
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_gen::frames::{FrameSet, FrameSize};
    use flowsteer_rss::{HashTypes, Reta, RssKey};
    use flowsteer_wire::{parse_frame, LinkType, ParseOptions};

    fn spec(v6: bool, flows: u32) -> FlowSpec {
        let (s, d): (IpAddr, IpAddr) = if v6 {
            ("fd00:2544::100".parse().unwrap(), "fd00:2544::2".parse().unwrap())
        } else {
            ("198.18.0.1".parse().unwrap(), "198.19.0.2".parse().unwrap())
        };
        FlowSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: s,
            dst_ip: d,
            src_port: 1024,
            dst_port: 25440,
            flows,
            src_ports: Vec::new(),
            stream_base: 0,
            src_addrs: Vec::new(),
        }
    }

    fn config(types: &str, queues: usize) -> RssConfig {
        RssConfig::new(RssKey::microsoft(), HashTypes::parse(types).unwrap(), Reta::round_robin(128, queues).unwrap())
    }

    /// The queue of each built frame, by parsing it and hashing its tuple.
    fn frame_queues(c: &RssConfig, spec: &FlowSpec) -> Vec<u16> {
        let set = FrameSet::new(spec, FrameSize::Fixed(if spec.src_ip.is_ipv6() { 128 } else { 64 })).unwrap();
        (0..spec.flows)
            .map(|seq| {
                let t = set.template(seq);
                let mut buf = vec![0u8; t.len()];
                t.write(&mut buf, seq, 0);
                let p = parse_frame(&buf, LinkType::Ethernet, &ParseOptions::default()).unwrap();
                c.place(&p.outer.unwrap().tuple, false).queue.0
            })
            .collect()
    }

    #[test]
    fn flows_cover_every_queue_evenly_under_the_default_key_and_reta() {
        for v6 in [false, true] {
            for (queues, flows) in [(1u16, 3u32), (2, 16), (4, 16), (8, 64), (16, 16), (4, 1000)] {
                let c = config("all", 16);
                let mut s = spec(v6, flows);
                s.src_ports = spread_ports(&c, &s, queues, DEFAULT_SPORTS).unwrap();
                let per_queue = |qs: &[u16]| {
                    let mut v = vec![0u32; usize::from(queues)];
                    for &q in qs {
                        v[usize::from(q)] += 1;
                    }
                    v
                };
                let got = frame_queues(&c, &s);
                let counts = per_queue(&got);
                let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                assert!(*lo > 0 && hi - lo <= 1, "v6 {v6} {queues} queues, {flows} flows: {counts:?}");
                if flows % u32::from(queues) == 0 {
                    assert!(counts.iter().all(|&n| n == flows / u32::from(queues)), "{counts:?}");
                }
                for f in 0..flows {
                    assert_eq!(u32::from(got[f as usize]), f % u32::from(queues));
                    assert_eq!(queue_of(&c, &s, f).0, got[f as usize]);
                }
                // Distinct tuples: no two flows share (address, port).
                let mut tuples: Vec<_> = (0..flows).map(|f| (s.src_addr(f), s.sport(f))).collect();
                tuples.sort();
                tuples.dedup();
                assert_eq!(tuples.len(), flows as usize);
            }
        }
    }

    #[test]
    fn the_plain_ports_do_not_spread() {
        // Without planning, 16 flows on 4 of 16 queues do not follow f % 4:
        // the planner is what makes the test above pass.
        let c = config("all", 16);
        let s = spec(false, 16);
        let got = frame_queues(&c, &s);
        assert!((0..16u16).any(|f| got[usize::from(f)] != f % 4), "{got:?}");
    }

    #[test]
    fn bad_requests_are_refused_with_a_reason() {
        let c = config("all", 4);
        let s = spec(false, 8);
        assert_eq!(spread_ports(&c, &s, 0, DEFAULT_SPORTS), Err(SpreadError::NoQueues));
        assert_eq!(
            spread_ports(&c, &s, 5, DEFAULT_SPORTS),
            Err(SpreadError::TooFewQueues { queues: 5, reta_queues: 4 })
        );
        assert_eq!(
            spread_ports(&c, &spec(false, 2), 4, DEFAULT_SPORTS),
            Err(SpreadError::TooFewFlows { flows: 2, queues: 4 })
        );
        let two = config("default", 4);
        let e = spread_ports(&two, &s, 4, DEFAULT_SPORTS).unwrap_err();
        assert!(matches!(e, SpreadError::PortsNotHashed { .. }), "{e}");
        let one = PortRange { lo: 5000, hi: 5000 };
        assert!(matches!(spread_ports(&c, &s, 4, one), Err(SpreadError::NoPort { .. } | SpreadError::Plan(_))));
    }
}
