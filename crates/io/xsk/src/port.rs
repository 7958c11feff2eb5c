//! An interface with the XDP program attached and one XSK per chosen queue:
//! what the engine opens per port.

use crate::error::Error;
use crate::prog::{AttachConfig, XdpMode, XdpProgram};
use crate::socket::{XskConfig, XskSocket};

/// Options of [`XdpPort::open`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortConfig {
    /// How to attach the XDP program.
    pub attach: AttachConfig,
    /// Sizes and bind mode of every socket.
    pub socket: XskConfig,
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
}

impl XdpPort {
    /// Attaches the program to `ifname`, opens a socket on each of `queues`
    /// (in that order) and registers it. IP frames arriving on other queues,
    /// and every non-IP frame, keep going to the kernel.
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
        let program = XdpProgram::attach(ifname, &cfg.attach)?;
        let mut sockets = Vec::with_capacity(queues.len());
        for &q in queues {
            let s = XskSocket::open(ifname, q, &cfg.socket)?;
            program.register(&s)?;
            sockets.push(s);
        }
        Ok(XdpPort { sockets, program })
    }

    /// The attached program.
    pub fn program(&self) -> &XdpProgram {
        &self.program
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
