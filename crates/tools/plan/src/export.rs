//! An RSS configuration as the commands a Linux user runs to put it on an
//! interface: `ethtool -X` (key, indirection table, hash function),
//! `ethtool -N ... rx-flow-hash` (which fields are hashed), and for RPS and
//! RFS the sysfs and procfs writes. Text only: nothing here runs a command
//! (`flowsteer export IFACE` prints the script).
//!
//! `ethtool -X` cannot take a table entry by entry: it fills the NIC's table
//! with `equal N` (entry `i` -> queue `start + i % N`) or `weight W0 W1 ...`
//! (one contiguous run of entries per queue, sized by weight; ethtool's
//! `fill_indir_table`, reproduced by [`weight_fill`]). [`reta_form`] says
//! which of the two gives a table exactly; a table that is neither is shown
//! as comments in the `ethtool -x` layout and left for the
//! `ETHTOOL_SRSSH` ioctl, which takes any table but which ethtool does not
//! expose.

use flowsteer_rss::reta::Mapping;
use flowsteer_rss::{HashTypes, KeyKind, QueueId, Reta, RssConfig};
use flowsteer_steer::cpuset::CpuSet;
use std::fmt;

/// Longest interface name Linux accepts (`IFNAMSIZ` - 1).
pub const MAX_IFACE_LEN: usize = 15;

/// One line of a script: a command to run, or a comment that explains or
/// qualifies the commands around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Command(String),
    Comment(String),
}

/// The commands, in the order to run them, with their comments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    pub lines: Vec<Line>,
}

impl Script {
    fn command(&mut self, text: String) {
        self.lines.push(Line::Command(text));
    }

    fn comment(&mut self, text: impl Into<String>) {
        self.lines.push(Line::Comment(text.into()));
    }

    /// The commands alone, in order.
    pub fn commands(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|l| match l {
            Line::Command(c) => Some(c.as_str()),
            Line::Comment(_) => None,
        })
    }
}

/// A shell script: commands as they are, comments after `# `.
impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            match line {
                Line::Command(c) => writeln!(f, "{c}")?,
                Line::Comment(c) => writeln!(f, "# {c}")?,
            }
        }
        Ok(())
    }
}

/// How `ethtool -X` can write an indirection table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetaForm {
    /// `[start S] equal N`: entry `i` -> queue `start + i % queues`.
    Equal { start: u16, queues: u16 },
    /// `weight W0 W1 ...`: contiguous runs, queue `j` getting a share
    /// `W_j / sum` of the entries (leading zero weights skip queues).
    Weight(Vec<u32>),
    /// Neither: ethtool cannot write this table.
    Table,
}

impl RetaForm {
    /// The words after `ethtool -X IFACE ...`, or `None` for [`RetaForm::Table`].
    pub fn ethtool_words(&self) -> Option<String> {
        match self {
            RetaForm::Equal { start: 0, queues } => Some(format!("equal {queues}")),
            RetaForm::Equal { start, queues } => Some(format!("start {start} equal {queues}")),
            RetaForm::Weight(w) => {
                let w: Vec<String> = w.iter().map(u32::to_string).collect();
                Some(format!("weight {}", w.join(" ")))
            }
            RetaForm::Table => None,
        }
    }
}

/// Which `ethtool -X` form gives exactly `reta` (on a NIC whose table has
/// as many entries); `equal` when both would.
pub fn reta_form(reta: &Reta) -> RetaForm {
    let entries: Vec<u16> = reta.entries().iter().map(|q| q.0).collect();
    let (Some(&start), Some(&max)) = (entries.iter().min(), entries.iter().max()) else {
        return RetaForm::Table;
    };
    let queues = max - start + 1;
    if entries.iter().enumerate().all(|(i, &q)| usize::from(q) == usize::from(start) + i % usize::from(queues)) {
        return RetaForm::Equal { start, queues };
    }
    if entries.windows(2).any(|w| w[0] > w[1]) {
        return RetaForm::Table;
    }
    let mut counts = vec![0u32; usize::from(max) + 1];
    for &q in &entries {
        counts[usize::from(q)] += 1;
    }
    let g = counts.iter().fold(0, |g, &c| gcd(g, c)).max(1);
    for weights in [counts.iter().map(|c| c / g).collect::<Vec<_>>(), counts] {
        if weight_fill(entries.len(), &weights).as_deref() == Some(&entries[..]) {
            return RetaForm::Weight(weights);
        }
    }
    RetaForm::Table
}

/// The table `ethtool -X IFACE weight W0 W1 ...` writes into a table of
/// `size` entries (ethtool's `fill_indir_table`): entry `i` goes to the
/// first queue `j` whose cumulative weight `W0 + ... + Wj` exceeds
/// `i * sum / size`. `None` where ethtool refuses the weights (all zero,
/// or a sum above `size`).
pub fn weight_fill(size: usize, weights: &[u32]) -> Option<Vec<u16>> {
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 || sum > size as u64 {
        return None;
    }
    let mut table = Vec::with_capacity(size);
    let (mut j, mut partial) = (0usize, 0u64);
    let mut next = weights.iter();
    for i in 0..size as u64 {
        // ethtool: `while (i >= size * partial / sum) { j++; partial += w[j]; }`
        while i >= size as u64 * partial / sum {
            partial += u64::from(*next.next()?);
            j += 1;
        }
        table.push(u16::try_from(j - 1).ok()?);
    }
    Some(table)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Software steering beside RSS, as `flowsteer run --steer rps|rfs` models
/// it: per receive queue, an RPS CPU set and (RFS) a flow table.
#[derive(Clone, Debug)]
pub struct SoftSteering<'a> {
    /// Receive queues of the interface.
    pub rx_queues: u16,
    /// RPS CPU sets: none (RPS off), one for every queue, or one per queue.
    pub rps_cpus: &'a [CpuSet],
    /// RFS flow tables, when RFS is on.
    pub rfs: Option<RfsTables>,
}

/// RFS table sizes (the kernel rounds both up to a power of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RfsTables {
    /// `/proc/sys/net/core/rps_sock_flow_entries` (`run --rfs-entries`).
    pub sock_flow_entries: usize,
    /// `/sys/class/net/IFACE/queues/rx-N/rps_flow_cnt` (`run --rfs-flow-cnt`).
    pub flow_cnt: usize,
}

/// Why no script could be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// Not a name Linux gives an interface, or one that would need quoting
    /// in a shell command.
    #[error("'{0}' is not an interface name (1 to 15 of A-Z a-z 0-9 . _ - @ +, not . or ..)")]
    BadInterface(String),
    /// RPS CPU sets neither one for all queues nor one per queue.
    #[error("{given} RPS CPU masks for {queues} receive queues (give one, or one per queue)")]
    RpsMaskCount { given: usize, queues: u16 },
}

/// Check an interface name before it goes, unquoted, into commands and
/// sysfs paths.
pub fn check_iface(iface: &str) -> Result<(), ExportError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+');
    if iface.is_empty() || iface.len() > MAX_IFACE_LEN || iface == "." || iface == ".." || !iface.chars().all(ok_char) {
        return Err(ExportError::BadInterface(iface.to_string()));
    }
    Ok(())
}

/// The script that puts `config` (and `steering`, if any) on `iface`.
pub fn nic_script(iface: &str, config: &RssConfig, steering: Option<&SoftSteering>) -> Result<Script, ExportError> {
    check_iface(iface)?;
    if let Some(s) = steering {
        let n = s.rps_cpus.len();
        if n > 1 && n != usize::from(s.rx_queues) {
            return Err(ExportError::RpsMaskCount { given: n, queues: s.rx_queues });
        }
    }
    let mut out = Script::default();
    rss_lines(&mut out, iface, config);
    hash_type_lines(&mut out, iface, config.types);
    if let Some(s) = steering {
        steering_lines(&mut out, iface, s);
    }
    Ok(out)
}

fn rss_lines(out: &mut Script, iface: &str, config: &RssConfig) {
    let key = config.key();
    let origin = match key.kind() {
        KeyKind::MicrosoftDefault => "the public Microsoft key".to_string(),
        KeyKind::Symmetric => "a symmetric key".to_string(),
        KeyKind::Random => "a key drawn by --key random".to_string(),
        KeyKind::Seeded(seed) => format!("the key --key random --seed {seed} draws"),
        KeyKind::User => "the key given".to_string(),
    };
    let reta = &config.reta;
    out.comment(format!(
        "RSS on {iface}: Toeplitz, {origin} ({} bytes), indirection table of {} entries over {} queues",
        key.len(),
        reta.len(),
        reta.queue_count()
    ));
    out.comment(format!(
        "these reproduce flowsteer's placement on a NIC whose key is {} bytes and whose table has {} entries (ethtool -x {iface} shows both)",
        key.len(),
        reta.len()
    ));
    if config.mapping == Mapping::RpsScale {
        out.comment(
            "--mapping rps ((hash * queues) >> 32) has no NIC equivalent: a NIC picks the queue through its table, as below",
        );
    }
    let form = reta_form(reta);
    match form.ethtool_words() {
        Some(words) => out.command(format!("ethtool -X {iface} hkey {} {words} hfunc toeplitz", key.to_hex())),
        None => {
            out.comment(
                "this table is neither 'equal N' nor 'weight W...', the only tables ethtool -X writes; the kernel takes",
            );
            out.comment(
                "any table through the ETHTOOL_SRSSH ioctl (struct ethtool_rxfh), which ethtool does not expose. The command",
            );
            out.comment("below sets the key and hash function and leaves the NIC's table as it is. The table, as ethtool -x shows it:");
            for (row, chunk) in reta.entries().chunks(8).enumerate() {
                let cells: String = chunk.iter().map(|q| format!("{:>6}", q.0)).collect();
                out.comment(format!("{:>5}: {cells}", row * 8));
            }
            out.command(format!("ethtool -X {iface} hkey {} hfunc toeplitz", key.to_hex()));
        }
    }
    let queues = u16::try_from(reta.queue_count()).unwrap_or(u16::MAX);
    let moved: Vec<String> = QueueId::all(queues)
        .filter(|&q| config.cpu_for(q).0 != u32::from(q.0))
        .map(|q| format!("{q}->{}", config.cpu_for(q)))
        .collect();
    if !moved.is_empty() {
        out.comment(format!(
            "queue -> CPU ({}) is each queue's interrupt affinity: echo CPU > /proc/irq/IRQ/smp_affinity_list (flowsteer queues {iface} lists the IRQs)",
            moved.join(", ")
        ));
    }
}

fn hash_type_lines(out: &mut Script, iface: &str, types: HashTypes) {
    let families = [
        ("IPv4", HashTypes::IPV4, [("tcp4", HashTypes::TCP_IPV4), ("udp4", HashTypes::UDP_IPV4)]),
        ("IPv6", HashTypes::IPV6, [("tcp6", HashTypes::TCP_IPV6), ("udp6", HashTypes::UDP_IPV6)]),
    ];
    out.comment(format!(
        "fields hashed per flow type (hash types {types}): s/d source/destination address, f/n source/destination port"
    ));
    for (family, l3, l4) in families {
        for (name, bit) in l4 {
            if types.contains(bit) {
                out.command(format!("ethtool -N {iface} rx-flow-hash {name} sdfn"));
            } else if types.contains(l3) {
                out.command(format!("ethtool -N {iface} rx-flow-hash {name} sd"));
            } else {
                out.comment(format!(
                    "{name}: not hashed under these hash types; a NIC cannot turn hashing off for a flow type ('r' discards it), left as it is"
                ));
            }
        }
        if !types.contains(l3) {
            out.comment(format!(
                "other {family} traffic: not hashed under these hash types, but NICs hash it on the addresses (ethtool has no setting for it)"
            ));
        }
    }
    if !types.fragments_on_2tuple {
        out.comment(
            "--frag-4tuple: NICs hash every fragment on the addresses; no ethtool setting hashes a first fragment on its ports",
        );
    }
}

fn steering_lines(out: &mut Script, iface: &str, s: &SoftSteering) {
    let queues = 0..s.rx_queues;
    if s.rps_cpus.is_empty() && s.rfs.is_none() {
        return;
    }
    out.comment(
        "RPS and RFS steer by the hash the NIC delivers with each packet; without it the kernel hashes by itself and flowsteer's predictions do not apply",
    );
    out.command(format!("ethtool -K {iface} rxhash on"));
    if !s.rps_cpus.is_empty() {
        out.comment("RPS: each receive queue hands a packet to cpus[(hash * n) >> 32] of its mask");
        for q in queues.clone() {
            let set = if s.rps_cpus.len() == 1 { &s.rps_cpus[0] } else { &s.rps_cpus[usize::from(q)] };
            out.command(format!("echo {} > /sys/class/net/{iface}/queues/rx-{q}/rps_cpus", set.to_mask()));
        }
    }
    if let Some(rfs) = s.rfs {
        out.comment("RFS: a flow is steered to the CPU where the socket reading it last ran");
        out.command(format!("echo {} > /proc/sys/net/core/rps_sock_flow_entries", rfs.sock_flow_entries));
        for q in queues {
            out.command(format!("echo {} > /sys/class/net/{iface}/queues/rx-{q}/rps_flow_cnt", rfs.flow_cnt));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_rss::{CoreId, RssKey};

    fn config(reta: Reta) -> RssConfig {
        RssConfig::new(RssKey::microsoft(), HashTypes::default(), reta)
    }

    const MS_HEX: &str = "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa";

    #[test]
    fn default_rss_golden_text() {
        let cfg = config(Reta::round_robin(128, 4).unwrap());
        let script = nic_script("eth0", &cfg, None).unwrap();
        let want = format!(
            "\
# RSS on eth0: Toeplitz, the public Microsoft key (40 bytes), indirection table of 128 entries over 4 queues
# these reproduce flowsteer's placement on a NIC whose key is 40 bytes and whose table has 128 entries (ethtool -x eth0 shows both)
ethtool -X eth0 hkey {MS_HEX} equal 4 hfunc toeplitz
# fields hashed per flow type (hash types ipv4,tcp4,ipv6,tcp6): s/d source/destination address, f/n source/destination port
ethtool -N eth0 rx-flow-hash tcp4 sdfn
ethtool -N eth0 rx-flow-hash udp4 sd
ethtool -N eth0 rx-flow-hash tcp6 sdfn
ethtool -N eth0 rx-flow-hash udp6 sd
"
        );
        assert_eq!(script.to_string(), want);
        assert_eq!(script.commands().count(), 5);
    }

    #[test]
    fn rps_and_rfs_golden_text() {
        let types = HashTypes::parse("default,udp4").unwrap();
        let key = RssKey::from_seed(52, 7).unwrap();
        let cfg = RssConfig::new(key.clone(), types, Reta::round_robin(128, 2).unwrap());
        let masks = [CpuSet::from_cpus([0, 1]), CpuSet::from_cpus([2, 3, 40])];
        let s = SoftSteering {
            rx_queues: 2,
            rps_cpus: &masks,
            rfs: Some(RfsTables { sock_flow_entries: 32768, flow_cnt: 4096 }),
        };
        let script = nic_script("enp3s0f1", &cfg, Some(&s)).unwrap();
        let want = format!(
            "\
# RSS on enp3s0f1: Toeplitz, the key --key random --seed 7 draws (52 bytes), indirection table of 128 entries over 2 queues
# these reproduce flowsteer's placement on a NIC whose key is 52 bytes and whose table has 128 entries (ethtool -x enp3s0f1 shows both)
ethtool -X enp3s0f1 hkey {} equal 2 hfunc toeplitz
# fields hashed per flow type (hash types ipv4,tcp4,udp4,ipv6,tcp6): s/d source/destination address, f/n source/destination port
ethtool -N enp3s0f1 rx-flow-hash tcp4 sdfn
ethtool -N enp3s0f1 rx-flow-hash udp4 sdfn
ethtool -N enp3s0f1 rx-flow-hash tcp6 sdfn
ethtool -N enp3s0f1 rx-flow-hash udp6 sd
# RPS and RFS steer by the hash the NIC delivers with each packet; without it the kernel hashes by itself and flowsteer's predictions do not apply
ethtool -K enp3s0f1 rxhash on
# RPS: each receive queue hands a packet to cpus[(hash * n) >> 32] of its mask
echo 3 > /sys/class/net/enp3s0f1/queues/rx-0/rps_cpus
echo 100,0000000c > /sys/class/net/enp3s0f1/queues/rx-1/rps_cpus
# RFS: a flow is steered to the CPU where the socket reading it last ran
echo 32768 > /proc/sys/net/core/rps_sock_flow_entries
echo 4096 > /sys/class/net/enp3s0f1/queues/rx-0/rps_flow_cnt
echo 4096 > /sys/class/net/enp3s0f1/queues/rx-1/rps_flow_cnt
",
            key.to_hex()
        );
        assert_eq!(script.to_string(), want);
        // One mask for every queue.
        let one = [CpuSet::from_cpus([1])];
        let s = SoftSteering { rx_queues: 3, rps_cpus: &one, rfs: None };
        let text = nic_script("eth0", &cfg, Some(&s)).unwrap().to_string();
        assert_eq!(text.matches("echo 2 > /sys/class/net/eth0/queues/rx-").count(), 3, "{text}");
        assert!(!text.contains("rps_flow_cnt"));
        // RFS alone: the hash still comes from the NIC, no RPS masks.
        let s =
            SoftSteering { rx_queues: 1, rps_cpus: &[], rfs: Some(RfsTables { sock_flow_entries: 8, flow_cnt: 2 }) };
        let text = nic_script("eth0", &cfg, Some(&s)).unwrap().to_string();
        assert!(text.contains("\nethtool -K eth0 rxhash on\n"), "{text}");
        assert!(!text.contains("rps_cpus"), "{text}");
        assert!(text.ends_with("echo 8 > /proc/sys/net/core/rps_sock_flow_entries\necho 2 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt\n"), "{text}");
    }

    #[test]
    fn equal_weight_and_table_forms() {
        // Round robin: equal N (also when it could be written as weights).
        assert_eq!(reta_form(&Reta::round_robin(128, 4).unwrap()), RetaForm::Equal { start: 0, queues: 4 });
        assert_eq!(reta_form(&Reta::round_robin(4, 4).unwrap()), RetaForm::Equal { start: 0, queues: 4 });
        assert_eq!(reta_form(&Reta::from_entries(&[2, 3, 2, 3]).unwrap()).ethtool_words().unwrap(), "start 2 equal 2");
        // Contiguous runs: weights, reduced by their common divisor.
        let blocks: Vec<u32> = (0..128).map(|i| i / 32).collect();
        let form = reta_form(&Reta::from_entries(&blocks).unwrap());
        assert_eq!(form, RetaForm::Weight(vec![1, 1, 1, 1]));
        assert_eq!(form.ethtool_words().unwrap(), "weight 1 1 1 1");
        let uneven: Vec<u32> = (0..8).map(|i| if i < 6 { 1 } else { 3 }).collect();
        assert_eq!(reta_form(&Reta::from_entries(&uneven).unwrap()), RetaForm::Weight(vec![0, 3, 0, 1]));
        // Neither.
        let mixed = [0, 1, 1, 0, 2, 2, 2, 2];
        assert_eq!(reta_form(&Reta::from_entries(&mixed).unwrap()), RetaForm::Table);
        // Every weight form found reproduces the table through ethtool's fill.
        for table in [blocks, uneven] {
            let RetaForm::Weight(w) = reta_form(&Reta::from_entries(&table).unwrap()) else { panic!() };
            let filled: Vec<u32> = weight_fill(table.len(), &w).unwrap().into_iter().map(u32::from).collect();
            assert_eq!(filled, table);
        }
    }

    #[test]
    fn weight_fill_is_ethtools() {
        // ethtool -X eth0 weight 1 2 on a 6-entry table: 0 0 1 1 1 1.
        assert_eq!(weight_fill(6, &[1, 2]).unwrap(), [0, 0, 1, 1, 1, 1]);
        assert_eq!(weight_fill(8, &[0, 1, 0, 1]).unwrap(), [1, 1, 1, 1, 3, 3, 3, 3]);
        assert_eq!(weight_fill(8, &[0, 0]), None);
        assert_eq!(weight_fill(2, &[1, 1, 1]), None);
    }

    #[test]
    fn a_table_ethtool_cannot_write_is_shown_not_guessed() {
        let reta = Reta::from_entries(&[0, 1, 1, 0, 2, 2, 2, 2, 3, 0, 3, 0, 1, 1, 2, 3]).unwrap();
        let text = nic_script("eth1", &config(reta), None).unwrap().to_string();
        assert!(text.contains("neither 'equal N' nor 'weight W...'"), "{text}");
        assert!(text.contains("#     0:      0     1     1     0     2     2     2     2\n"), "{text}");
        assert!(text.contains("#     8:      3     0     3     0     1     1     2     3\n"), "{text}");
        assert!(text.contains(&format!("\nethtool -X eth1 hkey {MS_HEX} hfunc toeplitz\n")), "{text}");
        assert!(!text.contains("equal") || text.contains("neither 'equal N'"));
    }

    #[test]
    fn hash_types_a_nic_cannot_follow_are_comments() {
        let cfg =
            RssConfig::new(RssKey::microsoft(), HashTypes::parse("tcp4").unwrap(), Reta::round_robin(8, 2).unwrap())
                .with_queue_cpus(vec![CoreId(4), CoreId(5)])
                .with_mapping(Mapping::RpsScale);
        let mut types = cfg.types;
        types.fragments_on_2tuple = false;
        let mut out = Script::default();
        hash_type_lines(&mut out, "eth0", types);
        let text = out.to_string();
        assert!(text.contains("ethtool -N eth0 rx-flow-hash tcp4 sdfn\n"), "{text}");
        assert!(text.contains("# udp4: not hashed"), "{text}");
        assert!(text.contains("# other IPv4 traffic: not hashed"), "{text}");
        assert!(text.contains("# other IPv6 traffic: not hashed"), "{text}");
        assert!(text.contains("--frag-4tuple"), "{text}");
        assert_eq!(out.commands().count(), 1);
        let text = nic_script("eth0", &cfg, None).unwrap().to_string();
        assert!(text.contains("--mapping rps"), "{text}");
        assert!(text.contains("(0->4, 1->5)"), "{text}");
    }

    #[test]
    fn bad_names_and_mask_counts_are_errors() {
        let cfg = config(Reta::round_robin(128, 4).unwrap());
        for bad in ["", "eth0; reboot", "a/b", "..", "sixteen_chars_xx", "eth 0", "$(x)"] {
            assert_eq!(nic_script(bad, &cfg, None), Err(ExportError::BadInterface(bad.to_string())));
        }
        for good in ["eth0", "enp3s0f1np1", "eth0.100", "veth-a_1", "br0"] {
            assert!(nic_script(good, &cfg, None).is_ok(), "{good}");
        }
        let masks = [CpuSet::from_cpus([0]), CpuSet::from_cpus([1])];
        let s = SoftSteering { rx_queues: 4, rps_cpus: &masks, rfs: None };
        assert_eq!(nic_script("eth0", &cfg, Some(&s)), Err(ExportError::RpsMaskCount { given: 2, queues: 4 }));
    }
}
