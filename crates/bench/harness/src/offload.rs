//! What carrying a host's transmit offloads costs the bridge per frame
//! (`flowsteer bench offload`), side by side in one run with what the
//! worker already does to every frame: copy it into its burst buffer.
//!
//! Rows (each on a burst of 64 frames, L1/L2-resident, the median of
//! [`Config::reps`] repetitions of about [`Config::seconds`]):
//! * `copy` (the baseline): the frame copied into a burst arena, as every
//!   received frame is.
//! * `repair, complete checksum`: [`offload::repair_partial`] on a frame
//!   whose checksum is complete (what an AF_XDP port pays for every TCP/UDP
//!   frame from a wire, or from the generator of `flowsteer rfc2544`).
//! * `repair, partial checksum`: the same on a frame a local sender left to
//!   offload (the field is the pseudo-header sum): verified, then completed.
//! * `complete with offsets`: [`offload::complete_partial`] with the
//!   offsets a vnet header gives (an AF_PACKET frame bound for AF_XDP).
//! * `segment 64 KB TCP`: [`offload::segment`] of a 64,000-byte TCP/IPv4
//!   GSO frame into 1,448-byte segments (a GSO frame bound for AF_XDP); its
//!   row also gives ns per segment.
//!
//! Each row is timed for 64-byte and 1,518-byte frames where it applies.
//! No test asserts any figure.

use flowsteer_wire::build::{tcp_frame, udp_frame};
use flowsteer_wire::offload::{self, GsoKind};
use std::hint::black_box;
use std::net::IpAddr;
use std::time::Instant;

/// Frames per timed burst.
const BURST: usize = 64;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Config {
    /// Seconds per repetition.
    pub seconds: f64,
    /// Repetitions per row; the median is reported.
    pub reps: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { seconds: 0.2, reps: 5 }
    }
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--seconds must be > 0 and --reps >= 1")]
    Config,
}

/// One row.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    /// What was timed.
    pub what: &'static str,
    /// Frame length in bytes.
    pub frame_len: usize,
    /// Median ns per frame over the repetitions.
    pub ns_per_frame: f64,
    /// Lowest and highest repetition.
    pub ns_min: f64,
    pub ns_max: f64,
    /// Output segments per input frame (1 but for `segment`).
    pub segments: usize,
    /// ns per frame over the `copy` row's for the same length.
    pub ratio_to_copy: Option<f64>,
}

/// A run's rows.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub seconds: f64,
    pub reps: usize,
    pub cpu: String,
    pub rows: Vec<Row>,
}

impl Report {
    /// The `--json` document (schema `flowsteer.bench.offload.v1`).
    pub fn json(&self) -> serde_json::Value {
        let mut doc = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = doc.as_object_mut() {
            o.insert("schema".into(), "flowsteer.bench.offload.v1".into());
        }
        doc
    }

    /// The text table.
    pub fn text(&self) -> String {
        let mut out = format!(
            "offload cost per frame ({} reps of {:.2} s, bursts of {BURST}) [{}]\n",
            self.reps, self.seconds, self.cpu
        );
        out.push_str(&format!(
            "{:<28} {:>6} {:>10} {:>19} {:>9} {:>8}\n",
            "what", "bytes", "ns/frame", "min-max", "segments", "x copy"
        ));
        for r in &self.rows {
            let ratio = r.ratio_to_copy.map_or("-".to_string(), |x| format!("{x:.2}"));
            out.push_str(&format!(
                "{:<28} {:>6} {:>10.1} {:>19} {:>9} {:>8}\n",
                r.what,
                r.frame_len,
                r.ns_per_frame,
                format!("{:.1}-{:.1}", r.ns_min, r.ns_max),
                r.segments,
                ratio
            ));
        }
        out
    }
}

/// A UDP/IPv4 frame of `len` bytes with a complete checksum.
fn udp(len: usize) -> Vec<u8> {
    let (s, d) = addrs();
    udp_frame(s, d, 40_000, 9, &vec![0x5a; len.saturating_sub(42)])
}

fn addrs() -> (IpAddr, IpAddr) {
    (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]))
}

/// `frame` as a local sender with checksum offload hands it over: the
/// checksum field holds the folded pseudo-header sum.
fn partial(mut frame: Vec<u8>) -> Vec<u8> {
    if let Ok(loc) = offload::locate_l4(&frame) {
        let at = loc.checksum_at();
        frame[at..at + 2].copy_from_slice(&loc.partial_checksum().to_be_bytes());
    }
    frame
}

/// Median, min and max ns per frame of `f` run on bursts of [`BURST`].
fn time(cfg: &Config, frames_per_call: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    let mut per = Vec::with_capacity(cfg.reps);
    for _ in 0..cfg.reps {
        let start = Instant::now();
        let mut calls = 0u64;
        while start.elapsed().as_secs_f64() < cfg.seconds {
            for _ in 0..16 {
                f();
            }
            calls += 16;
        }
        per.push(start.elapsed().as_nanos() as f64 / (calls as f64 * frames_per_call as f64));
    }
    per.sort_by(f64::total_cmp);
    (per[per.len() / 2], per[0], per[per.len() - 1])
}

/// Times every row.
pub fn run(cfg: &Config) -> Result<Report, Error> {
    if !(cfg.seconds > 0.0 && cfg.seconds.is_finite()) || cfg.reps == 0 {
        return Err(Error::Config);
    }
    let mut rows = Vec::new();
    let mut arena: Vec<u8> = Vec::with_capacity(BURST * 2048);
    for len in [64usize, 1518] {
        let complete = udp(len);
        let half = partial(complete.clone());
        let l4 = offload::locate_l4(&complete).map_or(34, |l| l.l4_offset);
        let mut row = |what: &'static str, t: (f64, f64, f64), copy: Option<f64>| {
            rows.push(Row {
                what,
                frame_len: len,
                ns_per_frame: t.0,
                ns_min: t.1,
                ns_max: t.2,
                segments: 1,
                ratio_to_copy: copy.map(|c| t.0 / c),
            });
        };
        let copy = time(cfg, BURST, || {
            arena.clear();
            for _ in 0..BURST {
                arena.extend_from_slice(black_box(&complete));
            }
            black_box(&arena);
        });
        row("copy (baseline)", copy, None);
        let mut burst: Vec<Vec<u8>> = vec![complete.clone(); BURST];
        let t = time(cfg, BURST, || {
            for f in burst.iter_mut() {
                black_box(offload::repair_partial(black_box(f)));
            }
        });
        row("repair, complete checksum", t, Some(copy.0));
        // A partial frame is completed by the repair: each call starts
        // from a fresh partial copy, and the copy is timed apart.
        let t = time(cfg, BURST, || {
            for f in burst.iter_mut() {
                f.copy_from_slice(&half);
                black_box(offload::repair_partial(black_box(f)));
            }
        });
        row("repair, partial checksum", (t.0 - copy.0, t.1 - copy.0, t.2 - copy.0), Some(copy.0));
        let t = time(cfg, BURST, || {
            for f in burst.iter_mut() {
                f.copy_from_slice(&half);
                let _ = black_box(offload::complete_partial(black_box(f), l4, 6));
            }
        });
        row("complete with offsets", (t.0 - copy.0, t.1 - copy.0, t.2 - copy.0), Some(copy.0));
    }
    let (s, d) = addrs();
    let gso = tcp_frame(s, d, 40_000, 5201, 1, 0x18, &vec![0xa5; 64_000]);
    let (mut out, mut lens) = (Vec::with_capacity(128 << 10), Vec::with_capacity(64));
    let mut segs = 0;
    let t = time(cfg, 1, || {
        out.clear();
        lens.clear();
        segs = offload::segment(black_box(&gso), GsoKind::TcpV4, 1448, &mut out, &mut lens).unwrap_or(0);
        black_box(&out);
    });
    rows.push(Row {
        what: "segment 64 KB TCP",
        frame_len: gso.len(),
        ns_per_frame: t.0,
        ns_min: t.1,
        ns_max: t.2,
        segments: segs,
        ratio_to_copy: None,
    });
    Ok(Report { seconds: cfg.seconds, reps: cfg.reps, cpu: crate::cpu_model(), rows })
}
