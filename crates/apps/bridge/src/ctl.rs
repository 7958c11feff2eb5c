//! The control socket: a Unix stream socket (mode 0600) carrying one JSON
//! [`Request`](crate::Request) per line and one JSON
//! [`Response`](crate::Response) per line back.

use crate::{BridgeError, Control};
use std::path::Path;
use std::sync::Arc;

/// A served control socket; dropping it stops serving.
#[derive(Debug)]
pub struct CtlServer;

impl Drop for CtlServer {
    fn drop(&mut self) {}
}

/// Serves `control` on the Unix socket `path` (not built yet: refuses).
pub fn serve(path: &Path, control: Arc<dyn Control>) -> Result<impl Drop, BridgeError> {
    drop(control);
    Err::<CtlServer, _>(BridgeError::Io {
        what: format!("control socket {}", path.display()),
        source: std::io::Error::other("not built yet"),
    })
}
