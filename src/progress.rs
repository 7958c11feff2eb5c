//! Progress on stderr for work that can take more than a few seconds:
//! drawn only when stderr is a terminal, never with `--json` (nor with
//! `--quiet` where a command has it), and cleared when the work ends.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a bar is redrawn.
const TICK: Duration = Duration::from_millis(100);

/// Whether progress may be drawn: stderr is a terminal and the output is
/// not a JSON document.
pub fn wanted(json: bool) -> bool {
    !json && std::io::stderr().is_terminal()
}

/// A bar by bytes: another thread publishes the bytes done in `done`; a
/// ticker thread draws them against `total`. Cleared when dropped.
pub struct ByteBar {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl ByteBar {
    pub fn start(what: &str, total: u64, done: Arc<AtomicU64>) -> ByteBar {
        let bar = ProgressBar::new(total);
        if let Ok(style) =
            ProgressStyle::with_template("{msg} {bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
        {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        bar.tick();
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (bar.clone(), stop.clone());
        let ticker = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                b.set_position(done.load(Ordering::Relaxed));
                std::thread::sleep(TICK);
            }
        });
        ByteBar { bar, stop, ticker: Some(ticker) }
    }
}

impl Drop for ByteBar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

/// A spinner with a message and the elapsed time, for work whose size is
/// not known ahead. Cleared when dropped.
pub struct Spinner(ProgressBar);

impl Spinner {
    pub fn start(what: &str) -> Spinner {
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        bar.tick();
        bar.enable_steady_tick(TICK);
        Spinner(bar)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// Progress over many files read at once: files done, packets, bytes
/// against the total, the packet rate and the time left (by bytes). The
/// readers publish into a [`FilesProgress`]; a ticker thread draws it.
/// Cleared when dropped.
pub struct FilesBar {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

/// What the readers of a [`FilesBar`] publish.
#[derive(Default)]
pub struct FilesProgress {
    /// Bytes of the files read so far.
    pub bytes: AtomicU64,
    /// Packets read so far.
    pub packets: AtomicU64,
    /// Files finished.
    pub files: AtomicU64,
}

impl FilesBar {
    pub fn start(files: usize, total_bytes: u64, done: Arc<FilesProgress>) -> FilesBar {
        let bar = ProgressBar::new(total_bytes);
        if let Ok(style) =
            ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
        {
            bar.set_style(style);
        }
        bar.tick();
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (bar.clone(), stop.clone());
        let started = std::time::Instant::now();
        let ticker = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let packets = done.packets.load(Ordering::Relaxed);
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                b.set_message(format!(
                    "files {}/{files}, {:.1} M packets, {:.2} Mpps",
                    done.files.load(Ordering::Relaxed),
                    packets as f64 / 1e6,
                    packets as f64 / secs / 1e6
                ));
                b.set_position(done.bytes.load(Ordering::Relaxed));
                std::thread::sleep(TICK);
            }
        });
        FilesBar { bar, stop, ticker: Some(ticker) }
    }
}

impl Drop for FilesBar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}
