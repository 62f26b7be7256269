//! Eight bytes at a time: splitting lines, finding bytes. Tools split whole files into numbered lines, and
//! on wasm32 without SIMD the byte-at-a-time or word-size (32-bit) searches in `core` and
//! `memchr` cost more than the rest of the work; 64-bit words are native in wasm.

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
/// `n + 1` lines) until it returns false. Inlined so the caller's loop has no calls in it.
#[inline(always)]
pub(crate) fn for_each_line(bytes: &[u8], mut f: impl FnMut(usize, usize) -> bool) {
    const NL: u64 = ONES * b'\n' as u64;
    let mut start = 0;
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let b = &bytes[at..at + 8];
        let mut mask = zero_bytes(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) ^ NL);
        while mask != 0 {
            let end = at + (mask.trailing_zeros() / 8) as usize;
            mask &= mask - 1;
            if !f(start, end) {
                return;
            }
            start = end + 1;
        }
        at += 8;
    }
    for (k, &byte) in bytes[at..].iter().enumerate() {
        if byte == b'\n' {
            if !f(start, at + k) {
                return;
            }
            start = at + k + 1;
        }
    }
    f(start, bytes.len());
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
