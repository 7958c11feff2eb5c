//! An interface with the XDP program attached and one XSK per chosen queue:
//! what the engine opens per port.

use crate::error::{Error, ErrorKind};
use crate::prog::{AttachConfig, XdpMode, XdpProgram};
use crate::socket::{XskConfig, XskSocket, XDP_PACKET_HEADROOM};

/// Ethernet header plus one VLAN tag: what an interface accepts beyond its
/// MTU (veth and most NICs take MTU + 18 bytes).
pub const LINK_OVERHEAD: u32 = 14 + 4;

/// Options of [`XdpPort::open`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortConfig {
    /// How to attach the XDP program (and what it claims).
    pub attach: AttachConfig,
    /// Sizes and bind mode of every socket.
    pub socket: XskConfig,
    /// Open even when the interface's MTU allows frames longer than a
    /// socket frame holds (see [`XdpPort::open`]); [`XdpPort::warnings`]
    /// then says so. Default false: refuse.
    pub allow_mtu_drops: bool,
}

impl PortConfig {
    /// Defaults with the given XDP mode.
    pub fn with_mode(mode: XdpMode) -> PortConfig {
        PortConfig { attach: AttachConfig { mode, ..AttachConfig::default() }, ..PortConfig::default() }
    }
}

/// The XDP program on one interface plus one registered [`XskSocket`] per
/// queue. Dropping it closes the sockets, then detaches the program.
#[derive(Debug)]
pub struct XdpPort {
    // Declared first: the sockets close before the program detaches.
    sockets: Vec<XskSocket>,
    program: XdpProgram,
    mtu: u32,
    warnings: Vec<String>,
}

/// The longest frame a socket with `cfg` receives: its frame minus the
/// kernel's headroom (no multi-buffer receive).
pub fn frame_room(cfg: &XskConfig) -> u32 {
    cfg.frame_size.saturating_sub(XDP_PACKET_HEADROOM)
}

/// The MTU of `ifname` in the calling thread's network namespace.
pub fn interface_mtu(ifname: &str) -> Result<u32, Error> {
    crate::error::ifindex(ifname)?;
    crate::sys::if_mtu(ifname).map_err(|e| Error::os(&e, format!("reading the MTU of {ifname}")))
}

/// What to say when frames of `mtu` (+ [`LINK_OVERHEAD`]) do not fit a
/// socket frame of `cfg`; None when they fit.
pub fn mtu_mismatch(ifname: &str, mtu: u32, cfg: &XskConfig) -> Option<String> {
    let room = frame_room(cfg);
    let longest = mtu.saturating_add(LINK_OVERHEAD);
    if longest <= room {
        return None;
    }
    let bigger = if cfg.frame_size < 4096 && mtu + LINK_OVERHEAD <= 4096 - XDP_PACKET_HEADROOM {
        " or 4096-byte socket frames,"
    } else {
        ""
    };
    Some(format!(
        "{ifname} has MTU {mtu}: frames up to {longest} bytes (14 Ethernet + 4 VLAN), but an AF_XDP frame holds {room} \
         ({} - {XDP_PACKET_HEADROOM} headroom; no multi-buffer receive): claimed frames longer than {room} bytes are \
         dropped by the XDP program (counted as dropped_too_big); lower the MTU to {} or less,{bigger} or accept the drops",
        cfg.frame_size,
        room.saturating_sub(LINK_OVERHEAD),
    ))
}

impl XdpPort {
    /// Attaches the program to `ifname`, opens a socket on each of `queues`
    /// (in that order) and registers it. Frames the program does not claim,
    /// and claimed frames arriving on other queues, keep going to the
    /// kernel.
    ///
    /// The program drops claimed frames longer than a socket frame
    /// ([`frame_room`]; the smaller of it and `attach.max_frame_len` when
    /// that is set) and counts them. When the interface's MTU allows such
    /// frames (MTU + [`LINK_OVERHEAD`] > frame room) this refuses with
    /// [`ErrorKind::MtuTooLarge`], unless `allow_mtu_drops` is set.
    ///
    /// Must run in the interface's network namespace; the result can then
    /// move to any thread (or be split with [`XdpPort::into_parts`]).
    pub fn open(ifname: &str, queues: &[u32], cfg: &PortConfig) -> Result<XdpPort, Error> {
        if queues.is_empty() {
            return Err(Error::config(format!("no queues given for {ifname}")));
        }
        for (i, q) in queues.iter().enumerate() {
            if queues[..i].contains(q) {
                return Err(Error::config(format!("queue {q} of {ifname} is listed twice")));
            }
            if *q >= cfg.attach.max_queues {
                return Err(Error::config(format!(
                    "queue {q} of {ifname} is beyond max_queues ({}); raise AttachConfig::max_queues",
                    cfg.attach.max_queues
                )));
            }
        }
        cfg.socket.validate()?;
        let room = frame_room(&cfg.socket);
        let attach = AttachConfig {
            max_frame_len: Some(cfg.attach.max_frame_len.map_or(room, |m| m.min(room))),
            ..cfg.attach.clone()
        };
        // Attached first, so missing privileges are reported before the
        // MTU; a refusal below drops (detaches) it again. Until a socket is
        // registered, claimed frames go to the kernel.
        let program = XdpProgram::attach(ifname, &attach)?;
        let mtu = interface_mtu(ifname)?;
        let mut warnings = Vec::new();
        if let Some(why) = mtu_mismatch(ifname, mtu, &cfg.socket) {
            if !cfg.allow_mtu_drops {
                return Err(Error::new(ErrorKind::MtuTooLarge, None, why));
            }
            warnings.push(why);
        }
        let mut sockets = Vec::with_capacity(queues.len());
        for &q in queues {
            let s = XskSocket::open(ifname, q, &cfg.socket)?;
            program.register(&s)?;
            sockets.push(s);
        }
        Ok(XdpPort { sockets, program, mtu, warnings })
    }

    /// The attached program.
    pub fn program(&self) -> &XdpProgram {
        &self.program
    }

    /// The interface's MTU when the port was opened.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// What the caller should tell its user (frames the MTU allows but a
    /// socket frame cannot hold, when `allow_mtu_drops` let that pass).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The sockets, in the order of `queues`.
    pub fn sockets(&self) -> &[XskSocket] {
        &self.sockets
    }

    /// The sockets, mutable (for `rx_burst` / `tx_burst`).
    pub fn sockets_mut(&mut self) -> &mut [XskSocket] {
        &mut self.sockets
    }

    /// Splits the port so each socket can go to its own thread; the program
    /// stays attached as long as the returned [`XdpProgram`] lives.
    pub fn into_parts(self) -> (XdpProgram, Vec<XskSocket>) {
        (self.program, self.sockets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_rule_names_the_numbers() {
        let small = XskConfig::default();
        assert_eq!(frame_room(&small), 1792);
        assert_eq!(mtu_mismatch("eth0", 1500, &small), None);
        assert_eq!(mtu_mismatch("eth0", 1774, &small), None, "1774 + 18 = 1792 fits");
        let msg = mtu_mismatch("eth0", 1775, &small).unwrap();
        assert!(msg.contains("MTU 1775") && msg.contains("1793") && msg.contains("1792"), "{msg}");
        assert!(msg.contains("to 1774 or less") && msg.contains("4096-byte"), "{msg}");
        let big = XskConfig { frame_size: 4096, ..XskConfig::default() };
        assert_eq!(mtu_mismatch("veth0", 3822, &big), None);
        let msg = mtu_mismatch("veth0", 9000, &big).unwrap();
        assert!(msg.contains("MTU 9000") && msg.contains("9018") && msg.contains("holds 3840"), "{msg}");
        assert!(!msg.contains("4096-byte"), "{msg}");
    }

    #[test]
    fn missing_interface_is_named_before_the_mtu() {
        let e = interface_mtu("fsnosuch0").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoSuchInterface, "{e}");
        assert!(interface_mtu("lo").unwrap() >= 1500);
    }
}
