//! UDP echo throughput on live interfaces, side by side in one run
//! (`flowsteer bench udp`). The bench builds its own lab (two network
//! namespaces joined by a veth pair with one queue per CPU, removed at the
//! end) and runs the flowsteer binary ([`Config::exe`]): its `udp-echo` in
//! namespace B against `udp-gen --echo` in namespace A, one generator pinned to each CPU (veth runs the receive
//! path on the sender's CPU, so pinned senders spread the work the way NIC
//! RSS queues would).
//!
//! Modes (the `mode` field):
//! * `kernel-single`: one kernel UDP socket, one thread on CPU 0: the
//!   baseline every server starts from;
//! * `kernel`: one SO_REUSEPORT socket per CPU, steered by CPU
//!   (`udp-echo --mode kernel`);
//! * `xdp`: one AF_XDP socket per queue (`udp-echo --mode xdp`).
//!
//! `pps` is echo replies received by the generators per second of
//! traffic; `pps_per_core` is echoes the server transmitted divided by the
//! CPU seconds the echo server process used (user + system, from
//! `/proc/PID/stat`), so a server that needs fewer cycles per packet scores
//! higher even when the generators are the bottleneck. Caveat, stated in
//! BENCHMARKS.md: the veth receive path runs in the sender's softirq
//! context and is charged to neither. The
//! server's own counters (`received`, `delivered`, drops) are reported
//! beside the generator's (`sent`, `replies`, `lost`).
//!
//! The second experiment (`flows`): flows are added one per bucket and the
//! server's received and delivered rates are reported for each N.
//! On veth the "bucket" is the receive queue, which the sender's CPU picks
//! (XPS is set so transmit queue i is CPU i's), so flow i's generator is
//! pinned to CPU i % n; on a NIC `udp-gen --spread N` plans the tuples.

use flowsteer_netns::{Lab, LabConfig, Side};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 45_000;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The flowsteer binary whose `udp-echo` and `udp-gen` are measured.
    pub exe: PathBuf,
    /// Seconds of traffic per measurement.
    pub seconds: f64,
    /// UDP payload bytes.
    pub size: usize,
    /// Flows in the mode comparison.
    pub flows: usize,
    /// The flows experiment adds flows one per bucket up to this many.
    pub max_flows: usize,
    /// Modes to compare: "kernel-single", "kernel", "xdp".
    pub modes: Vec<String>,
    /// XDP attach mode of the xdp server: "auto", "native" or "skb".
    pub xdp_mode: String,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value out of range; the text names the option.
    #[error("{0}")]
    Config(String),
    #[error("bench udp builds network namespaces and needs root: {0}")]
    NeedsRoot(String),
    /// The lab or its settings could not be made.
    #[error("{0}")]
    Lab(String),
    #[error("{what}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Wait(#[from] std::io::Error),
    /// A child process failed, hung or printed no report.
    #[error("{0}")]
    Child(String),
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// One measurement.
#[derive(Debug, Serialize, Clone)]
pub struct Row {
    /// "modes" or "flows".
    pub experiment: &'static str,
    pub mode: &'static str,
    pub flows: usize,
    pub server_cpus: usize,
    pub seconds: f64,
    pub sent: u64,
    pub replies: u64,
    pub lost: u64,
    pub pps: f64,
    pub server_cpu_s: f64,
    pub pps_per_core: f64,
    pub received: u64,
    pub delivered: u64,
    /// Echoes the server transmitted.
    pub server_sent: u64,
    pub received_pps: f64,
    pub delivered_pps: f64,
    pub server_drops: u64,
    pub conservation_ok: bool,
}

/// Builds the lab, runs every mode, then the flows experiment for every
/// mode but `kernel-single`; each row goes to `on_row` as soon as it is
/// measured, and all of them are returned.
pub fn run(args: &Config, on_row: &mut dyn FnMut(&Row)) -> Result<Vec<Row>> {
    if let Some(why) = flowsteer_netns::skip_reason() {
        return Err(Error::NeedsRoot(why));
    }
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        return Err(Error::Config("--seconds must be positive".into()));
    }
    if args.max_flows == 0 || args.flows == 0 {
        return Err(Error::Config("--flows and --max-flows must be at least 1".into()));
    }
    let cpus = flowsteer_live::available_cpus();
    let lab = Lab::new("bu", &LabConfig { queues: cpus.len().clamp(1, 64) as u16, mtu: 1500 })
        .map_err(|e| Error::Lab(format!("bench udp: {e}")))?;
    xps_per_cpu(&lab, &cpus)?;
    let mut rows = Vec::new();
    let modes: Vec<&'static str> = args.modes.iter().map(|m| mode_name(m)).collect::<Result<_>>()?;
    for &mode in &modes {
        let row = measure(&lab, mode, &cpus, args.flows, None, args)?;
        on_row(&row);
        rows.push(row);
    }
    for &mode in modes.iter().filter(|m| **m != "kernel-single") {
        for n in 1..=args.max_flows {
            let row = measure(&lab, mode, &cpus, n, Some(n), args)?;
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The `--json` document (schema `flowsteer.bench.udp.v1`).
pub fn json(rows: &[Row]) -> Value {
    serde_json::json!({"schema": "flowsteer.bench.udp.v1", "results": rows})
}

/// Each mode's packets per core against the kernel single socket's, one
/// line per mode (empty without a kernel-single row that did any work).
pub fn summary(rows: &[Row]) -> String {
    let mut s = String::new();
    let base = rows.iter().find(|r| r.experiment == "modes" && r.mode == "kernel-single").map(|r| r.pps_per_core);
    if let Some(b) = base.filter(|b| *b > 0.0) {
        for r in rows.iter().filter(|r| r.experiment == "modes" && r.mode != "kernel-single") {
            let _ = writeln!(s, "{:>14}: {:.2}x the kernel single-socket packets per core", r.mode, r.pps_per_core / b);
        }
    }
    s
}

/// Transmit queue i of A's veth (and B's, for the replies) is used by CPU
/// `cpus[i]` only (XPS), so a sender pinned to a CPU always reaches the
/// same receive queue of the peer: the per-CPU RSS queue of a real NIC.
fn xps_per_cpu(lab: &Lab, cpus: &[u32]) -> Result<()> {
    for side in [Side::A, Side::B] {
        for (q, cpu) in cpus.iter().enumerate() {
            let mask = format!("{:x}", 1u64 << (cpu % 64));
            let path = format!("/sys/class/net/{}/queues/tx-{q}/xps_cpus", lab.dev(side));
            let st = Command::new("ip")
                .args(["netns", "exec", lab.ns(side), "sh", "-c", &format!("echo {mask} > {path}")])
                .status()
                .map_err(|source| Error::Io { what: "set XPS", source })?;
            if !st.success() {
                return Err(Error::Lab(format!("could not set {path} to {mask}")));
            }
        }
    }
    Ok(())
}

fn mode_name(m: &str) -> Result<&'static str> {
    match m {
        "kernel-single" => Ok("kernel-single"),
        "kernel" => Ok("kernel"),
        "xdp" => Ok("xdp"),
        _ => Err(Error::Config(format!("--modes: unknown mode '{m}' (expected kernel-single, kernel, xdp)"))),
    }
}

/// A row as the one line shown while the bench runs.
pub fn row_line(r: &Row) -> String {
    format!(
        "{:<6} {:<14} flows {:>3}  replies/s {:>10.0}  server CPU {:>5.2} s  pps/core {:>10.0}  received/s {:>10.0}  delivered/s {:>10.0}  lost {:>7}  drops {:>6}  {}",
        r.experiment,
        r.mode,
        r.flows,
        r.pps,
        r.server_cpu_s,
        r.pps_per_core,
        r.received_pps,
        r.delivered_pps,
        r.lost,
        r.server_drops,
        if r.conservation_ok { "ok" } else { "COUNTERS DO NOT ADD UP" }
    )
}

/// A child with stderr lines forwarded to a channel and stdout collected.
struct Proc {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    out: Option<std::thread::JoinHandle<String>>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Result<Proc> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Io { what: "start a child process", source })?;
        let mut o = child.stdout.take().ok_or_else(|| Error::Child("no stdout".into()))?;
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = o.read_to_string(&mut s);
            s
        });
        let e = child.stderr.take().ok_or_else(|| Error::Child("no stderr".into()))?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(e).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Ok(Proc { child, lines, out: Some(out) })
    }

    fn wait_line(&mut self, needle: &str, limit: Duration) -> Result<()> {
        let until = Instant::now() + limit;
        let mut seen = Vec::new();
        while Instant::now() < until {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
                if l.contains(needle) {
                    return Ok(());
                }
                seen.push(l);
            } else if let Ok(Some(st)) = self.child.try_wait() {
                return Err(Error::Child(format!("echo server exited ({st}): {}", seen.join(" | "))));
            }
        }
        Err(Error::Child(format!("echo server not ready within {limit:?}: {}", seen.join(" | "))))
    }

    /// Waits (bounded) and returns stdout; kills on timeout.
    fn finish(mut self, limit: Duration) -> Result<(bool, String)> {
        let until = Instant::now() + limit;
        let ok = loop {
            if let Some(st) = self.child.try_wait()? {
                break st.success();
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(Error::Child(format!("a child process did not finish within {limit:?}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = self.out.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        Ok((ok, out))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn in_ns(lab: &Lab, side: Side, pin: Option<u32>, exe: &std::path::Path, args: &[String]) -> Command {
    let mut c = match pin {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string(), "ip"]);
            c
        }
        None => Command::new("ip"),
    };
    c.args(["netns", "exec", lab.ns(side)]).arg(exe).args(args);
    c
}

/// utime + stime of a process in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    let Some((_, after)) = stat.rsplit_once(')') else { return 0.0 };
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat(5); `after` starts at field 3.
    let ticks: f64 = [11usize, 12].iter().filter_map(|&i| f.get(i)?.parse::<f64>().ok()).sum();
    ticks / 100.0
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

fn measure(
    lab: &Lab,
    mode: &'static str,
    cpus: &[u32],
    flows: usize,
    spread: Option<usize>,
    args: &Config,
) -> Result<Row> {
    let server_cpus: Vec<u32> = if mode == "kernel-single" { cpus[..1].to_vec() } else { cpus.to_vec() };
    let list = server_cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let addr = format!("{}:{PORT}", lab.v4(Side::B));
    let mut sargs: Vec<String> = vec!["udp-echo".into(), addr, "--cpus".into(), list, "--json".into()];
    if mode == "xdp" {
        sargs.extend(["--mode".into(), "xdp".into(), "--iface".into(), lab.dev(Side::B).to_string()]);
        sargs.extend(["--xdp-mode".into(), args.xdp_mode.clone()]);
    } else {
        sargs.extend(["--mode".into(), "kernel".into(), "--rcvbuf".into(), (4 << 20).to_string()]);
    }
    let mut server = Proc::spawn(in_ns(lab, Side::B, None, &args.exe, &sargs))?;
    server.wait_line("udp-echo: serving", Duration::from_secs(20))?;
    let pid = server.child.id();
    // Generators pinned to CPUs (veth: the sender's CPU picks the transmit
    // queue through XPS, hence the peer's receive queue and the receiving
    // CPU: the "bucket" of a flow here). Modes: one generator per CPU with
    // the flows split; flows experiment: one generator per flow, flow i on
    // CPU i % n, so flows land in distinct buckets up to the CPU count.
    let have_taskset = Command::new("taskset").arg("-V").output().is_ok_and(|o| o.status.success());
    let gens_n = if spread.is_some() { flows } else { cpus.len().min(flows).max(1) };
    let cpu0 = cpu_seconds(pid);
    let mut gens = Vec::new();
    for g in 0..gens_n {
        let my_flows = flows / gens_n + usize::from(g < flows % gens_n);
        let gargs: Vec<String> = vec![
            "udp-gen".into(),
            "-r".into(),
            lab.v4(Side::B).to_string(),
            "-p".into(),
            PORT.to_string(),
            "-l".into(),
            lab.v4(Side::A).to_string(),
            "--echo".into(),
            "--flows".into(),
            my_flows.to_string(),
            "--duration".into(),
            args.seconds.to_string(),
            "-s".into(),
            args.size.to_string(),
            "--drain".into(),
            "0.5".into(),
            "--json".into(),
        ];
        let pin = have_taskset.then(|| cpus[g % cpus.len()]);
        gens.push(Proc::spawn(in_ns(lab, Side::A, pin, &args.exe, &gargs))?);
    }
    let (mut sent, mut replies, mut lost) = (0u64, 0u64, 0u64);
    for g in gens {
        let (ok, out) = g.finish(Duration::from_secs_f64(args.seconds + 30.0))?;
        let v: Value =
            serde_json::from_str(&out).map_err(|e| Error::Child(format!("udp-gen printed no report ({e}): {out}")))?;
        if !ok {
            return Err(Error::Child(format!("udp-gen failed: {out}")));
        }
        sent += u(&v, "sent");
        replies += u(&v, "unique");
        lost += u(&v, "lost");
    }
    let secs = args.seconds;
    let server_cpu_s = (cpu_seconds(pid) - cpu0).max(0.01);
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let (_, out) = server.finish(Duration::from_secs(15))?;
    let s: Value = serde_json::from_str(&out).map_err(|e| Error::Child(format!("udp-echo output ({e}): {out}")))?;
    let total = &s["total"];
    let received = u(total, "received");
    let delivered = u(total, "delivered");
    let server_sent = u(total, "sent");
    let server_drops =
        u(total, "dropped") + u(total, "rcvbuf_drops") + u(total, "kernel_drops") + u(total, "dropped_tx_full");
    Ok(Row {
        experiment: if spread.is_some() { "flows" } else { "modes" },
        mode,
        flows,
        server_cpus: server_cpus.len(),
        seconds: secs,
        sent,
        replies,
        lost,
        pps: replies as f64 / secs,
        server_cpu_s,
        pps_per_core: server_sent as f64 / server_cpu_s,
        received,
        delivered,
        server_sent,
        received_pps: received as f64 / secs,
        delivered_pps: delivered as f64 / secs,
        server_drops,
        conservation_ok: s["conservation_ok"].as_bool().unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(experiment: &'static str, mode: &'static str, pps_per_core: f64) -> Row {
        Row {
            experiment,
            mode,
            flows: 2,
            server_cpus: 1,
            seconds: 1.0,
            sent: 10,
            replies: 9,
            lost: 1,
            pps: 9.0,
            server_cpu_s: 0.5,
            pps_per_core,
            received: 10,
            delivered: 10,
            server_sent: 9,
            received_pps: 10.0,
            delivered_pps: 10.0,
            server_drops: 0,
            conservation_ok: true,
        }
    }

    #[test]
    fn summary_compares_modes_with_the_single_socket() {
        let rows = [row("modes", "kernel-single", 100.0), row("modes", "xdp", 250.0), row("flows", "xdp", 1.0)];
        assert_eq!(summary(&rows), "           xdp: 2.50x the kernel single-socket packets per core\n");
        assert_eq!(summary(&rows[1..]), "");
        assert_eq!(json(&rows)["results"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn row_line_says_whether_the_counters_add_up() {
        let mut r = row("modes", "kernel", 100.0);
        assert!(
            row_line(&r).starts_with("modes  kernel         flows   2  replies/s          9  "),
            "{}",
            row_line(&r)
        );
        assert!(row_line(&r).ends_with("  ok"));
        r.conservation_ok = false;
        assert!(row_line(&r).ends_with("  COUNTERS DO NOT ADD UP"));
    }

    #[test]
    fn unknown_mode_is_refused() {
        assert_eq!(
            mode_name("dpdk").expect_err("not a mode").to_string(),
            "--modes: unknown mode 'dpdk' (expected kernel-single, kernel, xdp)"
        );
    }
}
