//! The two steps every socket opener shares.

use crate::error::Error;
use crate::sys;

/// A packet socket, with the refusal reported as [`Error::Permission`].
pub(crate) fn open_packet_socket() -> Result<std::os::fd::OwnedFd, Error> {
    sys::packet_socket().map_err(|e| match e {
        libc::EPERM | libc::EACCES => Error::Permission,
        e => Error::os("socket(AF_PACKET)", e),
    })
}

/// The interface index of `name`, with the errors every opener reports.
pub(crate) fn lookup_ifindex(name: &str) -> Result<u32, Error> {
    if name.is_empty()
        || name.len() >= libc::IFNAMSIZ
        || name.contains(['\0', '/'])
        || name.contains(char::is_whitespace)
    {
        return Err(Error::Config(format!("{name:?} is not a valid interface name")));
    }
    match sys::ifindex(name) {
        0 => Err(Error::NoSuchInterface(name.to_string())),
        i => Ok(i),
    }
}
