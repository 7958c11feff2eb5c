//! Choosing the generator's flows: plain (ephemeral source ports over the
//! local addresses) or spread over N receive queues of the receiver's RSS
//! configuration with the GF(2) planner ([`flowsteer_plan::plan`]).
//!
//! When the receiver hashes UDP on the 4-tuple, the planner picks source
//! ports; when it hashes UDP on addresses only (the default of most NICs),
//! ports do not matter and the local addresses (`-l`) must already land in
//! the wanted queues, so they are sorted by their placement.

use flowsteer_plan::plan::{plan, AddrRange, PlanError, PlanRequest, PortRange, DEFAULT_MAX_CANDIDATES};
use flowsteer_rss::{Fields, HashInput, HashTypes, QueueId, RssConfig};
use flowsteer_wire::{proto, FlowTuple};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};

/// Most flows one generator runs (one socket and one poll slot each).
pub const MAX_FLOWS: usize = 4096;
/// Source-port candidates planned per flow, so a port already in use can be
/// replaced by another that lands in the same queue.
pub const PORT_CANDIDATES: usize = 4;

/// Why flows could not be chosen. Each message names the option to change.
#[derive(Debug, thiserror::Error)]
pub enum SpreadError {
    #[error("--flows must be at least 1")]
    NoFlows,
    #[error("--flows {0}: at most {MAX_FLOWS} flows per generator (run several)")]
    TooManyFlows(usize),
    #[error("local address {local} and remote {remote} are of different families")]
    FamilyMismatch { local: IpAddr, remote: IpAddr },
    #[error("--spread needs the local address(es) the flows are sent from")]
    NoLocals,
    #[error("--spread needs concrete local addresses, not {0}")]
    UnspecifiedLocal(IpAddr),
    #[error(
        "--spread: local address {0} equals the remote; the planner needs distinct addresses (on loopback send from \
         127.0.0.2)"
    )]
    LocalIsRemote(IpAddr),
    #[error("--spread must be at least 1")]
    NoQueues,
    #[error("--spread {buckets}: the receiver's indirection table names only {queues} queue(s) (raise --queues)")]
    TooFewQueues { buckets: u16, queues: usize },
    #[error("--flows {flows} < --spread {buckets}: need at least one flow per queue")]
    TooFewFlows { flows: usize, buckets: u16 },
    /// The hash types leave UDP over this family unhashed.
    #[error(
        "the receiver's hash types ({types}) do not cover UDP over {}: every flow lands on one queue",
        if *.ipv4 { "IPv4" } else { "IPv6" }
    )]
    NotHashed { types: HashTypes, ipv4: bool },
    #[error("--spread: {0}")]
    Plan(PlanError),
    /// No planned source port from `local` reaches `queue` (`why`: the
    /// planner's reason).
    #[error("--spread: no source port in {}-{} from {local} lands on queue {queue}: {why}", .ports.lo, .ports.hi)]
    NoPort { ports: PortRange, local: IpAddr, queue: QueueId, why: String },
    /// The receiver hashes UDP on addresses only and the local addresses
    /// miss queue `missing` (`placed`: each address and its queue).
    #[error(
        "--spread {buckets}: the receiver hashes UDP on addresses only (hash types {types}), so source ports do not \
         matter, and the local addresses reach {reached} of queues 0..{} (none lands on queue {missing}; {}); add \
         local addresses (-l) found with `flowsteer plan --src-net PREFIX --dst {remote} --buckets {buckets}`, or use \
         --hash-types with udp4/udp6 if the NIC hashes UDP ports",
        .buckets - 1,
        placed_list(.placed)
    )]
    AddressesMissQueue {
        buckets: u16,
        types: HashTypes,
        reached: usize,
        missing: QueueId,
        placed: Vec<(IpAddr, QueueId)>,
        remote: IpAddr,
    },
}

fn placed_list(placed: &[(IpAddr, QueueId)]) -> String {
    placed.iter().map(|(local, q)| format!("{local} -> queue {}", q.0)).collect::<Vec<_>>().join(", ")
}

/// A flow's queue as its number (the JSON field stays a plain integer).
fn queue_number<S: serde::Serializer>(q: &Option<QueueId>, s: S) -> Result<S::Ok, S::Error> {
    q.map(u16::from).serialize(s)
}

/// One flow: a connected socket from `local` (port 0 = ephemeral) to
/// `remote`. With `--spread`, the queue the receiver's RSS puts it on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowSpec {
    pub id: u32,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// Predicted receive queue, CPU and hash under the receiver's RSS.
    #[serde(serialize_with = "queue_number")]
    pub queue: Option<QueueId>,
    pub cpu: Option<u32>,
    pub hash: Option<u32>,
    /// Further source ports landing in the same queue, tried in order when
    /// `local`'s port is taken.
    #[serde(skip)]
    pub alt_ports: Vec<u16>,
}

fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
    }
}

fn check_common(locals: &[IpAddr], remote: SocketAddr, flows: usize) -> Result<(), SpreadError> {
    if flows == 0 {
        return Err(SpreadError::NoFlows);
    }
    if flows > MAX_FLOWS {
        return Err(SpreadError::TooManyFlows(flows));
    }
    if let Some(&local) = locals.iter().find(|l| l.is_ipv4() != remote.is_ipv4()) {
        return Err(SpreadError::FamilyMismatch { local, remote: remote.ip() });
    }
    Ok(())
}

/// `flows` flows over the local addresses round robin, ephemeral source
/// ports; no local address means the wildcard (routing picks the source).
pub fn plain_flows(locals: &[IpAddr], remote: SocketAddr, flows: usize) -> Result<Vec<FlowSpec>, SpreadError> {
    check_common(locals, remote, flows)?;
    let any = [unspecified(remote.is_ipv6())];
    let locals = if locals.is_empty() { &any[..] } else { locals };
    Ok((0..flows)
        .map(|f| FlowSpec {
            id: f as u32,
            local: SocketAddr::new(locals[f % locals.len()], 0),
            remote,
            queue: None,
            cpu: None,
            hash: None,
            alt_ports: Vec::new(),
        })
        .collect())
}

/// `flows` flows spread over queues `0..buckets` of `config` (flow `f` goes
/// to queue `f % buckets`), from the given local addresses (they must be
/// concrete; see [`crate::client::route_source`] for the default). Source
/// ports come from `sports` when the receiver hashes UDP on the 4-tuple.
pub fn spread_flows(
    config: &RssConfig,
    locals: &[IpAddr],
    remote: SocketAddr,
    buckets: u16,
    flows: usize,
    sports: PortRange,
) -> Result<Vec<FlowSpec>, SpreadError> {
    check_common(locals, remote, flows)?;
    if locals.is_empty() {
        return Err(SpreadError::NoLocals);
    }
    if let Some(&l) = locals.iter().find(|l| l.is_unspecified()) {
        return Err(SpreadError::UnspecifiedLocal(l));
    }
    if locals.contains(&remote.ip()) {
        return Err(SpreadError::LocalIsRemote(remote.ip()));
    }
    let queues = config.queue_count();
    if buckets == 0 {
        return Err(SpreadError::NoQueues);
    }
    if usize::from(buckets) > queues {
        return Err(SpreadError::TooFewQueues { buckets, queues });
    }
    if flows < usize::from(buckets) {
        return Err(SpreadError::TooFewFlows { flows, buckets });
    }
    let n = usize::from(buckets);
    let probe =
        FlowTuple { src: locals[0], dst: remote.ip(), proto: proto::UDP, ports: Some((sports.lo, remote.port())) };
    let fields = config.types.fields_for(&probe, false);
    // flow f -> (queue f % n, local (f / n) % L)
    let slot_of = |f: usize| (f % n, (f / n) % locals.len());
    let mut out = Vec::with_capacity(flows);
    match fields {
        Fields::None => Err(SpreadError::NotHashed { types: config.types, ipv4: remote.is_ipv4() }),
        Fields::FourTuple => {
            // Flows needed per (local, queue).
            let mut need = vec![vec![0usize; n]; locals.len()];
            for f in 0..flows {
                let (q, l) = slot_of(f);
                need[l][q] += 1;
            }
            // Per local: candidate ports for every queue.
            let mut pools: Vec<Vec<Vec<(u16, u32)>>> = Vec::with_capacity(locals.len());
            for (li, &local) in locals.iter().enumerate() {
                let per_bucket = need[li].iter().copied().max().unwrap_or(0) * PORT_CANDIDATES;
                let mut pool = vec![Vec::new(); n];
                if per_bucket == 0 {
                    pools.push(pool);
                    continue;
                }
                let req = PlanRequest {
                    src: AddrRange::single(local),
                    dst: AddrRange::single(remote.ip()),
                    sport: Some(sports),
                    dport: Some(PortRange { lo: remote.port(), hi: remote.port() }),
                    proto: proto::UDP,
                    buckets: (0..buckets).map(QueueId).collect(),
                    per_bucket,
                    max_candidates: DEFAULT_MAX_CANDIDATES,
                };
                let p = plan(config, &req).map_err(SpreadError::Plan)?;
                for a in &p.assignments {
                    pool[usize::from(a.bucket.0)].push((a.sport, a.hash));
                }
                for (q, cands) in pool.iter().enumerate() {
                    if cands.len() < need[li][q] {
                        let why = p
                            .unreachable
                            .iter()
                            .find(|(b, _)| usize::from(b.0) == q)
                            .map_or("too few solutions".to_string(), |(_, w)| w.clone());
                        return Err(SpreadError::NoPort { ports: sports, local, queue: QueueId(q as u16), why });
                    }
                }
                pools.push(pool);
            }
            // Hand out disjoint chunks of candidates.
            let mut taken = vec![vec![0usize; n]; locals.len()];
            for f in 0..flows {
                let (q, l) = slot_of(f);
                let pool = &pools[l][q];
                let share = (pool.len() / need[l][q]).max(1);
                let start = taken[l][q] * share;
                taken[l][q] += 1;
                let chunk = &pool[start..(start + share).min(pool.len())];
                let (port, hash) = chunk[0];
                out.push(FlowSpec {
                    id: f as u32,
                    local: SocketAddr::new(locals[l], port),
                    remote,
                    queue: Some(QueueId(q as u16)),
                    cpu: Some(config.cpu_for(QueueId(q as u16)).0),
                    hash: Some(hash),
                    alt_ports: chunk[1..].iter().map(|c| c.0).collect(),
                });
            }
            Ok(out)
        }
        Fields::TwoTuple => {
            // Ports do not enter the hash: sort the local addresses by queue.
            let mut by_queue: Vec<Vec<(IpAddr, u32)>> = vec![Vec::new(); n];
            let mut placed = Vec::new();
            for &local in locals {
                let p = config.place_input(&HashInput::build(local, remote.ip(), None));
                placed.push((local, p.queue));
                if p.queue.index() < n {
                    by_queue[p.queue.index()].push((local, p.hash));
                }
            }
            if let Some(q) = by_queue.iter().position(Vec::is_empty) {
                let reached = by_queue.iter().filter(|v| !v.is_empty()).count();
                return Err(SpreadError::AddressesMissQueue {
                    buckets,
                    types: config.types,
                    reached,
                    missing: QueueId(q as u16),
                    placed,
                    remote: remote.ip(),
                });
            }
            for f in 0..flows {
                let q = f % n;
                let list = &by_queue[q];
                let (local, hash) = list[(f / n) % list.len()];
                out.push(FlowSpec {
                    id: f as u32,
                    local: SocketAddr::new(local, 0),
                    remote,
                    queue: Some(QueueId(q as u16)),
                    cpu: Some(config.cpu_for(QueueId(q as u16)).0),
                    hash: Some(hash),
                    alt_ports: Vec::new(),
                });
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_rss::{HashTypes, Reta, RssKey};
    use std::collections::{BTreeSet, HashSet};

    fn cfg(queues: usize, types: &str) -> RssConfig {
        RssConfig::new(RssKey::microsoft(), HashTypes::parse(types).unwrap(), Reta::round_robin(128, queues).unwrap())
    }

    fn place(c: &RssConfig, f: &FlowSpec) -> u16 {
        let t = FlowTuple {
            src: f.local.ip(),
            dst: f.remote.ip(),
            proto: proto::UDP,
            ports: Some((f.local.port(), f.remote.port())),
        };
        c.place(&t, false).queue.0
    }

    #[test]
    fn planned_ports_hit_n_distinct_queues() {
        let c = cfg(8, "all");
        let remote: SocketAddr = "10.0.0.2:9000".parse().unwrap();
        let local: IpAddr = "10.0.0.1".parse().unwrap();
        for n in [1u16, 2, 4, 8] {
            let flows = usize::from(n) * 3;
            let specs = spread_flows(&c, &[local], remote, n, flows, PortRange { lo: 1024, hi: 65535 }).unwrap();
            assert_eq!(specs.len(), flows);
            let queues: BTreeSet<u16> = specs.iter().map(|f| place(&c, f)).collect();
            assert_eq!(queues, (0..n).collect(), "n = {n}");
            let mut ports = HashSet::new();
            for f in &specs {
                // The prediction is what the independent placement says, and the alternatives land there too.
                assert_eq!(Some(place(&c, f)), f.queue.map(u16::from));
                assert_eq!(f.queue, Some(QueueId((f.id % u32::from(n)) as u16)));
                assert!((1024..=65535).contains(&f.local.port()));
                assert!(ports.insert(f.local.port()), "port {} used twice", f.local.port());
                for &p in &f.alt_ports {
                    assert!(ports.insert(p), "alternative port {p} shared");
                    let alt = FlowSpec { local: SocketAddr::new(local, p), ..f.clone() };
                    assert_eq!(Some(place(&c, &alt)), f.queue.map(u16::from));
                }
            }
        }
    }

    #[test]
    fn two_tuple_hashing_sorts_local_addresses_or_explains() {
        let c = cfg(2, "default"); // UDP on the 2-tuple
        let remote: SocketAddr = "10.0.0.2:9000".parse().unwrap();
        let locals: Vec<IpAddr> = (1..=40).map(|i| format!("10.0.1.{i}").parse().unwrap()).collect();
        let specs = spread_flows(&c, &locals, remote, 2, 6, PortRange { lo: 1024, hi: 65535 }).unwrap();
        let queues: BTreeSet<u16> = specs.iter().map(|f| place(&c, f)).collect();
        assert_eq!(queues, [0, 1].into());
        assert!(specs.iter().all(|f| f.local.port() == 0 && Some(place(&c, f)) == f.queue.map(u16::from)));
        // One address reaches one queue only: the error says why and what to do.
        let e =
            spread_flows(&c, &locals[..1], remote, 2, 2, PortRange { lo: 1024, hi: 65535 }).unwrap_err().to_string();
        assert!(e.contains("addresses only") && e.contains("flowsteer plan"), "{e}");
        assert!(e.contains("of queues 0..1 (none lands on queue 1; 10.0.1.1 -> queue 0); add local"), "{e}");
    }

    #[test]
    fn bad_requests_are_refused() {
        let c = cfg(4, "all");
        let remote: SocketAddr = "10.0.0.2:9000".parse().unwrap();
        let l: IpAddr = "10.0.0.1".parse().unwrap();
        let r = PortRange { lo: 1024, hi: 65535 };
        let refused = |locals: &[IpAddr], buckets, flows, ports| {
            spread_flows(&c, locals, remote, buckets, flows, ports).unwrap_err().to_string()
        };
        assert!(refused(&[l], 5, 5, r).contains("4 queue"));
        assert!(refused(&[l], 4, 3, r).contains("at least one flow"));
        assert!(refused(&["::1".parse().unwrap()], 2, 2, r).contains("famil"));
        // A single port cannot serve 4 queues.
        let one = PortRange { lo: 5000, hi: 5000 };
        assert!(
            refused(&[l], 4, 4, one).starts_with("--spread: no source port in 5000-5000 from 10.0.0.1 lands on queue")
        );
        let plain = plain_flows(&[], remote, 3).unwrap();
        assert!(plain.iter().all(|f| f.local == "0.0.0.0:0".parse().unwrap()));
    }
}
