//! Reader for the RSS configuration printed by `ethtool -x IFACE` (text) and
//! `ethtool --json -x IFACE` (JSON).
//!
//! The text format follows ethtool's `print_indir_table()` /
//! `print_rss_hkey()` (common.c) and `rss_reply_cb()` (netlink/rss.c):
//!
//! ```text
//! RX flow hash indirection table for eth0 with 8 RX ring(s)[, context N]:
//!     0:      0     1     2     3     4     5     6     7
//! RSS hash key:
//! 6d:5a:56:da:...:01:fa
//! RSS hash function:
//!     toeplitz: on
//!     xor: off
//!     crc32: off
//! RSS input transformation:
//!     symmetric-xor: off
//!     symmetric-or-xor: off
//! ```
//!
//! `Operation not supported` in place of the table or key gives `None`.
//! Accepted leniently: indentation, blank lines, CRLF line ends, upper-case
//! hex, a key wrapped over several lines, any number of entries per table row
//! (the row's leading index must equal the entries read so far), missing
//! sections (their fields stay `None`), `Unknown hash function: 0x..` and
//! `Unknown bits in RSS input transformation: 0x..` lines (ignored) and unknown
//! `name: on|off` lines in the input-transformation section (ignored).
//! Everything else is an [`EthtoolParseError`] with the 1-based line number.
//!
//! JSON input (detected by a leading `[` or `{`) is read with `serde_json`:
//! the first object of the top-level array (or the top-level object)
//! supplies `ifname`, `rss-indirection-table`, `rss-hash-key`,
//! `rss-hash-function`, `rss-input-transformation` (`symmetric-xor`,
//! `symmetric-or-xor`) and, if present, `context` or `rss-context`; other
//! keys are ignored. A key that is present must have its type (`null` is an
//! error, not "absent"), the table and the key must be non-empty arrays of
//! integers (key bytes at most 255), and a key may not be given twice. The
//! error's line is the one serde_json stopped on; its column is in the
//! message. Nesting depth needs no bound of ours: the typed part nests three
//! deep, serde_json skips everything else (other keys, later interfaces)
//! without recursing, and refuses to recurse deeper than its recursion limit
//! (128), so no input can overflow the stack. JSON carries no ring count,
//! so `rx_rings` is `None`.
#![forbid(unsafe_code)]

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The RSS state reported by `ethtool -x`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EthtoolRss {
    /// Interface name from the table header (or JSON `ifname`).
    pub ifname: Option<String>,
    /// Number of RX rings from the table header (text only).
    pub rx_rings: Option<u32>,
    /// RSS context, if the output names one.
    pub context: Option<u32>,
    /// Indirection table; `None` when "Operation not supported" or absent.
    pub indirection: Option<Vec<u32>>,
    /// Hash key; `None` when "Operation not supported" or absent.
    pub key: Option<Vec<u8>>,
    /// The hash function that is "on" (e.g. `toeplitz`); `None` if
    /// unsupported, none is on, or the section is absent.
    pub hash_function: Option<String>,
    /// `symmetric-xor` input transformation (ethtool >= 6.9).
    pub symmetric_xor: Option<bool>,
    /// `symmetric-or-xor` input transformation (newer ethtool).
    pub symmetric_or_xor: Option<bool>,
}

/// A parse failure, with the 1-based line it was found on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthtoolParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for EthtoolParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for EthtoolParseError {}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, EthtoolParseError> {
    Err(EthtoolParseError { line, message: message.into() })
}

/// Parses the output of `ethtool -x IFACE` or `ethtool --json -x IFACE`.
pub fn parse_ethtool_x(text: &str) -> Result<EthtoolRss, EthtoolParseError> {
    let body = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if body.starts_with('[') || body.starts_with('{') {
        parse_json(text)
    } else {
        parse_text(text)
    }
}

const HEADER_INDIR: &str = "RX flow hash indirection table for ";
const HEADER_KEY: &str = "RSS hash key:";
const HEADER_HFUNC: &str = "RSS hash function:";
const HEADER_XFRM: &str = "RSS input transformation:";
const UNSUPPORTED: &str = "Operation not supported";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    Indir,
    Key,
    Hfunc,
    Xfrm,
}

impl Section {
    fn index(self) -> usize {
        match self {
            Section::Indir => 0,
            Section::Key => 1,
            Section::Hfunc => 2,
            Section::Xfrm => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Section::Indir => "indirection table",
            Section::Key => "hash key",
            Section::Hfunc => "hash function",
            Section::Xfrm => "input transformation",
        }
    }
}

/// A decimal number made of ASCII digits only (no sign), fitting `u32`.
fn dec_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `<ifname> with <N> RX ring(s)[, context <M>]:` (after the fixed
/// prefix). Returns (ifname, rings, context).
fn parse_indir_header(rest: &str, line: usize) -> Result<(String, u32, Option<u32>), EthtoolParseError> {
    let Some(rest) = rest.strip_suffix(':') else {
        return err(line, "indirection table header does not end with ':'");
    };
    let Some((ifname, rest)) = rest.split_once(" with ") else {
        return err(line, "indirection table header lacks \"with N RX ring(s)\"");
    };
    let ifname = ifname.trim();
    if ifname.is_empty() {
        return err(line, "indirection table header has an empty interface name");
    }
    let Some((rings, tail)) = rest.split_once(" RX ring(s)") else {
        return err(line, "indirection table header lacks \"RX ring(s)\"");
    };
    let Some(rings) = dec_u32(rings.trim()) else {
        return err(line, format!("bad RX ring count '{}'", rings.trim()));
    };
    let tail = tail.trim();
    let context = if tail.is_empty() {
        None
    } else if let Some(c) = tail.strip_prefix(',').map(str::trim).and_then(|t| t.strip_prefix("context")) {
        match dec_u32(c.trim()) {
            Some(c) => Some(c),
            None => return err(line, format!("bad context number '{}'", c.trim())),
        }
    } else {
        return err(line, format!("unexpected '{tail}' in indirection table header"));
    };
    Ok((ifname.to_string(), rings, context))
}

/// Splits `name: value` lines (`    toeplitz: on`).
fn on_off(line_text: &str, line: usize) -> Result<Option<(&str, bool)>, EthtoolParseError> {
    let Some((name, value)) = line_text.split_once(':') else {
        return Ok(None);
    };
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Ok(None);
    }
    match value.trim() {
        "on" => Ok(Some((name, true))),
        "off" => Ok(Some((name, false))),
        other => err(line, format!("expected 'on' or 'off' for '{name}', found '{other}'")),
    }
}

struct TextParser {
    out: EthtoolRss,
    section: Option<Section>,
    section_line: usize,
    seen: [bool; 4],
    unsupported: bool,
    indir: Vec<u32>,
    key: Vec<u8>,
}

impl TextParser {
    fn finish_section(&mut self) -> Result<(), EthtoolParseError> {
        match self.section {
            Some(Section::Indir) => {
                if !self.unsupported {
                    if self.indir.is_empty() {
                        return err(self.section_line, "indirection table header without any entries");
                    }
                    self.out.indirection = Some(std::mem::take(&mut self.indir));
                }
            }
            Some(Section::Key) => {
                if !self.unsupported {
                    if self.key.is_empty() {
                        return err(self.section_line, "hash key header without a key");
                    }
                    self.out.key = Some(std::mem::take(&mut self.key));
                }
            }
            Some(Section::Hfunc) | Some(Section::Xfrm) | None => {}
        }
        Ok(())
    }

    fn start_section(&mut self, s: Section, line: usize) -> Result<(), EthtoolParseError> {
        self.finish_section()?;
        if self.seen[s.index()] {
            return err(line, format!("second {} section", s.name()));
        }
        self.seen[s.index()] = true;
        self.section = Some(s);
        self.section_line = line;
        self.unsupported = false;
        Ok(())
    }

    fn line(&mut self, raw: &str, line: usize) -> Result<(), EthtoolParseError> {
        let t = raw.trim();
        if t.is_empty() {
            return Ok(());
        }
        if let Some(rest) = t.strip_prefix(HEADER_INDIR) {
            self.start_section(Section::Indir, line)?;
            let (ifname, rings, context) = parse_indir_header(rest, line)?;
            self.out.ifname = Some(ifname);
            self.out.rx_rings = Some(rings);
            self.out.context = context;
            return Ok(());
        }
        let header = match t {
            HEADER_KEY => Some(Section::Key),
            HEADER_HFUNC => Some(Section::Hfunc),
            HEADER_XFRM => Some(Section::Xfrm),
            _ => None,
        };
        if let Some(s) = header {
            return self.start_section(s, line);
        }
        let Some(section) = self.section else {
            return err(line, "not ethtool -x output: expected \"RX flow hash indirection table for ...\"");
        };
        if self.unsupported {
            return err(
                line,
                format!("unexpected line after 'Operation not supported' in the {} section", section.name()),
            );
        }
        match section {
            Section::Indir => self.indir_line(t, line),
            Section::Key => self.key_line(t, line),
            Section::Hfunc => self.hfunc_line(t, line),
            Section::Xfrm => self.xfrm_line(t, line),
        }
    }

    fn indir_line(&mut self, t: &str, line: usize) -> Result<(), EthtoolParseError> {
        if t == UNSUPPORTED {
            if !self.indir.is_empty() {
                return err(line, "'Operation not supported' after indirection table entries");
            }
            self.unsupported = true;
            return Ok(());
        }
        let Some((idx, entries)) = t.split_once(':') else {
            return err(line, format!("expected an indirection table row 'N: ...', found '{t}'"));
        };
        let Some(idx) = dec_u32(idx.trim()) else {
            return err(line, format!("bad indirection table row index '{}'", idx.trim()));
        };
        if idx as usize != self.indir.len() {
            return err(line, format!("indirection table row starts at index {idx}, expected {}", self.indir.len()));
        }
        let before = self.indir.len();
        for e in entries.split_whitespace() {
            match dec_u32(e) {
                Some(v) => self.indir.push(v),
                None => return err(line, format!("bad indirection table entry '{e}'")),
            }
        }
        if self.indir.len() == before {
            return err(line, format!("indirection table row {idx} has no entries"));
        }
        Ok(())
    }

    fn key_line(&mut self, t: &str, line: usize) -> Result<(), EthtoolParseError> {
        if t == UNSUPPORTED {
            if !self.key.is_empty() {
                return err(line, "'Operation not supported' after hash key bytes");
            }
            self.unsupported = true;
            return Ok(());
        }
        // A wrapped key may end a line with ':'.
        let body = t.strip_suffix(':').unwrap_or(t);
        for tok in body.split(':') {
            let tok = tok.trim();
            if tok.len() != 2 || !tok.bytes().all(|b| b.is_ascii_hexdigit()) {
                return err(line, format!("bad hex byte '{tok}' in hash key"));
            }
            match u8::from_str_radix(tok, 16) {
                Ok(b) => self.key.push(b),
                Err(_) => return err(line, format!("bad hex byte '{tok}' in hash key")),
            }
        }
        Ok(())
    }

    fn hfunc_line(&mut self, t: &str, line: usize) -> Result<(), EthtoolParseError> {
        if t == UNSUPPORTED {
            self.unsupported = true;
            return Ok(());
        }
        if t.starts_with("Unknown hash function:") {
            return Ok(());
        }
        match on_off(t, line)? {
            Some((name, on)) => {
                if on && self.out.hash_function.is_none() {
                    self.out.hash_function = Some(name.to_string());
                }
                Ok(())
            }
            None => err(line, format!("expected 'NAME: on|off' in the hash function section, found '{t}'")),
        }
    }

    fn xfrm_line(&mut self, t: &str, line: usize) -> Result<(), EthtoolParseError> {
        if t == UNSUPPORTED || t.starts_with("Unknown bits in RSS input transformation:") {
            return Ok(());
        }
        match on_off(t, line)? {
            Some(("symmetric-xor", on)) => self.out.symmetric_xor = Some(on),
            Some(("symmetric-or-xor", on)) => self.out.symmetric_or_xor = Some(on),
            Some(_) => {}
            None => {
                return err(line, format!("expected 'NAME: on|off' in the input transformation section, found '{t}'"))
            }
        }
        Ok(())
    }
}

fn parse_text(text: &str) -> Result<EthtoolRss, EthtoolParseError> {
    let mut p = TextParser {
        out: EthtoolRss {
            ifname: None,
            rx_rings: None,
            context: None,
            indirection: None,
            key: None,
            hash_function: None,
            symmetric_xor: None,
            symmetric_or_xor: None,
        },
        section: None,
        section_line: 0,
        seen: [false; 4],
        unsupported: false,
        indir: Vec::new(),
        key: Vec::new(),
    };
    let mut last = 1;
    for (i, raw) in text.split('\n').enumerate() {
        last = i + 1;
        p.line(raw.strip_suffix('\r').unwrap_or(raw), i + 1)?;
    }
    if p.section.is_none() {
        return err(
            if text.trim().is_empty() { 1 } else { last },
            "not ethtool -x output: no \"RX flow hash indirection table\" or \"RSS hash\" header",
        );
    }
    p.finish_section()?;
    Ok(p.out)
}

// ------------------------------------------------------------------ JSON ----

/// One interface's object in `ethtool --json -x` output. Every key is
/// optional, but one that is present must have the right type: `null` is
/// not the same as absent.
#[derive(Deserialize)]
struct JsonRss {
    #[serde(default, deserialize_with = "string")]
    ifname: Option<String>,
    #[serde(default, deserialize_with = "present")]
    context: Option<u32>,
    #[serde(default, rename = "rss-context", deserialize_with = "present")]
    rss_context: Option<u32>,
    #[serde(default, rename = "rss-indirection-table", deserialize_with = "non_empty")]
    indirection: Option<Vec<u32>>,
    #[serde(default, rename = "rss-hash-key", deserialize_with = "non_empty")]
    key: Option<Vec<u8>>,
    #[serde(default, rename = "rss-hash-function", deserialize_with = "string")]
    hash_function: Option<String>,
    #[serde(default, rename = "rss-input-transformation", deserialize_with = "object")]
    transformation: Option<JsonTransformation>,
}

/// The `rss-input-transformation` object.
#[derive(Deserialize)]
struct JsonTransformation {
    #[serde(default, rename = "symmetric-xor", deserialize_with = "present")]
    symmetric_xor: Option<bool>,
    #[serde(default, rename = "symmetric-or-xor", deserialize_with = "present")]
    symmetric_or_xor: Option<bool>,
}

/// A key that is present: its value, which must not be `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A JSON object read as `T`. (A derived struct alone would also take an
/// array of its fields in declaration order.)
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Map<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> de::Visitor<'de> for Map<T> {
            type Value = Object<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }

        d.deserialize_map(Map(PhantomData))
    }
}

/// A present object.
fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Object::deserialize(d).map(|Object(t)| Some(t))
}

/// A present string. A lone UTF-16 surrogate escape (`"\ud800"`), which
/// serde_json refuses in a Rust `String`, becomes U+FFFD instead of failing
/// the whole read over an interface name. serde_json checks the value's
/// syntax (no raw control characters) while taking its raw text; the text
/// is then decoded as bytes, the one mode in which serde_json lets a lone
/// surrogate through.
fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct Lossy;

    impl de::Visitor<'_> for Lossy {
        type Value = String;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: de::Error>(self, s: &str) -> Result<String, E> {
            Ok(s.to_owned())
        }

        /// serde_json's bytes of a string: UTF-8, except that a lone
        /// surrogate is encoded as if it were a code point (WTF-8: `ED`,
        /// `A0..=BF`, one continuation byte).
        fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<String, E> {
            let mut out = Vec::with_capacity(b.len());
            let mut rest = b;
            while let Some((&c, tail)) = rest.split_first() {
                match tail {
                    [s, _, more @ ..] if c == 0xed && *s >= 0xa0 => {
                        out.extend_from_slice("\u{fffd}".as_bytes());
                        rest = more;
                    }
                    _ => {
                        out.push(c);
                        rest = tail;
                    }
                }
            }
            Ok(String::from_utf8_lossy(&out).into_owned())
        }
    }

    let raw = Box::<RawValue>::deserialize(d)?;
    let mut inner = serde_json::Deserializer::from_str(raw.get());
    let s = if raw.get().starts_with('"') { inner.deserialize_bytes(Lossy) } else { inner.deserialize_str(Lossy) };
    s.map(Some).map_err(|e| de::Error::custom(message_of(&e)))
}

/// A present array, which must not be empty.
fn non_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    let v = Vec::<T>::deserialize(d)?;
    if v.is_empty() {
        return Err(de::Error::invalid_length(0, &"a non-empty array"));
    }
    Ok(Some(v))
}

/// The interface object: the first element of the top-level array (the
/// others must be valid JSON and are skipped), or the top-level object.
struct FirstInterface(JsonRss);

impl<'de> Deserialize<'de> for FirstInterface {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Root;

        impl<'de> de::Visitor<'de> for Root {
            type Value = FirstInterface;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of interface objects or an interface object")
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<FirstInterface, A::Error> {
                let Some(Object(first)) = seq.next_element::<Object<JsonRss>>()? else {
                    return Err(de::Error::custom("empty array, no interface"));
                };
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(FirstInterface(first))
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<FirstInterface, A::Error> {
                JsonRss::deserialize(de::value::MapAccessDeserializer::new(map)).map(FirstInterface)
            }
        }

        d.deserialize_any(Root)
    }
}

/// A serde_json error's message without the " at line L column C" it
/// appends.
fn message_of(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.strip_suffix(&format!(" at line {} column {}", e.line(), e.column())) {
        Some(m) => m.to_owned(),
        None => full,
    }
}

fn parse_json(text: &str) -> Result<EthtoolRss, EthtoolParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let FirstInterface(j) = serde_json::from_str(text).map_err(|e| EthtoolParseError {
        line: e.line().max(1),
        message: format!("JSON: {} (column {})", message_of(&e), e.column()),
    })?;
    let (symmetric_xor, symmetric_or_xor) =
        j.transformation.map_or((None, None), |x| (x.symmetric_xor, x.symmetric_or_xor));
    Ok(EthtoolRss {
        ifname: j.ifname,
        rx_rings: None,
        context: j.rss_context.or(j.context),
        indirection: j.indirection,
        key: j.key,
        hash_function: j.hash_function,
        symmetric_xor,
        symmetric_or_xor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const VIRTIO: &str = include_str!("../tests/data/ethtool/virtio_unsupported.txt");
    const IXGBE: &str = include_str!("../tests/data/ethtool/ixgbe_128.txt");
    const I40E: &str = include_str!("../tests/data/ethtool/i40e_512_52byte.txt");
    const CONTEXT: &str = include_str!("../tests/data/ethtool/context.txt");
    const CRLF: &str = include_str!("../tests/data/ethtool/crlf.txt");
    const JSON: &str = include_str!("../tests/data/ethtool/json.json");
    const ALL: [&str; 6] = [VIRTIO, IXGBE, I40E, CONTEXT, CRLF, JSON];

    const MS_KEY: &str = "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa";
    const KEY52: &str =
        "4439796bb54c5023b675ea5b124f9f30b8a2c03ddfdc4d02a08c9b334af64a4c05c6fa343958d8557d99583ae138c92e81150366";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
    }

    /// ethtool's printf formats (common.c print_indir_table / print_rss_hkey,
    /// netlink/rss.c rss_reply_cb).
    fn render(
        dev: &str,
        rings: u64,
        context: Option<u32>,
        indir: &[u32],
        key: &[u8],
        hfunc: Option<&str>,
        xfrm: Option<(bool, Option<bool>, u32)>,
    ) -> String {
        let mut s = format!("RX flow hash indirection table for {dev} with {rings} RX ring(s)");
        match context {
            Some(c) => s += &format!(", context {c}:\n"),
            None => s += ":\n",
        }
        if indir.is_empty() {
            s += "Operation not supported\n";
        }
        for (i, v) in indir.iter().enumerate() {
            if i % 8 == 0 {
                s += &format!("{i:5}: ");
            }
            s += &format!(" {v:5}");
            if i % 8 == 7 || i == indir.len() - 1 {
                s.push('\n');
            }
        }
        s += "RSS hash key:\n";
        if key.is_empty() {
            s += "Operation not supported\n";
        }
        for (i, b) in key.iter().enumerate() {
            s += &if i == key.len() - 1 { format!("{b:02x}\n") } else { format!("{b:02x}:") };
        }
        s += "RSS hash function:\n";
        match hfunc {
            None => s += "    Operation not supported\n",
            Some(on) => {
                for f in ["toeplitz", "xor", "crc32"] {
                    s += &format!("    {f}: {}\n", if f == on { "on" } else { "off" });
                }
            }
        }
        if let Some((x, ox, unknown)) = xfrm {
            s += "RSS input transformation:\n";
            s += &format!("    symmetric-xor: {}\n", if x { "on" } else { "off" });
            if let Some(ox) = ox {
                s += &format!("    symmetric-or-xor: {}\n", if ox { "on" } else { "off" });
            }
            if unknown != 0 {
                s += &format!("    Unknown bits in RSS input transformation: 0x{unknown:x}\n");
            }
        }
        s
    }

    fn ctx_key() -> Vec<u8> {
        (0x10..0x10 + 40).collect()
    }

    #[test]
    fn fixtures_match_ethtool_printf_formats() {
        let ixgbe: Vec<u32> = (0..128).map(|i| i % 4).collect();
        let i40e: Vec<u32> = (0..512).map(|i| i % 16).collect();
        let ctx: Vec<u32> = (0..64).map(|i| 2 + i % 6).collect();
        let small: Vec<u32> = (0..12).map(|i| i % 2).collect();
        assert_eq!(VIRTIO, render("eth0", 1, None, &[], &[], Some("toeplitz"), None));
        assert_eq!(IXGBE, render("enp3s0f0", 4, None, &ixgbe, &hex(MS_KEY), Some("toeplitz"), None));
        assert_eq!(
            I40E,
            render("ens1f0", 16, None, &i40e, &hex(KEY52), Some("toeplitz"), Some((false, Some(false), 0)))
        );
        assert_eq!(CONTEXT, render("eth1", 8, Some(1), &ctx, &ctx_key(), Some("xor"), Some((true, Some(false), 4))));
        let crlf = format!(
            "\n\n{}\n\n",
            render("eth2", 2, None, &small, &hex(MS_KEY), Some("toeplitz"), Some((false, None, 0)))
        )
        .replace('\n', "\r\n");
        assert_eq!(CRLF, crlf);
    }

    #[test]
    fn virtio_unsupported() {
        let r = parse_ethtool_x(VIRTIO).unwrap();
        assert_eq!(
            r,
            EthtoolRss {
                ifname: Some("eth0".into()),
                rx_rings: Some(1),
                context: None,
                indirection: None,
                key: None,
                hash_function: Some("toeplitz".into()),
                symmetric_xor: None,
                symmetric_or_xor: None,
            }
        );
    }

    #[test]
    fn ixgbe_128() {
        let r = parse_ethtool_x(IXGBE).unwrap();
        assert_eq!(
            r,
            EthtoolRss {
                ifname: Some("enp3s0f0".into()),
                rx_rings: Some(4),
                context: None,
                indirection: Some((0..128).map(|i| i % 4).collect()),
                key: Some(hex(MS_KEY)),
                hash_function: Some("toeplitz".into()),
                symmetric_xor: None,
                symmetric_or_xor: None,
            }
        );
    }

    #[test]
    fn i40e_512_52byte() {
        let r = parse_ethtool_x(I40E).unwrap();
        assert_eq!(
            r,
            EthtoolRss {
                ifname: Some("ens1f0".into()),
                rx_rings: Some(16),
                context: None,
                indirection: Some((0..512).map(|i| i % 16).collect()),
                key: Some(hex(KEY52)),
                hash_function: Some("toeplitz".into()),
                symmetric_xor: Some(false),
                symmetric_or_xor: Some(false),
            }
        );
        assert_eq!(r.key.as_ref().map(Vec::len), Some(52));
    }

    #[test]
    fn context() {
        let r = parse_ethtool_x(CONTEXT).unwrap();
        assert_eq!(
            r,
            EthtoolRss {
                ifname: Some("eth1".into()),
                rx_rings: Some(8),
                context: Some(1),
                indirection: Some((0..64).map(|i| 2 + i % 6).collect()),
                key: Some(ctx_key()),
                hash_function: Some("xor".into()),
                symmetric_xor: Some(true),
                symmetric_or_xor: Some(false),
            }
        );
    }

    #[test]
    fn crlf() {
        let r = parse_ethtool_x(CRLF).unwrap();
        assert_eq!(
            r,
            EthtoolRss {
                ifname: Some("eth2".into()),
                rx_rings: Some(2),
                context: None,
                indirection: Some((0..12).map(|i| i % 2).collect()),
                key: Some(hex(MS_KEY)),
                hash_function: Some("toeplitz".into()),
                symmetric_xor: Some(false),
                symmetric_or_xor: None,
            }
        );
    }

    #[test]
    fn json() {
        let r = parse_ethtool_x(JSON).unwrap();
        assert_eq!(
            r,
            EthtoolRss {
                ifname: Some("enp3s0f0".into()),
                rx_rings: None,
                context: None,
                indirection: Some((0..128).map(|i| i % 4).collect()),
                key: Some(hex(MS_KEY)),
                hash_function: Some("toeplitz".into()),
                symmetric_xor: Some(false),
                symmetric_or_xor: Some(true),
            }
        );
    }

    #[test]
    fn json_variants() {
        // Bare object, minimal (device without table/key/hfunc), escapes, extra keys.
        let r = parse_ethtool_x(
            " {\"ifname\":\"e\\u0074h\\/0\",\"context\":3,\"rss-hash-function-raw\":8,\"x\":[{},[],null,-1.5e3]}",
        )
        .unwrap();
        assert_eq!(r.ifname.as_deref(), Some("eth/0"));
        assert_eq!(r.context, Some(3));
        assert_eq!((r.indirection, r.key, r.hash_function), (None, None, None));
        // Errors carry the line.
        let e = parse_ethtool_x("[ {\n \"rss-hash-key\": [ 1,\n 256 ]\n} ]").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = parse_ethtool_x("[ {\n \"rss-indirection-table\": [ 1,\n \"a\" ]\n} ]").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = parse_ethtool_x("[ {\n \"ifname\": \"x\",\n\n ]").unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert_eq!(parse_ethtool_x("[]").unwrap_err().line, 1);
        assert!(parse_ethtool_x("[ {} ] x").is_err());
        assert!(parse_ethtool_x("[ 1 ]").is_err());
        assert!(parse_ethtool_x("{\"rss-indirection-table\": []}").is_err());
        assert!(parse_ethtool_x("{\"rss-indirection-table\": [1.5]}").is_err());
        assert!(parse_ethtool_x("{\"rss-indirection-table\": [-1]}").is_err());
        assert!(parse_ethtool_x("{\"rss-input-transformation\": {\"symmetric-xor\": 1}}").is_err());
        assert!(parse_ethtool_x("{\"ifname\": \"a\u{1}\"}").is_err());
        assert_eq!(parse_ethtool_x("{\"ifname\": \"\\ud800\\u0041\"}").unwrap().ifname.as_deref(), Some("\u{fffd}A"));
        assert_eq!(parse_ethtool_x("{\"ifname\": \"\\ud83d\\ude00\"}").unwrap().ifname.as_deref(), Some("\u{1f600}"));
        assert!(parse_ethtool_x("{\"ifname\": [101]}").is_err());
        assert!(parse_ethtool_x("{\"ifname\": null}").is_err());
        // Deep nesting is an error or skipped, never a stack overflow.
        let deep = "[".repeat(100_000);
        assert!(parse_ethtool_x(&deep).is_err());
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_ethtool_x(&deep).is_err());
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_ethtool_x(&deep).is_ok());
        let deep = format!("{{\"x\":{}}}", "{\"y\":".repeat(100_000));
        assert!(parse_ethtool_x(&deep).is_err());
        // An interface or a transformation given as an array of its fields.
        assert!(parse_ethtool_x("[[\"eth0\", 3]]").is_err());
        assert!(parse_ethtool_x("{\"rss-input-transformation\": [true]}").is_err());
        let deep_ok = format!("{{\"x\":{}{}}}", "[".repeat(60), "]".repeat(60));
        assert!(parse_ethtool_x(&deep_ok).is_ok());
    }

    #[test]
    fn key_wrapped_and_uppercase() {
        let text = "RX flow hash indirection table for eth0 with 2 RX ring(s):\n    0:      0     1\nRSS hash key:\n6D:5A:56:DA:\n25:5b:0e:c2\n41:67\nRSS hash function:\n    toeplitz: on\n";
        let r = parse_ethtool_x(text).unwrap();
        assert_eq!(r.key, Some(vec![0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67]));
        assert_eq!(r.indirection, Some(vec![0, 1]));
    }

    #[test]
    fn unsupported_hash_function_and_unknown_lines() {
        let text = "RX flow hash indirection table for eth0 with 1 RX ring(s):\n    0:      0\nRSS hash key:\n  Operation not supported\nRSS hash function:\n    Operation not supported\n";
        let r = parse_ethtool_x(text).unwrap();
        assert_eq!(r.hash_function, None);
        assert_eq!(r.key, None);
        assert_eq!(r.indirection, Some(vec![0]));
        let text = "RX flow hash indirection table for eth0 with 1 RX ring(s):\nOperation not supported\nRSS hash key:\nOperation not supported\nRSS hash function:\n    toeplitz: off\n    xor: off\n    crc32: off\n    Unknown hash function: 0x8\nRSS input transformation:\n    symmetric-xor: on\n    future-thing: off\n    Unknown bits in RSS input transformation: 0x80\n";
        let r = parse_ethtool_x(text).unwrap();
        assert_eq!(r.hash_function, None);
        assert_eq!(r.symmetric_xor, Some(true));
        assert_eq!(r.symmetric_or_xor, None);
    }

    fn err_line(text: &str) -> usize {
        match parse_ethtool_x(text) {
            Err(e) => {
                assert!(e.to_string().starts_with(&format!("line {}: ", e.line)));
                e.line
            }
            Ok(r) => panic!("parsed {r:?}"),
        }
    }

    #[test]
    fn errors_with_line_numbers() {
        let h = "RX flow hash indirection table for eth0 with 8 RX ring(s):\n";
        // Not ethtool output.
        assert_eq!(err_line(""), 1);
        assert_eq!(err_line("\n\n  \n"), 1);
        assert_eq!(err_line("\nhello world\n"), 2);
        assert_eq!(err_line("Settings for eth0:\n\tSpeed: 1000Mb/s\n"), 1);
        // Mis-numbered rows.
        assert_eq!(
            err_line(&format!("{h}    0:      0     1     2     3     4     5     6     7\n    9:      0\n")),
            3
        );
        assert_eq!(err_line(&format!("{h}    8:      0\n")), 2);
        // Non-numeric / signed entries.
        assert_eq!(err_line(&format!("{h}    0:      0     x\n")), 2);
        assert_eq!(err_line(&format!("{h}    0:      0     +1\n")), 2);
        assert_eq!(err_line(&format!("{h}    0:\n")), 2);
        assert_eq!(err_line(&format!("{h}    zz:      0\n")), 2);
        assert_eq!(err_line(&format!("{h}    0:      99999999999\n")), 2);
        // Empty table with a header (at end of input and before the next header).
        assert_eq!(err_line(h), 1);
        assert_eq!(err_line(&format!("\n{h}RSS hash key:\n00:01\n")), 2);
        // Bad hex.
        assert_eq!(err_line(&format!("{h}    0:      0\nRSS hash key:\n6d:5a:zz:01\n")), 4);
        assert_eq!(err_line(&format!("{h}    0:      0\nRSS hash key:\n6d:5a\n6d::01\n")), 5);
        assert_eq!(err_line(&format!("{h}    0:      0\nRSS hash key:\n6d:5a:+1\n")), 4);
        assert_eq!(err_line(&format!("{h}    0:      0\nRSS hash key:\n6d5a\n")), 4);
        assert_eq!(err_line(&format!("{h}    0:      0\nRSS hash key:\nRSS hash function:\n")), 3);
        // Bad header / hash function lines / duplicates / trailing junk.
        assert_eq!(err_line("RX flow hash indirection table for eth0 with x RX ring(s):\n"), 1);
        assert_eq!(err_line("RX flow hash indirection table for eth0 with 8 RX ring(s), context:\n"), 1);
        assert_eq!(err_line("RX flow hash indirection table for eth0 with 8 RX ring(s)\n"), 1);
        assert_eq!(err_line(&format!("{h}    0:      0\nRSS hash function:\n    toeplitz: maybe\n")), 4);
        assert_eq!(err_line(&format!("{h}    0:      0\nRSS hash function:\n    what is this\n")), 4);
        assert_eq!(err_line(&format!("{h}    0:      0\n{h}    0:      0\n")), 3);
        assert_eq!(err_line(&format!("{h}Operation not supported\n    0:      0\n")), 3);
        assert_eq!(err_line(&format!("{h}    0:      0\nsome junk\n")), 3);
    }

    #[test]
    fn tolerant_layout() {
        let text = "\r\n  RX flow hash indirection table for eth0 with 3 RX ring(s):  \r\n\r\n 0: 0 1 2 0 1 2 0 1 2 0\r\n 10: 1\r\nRSS hash key:\r\n01:02\r";
        let r = parse_ethtool_x(text).unwrap();
        assert_eq!(r.indirection, Some(vec![0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1]));
        assert_eq!(r.key, Some(vec![1, 2]));
        assert_eq!(r.hash_function, None);
        // Error display.
        let e = EthtoolParseError { line: 7, message: "boom".into() };
        assert_eq!(e.to_string(), "line 7: boom");
    }

    #[test]
    fn every_prefix_never_panics() {
        for f in ALL {
            for (i, _) in f.char_indices() {
                let _ = parse_ethtool_x(&f[..i]);
                let _ = parse_ethtool_x(&f[i..]);
            }
        }
    }

    proptest! {
        #[test]
        fn random_strings_never_panic(s in any::<String>()) {
            let _ = parse_ethtool_x(&s);
        }

        #[test]
        fn ethtoolish_strings_never_panic(s in "[0-9a-fA-F:xX ,.\\-+eE\\[\\]{}\"\\\\u\r\n]{0,200}") {
            let _ = parse_ethtool_x(&s);
            let _ = parse_ethtool_x(&format!("[{s}"));
            let _ = parse_ethtool_x(&format!("RX flow hash indirection table for eth0 with 4 RX ring(s):\n{s}"));
            let _ = parse_ethtool_x(&format!("RSS hash key:\n{s}"));
        }

        #[test]
        fn mutated_fixtures_never_panic(which in 0usize..6, pos in any::<prop::sample::Index>(), c in any::<char>()) {
            let f = ALL[which];
            let idx: Vec<usize> = f.char_indices().map(|(i, _)| i).collect();
            let at = idx[pos.index(idx.len())];
            let mut s = String::with_capacity(f.len() + 4);
            s.push_str(&f[..at]);
            s.push(c);
            let rest = &f[at..];
            s.push_str(rest.get(rest.chars().next().map_or(0, char::len_utf8)..).unwrap_or(""));
            let _ = parse_ethtool_x(&s);
        }
    }
}
