//! Media-type detection for `read` and Think's size formatting, matched to Think's rules so
//! the same file is reported the same way.

/// `application/octet-stream` and `binary/octet-stream` say nothing about the content.
pub fn is_generic(mime: &str) -> bool {
    mime == "application/octet-stream" || mime == "binary/octet-stream"
}

/// `type/subtype` without parameters, lowercased; `None` when empty.
pub fn normalize_media_type(mime: &str) -> Option<String> {
    let m = crate::platform::case::to_lowercase(mime.split(';').next().unwrap_or("").trim());
    (!m.is_empty()).then_some(m)
}

/// Types `read` returns as numbered text lines.
pub fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json"
                | "application/javascript"
                | "application/typescript"
                | "application/xml"
                | "application/x-javascript"
        )
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
}

/// The media type announced by the bytes' magic numbers, if any.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
        return Some("image/png");
    }
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Some("image/jpeg");
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Some("image/gif");
    }
    if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP".as_slice()) {
        return Some("image/webp");
    }
    if bytes.starts_with(b"%PDF-") {
        return Some("application/pdf");
    }
    // ASCII lowercasing finds the same `<svg` full lowercasing would: no other character
    // lowercases to `<`, `s`, `v` or `g`.
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).to_ascii_lowercase();
    if head.contains("<svg") {
        return Some("image/svg+xml");
    }
    None
}

/// Think's `looksLikeText`: no NUL byte and under 1% replacement characters in the decoded
/// first 4096 bytes (counted, as in JS, in UTF-16 units).
pub fn looks_like_text(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return true;
    }
    if bytes.contains(&0) {
        return false;
    }
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let units: usize = text.chars().map(char::len_utf16).sum();
    if units == 0 {
        return true;
    }
    let bad = text.chars().filter(|&c| c == '\u{FFFD}').count();
    (bad as f64) / (units as f64) < 0.01
}

/// Think's `formatSize`: `N B`, `x.y KB` or `x.y MB`, with JS `toFixed(1)` rounding
/// (halves round up), computed exactly in integers ([`push_size`] as a `String`).
#[cfg(test)]
pub fn format_size(bytes: u64) -> String {
    let mut out = String::new();
    push_size(&mut out, bytes);
    out
}

/// Appends [`format_size`]'s text to `out`, without `format!`: `list` writes one per entry,
/// and two formatting calls per entry were a large part of a 1,000-entry page.
pub(crate) fn push_size(out: &mut String, bytes: u64) {
    const KB: u64 = 1024;
    const MB: u64 = 1024 * 1024;
    let one_decimal = |out: &mut String, unit: u64| {
        let tenths = (u128::from(bytes) * 10 + u128::from(unit) / 2) / u128::from(unit);
        push_decimal(out, (tenths / 10) as u64);
        out.push('.');
        push_decimal(out, (tenths % 10) as u64);
    };
    if bytes < KB {
        push_decimal(out, bytes);
        out.push_str(" B");
    } else if bytes < MB {
        one_decimal(out, KB);
        out.push_str(" KB");
    } else {
        one_decimal(out, MB);
        out.push_str(" MB");
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let i = decimal_digits(n, &mut digits);
    out.extend(digits[i..].iter().map(|&d| char::from(d)));
}

/// Writes `n`'s decimal digits at the end of `buf` (which must hold them: 20 bytes hold
/// any `u64`) and returns where they start; without `format!`, for the per-entry and
/// per-line labels of `list` and `read`.
pub(crate) fn decimal_digits(mut n: u64, buf: &mut [u8]) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return i;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_think() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1.0 KB");
        assert_eq!(format_size(1280), "1.3 KB", "JS toFixed rounds the exact half up");
        assert_eq!(format_size(10 * 1024 + 100), "10.1 KB");
        assert_eq!(format_size(2304), "2.3 KB", "2.25 KB: the tie rounds up");
        assert_eq!(format_size(2_621_440), "2.5 MB");
        assert_eq!(format_size(9_437_184 + 262_144), "9.3 MB", "9.25 MB: the tie rounds up");
        assert_eq!(format_size(1024 * 1024 - 1), "1024.0 KB");
        assert_eq!(format_size(1024 * 1024), "1.0 MB");
        assert_eq!(format_size(3_670_016), "3.5 MB");
        assert_eq!(format_size(5_000_000), "4.8 MB");
    }

    #[test]
    fn sniffing() {
        assert_eq!(sniff(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0]), Some("image/png"));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a..."), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"%PDF-1.7"), Some("application/pdf"));
        assert_eq!(sniff(b"<?xml version=\"1.0\"?>\n<SVG width=\"1\">"), Some("image/svg+xml"));
        assert_eq!(sniff(b"hello"), None);
    }

    #[test]
    fn text_detection() {
        assert!(looks_like_text(b""));
        assert!(looks_like_text("plain text ✓".as_bytes()));
        assert!(!looks_like_text(b"a\0b"));
        assert!(!looks_like_text(&[0xC3, 0x28, 0xA0, 0xA1, 0x41]));
        assert!(is_text("text/markdown"));
        assert!(is_text("application/ld+json"));
        assert!(!is_text("application/zip"));
        assert_eq!(normalize_media_type(" Text/HTML; charset=utf-8"), Some("text/html".into()));
        assert_eq!(normalize_media_type(""), None);
    }
}
