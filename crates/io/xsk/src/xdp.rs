//! What the two XDP programs share (the claim program in [`crate::prog`]
//! and the bridge's fast path in [`crate::fastpath`], which runs first
//! inside it): the kernel's action codes and `struct xdp_md` offsets, the
//! counter slots of the per-CPU array both count in, and the instructions
//! that bump one.

use crate::asm::*;

/// XDP action codes used by the program.
pub(crate) const XDP_DROP: i32 = 1;
pub(crate) const XDP_PASS: i32 = 2;
pub(crate) const XDP_REDIRECT: i32 = 4;

/// `struct xdp_md` offsets.
pub(crate) const XDP_MD_DATA: i16 = 0;
pub(crate) const XDP_MD_DATA_END: i16 = 4;
pub(crate) const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// The counter slots of the per-CPU array map, one u64 per CPU each.
/// Slots 0-6 are outcomes (one per frame); 7-15 and 17 are the fast
/// path's slow reasons (one more per frame that takes the slow path); 16
/// is a sub-count of `fast_forwarded` (one more per forwarded frame whose
/// partial checksum the fast path completed), not an outcome either.
pub(crate) mod slot {
    pub const PASSED_NOT_IP: i32 = 0;
    pub const PASSED_UNCLAIMED: i32 = 1;
    pub const PASSED_UNPARSED: i32 = 2;
    pub const PASSED_NO_SOCKET: i32 = 3;
    pub const DROPPED_TOO_BIG: i32 = 4;
    pub const REDIRECTED: i32 = 5;
    pub const FAST_FORWARDED: i32 = 6;
    pub const SLOW_NOT_UNICAST: i32 = 7;
    pub const SLOW_UNKNOWN_DST: i32 = 8;
    pub const SLOW_SAME_PORT: i32 = 9;
    pub const SLOW_SRC_NOT_HERE: i32 = 10;
    pub const SLOW_EGRESS_OFF: i32 = 11;
    pub const SLOW_TOO_BIG: i32 = 12;
    pub const SLOW_UNPARSED: i32 = 13;
    pub const SLOW_PARTIAL_CSUM: i32 = 14;
    pub const SLOW_REDIRECT_FAILED: i32 = 15;
    pub const FAST_CSUM_COMPLETED: i32 = 16;
    pub const SLOW_SHORT: i32 = 17;
    pub const COUNT: u32 = 18;
}

/// Stack slot (offset from r10) of the counter key (u32). The claim
/// word key lies above it ([`crate::prog`]), the fast path's keys below.
pub(crate) const STACK_COUNTER_KEY: i16 = -8;

/// `counters[r8] += 1` (this CPU's copy: no atomics needed). Clobbers
/// r0-r5; jumps to `done` when the lookup fails (it never does for a slot
/// in range, but the verifier wants the null check).
pub(crate) fn bump_counter(a: &mut Asm, counters: i32, done: Label) {
    a.op(STX_W, R10, R8, STACK_COUNTER_KEY, 0);
    a.op(MOV64_X, R2, R10, 0, 0);
    a.op(ADD64_K, R2, 0, 0, STACK_COUNTER_KEY.into());
    a.map_fd(R1, counters);
    a.op(CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM);
    a.jump(JEQ_K, R0, 0, 0, done);
    a.op(LDX_DW, R1, R0, 0, 0);
    a.op(ADD64_K, R1, 0, 0, 1);
    a.op(STX_DW, R0, R1, 0, 0);
}
