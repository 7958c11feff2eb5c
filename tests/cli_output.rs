//! What the commands print and how they exit: the loss line, interval
//! reports, legends, the JSON documents' schema and warnings.

#[allow(dead_code)] // only `flowsteer` is used here
mod common;

use common::flowsteer;
use std::process::Output;

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn run_that_drops_says_how_many_the_share_and_the_top_reasons_apart_from_conservation() {
    let o = flowsteer(&["run", "--flow-capacity", "1", "--packets", "20000", "--duration", "30", "--no-pin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = text(&o);
    let loss = out.lines().find(|l| l.starts_with("loss: ")).unwrap_or_else(|| panic!("no loss line: {out}"));
    assert!(loss.contains("of 20000 received packets dropped (") && loss.contains(" %)"), "{loss}");
    let reasons = out.lines().find(|l| l.trim_start().starts_with("top reasons: ")).expect("reasons line");
    assert!(reasons.contains("flow_table_full"), "{reasons}");
    assert!(!out.lines().any(|l| l.starts_with("conservation") && l.contains("flow_table_full")));

    // Nothing dropped: no loss line.
    let o = flowsteer(&["run", "--packets", "2000", "--duration", "30", "--no-pin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!text(&o).contains("loss:"), "{}", text(&o));
}

#[test]
fn udp_gen_echo_with_no_reply_at_all_fails() {
    // A socket that never answers, on loopback.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let o = flowsteer(&["udp-gen", "-r", "127.0.0.1", "-p", &port, "--echo", "-n", "20", "--drain", "0.2"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("error: no reply to any of 20 datagrams"), "{err}");
    assert!(text(&o).contains("loss: 20 of 20 sent datagrams got no reply (100.0 %)"), "{}", text(&o));
    drop(silent);
}
