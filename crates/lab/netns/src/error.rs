//! Why a lab step failed.

/// Why a lab step failed. Each message says which command or namespace.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The `ip` command could not be started (`args`: its arguments).
    #[error("ip {args}: {error}")]
    IpSpawn { args: String, error: std::io::Error },
    /// `ip ARGS` failed; `stderr` is what it printed, trimmed.
    #[error("ip {args}: {stderr}")]
    IpFailed { args: String, stderr: String },
    /// The namespace file `/run/netns/NAME` could not be opened.
    #[error("enter network namespace {ns}: {path}: {error}")]
    OpenNamespace { ns: String, path: String, error: std::io::Error },
    /// `setns(2)` refused the namespace.
    #[error("enter network namespace {ns}: {error}")]
    Setns { ns: String, error: std::io::Error },
    /// An interface name with a NUL byte.
    #[error("bad interface name {0:?}")]
    BadInterfaceName(String),
    /// No interface of that name in the namespace.
    #[error("no interface {dev}: {error}")]
    NoInterface { dev: String, error: std::io::Error },
    /// The closure run inside a namespace panicked.
    #[error("thread inside the namespace panicked")]
    Panicked,
}
