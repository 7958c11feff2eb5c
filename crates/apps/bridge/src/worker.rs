//! A forwarding worker: one pinned thread that polls its receive queues on
//! every member port, learns and decides with the MAC table once per burst,
//! and sends each burst's output per egress port in one batch through the
//! transmit handles it owns (no lock on the way).
//!
//! Per loop: load the member-port list (`arc-swap`, one atomic load; a new
//! version makes the worker take the sockets of added ports and drop those
//! of removed ones, then acknowledge the version); for each port and each of
//! its queues of this worker: receive a burst, forward it, transmit it.
//! Idle (a whole round without a frame): the worker keeps polling its
//! rings without a syscall for [`IDLE_SPIN`] after a round that found a
//! queue (a whole burst waiting: the worker is behind), so a busy worker
//! never sleeps between bursts and the kernel never has to wake it;
//! otherwise (lighter traffic, or the spin ran out) it
//! sleeps in `poll(2)` on its sockets for at most 1 ms, and a frame wakes
//! it. Light traffic costs a wake-up per burst, heavy traffic none.
//!
//! RX copy: a frame is copied out of the receive buffer into the worker's
//! burst buffer while the receive call hands it over, and the buffer goes
//! back to the kernel when the call returns. Frames at or below the copy
//! threshold are counted `rx_copied`. Larger frames are copied too: the
//! AF_XDP (`XskSocket::rx_burst`) and AF_PACKET (`RxRing::poll_burst`)
//! receive calls lend each frame only for the duration of one callback, so
//! keeping a large frame in its receive buffer until the burst is sent
//! needs a receive call that lends the whole burst (and, for AF_XDP, a
//! transmit call that takes a UMEM frame by address, as `reflect_burst`
//! does for one socket, across two sockets sharing a UMEM).

use crate::config::TxQueue;
use crate::counters::{PortCounters, Reason};
use crate::frame::{out_len, padded, write_frame, EthHeader, MIN_TX_FRAME};
use crate::port::{PortShared, WorkerPort};
use crate::shared::{Member, PortList, Shared};
use flowsteer_afpacket::{GsoType, VnetHdr};
use flowsteer_fdb::{Decision, DropReason, FdbWorker, VlanId};
use flowsteer_wire::offload::{self, GsoKind, Repair};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a worker reads its sockets' kernel drop counters.
const KERNEL_COUNTS_EVERY: Duration = Duration::from_millis(100);
/// Longest idle wait.
const IDLE_WAIT: Duration = Duration::from_millis(1);
/// How long a worker that found a queue keeps polling without sleeping.
/// Measured on veth at 64 bytes (`flowsteer rfc2544`): sleeping between
/// bursts costs a cross-CPU wake-up per burst on the sender's CPU.
const IDLE_SPIN: Duration = Duration::from_micros(200);
/// Times a full AF_XDP transmit ring is drained and retried before the
/// rest of a batch is dropped (`tx_failed`).
const TX_RETRIES: usize = 64;
/// `PACKET_OUTGOING`: a frame this host sent (never bridged back).
const PACKET_OUTGOING: u8 = 4;

struct Local {
    port: Arc<PortShared>,
    h: WorkerPort,
}

/// A received frame in the burst buffer.
#[derive(Clone, Copy)]
struct RxFrame {
    start: usize,
    len: usize,
    /// The receive queue it came in on.
    rxq: u32,
    /// Its offload state (AF_PACKET ports; AF_XDP frames are plain).
    vnet: VnetHdr,
    /// Cut short by the receive ring.
    truncated: bool,
}

/// A frame to send: in the burst buffer or in the rewrite buffer, with
/// the offload state an AF_PACKET egress hands to the kernel (always
/// plain for an AF_XDP egress).
#[derive(Clone, Copy)]
struct Out {
    rewritten: bool,
    start: usize,
    len: usize,
    rxq: u32,
    vnet: VnetHdr,
}

#[derive(Default)]
struct Buffers {
    arena: Vec<u8>,
    frames: Vec<RxFrame>,
    rewrite: Vec<u8>,
    /// A GSO super-frame retagged before it is segmented.
    scratch: Vec<u8>,
    /// Segment lengths of the last [`offload::segment`].
    seg_lens: Vec<usize>,
    /// Per egress port id.
    out: Vec<Vec<Out>>,
    /// The padded copies of one egress batch's short frames, in batch
    /// order (see [`Worker::send`]).
    pad: Vec<[u8; MIN_TX_FRAME]>,
    /// Partial checksums completed and GSO frames segmented in this
    /// burst (added to the worker's counters after it).
    completed: u64,
    segmented: u64,
}

pub(crate) struct Worker {
    w: usize,
    shared: Arc<Shared>,
    fdb: FdbWorker,
    local: Vec<Option<Local>>,
    version: u64,
    buf: Buffers,
}

impl Worker {
    pub(crate) fn new(w: usize, shared: Arc<Shared>, fdb: FdbWorker) -> Worker {
        let burst = shared.cfg.burst;
        let buf = Buffers {
            arena: Vec::with_capacity(burst * 2048),
            frames: Vec::with_capacity(burst),
            rewrite: Vec::with_capacity(burst * 2048),
            scratch: Vec::new(),
            seg_lens: Vec::new(),
            out: Vec::new(),
            pad: Vec::with_capacity(burst),
            completed: 0,
            segmented: 0,
        };
        Worker { w, shared, fdb, local: Vec::new(), version: u64::MAX, buf }
    }

    pub(crate) fn run(mut self) {
        let shared = self.shared.clone();
        let mut next_counts = Instant::now();
        let mut spin_until = next_counts;
        loop {
            let stopping = shared.stop.load(Ordering::Acquire);
            let list = shared.ports.load();
            if list.version != self.version {
                self.sync(&list);
            }
            if stopping {
                break;
            }
            let mut got = 0;
            for port in &list.ports {
                got += self.poll_port(port.id.0 as usize, &list);
            }
            for l in self.local.iter_mut().flatten() {
                for s in &mut l.h.xsk {
                    if s.tx_in_flight() > 0 {
                        s.tx_complete();
                    }
                }
            }
            let now = Instant::now();
            if now >= next_counts {
                self.kernel_counts();
                next_counts = now + KERNEL_COUNTS_EVERY;
            }
            if got >= shared.cfg.burst {
                spin_until = now + IDLE_SPIN;
            } else if got == 0 {
                if now < spin_until {
                    std::hint::spin_loop();
                } else {
                    self.idle_wait();
                }
            }
        }
        self.kernel_counts();
        for l in self.local.iter_mut().flatten() {
            for s in &mut l.h.xsk {
                for _ in 0..TX_RETRIES {
                    if s.tx_in_flight() == 0 {
                        break;
                    }
                    s.tx_complete();
                }
            }
        }
        self.local.clear();
    }

    /// Takes the sockets of ports new in `list`, hands back those of ports
    /// no longer in it, and acknowledges the version.
    ///
    /// A removed port's sockets go back to its hand-off slot, where the
    /// writer drops them after the acknowledgement: closing a packet or
    /// AF_XDP socket waits for an RCU grace period (`synchronize_net`),
    /// milliseconds in which this worker's other queues would overflow.
    fn sync(&mut self, list: &PortList) {
        for slot in self.local.iter_mut() {
            if slot.as_ref().is_some_and(|l| !list.ports.iter().any(|p| Arc::ptr_eq(&p.port, &l.port))) {
                if let Some(l) = slot.take() {
                    if let Ok(mut h) = l.port.handoff[self.w].lock() {
                        *h = Some(l.h);
                    }
                }
            }
        }
        for p in &list.ports {
            let id = p.id.0 as usize;
            if self.local.len() <= id {
                self.local.resize_with(id + 1, || None);
                self.buf.out.resize_with(id + 1, Vec::new);
            }
            if self.local[id].is_none() {
                let taken = p.handoff[self.w].lock().ok().and_then(|mut h| h.take());
                if let Some(h) = taken {
                    self.local[id] = Some(Local { port: p.port.clone(), h });
                }
            }
        }
        self.version = list.version;
        self.shared.acks[self.w].store(list.version, Ordering::Release);
    }

    /// Receives, forwards and sends one burst per queue of port `id`.
    fn poll_port(&mut self, id: usize, list: &PortList) -> usize {
        let Some(l) = self.local.get(id).and_then(Option::as_ref) else { return 0 };
        let (nxsk, ring) = (l.h.xsk.len(), l.h.ring.is_some());
        let mut got = 0;
        for qi in 0..nxsk {
            let n = self.receive(id, Some(qi));
            if n > 0 {
                got += n;
                self.forward_and_send(id, list);
            }
        }
        if ring {
            let n = self.receive(id, None);
            if n > 0 {
                got += n;
                self.forward_and_send(id, list);
            }
        }
        got
    }

    /// One receive burst into the burst buffer: from AF_XDP queue `qi`, or
    /// from the AF_PACKET ring when `qi` is None.
    fn receive(&mut self, id: usize, qi: Option<usize>) -> usize {
        let Buffers { arena, frames, .. } = &mut self.buf;
        arena.clear();
        frames.clear();
        let Some(Some(l)) = self.local.get_mut(id) else { return 0 };
        let threshold = self.shared.cfg.rx_copy_threshold;
        let burst = self.shared.cfg.burst;
        let mut copied = 0u64;
        let mut completed = 0u64;
        match qi {
            Some(qi) => {
                let sock = &mut l.h.xsk[qi];
                let rxq = sock.queue();
                sock.rx_burst(burst, &mut |f: &[u8]| {
                    let start = arena.len();
                    arena.extend_from_slice(f);
                    // AF_XDP hands over no offload state: a frame a local
                    // sender left to checksum offload is told by its
                    // checksum field (see `offload::repair_partial`).
                    if let Some(copy) = arena.get_mut(start..) {
                        completed += u64::from(offload::repair_partial(copy) == Repair::Completed);
                    }
                    frames.push(RxFrame { start, len: f.len(), rxq, vnet: VnetHdr::PLAIN, truncated: false });
                    copied += u64::from(f.len() <= threshold);
                });
            }
            None => {
                let Some(ring) = l.h.ring.as_mut() else { return 0 };
                ring.poll_burst(burst, &mut |f: &[u8], meta| {
                    if meta.packet_type == PACKET_OUTGOING {
                        return;
                    }
                    let start = arena.len();
                    let mut vnet = meta.vnet.unwrap_or(VnetHdr::PLAIN);
                    match meta.vlan {
                        // The kernel took the tag out of the frame: put it back.
                        Some(tag) if f.len() >= 12 => {
                            arena.extend_from_slice(&f[..12]);
                            let tpid = if tag.tpid == 0 { 0x8100 } else { tag.tpid };
                            arena.extend_from_slice(&tpid.to_be_bytes());
                            arena.extend_from_slice(&tag.tci.to_be_bytes());
                            arena.extend_from_slice(&f[12..]);
                            vnet = vnet.shifted(4);
                        }
                        _ => arena.extend_from_slice(f),
                    }
                    let len = arena.len() - start;
                    let truncated = meta.is_truncated();
                    frames.push(RxFrame { start, len, rxq: 0, vnet, truncated });
                    copied += u64::from(len <= threshold);
                });
            }
        }
        self.shared.workers[self.w].rx_copied.add(copied);
        self.shared.workers[self.w].csum_completed.add(completed);
        frames.len()
    }

    /// Decides and queues every frame of the burst from port `id`, then
    /// sends. The rules, in order (each drop counted by its reason):
    /// cut short (`truncated`), no Ethernet header (`malformed`), a group
    /// or zero source (`bad_src`); with VLAN filtering, the frame's VLAN
    /// (its tag, or the PVID when untagged or priority-tagged) admitted by
    /// the ingress port (`vlan`); the ingress port's state: not
    /// forwarding (`port_state`, learned first when its state learns);
    /// then the MAC table's decision. Known unicast goes to its port if
    /// that one forwards and is up (`port_state`), is not isolated from
    /// the ingress (`isolated`) and admits the VLAN (`vlan`); a flood
    /// goes to every other port that forwards, is up, is not isolated from
    /// the ingress, admits the VLAN and floods that kind of frame
    /// (`flood`, `mcast_flood`, `bcast_flood`).
    fn forward_and_send(&mut self, id: usize, list: &PortList) {
        let Some(Some(l)) = self.local.get(id) else { return };
        let ingress = l.port.clone();
        let now_s = self.shared.start.elapsed().as_secs();
        let wc = &self.shared.workers[self.w];
        let cfg = &self.shared.cfg;
        let tpid = cfg.vlan_protocol.tpid();
        let w = self.w;
        let buf = &mut self.buf;
        buf.rewrite.clear();
        let pc = &ingress.counters[w];
        let n = buf.frames.len() as u64;
        pc.received.add(n);
        wc.received.add(n);
        let dropped = |r: Reason| {
            pc.dropped.add(r, 1);
            wc.dropped.add(r, 1);
        };
        let Some(member) = list.get(ingress.id) else {
            // Removed in this version: the worker hands its sockets back next loop.
            pc.dropped.add(Reason::NoPort, n);
            wc.dropped.add(Reason::NoPort, n);
            return;
        };
        let flags = member.conf.flags;
        let filtering = list.vlan_filtering;
        let ingress_vlans = &member.conf.vlans;
        let learns = flags.learns();
        let forwards = flags.state.forwards();
        match self.fdb.burst(now_s) {
            None => {
                // The writer is gone (the bridge is stopping): nothing is forwarded.
                pc.dropped.add(Reason::NoPort, n);
                wc.dropped.add(Reason::NoPort, n);
                return;
            }
            Some(mut burst) => {
                for i in 0..buf.frames.len() {
                    let fr = buf.frames[i];
                    if fr.truncated {
                        dropped(Reason::Truncated);
                        continue;
                    }
                    let bytes = &buf.arena[fr.start..fr.start + fr.len];
                    let Ok(hdr) = EthHeader::parse(bytes, tpid) else {
                        dropped(Reason::Malformed);
                        continue;
                    };
                    if !hdr.src.is_learnable_source() {
                        dropped(Reason::BadSrc);
                        continue;
                    }
                    let vid = if filtering {
                        let Some(vid) = hdr.tagged_vid().or(ingress_vlans.pvid) else {
                            dropped(Reason::Vlan);
                            continue;
                        };
                        if !ingress_vlans.admits(vid) {
                            dropped(Reason::Vlan);
                            continue;
                        }
                        Some(vid)
                    } else {
                        None
                    };
                    let key_vlan = VlanId(vid.unwrap_or(0));
                    if !forwards {
                        if learns {
                            burst.learn(ingress.id, hdr.src, key_vlan);
                        }
                        dropped(Reason::PortState);
                        continue;
                    }
                    let decision = match learns {
                        true => burst.forward(ingress.id, hdr.src, hdr.dst, key_vlan),
                        false => burst.decide(ingress.id, hdr.dst, key_vlan),
                    };
                    match decision {
                        Decision::Unicast(p) => {
                            let Some(eg) = list.get(p) else {
                                dropped(Reason::NoPort);
                                continue;
                            };
                            if let Err(r) = egress_allows(member, eg, vid) {
                                dropped(r);
                                continue;
                            }
                            let fr = match settle_checksum(buf, i, !eg.takes_offload()) {
                                Some(fr) => fr,
                                None => {
                                    dropped(Reason::Offload);
                                    continue;
                                }
                            };
                            match enqueue(buf, eg, fr, &hdr, vid, w, tpid) {
                                Ok(()) => {
                                    pc.forwarded.add(1);
                                    wc.forwarded.add(1);
                                }
                                Err(r) => dropped(r),
                            }
                        }
                        Decision::Flood => {
                            let kind = FloodKind::of(hdr.dst);
                            let admits = |eg: &Member| {
                                eg.id != ingress.id && kind.floods_out_of(eg) && egress_allows(member, eg, vid).is_ok()
                            };
                            let plain_needed = list.ports.iter().any(|eg| admits(eg) && !eg.takes_offload());
                            let Some(fr) = settle_checksum(buf, i, plain_needed) else {
                                dropped(Reason::Offload);
                                continue;
                            };
                            for eg in &list.ports {
                                if admits(eg) {
                                    let _ = enqueue(buf, eg, fr, &hdr, vid, w, tpid);
                                }
                            }
                            pc.flooded.add(1);
                            wc.flooded.add(1);
                        }
                        Decision::Drop(DropReason::Reserved) => dropped(Reason::Reserved),
                        Decision::Drop(DropReason::SamePort) => dropped(Reason::SamePort),
                    }
                }
            }
        }
        wc.csum_completed.add(std::mem::take(&mut buf.completed));
        wc.gso_segmented.add(std::mem::take(&mut buf.segmented));
        self.send(list);
    }

    /// Sends every egress port's batch of this burst. A frame shorter than
    /// the Ethernet minimum goes out padded with zeros to
    /// [`MIN_TX_FRAME`] bytes, whatever the egress (AF_XDP, AF_PACKET, the
    /// AF_PACKET fallback of an AF_XDP port) and however it got there
    /// (forwarded, flooded, retagged, a GSO frame's last segment): a NIC
    /// pads it, a veth or a socket does not. Each is counted `tx_padded`
    /// when it is handed to the socket (one the socket then refuses is in
    /// `tx_dropped` too).
    fn send(&mut self, list: &PortList) {
        let tx_queue = self.shared.cfg.tx_queue;
        let wc = &self.shared.workers[self.w];
        for eg in &list.ports {
            let id = eg.id.0 as usize;
            let Buffers { arena, rewrite, out, pad, .. } = &mut self.buf;
            let Some(outs) = out.get_mut(id) else { continue };
            if outs.is_empty() {
                continue;
            }
            let pc = &eg.counters[self.w];
            let bytes = |o: &Out| {
                if o.rewritten {
                    &rewrite[o.start..o.start + o.len]
                } else {
                    &arena[o.start..o.start + o.len]
                }
            };
            let Some(Some(l)) = self.local.get_mut(id) else {
                pc.tx_dropped.add(Reason::NoPort, outs.len() as u64);
                outs.clear();
                continue;
            };
            pad.clear();
            pad.extend(outs.iter().filter_map(|o| padded(bytes(o))));
            let mut next_pad = pad.iter();
            let frames: Vec<&[u8]> = outs
                .iter()
                .map(|o| match o.len < MIN_TX_FRAME {
                    true => next_pad.next().map_or(bytes(o), |p| &p[..]),
                    false => bytes(o),
                })
                .collect();
            let mut sent = 0usize;
            if !l.h.xsk.is_empty() {
                let nsock = l.h.xsk.len();
                let pick = |rxq: u32, socks: &[flowsteer_xsk::XskSocket]| match tx_queue {
                    TxQueue::Cpu => 0,
                    TxQueue::Flow => socks.iter().position(|s| s.queue() == rxq).unwrap_or(0),
                };
                if nsock == 1 {
                    sent += xsk_send(&mut l.h.xsk[0], &frames);
                } else {
                    for s in 0..nsock {
                        let refs: Vec<&[u8]> = outs
                            .iter()
                            .zip(&frames)
                            .filter(|(o, _)| pick(o.rxq, &l.h.xsk) == s)
                            .map(|(_, f)| *f)
                            .collect();
                        if !refs.is_empty() {
                            sent += xsk_send(&mut l.h.xsk[s], &refs);
                        }
                    }
                }
            } else if let Some(tx) = l.h.tx.as_mut() {
                if eg.takes_offload() {
                    let heads: Vec<VnetHdr> = outs.iter().map(|o| o.vnet).collect();
                    sent = tx.send_batch_vnet(&frames, &heads);
                } else {
                    sent = tx.send_batch(&frames);
                }
                if eg.spec.kind == crate::api::PortKind::Afxdp {
                    wc.tx_fallback.add(sent as u64);
                }
            }
            pc.transmitted.add(sent as u64);
            pc.tx_padded.add(pad.len() as u64);
            pc.tx_dropped.add(Reason::TxFailed, (outs.len() - sent) as u64);
            outs.clear();
        }
    }

    /// Publishes the kernel's drop counts of this worker's sockets, per port.
    fn kernel_counts(&mut self) {
        let fs = self.fdb.stats();
        self.shared.workers[self.w].events_dropped.set(fs.events_dropped);
        self.shared.workers[self.w].events_suppressed.set(fs.events_suppressed);
        for l in self.local.iter_mut().flatten() {
            let mut drops = 0u64;
            for s in &l.h.xsk {
                if let Ok(st) = s.stats() {
                    drops += st.kernel.rx_dropped + st.kernel.rx_ring_full + st.rx_bad_descs;
                }
            }
            if let Some(ring) = l.h.ring.as_mut() {
                if let Ok(st) = ring.stats() {
                    drops += st.kernel_drops + st.bad_frames;
                }
            }
            l.port.counters[self.w].dropped.set(Reason::Kernel, drops);
        }
    }

    fn idle_wait(&self) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        for l in self.local.iter().flatten() {
            for s in &l.h.xsk {
                fds.push(PollFd::new(s, PollFlags::IN));
            }
            if let Some(r) = &l.h.ring {
                fds.push(PollFd::from_borrowed_fd(r.as_fd(), PollFlags::IN));
            }
        }
        if fds.is_empty() {
            std::thread::sleep(IDLE_WAIT);
            return;
        }
        let ts = Timespec { tv_sec: 0, tv_nsec: IDLE_WAIT.as_nanos() as i64 };
        let _ = poll(&mut fds, Some(&ts));
    }
}

/// Whether a frame of VLAN `vid` from `ingress` may go out of `eg`: `eg`
/// forwards and is up (`port_state`), the two are not both isolated
/// (`isolated`), and `eg` admits the VLAN (`vlan`).
fn egress_allows(ingress: &Member, eg: &Member, vid: Option<u16>) -> Result<(), Reason> {
    if !eg.conf.flags.state.forwards() || !eg.up.load(Ordering::Relaxed) {
        return Err(Reason::PortState);
    }
    if ingress.conf.flags.isolated && eg.conf.flags.isolated {
        return Err(Reason::Isolated);
    }
    if vid.is_some_and(|v| !eg.conf.vlans.admits(v)) {
        return Err(Reason::Vlan);
    }
    Ok(())
}

/// Which flood flag of an egress port a flooded frame needs.
#[derive(Clone, Copy)]
enum FloodKind {
    /// Unknown unicast (`flood`).
    Unicast,
    /// Multicast (`mcast_flood`).
    Multicast,
    /// Broadcast (`bcast_flood`).
    Broadcast,
}

impl FloodKind {
    fn of(dst: flowsteer_fdb::Mac) -> FloodKind {
        if dst.is_broadcast() {
            FloodKind::Broadcast
        } else if dst.is_multicast() {
            FloodKind::Multicast
        } else {
            FloodKind::Unicast
        }
    }

    fn floods_out_of(self, eg: &Member) -> bool {
        let f = &eg.conf.flags;
        match self {
            FloodKind::Unicast => f.flood,
            FloodKind::Multicast => f.mcast_flood,
            FloodKind::Broadcast => f.bcast_flood,
        }
    }
}

/// Makes frame `i` of the burst fit egresses that take no offload state
/// (`plain_needed`): a partial checksum is completed in place, once, so
/// every egress of a flooded frame sends the same bytes. A GSO frame is
/// left as it is (it is cut into segments per egress, see [`enqueue`]).
/// `None` when the partial checksum cannot be completed (its offsets are
/// outside the frame).
fn settle_checksum(buf: &mut Buffers, i: usize, plain_needed: bool) -> Option<RxFrame> {
    let fr = buf.frames[i];
    if !plain_needed || !fr.vnet.needs_csum || fr.vnet.gso_type != GsoType::None {
        return Some(fr);
    }
    let frame = buf.arena.get_mut(fr.start..fr.start + fr.len)?;
    offload::complete_partial(frame, usize::from(fr.vnet.csum_start), usize::from(fr.vnet.csum_offset)).ok()?;
    buf.frames[i].vnet = VnetHdr::PLAIN;
    buf.completed += 1;
    Some(buf.frames[i])
}

/// The length of the longest frame a GSO frame stands for: its headers
/// (to the end of the TCP or UDP header) and one segment's payload.
fn gso_segment_len(frame: &[u8], v: &VnetHdr) -> Option<usize> {
    let l4 = usize::from(v.csum_start);
    let l4_len = match v.gso_type {
        GsoType::TcpV4 | GsoType::TcpV6 => usize::from(frame.get(l4 + 12)? >> 4) * 4,
        _ => 8,
    };
    Some(l4 + l4_len + usize::from(v.gso_size))
}

/// Queues `fr` for port `eg` (tagged as `eg` wants it). A GSO frame goes
/// whole to an egress that takes offload state (AF_PACKET: the kernel
/// segments it, or the receiving host's stack takes it whole), and is cut
/// into segments here for the others. The error is the reason it was not
/// queued (counted on `eg`'s transmit side too).
fn enqueue(
    buf: &mut Buffers,
    eg: &Member,
    fr: RxFrame,
    hdr: &EthHeader,
    vid: Option<u16>,
    w: usize,
    tpid: u16,
) -> Result<(), Reason> {
    let pc: &PortCounters = &eg.counters[w];
    let refuse = |r: Reason| {
        pc.tx_dropped.add(r, 1);
        Err(r)
    };
    // With VLAN filtering: untagged out of a port where the VLAN is
    // untagged, tagged (priority bits kept) out of the others.
    let tci = match vid {
        Some(v) if eg.conf.vlans.untagged(v) => None,
        Some(v) => Some((hdr.tci.unwrap_or(0) & 0xf000) | v),
        None => hdr.tci,
    };
    let len = out_len(fr.len, hdr, tci);
    let delta = len as i32 - fr.len as i32;
    let vnet = fr.vnet.shifted(delta);
    let gso = vnet.gso_type != GsoType::None;
    let longest = match gso {
        true => match gso_segment_len(&buf.arena[fr.start..fr.start + fr.len], &fr.vnet) {
            Some(n) => (n as i32 + delta) as usize,
            None => return refuse(Reason::Offload),
        },
        false => len,
    };
    if longest > eg.max_frame() {
        return refuse(Reason::TooBig);
    }
    let id = eg.id.0 as usize;
    if buf.out.len() <= id {
        buf.out.resize_with(id + 1, Vec::new);
    }
    if gso && !eg.takes_offload() {
        let kind = match vnet.gso_type {
            GsoType::TcpV4 => GsoKind::TcpV4,
            GsoType::TcpV6 => GsoKind::TcpV6,
            GsoType::UdpL4 => GsoKind::Udp,
            _ => return refuse(Reason::Offload),
        };
        let Buffers { arena, rewrite, scratch, seg_lens, out, .. } = buf;
        let frame = &arena[fr.start..fr.start + fr.len];
        let whole: &[u8] = if tci == hdr.tci {
            frame
        } else {
            scratch.clear();
            write_frame(scratch, frame, hdr, tci, tpid);
            scratch
        };
        let start = rewrite.len();
        seg_lens.clear();
        if offload::segment(whole, kind, usize::from(vnet.gso_size), rewrite, seg_lens).is_err() {
            rewrite.truncate(start);
            return refuse(Reason::Offload);
        }
        let mut at = start;
        for &n in seg_lens.iter() {
            out[id].push(Out { rewritten: true, start: at, len: n, rxq: fr.rxq, vnet: VnetHdr::PLAIN });
            at += n;
        }
        buf.segmented += 1;
        return Ok(());
    }
    let out = if tci == hdr.tci {
        Out { rewritten: false, start: fr.start, len: fr.len, rxq: fr.rxq, vnet }
    } else {
        let start = buf.rewrite.len();
        write_frame(&mut buf.rewrite, &buf.arena[fr.start..fr.start + fr.len], hdr, tci, tpid);
        Out { rewritten: true, start, len: buf.rewrite.len() - start, rxq: fr.rxq, vnet }
    };
    buf.out[id].push(out);
    Ok(())
}

/// Sends `frames` on one AF_XDP socket, draining completions and retrying
/// while its ring or its free frames are full; returns how many were queued.
fn xsk_send(sock: &mut flowsteer_xsk::XskSocket, frames: &[&[u8]]) -> usize {
    let mut done = 0;
    let mut tries = 0;
    while done < frames.len() {
        let n = sock.tx_burst(&frames[done..]);
        done += n;
        if n == 0 {
            tries += 1;
            if tries > TX_RETRIES {
                break;
            }
            sock.tx_complete();
        }
    }
    done
}

#[cfg(test)]
mod stress;
