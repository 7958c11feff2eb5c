//! DPDK's `rte_hash` as the flow table's anchor: the C harness
//! `bench/dpdk/flowtable-dpdk` (built with `make -C bench/dpdk
//! flowtable-dpdk` where Debian's `libdpdk-dev` is installed; see
//! `bench/dpdk/README.md`) runs a bulk-lookup, add-on-miss, count-on-hit
//! loop over a key stream this side writes ([`write_keys`]), so both sides
//! see the same keys in the same order. [`run`] runs it pinned to a CPU and
//! returns its rows: per variant (`crc`: `rte_hash` sized by the file's
//! `entries`; `crc_ext`: sized for the distinct keys, with the extendable
//! bucket table) a `fill` row (the first pass, from an empty table) and a
//! `steady` row (the median of the later passes), with the hits, inserts
//! and refused inserts each phase counted, to check against this side's.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The key file's magic, its first 8 bytes.
pub const KEY_MAGIC: [u8; 8] = *b"FSKEY001";
/// Bytes per key in the file.
pub const KEY_LEN: u32 = 48;
/// The largest burst: `RTE_HASH_LOOKUP_BULK_MAX`.
pub const BURST_MAX: u32 = 64;
/// Bytes before the first key: magic, key_len, burst, entries,
/// n_distinct, n_stream.
pub const HEADER_LEN: usize = 40;

/// Why the DPDK harness could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    #[error(
        "{}: not found (build it with `make -C bench/dpdk flowtable-dpdk`; it needs Debian's libdpdk-dev)",
        .0.display()
    )]
    NotFound(PathBuf),
    #[error("cannot run {}", .path.display())]
    Spawn {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// It ran and failed: its exit status and the tail of its stderr.
    #[error("{} failed ({status}): {stderr}", .path.display())]
    Failed { path: PathBuf, status: std::process::ExitStatus, stderr: String },
    /// It succeeded but its `--json` line did not parse; `start` is the
    /// beginning of what it printed.
    #[error("{}: unreadable --json output ({start:?})", .path.display())]
    Output {
        path: PathBuf,
        start: String,
        #[source]
        source: serde_json::Error,
    },
}

/// One variant and phase of the DPDK run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DpdkRow {
    /// `crc` (sized by the file's `entries`) or `crc_ext` (sized for
    /// `n_distinct`, extendable buckets).
    pub variant: String,
    /// `fill` (pass 1, from an empty table) or `steady` (passes 2..N).
    pub phase: String,
    /// Timed ns per key of the stream (steady: the median of its passes).
    pub ns_per_key: f64,
    /// Totals over the phase's passes (steady: passes - 1 of them).
    pub hits: u64,
    pub inserts: u64,
    /// Inserts `rte_hash` refused (table full).
    pub refused: u64,
}

/// What the harness reported.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DpdkRun {
    /// DPDK's version, e.g. "22.11.11".
    pub dpdk: String,
    pub rows: Vec<DpdkRow>,
}

/// The part of the harness's `--json` line used here.
#[derive(Deserialize)]
struct Output {
    dpdk: String,
    results: Vec<DpdkRow>,
}

/// Writes the key file the harness reads (all little-endian): the magic
/// `FSKEY001`, u32 key_len (48), u32 `burst`, u64 `entries` (the `crc`
/// table's size), u64 `n_distinct` (distinct keys in the stream), u64
/// n_stream (`keys.len()`), then the keys in stream order. `burst` must be
/// 1..=64 and `n_distinct` at most the stream's length (`InvalidInput`);
/// an iterator that yields a different number of keys than its `len()`
/// is `InvalidData`, and leaves a file the harness refuses.
pub fn write_keys(
    path: &Path,
    entries: u64,
    burst: u32,
    n_distinct: u64,
    keys: impl ExactSizeIterator<Item = [u8; 48]>,
) -> io::Result<()> {
    let n_stream = keys.len() as u64;
    if burst == 0 || burst > BURST_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("burst {burst}: expected 1..={BURST_MAX} (RTE_HASH_LOOKUP_BULK_MAX)"),
        ));
    }
    if n_distinct > n_stream {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("n_distinct {n_distinct} is more than the {n_stream} keys of the stream"),
        ));
    }
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    w.write_all(&KEY_MAGIC)?;
    w.write_all(&KEY_LEN.to_le_bytes())?;
    w.write_all(&burst.to_le_bytes())?;
    w.write_all(&entries.to_le_bytes())?;
    w.write_all(&n_distinct.to_le_bytes())?;
    w.write_all(&n_stream.to_le_bytes())?;
    let mut written = 0u64;
    for k in keys {
        w.write_all(&k)?;
        written += 1;
    }
    w.flush()?;
    if written != n_stream {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the key iterator yielded {written} keys, its len() said {n_stream}"),
        ));
    }
    Ok(())
}

/// Runs the harness `bin` on the key file `keys` (`passes` passes, at
/// least 1: the fill and passes - 1 steady ones) on CPU `cpu` (its
/// `--cpu`, which becomes EAL's `-l`) and returns its rows.
pub fn run(bin: &Path, keys: &Path, passes: usize, cpu: usize) -> Result<DpdkRun, DpdkError> {
    if !bin.is_file() {
        return Err(DpdkError::NotFound(bin.to_path_buf()));
    }
    let out = Command::new(bin)
        .arg("--keys")
        .arg(keys)
        .args(["--passes", &passes.to_string(), "--cpu", &cpu.to_string(), "--json"])
        .output()
        .map_err(|source| DpdkError::Spawn { path: bin.to_path_buf(), source })?;
    if !out.status.success() {
        return Err(DpdkError::Failed { path: bin.to_path_buf(), status: out.status, stderr: tail(&out.stderr) });
    }
    parse(bin, &out.stdout)
}

/// The harness's `--json` output as a run.
fn parse(bin: &Path, stdout: &[u8]) -> Result<DpdkRun, DpdkError> {
    match serde_json::from_slice::<Output>(stdout) {
        Ok(o) => Ok(DpdkRun { dpdk: o.dpdk, rows: o.results }),
        Err(source) => {
            let text = String::from_utf8_lossy(stdout);
            let start: String = text.trim().chars().take(120).collect();
            Err(DpdkError::Output { path: bin.to_path_buf(), start, source })
        }
    }
}

/// The last lines of a child's stderr (at most 10 lines, 1,000
/// characters), trimmed; "(no stderr)" when empty.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.trim().lines().collect();
    let joined = lines[lines.len().saturating_sub(10)..].join("\n");
    let chars: Vec<char> = joined.chars().collect();
    let s: String = chars[chars.len().saturating_sub(1000)..].iter().collect();
    if s.is_empty() {
        "(no stderr)".to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("flowsteer-flow-dpdk-{}-{n}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).expect("temp dir");
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn key(i: u8) -> [u8; 48] {
        let mut k = [0u8; 48];
        k[0] = i;
        k[47] = 0xff - i;
        k
    }

    #[test]
    fn write_keys_header_and_keys() {
        let d = TempDir::new("header");
        let p = d.0.join("keys.bin");
        let keys = [key(1), key(2), key(1)];
        write_keys(&p, 0x0102_0304_0506_0708, 32, 2, keys.into_iter()).expect("write");
        let b = std::fs::read(&p).expect("read");
        assert_eq!(b.len(), HEADER_LEN + 3 * 48);
        let mut want = Vec::new();
        want.extend_from_slice(b"FSKEY001");
        want.extend_from_slice(&[48, 0, 0, 0]);
        want.extend_from_slice(&[32, 0, 0, 0]);
        want.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
        want.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[..HEADER_LEN], &want[..]);
        assert_eq!(&b[HEADER_LEN..HEADER_LEN + 48], &key(1)[..]);
        assert_eq!(&b[HEADER_LEN + 48..HEADER_LEN + 96], &key(2)[..]);
        assert_eq!(&b[HEADER_LEN + 96..], &key(1)[..]);
    }

    #[test]
    fn write_keys_refuses_bad_burst_and_distinct() {
        let d = TempDir::new("refuse");
        let p = d.0.join("keys.bin");
        for burst in [0, 65] {
            let e = write_keys(&p, 64, burst, 1, [key(1)].into_iter()).expect_err("bad burst");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
        let e = write_keys(&p, 64, 32, 2, [key(1)].into_iter()).expect_err("n_distinct > n_stream");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        write_keys(&p, 64, 64, 1, [key(1)].into_iter()).expect("burst 64 is fine");
    }

    /// The line flowtable-dpdk printed for 1,000 distinct keys in a
    /// 10,000-key stream, entries 2,048, burst 32, 3 passes.
    const CANNED: &str = r#"{"schema":"flowsteer.bench.flow.dpdk.v1","dpdk":"22.11.11","cpu":"AMD EPYC","lcore":1,"key_len":48,"burst":32,"entries":2048,"n_distinct":1000,"n_stream":10000,"passes":3,"results":[{"variant":"crc","phase":"fill","entries":2048,"passes":1,"ns_per_key":23.929,"samples":[23.929],"hits":9000,"inserts":1000,"refused":0,"mib":0.158,"mib_estimated":false},{"variant":"crc","phase":"steady","entries":2048,"passes":2,"ns_per_key":14.174,"samples":[14.211,14.137],"hits":20000,"inserts":0,"refused":0,"mib":0.158,"mib_estimated":false},{"variant":"crc_ext","phase":"fill","entries":1024,"passes":1,"ns_per_key":26.009,"samples":[26.009],"hits":9000,"inserts":1000,"refused":0,"mib":0.089,"mib_estimated":false},{"variant":"crc_ext","phase":"steady","entries":1024,"passes":2,"ns_per_key":16.042,"samples":[16.936,15.148],"hits":20000,"inserts":0,"refused":0,"mib":0.089,"mib_estimated":false}]}"#;

    #[test]
    fn parses_the_json_line() {
        let run = parse(Path::new("flowtable-dpdk"), CANNED.as_bytes()).expect("parse");
        assert_eq!(run.dpdk, "22.11.11");
        assert_eq!(run.rows.len(), 4);
        let r = &run.rows[1];
        assert_eq!((r.variant.as_str(), r.phase.as_str()), ("crc", "steady"));
        assert_eq!(r.ns_per_key, 14.174);
        assert_eq!((r.hits, r.inserts, r.refused), (20000, 0, 0));
        let r = &run.rows[2];
        assert_eq!((r.variant.as_str(), r.phase.as_str()), ("crc_ext", "fill"));
        assert_eq!((r.hits, r.inserts, r.refused), (9000, 1000, 0));
        assert_eq!(r.ns_per_key, 26.009);
    }

    #[test]
    fn bad_json_names_the_binary() {
        let e = parse(Path::new("/x/flowtable-dpdk"), b"EAL: something\n").expect_err("garbage");
        let s = e.to_string();
        assert!(s.contains("/x/flowtable-dpdk") && s.contains("unreadable --json output"), "{s}");
        assert!(s.contains("EAL: something"), "{s}");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let many: String = (0..30).map(|i| format!("line {i}\n")).collect();
        let t = tail(many.as_bytes());
        assert!(t.starts_with("line 20") && t.ends_with("line 29"), "{t}");
        assert_eq!(tail(b"  \n"), "(no stderr)");
    }

    #[test]
    fn missing_binary_is_not_found() {
        let d = TempDir::new("missing");
        let bin = d.0.join("flowtable-dpdk");
        let e = run(&bin, &d.0.join("keys.bin"), 3, 1).expect_err("no binary");
        assert!(matches!(e, DpdkError::NotFound(_)));
        let s = e.to_string();
        assert!(s.contains("flowtable-dpdk: not found") && s.contains("make -C bench/dpdk"), "{s}");
    }

    /// A fake harness: a shell script with `body`, executable.
    #[cfg(unix)]
    fn script(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("fake-flowtable-dpdk");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write script");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    /// `run`, retried while the kernel says the script is busy (ETXTBSY:
    /// another test thread forked while this one's script was open for
    /// writing).
    #[cfg(unix)]
    fn run_retrying(bin: &Path, keys: &Path) -> Result<DpdkRun, DpdkError> {
        for _ in 0..100 {
            match run(bin, keys, 2, 1) {
                Err(DpdkError::Spawn { source, .. }) if source.raw_os_error() == Some(26) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                r => return r,
            }
        }
        run(bin, keys, 2, 1)
    }

    #[cfg(unix)]
    #[test]
    fn failing_binary_reports_status_and_stderr() {
        let d = TempDir::new("fail");
        let bin = script(&d.0, "echo 'flowtable-dpdk: rte_eal_init failed: oops' >&2\necho partial\nexit 3");
        let e = run_retrying(&bin, &d.0.join("keys.bin")).expect_err("exit 3");
        let DpdkError::Failed { status, ref stderr, .. } = e else { panic!("expected Failed, got {e:?}") };
        assert_eq!(status.code(), Some(3));
        assert_eq!(stderr, "flowtable-dpdk: rte_eal_init failed: oops");
        let s = e.to_string();
        assert!(s.contains("fake-flowtable-dpdk failed") && s.contains('3') && s.contains("oops"), "{s}");
    }

    #[cfg(unix)]
    #[test]
    fn garbage_output_is_bad_json() {
        let d = TempDir::new("garbage");
        let bin = script(&d.0, "echo 'this is not json'");
        let e = run_retrying(&bin, &d.0.join("keys.bin")).expect_err("garbage");
        assert!(matches!(e, DpdkError::Output { .. }), "{e:?}");
        assert!(e.to_string().contains("this is not json"));
    }

    /// The arguments it is given, and a good line parsed.
    #[cfg(unix)]
    #[test]
    fn passes_keys_passes_cpu_and_json() {
        let d = TempDir::new("args");
        let args = d.0.join("args");
        let body = format!("echo \"$@\" > '{}'\ncat <<'EOF'\n{CANNED}\nEOF", args.display());
        let bin = script(&d.0, &body);
        let keys = d.0.join("keys.bin");
        let run = run_retrying(&bin, &keys).expect("run");
        assert_eq!(run.rows.len(), 4);
        let got = std::fs::read_to_string(&args).expect("args");
        assert_eq!(got.trim(), format!("--keys {} --passes 2 --cpu 1 --json", keys.display()));
    }

    /// The real harness on keys written here, when it is built (`make -C
    /// bench/dpdk flowtable-dpdk`): both sides agree on the counts. Ignored
    /// by default: it needs DPDK and CPU 1 (`cargo test -p flowsteer-bench
    /// -- --ignored real_harness`).
    #[test]
    #[ignore = "needs bench/dpdk/flowtable-dpdk built and CPU 1"]
    fn real_harness_counts_match() {
        let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../bench/dpdk/flowtable-dpdk");
        let d = TempDir::new("real");
        let keys = d.0.join("keys.bin");
        // 1,000 distinct keys, 10,000 in all: first the even ones in pairs
        // (a new key repeated within a burst), then all of them in turn.
        let distinct: Vec<[u8; 48]> = (0..1000u32)
            .map(|i| {
                let mut k = [0u8; 48];
                k[..4].copy_from_slice(&i.to_le_bytes());
                k[40..44].copy_from_slice(&(i * 7919).to_le_bytes());
                k
            })
            .collect();
        let mut stream: Vec<[u8; 48]> = (0..1000).map(|i| distinct[i / 2 * 2]).collect();
        stream.extend((0..9000).map(|i| distinct[i % 1000]));
        write_keys(&keys, 2048, 32, 1000, stream.into_iter()).expect("write");
        let run = run(&bin, &keys, 3, 1).expect("run the harness");
        assert_eq!(run.rows.len(), 4);
        for r in &run.rows {
            let want = if r.phase == "fill" { (9000, 1000, 0) } else { (20000, 0, 0) };
            assert_eq!((r.hits, r.inserts, r.refused), want, "{r:?}");
            assert!(r.ns_per_key > 0.0, "{r:?}");
        }
    }
}
