//! Stopping long-running commands cleanly on SIGINT and SIGTERM.

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
