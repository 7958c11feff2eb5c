//! A tiny eBPF assembler: the opcodes the XDP program uses, instructions,
//! and forward or backward jumps to named labels resolved by
//! [`Asm::finish`]; plus [`listing`], the disassembler that renders the
//! result as text (one instruction per line, with the labels where jumps
//! land and the notes that say which rule a block is).
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
pub(crate) const STX_H: u8 = 0x6b;
pub(crate) const STX_DW: u8 = 0x7b;
// Store an immediate: BPF_ST | BPF_MEM | size.
pub(crate) const ST_H: u8 = 0x6a;
// 64-bit ALU: BPF_ALU64 | op | BPF_K (immediate) or BPF_X (register).
pub(crate) const ADD64_K: u8 = 0x07;
pub(crate) const ADD64_X: u8 = 0x0f;
pub(crate) const SUB64_X: u8 = 0x1f;
pub(crate) const DIV64_K: u8 = 0x37;
pub(crate) const OR64_X: u8 = 0x4f;
pub(crate) const AND64_K: u8 = 0x57;
pub(crate) const LSH64_K: u8 = 0x67;
pub(crate) const RSH64_K: u8 = 0x77;
pub(crate) const RSH64_X: u8 = 0x7f;
pub(crate) const MOD64_K: u8 = 0x97;
pub(crate) const XOR64_K: u8 = 0xa7;
pub(crate) const MOV64_K: u8 = 0xb7;
pub(crate) const MOV64_X: u8 = 0xbf;
/// BPF_ALU | BPF_END | BPF_TO_BE: `dst = htobe{16,32}(dst)` (imm = width),
/// upper bits cleared; a byte swap on little-endian hosts. A value loaded
/// from the packet then reads as the number the wire carries.
pub(crate) const BE: u8 = 0xdc;
// Jumps: BPF_JMP | op | source. Unsigned comparisons.
pub(crate) const JA: u8 = 0x05;
pub(crate) const JEQ_K: u8 = 0x15;
pub(crate) const JEQ_X: u8 = 0x1d;
pub(crate) const JGT_K: u8 = 0x25;
pub(crate) const JGT_X: u8 = 0x2d;
pub(crate) const JSET_K: u8 = 0x45;
pub(crate) const JNE_K: u8 = 0x55;
pub(crate) const JNE_X: u8 = 0x5d;
pub(crate) const JLT_K: u8 = 0xa5;
pub(crate) const JLT_X: u8 = 0xad;
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
    labels: Vec<(&'static str, Option<usize>)>,
    fixups: Vec<(usize, usize)>,
    notes: Vec<(usize, String)>,
    remarks: Vec<(usize, String)>,
}

/// A jump target, bound once with [`Asm::bind`].
#[derive(Clone, Copy)]
pub(crate) struct Label(usize);

/// An assembled program with what its listing shows besides the
/// instructions: the names of the labels jumps land on, and the notes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Assembled {
    pub insns: Vec<Insn>,
    /// (instruction index, name) of every label some jump goes to.
    pub labels: Vec<(usize, &'static str)>,
    /// (instruction index, text): comments before that instruction.
    pub notes: Vec<(usize, String)>,
    /// (instruction index, text): comments at the end of its line.
    pub remarks: Vec<(usize, String)>,
}

impl Asm {
    pub(crate) fn new() -> Asm {
        Asm { insns: Vec::new(), labels: Vec::new(), fixups: Vec::new(), notes: Vec::new(), remarks: Vec::new() }
    }

    /// A new label; `name` is what the listing shows where it lands.
    pub(crate) fn label(&mut self, name: &'static str) -> Label {
        self.labels.push((name, None));
        Label(self.labels.len() - 1)
    }

    pub(crate) fn bind(&mut self, l: Label) {
        self.labels[l.0].1 = Some(self.insns.len());
    }

    /// A comment for the listing, shown before the next instruction.
    pub(crate) fn note(&mut self, text: &str) {
        self.notes.push((self.insns.len(), text.to_string()));
    }

    /// A comment for the listing at the end of the last instruction's line
    /// (what a field or a constant is).
    pub(crate) fn remark(&mut self, text: &str) {
        let at = self.insns.len().saturating_sub(1);
        self.remarks.push((at, text.to_string()));
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

    pub(crate) fn finish(mut self) -> Result<Assembled, AsmError> {
        let mut targets = Vec::new();
        for (at, l) in std::mem::take(&mut self.fixups) {
            let (name, bound) = self.labels[l];
            let target = bound.ok_or(AsmError::UnboundLabel)?;
            let off = target as i64 - at as i64 - 1;
            self.insns[at].off = i16::try_from(off).map_err(|_| AsmError::JumpOutOfRange)?;
            targets.push((target, name));
        }
        targets.sort_unstable();
        targets.dedup();
        Ok(Assembled { insns: self.insns, labels: targets, notes: self.notes, remarks: self.remarks })
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

// ---------------------------------------------------------------- listing

/// Helper ids the programs call, by name (`enum bpf_func_id`).
pub(crate) const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
pub(crate) const BPF_FUNC_KTIME_GET_NS: i32 = 5;
pub(crate) const BPF_FUNC_CSUM_DIFF: i32 = 28;
pub(crate) const BPF_FUNC_REDIRECT_MAP: i32 = 51;

fn helper_name(id: i32) -> String {
    match id {
        BPF_FUNC_MAP_LOOKUP_ELEM => "bpf_map_lookup_elem".into(),
        BPF_FUNC_KTIME_GET_NS => "bpf_ktime_get_ns".into(),
        BPF_FUNC_CSUM_DIFF => "bpf_csum_diff".into(),
        BPF_FUNC_REDIRECT_MAP => "bpf_redirect_map".into(),
        id => format!("helper#{id}"),
    }
}

/// A comparison's immediate as the listing shows it: decimal, or hex from
/// 256 up (ethertypes, masks), negative numbers with their sign.
fn imm_text(v: i64) -> String {
    if (-255..256).contains(&v) {
        v.to_string()
    } else if v < 0 {
        format!("-{:#x}", v.unsigned_abs())
    } else {
        format!("{v:#x}")
    }
}

/// One instruction as text, in the style of `bpftool prog dump xlated`
/// (`r2 = *(u32 *)(r6 +0)`, `if r4 > r3 goto +12`); `map` names the map
/// behind an ld_imm64 fd, `wide` is the second half of an ld_imm64.
fn insn_text(i: Insn, wide: Option<Insn>, map: &dyn Fn(i32) -> Option<String>) -> String {
    let (dst, src) = (i.regs & 0x0f, i.regs >> 4);
    let size = |code: u8| match code & 0x18 {
        0x00 => "u32",
        0x08 => "u16",
        0x10 => "u8",
        _ => "u64",
    };
    let op = |code: u8| match code & 0xf0 {
        0x00 => "+=",
        0x10 => "-=",
        0x20 => "*=",
        0x30 => "/=",
        0x40 => "|=",
        0x50 => "&=",
        0x60 => "<<=",
        0x70 => ">>=",
        0x90 => "%=",
        0xa0 => "^=",
        0xb0 => "=",
        0xc0 => "s>>=",
        _ => "?=",
    };
    let off = |o: i16| if o < 0 { format!("{o}") } else { format!("+{o}") };
    match i.code & 0x07 {
        // BPF_LD: only the 64-bit immediate.
        0x00 if i.code == LD_DW_IMM => {
            let hi = wide.map_or(0, |w| w.imm);
            if src == BPF_PSEUDO_MAP_FD {
                let name = map(i.imm).unwrap_or_else(|| format!("fd:{}", i.imm));
                format!("r{dst} = map[{name}] ll")
            } else {
                format!("r{dst} = {:#x} ll", (i64::from(hi) << 32) | i64::from(i.imm as u32))
            }
        }
        0x01 => format!("r{dst} = *({} *)(r{src} {})", size(i.code), off(i.off)),
        0x02 => format!("*({} *)(r{dst} {}) = {}", size(i.code), off(i.off), imm_text(i.imm.into())),
        0x03 => format!("*({} *)(r{dst} {}) = r{src}", size(i.code), off(i.off)),
        class @ (0x04 | 0x07) => {
            let r = if class == 0x07 { 'r' } else { 'w' };
            match i.code & 0xf0 {
                0x80 => format!("{r}{dst} = -{r}{dst}"),
                0xd0 => {
                    let order = if i.code & 0x08 != 0 { "be" } else { "le" };
                    format!("r{dst} = {order}{} r{dst}", i.imm)
                }
                _ if i.code & 0x08 != 0 => format!("{r}{dst} {} {r}{src}", op(i.code)),
                // Masks and moduli in hex, amounts in decimal.
                0x40 | 0x50 | 0x90 | 0xa0 => format!("{r}{dst} {} {:#x}", op(i.code), i.imm),
                _ => format!("{r}{dst} {} {}", op(i.code), i.imm),
            }
        }
        class @ (0x05 | 0x06) => {
            let r = if class == 0x05 { 'r' } else { 'w' };
            let cmp = match i.code & 0xf0 {
                0x00 => return format!("goto {}", off(i.off)),
                0x80 => return format!("call {}", helper_name(i.imm)),
                0x90 => return "exit".into(),
                0x10 => "==",
                0x20 => ">",
                0x30 => ">=",
                0x40 => "&",
                0x50 => "!=",
                0x60 => "s>",
                0x70 => "s>=",
                0xa0 => "<",
                0xb0 => "<=",
                0xc0 => "s<",
                0xd0 => "s<=",
                _ => "?",
            };
            let rhs = match i.code & 0xf0 {
                _ if i.code & 0x08 != 0 => format!("{r}{src}"),
                0x40 => format!("{:#x}", i.imm),
                _ => imm_text(i.imm.into()),
            };
            format!("if {r}{dst} {cmp} {rhs} goto {}", off(i.off))
        }
        _ => format!(".insn code={:#04x} regs={:#04x} off={} imm={}", i.code, i.regs, i.off, i.imm),
    }
}

/// Where the listing's end-of-line remarks start.
const REMARK_COLUMN: usize = 48;

/// Renders `prog` as text: its notes as `;` comments, each label that a
/// jump lands on as `name:`, then one instruction per line with its index
/// (an ld_imm64 takes two) and, on jumps, the label they go to. `map`
/// names the maps behind ld_imm64 fds.
pub(crate) fn listing(prog: &Assembled, map: &dyn Fn(i32) -> Option<String>) -> String {
    let mut out = String::new();
    let name_at = |at: usize| prog.labels.iter().filter(|l| l.0 == at).map(|l| l.1).collect::<Vec<_>>();
    let mut at = 0;
    while at < prog.insns.len() {
        for name in name_at(at) {
            out.push_str(&format!("{name}:\n"));
        }
        for (_, text) in prog.notes.iter().filter(|n| n.0 == at) {
            for line in text.lines() {
                out.push_str(&format!("      ; {line}\n"));
            }
        }
        let i = prog.insns[at];
        let wide = (i.code == LD_DW_IMM).then(|| prog.insns.get(at + 1).copied()).flatten();
        let mut line = format!("{at:5}: {}", insn_text(i, wide, map));
        let is_jump = matches!(i.code & 0x07, 0x05 | 0x06) && !matches!(i.code & 0xf0, 0x80 | 0x90);
        if is_jump {
            let to = at as i64 + 1 + i64::from(i.off);
            let names = usize::try_from(to).map(name_at).unwrap_or_default();
            if !names.is_empty() {
                line.push_str(&format!(" <{}>", names.join(", ")));
            }
        }
        if let Some((_, text)) = prog.remarks.iter().find(|r| r.0 == at) {
            let pad = REMARK_COLUMN.saturating_sub(line.len()).max(1);
            line = format!("{line}{:pad$}; {text}", "");
        }
        out.push_str(&line);
        out.push('\n');
        at += if wide.is_some() { 2 } else { 1 };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_names_labels_maps_and_helpers() {
        let mut a = Asm::new();
        let out = a.label("out");
        a.note("load and test");
        a.op(LDX_W, R2, R6, 4, 0);
        a.op(BE, R2, 0, 0, 16);
        a.jump(JSET_K, R2, 0, 1, out);
        a.op(ST_H, R10, 0, -2, 0);
        a.op(MOD64_K, R0, 0, 0, 0xffff);
        a.map_fd(R1, 7);
        a.op(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
        a.jump(JEQ_X, R1, R0, 0, out);
        a.bind(out);
        a.op(EXIT, 0, 0, 0, 0);
        let p = a.finish().unwrap();
        let text = listing(&p, &|fd| (fd == 7).then(|| "tx".to_string()));
        let want = "      ; load and test\n\
                    \x20   0: r2 = *(u32 *)(r6 +4)\n\
                    \x20   1: r2 = be16 r2\n\
                    \x20   2: if r2 & 0x1 goto +6 <out>\n\
                    \x20   3: *(u16 *)(r10 -2) = 0\n\
                    \x20   4: r0 %= 0xffff\n\
                    \x20   5: r1 = map[tx] ll\n\
                    \x20   7: call bpf_redirect_map\n\
                    \x20   8: if r1 == r0 goto +0 <out>\n\
                    out:\n\
                    \x20   9: exit\n";
        assert_eq!(text, want);
    }

    #[test]
    fn unbound_labels_and_long_jumps_are_errors() {
        let mut a = Asm::new();
        let l = a.label("nowhere");
        a.goto(l);
        assert_eq!(a.finish().unwrap_err(), AsmError::UnboundLabel);
        let mut a = Asm::new();
        let l = a.label("far");
        a.goto(l);
        for _ in 0..40_000 {
            a.op(MOV64_K, R0, 0, 0, 0);
        }
        a.bind(l);
        assert_eq!(a.finish().unwrap_err(), AsmError::JumpOutOfRange);
    }
}
