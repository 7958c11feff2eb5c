//! Command-line arguments, parsed once (clap derive) into these structs.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "flowsteer", version, about = "Multi-core packet steering and software RSS toolkit")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Command {
    /// Toeplitz-hash tuples and show RETA index, queue and CPU.
    #[command(after_help = crate::legend::help("Table columns", crate::legend::HASH))]
    Hash(HashArgs),
    /// Find addresses/ports that land on chosen queues (GF(2) solver).
    #[command(after_help = crate::legend::help("Table columns (per bucket)", crate::legend::PLAN))]
    Plan(PlanArgs),
    /// Predict per-queue load and ordering hazards of a capture under an RSS configuration.
    #[command(after_help = format!(
        "{}\n{}\n{}",
        crate::legend::help("Table columns (per queue)", crate::legend::ANALYZE_QUEUES),
        crate::legend::help("Table columns (top flows)", crate::legend::ANALYZE_FLOWS),
        crate::legend::help("Table columns (encapsulation)", crate::legend::ANALYZE_ENCAP)
    ))]
    Analyze(AnalyzeArgs),
    /// Print the commands that put an RSS configuration (and RPS/RFS) on an interface: ethtool -X, ethtool -N, sysfs.
    Export(ExportArgs),
    /// Run the steering engine on the built-in workload, a capture (pcap:FILE) or a live interface (afxdp:, afpacket:).
    #[command(after_help = crate::legend::help("Table columns (per worker)", crate::legend::RUN))]
    Run(RunArgs),
    /// Reassemble IP fragments of a capture into whole packets.
    Defrag(DefragArgs),
    /// Benchmarks.
    Bench(BenchArgs),
    /// List an interface's receive/transmit queues, RPS/XPS CPUs, IRQs and the CPU each poller would use.
    #[command(after_help = crate::legend::help("Table columns (per queue)", crate::legend::QUEUES))]
    Queues(QueuesArgs),
    /// UDP echo/sink server: one socket and pinned thread per CPU (SO_REUSEPORT, steered by receiving CPU).
    #[command(after_help = format!(
        "{}\n{}",
        crate::legend::help("Table columns (per socket)", crate::legend::UDP_ECHO),
        crate::legend::help("Table columns with --mode xdp (per queue)", crate::legend::UDP_ECHO_XDP)
    ))]
    UdpEcho(UdpEchoArgs),
    /// UDP load generator: flows (optionally spread over RSS queues), rate, echo checks, RTT percentiles. Sends 10,000
    /// datagrams/s unless --rate says otherwise (--rate max floods), and only to this host or a directly connected
    /// network unless --allow-routed.
    #[command(after_help = crate::legend::help("Table columns (per flow)", crate::legend::UDP_GEN))]
    UdpGen(UdpGenArgs),
    /// RFC 2544 throughput: NDR and PDR by binary search per device under test and frame size (AF_XDP generator, namespaces it builds).
    #[command(after_help = crate::legend::help("Table columns (per device and frame size)", crate::legend::RFC2544))]
    Rfc2544(Rfc2544Args),
    /// Talk to a running `flowsteer bridge` over its control socket: ports, the MAC table, counters.
    #[command(after_help = crate::legend::help("Table columns (`stats`, per port and per worker)", crate::legend::BRIDGE_STATS))]
    BridgeCtl(BridgeCtlArgs),
    /// L2 learning bridge between live ports (afxdp:IFACE, afpacket:IFACE): per-core forwarding, MAC learning and aging,
    /// VLAN filtering, per-port flags and states, a control socket and Prometheus metrics. Signals: SIGINT/SIGTERM stop it
    /// (final counters, exit 0); SIGUSR1 prints the counters and it keeps running; SIGHUP and SIGUSR2 are ignored.
    #[command(after_help = crate::legend::help("Table columns (per port and per worker)", crate::legend::BRIDGE_STATS))]
    Bridge(BridgeArgs),
}

/// `flowsteer bridge`.
#[derive(Args, Debug)]
pub struct BridgeArgs {
    /// A member port, KIND:IFACE with KIND afxdp or afpacket; at least two (repeat the flag).
    #[arg(long = "port", required = true, value_parser = crate::ranges::port_spec)]
    pub ports: Vec<flowsteer_bridge::PortSpec>,
    /// Worker threads; worker w serves receive queues q with q % N == w on every port.
    #[arg(long, default_value_t = 1, value_parser = crate::ranges::int::<usize, 1, 64>)]
    pub workers: usize,
    /// CPUs to pin the workers to, comma list (worker i on list[i % len]) [default: not pinned].
    #[arg(long, value_parser = crate::ranges::cpu, value_delimiter = ',')]
    pub cpus: Vec<u32>,
    /// Seconds a learned MAC lives without being seen.
    #[arg(long, default_value_t = 300, value_parser = crate::ranges::int::<u64, 1, 1_000_000>)]
    pub ageing: u64,
    /// Learned MACs in the bridge (0: no limit of its own; the table holds at most 16,777,216); when full, nothing new is learned and unknown destinations flood.
    #[arg(long, default_value_t = 65_536, value_parser = crate::ranges::int::<usize, 0, 16_777_216>)]
    pub max_learned: usize,
    /// Learned MACs on each port (0: no limit of its own, the bridge's binds); a port's max_learned flag overrides it.
    #[arg(long, default_value_t = 0, value_parser = crate::ranges::int::<usize, 0, 16_777_216>)]
    pub port_max_learned: usize,
    /// Nice value of the worker threads (-20..=19): forwarding keeps its CPU against other work, as the kernel's own forwarding (softirq) preempts user processes; raising priority needs root (CAP_SYS_NICE), without it the workers keep the nice they inherit. 0: the same as everything else.
    #[arg(long, default_value_t = flowsteer_bridge::config::DEFAULT_WORKER_NICE, value_parser = crate::ranges::nice, allow_hyphen_values = true)]
    pub worker_nice: i8,
    /// Frames up to this many bytes are copied out of the receive buffer at once (counted rx_copied).
    #[arg(long, default_value_t = 256, value_parser = crate::ranges::int::<usize, 0, 4096>)]
    pub rx_copy_threshold: usize,
    /// Transmit queue on AF_XDP egress ports: cpu (the worker's own) or flow (the index of the receive queue the frame came in on).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "flow"])]
    pub tx_queue: String,
    /// VLAN filtering: a frame's VLAN is its tag, or the ingress port's PVID when untagged or priority-tagged, and must be allowed on both ports (switch at run time: bridge-ctl vlan filtering on|off).
    #[arg(long)]
    pub vlan_filtering: bool,
    /// The tag VLAN filtering reads and writes: 802.1q (TPID 0x8100) or 802.1ad (0x88a8); an outer tag of the other is payload.
    #[arg(long, default_value = "802.1q", value_parser = ["802.1q", "802.1ad"])]
    pub vlan_protocol: String,
    /// The PVID (member, untagged) of ports --port-vlans does not name, as Linux's default_pvid; 0: none.
    #[arg(long, default_value_t = 1, value_parser = crate::ranges::int::<u16, 0, 4094>)]
    pub default_pvid: u16,
    /// Where learned unicast is forwarded: auto (XDP in the kernel on afxdp: ports when it is correct for them), xdp (the same, an error when it cannot serve the ports), off (the workers forward everything).
    #[arg(long, default_value = "auto", value_parser = ["auto", "xdp", "off"])]
    pub fast_path: String,
    /// A port's VLANs, IFACE=VIDS[:pvid=N] (e.g. veth1=10,20:pvid=10; the PVID leaves untagged, the others tagged) [default per port: --default-pvid]; kept while filtering is off.
    #[arg(long, value_parser = crate::ranges::port_vlans)]
    pub port_vlans: Vec<(String, flowsteer_bridge::PortVlans)>,
    /// A port's flags at start, IFACE=FLAG=VALUE,... with learning, flood, mcast_flood, bcast_flood, isolated (on|off), state (disabled, listening, learning, forwarding, blocking), max_learned N (e.g. veth1=isolated=on,learning=off) [default: all on but isolated, forwarding].
    #[arg(long, value_parser = crate::ranges::port_flags)]
    pub port_flags: Vec<(String, flowsteer_bridge::PortFlags)>,
    /// Print the tables every SECS seconds.
    #[arg(long, value_parser = crate::ranges::seconds)]
    pub interval: Option<f64>,
    /// Print the final counters as JSON (schema flowsteer.bridge.v1) instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Stop after SECS seconds [default: run until SIGINT/SIGTERM].
    #[arg(long, value_parser = crate::ranges::seconds)]
    pub duration: Option<f64>,
    /// Control socket path (mode 0600; at most 8 clients at once, requests of at most 64 KiB, idle clients closed after 60 s) [default: /run/flowsteer-bridge.sock].
    #[arg(long)]
    pub ctl: Option<std::path::PathBuf>,
    /// Serve Prometheus metrics on ADDR:PORT, or PORT on loopback (e.g. 9108) [default: off]; at most 64 connections (one more closes the one idle longest), each request within 2 s, its head at most 8 KiB.
    #[arg(long, value_parser = flowsteer_bridge::metrics::listen_addr)]
    pub metrics: Option<std::net::SocketAddr>,
}

/// RSS configuration flags shared by `hash`, `plan`, `analyze`, `run`, `export` and `udp-gen`.
#[derive(Args, Debug, Clone)]
pub struct RssArgs {
    /// Key: default (Microsoft), symmetric, random, or hex (with or without ':'). A random key is printed
    /// (header and --json) in the form --key takes back.
    #[arg(long, default_value = "default")]
    pub key: String,
    /// Seed for --key random: the key is drawn from SplitMix64(SEED) instead of OS randomness, so a run
    /// repeats (`run` also seeds its traffic generator with it [default: 1]).
    #[arg(long, value_parser = crate::ranges::int::<u64, 0, { u64::MAX }>)]
    pub seed: Option<u64>,
    /// Key length for --key symmetric|random (bytes, >= 40).
    #[arg(value_parser = crate::ranges::int::<usize, 40, 256>, long, default_value_t = 52)]
    pub key_len: usize,
    /// Indirection table size (power of two).
    #[arg(value_parser = crate::ranges::pow2::<1, {crate::ranges::MAX_TABLE}>, long, default_value_t = 128)]
    pub reta_size: usize,
    /// The modelled NIC's receive queues: the indirection table (RETA) is filled with queues 0..N round robin
    /// [default: 4]. Not `run`'s engine queues (those are `run --rx-queues`) nor `udp-echo --queues` (queue ids to serve).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_QUEUES}>, long)]
    pub queues: Option<usize>,
    /// The modelled queue -> CPU map, CPU numbers as a comma list (queue i -> list[i % len]) [default: queue i on CPU i].
    /// Only labels the cpu column; `run` places threads with --cores and --queue-cpus instead.
    #[arg(value_parser = crate::ranges::cpu, long, value_delimiter = ',')]
    pub cpus: Vec<u32>,
    /// Hash types: comma list of ipv4,tcp4,udp4,ipv6,tcp6,udp6 or default|all|l3.
    #[arg(long, default_value = "default")]
    pub hash_types: String,
    /// Hash the first fragment on its 4-tuple when its ports are present (NICs do not).
    #[arg(long)]
    pub frag_4tuple: bool,
    /// Read the key and the indirection table from `ethtool -x IFACE` output (text or --json); a key in the file and a --key other than the default are refused together.
    #[arg(long, value_name = "FILE")]
    pub ethtool_x: Option<PathBuf>,
    /// Queue selection: reta (NIC RSS) or rps (Linux (hash * n) >> 32 over the queues).
    #[arg(long, default_value = "reta")]
    pub mapping: String,
    /// Hash implementation: auto, reference, table, gfni.
    #[arg(long = "impl", default_value = "auto")]
    pub imp: String,
}

#[derive(Args, Debug)]
pub struct QueuesArgs {
    /// Interface name (in the current network namespace).
    pub iface: String,
    /// Receive queue -> poller CPU, comma list (queue i on list[i % len]) [default: the CPUs this process may use].
    #[arg(value_parser = crate::ranges::cpu, long, value_delimiter = ',')]
    pub queue_cpus: Vec<u32>,
    /// Print JSON (schema flowsteer.queues.v1).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct HashArgs {
    #[command(flatten)]
    pub rss: RssArgs,
    /// Source address.
    #[arg(long)]
    pub src: Option<String>,
    /// Destination address.
    #[arg(long)]
    pub dst: Option<String>,
    /// Source port (with --dport: 4-tuple input).
    #[arg(value_parser = crate::ranges::int::<u16, 0, 65535>, long)]
    pub sport: Option<u16>,
    /// Destination port.
    #[arg(value_parser = crate::ranges::int::<u16, 0, 65535>, long)]
    pub dport: Option<u16>,
    /// Read tuples, one per line `src,dst[,sport,dport]`, from FILE (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// One JSON object per result line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    pub rss: RssArgs,
    /// Source prefix to pick addresses from (e.g. 10.11.2.0/24) or one address.
    #[arg(long)]
    pub src_net: String,
    /// Destination address or prefix.
    #[arg(long)]
    pub dst: String,
    /// Fixed source port.
    #[arg(value_parser = crate::ranges::int::<u16, 0, 65535>, long, conflicts_with = "sport_range")]
    pub sport: Option<u16>,
    /// Source port range to pick from, e.g. 1024-65535.
    #[arg(long)]
    pub sport_range: Option<String>,
    /// Destination port (or range).
    #[arg(long)]
    pub dport: Option<String>,
    /// Protocol: udp or tcp (decides 2- or 4-tuple under the hash types).
    #[arg(long, default_value = "udp")]
    pub proto: String,
    /// Plan for queues 0..N-1 (also sets --queues when that is not given).
    #[arg(value_parser = crate::ranges::int::<u16, 1, {crate::ranges::MAX_QUEUES}>, long)]
    pub buckets: Option<u16>,
    /// Tuples per bucket.
    #[arg(value_parser = crate::ranges::int::<usize, 1, 65536>, long, default_value_t = 1)]
    pub per_bucket: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The RSS flags of hash, plan, analyze or run (--key, --seed, --queues, --hash-types, --ethtool-x, ...).
    #[command(flatten)]
    pub rss: RssArgs,
    /// Interface the commands configure.
    pub iface: String,
    /// Software steering to add beside RSS, as `run --steer`: rss (none), rps or rfs.
    #[arg(long, default_value = "rss")]
    pub steer: String,
    /// RPS CPU mask in the sysfs format (e.g. 3 or ff,ffffffff); once for all queues or once per queue.
    #[arg(long)]
    pub rps_cpus: Vec<String>,
    /// RFS: /proc/sys/net/core/rps_sock_flow_entries (rounded up to a power of two).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_RFS}>, long, default_value_t = 32768)]
    pub rfs_entries: usize,
    /// RFS: rps_flow_cnt of every receive queue (rounded up to a power of two).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_RFS}>, long, default_value_t = 4096)]
    pub rfs_flow_cnt: usize,
    /// Print JSON (schema flowsteer.export.v1).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    pub rss: RssArgs,
    /// Captures (pcap or pcapng, gzip or zstd compressed or not): files, directories (their files) or quoted glob
    /// patterns ('caps/**/*.pcap'); several are read in parallel and reported as one, as if concatenated in the order
    /// of their first packets. With --merge: reports written by `analyze --json`.
    #[arg(required = true, value_name = "CAPTURE")]
    pub inputs: Vec<PathBuf>,
    /// Files read at once, one reader thread each [default: every CPU this process may use].
    #[arg(value_parser = crate::ranges::int::<usize, 1, 1024>, long)]
    pub threads: Option<usize>,
    /// Combine reports written by `analyze --json` (on other hosts, by a batch runner) into one, exactly; refuses
    /// reports of another schema or made under another RSS configuration (exit 1, naming the difference).
    #[arg(long)]
    pub merge: bool,
    /// Do not hash the captures (BLAKE3, about 12 % of a one-thread run): their `blake3` is null in the report
    /// and --merge cannot tell a capture merged twice.
    #[arg(long)]
    pub no_hash: bool,
    /// Also hash the inner headers of VXLAN, Geneve, VXLAN-GPE, GTP-U, GRE, IP-in-IP and PPPoE traffic and show the spread.
    #[arg(long)]
    pub inner: bool,
    /// VXLAN UDP port.
    #[arg(value_parser = crate::ranges::int::<u16, 1, 65535>, long, default_value_t = 4789)]
    pub vxlan_port: u16,
    /// Most flows tracked (memory bound); further new flows are counted, not tracked.
    #[arg(value_parser = crate::ranges::int::<usize, 1, {1 << 28}>, long, default_value_t = 1_000_000)]
    pub max_flows: usize,
    /// Heaviest flows to list.
    #[arg(value_parser = crate::ranges::int::<usize, 0, 100000>, long, default_value_t = 10)]
    pub top: usize,
    /// Write a per-queue load chart (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub rss: RssArgs,
    /// Worker CPUs as CPU numbers, not a count: one pinned worker on each (`--cores 1` is one worker on CPU 1;
    /// `--cores 0,1` two workers) [default: every CPU this process may use].
    #[arg(value_parser = crate::ranges::cpu, long, value_delimiter = ',')]
    pub cores: Vec<u32>,
    /// The engine's receive queues, a count (each polled by one worker's thread) [default: one per --cores CPU].
    /// Also sizes the RSS table's queues (the shared --queues does not apply to `run`).
    #[arg(value_parser = crate::ranges::int::<u16, 1, 1024>, long)]
    pub rx_queues: Option<u16>,
    /// Receive queue -> the CPU whose worker polls it, CPU numbers as a comma list, one per --rx-queues queue
    /// (each must be one of --cores) [default: queue i on the i % n-th --cores CPU].
    #[arg(value_parser = crate::ranges::cpu, long, value_delimiter = ',')]
    pub queue_cpus: Vec<u32>,
    /// Steering policy: rss, rps or rfs.
    #[arg(long, default_value = "rss")]
    pub steer: String,
    /// Dispatch policy (netisr): direct, deferred or hybrid.
    #[arg(long, default_value = "hybrid")]
    pub dispatch: String,
    /// --steer rps|rfs: the CPUs a receive queue may hand packets to, as a hex mask in the sysfs format (3 = CPUs 0
    /// and 1; ff,ffffffff), not a list; once for all queues or once per queue.
    #[arg(long)]
    pub rps_cpus: Vec<String>,
    /// RFS desired-CPU table entries (rounded up to a power of two).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_RFS}>, long, default_value_t = 32768)]
    pub rfs_entries: usize,
    /// RFS flow slots per receive queue (rounded up to a power of two).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_RFS}>, long, default_value_t = 4096)]
    pub rfs_flow_cnt: usize,
    /// Software RSS buckets (bucket -> worker map), power of two.
    #[arg(value_parser = crate::ranges::pow2::<1, {crate::ranges::MAX_TABLE}>, long, default_value_t = 128)]
    pub buckets: usize,
    /// Hand-off queue capacity (descriptors, rounded up to a power of two).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_RING}>, long, default_value_t = 1024)]
    pub ring_size: usize,
    /// Packets per receive poll and per queue pop.
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_BATCH}>, long, default_value_t = 32)]
    pub burst: usize,
    /// Flow table capacity per worker [default: 65536 for captures and live
    /// sources; for the generator its flow count rounded up to a power of
    /// two, 1024..=16777216 (about 80 bytes per flow)].
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_FLOW_TABLE}>, long)]
    pub flow_capacity: Option<usize>,
    /// Idle flow timeout in seconds.
    #[arg(value_parser = crate::ranges::seconds, long, default_value_t = 30.0)]
    pub flow_timeout: f64,
    /// Packet source: gen (built-in generator), pcap:FILE (replayed from memory), afxdp:IFACE[:Q,...] (AF_XDP socket per queue) or afpacket:IFACE (TPACKET_V3 rings in a fanout group, one per receive queue).
    #[arg(long, default_value = "gen")]
    pub source: String,
    /// afxdp: XDP attach mode: auto (native, then generic), native or skb.
    #[arg(value_parser = ["auto", "native", "skb"], long, default_value = "auto")]
    pub xdp_mode: String,
    /// afxdp: what the XDP program takes from the kernel: listeners (UDP/TCP to the --listen ports and
    /// those protocols' fragments; the kernel keeps ping, SSH, ARP and the rest) or all (every IP packet:
    /// cuts the kernel off on that interface).
    #[arg(value_parser = ["listeners", "all"], long, default_value = "listeners")]
    pub xdp_claim: String,
    /// afxdp: run even when the interface's MTU allows frames longer than an AF_XDP frame (1792 bytes):
    /// such frames to claimed ports are dropped and counted.
    #[arg(long)]
    pub allow_mtu_drops: bool,
    /// afpacket: fanout mode: rss (our Toeplitz RSS as a classic BPF program: ring i gets the RETA's queue i), hash, cpu, qm or lb.
    #[arg(value_parser = ["rss", "hash", "cpu", "qm", "lb"], long, default_value = "rss")]
    pub fanout: String,
    /// Times to replay a capture.
    #[arg(value_parser = crate::ranges::int::<u64, 1, {u64::MAX}>, long, default_value_t = 1)]
    pub loops: u64,
    /// Largest capture loaded into memory, in MiB.
    #[arg(value_parser = crate::ranges::int::<u64, 1, {1 << 20}>, long, default_value_t = 1024)]
    pub max_capture_mib: u64,
    /// Generator: number of flows.
    #[arg(value_parser = crate::ranges::int::<u32, 1, {1 << 24}>, long, default_value_t = 1024)]
    pub flows: u32,
    /// Generator: share of IPv6 flows.
    #[arg(value_parser = crate::ranges::share, long, default_value_t = 0.25)]
    pub ipv6_share: f64,
    /// Generator: share of TCP flows.
    #[arg(value_parser = crate::ranges::share, long, default_value_t = 0.5)]
    pub tcp_share: f64,
    /// Generator: frame size in bytes, or imix.
    #[arg(value_parser = crate::ranges::frame_size, long, default_value = "64")]
    pub size: String,
    /// Generator: Zipf exponent of flow popularity (heavy hitters), e.g. 1.1.
    #[arg(value_parser = crate::ranges::zipf, long)]
    pub zipf: Option<f64>,
    /// Generator: offer this many packets per second in total, split evenly over the receive queues, whether or not
    /// the workers keep up: what they cannot take is dropped as queue_full, as a NIC's would be [default: as fast as
    /// the workers take it: a receiving core generates only when its hand-off queues have room, nothing is dropped
    /// for a full queue].
    #[arg(value_parser = crate::ranges::int::<u64, 1, 1_000_000_000>, long, value_name = "PPS")]
    pub rate: Option<u64>,
    /// Generator: share of UDP flows sent as IP fragments.
    #[arg(value_parser = crate::ranges::share, long, default_value_t = 0.0)]
    pub frag_share: f64,
    /// Generator: fragmenting flows send one datagram in N as fragments and the others whole (mixed-size flows; needs one receive queue).
    #[arg(value_parser = crate::ranges::int::<u32, 1, 1000000>, long, default_value_t = 1)]
    pub frag_every: u32,
    /// Fragments: owner (the first fragment's ports pick the flow's worker, which reassembles), rehash (FreeBSD: reassemble where the 2-tuple hash sends them, re-inject to the owner), local (reassemble on the receiving core) or off.
    #[arg(long, default_value = "owner")]
    pub frag_steer: String,
    /// Reassembly memory limit per core in bytes (high threshold; eviction down to 3/4).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_MEM}>, long, default_value_t = 4 * 1024 * 1024)]
    pub reasm_mem: usize,
    /// Fragment timeout in seconds, both families: a datagram not complete this long after its first
    /// fragment came is dropped (reasm_timed_out), and so are fragments waiting this long for their
    /// first (frag_hold_timeout), on an idle core too [default: 30 for IPv4, 60 for IPv6: Linux's
    /// ipfrag_time and ip6frag_time].
    #[arg(value_parser = crate::ranges::seconds, long)]
    pub frag_timeout: Option<f64>,
    /// Present all traffic on one receive queue (the case RPS exists for).
    #[arg(long)]
    pub single_queue: bool,
    /// Run time in seconds.
    #[arg(value_parser = crate::ranges::seconds, long, default_value_t = 3.0)]
    pub duration: f64,
    /// Stop after this many packets.
    #[arg(value_parser = crate::ranges::int::<u64, 1, {u64::MAX}>, long)]
    pub packets: Option<u64>,
    /// Print the table every N seconds.
    #[arg(value_parser = crate::ranges::seconds, long)]
    pub interval: Option<f64>,
    /// Move buckets from overloaded workers to lighter ones while running.
    #[arg(long)]
    pub rebalance: bool,
    /// Move every flow's consumer to the next core every N seconds (shows RFS at work).
    #[arg(value_parser = crate::ranges::seconds, long)]
    pub migrate: Option<f64>,
    /// Application listeners as proto:port list (e.g. udp:53,tcp:80): one per bucket on its core plus a
    /// wildcard per core; packets to other ports are dropped as no_listener [default: accept everything].
    /// With --source afxdp: also the ports the XDP program claims (needed, unless --xdp-claim all).
    #[arg(long, value_delimiter = ',')]
    pub listen: Vec<String>,
    /// Destinations the listener takes besides unicast to this host: comma list of broadcast (ff:ff:ff:ff:ff:ff,
    /// 255.255.255.255), multicast (group MACs, 224.0.0.0/4, ff00::/8), other-host (unicast to other MACs, as a
    /// promiscuous listener), or all. Other frames are dropped as dst_broadcast, dst_multicast, dst_other_host
    /// [default: none: unicast to the interface's MAC; for gen and pcap: every unicast].
    #[arg(long, value_delimiter = ',', value_parser = ["broadcast", "multicast", "other-host", "all"])]
    pub listen_dst: Vec<String>,
    /// Do not pin worker threads.
    #[arg(long)]
    pub no_pin: bool,
    /// Live sources: spin on an idle queue instead of sleeping in poll(2) (at most 1 ms at a time) until a frame comes.
    #[arg(long)]
    pub busy_poll: bool,
    /// Also print the engine's internal figures (per-core timers fired, idle flows expired).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Subcommand, Debug)]
pub enum BenchWhat {
    /// ns per Toeplitz hash: every implementation, single and batch.
    #[command(after_help = crate::legend::help("Table columns", crate::legend::BENCH_HASH))]
    Hash(BenchHashArgs),
    /// Generate a capture and time `analyze` on it (packets/s on one core).
    Analyze(BenchAnalyzeArgs),
    /// Steering engine: packets/s by flows, workers and dispatch, the shared-queue baseline, the ring alone, per-stage cost.
    #[command(after_help = crate::legend::help("Table columns", crate::legend::BENCH_STEER))]
    Steer(BenchSteerArgs),
    /// Throughput against the number of flows: the engine on one core and the flow table alone, from a thousand to ten million flows, uniform and Zipf; DPDK's rte_hash beside the table (--dpdk).
    #[command(after_help = crate::legend::help("Table columns", crate::legend::BENCH_FLOWS))]
    Flows(BenchFlowsArgs),
    /// Reassembly: datagrams/s on one core by size, datagrams in flight and order; the flood case.
    #[command(after_help = crate::legend::help("Table columns", crate::legend::BENCH_REASM))]
    Reasm(BenchReasmArgs),
    /// The bridge's per-frame cost of carrying a host's transmit offloads (checksum completion, software GSO) beside its frame copy.
    #[command(after_help = crate::legend::help("Table columns", crate::legend::BENCH_OFFLOAD))]
    Offload(BenchOffloadArgs),
    /// UDP echo on a veth pair in namespaces it creates: kernel single socket vs per-core sockets vs AF_XDP; flows added one per bucket.
    Udp(BenchUdpArgs),
    /// TCP throughput (iperf3) between two hosts through a bridge, in namespaces it creates, the kernel's default offloads on: Linux bridge vs flowsteer bridge (AF_XDP, AF_PACKET).
    #[command(after_help = format!(
        "{}\nExit codes: 0 every run measured (also when SIGINT or SIGTERM stopped it: the cells that finished are printed); \
         1 a run or a DUT failed (the full report is printed all the same, each failure with iperf3's own words), or this \
         machine cannot run it (not root, no iperf3); 2 usage error.",
        crate::legend::help("Table columns", crate::legend::BENCH_TCP)
    ))]
    Tcp(BenchTcpArgs),
}

#[derive(Args, Debug)]
pub struct BenchTcpArgs {
    /// Device under test between the two hosts (repeatable, measured in the order given): linux-bridge (netfilter calls off, STP off), flowsteer-bridge (AF_XDP ports, the workers forward), flowsteer-bridge-afpacket (AF_PACKET ports), flowsteer-bridge-xdp (AF_XDP ports with the XDP fast path; GRO turned on on the hosts' veths, which it needs).
    #[arg(long = "dut", value_parser = ["linux-bridge", "flowsteer-bridge", "flowsteer-bridge-afpacket", "flowsteer-bridge-xdp"], default_values = ["linux-bridge", "flowsteer-bridge", "flowsteer-bridge-afpacket", "flowsteer-bridge-xdp"])]
    pub dut: Vec<String>,
    /// Parallel TCP streams per cell (iperf3 -P; comma list).
    #[arg(value_parser = crate::ranges::int::<u16, 1, 128>, long, value_delimiter = ',', default_values_t = vec![1u16, 4])]
    pub streams: Vec<u16>,
    /// Seconds per run (iperf3 -t, whole seconds).
    #[arg(value_parser = crate::ranges::int::<u32, 1, 86400>, long, default_value_t = 10)]
    pub seconds: u32,
    /// Runs per DUT and streams value (the median is reported, with min and max).
    #[arg(value_parser = crate::ranges::int::<u32, 1, 100>, long, default_value_t = 3)]
    pub repeat: u32,
    /// Print the report as JSON (schema flowsteer.bench.tcp.v1).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchUdpArgs {
    /// Seconds of traffic per measurement.
    #[arg(value_parser = crate::ranges::seconds, long, default_value_t = 2.0)]
    pub seconds: f64,
    /// UDP payload bytes.
    #[arg(value_parser = crate::ranges::int::<usize, 32, 65507>, long, default_value_t = 64)]
    pub size: usize,
    /// Flows in the mode comparison.
    #[arg(value_parser = crate::ranges::int::<usize, 1, 4096>, long, default_value_t = 8)]
    pub flows: usize,
    /// The flows experiment adds flows one per bucket up to this many.
    #[arg(value_parser = crate::ranges::int::<usize, 1, 4096>, long, default_value_t = 4)]
    pub max_flows: usize,
    /// Modes to compare (kernel-single, kernel, xdp).
    #[arg(value_parser = ["kernel-single", "kernel", "xdp"], long, value_delimiter = ',', default_value = "kernel-single,kernel,xdp")]
    pub modes: Vec<String>,
    /// XDP attach mode for the xdp server: auto, native or skb.
    #[arg(value_parser = ["auto", "native", "skb"], long, default_value = "auto")]
    pub xdp_mode: String,
    /// Print {"results": [...]}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchReasmArgs {
    /// Seconds per measurement.
    #[arg(value_parser = crate::ranges::seconds, long, default_value_t = 0.5)]
    pub seconds: f64,
    #[arg(long)]
    pub json: bool,
    /// Only the rows of this frame set: "cold" (32 MB, read from memory), "warm" (a few blocks, cache-resident) or "flood" (10k/100k/1M never-completing datagrams: per-fragment cost flat in the flood size).
    #[arg(value_parser = ["cold", "warm", "flood"], long)]
    pub set: Option<String>,
    /// Only the rows of this delivery: "copy" (contiguous datagram) or "chain" (zero-copy).
    #[arg(value_parser = ["copy", "chain"], long)]
    pub delivery: Option<String>,
    /// Only this IP version (4 or 6).
    #[arg(value_parser = ["4", "6"], long)]
    pub family: Option<String>,
    /// Only the in-flight cases with this many datagrams in flight (64 or 4096).
    #[arg(value_parser = ["64", "4096"], long)]
    pub in_flight: Option<String>,
    /// Only the in-flight cases with this fragment order (in-order, reversed, shuffled).
    #[arg(value_parser = ["in-order", "reversed", "shuffled"], long)]
    pub order: Option<String>,
    /// Run on this CPU (pinned).
    #[arg(value_parser = crate::ranges::cpu, long)]
    pub cpu: Option<u32>,
    /// Run DPDK's rte_ip_frag beside every warm chain row, on the same CPU, with this harness (`make -C bench/dpdk` builds bench/dpdk/reasm-dpdk; needs Debian's libdpdk-dev) and print the comparison.
    #[arg(long)]
    pub dpdk: Option<PathBuf>,
    /// IPv4 max-distance rule of the in-flight cases (default 64, as Linux's ipfrag_max_dist; 0 turns it off, as DPDK has no such rule: the comparison with the same feature set).
    #[arg(value_parser = crate::ranges::int::<u32, 0, {u32::MAX as u64}>, long)]
    pub max_dist: Option<u32>,
    /// With --dpdk: rounds of flowsteer-then-DPDK per case, default 3 (each reported as the median over rounds; ratios are paired per round).
    #[arg(value_parser = crate::ranges::int::<usize, 1, 1000>, long)]
    pub rounds: Option<usize>,
}

#[derive(Args, Debug)]
pub struct DefragArgs {
    /// Input capture (pcap or pcapng, gzip or zstd compressed or not).
    pub input: PathBuf,
    /// Output capture (pcapng when its name ends in .pcapng, else pcap, which refuses an input of several link types): unfragmented packets unchanged, reassembled datagrams as one packet each; never the input, written in full or not at all.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Memory limit of the reassembler in bytes (high threshold; eviction down to 3/4 of it).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_MEM}>, long, default_value_t = 4 * 1024 * 1024)]
    pub mem_limit: usize,
    /// Reassembly timeout in seconds (both families) [default: 30 for IPv4, 60 for IPv6].
    #[arg(value_parser = crate::ranges::seconds, long)]
    pub timeout: Option<f64>,
    /// Most fragments per datagram.
    #[arg(value_parser = crate::ranges::int::<usize, 1, 8192>, long, default_value_t = 64)]
    pub max_frags: usize,
    /// Do not drop still-pending datagrams at the end of the capture (they are reported as pending).
    #[arg(long)]
    pub no_flush: bool,
    /// Write frames that do not parse (and frames of an unsupported link type) unchanged instead of dropping them; those that may hold an IP fragment, and every fragment reassembly rejects, are dropped all the same.
    #[arg(long)]
    pub keep_malformed: bool,
    /// No progress bar (drawn only when stderr is a terminal, never with --json).
    #[arg(long)]
    pub quiet: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchFlowsArgs {
    /// Flow counts to measure (comma list, 1 to 16777216; ten million flows take about 3 GB of memory).
    #[arg(value_parser = crate::ranges::int::<u32, 1, {1 << 24}>, long, value_delimiter = ',', default_values_t = vec![1000u32, 10_000, 100_000, 1_000_000, 10_000_000])]
    pub flows: Vec<u32>,
    /// Flow popularity (comma list): uniform (every flow equally often, shuffled) or zipf:S (flow i weighs (i+1)^-S).
    #[arg(value_parser = crate::cli::dist, long, value_delimiter = ',', default_values = ["uniform", "zipf:1.1"])]
    pub dist: Vec<flowsteer_bench::flows::Dist>,
    /// Seconds per engine run.
    #[arg(value_parser = crate::ranges::seconds, long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Repetitions of each case (the median is reported, with min and max).
    #[arg(value_parser = crate::ranges::int::<usize, 1, 1000>, long, default_value_t = 3)]
    pub reps: usize,
    /// Keys per burst in the table's burst mode (and DPDK's bulk lookup).
    #[arg(value_parser = crate::ranges::int::<usize, 1, 64>, long, default_value_t = 32)]
    pub burst: usize,
    /// Run everything on this CPU (pinned); default the first this process may use.
    #[arg(value_parser = crate::ranges::cpu, long)]
    pub cpu: Option<u32>,
    /// Only the engine's curve or only the flow table alone.
    #[arg(value_parser = ["engine", "table"], long)]
    pub only: Option<String>,
    /// Run DPDK's rte_hash over the same keys beside the table, with this harness (`make -C bench/dpdk` builds bench/dpdk/flowtable-dpdk; needs Debian's libdpdk-dev).
    #[arg(long)]
    pub dpdk: Option<PathBuf>,
    /// Also draw the engine's Mpps per flow count as a chart (.svg or .png).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// `--dist`'s values.
pub fn dist(s: &str) -> Result<flowsteer_bench::flows::Dist, String> {
    flowsteer_bench::flows::Dist::parse(s)
}

#[derive(Args, Debug)]
pub struct BenchSteerArgs {
    /// Seconds per engine measurement.
    #[arg(value_parser = crate::ranges::seconds, long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Flow counts to measure (comma list).
    #[arg(value_parser = crate::ranges::int::<u32, 1, {1 << 24}>, long, value_delimiter = ',', default_values_t = vec![1u32, 1000, 1_000_000])]
    pub flows: Vec<u32>,
    /// Repetitions per engine case (the median is reported, with min and max).
    #[arg(value_parser = crate::ranges::int::<usize, 1, 1000>, long, default_value_t = 3)]
    pub reps: usize,
    /// Items moved through the ring in the ring-alone measurement.
    #[arg(value_parser = crate::ranges::int::<u64, 1, {u64::MAX}>, long, default_value_t = 50_000_000)]
    pub ring_items: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchAnalyzeArgs {
    /// Packets in the generated capture.
    #[arg(value_parser = crate::ranges::int::<u64, 1, {u64::MAX}>, long, default_value_t = 10_000_000)]
    pub packets: u64,
    /// Distinct flows in the generated capture.
    #[arg(value_parser = crate::ranges::int::<u64, 1, {1 << 24}>, long, default_value_t = 100_000)]
    pub flows: u64,
    /// Keep the generated capture at this path (default: a temporary file, removed after).
    #[arg(long, value_name = "FILE")]
    pub keep: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchHashArgs {
    /// Seconds per measurement (median of repetitions is reported).
    #[arg(value_parser = crate::ranges::seconds, long, default_value_t = 0.2)]
    pub seconds: f64,
    /// Repetitions per measurement.
    #[arg(value_parser = crate::ranges::int::<usize, 1, 1000>, long, default_value_t = 5)]
    pub reps: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchOffloadArgs {
    /// Seconds per measurement (median of repetitions is reported).
    #[arg(value_parser = crate::ranges::seconds, long, default_value_t = 0.2)]
    pub seconds: f64,
    /// Repetitions per measurement.
    #[arg(value_parser = crate::ranges::int::<usize, 1, 1000>, long, default_value_t = 5)]
    pub reps: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct UdpEchoArgs {
    /// Address and port to serve, e.g. 10.0.0.2:9000 or [fd00::2]:9000 (0.0.0.0:PORT = every IPv4 address).
    pub addr: String,
    /// Answer every datagram with its bytes unchanged, from the socket and core that received it (the default).
    #[arg(long, conflicts_with = "sink")]
    pub echo: bool,
    /// Only count datagrams.
    #[arg(long)]
    pub sink: bool,
    /// Socket layer: kernel (SO_REUSEPORT socket per CPU) or xdp (AF_XDP socket per receive queue of --iface, one pinned thread each).
    #[arg(long, default_value = "kernel")]
    pub mode: String,
    /// --mode xdp: the interface whose queues to serve.
    #[arg(long)]
    pub iface: Option<String>,
    /// --mode xdp: receive queue ids of --iface to serve, comma list [default: every receive queue]
    /// (not the shared --queues count of hash, plan and analyze).
    #[arg(value_parser = crate::ranges::int::<u32, 0, 1023>, long, value_delimiter = ',')]
    pub queues: Vec<u32>,
    /// --mode xdp: XDP attach mode: auto (native, then generic), native or skb.
    #[arg(value_parser = ["auto", "native", "skb"], long, default_value = "auto")]
    pub xdp_mode: String,
    /// --mode xdp: what the XDP program takes from the kernel: listeners (UDP to the served port; the
    /// kernel keeps ping, SSH, ARP, fragments and the rest) or all (every IP packet of --iface).
    #[arg(value_parser = ["listeners", "all"], long, default_value = "listeners")]
    pub xdp_claim: String,
    /// --mode xdp: serve even when the interface's MTU allows frames longer than an AF_XDP frame (1792
    /// bytes): such datagrams to the served port are dropped and counted.
    #[arg(long)]
    pub allow_mtu_drops: bool,
    /// CPUs to serve on as CPU numbers, one socket and pinned thread each [default: every CPU this process may use].
    #[arg(value_parser = crate::ranges::cpu, long, value_delimiter = ',')]
    pub cpus: Vec<u32>,
    /// How a socket is tied to its CPU: incoming-cpu (SO_INCOMING_CPU, Linux >= 6.1) or cbpf (reuseport BPF program).
    #[arg(long, default_value = "incoming-cpu")]
    pub bind: String,
    /// Stop after this many seconds [default: run until SIGINT or SIGTERM].
    #[arg(value_parser = crate::ranges::seconds, long)]
    pub duration: Option<f64>,
    /// Print the counters every N seconds.
    #[arg(value_parser = crate::ranges::seconds, long)]
    pub interval: Option<f64>,
    /// Datagrams per recvmmsg/sendmmsg call (1..=1024).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_BATCH}>, long, default_value_t = 32)]
    pub batch: usize,
    /// Receive slot per datagram in bytes; longer datagrams are dropped as truncated (memory per core = batch * this).
    #[arg(value_parser = crate::ranges::int::<usize, 1, 65535>, long, default_value_t = 65535)]
    pub max_size: usize,
    /// Socket receive buffer in bytes (SO_RCVBUFFORCE with CAP_NET_ADMIN) [default: the system's].
    #[arg(value_parser = crate::ranges::int::<usize, 1, {i32::MAX as u64}>, long)]
    pub rcvbuf: Option<usize>,
    /// Print JSON (one object at the end; with --interval one per line).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct UdpGenArgs {
    /// The receiver's RSS configuration (used by --spread).
    #[command(flatten)]
    pub rss: RssArgs,
    /// Remote address.
    #[arg(short = 'r', long)]
    pub remote: String,
    /// Remote UDP port.
    #[arg(value_parser = crate::ranges::int::<u16, 1, 65535>, short = 'p', long)]
    pub port: u16,
    /// Local address to send from; repeatable, flows use them round robin [default: the routed source address].
    #[arg(short = 'l', long = "local")]
    pub local: Vec<String>,
    /// Datagrams to send over all flows [default: run for --duration, 3 s when neither is given].
    #[arg(value_parser = crate::ranges::int::<u64, 1, {u64::MAX}>, short = 'n', long)]
    pub count: Option<u64>,
    /// Datagram size in bytes (32..=65507; the first 32 are the header). With --afxdp (16..=65507): the UDP payload, 18.. (16.. for IPv6), the frame is size + 42 bytes for IPv4 (+ 62 for IPv6) without the FCS: --size 18 gives 64-byte IPv4 frames.
    #[arg(value_parser = crate::ranges::int::<usize, 16, 65507>, short = 's', long, default_value_t = 64)]
    pub size: usize,
    /// Datagrams per second over all flows, or max: as fast as the kernel takes them, which floods the link (and,
    /// with --allow-routed, the path beyond it). 0 is refused: it once meant max.
    #[arg(value_parser = crate::ranges::rate, long, value_name = "PPS", default_value_t = crate::ranges::Rate::Pps(crate::ranges::DEFAULT_RATE))]
    pub rate: crate::ranges::Rate,
    /// Send to a remote the kernel routes through a gateway or a default route. Without it such a remote is refused
    /// (exit 2): only this host (loopback, its own addresses) and directly connected networks are sent to.
    #[arg(long)]
    pub allow_routed: bool,
    /// Seconds to send.
    #[arg(value_parser = crate::ranges::seconds, long)]
    pub duration: Option<f64>,
    /// Flows (connected sockets, distinct source ports) [default: --spread N, else 1].
    #[arg(value_parser = crate::ranges::int::<usize, 1, 4096>, long)]
    pub flows: Option<usize>,
    /// Plan source ports (or pick local addresses) so the flows land on N distinct receive queues of the RSS configuration.
    #[arg(value_parser = crate::ranges::int::<u16, 1, 4096>, long)]
    pub spread: Option<u16>,
    /// Source ports --spread may use.
    #[arg(long, default_value = "1024-65535")]
    pub sport_range: String,
    /// Wait for echoed replies: byte-exact check, loss, reordering, round-trip percentiles.
    #[arg(long, conflicts_with = "afxdp")]
    pub echo: bool,
    /// Seconds to wait for outstanding replies after the last send.
    #[arg(value_parser = crate::ranges::seconds_or_zero, long, default_value_t = 1.0, conflicts_with = "afxdp")]
    pub drain: f64,
    /// Datagrams per sendmmsg call (1..=1024).
    #[arg(value_parser = crate::ranges::int::<usize, 1, {crate::ranges::MAX_BATCH}>, long, default_value_t = 32, conflicts_with = "afxdp")]
    pub batch: usize,
    /// Send pre-built frames from an AF_XDP socket on IFACE (transmit only, no XDP program; needs root, IFACE up, and the remote's or gateway's neighbour entry, resolved first or given with --dst-mac).
    #[arg(long, value_name = "IFACE")]
    pub afxdp: Option<String>,
    /// The AF_XDP transmit queue of --afxdp.
    #[arg(value_parser = crate::ranges::int::<u32, 0, 4095>, long, default_value_t = 0, requires = "afxdp")]
    pub afxdp_queue: u32,
    /// Destination MAC of the --afxdp frames (aa:bb:cc:dd:ee:ff) [default: the neighbour table's entry of the remote or its gateway].
    #[arg(long, value_name = "MAC", requires = "afxdp")]
    pub dst_mac: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct Rfc2544Args {
    /// Device under test, built in namespaces of its own; repeatable: none (generator to receiver), patch (tc mirred redirect), linux-bridge, flowsteer-bridge (AF_XDP ports, the workers forward), flowsteer-bridge-afpacket (AF_PACKET ports), flowsteer-bridge-xdp (AF_XDP ports with the XDP fast path), ovs (Open vSwitch's userspace datapath with AF_XDP ports and the NORMAL action, daemons of the harness's own; skipped with the reason when Open vSwitch is not installed).
    #[arg(long = "dut", value_parser = ["none", "patch", "linux-bridge", "flowsteer-bridge", "flowsteer-bridge-afpacket", "flowsteer-bridge-xdp", "ovs"], required_unless_present_any = ["cleanup", "ceiling", "tx"])]
    pub dut: Vec<String>,
    /// A real device under test: the interface the generator sends from (with --rx; both in this namespace). Measured as dut `external`, after any --dut.
    #[arg(long, value_name = "IFACE", requires = "rx", conflicts_with = "ceiling")]
    pub tx: Option<String>,
    /// The interface the receiver listens on, behind the real device (with --tx); frames are addressed to its MAC.
    #[arg(long, value_name = "IFACE", requires = "tx")]
    pub rx: Option<String>,
    /// Frame sizes in bytes with the FCS (64..=1518), or imix (7:4:1 of 64/594/1518), comma-separated.
    #[arg(long, value_parser = rfc2544_size, value_delimiter = ',', default_value = "64,128,256,512,1024,1280,1518,imix")]
    pub sizes: Vec<String>,
    /// Seconds of a full-length trial (RFC 2544: 60).
    #[arg(long, value_parser = crate::ranges::seconds, default_value_t = 60.0)]
    pub trial: f64,
    /// Seconds of a short trial, used while the search interval is wider than 10 % (at most --trial).
    #[arg(long, value_parser = crate::ranges::seconds, default_value_t = 1.0)]
    pub short_trial: f64,
    /// Searches per device and frame size (median, min and max reported); each after the first tries first, at full length, the two ends of the interval the one before found.
    #[arg(long, value_parser = crate::ranges::int::<u32, 1, 100>, default_value_t = 1)]
    pub repeat: u32,
    /// Relative width at which the search stops: the rates are within this share of the true ones.
    #[arg(long, value_parser = rfc2544_resolution, default_value_t = 0.01)]
    pub resolution: f64,
    /// Seconds to wait after each trial for queued frames (RFC 2544: 2).
    #[arg(long, value_parser = crate::ranges::seconds_or_zero, default_value_t = 2.0)]
    pub wait: f64,
    /// CPUs of the generator and the receiver: one CPU for both, or two (generator, receiver) [default: the first CPU this process may use].
    #[arg(long, value_parser = crate::ranges::cpu, value_delimiter = ',')]
    pub gen_cpus: Vec<u32>,
    /// CPUs given to the device under test: the flowsteer bridge's worker is pinned to the first (the kernel's DUTs forward in the sender's softirq, on the generator's CPU, unless --kernel-rps) [default: the first CPU this process may use that is not a --gen-cpus one].
    #[arg(long, value_parser = crate::ranges::cpu, value_delimiter = ',')]
    pub dut_cpus: Vec<u32>,
    /// RPS on the kernel DUTs' (patch, linux-bridge) two ports to --dut-cpus, so they forward there instead of in the sender's softirq [default: off, the kernel's fastest placement on veth].
    #[arg(long)]
    pub kernel_rps: bool,
    /// Flows (distinct source address and port).
    #[arg(long, value_parser = crate::ranges::int::<u32, 1, 65536>, default_value_t = 16)]
    pub flows: u32,
    /// IPv6 frames (the smallest is 82 bytes: the stamp needs room).
    #[arg(long)]
    pub ipv6: bool,
    /// Remove the namespaces a killed run left behind, then exit.
    #[arg(long)]
    pub cleanup: bool,
    /// Print the plan (DUTs, frame sizes, repeats, trial lengths, trials at most) and the estimated time, then exit: builds nothing, needs no root. With --json, the plan as JSON (schema flowsteer.rfc2544-plan.v1).
    #[arg(long, conflicts_with = "cleanup")]
    pub dry_run: bool,
    /// Measure only the generator's ceiling per frame size (unthrottled into --dut none, one trial of --trial seconds, at most 5).
    #[arg(long, conflicts_with = "dut")]
    pub ceiling: bool,
    /// Print the report as JSON (schema flowsteer.rfc2544.v2).
    #[arg(long)]
    pub json: bool,
    /// Offered rate (frames/s) of a CPU-cost trial on every DUT and on none: cpu_ns_per_frame = busy time of all CPUs / frames received, minus none's. Pick a rate below every DUT's NDR.
    #[arg(long, value_parser = crate::ranges::int::<u64, 1, 100_000_000>)]
    pub cost_rate: Option<u64>,
    /// Draw NDR frames/s against frame size per DUT, beside the generator's ceiling, to FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Both ends generate and receive at once (RFC 2544 section 14), each direction at the offered rate; rates are per direction, the report adds the aggregate.
    #[arg(long)]
    pub bidirectional: bool,
    /// Sockets of the generator and receiver: afxdp, afpacket, or auto (AF_XDP, falling back to AF_PACKET when AF_XDP cannot be set up; the reason is printed).
    #[arg(long, value_parser = ["afxdp", "afpacket", "auto"], default_value = "auto")]
    pub io: String,
    /// Plan the flows' source ports (GF(2) planner) so they land evenly on receive queues 0..N of the DUT's RSS (--key, --reta-size, --hash-types, --ethtool-x).
    #[arg(value_parser = crate::ranges::int::<u16, 1, 4096>, long)]
    pub spread_queues: Option<u16>,
    /// RSS key the DUT uses (with --spread-queues): default (Microsoft), symmetric, or hex.
    #[arg(long, default_value = "default", requires = "spread_queues")]
    pub key: String,
    /// Indirection table size (with --spread-queues), filled with queues 0..N round robin.
    #[arg(value_parser = crate::ranges::pow2::<1, {crate::ranges::MAX_TABLE}>, long, default_value_t = 128, requires = "spread_queues")]
    pub reta_size: usize,
    /// Hash types of the DUT (with --spread-queues); the default hashes UDP on its ports, which spreading by source port needs.
    #[arg(long, default_value = "all", requires = "spread_queues")]
    pub hash_types: String,
    /// Read the DUT's key and indirection table from `ethtool -x IFACE` output (with --spread-queues).
    #[arg(long, value_name = "FILE", requires = "spread_queues")]
    pub ethtool_x: Option<PathBuf>,
    /// Source ports --spread-queues may use.
    #[arg(long, default_value = "1024-65535", requires = "spread_queues")]
    pub sport_range: String,
}

/// `rfc2544 --sizes`: a frame size with the FCS, 64..=1518, or imix.
fn rfc2544_size(s: &str) -> Result<String, String> {
    flowsteer_rfc2544::frames::FrameSize::parse(s.trim())
        .map(|f| f.label())
        .map_err(|_| "expected imix or a frame size in 64..=1518 bytes".to_string())
}

/// `rfc2544 --resolution`: a share in 0.0001..=0.5.
fn rfc2544_resolution(s: &str) -> Result<f64, String> {
    crate::ranges::share(s)
        .ok()
        .filter(|v| (0.0001..=0.5).contains(v))
        .ok_or_else(|| "expected a share in 0.0001..=0.5".to_string())
}

#[derive(Args, Debug)]
pub struct BridgeCtlArgs {
    /// The bridge's control socket (the path `flowsteer bridge --ctl` serves).
    #[arg(long, value_name = "PATH", default_value = flowsteer_bridge::ctl::DEFAULT_CTL_PATH)]
    pub ctl: PathBuf,
    #[command(subcommand)]
    pub what: BridgeCtlWhat,
}

#[derive(Subcommand, Debug)]
pub enum BridgeCtlWhat {
    /// Add or remove member ports while traffic flows.
    #[command(subcommand)]
    Port(BridgePortWhat),
    /// Show and change the MAC table (forwarding database).
    #[command(subcommand)]
    Fdb(BridgeFdbWhat),
    /// Show and change member ports' flags and state, as `bridge link` does.
    #[command(subcommand)]
    Link(BridgeLinkWhat),
    /// Show and change member ports' VLANs and VLAN filtering, as `bridge vlan` does.
    #[command(subcommand)]
    Vlan(BridgeVlanWhat),
    /// Counters per port and per worker, the MAC table's line and the conservation check.
    Stats {
        /// Print the counters as JSON (schema flowsteer.bridge.v1), as the bridge keeps them.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum BridgePortWhat {
    /// Add a member port: KIND:IFACE (afxdp:veth2, afpacket:eth1).
    Add {
        #[arg(value_parser = crate::ranges::port_spec, value_name = "KIND:IFACE")]
        port: flowsteer_bridge::PortSpec,
    },
    /// Remove a member port: its MAC table entries are flushed, its XDP program detached.
    Del {
        #[arg(value_parser = crate::ranges::iface, value_name = "IFACE")]
        iface: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum BridgeFdbWhat {
    /// Every entry, one per line as `bridge fdb show` prints them: MAC dev IFACE [vlan VID] [age Ns] master flowsteer [static].
    Show {
        /// One JSON array of entries (mac, port, vlan, static, age_s).
        #[arg(long)]
        json: bool,
    },
    /// Add an entry: `MAC [vlan VID] IFACE [static|sticky|extern_learn]`, or as iproute2 has it, `MAC dev IFACE [vlan VID] [TYPE]`; static (the default) never ages or moves, sticky ages but never moves, extern_learn (a controller's) ages and learning never overwrites it. At most 4,096 such entries.
    Add {
        #[arg(value_parser = crate::ranges::mac, value_name = "MAC")]
        mac: String,
        /// `[vlan VID] IFACE [TYPE]` or `dev IFACE [vlan VID] [TYPE]` (VID 1..=4094, only with VLAN filtering, a VLAN of the port; no vlan: untagged).
        #[arg(num_args = 1..=5, required = true, value_name = "WORDS")]
        words: Vec<String>,
    },
    /// Remove an entry, learned or static: `MAC [vlan VID]`.
    Del {
        #[arg(value_parser = crate::ranges::mac, value_name = "MAC")]
        mac: String,
        /// `vlan VID` (VID 1..=4094; no vlan: untagged).
        #[arg(num_args = 0..=2, value_name = "WORDS")]
        words: Vec<String>,
    },
    /// Remove entries: `[[dev] IFACE] [vlan VID] [dynamic|static]`, every filter given must hold; no type: dynamic entries (learned, sticky, extern_learn), `static` static ones, both words: all.
    Flush {
        /// `[dev] IFACE`, `vlan VID`, `dynamic`, `static`, in any order; nothing: every dynamic entry.
        #[arg(num_args = 0..=6, value_name = "WORDS")]
        words: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum BridgeLinkWhat {
    /// Change a port: `dev IFACE` then settings, e.g. `learning off`, `flood off`, `mcast_flood off`, `bcast_flood off`, `isolated on`, `state blocking` (disabled, listening, learning, forwarding, blocking, or 0-4), `max_learned N` (0: no limit of its own).
    Set {
        /// `dev IFACE SETTING VALUE [SETTING VALUE ...]`.
        #[arg(num_args = 1.., required = true, value_name = "WORDS")]
        words: Vec<String>,
    },
    /// Every member port's flags and state, one line each.
    Show {
        /// One JSON array of ports.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum BridgeVlanWhat {
    /// Add VLANs to a port or change their flags: `dev IFACE vid N[-M] [pvid] [untagged]` (pvid with one VLAN only; re-adding the PVID without pvid clears it).
    Add {
        /// `dev IFACE vid N[-M] [pvid] [untagged]`.
        #[arg(num_args = 1.., required = true, value_name = "WORDS")]
        words: Vec<String>,
    },
    /// Remove VLANs from a port: `dev IFACE vid N[-M]` (its entries in them are flushed).
    Del {
        /// `dev IFACE vid N[-M]`.
        #[arg(num_args = 1.., required = true, value_name = "WORDS")]
        words: Vec<String>,
    },
    /// Every member port's VLANs, as `bridge vlan show` prints them.
    Show {
        /// One JSON object: filtering, protocol, ports.
        #[arg(long)]
        json: bool,
    },
    /// Switch VLAN filtering on or off while the bridge runs (dynamic entries are flushed).
    Filtering {
        #[arg(value_parser = ["on", "off"], value_name = "on|off")]
        state: String,
    },
}
