//! A capture replayed as a NIC would receive it: read into memory once
//! (bounded), each frame placed on the receive queue RSS gives it.

use flowsteer_capture::{CaptureError, CaptureReader};
use flowsteer_engine::source::Replay;
use flowsteer_rss::{QueueId, RssConfig};
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use std::path::Path;

/// Why a capture cannot be replayed. Each message starts with the path.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The reader's error, its text after the path.
    #[error("{path}: {error}")]
    Capture { path: String, error: CaptureError },
    #[error("{path}: link type {linktype} is not Ethernet; `run` replays Ethernet captures")]
    NotEthernet { path: String, linktype: u32 },
    #[error("{path}: larger than --max-capture-mib {max_mib}")]
    TooLarge { path: String, max_mib: u64 },
    #[error("{path}: no packets")]
    Empty { path: String },
}

/// A capture in memory, split over `queues` receive queues by `rss`.
/// Frames that do not parse go to queue 0 (where the engine counts them as
/// parse drops). At most `max_mib` MiB of frame bytes are read; more is an
/// error before the run. A capture cut short is replayed up to the cut,
/// with a warning in the returned list.
pub fn load(path: &str, rss: &RssConfig, queues: u16, max_mib: u64) -> Result<(Replay, Vec<String>), ReplayError> {
    let queues = queues.max(1);
    let capture_err = |error| ReplayError::Capture { path: path.to_string(), error };
    let mut reader = CaptureReader::open(Path::new(path)).map_err(capture_err)?;
    let mut replay = Replay::new(queues);
    let mut warnings = Vec::new();
    let limit = max_mib.saturating_mul(1 << 20);
    let mut bytes = 0u64;
    let opts = ParseOptions::default();
    loop {
        match reader.next_packet() {
            Ok(Some(p)) => {
                if LinkType::from_pcap(p.linktype) != Some(LinkType::Ethernet) {
                    return Err(ReplayError::NotEthernet { path: path.to_string(), linktype: p.linktype });
                }
                bytes += p.data.len() as u64;
                if bytes > limit {
                    return Err(ReplayError::TooLarge { path: path.to_string(), max_mib });
                }
                let q = match parse_frame(p.data, LinkType::Ethernet, &opts) {
                    Ok(parsed) => parsed
                        .outer
                        .map_or(QueueId(0), |l3| QueueId(rss.place(&l3.tuple, l3.frag.is_some()).queue.0 % queues)),
                    Err(_) => QueueId(0),
                };
                replay.push(q, p.data.to_vec());
            }
            Ok(None) => break,
            Err(CaptureError::Truncated { packets_read }) => {
                warnings.push(format!("{path}: capture truncated after {packets_read} packets; replaying those"));
            }
            Err(e) => return Err(capture_err(e)),
        }
    }
    if replay.queues.iter().all(|q| q.is_empty()) {
        return Err(ReplayError::Empty { path: path.to_string() });
    }
    Ok((replay, warnings))
}
