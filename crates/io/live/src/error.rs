//! The one error type of the crate.

/// What can go wrong opening a live source or reading the host.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A source spec that does not parse; the text says what was expected.
    #[error("{0}")]
    Spec(String),
    #[error("interface {0} does not exist (see `ip link`)")]
    NoInterface(String),
    #[error("interface {0} reports no receive queues")]
    NoQueues(String),
    /// The RSS fanout program could not be built for this configuration.
    #[error("{0}")]
    Fanout(String),
    /// The backend refused to open (permissions, a missing queue, ...).
    #[error("{0}")]
    Open(String),
    /// The interface's MTU allows frames longer than an AF_XDP frame holds;
    /// the text names the numbers. The caller may allow the drops.
    #[error("{0}")]
    Mtu(String),
    #[error("install signal handler")]
    Signal(#[source] std::io::Error),
    /// The kernel has no usable route to `dst`: none, or an unreachable,
    /// prohibit or blackhole one (`error` is its answer).
    #[error("no route to {dst}: {error} (see `ip route get {dst}`)")]
    NoRoute { dst: std::net::IpAddr, error: std::io::Error },
    /// A netlink request about `what` failed (socket, send, receive).
    #[error("netlink, {what}")]
    Netlink {
        what: String,
        #[source]
        error: std::io::Error,
    },
}
