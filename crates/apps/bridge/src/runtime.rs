//! The running bridge: its threads, what they share, and the control
//! requests.
//!
//! Threads (all spawned by [`Bridge::start`], in the caller's network
//! namespace, which they inherit):
//! * one worker per `workers` ([`crate::worker`]), pinned to `cpus[i % len]`;
//! * one writer, the only thread that changes anything: it drains the
//!   workers' learning events into the MAC table and publishes about every
//!   millisecond, ages once per second, re-reads its ports' links when
//!   rtnetlink says a link changed (and once per second besides: a port
//!   whose carrier or admin state goes down stops forwarding and loses its
//!   dynamic entries, and comes back by itself), and applies control
//!   requests (port add/del, link set/show, vlan add/del/show/filtering,
//!   fdb add/del/flush/show).
//!
//! Shared state, and who writes it:
//! * the member-port list: an `ArcSwap<PortList>` the writer replaces and
//!   workers load once per loop (no lock); after a change the writer waits
//!   until every worker acknowledged the new version before it closes
//!   anything of a removed port;
//! * counters: per worker and per (port, worker), written by that worker
//!   only, summed by [`Bridge::stats`];
//! * the MAC table: `flowsteer-fdb` (left-right), written by the writer.

use crate::api::{
    BridgeStats, Control, FdbCounters, FdbRow, LinkRow, PortStats, Request, Response, VlanMember, VlanRow, WorkerStats,
    STATS_SCHEMA,
};
use crate::config::{BridgeConfig, FastPath, PortConf, PortFlags, PortState};
use crate::counters::{reason_map, Reason, WorkerCounters};
use crate::error::BridgeError;
use crate::port::{self, PortShared};
use crate::shared::{Member, PortList, Shared};
use crate::worker::Worker;
use arc_swap::ArcSwap;
use flowsteer_fdb::{Changes, EntryKind, FdbConfig, FdbKey, FdbWriter, Flush, Mac, Op, PortId, VlanId};
use flowsteer_live::link::{LinkReader, LinkWatcher};
use flowsteer_live::netdev::NetdevReader;
use flowsteer_xsk::{FastPathAttach, FastPathMaps};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the writer sleeps between drains when nothing asks it.
const WRITER_TICK: Duration = Duration::from_millis(1);
/// How long a control request waits for the writer's answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the writer waits for the workers to acknowledge a new port list.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
/// Port ids the kernel fast path's port table holds: a port added after
/// 4,096 others (ids are never reused) gets no fast path.
const FAST_PORT_SLOTS: u32 = 4096;
/// Static entries the fast path's mirror holds beside the learned ones
/// (`flowsteer-fdb`'s default static limit).
const FAST_STATIC_ENTRIES: usize = 4096;
/// How long a removed port's row stays in `stats` (and its series in the
/// metrics), so a monitor that scrapes every few minutes still sees its
/// last counters; `port del` also answers them.
pub const REMOVED_ROW_TTL: Duration = Duration::from_secs(300);

type Job = (Request, SyncSender<Response>);

/// The handle the control socket and the metrics endpoint use.
#[derive(Debug)]
pub struct BridgeControl {
    shared: Arc<Shared>,
    jobs: Mutex<Option<Sender<Job>>>,
}

impl Control for BridgeControl {
    fn request(&self, req: Request) -> Response {
        if req == Request::Stats {
            return Response::Stats { stats: Box::new(stats(&self.shared)) };
        }
        let Some(tx) = self.jobs.lock().ok().and_then(|j| j.clone()) else {
            return Response::Error { message: "the bridge is stopped".into() };
        };
        let (reply, answer) = mpsc::sync_channel(1);
        if tx.send((req, reply)).is_err() {
            return Response::Error { message: "the bridge is stopped".into() };
        }
        answer
            .recv_timeout(REQUEST_TIMEOUT)
            .unwrap_or_else(|_| Response::Error { message: "the bridge did not answer".into() })
    }
}

/// A running bridge. Dropping it stops it (as [`Bridge::stop`]).
#[derive(Debug)]
pub struct Bridge {
    shared: Arc<Shared>,
    control: Arc<BridgeControl>,
    workers: Vec<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
    warnings: Vec<String>,
}

impl Bridge {
    /// Opens every port and starts the workers and the writer, in the
    /// calling thread's network namespace.
    ///
    /// Errors: [`BridgeError::Config`] for a bad configuration,
    /// [`BridgeError::Port`] when a port cannot be opened (nothing stays
    /// attached), [`BridgeError::Spawn`] when a thread cannot be started.
    pub fn start(cfg: BridgeConfig) -> Result<Bridge, BridgeError> {
        cfg.validate()?;
        let fcfg = FdbConfig {
            ageing_s: cfg.ageing_s,
            max_learned: BridgeConfig::limit(cfg.max_learned),
            max_learned_per_port: BridgeConfig::limit(cfg.max_learned_per_port),
            ..FdbConfig::default()
        };
        let (writer, fdb_workers) =
            flowsteer_fdb::fdb(fcfg, cfg.workers).map_err(|e| BridgeError::Fdb(e.to_string()))?;
        let mut warnings = Vec::new();
        let (fast, fast_off) = fast_path_maps(&cfg)?;
        let mut ports = Vec::new();
        for (i, spec) in cfg.ports.iter().enumerate() {
            let attach = fast_attach(fast.as_ref(), fast_off, i);
            let (p, w) = port::open(PortId(i as u16), spec, cfg.workers, fanout_group(i), attach)
                .map_err(|message| BridgeError::Port { iface: spec.iface.clone(), message })?;
            warnings.extend(w);
            ports.push(Arc::new(p));
        }
        let members: Vec<Member> =
            ports.iter().map(|p| Member { port: p.clone(), conf: Arc::new(cfg.conf_of(&p.spec.iface)) }).collect();
        let mtus: Vec<u32> = ports.iter().map(|p| p.mtu).collect();
        if mtus.iter().any(|m| *m != mtus[0]) {
            let list: Vec<String> = ports.iter().map(|p| format!("{} {}", p.spec.iface, p.mtu)).collect();
            warnings.push(format!(
                "member MTUs differ ({}): frames longer than an egress port's MTU + 18 are dropped (too_big)",
                list.join(", ")
            ));
        }
        let workers = cfg.workers;
        let shared = Arc::new(Shared {
            start: Instant::now(),
            stop: AtomicBool::new(false),
            ports: ArcSwap::from_pointee(PortList { version: 1, ports: members, vlan_filtering: cfg.vlan_filtering }),
            all_ports: Mutex::new(ports),
            acks: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            workers: (0..workers).map(|_| WorkerCounters::default()).collect(),
            cpus: (0..workers).map(|_| AtomicI64::new(-1)).collect(),
            fdb: Mutex::new(FdbCounters::default()),
            fast,
            fast_off,
            links: Mutex::new(flowsteer_live::link::LinkReader::new().ok()),
            cfg,
        });
        let (jobs_tx, jobs_rx) = mpsc::channel();
        let control = Arc::new(BridgeControl { shared: shared.clone(), jobs: Mutex::new(Some(jobs_tx)) });
        let mut bridge = Bridge { shared: shared.clone(), control, workers: Vec::new(), writer: None, warnings };
        let links = LinkReader::new().map_err(|source| BridgeError::Io { what: "netlink socket".into(), source })?;
        let watcher = LinkWatcher::new()
            .map_err(|source| BridgeError::Io { what: "netlink socket (link events)".into(), source })?;
        let mut wr = Writer {
            shared: shared.clone(),
            fdb: writer,
            links,
            watcher,
            jobs: jobs_rx,
            next_id: shared.cfg.ports.len(),
            egress: Vec::new(),
            netdev: match shared.fast {
                Some(_) => NetdevReader::new()
                    .map_err(|source| BridgeError::Io { what: "generic netlink socket".into(), source })?,
                None => None,
            },
            resync: false,
        };
        if shared.fast.is_some() {
            wr.fdb.record_changes(true);
        }
        for m in &shared.ports.load().ports {
            wr.fdb.set_port_limit(m.id, m.conf.flags.max_learned);
        }
        wr.watch_links();
        bridge.warnings.extend(wr.sync_fast_ports());
        wr.publish_counters();
        bridge.writer = Some(
            std::thread::Builder::new()
                .name("fs-bridge-writer".into())
                .spawn(move || wr.run())
                .map_err(BridgeError::Spawn)?,
        );
        for (w, fdb) in fdb_workers.into_iter().enumerate() {
            let sh = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("fs-bridge-w{w}"))
                .spawn(move || {
                    if !sh.cfg.cpus.is_empty() {
                        let cpu = sh.cfg.cpus[w % sh.cfg.cpus.len()];
                        if core_affinity::set_for_current(core_affinity::CoreId { id: cpu as usize }) {
                            sh.cpus[w].store(i64::from(cpu), Ordering::Relaxed);
                        }
                    }
                    if let Some(n) = sh.cfg.worker_nice {
                        // PRIO_PROCESS of 0 is the calling thread on Linux.
                        let _ = rustix::process::setpriority_process(None, i32::from(n));
                    }
                    Worker::new(w, sh, fdb).run();
                })
                .map_err(BridgeError::Spawn)?;
            bridge.workers.push(handle);
        }
        Ok(bridge)
    }

    /// What to tell the user about the ports (MTUs, queues, the fast path).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The kernel fast path's copy of the MAC table as (MAC, VLAN, port),
    /// sorted; `None` without a fast path. For tests and debugging: the
    /// writer keeps it equal to the table (`bridge-ctl fdb show`).
    pub fn fast_path_fdb(&self) -> Option<Vec<(Mac, u16, String)>> {
        let fast = self.shared.fast.as_ref()?;
        let names: Vec<(u16, String)> = self
            .shared
            .all_ports
            .lock()
            .map(|a| a.iter().map(|p| (p.id.0, p.spec.iface.clone())).collect())
            .unwrap_or_default();
        let mut rows: Vec<(Mac, u16, String)> = fast
            .fdb_entries()
            .ok()?
            .into_iter()
            .map(|e| {
                let port =
                    names.iter().find(|n| u32::from(n.0) == e.port).map_or(format!("#{}", e.port), |n| n.1.clone());
                (Mac(e.mac), e.vlan, port)
            })
            .collect();
        rows.sort_by_key(|r| (r.0 .0, r.1));
        Some(rows)
    }

    /// The handle for the control socket and the metrics endpoint.
    pub fn control(&self) -> Arc<dyn Control> {
        self.control.clone()
    }

    /// The counters now.
    pub fn stats(&self) -> BridgeStats {
        stats(&self.shared)
    }

    /// Stops the workers and the writer, closes every port (XDP programs
    /// detached) and returns the final counters.
    pub fn stop(mut self) -> BridgeStats {
        self.shutdown();
        stats(&self.shared)
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        if let Ok(mut j) = self.control.jobs.lock() {
            j.take();
        }
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
        let all = self.shared.all_ports.lock().map(|a| a.clone()).unwrap_or_default();
        for p in all {
            detach(&p);
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The kernel fast path's maps for `cfg`, or why there are none.
fn fast_path_maps(cfg: &BridgeConfig) -> Result<(Option<Arc<FastPathMaps>>, &'static str), BridgeError> {
    let why = match cfg.fast_path {
        FastPath::Off => Some("--fast-path off"),
        _ if !cfg.ports.iter().any(|p| p.kind == crate::api::PortKind::Afxdp) => Some("no afxdp: port"),
        _ => None,
    };
    if let Some(why) = why {
        return Ok((None, why));
    }
    let entries = (cfg.max_learned + FAST_STATIC_ENTRIES).min(flowsteer_xsk::fastpath::MAX_FDB_ENTRIES as usize);
    let maps = FastPathMaps::new(entries as u32, FAST_PORT_SLOTS)
        .map_err(|e| BridgeError::Fdb(format!("the fast path's maps: {e}")))?;
    Ok((Some(Arc::new(maps)), ""))
}

/// What port `id` attaches: the fast path, or why not.
fn fast_attach(fast: Option<&Arc<FastPathMaps>>, off: &'static str, id: usize) -> Result<FastPathAttach, &'static str> {
    match fast {
        None => Err(off),
        Some(_) if id >= FAST_PORT_SLOTS as usize => Err("port id beyond the fast path's port table"),
        Some(m) => Ok(FastPathAttach::new(m.clone(), id as u32)),
    }
}

/// Fanout group of the i-th port opened by this process.
fn fanout_group(i: usize) -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    ((std::process::id() as u64).wrapping_mul(131).wrapping_add(n * 7 + i as u64) & 0xffff) as u16
}

/// Drops a port's XDP program (detaching it), keeping its drop count, and
/// any sockets no worker took.
fn detach(p: &PortShared) {
    let prog = p.program.lock().ok().and_then(|mut g| g.take());
    if let Some(prog) = prog {
        let c = prog.counters().unwrap_or_default();
        p.program_dropped.store(c.dropped, Ordering::Relaxed);
        p.program_fast_forwarded.store(c.fast_forwarded, Ordering::Relaxed);
        drop(prog);
    }
    for h in &p.handoff {
        if let Ok(mut g) = h.lock() {
            g.take();
        }
    }
}

struct Writer {
    shared: Arc<Shared>,
    fdb: FdbWriter,
    links: LinkReader,
    /// Link change events (`ip monitor link`), read every tick.
    watcher: LinkWatcher,
    jobs: Receiver<Job>,
    next_id: usize,
    /// Per port id: whether the fast path may send to it now (as last
    /// written to the port table).
    egress: Vec<Option<bool>>,
    /// XDP features of the egress devices (None: the kernel has no netdev
    /// netlink family).
    netdev: Option<NetdevReader>,
    /// The fast path's mirror is copied whole at the next tick (a port's
    /// forwarding changed, or VLAN filtering was switched).
    resync: bool,
}

impl Writer {
    fn now_s(&self) -> u64 {
        self.shared.start.elapsed().as_secs()
    }

    fn run(&mut self) {
        let mut next_second = Instant::now() + Duration::from_secs(1);
        while !self.shared.stop.load(Ordering::Acquire) {
            match self.jobs.recv_timeout(WRITER_TICK) {
                Ok((req, reply)) => {
                    self.fdb.drain();
                    let _ = reply.send(self.apply(req));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(WRITER_TICK),
            }
            self.fdb.drain();
            // A link event is acted on within a tick; the once-a-second
            // read covers an event lost to a full socket buffer.
            let link_event = self.watcher.changed().unwrap_or(true);
            if link_event {
                self.watch_links();
                self.sync_fast_ports();
            }
            if Instant::now() >= next_second {
                next_second += Duration::from_secs(1);
                self.age();
                self.watch_links();
                self.sync_fast_ports();
                self.forget_removed();
            }
            self.mirror();
            self.publish_counters();
        }
        self.fdb.drain();
        self.publish_counters();
    }

    /// Ages the table; with the fast path, a station it forwarded for
    /// (its `seen` second in the mirror) counts as seen.
    fn age(&mut self) {
        let now = self.now_s();
        let Some(fast) = self.shared.fast.clone() else {
            self.fdb.age(now);
            return;
        };
        // The program's seconds are CLOCK_MONOTONIC's; the table's count
        // from the bridge's start.
        let offset = flowsteer_xsk::now_s().saturating_sub(now);
        self.fdb.age_with(now, |k| {
            let seen = fast.fdb_seen(k.mac.0, k.vlan.0).ok().flatten()?;
            Some(seen.saturating_sub(offset))
        });
    }

    /// Brings the fast path's copy of the table up to date: every change
    /// since the last call, in order (or the whole table after a gap).
    /// Runs in the same loop turn as the publish of the change.
    ///
    /// Entries of a port that does not forward are left out: the program
    /// forwards a frame only when its source's entry names the ingress
    /// port, so such a port's frames, and frames to it, take the workers,
    /// which apply its state.
    fn mirror(&mut self) {
        let Some(fast) = self.shared.fast.clone() else { return };
        let list = self.shared.ports.load_full();
        let set = |k: &FdbKey, e: &flowsteer_fdb::Entry| {
            let forwards = list.get(e.port).is_some_and(|m| m.conf.flags.state.forwards());
            if u32::from(e.port.0) < FAST_PORT_SLOTS && forwards {
                let _ = fast.fdb_set(k.mac.0, k.vlan.0, u32::from(e.port.0), !e.kind.ages());
            } else {
                let _ = fast.fdb_delete(k.mac.0, k.vlan.0);
            }
        };
        let changes = match std::mem::take(&mut self.resync) {
            true => {
                let _ = self.fdb.take_changes();
                Changes::Resync
            }
            false => self.fdb.take_changes(),
        };
        match changes {
            Changes::List(ops) => {
                for op in ops {
                    match op {
                        Op::Set(k, e) => set(&k, &e),
                        Op::Remove(k) => {
                            let _ = fast.fdb_delete(k.mac.0, k.vlan.0);
                        }
                    }
                }
            }
            Changes::Resync => {
                if let Ok(all) = fast.fdb_entries() {
                    for e in all {
                        if self.fdb.entry(Mac(e.mac), VlanId(e.vlan)).is_none() {
                            let _ = fast.fdb_delete(e.mac, e.vlan);
                        }
                    }
                }
                for (k, e) in self.fdb.entries() {
                    set(k, e);
                }
            }
        }
    }

    /// Writes each member port's row of the fast path's port table: an
    /// egress the program may redirect to while it is a member, up, and
    /// able to take redirected frames. Returns what changed, to tell.
    fn sync_fast_ports(&mut self) -> Vec<String> {
        let Some(fast) = self.shared.fast.clone() else { return Vec::new() };
        let mut said = Vec::new();
        let list = self.shared.ports.load_full();
        for p in &list.ports {
            let id = usize::from(p.id.0);
            if id >= FAST_PORT_SLOTS as usize {
                continue;
            }
            let flags = p.conf.flags;
            let idle = if !p.up.load(Ordering::Relaxed) {
                Some("link down")
            } else if !flags.state.forwards() {
                Some("state not forwarding")
            } else if flags.isolated {
                Some("isolated: the workers keep isolated ports apart")
            } else if list.vlan_filtering {
                Some("VLAN filtering on: the fast path keys on VLAN 0")
            } else {
                None
            };
            let (ok, why) = match idle {
                Some(_) => (false, None),
                None => match self.takes_redirects(p.ifindex) {
                    Ok(()) => (true, None),
                    Err(why) => (false, Some(why)),
                },
            };
            if let Ok(mut note) = p.fast_note.lock() {
                *note = match (idle, &why) {
                    (Some(i), _) => format!("idle as egress: {i}"),
                    (None, Some(w)) => format!("idle as egress: {w}"),
                    (None, None) => String::new(),
                };
            }
            if self.egress.len() <= id {
                self.egress.resize(id + 1, None);
            }
            if self.egress[id] == Some(ok) {
                continue;
            }
            if fast.port_set(u32::from(p.id.0), p.ifindex, p.max_frame() as u32, ok).is_ok() {
                self.egress[id] = Some(ok);
                if let Some(why) = why {
                    said.push(format!(
                        "{}: the fast path does not send to it ({why}); frames to it take the workers",
                        p.spec.iface
                    ));
                }
            }
        }
        said
    }

    /// Whether `ifindex` takes frames an XDP program redirects to it: the
    /// kernel says so in the device's XDP features (`ndo-xmit`); a veth has
    /// it only while its peer has an XDP program or GRO on, and takes
    /// nothing while its peer is down. `Err` says why not and the fix.
    fn takes_redirects(&mut self, ifindex: u32) -> Result<(), String> {
        let Some(netdev) = self.netdev.as_mut() else {
            return Err("this kernel does not report XDP features (netdev netlink family, Linux 6.3)".into());
        };
        let features = match netdev.xdp_features(ifindex) {
            Ok(Some(f)) => f,
            Ok(None) => return Err("the interface is gone".into()),
            Err(e) => return Err(format!("its XDP features cannot be read: {e}")),
        };
        let link = self.links.read(ifindex, None).ok().flatten();
        if let Some(l) = link.as_ref().filter(|l| l.kind == "veth") {
            if let Some(peer) = l.link {
                let up = matches!(self.links.read(peer, l.link_netnsid), Ok(Some(p)) if p.up);
                if !up {
                    return Err("its veth peer is down".into());
                }
            }
        }
        match features.ndo_xmit() {
            true => Ok(()),
            false if link.is_some_and(|l| l.kind == "veth") => {
                Err("its veth peer has neither GRO nor an XDP program, so it would drop redirected frames; \
                 fix: ethtool -K PEER gro on, in the peer's namespace"
                    .into())
            }
            false => Err(format!("the driver takes no redirected frames (XDP features: {features})")),
        }
    }

    fn publish_counters(&self) {
        let s = self.fdb.stats();
        let learned = self.fdb.learned_len() as u64;
        let entries = self.fdb.len() as u64;
        let c = FdbCounters {
            entries,
            learned_entries: learned,
            static_entries: entries - learned,
            max_learned: self.fdb.config().max_learned as u64,
            learned: s.learned,
            refreshed: s.refreshed,
            moved: s.moved,
            not_learned_full: s.not_learned_full,
            events_dropped: 0,
            events_suppressed: 0,
            aged: s.aged,
            flushed: s.flushed,
        };
        if let Ok(mut g) = self.shared.fdb.lock() {
            *g = c;
        }
        for m in &self.shared.ports.load().ports {
            m.learned_entries.store(self.fdb.learned_on(m.id) as u64, Ordering::Relaxed);
        }
    }

    /// Reads every member's link: up (administratively, with carrier) or
    /// not. A port whose link went down stops forwarding (the workers
    /// check `up`) and loses its dynamic entries
    /// ([`FdbWriter::flush_port`]); it forwards again when the link is back.
    fn watch_links(&mut self) {
        let list = self.shared.ports.load_full();
        for p in &list.ports {
            let up = matches!(self.links.read(p.ifindex, None), Ok(Some(l)) if l.up && l.carrier);
            let was = p.up.swap(up, Ordering::Relaxed);
            if was && !up {
                self.fdb.flush_port(p.id);
            }
        }
    }

    /// Drops the rows of ports removed more than [`REMOVED_ROW_TTL`] ago.
    fn forget_removed(&mut self) {
        if let Ok(mut all) = self.shared.all_ports.lock() {
            all.retain(|p| !removed_long_ago(p));
        }
    }

    fn member(&self, iface: &str) -> Option<Member> {
        self.shared.ports.load().ports.iter().find(|p| p.spec.iface == iface).cloned()
    }

    /// Publishes `conf` as port `id`'s configuration (a new list version
    /// the workers acknowledge before this returns).
    fn set_conf(&mut self, id: PortId, conf: PortConf) {
        let list = self.shared.ports.load_full();
        let was_forwarding = list.get(id).is_some_and(|m| m.conf.flags.state.forwards());
        let conf = Arc::new(conf);
        let ports = list
            .ports
            .iter()
            .map(|m| if m.id == id { Member { port: m.port.clone(), conf: conf.clone() } } else { m.clone() })
            .collect();
        replace_list(&self.shared, ports, list.vlan_filtering);
        if was_forwarding != conf.flags.state.forwards() {
            self.resync = true;
        }
        self.fdb.set_port_limit(id, conf.flags.max_learned);
        self.sync_fast_ports();
    }

    fn apply(&mut self, req: Request) -> Response {
        let err = |m: String| Response::Error { message: m };
        match req {
            Request::Stats => Response::Stats { stats: Box::new(stats(&self.shared)) },
            Request::FdbShow => Response::Fdb { entries: self.rows() },
            Request::FdbAdd { mac, vlan, iface, kind } => {
                let Some(mac) = parse_mac(&mac) else {
                    return err(format!("bad MAC {mac:?}: expected aa:bb:cc:dd:ee:ff"));
                };
                let kind = match kind.as_str() {
                    "static" => EntryKind::Static,
                    "sticky" => EntryKind::Sticky,
                    "extern_learn" => EntryKind::External,
                    _ => return err(format!("bad entry type {kind:?}: expected static, sticky or extern_learn")),
                };
                if vlan > 4094 {
                    return err(format!("bad VLAN {vlan}: expected 0-4094"));
                }
                let Some(p) = self.member(&iface) else { return err(format!("{iface} is not a member port")) };
                let filtering = self.shared.ports.load().vlan_filtering;
                if !filtering && vlan != 0 {
                    return err(format!(
                        "VLAN filtering is off: every frame is in one learning domain, so an entry in VLAN {vlan} \
                         would never match (add it without vlan, or switch filtering on: bridge-ctl vlan filtering on)"
                    ));
                }
                if filtering && vlan == 0 {
                    let pvid = p.conf.vlans.pvid.map_or("none".to_string(), |v| v.to_string());
                    return err(format!(
                        "VLAN filtering is on: name the entry's VLAN (untagged frames of {iface} are in its PVID, {pvid})"
                    ));
                }
                if filtering && !p.conf.vlans.admits(vlan) {
                    return err(format!(
                        "{iface} is not a member of VLAN {vlan}, so the entry would never forward \
                         (bridge-ctl vlan add dev {iface} vid {vlan} first)"
                    ));
                }
                let now = self.now_s();
                let word = kind.word().unwrap_or("learned");
                match self.fdb.add(mac, VlanId(vlan), p.id, kind, now) {
                    Ok(()) => Response::Ok { detail: format!("added {mac}{} on {iface} ({word})", vlan_words(vlan)) },
                    Err(e) => err(format!("{mac}: {e} (at most {} configured entries)", self.fdb.config().max_static)),
                }
            }
            Request::FdbDel { mac, vlan } => {
                let Some(m) = parse_mac(&mac) else {
                    return err(format!("bad MAC {mac:?}: expected aa:bb:cc:dd:ee:ff"));
                };
                match self.fdb.remove(m, VlanId(vlan)) {
                    true => Response::Ok { detail: format!("removed {m}{}", vlan_words(vlan)) },
                    false => err(format!("no entry for {m}{}", vlan_words(vlan))),
                }
            }
            Request::FdbFlush { iface, vlan, dynamic, statics } => {
                let port = match &iface {
                    Some(i) => match self.member(i) {
                        Some(p) => Some(p.id),
                        None => return err(format!("{i} is not a member port")),
                    },
                    None => None,
                };
                if vlan.is_some_and(|v| v > 4094) {
                    return err("bad VLAN: expected 0-4094".into());
                }
                let dynamic = dynamic || !statics;
                let f = Flush { port, vlan: vlan.map(VlanId), dynamic, statics };
                let n = self.fdb.flush(&f);
                let what = match (dynamic, statics) {
                    (true, true) => "",
                    (true, false) => " dynamic",
                    _ => " static",
                };
                let on = iface.map_or(String::new(), |i| format!(" of {i}"));
                let vl = vlan.map_or(String::new(), vlan_words);
                Response::Ok { detail: format!("flushed {n}{what} {}{on}{vl}", plural(n, "entry", "entries")) }
            }
            Request::PortAdd { port } => self.port_add(port),
            Request::PortDel { iface } => self.port_del(&iface),
            Request::LinkSet { iface, settings } => self.link_set(&iface, &settings),
            Request::LinkShow => Response::Links { links: self.links() },
            Request::VlanAdd { iface, vid, vid_end, pvid, untagged } => {
                let Some(p) = self.member(&iface) else { return err(format!("{iface} is not a member port")) };
                if !(1..=4094).contains(&vid) || vid_end < vid || vid_end > 4094 {
                    return err(format!("bad VLAN range {vid}-{vid_end}: expected ids 1-4094, first <= last"));
                }
                if pvid && vid_end != vid {
                    return err("pvid takes one VLAN, not a range".into());
                }
                let mut conf = (*p.conf).clone();
                conf.vlans.add((vid, vid_end), pvid, untagged);
                self.set_conf(p.id, conf);
                let range = if vid_end == vid { format!("{vid}") } else { format!("{vid}-{vid_end}") };
                let flags = [(pvid, " pvid"), (untagged, " untagged")];
                let flags: String = flags.iter().filter(|f| f.0).map(|f| f.1).collect();
                Response::Ok { detail: format!("{iface}: vid {range}{flags}") }
            }
            Request::VlanDel { iface, vid, vid_end } => {
                let Some(p) = self.member(&iface) else { return err(format!("{iface} is not a member port")) };
                if !(1..=4094).contains(&vid) || vid_end < vid || vid_end > 4094 {
                    return err(format!("bad VLAN range {vid}-{vid_end}: expected ids 1-4094, first <= last"));
                }
                let mut conf = (*p.conf).clone();
                let n = conf.vlans.del((vid, vid_end));
                if n == 0 {
                    return err(format!("{iface} is not a member of VLAN {vid}{}", range_tail(vid, vid_end)));
                }
                self.set_conf(p.id, conf);
                // Entries of those VLANs on the port can no longer forward.
                let mut gone = 0;
                for v in vid..=vid_end {
                    let f = Flush { port: Some(p.id), vlan: Some(VlanId(v)), dynamic: true, statics: true };
                    gone += self.fdb.flush(&f);
                }
                Response::Ok {
                    detail: format!(
                        "{iface}: removed {n} {} ({gone} {} flushed)",
                        plural(n, "VLAN", "VLANs"),
                        plural(gone, "entry", "entries")
                    ),
                }
            }
            Request::VlanShow => {
                let list = self.shared.ports.load_full();
                let ports = list
                    .ports
                    .iter()
                    .map(|m| VlanRow {
                        name: m.spec.iface.clone(),
                        pvid: m.conf.vlans.pvid,
                        vlans: m
                            .conf
                            .vlans
                            .members
                            .iter()
                            .map(|(&vid, &untagged)| VlanMember { vid, untagged })
                            .collect(),
                    })
                    .collect();
                Response::Vlans {
                    filtering: list.vlan_filtering,
                    protocol: self.shared.cfg.vlan_protocol.name().to_string(),
                    ports,
                }
            }
            Request::VlanFiltering { on } => {
                let list = self.shared.ports.load_full();
                if list.vlan_filtering == on {
                    return Response::Ok { detail: format!("VLAN filtering is already {}", on_off(on)) };
                }
                replace_list(&self.shared, list.ports.clone(), on);
                let n = self.fdb.flush(&Flush::default());
                self.resync = true;
                self.sync_fast_ports();
                Response::Ok {
                    detail: format!(
                        "VLAN filtering {} ({n} dynamic {} flushed)",
                        on_off(on),
                        plural(n, "entry", "entries")
                    ),
                }
            }
        }
    }

    /// `link set`: every setting checked before any is applied.
    fn link_set(&mut self, iface: &str, settings: &[(String, String)]) -> Response {
        let Some(p) = self.member(iface) else {
            return Response::Error { message: format!("{iface} is not a member port") };
        };
        if settings.is_empty() {
            return Response::Error { message: "link set: nothing to set".into() };
        }
        let mut conf = (*p.conf).clone();
        for (name, value) in settings {
            if let Err(e) = conf.flags.apply(name, value) {
                return Response::Error { message: e.to_string() };
            }
        }
        let old = p.conf.flags;
        let new = conf.flags;
        self.set_conf(p.id, conf);
        // A port that stops learning and forwarding (disabled, blocking,
        // listening) loses its dynamic entries: its stations are not
        // reachable through it any more.
        let mut detail = format!("{iface}: {}", describe_flags(&new));
        if old.state.learns() && !new.state.learns() {
            let n = self.fdb.flush_port(p.id);
            detail.push_str(&format!(" ({n} {} flushed)", plural(n, "entry", "entries")));
        }
        Response::Ok { detail }
    }

    fn links(&self) -> Vec<LinkRow> {
        let list = self.shared.ports.load_full();
        list.ports
            .iter()
            .map(|m| {
                let f = m.conf.flags;
                LinkRow {
                    name: m.spec.iface.clone(),
                    kind: kind_name(m),
                    up: m.up.load(Ordering::Relaxed),
                    state: f.state.name().to_string(),
                    learning: f.learning,
                    flood: f.flood,
                    mcast_flood: f.mcast_flood,
                    bcast_flood: f.bcast_flood,
                    isolated: f.isolated,
                    max_learned: match self.fdb.port_limit(m.id) {
                        n if n >= flowsteer_fdb::MAX_CAPACITY => 0,
                        n => n as u64,
                    },
                    learned_entries: self.fdb.learned_on(m.id) as u64,
                    fast_path: fast_status(m),
                }
            })
            .collect()
    }

    fn rows(&self) -> Vec<FdbRow> {
        let names: Vec<(PortId, String)> = self
            .shared
            .all_ports
            .lock()
            .map(|a| a.iter().map(|p| (p.id, p.spec.iface.clone())).collect())
            .unwrap_or_default();
        let now = self.now_s();
        let mut rows: Vec<(PortId, u16, Mac, FdbRow)> = self
            .fdb
            .entries()
            .map(|(k, e)| {
                let port = names
                    .iter()
                    .find(|(id, _)| *id == e.port)
                    .map_or_else(|| format!("#{}", e.port.0), |n| n.1.clone());
                let age_s = if e.kind.ages() { now.saturating_sub(e.last_seen_s) } else { 0 };
                let row = FdbRow {
                    mac: k.mac.to_string(),
                    port,
                    vlan: k.vlan.0,
                    is_static: e.is_static(),
                    kind: e.kind.word().unwrap_or("learned").to_string(),
                    age_s,
                };
                (e.port, k.vlan.0, k.mac, row)
            })
            .collect();
        rows.sort_by(|a, b| (&a.3.port, a.1, a.2).cmp(&(&b.3.port, b.1, b.2)));
        rows.into_iter().map(|r| r.3).collect()
    }

    fn port_add(&mut self, spec: crate::api::PortSpec) -> Response {
        let list = self.shared.ports.load_full();
        if list.ports.iter().any(|p| p.spec.iface == spec.iface) {
            return Response::Error { message: format!("{} is already a member port", spec.iface) };
        }
        if list.ports.len() >= crate::config::MAX_PORTS || self.next_id > usize::from(u16::MAX) {
            return Response::Error { message: "no room for another port".into() };
        }
        let id = PortId(self.next_id as u16);
        let cfg = &self.shared.cfg;
        let attach = fast_attach(self.shared.fast.as_ref(), self.shared.fast_off, self.next_id);
        let conf = cfg.conf_of(&spec.iface);
        match port::open(id, &spec, cfg.workers, fanout_group(self.next_id), attach) {
            Ok((p, mut warnings)) => {
                self.next_id += 1;
                self.fdb.set_port_limit(id, conf.flags.max_learned);
                add_member(&self.shared, Arc::new(p), conf);
                warnings.extend(self.sync_fast_ports());
                let mut detail = format!("added {spec}");
                for w in warnings {
                    detail.push_str("; ");
                    detail.push_str(&w);
                }
                Response::Ok { detail }
            }
            Err(message) => Response::Error { message: format!("{spec}: {message}") },
        }
    }

    fn port_del(&mut self, iface: &str) -> Response {
        let list = self.shared.ports.load_full();
        let Some(gone) = list.ports.iter().find(|p| p.spec.iface == iface).cloned() else {
            return Response::Error { message: format!("{iface} is not a member port") };
        };
        let n = remove_member(&self.shared, &mut self.fdb, &gone.port);
        if let Some(e) = self.egress.get_mut(usize::from(gone.id.0)) {
            *e = None;
        }
        let row = stats(&self.shared).ports.into_iter().find(|p| !p.member && p.name == iface);
        let last = row.map_or(String::new(), |r| {
            let dropped: u64 = r.dropped.values().sum();
            format!(
                "; its last counters: received {}, forwarded {}, flooded {}, dropped {dropped}, transmitted {} \
                 (its row leaves stats in {} s)",
                r.received,
                r.forwarded + r.fast_forwarded,
                r.flooded,
                r.transmitted,
                REMOVED_ROW_TTL.as_secs()
            )
        });
        Response::Ok { detail: format!("removed {iface} ({n} {} flushed){last}", plural(n, "entry", "entries")) }
    }
}

/// Publishes a new member list and waits (at most [`ACK_TIMEOUT`]) until
/// every worker has taken it.
fn replace_list(shared: &Shared, ports: Vec<Member>, vlan_filtering: bool) {
    let version = shared.ports.load().version + 1;
    shared.ports.store(Arc::new(PortList { version, ports, vlan_filtering }));
    let deadline = Instant::now() + ACK_TIMEOUT;
    while Instant::now() < deadline
        && shared.acks.iter().any(|a| a.load(Ordering::Acquire) < version)
        && !shared.stop.load(Ordering::Relaxed)
    {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Makes the opened port `p` a member with `conf` (writer only).
pub(crate) fn add_member(shared: &Shared, p: Arc<PortShared>, conf: PortConf) {
    if let Ok(mut all) = shared.all_ports.lock() {
        all.push(p.clone());
    }
    let list = shared.ports.load_full();
    let mut ports = list.ports.clone();
    ports.push(Member { port: p, conf: Arc::new(conf) });
    replace_list(shared, ports, list.vlan_filtering);
}

/// Takes the member `gone` out (writer only): a new list the workers
/// acknowledge (they hand its sockets back), then its entries removed
/// from the table and its sockets and program closed. Returns how many
/// entries were removed.
pub(crate) fn remove_member(shared: &Shared, fdb: &mut FdbWriter, gone: &Arc<PortShared>) -> usize {
    // The fast path stops sending to it first; its own program, detached
    // below, stops forwarding from it.
    if let Some(fast) = &shared.fast {
        if u32::from(gone.id.0) < FAST_PORT_SLOTS {
            let _ = fast.port_clear(u32::from(gone.id.0));
        }
    }
    let list = shared.ports.load_full();
    let ports = list.ports.iter().filter(|p| p.id != gone.id).cloned().collect();
    replace_list(shared, ports, list.vlan_filtering);
    gone.member.store(false, Ordering::Relaxed);
    if let Ok(mut at) = gone.removed_at.lock() {
        *at = Some(Instant::now());
    }
    // Sources the workers saw on the port until they acknowledged the
    // new list are still in their event queues: learn them first, so
    // that removing the port's entries removes them too.
    fdb.drain();
    let n = fdb.remove_port(gone.id);
    detach(gone);
    n
}

/// Whether `p` was removed more than [`REMOVED_ROW_TTL`] ago.
fn removed_long_ago(p: &PortShared) -> bool {
    p.removed_at.lock().ok().and_then(|g| *g).is_some_and(|t| t.elapsed() > REMOVED_ROW_TTL)
}

fn kind_name(p: &PortShared) -> String {
    match p.spec.kind {
        crate::api::PortKind::Afxdp => "afxdp".into(),
        crate::api::PortKind::Afpacket => "afpacket".into(),
    }
}

/// The fast path's status on `p`: how it is attached, and why it does
/// not forward to the port now, if it does not.
fn fast_status(p: &PortShared) -> String {
    let note = p.fast_note.lock().map(|n| n.clone()).unwrap_or_default();
    if note.is_empty() || !p.fast_path.starts_with("xdp") {
        p.fast_path.clone()
    } else {
        format!("{} ({note})", p.fast_path)
    }
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// ` vlan N` for a VLAN, nothing for untagged (0).
fn vlan_words(vlan: u16) -> String {
    if vlan == 0 {
        String::new()
    } else {
        format!(" vlan {vlan}")
    }
}

fn range_tail(vid: u16, end: u16) -> String {
    if end == vid {
        String::new()
    } else {
        format!("-{end}")
    }
}

/// The flags as `link show` prints them.
pub fn describe_flags(f: &PortFlags) -> String {
    let max = match f.max_learned {
        None => String::new(),
        Some(0) => " max_learned 0 (none)".to_string(),
        Some(n) => format!(" max_learned {n}"),
    };
    format!(
        "state {} learning {} flood {} mcast_flood {} bcast_flood {} isolated {}{max}",
        f.state.name(),
        on_off(f.learning),
        on_off(f.flood),
        on_off(f.mcast_flood),
        on_off(f.bcast_flood),
        on_off(f.isolated)
    )
}

/// `aa:bb:cc:dd:ee:ff` (hex digits in either case).
pub fn parse_mac(s: &str) -> Option<Mac> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(Mac(m))
}

pub(crate) fn stats(sh: &Shared) -> BridgeStats {
    let all: Vec<Arc<PortShared>> =
        sh.all_ports.lock().map(|a| a.iter().filter(|p| !removed_long_ago(p)).cloned().collect()).unwrap_or_default();
    let list = sh.ports.load_full();
    let nworkers = sh.workers.len();
    let mut ports = Vec::new();
    // Kernel drops per worker (of its sockets, over every port).
    let mut worker_kernel = vec![0u64; nworkers];
    for p in &all {
        let (mut rx, mut fwd, mut fl, mut tx, mut padded) = (0, 0, 0, 0, 0);
        let mut dropped = [0u64; Reason::COUNT];
        let mut tx_dropped = [0u64; Reason::COUNT];
        for (w, c) in p.counters.iter().enumerate() {
            rx += c.received.get();
            fwd += c.forwarded.get();
            fl += c.flooded.get();
            tx += c.transmitted.get();
            padded += c.tx_padded.get();
            for (d, v) in dropped.iter_mut().zip(c.dropped.values()) {
                *d += v;
            }
            for (d, v) in tx_dropped.iter_mut().zip(c.tx_dropped.values()) {
                *d += v;
            }
            worker_kernel[w] += c.dropped.get(Reason::Kernel);
        }
        let program = p.program.lock().ok().and_then(|g| g.as_ref().and_then(|prog| prog.counters().ok()));
        let prog_dropped = program.map_or_else(|| p.program_dropped.load(Ordering::Relaxed), |c| c.dropped);
        let fast = program.map_or_else(|| p.program_fast_forwarded.load(Ordering::Relaxed), |c| c.fast_forwarded);
        dropped[Reason::Kernel as usize] += prog_dropped;
        let kernel = dropped[Reason::Kernel as usize];
        let member = list.get(p.id).filter(|m| Arc::ptr_eq(&m.port, p));
        // A member's interface is read now; a removed port keeps its last counts.
        let link = match p.link_counts.lock() {
            Ok(mut c) => {
                if member.is_some() {
                    if let Some(r) = sh.links.lock().ok().as_mut().and_then(|g| g.as_mut()) {
                        c.refresh(r, p.ifindex);
                    }
                }
                c.since_open()
            }
            Err(_) => None,
        };
        ports.push(PortStats {
            if_rx_packets: link.map(|l| l.0),
            if_rx_dropped: link.map(|l| l.1),
            peer_tx_dropped: link.and_then(|l| l.2),
            name: p.spec.iface.clone(),
            kind: kind_name(p),
            member: p.member.load(Ordering::Relaxed),
            up: p.up.load(Ordering::Relaxed),
            state: member.map_or(PortState::Disabled, |m| m.conf.flags.state).name().to_string(),
            learned_entries: if member.is_some() { p.learned_entries.load(Ordering::Relaxed) } else { 0 },
            received: rx + kernel + fast,
            fast_forwarded: fast,
            fast_path: fast_status(p),
            forwarded: fwd,
            flooded: fl,
            dropped: reason_map(&dropped),
            transmitted: tx,
            tx_dropped: reason_map(&tx_dropped),
            tx_padded: padded,
            xdp_mode: p.xdp.as_ref().map(|x| x.mode.to_string()),
            xdp_fallback: p.xdp.as_ref().and_then(|x| x.fallback.clone()),
        });
    }
    ports.sort_by_key(|p| !p.member);
    let workers: Vec<WorkerStats> = sh
        .workers
        .iter()
        .enumerate()
        .map(|(w, c)| {
            let mut dropped = c.dropped.values();
            dropped[Reason::Kernel as usize] += worker_kernel[w];
            let cpu = sh.cpus[w].load(Ordering::Relaxed);
            WorkerStats {
                worker: w,
                cpu: u32::try_from(cpu).ok(),
                received: c.received.get() + worker_kernel[w],
                forwarded: c.forwarded.get(),
                flooded: c.flooded.get(),
                dropped: reason_map(&dropped),
                rx_copied: c.rx_copied.get(),
                csum_completed: c.csum_completed.get(),
                gso_segmented: c.gso_segmented.get(),
            }
        })
        .collect();
    let mut bad = Vec::new();
    let mut sums = Vec::new();
    for (name, r, k, f, fl, d) in ports
        .iter()
        .map(|p| {
            (p.name.clone(), p.received, p.fast_forwarded, p.forwarded, p.flooded, p.dropped.values().sum::<u64>())
        })
        .chain(workers.iter().map(|w| {
            (format!("worker {}", w.worker), w.received, 0, w.forwarded, w.flooded, w.dropped.values().sum::<u64>())
        }))
    {
        let ok = r == k + f + fl + d;
        let fast = if k > 0 { format!("{k} (kernel) + ") } else { String::new() };
        sums.push(format!("{name}: {r} {} {fast}{f} + {fl} + {d}", if ok { "=" } else { "!=" }));
        if !ok {
            bad.push(name);
        }
    }
    let mut fdb = sh.fdb.lock().map(|g| g.clone()).unwrap_or_default();
    fdb.events_dropped = sh.workers.iter().map(|w| w.events_dropped.get()).sum();
    fdb.events_suppressed = sh.workers.iter().map(|w| w.events_suppressed.get()).sum();
    BridgeStats {
        schema: STATS_SCHEMA.to_string(),
        uptime_s: sh.start.elapsed().as_secs_f64(),
        ports,
        workers,
        fdb,
        conservation_ok: bad.is_empty(),
        conservation: format!(
            "received = fast-forwarded (kernel) + forwarded + flooded + dropped; {}",
            sums.join("; ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_strictly() {
        assert_eq!(parse_mac("02:AB:00:00:00:0f"), Some(Mac([2, 0xab, 0, 0, 0, 0xf])));
        for bad in
            ["", "02:ab:00:00:00", "02:ab:00:00:00:0f:11", "2:ab:00:00:00:0f", "zz:ab:00:00:00:0f", "02-ab-00-00-00-0f"]
        {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }
}
