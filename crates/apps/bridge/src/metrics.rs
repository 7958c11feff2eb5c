//! Counters in the Prometheus text exposition format, served over HTTP.

use crate::{BridgeError, Control};
use std::net::SocketAddr;
use std::sync::Arc;

/// A served metrics endpoint; dropping it stops serving.
#[derive(Debug)]
pub struct MetricsServer;

impl Drop for MetricsServer {
    fn drop(&mut self) {}
}

/// Serves `control`'s counters on `addr` (not built yet: refuses).
pub fn serve(addr: SocketAddr, control: Arc<dyn Control>) -> Result<impl Drop, BridgeError> {
    drop(control);
    Err::<MetricsServer, _>(BridgeError::Io {
        what: format!("metrics endpoint {addr}"),
        source: std::io::Error::other("not built yet"),
    })
}
