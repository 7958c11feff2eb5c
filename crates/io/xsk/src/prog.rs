//! The XDP program that feeds the XSKs, assembled by hand (no clang, no
//! libbpf), and its attachment to an interface.
//!
//! What it does, per frame:
//! * IPv4 and IPv6, bare or under one or two VLAN tags (802.1Q 0x8100 or
//!   802.1ad 0x88a8 outside, 0x8100 inside): `bpf_redirect_map(xskmap,
//!   rx_queue_index, XDP_PASS)`, so the frame goes to the XSK registered for
//!   its rx queue, and to the kernel when that queue has no XSK;
//! * anything else (ARP above all, also LLDP, tagged ARP, frames too short
//!   for their headers): `XDP_PASS` to the kernel, so neighbour resolution
//!   keeps working while the XSKs own the IP traffic.
//!
//! Every packet access is preceded by a `data + n > data_end` test, as the
//! verifier demands.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::error::{Error, ErrorKind};
use crate::sys::{self, Insn};

/// How the program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum XdpMode {
    /// Native (driver) mode, falling back to generic (skb) mode when the
    /// driver refuses. The default.
    #[default]
    Auto,
    /// Native XDP in the driver (XDP_FLAGS_DRV_MODE): fastest; veth has it.
    Native,
    /// Generic XDP on the skb (XDP_FLAGS_SKB_MODE): works on any interface.
    Skb,
}

const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// XDP action codes and helper ids used by the program.
const XDP_PASS: i32 = 2;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// `struct xdp_md` offsets.
const XDP_MD_DATA: i16 = 0;
const XDP_MD_DATA_END: i16 = 4;
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// The license string: GPL-compatible (the helpers used are not GPL-only,
/// but a GPL-compatible license keeps every helper available).
const LICENSE: &str = "Dual MIT/GPL";
/// Program and map names as bpftool / `ip link` show them.
const PROG_NAME: &str = "flowsteer_xsk";
const MAP_NAME: &str = "flowsteer_xsks";

/// Size of the buffer that receives the verifier log when a load fails.
const VERIFIER_LOG_BYTES: usize = 64 * 1024;

/// Registers.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;

// Opcodes (class | size/op | mode/source).
const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LDX_H: u8 = 0x69; // BPF_LDX | BPF_MEM | BPF_H
const MOV64_X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
const MOV64_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const ADD64_K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
const JGT_X: u8 = 0x2d; // BPF_JMP | BPF_JGT | BPF_X
const JEQ_K: u8 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JA: u8 = 0x05; // BPF_JMP | BPF_JA
const LD_DW_IMM: u8 = 0x18; // BPF_LD | BPF_DW | BPF_IMM (two slots)
const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

/// Ethertypes as the program sees them: a u16 load from the packet in host
/// byte order.
const fn wire16(ethertype: u16) -> i32 {
    u16::from_ne_bytes(ethertype.to_be_bytes()) as i32
}
const ET_IPV4: i32 = wire16(0x0800);
const ET_IPV6: i32 = wire16(0x86dd);
const ET_VLAN: i32 = wire16(0x8100);
const ET_QINQ: i32 = wire16(0x88a8);

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: (dst & 0x0f) | (src << 4), off, imm }
}

/// A tiny assembler: instructions plus forward jumps to labels.
struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, usize)>,
}

#[derive(Clone, Copy)]
struct Label(usize);

impl Asm {
    fn new() -> Asm {
        Asm { insns: Vec::new(), labels: Vec::new(), fixups: Vec::new() }
    }

    fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.insns.len());
    }

    fn emit(&mut self, i: Insn) {
        self.insns.push(i);
    }

    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.fixups.push((self.insns.len(), to.0));
        self.insns.push(insn(code, dst, src, 0, imm));
    }

    /// `if data + n > data_end goto to` (r2 = data, r3 = data_end, r4 scratch).
    fn need(&mut self, n: i32, to: Label) {
        self.emit(insn(MOV64_X, R4, R2, 0, 0));
        self.emit(insn(ADD64_K, R4, 0, 0, n));
        self.jump(JGT_X, R4, R3, 0, to);
    }

    fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
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
enum AsmError {
    /// A jump to a label that was never bound.
    UnboundLabel,
    /// A jump farther than a 16-bit offset reaches.
    JumpOutOfRange,
}

/// The program, with `map_fd` (the XSKMAP) patched into its ld_imm64.
pub(crate) fn redirect_program(map_fd: i32) -> Vec<Insn> {
    let mut a = Asm::new();
    let (redirect, pass, vlan, vlan2) = (a.label(), a.label(), a.label(), a.label());
    a.emit(insn(LDX_W, R2, R1, XDP_MD_DATA, 0));
    a.emit(insn(LDX_W, R3, R1, XDP_MD_DATA_END, 0));
    // Ethernet header: ethertype at 12.
    a.need(14, pass);
    a.emit(insn(LDX_H, R5, R2, 12, 0));
    a.jump(JEQ_K, R5, 0, ET_IPV4, redirect);
    a.jump(JEQ_K, R5, 0, ET_IPV6, redirect);
    a.jump(JEQ_K, R5, 0, ET_VLAN, vlan);
    a.jump(JEQ_K, R5, 0, ET_QINQ, vlan);
    a.jump(JA, 0, 0, 0, pass);
    // One tag: inner ethertype at 16.
    a.bind(vlan);
    a.need(18, pass);
    a.emit(insn(LDX_H, R5, R2, 16, 0));
    a.jump(JEQ_K, R5, 0, ET_IPV4, redirect);
    a.jump(JEQ_K, R5, 0, ET_IPV6, redirect);
    a.jump(JEQ_K, R5, 0, ET_VLAN, vlan2);
    a.jump(JA, 0, 0, 0, pass);
    // Two tags: inner ethertype at 20.
    a.bind(vlan2);
    a.need(22, pass);
    a.emit(insn(LDX_H, R5, R2, 20, 0));
    a.jump(JEQ_K, R5, 0, ET_IPV4, redirect);
    a.jump(JEQ_K, R5, 0, ET_IPV6, redirect);
    a.jump(JA, 0, 0, 0, pass);
    // return bpf_redirect_map(&xskmap, ctx->rx_queue_index, XDP_PASS);
    a.bind(redirect);
    a.emit(insn(LDX_W, R2, R1, XDP_MD_RX_QUEUE_INDEX, 0));
    a.emit(insn(LD_DW_IMM, R1, BPF_PSEUDO_MAP_FD, 0, map_fd));
    a.emit(insn(0, 0, 0, 0, 0));
    a.emit(insn(MOV64_K, R3, 0, 0, XDP_PASS));
    a.emit(insn(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP));
    a.emit(insn(EXIT, 0, 0, 0, 0));
    a.bind(pass);
    a.emit(insn(MOV64_K, R0, 0, 0, XDP_PASS));
    a.emit(insn(EXIT, 0, 0, 0, 0));
    // The program is fixed: labels are all bound and offsets tiny, so this
    // cannot fail (the unit tests assemble it).
    a.finish().unwrap_or_default()
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
}

impl Default for AttachConfig {
    fn default() -> Self {
        AttachConfig { mode: XdpMode::Auto, max_queues: 256 }
    }
}

/// The XDP program attached to one interface, with its XSKMAP.
///
/// Attached through a bpf_link: dropping this value (or the process dying)
/// detaches the program; nothing is left behind on the interface.
#[derive(Debug)]
pub struct XdpProgram {
    // Dropped first: closing the link detaches the program.
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
    ifname: String,
    ifindex: u32,
    mode: XdpMode,
    max_queues: u32,
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
        let ifindex = crate::error::ifindex(ifname)?;
        let map = sys::xskmap_create(cfg.max_queues, MAP_NAME).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) => Error::not_permitted("creating the XSKMAP", &e),
            _ => Error::os(&e, format!("creating the XSKMAP for {ifname}")),
        })?;
        let prog = load(&redirect_program(map.as_raw_fd()), ifname)?;
        let attach = |flags: u32| sys::link_create_xdp(&prog, ifindex, flags);
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
                Err(_) => (attach(XDP_FLAGS_SKB_MODE).map_err(|e| link_error(e, ifname, XdpMode::Skb))?, XdpMode::Skb),
            },
        };
        Ok(XdpProgram {
            _link: link,
            _prog: prog,
            map,
            ifname: ifname.to_string(),
            ifindex,
            mode,
            max_queues: cfg.max_queues,
        })
    }

    /// The mode actually in use ([`XdpMode::Native`] or [`XdpMode::Skb`]).
    pub fn mode(&self) -> XdpMode {
        self.mode
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

    /// Sends the IP frames of the socket's rx queue to that socket (replaces
    /// any socket registered for the queue before). Closing the socket
    /// removes it from the map again (the kernel does that).
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
                "interface {ifname} already has an XDP program attached; remove it (`ip link set dev {ifname} xdp off`) or close the program that owns it"
            ),
        ),
        Some(libc::EPERM) => Error::not_permitted("attaching the XDP program", &e),
        Some(libc::ENODEV) => {
            Error::new(ErrorKind::NoSuchInterface, Some(&e), format!("interface {ifname} does not exist (it vanished)"))
        }
        Some(libc::EOPNOTSUPP) if mode == XdpMode::Native => Error::new(
            ErrorKind::Unsupported,
            Some(&e),
            format!("interface {ifname} has no native XDP support; use XdpMode::Skb or XdpMode::Auto"),
        ),
        _ => Error::os(&e, format!("attaching the XDP program to {ifname} in {how} mode")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Just enough of an eBPF interpreter to run the redirect program on a
    /// frame: returns Some(queue) for "redirect to queue", None for XDP_PASS.
    fn run(prog: &[Insn], frame: &[u8], queue: u32) -> Option<u32> {
        let mut r = [0u64; 11];
        // r1 = ctx; packet pointers are modelled as offsets from 1 << 32.
        let base = 1u64 << 32;
        let mut pc = 0usize;
        let mut redirected = None;
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps < 1000, "runaway program");
            let i = prog[pc];
            let (dst, src) = ((i.regs & 0x0f) as usize, (i.regs >> 4) as usize);
            pc += 1;
            match i.code {
                LDX_W => {
                    assert_eq!(src, 1, "only ctx loads are 32-bit");
                    r[dst] = match i.off {
                        XDP_MD_DATA => base,
                        XDP_MD_DATA_END => base + frame.len() as u64,
                        XDP_MD_RX_QUEUE_INDEX => u64::from(queue),
                        o => panic!("unexpected ctx offset {o}"),
                    };
                }
                LDX_H => {
                    let at = (r[src] - base) as usize + i.off as usize;
                    // A read past the end of the frame panics here (index out of bounds).
                    r[dst] = u64::from(u16::from_ne_bytes([frame[at], frame[at + 1]]));
                }
                MOV64_X => r[dst] = r[src],
                MOV64_K => r[dst] = i.imm as i64 as u64,
                ADD64_K => r[dst] = r[dst].wrapping_add(i.imm as i64 as u64),
                JGT_X => {
                    if r[dst] > r[src] {
                        pc = (pc as i64 + i64::from(i.off)) as usize;
                    }
                }
                JEQ_K => {
                    if r[dst] == i.imm as i64 as u64 {
                        pc = (pc as i64 + i64::from(i.off)) as usize;
                    }
                }
                JA => pc = (pc as i64 + i64::from(i.off)) as usize,
                LD_DW_IMM => {
                    assert_eq!(src as u8, BPF_PSEUDO_MAP_FD);
                    r[dst] = 0xfeed;
                    pc += 1;
                }
                CALL => {
                    assert_eq!(i.imm, BPF_FUNC_REDIRECT_MAP);
                    assert_eq!(r[1], 0xfeed);
                    assert_eq!(r[3], XDP_PASS as u64);
                    redirected = Some(r[2] as u32);
                    r[0] = 4; // XDP_REDIRECT
                }
                EXIT => {
                    return if r[0] == XDP_PASS as u64 { None } else { redirected };
                }
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    fn frame(ethertypes: &[u16], len: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        for et in ethertypes {
            f.extend_from_slice(&et.to_be_bytes());
            f.extend_from_slice(&[0, 7]); // VLAN TCI (ignored after the last type)
        }
        f.resize(len.max(f.len()), 0xaa);
        f.truncate(len);
        f
    }

    #[test]
    fn program_is_well_formed() {
        let p = redirect_program(42);
        assert!(p.len() < 64);
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
        for (at, i) in p.iter().enumerate() {
            if matches!(i.code, JGT_X | JEQ_K | JA) {
                let to = at as i64 + 1 + i64::from(i.off);
                assert!(to > at as i64 && (to as usize) < p.len(), "jump at {at} goes to {to}");
            }
        }
        let ld = p.iter().position(|i| i.code == LD_DW_IMM).unwrap();
        assert_eq!((p[ld].imm, p[ld].regs), (42, R1 | (BPF_PSEUDO_MAP_FD << 4)));
        assert_eq!(p[ld + 1], insn(0, 0, 0, 0, 0));
    }

    #[test]
    fn ip_is_redirected_to_its_queue_and_the_rest_passes() {
        let p = redirect_program(3);
        assert_eq!(run(&p, &frame(&[0x0800], 60), 0), Some(0));
        assert_eq!(run(&p, &frame(&[0x86dd], 80), 5), Some(5));
        assert_eq!(run(&p, &frame(&[0x0806], 60), 0), None, "ARP passes");
        assert_eq!(run(&p, &frame(&[0x88cc], 60), 0), None, "LLDP passes");
        assert_eq!(run(&p, &frame(&[0x8100, 0x0800], 64), 1), Some(1));
        assert_eq!(run(&p, &frame(&[0x88a8, 0x8100, 0x86dd], 80), 2), Some(2));
        assert_eq!(run(&p, &frame(&[0x8100, 0x0806], 64), 0), None, "tagged ARP passes");
        assert_eq!(run(&p, &frame(&[0x8100, 0x8100, 0x0806], 64), 0), None);
        assert_eq!(run(&p, &frame(&[0x8100, 0x8100, 0x8100, 0x0800], 64), 0), None, "three tags pass");
    }

    #[test]
    fn short_frames_pass_without_reading_past_the_end() {
        let p = redirect_program(3);
        for len in 0..14 {
            assert_eq!(run(&p, &frame(&[0x0800], len), 0), None, "len {len}");
        }
        assert_eq!(run(&p, &frame(&[0x0800], 14), 0), Some(0));
        for len in 14..18 {
            assert_eq!(run(&p, &frame(&[0x8100, 0x0800], len), 0), None, "len {len}");
        }
        assert_eq!(run(&p, &frame(&[0x8100, 0x0800], 18), 0), Some(0));
        for len in 18..22 {
            assert_eq!(run(&p, &frame(&[0x8100, 0x8100, 0x0800], len), 0), None, "len {len}");
        }
        assert_eq!(run(&p, &frame(&[0x8100, 0x8100, 0x0800], 22), 0), Some(0));
    }

    /// As root: the kernel's verifier takes the program and rejects it
    /// without its bounds check, with the log in the error. Without the
    /// privilege to load XDP programs: the kernel refuses and the error says
    /// so (the verifier half needs root, which CI has).
    #[test]
    fn kernel_verifier_accepts_the_program_and_its_log_reaches_errors() {
        if !flowsteer_netns::is_root() {
            let err = load(&redirect_program(0), "test").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotPermitted, "{err}");
            return;
        }
        let map = sys::xskmap_create(4, "fs_test").unwrap();
        let good = redirect_program(map.as_raw_fd());
        load(&good, "test").unwrap();
        // The same program without the bounds check before the ethertype load.
        let mut bad = good.clone();
        let jgt = bad.iter().position(|i| i.code == JGT_X).unwrap();
        bad[jgt] = insn(MOV64_X, R4, R4, 0, 0); // no-op instead of the test
        let err = load(&bad, "test").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Verifier);
        let msg = err.to_string();
        assert!(msg.contains("verifier log:") && msg.contains("invalid access to packet"), "{msg}");
        assert!(!msg.contains('\n'));
    }
}
