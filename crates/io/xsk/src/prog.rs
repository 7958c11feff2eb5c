//! The XDP program that feeds the XSKs, assembled by hand (no clang, no
//! libbpf), and its attachment to an interface.
//!
//! What is claimed, and why so: see [`Claim`].
//!
//! With [`AttachConfig::fast_path`] the program first tries the bridge's
//! kernel fast path for learned unicast ([`crate::fastpath`]): a frame it
//! forwards itself never reaches the claim logic; every other frame takes
//! the slow path, which is the claim logic below, unchanged.
//!
//! # Counters
//!
//! Every frame the program sees is counted once, per CPU, in a per-CPU
//! array map, by outcome and reason ([`XdpReasons`]); summed over CPUs,
//! seen = passed + dropped + redirected + fast_forwarded ([`XdpCounters`]).
//! With a fast path, a frame that takes the slow path is also counted once
//! under the reason it was not forwarded in the kernel (`slow_*`), so
//! the slow reasons add up to passed + dropped + redirected; and a
//! forwarded frame whose partial checksum the fast path completed is also
//! counted `fast_csum_completed`, a part of `fast_forwarded`.
//!
//! Every packet access is preceded by a `ptr + n > data_end` test, as the
//! verifier demands.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::asm::*;
use crate::error::{Error, ErrorKind};
use crate::fastpath::{self, FastPathAttach, FastPathRefs};
use crate::sys::{self, Insn};
use crate::xdp::*;

/// How the program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum XdpMode {
    /// Native (driver) mode, falling back to generic (skb) mode when the
    /// driver refuses. The default.
    #[default]
    Auto,
    /// Native XDP in the driver (XDP_FLAGS_DRV_MODE): fastest; veth has it
    /// (up to an MTU of about 3,500 bytes: veth refuses native XDP above).
    Native,
    /// Generic XDP on the skb (XDP_FLAGS_SKB_MODE): works on any interface.
    Skb,
}

/// The claim policy: what the program takes, what the kernel keeps.
///
/// The program hands the sockets only the traffic a `Claim` names and
/// passes everything else to the kernel (`XDP_PASS`), so
/// ping, neighbour resolution and TCP sessions such as SSH keep working on
/// an interface whose queues are served by AF_XDP sockets.
///
/// * Non-IP frames (ARP, LLDP, ...) and frames under more than two VLAN
///   tags always pass.
/// * [`Claim::All`]: every IPv4 and IPv6 packet (bare or under one or two
///   VLAN tags, 802.1Q or 802.1ad outside) is claimed. The kernel then sees
///   no IP on that interface at all: no ping, no TCP (SSH), no ICMPv6
///   neighbour discovery.
/// * [`Claim::Ports`]: a UDP or TCP packet is claimed when its destination
///   port is in its protocol's set (a bit set in a BPF array map). All
///   else passes: ICMP and ICMPv6, UDP and TCP to other ports, every other
///   protocol, IPsec (AH, ESP).
/// * Fragments: a non-first fragment carries no ports, so a fragment is
///   judged only on what every fragment of its datagram carries: its
///   protocol (IPv4) or its Fragment header's next header (IPv6). With
///   [`Fragments::Claim`] every fragment of a protocol that has a claimed
///   port is claimed, whatever the datagram's ports; with
///   [`Fragments::Pass`] every fragment passes. Either way one datagram is
///   never split between the kernel and the sockets. The price of
///   `Fragments::Claim`: fragmented datagrams of that protocol to other
///   ports reach the sockets too (the engine reassembles and drops them as
///   `no_listener`). IPv6 atomic fragments (offset 0, M clear) are whole
///   datagrams and go by their ports.
/// * IPv4 options: the header length comes from IHL; IHL < 5 passes.
/// * IPv6 extension headers: Hop-by-Hop (0), Routing (43) and Destination
///   Options (60) are walked, the Fragment header (44) follows the fragment
///   rule, at most [`MAX_IPV6_EXT_HEADERS`] of them (the wire parser's
///   bound); a longer chain passes, and so does any other next header.
/// * A frame too short for the headers the program must read passes.
/// * A claimed frame longer than [`AttachConfig::max_frame_len`] (the room
///   of an AF_XDP frame) is dropped, `XDP_DROP`, and counted: the socket
///   could not take it, and passing it would split a flow between two
///   stacks.
/// * A claimed frame goes to `bpf_redirect_map(xskmap, rx_queue_index,
///   XDP_PASS)`: to the socket registered for its rx queue, or to the
///   kernel when that queue has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Every IPv4 and IPv6 packet: the kernel keeps only non-IP frames (ARP).
    /// Ping, TCP sessions such as SSH, ICMPv6 neighbour discovery and every
    /// other IP protocol the kernel would have handled on the interface are
    /// cut off.
    All,
    /// Every frame, IP or not (ARP, LLDP, tagged frames of any ethertype):
    /// the kernel sees nothing on that interface. For a bridge port, whose
    /// sockets forward every frame.
    Frames,
    /// UDP and TCP packets to these destination ports, and fragments as
    /// `fragments` says.
    Ports {
        /// Claimed UDP destination ports.
        udp: Vec<u16>,
        /// Claimed TCP destination ports.
        tcp: Vec<u16>,
        /// What happens to fragments of a protocol with a claimed port.
        fragments: Fragments,
    },
}

impl Claim {
    /// Claims nothing: every frame passes to the kernel.
    pub fn nothing() -> Claim {
        Claim::Ports { udp: Vec::new(), tcp: Vec::new(), fragments: Fragments::Claim }
    }

    /// UDP to `ports`, fragmented UDP datagrams included.
    pub fn udp(ports: &[u16]) -> Claim {
        Claim::Ports { udp: ports.to_vec(), tcp: Vec::new(), fragments: Fragments::Claim }
    }

    /// One line that says what is claimed, for logs and start-up banners.
    pub fn describe(&self) -> String {
        match self {
            Claim::All => "every IPv4/IPv6 packet".to_string(),
            Claim::Frames => "every frame (IP or not)".to_string(),
            Claim::Ports { udp, tcp, fragments } => {
                let list = |name: &str, ports: &[u16]| {
                    let p: Vec<String> = ports.iter().map(u16::to_string).collect();
                    (!ports.is_empty()).then(|| format!("{name} {}", p.join(",")))
                };
                let parts: Vec<String> = [list("udp", udp), list("tcp", tcp)].into_iter().flatten().collect();
                if parts.is_empty() {
                    return "nothing (every frame passes to the kernel)".to_string();
                }
                let frags = match fragments {
                    Fragments::Claim => "their protocols' fragments claimed",
                    Fragments::Pass => "fragments passed to the kernel",
                };
                format!("{} ({frags})", parts.join("; "))
            }
        }
    }
}

/// The fragment rule of [`Claim::Ports`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Fragments {
    /// Every IPv4 or IPv6 fragment of a protocol (UDP, TCP) with at least
    /// one claimed port is claimed, first or not, whatever its ports: for a
    /// dataplane that reassembles. The default.
    #[default]
    Claim,
    /// Every fragment passes to the kernel: for a dataplane that does not
    /// reassemble.
    Pass,
}

/// The IPv6 extension headers the program walks before it passes a packet
/// as unparsed (the wire parser's bound, `flowsteer_wire` `MAX_IPV6_EXT_HEADERS`).
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// IP protocol numbers / IPv6 next headers.
const IPPROTO_HOPOPTS: i32 = 0;
const IPPROTO_TCP: i32 = 6;
const IPPROTO_UDP: i32 = 17;
const IPPROTO_ROUTING: i32 = 43;
const IPPROTO_FRAGMENT: i32 = 44;
const IPPROTO_DSTOPTS: i32 = 60;

/// The claim bit set: entry `slot * 2048 + port / 32`, bit `port % 32`;
/// slot 0 UDP, 1 TCP. 4,096 u32 entries (32 KiB of kernel memory, values
/// rounded up to 8 bytes).
const CLAIM_WORDS_PER_PROTO: u32 = 2048;
pub(crate) const CLAIM_ENTRIES: u32 = 2 * CLAIM_WORDS_PER_PROTO;

/// The license string: GPL-compatible (the helpers used are not GPL-only,
/// but a GPL-compatible license keeps every helper available).
const LICENSE: &str = "Dual MIT/GPL";
/// Program and map names as bpftool / `ip link` show them.
const PROG_NAME: &str = "flowsteer_xsk";
const MAP_NAME: &str = "flowsteer_xsks";
const CLAIM_MAP_NAME: &str = "flowsteer_claim";
const COUNTER_MAP_NAME: &str = "flowsteer_count";

/// Size of the buffer that receives the verifier log when a load fails.
const VERIFIER_LOG_BYTES: usize = 64 * 1024;

/// Stack slot (offset from r10) of the claim word key (u32), above the
/// counter key ([`crate::xdp::STACK_COUNTER_KEY`]).
const STACK_CLAIM_KEY: i16 = -4;

/// Ethertypes as the program sees them: a u16 load from the packet in host
/// byte order.
const fn wire16(v: u16) -> i32 {
    u16::from_ne_bytes(v.to_be_bytes()) as i32
}
const ET_IPV4: i32 = wire16(0x0800);
const ET_IPV6: i32 = wire16(0x86dd);
const ET_VLAN: i32 = wire16(0x8100);
const ET_QINQ: i32 = wire16(0x88a8);
/// IPv4 flags + fragment offset: MF and the offset (a fragment when non-zero).
const IPV4_MF_OFFSET: i32 = wire16(0x3fff);
/// IPv6 Fragment header offset + M flag (non-zero: not an atomic fragment).
const IPV6_OFFSET_M: i32 = wire16(0xfff9);

/// The maps the program refers to (their fds, patched into ld_imm64).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Maps {
    pub xsks: i32,
    pub counters: i32,
    /// The claim bit set (unused under [`Claim::All`]).
    pub claims: i32,
}

impl Maps {
    /// The name of the map behind `fd`, for listings.
    fn name(&self, fd: i32) -> Option<String> {
        let name = match fd {
            f if f == self.xsks => MAP_NAME,
            f if f == self.counters => COUNTER_MAP_NAME,
            f if f == self.claims => CLAIM_MAP_NAME,
            _ => return None,
        };
        Some(name.to_string())
    }
}

/// The program for `claim`, dropping claimed frames longer than
/// `max_frame_len` (no limit when None), behind the fast path when there is one.
pub(crate) fn program(maps: Maps, claim: &Claim, max_frame_len: Option<u32>, fast: Option<FastPathRefs>) -> Vec<Insn> {
    assemble(maps, claim, max_frame_len, fast).insns
}

/// [`program`] with its labels and notes, for [`crate::program_listing`].
///
/// Registers: r6 ctx; r2 data, r3 data_end while parsing; r5 the header
/// being read; r9 the L3 offset; r7 the L4 protocol, r8 the destination
/// port; at the end r7 = action, r8 = counter slot. The fast path, first,
/// has its own (see [`crate::fastpath`]).
pub(crate) fn assemble(maps: Maps, claim: &Claim, max_frame_len: Option<u32>, fast: Option<FastPathRefs>) -> Assembled {
    let mut a = Asm::new();
    let not_ip = a.label("not_ip");
    let unclaimed = a.label("unclaimed");
    let unparsed = a.label("unparsed");
    let claimed = a.label("claimed");
    let too_big = a.label("too_big");
    let count = a.label("count");
    let ipv4 = a.label("ipv4");
    let ipv6 = a.label("ipv6");

    a.note("r6 = ctx");
    a.op(MOV64_X, R6, R1, 0, 0);
    if let Some(fp) = fast {
        fastpath::emit(&mut a, &fp, maps.counters, count);
        a.note(&format!("slow path: the claim policy: {}", claim.describe()));
    }
    // Every frame is claimed: nothing to parse.
    let parse = *claim != Claim::Frames;
    if parse {
        a.op(LDX_W, R2, R6, XDP_MD_DATA, 0);
        a.op(LDX_W, R3, R6, XDP_MD_DATA_END, 0);
        a.note("claim policy: the ethertype at 12, 16 or 20 (up to two VLAN tags), as the host loads it");
    }
    // Ethernet, then up to two VLAN tags: the ethertype at 12, 16 or 20.
    for (tags, et_at) in [(0, 12i16), (1, 16), (2, 20)].into_iter().filter(|_| parse) {
        let next = a.label(["vlan_1", "vlan_2", "vlan_3"][tags]);
        a.need(R2, R3, i32::from(et_at) + 2, not_ip);
        a.op(LDX_H, R1, R2, et_at, 0);
        a.op(MOV64_K, R9, 0, 0, i32::from(et_at) + 2);
        a.jump(JEQ_K, R1, 0, ET_IPV4, ipv4);
        a.jump(JEQ_K, R1, 0, ET_IPV6, ipv6);
        if tags < 2 {
            a.jump(JEQ_K, R1, 0, ET_VLAN, next);
            if tags == 0 {
                a.jump(JEQ_K, R1, 0, ET_QINQ, next);
            }
        }
        a.goto(not_ip);
        a.bind(next);
    }
    // (Falls out of the loop only after the third ethertype was read: not
    // reachable, every branch above jumps.)

    match claim {
        Claim::All => {
            a.bind(ipv4);
            a.bind(ipv6);
            a.goto(claimed);
        }
        Claim::Frames => {
            // Whatever the ethertype (or a frame too short to have one):
            // straight on to `claimed`, next.
        }
        Claim::Ports { udp, tcp, fragments } => {
            let fragment = a.label("fragment");
            let l4 = a.label("l4");
            // A protocol without claimed ports never reaches the lookup.
            let udp_l4 = if udp.is_empty() { unclaimed } else { l4 };
            let tcp_l4 = if tcp.is_empty() { unclaimed } else { l4 };
            // IPv4: IHL, protocol, flags + offset.
            a.bind(ipv4);
            a.op(MOV64_X, R5, R2, 0, 0);
            a.op(ADD64_X, R5, R9, 0, 0);
            a.need(R5, R3, 20, unparsed);
            a.op(LDX_B, R1, R5, 0, 0);
            a.op(AND64_K, R1, 0, 0, 0x0f);
            a.jump(JLT_K, R1, 0, 5, unparsed);
            a.op(LSH64_K, R1, 0, 0, 2);
            a.op(LDX_B, R7, R5, 9, 0);
            a.op(LDX_H, R0, R5, 6, 0);
            a.op(AND64_K, R0, 0, 0, IPV4_MF_OFFSET);
            a.jump(JNE_K, R0, 0, 0, fragment);
            a.op(ADD64_X, R5, R1, 0, 0);
            a.jump(JEQ_K, R7, 0, IPPROTO_UDP, udp_l4);
            a.jump(JEQ_K, R7, 0, IPPROTO_TCP, tcp_l4);
            a.goto(unclaimed);

            // IPv6: the fixed header, then the extension headers, unrolled.
            a.bind(ipv6);
            a.op(MOV64_X, R5, R2, 0, 0);
            a.op(ADD64_X, R5, R9, 0, 0);
            a.need(R5, R3, 40, unparsed);
            a.op(LDX_B, R7, R5, 6, 0);
            a.op(ADD64_K, R5, 0, 0, 40);
            for _ in 0..MAX_IPV6_EXT_HEADERS {
                let (ext, frag, next) = (a.label("v6_ext"), a.label("v6_frag"), a.label("v6_next"));
                a.jump(JEQ_K, R7, 0, IPPROTO_UDP, udp_l4);
                a.jump(JEQ_K, R7, 0, IPPROTO_TCP, tcp_l4);
                a.jump(JEQ_K, R7, 0, IPPROTO_FRAGMENT, frag);
                a.jump(JEQ_K, R7, 0, IPPROTO_HOPOPTS, ext);
                a.jump(JEQ_K, R7, 0, IPPROTO_ROUTING, ext);
                a.jump(JEQ_K, R7, 0, IPPROTO_DSTOPTS, ext);
                a.goto(unclaimed);
                // Hop-by-Hop, Routing, Destination Options: next header at
                // 0, length in 8-byte units beyond the first at 1.
                a.bind(ext);
                a.need(R5, R3, 8, unparsed);
                a.op(LDX_B, R7, R5, 0, 0);
                a.op(LDX_B, R1, R5, 1, 0);
                a.op(ADD64_K, R1, 0, 0, 1);
                a.op(LSH64_K, R1, 0, 0, 3);
                a.op(ADD64_X, R5, R1, 0, 0);
                a.goto(next);
                // Fragment header: 8 bytes; offset + M at 2.
                a.bind(frag);
                a.need(R5, R3, 8, unparsed);
                a.op(LDX_B, R7, R5, 0, 0);
                a.op(LDX_H, R0, R5, 2, 0);
                a.op(AND64_K, R0, 0, 0, IPV6_OFFSET_M);
                a.jump(JNE_K, R0, 0, 0, fragment);
                a.op(ADD64_K, R5, 0, 0, 8);
                a.bind(next);
            }
            // Past the bound: an upper-layer header still counts, another
            // extension header makes the chain too long.
            a.jump(JEQ_K, R7, 0, IPPROTO_UDP, udp_l4);
            a.jump(JEQ_K, R7, 0, IPPROTO_TCP, tcp_l4);
            for nh in [IPPROTO_HOPOPTS, IPPROTO_ROUTING, IPPROTO_DSTOPTS, IPPROTO_FRAGMENT] {
                a.jump(JEQ_K, R7, 0, nh, unparsed);
            }
            a.goto(unclaimed);

            // A fragment of protocol r7: claimed as a whole or not at all.
            a.bind(fragment);
            if *fragments == Fragments::Claim {
                if !udp.is_empty() {
                    a.jump(JEQ_K, R7, 0, IPPROTO_UDP, claimed);
                }
                if !tcp.is_empty() {
                    a.jump(JEQ_K, R7, 0, IPPROTO_TCP, claimed);
                }
            }
            a.goto(unclaimed);

            // UDP or TCP at r5: the destination port, then its claim bit.
            if a.is_used(l4) {
                a.bind(l4);
                a.need(R5, R3, 4, unparsed);
                a.op(LDX_B, R8, R5, 2, 0);
                a.op(LSH64_K, R8, 0, 0, 8);
                a.op(LDX_B, R1, R5, 3, 0);
                a.op(OR64_X, R8, R1, 0, 0);
                a.op(MOV64_X, R1, R8, 0, 0);
                a.op(RSH64_K, R1, 0, 0, 5);
                if !tcp.is_empty() {
                    let word = a.label("claim_word");
                    if !udp.is_empty() {
                        a.jump(JNE_K, R7, 0, IPPROTO_TCP, word);
                    }
                    a.op(ADD64_K, R1, 0, 0, CLAIM_WORDS_PER_PROTO as i32);
                    a.bind(word);
                }
                a.op(STX_W, R10, R1, STACK_CLAIM_KEY, 0);
                a.op(MOV64_X, R2, R10, 0, 0);
                a.op(ADD64_K, R2, 0, 0, STACK_CLAIM_KEY.into());
                a.map_fd(R1, maps.claims);
                a.op(CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM);
                a.jump(JEQ_K, R0, 0, 0, unclaimed);
                a.op(LDX_W, R1, R0, 0, 0);
                a.op(MOV64_X, R2, R8, 0, 0);
                a.op(AND64_K, R2, 0, 0, 31);
                a.op(RSH64_X, R1, R2, 0, 0);
                a.op(AND64_K, R1, 0, 0, 1);
                a.jump(JEQ_K, R1, 0, 0, unclaimed);
                a.goto(claimed);
            }
        }
    }

    // Claimed: too long for a socket frame, or redirected (nothing is
    // claimed when no port is: then the block would be unreachable).
    if a.is_used(claimed) || !parse {
        a.bind(claimed);
        a.note("claimed: longer than a socket frame -> XDP_DROP (dropped_too_big); else to the XSK of its rx queue (redirected), or XDP_PASS when the queue has none (passed_no_socket)");
        if let Some(max) = max_frame_len {
            // A helper call clobbered r2/r3: read the packet bounds again.
            a.op(LDX_W, R2, R6, XDP_MD_DATA, 0);
            a.remark("ctx->data");
            a.op(LDX_W, R3, R6, XDP_MD_DATA_END, 0);
            a.remark("ctx->data_end");
            a.op(MOV64_X, R4, R2, 0, 0);
            // No frame exceeds 64 KiB; the verifier takes offsets up to that.
            a.op(ADD64_K, R4, 0, 0, max.min(0xffff) as i32);
            a.jump(JGT_X, R3, R4, 0, too_big);
        }
        // return bpf_redirect_map(&xskmap, ctx->rx_queue_index, XDP_PASS),
        // counted as passed when the fallback (no socket on the queue) applies.
        a.op(LDX_W, R2, R6, XDP_MD_RX_QUEUE_INDEX, 0);
        a.remark("ctx->rx_queue_index");
        a.map_fd(R1, maps.xsks);
        a.op(MOV64_K, R3, 0, 0, XDP_PASS);
        a.remark("XDP_PASS when the queue has no socket");
        a.op(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
        a.op(MOV64_X, R7, R0, 0, 0);
        a.op(MOV64_K, R8, 0, 0, slot::REDIRECTED);
        a.remark("redirected");
        a.jump(JEQ_K, R0, 0, XDP_REDIRECT, count);
        a.remark("XDP_REDIRECT");
        a.op(MOV64_K, R8, 0, 0, slot::PASSED_NO_SOCKET);
        a.remark("passed_no_socket");
        a.goto(count);
    }

    for (at, action, s, name) in [
        (too_big, XDP_DROP, slot::DROPPED_TOO_BIG, "XDP_DROP, dropped_too_big"),
        (not_ip, XDP_PASS, slot::PASSED_NOT_IP, "XDP_PASS, passed_not_ip"),
        (unclaimed, XDP_PASS, slot::PASSED_UNCLAIMED, "XDP_PASS, passed_unclaimed"),
        (unparsed, XDP_PASS, slot::PASSED_UNPARSED, "XDP_PASS, passed_unparsed"),
    ] {
        if !a.is_used(at) || (s == slot::PASSED_NOT_IP && *claim == Claim::Frames) {
            continue;
        }
        a.bind(at);
        a.op(MOV64_K, R7, 0, 0, action);
        a.op(MOV64_K, R8, 0, 0, s);
        a.remark(name);
        a.goto(count);
    }

    // counters[r8] += 1 (this CPU's copy: no atomics needed), return r7.
    let out = a.label("out");
    a.bind(count);
    a.note("count: counters[r8] += 1, return r7");
    bump_counter(&mut a, maps.counters, out);
    a.bind(out);
    a.op(MOV64_X, R0, R7, 0, 0);
    a.op(EXIT, 0, 0, 0, 0);
    // The program is fixed up to its map fds and bounds: labels are all
    // bound and offsets small, so this cannot fail (the unit tests assemble
    // every shape).
    a.finish().unwrap_or_default()
}

/// The program [`XdpProgram::attach`] would load for this claim, frame
/// limit and fast path ingress port (None: no fast path), as text: one
/// instruction per line, the labels where jumps land, a comment per block
/// (see `src/fastpath.listing` for the bridge's). Maps are shown by name.
/// A disassembly to read, in the style of `bpftool prog dump xlated`.
pub fn program_listing(claim: &Claim, max_frame_len: Option<u32>, fast_path_ingress_port: Option<u32>) -> String {
    // Placeholder fds: nothing is loaded, the listing names them.
    let maps = Maps { xsks: 1, counters: 2, claims: 3 };
    let fast = fast_path_ingress_port.map(|port| FastPathRefs::placeholder(port, 4));
    let prog = assemble(maps, claim, max_frame_len, fast);
    listing(&prog, &|fd| maps.name(fd).or_else(|| fast.and_then(|f| f.name(fd))))
}

/// The claim bit set's entries: (index, word) for every non-zero word.
fn claim_words(udp: &[u16], tcp: &[u16]) -> Vec<(u32, u32)> {
    let mut words = std::collections::BTreeMap::<u32, u32>::new();
    for (base, ports) in [(0, udp), (CLAIM_WORDS_PER_PROTO, tcp)] {
        for &p in ports {
            *words.entry(base + u32::from(p >> 5)).or_default() |= 1 << (p & 31);
        }
    }
    words.into_iter().collect()
}

/// Loads `insns` as an XDP program; on failure the error carries the
/// verifier log (reloaded with logging on, so a successful load pays nothing).
pub(crate) fn load(insns: &[Insn], ifname: &str) -> Result<OwnedFd, Error> {
    match sys::prog_load_xdp(insns, LICENSE, PROG_NAME, None) {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(Error::not_permitted("loading the XDP program", &e)),
        Err(first) => {
            let mut log = vec![0u8; VERIFIER_LOG_BYTES];
            let second = sys::prog_load_xdp(insns, LICENSE, PROG_NAME, Some(&mut log));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            // The last lines say what went wrong; keep the message one line.
            let tail = lines[lines.len().saturating_sub(12)..].join(" | ");
            match second {
                Ok(fd) => Ok(fd),
                Err(_) => Err(Error::new(
                    ErrorKind::Verifier,
                    Some(&first),
                    format!("loading the XDP program for {ifname} failed: {first}; verifier log: {tail}"),
                )),
            }
        }
    }
}

/// Attachment options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachConfig {
    /// Native, generic, or native-then-generic (default).
    pub mode: XdpMode,
    /// XSKMAP slots = highest rx queue index + 1 that can get a socket.
    /// Default 256 (a few KiB of kernel memory); a frame arriving on a queue
    /// at or above it, or on a queue without a socket, goes to the kernel.
    pub max_queues: u32,
    /// What the program takes from the kernel. Default: nothing
    /// ([`Claim::nothing`]): say which ports, or [`Claim::All`] explicitly.
    pub claim: Claim,
    /// Claimed frames longer than this are dropped and counted
    /// (`dropped_too_big`): the room of one AF_XDP frame. Default None: no
    /// limit; [`crate::XdpPort::open`] sets it to its sockets' frame room
    /// (`frame_size - XDP_PACKET_HEADROOM`) when None, or to the smaller
    /// of the two.
    pub max_frame_len: Option<u32>,
    /// The bridge's kernel fast path for learned unicast, tried before the
    /// claim policy (see [`crate::fastpath`]). Default None.
    pub fast_path: Option<FastPathAttach>,
}

impl Default for AttachConfig {
    fn default() -> Self {
        AttachConfig {
            mode: XdpMode::Auto,
            max_queues: 256,
            claim: Claim::nothing(),
            max_frame_len: None,
            fast_path: None,
        }
    }
}

/// What the XDP program did with the frames it saw, summed over CPUs:
/// seen = `passed + dropped + redirected + fast_forwarded`.
///
/// `redirected` counts the frames `bpf_redirect_map` accepted for a
/// socket; the kernel may still drop some of them on the way into the
/// socket (the socket's XDP_STATISTICS: `rx_dropped`, `rx_ring_full`,
/// `rx_fill_ring_empty_descs`). A claimed frame on a queue without a
/// socket goes to the kernel and counts as `passed`. Likewise
/// `fast_forwarded` counts the frames the device map accepted for the
/// egress port; the kernel may still drop some on the way out (into a veth
/// whose peer has neither an XDP program nor GRO, every one: see
/// [`crate::fastpath`] for where that is counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpCounters {
    /// Handed to the kernel (`XDP_PASS`).
    pub passed: u64,
    /// Dropped by the program (`XDP_DROP`): claimed frames longer than an
    /// AF_XDP frame.
    pub dropped: u64,
    /// Handed to a socket (`XDP_REDIRECT` through the XSKMAP).
    pub redirected: u64,
    /// Forwarded by the fast path to another port (`XDP_REDIRECT` through
    /// the bridge's device map), partial checksums completed on the way
    /// ([`XdpReasons::fast_csum_completed`] says how many). Always 0
    /// without a fast path.
    pub fast_forwarded: u64,
}

impl XdpCounters {
    /// Frames the program saw.
    pub fn seen(&self) -> u64 {
        self.passed + self.dropped + self.redirected + self.fast_forwarded
    }
}

/// [`XdpCounters`] by reason, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpReasons {
    /// Passed: not IPv4/IPv6 (ARP, LLDP, ...), or under more than two VLAN tags.
    pub passed_not_ip: u64,
    /// Passed: IP, but not claimed (another protocol or port, ICMP, a
    /// fragment under [`Fragments::Pass`] or of an unclaimed protocol).
    pub passed_unclaimed: u64,
    /// Passed: headers the program could not read to the ports (truncated,
    /// IHL < 5, an IPv6 extension chain longer than [`MAX_IPV6_EXT_HEADERS`]).
    pub passed_unparsed: u64,
    /// Passed: claimed, but its rx queue has no socket.
    pub passed_no_socket: u64,
    /// Dropped: claimed and longer than [`AttachConfig::max_frame_len`].
    pub dropped_too_big: u64,
    /// Redirected to the socket of its rx queue.
    pub redirected: u64,
    /// Forwarded by the fast path (an outcome, like the four above); those
    /// whose partial checksum it completed first are also counted in
    /// `fast_csum_completed`.
    pub fast_forwarded: u64,
    /// The fast path's slow reasons: why a frame went on to the claim
    /// policy instead, one per such frame (all 0 without a fast path).
    /// Rule a: shorter than an Ethernet header, or to a group address
    /// (multicast, broadcast).
    pub slow_not_unicast: u64,
    /// Rule a: a unicast frame shorter than the Ethernet minimum (60
    /// bytes without the FCS): a redirect would send it unpadded, so the
    /// bridge's workers pad and send it.
    pub slow_short: u64,
    /// Rule b: its destination MAC is not in the FDB mirror.
    pub slow_unknown_dst: u64,
    /// Rule c: its destination was learned on the port it came in on
    /// (user space drops and counts it).
    pub slow_same_port: u64,
    /// Rule d: its source MAC is unknown or known on another port
    /// (learning and MAC moves are user space's).
    pub slow_src_not_here: u64,
    /// Rule e: the egress port is not enabled for the fast path (or out of
    /// the port table's range).
    pub slow_egress_off: u64,
    /// Rule e: longer than the egress port's `max_frame`.
    pub slow_too_big: u64,
    /// Rule f: IP headers the checksum check cannot read (truncated,
    /// IHL < 5, a total length shorter than the header, an IPv6 extension
    /// header).
    pub slow_unparsed: u64,
    /// Rule f: TCP or UDP with a partial checksum (checksum offload of a
    /// local sender) that the program does not complete, so user space
    /// does: a segment (by the IP header's length) longer than
    /// [`crate::fastpath::MAX_CSUM_SEGMENT`] bytes or shorter than its
    /// TCP / UDP header, a UDP length field other than the IP header's
    /// segment length, or a frame that ends before the segment does.
    pub slow_partial_csum: u64,
    /// Rule g: the device map has no entry for the egress port.
    pub slow_redirect_failed: u64,
    /// Not an outcome, not a slow reason: a part of `fast_forwarded`. Rule
    /// f: forwarded frames whose partial checksum the program completed
    /// (the field held the pseudo-header sum and the checksum did not
    /// verify as it was). Such a frame is counted here only once the
    /// device map took it; when it did not (`slow_redirect_failed`), the
    /// slow path gets the frame with its checksum already complete.
    pub fast_csum_completed: u64,
}

impl XdpReasons {
    /// The outcomes.
    pub fn totals(&self) -> XdpCounters {
        XdpCounters {
            passed: self.passed_not_ip + self.passed_unclaimed + self.passed_unparsed + self.passed_no_socket,
            dropped: self.dropped_too_big,
            redirected: self.redirected,
            fast_forwarded: self.fast_forwarded,
        }
    }

    /// Frames the fast path handed to the slow path: the sum of the
    /// `slow_*` reasons.
    pub fn slow_path(&self) -> u64 {
        self.slow_not_unicast
            + self.slow_short
            + self.slow_unknown_dst
            + self.slow_same_port
            + self.slow_src_not_here
            + self.slow_egress_off
            + self.slow_too_big
            + self.slow_unparsed
            + self.slow_partial_csum
            + self.slow_redirect_failed
    }

    /// The counters add up: without a fast path no slow reason is counted;
    /// with one, every frame it did not forward has exactly one slow reason
    /// (slow_path = passed + dropped + redirected), and the completed
    /// checksums are a part of the forwarded frames (fast_csum_completed <=
    /// fast_forwarded). Exact only while no frame is in flight: the
    /// counters are read one by one.
    pub fn conservation_ok(&self, fast_path: bool) -> bool {
        let t = self.totals();
        if fast_path {
            self.slow_path() == t.passed + t.dropped + t.redirected && self.fast_csum_completed <= t.fast_forwarded
        } else {
            self.slow_path() == 0 && t.fast_forwarded == 0 && self.fast_csum_completed == 0
        }
    }
}

/// The counter map summed over CPUs, slot by slot.
pub(crate) fn read_reasons(counters: &OwnedFd, possible_cpus: usize) -> std::io::Result<XdpReasons> {
    let read = |s: i32| sys::percpu_u64_sum(counters, s as u32, possible_cpus);
    Ok(XdpReasons {
        passed_not_ip: read(slot::PASSED_NOT_IP)?,
        passed_unclaimed: read(slot::PASSED_UNCLAIMED)?,
        passed_unparsed: read(slot::PASSED_UNPARSED)?,
        passed_no_socket: read(slot::PASSED_NO_SOCKET)?,
        dropped_too_big: read(slot::DROPPED_TOO_BIG)?,
        redirected: read(slot::REDIRECTED)?,
        fast_forwarded: read(slot::FAST_FORWARDED)?,
        slow_not_unicast: read(slot::SLOW_NOT_UNICAST)?,
        slow_short: read(slot::SLOW_SHORT)?,
        slow_unknown_dst: read(slot::SLOW_UNKNOWN_DST)?,
        slow_same_port: read(slot::SLOW_SAME_PORT)?,
        slow_src_not_here: read(slot::SLOW_SRC_NOT_HERE)?,
        slow_egress_off: read(slot::SLOW_EGRESS_OFF)?,
        slow_too_big: read(slot::SLOW_TOO_BIG)?,
        slow_unparsed: read(slot::SLOW_UNPARSED)?,
        slow_partial_csum: read(slot::SLOW_PARTIAL_CSUM)?,
        slow_redirect_failed: read(slot::SLOW_REDIRECT_FAILED)?,
        fast_csum_completed: read(slot::FAST_CSUM_COMPLETED)?,
    })
}

/// The XDP program attached to one interface, with its maps.
///
/// Attached through a bpf_link: dropping this value (or the process dying)
/// detaches the program; nothing is left behind on the interface. The drop
/// detaches the link explicitly before closing it, so the program is gone
/// when the drop returns, also while a child process forked meanwhile
/// still holds a copy of the link's file.
#[derive(Debug)]
pub struct XdpProgram {
    // Dropped first: closing the link detaches the program (when no copy is left).
    link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
    _claims: OwnedFd,
    counters: OwnedFd,
    possible_cpus: usize,
    ifname: String,
    ifindex: u32,
    mode: XdpMode,
    /// Why native mode was refused when [`XdpMode::Auto`] fell back to
    /// generic mode.
    fallback: Option<String>,
    max_queues: u32,
    claim: Claim,
    max_frame_len: Option<u32>,
    fast_path: Option<FastPathAttach>,
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        // Fails only on kernels before 5.9; the close then detaches.
        let _ = sys::link_detach(&self.link);
    }
}

impl XdpProgram {
    /// Loads the program and attaches it to `ifname` (looked up in the
    /// calling thread's network namespace).
    ///
    /// Errors: the interface does not exist ([`ErrorKind::NoSuchInterface`]),
    /// not root ([`ErrorKind::NotPermitted`]), an XDP program is already
    /// attached ([`ErrorKind::AlreadyAttached`]), native mode refused
    /// ([`ErrorKind::Unsupported`], only with [`XdpMode::Native`]).
    pub fn attach(ifname: &str, cfg: &AttachConfig) -> Result<XdpProgram, Error> {
        if cfg.max_queues == 0 || cfg.max_queues > 1 << 16 {
            return Err(Error::config(format!("max_queues must be 1..=65536, not {}", cfg.max_queues)));
        }
        if cfg.max_frame_len == Some(0) {
            return Err(Error::config("max_frame_len must be at least 1".into()));
        }
        if let Some(fp) = &cfg.fast_path {
            fp.validate()?;
        }
        let ifindex = crate::error::ifindex(ifname)?;
        let map_error = |what: &str| {
            let what = what.to_string();
            let ifname = ifname.to_string();
            move |e: std::io::Error| match e.raw_os_error() {
                Some(libc::EPERM) => Error::not_permitted(&format!("creating the {what}"), &e),
                _ => Error::os(&e, format!("creating the {what} for {ifname}")),
            }
        };
        let map = sys::xskmap_create(cfg.max_queues, MAP_NAME).map_err(map_error("XSKMAP"))?;
        let counters = sys::percpu_array_u64_create(slot::COUNT, COUNTER_MAP_NAME).map_err(map_error("counter map"))?;
        let claims = sys::array_u32_create(CLAIM_ENTRIES, CLAIM_MAP_NAME).map_err(map_error("claim map"))?;
        if let Claim::Ports { udp, tcp, .. } = &cfg.claim {
            for (k, word) in claim_words(udp, tcp) {
                sys::map_update_u32(&claims, k, word)
                    .map_err(|e| Error::os(&e, format!("writing the claimed ports of {ifname}")))?;
            }
        }
        // Unreadable (no sysfs): the lookup buffer's floor covers every kernel.
        let possible_cpus = sys::possible_cpus().unwrap_or(0);
        let maps = Maps { xsks: map.as_raw_fd(), counters: counters.as_raw_fd(), claims: claims.as_raw_fd() };
        let fast = cfg.fast_path.as_ref().map(FastPathAttach::refs);
        let prog = load(&program(maps, &cfg.claim, cfg.max_frame_len, fast), ifname)?;
        let attach = |flags: u32| sys::link_create_xdp(&prog, ifindex, flags);
        let mut fallback = None;
        let (link, mode) = match cfg.mode {
            XdpMode::Native => {
                (attach(XDP_FLAGS_DRV_MODE).map_err(|e| link_error(e, ifname, XdpMode::Native))?, XdpMode::Native)
            }
            XdpMode::Skb => {
                (attach(XDP_FLAGS_SKB_MODE).map_err(|e| link_error(e, ifname, XdpMode::Skb))?, XdpMode::Skb)
            }
            XdpMode::Auto => match attach(XDP_FLAGS_DRV_MODE) {
                Ok(l) => (l, XdpMode::Native),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EEXIST | libc::EPERM | libc::ENODEV)) => {
                    return Err(link_error(e, ifname, XdpMode::Native))
                }
                Err(e) => {
                    let link = attach(XDP_FLAGS_SKB_MODE).map_err(|e| link_error(e, ifname, XdpMode::Skb))?;
                    fallback = Some(link_error(e, ifname, XdpMode::Native).to_string());
                    (link, XdpMode::Skb)
                }
            },
        };
        Ok(XdpProgram {
            link,
            _prog: prog,
            map,
            _claims: claims,
            counters,
            possible_cpus,
            ifname: ifname.to_string(),
            ifindex,
            mode,
            fallback,
            max_queues: cfg.max_queues,
            claim: cfg.claim.clone(),
            max_frame_len: cfg.max_frame_len,
            fast_path: cfg.fast_path.clone(),
        })
    }

    /// The mode actually in use ([`XdpMode::Native`] or [`XdpMode::Skb`]).
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Why native mode was refused, when [`XdpMode::Auto`] fell back to
    /// generic (skb) mode; `None` otherwise.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The attached mode in words: `native`, or `generic (skb)` with, after
    /// a fallback, why native mode was refused.
    pub fn describe_mode(&self) -> String {
        match (self.mode, &self.fallback) {
            (XdpMode::Native, _) => "native".to_string(),
            (_, Some(why)) => format!("generic (skb), native refused: {why}"),
            _ => "generic (skb)".to_string(),
        }
    }

    /// The bpf_link that holds the program on the interface. The program is
    /// detached when this value is dropped, even while a copy of the link's
    /// file is still open elsewhere (a child forked meanwhile, say).
    pub fn link(&self) -> BorrowedFd<'_> {
        self.link.as_fd()
    }

    /// Interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Interface index (in the namespace it was attached in).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// XSKMAP slots.
    pub fn max_queues(&self) -> u32 {
        self.max_queues
    }

    /// What the program claims.
    pub fn claim(&self) -> &Claim {
        &self.claim
    }

    /// The longest claimed frame it redirects (longer ones are dropped).
    pub fn max_frame_len(&self) -> Option<u32> {
        self.max_frame_len
    }

    /// The fast path it tries first, if any.
    pub fn fast_path(&self) -> Option<&FastPathAttach> {
        self.fast_path.as_ref()
    }

    /// The program as text ([`program_listing`] of its configuration; map
    /// names in place of their fds).
    pub fn listing(&self) -> String {
        program_listing(&self.claim, self.max_frame_len, self.fast_path.as_ref().map(|f| f.ingress_port))
    }

    /// What the program did with the frames it saw so far, summed over CPUs
    /// (seen = passed + dropped + redirected + fast_forwarded). Thread-safe (reads the
    /// per-CPU map through bpf(2); each CPU's copy is read once, so a frame
    /// counted during the read may or may not be in the result).
    pub fn counters(&self) -> Result<XdpCounters, Error> {
        Ok(self.counter_reasons()?.totals())
    }

    /// [`XdpProgram::counters`] by reason.
    pub fn counter_reasons(&self) -> Result<XdpReasons, Error> {
        read_reasons(&self.counters, self.possible_cpus)
            .map_err(|e| Error::os(&e, format!("reading the XDP counters of {}", self.ifname)))
    }

    /// Sends the claimed frames of the socket's rx queue to that socket
    /// (replaces any socket registered for the queue before). Closing the
    /// socket removes it from the map again (the kernel does that).
    pub fn register(&self, sock: &crate::socket::XskSocket) -> Result<(), Error> {
        if sock.ifindex() != self.ifindex || sock.ifname() != self.ifname {
            return Err(Error::config(format!(
                "socket is bound to {} but the XDP program is attached to {}",
                sock.ifname(),
                self.ifname
            )));
        }
        let q = sock.queue();
        if q >= self.max_queues {
            return Err(Error::config(format!(
                "queue {q} of {} is beyond the XSKMAP ({} slots); raise AttachConfig::max_queues",
                self.ifname, self.max_queues
            )));
        }
        sys::map_update_u32(&self.map, q, sock.as_fd().as_raw_fd() as u32)
            .map_err(|e| Error::os(&e, format!("registering the XSK of {} queue {q} in the XSKMAP", self.ifname)))
    }

    /// Stops redirecting queue `queue` (its frames go to the kernel again).
    pub fn unregister(&self, queue: u32) -> Result<(), Error> {
        match sys::map_delete_u32(&self.map, queue) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(Error::os(&e, format!("removing queue {queue} of {} from the XSKMAP", self.ifname))),
        }
    }

    /// Detaches now (the same as dropping).
    pub fn detach(self) {
        drop(self);
    }
}

fn link_error(e: std::io::Error, ifname: &str, mode: XdpMode) -> Error {
    let how = match mode {
        XdpMode::Skb => "generic (skb)",
        _ => "native",
    };
    match e.raw_os_error() {
        Some(libc::EBUSY | libc::EEXIST) => Error::new(
            ErrorKind::AlreadyAttached,
            Some(&e),
            format!(
                "interface {ifname} already has an XDP program attached. One attached through a BPF link (as flowsteer attaches its own) goes only when its owner closes it: \
                 `bpftool net show dev {ifname}` names it and `bpftool link show` the pid holding it (is another flowsteer `run --source afxdp:{ifname}` or `udp-echo --mode xdp` running?); stop that process, or remove its pin under /sys/fs/bpf. \
                 Only a program attached without a link goes with `ip link set dev {ifname} xdp off` (xdpgeneric off for a generic one)"
            ),
        ),
        Some(libc::EPERM) => Error::not_permitted("attaching the XDP program", &e),
        Some(libc::ENODEV) => {
            Error::new(ErrorKind::NoSuchInterface, Some(&e), format!("interface {ifname} does not exist (it vanished)"))
        }
        Some(libc::ERANGE) if mode == XdpMode::Native => Error::new(
            ErrorKind::Unsupported,
            Some(&e),
            format!(
                "native XDP refused on {ifname}: its MTU is too large for an XDP program without multi-buffer support (veth takes native XDP up to an MTU of about 3,500 bytes, on both ends of the pair); use XdpMode::Skb or XdpMode::Auto, or lower the MTU"
            ),
        ),
        Some(libc::EOPNOTSUPP) if mode == XdpMode::Native => Error::new(
            ErrorKind::Unsupported,
            Some(&e),
            format!("interface {ifname} has no native XDP support; use XdpMode::Skb or XdpMode::Auto"),
        ),
        _ => Error::os(&e, format!("attaching the XDP program to {ifname} in {how} mode")),
    }
}

#[cfg(test)]
pub(crate) mod tests;
