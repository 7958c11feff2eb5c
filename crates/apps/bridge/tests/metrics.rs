//! The metrics text read back by a Prometheus text parser: every figure of
//! a hand-built `BridgeStats` is there, once, with its type and help, and
//! nothing else; and the HTTP endpoint against a fake bridge: what it
//! answers, and that idle and slow clients hold up no scrape, are closed at
//! their deadline or for room, and are closed when the server is dropped.

mod common;

use common::{expected, parse, Key};
use flowsteer_bridge::api::{BridgeStats, FdbCounters, PortStats, WorkerStats, STATS_SCHEMA};
use flowsteer_bridge::metrics::{self, MAX_CONNECTIONS, MAX_REQUEST, READ_TIMEOUT};
use flowsteer_bridge::{Control, Request, Response};
use prometheus_parse::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn stats() -> BridgeStats {
    let port = |name: &str, kind: &str, member, base: u64| PortStats {
        name: name.into(),
        kind: kind.into(),
        member,
        up: member,
        state: "forwarding".into(),
        learned_entries: base + 10,
        received: base + 1,
        fast_forwarded: base + 9,
        fast_path: if member { "xdp".into() } else { "off (removed)".into() },
        forwarded: base + 2,
        flooded: base + 3,
        dropped: BTreeMap::from([
            ("vlan".into(), base + 4),
            ("reserved".into(), base + 5),
            ("kernel".into(), base + 6),
        ]),
        transmitted: base + 7,
        tx_dropped: BTreeMap::from([("tx_failed".into(), base + 8)]),
        tx_padded: base + 14,
        xdp_mode: (kind == "afxdp").then(|| "native".into()),
        xdp_fallback: None,
        if_rx_packets: Some(base + 11),
        if_rx_dropped: Some(base + 12),
        peer_tx_dropped: Some(base + 13),
    };
    let worker = |i: usize, cpu, base: u64| WorkerStats {
        worker: i,
        cpu,
        received: base + 1,
        forwarded: base + 2,
        flooded: base + 3,
        dropped: BTreeMap::from([("same_port".into(), base + 4), ("malformed".into(), base + 5)]),
        rx_copied: base + 6,
        csum_completed: base + 9,
        gso_segmented: base + 10,
    };
    BridgeStats {
        schema: STATS_SCHEMA.into(),
        uptime_s: 12.25,
        ports: vec![
            port("veth0", "afxdp", true, 100),
            port("veth1", "afpacket", true, 200),
            port("old", "afxdp", false, 300),
        ],
        workers: vec![worker(0, Some(2), 1000), worker(1, None, 2000)],
        fdb: FdbCounters {
            entries: 11,
            learned_entries: 9,
            static_entries: 2,
            max_learned: 65536,
            learned: 21,
            refreshed: 22,
            moved: 23,
            not_learned_full: 24,
            events_dropped: 25,
            events_suppressed: 28,
            aged: 26,
            flushed: 27,
        },
        conservation_ok: true,
        conservation: "sums".into(),
    }
}

#[test]
fn every_figure_of_the_stats_is_in_the_text_once_typed_and_documented() {
    let s = stats();
    let text = metrics::render(&s);
    let scrape = parse(&text);
    let mut got = BTreeMap::new();
    for sample in &scrape.samples {
        let labels = sample.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let (is_counter, v) = match sample.value {
            Value::Counter(v) => (true, v),
            Value::Gauge(v) => (false, v),
            ref other => panic!("{}: untyped or other {other:?}", sample.metric),
        };
        assert_eq!(
            is_counter,
            sample.metric.ends_with("_total"),
            "{}: counters and only counters end in _total",
            sample.metric
        );
        assert!(scrape.docs.contains_key(&sample.metric), "{} has no # HELP", sample.metric);
        assert!(!sample.labels.keys().any(|k| k.contains("mac")), "{}: no per-MAC label", sample.metric);
        let k: Key = (sample.metric.clone(), labels);
        assert!(got.insert(k.clone(), v).is_none(), "{k:?} twice");
    }
    assert_eq!(got, expected(&s), "\n{text}");
    // Every family has its HELP and TYPE line once.
    let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
    let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    let families: BTreeSet<&str> = got.keys().map(|(n, _)| n.as_str()).collect();
    assert_eq!((helps, types), (families.len(), families.len()), "\n{text}");
}

struct Fake(BridgeStats);

impl Control for Fake {
    fn request(&self, req: Request) -> Response {
        assert_eq!(req, Request::Stats);
        Response::Stats { stats: Box::new(self.0.clone()) }
    }
}

fn http(addr: SocketAddr, request: &[u8]) -> (String, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(request).unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).expect("the whole answer within 10 s");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    (head.to_string(), body.to_string())
}

#[test]
fn get_metrics_over_http_and_nothing_else() {
    let s = stats();
    let server = metrics::serve("127.0.0.1:0".parse().unwrap(), Arc::new(Fake(s.clone()))).unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    let (head, body) = http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
    assert_eq!(body, metrics::render(&s));
    assert_eq!(parse(&body).samples.len(), expected(&s).len());

    let (head, _) = http(addr, b"GET / HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 404 "), "{head}");
    let (head, _) = http(addr, b"DELETE /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 405 "), "{head}");
    let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', MAX_REQUEST + 1));
    let (head, _) = http(addr, &big);
    assert!(head.starts_with("HTTP/1.1 431 "), "{head}");

    drop(server);
    assert!(TcpStream::connect(addr).is_err(), "nothing listens once dropped");
}

const GET: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

/// A scrape answered 200 with all of the text, and how long it took.
fn scrape(addr: SocketAddr, s: &BridgeStats) -> Duration {
    let start = Instant::now();
    let (head, body) = http(addr, GET);
    let took = start.elapsed();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
    assert_eq!(body, metrics::render(s));
    took
}

/// Whether the server closed `c` (end of stream, or reset) within `within`;
/// false if it is still open then. `c` must not have been answered.
fn closed(c: &TcpStream, within: Duration) -> bool {
    c.set_read_timeout(Some(within)).unwrap();
    match (&*c).read(&mut [0u8; 64]) {
        Ok(0) => true,
        Ok(n) => panic!("{n} bytes came on a connection never answered"),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(_) => true,
    }
}

/// A client on its own thread that sends a scrape one byte a second: sends
/// `()` once its first byte is out, and ends with how many bytes it sent
/// before the server closed it, or an error if it was answered or never
/// closed.
fn slow_client(addr: SocketAddr, started: mpsc::Sender<()>) -> JoinHandle<Result<usize, String>> {
    std::thread::spawn(move || {
        let c = TcpStream::connect(addr).unwrap();
        for (i, b) in GET.iter().enumerate() {
            if (&c).write_all(&[*b]).is_err() {
                return Ok(i); // reset: the server had closed it
            }
            if i == 0 {
                started.send(()).unwrap();
            }
            if closed(&c, Duration::from_secs(1)) {
                return Ok(i + 1);
            }
        }
        Err("never closed: its whole request went through".into())
    })
}

#[test]
fn idle_and_slow_clients_hold_up_no_scrape_and_are_closed_at_their_deadline() {
    let s = stats();
    let server = metrics::serve("127.0.0.1:0".parse().unwrap(), Arc::new(Fake(s.clone()))).unwrap();
    let addr = server.local_addr();
    let idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let (started, all_started) = mpsc::channel();
    let slow: Vec<_> = (0..10).map(|_| slow_client(addr, started.clone())).collect();
    for _ in 0..slow.len() {
        all_started.recv_timeout(Duration::from_secs(10)).expect("every slow client sends");
    }

    // Accepted after the 60 others (in the order they connected).
    let took = scrape(addr, &s);
    assert!(took < Duration::from_secs(1), "a scrape behind 50 idle and 10 slow clients took {took:?}");

    for h in slow {
        let sent = h.join().unwrap().unwrap();
        assert!(sent < GET.len(), "closed after {sent} of {} bytes", GET.len());
    }
    for c in &idle {
        assert!(closed(c, READ_TIMEOUT + Duration::from_secs(5)), "an idle client is closed at its deadline");
    }
    // With them gone, it serves as before.
    scrape(addr, &s);
    drop(server);
}

#[test]
fn a_full_server_closes_the_connection_idle_longest_for_a_new_one() {
    let s = stats();
    let server = metrics::serve("127.0.0.1:0".parse().unwrap(), Arc::new(Fake(s.clone()))).unwrap();
    let addr = server.local_addr();
    let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let last_connected = Instant::now();
    // A scrape sent with its connection is answered at once, nobody closed for it.
    scrape(addr, &s);
    // A scraper that connects, then asks: it takes the place of the one idle longest (the first).
    let mut late = TcpStream::connect(addr).unwrap();
    late.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(closed(&idle[0], Duration::from_secs(10)), "the first idle client is closed for room");
    let still_open = !closed(&idle[MAX_CONNECTIONS - 1], Duration::from_millis(1));
    assert!(still_open || last_connected.elapsed() >= READ_TIMEOUT, "only the one idle longest is closed");
    late.write_all(GET).unwrap();
    let mut answer = String::new();
    late.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with(&metrics::render(&s)), "the whole answer");
    drop(server);
}

#[test]
fn dropping_the_server_closes_the_clients_it_holds() {
    let s = stats();
    let server = metrics::serve("127.0.0.1:0".parse().unwrap(), Arc::new(Fake(s.clone()))).unwrap();
    let addr = server.local_addr();
    let idle: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let mut partial = TcpStream::connect(addr).unwrap();
    partial.write_all(b"GET /metr").unwrap();
    scrape(addr, &s); // so the server holds the others (accepted before it)
    drop(server); // returns although clients are connected
    for c in idle.iter().chain([&partial]) {
        assert!(closed(c, Duration::from_secs(1)), "a connected client is closed when the server is dropped");
    }
    assert!(TcpStream::connect(addr).is_err(), "nothing listens once dropped");
}
