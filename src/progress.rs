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
