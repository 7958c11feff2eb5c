//! The two system calls the lab needs: setns(2) and if_nametoindex(3).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::AsRawFd;

use crate::error::NetnsError;

pub fn setns_by_name(ns: &str) -> Result<(), NetnsError> {
    let path = format!("/run/netns/{ns}");
    let f =
        std::fs::File::open(&path).map_err(|error| NetnsError::OpenNamespace { ns: ns.to_string(), path, error })?;
    // SAFETY: `f` is an open namespace file descriptor for the duration of
    // the call; setns only changes the calling thread's network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(NetnsError::Setns { ns: ns.to_string(), error: std::io::Error::last_os_error() })
    }
}

pub fn ifindex(dev: &str) -> Result<u32, NetnsError> {
    let name = CString::new(dev).map_err(|_| NetnsError::BadInterfaceName(dev.to_string()))?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx == 0 {
        Err(NetnsError::NoInterface { dev: dev.to_string(), error: std::io::Error::last_os_error() })
    } else {
        Ok(idx)
    }
}
