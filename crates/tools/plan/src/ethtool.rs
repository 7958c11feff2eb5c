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
//! JSON input (detected by a leading `[` or `{`) is read with a small private
//! parser (nesting depth limited to 64): the first object of the top-level
//! array (or the top-level object) supplies `ifname`, `rss-indirection-table`,
//! `rss-hash-key`, `rss-hash-function`, `rss-input-transformation`
//! (`symmetric-xor`, `symmetric-or-xor`) and, if present, `context` or
//! `rss-context`; other keys are ignored. JSON carries no ring count, so
//! `rx_rings` is `None`.
#![forbid(unsafe_code)]

use std::fmt;

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

const MAX_JSON_DEPTH: usize = 64;

#[derive(Debug)]
enum Json {
    Null,
    Bool(bool),
    /// The number's text.
    Num(String),
    Str(String),
    Arr(Vec<Node>),
    Obj(Vec<(String, Node)>),
}

#[derive(Debug)]
struct Node {
    line: usize,
    val: Json,
}

impl Node {
    fn kind(&self) -> &'static str {
        match self.val {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Num(_) => "a number",
            Json::Str(_) => "a string",
            Json::Arr(_) => "an array",
            Json::Obj(_) => "an object",
        }
    }

    fn get(&self, key: &str) -> Option<&Node> {
        match &self.val {
            Json::Obj(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_u32(&self) -> Option<u32> {
        match &self.val {
            Json::Num(n) => dec_u32(n),
            _ => None,
        }
    }
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
    line: usize,
}

impl JsonParser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => break,
            }
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), EthtoolParseError> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.unexpected(&format!("'{}'", c as char))
        }
    }

    fn unexpected<T>(&self, wanted: &str) -> Result<T, EthtoolParseError> {
        match self.s.get(self.i..).and_then(|r| std::str::from_utf8(r).ok()).and_then(|r| r.chars().next()) {
            Some(c) => err(self.line, format!("JSON: expected {wanted}, found '{}'", c.escape_default())),
            None => match self.s.get(self.i) {
                Some(b) => err(self.line, format!("JSON: expected {wanted}, found byte {b:#04x}")),
                None => err(self.line, format!("JSON: expected {wanted}, found end of input")),
            },
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, EthtoolParseError> {
        self.ws();
        let line = self.line;
        if depth > MAX_JSON_DEPTH {
            return err(line, "JSON: nesting too deep");
        }
        let val = match self.peek() {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        if self.peek() != Some(b'"') {
                            return self.unexpected("a string key");
                        }
                        let k = self.string()?;
                        self.expect(b':')?;
                        let v = self.value(depth + 1)?;
                        members.push((k, v));
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return self.unexpected("',' or '}'"),
                        }
                    }
                }
                Json::Obj(members)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                } else {
                    loop {
                        items.push(self.value(depth + 1)?);
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return self.unexpected("',' or ']'"),
                        }
                    }
                }
                Json::Arr(items)
            }
            Some(b'"') => Json::Str(self.string()?),
            Some(b't') => self.literal("true", Json::Bool(true))?,
            Some(b'f') => self.literal("false", Json::Bool(false))?,
            Some(b'n') => self.literal("null", Json::Null)?,
            Some(b'-' | b'0'..=b'9') => Json::Num(self.number()?),
            _ => return self.unexpected("a JSON value"),
        };
        Ok(Node { line, val })
    }

    fn literal(&mut self, word: &str, val: Json) -> Result<Json, EthtoolParseError> {
        if self.s.get(self.i..self.i + word.len()) == Some(word.as_bytes()) {
            self.i += word.len();
            Ok(val)
        } else {
            self.unexpected(&format!("'{word}'"))
        }
    }

    fn number(&mut self) -> Result<String, EthtoolParseError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = |p: &mut Self| {
            let s = p.i;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.i += 1;
            }
            p.i > s
        };
        if !digits(self) {
            return self.unexpected("a digit");
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !digits(self) {
                return self.unexpected("a digit");
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digits(self) {
                return self.unexpected("a digit");
            }
        }
        let bytes = self.s.get(start..self.i).unwrap_or(&[]);
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    fn hex4(&mut self) -> Result<u32, EthtoolParseError> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek().and_then(|c| (c as char).to_digit(16)) {
                Some(d) => d,
                None => return self.unexpected("a hex digit"),
            };
            v = v * 16 + d;
            self.i += 1;
        }
        Ok(v)
    }

    /// Reads a string; `self.i` is at the opening quote.
    fn string(&mut self) -> Result<String, EthtoolParseError> {
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return err(self.line, "JSON: unterminated string");
            };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return err(self.line, "JSON: unterminated string");
                    };
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let mut cp = hi;
                            if (0xd800..0xdc00).contains(&hi) && self.s.get(self.i..self.i + 2) == Some(b"\\u") {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xdc00..0xe000).contains(&lo) {
                                    cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
                                } else {
                                    self.i = save;
                                }
                            }
                            char::from_u32(cp).unwrap_or('\u{fffd}')
                        }
                        _ => return err(self.line, format!("JSON: bad escape '\\{}'", (e as char).escape_default())),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1f => return err(self.line, "JSON: control character in string"),
                _ => out.push(c),
            }
        }
        match String::from_utf8(out) {
            Ok(s) => Ok(s),
            Err(_) => err(self.line, "JSON: invalid UTF-8 in string"),
        }
    }
}

/// An array of unsigned integers, each at most `max`.
fn json_uint_array(node: &Node, what: &str, max: u32) -> Result<Vec<u32>, EthtoolParseError> {
    let Json::Arr(items) = &node.val else {
        return err(node.line, format!("JSON: {what} must be an array, found {}", node.kind()));
    };
    if items.is_empty() {
        return err(node.line, format!("JSON: {what} is empty"));
    }
    items
        .iter()
        .map(|it| match it.as_u32() {
            Some(v) if v <= max => Ok(v),
            _ => err(it.line, format!("JSON: {what} entries must be integers in 0..={max}")),
        })
        .collect()
}

fn json_bool(node: &Node, what: &str) -> Result<bool, EthtoolParseError> {
    match node.val {
        Json::Bool(b) => Ok(b),
        _ => err(node.line, format!("JSON: {what} must be true or false, found {}", node.kind())),
    }
}

fn parse_json(text: &str) -> Result<EthtoolRss, EthtoolParseError> {
    let mut p = JsonParser { s: text.as_bytes(), i: 0, line: 1 };
    // Skip a byte-order mark.
    if text.starts_with('\u{feff}') {
        p.i = '\u{feff}'.len_utf8();
    }
    let root = p.value(0)?;
    p.ws();
    if p.i < p.s.len() {
        return p.unexpected("end of input");
    }
    let obj = match &root.val {
        Json::Arr(items) => match items.first() {
            Some(first) => first,
            None => return err(root.line, "JSON: empty array, no interface"),
        },
        Json::Obj(_) => &root,
        _ => return err(root.line, "JSON: expected an array or object"),
    };
    if !matches!(obj.val, Json::Obj(_)) {
        return err(obj.line, format!("JSON: expected an object, found {}", obj.kind()));
    }
    let mut out = EthtoolRss {
        ifname: None,
        rx_rings: None,
        context: None,
        indirection: None,
        key: None,
        hash_function: None,
        symmetric_xor: None,
        symmetric_or_xor: None,
    };
    if let Some(n) = obj.get("ifname") {
        match &n.val {
            Json::Str(s) => out.ifname = Some(s.clone()),
            _ => return err(n.line, format!("JSON: ifname must be a string, found {}", n.kind())),
        }
    }
    for key in ["context", "rss-context"] {
        if let Some(n) = obj.get(key) {
            match n.as_u32() {
                Some(c) => out.context = Some(c),
                None => return err(n.line, format!("JSON: {key} must be an unsigned integer")),
            }
        }
    }
    if let Some(n) = obj.get("rss-indirection-table") {
        out.indirection = Some(json_uint_array(n, "rss-indirection-table", u32::MAX)?);
    }
    if let Some(n) = obj.get("rss-hash-key") {
        let words = json_uint_array(n, "rss-hash-key", 255)?;
        let key = words.into_iter().map(|w| w as u8).collect();
        out.key = Some(key);
    }
    if let Some(n) = obj.get("rss-hash-function") {
        match &n.val {
            Json::Str(s) => out.hash_function = Some(s.clone()),
            _ => return err(n.line, format!("JSON: rss-hash-function must be a string, found {}", n.kind())),
        }
    }
    if let Some(x) = obj.get("rss-input-transformation") {
        if !matches!(x.val, Json::Obj(_)) {
            return err(x.line, format!("JSON: rss-input-transformation must be an object, found {}", x.kind()));
        }
        if let Some(n) = x.get("symmetric-xor") {
            out.symmetric_xor = Some(json_bool(n, "symmetric-xor")?);
        }
        if let Some(n) = x.get("symmetric-or-xor") {
            out.symmetric_or_xor = Some(json_bool(n, "symmetric-or-xor")?);
        }
    }
    Ok(out)
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
        assert!(parse_ethtool_x("{\"ifname\": \"\\ud800\\u0041\"}").is_ok());
        let deep = "[".repeat(100_000);
        assert!(parse_ethtool_x(&deep).unwrap_err().message.contains("deep"));
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
