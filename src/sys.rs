//! The CLI's only system call outside the library crates.
#![allow(unsafe_code)]

/// Restores the default SIGPIPE action, so `flowsteer ... | head` ends
/// quietly when the reader goes away, as C tools do (Rust ignores SIGPIPE
/// and `println!` would then panic on EPIPE).
pub fn default_sigpipe() {
    // SAFETY: called once at start-up before any thread is spawned; sets a
    // signal disposition to SIG_DFL, no handler code runs in our process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
