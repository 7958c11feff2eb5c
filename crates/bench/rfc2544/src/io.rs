//! The sockets a trial drives: AF_XDP (frames pre-built in the UMEM) or
//! AF_PACKET (frames pre-built in buffers of our own, sent with
//! `sendmmsg`, received from a TPACKET_V3 ring), behind one [`Port`].
//!
//! Both paths stamp frames the same way (a transmit buffer that already
//! holds its template gets [`flowsteer_gen::frames::Template::restamp`], any other
//! a full [`flowsteer_gen::frames::Template::write`]) and hand every received frame
//! to the same [`crate::track::RxTracker`].
//!
//! AF_PACKET receive: the ring has a socket filter that keeps only UDP to
//! the test's port ([`flowsteer_afpacket::cbpf::udp_dst_port_filter`]) and
//! ignores the host's own outgoing frames; blocks are handed over after at
//! most [`PACKET_RETIRE_MS`], which bounds the extra latency at low rates.
//! AF_PACKET transmit is blocking (a full socket buffer waits); a frame the
//! kernel refuses (ENOBUFS from a full device queue) is counted as refused
//! and never on the wire.

use std::time::Duration;

use flowsteer_afpacket::{cbpf::udp_dst_port_filter, RxConfig, RxRing, TxConfig, TxSocket};
use flowsteer_xsk::XskSocket;
use serde::Serialize;

/// Which socket family moves the frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    /// AF_XDP: an XSK socket on queue 0, the receiver behind an XDP program.
    Afxdp,
    /// AF_PACKET: `sendmmsg` on a packet socket, a TPACKET_V3 receive ring.
    Afpacket,
    /// AF_XDP, or AF_PACKET when AF_XDP cannot be set up (default).
    Auto,
}

impl IoMode {
    /// Parses `afxdp`, `afpacket` or `auto`.
    pub fn parse(s: &str) -> Option<IoMode> {
        match s {
            "afxdp" => Some(IoMode::Afxdp),
            "afpacket" => Some(IoMode::Afpacket),
            "auto" => Some(IoMode::Auto),
            _ => None,
        }
    }

    /// The name [`IoMode::parse`] takes.
    pub fn name(self) -> &'static str {
        match self {
            IoMode::Afxdp => "afxdp",
            IoMode::Afpacket => "afpacket",
            IoMode::Auto => "auto",
        }
    }
}

/// Frames per AF_PACKET transmit batch (the buffers pre-built per port);
/// `sendmmsg` sends them [`PACKET_TX_CALL`] at a time.
pub const PACKET_TX_BATCH: usize = 256;
/// Frames per `sendmmsg` call.
pub const PACKET_TX_CALL: usize = 64;
/// Longest an AF_PACKET receive block waits before user space sees it, ms.
pub const PACKET_RETIRE_MS: u32 = 1;
/// The receive ring's blocks: a block goes to the receiver when full or
/// [`PACKET_RETIRE_MS`] old, so at low rates each holds about a millisecond
/// of frames and the ring rides out a receiver descheduled for about as
/// many milliseconds as it has blocks. 16 blocks (the crate's default)
/// overflowed at 20,000 fps on a machine with two busy loops (the
/// receiver's own loss, which a trial would have charged to the DUT); 256
/// blocks of 64 KiB (16 MiB) ride out a quarter of a second.
pub const PACKET_RX_BLOCK_COUNT: usize = 256;
/// Bytes of each receive block (any test frame, 9,000-byte jumbo ones
/// included, fits).
pub const PACKET_RX_BLOCK_SIZE: usize = 64 << 10;

/// An AF_PACKET port: a transmit socket with its frame buffers (each with
/// a tag naming the template it holds, `u32::MAX`: none), and a receive
/// ring when the port receives.
#[derive(Debug)]
pub struct PacketPort {
    tx: TxSocket,
    rx: Option<RxRing>,
    bufs: Vec<Vec<u8>>,
    tags: Vec<u32>,
}

impl PacketPort {
    /// Opens the transmit socket on `dev` (calling thread's namespace) and,
    /// with `rx_port`, a receive ring that keeps UDP to that port only.
    pub fn open(dev: &str, rx_port: Option<u16>, frame_room: usize) -> Result<PacketPort, flowsteer_afpacket::Error> {
        let tx = TxSocket::open(dev, &TxConfig { batch: PACKET_TX_CALL, qdisc_bypass: false, ..TxConfig::default() })?;
        let rx = match rx_port {
            Some(p) => Some(RxRing::open(
                dev,
                &RxConfig {
                    filter: udp_dst_port_filter(p),
                    retire_blk_tov_ms: PACKET_RETIRE_MS,
                    block_size: PACKET_RX_BLOCK_SIZE,
                    block_count: PACKET_RX_BLOCK_COUNT,
                    ..RxConfig::default()
                },
            )?),
            None => None,
        };
        Ok(PacketPort {
            tx,
            rx,
            bufs: vec![vec![0u8; frame_room]; PACKET_TX_BATCH],
            tags: vec![u32::MAX; PACKET_TX_BATCH],
        })
    }
}

/// One end's socket(s).
#[derive(Debug)]
pub enum Port {
    /// An XSK socket (transmit, and receive when an XDP program feeds it).
    Xdp(Box<XskSocket>),
    /// Packet sockets.
    Packet(Box<PacketPort>),
}

impl Port {
    /// Which family.
    pub fn io(&self) -> IoMode {
        match self {
            Port::Xdp(_) => IoMode::Afxdp,
            Port::Packet(_) => IoMode::Afpacket,
        }
    }

    /// Most frames one [`Port::tx_prepared`] call takes.
    pub fn tx_batch_max(&self, xdp_ring: usize) -> usize {
        match self {
            Port::Xdp(_) => xdp_ring,
            Port::Packet(p) => p.bufs.len(),
        }
    }

    /// Sends up to `max` frames, each written by `f` into a transmit buffer
    /// with its tag (see `XskSocket::tx_prepared`); returns (frames the
    /// kernel took, frames `f` wrote). The two differ only on AF_PACKET,
    /// when the kernel refused some.
    pub fn tx_prepared(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&mut [u8], &mut u32) -> Option<usize>,
    ) -> (usize, usize) {
        match self {
            Port::Xdp(s) => {
                let k = s.tx_prepared(max, f);
                (k, k)
            }
            Port::Packet(p) => {
                let n = max.min(p.bufs.len());
                let mut lens = [0usize; PACKET_TX_BATCH];
                let mut written = 0;
                for ((buf, tag), len) in p.bufs.iter_mut().zip(&mut p.tags).zip(&mut lens).take(n) {
                    match f(buf, tag) {
                        Some(l) if l > 0 && l <= buf.len() => *len = l,
                        _ => break,
                    }
                    written += 1;
                }
                let frames: Vec<&[u8]> = p.bufs[..written].iter().zip(&lens).map(|(b, &l)| &b[..l]).collect();
                (p.tx.send_batch(&frames), written)
            }
        }
    }

    /// Sends one frame (learning frames).
    pub fn tx_one(&mut self, frame: &[u8]) {
        match self {
            Port::Xdp(s) => {
                s.tx_burst(&[frame]);
            }
            Port::Packet(p) => {
                p.tx.send_batch(&[frame]);
            }
        }
    }

    /// Recycles completed transmit frames (AF_XDP); returns how many.
    pub fn tx_complete(&mut self) -> usize {
        match self {
            Port::Xdp(s) => s.tx_complete(),
            Port::Packet(_) => 0,
        }
    }

    /// Frames queued and not completed (AF_XDP; AF_PACKET's sends complete
    /// inside the call).
    pub fn tx_in_flight(&self) -> u32 {
        match self {
            Port::Xdp(s) => s.tx_in_flight(),
            Port::Packet(_) => 0,
        }
    }

    /// Transmit wake-ups refused so far (AF_XDP) or frames refused (AF_PACKET).
    pub fn tx_errors(&self) -> u64 {
        match self {
            Port::Xdp(s) => s.stats().map(|s| s.tx_kick_errors).unwrap_or(0),
            Port::Packet(p) => p.tx.stats().failed_total(),
        }
    }

    /// Hands up to `max` received frames to `sink`; returns how many.
    pub fn rx_burst(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        match self {
            Port::Xdp(s) => s.rx_burst(max, sink),
            Port::Packet(p) => match &mut p.rx {
                Some(r) => r.poll_burst(max, &mut |f, _| sink(f)),
                None => 0,
            },
        }
    }

    /// Sleeps until a frame may be there or `timeout` passed.
    pub fn wait_rx(&self, timeout: Duration) {
        match self {
            Port::Xdp(s) => {
                let _ = s.wait_rx(timeout);
            }
            Port::Packet(p) => match &p.rx {
                Some(r) => {
                    let _ = r.wait(timeout);
                }
                None => std::thread::sleep(timeout),
            },
        }
    }
}
