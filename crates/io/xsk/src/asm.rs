//! A tiny eBPF assembler: the opcodes the XDP program uses, instructions,
//! and forward or backward jumps to labels resolved by [`Asm::finish`].
//!
//! Encoding: `include/uapi/linux/bpf.h` (class | size/op | mode/source;
//! `regs` = dst | src << 4).

use crate::sys::Insn;

/// Registers. r0: return value; r1-r5: helper arguments (clobbered by a
/// call); r6-r9: callee-saved; r10: read-only frame pointer.
pub(crate) const R0: u8 = 0;
pub(crate) const R1: u8 = 1;
pub(crate) const R2: u8 = 2;
pub(crate) const R3: u8 = 3;
pub(crate) const R4: u8 = 4;
pub(crate) const R5: u8 = 5;
pub(crate) const R6: u8 = 6;
pub(crate) const R7: u8 = 7;
pub(crate) const R8: u8 = 8;
pub(crate) const R9: u8 = 9;
pub(crate) const R10: u8 = 10;

// Loads and stores: BPF_LDX / BPF_STX | BPF_MEM | size (W = 4, H = 2, B = 1, DW = 8 bytes).
pub(crate) const LDX_W: u8 = 0x61;
pub(crate) const LDX_H: u8 = 0x69;
pub(crate) const LDX_B: u8 = 0x71;
pub(crate) const LDX_DW: u8 = 0x79;
pub(crate) const STX_W: u8 = 0x63;
pub(crate) const STX_DW: u8 = 0x7b;
// 64-bit ALU: BPF_ALU64 | op | BPF_K (immediate) or BPF_X (register).
pub(crate) const ADD64_K: u8 = 0x07;
pub(crate) const ADD64_X: u8 = 0x0f;
pub(crate) const OR64_X: u8 = 0x4f;
pub(crate) const AND64_K: u8 = 0x57;
pub(crate) const LSH64_K: u8 = 0x67;
pub(crate) const RSH64_K: u8 = 0x77;
pub(crate) const RSH64_X: u8 = 0x7f;
pub(crate) const MOV64_K: u8 = 0xb7;
pub(crate) const MOV64_X: u8 = 0xbf;
// Jumps: BPF_JMP | op | source. Unsigned comparisons.
pub(crate) const JA: u8 = 0x05;
pub(crate) const JEQ_K: u8 = 0x15;
pub(crate) const JGT_X: u8 = 0x2d;
pub(crate) const JNE_K: u8 = 0x55;
pub(crate) const JLT_K: u8 = 0xa5;
/// BPF_LD | BPF_DW | BPF_IMM: a 64-bit immediate over two slots; with
/// src = [`BPF_PSEUDO_MAP_FD`] the kernel turns a map fd into its address.
pub(crate) const LD_DW_IMM: u8 = 0x18;
pub(crate) const CALL: u8 = 0x85;
pub(crate) const EXIT: u8 = 0x95;

pub(crate) const BPF_PSEUDO_MAP_FD: u8 = 1;

/// One instruction.
pub(crate) fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: (dst & 0x0f) | (src << 4), off, imm }
}

/// Instructions plus jumps to labels.
pub(crate) struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, usize)>,
}

/// A jump target, bound once with [`Asm::bind`].
#[derive(Clone, Copy)]
pub(crate) struct Label(usize);

impl Asm {
    pub(crate) fn new() -> Asm {
        Asm { insns: Vec::new(), labels: Vec::new(), fixups: Vec::new() }
    }

    pub(crate) fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    pub(crate) fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.insns.len());
    }

    pub(crate) fn emit(&mut self, i: Insn) {
        self.insns.push(i);
    }

    /// `dst op= imm` (ALU) or any instruction without a jump target.
    pub(crate) fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.emit(insn(code, dst, src, off, imm));
    }

    /// A conditional (or `JA`) jump to `to`.
    pub(crate) fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.fixups.push((self.insns.len(), to.0));
        self.insns.push(insn(code, dst, src, 0, imm));
    }

    /// Whether any jump so far goes to `l` (code only reachable through `l`
    /// must not be emitted otherwise: the verifier rejects unreachable code).
    pub(crate) fn is_used(&self, l: Label) -> bool {
        self.fixups.iter().any(|&(_, t)| t == l.0)
    }

    /// `goto to`.
    pub(crate) fn goto(&mut self, to: Label) {
        self.jump(JA, 0, 0, 0, to);
    }

    /// `if ptr + n > data_end goto to`, with `data_end` in `end` and `r4` as
    /// scratch: the bounds check the verifier demands before a packet access
    /// of `ptr[..n]`.
    pub(crate) fn need(&mut self, ptr: u8, end: u8, n: i32, to: Label) {
        self.op(MOV64_X, R4, ptr, 0, 0);
        self.op(ADD64_K, R4, 0, 0, n);
        self.jump(JGT_X, R4, end, 0, to);
    }

    /// `dst = &map` (the two-slot ld_imm64 the kernel patches).
    pub(crate) fn map_fd(&mut self, dst: u8, fd: i32) {
        self.op(LD_DW_IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd);
        self.op(0, 0, 0, 0, 0);
    }

    pub(crate) fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        for (at, l) in std::mem::take(&mut self.fixups) {
            let target = self.labels[l].ok_or(AsmError::UnboundLabel)?;
            let off = target as i64 - at as i64 - 1;
            self.insns[at].off = i16::try_from(off).map_err(|_| AsmError::JumpOutOfRange)?;
        }
        Ok(self.insns)
    }
}

/// Why [`Asm::finish`] could not resolve the jumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AsmError {
    /// A jump to a label that was never bound.
    UnboundLabel,
    /// A jump farther than a 16-bit offset reaches.
    JumpOutOfRange,
}
