//! `flowsteer plan`: tuples for every bucket, from the GF(2) solver.

use crate::cli::PlanArgs;
use crate::cmd::usage;
use crate::rssopts::{add_drawn_key, drawn_key_line, resolve, Resolved};
use anyhow::Result;
use flowsteer_plan::plan::{plan, AddrRange, PlanRequest, PortRange, DEFAULT_MAX_CANDIDATES};
use flowsteer_rss::{HashTypes, QueueId, RssConfig};
use flowsteer_wire::proto;

/// Exit code when some bucket could not be served.
pub const EXIT_INCOMPLETE: i32 = 3;

pub fn run(args: &PlanArgs) -> Result<i32> {
    let proto_num = match args.proto.to_ascii_lowercase().as_str() {
        "udp" => proto::UDP,
        "tcp" => proto::TCP,
        other => return Err(usage(format!("--proto '{other}': expected udp or tcp"))),
    };
    let src: AddrRange = args.src_net.parse().map_err(|e| usage(format!("--src-net: {e}")))?;
    let dst: AddrRange = args.dst.parse().map_err(|e| usage(format!("--dst: {e}")))?;
    let sport: Option<PortRange> = match (&args.sport, &args.sport_range) {
        (Some(p), _) => Some(PortRange { lo: *p, hi: *p }),
        (None, Some(r)) => Some(r.parse().map_err(|e| usage(format!("--sport-range: {e}")))?),
        (None, None) => None,
    };
    let dport: Option<PortRange> = match &args.dport {
        Some(r) => Some(r.parse().map_err(|e| usage(format!("--dport: {e}")))?),
        None => None,
    };
    if let (Some(b), Some(q)) = (args.buckets, args.rss.queues) {
        if usize::from(b) > q {
            return Err(usage(format!(
                "--buckets {b} plans for queues 0..{b} but --queues {q} fills the table with queues 0..{q} only"
            )));
        }
    }
    let Resolved { config, warnings } = resolve(&args.rss, args.buckets.map(usize::from))?;
    crate::cmd::warn_all(&warnings);
    let buckets: Vec<QueueId> = match args.buckets {
        Some(n) => (0..n).map(QueueId).collect(),
        None => (0..config.queue_count() as u16).map(QueueId).collect(),
    };
    let req = PlanRequest {
        src,
        dst,
        sport,
        dport,
        proto: proto_num,

        buckets,
        per_bucket: args.per_bucket,
        max_candidates: DEFAULT_MAX_CANDIDATES,
    };
    let p = plan(&config, &req)?;
    let note = p.ports_ignored.then(|| ports_ignored_note(&args.proto, &config, req.src.base.is_ipv6()));
    if args.json {
        let assignments: Vec<_> = p
            .assignments
            .iter()
            .map(|a| {
                serde_json::json!({
                    "bucket": a.bucket.0,
                    "reta_index": a.reta_index,
                    "src": a.src.to_string(),
                    "dst": a.dst.to_string(),
                    "sport": sport.map(|_| a.sport),
                    "dport": dport.map(|_| a.dport),
                    "hash": format!("0x{:08x}", a.hash),
                    "cpu": config.cpu_for(a.bucket).0,
                })
            })
            .collect();
        let unreachable: Vec<_> =
            p.unreachable.iter().map(|(b, why)| serde_json::json!({"bucket": b.0, "reason": why})).collect();
        let mut doc = serde_json::json!({
            "schema": "flowsteer.plan.v1",
            "hash_input": p.fields.name(),
            "hash_types": config.types.to_string(),
            "reta_size": config.reta.len(),
            "queues": config.queue_count(),
            "free_bits": p.free_bits,
            "bucket_bits": p.bucket_bits,
            "rank": p.rank,
            "assignments": assignments,
            "unreachable": unreachable,
            "complete": p.unreachable.is_empty(),
            "ports_ignored": p.ports_ignored,
            "note": note,
            "warnings": warnings,
        });
        add_drawn_key(&mut doc, config.key());
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        if let Some(note) = &note {
            println!("{note}");
        }
        println!(
            "plan: {} bucket(s) x {} tuple(s); {} hashed on the {} ({}); RETA {} entries over {} queues",
            req.buckets.len(),
            req.per_bucket,
            args.proto.to_ascii_uppercase(),
            p.fields.name(),
            config.types,
            config.reta.len(),
            config.queue_count()
        );
        if let Some(line) = drawn_key_line(config.key()) {
            println!("{line}");
        }
        println!(
            "free input bits: {}; hash bits that pick the queue: {}; rank {} (2^{} of 2^{} entries reachable)",
            p.free_bits, p.bucket_bits, p.rank, p.rank, p.bucket_bits
        );
        println!(
            "{:>6} {:>5} {:>4} {:<40} {:<40} {:>5} {:>5} {:<10}",
            "bucket", "reta", "cpu", "src", "dst", "sport", "dport", "hash"
        );
        for a in &p.assignments {
            let reta = a.reta_index.map_or("-".into(), |i| i.to_string());
            let port = |given: bool, p: u16| if given { p.to_string() } else { "-".into() };
            println!(
                "{:>6} {:>5} {:>4} {:<40} {:<40} {:>5} {:>5} 0x{:08x}",
                a.bucket.0,
                reta,
                config.cpu_for(a.bucket).0,
                a.src.to_string(),
                a.dst.to_string(),
                port(sport.is_some(), a.sport),
                port(dport.is_some(), a.dport),
                a.hash
            );
        }
        println!("{}", crate::legend::footer(crate::legend::PLAN));
    }
    if !p.unreachable.is_empty() {
        // Buckets that share a reason share a line.
        let mut reasons: Vec<(&str, Vec<u16>)> = Vec::new();
        for (b, why) in &p.unreachable {
            match reasons.iter_mut().find(|(w, _)| *w == why.as_str()) {
                Some((_, bs)) => bs.push(b.0),
                None => reasons.push((why, vec![b.0])),
            }
        }
        for (why, bs) in &reasons {
            let noun = if bs.len() == 1 { "bucket" } else { "buckets" };
            eprintln!("{noun} {}: {why}", id_ranges(bs));
        }
        let why = if p.ports_ignored && p.free_bits == 0 {
            ": the hash ignores ports and the addresses are fixed, so every tuple lands in one bucket"
        } else {
            ""
        };
        eprintln!("error: {} of {} buckets could not be served{why}", p.unreachable.len(), req.buckets.len());
        return Ok(EXIT_INCOMPLETE);
    }
    Ok(0)
}

/// The line above a plan whose ports the hash ignores: what that means and
/// the two ways to make ports count (a protocol hashed on the 4-tuple, or
/// the protocol's 4-tuple hash type).
fn ports_ignored_note(proto: &str, config: &RssConfig, v6: bool) -> String {
    let proto = proto.to_ascii_lowercase();
    let family = if v6 { "6" } else { "4" };
    let four_tuple_type = format!("{proto}{family}");
    let types = if config.types.bits() == HashTypes::default().bits() {
        format!("default,{four_tuple_type}")
    } else {
        format!("{},{four_tuple_type}", config.types)
    };
    let tcp_bit = if v6 { HashTypes::TCP_IPV6 } else { HashTypes::TCP_IPV4 };
    let other_proto = if proto == "udp" && config.types.contains(tcp_bit) { "--proto tcp, or " } else { "" };
    format!(
        "note: the hash types in use ({}) hash {} over IPv{family} on the 2-tuple: ports do not pick the bucket, so each tuple shows the first port of each range (any port of the range lands alike); to hash ports use {other_proto}--hash-types {types}",
        config.types,
        proto.to_ascii_uppercase()
    )
}

/// `0-5,7,9-63`: sorted ids as ranges.
fn id_ranges(ids: &[u16]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j { ids[i].to_string() } else { format!("{}-{}", ids[i], ids[j]) });
        i = j + 1;
    }
    out.join(",")
}
