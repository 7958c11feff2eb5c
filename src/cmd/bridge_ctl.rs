//! `flowsteer bridge-ctl [--ctl PATH] <command>`: one request to a running
//! `flowsteer bridge` over its control socket, its answer printed.
//!
//! Exit codes: 0 done; 1 the bridge answered an error (its message on
//! stderr); 2 bad arguments; 3 the bridge could not be reached (no socket,
//! permission denied, no answer in time).

use crate::cli::{BridgeCtlArgs, BridgeCtlWhat, BridgeFdbWhat, BridgePortWhat};
use crate::cmd::usage;
use anyhow::Result;
use flowsteer_bridge::{ctl, Request, Response};

/// Exit code when the bridge answered an error.
const ANSWERED_ERROR: i32 = 1;
/// Exit code when the bridge could not be reached.
const UNREACHABLE: i32 = 3;

/// How the answer is printed.
#[derive(Clone, Copy)]
enum Print {
    Text,
    Json,
}

pub fn run(args: &BridgeCtlArgs) -> Result<i32> {
    let (req, print) = request_of(&args.what)?;
    let answer = match ctl::request(&args.ctl, &req) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(UNREACHABLE);
        }
    };
    match (answer, print) {
        (Response::Ok { detail }, _) => {
            if !detail.is_empty() {
                println!("{detail}");
            }
        }
        (Response::Error { message }, _) => {
            eprintln!("error: the bridge answered: {message}");
            return Ok(ANSWERED_ERROR);
        }
        (Response::Fdb { entries }, Print::Json) => println!("{}", serde_json::to_string_pretty(&entries)?),
        (Response::Fdb { entries }, Print::Text) => {
            for e in &entries {
                println!("{}", e.to_line());
            }
        }
        (Response::Stats { stats }, Print::Json) => println!("{}", serde_json::to_string_pretty(&stats)?),
        (Response::Stats { stats }, Print::Text) => {
            print!("{}", ctl::stats_table(&stats));
            println!("{}", crate::legend::footer(crate::legend::BRIDGE_STATS));
        }
    }
    Ok(0)
}

/// The request a command line asks for, and how to print its answer.
fn request_of(what: &BridgeCtlWhat) -> Result<(Request, Print)> {
    let print = |json: bool| if json { Print::Json } else { Print::Text };
    Ok(match what {
        BridgeCtlWhat::Port(BridgePortWhat::Add { port }) => (Request::PortAdd { port: port.clone() }, Print::Text),
        BridgeCtlWhat::Port(BridgePortWhat::Del { iface }) => (Request::PortDel { iface: iface.clone() }, Print::Text),
        BridgeCtlWhat::Stats { json } => (Request::Stats, print(*json)),
        BridgeCtlWhat::Fdb(BridgeFdbWhat::Show { json }) => (Request::FdbShow, print(*json)),
        BridgeCtlWhat::Fdb(BridgeFdbWhat::Add { mac, words }) => {
            let w = words_of("fdb add", words, true)?;
            let iface = w.iface.ok_or_else(|| usage("fdb add: which port? `fdb add MAC [vlan VID] IFACE`"))?;
            (Request::FdbAdd { mac: mac.clone(), vlan: w.vlan, iface }, Print::Text)
        }
        BridgeCtlWhat::Fdb(BridgeFdbWhat::Del { mac, words }) => {
            let w = words_of("fdb del", words, false)?;
            (Request::FdbDel { mac: mac.clone(), vlan: w.vlan }, Print::Text)
        }
        BridgeCtlWhat::Fdb(BridgeFdbWhat::Flush { words }) => {
            let w = words_of("fdb flush", words, true)?;
            if w.vlan != 0 {
                return Err(usage("fdb flush: takes `[dev] IFACE` or nothing, not vlan"));
            }
            (Request::FdbFlush { iface: w.iface }, Print::Text)
        }
    })
}

/// The keyword words after the MAC: `vlan VID`, `dev IFACE`, a bare IFACE.
struct Words {
    vlan: u16,
    iface: Option<String>,
}

fn words_of(cmd: &str, words: &[String], takes_iface: bool) -> Result<Words> {
    let mut out = Words { vlan: 0, iface: None };
    let mut seen_vlan = false;
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "vlan" => {
                let v = it.next().ok_or_else(|| usage(format!("{cmd}: vlan needs a VID")))?;
                if std::mem::replace(&mut seen_vlan, true) {
                    return Err(usage(format!("{cmd}: vlan given twice")));
                }
                out.vlan = crate::ranges::vid(v).map_err(|e| usage(format!("{cmd}: {e}")))?;
            }
            "dev" if takes_iface => {
                let i = it.next().ok_or_else(|| usage(format!("{cmd}: dev needs an interface")))?;
                set_iface(cmd, &mut out, i)?;
            }
            _ if takes_iface => set_iface(cmd, &mut out, w)?,
            "dev" => {
                return Err(usage(format!(
                    "{cmd}: takes MAC [vlan VID], no dev (an entry is one MAC in one VLAN, on whichever port)"
                )))
            }
            _ => return Err(usage(format!("{cmd}: unexpected {w:?}: takes MAC [vlan VID]"))),
        }
    }
    Ok(out)
}

fn set_iface(cmd: &str, out: &mut Words, name: &str) -> Result<()> {
    if out.iface.is_some() {
        return Err(usage(format!("{cmd}: one interface only ({name:?} is a second)")));
    }
    out.iface = Some(crate::ranges::iface(name).map_err(|e| usage(format!("{cmd}: {e}")))?);
    Ok(())
}
