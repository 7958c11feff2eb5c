//! Batched transmit of whole Ethernet frames on a bound packet socket.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::error::{errno_name, Error};
use crate::open::{lookup_ifindex, open_packet_socket};
use crate::sys;
use crate::vnet::{VnetHdr, VNET_HDR_LEN};

/// Frames per `sendmmsg` call when none is given.
pub const DEFAULT_TX_BATCH: usize = 64;
/// Most frames per `sendmmsg` call (the kernel's `UIO_MAXIOV`).
pub const MAX_TX_BATCH: usize = 1024;

/// Transmit options. `Default`: batches of [`DEFAULT_TX_BATCH`], through
/// the qdisc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxConfig {
    /// Frames per system call, 1..=[`MAX_TX_BATCH`]; longer batches given
    /// to [`TxSocket::send_batch`] are split.
    pub batch: usize,
    /// `PACKET_QDISC_BYPASS`: hand frames straight to the driver, skipping
    /// traffic control. A device that cannot take a frame then drops it;
    /// it is counted under the kernel's errno (ENOBUFS). Default false.
    pub qdisc_bypass: bool,
    /// Take each frame's offload state (`PACKET_VNET_HDR`): frames go out
    /// through [`TxSocket::send_batch_vnet`], each with a [`VnetHdr`] that
    /// may ask for a partial checksum to be completed or a GSO frame to be
    /// segmented downstream. Default false.
    pub vnet_hdr: bool,
}

impl Default for TxConfig {
    fn default() -> Self {
        TxConfig { batch: DEFAULT_TX_BATCH, qdisc_bypass: false, vnet_hdr: false }
    }
}

/// Transmit counters: `attempted = sent + sum(failed)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Frames given to [`TxSocket::send_batch`].
    pub attempted: u64,
    /// Frames the kernel accepted.
    pub sent: u64,
    /// Bytes of the accepted frames.
    pub bytes: u64,
    /// Refused frames by errno (see [`errno_name`]): EMSGSIZE (longer than
    /// the MTU), ENOBUFS (dropped by the qdisc or device), ENETDOWN...
    pub failed: BTreeMap<i32, u64>,
}

impl TxStats {
    pub fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }

    /// The failures as `(name, count)`, e.g. `("EMSGSIZE", 1)`.
    pub fn failed_by_name(&self) -> Vec<(String, u64)> {
        self.failed.iter().map(|(e, n)| (errno_name(*e), *n)).collect()
    }
}

/// A packet socket that sends whole Ethernet frames (the caller writes the
/// MAC header) on one interface. Bound with protocol 0, so it receives
/// nothing. Blocking: a full send buffer waits for room.
#[derive(Debug)]
pub struct TxSocket {
    fd: OwnedFd,
    ifname: String,
    ifindex: u32,
    batch: usize,
    vnet_hdr: bool,
    stats: TxStats,
}

impl TxSocket {
    /// Opens a transmit socket on `ifname` (in the calling thread's network
    /// namespace).
    pub fn open(ifname: &str, config: &TxConfig) -> Result<TxSocket, Error> {
        if config.batch == 0 || config.batch > MAX_TX_BATCH {
            return Err(Error::Config(format!("TX batch {} must be between 1 and {MAX_TX_BATCH}", config.batch)));
        }
        let ifindex = lookup_ifindex(ifname)?;
        let fd = open_packet_socket()?;
        if config.qdisc_bypass {
            sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)
                .map_err(|e| Error::os("PACKET_QDISC_BYPASS", e))?;
        }
        if config.vnet_hdr {
            sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)
                .map_err(|e| Error::os("PACKET_VNET_HDR", e))?;
        }
        sys::bind_ll(&fd, ifindex, 0).map_err(|e| match e {
            libc::ENODEV | libc::ENXIO => Error::NoSuchInterface(ifname.to_string()),
            e => Error::os(format!("bind to {ifname}"), e),
        })?;
        Ok(TxSocket {
            fd,
            ifname: ifname.to_string(),
            ifindex,
            batch: config.batch,
            vnet_hdr: config.vnet_hdr,
            stats: TxStats::default(),
        })
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Sends every frame (in order, `batch` per system call) and returns how
    /// many the kernel accepted. A refused frame is counted under its errno
    /// and skipped; it is not retried. On a socket opened with
    /// [`TxConfig::vnet_hdr`] each frame goes with [`VnetHdr::PLAIN`].
    pub fn send_batch<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> usize {
        let refs: Vec<&[u8]> = frames.iter().map(AsRef::as_ref).collect();
        match self.vnet_hdr {
            true => self.send(&refs, Some(&vec![VnetHdr::PLAIN.to_bytes(); refs.len()])),
            false => self.send(&refs, None),
        }
    }

    /// As [`Self::send_batch`], each frame with its offload state
    /// (`heads[i]` goes with `frames[i]`). Needs [`TxConfig::vnet_hdr`]:
    /// without it, or with fewer headers than frames, nothing is sent and
    /// every frame is counted failed (EINVAL).
    pub fn send_batch_vnet(&mut self, frames: &[&[u8]], heads: &[VnetHdr]) -> usize {
        if !self.vnet_hdr || heads.len() != frames.len() {
            self.stats.attempted += frames.len() as u64;
            *self.stats.failed.entry(libc::EINVAL).or_insert(0) += frames.len() as u64;
            return 0;
        }
        let raw: Vec<[u8; VNET_HDR_LEN]> = heads.iter().map(VnetHdr::to_bytes).collect();
        self.send(frames, Some(&raw))
    }

    fn send(&mut self, frames: &[&[u8]], heads: Option<&[[u8; VNET_HDR_LEN]]>) -> usize {
        let mut sent_now = 0;
        for (c, refs) in frames.chunks(self.batch).enumerate() {
            let at = c * self.batch;
            self.stats.attempted += refs.len() as u64;
            let mut i = 0;
            while i < refs.len() {
                let h = heads.map(|h| &h[at + i..at + refs.len()]);
                match sys::sendmmsg(&self.fd, &refs[i..], h) {
                    Ok(0) => {
                        // No progress and no error: account the rest as failed.
                        *self.stats.failed.entry(libc::EAGAIN).or_insert(0) += (refs.len() - i) as u64;
                        break;
                    }
                    Ok(n) => {
                        self.stats.sent += n as u64;
                        self.stats.bytes += refs[i..i + n].iter().map(|f| f.len() as u64).sum::<u64>();
                        sent_now += n;
                        i += n;
                    }
                    Err(libc::EINTR) => {}
                    Err(e) => {
                        *self.stats.failed.entry(e).or_insert(0) += 1;
                        i += 1;
                    }
                }
            }
        }
        sent_now
    }

    pub fn stats(&self) -> &TxStats {
        &self.stats
    }
}

impl AsFd for TxSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_batch_and_missing_interface() {
        let e = TxSocket::open("lo", &TxConfig { batch: 0, ..TxConfig::default() }).unwrap_err();
        assert!(e.to_string().contains("TX batch 0"), "{e}");
        let e = TxSocket::open("lo", &TxConfig { batch: 1025, ..TxConfig::default() }).unwrap_err();
        assert!(matches!(e, Error::Config(_)));
        let e = TxSocket::open("nosuchtx0", &TxConfig::default()).unwrap_err();
        assert!(e.to_string().contains("nosuchtx0"), "{e}");
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::EMSGSIZE), "EMSGSIZE");
        assert_eq!(errno_name(libc::ENOBUFS), "ENOBUFS");
        assert_eq!(errno_name(9999), "errno 9999");
        let mut s = TxStats::default();
        s.failed.insert(libc::EMSGSIZE, 2);
        s.failed.insert(libc::ENOBUFS, 1);
        assert_eq!(s.failed_total(), 3);
        assert!(s.failed_by_name().contains(&("EMSGSIZE".to_string(), 2)));
    }
}
