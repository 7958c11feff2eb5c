//! The TPACKET_V3 receive ring and fanout groups.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use flowsteer_rss::RssConfig;

use crate::cbpf::{toeplitz_cbpf, SockFilter, MAX_INSNS};
use crate::error::Error;
use crate::open::{lookup_ifindex, open_packet_socket};
use crate::sys::{self, RingMap};
use crate::vnet::{VnetHdr, VNET_HDR_LEN};

/// Default block size: 1 MiB (a whole burst fits, few block switches).
pub const DEFAULT_BLOCK_SIZE: usize = 1 << 20;
/// Default number of blocks: 16 (16 MiB of ring).
pub const DEFAULT_BLOCK_COUNT: usize = 16;
/// Default nominal frame size: 2048 (see [`RxConfig::frame_size`]).
pub const DEFAULT_FRAME_SIZE: usize = 2048;
/// Default block retire timeout: 10 ms, the longest a lone frame waits in
/// a partly filled block before user space sees it.
pub const DEFAULT_RETIRE_BLK_TOV_MS: u32 = 10;
/// Longest accepted retire timeout (one minute).
pub const MAX_RETIRE_BLK_TOV_MS: u32 = 60_000;
/// Largest ring accepted: 1 GiB (`block_size * block_count`).
pub const MAX_RING_BYTES: usize = 1 << 30;

/// Offsets in the block descriptor (`struct tpacket_block_desc`).
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
/// Size of the block descriptor: the most a block can hold is
/// `block_size - BLOCK_HEADER`.
const BLOCK_HEADER: usize = 48;
/// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where the `sockaddr_ll`
/// follows the frame header.
const HDR3_ALIGNED: usize = 48;
const ETH_P_ALL: u16 = 0x0003;
/// The fanout group skips frames the host sends (Linux 6.9; not in libc).
const PACKET_FANOUT_FLAG_IGNORE_OUTGOING: u32 = 0x4000;
/// Classic BPF `ret #k`.
const BPF_RET_K: u16 = 0x06;

/// A ring's shape and options. `Default` gives the documented defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxConfig {
    /// Bytes per block: a multiple of the page size. Default 1 MiB. A frame
    /// longer than `block_size - 48` is truncated (and counted).
    pub block_size: usize,
    /// Blocks in the ring, at least 1. Default 16. When every block waits
    /// for user space the kernel drops ([`RxStats::kernel_drops`]).
    pub block_count: usize,
    /// Nominal frame size: a multiple of 16, at least 80, at most
    /// `block_size`. Default 2048. TPACKET_V3 packs frames back to back, so
    /// this only sets the kernel's nominal frame count; it does not cap a
    /// frame's length.
    pub frame_size: usize,
    /// Milliseconds after which the kernel hands a partly filled block to
    /// user space; 0 lets the kernel derive it from the link speed.
    /// Default 10, at most [`MAX_RETIRE_BLK_TOV_MS`].
    pub retire_blk_tov_ms: u32,
    /// Ask the kernel to fill [`RxMeta::rxhash`] (`TP_FT_REQ_FILL_RXHASH`),
    /// computing the flow hash when the device gave none. Default true.
    pub fill_rxhash: bool,
    /// Skip frames this host sends on the interface
    /// (`PACKET_IGNORE_OUTGOING`). Default true: a receive path wants
    /// received frames only. A fanout member receives through its group,
    /// so the group is asked too (`PACKET_FANOUT_FLAG_IGNORE_OUTGOING`); a
    /// kernel without that flag (before Linux 6.9) delivers the host's own
    /// frames to the group anyway.
    pub ignore_outgoing: bool,
    /// Lock the ring in memory (`MAP_LOCKED`; counts against
    /// RLIMIT_MEMLOCK without CAP_IPC_LOCK). Default false.
    pub lock_memory: bool,
    /// A socket filter (`SO_ATTACH_FILTER`, offsets from the Ethernet
    /// header), attached before the socket is bound; empty = every frame.
    /// Frames it rejects never reach the ring nor the kernel's counters.
    pub filter: Vec<SockFilter>,
    /// Join this fanout group right after binding. Default none.
    pub fanout: Option<Fanout>,
    /// Hand over each frame's offload state (`PACKET_VNET_HDR`):
    /// [`RxMeta::vnet`] says whether its checksum is partial and whether it
    /// is a GSO frame. Default false. Without it a frame a local sender
    /// left to offload arrives with a checksum that cannot verify
    /// ([`RxMeta::csum_not_ready`] still says so) and a GSO frame's
    /// segment size is unknown.
    pub vnet_hdr: bool,
}

impl Default for RxConfig {
    fn default() -> Self {
        RxConfig {
            block_size: DEFAULT_BLOCK_SIZE,
            block_count: DEFAULT_BLOCK_COUNT,
            frame_size: DEFAULT_FRAME_SIZE,
            retire_blk_tov_ms: DEFAULT_RETIRE_BLK_TOV_MS,
            fill_rxhash: true,
            ignore_outgoing: true,
            lock_memory: false,
            filter: Vec::new(),
            fanout: None,
            vnet_hdr: false,
        }
    }
}

impl RxConfig {
    /// The smallest nominal frame: the frame header plus `sockaddr_ll`
    /// (`TPACKET3_HDRLEN`), rounded up to the 16-byte alignment.
    pub const MIN_FRAME_SIZE: usize = (libc::TPACKET3_HDRLEN + 15) & !15;

    /// Checks every value; the error names the bad one and the rule.
    pub fn validate(&self) -> Result<(), Error> {
        let page = sys::page_size();
        let bad = |m: String| Err(Error::Config(format!("AF_PACKET ring: {m}")));
        if self.block_size == 0 || !self.block_size.is_multiple_of(page) {
            return bad(format!("block_size {} is not a positive multiple of the page size {page}", self.block_size));
        }
        if self.block_count == 0 {
            return bad("block_count must be at least 1".into());
        }
        match self.block_size.checked_mul(self.block_count) {
            Some(total) if total <= MAX_RING_BYTES => {}
            _ => {
                return bad(format!(
                    "block_size {} x block_count {} exceeds the {MAX_RING_BYTES}-byte maximum",
                    self.block_size, self.block_count
                ))
            }
        }
        if self.frame_size < Self::MIN_FRAME_SIZE
            || !self.frame_size.is_multiple_of(16)
            || self.frame_size > self.block_size
        {
            return bad(format!(
                "frame_size {} must be a multiple of 16 between {} and block_size {}",
                self.frame_size,
                Self::MIN_FRAME_SIZE,
                self.block_size
            ));
        }
        if self.retire_blk_tov_ms > MAX_RETIRE_BLK_TOV_MS {
            return bad(format!(
                "retire_blk_tov_ms {} exceeds the maximum {MAX_RETIRE_BLK_TOV_MS}",
                self.retire_blk_tov_ms
            ));
        }
        if self.filter.len() > MAX_INSNS {
            return bad(format!("filter has {} instructions, more than {MAX_INSNS}", self.filter.len()));
        }
        if let Some(f) = &self.fanout {
            f.validate()?;
        }
        Ok(())
    }
}

/// How a fanout group picks the member for a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FanoutMode {
    /// The kernel's flow hash (`skb_get_hash`): a flow stays on one member.
    Hash,
    /// Round robin per frame (`lb`).
    LoadBalance,
    /// The CPU that received the frame, modulo the members.
    Cpu,
    /// Fill one member until its ring is full, then the next.
    Rollover,
    /// A random member per frame.
    Random,
    /// The recorded receive queue, modulo the members (`qm`).
    QueueMapping,
    /// A classic BPF program (`PACKET_FANOUT_CBPF`, installed with
    /// `PACKET_FANOUT_DATA`). It sees the frame from the **L3 header** and
    /// its return value picks member `ret % members`, members counted in
    /// join order (when a member leaves, the last one takes its slot). The
    /// group shares one program: each joining member installs it again.
    /// See [`crate::toeplitz_cbpf`].
    Cbpf(Vec<SockFilter>),
}

impl FanoutMode {
    fn code(&self) -> u32 {
        match self {
            FanoutMode::Hash => libc::PACKET_FANOUT_HASH,
            FanoutMode::LoadBalance => libc::PACKET_FANOUT_LB,
            FanoutMode::Cpu => libc::PACKET_FANOUT_CPU,
            FanoutMode::Rollover => libc::PACKET_FANOUT_ROLLOVER,
            FanoutMode::Random => libc::PACKET_FANOUT_RND,
            FanoutMode::QueueMapping => libc::PACKET_FANOUT_QM,
            FanoutMode::Cbpf(_) => libc::PACKET_FANOUT_CBPF,
        }
    }
}

/// Membership of a fanout group. Every member of a group (per network
/// namespace, per `group` id) must use the same mode and flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fanout {
    pub group: u16,
    pub mode: FanoutMode,
    /// `PACKET_FANOUT_FLAG_DEFRAG`: the kernel reassembles IPv4 fragments
    /// before picking a member, so a datagram's fragments stay together
    /// (the ring then gets the whole datagram as one frame).
    pub defrag: bool,
    /// `PACKET_FANOUT_FLAG_ROLLOVER`: when the chosen member's ring is full,
    /// try the others before dropping.
    pub rollover: bool,
}

impl Fanout {
    /// A group with no flags.
    pub fn new(group: u16, mode: FanoutMode) -> Fanout {
        Fanout { group, mode, defrag: false, rollover: false }
    }

    /// A group steered by flowsteer's Toeplitz RSS ([`crate::toeplitz_cbpf`]):
    /// join `config.queue_count()` rings in queue order.
    pub fn toeplitz(group: u16, config: &RssConfig) -> Result<Fanout, Error> {
        Ok(Fanout::new(group, FanoutMode::Cbpf(toeplitz_cbpf(config)?)))
    }

    fn validate(&self) -> Result<(), Error> {
        if let FanoutMode::Cbpf(p) = &self.mode {
            if p.is_empty() || p.len() > MAX_INSNS {
                return Err(Error::Config(format!(
                    "fanout cBPF program has {} instructions; 1 to {MAX_INSNS} are accepted",
                    p.len()
                )));
            }
        }
        Ok(())
    }

    /// The `PACKET_FANOUT` argument: group id | (mode | flags) << 16.
    fn arg(&self) -> i32 {
        let mut typ = self.mode.code();
        if self.defrag {
            typ |= libc::PACKET_FANOUT_FLAG_DEFRAG;
        }
        if self.rollover {
            typ |= libc::PACKET_FANOUT_FLAG_ROLLOVER;
        }
        (u32::from(self.group) | (typ << 16)) as i32
    }
}

/// An 802.1Q/802.1ad tag the kernel moved out of the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Tag control information: PCP (3 bits), DEI, VLAN id (12 bits).
    pub tci: u16,
    /// TPID (0x8100, 0x88a8), 0 when the kernel did not report it.
    pub tpid: u16,
}

impl VlanTag {
    pub fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }
}

/// What the kernel reports with each frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxMeta {
    /// `skb->hash` (with [`RxConfig::fill_rxhash`]; 0 otherwise). On veth it
    /// comes from the sender socket's random `sk_txhash`, not from Toeplitz.
    pub rxhash: u32,
    /// The VLAN tag the kernel stripped (the frame bytes no longer hold it).
    pub vlan: Option<VlanTag>,
    /// Bytes in the ring (the slice given to the sink).
    pub snap_len: u32,
    /// Bytes on the wire. Larger than `snap_len` when truncated.
    pub wire_len: u32,
    /// Receive time since the Unix epoch (software, CLOCK_REALTIME).
    pub timestamp: Duration,
    /// Raw `TP_STATUS_*` bits (checksum state, VLAN validity, losing).
    pub status: u32,
    /// `PACKET_HOST`, `PACKET_BROADCAST`, `PACKET_MULTICAST`,
    /// `PACKET_OTHERHOST` or `PACKET_OUTGOING`.
    pub packet_type: u8,
    /// Offset of the L3 header in the frame (14 for plain Ethernet).
    pub l3_offset: u16,
    /// The frame's offload state, with [`RxConfig::vnet_hdr`]; offsets
    /// count from the first byte of the frame as given (a tag the kernel
    /// took out, [`Self::vlan`], is not in them).
    pub vnet: Option<VnetHdr>,
}

impl RxMeta {
    /// `TP_STATUS_CSUMNOTREADY`: the frame's TCP/UDP checksum is partial
    /// (a local sender left it to offload).
    pub fn csum_not_ready(&self) -> bool {
        self.status & libc::TP_STATUS_CSUMNOTREADY != 0
    }

    /// The ring holds fewer bytes than the wire carried.
    pub fn is_truncated(&self) -> bool {
        self.snap_len < self.wire_len
    }
}

/// Counters of one ring. `kernel_*` are the kernel's `PACKET_STATISTICS`,
/// accumulated by [`RxRing::stats`] (the kernel resets them on each read).
///
/// Once the ring is drained and stats read:
/// `kernel_packets = frames + bad_frames + kernel_drops`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Frames delivered to the sink.
    pub frames: u64,
    /// Wire bytes of those frames.
    pub bytes: u64,
    /// Delivered frames whose snap length is below the wire length.
    pub truncated: u64,
    /// Blocks returned to the kernel.
    pub blocks: u64,
    /// Frames skipped because the block descriptor pointed outside the
    /// block (never expected from a sane kernel).
    pub bad_frames: u64,
    /// Frames the kernel handled for this socket, drops included.
    pub kernel_packets: u64,
    /// Frames the kernel dropped (ring full).
    pub kernel_drops: u64,
    /// Times the queue froze because no block was free.
    pub kernel_freeze_q: u64,
}

/// Where the reader stands in a block handed to user space.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    remaining: u32,
    offset: usize,
}

/// A TPACKET_V3 receive ring on one interface. `Send`: it may be created in
/// one thread (inside a network namespace, say) and read in another.
#[derive(Debug)]
pub struct RxRing {
    // Unmapped before the socket closes (field order).
    map: RingMap,
    fd: OwnedFd,
    ifname: String,
    ifindex: u32,
    block_size: usize,
    block_count: usize,
    retire_blk_tov_ms: u32,
    block: usize,
    cursor: Option<Cursor>,
    stats: RxStats,
    vnet_hdr: bool,
}

impl RxRing {
    /// Opens a ring on interface `ifname` (in the calling thread's network
    /// namespace): socket, TPACKET_V3, filter, ring, mmap, bind to
    /// ETH_P_ALL on the interface, then the fanout group if any.
    pub fn open(ifname: &str, config: &RxConfig) -> Result<RxRing, Error> {
        config.validate()?;
        let ifindex = lookup_ifindex(ifname)?;
        let fd = open_packet_socket()?;
        let opt = |name: i32, what: &str, v: i32| {
            sys::setsockopt_int(&fd, libc::SOL_PACKET, name, v).map_err(|e| Error::os(format!("{what} on {ifname}"), e))
        };
        opt(libc::PACKET_VERSION, "PACKET_VERSION=TPACKET_V3", libc::tpacket_versions::TPACKET_V3 as i32)?;
        if config.ignore_outgoing {
            opt(libc::PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING", 1)?;
        }
        if config.vnet_hdr {
            opt(libc::PACKET_VNET_HDR, "PACKET_VNET_HDR", 1)?;
        }
        if !config.filter.is_empty() {
            sys::set_program(&fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &config.filter)
                .map_err(|e| Error::os("SO_ATTACH_FILTER (bad socket filter?)", e))?;
        }
        let frames_per_block = config.block_size / config.frame_size;
        let req = libc::tpacket_req3 {
            tp_block_size: config.block_size as u32,
            tp_block_nr: config.block_count as u32,
            tp_frame_size: config.frame_size as u32,
            tp_frame_nr: (frames_per_block * config.block_count) as u32,
            tp_retire_blk_tov: config.retire_blk_tov_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: if config.fill_rxhash { libc::TP_FT_REQ_FILL_RXHASH } else { 0 },
        };
        sys::set_rx_ring(&fd, &req).map_err(|e| Error::os(format!("PACKET_RX_RING on {ifname}"), e))?;
        let len = config.block_size * config.block_count;
        let map = RingMap::map(&fd, len, config.lock_memory).map_err(|e| {
            let hint = if config.lock_memory { " (lock_memory needs RLIMIT_MEMLOCK or CAP_IPC_LOCK)" } else { "" };
            Error::os(format!("mmap of the {len}-byte ring{hint}"), e)
        })?;
        sys::bind_ll(&fd, ifindex, ETH_P_ALL).map_err(|e| match e {
            libc::ENODEV | libc::ENXIO => Error::NoSuchInterface(ifname.to_string()),
            e => Error::os(format!("bind to {ifname}"), e),
        })?;
        let ring = RxRing {
            map,
            fd,
            ifname: ifname.to_string(),
            ifindex,
            block_size: config.block_size,
            block_count: config.block_count,
            retire_blk_tov_ms: config.retire_blk_tov_ms,
            block: 0,
            cursor: None,
            stats: RxStats::default(),
            vnet_hdr: config.vnet_hdr,
        };
        if let Some(f) = &config.fanout {
            ring.join(f, config.ignore_outgoing)?;
        }
        Ok(ring)
    }

    fn join(&self, f: &Fanout, ignore_outgoing: bool) -> Result<(), Error> {
        let flag = (PACKET_FANOUT_FLAG_IGNORE_OUTGOING << 16) as i32;
        let tried = match ignore_outgoing {
            true => sys::setsockopt_int(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, f.arg() | flag),
            false => Err(libc::EINVAL),
        };
        // EINVAL: a kernel without the flag (or a group joined without it).
        tried.or_else(|_| sys::setsockopt_int(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, f.arg())).map_err(
            |e| {
                let hint =
                    if e == libc::EINVAL { " (a group with this id but another mode or flags exists?)" } else { "" };
                Error::os(format!("PACKET_FANOUT group {} on {}{hint}", f.group, self.ifname), e)
            },
        )?;
        if let FanoutMode::Cbpf(prog) = &f.mode {
            sys::set_program(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT_DATA, prog)
                .map_err(|e| Error::os("PACKET_FANOUT_DATA (the kernel rejected the cBPF program)", e))?;
        }
        Ok(())
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The longest frame a block stores whole.
    pub fn max_frame_len(&self) -> usize {
        self.block_size - BLOCK_HEADER
    }

    fn block_base(&self) -> usize {
        self.block * self.block_size
    }

    fn block_ready(&self) -> bool {
        self.block_ready_at(self.block)
    }

    fn block_ready_at(&self, block: usize) -> bool {
        self.map.load_acquire(block * self.block_size + BLOCK_STATUS).is_some_and(|s| s & libc::TP_STATUS_USER != 0)
    }

    /// Frames the kernel handed to user space (counted in its
    /// `kernel_packets`) that [`Self::poll_burst`] has not read yet. A
    /// block the kernel is still filling is not counted: see
    /// [`Self::stop_receiving`].
    pub fn unread(&self) -> u64 {
        let mut n = 0u64;
        for k in 0..self.block_count {
            let b = (self.block + k) % self.block_count;
            match self.cursor {
                Some(c) if k == 0 => n += u64::from(c.remaining),
                _ if self.block_ready_at(b) => {
                    n += u64::from(self.map.read::<u32>(b * self.block_size + BLOCK_NUM_PKTS).unwrap_or(0));
                }
                _ => break,
            }
        }
        n
    }

    /// Stops taking frames in: a socket filter that accepts none replaces
    /// the socket's own (the kernel counts no frame a filter refuses). The
    /// frames already in the ring stay readable; the block the kernel was
    /// filling is handed over within [`Self::retire_timeout`], after which
    /// [`Self::unread`] and [`Self::stats`] no longer change.
    pub fn stop_receiving(&self) -> Result<(), Error> {
        let none = [SockFilter::stmt(BPF_RET_K, 0)];
        sys::set_program(&self.fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &none)
            .map_err(|e| Error::os(format!("SO_ATTACH_FILTER (stop receiving on {})", self.ifname), e))
    }

    /// The longest a partly filled block stays with the kernel: the
    /// configured retire timeout, or one second when the kernel derives it
    /// from the link speed (`retire_blk_tov_ms` 0).
    pub fn retire_timeout(&self) -> Duration {
        match self.retire_blk_tov_ms {
            0 => Duration::from_secs(1),
            ms => Duration::from_millis(u64::from(ms)),
        }
    }

    fn release_block(&mut self) {
        self.map.store_release(self.block_base() + BLOCK_STATUS, libc::TP_STATUS_KERNEL);
        self.stats.blocks += 1;
        self.block = (self.block + 1) % self.block_count;
        self.cursor = None;
    }

    /// Hands up to `max` frames to `sink`, in arrival order, without
    /// blocking; returns how many. A block goes back to the kernel as soon
    /// as all its frames were handed out; a block left half read is resumed
    /// by the next call. The slice lives only for the call of `sink`.
    pub fn poll_burst(&mut self, max: usize, sink: &mut dyn FnMut(&[u8], &RxMeta)) -> usize {
        let mut delivered = 0;
        while delivered < max {
            let base = self.block_base();
            let mut cur = match self.cursor {
                Some(c) => c,
                None if self.block_ready() => Cursor {
                    remaining: self.map.read::<u32>(base + BLOCK_NUM_PKTS).unwrap_or(0),
                    offset: self.map.read::<u32>(base + BLOCK_FIRST_PKT).unwrap_or(0) as usize,
                },
                None => break,
            };
            if cur.remaining == 0 {
                self.release_block();
                continue;
            }
            match read_frame(&self.map, base, self.block_size, cur.offset, self.vnet_hdr) {
                Some((meta, data_at, next)) => {
                    self.stats.frames += 1;
                    self.stats.bytes += u64::from(meta.wire_len);
                    self.stats.truncated += u64::from(meta.is_truncated());
                    let data = self.map.bytes(data_at, meta.snap_len as usize).unwrap_or(&[]);
                    sink(data, &meta);
                    delivered += 1;
                    cur.remaining -= 1;
                    cur.offset += next;
                }
                None => {
                    self.stats.bad_frames += u64::from(cur.remaining);
                    cur.remaining = 0;
                }
            }
            if cur.remaining == 0 {
                self.release_block();
            } else {
                self.cursor = Some(cur);
            }
        }
        delivered
    }

    /// Sleeps in `poll(2)` until a block is ready for [`Self::poll_burst`]
    /// or `timeout` passes; `Ok(true)` when there is something to read (also
    /// at once when a block is being read). A signal gives `Ok(false)`.
    pub fn wait(&self, timeout: Duration) -> Result<bool, Error> {
        if self.cursor.is_some() || self.block_ready() {
            return Ok(true);
        }
        let ready = sys::poll_readable(&self.fd, timeout).map_err(|e| Error::os("poll", e))?;
        Ok(ready || self.block_ready())
    }

    /// Reads the kernel's `PACKET_STATISTICS` (which resets them), adds
    /// them to the totals and returns all counters.
    pub fn stats(&mut self) -> Result<RxStats, Error> {
        let st = sys::packet_stats(&self.fd).map_err(|e| Error::os("PACKET_STATISTICS", e))?;
        // tp_packets counts the dropped frames too.
        self.stats.kernel_packets += u64::from(st.tp_packets);
        self.stats.kernel_drops += u64::from(st.tp_drops);
        self.stats.kernel_freeze_q += u64::from(st.tp_freeze_q_cnt);
        Ok(self.stats)
    }

    /// The counters without asking the kernel (its part as of the last
    /// [`Self::stats`]).
    pub fn counters(&self) -> RxStats {
        self.stats
    }
}

impl AsFd for RxRing {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The frame at `offset` of the block at `base`: its metadata, where its
/// bytes start in the map and the offset of the next frame. `None` when the
/// descriptor points outside the block.
fn read_frame(
    map: &RingMap,
    base: usize,
    block_size: usize,
    offset: usize,
    vnet_hdr: bool,
) -> Option<(RxMeta, usize, usize)> {
    if offset < BLOCK_HEADER || offset + HDR3_ALIGNED + std::mem::size_of::<libc::sockaddr_ll>() > block_size {
        return None;
    }
    let h: libc::tpacket3_hdr = map.read(base + offset)?;
    let sll: libc::sockaddr_ll = map.read(base + offset + HDR3_ALIGNED)?;
    let mac = usize::from(h.tp_mac);
    if offset + mac + h.tp_snaplen as usize > block_size {
        return None;
    }
    let vlan = (h.tp_status & libc::TP_STATUS_VLAN_VALID != 0).then_some(VlanTag {
        tci: h.hv1.tp_vlan_tci as u16,
        tpid: if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { h.hv1.tp_vlan_tpid } else { 0 },
    });
    let meta = RxMeta {
        rxhash: h.hv1.tp_rxhash,
        vlan,
        snap_len: h.tp_snaplen,
        wire_len: h.tp_len,
        timestamp: Duration::new(u64::from(h.tp_sec), h.tp_nsec.min(999_999_999)),
        status: h.tp_status,
        packet_type: sll.sll_pkttype,
        l3_offset: h.tp_net.saturating_sub(h.tp_mac),
        // The kernel writes the header just before the frame.
        vnet: match vnet_hdr {
            true if mac >= HDR3_ALIGNED + VNET_HDR_LEN => {
                map.read::<[u8; VNET_HDR_LEN]>(base + offset + mac - VNET_HDR_LEN).map(|b| VnetHdr::from_bytes(&b))
            }
            _ => None,
        },
    };
    Some((meta, base + offset + mac, h.tp_next_offset as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented() {
        let c = RxConfig::default();
        assert_eq!((c.block_size, c.block_count, c.frame_size, c.retire_blk_tov_ms), (1 << 20, 16, 2048, 10));
        assert!(c.fill_rxhash && c.ignore_outgoing && !c.lock_memory && c.filter.is_empty() && c.fanout.is_none());
        c.validate().unwrap();
        assert_eq!(RxConfig::MIN_FRAME_SIZE, 80);
    }

    #[test]
    fn bad_values_are_named() {
        let base = RxConfig::default();
        let err = |c: RxConfig| c.validate().unwrap_err().to_string();
        assert!(err(RxConfig { block_size: 1000, ..base.clone() }).contains("block_size 1000"));
        assert!(err(RxConfig { block_size: 0, ..base.clone() }).contains("block_size 0"));
        assert!(err(RxConfig { block_count: 0, ..base.clone() }).contains("block_count"));
        assert!(err(RxConfig { block_count: 2048, ..base.clone() }).contains("exceeds"));
        assert!(err(RxConfig { frame_size: 2047, ..base.clone() }).contains("frame_size 2047"));
        assert!(err(RxConfig { frame_size: 64, ..base.clone() }).contains("frame_size 64"));
        assert!(err(RxConfig { frame_size: 2 << 20, ..base.clone() }).contains("frame_size"));
        assert!(err(RxConfig { retire_blk_tov_ms: 60_001, ..base.clone() }).contains("retire_blk_tov_ms"));
        let f = Fanout::new(1, FanoutMode::Cbpf(Vec::new()));
        assert!(err(RxConfig { fanout: Some(f), ..base.clone() }).contains("cBPF"));
        assert!(err(RxConfig { filter: vec![SockFilter::stmt(6, 0); 4097], ..base }).contains("filter"));
    }

    #[test]
    fn fanout_argument_packs_group_mode_and_flags() {
        let mut f = Fanout::new(0x1234, FanoutMode::QueueMapping);
        assert_eq!(f.arg(), 0x0005_1234);
        f.defrag = true;
        f.rollover = true;
        assert_eq!(f.arg() as u32, 0x9005_1234);
        let modes = [
            (FanoutMode::Hash, 0),
            (FanoutMode::LoadBalance, 1),
            (FanoutMode::Cpu, 2),
            (FanoutMode::Rollover, 3),
            (FanoutMode::Random, 4),
            (FanoutMode::Cbpf(vec![SockFilter::stmt(6, 0)]), 6),
        ];
        for (m, code) in modes {
            assert_eq!(Fanout::new(7, m).arg() as u32, 7 | (code << 16));
        }
    }

    #[test]
    fn missing_interface_is_named_without_root() {
        let e = RxRing::open("nosuchif0", &RxConfig::default()).unwrap_err();
        assert_eq!(e, Error::NoSuchInterface("nosuchif0".into()));
        assert!(e.to_string().contains("interface nosuchif0 does not exist"));
        let e = RxRing::open("bad name", &RxConfig::default()).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
        let e = RxRing::open("a-name-longer-than-15", &RxConfig::default()).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
    }
}
