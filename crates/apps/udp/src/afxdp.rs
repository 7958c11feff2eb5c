//! `udp-gen --afxdp IFACE`: the planned flows sent as pre-built frames from
//! an AF_XDP socket on one queue of IFACE, through the shared transmit loop
//! ([`crate::txloop`]). Transmit only: no XDP program is attached.
//!
//! Frames: Ethernet II / IPv4 or IPv6 / UDP with valid checksums, the UDP
//! payload `size` bytes holding the 16-byte stamp of
//! [`flowsteer_gen::frames`] (stream id = flow, sequence, transmit time)
//! then zeros. Addresses: source MAC = IFACE's, destination MAC = the
//! neighbour entry of the remote (or of the route's gateway), resolved
//! first with one kernel datagram to the discard port when missing.
//!
//! Accounting: `sent` = frames queued to the transmit ring = completed +
//! still in flight after the drain ([`AfxdpCounts`]).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use flowsteer_gen::frames::{FlowSpec as FrameFlows, FrameSet, FrameSize, FCS_LEN, STAMP_LEN};
use flowsteer_xsk::{XskConfig, XskSocket};
use serde::Serialize;

use crate::client::{ClientReport, FlowReport};
use crate::spread::FlowSpec;
use crate::txloop::{transmit, TxPace};

/// Transmit ring (and frames per wake-up in copy mode).
pub const TX_RING: u32 = 2048;
/// Longest wait for the neighbour entry after the resolving datagram.
pub const RESOLVE_WAIT: Duration = Duration::from_secs(1);
/// Ethernet + UDP header bytes around the payload (IPv4 adds 20, IPv6 40).
pub const ETH_UDP: usize = 14 + 8;

/// Where and how to send.
#[derive(Clone, Debug)]
pub struct AfxdpConfig {
    /// The interface.
    pub iface: String,
    /// Its transmit queue.
    pub queue: u32,
    /// Destination MAC; `None`: the neighbour table's.
    pub dst_mac: Option<[u8; 6]>,
}

/// Why the AF_XDP path could not run; every message is one line.
#[derive(Debug, thiserror::Error)]
pub enum AfxdpError {
    #[error("interface {0} does not exist (see `ip link`)")]
    NoSuchInterface(String),
    #[error("interface {0} is down (`ip link set {0} up`)")]
    Down(String),
    #[error("--afxdp needs root (CAP_NET_ADMIN, CAP_NET_RAW) to open an AF_XDP socket on {0}")]
    NotRoot(String),
    #[error("{remote} is routed through {route_dev}, not {iface}: send from {route_dev} or fix the route")]
    WrongInterface { remote: IpAddr, iface: String, route_dev: String },
    #[error("no route to {0} (`ip route get {0}`)")]
    NoRoute(IpAddr),
    #[error("no neighbour entry for {hop} on {iface} after 1 s (is it up and reachable?); give --dst-mac MAC")]
    NoNeighbour { hop: IpAddr, iface: String },
    #[error("datagram size {size}: the frame would be {frame} bytes, above {iface}'s MTU {mtu} + 14")]
    MtuTooSmall { size: usize, frame: usize, iface: String, mtu: u32 },
    #[error("datagram size {size}: --afxdp needs at least {min} bytes (the 16-byte stamp, and 64-byte frames)")]
    SizeTooSmall { size: usize, min: usize },
    #[error("frames: {0}")]
    Frames(#[from] flowsteer_gen::frames::FrameError),
    #[error("AF_XDP: {0}")]
    Xsk(#[from] flowsteer_xsk::Error),
    #[error("{0}")]
    Io(String),
    #[error("no flows to send")]
    NoFlows,
}

/// The AF_XDP path's own counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AfxdpCounts {
    /// Frames queued to the transmit ring.
    pub sent: u64,
    /// Of them, completed by the kernel (on the wire, or dropped by the driver).
    pub completed: u64,
    /// Of them, still in flight after the drain: never completed.
    pub in_flight: u64,
    /// Loop turns on which the transmit ring was full (retried, not drops).
    pub ring_full_retries: u64,
    /// Transmit wake-ups (sendto) the kernel refused.
    pub kick_errors: u64,
    /// Descriptors the kernel found invalid (XDP_STATISTICS).
    pub invalid_descs: u64,
    /// `sent == completed + in_flight`.
    pub add_up: bool,
    /// The run ended early because the transmit ring took no frame for
    /// [`crate::txloop::STALL`].
    pub stalled: bool,
}

/// Parses `aa:bb:cc:dd:ee:ff` (or `-` separated).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for b in &mut out {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// From `ip -o route get ADDR`: (device, gateway).
pub fn parse_route_get(text: &str) -> Option<(String, Option<IpAddr>)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let after = |k: &str| words.windows(2).find(|w| w[0] == k).map(|w| w[1]);
    let dev = after("dev")?.to_string();
    let via = after("via").and_then(|v| v.parse().ok());
    Some((dev, via))
}

/// From `ip neigh show to ADDR dev IFACE`: the link-layer address of a
/// usable entry (not FAILED/INCOMPLETE).
pub fn parse_neigh(text: &str) -> Option<[u8; 6]> {
    text.lines().find_map(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        if words.iter().any(|w| *w == "FAILED" || *w == "INCOMPLETE") {
            return None;
        }
        let i = words.iter().position(|w| *w == "lladdr")?;
        parse_mac(words.get(i + 1)?)
    })
}

fn ip(args: &[&str]) -> Result<String, AfxdpError> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| AfxdpError::Io(format!("running ip {}: {e}", args.join(" "))))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn sysfs(iface: &str, file: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/{file}")).ok().map(|s| s.trim().to_string())
}

fn neighbour(hop: IpAddr, iface: &str) -> Result<Option<[u8; 6]>, AfxdpError> {
    Ok(parse_neigh(&ip(&["neigh", "show", "to", &hop.to_string(), "dev", iface])?))
}

/// The destination MAC for `remote` on `iface`: the neighbour entry of the
/// route's next hop, resolved with one datagram to `remote`'s discard port
/// (9) when missing, waiting at most [`RESOLVE_WAIT`].
fn resolve_dst_mac(remote: IpAddr, iface: &str) -> Result<[u8; 6], AfxdpError> {
    let (dev, via) =
        parse_route_get(&ip(&["-o", "route", "get", &remote.to_string()])?).ok_or(AfxdpError::NoRoute(remote))?;
    if dev != iface {
        return Err(AfxdpError::WrongInterface { remote, iface: iface.to_string(), route_dev: dev });
    }
    let hop = via.unwrap_or(remote);
    if let Some(m) = neighbour(hop, iface)? {
        return Ok(m);
    }
    let any: SocketAddr = if remote.is_ipv6() { "[::]:0".parse() } else { "0.0.0.0:0".parse() }
        .map_err(|_| AfxdpError::Io("unspecified address".into()))?;
    if let Ok(s) = UdpSocket::bind(any) {
        let _ = s.send_to(&[], SocketAddr::new(remote, 9));
    }
    let end = Instant::now() + RESOLVE_WAIT;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(m) = neighbour(hop, iface)? {
            return Ok(m);
        }
    }
    Err(AfxdpError::NoNeighbour { hop, iface: iface.to_string() })
}

/// Smallest datagram payload: the stamp, and a 64-byte frame for IPv4.
pub fn min_size(v6: bool) -> usize {
    if v6 {
        STAMP_LEN
    } else {
        64 - FCS_LEN - ETH_UDP - 20
    }
}

/// Frame length handed to the interface for a `size`-byte datagram payload.
pub fn frame_len(size: usize, v6: bool) -> usize {
    size + ETH_UDP + if v6 { 40 } else { 20 }
}

/// Sends `flows` (all to one remote) with `size`-byte payloads at `rate`
/// (0: unlimited) for `count` frames or `duration`, from `cfg.iface`;
/// stops early when `stop` is set. Returns the report and the AF_XDP counts.
pub fn run(
    cfg: &AfxdpConfig,
    flows: &[FlowSpec],
    size: usize,
    rate: u64,
    count: Option<u64>,
    duration: Option<Duration>,
    stop: &AtomicBool,
) -> Result<(ClientReport, AfxdpCounts), AfxdpError> {
    let first = flows.first().ok_or(AfxdpError::NoFlows)?;
    let remote = first.remote;
    let v6 = remote.is_ipv6();
    let iface = cfg.iface.as_str();
    let flags = sysfs(iface, "flags").ok_or_else(|| AfxdpError::NoSuchInterface(iface.to_string()))?;
    let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).unwrap_or(0);
    if flags & 1 == 0 {
        return Err(AfxdpError::Down(iface.to_string()));
    }
    let src_mac = sysfs(iface, "address")
        .and_then(|m| parse_mac(&m))
        .ok_or_else(|| AfxdpError::Io(format!("cannot read the MAC address of {iface}")))?;
    let min = min_size(v6);
    if size < min {
        return Err(AfxdpError::SizeTooSmall { size, min });
    }
    let frame = frame_len(size, v6);
    let mtu: u32 = sysfs(iface, "mtu").and_then(|m| m.parse().ok()).unwrap_or(1500);
    if frame > mtu as usize + 14 || frame + FCS_LEN > usize::from(u16::MAX) {
        return Err(AfxdpError::MtuTooSmall { size, frame, iface: iface.to_string(), mtu });
    }
    let dst_mac = match cfg.dst_mac {
        Some(m) => m,
        None => resolve_dst_mac(remote.ip(), iface)?,
    };
    let src_addrs: Vec<IpAddr> = flows.iter().map(|f| f.local.ip()).collect();
    let src_ports: Vec<u16> =
        flows.iter().map(|f| if f.local.port() == 0 { 32768 + f.id as u16 } else { f.local.port() }).collect();
    let spec = FrameFlows {
        src_mac,
        dst_mac,
        src_ip: src_addrs[0],
        dst_ip: remote.ip(),
        src_port: src_ports[0],
        dst_port: remote.port(),
        flows: flows.len() as u32,
        src_ports: src_ports.clone(),
        stream_base: 0,
        src_addrs: src_addrs.clone(),
    };
    let set = FrameSet::new(&spec, FrameSize::Fixed((frame + FCS_LEN) as u16))?;
    let xcfg =
        XskConfig { frame_count: 4096, rx_ring: 64, tx_ring: TX_RING, copy_tx_budget: TX_RING, ..XskConfig::default() };
    let mut sock = XskSocket::open(iface, cfg.queue, &xcfg).map_err(|e| {
        if e.kind() == flowsteer_xsk::ErrorKind::NotPermitted {
            AfxdpError::NotRoot(iface.to_string())
        } else {
            AfxdpError::Xsk(e)
        }
    })?;
    let pace = TxPace {
        rate: if rate == 0 { f64::INFINITY } else { rate as f64 },
        duration: duration.unwrap_or(Duration::from_secs(u64::from(u32::MAX))),
        count,
        burst: 32,
        ring: TX_RING as usize,
    };
    let epoch = Instant::now();
    let out = transmit(&mut sock, &set, &pace, epoch, Some(stop));
    let st = sock.stats()?;
    let counts = AfxdpCounts {
        sent: out.sent,
        completed: st.tx_completed,
        in_flight: out.incomplete,
        ring_full_retries: out.ring_full,
        kick_errors: st.tx_kick_errors,
        invalid_descs: st.kernel.tx_invalid_descs,
        add_up: out.sent == st.tx_completed + out.incomplete,
        stalled: out.stalled,
    };
    let mut send_errors = BTreeMap::new();
    for (k, v) in [
        ("afxdp_in_flight", counts.in_flight),
        ("afxdp_kick_errors", counts.kick_errors),
        ("afxdp_invalid_descs", counts.invalid_descs),
    ] {
        if v > 0 {
            send_errors.insert(k.to_string(), v);
        }
    }
    let n = flows.len() as u64;
    let per_flow = flows
        .iter()
        .enumerate()
        .map(|(i, f)| FlowReport {
            id: f.id,
            local: SocketAddr::new(src_addrs[i], src_ports[i]).to_string(),
            remote: f.remote.to_string(),
            queue: f.queue.map(u16::from),
            cpu: f.cpu,
            hash: f.hash.map(|h| format!("0x{h:08x}")),
            // Frame `seq` goes to flow `seq % flows`.
            sent: out.sent / n + u64::from((i as u64) < out.sent % n),
            replies: 0,
            unique: 0,
            lost: 0,
            reordered: 0,
            duplicates: 0,
            late: 0,
            mismatched: 0,
        })
        .collect();
    let report = ClientReport {
        schema: "flowsteer.udp-gen.v1",
        remote: remote.to_string(),
        flows: flows.len(),
        size,
        rate_target: rate,
        echo: false,
        elapsed_s: out.secs,
        sent: out.sent,
        bytes_sent: out.sent * size as u64,
        send_pps: if out.secs > 0.0 { out.sent as f64 / out.secs } else { 0.0 },
        send_errors,
        stopped_early: out.stopped,
        replies: 0,
        unique: 0,
        duplicates: 0,
        mismatched: 0,
        reordered: 0,
        late: 0,
        lost: 0,
        recv_errors: BTreeMap::new(),
        rcvbuf_drops: 0,
        replies_add_up: true,
        rtt: None,
        per_flow,
    };
    Ok((report, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_and_bad_ones_do_not() {
        assert_eq!(parse_mac("02:00:5e:10:00:01"), Some([2, 0, 0x5e, 0x10, 0, 1]));
        assert_eq!(parse_mac("02-00-5E-10-00-FF"), Some([2, 0, 0x5e, 0x10, 0, 0xff]));
        for bad in
            ["", "02:00:5e:10:00", "02:00:5e:10:00:01:02", "02:00:5e:10:00:0g", "002:00:5e:10:00:01", "02::5e:10:00:01"]
        {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn route_and_neighbour_lines_parse() {
        let r = "10.9.0.2 dev fsv0 src 10.9.0.1 uid 0 \\    cache ";
        assert_eq!(parse_route_get(r), Some(("fsv0".to_string(), None)));
        let r = "1.1.1.1 via 192.168.1.1 dev eth0 src 192.168.1.5 uid 0 \\    cache ";
        assert_eq!(parse_route_get(r), Some(("eth0".to_string(), Some("192.168.1.1".parse().unwrap()))));
        assert_eq!(parse_route_get("RTNETLINK answers: Network is unreachable"), None);
        assert_eq!(
            parse_neigh("10.9.0.2 lladdr 0a:1b:2c:3d:4e:5f REACHABLE\n"),
            Some([0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f])
        );
        assert_eq!(
            parse_neigh("fd00::2 lladdr 0a:1b:2c:3d:4e:5f router STALE"),
            Some([0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f])
        );
        assert_eq!(parse_neigh("10.9.0.2  FAILED"), None);
        assert_eq!(parse_neigh("10.9.0.2 lladdr 0a:1b:2c:3d:4e:5f INCOMPLETE"), None);
        assert_eq!(parse_neigh(""), None);
    }

    #[test]
    fn sizes_map_to_frames() {
        assert_eq!(min_size(false), 18);
        assert_eq!(frame_len(18, false), 60, "18-byte payload: a 64-byte frame with the FCS");
        assert_eq!(min_size(true), 16);
        assert_eq!(frame_len(16, true), 78);
    }
}
