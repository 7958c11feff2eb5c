//! `analyze` timed on a generated capture (`flowsteer bench analyze`):
//! generates a capture of [`Config::packets`] frames over [`Config::flows`]
//! flows (64-byte frames; IPv4 and IPv6, UDP and TCP; one flow in 64 sends
//! every datagram as two UDP fragments, each fragment counting as a
//! packet), then times the whole analyze path on it: read, parse, hash,
//! flow table and report, on one thread, with the Microsoft key, default
//! hash types and 4 queues. Generation is not timed.

use flowsteer_analyze::{AnalyzeOptions, Analyzer, Report as AnalyzeReport};
use flowsteer_capture::{CaptureError, CaptureReader, CaptureWriter};
use flowsteer_rss::reta::RetaError;
use flowsteer_rss::RssConfig;
use flowsteer_wire::build;
use serde_json::Value;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to generate.
#[derive(Clone, Debug)]
pub struct Config {
    /// Packets in the generated capture.
    pub packets: u64,
    /// Distinct flows in the generated capture.
    pub flows: u64,
    /// Keep the capture at this path (`None`: a temporary file, removed
    /// when the run ends).
    pub keep: Option<PathBuf>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value out of range; the text names the option.
    #[error("{0}")]
    Config(String),
    #[error("cannot write {}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: CaptureError,
    },
    #[error("{}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The generated capture could not be read back.
    #[error("{0}")]
    Read(String),
    #[error("{0}")]
    Rss(RetaError),
    /// The analyzer did not see the capture that was written.
    #[error("{0}")]
    Check(String),
}

/// One run's result.
#[derive(Clone, Debug)]
pub struct Report {
    pub packets: u64,
    /// Flows the analyzer tracked.
    pub flows: u64,
    pub file_bytes: u64,
    /// Seconds of the timed analyze path.
    pub seconds: f64,
    pub mpps: f64,
    /// Seconds spent generating the capture (not timed).
    pub generate_seconds: f64,
    /// The Toeplitz implementation the analyzer used.
    pub hash_impl: &'static str,
    /// Where the capture was kept, if it was.
    pub kept: Option<PathBuf>,
}

/// Removes the generated capture when dropped (unless it is to be kept).
struct TempCapture {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempCapture {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Generates the capture, then times analyzing it.
pub fn run(args: &Config) -> Result<Report, Error> {
    if args.packets == 0 || args.flows == 0 {
        return Err(Error::Config("--packets and --flows must be at least 1".into()));
    }
    if args.flows > u64::from(u32::MAX >> 8) {
        return Err(Error::Config(format!("--flows must be at most {}", u32::MAX >> 8)));
    }
    let path = args.keep.clone().unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        std::env::temp_dir().join(format!("flowsteer-bench-analyze-{}-{nanos}.pcap", std::process::id()))
    });
    let capture = TempCapture { path, keep: args.keep.is_some() };
    let generated = Instant::now();
    generate_capture(&capture.path, args.packets, args.flows)?;
    let generate_seconds = generated.elapsed().as_secs_f64();

    let config = RssConfig::default_for_queues(4).map_err(Error::Rss)?;
    let start = Instant::now();
    let (r, file_bytes) = analyze_file(&capture.path, &config)?;
    let seconds = start.elapsed().as_secs_f64();
    if r.packets_read != args.packets || !r.conservation_ok || r.drops.total != 0 {
        return Err(Error::Check(format!(
            "bench analyze: expected {} clean packets, got {} read, {} dropped, conservation {}",
            args.packets, r.packets_read, r.drops.total, r.conservation_ok
        )));
    }
    Ok(Report {
        packets: r.packets_read,
        flows: r.flows.tracked,
        file_bytes,
        seconds,
        mpps: r.packets_read as f64 / seconds / 1e6,
        generate_seconds,
        hash_impl: r.rss.hash_impl,
        kept: args.keep.clone(),
    })
}

impl Report {
    /// The `--json` document (schema `flowsteer.bench.analyze.v1`).
    pub fn json(&self) -> Value {
        serde_json::json!({
            "schema": "flowsteer.bench.analyze.v1",
            "cpu": crate::cpu_model(),
            "results": [{
                "bench": "analyze",
                "packets": self.packets,
                "flows": self.flows,
                "file_bytes": self.file_bytes,
                "seconds": self.seconds,
                "mpps": self.mpps,
                "generate_seconds": self.generate_seconds,
                "hash_impl": self.hash_impl,
            }],
        })
    }

    /// The result line, and where the capture was kept.
    pub fn text(&self) -> String {
        let mut s = format!(
            "analyze: {} packets, {} flows, {} bytes of pcap in {:.3} s = {:.2} Mpps (read + parse + hash + flow table, one thread, {} Toeplitz; generation {:.1} s not counted)\n",
            self.packets, self.flows, self.file_bytes, self.seconds, self.mpps, self.hash_impl, self.generate_seconds
        );
        if let Some(path) = &self.kept {
            s.push_str(&format!("capture kept at {}\n", path.display()));
        }
        s
    }
}

/// Streams the capture at `path` through an analyzer, as `flowsteer
/// analyze` does: read + parse + hash + flow table, single-threaded.
/// Returns the analyzer's report and the file's size.
fn analyze_file(path: &Path, config: &RssConfig) -> Result<(AnalyzeReport, u64), Error> {
    let file = File::open(path).map_err(|source| Error::Open { path: path.to_path_buf(), source })?;
    let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut analyzer = Analyzer::new(config, AnalyzeOptions::default());
    // No BufReader: the capture reader fills its own 128 KiB buffer.
    let mut reader = match CaptureReader::new(file) {
        Ok(r) => r,
        Err(CaptureError::NotACapture) => {
            return Err(Error::Read(format!("{}: not a pcap or pcapng capture", path.display())))
        }
        // Cut inside its file header: no packets (the check says so).
        Err(CaptureError::Truncated { .. }) => return Ok((analyzer.finish(), file_bytes)),
        Err(e) => return Err(Error::Read(format!("{}: {e}", path.display()))),
    };
    loop {
        match reader.next_packet() {
            Ok(Some(p)) => analyzer.feed(p.linktype, p.data, p.orig_len),
            Ok(None) => break,
            // The packets before the cut are counted (the check says so).
            Err(CaptureError::Truncated { .. } | CaptureError::UnknownInterface(_)) => {}
            Err(e) => {
                return Err(Error::Read(format!("{}: {e} (after {} packets)", path.display(), analyzer.packets_read())))
            }
        }
    }
    Ok((analyzer.finish(), file_bytes))
}

/// One generated flow: its frames for one "packet" (two for a fragmenting flow).
fn flow_frames(i: u32) -> Vec<Vec<u8>> {
    let v6 = i % 4 == 3;
    let tcp = i.is_multiple_of(2);
    let fragmenting = i % 64 == 1;
    let client4 = Ipv4Addr::from(0x0a00_0000 | i);
    let server4 = Ipv4Addr::new(192, 0, 2, 1 + (i % 8) as u8);
    let client6 = Ipv6Addr::from((0x2001_0db8_u128 << 96) | u128::from(i));
    let server6 = Ipv6Addr::from((0x2001_0db8_ffff_u128 << 80) | u128::from(1 + i % 8));
    let (src, dst): (IpAddr, IpAddr) =
        if v6 { (client6.into(), server6.into()) } else { (client4.into(), server4.into()) };
    let sport = 1024 + (i % 60_000) as u16;
    if fragmenting {
        // A 32-byte UDP payload in two fragments of 24 + 16 bytes.
        return if v6 {
            build::ipv6_fragments(client6, server6, sport, 53, i, &[0x5a; 32], 24)
        } else {
            build::ipv4_fragments(client4, server4, sport, 53, i as u16, &[0x5a; 32], 24)
        };
    }
    // 64-byte frames where the headers allow (IPv6 + TCP is 74).
    let frame = match (v6, tcp) {
        (false, false) => build::udp_frame(src, dst, sport, 53, &[0; 22]),
        (false, true) => build::tcp_frame(src, dst, sport, 443, 1, 0x10, &[0; 10]),
        (true, false) => build::udp_frame(src, dst, sport, 53, &[0; 2]),
        (true, true) => build::tcp_frame(src, dst, sport, 443, 1, 0x10, &[]),
    };
    vec![frame]
}

/// Writes `packets` frames drawn uniformly from `flows` flows (xorshift,
/// fixed start: the same file every run).
fn generate_capture(path: &Path, packets: u64, flows: u64) -> Result<(), Error> {
    let what = |source| Error::Write { path: path.to_path_buf(), source };
    let templates: Vec<Vec<Vec<u8>>> = (0..flows as u32).map(flow_frames).collect();
    let mut w = CaptureWriter::create(path, 1).map_err(what)?;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut written = 0u64;
    while written < packets {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let frames = &templates[(state % flows) as usize];
        for f in frames.iter().take((packets - written) as usize) {
            let ts = 1_700_000_000_000_000_000 + written * 1_000;
            w.write_packet(ts, f, f.len() as u32).map_err(what)?;
            written += 1;
        }
    }
    w.finish().map_err(what)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_empty_and_too_many_flows() {
        let cfg = |packets, flows| Config { packets, flows, keep: None };
        for (c, want) in [
            (cfg(0, 1), "--packets and --flows must be at least 1".to_string()),
            (cfg(1, 0), "--packets and --flows must be at least 1".to_string()),
            (cfg(1, u64::from(u32::MAX >> 8) + 1), format!("--flows must be at most {}", u32::MAX >> 8)),
        ] {
            assert_eq!(run(&c).expect_err("a bad config").to_string(), want);
        }
    }

    /// A small capture, kept where asked: every packet analyzed, the
    /// fragmenting flow's two fragments counted as two packets.
    #[test]
    fn small_capture_is_analyzed_whole_and_kept() {
        let path = std::env::temp_dir().join(format!("flowsteer-bench-analyze-test-{}.pcap", std::process::id()));
        let r = run(&Config { packets: 1001, flows: 70, keep: Some(path.clone()) }).expect("a run");
        assert_eq!(r.packets, 1001);
        assert!(r.flows >= 1 && r.flows <= 70, "{r:?}");
        assert!(r.file_bytes > 1001 * 64 && r.mpps > 0.0, "{r:?}");
        assert!(path.is_file());
        let text = r.text();
        assert!(text.starts_with("analyze: 1001 packets, "), "{text}");
        assert!(text.ends_with(&format!("capture kept at {}\n", path.display())), "{text}");
        assert_eq!(r.json()["results"][0]["packets"], 1001);
        let _ = std::fs::remove_file(&path);
    }
}
