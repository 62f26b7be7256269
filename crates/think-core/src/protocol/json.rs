//! JSON text written into a buffer of its exact size. Growing a buffer by doubling holds
//! the old and the new buffer at once and leaves up to half of the final one unused, so for
//! a frame that carries a large file the usual `to_string` needs up to three times the
//! file's size, which the wasm linear memory then keeps for good. Serializing twice (once
//! to count) costs a little time and no memory.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::platform::RequestBody;

/// Counts the bytes written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `value`'s JSON text, counted without writing it.
pub fn json_len<T: Serialize + ?Sized>(value: &T) -> Result<usize, serde_json::Error> {
    let mut size = ByteCount(0);
    serde_json::to_writer(&mut size, value)?;
    Ok(size.0)
}

/// `value` as JSON bytes, in a buffer allocated once at its final size.
pub fn to_vec_exact<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(json_len(value)?);
    serde_json::to_writer(&mut out, value)?;
    Ok(out)
}

/// `value` as a request body of JSON bytes, written in fixed-size pieces: a body carrying a
/// large tool argument is never one block of its size (see [`RequestBody`]).
pub fn to_body<T: Serialize + ?Sized>(value: &T) -> Result<RequestBody, serde_json::Error> {
    let mut body = RequestBody::default();
    serde_json::to_writer(body.writer(), value)?;
    Ok(body)
}

/// Whether `value` serializes to exactly `text`, checked while serializing, without
/// writing it anywhere: then `text` can stand for the value in a document (a model's tool
/// arguments for the parsed input they gave).
pub fn serializes_to<T: Serialize + ?Sized>(value: &T, text: &str) -> bool {
    struct Compare<'a> {
        rest: &'a [u8],
        equal: bool,
    }
    impl std::io::Write for Compare<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            match self.rest.strip_prefix(buf) {
                Some(rest) if self.equal => self.rest = rest,
                _ => self.equal = false,
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut compare = Compare { rest: text.as_bytes(), equal: true };
    serde_json::to_writer(&mut compare, value).is_ok() && compare.equal && compare.rest.is_empty()
}

/// A JSON object written with one member's value taken from JSON text as it is: a chunk
/// announcing a large tool input is written from the model's argument text, without the
/// parsed input having to exist next to the chunk's text.
pub struct WithRawMember<'a> {
    /// The object; the member `key` in it is a placeholder (its value is not written).
    pub object: &'a Map<String, Value>,
    /// The member written from `raw`.
    pub key: &'a str,
    /// The member's value, as JSON text.
    pub raw: &'a RawValue,
}

impl Serialize for WithRawMember<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.object.len()))?;
        for (k, v) in self.object {
            if k == self.key {
                map.serialize_entry(k, self.raw)?;
            } else {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// `value` as JSON text, in a buffer allocated once at its final size.
pub fn to_string_exact<T: Serialize + ?Sized>(value: &T) -> String {
    // serde_json writes UTF-8 only, and serializing a `Value` or a plain struct cannot fail.
    to_vec_exact(value).ok().and_then(|v| String::from_utf8(v).ok()).unwrap_or_default()
}

/// Passes JSON text on escaped as the contents of a JSON string, as serde_json escapes a
/// string (`"`, `\\` and control characters), so a value's text can be embedded in an
/// enclosing document without first existing as a string of its own.
struct Escaper<W>(W);

impl<W: std::io::Write> std::io::Write for Escaper<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut start = 0;
        for (i, &b) in buf.iter().enumerate() {
            let escaped: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                0x08 => b"\\b",
                0x09 => b"\\t",
                0x0a => b"\\n",
                0x0c => b"\\f",
                0x0d => b"\\r",
                0x00..=0x1f => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.0.write_all(&buf[start..i])?;
                    self.0.write_all(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[(b >> 4) as usize],
                        HEX[(b & 15) as usize],
                    ])?;
                    start = i + 1;
                    continue;
                }
                _ => continue,
            };
            self.0.write_all(&buf[start..i])?;
            self.0.write_all(escaped)?;
            start = i + 1;
        }
        self.0.write_all(&buf[start..])?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `prefix`, then the JSON text of `value` escaped as a string's contents, then `suffix`, in
/// a buffer of its exact size: a frame whose field holds a chunk's JSON text, written
/// straight from the chunk.
pub fn embed_exact<T: Serialize + ?Sized>(prefix: &str, value: &T, suffix: &str) -> String {
    let mut size = Escaper(ByteCount(0));
    if serde_json::to_writer(&mut size, value).is_err() {
        return String::new();
    }
    let mut out = Vec::with_capacity(prefix.len() + size.0 .0 + suffix.len());
    out.extend_from_slice(prefix.as_bytes());
    if serde_json::to_writer(Escaper(&mut out), value).is_err() {
        return String::new();
    }
    out.extend_from_slice(suffix.as_bytes());
    String::from_utf8(out).unwrap_or_default()
}

/// The value of a JSON string literal already checked by serde_json (`raw` includes the
/// quotes), in a buffer of exactly its size (counted in a first pass). `None` for what is
/// not a string or has an escape this does not decode (a lone surrogate), which the caller
/// parses as usual.
pub fn unescape_string(raw: &str) -> Option<String> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let mut len = 0;
    unescape_with(inner, |piece| len += piece.len())?;
    let mut out = String::with_capacity(len);
    unescape_with(inner, |piece| out.push_str(piece))?;
    Some(out)
}

/// Decodes the contents of a JSON string, handing each run of text and each decoded
/// character to `put`.
fn unescape_with(inner: &str, mut put: impl FnMut(&str)) -> Option<()> {
    let bytes = inner.as_bytes();
    let (mut i, mut start) = (0, 0);
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        put(&inner[start..i]);
        let (ch, next) = escape_at(bytes, i)?;
        put(ch.encode_utf8(&mut [0; 4]));
        i = next;
        start = i;
    }
    put(&inner[start..]);
    Some(())
}

/// The character of the escape at `bytes[i]` (a backslash) and the index after it; `None`
/// for an escape this does not decode (a lone surrogate).
fn escape_at(bytes: &[u8], i: usize) -> Option<(char, usize)> {
    let hex = |at: usize| -> Option<u32> {
        u32::from_str_radix(std::str::from_utf8(bytes.get(at..at + 4)?).ok()?, 16).ok()
    };
    let ch = match *bytes.get(i + 1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let hi = hex(i + 2)?;
            if (0xD800..0xDC00).contains(&hi) {
                if bytes.get(i + 6..i + 8) != Some(b"\\u") {
                    return None;
                }
                let lo = hex(i + 8)?;
                if !(0xDC00..0xE000).contains(&lo) {
                    return None;
                }
                let ch = char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?;
                return Some((ch, i + 12));
            }
            return Some((char::from_u32(hi)?, i + 6));
        }
        _ => return None,
    };
    Some((ch, i + 2))
}

/// Unescapes the string literal at `range` of `bytes` (quotes included) into the start of
/// `bytes` itself, which escapes only ever shorten; returns the value's length. The caller
/// has checked the literal decodes.
fn unescape_in_place(bytes: &mut [u8], range: std::ops::Range<usize>) -> usize {
    let (mut read, end, mut write) = (range.start + 1, range.end - 1, 0);
    while read < end {
        let run = bytes[read..end].iter().position(|b| *b == b'\\').unwrap_or(end - read);
        bytes.copy_within(read..read + run, write);
        write += run;
        read += run;
        if read < end {
            let Some((ch, next)) = escape_at(bytes, read) else { break };
            let mut utf8 = [0; 4];
            let encoded = ch.encode_utf8(&mut utf8).as_bytes();
            bytes[write..write + encoded.len()].copy_from_slice(encoded);
            write += encoded.len();
            read = next;
        }
    }
    write
}

/// How deep the JSON of a frame, a chat request's body or a stored row may nest.
pub const DEEP_JSON_DEPTH: usize = 256;

/// Parses JSON that carries values inside an envelope: a stored message, journal entry or
/// stream chunk, and a client's frame or chat body, which sends the transcript back. A value
/// that came in at serde_json's nesting limit (127 levels, the most a tool result, a model
/// stream or a Code Mode result may have) sits a few levels deeper there, so serde_json alone
/// would refuse the row (the message was lost on reload) or the client's next request; here up
/// to [`DEEP_JSON_DEPTH`] levels parse, a bound checked before parsing, so the stack holds.
pub fn from_str_deep<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    let first = serde_json::from_str(text);
    match first {
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
            if nesting_of(text) > DEEP_JSON_DEPTH {
                return Err(e);
            }
            let mut de = serde_json::Deserializer::from_str(text);
            de.disable_recursion_limit();
            let value = T::deserialize(&mut de)?;
            de.end()?;
            Ok(value)
        }
        other => other,
    }
}

/// The deepest nesting of arrays and objects in JSON text, brackets inside strings skipped.
fn nesting_of(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A text over this size is parsed by [`from_str_exact`]'s own path; a smaller one as usual.
const EXACT_ABOVE_BYTES: usize = 64 * 1024;

/// Parses JSON text as serde_json does, except that a large string is unescaped into one
/// buffer of its final size. serde_json unescapes a string into a scratch buffer that grows
/// by doubling and then copies it out, so a 20 MB string (a `write`'s content, in the tool
/// call's arguments or the model's stream chunk) would hold about 70 MB at once. Here a large
/// object or array is split into its members' raw text, each handled the same way, and only
/// small pieces reach serde_json's parser. The result is the same `Value`.
pub fn from_str_exact(text: &str) -> Result<Value, serde_json::Error> {
    if text.len() <= EXACT_ABOVE_BYTES {
        return serde_json::from_str(text);
    }
    // Checks the whole text first (skipping a value buffers nothing), so a member parsed
    // apart cannot fail halfway.
    // What fails apart (a lone surrogate, which skipping accepts) is parsed whole again,
    // for serde_json's own error and position.
    let raw: &RawValue = serde_json::from_str(text)?;
    exact_value(raw, 0).or_else(|_| serde_json::from_str(text))
}

/// [`from_str_exact`] for a text the caller gives up: its largest string is unescaped in
/// place, into the text's own buffer, so a stream chunk that carries a whole file in one
/// argument string needs no second buffer for it.
pub fn from_string_exact(text: String) -> Result<Value, serde_json::Error> {
    if text.len() <= EXACT_ABOVE_BYTES {
        return serde_json::from_str(&text);
    }
    let raw: &RawValue = serde_json::from_str(&text)?;
    let base = text.as_ptr() as usize;
    let found = largest_string(raw, 0).filter(|(_, lit)| lit.get().len() > EXACT_ABOVE_BYTES);
    let Some((path, literal)) = found else { return from_str_exact(&text) };
    let start = literal.get().as_ptr() as usize - base;
    let range = start..start + literal.get().len();
    // Only a literal that decodes is unescaped in place; anything else takes the usual path.
    if unescape_with(&text[range.start + 1..range.end - 1], |_| {}).is_none() {
        return from_str_exact(&text);
    }
    let mut rest = String::with_capacity(text.len() - range.len() + 2);
    rest.push_str(&text[..range.start]);
    rest.push_str("\"\"");
    rest.push_str(&text[range.end..]);
    let mut value = match from_str_exact(&rest) {
        Ok(v) => v,
        Err(_) => return from_str_exact(&text),
    };
    drop(rest);
    let mut bytes = text.into_bytes();
    let len = unescape_in_place(&mut bytes, range);
    bytes.truncate(len);
    let content = String::from_utf8(bytes).map_err(serde::de::Error::custom)?;
    let mut slot = &mut value;
    for step in &path {
        slot = match step {
            Step::Key(k) => &mut slot[k.as_str()],
            Step::Index(i) => &mut slot[*i],
        };
    }
    *slot = Value::String(content);
    Ok(value)
}

/// One step of the path to a member.
enum Step {
    Key(String),
    Index(usize),
}

/// The largest string literal under `raw` (larger than [`EXACT_ABOVE_BYTES`] only), with
/// its path; `None` also where a duplicate key would make the path ambiguous.
fn largest_string(raw: &RawValue, depth: usize) -> Option<(Vec<Step>, &RawValue)> {
    let text = raw.get();
    if text.len() <= EXACT_ABOVE_BYTES || depth > MAX_SPLIT_DEPTH {
        return None;
    }
    let children: Vec<(Step, &RawValue)> = match text.as_bytes().first() {
        Some(b'"') => return Some((Vec::new(), raw)),
        Some(b'{') => {
            let Members(members) = serde_json::from_str(text).ok()?;
            let mut keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
            crate::platform::sort::sort(&mut keys);
            if keys.windows(2).any(|w| w[0] == w[1]) {
                return None;
            }
            members.into_iter().map(|(k, v)| (Step::Key(k), v)).collect()
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
            items.into_iter().enumerate().map(|(i, v)| (Step::Index(i), v)).collect()
        }
        _ => return None,
    };
    let (step, child) = children.into_iter().max_by_key(|(_, v)| v.get().len())?;
    let (mut path, literal) = largest_string(child, depth + 1)?;
    path.insert(0, step);
    Some((path, literal))
}

/// Nesting below which members are split; deeper text goes to serde_json whole, which
/// enforces its own limit.
const MAX_SPLIT_DEPTH: usize = 64;

fn exact_value(raw: &RawValue, depth: usize) -> Result<Value, serde_json::Error> {
    let text = raw.get();
    if text.len() <= EXACT_ABOVE_BYTES || depth > MAX_SPLIT_DEPTH {
        return serde_json::from_str(text);
    }
    match text.as_bytes().first() {
        Some(b'"') => match unescape_string(text) {
            Some(s) => Ok(Value::String(s)),
            None => serde_json::from_str(text),
        },
        Some(b'{') => {
            let Members(members) = serde_json::from_str(text)?;
            let mut map = Map::with_capacity(members.len());
            for (key, value) in members {
                map.insert(key, exact_value(value, depth + 1)?);
            }
            Ok(Value::Object(map))
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text)?;
            items
                .into_iter()
                .map(|v| exact_value(v, depth + 1))
                .collect::<Result<_, _>>()
                .map(Value::Array)
        }
        _ => serde_json::from_str(text),
    }
}

/// An object's members in document order, each value as its raw text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry::<String, &'de RawValue>()? {
                    out.push(entry);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// `text` as an ASCII-only JSON writer sends it: every other character `\\u`-escaped (JSON
/// text, where such a character can only be inside a string).
#[cfg(test)]
pub(crate) fn ascii_escaped(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c as u32 {
            0..=0x7f => vec![c.to_string()],
            _ => c.encode_utf16(&mut [0; 2]).iter().map(|u| format!("\\u{u:04x}")).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> String {
        format!("{}0{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn stored_json_reads_back_deeper_than_serde_json_alone() {
        assert!(serde_json::from_str::<Value>(&nested(128)).is_err(), "serde_json's own limit");
        let deep: Value = from_str_deep(&nested(DEEP_JSON_DEPTH)).unwrap();
        assert_eq!(deep.to_string(), nested(DEEP_JSON_DEPTH));
        let e = from_str_deep::<Value>(&nested(DEEP_JSON_DEPTH + 1)).unwrap_err();
        assert!(e.to_string().starts_with("recursion limit exceeded"), "{e}");
        // Brackets inside strings do not count; trailing text and bad syntax still fail.
        let quoted = format!("[\"{}\\\"{}\",{}]", "[".repeat(400), "{".repeat(400), nested(200));
        assert_eq!(from_str_deep::<Value>(&quoted).unwrap()[0].as_str().unwrap().len(), 801);
        assert!(from_str_deep::<Value>(&format!("{} x", nested(200))).is_err());
        assert!(from_str_deep::<Value>("{\"a\": }").is_err());
    }

    #[test]
    fn serializes_to_tells_whether_a_text_is_the_value_as_serde_writes_it() {
        let v = json!({"path": "/a", "content": "x\n\"é\u{1}".repeat(50_000)});
        assert!(serializes_to(&v, &v.to_string()));
        // Other spacing, another escape of the same character, a prefix or a longer text.
        assert!(!serializes_to(&v, &serde_json::to_string_pretty(&v).unwrap()));
        assert!(!serializes_to(&v, &v.to_string().replace('é', "\\u00e9")));
        let text = v.to_string();
        assert!(!serializes_to(&v, &text[..text.len() - 1]));
        assert!(!serializes_to(&v, &format!("{text} ")));
    }

    #[test]
    fn a_raw_member_is_written_as_its_text_in_its_place() {
        let input = json!({"content": "a\nb", "n": 1});
        let chunk = json!({"type": "tool-input-available", "toolCallId": "c", "input": null, "toolName": "write"});
        let raw: &RawValue = serde_json::from_str(r#"{"content":"a\nb","n":1}"#).unwrap();
        let object = chunk.as_object().unwrap();
        let text = to_string_exact(&WithRawMember { object, key: "input", raw });
        let mut parsed = chunk.clone();
        parsed["input"] = input;
        assert_eq!(text, parsed.to_string());
    }

    #[test]
    fn a_body_written_in_pieces_is_the_text_in_pieces_of_the_piece_size() {
        let v = json!({"messages": [{"content": "é\n".repeat(100_000)}]});
        let body = to_body(&v).unwrap();
        assert_eq!(body.to_vec(), v.to_string().into_bytes());
        assert_eq!(body.len(), v.to_string().len());
        let pieces = body.into_pieces();
        assert!(pieces.len() > 1);
        assert!(pieces.iter().all(
            |p| p.len() <= RequestBody::PIECE_BYTES && p.capacity() <= RequestBody::PIECE_BYTES
        ));
        assert!(pieces[..pieces.len() - 1].iter().all(|p| p.len() == RequestBody::PIECE_BYTES));
    }

    #[test]
    fn exact_text_equals_to_string_and_has_no_slack() {
        let v = json!({"type": "tool-input-available", "input": {"content": "é\n\"x\"".repeat(10_000)}});
        let text = to_string_exact(&v);
        assert_eq!(text, v.to_string());
        assert_eq!(text.capacity(), text.len());
    }

    #[test]
    fn embedded_text_is_the_text_as_a_json_string() {
        let v = json!({"s": "q\"uote\\ back\u{1}\u{8}\t\n\u{c}\r\u{1f} é \u{7f}"});
        let embedded = embed_exact("[", &v, "]");
        assert_eq!(embedded, format!("[{}]", json!(v.to_string()).to_string().trim_matches('"')));
        assert_eq!(embedded.capacity(), embedded.len());
    }

    #[test]
    fn exact_parse_equals_serde_json_and_holds_no_doubled_buffer() {
        let content = "line \"quoted\" \\ tab\t é 😀 \u{1}\n".repeat(20_000);
        let v = json!({"path": "/a", "content": content, "list": [content, {"deep": [1, 2.5, null, true, "x"]}], "n": -3});
        let text = v.to_string();
        assert!(text.len() > EXACT_ABOVE_BYTES);
        let parsed = from_str_exact(&text).unwrap();
        assert_eq!(parsed, v);
        // Key order is kept, as serde_json keeps it.
        assert_eq!(
            parsed.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["path", "content", "list", "n"]
        );
        let Value::String(s) = &parsed["content"] else { panic!() };
        assert_eq!(s.capacity(), s.len());
        // Escapes as an ASCII-only writer sends them, a lone surrogate, bad text, deep nesting.
        assert_eq!(from_str_exact(&ascii_escaped(&text)).unwrap(), v);
        for t in [text.clone(), ascii_escaped(&text)] {
            let owned = from_string_exact(t).unwrap();
            assert_eq!(owned, v);
            assert_eq!(
                owned.as_object().unwrap().keys().collect::<Vec<_>>(),
                ["path", "content", "list", "n"]
            );
        }
        let pad = "p".repeat(EXACT_ABOVE_BYTES);
        for bad in [
            format!(r#"{{"a":"\ud800x{pad}"}}"#),
            format!(r#"{{"a":"{pad}""#),
            format!(r#"{{"a":"{pad}"}} trailing"#),
            format!("{}\"{pad}\"{}", "[".repeat(200), "]".repeat(200)),
        ] {
            let want = serde_json::from_str::<Value>(&bad).map_err(|e| e.to_string());
            assert_eq!(from_str_exact(&bad).map_err(|e| e.to_string()), want, "{}", &bad[..40]);
            assert_eq!(from_string_exact(bad.clone()).map_err(|e| e.to_string()), want);
        }
    }
}
