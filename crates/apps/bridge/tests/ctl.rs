//! The control socket against a fake bridge: answers, mode 0600, stale
//! files, a second server, bad and overlong lines, the client bound, the
//! client's errors.

use flowsteer_bridge::api::{BridgeStats, FdbRow, PortKind, PortSpec, STATS_SCHEMA};
use flowsteer_bridge::ctl::{self, MAX_CLIENTS, MAX_LINE};
use flowsteer_bridge::{BridgeError, Control, Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Answers from a script and remembers what it was asked.
#[derive(Default)]
struct Fake {
    asked: Mutex<Vec<Request>>,
}

impl Control for Fake {
    fn request(&self, req: Request) -> Response {
        self.asked.lock().unwrap().push(req.clone());
        match req {
            Request::Stats => Response::Stats {
                stats: Box::new(BridgeStats { schema: STATS_SCHEMA.into(), uptime_s: 1.5, ..Default::default() }),
            },
            Request::FdbShow => Response::Fdb {
                entries: vec![FdbRow {
                    mac: "02:00:00:00:00:01".into(),
                    port: "veth0".into(),
                    vlan: 0,
                    is_static: true,
                    kind: "static".into(),
                    age_s: 0,
                }],
            },
            Request::PortDel { iface } if iface == "nope" => Response::Error { message: "no port nope".into() },
            _ => Response::Ok { detail: "done".into() },
        }
    }
}

fn line(r: &mut impl BufRead) -> String {
    let mut s = String::new();
    r.read_line(&mut s).unwrap();
    s
}

#[test]
fn requests_are_answered_in_order_on_one_connection_and_the_socket_is_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let fake = Arc::new(Fake::default());
    let server = ctl::serve(&path, fake.clone()).unwrap();
    assert_eq!(server.path(), path);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the socket is left in its directory");

    match ctl::request(&path, &Request::Stats).unwrap() {
        Response::Stats { stats } => assert_eq!((stats.schema.as_str(), stats.uptime_s), (STATS_SCHEMA, 1.5)),
        other => panic!("{other:?}"),
    }
    let add = Request::PortAdd { port: PortSpec { kind: PortKind::Afpacket, iface: "veth1".into() } };
    assert_eq!(ctl::request(&path, &add).unwrap(), Response::Ok { detail: "done".into() });
    let del = Request::PortDel { iface: "nope".into() };
    assert_eq!(ctl::request(&path, &del).unwrap(), Response::Error { message: "no port nope".into() });

    // Several lines on one connection, answered in order; blank lines skipped.
    let stream = UnixStream::connect(&path).unwrap();
    let mut w = &stream;
    w.write_all(b"{\"op\":\"fdb_show\"}\n\n{\"op\":\"fdb_flush\",\"iface\":null}\r\n{\"op\":\"stats\"}\n").unwrap();
    let mut r = BufReader::new(&stream);
    let a: Response = serde_json::from_str(&line(&mut r)).unwrap();
    assert!(matches!(&a, Response::Fdb { entries } if entries.len() == 1), "{a:?}");
    let b: Response = serde_json::from_str(&line(&mut r)).unwrap();
    assert_eq!(b, Response::Ok { detail: "done".into() });
    let c: Response = serde_json::from_str(&line(&mut r)).unwrap();
    assert!(matches!(c, Response::Stats { .. }), "{c:?}");
    assert_eq!(
        *fake.asked.lock().unwrap(),
        [
            Request::Stats,
            add,
            del,
            Request::FdbShow,
            Request::FdbFlush { iface: None, vlan: None, dynamic: false, statics: false },
            Request::Stats
        ]
    );

    drop(server);
    assert!(!path.exists(), "the socket file is removed on drop");
    assert!(matches!(ctl::request(&path, &Request::Stats), Err(BridgeError::NoSocket(_))));
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    drop(UnixListener::bind(&path).unwrap()); // the file stays, nobody listens
    let e = ctl::request(&path, &Request::Stats).unwrap_err();
    assert!(matches!(e, BridgeError::NotListening(_)), "{e:?}");
    assert!(e.to_string().contains("is the bridge running?"), "{e}");

    let first = ctl::serve(&path, Arc::new(Fake::default())).unwrap();
    assert!(matches!(ctl::request(&path, &Request::Stats).unwrap(), Response::Stats { .. }));
    let e = ctl::serve(&path, Arc::new(Fake::default())).err().expect("a second server is refused");
    assert!(matches!(e, BridgeError::AlreadyServing(_)), "{e:?}");
    assert!(e.to_string().contains("already answers"), "{e}");
    // The refused server left the first one's socket alone.
    assert!(matches!(ctl::request(&path, &Request::Stats).unwrap(), Response::Stats { .. }));
    drop(first);

    let not_a_socket = dir.path().join("file");
    std::fs::write(&not_a_socket, b"keep me").unwrap();
    let e = ctl::serve(&not_a_socket, Arc::new(Fake::default())).err().expect("refused");
    assert!(matches!(e, BridgeError::NotASocket(_)), "{e:?}");
    assert_eq!(std::fs::read(&not_a_socket).unwrap(), b"keep me");
}

#[test]
fn a_path_in_a_missing_directory_is_refused_in_one_sentence_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no").join("such");
    let e = ctl::bind(&missing.join("ctl.sock")).err().expect("refused");
    assert!(matches!(&e, BridgeError::NoDirectory(d) if *d == missing), "{e:?}");
    assert!(std::error::Error::source(&e).is_none(), "the sentence is the whole message: {e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "the control socket's directory {} does not exist: create it, or give --ctl a path in an existing directory",
            missing.display()
        )
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing created");
}

#[test]
fn a_bound_socket_holds_its_path_before_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let bound = ctl::bind(&path).unwrap();
    assert_eq!(bound.path(), path);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    // Bound, not answering yet: another server is refused all the same.
    for e in [ctl::bind(&path).err().expect("refused"), ctl::serve(&path, Arc::new(Fake::default())).err().unwrap()] {
        assert!(matches!(e, BridgeError::AlreadyServing(_)), "{e:?}");
    }
    // A client that connected meanwhile is answered once it serves.
    let early = std::thread::spawn({
        let path = path.clone();
        move || ctl::request(&path, &Request::FdbShow)
    });
    std::thread::sleep(Duration::from_millis(50));
    let server = bound.serve(Arc::new(Fake::default())).unwrap();
    assert!(matches!(early.join().unwrap().unwrap(), Response::Fdb { .. }));
    drop(server);
    assert!(!path.exists());

    // Dropped before it serves (the bridge did not start): the file goes.
    drop(ctl::bind(&path).unwrap());
    assert!(!path.exists(), "a bound socket's file is removed on drop");
}

fn answer_then_closed(stream: &UnixStream) -> Response {
    let mut r = BufReader::new(stream);
    let a: Response = serde_json::from_str(&line(&mut r)).unwrap();
    assert_eq!(line(&mut r), "", "closed after the error");
    a
}

#[test]
fn bad_json_and_overlong_lines_are_answered_an_error_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let fake = Arc::new(Fake::default());
    let _server = ctl::serve(&path, fake.clone()).unwrap();

    for bad in [&b"not json\n"[..], b"{\"op\":\"reboot\"}\n", b"{\"op\":\"fdb_del\",\"mac\":1}\n", b"\xff\xfe\n"] {
        let stream = UnixStream::connect(&path).unwrap();
        (&stream).write_all(bad).unwrap();
        let a = answer_then_closed(&stream);
        assert!(matches!(&a, Response::Error { message } if message.starts_with("bad request")), "{a:?}");
    }

    let stream = UnixStream::connect(&path).unwrap();
    // Written from another thread: the server stops reading past the bound.
    let writer = stream.try_clone().unwrap();
    let t = std::thread::spawn(move || (&writer).write_all(&vec![b' '; MAX_LINE + 10]));
    let a = answer_then_closed(&stream);
    assert!(matches!(&a, Response::Error { message } if message.contains("longer than 65536")), "{a:?}");
    let _ = t.join();
    assert!(fake.asked.lock().unwrap().is_empty(), "nothing bad reached the bridge");
    // Still serving.
    assert!(matches!(ctl::request(&path, &Request::Stats).unwrap(), Response::Stats { .. }));
}

#[test]
fn clients_beyond_the_bound_are_told_busy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let _server = ctl::serve(&path, Arc::new(Fake::default())).unwrap();
    let held: Vec<UnixStream> = (0..MAX_CLIENTS)
        .map(|_| {
            let s = UnixStream::connect(&path).unwrap();
            (&s).write_all(b"{\"op\":\"stats\"}\n").unwrap();
            let a: Response = serde_json::from_str(&line(&mut BufReader::new(&s))).unwrap();
            assert!(matches!(a, Response::Stats { .. }));
            s
        })
        .collect();
    let one_more = UnixStream::connect(&path).unwrap();
    let a = answer_then_closed(&one_more);
    assert!(matches!(&a, Response::Error { message } if message.starts_with("busy")), "{a:?}");
    drop(held);
    // Slots come back once those clients are gone.
    let mut served = false;
    for _ in 0..500 {
        if let Ok(Response::Stats { .. }) = ctl::request(&path, &Request::Stats) {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(served);
}

/// Holds every request until the test lets it go.
struct Stuck(Mutex<mpsc::Receiver<()>>);

impl Control for Stuck {
    fn request(&self, _: Request) -> Response {
        let _ = self.0.lock().unwrap().recv_timeout(Duration::from_secs(30));
        Response::Ok { detail: "late".into() }
    }
}

#[test]
fn the_client_times_out_and_names_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let (tx, rx) = mpsc::channel();
    let server = ctl::serve(&path, Arc::new(Stuck(Mutex::new(rx)))).unwrap();
    let e = ctl::request_within(&path, &Request::Stats, Duration::from_millis(50)).unwrap_err();
    assert!(matches!(e, BridgeError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    tx.send(()).unwrap();
    drop(server);
}

#[test]
fn dropping_the_server_closes_idle_clients_and_the_missing_socket_error_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let server = ctl::serve(&path, Arc::new(Fake::default())).unwrap();
    let idle = UnixStream::connect(&path).unwrap();
    (&idle).write_all(b"{\"op\":\"stats\"}\n").unwrap();
    let mut r = BufReader::new(&idle);
    assert!(!line(&mut r).is_empty());
    drop(server); // returns although a client is connected
    assert_eq!(line(&mut r), "", "the idle client was closed");

    let e = ctl::request(Path::new("/nonexistent/flowsteer.sock"), &Request::Stats).unwrap_err();
    assert!(matches!(e, BridgeError::NoSocket(_)), "{e:?}");
    assert!(e.to_string().contains("is the bridge running? (--ctl PATH)"), "{e}");
}
