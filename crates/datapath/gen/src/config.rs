//! What to generate ([`GenConfig`], [`SizeDist`]), how it reaches the
//! receive queues ([`Spread`]) and what can be wrong with it ([`GenError`]).

use std::fmt;

use flowsteer_rss::{QueueId, RssConfig};

/// Most flows a generator accepts (`GenConfig::flows`); one flow per
/// address of the 10.0.0.0/8 (IPv4) or per 24-bit suffix (IPv6) source pool.
pub const MAX_FLOWS: u32 = 1 << 24;

/// Flows `0..MAX_TEMPLATED_FLOWS` get a precomputed frame template
/// (94 bytes each, so at most 94 MiB); higher flow ids (only with
/// `flows > 2^20`) build their template on the fly for every packet, which
/// costs ~100 ns instead of ~10 ns.
pub const MAX_TEMPLATED_FLOWS: u32 = 1 << 20;

/// Smallest frame length `SizeDist::Fixed` accepts.
pub const MIN_FRAME_LEN: u16 = 64;

/// Largest frame length `SizeDist::Fixed` accepts (a jumbo frame).
pub const MAX_FRAME_LEN: u16 = 9000;

/// The simple IMIX of [`SizeDist::Imix`]: `(frame length, weight)`, 7:4:1
/// of 64 / 570 / 1518 bytes (mean 353.8 bytes). Lengths are `Frame::bytes()`
/// lengths, i.e. the classic IMIX numbers taken as frames *without* the
/// 4-byte FCS, so the 1518-byte frame carries a 1504-byte IP packet.
pub const IMIX: [(u16, u32); 3] = [(64, 7), (570, 4), (1518, 1)];

/// The link MTU (IP packet length) at which fragmented datagrams are split.
pub const MTU: usize = 1500;

/// UDP payload length of a datagram sent as fragments (whatever
/// [`SizeDist`] says): 3000 bytes, i.e. a 3008-byte UDP datagram split into
/// 1480 + 1480 + 48 bytes (IPv4) or 1448 + 1448 + 112 bytes (IPv6).
pub const FRAG_UDP_PAYLOAD: usize = 3000;

/// Frame lengths of unfragmented packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SizeDist {
    /// Every frame this long (Ethernet header included, no FCS),
    /// `MIN_FRAME_LEN..=MAX_FRAME_LEN`.
    Fixed(u16),
    /// The simple IMIX, see [`IMIX`]; each packet draws its length.
    Imix,
}

/// What to generate. Validated by [`GenConfig::validate`] (and by
/// `Generator::new`).
#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    /// Number of flows, `1..=MAX_FLOWS`; default 1024.
    pub flows: u32,
    /// Share of IPv6 flows, `0..=1`; default 0.25.
    pub ipv6_share: f64,
    /// Share of TCP flows (the rest is UDP), `0..=1`; default 0.5.
    pub tcp_share: f64,
    /// Frame lengths; default `Fixed(64)`. A frame is never shorter than
    /// its headers plus the 12-byte sequence header: 54 (IPv4/UDP),
    /// 66 (IPv4/TCP), 74 (IPv6/UDP), 86 (IPv6/TCP) bytes.
    pub size: SizeDist,
    /// Zipf exponent `s` of the flow popularity (flow `i` weighs
    /// `(i + 1)^-s`); `None` = uniform (round robin). Finite and `>= 0`.
    pub zipf: Option<f64>,
    /// Share of UDP flows whose datagrams are all sent as IP fragments,
    /// `0..=1`; default 0. Chosen per flow (not per datagram) so that a
    /// flow's packets always hash to one queue and its order can be checked.
    pub frag_share: f64,
    /// Fragmenting flows send one datagram in `frag_every` as fragments and
    /// the others whole at the configured size (a mixed-size UDP flow, the
    /// case that separates the fragment policies); 1 = every datagram
    /// fragmented (default). Above 1 the generator needs one receive queue
    /// ([`Spread::Single`] or one RSS queue): a NIC puts a mixed flow's
    /// fragments (2-tuple hash) and whole datagrams (4-tuple hash) on two
    /// queues, and no order can be promised across queues.
    pub frag_every: u32,
    /// Seed of every random choice (addresses, ports, shares, draws).
    pub seed: u64,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            flows: 1024,
            ipv6_share: 0.25,
            tcp_share: 0.5,
            size: SizeDist::Fixed(64),
            zipf: None,
            frag_share: 0.0,
            frag_every: 1,
            seed: 0,
        }
    }
}

impl GenConfig {
    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), GenError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(GenError::Flows(self.flows));
        }
        for (field, value) in
            [("ipv6_share", self.ipv6_share), ("tcp_share", self.tcp_share), ("frag_share", self.frag_share)]
        {
            if !(0.0..=1.0).contains(&value) {
                return Err(GenError::Share { field, value });
            }
        }
        if let SizeDist::Fixed(len) = self.size {
            if !(MIN_FRAME_LEN..=MAX_FRAME_LEN).contains(&len) {
                return Err(GenError::FrameSize(len));
            }
        }
        if let Some(s) = self.zipf {
            if !(s.is_finite() && s >= 0.0) {
                return Err(GenError::Zipf(s));
            }
        }
        if self.frag_every == 0 {
            return Err(GenError::FragEvery);
        }
        Ok(())
    }
}

/// How generated packets are spread over receive queues.
// Built once per run and consumed by `Generator::new`: the size of the
// inline `RssConfig` does not matter, and the engine names the field as is.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Spread {
    /// NIC-like RSS: each flow's packets go to the queue `config` places
    /// them on (`RssConfig::place(&tuple, false)`; fragmenting flows on the
    /// 2-tuple, `place(&tuple_without_ports, true)`). `queues >= 1`, and
    /// every queue `config` selects must be `< queues`.
    Rss {
        /// Number of receive queues.
        queues: u16,
        /// The RSS configuration that picks a flow's queue.
        config: RssConfig,
    },
    /// Everything on queue 0 (one queue): the case RPS exists for.
    Single,
}

/// A configuration the generator refuses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GenError {
    /// `flows` is 0 or above [`MAX_FLOWS`].
    Flows(u32),
    /// A share is outside `0..=1` (or NaN).
    Share {
        /// The field name (`ipv6_share`, `tcp_share`, `frag_share`).
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// `SizeDist::Fixed` length outside `MIN_FRAME_LEN..=MAX_FRAME_LEN`.
    FrameSize(u16),
    /// Zipf exponent negative, infinite or NaN.
    Zipf(f64),
    /// `Spread::Rss` with zero queues.
    NoQueues,
    /// `frag_every` is 0.
    FragEvery,
    /// Mixed-size fragmenting flows (`frag_every > 1`) with several receive queues.
    MixedNeedsOneQueue(u16),
    /// The RSS configuration placed a flow on a queue `>= queues`.
    QueueOutOfRange {
        /// The queue selected.
        queue: QueueId,
        /// The number of queues of the spread.
        queues: u16,
    },
}

impl fmt::Display for GenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenError::Flows(n) => write!(f, "flows must be 1..={MAX_FLOWS}, got {n}"),
            GenError::Share { field, value } => write!(f, "{field} must be in 0..=1, got {value}"),
            GenError::FrameSize(n) => write!(f, "frame size must be {MIN_FRAME_LEN}..={MAX_FRAME_LEN} bytes, got {n}"),
            GenError::Zipf(s) => write!(f, "zipf exponent must be finite and >= 0, got {s}"),
            GenError::NoQueues => write!(f, "RSS spread needs at least one queue"),
            GenError::FragEvery => write!(f, "frag_every must be at least 1"),
            GenError::MixedNeedsOneQueue(q) => write!(
                f,
                "mixed-size fragmenting flows (frag_every > 1) need one receive queue, got {q}: a NIC would put \
                 their fragments and their whole datagrams on different queues"
            ),
            GenError::QueueOutOfRange { queue, queues } => {
                write!(f, "RSS configuration selects queue {queue} but only {queues} queues exist")
            }
        }
    }
}

impl std::error::Error for GenError {}
