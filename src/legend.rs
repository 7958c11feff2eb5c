//! The legend of every table the commands print: one place, shown in the
//! command's `--help` (a block after the flags) and as the footer line
//! under the table.

/// A table's columns: `(heading, meaning)`.
pub type Legend = &'static [(&'static str, &'static str)];

/// `run`: the per-worker table (FreeBSD `netstat -Q` names first).
pub const RUN: Legend = &[
    ("WSID", "worker id"),
    ("CPU", "the CPU the worker is pinned to"),
    ("Len", "packets waiting in its hand-off queues now (a level, as WMark and Flows)"),
    ("WMark", "most packets ever waiting there at once"),
    ("Disp'd", "packets processed at once by the receiving thread (--dispatch direct)"),
    ("HDisp'd", "packets processed at once by the receiving thread because it owns the flow (--dispatch hybrid)"),
    ("QDrops", "packets refused because a queue to this worker was full"),
    ("Queued", "packets handed to it through its queues"),
    ("Handled", "packets it processed: Disp'd + HDisp'd + (Queued - Len)"),
    (
        "Mpps",
        "million packets per second it handled; interval reports count and rate over that interval, the final table over the run",
    ),
    ("Flows", "flows in its flow table"),
    ("OrderViol", "packets that arrived behind a later packet of their flow"),
    ("Drops", "every packet it dropped, QDrops included (reasons in the summary)"),
];

/// `bridge` and `bridge-ctl stats`: the per-port and per-worker tables.
pub const BRIDGE_STATS: Legend = &[
    ("port", "the member port's interface (removed ports last, member no, for 5 minutes after their removal)"),
    ("kind", "afxdp or afpacket"),
    ("member", "no once removed with port del"),
    ("up", "the link works: administratively up with carrier (a port that is not up neither receives nor sends)"),
    ("state", "the port's 802.1D state: forwarding, learning (learns, forwards nothing), blocking, listening or disabled (neither)"),
    ("learned", "learned MAC entries on the port now"),
    ("received", "frames in from the port or taken in by the worker, the kernel's drops before our socket and the kernel fast path's frames included"),
    ("fast_fwd", "of those, forwarded by the kernel fast path (XDP) without reaching a worker"),
    ("forwarded", "of those, sent out of one other port (known unicast) by a worker"),
    ("flooded", "of those, flooded to every other member"),
    ("dropped", "of those, dropped (by reason on the line below the tables); received = fast_fwd + forwarded + flooded + dropped"),
    ("transmitted", "frames sent out of the port (a flooded frame counts once per port)"),
    ("tx_dropped", "frames that could not be sent out of the port"),
    ("tx_padded", "frames shorter than 60 bytes (the Ethernet minimum without FCS) the worker padded with zeros to 60 before sending them out of the port, beside the sums (one the socket refused is in tx_dropped too); the kernel fast path cannot pad, so it leaves them to the workers"),
    ("if_rx_dropped", "the interface's own rx_dropped since the port was added, beside the sum (not in received): frames the kernel dropped on the port before our sockets (too long for the MTU, a full backlog); in generic XDP also the frames our socket could not take (in dropped, kernel)"),
    ("peer_tx_dropped", "a veth port: its peer's tx_dropped since the port was added, frames the peer could not hand over; the port counts each of them in if_rx_dropped too, so it is a part of it, never added (- not a veth)"),
    ("rx_copied", "small frames the worker copied out so their receive buffer returned at once"),
    ("csum_completed", "frames whose partial TCP/UDP checksum (a local sender's checksum offload) the worker completed"),
    ("gso_segmented", "GSO frames the worker cut into segments for an AF_XDP egress"),
];

/// `udp-echo`: the per-socket table.
pub const UDP_ECHO: Legend = &[
    ("socket", "socket number (one per CPU)"),
    ("cpu", "the CPU its thread is pinned to"),
    ("received", "datagrams read"),
    ("delivered", "datagrams handed on (echoed, or counted with --sink)"),
    ("sent", "replies sent"),
    ("dropped", "truncated + send_err"),
    ("truncated", "datagrams longer than --max-size"),
    ("send_err", "replies the kernel refused"),
    ("rcvbuf_err", "datagrams the kernel dropped before we read them (receive buffer full; not in received)"),
    ("cpu_miss", "datagrams read while the thread ran on another CPU (0 while pinning holds)"),
];

/// `udp-echo --mode xdp`: the per-queue table.
pub const UDP_ECHO_XDP: Legend = &[
    ("Queue", "receive queue of --iface"),
    ("CPU", "the CPU its thread is pinned to"),
    ("Received", "frames its AF_XDP socket received"),
    ("Delivered", "UDP datagrams to the served address and port"),
    ("Sent", "replies sent"),
    ("TxFull", "replies dropped: transmit ring or frames full"),
    ("NotForUs", "claimed frames that were not whole UDP datagrams to us (dropped)"),
    ("Malformed", "UDP to us with lengths a host refuses (dropped)"),
    ("BadCsum", "UDP to us whose IPv4 header checksum does not verify, as every host drops it (dropped)"),
    ("KernDrops", "frames the kernel dropped for this socket (ring full, fill ring empty)"),
];

/// `udp-gen`: the per-flow table.
pub const UDP_GEN: Legend = &[
    ("flow", "flow number"),
    ("local", "the flow's local address and port"),
    ("queue", "the receive queue --spread planned it for (- without --spread)"),
    ("cpu", "the CPU --cpus maps that queue to (- without --spread and --cpus)"),
    ("sent", "datagrams sent"),
    ("replies", "replies received (--echo)"),
    ("lost", "datagrams never answered"),
    ("reorder", "replies that came behind a later one"),
    ("dup", "replies received more than once"),
    ("mismatch", "replies whose bytes differ from what was sent"),
];

/// `hash`: one row per tuple.
pub const HASH: Legend = &[
    ("src, dst, sport, dport", "the tuple hashed (- : no ports, a 2-tuple input)"),
    ("input", "the fields hashed (2-tuple or 4-tuple, IPv4 or IPv6)"),
    ("hash", "the 32-bit Toeplitz hash"),
    ("reta", "the indirection table entry its low bits pick (- under --mapping rps)"),
    ("queue", "the receive queue that entry names"),
    ("cpu", "the CPU of that queue (--cpus)"),
];

/// `analyze`: the per-queue table.
pub const ANALYZE_QUEUES: Legend = &[
    ("Queue", "receive queue the RSS configuration sends the packets to"),
    ("CPU", "the CPU of that queue (--cpus)"),
    ("Packets", "packets analysed that land on it"),
    ("Pkt%", "its share of the packets analysed"),
    ("Bytes", "their bytes (original lengths)"),
    ("Flows", "flows whose packets land on it (a flow split over queues counts on each)"),
];

/// `analyze`: the top-flows table.
pub const ANALYZE_FLOWS: Legend = &[
    ("Proto", "IP protocol"),
    ("Source, Destination", "the flow's addresses and ports"),
    ("Queue, CPU", "where its whole packets land"),
    ("Packets, Bytes", "its packets and bytes in the capture"),
    ("Split", "yes when its packets land on more than one queue (fragments on the 2-tuple)"),
];

/// `analyze`: the encapsulation table (kinds seen in the capture).
pub const ANALYZE_ENCAP: Legend = &[
    ("Kind", "the encapsulation: vlan, qinq, vxlan, geneve, vxlan_gpe, gtpu, gre, ipip or pppoe"),
    ("Packets, Bytes", "packets carrying it and their bytes (original lengths)"),
    ("Queues", "receive queues those packets land on under the NIC's hash (outer headers)"),
    ("Inner", "receive queues they would land on hashed on their innermost IP header (--inner; - without it)"),
    ("NIC", "what a NIC's RSS does with such packets"),
];

/// `plan`: one row per bucket served.
pub const PLAN: Legend = &[
    ("bucket", "the receive queue (or bucket) the tuple reaches"),
    ("reta", "the indirection table entry that sends it there (- under --mapping rps)"),
    ("cpu", "the CPU of that queue (--cpus)"),
    ("src, dst", "the addresses found"),
    ("sport, dport", "the ports found (- when not asked for)"),
    ("hash", "the tuple's 32-bit Toeplitz hash"),
];

/// `queues`: one row per queue of the interface.
pub const QUEUES: Legend = &[
    ("Queue", "rx-N (receive) or tx-N (transmit) in /sys/class/net/IFACE/queues"),
    ("RPS/XPS CPUs", "rps_cpus of a receive queue, xps_cpus of a transmit queue (- when empty)"),
    ("FlowCnt", "rps_flow_cnt of a receive queue (RFS flow slots)"),
    ("IRQ (CPUs)", "interrupts named after the queue, with their smp_affinity CPUs"),
    ("Poller", "the CPU flowsteer's poller thread of that receive queue would be pinned to (--queue-cpus)"),
];

/// `bench hash`: one row per implementation, input and mode.
pub const BENCH_HASH: Legend = &[
    ("impl", "Toeplitz implementation: reference (bit by bit), table (byte tables), gfni (GF(2) affine instructions)"),
    ("input", "the tuple hashed"),
    ("mode", "single: inputs one by one in a loop; single-call: one call per input; batch: two inputs per pass"),
    ("ns/hash", "median nanoseconds per hash over the repetitions"),
    ("min, max", "the fastest and slowest repetition"),
    ("x faster", "the reference's ns/hash over this row's, same run"),
];

/// `bench steer`: the engine table, then the ring and stage tables.
pub const BENCH_STEER: Legend = &[
    ("design", "per-core (the engine, a queue per worker) or shared-queue (one locked queue and flow table, the pre-RSS baseline)"),
    ("dispatch", "the engine's dispatch policy (- for the baseline)"),
    ("burst", "packets taken per poll (per lock for the baseline)"),
    ("flows, workers", "the workload's flows and the worker threads"),
    ("Mpps", "median million packets per second, generator included; (min-max) over the repetitions"),
    ("Mpps/core", "Mpps per worker"),
    ("x sq-32, x sq-1", "Mpps over the shared-queue baseline with 32 and with 1 packet per lock, same run"),
    ("reorder", "packets that arrived behind a later packet of their flow"),
    ("ring, M items/s, placement", "the hand-off ring (and rtrb, crossbeam) between two pinned threads, and their CPUs"),
    ("stage, ns/packet", "one stage alone on one core"),
];

/// `bench flows`: the engine's curve, then the flow table alone.
pub const BENCH_FLOWS: Legend = &[
    ("flows, dist", "distinct flows, and how they are drawn: uniform (shuffled) or zipf:S"),
    ("Mpps, (min-max)", "median million packets per second over the repetitions, and the range"),
    ("ns/pkt, source, engine", "ns per packet in all; of it, the frame ring alone; the rest, the engine"),
    ("slowdown", "Mpps at the fewest flows of the same dist over Mpps here (1.00x = no cost of more flows)"),
    ("reorder", "packets that arrived behind a later packet of their flow"),
    ("table", "scalar (a key at a time), burst (lookup_or_insert_burst) or dpdk-VARIANT (rte_hash, --dpdk)"),
    ("phase", "fill (first pass from empty: inserts) or steady (the next pass: hits)"),
    ("Mkeys/s, ns/key, MiB", "lookups-or-inserts per second, ns per key, memory the table reserved"),
];

/// `bench reasm`: one row per case.
pub const BENCH_REASM: Legend = &[
    ("impl", "flowsteer's reassembler or DPDK's rte_ip_frag (--dpdk)"),
    ("shape", "DPDK's table shape (buckets x entries / max), ex: its example application's"),
    ("fam, payload, frags", "IP version, UDP payload bytes, fragments per datagram"),
    ("in_flight", "datagrams open at once"),
    ("order", "order of the fragments within a datagram"),
    ("deliv", "copy (datagram copied out) or chain (handed on as slices)"),
    ("set", "cold (frames beyond the caches), warm (replayed from cache) or flood"),
    ("dgrams/s, ns/frag", "datagrams completed per second and nanoseconds per fragment, on one core"),
    ("peak_mem", "most bytes the reassembler held at once"),
    ("completed", "share of the legitimate datagrams completed"),
];

/// `bench offload`: one row per case and frame length.
pub const BENCH_OFFLOAD: Legend = &[
    ("what", "copy (baseline): the frame copied into the worker's burst buffer, as every received frame is; repair: the AF_XDP rule on a frame with a complete or a partial checksum; complete with offsets: a partial checksum completed from a vnet header's offsets; segment: a 64 KB TCP GSO frame cut into 1,448-byte segments"),
    ("bytes", "frame length"),
    ("ns/frame", "median nanoseconds per frame over the repetitions (the partial rows less the copy that restores the frame)"),
    ("min-max", "the fastest and slowest repetition"),
    ("segments", "frames out per frame in"),
    ("x copy", "ns/frame over the copy row's at the same length, same run"),
];

/// `bench tcp`: one row per device under test and streams value.
pub const BENCH_TCP: Legend = &[
    ("dut", "the device under test between the two hosts"),
    ("streams", "parallel TCP streams (iperf3 -P)"),
    ("Gbit/s", "median over the runs that succeeded of the rate host 2 received (iperf3's end.sum_received, TCP payload, 10^9 bits/s), or failed when no run succeeded"),
    ("min, max", "the slowest and the fastest of those runs"),
    ("retrans", "median TCP retransmissions per run (iperf3's end.sum_sent.retransmits)"),
    ("x linux-bridge", "Gbit/s over linux-bridge's at the same streams, same run"),
    ("runs", "runs that succeeded, of the runs tried"),
];

/// `rfc2544`: one row per device under test and frame size.
pub const RFC2544: Legend = &[
    ("dut", "the device under test"),
    ("size", "frame size in bytes with the FCS, or imix"),
    ("NDR Mfps", "highest offered rate with no frame lost (median over --repeat), million frames per second; per direction with --bidirectional"),
    ("PDR Mfps", "highest offered rate with at most 0.5 % lost"),
    ("NDR Gb/s", "NDR in bits of frames per second (FCS included, no preamble or gap)"),
    ("NDR min..max", "NDR of the fastest and slowest search"),
    ("gen max", "the generator's ceiling at this size (--dut none, same CPUs)"),
    ("limited", "yes when NDR is within the resolution of gen max: the generator, not the DUT, set it"),
    ("ns/frame", "busy time of all CPUs per frame received at --cost-rate, minus --dut none's"),
    ("thread ns/frame", "the same from the generator's and receiver's own CPU time"),
    ("DUT ns/frame", "the DUT's own CPU time per frame at --cost-rate: the flowsteer bridge's workers or ovs-vswitchd's threads (schedstat), or the kernel's softirq time on the DUT CPUs"),
    ("trials", "trials the searches ran"),
];

/// The legend as a `--help` block.
pub fn help(title: &str, legend: Legend) -> String {
    let width = legend.iter().map(|(h, _)| h.len()).max().unwrap_or(0);
    let mut s = format!("{title}:\n");
    for (h, m) in legend {
        s.push_str(&format!("  {h:<width$}  {m}\n"));
    }
    s
}

/// Widest line of a footer, in characters.
pub const FOOTER_WIDTH: usize = 100;

/// The legend as a short table under a table: `legend:`, then one row per
/// column (its header, then its meaning, wrapped to [`FOOTER_WIDTH`]).
pub fn footer(legend: Legend) -> String {
    footer_indented(legend, "")
}

/// As [`footer`], every line after `indent` (a table nested in a report).
pub fn footer_indented(legend: Legend, indent: &str) -> String {
    let width = legend.iter().map(|(h, _)| h.chars().count()).max().unwrap_or(0);
    let lead = indent.chars().count() + 2 + width + 2;
    let room = FOOTER_WIDTH.saturating_sub(lead).max(30);
    let mut s = format!("{indent}legend:");
    for (h, m) in legend {
        let mut line = String::new();
        let mut first = true;
        for word in m.split(' ') {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
                push_row(&mut s, indent, if first { h } else { "" }, width, &line);
                first = false;
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        push_row(&mut s, indent, if first { h } else { "" }, width, &line);
    }
    s
}

fn push_row(s: &mut String, indent: &str, head: &str, width: usize, text: &str) {
    s.push('\n');
    s.push_str(format!("{indent}  {head:<width$}  {text}").trim_end());
}

/// The legend as it reads in the README: "`H` meaning; `H2` meaning2."
#[cfg(test)]
fn readme(legend: Legend) -> String {
    let items: Vec<String> = legend.iter().map(|(h, m)| format!("`{h}` {m}")).collect();
    format!("{}.", items.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table's legend, with the title the README gives it.
    const ALL: [(&str, Legend); 18] = [
        ("`run` (per worker)", RUN),
        ("`udp-echo` (per socket)", UDP_ECHO),
        ("`udp-echo --mode xdp` (per queue)", UDP_ECHO_XDP),
        ("`udp-gen` (per flow)", UDP_GEN),
        ("`hash` (per tuple)", HASH),
        ("`analyze` (per queue)", ANALYZE_QUEUES),
        ("`analyze` (top flows)", ANALYZE_FLOWS),
        ("`analyze` (encapsulation)", ANALYZE_ENCAP),
        ("`plan` (per bucket)", PLAN),
        ("`queues` (per queue)", QUEUES),
        ("`bench hash`", BENCH_HASH),
        ("`bench steer`", BENCH_STEER),
        ("`bench flows`", BENCH_FLOWS),
        ("`bench reasm`", BENCH_REASM),
        ("`bench offload`", BENCH_OFFLOAD),
        ("`bench tcp` (per device and streams)", BENCH_TCP),
        ("`rfc2544` (per device and frame size)", RFC2544),
        ("`bridge` and `bridge-ctl stats` (per port and per worker)", BRIDGE_STATS),
    ];

    #[test]
    fn the_readme_carries_every_legend_as_the_commands_print_it() {
        let readme_md = include_str!("../README.md");
        for (title, legend) in ALL {
            let want = format!("{title}: {}", readme(legend));
            assert!(readme_md.contains(&want), "README.md lacks this paragraph under Table legends:\n{want}");
        }
    }

    #[test]
    fn footer_is_a_table_within_100_columns_naming_every_column() {
        for (_, legend) in ALL {
            for indent in ["", "  "] {
                let f = footer_indented(legend, indent);
                assert_eq!(f.lines().next(), Some(format!("{indent}legend:").as_str()));
                for l in f.lines() {
                    assert!(l.chars().count() <= FOOTER_WIDTH, "{} columns: {l}", l.chars().count());
                }
                for (h, m) in legend {
                    let row = format!("{indent}  {h}  ");
                    assert!(f.lines().any(|l| l.starts_with(&row)), "{h}:\n{f}");
                    // Every word of the meaning is there, in order.
                    let words: Vec<&str> = f.split_whitespace().collect();
                    let first = m.split(' ').next().unwrap();
                    assert!(words.contains(&first), "{h}: {first}");
                    assert!(help("Columns", legend).contains(h));
                }
            }
        }
    }
}
