//! The CLI's only system call outside the library crates, and a cache
//! prefetch hint for its benchmark loops.
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

/// Hints the CPU to bring the cache line holding `bytes[at]` into L1, as
/// DPDK's `rte_prefetch0` does: the address is computed without a bounds
/// check (an `at` past the end names some other line, harmlessly). A hint:
/// it never faults and changes no state a program can observe.
#[inline(always)]
pub fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 needs SSE, part of the x86_64 baseline. It takes
    // any address, valid or not (the pointer is computed with wrapping
    // arithmetic and never dereferenced); a prefetch never faults or writes.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            bytes.as_ptr().wrapping_add(at).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}
