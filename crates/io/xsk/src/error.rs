//! The crate's error: a kind to match on and a one-line message that says
//! what went wrong and what to do.

use std::fmt;
use std::io;

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Missing privileges (EPERM / EACCES): AF_XDP and XDP need root.
    NotPermitted,
    /// The named interface does not exist in this network namespace.
    NoSuchInterface,
    /// An XDP program is already attached to the interface.
    AlreadyAttached,
    /// The interface or kernel cannot do what was asked (e.g. zero-copy on veth).
    Unsupported,
    /// The kernel's verifier rejected the XDP program (its log is in the message).
    Verifier,
    /// A configuration value is out of range.
    InvalidConfig,
    /// The queue already has an AF_XDP socket, or the kernel is still releasing one.
    Busy,
    /// The interface's MTU allows frames longer than an AF_XDP frame holds
    /// (no multi-buffer receive): they would be dropped.
    MtuTooLarge,
    /// A BPF map is full (the fast path's FDB mirror): nothing was written.
    TableFull,
    /// Any other system call failure.
    Os,
}

/// An error of this crate.
#[derive(Clone, Debug)]
pub struct Error {
    kind: ErrorKind,
    errno: Option<i32>,
    message: String,
}

/// The message for missing privileges.
pub const NEED_ROOT: &str = "AF_XDP needs root (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW)";

impl Error {
    pub(crate) fn new(kind: ErrorKind, cause: Option<&io::Error>, message: String) -> Error {
        Error { kind, errno: cause.and_then(io::Error::raw_os_error), message }
    }

    pub(crate) fn not_permitted(what: &str, e: &io::Error) -> Error {
        Error::new(ErrorKind::NotPermitted, Some(e), format!("{NEED_ROOT}: {what} failed: {e}"))
    }

    pub(crate) fn config(message: String) -> Error {
        Error { kind: ErrorKind::InvalidConfig, errno: None, message }
    }

    /// A system call failure; EPERM/EACCES become [`ErrorKind::NotPermitted`].
    pub(crate) fn os(e: &io::Error, context: String) -> Error {
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => Error::not_permitted(&context, e),
            _ => Error::new(ErrorKind::Os, Some(e), format!("{context}: {e}")),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The errno behind it, when a system call failed.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for String {
    fn from(e: Error) -> String {
        e.message
    }
}

/// The index of `ifname` in the calling thread's network namespace.
pub(crate) fn ifindex(ifname: &str) -> Result<u32, Error> {
    if ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', '\0']) || ifname.contains(char::is_whitespace) {
        return Err(Error::new(ErrorKind::NoSuchInterface, None, format!("`{ifname}` is not a valid interface name")));
    }
    crate::sys::if_nametoindex(ifname).map_err(|e| match e.raw_os_error() {
        Some(libc::ENODEV | libc::ENXIO) => Error::new(
            ErrorKind::NoSuchInterface,
            Some(&e),
            format!("interface {ifname} does not exist (in this network namespace)"),
        ),
        _ => Error::os(&e, format!("looking up interface {ifname}")),
    })
}
