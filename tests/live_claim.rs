//! The XDP claim policy, live: `flowsteer run --source afxdp:IFACE` and
//! `flowsteer udp-echo --mode xdp` take from the kernel only the ports they
//! serve, in a throw-away pair of network namespaces (the built binary runs
//! in namespace B under `ip netns exec`, traffic comes from namespace A).
//!
//! * with `run --listen udp:9000` attached, ping (IPv4 and IPv6) and a TCP
//!   connection to a kernel listener on B still work, UDP to another port
//!   reaches a kernel socket, and UDP 9000 datagrams reach the engine whole,
//!   fragmented ones (IPv4 and IPv6) reassembled; fragmented datagrams to
//!   another UDP port are claimed as well (a fragment carries no ports, so
//!   a protocol's fragments go one way) and counted `no_listener`;
//! * `udp-echo --mode xdp` the same: ping, TCP and other ports work, the
//!   echo answers;
//! * `run` without `--listen` refuses; `--xdp-claim all` warns what it cuts
//!   off (and does cut ping off);
//! * an MTU beyond an AF_XDP frame is refused with the numbers, and
//!   `--allow-mtu-drops` runs with a warning.
//!
//! Root only (skipped with a printed reason otherwise).

use flowsteer_netns::{skip_reason, Lab, LabConfig, Side};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_flowsteer");
const PORT: u16 = 9000;

fn lab(tag: &str, mtu: u32) -> Option<Lab> {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return None;
    }
    Some(Lab::new(tag, &LabConfig { queues: 2, mtu }).expect("lab"))
}

/// `flowsteer ARGS` in namespace B, its output collected by reader
/// threads; killed on drop.
struct Proc {
    child: Child,
    stderr: Receiver<String>,
    seen: Vec<String>,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl Proc {
    fn spawn(lab: &Lab, args: &[&str]) -> Proc {
        let mut child = Command::new("ip")
            .args(["netns", "exec", lab.ns(Side::B), BIN])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn flowsteer");
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err = child.stderr.take().unwrap();
        let (tx, stderr) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc { child, stderr, seen: Vec::new(), stdout: Some(stdout) }
    }

    /// Waits (bounded) for a stderr line containing `needle`.
    fn wait_for(&mut self, needle: &str) {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            match self.stderr.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let hit = l.contains(needle);
                    self.seen.push(l);
                    if hit {
                        return;
                    }
                }
                Err(_) => {
                    if let Ok(Some(st)) = self.child.try_wait() {
                        panic!("exited ({st}) before '{needle}': {:?}", self.seen);
                    }
                }
            }
        }
        panic!("no '{needle}' on stderr: {:?}", self.seen);
    }

    /// Waits (bounded) for exit: status, stdout, stderr lines.
    fn finish(mut self) -> (ExitStatus, String, Vec<String>) {
        let until = Instant::now() + Duration::from_secs(30);
        let st = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < until, "did not exit; stderr: {:?}", self.seen);
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(l);
        }
        let out = self.stdout.take().unwrap().join().unwrap();
        (st, out, std::mem::take(&mut self.seen))
    }

    fn terminate(&self) {
        assert!(Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap().success());
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

fn xdp_attached(lab: &Lab) -> bool {
    let out = Command::new("ip").args(["-n", lab.ns(Side::B), "link", "show", lab.dev(Side::B)]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).contains("xdp")
}

/// Waits (bounded) until the XDP program is attached, then a moment for
/// the sockets registered right after it.
fn wait_attached(lab: &Lab) {
    let t = Instant::now();
    while !xdp_attached(lab) && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(xdp_attached(lab), "XDP program never attached");
    std::thread::sleep(Duration::from_millis(500));
}

/// A kernel TCP listener on B that echoes one 5-byte message per
/// connection, `n` connections.
fn tcp_echo_on_b(lab: &Lab, port: u16, n: usize) -> std::thread::JoinHandle<()> {
    let b = lab.v4(Side::B);
    let l = lab.run_in(Side::B, move || TcpListener::bind((b, port))).unwrap().unwrap();
    std::thread::spawn(move || {
        for _ in 0..n {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf).unwrap();
            c.write_all(&buf).unwrap();
        }
    })
}

/// A TCP exchange from A to the kernel of B.
fn tcp_works(lab: &Lab, port: u16) -> bool {
    let b = lab.v4(Side::B);
    lab.run_in(Side::A, move || -> std::io::Result<bool> {
        let mut c = TcpStream::connect_timeout(&(b, port).into(), Duration::from_secs(5))?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        c.write_all(b"hello")?;
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf)?;
        Ok(&buf == b"hello")
    })
    .unwrap()
    .unwrap_or(false)
}

/// A kernel UDP socket on B; counts what arrives within the read timeout.
fn kernel_udp_on_b(lab: &Lab, port: u16) -> UdpSocket {
    let b = lab.v4(Side::B);
    let s = lab.run_in(Side::B, move || UdpSocket::bind((b, port))).unwrap().unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    s
}

fn count_arrivals(s: &UdpSocket) -> Vec<usize> {
    let mut buf = vec![0u8; 65536];
    let mut lens = Vec::new();
    while let Ok(n) = s.recv(&mut buf) {
        lens.push(n);
    }
    lens
}

/// Sends `count` datagrams of `len` bytes from A to `to`:`port` (kernel
/// sockets; longer than the MTU means fragmented by A's kernel).
fn send(lab: &Lab, to: IpAddr, port: u16, len: usize, count: usize) {
    let from: IpAddr = if to.is_ipv4() { lab.v4(Side::A).into() } else { lab.v6(Side::A).into() };
    lab.run_in(Side::A, move || {
        let s = UdpSocket::bind((from, 0)).unwrap();
        for i in 0..count {
            let mut p = vec![(i % 251) as u8; len];
            p[..4].copy_from_slice(&(i as u32).to_be_bytes());
            s.send_to(&p, (to, port)).unwrap();
            std::thread::sleep(Duration::from_micros(300));
        }
    })
    .unwrap();
}

fn u(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// The acceptance test: the XDP program takes UDP 9000 (and UDP
/// fragments), the kernel keeps the rest.
#[test]
fn afxdp_run_takes_only_its_listener_and_reassembles_fragmented_datagrams() {
    let Some(lab) = lab("clr", 1500) else { return };
    let (b4, b6) = (IpAddr::from(lab.v4(Side::B)), IpAddr::from(lab.v6(Side::B)));
    let tcp = tcp_echo_on_b(&lab, PORT + 2, 1);
    let other = kernel_udp_on_b(&lab, PORT + 1);
    let src = format!("afxdp:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let run = Proc::spawn(
        &lab,
        &["run", "--source", &src, "--cores", "0,1", "--listen", &listen, "--duration", "60", "--json"],
    );
    wait_attached(&lab);

    // What the kernel keeps.
    assert!(lab.ping(Side::A, b4, Duration::from_secs(5)).unwrap(), "ping over IPv4 with the program attached");
    assert!(lab.ping(Side::A, b6, Duration::from_secs(5)).unwrap(), "ping over IPv6 with the program attached");
    assert!(tcp_works(&lab, PORT + 2), "TCP to a kernel listener with the program attached");
    tcp.join().unwrap();
    send(&lab, b4, PORT + 1, 100, 20);

    // What flowsteer takes: whole datagrams, and fragmented ones (3,000
    // bytes over MTU 1500: three fragments each).
    send(&lab, b4, PORT, 64, 100);
    send(&lab, b4, PORT, 3000, 20);
    send(&lab, b6, PORT, 3000, 10);
    // Fragmented UDP to the other port: claimed too (never split), so the
    // kernel socket does not get them; the engine drops them as no_listener.
    send(&lab, b4, PORT + 1, 3000, 5);

    let lens = count_arrivals(&other);
    std::thread::sleep(Duration::from_millis(500));
    run.terminate();
    let (st, out, err) = run.finish();
    assert!(st.success(), "{err:?}\n{out}");
    assert!(!xdp_attached(&lab), "XDP program left attached");
    assert_eq!(lens, vec![100; 20], "unfragmented UDP to another port reaches the kernel, fragmented does not");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let t = &v["totals"];
    println!("{t}");
    assert_eq!(v["conservation_ok"], true, "{t}");
    assert_eq!(u(t, "listener_bucket") + u(t, "listener_wildcard"), 100 + 20 + 10, "delivered to udp:{PORT}: {t}");
    assert_eq!(u(t, "reassembled"), 20 + 10 + 5, "{t}");
    assert_eq!(t["drops"]["no_listener"].as_u64(), Some(5), "{t}");
}

#[test]
fn udp_echo_xdp_takes_only_its_port() {
    let Some(lab) = lab("cle", 1500) else { return };
    let (b4, b6) = (IpAddr::from(lab.v4(Side::B)), IpAddr::from(lab.v6(Side::B)));
    let tcp = tcp_echo_on_b(&lab, PORT + 2, 1);
    let other = kernel_udp_on_b(&lab, PORT + 1);
    let addr = format!("{b4}:{PORT}");
    let dev = lab.dev(Side::B).to_string();
    let mut echo = Proc::spawn(&lab, &["udp-echo", &addr, "--mode", "xdp", "--iface", &dev, "--cpus", "0,1", "--json"]);
    echo.wait_for("udp-echo: serving");
    assert!(echo.seen.iter().any(|l| l.contains(&format!("claimed: udp {PORT} (fragments passed to the kernel)"))));

    assert!(lab.ping(Side::A, b4, Duration::from_secs(5)).unwrap(), "ping over IPv4");
    assert!(lab.ping(Side::A, b6, Duration::from_secs(5)).unwrap(), "ping over IPv6");
    assert!(tcp_works(&lab, PORT + 2), "TCP to a kernel listener");
    tcp.join().unwrap();
    send(&lab, b4, PORT + 1, 100, 10);
    assert_eq!(count_arrivals(&other), vec![100; 10]);

    let a4 = lab.v4(Side::A);
    let echoed = lab
        .run_in(Side::A, move || {
            let s = UdpSocket::bind((a4, 0)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            s.connect((b4, PORT)).unwrap();
            let mut buf = [0u8; 64];
            (0..20u8).filter(|&i| s.send(&[i; 40]).is_ok() && s.recv(&mut buf).ok() == Some(40) && buf[0] == i).count()
        })
        .unwrap();
    assert_eq!(echoed, 20, "every datagram echoed");
    echo.terminate();
    let (st, out, err) = echo.finish();
    assert!(st.success(), "{err:?}\n{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let t = &v["total"];
    assert_eq!((u(t, "delivered"), u(t, "sent"), u(t, "not_for_us")), (20, 20, 0), "{t}");
    assert_eq!(v["conservation_ok"], true);
}

#[test]
fn afxdp_run_needs_listen_or_an_explicit_claim_all_which_warns_and_cuts_ping() {
    let Some(lab) = lab("cla", 1500) else { return };
    let src = format!("afxdp:{}", lab.dev(Side::B));
    let (st, out, err) = Proc::spawn(&lab, &["run", "--source", &src, "--cores", "0,1", "--duration", "1"]).finish();
    assert_eq!(st.code(), Some(2), "{out}");
    let err = err.join("\n");
    assert!(err.contains("--listen") && err.contains("--xdp-claim all") && err.contains("SSH"), "{err}");
    assert!(!xdp_attached(&lab));

    let (st, _, err) =
        Proc::spawn(&lab, &["run", "--source", &src, "--xdp-claim", "maybe", "--duration", "1"]).finish();
    assert_eq!(st.code(), Some(2));
    assert!(err.join("\n").contains("[possible values: listeners, all]"), "{err:?}");

    let mut run =
        Proc::spawn(&lab, &["run", "--source", &src, "--cores", "0,1", "--xdp-claim", "all", "--duration", "60"]);
    run.wait_for("warning: --xdp-claim all");
    let warning = run.seen.last().unwrap().clone();
    assert!(
        warning.contains("ping (ICMP)") && warning.contains("SSH") && warning.contains(lab.dev(Side::B)),
        "{warning}"
    );
    wait_attached(&lab);
    let b4 = IpAddr::from(lab.v4(Side::B));
    assert!(!lab.ping(Side::A, b4, Duration::from_millis(600)).unwrap(), "--xdp-claim all takes ping too");
    run.terminate();
    let (st, out, err) = run.finish();
    assert!(st.success(), "{err:?}\n{out}");
    assert!(lab.ping(Side::A, b4, Duration::from_secs(5)).unwrap(), "ping again once detached");
}

#[test]
fn an_mtu_beyond_the_afxdp_frame_is_refused_unless_the_drops_are_allowed() {
    let Some(lab) = lab("clm", 9000) else { return };
    let dev = lab.dev(Side::B).to_string();
    let src = format!("afxdp:{dev}");
    let listen = format!("udp:{PORT}");
    let base = ["run", "--source", &src, "--cores", "0,1", "--listen", &listen, "--duration", "1"];
    let (st, out, err) = Proc::spawn(&lab, &base).finish();
    assert_eq!(st.code(), Some(1), "{out}");
    let err = err.join("\n");
    assert!(err.contains("MTU 9000") && err.contains("1792") && err.contains("--allow-mtu-drops"), "{err}");
    assert!(!xdp_attached(&lab));

    let mut with = base.to_vec();
    with.push("--allow-mtu-drops");
    let (st, out, err) = Proc::spawn(&lab, &with).finish();
    assert!(st.success(), "{err:?}\n{out}");
    assert!(
        err.iter().any(|l| l.starts_with("warning: ") && l.contains("MTU 9000") && l.contains("dropped")),
        "{err:?}"
    );

    let addr = format!("{}:{PORT}", lab.v4(Side::B));
    let echo = ["udp-echo", &addr, "--mode", "xdp", "--iface", &dev, "--duration", "1"];
    let (st, _, err) = Proc::spawn(&lab, &echo).finish();
    assert_eq!(st.code(), Some(1));
    let err = err.join("\n");
    assert!(err.contains("MTU 9000") && err.contains("--allow-mtu-drops"), "{err}");
}
