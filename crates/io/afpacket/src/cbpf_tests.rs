//! Offline tests of the cBPF compiler: a small classic BPF interpreter (with
//! the kernel's semantics: a load past the packet ends the program with 0)
//! and a checker with the rules of the kernel's `bpf_check_classic`, run
//! against `RssConfig::place` on many generated packets.

use super::*;
use flowsteer_rss::reta::Reta;
use flowsteer_rss::{Fields, RssKey};
use flowsteer_wire::build::{self, FrameBuilder, Ipv6Ext, VlanTag};
use flowsteer_wire::{parse_frame, proto, LinkType, ParseError, ParseOptions};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

// ---------------------------------------------------------------- interpreter

/// Runs `prog` on `pkt` (the bytes the program sees) with `skb->protocol`
/// = `protocol`. Panics on opcodes the kernel would reject (the checker
/// runs first in every test).
fn run(prog: &[SockFilter], pkt: &[u8], protocol: u16) -> u32 {
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; 16];
    let mut pc = 0usize;
    let load = |off: u32, size: usize| -> Option<u32> {
        let off = off as usize;
        let b = pkt.get(off..off.checked_add(size)?)?;
        Some(b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x)))
    };
    loop {
        let i = prog[pc];
        pc += 1;
        let class = i.code & 0x07;
        let size = match i.code & 0x18 {
            op::W => 4,
            op::H => 2,
            _ => 1,
        };
        match class {
            op::LD => {
                a = match i.code & 0xe0 {
                    op::IMM => i.k,
                    op::MEM => mem[i.k as usize],
                    op::LEN => pkt.len() as u32,
                    op::ABS if i.k >= op::SKF_AD_OFF => {
                        assert_eq!(i.k, op::SKF_AD_OFF + op::SKF_AD_PROTOCOL, "unsupported ancillary load");
                        u32::from(protocol)
                    }
                    op::ABS => match load(i.k, size) {
                        Some(v) => v,
                        None => return 0,
                    },
                    op::IND => match load(x.wrapping_add(i.k), size) {
                        Some(v) => v,
                        None => return 0,
                    },
                    m => panic!("bad ld mode {m:#x}"),
                }
            }
            op::LDX => {
                x = match i.code & 0xe0 {
                    op::IMM => i.k,
                    op::MEM => mem[i.k as usize],
                    op::LEN => pkt.len() as u32,
                    op::MSH => match load(i.k, 1) {
                        Some(v) => 4 * (v & 0xf),
                        None => return 0,
                    },
                    m => panic!("bad ldx mode {m:#x}"),
                }
            }
            op::ST => mem[i.k as usize] = a,
            op::STX => mem[i.k as usize] = x,
            op::ALU => {
                let src = if i.code & op::X != 0 { x } else { i.k };
                a = match i.code & 0xf0 {
                    op::ADD => a.wrapping_add(src),
                    op::SUB => a.wrapping_sub(src),
                    op::MUL => a.wrapping_mul(src),
                    op::DIV | op::MOD if src == 0 => return 0,
                    op::DIV => a / src,
                    op::MOD => a % src,
                    op::OR => a | src,
                    op::AND => a & src,
                    op::XOR => a ^ src,
                    op::LSH => a.wrapping_shl(src),
                    op::RSH => a.wrapping_shr(src),
                    op::NEG => a.wrapping_neg(),
                    o => panic!("bad alu op {o:#x}"),
                }
            }
            op::JMP => {
                let src = if i.code & op::X != 0 { x } else { i.k };
                let taken = match i.code & 0xf0 {
                    op::JA => {
                        pc += i.k as usize;
                        continue;
                    }
                    op::JEQ => a == src,
                    op::JGT => a > src,
                    op::JGE => a >= src,
                    op::JSET => a & src != 0,
                    o => panic!("bad jmp op {o:#x}"),
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            op::RET => return if i.code & 0x18 == op::A { a } else { i.k },
            op::MISC => {
                if i.code & 0xf8 == op::TXA {
                    a = x
                } else {
                    x = a
                }
            }
            _ => unreachable!(),
        }
    }
}

/// The rules of the kernel's `bpf_check_classic` + `check_load_and_stores`
/// that our programs could break.
fn check(prog: &[SockFilter]) -> Result<(), String> {
    let n = prog.len();
    if n == 0 || n > MAX_INSNS {
        return Err(format!("length {n}"));
    }
    let allowed: &[u16] = &[
        0x00, 0x20, 0x28, 0x30, 0x40, 0x48, 0x50, 0x60, 0x80, // ld
        0x01, 0x61, 0x81, 0xb1, // ldx
        0x02, 0x03, // st, stx
        0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3c, 0x44, 0x4c, 0x54, 0x5c, 0x64, 0x6c, 0x74, 0x7c, 0x84, 0x94,
        0x9c, 0xa4, 0xac, // alu
        0x05, 0x15, 0x1d, 0x25, 0x2d, 0x35, 0x3d, 0x45, 0x4d, // jmp
        0x06, 0x16, 0x07, 0x87, // ret, misc
    ];
    for (pc, i) in prog.iter().enumerate() {
        if !allowed.contains(&i.code) {
            return Err(format!("{pc}: opcode {:#x}", i.code));
        }
        match i.code {
            0x60 | 0x61 | 0x02 | 0x03 if i.k >= op::MEMWORDS => return Err(format!("{pc}: M[{}]", i.k)),
            0x34 | 0x94 if i.k == 0 => return Err(format!("{pc}: division by 0")),
            0x05 if i.k as usize >= n - pc - 1 => return Err(format!("{pc}: ja out of range")),
            c if c & 0x07 == op::JMP
                && c != 0x05
                && (pc + usize::from(i.jt) + 1 >= n || pc + usize::from(i.jf) + 1 >= n) =>
            {
                return Err(format!("{pc}: jump out of range"))
            }
            _ => {}
        }
    }
    if prog[n - 1].code & 0x07 != op::RET {
        return Err("last instruction is not ret".into());
    }
    let mut masks = vec![u16::MAX; n];
    let mut valid = u16::MAX;
    for (pc, i) in prog.iter().enumerate() {
        valid &= masks[pc];
        match i.code {
            0x02 | 0x03 => valid |= 1 << i.k,
            0x60 | 0x61 if valid & (1 << i.k) == 0 => return Err(format!("{pc}: M[{}] read before written", i.k)),
            0x05 => {
                masks[pc + 1 + i.k as usize] &= valid;
                valid = u16::MAX;
            }
            c if c & 0x07 == op::JMP => {
                masks[pc + 1 + usize::from(i.jt)] &= valid;
                masks[pc + 1 + usize::from(i.jf)] &= valid;
                valid = u16::MAX;
            }
            _ => {}
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- packets

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// `min + below(span)` random bytes.
    fn some_bytes(&mut self, min: usize, span: u64) -> Vec<u8> {
        let n = min + self.below(span) as usize;
        self.bytes(n)
    }
    fn v4(&mut self) -> Ipv4Addr {
        Ipv4Addr::from(self.next() as u32)
    }
    fn v6(&mut self) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.next()) << 64 | u128::from(self.next()))
    }
    fn port(&mut self) -> u16 {
        self.next() as u16
    }
}

/// How a frame reaches the fanout program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tagging {
    None,
    /// One 802.1Q tag: the kernel moves it to metadata.
    Single,
    /// QinQ: the kernel strips only the outer tag.
    Double,
}

/// What the fanout program sees: `skb->protocol` and the bytes from L3.
fn kernel_view(frame: &[u8], tagging: Tagging) -> (u16, &[u8]) {
    let at = match tagging {
        Tagging::None => 12,
        Tagging::Single | Tagging::Double => 16,
    };
    let proto = u16::from_be_bytes([frame[at], frame[at + 1]]);
    (proto, &frame[at + 2..])
}

fn set16(f: &mut [u8], at: usize, v: u16) {
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn ipv6_chain(rng: &mut Rng, count: usize) -> Vec<Ipv6Ext> {
    let mut chain = Vec::new();
    let mut have_frag = false;
    for i in 0..count {
        let len = 8 * (1 + rng.below(6) as usize);
        let ext = match rng.below(5) {
            0 if i == 0 => Ipv6Ext::HopByHop { len },
            1 => Ipv6Ext::Routing { len },
            2 => Ipv6Ext::Auth { len: 12 + 4 * rng.below(6) as usize },
            3 if !have_frag => {
                have_frag = true;
                let (offset, more) = match rng.below(3) {
                    0 => (0, false),
                    1 => (0, true),
                    _ => (8 * (1 + rng.below(100) as u16), rng.chance(50)),
                };
                Ipv6Ext::Fragment { offset, more, id: rng.next() as u32 }
            }
            _ => Ipv6Ext::DestOpts { len },
        };
        chain.push(ext);
    }
    chain
}

/// One random Ethernet frame and how it is tagged.
fn random_frame(rng: &mut Rng) -> (Vec<u8>, Tagging) {
    let payload = rng.some_bytes(0, 48);
    let (sp, dp) = (rng.port(), rng.port());
    let l4 = rng.below(10);
    let mut frame = match rng.below(14) {
        // IPv4 TCP / UDP / other, with options sometimes.
        0..=3 => {
            let (s, d) = (IpAddr::V4(rng.v4()), IpAddr::V4(rng.v4()));
            let n_opts = if rng.chance(25) { 4 * rng.below(11) as usize } else { 0 };
            let opts = rng.bytes(n_opts);
            let b = match l4 {
                0..=3 => FrameBuilder::udp(s, d, sp, dp, &payload),
                4..=7 => FrameBuilder::tcp(s, d, sp, dp, rng.next() as u32, 0x10, &payload),
                _ => FrameBuilder::raw(s, d, [proto::ICMP, proto::GRE, proto::SCTP, 50][l4 as usize % 4], &payload),
            };
            let mut f = FrameBuilder { ipv4_options: &opts, ..b }.build();
            if rng.chance(15) {
                // A first fragment (MF set, offset 0), sometimes with the
                // L4 header cut by the IP total length.
                let ihl = usize::from(f[14] & 0x0f) * 4;
                f[20] |= 0x20;
                if rng.chance(50) {
                    let keep = ihl + rng.below(24) as usize;
                    if keep + 14 < f.len() {
                        f.truncate(14 + keep);
                        set16(&mut f, 16, keep as u16);
                    }
                }
            } else if rng.chance(10) {
                // A later fragment.
                f[20] |= (rng.below(0x1f) + 1) as u8;
            }
            f
        }
        // IPv4 fragments of a UDP datagram.
        4 => {
            let big = rng.some_bytes(100, 500);
            let frags =
                build::ipv4_fragments(rng.v4(), rng.v4(), sp, dp, rng.next() as u16, &big, 8 + rng.below(300) as usize);
            frags[rng.below(frags.len() as u64) as usize].clone()
        }
        // IPv6 with extension chains (9 headers: longer than the parser follows).
        5..=8 => {
            let (s, d) = (IpAddr::V6(rng.v6()), IpAddr::V6(rng.v6()));
            let count = match rng.below(10) {
                0..=3 => 0,
                9 => 9,
                n => n as usize - 3,
            };
            let chain = ipv6_chain(rng, count);
            let b = match l4 {
                0..=3 => FrameBuilder::udp(s, d, sp, dp, &payload),
                4..=7 => FrameBuilder::tcp(s, d, sp, dp, rng.next() as u32, 0x02, &payload),
                _ => FrameBuilder::raw(s, d, [proto::ICMPV6, 59, proto::SCTP, 50][l4 as usize % 4], &payload),
            };
            let mut f = FrameBuilder { ipv6_ext: &chain, ..b }.build();
            if rng.chance(20) {
                // Cut the payload length into the L4 header.
                let chain_len: usize = f.len()
                    - 54
                    - payload.len()
                    - if l4 < 4 {
                        8
                    } else if l4 < 8 {
                        20
                    } else {
                        0
                    };
                let keep = chain_len + rng.below(24) as usize;
                if 54 + keep < f.len() {
                    f.truncate(54 + keep);
                    set16(&mut f, 18, keep as u16);
                }
            }
            f
        }
        // IPv6 fragments of a UDP datagram.
        9 => {
            let big = rng.some_bytes(100, 500);
            let frags =
                build::ipv6_fragments(rng.v6(), rng.v6(), sp, dp, rng.next() as u32, &big, 8 + rng.below(300) as usize);
            frags[rng.below(frags.len() as u64) as usize].clone()
        }
        // Not IP: ARP and friends.
        10 => {
            let mut f = build::udp_frame(IpAddr::V4(rng.v4()), IpAddr::V4(rng.v4()), sp, dp, &payload);
            set16(&mut f, 12, [0x0806, 0x88cc, 0x8847][rng.below(3) as usize]);
            f
        }
        // Garbage behind an IP ethertype.
        11 => {
            let mut f = vec![0u8; 14];
            f.extend(rng.some_bytes(0, 80));
            set16(&mut f, 12, if rng.chance(50) { 0x0800 } else { 0x86dd });
            f
        }
        // Plain flows on the lab's kind of addresses.
        _ => {
            if rng.chance(50) {
                build::udp_frame(IpAddr::V4(rng.v4()), IpAddr::V4(rng.v4()), sp, dp, &payload)
            } else {
                build::tcp_frame(IpAddr::V6(rng.v6()), IpAddr::V6(rng.v6()), sp, dp, 1, 0x02, &payload)
            }
        }
    };
    if rng.chance(20) {
        // Ethernet padding behind the IP packet.
        frame.extend(rng.some_bytes(1, 30));
    }
    if rng.chance(4) && frame.len() > 15 {
        // Cut anywhere (snap length, broken sender).
        let keep = 14 + rng.below(frame.len() as u64 - 14) as usize;
        frame.truncate(keep);
    }
    let tagging = match rng.below(100) {
        0..=9 => Tagging::Single,
        10..=12 => Tagging::Double,
        _ => Tagging::None,
    };
    let frame = match tagging {
        Tagging::None => frame,
        Tagging::Single => build::with_vlans(&frame, &[VlanTag::dot1q(rng.below(4095) as u16 + 1)]),
        Tagging::Double => build::with_vlans(&frame, &[VlanTag::dot1ad(7), VlanTag::dot1q(9)]),
    };
    (frame, tagging)
}

/// What the program must return for a frame, per the module docs.
#[derive(Debug, PartialEq, Eq)]
enum Want {
    /// Software RSS places the frame; the program must agree.
    Exactly(u32),
    /// The parser rejects the frame: no software placement to match, only
    /// a queue in range.
    Unplaced,
}

fn want(config: &RssConfig, frame: &[u8], tagging: Tagging, hash: bool) -> Want {
    let pick = |p: flowsteer_rss::Placement| if hash { p.hash } else { u32::from(p.queue.0) };
    let unhashed = pick(config.place_hash(0, Fields::None));
    if tagging == Tagging::Double {
        return Want::Exactly(unhashed);
    }
    match parse_frame(frame, LinkType::Ethernet, &ParseOptions::default()) {
        Ok(p) => match p.outer {
            Some(l3) => Want::Exactly(pick(config.place(&l3.tuple, l3.frag.is_some()))),
            None => Want::Exactly(unhashed),
        },
        Err(ParseError::ExtChainTooLong) => Want::Exactly(unhashed),
        Err(_) => Want::Unplaced,
    }
}

/// Runs `config`'s program over `count` random frames; returns how many
/// were compared exactly.
fn compare(config: &RssConfig, out: Output, seed: u64, count: usize) -> usize {
    let prog = compile(config, out).unwrap();
    check(&prog).unwrap();
    let mut rng = Rng(seed);
    let mut exact = 0;
    for n in 0..count {
        let (frame, tagging) = random_frame(&mut rng);
        let (protocol, l3) = kernel_view(&frame, tagging);
        let got = run(&prog, l3, protocol);
        match want(config, &frame, tagging, out == Output::Hash) {
            Want::Exactly(w) => {
                exact += 1;
                assert_eq!(got, w, "frame {n} {tagging:?} {:02x?} types {:?}", frame, config.types);
            }
            Want::Unplaced => {}
        }
        if out == Output::Queue {
            assert!((got as usize) < config.queue_count().max(1), "frame {n}: queue {got} out of range");
        }
    }
    exact
}

fn keys() -> Vec<RssKey> {
    let mut rng = Rng(0x5eed);
    vec![
        RssKey::microsoft(),
        RssKey::symmetric(40).unwrap(),
        RssKey::symmetric(52).unwrap(),
        RssKey::random(52).unwrap(),
        RssKey::from_bytes(&rng.bytes(40)).unwrap(),
        RssKey::from_bytes(&rng.bytes(256)).unwrap(),
    ]
}

fn types() -> Vec<HashTypes> {
    let mut list: Vec<HashTypes> = ["default", "all", "l3", "tcp4,udp6", "udp4,ipv6", "tcp6"]
        .iter()
        .map(|t| HashTypes::parse(t).unwrap())
        .collect();
    for t in ["all", "default", "tcp4,udp6"] {
        let mut loose = HashTypes::parse(t).unwrap();
        loose.fragments_on_2tuple = false;
        list.push(loose);
    }
    list
}

// ---------------------------------------------------------------- tests

#[test]
fn microsoft_verification_vectors() {
    // 66.9.149.187:2794 -> 161.142.100.80:1766 (Microsoft RSS spec).
    let cfg = RssConfig::default_for_queues(4).unwrap();
    let prog = compile(&cfg, Output::Hash).unwrap();
    check(&prog).unwrap();
    let (s, d) = ("66.9.149.187".parse().unwrap(), "161.142.100.80".parse().unwrap());
    let f = build::tcp_frame(s, d, 2794, 1766, 1, 0x02, b"");
    assert_eq!(run(&prog, &f[14..], 0x0800), 0x51ccc178);
    let f = build::udp_frame(s, d, 2794, 1766, b"");
    assert_eq!(run(&prog, &f[14..], 0x0800), 0x323e8fc2, "UDP on the 2-tuple by default");
    // IPv6 vector: 3ffe:2501:200:1fff::7 -> 3ffe:2501:200:3::1, 2794 -> 1766.
    let (s, d) = ("3ffe:2501:200:1fff::7".parse().unwrap(), "3ffe:2501:200:3::1".parse().unwrap());
    let f = build::tcp_frame(s, d, 2794, 1766, 1, 0x02, b"");
    assert_eq!(run(&prog, &f[14..], 0x86dd), 0x40207d3d);
    // Queue: hash 0x51ccc178 -> RETA entry 120 -> queue 0 of 4.
    let prog = toeplitz_cbpf(&cfg).unwrap();
    let f = build::tcp_frame("66.9.149.187".parse().unwrap(), "161.142.100.80".parse().unwrap(), 2794, 1766, 1, 2, b"");
    assert_eq!(run(&prog, &f[14..], 0x0800), 0);
}

#[test]
fn hash_matches_software_rss_for_every_key_and_hash_type() {
    let mut exact = 0;
    for (k, key) in keys().into_iter().enumerate() {
        for (t, ty) in types().into_iter().enumerate() {
            let cfg = RssConfig::new(key.clone(), ty, Reta::round_robin(128, 4).unwrap());
            exact += compare(&cfg, Output::Hash, 1 + (k * 100 + t) as u64, 700);
        }
    }
    // Most frames parse; the comparison is not vacuous.
    assert!(exact > 6 * 9 * 700 * 8 / 10, "{exact}");
}

#[test]
fn queue_matches_place_for_retas_queue_counts_and_rps() {
    let mut rng = Rng(77);
    let all = HashTypes::parse("all").unwrap();
    let mut loose = all;
    loose.fragments_on_2tuple = false;
    let mut configs = Vec::new();
    for q in 1..=8 {
        configs.push(RssConfig::new(RssKey::microsoft(), all, Reta::round_robin(128, q).unwrap()));
    }
    configs.push(RssConfig::new(RssKey::microsoft(), loose, Reta::round_robin(64, 3).unwrap()));
    configs.push(RssConfig::new(RssKey::random(40).unwrap(), all, Reta::round_robin(512, 6).unwrap()));
    configs.push(RssConfig::new(RssKey::microsoft(), HashTypes::default(), Reta::round_robin(16, 16).unwrap()));
    let random: Vec<u32> = (0..128).map(|_| rng.below(4) as u32).collect();
    configs.push(RssConfig::new(RssKey::microsoft(), all, Reta::from_entries(&random).unwrap()));
    let random: Vec<u32> = (0..256).map(|_| rng.below(3) as u32).collect();
    configs.push(RssConfig::new(RssKey::symmetric(52).unwrap(), loose, Reta::from_entries(&random).unwrap()));
    let blocks: Vec<u32> = (0..1024).map(|i| (i / 128) as u32).collect();
    configs.push(RssConfig::new(RssKey::microsoft(), all, Reta::from_entries(&blocks).unwrap()));
    let one_queue: Vec<u32> = vec![2; 64];
    configs.push(RssConfig::new(RssKey::microsoft(), all, Reta::from_entries(&one_queue).unwrap()));
    for q in [1, 2, 3, 4, 7, 16] {
        let cfg = RssConfig::new(RssKey::microsoft(), all, Reta::round_robin(128, q).unwrap());
        configs.push(cfg.with_mapping(Mapping::RpsScale));
    }
    for (i, cfg) in configs.iter().enumerate() {
        let exact = compare(cfg, Output::Queue, 1000 + i as u64, 1500);
        assert!(exact > 1200, "{exact}");
    }
}

#[test]
fn documented_differences() {
    let cfg = RssConfig::new(
        RssKey::microsoft(),
        HashTypes::parse("all").unwrap(),
        Reta::from_entries(&[3, 1, 2, 0]).unwrap(),
    );
    let prog = toeplitz_cbpf(&cfg).unwrap();
    check(&prog).unwrap();
    let unhashed = 3; // RETA entry 0
    let (s, d) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    let f = build::udp_frame(s, d, 1000, 2000, b"x");
    // Non-IP: unhashed.
    assert_eq!(run(&prog, &f[14..], 0x0806), unhashed);
    // QinQ: the inner tag is still in front of the IP header.
    let qinq = build::with_vlans(&f, &[VlanTag::dot1ad(7), VlanTag::dot1q(9)]);
    assert_eq!(run(&prog, &qinq[18..], 0x8100), unhashed);
    // A header cut by the frame: a failed load, member 0.
    assert_eq!(run(&prog, &f[14..14 + 15], 0x0800), 0);
    assert_eq!(run(&prog, &[], 0x86dd), 0);
    // Nine IPv6 extension headers: unhashed (the parser rejects the chain).
    let (s6, d6) = (IpAddr::V6("fd00::1".parse().unwrap()), IpAddr::V6("fd00::2".parse().unwrap()));
    let chain = [Ipv6Ext::DestOpts { len: 8 }; 9];
    let f6 = FrameBuilder { ipv6_ext: &chain, ..FrameBuilder::udp(s6, d6, 1, 2, b"") }.build();
    assert_eq!(parse_frame(&f6, LinkType::Ethernet, &ParseOptions::default()), Err(ParseError::ExtChainTooLong));
    assert_eq!(run(&prog, &f6[14..], 0x86dd), unhashed);
    // Eight are followed, and the ports behind them hashed.
    let f8 = FrameBuilder { ipv6_ext: &chain[..8], ..FrameBuilder::udp(s6, d6, 1, 2, b"") }.build();
    let l3 = parse_frame(&f8, LinkType::Ethernet, &ParseOptions::default()).unwrap().outer.unwrap();
    assert_eq!(l3.tuple.ports, Some((1, 2)));
    assert_eq!(run(&prog, &f8[14..], 0x86dd), u32::from(cfg.place(&l3.tuple, false).queue.0));
}

#[test]
fn program_sizes_and_limits() {
    let all = HashTypes::parse("all").unwrap();
    let cfg = RssConfig::new(RssKey::microsoft(), all, Reta::round_robin(128, 4).unwrap());
    let full = toeplitz_cbpf(&cfg).unwrap();
    assert!(full.len() < 2600, "{}", full.len());
    let v4_only = RssConfig::new(RssKey::microsoft(), HashTypes::parse("tcp4,udp4").unwrap(), cfg.reta.clone());
    assert!(toeplitz_cbpf(&v4_only).unwrap().len() < 600);
    // A big RETA with many runs does not fit: a clear error.
    let mut rng = Rng(5);
    let entries: Vec<u32> = (0..4096).map(|_| rng.below(8) as u32).collect();
    let big = RssConfig::new(RssKey::microsoft(), all, Reta::from_entries(&entries).unwrap());
    let e = toeplitz_cbpf(&big).unwrap_err();
    assert!(e.to_string().contains("more than the kernel's 4096"), "{e}");
    // The same table round-robin does.
    let rr = RssConfig::new(RssKey::microsoft(), all, Reta::round_robin(65536, 8).unwrap());
    check(&toeplitz_cbpf(&rr).unwrap()).unwrap();
    // A 512-entry random RETA still fits (jump tree with long branches).
    let entries: Vec<u32> = (0..512).map(|_| rng.below(5) as u32).collect();
    let mid = RssConfig::new(RssKey::microsoft(), all, Reta::from_entries(&entries).unwrap());
    let prog = toeplitz_cbpf(&mid).unwrap();
    check(&prog).unwrap();
    compare(&mid, Output::Queue, 9, 300);
}

#[test]
fn udp_port_filter_accepts_only_that_port() {
    let prog = udp_dst_port_filter(9000);
    check(&prog).unwrap();
    let (s, d) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    let (s6, d6) = (IpAddr::V6("fd00::1".parse().unwrap()), IpAddr::V6("fd00::2".parse().unwrap()));
    let opts = [0u8; 8];
    let accept = |f: &[u8]| run(&prog, f, 0) != 0;
    assert!(accept(&build::udp_frame(s, d, 1, 9000, b"x")));
    assert!(accept(&FrameBuilder { ipv4_options: &opts, ..FrameBuilder::udp(s, d, 1, 9000, b"") }.build()));
    assert!(accept(&build::udp_frame(s6, d6, 1, 9000, b"x")));
    assert!(!accept(&build::udp_frame(s, d, 9000, 9001, b"x")));
    assert!(!accept(&build::udp_frame(s6, d6, 9000, 1, b"x")));
    assert!(!accept(&build::tcp_frame(s, d, 1, 9000, 0, 2, b"")));
    assert!(!accept(&build::tcp_frame(s6, d6, 1, 9000, 0, 2, b"")));
    let frags = build::ipv4_fragments(Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2), 1, 9000, 7, &[0; 64], 32);
    assert!(accept(&frags[0]) && !accept(&frags[1]));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The program's hash equals the bit-by-bit Toeplitz definition for any
    /// key and any TCP 4-tuple.
    #[test]
    fn hash_equals_reference(key in proptest::collection::vec(any::<u8>(), 40..=64), v6 in any::<bool>(),
                             s in any::<u128>(), d in any::<u128>(), sp in any::<u16>(), dp in any::<u16>()) {
        let cfg = RssConfig::new(RssKey::from_bytes(&key).unwrap(), HashTypes::parse("all").unwrap(),
                                 Reta::round_robin(128, 4).unwrap());
        let prog = compile(&cfg, Output::Hash).unwrap();
        let (src, dst) = if v6 {
            (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d)))
        } else {
            (IpAddr::V4(Ipv4Addr::from(s as u32)), IpAddr::V4(Ipv4Addr::from(d as u32)))
        };
        let f = build::tcp_frame(src, dst, sp, dp, 0, 0x10, b"");
        let mut input = match (src, dst) {
            (IpAddr::V4(a), IpAddr::V4(b)) => [a.octets(), b.octets()].concat(),
            (IpAddr::V6(a), IpAddr::V6(b)) => [a.octets(), b.octets()].concat(),
            _ => unreachable!(),
        };
        input.extend(sp.to_be_bytes());
        input.extend(dp.to_be_bytes());
        let protocol = if v6 { 0x86dd } else { 0x0800 };
        prop_assert_eq!(run(&prog, &f[14..], protocol), flowsteer_rss::reference(&key, &input));
    }
}
