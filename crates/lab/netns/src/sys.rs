//! The two system calls the lab needs: setns(2) and if_nametoindex(3).

use std::ffi::CString;
use std::os::fd::AsRawFd;

pub fn setns_by_name(ns: &str) -> Result<(), String> {
    let path = format!("/run/netns/{ns}");
    let f = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    // SAFETY: `f` is an open namespace file descriptor for the duration of
    // the call; setns only changes the calling thread's network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

pub fn ifindex(dev: &str) -> Result<u32, String> {
    let name = CString::new(dev).map_err(|_| format!("bad interface name {dev:?}"))?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx == 0 {
        Err(format!("no interface {dev}: {}", std::io::Error::last_os_error()))
    } else {
        Ok(idx)
    }
}
