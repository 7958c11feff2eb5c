//! The crate's error type.

use std::fmt;

/// What went wrong; `Display` is one line that says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A configuration value is out of range (the message names it).
    Config(String),
    /// No interface of this name in the calling thread's network namespace.
    NoSuchInterface(String),
    /// Creating a packet socket was refused.
    Permission,
    /// A system call failed.
    Os { what: String, errno: i32 },
    /// A classic BPF program could not be built.
    Program(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(m) | Error::Program(m) => write!(f, "{m}"),
            Error::NoSuchInterface(name) => {
                write!(f, "interface {name} does not exist (in this network namespace; see `ip link`)")
            }
            Error::Permission => write!(f, "AF_PACKET needs root or CAP_NET_RAW"),
            Error::Os { what, errno } => {
                write!(f, "{what}: {} ({})", std::io::Error::from_raw_os_error(*errno), errno_name(*errno))
            }
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    pub(crate) fn os(what: impl Into<String>, errno: i32) -> Error {
        Error::Os { what: what.into(), errno }
    }
}

/// The symbolic name of the errno values a transmit can meet.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EMSGSIZE => "EMSGSIZE",
        libc::ENOBUFS => "ENOBUFS",
        libc::EAGAIN => "EAGAIN",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENXIO => "ENXIO",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOMEM => "ENOMEM",
        libc::EFAULT => "EFAULT",
        libc::EINTR => "EINTR",
        libc::EBUSY => "EBUSY",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}
