//! `flowsteer bridge-ctl [--ctl PATH] <command>`: one request to a running
//! `flowsteer bridge` over its control socket, its answer printed.
//!
//! Exit codes: 0 done; 1 the bridge answered an error (its message on
//! stderr); 2 bad arguments; 3 the bridge could not be reached (no socket,
//! permission denied, no answer in time).

use crate::cli::{BridgeCtlArgs, BridgeCtlWhat, BridgeFdbWhat, BridgeLinkWhat, BridgePortWhat, BridgeVlanWhat};
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
            eprintln!("error: {:#}", anyhow::Error::from(e));
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
        (Response::Links { links }, Print::Json) => println!("{}", serde_json::to_string_pretty(&links)?),
        (Response::Links { links }, Print::Text) => print!("{}", ctl::links_text(&links)),
        (Response::Vlans { filtering, protocol, ports }, Print::Json) => {
            let doc = serde_json::json!({ "filtering": filtering, "protocol": protocol, "ports": ports });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        (Response::Vlans { filtering, protocol, ports }, Print::Text) => {
            print!("{}", ctl::vlans_text(filtering, &protocol, &ports));
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
            if w.dynamic {
                return Err(usage(
                    "fdb add: the type is static, sticky or extern_learn (learned entries come from traffic)",
                ));
            }
            let kind = w.kind.unwrap_or("static").to_string();
            (Request::FdbAdd { mac: mac.clone(), vlan: w.vlan, iface, kind }, Print::Text)
        }
        BridgeCtlWhat::Fdb(BridgeFdbWhat::Del { mac, words }) => {
            let w = words_of("fdb del", words, false)?;
            (Request::FdbDel { mac: mac.clone(), vlan: w.vlan }, Print::Text)
        }
        BridgeCtlWhat::Fdb(BridgeFdbWhat::Flush { words }) => {
            let w = words_of("fdb flush", words, true)?;
            if matches!(w.kind, Some(k) if k != "static") {
                return Err(usage("fdb flush: the types are dynamic and static"));
            }
            let statics = w.kind.is_some();
            let vlan = w.vlan_given.then_some(w.vlan);
            (Request::FdbFlush { iface: w.iface, vlan, dynamic: w.dynamic, statics }, Print::Text)
        }
        BridgeCtlWhat::Link(BridgeLinkWhat::Show { json }) => (Request::LinkShow, print(*json)),
        BridgeCtlWhat::Link(BridgeLinkWhat::Set { words }) => {
            let (iface, rest) = dev_first("link set", words)?;
            if rest.is_empty() || rest.len() % 2 != 0 {
                return Err(usage("link set: settings come in pairs, SETTING VALUE (e.g. learning off)"));
            }
            let mut settings = Vec::new();
            let mut check = flowsteer_bridge::PortFlags::default();
            for pair in rest.chunks(2) {
                check.apply(&pair[0], &pair[1]).map_err(|e| usage(format!("link set: {e}")))?;
                settings.push((pair[0].clone(), pair[1].clone()));
            }
            (Request::LinkSet { iface, settings }, Print::Text)
        }
        BridgeCtlWhat::Vlan(BridgeVlanWhat::Show { json }) => (Request::VlanShow, print(*json)),
        BridgeCtlWhat::Vlan(BridgeVlanWhat::Filtering { state }) => {
            (Request::VlanFiltering { on: state == "on" }, Print::Text)
        }
        BridgeCtlWhat::Vlan(BridgeVlanWhat::Add { words }) => {
            let (iface, rest) = dev_first("vlan add", words)?;
            let ((vid, vid_end), flags) = vid_first("vlan add", rest)?;
            let (mut pvid, mut untagged) = (false, false);
            for f in flags {
                match f.as_str() {
                    "pvid" if !pvid => pvid = true,
                    "untagged" if !untagged => untagged = true,
                    _ => {
                        return Err(usage(format!("vlan add: unexpected {f:?}: takes [pvid] [untagged] after the vid")))
                    }
                }
            }
            if pvid && vid_end != vid {
                return Err(usage("vlan add: pvid takes one VLAN, not a range"));
            }
            (Request::VlanAdd { iface, vid, vid_end, pvid, untagged }, Print::Text)
        }
        BridgeCtlWhat::Vlan(BridgeVlanWhat::Del { words }) => {
            let (iface, rest) = dev_first("vlan del", words)?;
            let ((vid, vid_end), flags) = vid_first("vlan del", rest)?;
            if let Some(f) = flags.first() {
                return Err(usage(format!("vlan del: unexpected {f:?}: takes dev IFACE vid N[-M]")));
            }
            (Request::VlanDel { iface, vid, vid_end }, Print::Text)
        }
    })
}

/// `dev IFACE` at the front of `words`; the rest.
fn dev_first<'a>(cmd: &str, words: &'a [String]) -> Result<(String, &'a [String])> {
    match words {
        [dev, iface, rest @ ..] if dev == "dev" => {
            let iface = crate::ranges::iface(iface).map_err(|e| usage(format!("{cmd}: {e}")))?;
            Ok((iface, rest))
        }
        _ => Err(usage(format!("{cmd}: starts with dev IFACE"))),
    }
}

/// `vid N[-M]` at the front of `words`; the rest.
fn vid_first<'a>(cmd: &str, words: &'a [String]) -> Result<((u16, u16), &'a [String])> {
    match words {
        [vid, v, rest @ ..] if vid == "vid" => {
            let range = flowsteer_bridge::portconf::vid_range(v)
                .ok_or_else(|| usage(format!("{cmd}: vid {v:?}: expected N or N-M with 1 <= N <= M <= 4094")))?;
            Ok((range, rest))
        }
        _ => Err(usage(format!("{cmd}: expected vid N[-M] after dev IFACE"))),
    }
}

/// The keyword words after the MAC: `vlan VID`, `dev IFACE`, a bare
/// IFACE, an entry type (`static`, `sticky`, `extern_learn`) or `dynamic`.
struct Words {
    vlan: u16,
    vlan_given: bool,
    iface: Option<String>,
    kind: Option<&'static str>,
    dynamic: bool,
}

fn words_of(cmd: &str, words: &[String], takes_iface: bool) -> Result<Words> {
    let mut out = Words { vlan: 0, vlan_given: false, iface: None, kind: None, dynamic: false };
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "vlan" => {
                let v = it.next().ok_or_else(|| usage(format!("{cmd}: vlan needs a VID")))?;
                if std::mem::replace(&mut out.vlan_given, true) {
                    return Err(usage(format!("{cmd}: vlan given twice")));
                }
                out.vlan = crate::ranges::vid(v).map_err(|e| usage(format!("{cmd}: {e}")))?;
            }
            k @ ("static" | "sticky" | "extern_learn") if takes_iface => {
                if out.kind.is_some() {
                    return Err(usage(format!("{cmd}: one type only ({k:?} is a second)")));
                }
                out.kind = Some(match k {
                    "static" => "static",
                    "sticky" => "sticky",
                    _ => "extern_learn",
                });
            }
            "dynamic" if takes_iface => out.dynamic = true,
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
