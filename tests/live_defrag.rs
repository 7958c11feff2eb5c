//! `flowsteer defrag` against a real peer: the Linux kernel fragments UDP
//! datagrams sent over a veth pair between two network namespaces; a packet
//! socket in the receiving namespace captures the fragments (pcap written by
//! a Python stdlib script) while a kernel UDP socket there records what the
//! kernel's own reassembly delivered. Every datagram `flowsteer defrag`
//! rebuilds from the capture must be byte-identical to what the kernel got.
//!
//! Runs only as root with `ip` and python3 available (otherwise prints
//! `skipped: <reason>` and passes). Everything it creates (namespaces, veth,
//! helper processes, files) is removed by a Drop guard, also on panic.

use flowsteer_capture::CaptureReader;
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);
const PORT: u16 = 40_123;
const SIZES: [usize; 2] = [4_416, 65_507];
const WAIT: Duration = Duration::from_secs(10);

fn is_root() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2)) // effective uid
        .is_some_and(|uid| uid == "0")
}

fn python() -> Option<PathBuf> {
    let p = PathBuf::from("/usr/bin/python3");
    if p.exists() {
        return Some(p);
    }
    Command::new("python3")
        .arg("-c")
        .arg("import sys; print(sys.executable)")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
}

fn have_ip() -> bool {
    Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Runs `ip ARGS`, panicking with its stderr on failure.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// Namespaces, veth, helper processes and the work directory; all removed
/// on drop.
struct Lab {
    ns_a: String,
    ns_b: String,
    veth_a: String,
    veth_b: String,
    k: u32,
    dir: PathBuf,
    children: Vec<Child>,
}

impl Lab {
    fn new() -> Lab {
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let k = (pid.wrapping_mul(7).wrapping_add(n)) % 250 + 1;
        let dir = std::env::temp_dir().join(format!("fsdf-live-{pid}-{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Lab {
            ns_a: format!("fsdf-a-{pid}-{n}"),
            ns_b: format!("fsdf-b-{pid}-{n}"),
            veth_a: format!("fsa{}x{n}", pid % 100_000),
            veth_b: format!("fsb{}x{n}", pid % 100_000),
            k,
            dir,
            children: Vec::new(),
        }
    }

    fn mac(&self, side: u8) -> String {
        format!("02:00:c9:{:02x}:{:02x}:{side:02x}", self.k >> 8, self.k & 0xff)
    }

    fn v4(&self, host: u8) -> String {
        format!("10.201.{}.{host}", self.k)
    }

    fn v6(&self, host: u8) -> String {
        format!("fd00:201:{}::{host}", self.k)
    }

    fn setup(&self) {
        ip(&["netns", "add", &self.ns_a]);
        ip(&["netns", "add", &self.ns_b]);
        ip(&[
            "link",
            "add",
            &self.veth_a,
            "address",
            &self.mac(1),
            "mtu",
            "1500",
            "type",
            "veth",
            "peer",
            "name",
            &self.veth_b,
            "address",
            &self.mac(2),
            "mtu",
            "1500",
        ]);
        ip(&["link", "set", &self.veth_a, "netns", &self.ns_a]);
        ip(&["link", "set", &self.veth_b, "netns", &self.ns_b]);
        for (ns, dev, me, peer) in [(&self.ns_a, &self.veth_a, 1u8, 2u8), (&self.ns_b, &self.veth_b, 2, 1)] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "addr", "add", &format!("{}/24", self.v4(me)), "dev", dev]);
            ip(&["-n", ns, "addr", "add", &format!("{}/64", self.v6(me)), "dev", dev, "nodad"]);
            ip(&["-n", ns, "link", "set", dev, "mtu", "1500", "up"]);
            // Static neighbours: no ARP / ND needed.
            let lladdr = self.mac(peer);
            ip(&["-n", ns, "neigh", "replace", &self.v4(peer), "lladdr", &lladdr, "dev", dev, "nud", "permanent"]);
            ip(&["-n", ns, "neigh", "replace", &self.v6(peer), "lladdr", &lladdr, "dev", dev, "nud", "permanent"]);
        }
    }

    fn spawn_in(&mut self, ns: &str, py: &Path, script: &str, args: &[String]) -> usize {
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(py)
            .arg("-c")
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn helper");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Waits for helper `i` to exit (bounded); returns (success, stdout+stderr).
    fn wait(&mut self, i: usize, limit: Duration) -> (bool, String) {
        let start = Instant::now();
        let child = &mut self.children[i];
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = child.kill();
                    break;
                }
            }
        }
        let mut text = String::new();
        let status = child.wait().ok();
        use std::io::Read;
        if let Some(o) = child.stdout.as_mut() {
            let _ = o.read_to_string(&mut text);
        }
        if let Some(e) = child.stderr.as_mut() {
            let _ = e.read_to_string(&mut text);
        }
        (status.is_some_and(|s| s.success()), text)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        let quiet = |args: &[&str]| {
            let _ = Command::new("ip").args(args).stdout(Stdio::null()).stderr(Stdio::null()).status();
        };
        quiet(&["link", "del", &self.veth_a]);
        quiet(&["netns", "del", &self.ns_a]);
        quiet(&["netns", "del", &self.ns_b]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// In namespace B: a packet socket on the veth writing a classic pcap
/// (linktype 1), and kernel UDP sockets (IPv4, IPv6) on PORT saving each
/// datagram to `recv-<family>-<n>.bin`. Ends after `expect` datagrams (plus
/// a short drain) or the deadline.
/// argv: dev pcap_path dir port expect deadline_s v4addr v6addr
const RECEIVER: &str = r#"
import os, select, socket, struct, sys, time
dev, pcap_path, d, port, expect, deadline, a4, a6 = sys.argv[1:9]
port, expect, deadline = int(port), int(expect), time.time() + float(deadline)
raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
for opt in (33, socket.SO_RCVBUF):  # SO_RCVBUFFORCE, then the capped one
    try:
        raw.setsockopt(socket.SOL_SOCKET, opt, 32 << 20)
        break
    except OSError:
        pass
raw.bind((dev, 0))
u4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u4.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
u4.bind((a4, port))
u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u6.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
u6.bind((a6, port))
records = []
got = {"v4": 0, "v6": 0}
open(os.path.join(d, "ready"), "w").close()
done_at = None
while True:
    now = time.time()
    if now > deadline or (done_at is not None and now > done_at + 0.5):
        break
    r, _, _ = select.select([raw, u4, u6], [], [], 0.1)
    for s in r:
        if s is raw:
            data = raw.recv(262144)
            t = time.time()
            records.append((int(t), int((t % 1) * 1e6), data))
        else:
            fam = "v4" if s is u4 else "v6"
            data = s.recv(65535)
            with open(os.path.join(d, "recv-%s-%d.bin" % (fam, got[fam])), "wb") as f:
                f.write(data)
            got[fam] += 1
            if got["v4"] + got["v6"] >= expect and done_at is None:
                done_at = time.time()
with open(pcap_path, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    for sec, usec, data in records:
        f.write(struct.pack("<IIII", sec, min(usec, 999999), len(data), len(data)))
        f.write(data)
print("captured %d frames, received v4=%d v6=%d" % (len(records), got["v4"], got["v6"]))
sys.exit(0 if got["v4"] + got["v6"] >= expect else 3)
"#;

/// In namespace A: sends each size over IPv4 and IPv6 with kernel UDP
/// sockets (the kernel fragments them). argv: v4addr v6addr port sizes...
const SENDER: &str = r#"
import socket, sys, time
a4, a6, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
sizes = [int(x) for x in sys.argv[4:]]
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s4.setsockopt(socket.IPPROTO_IP, 10, 0)  # IP_MTU_DISCOVER = IP_PMTUDISC_DONT
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
for n in sizes:
    p = bytes(((k * 31 + 7) & 0xFF) for k in range(n))
    s4.sendto(p, (a4, port))
    time.sleep(0.1)
    s6.sendto(p, (a6, port))
    time.sleep(0.1)
print("sent")
"#;

fn expected_payload(n: usize) -> Vec<u8> {
    (0..n).map(|k| ((k * 31 + 7) & 0xff) as u8).collect()
}

#[test]
fn live_kernel_fragments_reassemble_identically() {
    if !is_root() {
        println!("skipped: not running as root");
        return;
    }
    if !have_ip() {
        println!("skipped: the `ip` command is not available");
        return;
    }
    let Some(py) = python() else {
        println!("skipped: python3 is not available");
        return;
    };
    let mut lab = Lab::new();
    // A host where namespaces cannot be created (unprivileged container) skips.
    let probe = Command::new("ip").args(["netns", "add", &lab.ns_a]).output().expect("run ip");
    if !probe.status.success() {
        println!("skipped: cannot create a network namespace: {}", String::from_utf8_lossy(&probe.stderr).trim());
        return;
    }
    ip(&["netns", "del", &lab.ns_a]);
    lab.setup();

    let pcap = lab.dir.join("capture.pcap");
    let out_pcap = lab.dir.join("out.pcap");
    let dir = lab.dir.clone();
    let expect = 2 * SIZES.len();
    let recv_args = vec![
        lab.veth_b.clone(),
        pcap.display().to_string(),
        dir.display().to_string(),
        PORT.to_string(),
        expect.to_string(),
        "15".to_string(),
        lab.v4(2),
        lab.v6(2),
    ];
    let ns_b = lab.ns_b.clone();
    let receiver = lab.spawn_in(&ns_b, &py, RECEIVER, &recv_args);
    let start = Instant::now();
    while !dir.join("ready").exists() {
        if start.elapsed() > WAIT {
            let (_, text) = lab.wait(receiver, Duration::from_millis(100));
            panic!("receiver not ready after {WAIT:?}: {text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut send_args = vec![lab.v4(2), lab.v6(2), PORT.to_string()];
    send_args.extend(SIZES.iter().map(|s| s.to_string()));
    let ns_a = lab.ns_a.clone();
    let sender = lab.spawn_in(&ns_a, &py, SENDER, &send_args);
    let (ok, text) = lab.wait(sender, WAIT);
    assert!(ok, "sender failed: {text}");
    let (ok, text) = lab.wait(receiver, WAIT + Duration::from_secs(10));
    assert!(ok, "receiver failed: {text}");
    println!("receiver: {}", text.trim());

    // What the kernel's sockets got.
    let mut kernel: Vec<(bool, Vec<u8>)> = Vec::new();
    for fam in ["v4", "v6"] {
        for i in 0..SIZES.len() {
            let data = std::fs::read(dir.join(format!("recv-{fam}-{i}.bin"))).expect("received datagram");
            kernel.push((fam == "v6", data));
        }
    }
    for size in SIZES {
        for v6 in [false, true] {
            assert!(kernel.contains(&(v6, expected_payload(size))), "kernel did not get size {size} v6={v6}");
        }
    }

    let out = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["defrag", pcap.to_str().unwrap(), "-o", out_pcap.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "defrag failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["conservation_ok"], true, "{v}");
    assert!(v["datagrams_reassembled"].as_u64().unwrap() >= expect as u64, "{v}");
    assert_eq!(v["pending_at_end"], 0);

    // Every UDP datagram to PORT in the output, reassembled.
    let mut ours: Vec<(bool, Vec<u8>)> = Vec::new();
    let mut r = CaptureReader::open(&out_pcap).unwrap();
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(p.linktype, 1);
        let Ok(parsed) = parse_frame(p.data, LinkType::Ethernet, &ParseOptions::default()) else { continue };
        let Some(l3) = parsed.outer else { continue };
        assert!(l3.frag.is_none(), "a fragment left in the output");
        if l3.tuple.proto != 17 || l3.tuple.ports.map(|(_, d)| d) != Some(PORT) {
            continue;
        }
        let start = l3.l4_offset.unwrap() + 8;
        let end = l3.l3_offset + l3.ip_total_len;
        ours.push((matches!(l3.tuple.dst, IpAddr::V6(_)), p.data[start..end].to_vec()));
    }
    assert_eq!(ours.len(), kernel.len(), "datagrams to port {PORT} in the output");
    for (v6, data) in &kernel {
        assert!(
            ours.iter().any(|(f, d)| f == v6 && d == data),
            "no byte-identical reassembled datagram for {} bytes v6={v6}",
            data.len()
        );
    }
    for (v6, data) in &ours {
        assert!(kernel.iter().any(|(f, d)| f == v6 && d == data), "reassembled {} bytes not received", data.len());
    }
}
