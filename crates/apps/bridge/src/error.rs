//! Errors of the bridge library (the CLI turns them into messages and exit codes).

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A port spec is not `afxdp:IFACE` or `afpacket:IFACE`.
    #[error("bad port {0:?}: expected afxdp:IFACE or afpacket:IFACE")]
    BadPortSpec(String),
    /// A control socket or metrics endpoint could not be served or reached.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path or address.
        what: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The peer sent something that is not a valid request or response.
    #[error("control protocol: {0}")]
    Protocol(String),
    /// `ctl::serve`: a bridge already answers on this control socket.
    #[error("a bridge already answers on {0} (stop it, or give this one another --ctl PATH)")]
    AlreadyServing(std::path::PathBuf),
    /// `ctl::serve`: the control socket's path holds something that is not a socket.
    #[error("{0} exists and is not a socket (not removed; give another --ctl PATH)")]
    NotASocket(std::path::PathBuf),
    /// `ctl::request`: no socket at this path.
    #[error("no control socket at {0}: is the bridge running? (--ctl PATH)")]
    NoSocket(std::path::PathBuf),
    /// `ctl::request`: a socket file, but nothing listens on it.
    #[error("nothing answers on {0} (a stale socket): is the bridge running? (--ctl PATH)")]
    NotListening(std::path::PathBuf),
    /// `ctl::request`: the socket (mode 0600) belongs to another user.
    #[error("permission denied on {0}: the control socket is mode 0600, run as the bridge's user")]
    PermissionDenied(std::path::PathBuf),
    /// `ctl::request`: no answer in time.
    #[error("no answer on {path} within {after:?}")]
    Timeout {
        /// The control socket.
        path: std::path::PathBuf,
        /// How long it waited.
        after: std::time::Duration,
    },
}
