//! Scanning text many bytes at a time: splitting lines and finding fixed strings. Tools go
//! over whole files, and on wasm32 (without the crate-wide `simd128` feature) the searches
//! in `core` and `memchr` go one byte or one 32-bit word at a time, which costs more than
//! the rest of the work. Here lines are split in 64-bit words (native in wasm) and strings
//! are found with wasm SIMD.

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

/// Calls `f(start, end)` for each line of `bytes` (split on `\n`, so `n` newlines make
/// `n + 1` lines) until it returns false. Newlines are found sixteen bytes per step with
/// wasm SIMD, eight in a 64-bit word elsewhere.
#[inline(always)]
pub(crate) fn for_each_line(bytes: &[u8], mut f: impl FnMut(usize, usize) -> bool) {
    let mut start = 0;
    #[cfg(target_arch = "wasm32")]
    let at = match lines_simd(bytes, &mut start, &mut f) {
        Some(at) => at,
        None => return,
    };
    #[cfg(not(target_arch = "wasm32"))]
    let at = 0;
    if lines_words(bytes, at, &mut start, &mut f) {
        f(start, bytes.len());
    }
}

/// The lines ending in `bytes[from..]`, eight bytes per step; false when `f` stopped.
#[inline(always)]
fn lines_words(
    bytes: &[u8],
    from: usize,
    start: &mut usize,
    f: &mut impl FnMut(usize, usize) -> bool,
) -> bool {
    const NL: u64 = ONES * b'\n' as u64;
    let mut at = from;
    while at + 8 <= bytes.len() {
        let b = &bytes[at..at + 8];
        let mut mask =
            zero_bytes(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) ^ NL);
        while mask != 0 {
            let end = at + (mask.trailing_zeros() / 8) as usize;
            mask &= mask - 1;
            if !f(*start, end) {
                return false;
            }
            *start = end + 1;
        }
        at += 8;
    }
    for (k, &byte) in bytes[at..].iter().enumerate() {
        if byte == b'\n' {
            if !f(*start, at + k) {
                return false;
            }
            *start = at + k + 1;
        }
    }
    true
}

/// The lines ending in whole sixteen-byte blocks; returns where the rest starts, or `None`
/// when `f` stopped.
#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
fn lines_simd(
    bytes: &[u8],
    start: &mut usize,
    f: &mut impl FnMut(usize, usize) -> bool,
) -> Option<usize> {
    use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_load};
    let nl = u8x16_splat(b'\n');
    let mut at = 0;
    while at + 16 <= bytes.len() {
        // SAFETY: `at + 16 <= bytes.len()`.
        let block = unsafe { v128_load(bytes.as_ptr().add(at) as *const v128) };
        let mut bits = u8x16_bitmask(u8x16_eq(block, nl)) as u32;
        while bits != 0 {
            let end = at + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if !f(*start, end) {
                return None;
            }
            *start = end + 1;
        }
        at += 16;
    }
    Some(at)
}

/// Finds a fixed string, exactly or regardless of ASCII case: scans many start positions
/// at a time for the needle's two least common bytes at their offsets (sixteen with wasm
/// SIMD, eight in a 64-bit word elsewhere), and compares the whole needle only where both
/// are present.
pub(crate) struct Literal {
    /// Lower-cased when `fold`.
    needle: Vec<u8>,
    fold: bool,
    /// Offsets in `needle` of the two bytes scanned for (equal for a one-byte needle).
    rare: [usize; 2],
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

impl Literal {
    pub(crate) fn new(needle: &[u8], fold: bool) -> Literal {
        let mut order: Vec<usize> = (0..needle.len()).collect();
        order.sort_by_key(|&i| (commonness(needle[i]), i));
        let first = order.first().copied().unwrap_or(0);
        let same = |a: u8, b: u8| if fold { a.eq_ignore_ascii_case(&b) } else { a == b };
        // The second byte should differ from the first, or it filters nothing.
        let second =
            order.iter().copied().find(|&i| !same(needle[i], needle[first])).unwrap_or(first);
        let needle = if fold { needle.to_ascii_lowercase() } else { needle.to_vec() };
        Literal { needle, fold, rare: [first, second] }
    }

    /// The needle's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.needle.len()
    }

    fn probes(&self) -> (ByteProbe, ByteProbe) {
        let [i, j] = self.rare;
        (ByteProbe::new(self.needle[i], self.fold), ByteProbe::new(self.needle[j], self.fold))
    }

    #[inline(always)]
    fn matches_at(&self, hay: &[u8], start: usize) -> bool {
        let window = &hay[start..start + self.needle.len()];
        if self.fold {
            window.eq_ignore_ascii_case(&self.needle)
        } else {
            window == self.needle.as_slice()
        }
    }

    /// Start of the first occurrence at or after `from`.
    pub(crate) fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        let last = hay.len().checked_sub(self.needle.len())?;
        // wasm has no runtime feature detection: SIMD is part of every Workers runtime, and
        // the module needs it anyway (bytecount uses simd128 the same way).
        #[cfg(target_arch = "wasm32")]
        let (found, from) = self.find_simd(hay, from, last);
        #[cfg(target_arch = "wasm32")]
        if found.is_some() {
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
            start += 16;
        }
        (None, start)
    }
}

/// Where `needle` first occurs in `hay` (exactly), as `str::find` would say.
pub(crate) fn find(hay: &str, needle: &str) -> Option<usize> {
    memchr::memmem::find(hay.as_bytes(), needle.as_bytes())
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
}
