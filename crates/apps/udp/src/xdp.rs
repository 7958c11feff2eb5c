//! The echo server on the AF_XDP dataplane (`udp-echo --mode xdp`). One
//! AF_XDP socket per receive queue of the interface, each served by its own
//! thread pinned to that queue's CPU (the NIC's RSS picks the queue, so a
//! flow stays on one core); a request is answered from the same socket, by
//! the same thread, on the same core that received it (a reply never
//! crosses cores). The XDP program claims UDP to the served port (by
//! default; `claim_all` takes every IP packet) and hands the kernel
//! everything else: ping, SSH, ARP and other ports keep working. UDP
//! fragments go to the kernel too (this server does not reassemble; the
//! program never splits one datagram between the two).
//!
//! Replies are built in place, in the request's own UMEM frame, which is
//! then transmitted as is (`XskSocket::reflect_burst`: no copy in user
//! space; the frame returns through the completion ring). Ethernet, IP addresses and UDP ports are
//! swapped, which leaves the IPv4 header checksum valid (a sum, and a swap
//! does not change it); TTL / hop limit are kept. The UDP checksum is
//! computed afresh: a request that crossed a veth (or came from a NIC with
//! transmit offload on the sender) may carry only the partial,
//! pseudo-header checksum, which the peer's kernel would reject. Claimed
//! frames that are not whole UDP datagrams to our address and port (our
//! port on another address of the host; under `claim_all` every other IP
//! packet) are counted as `not_for_us` and dropped: the kernel never sees
//! them.

use flowsteer_wire::{check_ipv4_checksum, check_lengths, parse_frame, proto, LinkType, Malformed, ParseOptions};
use flowsteer_xsk::{AttachConfig, Claim, ErrorKind, Fragments, PortConfig, XdpMode, XdpPort, XdpProgram, XskSocket};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One core's counters (`netstat -s -p udp` names).
#[derive(Clone, Debug, Default, Serialize)]
pub struct XdpCoreCounters {
    pub queue: u32,
    pub cpu: u32,
    /// Frames the socket received.
    pub received: u64,
    /// UDP datagrams to our address and port: echoed (or counted with --sink).
    pub delivered: u64,
    pub sent: u64,
    /// Replies not sent because the transmit ring or frames were full.
    pub dropped_tx_full: u64,
    /// Claimed frames that were not whole UDP datagrams to us (dropped).
    pub not_for_us: u64,
    /// UDP to us with lengths a host refuses (IP length past the frame, a
    /// bad IPv4 option, a UDP length below 8 or past the datagram): dropped.
    pub malformed: u64,
    /// UDP to us whose IPv4 header checksum does not verify: dropped, as
    /// every host drops it (RFC 1122 3.2.1.2).
    pub bad_checksum: u64,
    /// Frames the kernel dropped for this socket (ring full, fill ring empty).
    pub kernel_drops: u64,
    /// Sanity: a reply sent from a CPU other than the socket's (always 0 when pinned).
    pub cpu_mismatch: u64,
}

impl std::ops::AddAssign<&XdpCoreCounters> for XdpCoreCounters {
    /// Adds the counts; `queue` and `cpu` are left as they are.
    fn add_assign(&mut self, o: &XdpCoreCounters) {
        self.received += o.received;
        self.delivered += o.delivered;
        self.sent += o.sent;
        self.dropped_tx_full += o.dropped_tx_full;
        self.not_for_us += o.not_for_us;
        self.malformed += o.malformed;
        self.bad_checksum += o.bad_checksum;
        self.kernel_drops += o.kernel_drops;
        self.cpu_mismatch += o.cpu_mismatch;
    }
}

impl XdpCoreCounters {
    /// Every frame accounted for: received = delivered + not for us +
    /// malformed + bad checksum, and (when echoing) delivered = sent +
    /// dropped because transmit was full.
    pub fn adds_up(&self, echo: bool) -> bool {
        self.received == self.delivered + self.not_for_us + self.malformed + self.bad_checksum
            && (!echo || self.delivered == self.sent + self.dropped_tx_full)
    }
}

/// Why the XDP echo could not run.
#[derive(Debug, thiserror::Error)]
pub enum XdpEchoError {
    #[error("udp-echo --mode xdp: no queues or CPUs to run on")]
    NothingToRun,
    #[error("udp-echo --mode xdp on {iface}: {error}")]
    Open { iface: String, error: String },
    /// The interface's MTU allows frames longer than an AF_XDP frame (the
    /// caller may allow the drops: `XdpEchoOptions::allow_mtu_drops`).
    #[error("udp-echo --mode xdp on {iface}: {error}")]
    Mtu { iface: String, error: String },
    #[error("{0}")]
    Spawn(std::io::Error),
    #[error("an XDP echo thread panicked")]
    Panicked,
}

/// Options of an XDP echo run.
pub struct XdpEchoOptions {
    pub iface: String,
    pub addr: SocketAddr,
    pub echo: bool,
    /// Queue i's thread runs on `cpus[i % len]`.
    pub cpus: Vec<u32>,
    pub queues: Vec<u32>,
    pub mode: XdpMode,
    /// Claim every IPv4/IPv6 packet of the interface, not only UDP to
    /// `addr`'s port (cuts the kernel off: no ping, no SSH on it).
    pub claim_all: bool,
    /// Open even when the interface's MTU allows frames longer than an
    /// AF_XDP frame (they are dropped and counted by the XDP program).
    pub allow_mtu_drops: bool,
}

impl XdpEchoOptions {
    /// What the XDP program takes from the kernel.
    pub fn claim(&self) -> Claim {
        if self.claim_all {
            Claim::All
        } else {
            Claim::Ports { udp: vec![self.addr.port()], tcp: Vec::new(), fragments: Fragments::Pass }
        }
    }
}

/// The sockets and the attached XDP program, ready to serve.
pub struct XdpEcho {
    program: XdpProgram,
    sockets: Vec<XskSocket>,
    cpus: Vec<u32>,
    addr: SocketAddr,
    echo: bool,
    warnings: Vec<String>,
}

impl XdpEcho {
    /// Attaches the XDP program and opens one socket per queue.
    pub fn open(opts: &XdpEchoOptions) -> Result<XdpEcho, XdpEchoError> {
        if opts.cpus.is_empty() || opts.queues.is_empty() {
            return Err(XdpEchoError::NothingToRun);
        }
        let cfg = PortConfig {
            attach: AttachConfig { mode: opts.mode, claim: opts.claim(), ..AttachConfig::default() },
            allow_mtu_drops: opts.allow_mtu_drops,
            ..PortConfig::default()
        };
        let port = XdpPort::open(&opts.iface, &opts.queues, &cfg).map_err(|e| {
            let (iface, error) = (opts.iface.clone(), e.to_string());
            match e.kind() {
                ErrorKind::MtuTooLarge => XdpEchoError::Mtu { iface, error },
                _ => XdpEchoError::Open { iface, error },
            }
        })?;
        let warnings = port.warnings().to_vec();
        let (program, sockets) = port.into_parts();
        Ok(XdpEcho { program, sockets, cpus: opts.cpus.clone(), addr: opts.addr, echo: opts.echo, warnings })
    }

    /// Warnings from opening (an MTU beyond the AF_XDP frame, allowed).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The XDP mode the program was attached in (native or generic).
    pub fn mode(&self) -> XdpMode {
        self.program.mode()
    }

    /// Why native mode was refused, when `auto` fell back to generic mode.
    pub fn fallback(&self) -> Option<&str> {
        self.program.fallback()
    }

    /// Serves until `stop` is set, one pinned thread per socket; returns the
    /// per-core counters. The program is detached on return.
    pub fn run(self, stop: Arc<AtomicBool>) -> Result<Vec<XdpCoreCounters>, XdpEchoError> {
        let XdpEcho { program, sockets, cpus, addr, echo, .. } = self;
        let mut handles = Vec::new();
        for (i, sock) in sockets.into_iter().enumerate() {
            let cpu = cpus[i % cpus.len()];
            let thread_stop = stop.clone();
            let spawned = std::thread::Builder::new().name(format!("fs-xdp-q{}", sock.queue())).spawn(move || {
                let pinned = crate::pin_to_cpu(cpu).is_ok();
                serve(sock, cpu, pinned, addr, echo, &thread_stop)
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Threads already serving stop before the error returns.
                    stop.store(true, Ordering::Relaxed);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(XdpEchoError::Spawn(e));
                }
            }
        }
        let mut rows = Vec::new();
        let mut panicked = false;
        for h in handles {
            match h.join() {
                Ok(row) => rows.push(row),
                Err(_) => panicked = true,
            }
        }
        drop(program); // detaches the XDP program
        if panicked {
            return Err(XdpEchoError::Panicked);
        }
        Ok(rows)
    }
}

fn serve(
    mut sock: XskSocket,
    cpu: u32,
    pinned: bool,
    addr: SocketAddr,
    echo: bool,
    stop: &AtomicBool,
) -> XdpCoreCounters {
    let mut c = XdpCoreCounters { queue: sock.queue(), cpu, ..Default::default() };
    let opts = ParseOptions::default();
    let mut last_check = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // The reply is the request's own UMEM frame, rewritten in place and
        // transmitted from this socket: no copy in user space.
        let mut wanted = 0u64;
        let (got, reflected) = sock.reflect_burst(64, &mut |buf, len| {
            c.received += 1;
            let frame = buf.get_mut(..len)?;
            match echo_reply_in_place(frame, &opts, addr) {
                Echo::Reply => {}
                Echo::NotForUs => {
                    c.not_for_us += 1;
                    return None;
                }
                Echo::Malformed(Malformed::Ipv4Checksum) => {
                    c.bad_checksum += 1;
                    return None;
                }
                Echo::Malformed(_) => {
                    c.malformed += 1;
                    return None;
                }
            }
            c.delivered += 1;
            if echo {
                wanted += 1;
                Some(len)
            } else {
                None
            }
        });
        c.sent += reflected as u64;
        c.dropped_tx_full += wanted.saturating_sub(reflected as u64);
        if reflected > 0 && pinned && crate::current_cpu() != Some(cpu) {
            c.cpu_mismatch += reflected as u64;
        }
        if got == 0 {
            sock.tx_complete();
            let _ = sock.wait_rx(Duration::from_millis(10));
        }
        if last_check.elapsed() > Duration::from_millis(200) {
            last_check = Instant::now();
            if let Ok(st) = sock.stats() {
                c.kernel_drops = st.kernel.rx_drops();
            }
        }
    }
    // Drain transmit completions (bounded).
    let deadline = Instant::now() + Duration::from_millis(200);
    while sock.tx_in_flight() > 0 && Instant::now() < deadline {
        sock.tx_complete();
    }
    if let Ok(st) = sock.stats() {
        c.kernel_drops = st.kernel.rx_drops();
    }
    c
}

/// What [`echo_reply_in_place`] made of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Echo {
    /// The frame is now the reply.
    Reply,
    /// Not a whole UDP datagram to our address and port (left unchanged).
    NotForUs,
    /// UDP to us, but with lengths a host refuses (left unchanged).
    Malformed(Malformed),
}

/// Turns a UDP request to `addr` into its reply, in place. The frame is
/// changed only when the answer is [`Echo::Reply`].
pub fn echo_reply_in_place(frame: &mut [u8], opts: &ParseOptions, addr: SocketAddr) -> Echo {
    let Ok(parsed) = parse_frame(frame, LinkType::Ethernet, opts) else { return Echo::NotForUs };
    let Some(l3) = parsed.outer else { return Echo::NotForUs };
    if parsed.encap.is_some() || l3.frag.is_some() || l3.tuple.proto != proto::UDP {
        return Echo::NotForUs;
    }
    let Some((_, dport)) = l3.tuple.ports else { return Echo::NotForUs };
    if l3.tuple.dst != addr.ip() || dport != addr.port() {
        return Echo::NotForUs;
    }
    if let Err(m) = check_lengths(frame, &l3).and_then(|()| check_ipv4_checksum(frame, &l3)) {
        return Echo::Malformed(m);
    }
    let Some(l4) = l3.l4_offset else { return Echo::NotForUs };
    let (ip, alen) = if l3.tuple.src.is_ipv4() { (l3.l3_offset + 12, 4) } else { (l3.l3_offset + 8, 16) };
    // The checks above place the IP addresses and the whole UDP datagram
    // inside the frame; stay defensive anyway.
    let ip_end = l3.l3_offset + l3.ip_total_len;
    if frame.len() < 12 || frame.len() < ip + 2 * alen || ip_end > frame.len() || l4 + 8 > ip_end {
        return Echo::NotForUs;
    }
    // Ethernet: destination <-> source.
    let (d, s) = frame.split_at_mut(6);
    d.swap_with_slice(&mut s[..6]);
    // IP: source <-> destination (adjacent fields).
    let (a, b) = frame[ip..ip + 2 * alen].split_at_mut(alen);
    a.swap_with_slice(b);
    // UDP: source port <-> destination port, then the checksum afresh over
    // the datagram as its length field gives it.
    let (p, q) = frame[l4..l4 + 4].split_at_mut(2);
    p.swap_with_slice(q);
    let udp_end = l4 + usize::from(u16::from_be_bytes([frame[l4 + 4], frame[l4 + 5]]));
    frame[l4 + 6] = 0;
    frame[l4 + 7] = 0;
    let c = flowsteer_wire::checksum::udp_checksum(l3.tuple.dst, l3.tuple.src, &frame[l4..udp_end]);
    frame[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    Echo::Reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_wire::build::udp_frame;
    use std::net::IpAddr;

    #[test]
    fn reply_swaps_addresses_and_keeps_checksums_valid() {
        for (src, dst) in [
            ("10.0.0.1".parse::<IpAddr>().unwrap(), "10.0.0.2".parse::<IpAddr>().unwrap()),
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
        ] {
            let mut req = udp_frame(src, dst, 4000, 9000, b"hello, echo");
            // A partial (offloaded) checksum, as a veth hands it over.
            let l4 = if src.is_ipv4() { 34 } else { 54 };
            req[l4 + 6] ^= 0x5a;
            let mut f = req.clone();
            assert_eq!(echo_reply_in_place(&mut f, &ParseOptions::default(), SocketAddr::new(dst, 9000)), Echo::Reply);
            let want = udp_frame(dst, src, 9000, 4000, b"hello, echo");
            // Same bytes as a reply built from scratch, MACs aside (swapped).
            assert_eq!(&f[12..], &want[12..], "{src}");
            assert_eq!(&f[..6], &req[6..12]);
            assert_eq!(&f[6..12], &req[..6]);
            // Not for us: other port, other address.
            let mut g = req.clone();
            let o = ParseOptions::default();
            assert_eq!(echo_reply_in_place(&mut g, &o, SocketAddr::new(dst, 9001)), Echo::NotForUs);
            assert_eq!(echo_reply_in_place(&mut g, &o, SocketAddr::new(src, 9000)), Echo::NotForUs);
            assert_eq!(echo_reply_in_place(&mut [0u8; 10], &o, SocketAddr::new(dst, 9000)), Echo::NotForUs);
            assert_eq!(g, req, "a frame not for us is left as it was");
        }
    }

    /// UDP to us with a length of 0, a length past the datagram, or a
    /// zero-length IPv4 option is not echoed and is left unchanged.
    #[test]
    fn impossible_lengths_are_not_echoed() {
        let (src, dst): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let to = SocketAddr::new(dst, 9000);
        let req = udp_frame(src, dst, 4000, 9000, b"hello, echo");
        let mut cases = Vec::new();
        for len in [0u16, 7, 100] {
            let mut f = req.clone();
            f[38..40].copy_from_slice(&len.to_be_bytes());
            cases.push((f, Malformed::UdpLength));
        }
        let mut opt = req.clone();
        opt.splice(34..34, [0x44u8, 0, 0, 0]); // timestamp option with length 0
        opt[14] = 0x46;
        let total = u16::from_be_bytes([opt[16], opt[17]]) + 4;
        opt[16..18].copy_from_slice(&total.to_be_bytes());
        cases.push((opt, Malformed::Ipv4Option));
        let mut long = req.clone();
        long[16..18].copy_from_slice(&1400u16.to_be_bytes());
        cases.push((long, Malformed::IpBeyondFrame));
        let mut bad_sum = req.clone();
        bad_sum[24] ^= 0x10;
        cases.push((bad_sum, Malformed::Ipv4Checksum));
        for (f, why) in cases {
            let mut g = f.clone();
            assert_eq!(echo_reply_in_place(&mut g, &ParseOptions::default(), to), Echo::Malformed(why));
            assert_eq!(g, f);
        }
        // A UDP length shorter than the IP payload (Ethernet padding kept by
        // the IP length) is a datagram the kernel trims and accepts.
        let mut padded = req.clone();
        padded.extend_from_slice(&[0; 4]);
        let total = u16::from_be_bytes([padded[16], padded[17]]) + 4;
        padded[16..18].copy_from_slice(&total.to_be_bytes());
        padded[24..26].copy_from_slice(&[0, 0]);
        let sum = flowsteer_wire::checksum::internet_checksum(&padded[14..34]);
        padded[24..26].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(echo_reply_in_place(&mut padded, &ParseOptions::default(), to), Echo::Reply);
    }
}
