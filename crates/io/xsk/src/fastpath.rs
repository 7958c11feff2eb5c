//! The bridge's kernel fast path for learned unicast: the XDP program on
//! each member port forwards a frame whose destination the bridge has
//! learned by itself, with `XDP_REDIRECT` through a device map, and hands
//! every other frame to the port's AF_XDP sockets as before (the slow path:
//! user space learns, floods, and counts every drop by reason).
//!
//! One owner of the table, a fast reader of a copy (OpenWrt's `bridger`,
//! OVS's kernel datapath): the bridge keeps its FDB and mirrors it into
//! [`FastPathMaps`], shared by the programs of all its ports
//! ([`FastPathAttach`], one program per port with its port id built in).
//!
//! # The maps
//!
//! | map     | type   | key                           | value                                                   |
//! |---------|--------|-------------------------------|---------------------------------------------------------|
//! | `fdb`   | HASH   | MAC (6 bytes) + VLAN (u16)    | port u32, flags u32 (bit 0: static), seen u64 (seconds) |
//! | `ports` | ARRAY  | port id (u32)                 | ifindex u32, max_frame u32, flags u32 (bit 0: enabled), pad |
//! | `tx`    | DEVMAP | port id (u32)                 | ifindex u32 (the egress device)                         |
//!
//! Numbers are in host byte order. Who writes what: the bridge's control
//! thread (one writer) writes every map through [`FastPathMaps`]; the
//! programs only read, except the `seen` field of a source's FDB entry,
//! which they store (a plain 8-byte store, once per second per MAC at
//! most). Every method is thread-safe: each is one or two bpf(2) calls on
//! elements, which the kernel makes atomic per element; a reader (program
//! or user space) sees an element either before or after an update.
//!
//! # The rules, in the program's order
//!
//! a. Shorter than an Ethernet header, or to a group address (the I/G bit
//!    of byte 0: multicast, broadcast) → slow (`slow_not_unicast`).
//! b. `fdb[(dst MAC, VLAN 0)]` absent → slow (`slow_unknown_dst`).
//! c. its port is the ingress port → slow (`slow_same_port`; user space
//!    drops and counts it).
//! d. `fdb[(src MAC, VLAN 0)]` absent or on another port → slow
//!    (`slow_src_not_here`: learning and MAC moves always go through user
//!    space); otherwise its `seen` becomes the current second
//!    ([`now_s`]), stored only when the second changed.
//! e. `ports[dst port]` not enabled → slow (`slow_egress_off`); the frame
//!    longer than its `max_frame` → slow (`slow_too_big`).
//! f. A TCP or UDP checksum left partial by a local sender with checksum
//!    offload (the field holds the folded, not complemented, pseudo-header
//!    sum) must not be redirected: the receiver would drop the frame. For
//!    IPv4 (IHL honoured; fragments are complete: their sender finished the
//!    checksum before fragmenting) and IPv6 whose next header is TCP or UDP
//!    directly, the program computes the pseudo-header sum (addresses,
//!    protocol, L4 length from the IP header), folds it, and if the
//!    checksum field equals it in ones' complement (0x0000 == 0xffff) →
//!    slow (`slow_partial_csum`). A UDP checksum of 0 (none) is never a
//!    partial one (the kernel stores the folded sum, which is never 0). A
//!    complete checksum that happens to equal the sum (1 in 65,535) takes
//!    the slow path too, where frames are handled as without a fast path.
//!    An IPv6 extension header before the transport header, IP headers cut
//!    short, an IHL below 5 or a total length shorter than the header, or
//!    a third VLAN tag → slow (`slow_unparsed`). One or two VLAN tags
//!    (802.1Q, or 802.1ad outside) are skipped first, so tagged frames get
//!    the same check. Frames that are neither IPv4 nor IPv6 (ARP...), and IP
//!    packets of other protocols, carry no such checksum and go on.
//! g. `bpf_redirect_map(tx, dst port, 0)` returns `XDP_REDIRECT` → counted
//!    `fast_forwarded` and returned; otherwise (no device for that port in
//!    `tx`) → slow (`slow_redirect_failed`).
//!
//! The slow path is the claim policy of [`crate::Claim`] (for the bridge
//! [`crate::Claim::Frames`]: the frame-length drop, then the XSKMAP). Every
//! frame that takes it is counted once by its slow reason and once by its
//! outcome ([`crate::XdpReasons`]); a forwarded frame only as
//! `fast_forwarded`.
//!
//! The FDB keys always carry VLAN 0: the fast path serves a bridge that
//! does not filter VLANs (it forwards tagged frames by MAC alone, as the
//! bridge does then). A VLAN-filtering bridge must not enable it.
//!
//! The program listing for a fixed configuration is `src/fastpath.listing`
//! ([`crate::program_listing`]); read it to follow the instructions.
//!
//! # What the kernel does around it (Linux 6.18, measured)
//!
//! * A device map entry's ifindex is resolved when it is written, in the
//!   network namespace of the thread that writes it; an ifindex that does
//!   not exist there is refused (EINVAL, reported as
//!   [`ErrorKind::NoSuchInterface`]). Write [`FastPathMaps::port_set`]
//!   from a thread inside the bridge's namespace.
//! * `fast_forwarded` counts the frames the device map accepted; the
//!   kernel can still drop them on the way out. A redirect into a veth is
//!   delivered only while its peer (the far end, say a container's
//!   interface) has an XDP program or GRO on (`ethtool -K PEER gro on`);
//!   otherwise every such frame is dropped. On 6.18 the drop is counted by
//!   the *ingress* veth, as `rx_queue_N_drops` in its `ethtool -S` and as
//!   RX `dropped` in `ip -s link`, not as `xdp_xmit_err` of the egress
//!   (the kernel refuses the enqueue: the egress does not advertise
//!   `NETDEV_XDP_ACT_NDO_XMIT`). Set a port's enabled flag only when its
//!   egress takes redirects; the live test
//!   `fast_path_forwards_learned_unicast_and_leaves_partial_checksums_to_the_slow_path`
//!   shows both states.
//! * A frame with a partial checksum that takes the slow path while no
//!   socket is registered is passed to the kernel of the bridge's
//!   namespace, which drops it (it is addressed to another host's MAC).
//! * Any device can be written into the device map (even `lo`): whether it
//!   takes redirects is only found out per frame, at transmit.
//! * Under `BPF_PROG_TEST_RUN` (no live frames) a redirect is decided but
//!   not carried out: the fast path returns `XDP_REDIRECT` (4) when the
//!   device map has the egress port, and the slow path returns `XDP_PASS`
//!   (2: the XSKMAP fallback, no socket registered), or `XDP_DROP` (1) for
//!   a frame longer than the socket frame.
//! * In generic (skb) mode the redirect goes through the egress device's
//!   ordinary transmit path; the veth peer rule above is about native mode.
//!
//! # Cost
//!
//! Measured here (kernel 6.18, JIT on, 2 vCPUs; BPF_PROG_TEST_RUN with
//! 10^6 repetitions, release build): a forwarded UDPv4 or TCPv6 frame
//! 115-130 ns per run (three map lookups, the clock, the checksum check,
//! the redirect); a partial checksum found 115 ns before the slow path; an
//! unknown destination 50 ns, a broadcast 32 ns; the same program without
//! the fast path (every frame to the XSKMAP) 30-34 ns.
//!
//! # Capacities
//!
//! `fdb`: `fdb_entries` elements, preallocated by the kernel at creation
//! (1..=[`MAX_FDB_ENTRIES`]; the bridge: 65,536 learned + 4,096 static);
//! an insert into a full map fails with [`ErrorKind::TableFull`] and
//! changes nothing (the bridge then keeps that MAC on the slow path).
//! `ports` and `tx`: `max_ports` slots (1..=[`MAX_PORT_SLOTS`]) indexed by
//! the bridge's port id. Port ids are slots: the bridge's ids grow as ports
//! are added (up to u16::MAX), so size `max_ports` for the largest id it
//! will hand out, not for the number of members.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::asm::*;
use crate::error::{Error, ErrorKind};
use crate::sys::{self, Map, BPF_ANY};
use crate::xdp::{bump_counter, slot, XDP_MD_DATA, XDP_MD_DATA_END, XDP_REDIRECT};

/// The largest `fdb_entries` of [`FastPathMaps::new`] (about 80 bytes of
/// kernel memory each, preallocated).
pub const MAX_FDB_ENTRIES: u32 = 1 << 20;
/// The largest `max_ports` of [`FastPathMaps::new`]: every u16 port id.
pub const MAX_PORT_SLOTS: u32 = 1 << 16;

/// FDB entry flag: a static entry (configured, never aged).
pub const FDB_FLAG_STATIC: u32 = 1 << 0;
/// Port flag: the port may be a fast-path egress.
pub const PORT_FLAG_ENABLED: u32 = 1 << 0;

/// Map names as bpftool shows them.
const FDB_MAP_NAME: &str = "flowsteer_fdb";
const PORTS_MAP_NAME: &str = "flowsteer_ports";
const TX_MAP_NAME: &str = "flowsteer_tx";

/// FDB key: the MAC, then the VLAN id (u16, host order) at 6.
const FDB_KEY_LEN: u32 = 8;
const FDB_KEY_VLAN: i16 = 6;
/// FDB value: port, flags, seen.
const FDB_VALUE_LEN: u32 = 16;
const FDB_PORT: i16 = 0;
const FDB_FLAGS: i16 = 4;
const FDB_SEEN: i16 = 8;
/// Port value: ifindex, max_frame, flags, padding.
const PORT_VALUE_LEN: u32 = 16;
const PORT_IFINDEX: i16 = 0;
const PORT_MAX_FRAME: i16 = 4;
const PORT_FLAGS: i16 = 8;

/// Stack slots of the fast path (offsets from r10), below the claim
/// program's (see `prog.rs`): the two FDB keys and the port key.
const STACK_DST_KEY: i16 = -16;
const STACK_SRC_KEY: i16 = -24;
const STACK_PORT_KEY: i16 = -28;

/// Ethernet: destination MAC at 0, source at 6, ethertype at 12; the
/// group (I/G) bit of the destination's first byte.
const ETH_DST: i16 = 0;
const ETH_SRC: i16 = 6;
const ETH_TYPE: i16 = 12;
const ETH_HLEN: i32 = 14;
const ETH_ALEN: i16 = 6;
const MAC_GROUP_BIT: i32 = 0x01;
/// A VLAN tag after the outer ethertype field: TCI at 0, the next
/// ethertype at 2, 4 bytes in all.
const VLAN_NEXT_TYPE: i16 = 2;
const VLAN_HLEN: i32 = 4;
/// Ethertypes, as numbers (after `be16`).
const ETH_P_IP: i32 = 0x0800;
const ETH_P_IPV6: i32 = 0x86dd;
const ETH_P_8021Q: i32 = 0x8100;
const ETH_P_8021AD: i32 = 0x88a8;

/// IPv4 header fields.
const IPV4_VER_IHL: i16 = 0;
const IPV4_TOT_LEN: i16 = 2;
const IPV4_FRAG: i16 = 6;
const IPV4_PROTO: i16 = 9;
const IPV4_SADDR: i16 = 12;
const IPV4_DADDR: i16 = 16;
const IPV4_HLEN: i32 = 20;
const IPV4_IHL_MASK: i32 = 0x0f;
/// IHL counts 32-bit words: shift left by 2 for bytes.
const IPV4_IHL_SHIFT: i32 = 2;
/// MF and the fragment offset: a fragment when non-zero.
const IPV4_MF_OFFSET: i32 = 0x3fff;
/// IPv6 header fields; the addresses from 8 to 40.
const IPV6_PAYLOAD_LEN: i16 = 4;
const IPV6_NEXT_HDR: i16 = 6;
const IPV6_SADDR: i16 = 8;
const IPV6_HLEN: i32 = 40;
/// IP protocol numbers.
const IPPROTO_TCP: i32 = 6;
const IPPROTO_UDP: i32 = 17;
/// IPv6 extension headers (IANA's list: Hop-by-Hop 0, Routing 43,
/// Fragment 44, ESP 50, AH 51, Destination Options 60, Mobility 135, HIP
/// 139, Shim6 140, experiments 253 and 254): any of them before the
/// transport header sends the frame to the slow path.
const IPV6_EXT_HEADERS: [i32; 11] = [0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254];
/// Checksum fields: UDP's at 6 (header 8 bytes), TCP's at 16.
const UDP_CSUM: i16 = 6;
const TCP_CSUM: i16 = 16;
const CSUM_LEN: i32 = 2;
/// Folds of `(s & 0xffff) + (s >> 16)` that bring the pseudo-header sum to
/// 16 bits: it adds at most eight 32-bit address words, the protocol and a
/// 16-bit length, so s < 2^36; then < 2^21, then <= 0x1001e, then <= 0xffff.
const CSUM_FOLDS: usize = 3;
const CSUM_MASK: i32 = 0xffff;
/// Ones' complement equality: two 16-bit values are equal modulo 0xffff.
const ONES_COMPLEMENT_MODULUS: i32 = 0xffff;
/// A `max_frame` above this lets every frame through: no XDP frame is
/// longer, and the verifier bounds what is added to a packet pointer.
const MAX_FRAME_CHECKED: i32 = 0xffff;

const NS_PER_S: u64 = 1_000_000_000;

/// CLOCK_MONOTONIC in whole seconds, as the program computes it
/// (`bpf_ktime_get_ns() / 1e9`): compare an FDB entry's `seen` with this.
/// Thread-safe.
pub fn now_s() -> u64 {
    sys::monotonic_ns() / NS_PER_S
}

/// One FDB entry of the mirror, as the program sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FastFdbEntry {
    /// The MAC address.
    pub mac: [u8; 6],
    /// The VLAN id of the key (0 on a bridge that does not filter VLANs).
    pub vlan: u16,
    /// The bridge's port id it was learned on (or configured for).
    pub port: u32,
    /// A static entry.
    pub is_static: bool,
    /// The second ([`now_s`]) at which the mirror last saw it: set when
    /// the entry is created, and by the program for every frame from this
    /// MAC on its own port that passes rule d (its destination is learned
    /// on another port), forwarded in the kernel or not.
    pub seen: u64,
}

/// One slot of the port table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FastPort {
    /// The ifindex written (0: an empty slot).
    pub ifindex: u32,
    /// The longest frame the egress takes (MTU + 18).
    pub max_frame: u32,
    /// The port may be a fast-path egress.
    pub enabled: bool,
    /// The device map's entry, as the kernel reports it back (None: no
    /// entry, redirects to this port fail).
    pub tx_ifindex: Option<u32>,
}

/// The bridge's FDB and port table mirrored into BPF maps, created once
/// per bridge and shared by the XDP programs of all its ports (see the
/// module docs for layouts, rules and capacities). Closing it (dropping
/// the last `Arc`) leaves the maps alive as long as a program uses them.
///
/// Thread-safe (`Send + Sync`): every method is a few bpf(2) element
/// calls. The design assumes one writer (the bridge's control thread) for
/// the FDB's port and flags and for the port table; the programs write
/// only `seen`.
#[derive(Debug)]
pub struct FastPathMaps {
    fdb: Map,
    ports: Map,
    tx: Map,
    fdb_entries: u32,
    max_ports: u32,
}

fn fdb_key(mac: [u8; 6], vlan: u16) -> [u8; FDB_KEY_LEN as usize] {
    let mut k = [0u8; FDB_KEY_LEN as usize];
    k[..6].copy_from_slice(&mac);
    k[FDB_KEY_VLAN as usize..].copy_from_slice(&vlan.to_ne_bytes());
    k
}

fn field32(b: &[u8], at: i16) -> u32 {
    let at = at as usize;
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn put32(b: &mut [u8], at: i16, v: u32) {
    let at = at as usize;
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn fdb_value(port: u32, flags: u32, seen: u64) -> [u8; FDB_VALUE_LEN as usize] {
    let mut v = [0u8; FDB_VALUE_LEN as usize];
    put32(&mut v, FDB_PORT, port);
    put32(&mut v, FDB_FLAGS, flags);
    v[FDB_SEEN as usize..].copy_from_slice(&seen.to_ne_bytes());
    v
}

fn fdb_seen_of(v: &[u8; FDB_VALUE_LEN as usize]) -> u64 {
    let mut s = [0u8; 8];
    s.copy_from_slice(&v[FDB_SEEN as usize..]);
    u64::from_ne_bytes(s)
}

/// A failed bpf(2) call on one of the maps, as an [`Error`].
fn map_error(e: &std::io::Error, what: String) -> Error {
    match e.raw_os_error() {
        Some(libc::E2BIG) => Error::new(ErrorKind::TableFull, Some(e), format!("{what}: the map is full")),
        _ => Error::os(e, what),
    }
}

impl FastPathMaps {
    /// Creates the three maps: an FDB mirror of `fdb_entries` elements
    /// (1..=[`MAX_FDB_ENTRIES`]) and port tables of `max_ports` slots
    /// (1..=[`MAX_PORT_SLOTS`]; port ids 0..max_ports), all empty.
    ///
    /// Errors: out-of-range sizes ([`ErrorKind::InvalidConfig`]), not root
    /// ([`ErrorKind::NotPermitted`]), the kernel's refusal ([`ErrorKind::Os`]).
    pub fn new(fdb_entries: u32, max_ports: u32) -> Result<FastPathMaps, Error> {
        if fdb_entries == 0 || fdb_entries > MAX_FDB_ENTRIES {
            return Err(Error::config(format!("fdb_entries must be 1..={MAX_FDB_ENTRIES}, not {fdb_entries}")));
        }
        if max_ports == 0 || max_ports > MAX_PORT_SLOTS {
            return Err(Error::config(format!("max_ports must be 1..={MAX_PORT_SLOTS}, not {max_ports}")));
        }
        let created = |what: &str| {
            let what = format!("creating the fast path's {what} map");
            move |e: std::io::Error| map_error(&e, what)
        };
        let fdb = Map::hash(FDB_KEY_LEN, FDB_VALUE_LEN, fdb_entries, FDB_MAP_NAME).map_err(created("FDB"))?;
        let ports = Map::array(PORT_VALUE_LEN, max_ports, PORTS_MAP_NAME).map_err(created("port"))?;
        let tx = Map::devmap(max_ports, TX_MAP_NAME).map_err(created("device"))?;
        Ok(FastPathMaps { fdb, ports, tx, fdb_entries, max_ports })
    }

    /// FDB capacity (elements).
    pub fn fdb_capacity(&self) -> u32 {
        self.fdb_entries
    }

    /// Port slots: port ids 0..max_ports.
    pub fn max_ports(&self) -> u32 {
        self.max_ports
    }

    fn check_port(&self, port: u32) -> Result<(), Error> {
        if port >= self.max_ports {
            return Err(Error::config(format!("port id {port} is beyond the fast path's {} slots", self.max_ports)));
        }
        Ok(())
    }

    /// Creates or replaces the entry of `(mac, vlan)`: learned on (or
    /// configured for) `port`.
    ///
    /// `seen`: an existing entry keeps its `seen` (so re-mirroring an entry
    /// does not make it look fresh to the bridge's ageing); a new entry
    /// starts at [`now_s`] (the bridge learned it just now). The read and
    /// the write are two calls: a program storing `seen` in between loses
    /// that store, which makes the entry look at most one second older
    /// until its next frame.
    ///
    /// Errors: `port` beyond `max_ports` ([`ErrorKind::InvalidConfig`]), the
    /// map full ([`ErrorKind::TableFull`]: nothing changed).
    pub fn fdb_set(&self, mac: [u8; 6], vlan: u16, port: u32, is_static: bool) -> Result<(), Error> {
        self.check_port(port)?;
        let key = fdb_key(mac, vlan);
        let what = || format!("writing {} in the fast path's FDB", mac_text(mac, vlan));
        let mut old = [0u8; FDB_VALUE_LEN as usize];
        let seen = match self.fdb.lookup(&key, &mut old).map_err(|e| map_error(&e, what()))? {
            true => fdb_seen_of(&old),
            false => now_s(),
        };
        let flags = if is_static { FDB_FLAG_STATIC } else { 0 };
        self.fdb.update(&key, &fdb_value(port, flags, seen), BPF_ANY).map_err(|e| map_error(&e, what()))
    }

    /// Removes the entry of `(mac, vlan)`; false when there was none.
    pub fn fdb_delete(&self, mac: [u8; 6], vlan: u16) -> Result<bool, Error> {
        self.fdb
            .delete(&fdb_key(mac, vlan))
            .map_err(|e| map_error(&e, format!("removing {} from the fast path's FDB", mac_text(mac, vlan))))
    }

    /// The entry of `(mac, vlan)`, if any.
    pub fn fdb_entry(&self, mac: [u8; 6], vlan: u16) -> Result<Option<FastFdbEntry>, Error> {
        let mut v = [0u8; FDB_VALUE_LEN as usize];
        let found = self
            .fdb
            .lookup(&fdb_key(mac, vlan), &mut v)
            .map_err(|e| map_error(&e, format!("reading {} in the fast path's FDB", mac_text(mac, vlan))))?;
        Ok(found.then(|| FastFdbEntry {
            mac,
            vlan,
            port: field32(&v, FDB_PORT),
            is_static: field32(&v, FDB_FLAGS) & FDB_FLAG_STATIC != 0,
            seen: fdb_seen_of(&v),
        }))
    }

    /// The second at which `(mac, vlan)` was last seen as a source on its
    /// port ([`FastFdbEntry::seen`]); None when there is no such entry.
    pub fn fdb_seen(&self, mac: [u8; 6], vlan: u16) -> Result<Option<u64>, Error> {
        Ok(self.fdb_entry(mac, vlan)?.map(|e| e.seen))
    }

    /// Every entry, sorted by (MAC, VLAN): for tests and consistency checks,
    /// not for the data path (one bpf(2) call per entry, twice). Not a
    /// snapshot: entries written or removed meanwhile may or may not be in
    /// it (a removal can restart the kernel's walk; the walk is bounded by
    /// the capacity, and duplicates are merged).
    pub fn fdb_entries(&self) -> Result<Vec<FastFdbEntry>, Error> {
        let walk = |e: std::io::Error| map_error(&e, "walking the fast path's FDB".into());
        let mut keys = BTreeMap::new();
        let mut key = [0u8; FDB_KEY_LEN as usize];
        let mut at: Option<[u8; FDB_KEY_LEN as usize]> = None;
        for _ in 0..=self.fdb_entries {
            if !self.fdb.next_key(at.as_ref().map(|k| k.as_slice()), &mut key).map_err(walk)? {
                break;
            }
            keys.insert(key, ());
            at = Some(key);
        }
        let mut out = Vec::with_capacity(keys.len());
        for k in keys.keys() {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&k[..6]);
            let vlan = u16::from_ne_bytes([k[FDB_KEY_VLAN as usize], k[FDB_KEY_VLAN as usize + 1]]);
            // Removed since the walk: left out.
            if let Some(e) = self.fdb_entry(mac, vlan)? {
                out.push(e);
            }
        }
        out.sort_by_key(|e| (e.mac, e.vlan));
        Ok(out)
    }

    /// Makes port `id` an egress: `ifindex` (resolved by the kernel now, in
    /// the network namespace of the calling thread), frames up to
    /// `max_frame` bytes (MTU + 18), and whether the fast path may use it
    /// (`enabled`: a member, up, and able to take redirects — for a veth,
    /// its peer has an XDP program or GRO on). Writes `tx` before
    /// enabling `ports[id]`, and disables `ports[id]` before changing `tx`,
    /// so a program never finds an enabled port without its device.
    ///
    /// Errors: `id` beyond `max_ports` or `ifindex` 0
    /// ([`ErrorKind::InvalidConfig`]), no such ifindex in this namespace
    /// ([`ErrorKind::NoSuchInterface`]).
    pub fn port_set(&self, id: u32, ifindex: u32, max_frame: u32, enabled: bool) -> Result<(), Error> {
        self.check_port(id)?;
        if ifindex == 0 {
            return Err(Error::config(format!("port {id}: ifindex 0 is no device (port_clear empties a slot)")));
        }
        let key = id.to_ne_bytes();
        let mut value = [0u8; PORT_VALUE_LEN as usize];
        put32(&mut value, PORT_IFINDEX, ifindex);
        put32(&mut value, PORT_MAX_FRAME, max_frame);
        put32(&mut value, PORT_FLAGS, if enabled { PORT_FLAG_ENABLED } else { 0 });
        let write_port = |v: &[u8]| {
            self.ports
                .update(&key, v, BPF_ANY)
                .map_err(|e| map_error(&e, format!("writing port {id} of the fast path")))
        };
        if !enabled {
            write_port(&value)?;
        }
        self.tx.update(&key, &ifindex.to_ne_bytes(), BPF_ANY).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL | libc::ENODEV) => Error::new(
                ErrorKind::NoSuchInterface,
                Some(&e),
                format!(
                    "port {id}: no interface has ifindex {ifindex} in this thread's network namespace \
                     (a device map resolves it where it is written)"
                ),
            ),
            _ => map_error(&e, format!("writing port {id} into the fast path's device map")),
        })?;
        if enabled {
            write_port(&value)?;
        }
        Ok(())
    }

    /// Empties slot `id`: no longer an egress (its `ports` entry zeroed
    /// first, then its device map entry removed).
    pub fn port_clear(&self, id: u32) -> Result<(), Error> {
        self.check_port(id)?;
        let key = id.to_ne_bytes();
        self.ports
            .update(&key, &[0u8; PORT_VALUE_LEN as usize], BPF_ANY)
            .map_err(|e| map_error(&e, format!("clearing port {id} of the fast path")))?;
        self.tx
            .delete(&key)
            .map(|_| ())
            .map_err(|e| map_error(&e, format!("removing port {id} from the fast path's device map")))
    }

    /// Slot `id` as the kernel holds it.
    pub fn port(&self, id: u32) -> Result<FastPort, Error> {
        self.check_port(id)?;
        let key = id.to_ne_bytes();
        let read = |e: std::io::Error| map_error(&e, format!("reading port {id} of the fast path"));
        let mut v = [0u8; PORT_VALUE_LEN as usize];
        self.ports.lookup(&key, &mut v).map_err(read)?;
        let mut tx = [0u8; 4];
        let has_tx = self.tx.lookup(&key, &mut tx).map_err(read)?;
        Ok(FastPort {
            ifindex: field32(&v, PORT_IFINDEX),
            max_frame: field32(&v, PORT_MAX_FRAME),
            enabled: field32(&v, PORT_FLAGS) & PORT_FLAG_ENABLED != 0,
            tx_ifindex: has_tx.then(|| u32::from_ne_bytes(tx)),
        })
    }

    pub(crate) fn refs(&self, ingress_port: u32) -> FastPathRefs {
        FastPathRefs { fdb: self.fdb.raw_fd(), ports: self.ports.raw_fd(), tx: self.tx.raw_fd(), ingress_port }
    }
}

fn mac_text(m: [u8; 6], vlan: u16) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} vlan {vlan}", m[0], m[1], m[2], m[3], m[4], m[5])
}

/// The fast path of one port's program: the shared maps and the port's own
/// id (built into the program as an immediate: one program per port).
/// Equal when it names the same maps (the same `Arc`) and port.
#[derive(Clone, Debug)]
pub struct FastPathAttach {
    /// The bridge's maps.
    pub maps: Arc<FastPathMaps>,
    /// The bridge's id of the port the program is attached to.
    pub ingress_port: u32,
}

impl PartialEq for FastPathAttach {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.maps, &other.maps) && self.ingress_port == other.ingress_port
    }
}

impl Eq for FastPathAttach {}

impl FastPathAttach {
    /// The fast path for port `ingress_port` over `maps`.
    pub fn new(maps: Arc<FastPathMaps>, ingress_port: u32) -> FastPathAttach {
        FastPathAttach { maps, ingress_port }
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        self.maps.check_port(self.ingress_port)
    }

    pub(crate) fn refs(&self) -> FastPathRefs {
        self.maps.refs(self.ingress_port)
    }
}

/// What the program refers to: the map fds (patched into ld_imm64) and the
/// ingress port id (below [`MAX_PORT_SLOTS`], so it fits an immediate).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastPathRefs {
    pub fdb: i32,
    pub ports: i32,
    pub tx: i32,
    pub ingress_port: u32,
}

impl FastPathRefs {
    /// Stand-in fds `first..first + 3`, for listings.
    pub(crate) fn placeholder(ingress_port: u32, first: i32) -> FastPathRefs {
        FastPathRefs { fdb: first, ports: first + 1, tx: first + 2, ingress_port }
    }

    /// The name of the map behind `fd`, for listings.
    pub(crate) fn name(&self, fd: i32) -> Option<String> {
        let name = match fd {
            f if f == self.fdb => FDB_MAP_NAME,
            f if f == self.ports => PORTS_MAP_NAME,
            f if f == self.tx => TX_MAP_NAME,
            _ => return None,
        };
        Some(name.to_string())
    }
}

/// Builds the FDB key of the MAC at `mac_at` in the frame (r9) with VLAN 0
/// at `key` on the stack.
fn emit_fdb_key(a: &mut Asm, mac_at: i16, key: i16) {
    a.op(LDX_W, R1, R9, mac_at, 0);
    a.op(STX_W, R10, R1, key, 0);
    a.op(LDX_H, R1, R9, mac_at + 4, 0);
    a.op(STX_H, R10, R1, key + 4, 0);
    a.op(ST_H, R10, 0, key + FDB_KEY_VLAN, 0);
}

// The key's VLAN follows the MAC.
const _: () = assert!(ETH_ALEN == FDB_KEY_VLAN);

/// `r0 = bpf_map_lookup_elem(map, r10 + key)`.
fn emit_lookup(a: &mut Asm, map: i32, key: i16) {
    a.op(MOV64_X, R2, R10, 0, 0);
    a.op(ADD64_K, R2, 0, 0, key.into());
    a.map_fd(R1, map);
    a.op(CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM);
}

/// Emits the fast path, to run first (r6 = ctx). A forwarded frame leaves
/// with r7 = XDP_REDIRECT and r8 = the `fast_forwarded` slot at `count`;
/// every other frame has its slow reason counted and falls through to
/// what follows (the claim policy, which reads the packet bounds afresh).
///
/// Registers: r9 the frame (checked for 14 bytes); r7 the destination's
/// port; r8 the source's FDB entry (rule d), then the IP protocol (rule
/// f); r5 the header being read, r3 data_end, r0-r4 scratch.
pub(crate) fn emit(a: &mut Asm, fp: &FastPathRefs, counters: i32, count: Label) {
    let slow_not_unicast = a.label("slow_not_unicast");
    let slow_unknown_dst = a.label("slow_unknown_dst");
    let slow_same_port = a.label("slow_same_port");
    let slow_src_not_here = a.label("slow_src_not_here");
    let slow_egress_off = a.label("slow_egress_off");
    let slow_too_big = a.label("slow_too_big");
    let slow_unparsed = a.label("slow_unparsed");
    let slow_partial_csum = a.label("slow_partial_csum");
    let slow_redirect_failed = a.label("slow_redirect_failed");
    let seen_current = a.label("seen_current");
    let checksum = a.label("checksum");
    let vlan_1 = a.label("vlan_1");
    let l3 = a.label("l3");
    let ipv4 = a.label("ipv4");
    let ipv4_l4 = a.label("ipv4_l4");
    let ipv6 = a.label("ipv6");
    let ipv6_l4 = a.label("ipv6_l4");
    let fold = a.label("fold");
    let tcp = a.label("tcp");
    let compare = a.label("compare");
    let forward = a.label("forward");
    let slow = a.label("slow");
    let claim = a.label("claim");
    // Below MAX_PORT_SLOTS (checked when attaching): a positive immediate.
    let port = fp.ingress_port as i32;

    a.note(&format!(
        "fast path, ingress port {port}: learned unicast leaves here through the tx device map; the rest takes the slow path"
    ));
    a.note("rule a: shorter than an Ethernet header, or to a group address (I/G bit of byte 0) -> slow_not_unicast");
    a.op(LDX_W, R9, R6, XDP_MD_DATA, 0);
    a.remark("ctx->data");
    a.op(LDX_W, R3, R6, XDP_MD_DATA_END, 0);
    a.remark("ctx->data_end");
    a.need(R9, R3, ETH_HLEN, slow_not_unicast);
    a.op(LDX_B, R1, R9, ETH_DST, 0);
    a.remark("first byte of the destination MAC");
    a.jump(JSET_K, R1, 0, MAC_GROUP_BIT, slow_not_unicast);
    a.remark("I/G bit: a group address");

    a.note("rule b: r0 = fdb[dst MAC, VLAN 0] (key at fp-16); absent -> slow_unknown_dst");
    emit_fdb_key(a, ETH_DST, STACK_DST_KEY);
    emit_lookup(a, fp.fdb, STACK_DST_KEY);
    a.jump(JEQ_K, R0, 0, 0, slow_unknown_dst);
    a.note("rule c: r7 = the destination's port; the ingress port -> slow_same_port");
    a.op(LDX_W, R7, R0, FDB_PORT, 0);
    a.remark("dst.port");
    a.jump(JEQ_K, R7, 0, port, slow_same_port);
    a.remark("the ingress port");

    a.note("rule d: r0 = fdb[src MAC, VLAN 0] (key at fp-24); absent or on another port -> slow_src_not_here");
    emit_fdb_key(a, ETH_SRC, STACK_SRC_KEY);
    emit_lookup(a, fp.fdb, STACK_SRC_KEY);
    a.jump(JEQ_K, R0, 0, 0, slow_src_not_here);
    a.op(LDX_W, R1, R0, FDB_PORT, 0);
    a.remark("src.port");
    a.jump(JNE_K, R1, 0, port, slow_src_not_here);
    a.remark("the ingress port");
    a.note("rule d: its seen = now in seconds (bpf_ktime_get_ns / 1e9), stored only when the second changed");
    a.op(MOV64_X, R8, R0, 0, 0);
    a.remark("r8 = the source's entry");
    a.op(CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS);
    a.op(DIV64_K, R0, 0, 0, NS_PER_S as i32);
    a.remark("now, in seconds");
    a.op(LDX_DW, R1, R8, FDB_SEEN, 0);
    a.remark("src.seen");
    a.jump(JEQ_X, R1, R0, 0, seen_current);
    a.op(STX_DW, R8, R0, FDB_SEEN, 0);
    a.remark("src.seen = now");
    a.bind(seen_current);

    a.note("rule e: r0 = ports[r7] (key at fp-28); not enabled -> slow_egress_off; longer than its max_frame -> slow_too_big");
    a.op(STX_W, R10, R7, STACK_PORT_KEY, 0);
    emit_lookup(a, fp.ports, STACK_PORT_KEY);
    a.jump(JEQ_K, R0, 0, 0, slow_egress_off);
    a.remark("beyond the port table");
    a.op(LDX_W, R1, R0, PORT_FLAGS, 0);
    a.remark("port.flags");
    a.op(AND64_K, R1, 0, 0, PORT_FLAG_ENABLED as i32);
    a.remark("enabled");
    a.jump(JEQ_K, R1, 0, 0, slow_egress_off);
    a.op(LDX_W, R1, R0, PORT_MAX_FRAME, 0);
    a.remark("port.max_frame");
    a.op(LDX_W, R3, R6, XDP_MD_DATA_END, 0);
    a.remark("ctx->data_end");
    a.jump(JGT_K, R1, 0, MAX_FRAME_CHECKED, checksum);
    a.remark("no frame is longer");
    a.op(MOV64_X, R4, R9, 0, 0);
    a.op(ADD64_X, R4, R1, 0, 0);
    a.jump(JGT_X, R3, R4, 0, slow_too_big);
    a.remark("data + max_frame < data_end");

    a.bind(checksum);
    a.note("rule f: r1 = the ethertype after up to two VLAN tags, r5 = the header after it");
    a.op(LDX_H, R1, R9, ETH_TYPE, 0);
    a.remark("ethertype");
    a.op(BE, R1, 0, 0, 16);
    a.op(MOV64_X, R5, R9, 0, 0);
    a.op(ADD64_K, R5, 0, 0, ETH_HLEN);
    a.jump(JEQ_K, R1, 0, ETH_P_8021Q, vlan_1);
    a.jump(JNE_K, R1, 0, ETH_P_8021AD, l3);
    a.bind(vlan_1);
    a.need(R5, R3, VLAN_HLEN, slow_unparsed);
    a.op(LDX_H, R1, R5, VLAN_NEXT_TYPE, 0);
    a.remark("the ethertype after the tag");
    a.op(BE, R1, 0, 0, 16);
    a.op(ADD64_K, R5, 0, 0, VLAN_HLEN);
    a.jump(JNE_K, R1, 0, ETH_P_8021Q, l3);
    a.need(R5, R3, VLAN_HLEN, slow_unparsed);
    a.op(LDX_H, R1, R5, VLAN_NEXT_TYPE, 0);
    a.remark("the ethertype after the tag");
    a.op(BE, R1, 0, 0, 16);
    a.op(ADD64_K, R5, 0, 0, VLAN_HLEN);
    a.note("rule f: a third tag -> slow_unparsed");
    a.jump(JEQ_K, R1, 0, ETH_P_8021Q, slow_unparsed);
    a.jump(JEQ_K, R1, 0, ETH_P_8021AD, slow_unparsed);
    a.bind(l3);
    a.note("rule f: neither IPv4 nor IPv6 -> forward");
    a.jump(JEQ_K, R1, 0, ETH_P_IP, ipv4);
    a.jump(JEQ_K, R1, 0, ETH_P_IPV6, ipv6);
    a.goto(forward);

    a.bind(ipv4);
    a.note("rule f, IPv4: r8 = protocol; not TCP/UDP, or a fragment -> forward");
    a.need(R5, R3, IPV4_HLEN, slow_unparsed);
    a.op(LDX_B, R8, R5, IPV4_PROTO, 0);
    a.remark("ip->protocol");
    a.jump(JEQ_K, R8, 0, IPPROTO_TCP, ipv4_l4);
    a.jump(JNE_K, R8, 0, IPPROTO_UDP, forward);
    a.bind(ipv4_l4);
    a.op(LDX_H, R1, R5, IPV4_FRAG, 0);
    a.remark("ip->frag_off");
    a.op(BE, R1, 0, 0, 16);
    a.op(AND64_K, R1, 0, 0, IPV4_MF_OFFSET);
    a.remark("MF | offset");
    a.jump(JNE_K, R1, 0, 0, forward);
    a.note("rule f, IPv4: r1 = IHL * 4 (< 20 -> slow_unparsed), r2 = L4 length = total length - r1 (negative -> slow_unparsed)");
    a.op(LDX_B, R1, R5, IPV4_VER_IHL, 0);
    a.remark("ip->version, ihl");
    a.op(AND64_K, R1, 0, 0, IPV4_IHL_MASK);
    a.op(LSH64_K, R1, 0, 0, IPV4_IHL_SHIFT);
    a.jump(JLT_K, R1, 0, IPV4_HLEN, slow_unparsed);
    a.op(LDX_H, R2, R5, IPV4_TOT_LEN, 0);
    a.remark("ip->tot_len");
    a.op(BE, R2, 0, 0, 16);
    a.jump(JLT_X, R2, R1, 0, slow_unparsed);
    a.op(SUB64_X, R2, R1, 0, 0);
    a.note("rule f, IPv4: r0 = source + destination + protocol + L4 length; r5 = the L4 header");
    a.op(LDX_W, R0, R5, IPV4_SADDR, 0);
    a.remark("ip->saddr");
    a.op(BE, R0, 0, 0, 32);
    a.op(LDX_W, R4, R5, IPV4_DADDR, 0);
    a.remark("ip->daddr");
    a.op(BE, R4, 0, 0, 32);
    a.op(ADD64_X, R0, R4, 0, 0);
    a.op(ADD64_X, R0, R8, 0, 0);
    a.op(ADD64_X, R0, R2, 0, 0);
    a.op(ADD64_X, R5, R1, 0, 0);
    a.goto(fold);

    a.bind(ipv6);
    a.note("rule f, IPv6: r8 = next header; TCP/UDP -> the sum; an extension header -> slow_unparsed; else forward");
    a.need(R5, R3, IPV6_HLEN, slow_unparsed);
    a.op(LDX_B, R8, R5, IPV6_NEXT_HDR, 0);
    a.remark("ip6->nexthdr");
    a.jump(JEQ_K, R8, 0, IPPROTO_TCP, ipv6_l4);
    a.jump(JEQ_K, R8, 0, IPPROTO_UDP, ipv6_l4);
    for nh in IPV6_EXT_HEADERS {
        a.jump(JEQ_K, R8, 0, nh, slow_unparsed);
    }
    a.goto(forward);
    a.bind(ipv6_l4);
    a.note("rule f, IPv6: r0 = payload length (the L4 length) + next header + both addresses; r5 = the L4 header");
    a.op(LDX_H, R0, R5, IPV6_PAYLOAD_LEN, 0);
    a.remark("ip6->payload_len");
    a.op(BE, R0, 0, 0, 16);
    a.op(ADD64_X, R0, R8, 0, 0);
    for word in (i32::from(IPV6_SADDR)..IPV6_HLEN).step_by(4) {
        a.op(LDX_W, R1, R5, word as i16, 0);
        a.remark(if word < 24 { "ip6->saddr" } else { "ip6->daddr" });
        a.op(BE, R1, 0, 0, 32);
        a.op(ADD64_X, R0, R1, 0, 0);
    }
    a.op(ADD64_K, R5, 0, 0, IPV6_HLEN);

    a.bind(fold);
    a.note("rule f: fold r0 to 16 bits (3 times: r0 = (r0 & 0xffff) + (r0 >> 16))");
    for _ in 0..CSUM_FOLDS {
        a.op(MOV64_X, R1, R0, 0, 0);
        a.op(RSH64_K, R1, 0, 0, 16);
        a.op(AND64_K, R0, 0, 0, CSUM_MASK);
        a.op(ADD64_X, R0, R1, 0, 0);
    }
    a.jump(JEQ_K, R8, 0, IPPROTO_TCP, tcp);
    a.note("rule f, UDP: r1 = its checksum; 0 (none) -> forward");
    a.need(R5, R3, i32::from(UDP_CSUM) + CSUM_LEN, slow_unparsed);
    a.op(LDX_H, R1, R5, UDP_CSUM, 0);
    a.remark("udp->check");
    a.op(BE, R1, 0, 0, 16);
    a.jump(JEQ_K, R1, 0, 0, forward);
    a.goto(compare);
    a.bind(tcp);
    a.note("rule f, TCP: r1 = its checksum");
    a.need(R5, R3, i32::from(TCP_CSUM) + CSUM_LEN, slow_unparsed);
    a.op(LDX_H, R1, R5, TCP_CSUM, 0);
    a.remark("tcp->check");
    a.op(BE, R1, 0, 0, 16);
    a.bind(compare);
    a.note("rule f: the field equals the folded sum in ones' complement (both mod 0xffff) -> slow_partial_csum");
    a.op(MOD64_K, R1, 0, 0, ONES_COMPLEMENT_MODULUS);
    a.op(MOD64_K, R0, 0, 0, ONES_COMPLEMENT_MODULUS);
    a.jump(JEQ_X, R1, R0, 0, slow_partial_csum);

    a.bind(forward);
    a.note("rule g: bpf_redirect_map(tx, r7, 0) == XDP_REDIRECT -> count fast_forwarded, return it; else slow_redirect_failed");
    a.map_fd(R1, fp.tx);
    a.op(MOV64_X, R2, R7, 0, 0);
    a.op(MOV64_K, R3, 0, 0, 0);
    a.op(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
    a.jump(JNE_K, R0, 0, XDP_REDIRECT, slow_redirect_failed);
    a.remark("XDP_REDIRECT");
    a.op(MOV64_K, R7, 0, 0, XDP_REDIRECT);
    a.remark("XDP_REDIRECT");
    a.op(MOV64_K, R8, 0, 0, slot::FAST_FORWARDED);
    a.remark("fast_forwarded");
    a.goto(count);

    a.note("the slow reasons, one label each: r8 = its counter slot, then on to `slow`");
    let reasons = [
        (slow_not_unicast, slot::SLOW_NOT_UNICAST, "slot slow_not_unicast"),
        (slow_unknown_dst, slot::SLOW_UNKNOWN_DST, "slot slow_unknown_dst"),
        (slow_same_port, slot::SLOW_SAME_PORT, "slot slow_same_port"),
        (slow_src_not_here, slot::SLOW_SRC_NOT_HERE, "slot slow_src_not_here"),
        (slow_egress_off, slot::SLOW_EGRESS_OFF, "slot slow_egress_off"),
        (slow_too_big, slot::SLOW_TOO_BIG, "slot slow_too_big"),
        (slow_unparsed, slot::SLOW_UNPARSED, "slot slow_unparsed"),
        (slow_partial_csum, slot::SLOW_PARTIAL_CSUM, "slot slow_partial_csum"),
        (slow_redirect_failed, slot::SLOW_REDIRECT_FAILED, "slot slow_redirect_failed"),
    ];
    for (n, (at, s, name)) in reasons.iter().enumerate() {
        a.bind(*at);
        a.op(MOV64_K, R8, 0, 0, *s);
        a.remark(name);
        if n + 1 < reasons.len() {
            a.goto(slow);
        }
    }
    a.bind(slow);
    a.note("slow: counters[r8] += 1, then on to the claim policy");
    bump_counter(a, counters, claim);
    a.bind(claim);
}

#[cfg(test)]
mod tests;
