//! The crate's one `unsafe` call: a cache prefetch hint, for the tables
//! that look up a burst of keys at once (the per-core flow table) and the
//! loops that walk frames they have not read yet (the reassembly bench).

/// Hints the CPU to bring the cache line holding `*r` into L1 (PREFETCHT0,
/// DPDK's `rte_prefetch0`). A hint: it never faults, never blocks and
/// changes nothing a program can observe, so a stale or wrong guess costs
/// one wasted line fill. A no-op on other architectures.
#[inline(always)]
pub fn prefetch<T: ?Sized>(r: &T) {
    prefetch_ptr((r as *const T).cast::<u8>());
}

/// [`prefetch`] of the line holding `bytes[at]`, computed without a bounds
/// check: an `at` past the end names some other line, harmlessly (it is
/// never dereferenced).
#[inline(always)]
pub fn prefetch_at(bytes: &[u8], at: usize) {
    prefetch_ptr(bytes.as_ptr().wrapping_add(at));
}

#[inline(always)]
fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 needs SSE, part of the x86_64 baseline. It takes
    // any address, valid or not (the pointer is never dereferenced; the
    // instruction does not fault), and writes nothing.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_reference_and_any_offset_is_fine() {
        let v = vec![1u64, 2, 3];
        prefetch(&v[1]);
        prefetch(v.as_slice());
        prefetch("str");
        let b = [0u8; 3];
        prefetch_at(&b, 0);
        prefetch_at(&b, usize::MAX);
        prefetch_at(&[], 1 << 40);
        assert_eq!(v, [1, 2, 3]);
    }
}
