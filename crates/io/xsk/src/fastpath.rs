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
//!    of byte 0: multicast, broadcast) → slow (`slow_not_unicast`);
//!    shorter than the Ethernet minimum of [`MIN_FORWARD_FRAME`] (60)
//!    bytes → slow (`slow_short`). A redirect sends a frame as it is and
//!    a veth egress does not pad it (a NIC would), so the bridge's
//!    workers pad it to 60 bytes with zeros and send it. (The program
//!    could grow it with `bpf_xdp_adjust_tail`, which zeroes what it adds;
//!    such frames are few (ARP, bare TCP ACKs without timestamps) and the
//!    slow path pads them and counts them per egress, `tx_padded`.)
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
//!    offload (`CHECKSUM_PARTIAL`: the field holds the folded, not
//!    complemented, pseudo-header sum, and the device was to finish it)
//!    must not be redirected as it is: the receiver would drop the frame.
//!    For IPv4 (IHL honoured; fragments are complete: their sender finished
//!    the checksum before fragmenting) and IPv6 whose next header is TCP or
//!    UDP directly, the program computes the pseudo-header sum P
//!    (addresses, protocol, L4 length from the IP header) and folds it; a
//!    checksum field that differs from P in ones' complement (0x0000 ==
//!    0xffff) is a complete one and the frame goes on. A UDP checksum of 0
//!    (none) is never a partial one (the kernel stores the folded sum,
//!    which is never 0). A field equal to P is completed in the program,
//!    as user space's repair rule does (`flowsteer_wire::offload`):
//!    * the segment, from the TCP/UDP header to the end the IP header
//!      gives (Ethernet padding after it is not summed), is summed with
//!      the field as it is into T: 512-byte chunks and a 256-byte piece
//!      by `bpf_csum_diff`, the rest by loads;
//!    * T + P folds to 0xffff: the checksum verifies as it is (a complete
//!      checksum that happens to equal P, 1 in 65,535) → left untouched,
//!      on to rule g;
//!    * otherwise ~T goes into the field (a UDP result of 0 as 0xffff) and
//!      on to rule g, where a redirected frame is counted
//!      `fast_csum_completed` besides `fast_forwarded`.
//!
//!    A partial checksum the program does not complete → slow
//!    (`slow_partial_csum`, completed in user space), exactly when: the
//!    segment is longer than [`MAX_CSUM_SEGMENT`] (4,096) bytes or
//!    shorter than its header (TCP 20, UDP 8 bytes), a UDP length field
//!    differs from the IP header's segment length, or the frame ends
//!    before the segment does. An IPv6 extension header before the
//!    transport header, IP or transport headers cut short (up to the
//!    checksum field), an IHL below 5 or a total length shorter than the
//!    header, or a third VLAN tag → slow (`slow_unparsed`). One or two VLAN
//!    tags (802.1Q, or 802.1ad outside) are skipped first, so tagged frames
//!    get the same check. Frames that are neither IPv4 nor IPv6 (ARP...),
//!    and IP packets of other protocols, carry no such checksum and go on.
//! g. `bpf_redirect_map(tx, dst port, 0)` returns `XDP_REDIRECT` → counted
//!    `fast_forwarded` and returned; otherwise (no device for that port in
//!    `tx`) → slow (`slow_redirect_failed`).
//!
//! The slow path is the claim policy of [`crate::Claim`] (for the bridge
//! [`crate::Claim::Frames`]: the frame-length drop, then the XSKMAP). Every
//! frame that takes it is counted once by its slow reason and once by its
//! outcome ([`crate::XdpReasons`]); a forwarded frame as `fast_forwarded`,
//! and, when rule f completed its checksum, also as `fast_csum_completed`
//! (a part of `fast_forwarded`, not an outcome). A frame whose checksum
//! was completed and whose redirect then fails (`slow_redirect_failed`)
//! reaches user space with the checksum complete.
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
//!   `fast_path_forwards_learned_unicast_and_completes_partial_checksums`
//!   shows both states.
//! * A redirected frame carries no offload state: the receiver verifies
//!   every TCP/UDP checksum in software, which is why rule f must complete
//!   partial ones (the live test's receiving UDP socket accepts them).
//! * `bpf_csum_diff` (net/core/filter.c) since Linux 6.13 takes any size
//!   (not only multiples of 4, not only up to 512 bytes: measured on 6.18)
//!   and returns `csum_from32to16(csum_partial(..))`, a 16-bit sum; before,
//!   it refused more than 512 bytes or sizes not a multiple of 4 with
//!   -EINVAL (returned as if a sum) and returned `csum_partial`'s 32 bits.
//!   The program keeps to the old limits and folds the result itself, so
//!   it is right on both. On x86 `csum_partial` adds 16-bit words as the
//!   host reads them (little-endian); its folded sum is the byte swap of
//!   the wire's (a ones' complement sum commutes with swapping bytes), so
//!   the program swaps once (`be16`) after folding.
//! * `bpf_csum_diff` does not change the packet, so the verifier keeps
//!   the packet pointers held across the calls (the segment's start in
//!   r9); data_end is read again before each piece anyway.
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
//! Measured here (kernel 6.18, JIT on, 2 vCPUs of an AMD EPYC with the
//! SRSO "safe RET" mitigation; BPF_PROG_TEST_RUN with 10^6 repetitions,
//! release build; `fastpath::tests::kernel_cost_per_frame`): a forwarded
//! frame with a complete checksum 110-117 ns per run, whatever its length
//! (three map lookups, the clock, the checksum check, the redirect); with
//! a partial checksum of a 1,400-byte payload, summed and completed, about
//! 180 ns (UDPv4 or TCPv6). (The repetitions of a test run share the
//! frame, so from the second on a completed frame is a complete one: the
//! 180 ns are those of a partial frame that verifies as it is, 178-181 ns,
//! which takes the same sum; single runs on fresh copies, timer included,
//! put completing and verifying at the same 254 ns, against 170 ns for a
//! complete checksum.) Before rule f completed them, such a frame took
//! 110 ns to reach the slow path, and then user space's copy. Each
//! `bpf_csum_diff` call costs 15-20 ns here, of which summing 512 bytes
//! takes 5: the sum of the pieces below 256 bytes by 4-byte loads is
//! faster (1,400 bytes: 3 calls, 179 ns, against 5 calls, 197 ns). A
//! bounded loop of 8-byte loads instead took 260 ns and 781,000 of the
//! verifier's 10^6 instructions; one of 4-byte loads was refused (E2BIG).
//! An unknown destination 50 ns, a broadcast 32 ns; the same program
//! without the fast path (every frame to the XSKMAP) 30-34 ns.
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
/// program's (see `prog.rs`): the two FDB keys and the port key; for a
/// partial checksum (rule f), the folded pseudo-header sum and the IP
/// protocol, kept across the helper calls (u64 each).
const STACK_DST_KEY: i16 = -16;
const STACK_SRC_KEY: i16 = -24;
const STACK_PORT_KEY: i16 = -28;
const STACK_PSEUDO_SUM: i16 = -40;
const STACK_PROTO: i16 = -48;

/// Ethernet: destination MAC at 0, source at 6, ethertype at 12; the
/// group (I/G) bit of the destination's first byte.
const ETH_DST: i16 = 0;
const ETH_SRC: i16 = 6;
const ETH_TYPE: i16 = 12;
const ETH_HLEN: i32 = 14;
/// The shortest frame the fast path forwards: the Ethernet minimum of 64
/// bytes less the FCS (rule a).
pub const MIN_FORWARD_FRAME: i32 = 60;
const _: () = assert!(
    ETH_HLEN + 2 * VLAN_HLEN + IPV4_HLEN <= MIN_FORWARD_FRAME,
    "rule f reads two tags and an IPv4 header unchecked"
);
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
/// Checksum fields: UDP's at 6 (header 8 bytes, its length at 4), TCP's
/// at 16 (header at least 20 bytes).
const UDP_LEN: i16 = 4;
const UDP_CSUM: i16 = 6;
const UDP_HLEN: i32 = 8;
const TCP_CSUM: i16 = 16;
const TCP_HLEN: i32 = 20;
const CSUM_LEN: i32 = 2;
/// Folds of `(s & 0xffff) + (s >> 16)` that bring a sum to 16 bits. The
/// pseudo-header sum adds at most eight 32-bit address words, the protocol
/// and a 16-bit length, so s < 2^36: then < 2^21, <= 0x1001e, <= 0xffff.
/// The segment's sum adds one helper result (< 2^32), at most 63 32-bit
/// words and two smaller ones, so s < 2^38: then < 2^23, <= 0x1007e,
/// <= 0xffff.
const CSUM_FOLDS: usize = 3;
const CSUM_MASK: i32 = 0xffff;
/// The longest TCP segment or UDP datagram (header included, as long as
/// the IP header says) whose partial checksum the fast path completes
/// (rule f); a longer one takes the slow path (`slow_partial_csum`).
/// Every frame of a native-XDP veth (MTU up to about 3,500) fits; the
/// bound keeps the unrolled sum short.
pub const MAX_CSUM_SEGMENT: u32 = 4096;
/// `bpf_csum_diff` sums at most this many bytes per call, a multiple of 4:
/// Linux before 6.13 refuses more (and returns -EINVAL, which would be
/// taken for a sum); 6.13 and later take any size. The segment is summed
/// in chunks of this size, then the rest by its binary digits.
const CSUM_CHUNK: i32 = 512;
const CSUM_CHUNKS: i32 = MAX_CSUM_SEGMENT as i32 / CSUM_CHUNK;
/// Offsets into a segment of at most [`MAX_CSUM_SEGMENT`] bytes fit 13
/// bits: `length & (this & !(2n - 1))` is where its n-byte piece starts.
const CSUM_OFFSET_BITS: i32 = 2 * MAX_CSUM_SEGMENT as i32 - 1;
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

/// `r0 = bpf_redirect_map(tx, r7, 0)`; anything but XDP_REDIRECT -> `failed`.
fn emit_redirect(a: &mut Asm, tx: i32, failed: Label) {
    a.map_fd(R1, tx);
    a.op(MOV64_X, R2, R7, 0, 0);
    a.op(MOV64_K, R3, 0, 0, 0);
    a.op(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
    a.jump(JNE_K, R0, 0, XDP_REDIRECT, failed);
    a.remark("XDP_REDIRECT");
}

/// `reg = (reg & 0xffff) + (reg >> 16)`, `times` times, with `scratch`.
fn emit_fold(a: &mut Asm, reg: u8, scratch: u8, times: usize) {
    for _ in 0..times {
        a.op(MOV64_X, scratch, reg, 0, 0);
        a.op(RSH64_K, scratch, 0, 0, 16);
        a.op(AND64_K, reg, 0, 0, CSUM_MASK);
        a.op(ADD64_X, reg, scratch, 0, 0);
    }
}

/// `r0 = bpf_csum_diff(NULL, 0, r3, bytes, r0)`: adds the `bytes` bytes
/// at r3 (checked against data_end first: past it -> `cut`) to the sum in
/// r0, as the host reads them (16-bit words in host byte order).
fn emit_csum_diff(a: &mut Asm, bytes: i32, cut: Label) {
    a.op(LDX_W, R2, R6, XDP_MD_DATA_END, 0);
    a.remark("ctx->data_end");
    a.need(R3, R2, bytes, cut);
    a.op(MOV64_K, R1, 0, 0, 0);
    a.remark("from: NULL");
    a.op(MOV64_K, R2, 0, 0, 0);
    a.remark("from_size: 0");
    a.op(MOV64_K, R4, 0, 0, bytes);
    a.remark("to_size");
    a.op(MOV64_X, R5, R0, 0, 0);
    a.remark("seed: the sum so far");
    a.op(CALL, 0, 0, 0, BPF_FUNC_CSUM_DIFF);
}

/// How [`emit_completion`] adds one piece of a segment to its sum.
#[derive(Clone, Copy)]
enum Piece {
    /// One `bpf_csum_diff` call.
    Helper,
    /// 4-byte loads, each added whole (2^32 = 1 modulo 0xffff).
    Words,
    /// One 2-byte load.
    Half,
    /// One byte, the first of a 16-bit word whose second is 0.
    Byte,
}

/// The pieces of the segment after its whole chunks, largest first: the
/// n-byte piece is there when bit n of the segment's length is set and
/// starts at `length & !(2n - 1)`. Up to 128 bytes loads are cheaper than
/// a helper call, which costs 15-20 ns here whatever its size (measured:
/// see the module docs, "Cost").
const CSUM_PIECES: [(i32, Piece, &str); 9] = [
    (256, Piece::Helper, "sum_256"),
    (128, Piece::Words, "sum_128"),
    (64, Piece::Words, "sum_64"),
    (32, Piece::Words, "sum_32"),
    (16, Piece::Words, "sum_16"),
    (8, Piece::Words, "sum_8"),
    (4, Piece::Words, "sum_4"),
    (2, Piece::Half, "sum_2"),
    (1, Piece::Byte, "sum_1"),
];

// The pieces cover every length below a chunk, and the helper's limits.
const _: () = assert!(CSUM_PIECES[0].0 * 2 == CSUM_CHUNK && CSUM_CHUNK <= 512 && CSUM_CHUNK % 4 == 0);

/// Where [`emit_completion`] goes on to.
struct CompletionExits {
    /// Rule g, the frame as it is.
    forward: Label,
    /// Counted `fast_forwarded` and returned (the redirect done).
    forwarded: Label,
    slow_partial_csum: Label,
    slow_redirect_failed: Label,
}

/// Rule f for a checksum field that holds P, the folded pseudo-header sum
/// (r0, mod 0xffff), with r2 = the segment's length by the IP header, r5
/// = its start (checked up to the end of the checksum field), r8 = the
/// protocol. Sums the segment into T (with the field as it is) and then:
/// T + P folds to 0xffff -> `forward`, untouched (it verifies); otherwise
/// ~T into the field (UDP: 0 as 0xffff), the redirect, and on success
/// `fast_csum_completed` counted before `forwarded`. A segment it cannot
/// sum -> `slow_partial_csum`.
///
/// The sum runs in parts, each bounds-checked on its own (the verifier
/// knows only constant ranges past a packet pointer): whole 512-byte
/// chunks through `bpf_csum_diff`, then the rest by the binary digits of
/// the length (a helper call for 256 bytes, loads below).
/// Every piece's pointer is computed afresh from r9 and the length, so
/// the verifier's states meet again after each piece whether it was
/// summed or not (a pointer advanced piece by piece would double them at
/// every piece).
fn emit_completion(a: &mut Asm, fp: &FastPathRefs, counters: i32, exits: CompletionExits) {
    let CompletionExits { forward, forwarded, slow_partial_csum, slow_redirect_failed } = exits;
    let partial_tcp = a.label("partial_tcp");
    let sum = a.label("sum");
    let pieces: Vec<Label> = CSUM_PIECES.iter().map(|p| a.label(p.2)).collect();
    let summed = a.label("summed");
    let store_udp = a.label("store_udp");
    let udp_nonzero = a.label("udp_nonzero");
    let completed = a.label("completed");

    a.note(&format!(
        "rule f, partial: the field holds P; a segment (r2 bytes by the IP header) longer than {MAX_CSUM_SEGMENT} -> slow_partial_csum"
    ));
    a.jump(JGT_K, R2, 0, MAX_CSUM_SEGMENT as i32, slow_partial_csum);
    a.jump(JEQ_K, R8, 0, IPPROTO_TCP, partial_tcp);
    a.note("rule f, partial UDP: shorter than its header, or a length field other than r2 -> slow_partial_csum");
    a.jump(JLT_K, R2, 0, UDP_HLEN, slow_partial_csum);
    a.op(LDX_H, R1, R5, UDP_LEN, 0);
    a.remark("udp->len");
    a.op(BE, R1, 0, 0, 16);
    a.jump(JNE_X, R1, R2, 0, slow_partial_csum);
    a.goto(sum);
    a.bind(partial_tcp);
    a.note("rule f, partial TCP: shorter than its header -> slow_partial_csum");
    a.jump(JLT_K, R2, 0, TCP_HLEN, slow_partial_csum);

    a.bind(sum);
    a.note("rule f, partial: P to fp-40, the protocol to fp-48 (helper calls clobber r1-r5); r8 = the length, r9 = the segment; r0 = 0, the sum");
    a.op(STX_DW, R10, R0, STACK_PSEUDO_SUM, 0);
    a.op(STX_DW, R10, R8, STACK_PROTO, 0);
    a.op(MOV64_X, R8, R2, 0, 0);
    a.op(MOV64_X, R9, R5, 0, 0);
    a.op(MOV64_K, R0, 0, 0, 0);
    a.note(&format!(
        "rule f, partial: whole chunks, k = 0, 1, ... while r8 >= (k + 1) * {CSUM_CHUNK}: r0 = bpf_csum_diff(NULL, 0, r9 + k * {CSUM_CHUNK}, {CSUM_CHUNK}, r0); past data_end -> slow_partial_csum"
    ));
    for k in 0..CSUM_CHUNKS {
        a.jump(JLT_K, R8, 0, (k + 1) * CSUM_CHUNK, pieces[0]);
        a.op(MOV64_X, R3, R9, 0, 0);
        if k > 0 {
            a.op(ADD64_K, R3, 0, 0, k * CSUM_CHUNK);
        }
        emit_csum_diff(a, CSUM_CHUNK, slow_partial_csum);
    }
    for (n, &(bytes, how, _)) in CSUM_PIECES.iter().enumerate() {
        let next = pieces.get(n + 1).copied().unwrap_or(summed);
        a.bind(pieces[n]);
        let by = match how {
            Piece::Helper => "bpf_csum_diff",
            Piece::Words => "4-byte loads",
            Piece::Half => "a 2-byte load",
            Piece::Byte => "a 1-byte load",
        };
        a.note(&format!(
            "rule f, partial: bit {bytes} of r8 set -> the {bytes}-byte piece at r3 = r9 + (r8 & {:#x}), added by {by}; past data_end -> slow_partial_csum",
            CSUM_OFFSET_BITS & !(2 * bytes - 1)
        ));
        a.op(MOV64_X, R1, R8, 0, 0);
        a.op(AND64_K, R1, 0, 0, bytes);
        a.jump(JEQ_K, R1, 0, 0, next);
        a.op(MOV64_X, R1, R8, 0, 0);
        a.op(AND64_K, R1, 0, 0, CSUM_OFFSET_BITS & !(2 * bytes - 1));
        a.op(MOV64_X, R3, R9, 0, 0);
        a.op(ADD64_X, R3, R1, 0, 0);
        if let Piece::Helper = how {
            emit_csum_diff(a, bytes, slow_partial_csum);
            continue;
        }
        a.op(LDX_W, R2, R6, XDP_MD_DATA_END, 0);
        a.remark("ctx->data_end");
        a.need(R3, R2, bytes, slow_partial_csum);
        match how {
            Piece::Words => {
                for w in (0..bytes).step_by(4) {
                    a.op(LDX_W, R1, R3, w as i16, 0);
                    a.op(ADD64_X, R0, R1, 0, 0);
                }
            }
            Piece::Half => {
                a.op(LDX_H, R1, R3, 0, 0);
                a.op(ADD64_X, R0, R1, 0, 0);
            }
            _ => {
                // The byte as the first of a word, as the host reads it:
                // be16 of (byte << 8) is the byte itself on a
                // little-endian host, byte << 8 on a big-endian one.
                a.op(LDX_B, R1, R3, 0, 0);
                a.op(LSH64_K, R1, 0, 0, 8);
                a.op(BE, R1, 0, 0, 16);
                a.remark("the word (byte, 0) as the host reads it");
                a.op(ADD64_X, R0, R1, 0, 0);
            }
        }
    }

    a.bind(summed);
    a.note("rule f, partial: T = r0 folded (3 times), then be16: the helper and the loads add the bytes as the host reads them, and a ones' complement sum commutes with swapping the bytes of every word, so be16 of the host's sum is the sum of the wire's words");
    emit_fold(a, R0, R1, CSUM_FOLDS);
    a.op(BE, R0, 0, 0, 16);
    a.remark("T");
    a.note(
        "rule f, partial: T + P folds to 0xffff (ones' complement zero) -> it verifies as it is: forward, untouched",
    );
    a.op(LDX_DW, R1, R10, STACK_PSEUDO_SUM, 0);
    a.remark("P");
    a.op(ADD64_X, R1, R0, 0, 0);
    emit_fold(a, R1, R2, 1);
    a.jump(JEQ_K, R1, 0, CSUM_MASK, forward);
    a.note("rule f, partial: the checksum ~T into the field, in network order (UDP: 0 as 0xffff, 0 means none)");
    a.op(XOR64_K, R0, 0, 0, CSUM_MASK);
    a.remark("~T");
    a.op(LDX_DW, R1, R10, STACK_PROTO, 0);
    a.remark("the protocol");
    a.jump(JEQ_K, R1, 0, IPPROTO_UDP, store_udp);
    a.op(BE, R0, 0, 0, 16);
    a.op(STX_H, R9, R0, TCP_CSUM, 0);
    a.remark("tcp->check");
    a.goto(completed);
    a.bind(store_udp);
    a.jump(JNE_K, R0, 0, 0, udp_nonzero);
    a.op(MOV64_K, R0, 0, 0, CSUM_MASK);
    a.remark("0xffff");
    a.bind(udp_nonzero);
    a.op(BE, R0, 0, 0, 16);
    a.op(STX_H, R9, R0, UDP_CSUM, 0);
    a.remark("udp->check");

    a.bind(completed);
    a.note("rule g, completed: redirected -> count fast_csum_completed, then fast_forwarded; else slow_redirect_failed (the checksum left complete)");
    emit_redirect(a, fp.tx, slow_redirect_failed);
    a.op(MOV64_K, R8, 0, 0, slot::FAST_CSUM_COMPLETED);
    a.remark("fast_csum_completed");
    bump_counter(a, counters, forwarded);
    a.goto(forwarded);
}

/// Emits the fast path, to run first (r6 = ctx). A forwarded frame leaves
/// with r7 = XDP_REDIRECT and r8 = the `fast_forwarded` slot at `count`;
/// every other frame has its slow reason counted and falls through to
/// what follows (the claim policy, which reads the packet bounds afresh).
///
/// Registers: r9 the frame (checked for 14 bytes), then for a partial
/// checksum the TCP/UDP segment; r7 the destination's port; r8 the
/// source's FDB entry (rule d), then the IP protocol (rule f), then for a
/// partial checksum the segment's length; r5 the header being read, r3
/// data_end, r0 sums, r0-r4 scratch.
pub(crate) fn emit(a: &mut Asm, fp: &FastPathRefs, counters: i32, count: Label) {
    let slow_not_unicast = a.label("slow_not_unicast");
    let slow_short = a.label("slow_short");
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
    let forwarded = a.label("forwarded");
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
    a.note("rule a: shorter than 60 bytes (the Ethernet minimum; a redirect would not pad it) -> slow_short");
    a.need(R9, R3, MIN_FORWARD_FRAME, slow_short);

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
    // Rule a let through only frames of MIN_FORWARD_FRAME bytes or more:
    // two tags (22 bytes with the addresses) are in the frame, and the
    // verifier knows it from rule a's bound on r9.
    a.op(LDX_H, R1, R5, VLAN_NEXT_TYPE, 0);
    a.remark("the ethertype after the tag");
    a.op(BE, R1, 0, 0, 16);
    a.op(ADD64_K, R5, 0, 0, VLAN_HLEN);
    a.jump(JNE_K, R1, 0, ETH_P_8021Q, l3);
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
    // A 20-byte header after two tags ends by byte 42, within rule a's 60.
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
    a.note(
        "rule f, IPv6: r2 = payload length (the L4 length); r0 = r2 + next header + both addresses; r5 = the L4 header",
    );
    a.op(LDX_H, R2, R5, IPV6_PAYLOAD_LEN, 0);
    a.remark("ip6->payload_len");
    a.op(BE, R2, 0, 0, 16);
    a.op(MOV64_X, R0, R2, 0, 0);
    a.op(ADD64_X, R0, R8, 0, 0);
    for word in (i32::from(IPV6_SADDR)..IPV6_HLEN).step_by(4) {
        a.op(LDX_W, R1, R5, word as i16, 0);
        a.remark(if word < 24 { "ip6->saddr" } else { "ip6->daddr" });
        a.op(BE, R1, 0, 0, 32);
        a.op(ADD64_X, R0, R1, 0, 0);
    }
    a.op(ADD64_K, R5, 0, 0, IPV6_HLEN);

    a.bind(fold);
    a.note("rule f: fold r0 to 16 bits (3 times: r0 = (r0 & 0xffff) + (r0 >> 16)): P, the pseudo-header sum");
    emit_fold(a, R0, R1, CSUM_FOLDS);
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
    a.note("rule f: the field differs from P in ones' complement (both mod 0xffff) -> forward (a complete checksum)");
    a.op(MOD64_K, R1, 0, 0, ONES_COMPLEMENT_MODULUS);
    a.op(MOD64_K, R0, 0, 0, ONES_COMPLEMENT_MODULUS);
    a.jump(JNE_X, R1, R0, 0, forward);

    let exits = CompletionExits { forward, forwarded, slow_partial_csum, slow_redirect_failed };
    emit_completion(a, fp, counters, exits);

    a.bind(forward);
    a.note("rule g: bpf_redirect_map(tx, r7, 0) == XDP_REDIRECT -> count fast_forwarded, return it; else slow_redirect_failed");
    emit_redirect(a, fp.tx, slow_redirect_failed);
    a.bind(forwarded);
    a.op(MOV64_K, R7, 0, 0, XDP_REDIRECT);
    a.remark("XDP_REDIRECT");
    a.op(MOV64_K, R8, 0, 0, slot::FAST_FORWARDED);
    a.remark("fast_forwarded");
    a.goto(count);

    a.note("the slow reasons, one label each: r8 = its counter slot, then on to `slow`");
    let reasons = [
        (slow_not_unicast, slot::SLOW_NOT_UNICAST, "slot slow_not_unicast"),
        (slow_short, slot::SLOW_SHORT, "slot slow_short"),
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
