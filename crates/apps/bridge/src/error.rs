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
    /// The bridge's configuration is wrong.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A member port could not be opened.
    #[error("port {iface}: {message}")]
    Port {
        /// The interface.
        iface: String,
        /// Why, for people.
        message: String,
    },
    /// The MAC table refused its configuration.
    #[error("MAC table: {0}")]
    Fdb(String),
    /// A thread could not be started.
    #[error("starting a thread: {0}")]
    Spawn(#[source] std::io::Error),
}
