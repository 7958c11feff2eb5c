//! The crate's one `unsafe` call: a cache prefetch hint for the reassembly
//! loop.

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
