//! JSON text written into a buffer of its exact size. Growing a buffer by doubling holds
//! the old and the new buffer at once and leaves up to half of the final one unused, so for
//! a frame that carries a large file the usual `to_string` needs up to three times the
//! file's size, which the wasm linear memory then keeps for good. Serializing twice (once
//! to count) costs a little time and no memory.

use serde::Serialize;

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
/// quotes), in a buffer no longer than the literal. `None` for what is not a string or has
/// an escape this does not decode (a lone surrogate), which the caller parses as usual.
pub fn unescape_string(raw: &str) -> Option<String> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let bytes = inner.as_bytes();
    let mut out = String::with_capacity(inner.len());
    let hex = |at: usize| -> Option<u32> { u32::from_str_radix(inner.get(at..at + 4)?, 16).ok() };
    let (mut i, mut start) = (0, 0);
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        out.push_str(&inner[start..i]);
        let c = *bytes.get(i + 1)?;
        i += 2;
        let ch = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex(i)?;
                i += 4;
                if (0xD800..0xDC00).contains(&hi) {
                    if inner.get(i..i + 2) != Some("\\u") {
                        return None;
                    }
                    let lo = hex(i + 2)?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return None;
                    }
                    i += 6;
                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                } else {
                    char::from_u32(hi)?
                }
            }
            _ => return None,
        };
        out.push(ch);
        start = i;
    }
    out.push_str(&inner[start..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
