//! `flowsteer analyze` over many captures, and `analyze --merge` of reports
//! made elsewhere: the inputs (files, directories, glob patterns), what a
//! report says it was made from (size, BLAKE3, packets, time span of each
//! capture), the pool of readers whose states are merged in time order, and
//! the reading of reports.
//!
//! Time order: captures are ordered by the timestamp of their first packet
//! (ties keep the order given) and treated as concatenated in that order.
//! Captures that overlap in time are not interleaved packet by packet: a
//! warning names them, and the figures that depend on order (a split
//! flow's first queue, fragments matched across files, which flows a full
//! table tracks) follow the order above; every other figure is the same in
//! any order.
//!
//! Work: the captures, in time order, are cut into two runs of consecutive
//! files per reader, of about equal bytes; a reader takes the next run and
//! feeds it to one analyzer, so only the runs' boundaries are merged (a
//! state and a merge cost in proportion to flows, not packets), and a
//! reader that finishes early takes the runs left.
//!
//! Memory: each reader holds one analyzer (bounded by `--max-flows`); at
//! most `2 x threads` finished states wait to be merged, and the merge holds
//! one flow table of at most `--max-flows` flows.

use crate::progress::{FilesBar, FilesProgress};
use crate::report::count;
use anyhow::{anyhow, bail, Context, Result};
use flowsteer_analyze::state::{compatible, RssIdentity, StateOptions};
use flowsteer_analyze::{AnalyzeOptions, Analyzer, Merger, State, SCHEMA};
use flowsteer_capture::{CaptureError, CaptureReader, Decompressed, Format};
use flowsteer_rss::RssConfig;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

/// One capture a report was made from (the `inputs` of the JSON report;
/// the `capture` member too when there is one).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Input {
    /// As given (or found in a directory or by a pattern).
    pub path: String,
    /// `pcap` or `pcapng` (null when the file ends inside its header).
    pub format: Option<String>,
    /// `none`, `gzip` or `zstd`: recognised by content, decompressed as read.
    pub compression: String,
    /// Bytes of the file (compressed, when it is).
    pub file_bytes: u64,
    /// BLAKE3 of the file's bytes, hex (what `b3sum` prints); null with
    /// `--no-hash`.
    pub blake3: Option<String>,
    /// Packets fed to the analyzer.
    pub packets: u64,
    /// Their wire bytes.
    pub bytes: u64,
    /// Timestamp of the first packet, nanoseconds since the Unix epoch.
    pub start_ns: Option<u64>,
    /// The latest timestamp of any packet.
    pub end_ns: Option<u64>,
    /// The file ends inside a record; the report covers the records before.
    pub truncated: bool,
    /// pcapng packets naming an interface their section does not describe:
    /// skipped, not fed to the analyzer (so not in `packets_read`).
    pub skipped_unknown_interface: u64,
}

/// Several inputs' analyses merged.
pub struct Combined {
    /// The merged state.
    pub state: State,
    /// The captures, in the order merged.
    pub inputs: Vec<Input>,
    /// With `--merge`: the reports, in the order merged.
    pub reports: Vec<String>,
    /// Warnings for the user.
    pub warnings: Vec<String>,
}

/// Files, directories (their files, not recursively, hidden ones left out)
/// and glob patterns (quoted, so the shell leaves them: `'caps/**/*.pcap'`),
/// expanded in the order given, each directory and pattern sorted by name.
/// A file named twice is read once (a warning says so).
pub fn expand(args: &[PathBuf], warnings: &mut Vec<String>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        match std::fs::metadata(a) {
            Ok(m) if m.is_dir() => {
                let mut files = Vec::new();
                for entry in std::fs::read_dir(a).with_context(|| a.display().to_string())? {
                    let path = entry.with_context(|| a.display().to_string())?.path();
                    let hidden = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'));
                    if !hidden && path.is_file() {
                        files.push(path);
                    }
                }
                if files.is_empty() {
                    bail!("{}: a directory with no files", a.display());
                }
                files.sort();
                out.extend(files);
            }
            Ok(_) => out.push(a.clone()),
            Err(e) => {
                let pattern = a.to_string_lossy();
                if !pattern.contains(['*', '?', '[']) {
                    return Err(anyhow::Error::new(e).context(a.display().to_string()));
                }
                let paths = glob::glob(&pattern).map_err(|e| crate::cmd::usage(format!("{pattern}: {e}")))?;
                let mut files: Vec<PathBuf> = paths.filter_map(|p| p.ok()).filter(|p| p.is_file()).collect();
                if files.is_empty() {
                    bail!("{pattern}: no file matches");
                }
                files.sort();
                out.extend(files);
            }
        }
    }
    let mut seen = HashSet::new();
    let mut unique = Vec::with_capacity(out.len());
    for p in out {
        let id = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if seen.insert(id) {
            unique.push(p);
        } else {
            warnings.push(format!("{} is named more than once: read once", p.display()));
        }
    }
    Ok(unique)
}

/// Reads the file through the BLAKE3 and the progress counters.
struct Source {
    file: File,
    /// Hash what is read (else only count it).
    hash: bool,
    hashed: Rc<RefCell<(blake3::Hasher, u64)>>,
    progress: Arc<FilesProgress>,
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        let mut h = self.hashed.borrow_mut();
        if self.hash {
            h.0.update(&buf[..n]);
        }
        h.1 += n as u64;
        self.progress.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

fn open_capture(path: &Path, source: Source) -> Result<(CaptureReader<Decompressed<Source>>, &'static str)> {
    let source = Decompressed::new(source).with_context(|| path.display().to_string())?;
    let compression = source.compression().name();
    match CaptureReader::new(source) {
        Ok(r) => Ok((r, compression)),
        Err(CaptureError::NotACapture) => bail!("{}: not a pcap or pcapng capture", path.display()),
        Err(CaptureError::Truncated { .. }) => {
            bail!("{}: not a readable capture: the file ends inside its file header", path.display())
        }
        Err(e) => bail!("{}: {e}", path.display()),
    }
}

/// The timestamp of the capture's first packet (`None`: no packet, or the
/// file cannot be read; reading it for the analysis says why).
fn first_timestamp(path: &Path) -> Option<u64> {
    let file = File::open(path).ok()?;
    let hashed = Rc::new(RefCell::new((blake3::Hasher::new(), 0)));
    let source = Source { file, hash: false, hashed, progress: Arc::new(FilesProgress::default()) };
    let (mut reader, _) = open_capture(path, source).ok()?;
    loop {
        match reader.next_packet() {
            Ok(Some(p)) => return Some(p.ts_nanos),
            Err(CaptureError::UnknownInterface(_)) => continue,
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Streams the capture at `path` into `analyzer` (after whatever it was
/// fed before): read + BLAKE3 + parse + hash + flow table, on the calling
/// thread. Returns what the capture was and its warnings.
fn read_into(
    path: &Path,
    hash: bool,
    analyzer: &mut Analyzer,
    progress: &Arc<FilesProgress>,
    abort: &AtomicBool,
) -> Result<(Input, Vec<String>)> {
    let file = File::open(path).with_context(|| path.display().to_string())?;
    let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let hashed = Rc::new(RefCell::new((blake3::Hasher::new(), 0u64)));
    // No BufReader: the capture reader fills its own 128 KiB buffer.
    let source = Source { file, hash, hashed: Rc::clone(&hashed), progress: Arc::clone(progress) };
    let (mut reader, compression) = open_capture(path, source)?;
    let mut input = Input {
        path: path.display().to_string(),
        format: Some(
            match reader.format() {
                Format::Pcap => "pcap",
                Format::PcapNg => "pcapng",
            }
            .to_string(),
        ),
        compression: compression.to_string(),
        file_bytes,
        ..Input::default()
    };
    let (packets_before, bytes_before) = (analyzer.packets_read(), analyzer.bytes_read());
    let mut warnings = Vec::new();
    let mut unpublished = 0u64;
    loop {
        match reader.next_packet() {
            Ok(Some(p)) => {
                analyzer.feed(p.linktype, p.data, p.orig_len);
                if input.start_ns.is_none() {
                    input.start_ns = Some(p.ts_nanos);
                }
                input.end_ns = Some(input.end_ns.map_or(p.ts_nanos, |e| e.max(p.ts_nanos)));
                unpublished += 1;
                if unpublished == 65_536 {
                    progress.packets.fetch_add(unpublished, Ordering::Relaxed);
                    unpublished = 0;
                    if abort.load(Ordering::Relaxed) {
                        bail!("{}: stopped (another input failed)", path.display());
                    }
                }
            }
            Ok(None) => break,
            Err(CaptureError::Truncated { packets_read }) => {
                input.truncated = true;
                warnings.push(format!("capture truncated after {}", count(packets_read, "packet", "packets")));
            }
            Err(CaptureError::UnknownInterface(_)) => input.skipped_unknown_interface += 1,
            Err(e) => {
                bail!("{}: {e} (after {} packets)", path.display(), analyzer.packets_read() - packets_before)
            }
        }
    }
    progress.packets.fetch_add(unpublished, Ordering::Relaxed);
    progress.files.fetch_add(1, Ordering::Relaxed);
    if input.skipped_unknown_interface > 0 {
        warnings.push(if input.skipped_unknown_interface == 1 {
            "1 pcapng packet names an undescribed interface and was skipped".to_string()
        } else {
            format!("{} pcapng packets name an undescribed interface and were skipped", input.skipped_unknown_interface)
        });
    }
    warnings.extend(reader.stats().warnings());
    drop(reader);
    let (mut hasher, read) = Rc::try_unwrap(hashed).map(RefCell::into_inner).map_err(|_| anyhow!("reader kept"))?;
    if hash && read < file_bytes {
        // The reader stopped before the end (trailing bytes): hash them too.
        let mut rest = File::open(path).with_context(|| path.display().to_string())?;
        rest.seek(SeekFrom::Start(read)).with_context(|| path.display().to_string())?;
        std::io::copy(&mut rest, &mut hasher).with_context(|| path.display().to_string())?;
    }
    input.blake3 = hash.then(|| hasher.finalize().to_hex().to_string());
    input.packets = analyzer.packets_read() - packets_before;
    input.bytes = analyzer.bytes_read() - bytes_before;
    Ok((input, warnings))
}

/// Consecutive captures (in time order) analysed by one analyzer: what one
/// run over them concatenated gives.
struct Chunk {
    state: State,
    inputs: Vec<Input>,
    /// Per input.
    warnings: Vec<Vec<String>>,
}

fn analyze_chunk(
    paths: &[&Path],
    config: &RssConfig,
    opts: AnalyzeOptions,
    hash: bool,
    progress: &Arc<FilesProgress>,
    abort: &AtomicBool,
) -> Result<Chunk> {
    let mut analyzer = Analyzer::new(config, opts);
    let mut inputs = Vec::with_capacity(paths.len());
    let mut warnings = Vec::with_capacity(paths.len());
    for path in paths {
        let (input, w) = read_into(path, hash, &mut analyzer, progress, abort)?;
        inputs.push(input);
        warnings.push(w);
    }
    Ok(Chunk { state: analyzer.into_state(), inputs, warnings })
}

/// Cuts `sizes` (in order) into at most `n` non-empty runs of consecutive
/// items of about equal total size; returns each run's end.
fn runs_by_size(sizes: &[u64], n: usize) -> Vec<usize> {
    let len = sizes.len();
    let n = n.clamp(1, len.max(1));
    let total: u128 = sizes.iter().map(|&s| u128::from(s.max(1))).sum();
    let mut ends = Vec::with_capacity(n);
    let mut acc = 0u128;
    for (i, &s) in sizes.iter().enumerate() {
        acc += u128::from(s.max(1));
        let closed = ends.len();
        if closed + 1 == n {
            break; // the last run takes the rest
        }
        let (items_left, runs_after) = (len - i - 1, n - closed - 1);
        // Close the run when it has its share, or when the items left are
        // just enough for one run each.
        let share = acc * n as u128 >= total * (closed as u128 + 1);
        if items_left >= runs_after && (share || items_left == runs_after) {
            ends.push(i + 1);
        }
    }
    ends.push(len);
    ends
}

/// Analyses `paths` with `threads` readers and merges the results in time
/// order; one progress bar over all of them when `progress`; each file
/// hashed (BLAKE3) as it is read when `hash`.
///
/// The captures, in time order, are cut into at most `2 x threads` runs of
/// consecutive files of about equal size; a reader takes the next run and
/// feeds its files, one after the other, to one analyzer (a run's state is
/// the single run's over those files); the runs' states are merged in
/// order as they come.
pub fn analyze_files(
    paths: &[PathBuf],
    config: &RssConfig,
    opts: AnalyzeOptions,
    threads: usize,
    progress: bool,
    hash: bool,
) -> Result<Combined> {
    let n = paths.len();
    let mut order: Vec<usize> = (0..n).collect();
    if n > 1 {
        let starts: Vec<Option<u64>> = paths.iter().map(|p| first_timestamp(p)).collect();
        order.sort_by_key(|&i| starts[i].unwrap_or(0));
    }
    let ordered: Vec<&Path> = order.iter().map(|&i| paths[i].as_path()).collect();
    let sizes: Vec<u64> = ordered.iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).collect();
    let counters = Arc::new(FilesProgress::default());
    let bar = progress.then(|| FilesBar::start(n, sizes.iter().sum(), Arc::clone(&counters)));
    let threads = threads.clamp(1, n.max(1));
    // Two runs per reader: readers that finish early take the runs left
    // (a run costs a state and a merge in proportion to its flows, so not
    // more).
    let ends = runs_by_size(&sizes, 2 * threads);
    let runs: Vec<&[&Path]> = ends
        .iter()
        .scan(0, |start, &end| {
            let run = &ordered[*start..end];
            *start = end;
            Some(run)
        })
        .collect();
    let window = 2 * threads;
    let next = AtomicUsize::new(0);
    let abort = AtomicBool::new(false);
    let merged_upto = (Mutex::new(0usize), Condvar::new());

    let result = std::thread::scope(|s| -> Result<Combined> {
        let (tx, rx) = mpsc::channel::<(usize, Result<Chunk>)>();
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, abort, merged_upto, counters, runs) = (&next, &abort, &merged_upto, &counters, &runs);
            s.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(run) = runs.get(k) else { break };
                {
                    let (lock, cvar) = merged_upto;
                    let mut upto = lock.lock().unwrap_or_else(|e| e.into_inner());
                    while k >= *upto + window && !abort.load(Ordering::Relaxed) {
                        upto = cvar.wait(upto).unwrap_or_else(|e| e.into_inner());
                    }
                }
                if abort.load(Ordering::Relaxed) {
                    break;
                }
                let r = analyze_chunk(run, config, opts, hash, counters, abort);
                if tx.send((k, r)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let stop = |e: anyhow::Error| {
            abort.store(true, Ordering::Relaxed);
            merged_upto.1.notify_all();
            e
        };
        let mut pending: BTreeMap<usize, Chunk> = BTreeMap::new();
        let mut merger: Option<Merger> = None;
        let mut inputs = Vec::with_capacity(n);
        let mut warnings = Vec::new();
        let mut upto = 0;
        for (k, r) in rx {
            pending.insert(k, r.map_err(stop)?);
            while let Some(c) = pending.remove(&upto) {
                let what = c.inputs.first().map_or_else(String::new, |i| i.path.clone());
                merger = Some(
                    match merger.take() {
                        None => Merger::new(c.state),
                        Some(mut m) => m.push(c.state).map(|()| m),
                    }
                    .map_err(|e| stop(anyhow!("{what}: {e}")))?,
                );
                for (input, w) in c.inputs.into_iter().zip(c.warnings) {
                    if n > 1 {
                        warnings.extend(w.iter().map(|w| format!("{}: {w}", input.path)));
                    } else {
                        warnings.extend(w);
                    }
                    inputs.push(input);
                }
                upto += 1;
                *merged_upto.0.lock().unwrap_or_else(|e| e.into_inner()) = upto;
                merged_upto.1.notify_all();
            }
        }
        let state = merger.ok_or_else(|| anyhow!("no input"))?.finish();
        Ok(Combined { state, inputs, reports: Vec::new(), warnings })
    });
    drop(bar);
    let mut combined = result?;
    combined.warnings.extend(overlaps(&combined.inputs));
    combined.warnings.extend(same_content(&combined.inputs));
    Ok(combined)
}

/// Warnings for captures that overlap in time (as ordered).
fn overlaps(inputs: &[Input]) -> Vec<String> {
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut latest: Option<(u64, usize)> = None;
    for (i, input) in inputs.iter().enumerate() {
        if let (Some(start), Some((end, j))) = (input.start_ns, latest) {
            if start < end {
                found.push((j, i));
            }
        }
        if let Some(end) = input.end_ns {
            if latest.is_none_or(|(e, _)| end > e) {
                latest = Some((end, i));
            }
        }
    }
    let Some(&(a, b)) = found.first() else { return Vec::new() };
    let more = if found.len() > 1 { format!(" ({} pairs in all)", found.len()) } else { String::new() };
    vec![format!(
        "{} and {} overlap in time{more}: they are taken as concatenated in the order of their first packets; \
         the figures that depend on order (a split flow's first queue, fragments matched across files, which flows a full table tracks) follow that order",
        inputs[a].path, inputs[b].path
    )]
}

/// Warnings for captures of the same content (counted once each time).
fn same_content(inputs: &[Input]) -> Vec<String> {
    let mut by_hash: HashMap<&str, &str> = HashMap::new();
    let mut out = Vec::new();
    for (i, hash) in inputs.iter().filter_map(|i| Some((i, i.blake3.as_deref()?))) {
        if let Some(first) = by_hash.insert(hash, &i.path) {
            out.push(format!("{first} and {} have the same content (blake3 {hash}): both are counted", i.path));
        }
    }
    out
}

/// What `--merge` reads first from every report.
#[derive(Deserialize)]
struct Head {
    schema: String,
    #[serde(default)]
    flowsteer_version: Option<String>,
    #[serde(default)]
    inputs: Vec<Input>,
    #[serde(default)]
    state: Option<StateHead>,
}

#[derive(Deserialize)]
struct StateHead {
    rss: RssIdentity,
    options: StateOptions,
}

/// What `--merge` reads second.
#[derive(Deserialize)]
struct Body {
    state: State,
}

fn read_report<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| anyhow!("{}: not a flowsteer analyze report ({e})", path.display()))
}

/// Merges reports written by `flowsteer analyze --json` (schema [`SCHEMA`]),
/// in the time order of the captures they were made from. Refuses (an
/// error naming the reports and the difference) reports of another schema,
/// without a state, made under different configurations, or made from the
/// same capture.
pub fn merge_reports(paths: &[PathBuf], version: &str) -> Result<Combined> {
    let mut heads = Vec::with_capacity(paths.len());
    for path in paths {
        let head: Head = read_report(path)?;
        if head.schema != SCHEMA {
            bail!(
                "{}: schema {}, not {SCHEMA}: --merge takes reports written by `flowsteer analyze --json` of this version",
                path.display(),
                head.schema
            );
        }
        let Some(state) = &head.state else {
            bail!("{}: a {SCHEMA} report without its state: nothing to merge", path.display());
        };
        if let (Some(first), Some(f)) = (heads.first().and_then(|h: &Head| h.state.as_ref()), paths.first()) {
            compatible((&first.rss, &first.options), (&state.rss, &state.options))
                .map_err(|e| anyhow!("{} and {}: {e}", f.display(), path.display()))?;
        }
        heads.push(head);
    }
    let mut warnings = Vec::new();
    let mut seen: HashMap<String, (String, usize)> = HashMap::new();
    for (i, head) in heads.iter().enumerate() {
        for (input, hash) in head.inputs.iter().filter_map(|x| Some((x, x.blake3.as_deref()?))) {
            if let Some((other, j)) = seen.insert(hash.to_string(), (input.path.clone(), i)) {
                let where_ = if j == i {
                    format!("twice in {}", paths[i].display())
                } else {
                    format!("in {} and in {}", paths[j].display(), paths[i].display())
                };
                bail!(
                    "the capture {other} (blake3 {hash}) is {where_}{}: merging would count it twice",
                    if other != input.path { format!(" (also as {})", input.path) } else { String::new() }
                );
            }
        }
        if let Some(v) = head.flowsteer_version.as_deref().filter(|v| *v != version) {
            warnings.push(format!("{} was made by flowsteer {v}, this is {version}", paths[i].display()));
        }
    }
    let mut order: Vec<usize> = (0..paths.len()).collect();
    order.sort_by_key(|&i| heads[i].inputs.iter().filter_map(|x| x.start_ns).min().unwrap_or(0));

    let mut merger: Option<Merger> = None;
    let mut inputs = Vec::new();
    let mut reports = Vec::new();
    for &i in &order {
        let path = &paths[i];
        let body: Body = read_report(path)?;
        merger = Some(
            match merger.take() {
                None => Merger::new(body.state),
                Some(mut m) => m.push(body.state).map(|()| m),
            }
            .map_err(|e| anyhow!("{}: {e}", path.display()))?,
        );
        inputs.extend(std::mem::take(&mut heads[i].inputs));
        reports.push(path.display().to_string());
    }
    let state = merger.ok_or_else(|| anyhow!("no report"))?.finish();
    warnings.extend(overlaps(&inputs));
    Ok(Combined { state, inputs, reports, warnings })
}

#[cfg(test)]
mod tests {
    use super::runs_by_size;

    #[test]
    fn runs_are_consecutive_non_empty_and_balanced() {
        assert_eq!(runs_by_size(&[10; 16], 4), [4, 8, 12, 16]);
        assert_eq!(runs_by_size(&[10; 3], 4), [1, 2, 3]);
        assert_eq!(runs_by_size(&[10], 4), [1]);
        assert_eq!(runs_by_size(&[100, 1, 1, 1], 2), [1, 4]);
        assert_eq!(runs_by_size(&[1, 1, 1, 100], 4), [1, 2, 3, 4]);
        assert_eq!(runs_by_size(&[0, 0, 0, 0], 2), [2, 4]);
        for n in 1..6 {
            for len in 1..9 {
                let sizes: Vec<u64> = (0..len).map(|i| (i * 37 % 11) as u64).collect();
                let ends = runs_by_size(&sizes, n);
                assert_eq!(ends.len(), n.min(len), "{sizes:?} {n}");
                assert!(ends.windows(2).all(|w| w[0] < w[1]) && ends[0] > 0 && *ends.last().unwrap() == len);
            }
        }
    }
}
