//! Scanning text fast: splitting lines and finding fixed strings, on `memchr` (whose
//! searches use wasm SIMD, as `.cargo/config.toml` builds with `+simd128`).

use memchr::memmem;

/// Calls `f(start, end)` for each line of `bytes` (split on `\n`, so `n` newlines make
/// `n + 1` lines) until it returns false.
#[inline]
pub(crate) fn for_each_line(bytes: &[u8], mut f: impl FnMut(usize, usize) -> bool) {
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        if !f(start, end) {
            return;
        }
        start = end + 1;
    }
    f(start, bytes.len());
}

/// Finds a fixed string, exactly or regardless of ASCII case.
pub(crate) enum Literal {
    /// `memchr`'s substring search: SIMD candidates, then two-way, linear time.
    Exact(memmem::Finder<'static>),
    /// Ignoring ASCII case: the needle's least common byte is found in either case with
    /// `memchr2`, and the whole needle compared there. When the comparisons cost much more
    /// than the scan (text that is nearly the needle everywhere), the rest of the search
    /// goes to a linear-time `regex` automaton instead.
    Folded {
        /// Lower-cased.
        needle: Vec<u8>,
        /// Offset of the byte scanned for.
        rare: usize,
        /// The automaton, built on first need.
        fallback: std::cell::OnceCell<Option<regex::bytes::Regex>>,
    },
}

/// How common a byte is in text and code (higher is more common), so the folded search
/// looks for a byte that few positions hold.
fn commonness(b: u8) -> u32 {
    const LETTERS: &[u8] = b"etaoinsrhldcumfpgwybvkxjqz";
    let lower = b.to_ascii_lowercase();
    if let Some(i) = LETTERS.iter().position(|&c| c == lower) {
        return 200 - 4 * i as u32;
    }
    match b {
        b' ' | b'\t' => 255,
        b'.' | b',' | b';' | b':' | b'(' | b')' | b'_' | b'-' | b'=' | b'/' | b'"' | b'\'' => 150,
        b'0'..=b'9' => 110,
        _ => 60,
    }
}

impl Literal {
    /// A finder for `needle` (not empty), ignoring ASCII case when `fold`.
    pub(crate) fn new(needle: &[u8], fold: bool) -> Literal {
        if !fold || !needle.iter().any(u8::is_ascii_alphabetic) {
            return Literal::Exact(memmem::Finder::new(needle).into_owned());
        }
        let rare = (0..needle.len()).min_by_key(|&i| (commonness(needle[i]), i)).unwrap_or(0);
        Literal::Folded {
            needle: needle.to_ascii_lowercase(),
            rare,
            fallback: std::cell::OnceCell::new(),
        }
    }

    /// The needle's length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Literal::Exact(f) => f.needle().len(),
            Literal::Folded { needle, .. } => needle.len(),
        }
    }

    /// Start of the first occurrence at or after `from`.
    pub(crate) fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        let rest = hay.get(from..)?;
        match self {
            Literal::Exact(f) => f.find(rest).map(|at| from + at),
            Literal::Folded { needle, rare, fallback } => {
                let b = needle[*rare];
                let (lo, hi) = (b.to_ascii_lowercase(), b.to_ascii_uppercase());
                let last = hay.len().checked_sub(needle.len())?;
                let mut compared = 0usize;
                for hit in memchr::memchr2_iter(lo, hi, rest) {
                    let Some(start) = (from + hit).checked_sub(*rare) else { continue };
                    if start < from {
                        continue;
                    }
                    if start > last {
                        return None;
                    }
                    if hay[start..start + needle.len()].eq_ignore_ascii_case(needle) {
                        return Some(start);
                    }
                    compared += needle.len();
                    if compared > 8 * hit + 65_536 {
                        let automaton = fallback.get_or_init(|| {
                            let text = String::from_utf8_lossy(needle);
                            regex::bytes::Regex::new(&format!("(?i-u){}", regex::escape(&text)))
                                .ok()
                        });
                        if let Some(re) = automaton {
                            return re.find_at(hay, start).map(|m| m.start());
                        }
                    }
                }
                None
            }
        }
    }
}

/// Where `needle` first occurs in `hay` (exactly), as `str::find` would say.
pub(crate) fn find(hay: &str, needle: &str) -> Option<usize> {
    memmem::find(hay.as_bytes(), needle.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_exactly_like_split_on_newline() {
        let mut text = Vec::new();
        for i in 0..300u32 {
            // Every byte value next to newlines, including 0x0B and 0x09 around 0x0A.
            text.push((i % 256) as u8);
            if i % 7 == 0 || i % 13 == 0 {
                text.push(b'\n');
            }
            if i % 11 == 0 {
                text.extend_from_slice(b"\n\n\x0b\n");
            }
        }
        for len in [0, 1, 7, 8, 9, 15, 16, 17, text.len()] {
            let slice = &text[..len.min(text.len())];
            let mut lines = Vec::new();
            for_each_line(slice, |a, b| {
                lines.push(&slice[a..b]);
                true
            });
            assert_eq!(lines, slice.split(|&b| b == b'\n').collect::<Vec<_>>(), "len {len}");
        }
    }

    #[test]
    fn folded_search_stays_linear_on_text_that_is_nearly_the_needle() {
        let needle = format!("{}b", "a".repeat(5_000));
        let hay = "a".repeat(1_000_000);
        let lit = Literal::new(needle.as_bytes(), true);
        let (found, took) = crate::tools::workspace::bounds::within(2.0, "folded literal", || {
            lit.find(hay.as_bytes(), 0)
        });
        assert_eq!(found, None, "{took}");
        let hay = format!("{hay}B");
        assert_eq!(lit.find(hay.as_bytes(), 0), Some(1_000_000 - 5_000));
    }

    #[test]
    fn literals_are_found_like_a_naive_search() {
        let hay = b"Hello hELLO world, WORLD! x-y x_Y 123 hello";
        for (needle, fold) in [
            (&b"hello"[..], true),
            (b"hello", false),
            (b"WORLD", true),
            (b"x_y", true),
            (b"123", true),
            (b"!", false),
            (b"zz", true),
        ] {
            let lit = Literal::new(needle, fold);
            for from in 0..=hay.len() {
                let naive = (from..=hay.len().saturating_sub(needle.len())).find(|&i| {
                    let w = &hay[i..i + needle.len()];
                    if fold {
                        w.eq_ignore_ascii_case(needle)
                    } else {
                        w == needle
                    }
                });
                assert_eq!(
                    lit.find(hay, from),
                    naive,
                    "{:?} fold {fold} from {from}",
                    std::str::from_utf8(needle)
                );
            }
        }
    }
}
