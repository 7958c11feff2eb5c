//! Stopping long-running commands cleanly on SIGINT and SIGTERM, and
//! keeping them alive through SIGHUP, SIGUSR1 and SIGUSR2 (whose default
//! action ends the process).

use crate::error::LiveError;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;

/// A flag set by SIGINT or SIGTERM; a second signal while it is set exits
/// at once (code 1), so a stuck run can still be interrupted.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>, LiveError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone()).map_err(LiveError::Signal)?;
        signal_hook::flag::register(sig, stop.clone()).map_err(LiveError::Signal)?;
    }
    Ok(stop)
}

/// SIGINT and SIGTERM for a command that stops in two steps, from a thread
/// of their own ([`stop_then_abort_on_signals`]): the first signal raises
/// [`StopSignals::stop`] (stop cleanly), the second raises
/// [`StopSignals::abort`] (end at once) and then runs the caller's hook on
/// that thread; later ones are only counted. Unlike [`stop_on_signals`],
/// no signal exits the process here: the caller decides.
#[derive(Clone, Debug)]
pub struct StopSignals {
    /// Raised by the first signal.
    pub stop: Arc<AtomicBool>,
    /// Raised by the second signal.
    pub abort: Arc<AtomicBool>,
    first: Arc<AtomicI32>,
    count: Arc<AtomicUsize>,
}

impl StopSignals {
    /// The first signal taken, by name (`SIGINT`, `SIGTERM`), if any.
    pub fn first(&self) -> Option<&'static str> {
        match self.first.load(Ordering::Acquire) {
            signal_hook::consts::SIGINT => Some("SIGINT"),
            signal_hook::consts::SIGTERM => Some("SIGTERM"),
            _ => None,
        }
    }

    /// How many of the two signals were taken so far.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
}

/// Catches SIGINT and SIGTERM for the rest of the process (see
/// [`StopSignals`]); `on_second` runs once, on the signal thread, right
/// after the second signal raised `abort` (e.g. a deadline after which the
/// caller gives up waiting for its counters). Fails when the handlers or
/// the thread cannot be set up.
pub fn stop_then_abort_on_signals(on_second: impl FnOnce() + Send + 'static) -> Result<StopSignals, LiveError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(LiveError::Signal)?;
    let s = StopSignals {
        stop: Arc::new(AtomicBool::new(false)),
        abort: Arc::new(AtomicBool::new(false)),
        first: Arc::new(AtomicI32::new(0)),
        count: Arc::new(AtomicUsize::new(0)),
    };
    let t = s.clone();
    std::thread::Builder::new()
        .name("fs-signals".into())
        .spawn(move || {
            let mut on_second = Some(on_second);
            for sig in signals.forever() {
                match t.count.fetch_add(1, Ordering::AcqRel) {
                    0 => {
                        t.first.store(sig, Ordering::Release);
                        t.stop.store(true, Ordering::Release);
                    }
                    1 => {
                        t.abort.store(true, Ordering::Release);
                        if let Some(hook) = on_second.take() {
                            hook();
                        }
                    }
                    _ => {}
                }
            }
        })
        .map_err(LiveError::Signal)?;
    Ok(s)
}

/// A flag set by SIGUSR1, for a long-running command to print its
/// counters (it clears the flag, `swap(false)`, and prints once per
/// signal taken). SIGHUP (a closing terminal) and SIGUSR2 are caught and
/// do nothing. None of the three then ends the process, as their default
/// action would (no final counters, files left behind).
pub fn report_on_sigusr1() -> Result<Arc<AtomicBool>, LiveError> {
    let report = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, report.clone()).map_err(LiveError::Signal)?;
    let ignored = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGHUP, signal_hook::consts::SIGUSR2] {
        signal_hook::flag::register(sig, ignored.clone()).map_err(LiveError::Signal)?;
    }
    Ok(report)
}
