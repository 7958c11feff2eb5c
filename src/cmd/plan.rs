//! `flowsteer plan`: tuples for every bucket, from the GF(2) solver.

use crate::cli::PlanArgs;
use crate::rssopts::{add_drawn_key, drawn_key_line, resolve, Resolved};
use anyhow::{bail, Context, Result};
use flowsteer_plan::plan::{plan, AddrRange, PlanRequest, PortRange, DEFAULT_MAX_CANDIDATES};
use flowsteer_rss::QueueId;
use flowsteer_wire::proto;

/// Exit code when some bucket could not be served.
pub const EXIT_INCOMPLETE: i32 = 3;

pub fn run(args: &PlanArgs) -> Result<i32> {
    let proto_num = match args.proto.to_ascii_lowercase().as_str() {
        "udp" => proto::UDP,
        "tcp" => proto::TCP,
        other => bail!("--proto '{other}': expected udp or tcp"),
    };
    let src: AddrRange = args.src_net.parse().context("--src-net")?;
    let dst: AddrRange = args.dst.parse().context("--dst")?;
    let sport: Option<PortRange> = match (&args.sport, &args.sport_range) {
        (Some(p), _) => Some(PortRange { lo: *p, hi: *p }),
        (None, Some(r)) => Some(r.parse().context("--sport-range")?),
        (None, None) => None,
    };
    let dport: Option<PortRange> = match &args.dport {
        Some(r) => Some(r.parse().context("--dport")?),
        None => None,
    };
    if args.per_bucket == 0 {
        bail!("--per-bucket must be at least 1");
    }
    let Resolved { config, warnings } = resolve(&args.rss, args.buckets.map(usize::from))?;
    crate::cmd::warn_all(&warnings);
    let buckets: Vec<QueueId> = match args.buckets {
        Some(0) => bail!("--buckets must be at least 1"),
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
        });
        add_drawn_key(&mut doc, config.key());
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
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
    }
    if !p.unreachable.is_empty() {
        for (b, why) in &p.unreachable {
            eprintln!("bucket {}: {why}", b.0);
        }
        eprintln!("error: {} of {} buckets could not be served", p.unreachable.len(), req.buckets.len());
        return Ok(EXIT_INCOMPLETE);
    }
    Ok(0)
}
