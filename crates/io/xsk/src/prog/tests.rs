//! The XDP program on crafted frames, run by a small eBPF interpreter that
//! models the packet, the stack, the maps and the helpers the programs use
//! (the fast path's too: its tests in `fastpath/tests.rs` run on this
//! interpreter as well); plus the kernel's verifier on the real program
//! (root).

use super::*;

pub(crate) const XSKS_FD: i32 = 101;
pub(crate) const COUNTERS_FD: i32 = 102;
pub(crate) const CLAIMS_FD: i32 = 103;
pub(crate) const MAPS: Maps = Maps { xsks: XSKS_FD, counters: COUNTERS_FD, claims: CLAIMS_FD };

/// Address regions of the interpreter: a value's top bits say what it points to.
const REGION: u64 = 1 << 40;
const CTX: u64 = REGION;
const PKT: u64 = 2 * REGION;
const STACK: u64 = 3 * REGION;
const STACK_LEN: u64 = 512;
const MAP_PTR: u64 = 4 * REGION;
const CLAIM_VAL: u64 = 5 * REGION;
const COUNTER_VAL: u64 = 6 * REGION;
const FDB_VAL: u64 = 7 * REGION;
const PORT_VAL: u64 = 8 * REGION;
/// Bytes of one FDB or port value of the fast path.
const FAST_VALUE: u64 = 16;
/// What a helper call leaves in r1-r5: reading it as an address fails.
const CLOBBERED: u64 = 0xdead_0000_0000_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    Drop,
    /// To the XSK of this queue.
    Redirect(u32),
    /// Through the fast path's device map, to this port.
    Forward(u32),
}

/// The fast path's maps, as the interpreter holds them: values as the
/// bytes the kernel would hold.
#[derive(Clone, Debug, Default)]
pub(crate) struct FastMaps {
    pub refs: Option<FastPathRefs>,
    /// (key, value) of every FDB entry, in insertion order.
    pub fdb: Vec<([u8; 8], [u8; 16])>,
    /// `ports` values by port id.
    pub ports: Vec<[u8; 16]>,
    /// `tx` entries by port id (the ifindex).
    pub tx: Vec<Option<u32>>,
    /// What `bpf_ktime_get_ns` returns.
    pub now_ns: u64,
    /// Stores into FDB values so far (the `seen` updates).
    pub fdb_stores: u64,
}

/// The maps' contents and what ran.
pub(crate) struct Vm {
    pub claims: Vec<u32>,
    pub counters: [u64; slot::COUNT as usize],
    /// Queues with a socket in the XSKMAP.
    pub sockets: Vec<u32>,
    pub fast: FastMaps,
    /// Instructions executed, and conditional jumps seen taken / not taken.
    pub executed: Vec<bool>,
    pub taken: Vec<[bool; 2]>,
    /// The frame as the program left it, after the last run.
    pub frame_out: Vec<u8>,
}

impl Vm {
    pub(crate) fn new(prog: &[Insn], claim: &Claim) -> Vm {
        let mut claims = vec![0u32; CLAIM_ENTRIES as usize];
        if let Claim::Ports { udp, tcp, .. } = claim {
            for (k, w) in claim_words(udp, tcp) {
                claims[k as usize] = w;
            }
        }
        Vm {
            claims,
            counters: [0; slot::COUNT as usize],
            sockets: (0..4).collect(),
            fast: FastMaps::default(),
            executed: vec![false; prog.len()],
            taken: vec![[false; 2]; prog.len()],
            frame_out: Vec::new(),
        }
    }

    /// Runs `prog` on `frame` received on `queue`; returns the verdict and
    /// the counter slot it added one to (exactly one, checked).
    pub(crate) fn run(&mut self, prog: &[Insn], frame: &[u8], queue: u32) -> (Verdict, i32) {
        let (verdict, bumped) = self.exec(prog, frame, queue);
        assert_eq!(bumped.len(), 1, "exactly one counter per frame");
        (verdict, bumped[0])
    }

    /// Runs `prog` on `frame` received on `queue`; returns the verdict and
    /// the counter slots it added one to (each by one, checked).
    pub(crate) fn exec(&mut self, prog: &[Insn], frame: &[u8], queue: u32) -> (Verdict, Vec<i32>) {
        let before = self.counters;
        // The packet the program reads and writes.
        let mut pkt = frame.to_vec();
        let mut r = [0u64; 11];
        let mut stack = [0u8; STACK_LEN as usize];
        r[1] = CTX;
        r[10] = STACK + STACK_LEN;
        let mut pc = 0usize;
        let mut redirected = None;
        let fast_fd = |f: fn(&FastPathRefs) -> i32, fast: &FastMaps| fast.refs.as_ref().map(|r| MAP_PTR + f(r) as u64);
        for _ in 0..10_000 {
            let i = prog[pc];
            self.executed[pc] = true;
            let (dst, src) = ((i.regs & 0x0f) as usize, (i.regs >> 4) as usize);
            let at = pc;
            pc += 1;
            let imm = i.imm as i64 as u64;
            let mut branch = |cond: bool, pc: &mut usize| {
                self.taken[at][usize::from(cond)] = true;
                if cond {
                    *pc = (*pc as i64 + i64::from(i.off)) as usize;
                }
            };
            let size = |code: u8| match code & 0x18 {
                0x00 => 4,
                0x08 => 2,
                0x10 => 1,
                _ => 8,
            };
            match i.code {
                LDX_B | LDX_H | LDX_W | LDX_DW => {
                    r[dst] = self.load(r[src].wrapping_add(i.off as i64 as u64), size(i.code), &pkt, &stack, queue);
                }
                STX_H | STX_W | STX_DW => {
                    self.store(r[dst].wrapping_add(i.off as i64 as u64), size(i.code), r[src], &mut stack, &mut pkt);
                }
                ST_H => self.store(r[dst].wrapping_add(i.off as i64 as u64), 2, imm, &mut stack, &mut pkt),
                MOV64_X => r[dst] = r[src],
                MOV64_K => r[dst] = imm,
                ADD64_X => r[dst] = r[dst].wrapping_add(r[src]),
                ADD64_K => r[dst] = r[dst].wrapping_add(imm),
                SUB64_X => r[dst] = r[dst].wrapping_sub(r[src]),
                DIV64_K => r[dst] /= imm,
                MOD64_K => r[dst] %= imm,
                OR64_X => r[dst] |= r[src],
                AND64_K => r[dst] &= imm,
                XOR64_K => r[dst] ^= imm,
                LSH64_K => r[dst] <<= imm,
                RSH64_K => r[dst] >>= imm,
                RSH64_X => r[dst] >>= r[src] & 63,
                BE => {
                    r[dst] = match i.imm {
                        16 => u64::from((r[dst] as u16).to_be()),
                        32 => u64::from((r[dst] as u32).to_be()),
                        w => panic!("be{w}"),
                    }
                }
                JA => pc = (pc as i64 + i64::from(i.off)) as usize,
                JEQ_K => branch(r[dst] == imm, &mut pc),
                JEQ_X => branch(r[dst] == r[src], &mut pc),
                JNE_K => branch(r[dst] != imm, &mut pc),
                JNE_X => branch(r[dst] != r[src], &mut pc),
                JLT_K => branch(r[dst] < imm, &mut pc),
                JLT_X => branch(r[dst] < r[src], &mut pc),
                JGT_K => branch(r[dst] > imm, &mut pc),
                JGT_X => branch(r[dst] > r[src], &mut pc),
                JSET_K => branch(r[dst] & imm != 0, &mut pc),
                LD_DW_IMM => {
                    assert_eq!(src as u8, BPF_PSEUDO_MAP_FD);
                    assert_eq!(prog[pc], insn(0, 0, 0, 0, 0), "second slot of ld_imm64");
                    r[dst] = MAP_PTR + i.imm as u64;
                    self.executed[pc] = true;
                    pc += 1;
                }
                CALL => {
                    r[0] = match i.imm {
                        BPF_FUNC_MAP_LOOKUP_ELEM => match r[1] {
                            m if m == MAP_PTR + CLAIMS_FD as u64 || m == MAP_PTR + COUNTERS_FD as u64 => {
                                let key = self.load(r[2], 4, &pkt, &stack, queue);
                                match r[1] {
                                    m if m == MAP_PTR + CLAIMS_FD as u64 && key < u64::from(CLAIM_ENTRIES) => {
                                        CLAIM_VAL + key * 4
                                    }
                                    m if m == MAP_PTR + COUNTERS_FD as u64 && key < u64::from(slot::COUNT) => {
                                        COUNTER_VAL + key * 8
                                    }
                                    _ => 0,
                                }
                            }
                            m if Some(m) == fast_fd(|f| f.fdb, &self.fast) => {
                                let key = self.load(r[2], 8, &pkt, &stack, queue).to_ne_bytes();
                                let at = self.fast.fdb.iter().position(|(k, _)| *k == key);
                                at.map_or(0, |n| FDB_VAL + n as u64 * FAST_VALUE)
                            }
                            m if Some(m) == fast_fd(|f| f.ports, &self.fast) => {
                                let key = self.load(r[2], 4, &pkt, &stack, queue);
                                if key < self.fast.ports.len() as u64 {
                                    PORT_VAL + key * FAST_VALUE
                                } else {
                                    0
                                }
                            }
                            m => panic!("lookup in an unknown map {m:#x}"),
                        },
                        BPF_FUNC_KTIME_GET_NS => self.fast.now_ns,
                        BPF_FUNC_CSUM_DIFF => {
                            assert_eq!((r[1], r[2]), (0, 0), "the program only sums: from NULL, from_size 0");
                            let len = r[4];
                            // The limits of Linux before 6.13, which the program keeps to.
                            assert!(len % 4 == 0 && len <= 512, "bpf_csum_diff of {len} bytes");
                            // Byte by byte through the memory model: a read past data_end panics.
                            let to: Vec<u8> =
                                (0..len).map(|n| self.load(r[3] + n, 1, &pkt, &stack, queue) as u8).collect();
                            u64::from(csum_from32to16(csum_partial(&to, r[5] as u32)))
                        }
                        BPF_FUNC_REDIRECT_MAP if Some(r[1]) == fast_fd(|f| f.tx, &self.fast) => {
                            assert_eq!(r[3], 0, "no fallback action for the device map");
                            let port = r[2] as u32;
                            if self.fast.tx.get(port as usize).copied().flatten().is_some() {
                                redirected = Some(Verdict::Forward(port));
                                XDP_REDIRECT as u64
                            } else {
                                r[3]
                            }
                        }
                        BPF_FUNC_REDIRECT_MAP => {
                            assert_eq!(r[1], MAP_PTR + XSKS_FD as u64, "redirect through the XSKMAP");
                            assert_eq!(r[3], XDP_PASS as u64, "fallback action");
                            let q = r[2] as u32;
                            if self.sockets.contains(&q) {
                                redirected = Some(Verdict::Redirect(q));
                                XDP_REDIRECT as u64
                            } else {
                                r[3]
                            }
                        }
                        h => panic!("unexpected helper {h}"),
                    };
                    for reg in &mut r[1..=5] {
                        *reg = CLOBBERED;
                    }
                }
                EXIT => {
                    let verdict = match r[0] as i32 {
                        XDP_PASS => Verdict::Pass,
                        XDP_DROP => Verdict::Drop,
                        XDP_REDIRECT => redirected.expect("redirect without the helper"),
                        a => panic!("unexpected action {a}"),
                    };
                    self.frame_out = pkt;
                    let bumped: Vec<i32> =
                        (0..before.len()).filter(|&s| self.counters[s] != before[s]).map(|s| s as i32).collect();
                    for &s in &bumped {
                        assert_eq!(self.counters[s as usize], before[s as usize] + 1, "slot {s} counted once");
                    }
                    return (verdict, bumped);
                }
                c => panic!("unexpected opcode {c:#x} at {at}"),
            }
        }
        panic!("runaway program");
    }

    fn load(&self, addr: u64, size: u64, frame: &[u8], stack: &[u8], queue: u32) -> u64 {
        let bytes = |b: &[u8], off: u64| -> u64 {
            let off = usize::try_from(off).unwrap();
            // A read past the end panics here: the program read beyond what it checked.
            let s = &b[off..off + size as usize];
            let mut v = [0u8; 8];
            v[..s.len()].copy_from_slice(s);
            u64::from_ne_bytes(v)
        };
        match addr & !(REGION - 1) {
            CTX => {
                assert_eq!(size, 4, "ctx fields are u32");
                match addr - CTX {
                    o if o == XDP_MD_DATA as u64 => PKT,
                    o if o == XDP_MD_DATA_END as u64 => PKT + frame.len() as u64,
                    o if o == XDP_MD_RX_QUEUE_INDEX as u64 => u64::from(queue),
                    o => panic!("unexpected ctx offset {o}"),
                }
            }
            PKT => {
                assert!(addr - PKT + size <= frame.len() as u64, "packet read past data_end at {}", addr - PKT);
                bytes(frame, addr - PKT)
            }
            STACK => bytes(stack, addr - STACK),
            CLAIM_VAL => {
                assert_eq!(size, 4);
                u64::from(self.claims[((addr - CLAIM_VAL) / 4) as usize])
            }
            COUNTER_VAL => {
                assert_eq!(size, 8);
                self.counters[((addr - COUNTER_VAL) / 8) as usize]
            }
            FDB_VAL => {
                let (n, off) = ((addr - FDB_VAL) / FAST_VALUE, (addr - FDB_VAL) % FAST_VALUE);
                assert!(off + size <= FAST_VALUE, "FDB value read past its end");
                bytes(&self.fast.fdb[n as usize].1, off)
            }
            PORT_VAL => {
                let (n, off) = ((addr - PORT_VAL) / FAST_VALUE, (addr - PORT_VAL) % FAST_VALUE);
                assert!(off + size <= FAST_VALUE, "port value read past its end");
                bytes(&self.fast.ports[n as usize], off)
            }
            _ => panic!("load from a bad address {addr:#x}"),
        }
    }

    fn store(&mut self, addr: u64, size: u64, v: u64, stack: &mut [u8], pkt: &mut [u8]) {
        let size = size as usize;
        match addr & !(REGION - 1) {
            PKT => {
                let off = (addr - PKT) as usize;
                assert!(off + size <= pkt.len(), "packet write past data_end at {off}");
                pkt[off..off + size].copy_from_slice(&v.to_ne_bytes()[..size]);
            }
            STACK => {
                let off = (addr - STACK) as usize;
                stack[off..off + size].copy_from_slice(&v.to_ne_bytes()[..size]);
            }
            COUNTER_VAL => {
                assert_eq!(size, 8);
                self.counters[((addr - COUNTER_VAL) / 8) as usize] = v;
            }
            FDB_VAL => {
                let (n, off) = ((addr - FDB_VAL) / FAST_VALUE, ((addr - FDB_VAL) % FAST_VALUE) as usize);
                assert!(off + size <= FAST_VALUE as usize, "FDB value written past its end");
                self.fast.fdb_stores += 1;
                self.fast.fdb[n as usize].1[off..off + size].copy_from_slice(&v.to_ne_bytes()[..size]);
            }
            _ => panic!("store to a bad address {addr:#x}"),
        }
    }
}

/// Linux's `csum_partial(buf, len, seed)` (x86-64: `arch/x86/lib/csum-partial_64.c`)
/// for a length that is a multiple of 4: the ones' complement sum, 32 bits
/// wide with end-around carry, of `seed` and of `buf`'s 4-byte words as the
/// host reads them. The kernel adds 8 bytes at a time and folds at the end,
/// so its 32-bit result may be another representative of the same sum
/// modulo 0xffff; it is 0 exactly when this one is (every word and the
/// seed 0: an end-around carry never makes 0 of anything else), and that
/// and the class modulo 0xffff are all [`csum_from32to16`] keeps.
fn csum_partial(buf: &[u8], seed: u32) -> u32 {
    let mut acc = u64::from(seed);
    for w in buf.chunks_exact(4) {
        acc += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
    while acc >> 32 != 0 {
        acc = (acc & 0xffff_ffff) + (acc >> 32);
    }
    acc as u32
}

/// `csum_from32to16` of `include/net/checksum.h` (`sum += (sum >> 16) |
/// (sum << 16); return sum >> 16`, a rotation): what `bpf_csum_diff`
/// returns since Linux 6.13.
fn csum_from32to16(sum: u32) -> u16 {
    let sum = sum.wrapping_add(sum.rotate_left(16));
    (sum >> 16) as u16
}

// ---------------------------------------------------------------- frames

fn eth(tags: &[u16], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    for t in tags {
        f.extend_from_slice(&t.to_be_bytes());
        f.extend_from_slice(&[0, 7]); // TCI
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// IPv4 with `ihl` 32-bit words of header (options are NOPs) and the
/// flags + fragment offset field `frag`.
fn ipv4(proto: u8, ihl: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
    let hlen = usize::from(ihl.max(5)) * 4;
    let mut h = vec![0u8; hlen];
    h[0] = 0x40 | ihl;
    h[2..4].copy_from_slice(&((hlen + l4.len()) as u16).to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&[10, 0, 0, 1]);
    h[16..20].copy_from_slice(&[10, 0, 0, 2]);
    for b in &mut h[20..] {
        *b = 1;
    }
    h.extend_from_slice(l4);
    h
}

#[derive(Clone, Copy)]
enum Ext {
    /// Hop-by-Hop (0), Routing (43), Destination Options (60), or any kind,
    /// with `units` 8-byte units beyond the first.
    Opts(u8, u8),
    /// A Fragment header: offset in bytes, M flag.
    Frag(u16, bool),
}

fn ipv6(exts: &[Ext], upper: u8, l4: &[u8]) -> Vec<u8> {
    let kind = |e: &Ext| match e {
        Ext::Opts(k, _) => *k,
        Ext::Frag(..) => 44,
    };
    let mut body = Vec::new();
    for (n, e) in exts.iter().enumerate() {
        let next = exts.get(n + 1).map_or(upper, kind);
        match *e {
            Ext::Opts(_, units) => {
                let mut h = vec![0u8; (usize::from(units) + 1) * 8];
                h[0] = next;
                h[1] = units;
                body.extend_from_slice(&h);
            }
            Ext::Frag(offset, more) => {
                let field = offset & 0xfff8 | u16::from(more);
                body.extend_from_slice(&[next, 0]);
                body.extend_from_slice(&field.to_be_bytes());
                body.extend_from_slice(&[0, 0, 0x12, 0x34]);
            }
        }
    }
    body.extend_from_slice(l4);
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(body.len() as u16).to_be_bytes());
    h[6] = exts.first().map_or(upper, kind);
    h[7] = 64;
    h[8] = 0xfd;
    h[23] = 1;
    h[24] = 0xfd;
    h[39] = 2;
    h.extend_from_slice(&body);
    h
}

fn udp(dport: u16, payload_len: usize) -> Vec<u8> {
    let mut u = vec![0x9c, 0x40];
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload_len) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.resize(8 + payload_len, 0xab);
    u
}

fn tcp(dport: u16) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&50_000u16.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[12] = 5 << 4;
    t
}

fn icmp_echo() -> Vec<u8> {
    vec![8, 0, 0, 0, 0x12, 0x34, 0, 1, 0xaa, 0xbb]
}

const UDP: u8 = 17;
const TCP: u8 = 6;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;
const MF: u16 = 0x2000;
const DF: u16 = 0x4000;

fn v4(proto: u8, l4: &[u8]) -> Vec<u8> {
    eth(&[], 0x0800, &ipv4(proto, 5, 0, l4))
}

fn v6(exts: &[Ext], upper: u8, l4: &[u8]) -> Vec<u8> {
    eth(&[], 0x86dd, &ipv6(exts, upper, l4))
}

/// The shapes the program comes in.
fn listeners() -> Claim {
    Claim::Ports { udp: vec![9000, 53], tcp: vec![80], fragments: Fragments::Claim }
}

fn echo_like() -> Claim {
    Claim::Ports { udp: vec![9000], tcp: Vec::new(), fragments: Fragments::Pass }
}

const R: Verdict = Verdict::Redirect(0);
const P: Verdict = Verdict::Pass;

/// The frames every test below runs, each with what the `listeners()`
/// program does with it, the slot it counts in, and what the `echo_like()`
/// program does with it.
fn catalogue() -> Vec<(&'static str, Vec<u8>, Verdict, i32, Verdict)> {
    use slot::*;
    let udp9000 = udp(9000, 32);
    let big_opts = |kind| Ext::Opts(kind, 2);
    let nine: Vec<Ext> = (0..9).map(|_| Ext::Opts(60, 0)).collect();
    let eight: Vec<Ext> = (0..8).map(|_| Ext::Opts(60, 0)).collect();
    let mut seven_and_frag: Vec<Ext> = (0..7).map(|_| Ext::Opts(60, 0)).collect();
    seven_and_frag.push(Ext::Frag(0, true));
    let mut eight_and_frag = eight.clone();
    eight_and_frag.push(Ext::Frag(0, true));
    vec![
        // Not IP.
        ("arp", eth(&[], 0x0806, &[0u8; 28]), P, PASSED_NOT_IP, P),
        ("lldp", eth(&[], 0x88cc, &[0u8; 40]), P, PASSED_NOT_IP, P),
        ("tagged arp", eth(&[0x8100], 0x0806, &[0u8; 28]), P, PASSED_NOT_IP, P),
        ("qinq arp", eth(&[0x88a8, 0x8100], 0x0806, &[0u8; 28]), P, PASSED_NOT_IP, P),
        ("three tags", eth(&[0x8100, 0x8100, 0x8100], 0x0800, &ipv4(UDP, 5, 0, &udp9000)), P, PASSED_NOT_IP, P),
        ("802.1ad inside", eth(&[0x8100, 0x88a8], 0x0800, &ipv4(UDP, 5, 0, &udp9000)), P, PASSED_NOT_IP, P),
        // IPv4: ports.
        ("udp4 claimed", v4(UDP, &udp9000), R, REDIRECTED, R),
        ("udp4 second port", v4(UDP, &udp(53, 40)), R, REDIRECTED, P),
        ("udp4 other port", v4(UDP, &udp(9001, 32)), P, PASSED_UNCLAIMED, P),
        ("udp4 port 0", v4(UDP, &udp(0, 8)), P, PASSED_UNCLAIMED, P),
        ("udp4 port 65535", v4(UDP, &udp(65535, 8)), P, PASSED_UNCLAIMED, P),
        ("tcp4 claimed", v4(TCP, &tcp(80)), R, REDIRECTED, P),
        ("tcp4 ssh", v4(TCP, &tcp(22)), P, PASSED_UNCLAIMED, P),
        ("tcp4 on a udp port", v4(TCP, &tcp(9000)), P, PASSED_UNCLAIMED, P),
        ("udp4 on a tcp port", v4(UDP, &udp(80, 8)), P, PASSED_UNCLAIMED, P),
        ("ping", v4(ICMP, &icmp_echo()), P, PASSED_UNCLAIMED, P),
        ("gre", v4(47, &[0u8; 24]), P, PASSED_UNCLAIMED, P),
        ("udp4 dont-fragment", eth(&[], 0x0800, &ipv4(UDP, 5, DF, &udp9000)), R, REDIRECTED, R),
        ("udp4 options", eth(&[], 0x0800, &ipv4(UDP, 6, 0, &udp9000)), R, REDIRECTED, R),
        ("udp4 most options", eth(&[], 0x0800, &ipv4(UDP, 15, 0, &udp9000)), R, REDIRECTED, R),
        ("udp4 options other port", eth(&[], 0x0800, &ipv4(UDP, 15, 0, &udp(9001, 8))), P, PASSED_UNCLAIMED, P),
        ("ihl 4", eth(&[], 0x0800, &ipv4(UDP, 4, 0, &udp9000)), P, PASSED_UNPARSED, P),
        ("ihl 0", eth(&[], 0x0800, &ipv4(UDP, 0, 0, &udp9000)), P, PASSED_UNPARSED, P),
        // IPv4 fragments: by protocol, never by port.
        ("udp4 first fragment", eth(&[], 0x0800, &ipv4(UDP, 5, MF, &udp(9001, 64))), R, REDIRECTED, P),
        ("udp4 middle fragment", eth(&[], 0x0800, &ipv4(UDP, 5, MF | 9, &[7u8; 72])), R, REDIRECTED, P),
        ("udp4 last fragment", eth(&[], 0x0800, &ipv4(UDP, 5, 18, &[7u8; 20])), R, REDIRECTED, P),
        ("udp4 last fragment, 2 bytes", eth(&[], 0x0800, &ipv4(UDP, 5, 1, &[7u8; 2])), R, REDIRECTED, P),
        ("tcp4 fragment", eth(&[], 0x0800, &ipv4(TCP, 5, 3, &[7u8; 16])), R, REDIRECTED, P),
        ("icmp fragment", eth(&[], 0x0800, &ipv4(ICMP, 5, MF, &[7u8; 16])), P, PASSED_UNCLAIMED, P),
        // VLAN tags.
        ("tagged udp4", eth(&[0x8100], 0x0800, &ipv4(UDP, 5, 0, &udp9000)), R, REDIRECTED, R),
        ("tagged udp6", eth(&[0x8100], 0x86dd, &ipv6(&[], UDP, &udp9000)), R, REDIRECTED, R),
        ("qinq udp4", eth(&[0x88a8, 0x8100], 0x0800, &ipv4(UDP, 5, 0, &udp9000)), R, REDIRECTED, R),
        ("double 802.1q udp6", eth(&[0x8100, 0x8100], 0x86dd, &ipv6(&[], UDP, &udp9000)), R, REDIRECTED, R),
        ("tagged ssh", eth(&[0x8100], 0x0800, &ipv4(TCP, 5, 0, &tcp(22))), P, PASSED_UNCLAIMED, P),
        ("qinq ping6", eth(&[0x88a8, 0x8100], 0x86dd, &ipv6(&[], ICMPV6, &[128, 0, 0, 0])), P, PASSED_UNCLAIMED, P),
        // IPv6.
        ("udp6 claimed", v6(&[], UDP, &udp9000), R, REDIRECTED, R),
        ("udp6 other port", v6(&[], UDP, &udp(9001, 8)), P, PASSED_UNCLAIMED, P),
        ("tcp6 claimed", v6(&[], TCP, &tcp(80)), R, REDIRECTED, P),
        ("tcp6 ssh", v6(&[], TCP, &tcp(22)), P, PASSED_UNCLAIMED, P),
        ("ping6", v6(&[], ICMPV6, &[128, 0, 0, 0, 0, 1, 0, 1]), P, PASSED_UNCLAIMED, P),
        ("neighbour solicitation", v6(&[], ICMPV6, &[135, 0, 0, 0, 0, 0, 0, 0]), P, PASSED_UNCLAIMED, P),
        ("hop-by-hop udp6", v6(&[Ext::Opts(0, 0)], UDP, &udp9000), R, REDIRECTED, R),
        ("hop-by-hop mld", v6(&[Ext::Opts(0, 0)], ICMPV6, &[143, 0, 0, 0]), P, PASSED_UNCLAIMED, P),
        ("routing + dest-opts udp6", v6(&[Ext::Opts(43, 1), big_opts(60)], UDP, &udp9000), R, REDIRECTED, R),
        (
            "hop + routing + dest-opts tcp6 ssh",
            v6(&[Ext::Opts(0, 0), Ext::Opts(43, 2), Ext::Opts(60, 1)], TCP, &tcp(22)),
            P,
            PASSED_UNCLAIMED,
            P,
        ),
        ("long ext header", v6(&[Ext::Opts(60, 200)], UDP, &udp9000), R, REDIRECTED, R),
        ("eight ext headers", v6(&eight, UDP, &udp9000), R, REDIRECTED, R),
        ("nine ext headers", v6(&nine, UDP, &udp9000), P, PASSED_UNPARSED, P),
        ("seven + fragment header", v6(&seven_and_frag, UDP, &udp(9001, 8)), R, REDIRECTED, P),
        ("eight + fragment header", v6(&eight_and_frag, UDP, &udp9000), P, PASSED_UNPARSED, P),
        ("ah", v6(&[Ext::Opts(51, 2)], UDP, &udp9000), P, PASSED_UNCLAIMED, P),
        ("esp", v6(&[], 50, &[0u8; 24]), P, PASSED_UNCLAIMED, P),
        ("no next header", v6(&[], 59, &[]), P, PASSED_UNCLAIMED, P),
        // IPv6 fragments: by the Fragment header's next header.
        ("udp6 first fragment", v6(&[Ext::Frag(0, true)], UDP, &udp(9001, 64)), R, REDIRECTED, P),
        ("udp6 last fragment", v6(&[Ext::Frag(72, false)], UDP, &[7u8; 30]), R, REDIRECTED, P),
        (
            "udp6 fragment after hop-by-hop",
            v6(&[Ext::Opts(0, 0), Ext::Frag(8, true)], UDP, &[7u8; 8]),
            R,
            REDIRECTED,
            P,
        ),
        ("tcp6 fragment", v6(&[Ext::Frag(8, true)], TCP, &[7u8; 8]), R, REDIRECTED, P),
        ("icmp6 fragment", v6(&[Ext::Frag(0, true)], ICMPV6, &[128, 0, 0, 0, 0, 0, 0, 0]), P, PASSED_UNCLAIMED, P),
        (
            "fragment of dest-opts + udp",
            v6(&[Ext::Frag(0, true), Ext::Opts(60, 0)], UDP, &udp9000),
            P,
            PASSED_UNCLAIMED,
            P,
        ),
        ("atomic fragment udp6 claimed", v6(&[Ext::Frag(0, false)], UDP, &udp9000), R, REDIRECTED, R),
        ("atomic fragment udp6 other port", v6(&[Ext::Frag(0, false)], UDP, &udp(9001, 8)), P, PASSED_UNCLAIMED, P),
        ("atomic fragment + dest-opts", v6(&[Ext::Frag(0, false), Ext::Opts(60, 0)], UDP, &udp9000), R, REDIRECTED, R),
    ]
}

// ---------------------------------------------------------------- tests

fn shapes() -> Vec<(Claim, Option<u32>)> {
    vec![
        (Claim::All, None),
        (Claim::All, Some(1792)),
        (Claim::Frames, None),
        (Claim::Frames, Some(1792)),
        (listeners(), Some(1792)),
        (listeners(), None),
        (echo_like(), Some(1792)),
        (Claim::nothing(), None),
    ]
}

#[test]
fn every_shape_assembles_well_formed() {
    for (claim, max) in shapes() {
        let p = program(MAPS, &claim, max, None);
        assert!(!p.is_empty() && p.len() < 1024, "{claim:?}: {} insns", p.len());
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
        for (at, i) in p.iter().enumerate() {
            if matches!(i.code, JGT_X | JEQ_K | JNE_K | JLT_K | JA) {
                let to = at as i64 + 1 + i64::from(i.off);
                assert!(to > at as i64 && (to as usize) < p.len(), "jump at {at} goes to {to}");
            }
            if i.code == LD_DW_IMM {
                assert!([XSKS_FD, COUNTERS_FD, CLAIMS_FD].contains(&i.imm));
                assert_eq!(i.regs >> 4, BPF_PSEUDO_MAP_FD);
                assert_eq!(p[at + 1], insn(0, 0, 0, 0, 0));
            }
        }
        let refs_claims = p.iter().any(|i| i.code == LD_DW_IMM && i.imm == CLAIMS_FD);
        let some_port = matches!(&claim, Claim::Ports { udp, tcp, .. } if !udp.is_empty() || !tcp.is_empty());
        assert_eq!(refs_claims, some_port, "{claim:?}");
    }
}

#[test]
fn listeners_claim_their_ports_and_hand_the_kernel_the_rest() {
    let claim = listeners();
    let p = program(MAPS, &claim, Some(1792), None);
    let mut vm = Vm::new(&p, &claim);
    for (name, f, want, want_slot, _) in catalogue() {
        let (got, s) = vm.run(&p, &f, 0);
        assert_eq!((got, s), (want, want_slot), "{name}");
    }
}

#[test]
fn a_server_that_does_not_reassemble_passes_every_fragment() {
    let claim = echo_like();
    let p = program(MAPS, &claim, Some(1792), None);
    let mut vm = Vm::new(&p, &claim);
    for (name, f, _, _, want) in catalogue() {
        assert_eq!(vm.run(&p, &f, 0).0, want, "{name}");
    }
}

#[test]
fn claim_all_takes_every_ip_packet_and_passes_the_rest() {
    let p = program(MAPS, &Claim::All, None, None);
    let mut vm = Vm::new(&p, &Claim::All);
    for (name, f, _, listener_slot, _) in catalogue() {
        let want = if listener_slot == slot::PASSED_NOT_IP { (P, slot::PASSED_NOT_IP) } else { (R, slot::REDIRECTED) };
        assert_eq!(vm.run(&p, &f, 0), want, "{name}");
    }
}

#[test]
fn claim_frames_takes_every_frame_ip_or_not() {
    let p = program(MAPS, &Claim::Frames, None, None);
    let mut vm = Vm::new(&p, &Claim::Frames);
    for (name, f, ..) in catalogue() {
        assert_eq!(vm.run(&p, &f, 0), (R, slot::REDIRECTED), "{name}");
    }
    assert_eq!(Claim::Frames.describe(), "every frame (IP or not)");
}

#[test]
fn claiming_nothing_passes_everything() {
    let p = program(MAPS, &Claim::nothing(), None, None);
    let mut vm = Vm::new(&p, &Claim::nothing());
    for (name, f, ..) in catalogue() {
        assert_eq!(vm.run(&p, &f, 0).0, P, "{name}");
    }
}

/// Every fragment of one datagram gets the same verdict, whatever its
/// ports, for both fragment rules and both IP versions.
#[test]
fn one_datagram_is_never_split_between_kernel_and_sockets() {
    for claim in [listeners(), echo_like(), Claim::udp(&[9001])] {
        let p = program(MAPS, &claim, Some(1792), None);
        let mut vm = Vm::new(&p, &claim);
        for dport in [9000u16, 9001, 22, 53] {
            let l4 = udp(dport, 200);
            let (a, b, c) = (&l4[..96], &l4[96..192], &l4[192..]);
            let v4frags = [
                eth(&[], 0x0800, &ipv4(UDP, 5, MF, a)),
                eth(&[], 0x0800, &ipv4(UDP, 5, MF | 12, b)),
                eth(&[], 0x0800, &ipv4(UDP, 15, 24, c)),
            ];
            let v6frags = [
                v6(&[Ext::Frag(0, true)], UDP, a),
                v6(&[Ext::Opts(0, 0), Ext::Frag(96, true)], UDP, b),
                v6(&[Ext::Frag(192, false)], UDP, c),
            ];
            for frags in [v4frags, v6frags] {
                let verdicts: Vec<Verdict> = frags.iter().map(|f| vm.run(&p, f, 0).0).collect();
                assert!(verdicts.iter().all(|v| *v == verdicts[0]), "{claim:?} port {dport}: {verdicts:?}");
            }
        }
    }
}

/// Every prefix of every frame: no read past data_end (the interpreter
/// panics on one), and the verdict is the whole frame's or a pass.
#[test]
fn truncated_frames_pass_without_reading_past_the_end() {
    for (claim, max) in shapes() {
        let p = program(MAPS, &claim, max, None);
        let mut vm = Vm::new(&p, &claim);
        for (name, f, ..) in catalogue() {
            let whole = vm.run(&p, &f, 0).0;
            for len in 0..f.len() {
                let (got, s) = vm.run(&p, &f[..len], 0);
                assert!(got == whole || got == P, "{claim:?} {name} cut to {len}: {got:?}");
                if len < 14 && claim == Claim::Frames {
                    assert_eq!(s, slot::REDIRECTED, "{name} cut to {len}");
                } else if len < 14 {
                    assert_eq!(s, slot::PASSED_NOT_IP, "{name} cut to {len}");
                }
            }
        }
    }
    // The exact edges, for a tagged UDP datagram under the listeners:
    // redirected from the byte that completes the destination port.
    let claim = listeners();
    let p = program(MAPS, &claim, None, None);
    let mut vm = Vm::new(&p, &claim);
    let f = eth(&[0x8100], 0x0800, &ipv4(UDP, 6, 0, &udp(9000, 0)));
    let port_end = 18 + 24 + 4;
    assert_eq!(vm.run(&p, &f[..port_end - 1], 0), (P, slot::PASSED_UNPARSED));
    assert_eq!(vm.run(&p, &f[..port_end], 0), (R, slot::REDIRECTED));
    assert_eq!(vm.run(&p, &f[..18 + 19], 0), (P, slot::PASSED_UNPARSED), "IPv4 header cut");
    assert_eq!(vm.run(&p, &f[..17], 0), (P, slot::PASSED_NOT_IP), "VLAN tag cut");
}

#[test]
fn claimed_frames_longer_than_a_socket_frame_are_dropped_and_counted() {
    for claim in [listeners(), Claim::All] {
        let p = program(MAPS, &claim, Some(200), None);
        let mut vm = Vm::new(&p, &claim);
        let fits = v4(UDP, &udp(9000, 200 - 42));
        assert_eq!(fits.len(), 200);
        assert_eq!(vm.run(&p, &fits, 1), (Verdict::Redirect(1), slot::REDIRECTED));
        let long = v4(UDP, &udp(9000, 201 - 42));
        assert_eq!(vm.run(&p, &long, 1), (Verdict::Drop, slot::DROPPED_TOO_BIG));
        let frag = eth(&[], 0x0800, &ipv4(UDP, 5, MF, &[0u8; 1000]));
        assert_eq!(vm.run(&p, &frag, 1), (Verdict::Drop, slot::DROPPED_TOO_BIG));
        // Long frames the kernel keeps are the kernel's business.
        let arp = eth(&[], 0x0806, &[0u8; 1000]);
        assert_eq!(vm.run(&p, &arp, 1), (P, slot::PASSED_NOT_IP));
        if claim != Claim::All {
            assert_eq!(vm.run(&p, &v4(TCP, &tcp(22)).repeat(10), 1), (P, slot::PASSED_UNCLAIMED));
        }
        assert_eq!(vm.counters[slot::DROPPED_TOO_BIG as usize], 2);
    }
}

#[test]
fn a_claimed_frame_on_a_queue_without_socket_passes_and_is_counted_so() {
    let claim = listeners();
    let p = program(MAPS, &claim, Some(1792), None);
    let mut vm = Vm::new(&p, &claim);
    vm.sockets = vec![1];
    let f = v4(UDP, &udp(9000, 8));
    assert_eq!(vm.run(&p, &f, 1), (Verdict::Redirect(1), slot::REDIRECTED));
    assert_eq!(vm.run(&p, &f, 0), (P, slot::PASSED_NO_SOCKET));
    assert_eq!(vm.run(&p, &f, 7), (P, slot::PASSED_NO_SOCKET));
    let mut reasons = XdpReasons::default();
    let c = vm.counters;
    reasons.redirected = c[slot::REDIRECTED as usize];
    reasons.passed_no_socket = c[slot::PASSED_NO_SOCKET as usize];
    assert_eq!(reasons.totals(), XdpCounters { passed: 2, dropped: 0, redirected: 1, fast_forwarded: 0 });
    assert_eq!(reasons.totals().seen(), 3);
}

/// Branch coverage: over the catalogue, its truncations and the frames
/// above, every instruction of every shape runs and every conditional jump
/// goes both ways, except the null checks after map lookups (an array map
/// never returns null for a key in range; the verifier wants them anyway).
#[test]
fn the_frames_exercise_every_path_of_every_shape() {
    for (claim, max) in shapes() {
        let p = program(MAPS, &claim, max, None);
        let mut vm = Vm::new(&p, &claim);
        vm.sockets = vec![0];
        let mut frames: Vec<Vec<u8>> = catalogue().into_iter().map(|c| c.1).collect();
        frames.push(v4(UDP, &udp(9000, 3000)));
        frames.push(v4(TCP, &tcp(80)).repeat(100));
        // Each unrolled step of the IPv6 walk sees every kind of header.
        for k in 0..=MAX_IPV6_EXT_HEADERS {
            let lead: Vec<Ext> = (0..k).map(|n| Ext::Opts([0, 43, 60][n % 3], (n % 2) as u8)).collect();
            let with = |tail: &[Ext]| [lead.as_slice(), tail].concat();
            frames.push(v6(&lead, UDP, &udp(9000, 8)));
            frames.push(v6(&lead, TCP, &tcp(80)));
            frames.push(v6(&lead, ICMPV6, &[128, 0, 0, 0]));
            frames.push(v6(&with(&[Ext::Frag(8, true)]), UDP, &[0u8; 8]));
            frames.push(v6(&with(&[Ext::Frag(0, false)]), UDP, &udp(9000, 8)));
            for kind in [0, 43, 60] {
                frames.push(v6(&with(&[Ext::Opts(kind, 0)]), UDP, &udp(9000, 8)));
            }
        }
        for f in &frames {
            for len in 0..=f.len() {
                vm.run(&p, &f[..len], 0);
            }
            vm.run(&p, f, 3);
        }
        for (at, i) in p.iter().enumerate() {
            assert!(vm.executed[at], "{claim:?} {max:?}: instruction {at} ({:#x}) never ran", i.code);
            let conditional = matches!(i.code, JGT_X | JEQ_K | JNE_K | JLT_K);
            let null_check = i.code == JEQ_K && at > 0 && p[at - 1].code == CALL;
            if conditional && !null_check {
                assert_eq!(vm.taken[at], [true, true], "{claim:?} {max:?}: jump at {at} went one way only");
            }
        }
    }
}

#[test]
fn claim_words_set_one_bit_per_port() {
    let w = claim_words(&[0, 31, 32, 65535], &[80]);
    assert_eq!(w, vec![(0, 1 | 1 << 31), (1, 1), (2047, 1 << 31), (2048 + 2, 1 << 16)]);
    assert_eq!(claim_words(&[], &[]), vec![]);
}

#[test]
fn claims_describe_themselves() {
    assert_eq!(Claim::All.describe(), "every IPv4/IPv6 packet");
    assert!(Claim::nothing().describe().starts_with("nothing"));
    assert_eq!(listeners().describe(), "udp 9000,53; tcp 80 (their protocols' fragments claimed)");
    assert_eq!(echo_like().describe(), "udp 9000 (fragments passed to the kernel)");
}

/// As root: the kernel's verifier takes every shape of the program and
/// rejects one without its bounds check, with the log in the error.
/// Without the privilege to load XDP programs: the kernel refuses and the
/// error says so (the verifier half needs root, which CI has).
#[test]
fn kernel_verifier_accepts_every_shape_and_its_log_reaches_errors() {
    if !flowsteer_netns::is_root() {
        let err = load(&program(MAPS, &Claim::All, None, None), "test").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotPermitted, "{err}");
        return;
    }
    let xsks = sys::xskmap_create(4, "fs_test").unwrap();
    let counters = sys::percpu_array_u64_create(slot::COUNT, "fs_test_c").unwrap();
    let claims = sys::array_u32_create(CLAIM_ENTRIES, "fs_test_p").unwrap();
    let maps = Maps { xsks: xsks.as_raw_fd(), counters: counters.as_raw_fd(), claims: claims.as_raw_fd() };
    for (claim, max) in shapes() {
        let p = program(maps, &claim, max, None);
        if let Err(e) = load(&p, "test") {
            panic!("{claim:?} {max:?}: {e}");
        }
    }
    // The same program without the bounds check before the ethertype load.
    let mut bad = program(maps, &listeners(), Some(1792), None);
    let jgt = bad.iter().position(|i| i.code == JGT_X).unwrap();
    bad[jgt] = insn(MOV64_X, R4, R4, 0, 0); // no-op instead of the test
    let err = load(&bad, "test").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Verifier);
    let msg = err.to_string();
    assert!(msg.contains("verifier log:") && msg.contains("invalid access to packet"), "{msg}");
    assert!(!msg.contains('\n'));
}
