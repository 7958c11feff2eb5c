//! The tuple planner: addresses and ports that land on chosen queues, found by
//! solving the Toeplitz equations over GF(2).
//!
//! The Toeplitz hash is linear over GF(2): `H(a ^ b) = H(a) ^ H(b)`. Split the
//! input into a fixed part `f` (the network address, the fixed ports) and the
//! free bits `v` (host bits of a prefix, the low bits of a port range). Then
//! `H(f ^ v) = H(f) ^ sum(v_p * W_p)`, where `W_p` is the 32-bit key window at
//! input bit `p`. The queue depends only on a few hash bits (the low
//! `log2(RETA size)` bits for a RETA; the top `log2(n)` bits for RPS
//! scaling), so landing on RETA entry `i` is the linear system
//! `A v = i ^ H(f)` restricted to those bits. We reduce the columns `W_p`
//! into an XOR basis (Gaussian elimination), read off one particular solution
//! and the null space, and walk the solution space in Gray-code order,
//! keeping the tuples that also satisfy the non-linear constraints (port
//! ranges, no network/broadcast address, source != destination). Free bits
//! are added low-order first, so the first solutions have the smallest host
//! and port values.
//!
//! When the free bits span fewer dimensions than the bucket bits, some
//! buckets cannot be reached at all; [`Plan::unreachable`] says which, and
//! why.

use flowsteer_rss::config::RssConfig;
use flowsteer_rss::hashtype::{Fields, HashInput};
use flowsteer_rss::reta::{Mapping, QueueId};
use flowsteer_rss::toeplitz::key_window;
use flowsteer_wire::FlowTuple;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Most solutions examined per RETA entry before giving up on constraints.
pub const DEFAULT_MAX_CANDIDATES: u64 = 1 << 20;
/// Most tuples one plan may return.
pub const MAX_ASSIGNMENTS: usize = 1 << 20;

/// An address prefix: `10.11.2.0/24`, `2001:db8::/64`, or one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrRange {
    pub base: IpAddr,
    pub prefix: u8,
}

impl AddrRange {
    pub fn single(addr: IpAddr) -> AddrRange {
        AddrRange { base: addr, prefix: width(addr) as u8 }
    }

    fn host_bits(&self) -> u32 {
        width(self.base) - u32::from(self.prefix)
    }

    fn network(&self) -> u128 {
        let v = addr_bits(self.base);
        let host = self.host_bits();
        if host >= 128 {
            0
        } else {
            v & !((1u128 << host) - 1)
        }
    }
}

/// Why an address or port range was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// Not an IPv4 or IPv6 address.
    #[error("'{0}' is not an IP address")]
    NotAnAddress(String),
    /// The text after `/` is not a prefix length up to `max`.
    #[error("'/{text}' is not a prefix length 0..={max}")]
    BadPrefix { text: String, max: u32 },
    /// Not a port number.
    #[error("'{0}' is not a port number 0..=65535")]
    NotAPort(String),
    /// `lo` above `hi`.
    #[error("port range {lo}-{hi} is empty")]
    EmptyPorts { lo: u16, hi: u16 },
}

impl FromStr for AddrRange {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, RangeError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let base: IpAddr = addr.trim().parse().map_err(|_| RangeError::NotAnAddress(addr.to_string()))?;
        let max = width(base);
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| RangeError::BadPrefix { text: p.to_string(), max })?,
        };
        Ok(AddrRange { base, prefix: prefix as u8 })
    }
}

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

/// An inclusive port range: `8080` or `1024-65535`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl FromStr for PortRange {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, RangeError> {
        let parse = |p: &str| p.trim().parse::<u16>().map_err(|_| RangeError::NotAPort(p.to_string()));
        let (lo, hi) = match s.split_once(['-', ':']) {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => {
                let p = parse(s)?;
                (p, p)
            }
        };
        if lo > hi {
            return Err(RangeError::EmptyPorts { lo, hi });
        }
        Ok(PortRange { lo, hi })
    }
}

/// What to plan.
#[derive(Clone, Debug)]
pub struct PlanRequest {
    pub src: AddrRange,
    pub dst: AddrRange,
    pub sport: Option<PortRange>,
    pub dport: Option<PortRange>,
    /// IP protocol (TCP or UDP decide the hash type).
    pub proto: u8,
    /// Queues to find tuples for.
    pub buckets: Vec<QueueId>,
    /// Tuples wanted per queue.
    pub per_bucket: usize,
    /// Solutions examined per RETA entry at most.
    pub max_candidates: u64,
}

/// One planned tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub bucket: QueueId,
    pub reta_index: Option<usize>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub hash: u32,
}

/// The result: tuples per bucket and, for buckets that could not be served,
/// the reason.
#[derive(Clone, Debug)]
pub struct Plan {
    pub fields: Fields,
    /// Free input bits (host bits and port-range bits that enter the hash).
    pub free_bits: usize,
    /// Hash bits that decide the queue.
    pub bucket_bits: u32,
    /// Rank of the system: `2^rank` of the `2^bucket_bits` entries are reachable.
    pub rank: u32,
    pub assignments: Vec<Assignment>,
    /// Buckets with fewer than `per_bucket` tuples, with the reason.
    pub unreachable: Vec<(QueueId, String)>,
    /// Ports were given but the hash types hash this protocol on the
    /// 2-tuple: ports do not pick the bucket, each tuple carries the first
    /// port of each range (any port of the range lands alike), and only the
    /// address bits are free.
    pub ports_ignored: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    FamilyMismatch,
    NoBuckets,
    BucketOutOfRange { bucket: u16, queues: usize },
    PortsNeeded(String),
    NotHashed,
    RpsNeedsPowerOfTwo { queues: usize },
    TooMany { requested: usize },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::FamilyMismatch => write!(f, "source and destination must both be IPv4 or both IPv6"),
            PlanError::NoBuckets => write!(f, "no buckets to plan for"),
            PlanError::BucketOutOfRange { bucket, queues } => {
                write!(f, "bucket {bucket} does not exist: the indirection table names {queues} queues")
            }
            PlanError::PortsNeeded(why) => write!(f, "{why}"),
            PlanError::NotHashed => {
                write!(f, "no enabled hash type covers this protocol and family: every tuple gets hash 0")
            }
            PlanError::RpsNeedsPowerOfTwo { queues } => {
                write!(f, "planning under RPS scaling needs a power-of-two queue count ({queues} given)")
            }
            PlanError::TooMany { requested } => {
                write!(f, "{requested} tuples requested; at most {MAX_ASSIGNMENTS} per plan")
            }
        }
    }
}

impl std::error::Error for PlanError {}

/// A free variable: one bit of one field.
#[derive(Clone, Copy, Debug)]
struct Var {
    field: Field,
    /// Bit of the field's value (0 = least significant).
    bit: u32,
    /// Position of that bit in the hash input (0 = MSB of byte 0).
    pos: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Src,
    Dst,
    Sport,
    Dport,
}

/// A bitset over the free variables (at most 288: two IPv6 addresses and two
/// ports).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct VarSet([u64; 5]);

impl VarSet {
    fn flip(&mut self, i: usize) {
        self.0[i / 64] ^= 1 << (i % 64);
    }
    fn xor(&mut self, o: &VarSet) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a ^= b;
        }
    }
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
}

/// Plan tuples for `req` under `config`.
pub fn plan(config: &RssConfig, req: &PlanRequest) -> Result<Plan, PlanError> {
    let v6 = match (req.src.base, req.dst.base) {
        (IpAddr::V4(_), IpAddr::V4(_)) => false,
        (IpAddr::V6(_), IpAddr::V6(_)) => true,
        _ => return Err(PlanError::FamilyMismatch),
    };
    if req.buckets.is_empty() || req.per_bucket == 0 {
        return Err(PlanError::NoBuckets);
    }
    let requested = req.buckets.len().saturating_mul(req.per_bucket);
    if requested > MAX_ASSIGNMENTS {
        return Err(PlanError::TooMany { requested });
    }
    let queues = config.queue_count();
    if let Some(b) = req.buckets.iter().find(|b| usize::from(b.0) >= queues) {
        return Err(PlanError::BucketOutOfRange { bucket: b.0, queues });
    }

    // Which fields does the hash cover for this protocol?
    let probe = FlowTuple {
        src: req.src.base,
        dst: req.dst.base,
        proto: req.proto,
        ports: Some((req.sport.map_or(0, |p| p.lo), req.dport.map_or(0, |p| p.lo))),
    };
    let fields = config.types.fields_for(&probe, false);
    match fields {
        Fields::None => return Err(PlanError::NotHashed),
        Fields::FourTuple if req.sport.is_none() || req.dport.is_none() => {
            return Err(PlanError::PortsNeeded(format!(
                "the hash types in use ({}) hash this protocol on the 4-tuple: give the source port (--sport or --sport-range) and the destination port (--dport)",
                config.types
            )))
        }
        _ => {}
    }
    let four = fields == Fields::FourTuple;
    let ports_ignored = !four && (req.sport.is_some() || req.dport.is_some());

    // Free variables, low-order bits first.
    let alen = if v6 { 16 } else { 4 };
    let aw = 8 * alen as u32;
    let mut vars = Vec::new();
    let push_field = |field: Field, free: u32, width: u32, byte_off: usize, vars: &mut Vec<Var>| {
        for bit in 0..free {
            vars.push(Var { field, bit, pos: 8 * byte_off + (width - 1 - bit) as usize });
        }
    };
    let port_free = |r: Option<PortRange>| r.map_or(0, |r| 16 - (r.lo ^ r.hi).leading_zeros());
    if four {
        push_field(Field::Sport, port_free(req.sport), 16, 2 * alen, &mut vars);
    }
    push_field(Field::Src, req.src.host_bits(), aw, 0, &mut vars);
    if four {
        push_field(Field::Dport, port_free(req.dport), 16, 2 * alen + 2, &mut vars);
    }
    push_field(Field::Dst, req.dst.host_bits(), aw, alen, &mut vars);

    // Which hash bits pick the queue, and the target value for each entry.
    let (mask, targets): (u32, Vec<(QueueId, Option<usize>, u32)>) = match config.mapping {
        Mapping::Reta => {
            let len = config.reta.len();
            let mask = (len - 1) as u32;
            let mut t = Vec::new();
            for &b in &req.buckets {
                for (i, q) in config.reta.entries().iter().enumerate() {
                    if *q == b {
                        t.push((b, Some(i), i as u32));
                    }
                }
            }
            (mask, t)
        }
        Mapping::RpsScale => {
            if !queues.is_power_of_two() {
                return Err(PlanError::RpsNeedsPowerOfTwo { queues });
            }
            let k = queues.trailing_zeros();
            let mask = if k == 0 { 0 } else { u32::MAX << (32 - k) };
            let t =
                req.buckets.iter().map(|&b| (b, None, if k == 0 { 0 } else { u32::from(b.0) << (32 - k) })).collect();
            (mask, t)
        }
    };

    // Base input (variables zero) and its hash. Ports the hash covers
    // start with their free bits cleared; ports it ignores are the first of
    // their range.
    let base_src = req.src.network();
    let base_dst = req.dst.network();
    let base_port = |r: Option<PortRange>| match r {
        Some(r) if four => r.lo & !low_mask16(port_free(Some(r))),
        Some(r) => r.lo,
        None => 0,
    };
    let (base_sport, base_dport) = (base_port(req.sport), base_port(req.dport));
    let base_input = HashInput::build(
        to_addr(base_src, v6),
        to_addr(base_dst, v6),
        if four { Some((base_sport, base_dport)) } else { None },
    );
    let key = config.key().as_bytes();
    let base_hash = config.hasher().hash(base_input.as_bytes());

    // XOR basis over the masked key windows, tracking which variables make
    // each basis vector.
    let mut basis: Vec<(u32, VarSet)> = Vec::new(); // kept with distinct leading bits
    let mut free: Vec<VarSet> = Vec::new(); // null-space vectors
    for (i, var) in vars.iter().enumerate() {
        let mut col = key_window(key, var.pos) & mask;
        let mut rep = VarSet::default();
        rep.flip(i);
        for (b, r) in &basis {
            if col ^ b < col {
                col ^= b;
                rep.xor(r);
            }
        }
        if col == 0 {
            free.push(rep);
        } else {
            basis.push((col, rep));
            basis.sort_by_key(|b| std::cmp::Reverse(b.0));
        }
    }
    let rank = basis.len() as u32;
    let bucket_bits = mask.count_ones();

    let mut assignments = Vec::new();
    let mut unreachable = Vec::new();
    for &bucket in &req.buckets {
        // Up to `per_bucket` solutions from every table entry of the bucket,
        // then the smallest tuples overall, so plans read naturally.
        let mut found_here: Vec<Assignment> = Vec::new();
        let mut unreachable_entries = 0usize;
        let mut entries = 0usize;
        for &(_, reta_index, target) in targets.iter().filter(|t| t.0 == bucket) {
            entries += 1;
            // Particular solution.
            let mut want = (target ^ base_hash) & mask;
            let mut sol = VarSet::default();
            for (b, r) in &basis {
                if want ^ b < want {
                    want ^= b;
                    sol.xor(r);
                }
            }
            if want != 0 {
                unreachable_entries += 1;
                continue;
            }
            // Walk the solution space in Gray-code order.
            let limit =
                if free.len() >= 64 { req.max_candidates } else { (1u64 << free.len()).min(req.max_candidates) };
            let mut cur = sol;
            let mut from_entry = 0usize;
            for step in 0..limit {
                if step > 0 {
                    let flip = step.trailing_zeros() as usize;
                    cur.xor(&free[flip]);
                }
                let Some(a) = decode(req, &vars, &cur, v6, (base_src, base_dst, base_sport, base_dport)) else {
                    continue;
                };
                let tuple = FlowTuple { src: a.2, dst: a.3, proto: req.proto, ports: Some((a.0, a.1)) };
                let placed = config.place(&tuple, false);
                // Self-check against the configuration (and thus the hasher).
                if placed.queue != bucket || placed.reta_index != reta_index {
                    continue;
                }
                found_here.push(Assignment {
                    bucket,
                    reta_index: placed.reta_index,
                    src: a.2,
                    dst: a.3,
                    sport: a.0,
                    dport: a.1,
                    hash: placed.hash,
                });
                from_entry += 1;
                if from_entry >= req.per_bucket {
                    break;
                }
            }
        }
        found_here.sort_by_key(|a| (addr_bits(a.src), addr_bits(a.dst), a.sport, a.dport));
        found_here.truncate(req.per_bucket);
        let found = found_here.len();
        assignments.extend(found_here);
        if found < req.per_bucket {
            let why = if entries > 0 && unreachable_entries == entries && ports_ignored && vars.is_empty() {
                let only = config.place_hash(base_hash, fields).queue;
                format!(
                    "not reachable: the hash ignores ports here (2-tuple) and the source and destination addresses are fixed, so every tuple hashes to 0x{base_hash:08x} (bucket {only})"
                )
            } else if entries > 0 && unreachable_entries == entries && ports_ignored {
                format!(
                    "not reachable: the hash ignores ports here (2-tuple) and the {} free address bits reach only {} of {} hash values, none of this bucket's {entries} table entries",
                    vars.len(),
                    1u64 << rank,
                    1u64 << bucket_bits
                )
            } else if entries > 0 && unreachable_entries == entries {
                format!(
                    "no solution: the {} free bits span only {rank} of the {bucket_bits} bucket bits, so {} of {} hash values are reachable and none of this bucket's {entries} table entries is among them",
                    vars.len(),
                    1u64 << rank,
                    1u64 << bucket_bits
                )
            } else if entries == 0 {
                "no indirection-table entry points at this bucket".to_string()
            } else {
                format!(
                    "only {found} of {} tuples satisfy the address/port constraints (searched up to {} solutions per table entry)",
                    req.per_bucket, req.max_candidates
                )
            };
            unreachable.push((bucket, why));
        }
    }
    Ok(Plan { fields, free_bits: vars.len(), bucket_bits, rank, assignments, unreachable, ports_ignored })
}

/// Turn a variable assignment into (sport, dport, src, dst), or `None` when
/// it breaks a non-linear constraint.
fn decode(
    req: &PlanRequest,
    vars: &[Var],
    set: &VarSet,
    v6: bool,
    base: (u128, u128, u16, u16),
) -> Option<(u16, u16, IpAddr, IpAddr)> {
    let (mut src, mut dst, mut sport, mut dport) = base;
    for (i, v) in vars.iter().enumerate() {
        if set.get(i) {
            match v.field {
                Field::Src => src |= 1u128 << v.bit,
                Field::Dst => dst |= 1u128 << v.bit,
                Field::Sport => sport |= 1u16 << v.bit,
                Field::Dport => dport |= 1u16 << v.bit,
            }
        }
    }
    let in_range = |p: u16, r: Option<PortRange>| r.is_none_or(|r| (r.lo..=r.hi).contains(&p));
    if !in_range(sport, req.sport) || !in_range(dport, req.dport) || src == dst {
        return None;
    }
    if !usable_host(src, &req.src) || !usable_host(dst, &req.dst) {
        return None;
    }
    let sport = if req.sport.is_some() { sport } else { 0 };
    let dport = if req.dport.is_some() { dport } else { 0 };
    Some((sport, dport, to_addr(src, v6), to_addr(dst, v6)))
}

/// Skip the network address (and the IPv4 broadcast) of a real subnet.
fn usable_host(value: u128, range: &AddrRange) -> bool {
    let host_bits = range.host_bits();
    if host_bits < 2 {
        return true;
    }
    let host_mask = if host_bits >= 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
    let host = value & host_mask;
    let is_v4 = range.base.is_ipv4();
    host != 0 && !(is_v4 && host == host_mask)
}

fn low_mask16(bits: u32) -> u16 {
    if bits >= 16 {
        u16::MAX
    } else {
        (1u16 << bits) - 1
    }
}

fn width(a: IpAddr) -> u32 {
    if a.is_ipv4() {
        32
    } else {
        128
    }
}

fn addr_bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

fn to_addr(bits: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(bits))
    } else {
        IpAddr::V4(Ipv4Addr::from(bits as u32))
    }
}
