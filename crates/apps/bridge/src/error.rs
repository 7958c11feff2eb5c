//! Errors of the bridge library (the CLI turns them into messages and exit codes).

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A port spec is not `afxdp:IFACE` or `afpacket:IFACE`.
    #[error("bad port {0:?}: expected afxdp:IFACE or afpacket:IFACE")]
    BadPortSpec(String),
    /// A control socket or metrics endpoint could not be served or reached
    /// (the system's error is the source: print the chain, `{:#}`).
    #[error("{what}")]
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
    /// `ctl::bind`: the directory the control socket's path names does not exist.
    #[error(
        "the control socket's directory {0} does not exist: create it, or give --ctl a path in an existing directory"
    )]
    NoDirectory(std::path::PathBuf),
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
    /// The bridge's configuration is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
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

/// Largest number of member ports (a port's index is a `u16` in the MAC
/// table).
pub const MAX_PORTS: usize = 64;
/// Largest number of workers.
pub const MAX_WORKERS: usize = 64;
/// Largest burst (frames taken from one receive queue at once).
pub const MAX_BURST: usize = 256;
/// Largest RX copy threshold: an AF_XDP frame holds at most 3,840 bytes.
pub const MAX_RX_COPY_THRESHOLD: usize = 4096;

/// What is wrong with a [`BridgeConfig`](crate::config::BridgeConfig) (or a piece of one on the
/// command line).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Fewer than two ports.
    #[error("a bridge needs at least two ports, {0} given")]
    TooFewPorts(usize),
    /// More than [`MAX_PORTS`] ports.
    #[error("at most {MAX_PORTS} ports, {0} given")]
    TooManyPorts(usize),
    /// One interface named twice.
    #[error("interface {0} is given twice")]
    DuplicateInterface(String),
    /// `workers` is 0 or above [`MAX_WORKERS`].
    #[error("workers must be between 1 and {MAX_WORKERS}, not {0}")]
    BadWorkers(usize),
    /// `burst` is 0 or above [`MAX_BURST`].
    #[error("burst must be between 1 and {MAX_BURST}, not {0}")]
    BadBurst(usize),
    /// `worker_nice` is outside -20..=19.
    #[error("worker nice value must be between -20 and 19, not {0}")]
    BadNice(i8),
    /// `ageing_s` is 0.
    #[error("ageing must be at least 1 second")]
    BadAgeing,
    /// A learned-entry limit is above the table's bound.
    #[error("{0} must be between 0 (no limit) and {max}", max = flowsteer_fdb::MAX_CAPACITY)]
    BadLimit(&'static str),
    /// `rx_copy_threshold` above [`MAX_RX_COPY_THRESHOLD`].
    #[error("rx copy threshold must be at most {MAX_RX_COPY_THRESHOLD}, not {0}")]
    BadRxCopyThreshold(usize),
    /// Not `cpu` or `flow`.
    #[error("tx queue {0:?}: expected cpu or flow")]
    BadTxQueue(String),
    /// `--fast-path xdp` cannot serve the ports (VLAN filtering, no AF_XDP port).
    #[error("--fast-path: {0}")]
    FastPath(&'static str),
    /// `--fast-path` is not auto, xdp or off.
    #[error("--fast-path {0:?}: expected auto, xdp or off")]
    BadFastPath(String),
    /// Not `VIDS[:pvid=N]` with VLAN ids 1..=4094.
    #[error("bad VLANs {0:?}: expected VIDS[:pvid=N], e.g. 10,20-22:pvid=10 (ids 1-4094)")]
    BadVlans(String),
    /// VLANs given for an interface that is not a port.
    #[error("VLANs given for {0}, which is not a port")]
    VlansForUnknownPort(String),
    /// Flags given for an interface that is not a port.
    #[error("flags given for {0}, which is not a port")]
    FlagsForUnknownPort(String),
    /// Not a port state.
    #[error("port state {0:?}: expected disabled, listening, learning, forwarding or blocking (or 0-4)")]
    BadPortState(String),
    /// Not a port flag, or a bad value for one.
    #[error("port flag {0:?}: expected learning, flood, mcast_flood, bcast_flood, isolated (on|off), state S or max_learned N")]
    BadPortFlag(String),
    /// Not `802.1q` or `802.1ad`.
    #[error("VLAN protocol {0:?}: expected 802.1q or 802.1ad")]
    BadVlanProtocol(String),
    /// A default PVID outside 0..=4094.
    #[error("default PVID {0}: expected 1-4094, or 0 for none")]
    BadDefaultPvid(u16),
}
