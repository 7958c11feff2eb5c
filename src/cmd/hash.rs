//! `flowsteer hash`: hash one tuple from flags, or many from a file.
//!
//! The tuple is hashed exactly as given: with ports it is a 4-tuple input,
//! without ports a 2-tuple input (the hash types do not apply here; use
//! `analyze` for per-protocol rules). Input lines are `src,dst[,sport,dport]`;
//! blank lines and lines starting with `#` are skipped. A bad line gives an
//! error record in place (text: `line N: error: ...`; JSON: `{"line": N,
//! "error": "..."}`), the others are still hashed, and the exit code is 1.
//! A key drawn by `--key random` is shown above the table and in every JSON
//! record (`key`, `key_seed`), as are the warnings (`warnings`).

use crate::cli::HashArgs;
use crate::cmd::usage;
use crate::rssopts::{add_drawn_key, drawn_key_line, resolve, Resolved};
use anyhow::{Context, Result};
use flowsteer_rss::{Fields, HashInput, RssConfig};
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;

pub fn run(args: &HashArgs) -> Result<i32> {
    let single = args.src.is_some() || args.dst.is_some() || args.sport.is_some() || args.dport.is_some();
    if single && args.input.is_some() {
        return Err(usage("give either --src/--dst[/--sport/--dport] or --input, not both"));
    }
    if !single && args.input.is_none() {
        return Err(usage(
            "nothing to hash: give --src and --dst (and optionally --sport and --dport), or --input FILE",
        ));
    }
    // Every flag is checked before the first line is printed.
    let tuple = if single { Some(single_tuple(args)?) } else { None };
    let Resolved { config, warnings } = resolve(&args.rss, None)?;
    crate::cmd::warn_all(&warnings);
    let reader: Option<Box<dyn BufRead>> = match &args.input {
        Some(path) if path.as_os_str() == "-" => Some(Box::new(BufReader::new(std::io::stdin()))),
        Some(path) => {
            let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            Some(Box::new(BufReader::new(f)))
        }
        None => None,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if !args.json {
        if let Some(line) = drawn_key_line(config.key()) {
            writeln!(out, "{line}")?;
        }
        writeln!(
            out,
            "{:<40} {:<40} {:>5} {:>5} {:<7} {:<10} {:>6} {:>5} {:>4}",
            "src", "dst", "sport", "dport", "input", "hash", "reta", "queue", "cpu"
        )?;
    }
    let mut errors = 0;
    if let Some((src, dst, ports)) = tuple {
        emit(&mut out, &config, src, dst, ports, args.json.then_some(&warnings[..]))?;
    } else if let (Some(path), Some(reader)) = (&args.input, reader) {
        for (n, line) in reader.lines().enumerate() {
            let line = line.with_context(|| format!("{}: read error at line {}", path.display(), n + 1))?;
            let text = line.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            match parse_line(text) {
                Ok((src, dst, ports)) => emit(&mut out, &config, src, dst, ports, args.json.then_some(&warnings[..]))?,
                Err(e) => {
                    errors += 1;
                    if args.json {
                        writeln!(out, "{}", serde_json::json!({"line": n + 1, "error": e}))?;
                    } else {
                        writeln!(out, "line {}: error: {e}", n + 1)?;
                    }
                }
            }
        }
    }
    if !args.json {
        writeln!(out, "{}", crate::legend::footer(crate::legend::HASH))?;
    }
    out.flush()?;
    if errors > 0 {
        eprintln!("error: {errors} input line(s) could not be parsed");
        return Ok(1);
    }
    Ok(0)
}

type Tuple = (IpAddr, IpAddr, Option<(u16, u16)>);

/// The tuple of `--src`, `--dst`, `--sport`, `--dport`.
fn single_tuple(args: &HashArgs) -> Result<Tuple> {
    let (Some(src), Some(dst)) = (&args.src, &args.dst) else {
        return Err(usage("--src and --dst are both required"));
    };
    let ports = match (args.sport, args.dport) {
        (Some(s), Some(d)) => Some((s, d)),
        (None, None) => None,
        _ => return Err(usage("give both --sport and --dport (4-tuple) or neither (2-tuple)")),
    };
    let src: IpAddr = src.parse().map_err(|e| usage(format!("--src '{src}' is not an IP address: {e}")))?;
    let dst: IpAddr = dst.parse().map_err(|e| usage(format!("--dst '{dst}' is not an IP address: {e}")))?;
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(usage("--src and --dst must both be IPv4 or both IPv6"));
    }
    Ok((src, dst, ports))
}

fn parse_line(text: &str) -> Result<Tuple, String> {
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    let addr = |s: &str| s.parse::<IpAddr>().map_err(|_| format!("'{s}' is not an IP address"));
    let port = |s: &str| s.parse::<u16>().map_err(|_| format!("'{s}' is not a port number"));
    let (src, dst, ports) = match fields.as_slice() {
        [s, d] => (addr(s)?, addr(d)?, None),
        [s, d, sp, dp] => (addr(s)?, addr(d)?, Some((port(sp)?, port(dp)?))),
        _ => return Err(format!("expected src,dst or src,dst,sport,dport; got {} fields", fields.len())),
    };
    if src.is_ipv4() != dst.is_ipv4() {
        return Err("source and destination must both be IPv4 or both IPv6".into());
    }
    Ok((src, dst, ports))
}

fn emit(
    out: &mut impl Write,
    config: &RssConfig,
    src: IpAddr,
    dst: IpAddr,
    ports: Option<(u16, u16)>,
    json: Option<&[String]>,
) -> Result<()> {
    let input = HashInput::build(src, dst, ports);
    debug_assert_ne!(input.fields(), Fields::None);
    let p = config.place_input(&input);
    let (sp, dp) = ports.map_or((None, None), |(s, d)| (Some(s), Some(d)));
    if let Some(warnings) = json {
        let mut v = serde_json::json!({
            "src": src.to_string(),
            "dst": dst.to_string(),
            "sport": sp,
            "dport": dp,
            "input": input.fields().name(),
            "hash": format!("0x{:08x}", p.hash),
            "reta_index": p.reta_index,
            "queue": p.queue.0,
            "cpu": p.cpu.0,
        });
        add_drawn_key(&mut v, config.key());
        // Every record carries the warnings printed on stderr.
        v["warnings"] = serde_json::json!(warnings);
        writeln!(out, "{v}")?;
    } else {
        let opt = |v: Option<u16>| v.map_or("-".to_string(), |v| v.to_string());
        let reta = p.reta_index.map_or("-".to_string(), |i| i.to_string());
        writeln!(
            out,
            "{:<40} {:<40} {:>5} {:>5} {:<7} 0x{:08x} {:>6} {:>5} {:>4}",
            src.to_string(),
            dst.to_string(),
            opt(sp),
            opt(dp),
            input.fields().name(),
            p.hash,
            reta,
            p.queue.0,
            p.cpu.0
        )?;
    }
    Ok(())
}
