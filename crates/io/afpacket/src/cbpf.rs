//! Classic BPF: the instruction type, a small assembler, and the compiler
//! that turns an [`RssConfig`] into a fanout program ([`toeplitz_cbpf`]).
//!
//! # The Toeplitz steering program
//!
//! `PACKET_FANOUT_CBPF` runs a classic BPF program on every frame and
//! delivers it to group member `ret % members` (members in join order). The
//! program [`toeplitz_cbpf`] emits returns the receive queue that
//! [`RssConfig::place`] picks, so with exactly `queue_count()` members joined
//! in queue order, member `i` receives exactly what flowsteer's software RSS
//! puts on queue `i`.
//!
//! How it works:
//!
//! * The fanout program sees the frame **from the L3 header** (the kernel
//!   has pulled the MAC header; an 802.1Q tag has been moved to metadata),
//!   and reads the ethertype with the `SKF_AD_PROTOCOL` ancillary load.
//! * Toeplitz is linear over GF(2): the hash is the XOR, over the set input
//!   bits `i`, of the 32 key bits `i..i+31`. For each input bit the program
//!   loads the word holding it, tests the bit with `jset` and XORs that
//!   window (a constant computed here) into the scratch word `M[0]`:
//!   5 instructions per bit, about 480 for IPv4 and 1440 for IPv6.
//! * Which fields are hashed follows [`flowsteer_rss::HashTypes::fields_for`]
//!   exactly, with the choices made at compile time: TCP/UDP on the
//!   4-tuple when that type is enabled, fragments on the 2-tuple when
//!   `fragments_on_2tuple` (otherwise only the offset-0 fragment whose L4
//!   header is complete within the IP length gets ports), everything else
//!   on the 2-tuple when the L3 type is enabled, and hash 0 when no type
//!   matches.
//! * IPv6 extension headers are walked like `flowsteer_wire`'s parser does
//!   (Hop-by-Hop, Routing, Destination Options, Fragment, AH; at most
//!   [`MAX_IPV6_EXT`] of them, unrolled because cBPF cannot loop), so the
//!   ports behind them are hashed as flowsteer-rss hashes them. An atomic
//!   fragment (offset 0, M clear) is not a fragment, as in the parser.
//! * The hash goes to a queue by the RETA (low bits): `hash & mask`, then
//!   `% queues` when the table is the round-robin `i % queues`, else a binary
//!   jump tree over runs of equal entries. [`Mapping::RpsScale`] computes
//!   Linux's `(hash * n) >> 32` with 16-bit halves (cBPF is 32-bit).
//!
//! Where the program and the software path differ (documented, tested):
//!
//! * Frames flowsteer's parser rejects (cut or malformed headers) have no
//!   software placement; the program still picks a valid queue. When a
//!   header it reads ends past the frame the load fails, and a failed cBPF
//!   load ends the program with 0: **member 0**. An L4 header cut after the
//!   ports is hashed with them. An IPv6 chain longer than [`MAX_IPV6_EXT`]
//!   headers goes where unhashed frames go (RETA entry 0). Non-IP frames
//!   (ARP...) are unhashed, as in software.
//! * Double-tagged (QinQ) frames: the kernel strips only the outer tag, so
//!   the program sees ethertype 0x8100 and treats the frame as non-IP
//!   (unhashed), while flowsteer-wire follows two tags and hashes the IP
//!   header behind them.
//! * With `PACKET_FANOUT_FLAG_DEFRAG` the kernel reassembles IPv4 before
//!   fanout, so the program sees whole datagrams (4-tuple) where software
//!   RSS would hash each fragment on the 2-tuple.

use flowsteer_rss::{HashTypes, Mapping, RssConfig};

use crate::error::Error;

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl SockFilter {
    /// A non-jump instruction.
    pub const fn stmt(code: u16, k: u32) -> SockFilter {
        SockFilter { code, jt: 0, jf: 0, k }
    }

    /// A conditional jump (`jt`/`jf` are forward offsets).
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
        SockFilter { code, jt, jf, k }
    }
}

/// Classic BPF opcode parts (`linux/filter.h`, `linux/bpf_common.h`).
pub mod op {
    pub const LD: u16 = 0x00;
    pub const LDX: u16 = 0x01;
    pub const ST: u16 = 0x02;
    pub const STX: u16 = 0x03;
    pub const ALU: u16 = 0x04;
    pub const JMP: u16 = 0x05;
    pub const RET: u16 = 0x06;
    pub const MISC: u16 = 0x07;
    pub const W: u16 = 0x00;
    pub const H: u16 = 0x08;
    pub const B: u16 = 0x10;
    pub const IMM: u16 = 0x00;
    pub const ABS: u16 = 0x20;
    pub const IND: u16 = 0x40;
    pub const MEM: u16 = 0x60;
    pub const LEN: u16 = 0x80;
    pub const MSH: u16 = 0xa0;
    pub const ADD: u16 = 0x00;
    pub const SUB: u16 = 0x10;
    pub const MUL: u16 = 0x20;
    pub const DIV: u16 = 0x30;
    pub const OR: u16 = 0x40;
    pub const AND: u16 = 0x50;
    pub const LSH: u16 = 0x60;
    pub const RSH: u16 = 0x70;
    pub const NEG: u16 = 0x80;
    pub const MOD: u16 = 0x90;
    pub const XOR: u16 = 0xa0;
    pub const JA: u16 = 0x00;
    pub const JEQ: u16 = 0x10;
    pub const JGT: u16 = 0x20;
    pub const JGE: u16 = 0x30;
    pub const JSET: u16 = 0x40;
    pub const K: u16 = 0x00;
    pub const X: u16 = 0x08;
    pub const A: u16 = 0x10;
    pub const TAX: u16 = 0x00;
    pub const TXA: u16 = 0x80;
    /// Base of the ancillary loads (`SKF_AD_OFF`, -0x1000).
    pub const SKF_AD_OFF: u32 = 0xffff_f000;
    /// `skb->protocol` (host order) as an ancillary load offset.
    pub const SKF_AD_PROTOCOL: u32 = 0;
    /// Scratch words `M[0..16]`.
    pub const MEMWORDS: u32 = 16;
}

/// Longest program the kernel accepts (`BPF_MAXINSNS`).
pub const MAX_INSNS: usize = 4096;

/// IPv6 extension headers the steering program follows (the parser's
/// `flowsteer_wire::MAX_IPV6_EXT_HEADERS`).
pub const MAX_IPV6_EXT: usize = 8;

const ETH_P_IP: u32 = 0x0800;
const ETH_P_IPV6: u32 = 0x86dd;
const TCP: u32 = 6;
const UDP: u32 = 17;

// Scratch words of the steering program.
const M_HASH: u32 = 0;
const M_PORTS: u32 = 1;
const M_FRAG6: u32 = 2;
const M_L4: u32 = 3;
const M_END: u32 = 4;
const M_NH: u32 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Label(usize);

#[derive(Clone, Copy, Debug)]
enum Tgt {
    /// The next instruction.
    Next,
    /// Skip `n` instructions.
    Skip(u8),
    To(Label),
}

#[derive(Clone, Copy, Debug)]
enum Fix {
    Ja(Label),
    Cond(Tgt, Tgt),
}

/// A forward-only assembler with labels. Conditional jumps reach at most
/// 255 instructions (checked); long jumps use `ja`.
#[derive(Default)]
struct Asm {
    code: Vec<SockFilter>,
    labels: Vec<Option<usize>>,
    fixes: Vec<(usize, Fix)>,
}

impl Asm {
    fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.code.len());
    }

    fn emit(&mut self, code: u16, k: u32) {
        self.code.push(SockFilter::stmt(code, k));
    }

    fn ja(&mut self, l: Label) {
        self.fixes.push((self.code.len(), Fix::Ja(l)));
        self.emit(op::JMP | op::JA, 0);
    }

    fn jcond(&mut self, code: u16, k: u32, jt: Tgt, jf: Tgt) {
        self.fixes.push((self.code.len(), Fix::Cond(jt, jf)));
        self.code.push(SockFilter::jump(op::JMP | code | op::K, k, 0, 0));
    }

    /// Jump to `l` (any distance) when the `code #k` test is true.
    fn goto_if(&mut self, code: u16, k: u32, l: Label) {
        self.jcond(code, k, Tgt::Next, Tgt::Skip(1));
        self.ja(l);
    }

    /// Jump to `l` (any distance) when the `code #k` test is false.
    fn goto_unless(&mut self, code: u16, k: u32, l: Label) {
        self.jcond(code, k, Tgt::Skip(1), Tgt::Next);
        self.ja(l);
    }

    fn ld_mem(&mut self, m: u32) {
        self.emit(op::LD | op::MEM, m);
    }

    fn st(&mut self, m: u32) {
        self.emit(op::ST, m);
    }

    fn ldx_mem(&mut self, m: u32) {
        self.emit(op::LDX | op::MEM, m);
    }

    fn finish(self) -> Result<Vec<SockFilter>, Error> {
        let Asm { mut code, labels, fixes } = self;
        let resolve = |at: usize, t: Tgt| -> Result<u32, Error> {
            let to = match t {
                Tgt::Next => return Ok(0),
                Tgt::Skip(n) => return Ok(u32::from(n)),
                Tgt::To(l) => labels[l.0].ok_or_else(|| Error::Program("internal: unbound label".into()))?,
            };
            to.checked_sub(at + 1)
                .map(|d| d as u32)
                .ok_or_else(|| Error::Program("internal: backward jump in a cBPF program".into()))
        };
        for (at, fix) in fixes {
            match fix {
                Fix::Ja(l) => code[at].k = resolve(at, Tgt::To(l))?,
                Fix::Cond(jt, jf) => {
                    let short = |d: u32| {
                        u8::try_from(d).map_err(|_| Error::Program("internal: conditional jump too far".into()))
                    };
                    code[at].jt = short(resolve(at, jt)?)?;
                    code[at].jf = short(resolve(at, jf)?)?;
                }
            }
        }
        Ok(code)
    }
}

/// The 32 key bits starting at bit `pos` (bit 0 = MSB of key byte 0), zero
/// past the key: the hash contribution of input bit `pos`.
fn key_window(key: &[u8], pos: usize) -> u32 {
    (0..32).fold(0u32, |w, i| {
        let p = pos + i;
        let bit = key.get(p / 8).map_or(0, |b| (b >> (7 - p % 8)) & 1);
        (w << 1) | u32::from(bit)
    })
}

/// Emits the hash of one 32-bit input word (loaded by `load`, whose first
/// bit is input bit `base`): per set bit, XOR its key window into `M[0]`.
fn hash_word(asm: &mut Asm, key: &[u8], load: SockFilter, base: usize) {
    for j in 0..32 {
        let w = key_window(key, base + j);
        if w == 0 {
            continue;
        }
        asm.code.push(load);
        asm.jcond(op::JSET, 1 << (31 - j), Tgt::Next, Tgt::Skip(3));
        asm.ld_mem(M_HASH);
        asm.emit(op::ALU | op::XOR | op::K, w);
        asm.st(M_HASH);
    }
}

/// The field choice for one family, fixed at compile time.
#[derive(Clone, Copy)]
struct FamilyTypes {
    l3: bool,
    tcp: bool,
    udp: bool,
}

impl FamilyTypes {
    fn any(&self) -> bool {
        self.l3 || self.tcp || self.udp
    }

    fn any_l4(&self) -> bool {
        self.tcp || self.udp
    }
}

/// Labels shared by one family's classification code.
struct Outcomes {
    /// Hash the 4-tuple.
    ports: Label,
    /// Hash the 2-tuple, or nothing when the L3 type is off.
    other: Label,
}

/// The scratch word `end = min(ip_total_len, skb->len)`; A holds the IP
/// total length on entry. Clobbers A and X.
fn store_end(asm: &mut Asm) {
    asm.st(M_END);
    asm.emit(op::LD | op::W | op::LEN, 0);
    asm.emit(op::MISC | op::TAX, 0);
    asm.ld_mem(M_END);
    asm.code.push(SockFilter::jump(op::JMP | op::JGT | op::X, 0, 0, 1));
    asm.emit(op::MISC | op::TXA, 0);
    asm.st(M_END);
}

/// Ports of a first fragment count only when the L4 header is complete
/// within `end` (the parser's rule: a cut header just hides the ports).
/// Needs `M[L4]`, `M[END]` and A = the protocol.
fn first_fragment_ports(asm: &mut Asm, t: FamilyTypes, out: &Outcomes) {
    let tcp_chk = asm.label();
    let udp_chk = asm.label();
    if t.tcp {
        asm.jcond(op::JEQ, TCP, Tgt::To(tcp_chk), Tgt::Next);
    }
    if t.udp {
        asm.jcond(op::JEQ, UDP, Tgt::To(udp_chk), Tgt::Next);
    }
    asm.ja(out.other);
    asm.bind(tcp_chk);
    if t.tcp {
        // l4 + 20 <= end, then l4 + doff * 4 <= end.
        asm.ldx_mem(M_L4);
        asm.emit(op::MISC | op::TXA, 0);
        asm.emit(op::ALU | op::ADD | op::K, 20);
        asm.ldx_mem(M_END);
        asm.code.push(SockFilter::jump(op::JMP | op::JGT | op::X, 0, 0, 1));
        asm.ja(out.other);
        asm.ldx_mem(M_L4);
        asm.emit(op::LD | op::B | op::IND, 12);
        asm.emit(op::ALU | op::AND | op::K, 0xf0);
        asm.emit(op::ALU | op::RSH | op::K, 2);
        asm.emit(op::ALU | op::ADD | op::X, 0);
        asm.ldx_mem(M_END);
        asm.code.push(SockFilter::jump(op::JMP | op::JGT | op::X, 0, 0, 1));
        asm.ja(out.other);
        asm.ja(out.ports);
    }
    asm.bind(udp_chk);
    if t.udp {
        asm.ldx_mem(M_L4);
        asm.emit(op::MISC | op::TXA, 0);
        asm.emit(op::ALU | op::ADD | op::K, 8);
        asm.ldx_mem(M_END);
        asm.code.push(SockFilter::jump(op::JMP | op::JGT | op::X, 0, 0, 1));
        asm.ja(out.other);
        asm.ja(out.ports);
    }
}

/// Classification of a non-fragment: A = the protocol.
fn whole_packet_ports(asm: &mut Asm, t: FamilyTypes, out: &Outcomes) {
    if t.tcp {
        asm.goto_if(op::JEQ, TCP, out.ports);
    }
    if t.udp {
        asm.goto_if(op::JEQ, UDP, out.ports);
    }
    asm.ja(out.other);
}

/// Emits the "which fields" stubs and the hash of the address words and
/// (when `M[PORTS]` is 1) the port word at `X = M[L4]`.
fn hash_family(asm: &mut Asm, key: &[u8], t: FamilyTypes, out: &Outcomes, addrs: (u32, usize), map: Label) {
    let hash = asm.label();
    // Stubs the classification jumps to.
    asm.bind(out.ports);
    asm.emit(op::LD | op::IMM, 1);
    asm.st(M_PORTS);
    asm.ja(hash);
    asm.bind(out.other);
    if !t.l3 {
        asm.ja(map);
    }
    asm.bind(hash);
    let (first, words) = addrs;
    for w in 0..words {
        let load = SockFilter::stmt(op::LD | op::W | op::ABS, first + 4 * w as u32);
        hash_word(asm, key, load, 32 * w);
    }
    if t.any_l4() {
        asm.ld_mem(M_PORTS);
        asm.goto_unless(op::JEQ, 1, map);
        asm.ldx_mem(M_L4);
        hash_word(asm, key, SockFilter::stmt(op::LD | op::W | op::IND, 0), 32 * words);
    }
    asm.ja(map);
}

fn ipv4(asm: &mut Asm, key: &[u8], t: FamilyTypes, frag2: bool, map: Label) {
    let out = Outcomes { ports: asm.label(), other: asm.label() };
    asm.emit(op::LD | op::B | op::ABS, 0);
    asm.emit(op::ALU | op::AND | op::K, 0xf0);
    asm.goto_unless(op::JEQ, 0x40, map);
    // X = IHL * 4: the L4 offset of an unfragmented packet.
    asm.emit(op::LDX | op::B | op::MSH, 0);
    asm.emit(op::STX, M_L4);
    let frag = asm.label();
    asm.emit(op::LD | op::H | op::ABS, 6);
    asm.jcond(op::JSET, 0x3fff, Tgt::To(frag), Tgt::Next);
    asm.emit(op::LD | op::B | op::ABS, 9);
    whole_packet_ports(asm, t, &out);
    asm.bind(frag);
    if frag2 || !t.any_l4() {
        asm.ja(out.other);
    } else {
        // A = flags/offset: a non-first fragment has no ports.
        asm.goto_if(op::JSET, 0x1fff, out.other);
        asm.emit(op::LD | op::H | op::ABS, 2);
        store_end(asm);
        asm.emit(op::LD | op::B | op::ABS, 9);
        first_fragment_ports(asm, t, &out);
    }
    hash_family(asm, key, t, &out, (12, 2), map);
}

fn ipv6(asm: &mut Asm, key: &[u8], t: FamilyTypes, frag2: bool, map: Label) {
    let out = Outcomes { ports: asm.label(), other: asm.label() };
    asm.emit(op::LD | op::B | op::ABS, 0);
    asm.emit(op::ALU | op::AND | op::K, 0xf0);
    asm.goto_unless(op::JEQ, 0x60, map);
    asm.emit(op::LD | op::B | op::ABS, 6);
    asm.st(M_NH);
    asm.emit(op::LDX | op::IMM, 40);
    // The extension chain, unrolled: X = offset of the current header,
    // M[NH] = its type.
    let done = asm.label();
    let nonfirst = asm.label();
    let too_long = asm.label();
    let iters: Vec<Label> = (0..=MAX_IPV6_EXT).map(|_| asm.label()).collect();
    for i in 0..=MAX_IPV6_EXT {
        asm.bind(iters[i]);
        asm.ld_mem(M_NH);
        if i == MAX_IPV6_EXT {
            for nh in [0, 43, 60, 44, 51] {
                asm.goto_if(op::JEQ, nh, too_long);
            }
            asm.ja(done);
            break;
        }
        let (ext8, fragh, auth) = (asm.label(), asm.label(), asm.label());
        for nh in [0, 43, 60] {
            asm.jcond(op::JEQ, nh, Tgt::To(ext8), Tgt::Next);
        }
        asm.jcond(op::JEQ, 44, Tgt::To(fragh), Tgt::Next);
        asm.jcond(op::JEQ, 51, Tgt::To(auth), Tgt::Next);
        asm.ja(done);
        let next = iters[i + 1];
        // Hop-by-Hop, Routing, Destination Options: (len + 1) * 8 bytes.
        asm.bind(ext8);
        asm.emit(op::LD | op::B | op::IND, 0);
        asm.st(M_NH);
        asm.emit(op::LD | op::B | op::IND, 1);
        asm.emit(op::ALU | op::ADD | op::K, 1);
        asm.emit(op::ALU | op::LSH | op::K, 3);
        asm.emit(op::ALU | op::ADD | op::X, 0);
        asm.emit(op::MISC | op::TAX, 0);
        asm.ja(next);
        // AH: (len + 2) * 4 bytes.
        asm.bind(auth);
        asm.emit(op::LD | op::B | op::IND, 0);
        asm.st(M_NH);
        asm.emit(op::LD | op::B | op::IND, 1);
        asm.emit(op::ALU | op::ADD | op::K, 2);
        asm.emit(op::ALU | op::LSH | op::K, 2);
        asm.emit(op::ALU | op::ADD | op::X, 0);
        asm.emit(op::MISC | op::TAX, 0);
        asm.ja(next);
        // Fragment header: 8 bytes; offset != 0 ends the walk (no ports);
        // offset 0 with M set is a first fragment; both clear is atomic.
        asm.bind(fragh);
        asm.emit(op::LD | op::B | op::IND, 0);
        asm.st(M_NH);
        asm.emit(op::LD | op::H | op::IND, 2);
        asm.goto_if(op::JSET, 0xfff8, nonfirst);
        asm.jcond(op::JSET, 1, Tgt::Next, Tgt::Skip(2));
        asm.emit(op::LD | op::IMM, 1);
        asm.st(M_FRAG6);
        asm.emit(op::MISC | op::TXA, 0);
        asm.emit(op::ALU | op::ADD | op::K, 8);
        asm.emit(op::MISC | op::TAX, 0);
        asm.ja(next);
    }
    asm.bind(too_long);
    asm.ja(map);
    asm.bind(nonfirst);
    asm.ja(out.other);
    // Upper layer reached: M[NH] = protocol, X = its offset.
    asm.bind(done);
    asm.emit(op::STX, M_L4);
    let frag = asm.label();
    asm.ld_mem(M_FRAG6);
    asm.jcond(op::JEQ, 0, Tgt::Next, Tgt::To(frag));
    asm.ld_mem(M_NH);
    whole_packet_ports(asm, t, &out);
    asm.bind(frag);
    if frag2 || !t.any_l4() {
        asm.ja(out.other);
    } else {
        asm.emit(op::LD | op::H | op::ABS, 4);
        asm.emit(op::ALU | op::ADD | op::K, 40);
        store_end(asm);
        asm.ld_mem(M_NH);
        first_fragment_ports(asm, t, &out);
    }
    hash_family(asm, key, t, &out, (8, 8), map);
}

/// What the program returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// The receive queue (the fanout program).
    Queue,
    /// The raw Toeplitz hash (for tests of the hash alone).
    #[cfg_attr(not(test), allow(dead_code))]
    Hash,
}

/// A binary jump tree over runs `(first index, queue)` of a RETA; A = index.
fn reta_tree(runs: &[(u32, u32)]) -> Vec<SockFilter> {
    if runs.len() <= 1 {
        return vec![SockFilter::stmt(op::RET | op::K, runs.first().map_or(0, |r| r.1))];
    }
    let mid = runs.len() / 2;
    let left = reta_tree(&runs[..mid]);
    let right = reta_tree(&runs[mid..]);
    let split = runs[mid].0;
    let mut out = Vec::with_capacity(left.len() + right.len() + 2);
    match u8::try_from(left.len()) {
        Ok(n) => out.push(SockFilter::jump(op::JMP | op::JGE | op::K, split, n, 0)),
        Err(_) => {
            out.push(SockFilter::jump(op::JMP | op::JGE | op::K, split, 0, 1));
            out.push(SockFilter::stmt(op::JMP | op::JA, left.len() as u32));
        }
    }
    out.extend(left);
    out.extend(right);
    out
}

/// The queue mapping; A = hash on entry.
fn mapping(config: &RssConfig, out: Output) -> Vec<SockFilter> {
    let ret_a = SockFilter::stmt(op::RET | op::A, 0);
    if out == Output::Hash {
        return vec![ret_a];
    }
    let queues = config.queue_count().max(1) as u32;
    match config.mapping {
        Mapping::RpsScale => {
            // (h * n) >> 32 = (hi * n + ((lo * n) >> 16)) >> 16 with
            // h = hi << 16 | lo; n <= 4096 keeps every product below 2^29.
            vec![
                SockFilter::stmt(op::ALU | op::AND | op::K, 0xffff),
                SockFilter::stmt(op::ALU | op::MUL | op::K, queues),
                SockFilter::stmt(op::ALU | op::RSH | op::K, 16),
                SockFilter::stmt(op::MISC | op::TAX, 0),
                SockFilter::stmt(op::LD | op::MEM, M_HASH),
                SockFilter::stmt(op::ALU | op::RSH | op::K, 16),
                SockFilter::stmt(op::ALU | op::MUL | op::K, queues),
                SockFilter::stmt(op::ALU | op::ADD | op::X, 0),
                SockFilter::stmt(op::ALU | op::RSH | op::K, 16),
                ret_a,
            ]
        }
        Mapping::Reta => {
            let entries = config.reta.entries();
            let mask = (entries.len().max(1) - 1) as u32;
            let mut code = vec![SockFilter::stmt(op::ALU | op::AND | op::K, mask)];
            let round_robin = entries.iter().enumerate().all(|(i, q)| u32::from(q.0) == i as u32 % queues);
            if queues == 1 {
                return vec![SockFilter::stmt(op::RET | op::K, entries.first().map_or(0, |q| u32::from(q.0)))];
            } else if round_robin && queues.is_power_of_two() {
                code.push(SockFilter::stmt(op::ALU | op::AND | op::K, queues - 1));
                code.push(ret_a);
            } else if round_robin {
                code.push(SockFilter::stmt(op::ALU | op::MOD | op::K, queues));
                code.push(ret_a);
            } else {
                let mut runs: Vec<(u32, u32)> = Vec::new();
                for (i, q) in entries.iter().enumerate() {
                    if runs.last().is_none_or(|r| r.1 != u32::from(q.0)) {
                        runs.push((i as u32, u32::from(q.0)));
                    }
                }
                code.extend(reta_tree(&runs));
            }
            code
        }
    }
}

/// Compiles `config` into a `PACKET_FANOUT_CBPF` program that returns the
/// receive queue [`RssConfig::place`] picks (see the [module docs](self)).
///
/// Join exactly `config.queue_count()` sockets to the group, in queue
/// order: the kernel delivers to member `ret % members`.
///
/// Errors: the program would exceed the kernel's [`MAX_INSNS`] (a large
/// RETA with many runs of different queues).
pub fn toeplitz_cbpf(config: &RssConfig) -> Result<Vec<SockFilter>, Error> {
    compile(config, Output::Queue)
}

pub(crate) fn compile(config: &RssConfig, out: Output) -> Result<Vec<SockFilter>, Error> {
    let key = config.key().as_bytes();
    let types = config.types;
    let fam = |l3, tcp, udp| FamilyTypes { l3: types.contains(l3), tcp: types.contains(tcp), udp: types.contains(udp) };
    let v4 = fam(HashTypes::IPV4, HashTypes::TCP_IPV4, HashTypes::UDP_IPV4);
    let v6 = fam(HashTypes::IPV6, HashTypes::TCP_IPV6, HashTypes::UDP_IPV6);
    let frag2 = types.fragments_on_2tuple;

    let mut asm = Asm::default();
    let map = asm.label();
    // Every scratch word that is read somewhere starts at 0 (the kernel's
    // checker rejects reads of words not written on every path).
    asm.emit(op::LD | op::IMM, 0);
    for m in [M_HASH, M_PORTS, M_FRAG6, M_L4, M_END, M_NH] {
        asm.st(m);
    }
    asm.emit(op::LD | op::W | op::ABS, op::SKF_AD_OFF + op::SKF_AD_PROTOCOL);
    let (l4, l6) = (asm.label(), asm.label());
    if v4.any() {
        asm.goto_if(op::JEQ, ETH_P_IP, l4);
    }
    if v6.any() {
        asm.goto_if(op::JEQ, ETH_P_IPV6, l6);
    }
    asm.ja(map);
    asm.bind(l4);
    if v4.any() {
        ipv4(&mut asm, key, v4, frag2, map);
    }
    asm.bind(l6);
    if v6.any() {
        ipv6(&mut asm, key, v6, frag2, map);
    }
    asm.bind(map);
    asm.ld_mem(M_HASH);
    asm.code.extend(mapping(config, out));
    let prog = asm.finish()?;
    if prog.len() > MAX_INSNS {
        return Err(Error::Program(format!(
            "the Toeplitz steering program needs {} instructions, more than the kernel's {MAX_INSNS}; \
             use a round-robin RETA or one with fewer runs of equal entries",
            prog.len()
        )));
    }
    Ok(prog)
}

/// A socket filter (`SO_ATTACH_FILTER`, sees the frame from the Ethernet
/// header) that accepts only UDP datagrams to `port`: IPv4 unfragmented or
/// first fragments, and IPv6 with UDP as the first next header. Everything
/// else is dropped before the ring (and before the kernel's counters).
pub fn udp_dst_port_filter(port: u16) -> Vec<SockFilter> {
    let port = u32::from(port);
    let s = SockFilter::stmt;
    let j = SockFilter::jump;
    vec![
        s(op::LD | op::H | op::ABS, 12),
        j(op::JMP | op::JEQ | op::K, ETH_P_IP, 0, 7),
        // IPv4: protocol UDP, offset 0, port at 14 + IHL*4 + 2.
        s(op::LD | op::B | op::ABS, 23),
        j(op::JMP | op::JEQ | op::K, UDP, 0, 11),
        s(op::LD | op::H | op::ABS, 20),
        j(op::JMP | op::JSET | op::K, 0x1fff, 9, 0),
        s(op::LDX | op::B | op::MSH, 14),
        s(op::LD | op::H | op::IND, 16),
        j(op::JMP | op::JEQ | op::K, port, 5, 6),
        // IPv6: next header UDP, port at 14 + 40 + 2.
        j(op::JMP | op::JEQ | op::K, ETH_P_IPV6, 0, 5),
        s(op::LD | op::B | op::ABS, 20),
        j(op::JMP | op::JEQ | op::K, UDP, 0, 3),
        s(op::LD | op::H | op::ABS, 56),
        j(op::JMP | op::JEQ | op::K, port, 0, 1),
        s(op::RET | op::K, u32::MAX),
        s(op::RET | op::K, 0),
    ]
}

#[cfg(test)]
#[path = "cbpf_tests.rs"]
mod tests;
