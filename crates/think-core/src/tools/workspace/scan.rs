//! Scanning text fast: splitting lines and finding fixed strings, on `memchr` (whose
//! searches use wasm SIMD, as `.cargo/config.toml` builds with `+simd128`), except the
//! ASCII-case-insensitive search, whose hand-written scan wins a bench row (see
//! [`FoldedScan`]).

use memchr::memmem;

const ONES: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;

/// `b` in every byte of a word.
#[inline(always)]
pub(crate) fn splat(b: u8) -> u64 {
    ONES * u64::from(b)
}

/// The high bit of each byte of `x` that is zero, and no other bit (exact: no carries
/// cross bytes).
#[inline(always)]
pub(crate) fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW7).wrapping_add(LOW7)) | x | LOW7)
}

/// Knuth–Morris–Pratt's failure table of `needle`: for each prefix, the length of its longest
/// proper prefix that is also its suffix (the edit tool's overlapping count and the folded
/// literal scan's linear fallback both search with it).
pub(crate) fn kmp_failure(needle: &[u8]) -> Vec<usize> {
    let mut fail = vec![0; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            k = fail[k - 1];
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        fail[i] = k;
    }
    fail
}

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
    Exact(Box<memmem::Finder<'static>>),
    /// Ignoring ASCII case.
    Folded(FoldedScan),
}

/// How common a byte is in text and code (higher is more common); the scan looks for the
/// needle's least common bytes so that few positions need a full comparison.
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

/// One byte to look for: `fold` is OR-ed into the haystack first (0x20 for a letter when
/// case is ignored, so both cases meet the lower-case `byte`).
#[derive(Clone, Copy)]
struct ByteProbe {
    fold: u8,
    byte: u8,
}

impl ByteProbe {
    fn new(b: u8, ignore_case: bool) -> ByteProbe {
        match ignore_case && b.is_ascii_alphabetic() {
            true => ByteProbe { fold: 0x20, byte: b.to_ascii_lowercase() },
            false => ByteProbe { fold: 0, byte: b },
        }
    }

    /// The high bit of each byte of `word` that is the probed byte.
    #[inline(always)]
    fn hits(self, word: u64) -> u64 {
        zero_bytes((word | splat(self.fold)) ^ splat(self.byte))
    }
}

/// The little-endian word at `at`, or 0 past the end (callers stay in bounds).
#[inline(always)]
fn word_at(hay: &[u8], at: usize) -> u64 {
    hay.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()).map_or(0, u64::from_le_bytes)
}

/// The ASCII-case-insensitive search: scans many start positions at a time for the
/// needle's two least common bytes at their offsets (sixteen with wasm SIMD, eight in a
/// 64-bit word elsewhere), and compares the whole needle only where both are present. Kept
/// hand-written because it wins the `grep literal (1,000 files)` bench row (grep is
/// case-insensitive by default): back to back, 15.0 ms and 3.5× Think with it, 16.3 ms and
/// 2.4× with `memchr2` on the rarest byte, where a common letter as the only probe stops the
/// scan every few dozen bytes.
pub(crate) struct FoldedScan {
    /// Lower-cased.
    needle: Vec<u8>,
    /// Offsets in `needle` of the two bytes scanned for (equal for a one-byte needle).
    rare: [usize; 2],
    /// Bytes compared in full so far, to hand over to a linear automaton when comparisons
    /// dominate (text that is nearly the needle everywhere).
    compared: std::cell::Cell<usize>,
    /// The needle's KMP failure table, built on the first hand-over.
    fallback: std::cell::OnceCell<Vec<usize>>,
}

impl FoldedScan {
    fn new(needle: &[u8]) -> FoldedScan {
        let fold = true;
        let mut order: Vec<usize> = (0..needle.len()).collect();
        order.sort_by_key(|&i| (commonness(needle[i]), i));
        let first = order.first().copied().unwrap_or(0);
        let same = |a: u8, b: u8| if fold { a.eq_ignore_ascii_case(&b) } else { a == b };
        // The second byte should differ from the first, or it filters nothing.
        let second =
            order.iter().copied().find(|&i| !same(needle[i], needle[first])).unwrap_or(first);
        let needle = if fold { needle.to_ascii_lowercase() } else { needle.to_vec() };
        FoldedScan {
            needle,
            rare: [first, second],
            compared: std::cell::Cell::new(0),
            fallback: std::cell::OnceCell::new(),
        }
    }

    fn probes(&self) -> (ByteProbe, ByteProbe) {
        let [i, j] = self.rare;
        (ByteProbe::new(self.needle[i], true), ByteProbe::new(self.needle[j], true))
    }

    #[inline(always)]
    fn matches_at(&self, hay: &[u8], start: usize) -> bool {
        self.compared.set(self.compared.get() + self.needle.len());
        hay[start..start + self.needle.len()].eq_ignore_ascii_case(&self.needle)
    }

    /// Whether comparisons have cost far more than the scan, from `from` on.
    fn too_costly(&self, scanned: usize) -> bool {
        self.compared.get() > 8 * scanned + 65_536
    }

    /// The rest of the search in linear time: Knuth-Morris-Pratt over ASCII-folded bytes (a
    /// few lines where a regex automaton was used before, which the wasm build no longer has).
    fn find_linear(&self, hay: &[u8], from: usize) -> Option<usize> {
        let needle = &self.needle;
        if needle.is_empty() {
            return (from <= hay.len()).then_some(from);
        }
        let fail = self.fallback.get_or_init(|| kmp_failure(needle));
        let mut k = 0;
        for (i, &b) in hay.iter().enumerate().skip(from) {
            let b = b.to_ascii_lowercase();
            while k > 0 && b != needle[k] {
                k = fail[k - 1];
            }
            if b == needle[k] {
                k += 1;
                if k == needle.len() {
                    return Some(i + 1 - k);
                }
            }
        }
        None
    }

    /// Start of the first occurrence at or after `from`.
    fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        let last = hay.len().checked_sub(self.needle.len())?;
        self.compared.set(0);
        // wasm has no runtime feature detection: SIMD is part of every Workers runtime, and
        // the module needs it anyway (bytecount uses simd128 the same way).
        #[cfg(target_arch = "wasm32")]
        let (found, from) = self.find_simd(hay, from, last);
        #[cfg(target_arch = "wasm32")]
        if found.is_some() || from > last {
            return found;
        }
        self.find_words(hay, from, last)
    }

    /// Eight start positions per step in a 64-bit word, then one at a time.
    fn find_words(&self, hay: &[u8], from: usize, last: usize) -> Option<usize> {
        let [i, j] = self.rare;
        let (first, second) = self.probes();
        let mut start = from;
        // `start + 7 <= last` keeps both loads in bounds.
        while start + 8 <= last + 1 {
            let mut mask =
                first.hits(word_at(hay, start + i)) & second.hits(word_at(hay, start + j));
            while mask != 0 {
                let at = start + (mask.trailing_zeros() / 8) as usize;
                mask &= mask - 1;
                if self.matches_at(hay, at) {
                    return Some(at);
                }
            }
            if self.too_costly(start - from) {
                return self.find_linear(hay, start);
            }
            start += 8;
        }
        (start..=last).find(|&at| self.matches_at(hay, at))
    }

    /// Sixteen start positions per step; returns a match, or where the rest of the search
    /// (fewer than sixteen positions) starts.
    #[cfg(target_arch = "wasm32")]
    #[target_feature(enable = "simd128")]
    fn find_simd(&self, hay: &[u8], from: usize, last: usize) -> (Option<usize>, usize) {
        use core::arch::wasm32::{
            u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_and, v128_load, v128_or,
        };
        let [i, j] = self.rare;
        let (first, second) = self.probes();
        let (f1, b1) = (u8x16_splat(first.fold), u8x16_splat(first.byte));
        let (f2, b2) = (u8x16_splat(second.fold), u8x16_splat(second.byte));
        let mut start = from;
        while start + 16 <= last + 1 {
            // SAFETY: `start + 15 <= last` and `i, j < needle.len()`, so both 16-byte loads
            // end at most at `last + needle.len() - 1 < hay.len()`.
            let (w1, w2) = unsafe {
                (
                    v128_load(hay.as_ptr().add(start + i) as *const v128),
                    v128_load(hay.as_ptr().add(start + j) as *const v128),
                )
            };
            let both = v128_and(u8x16_eq(v128_or(w1, f1), b1), u8x16_eq(v128_or(w2, f2), b2));
            let mut bits = u8x16_bitmask(both) as u32;
            while bits != 0 {
                let at = start + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.matches_at(hay, at) {
                    return (Some(at), start);
                }
            }
            if self.too_costly(start - from) {
                return (self.find_linear(hay, start), hay.len());
            }
            start += 16;
        }
        (None, start)
    }
}

impl Literal {
    /// A finder for `needle` (not empty), ignoring ASCII case when `fold`.
    pub(crate) fn new(needle: &[u8], fold: bool) -> Literal {
        if !fold || !needle.iter().any(u8::is_ascii_alphabetic) {
            return Literal::Exact(Box::new(memmem::Finder::new(needle).into_owned()));
        }
        Literal::Folded(FoldedScan::new(needle))
    }

    /// The needle's length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Literal::Exact(f) => f.needle().len(),
            Literal::Folded(scan) => scan.needle.len(),
        }
    }

    /// Start of the first occurrence at or after `from`.
    pub(crate) fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        let rest = hay.get(from..)?;
        match self {
            Literal::Exact(f) => f.find(rest).map(|at| from + at),
            Literal::Folded(scan) => scan.find(hay, from),
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
