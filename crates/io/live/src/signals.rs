//! Stopping long-running commands cleanly on SIGINT and SIGTERM, and
//! keeping them alive through SIGHUP, SIGUSR1 and SIGUSR2 (whose default
//! action ends the process).

use crate::error::LiveError;
use std::sync::atomic::AtomicBool;
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
