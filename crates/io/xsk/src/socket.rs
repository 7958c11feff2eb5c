//! One AF_XDP socket (XSK) bound to one (interface, rx queue), with its own
//! UMEM and its four rings.
//!
//! Frame ownership: every UMEM frame is at any time in exactly one of three
//! places, tracked per frame so a lost or duplicated frame is detected:
//! * free: in our free list, usable for transmit;
//! * rx: lent to the kernel for receive (in the fill ring, held by the
//!   driver, or received and waiting in the rx ring);
//! * tx: queued for transmit and not yet completed (in the tx ring, in
//!   flight, or in the completion ring).
//!
//! Receive recycles each consumed frame straight back into the fill ring, so
//! the receive pool stays at its target size; transmit takes frames from the
//! free list and gets them back only through the completion ring (a frame is
//! reusable only after the kernel says it was sent).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use crate::error::{Error, ErrorKind};
use crate::sys::{self, Ring, UmemArea};

/// How to bind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BindMode {
    /// Zero-copy, falling back to copy mode when the driver cannot
    /// (EOPNOTSUPP; veth never can). The default.
    #[default]
    Auto,
    /// Copy mode (XDP_COPY): works on every interface.
    Copy,
    /// Zero-copy only (XDP_ZEROCOPY): fails with [`ErrorKind::Unsupported`]
    /// where the driver has no support.
    ZeroCopy,
}

/// The kernel's transmit budget per copy-mode sendto when not raised.
const DEFAULT_TX_BUDGET: u32 = 32;

/// The tag of a UMEM frame whose bytes the caller of
/// [`XskSocket::tx_prepared`] does not know: never written through it, or
/// written since by receive or [`XskSocket::tx_burst`].
pub const TX_TAG_NONE: u32 = u32::MAX;

/// Kernel headroom in front of every received frame (XDP_PACKET_HEADROOM).
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// Socket sizes. Every ring size is a power of two (a kernel rule).
///
/// Memory: the UMEM is `frame_count * frame_size` bytes (default 4096 x 2048
/// = 8 MiB), pinned by the kernel. Pinned memory counts against
/// RLIMIT_MEMLOCK (8 MiB on this VM) unless the process has CAP_IPC_LOCK,
/// which root has; an unprivileged process would need `ulimit -l` raised
/// (and CAP_NET_RAW anyway). Rings add about `(rx_ring + tx_ring) * 24` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XskConfig {
    /// Bytes per UMEM frame: 2048 (default) or 4096. A received frame can be
    /// at most `frame_size - XDP_PACKET_HEADROOM` bytes (1792 by default,
    /// enough for MTU 1500; use 4096 for MTUs up to 3822). The program of
    /// [`crate::XdpPort`] drops longer claimed frames and counts them
    /// (`XdpReasons::dropped_too_big`); redirected by another program, the
    /// kernel drops them (`KernelStats::rx_dropped`, measured on veth in
    /// native and generic mode). A transmitted frame can be up to
    /// `frame_size` bytes.
    pub frame_size: u32,
    /// UMEM frames (default 4096): `rx_ring` of them are lent to the kernel
    /// for receive, the rest serve transmit. 1..=1_048_576.
    pub frame_count: u32,
    /// Entries of the rx ring and of the fill ring, and the number of frames
    /// lent to the kernel for receive (default 2048; at most `frame_count`).
    /// When all are full the kernel drops (`KernelStats::rx_ring_full`,
    /// `rx_fill_ring_empty_descs`) until `rx_burst` drains them.
    pub rx_ring: u32,
    /// Entries of the tx ring and of the completion ring (default 2048).
    /// `tx_burst` queues no more than fit; the rest stay with the caller.
    pub tx_ring: u32,
    /// Zero-copy or copy (default: try zero-copy, fall back to copy).
    pub bind: BindMode,
    /// Bind with XDP_USE_NEED_WAKEUP (default true): the kernel flags when it
    /// needs a syscall to make progress, so busy paths make none.
    pub need_wakeup: bool,
    /// Frames one transmit wake-up (sendto) may send in copy mode
    /// (XDP_MAX_TX_SKB_BUDGET): 32 (default, the kernel's own) up to
    /// `tx_ring`. Kernels before 6.17 have no such option: there the socket
    /// keeps 32 ([`XskSocket::tx_budget`] says which is in use).
    pub copy_tx_budget: u32,
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig {
            frame_size: 2048,
            frame_count: 4096,
            rx_ring: 2048,
            tx_ring: 2048,
            bind: BindMode::Auto,
            need_wakeup: true,
            copy_tx_budget: DEFAULT_TX_BUDGET,
        }
    }
}

impl XskConfig {
    /// Checks the sizes; the error names the bad field.
    pub fn validate(&self) -> Result<(), Error> {
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(Error::config(format!("frame_size must be 2048 or 4096, not {}", self.frame_size)));
        }
        if self.frame_count == 0 || self.frame_count > 1 << 20 {
            return Err(Error::config(format!("frame_count must be 1..=1048576, not {}", self.frame_count)));
        }
        for (name, v) in [("rx_ring", self.rx_ring), ("tx_ring", self.tx_ring)] {
            if !v.is_power_of_two() || v > 1 << 20 {
                return Err(Error::config(format!("{name} must be a power of two up to 1048576, not {v}")));
            }
        }
        if self.copy_tx_budget != DEFAULT_TX_BUDGET
            && !(DEFAULT_TX_BUDGET..=self.tx_ring).contains(&self.copy_tx_budget)
        {
            return Err(Error::config(format!(
                "copy_tx_budget must be 32..=tx_ring ({}), not {}",
                self.tx_ring, self.copy_tx_budget
            )));
        }
        if self.rx_ring > self.frame_count {
            return Err(Error::config(format!(
                "rx_ring ({}) must not exceed frame_count ({}): every fill-ring slot needs a frame",
                self.rx_ring, self.frame_count
            )));
        }
        Ok(())
    }
}

/// The kernel's XDP_STATISTICS for one socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames dropped for other reasons (e.g. longer than a frame).
    pub rx_dropped: u64,
    /// Invalid descriptors found in the fill ring.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors found in the tx ring.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Frames dropped because the fill ring was empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the tx ring empty when asked to send (in copy
    /// mode poll(2), hence [`XskSocket::wait_rx`], asks too).
    pub tx_ring_empty_descs: u64,
}

impl KernelStats {
    /// Frames the kernel dropped on the way to this socket.
    pub fn rx_drops(&self) -> u64 {
        self.rx_dropped + self.rx_ring_full + self.rx_fill_ring_empty_descs
    }
}

/// Counters of one socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames handed to `rx_burst` sinks.
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Rx descriptors that could not be delivered (outside the UMEM or its
    /// frame, or naming a frame not lent for receive); never seen in practice.
    pub rx_bad_descs: u64,
    /// Frames queued for transmit by `tx_burst`.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Transmitted frames whose completion came back (frame free again).
    pub tx_completed: u64,
    /// Frames `tx_burst` refused: empty or longer than `frame_size`.
    pub tx_rejected: u64,
    /// Completion entries naming a frame not queued for transmit.
    pub tx_bad_completions: u64,
    /// Transmit wake-ups (sendto) that failed with something other than
    /// EAGAIN/EBUSY/ENOBUFS (e.g. ENETDOWN).
    pub tx_kick_errors: u64,
    /// The kernel's view (XDP_STATISTICS).
    pub kernel: KernelStats,
}

/// Where the socket's UMEM frames are right now (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameAccount {
    /// UMEM frames.
    pub total: u32,
    /// In the free list.
    pub free: u32,
    /// Lent to the kernel for receive.
    pub rx: u32,
    /// Of `rx`: still in the fill ring (not taken by the kernel yet).
    pub rx_fill_ring: u32,
    /// Of `rx`: received, waiting in the rx ring.
    pub rx_ring: u32,
    /// Queued for transmit, not completed yet.
    pub tx: u32,
    /// Frames whose ownership is inconsistent (duplicate in the free list,
    /// unknown owner): always 0 unless something is broken.
    pub inconsistent: u32,
}

impl FrameAccount {
    /// Every frame is in exactly one place.
    pub fn is_complete(&self) -> bool {
        self.inconsistent == 0 && self.free + self.rx + self.tx == self.total
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Owner {
    Free,
    Rx,
    Tx,
}

/// An AF_XDP socket on one (interface, rx queue). `Send`: it may be opened
/// inside a network namespace and then used from any one thread.
pub struct XskSocket {
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    fd: OwnedFd,
    // Dropped after the socket fd: the kernel unpins it with the socket.
    umem: UmemArea,
    ifname: String,
    ifindex: u32,
    queue: u32,
    frame_size: u32,
    frame_shift: u32,
    total: u32,
    rx_target: u32,
    mode: BindMode,
    need_wakeup: bool,
    free: Vec<u64>,
    owner: Vec<Owner>,
    /// Per frame: the caller's tag of what it holds ([`XskSocket::tx_prepared`]).
    tags: Vec<u32>,
    tx_budget: u32,
    scratch: Vec<u64>,
    rx_owned: u32,
    tx_owned: u32,
    st: XskStats,
}

/// How many times `open` retries a bind that fails with EBUSY (the kernel
/// releases a closed socket's hold on the queue asynchronously), and the
/// pause between tries.
const BIND_BUSY_RETRIES: u32 = 10;
const BIND_BUSY_PAUSE: Duration = Duration::from_millis(20);

/// Upper bound of wake-ups per `tx_burst` / `tx_complete`: in copy mode one
/// sendto sends at most `budget` frames (the kernel's TX budget), so a full
/// ring takes tx_ring / budget of them.
fn max_kicks(tx_ring: u32, budget: u32) -> u32 {
    tx_ring / budget.max(1) + 2
}

impl XskSocket {
    /// Opens a socket on `ifname` rx/tx queue `queue` (looked up in the
    /// calling thread's network namespace), binds it per `cfg.bind` and lends
    /// `cfg.rx_ring` frames to the kernel for receive.
    ///
    /// Receiving also needs an XDP program redirecting to the socket (see
    /// [`crate::XdpProgram::register`] or [`crate::XdpPort`]); transmit does not.
    pub fn open(ifname: &str, queue: u32, cfg: &XskConfig) -> Result<XskSocket, Error> {
        cfg.validate()?;
        let ifindex = crate::error::ifindex(ifname)?;
        let attempts: &[BindMode] = match cfg.bind {
            BindMode::Auto => &[BindMode::ZeroCopy, BindMode::Copy],
            BindMode::Copy => &[BindMode::Copy],
            BindMode::ZeroCopy => &[BindMode::ZeroCopy],
        };
        let mut last = None;
        for (n, &mode) in attempts.iter().enumerate() {
            match XskSocket::build(ifname, ifindex, queue, cfg, mode) {
                Ok(s) => return Ok(s),
                Err(e) if e.kind() == ErrorKind::Unsupported && n + 1 < attempts.len() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::config("no bind mode to try".into())))
    }

    fn build(ifname: &str, ifindex: u32, queue: u32, cfg: &XskConfig, mode: BindMode) -> Result<XskSocket, Error> {
        let at = || format!("{ifname} queue {queue}");
        let fd = sys::xsk_socket().map_err(|e| match e.raw_os_error() {
            Some(libc::EAFNOSUPPORT) => Error::new(
                ErrorKind::Unsupported,
                Some(&e),
                "this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)".to_string(),
            ),
            _ => Error::os(&e, "creating the AF_XDP socket".to_string()),
        })?;
        let bytes = cfg.frame_count as usize * cfg.frame_size as usize;
        let umem = UmemArea::new(bytes).map_err(|e| Error::os(&e, format!("mapping a {} MiB UMEM", bytes >> 20)))?;
        sys::register_umem(&fd, &umem, cfg.frame_size).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOBUFS | libc::ENOMEM) => Error::new(
                ErrorKind::Os,
                Some(&e),
                format!(
                    "registering a {} MiB UMEM failed ({e}): it exceeds RLIMIT_MEMLOCK; raise `ulimit -l`, run with CAP_IPC_LOCK, or lower frame_count",
                    bytes >> 20
                ),
            ),
            _ => Error::os(&e, format!("registering the UMEM for {}", at())),
        })?;
        let ring = |opt, n, name: &str| {
            sys::set_ring_size(&fd, opt, n).map_err(|e| Error::os(&e, format!("sizing the {name} ring to {n}")))
        };
        ring(libc::XDP_UMEM_FILL_RING, cfg.rx_ring, "fill")?;
        ring(libc::XDP_UMEM_COMPLETION_RING, cfg.tx_ring, "completion")?;
        ring(libc::XDP_RX_RING, cfg.rx_ring, "rx")?;
        ring(libc::XDP_TX_RING, cfg.tx_ring, "tx")?;
        let mut tx_budget = DEFAULT_TX_BUDGET;
        if cfg.copy_tx_budget != DEFAULT_TX_BUDGET {
            match sys::set_tx_budget(&fd, cfg.copy_tx_budget) {
                Ok(()) => tx_budget = cfg.copy_tx_budget,
                // A kernel before 6.17: it keeps its 32.
                Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {}
                Err(e) => return Err(Error::os(&e, format!("setting the transmit budget to {}", cfg.copy_tx_budget))),
            }
        }
        let off = sys::mmap_offsets(&fd).map_err(|e| Error::os(&e, "reading XDP_MMAP_OFFSETS".into()))?;
        let map_err = |name: &'static str| move |e: std::io::Error| Error::os(&e, format!("mapping the {name} ring"));
        let fill = sys::map_ring::<u64>(&fd, libc::XDP_UMEM_PGOFF_FILL_RING as i64, &off.fr, cfg.rx_ring, true)
            .map_err(map_err("fill"))?;
        let comp = sys::map_ring::<u64>(&fd, libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64, &off.cr, cfg.tx_ring, false)
            .map_err(map_err("completion"))?;
        let rx = sys::map_ring(&fd, libc::XDP_PGOFF_RX_RING, &off.rx, cfg.rx_ring, false).map_err(map_err("rx"))?;
        let tx = sys::map_ring(&fd, libc::XDP_PGOFF_TX_RING, &off.tx, cfg.tx_ring, true).map_err(map_err("tx"))?;

        let total = cfg.frame_count;
        let mut s = XskSocket {
            rx,
            tx,
            fill,
            comp,
            fd,
            umem,
            ifname: ifname.to_string(),
            ifindex,
            queue,
            frame_size: cfg.frame_size,
            frame_shift: cfg.frame_size.trailing_zeros(),
            total,
            rx_target: cfg.rx_ring,
            mode,
            need_wakeup: cfg.need_wakeup,
            // Popped from the end: hand out low frames first.
            free: (0..u64::from(total)).rev().map(|i| i * u64::from(cfg.frame_size)).collect(),
            owner: vec![Owner::Free; total as usize],
            tags: vec![TX_TAG_NONE; total as usize],
            tx_budget,
            scratch: Vec::with_capacity(cfg.rx_ring as usize),
            rx_owned: 0,
            tx_owned: 0,
            st: XskStats::default(),
        };
        // The driver may look at the fill ring at bind time (zero-copy).
        s.top_up_fill();

        let mut flags = match mode {
            BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
            _ => libc::XDP_COPY,
        };
        if cfg.need_wakeup {
            flags |= libc::XDP_USE_NEED_WAKEUP;
        }
        let mut tries = 0;
        loop {
            match sys::xsk_bind(&s.fd, ifindex, queue, flags) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < BIND_BUSY_RETRIES => {
                    tries += 1;
                    std::thread::sleep(BIND_BUSY_PAUSE);
                }
                Err(e) => return Err(bind_error(e, ifname, queue, mode)),
            }
        }
        let zc = sys::xsk_zerocopy(&s.fd).map_err(|e| Error::os(&e, "reading XDP_OPTIONS".into()))?;
        s.mode = if zc { BindMode::ZeroCopy } else { BindMode::Copy };
        Ok(s)
    }

    /// Interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The queue this socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// The mode in use: [`BindMode::Copy`] or [`BindMode::ZeroCopy`] (as the
    /// kernel reports it through XDP_OPTIONS).
    pub fn bind_mode(&self) -> BindMode {
        self.mode
    }

    /// Bytes per UMEM frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Frames one copy-mode transmit wake-up sends at most (see
    /// [`XskConfig::copy_tx_budget`]).
    pub fn tx_budget(&self) -> u32 {
        self.tx_budget
    }

    /// The socket descriptor (for the XSKMAP, or for poll/epoll).
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn frame_index(&self, addr: u64) -> Option<usize> {
        let i = usize::try_from(addr >> self.frame_shift).ok()?;
        (i < self.owner.len()).then_some(i)
    }

    fn frame_base(&self, addr: u64) -> u64 {
        addr & !(u64::from(self.frame_size) - 1)
    }

    /// Moves free frames into the fill ring until `rx_target` are lent.
    fn top_up_fill(&mut self) {
        let mut moved = false;
        while self.rx_owned < self.rx_target {
            let Some(&addr) = self.free.last() else { break };
            if !self.fill.push(addr) {
                break;
            }
            self.free.pop();
            if let Some(i) = self.frame_index(addr) {
                self.owner[i] = Owner::Rx;
                self.tags[i] = TX_TAG_NONE;
            }
            self.rx_owned += 1;
            moved = true;
        }
        if moved {
            self.fill.submit();
        }
    }

    /// Receives up to `max` frames: calls `sink` with each one's bytes (the
    /// Ethernet frame), then returns the frames to the fill ring. Returns the
    /// number of descriptors consumed (delivered + `rx_bad_descs`). Never
    /// blocks; see [`XskSocket::wait_rx`].
    pub fn rx_burst(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        let n = (self.rx.available() as usize).min(max);
        self.scratch.clear();
        for i in 0..n {
            let d = self.rx.read(i as u32);
            if self.frame_index(d.addr).filter(|&f| self.owner[f] == Owner::Rx).is_none() {
                // Not a frame we lent: leave ownership alone.
                self.st.rx_bad_descs += 1;
                continue;
            }
            let base = self.frame_base(d.addr);
            let len = d.len as usize;
            let fits = d.addr - base + d.len as u64 <= u64::from(self.frame_size);
            match self.umem.get(d.addr, len).filter(|_| fits) {
                Some(bytes) => {
                    sink(bytes);
                    self.st.rx_packets += 1;
                    self.st.rx_bytes += len as u64;
                }
                None => self.st.rx_bad_descs += 1,
            }
            self.scratch.push(base);
        }
        self.rx.release(n as u32);
        self.refill();
        n
    }

    /// After a receive burst: the frames in `scratch` stay lent for receive
    /// (back into the fill ring; it has room for all of them, at most
    /// rx_ring frames are ever lent; should it not, the rest go to the free
    /// list rather than get lost), the fill ring is topped up from free
    /// frames, and a zero-copy driver is woken when it asked to be.
    fn refill(&mut self) {
        let mut pushed = false;
        for k in 0..self.scratch.len() {
            let addr = self.scratch[k];
            if self.fill.push(addr) {
                pushed = true;
            } else if let Some(i) = self.frame_index(addr) {
                self.owner[i] = Owner::Free;
                self.free.push(addr);
                self.rx_owned -= 1;
            }
        }
        if pushed {
            self.fill.submit();
        }
        if self.rx_owned < self.rx_target && !self.free.is_empty() {
            self.top_up_fill();
        }
        if self.mode == BindMode::ZeroCopy && (!self.need_wakeup || self.fill.needs_wakeup()) {
            // Errors here only mean "nothing to do now".
            let _ = sys::kick_rx(&self.fd);
        }
    }

    /// Receives up to `max` frames and lets `f` rewrite each one in place:
    /// `f(buf, len)` gets the frame's whole room in the UMEM with the
    /// received `len` bytes at its start. When `f` returns `Some(out)`
    /// (`1..=buf.len()`), that very UMEM frame (no copy) is queued
    /// for transmit with `len` bytes and comes back through the completion
    /// ring; `None` recycles it for receive. The fill ring is topped up from
    /// free frames for those that left for transmit. A frame the transmit
    /// ring has no room for, or whose `out` does not fit its frame, is
    /// recycled and counted in `tx_rejected`. Returns (received, reflected).
    ///
    /// This is the echo and forwarding path: zero-copy from the socket's
    /// point of view in both directions (in copy mode the kernel still
    /// copies between the driver and the UMEM).
    pub fn reflect_burst(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&mut [u8], usize) -> Option<usize>,
    ) -> (usize, usize) {
        self.reclaim();
        let n = (self.rx.available() as usize).min(max);
        self.scratch.clear();
        let mut reflected = 0usize;
        for i in 0..n {
            let d = self.rx.read(i as u32);
            let Some(idx) = self.frame_index(d.addr).filter(|&f| self.owner[f] == Owner::Rx) else {
                self.st.rx_bad_descs += 1;
                continue;
            };
            let base = self.frame_base(d.addr);
            let room = (u64::from(self.frame_size) - (d.addr - base)) as usize;
            let len = d.len as usize;
            let verdict = match self.umem.get_mut(d.addr, room).filter(|_| len <= room) {
                Some(buf) => {
                    self.st.rx_packets += 1;
                    self.st.rx_bytes += len as u64;
                    f(buf, len)
                }
                None => {
                    self.st.rx_bad_descs += 1;
                    None
                }
            };
            match verdict {
                Some(out) if out > 0 && out <= room => {
                    let desc = libc::xdp_desc { addr: d.addr, len: out as u32, options: 0 };
                    if self.tx.push(desc) {
                        self.owner[idx] = Owner::Tx;
                        self.rx_owned -= 1;
                        self.tx_owned += 1;
                        self.st.tx_packets += 1;
                        self.st.tx_bytes += out as u64;
                        reflected += 1;
                    } else {
                        self.st.tx_rejected += 1;
                        self.scratch.push(base);
                    }
                }
                Some(_) => {
                    self.st.tx_rejected += 1;
                    self.scratch.push(base);
                }
                None => self.scratch.push(base),
            }
        }
        self.rx.release(n as u32);
        if reflected > 0 {
            self.tx.submit();
        }
        self.refill();
        if reflected > 0 {
            self.kick_tx();
        }
        (n, reflected)
    }

    /// Waits until received frames are ready or `timeout` passes (poll(2)).
    pub fn wait_rx(&self, timeout: Duration) -> Result<bool, Error> {
        if self.rx.waiting() > 0 {
            return Ok(true);
        }
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        sys::poll_in(&self.fd, ms).map_err(|e| Error::os(&e, format!("poll on {} queue {}", self.ifname, self.queue)))
    }

    /// Queues frames for transmit, copying each into a free UMEM frame, and
    /// wakes the kernel. Returns how many leading entries of `frames` were
    /// consumed: queued (`tx_packets`) or refused for being empty or longer
    /// than `frame_size` (`tx_rejected`). It stops early when the tx ring or
    /// the free frames run out; the caller retries the rest later (after
    /// [`XskSocket::tx_complete`] freed frames). Reclaims completions first.
    pub fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        self.reclaim();
        let mut consumed = 0;
        let mut queued = false;
        for f in frames {
            if f.is_empty() || f.len() > self.frame_size as usize {
                self.st.tx_rejected += 1;
                consumed += 1;
                continue;
            }
            let Some(&addr) = self.free.last() else { break };
            let desc = libc::xdp_desc { addr, len: f.len() as u32, options: 0 };
            let Some(dst) = self.umem.get_mut(addr, f.len()) else { break };
            dst.copy_from_slice(f);
            if !self.tx.push(desc) {
                break;
            }
            self.free.pop();
            if let Some(i) = self.frame_index(addr) {
                self.owner[i] = Owner::Tx;
                self.tags[i] = TX_TAG_NONE;
            }
            self.tx_owned += 1;
            self.st.tx_packets += 1;
            self.st.tx_bytes += f.len() as u64;
            consumed += 1;
            queued = true;
        }
        if queued {
            self.tx.submit();
        }
        self.kick_tx();
        consumed
    }

    /// Queues up to `max` free UMEM frames for transmit, each written in
    /// place by `f`: no copy. `f(buf, tag)` gets one free frame's whole room
    /// (`frame_size` bytes), holding what was last written to it, and that
    /// frame's tag: a value the socket keeps with the frame for the caller,
    /// to know what the frame holds (a template, say) and rewrite only what
    /// changes. The tag is [`TX_TAG_NONE`] while the bytes are unknown (a
    /// frame never written through this call, or written since by receive
    /// or [`XskSocket::tx_burst`]). `f` returns the length to send,
    /// `1..=frame_size`; `None` stops (the frame stays free, with what `f`
    /// wrote and the tag it left). A length out of range stops too and
    /// counts in `tx_rejected`. The loop also stops when the tx ring or the
    /// free frames run out. Transmitted frames come back to the free list,
    /// bytes and tag intact, through the completion ring (drained first).
    /// One wake-up (sendto in copy mode, where the kernel needs one; in
    /// zero-copy mode only when it asked) sends them. Returns frames queued.
    pub fn tx_prepared(&mut self, max: usize, f: &mut dyn FnMut(&mut [u8], &mut u32) -> Option<usize>) -> usize {
        self.reclaim();
        let room = self.frame_size as usize;
        let mut queued = 0usize;
        while queued < max {
            let Some(&addr) = self.free.last() else { break };
            let Some(i) = self.frame_index(addr) else { break };
            if !self.tx.has_room() {
                break;
            }
            let Some(buf) = self.umem.get_mut(addr, room) else { break };
            let len = match f(buf, &mut self.tags[i]) {
                Some(len) if len > 0 && len <= room => len,
                Some(_) => {
                    self.st.tx_rejected += 1;
                    break;
                }
                None => break,
            };
            if !self.tx.push(libc::xdp_desc { addr, len: len as u32, options: 0 }) {
                break;
            }
            self.free.pop();
            self.owner[i] = Owner::Tx;
            self.tx_owned += 1;
            self.st.tx_packets += 1;
            self.st.tx_bytes += len as u64;
            queued += 1;
        }
        if queued > 0 {
            self.tx.submit();
        }
        self.kick_tx();
        queued
    }

    /// Wakes the kernel if transmit descriptors are still waiting, then
    /// recycles completed frames into the free list. Returns how many
    /// completed now. Call it until [`XskSocket::tx_in_flight`] is 0 to drain.
    pub fn tx_complete(&mut self) -> usize {
        self.kick_tx();
        self.reclaim()
    }

    /// Frames queued for transmit and not completed yet.
    pub fn tx_in_flight(&self) -> u32 {
        self.tx_owned
    }

    fn kick_tx(&mut self) {
        // Copy mode sends only inside sendto, 32 frames per call; zero-copy
        // needs a call only when the kernel set NEED_WAKEUP.
        for _ in 0..max_kicks(self.tx.size(), self.tx_budget) {
            if self.tx.unconsumed() == 0 {
                return;
            }
            if self.mode == BindMode::ZeroCopy && self.need_wakeup && !self.tx.needs_wakeup() {
                return;
            }
            match sys::kick_tx(&self.fd) {
                Ok(()) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)) => {
                    // EAGAIN: budget used up or completion ring full: drain it and go on.
                    if self.reclaim() == 0 && e.raw_os_error() != Some(libc::EAGAIN) {
                        return;
                    }
                }
                Err(_) => {
                    self.st.tx_kick_errors += 1;
                    return;
                }
            }
        }
    }

    /// Drains the completion ring into the free list, last completed
    /// pushed first: the free list pops from its end, so frames go out
    /// again in the order they were sent (the frames of
    /// [`XskSocket::tx_prepared`] come round in a fixed order).
    fn reclaim(&mut self) -> usize {
        let n = self.comp.available();
        for i in (0..n).rev() {
            let addr = self.comp.read(i);
            let base = self.frame_base(addr);
            match self.frame_index(addr) {
                Some(idx) if self.owner[idx] == Owner::Tx => {
                    self.owner[idx] = Owner::Free;
                    self.free.push(base);
                    self.tx_owned -= 1;
                    self.st.tx_completed += 1;
                }
                _ => self.st.tx_bad_completions += 1,
            }
        }
        self.comp.release(n);
        n as usize
    }

    /// Our counters plus the kernel's XDP_STATISTICS.
    pub fn stats(&self) -> Result<XskStats, Error> {
        let k = sys::xsk_statistics(&self.fd)
            .map_err(|e| Error::os(&e, format!("reading XDP_STATISTICS of {} queue {}", self.ifname, self.queue)))?;
        let mut s = self.st;
        s.kernel = KernelStats {
            rx_dropped: k.rx_dropped,
            rx_invalid_descs: k.rx_invalid_descs,
            tx_invalid_descs: k.tx_invalid_descs,
            rx_ring_full: k.rx_ring_full,
            rx_fill_ring_empty_descs: k.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: k.tx_ring_empty_descs,
        };
        Ok(s)
    }

    /// Where every UMEM frame is, counted from the per-frame ownership and
    /// the free list independently (O(frame_count)); see [`FrameAccount`].
    pub fn frame_account(&self) -> FrameAccount {
        let (mut rx, mut tx, mut free_owned) = (0u32, 0u32, 0u32);
        for o in &self.owner {
            match o {
                Owner::Rx => rx += 1,
                Owner::Tx => tx += 1,
                Owner::Free => free_owned += 1,
            }
        }
        let mut seen = vec![false; self.owner.len()];
        let mut inconsistent = 0u32;
        for &addr in &self.free {
            match self.frame_index(addr) {
                Some(i) if self.owner[i] == Owner::Free && !seen[i] => seen[i] = true,
                _ => inconsistent += 1,
            }
        }
        let free = self.free.len() as u32;
        inconsistent += free_owned.abs_diff(free);
        inconsistent += rx.abs_diff(self.rx_owned) + tx.abs_diff(self.tx_owned);
        FrameAccount {
            total: self.total,
            free,
            rx,
            rx_fill_ring: self.fill.unconsumed(),
            rx_ring: self.rx.waiting(),
            tx,
            inconsistent,
        }
    }
}

impl std::fmt::Debug for XskSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskSocket")
            .field("ifname", &self.ifname)
            .field("queue", &self.queue)
            .field("mode", &self.mode)
            .field("frames", &self.total)
            .finish_non_exhaustive()
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn bind_error(e: std::io::Error, ifname: &str, queue: u32, mode: BindMode) -> Error {
    match (e.raw_os_error(), mode) {
        (Some(libc::EOPNOTSUPP), BindMode::ZeroCopy) => Error::new(
            ErrorKind::Unsupported,
            Some(&e),
            format!("{ifname} has no zero-copy AF_XDP support (veth never has); bind with BindMode::Copy or Auto"),
        ),
        (Some(libc::EBUSY), _) => Error::new(
            ErrorKind::Busy,
            Some(&e),
            format!("{ifname} queue {queue} already has an AF_XDP socket bound (or one is still being released); close it first"),
        ),
        (Some(libc::EINVAL), _) => Error::new(
            ErrorKind::InvalidConfig,
            Some(&e),
            format!("cannot bind an AF_XDP socket to {ifname} queue {queue} ({e}); is the queue below the interface's rx queue count?"),
        ),
        (Some(libc::ENETDOWN), _) => {
            Error::new(ErrorKind::Os, Some(&e), format!("{ifname} is down; bring it up first (`ip link set dev {ifname} up`)"))
        }
        _ => Error::os(&e, format!("binding the AF_XDP socket to {ifname} queue {queue}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation_names_the_field() {
        assert!(XskConfig::default().validate().is_ok());
        let bad = |c: XskConfig| c.validate().unwrap_err().to_string();
        assert!(bad(XskConfig { frame_size: 3000, ..Default::default() }).contains("frame_size"));
        assert!(bad(XskConfig { frame_count: 0, ..Default::default() }).contains("frame_count"));
        assert!(bad(XskConfig { rx_ring: 1000, ..Default::default() }).contains("rx_ring"));
        assert!(bad(XskConfig { tx_ring: 0, ..Default::default() }).contains("tx_ring"));
        assert!(bad(XskConfig { rx_ring: 8192, ..Default::default() }).contains("must not exceed frame_count"));
    }

    #[test]
    fn missing_interface_is_named() {
        let e = XskSocket::open("fsnosuch0", 0, &XskConfig::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoSuchInterface, "{e}");
        assert!(e.to_string().contains("fsnosuch0"), "{e}");
        let e = XskSocket::open("bad name", 0, &XskConfig::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoSuchInterface);
    }
}
