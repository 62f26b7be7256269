//! The compatibility decomposition (NFKD) of one character, for the Unicode matching level
//! (`matcher::fold_char`). In the Worker it is the platform's `String.prototype.normalize`,
//! on the host (unit tests, native embedders) the `unicode-normalization` crate, a host-only
//! dependency (`crate::platform::natives`).
//!
//! Measured reason (BENCHMARKS.md, "Sizes"): the crate's decomposition tables were 97,252 B
//! of the wasm's data section, 47,482 B of its deflate, for a fallback level that V8's own
//! ICU tables answer. Over every code point from U+0080 up, `decompose_compatible` and a
//! one-character `normalize("NFKD")` agree except on 68 code points that the crate's and
//! Node's Unicode data assign differently (letters added in the newest Unicode version).

/// Calls `out` with each character of the NFKD form of `c`.
pub(super) fn decompose_compatible(c: char, out: &mut dyn FnMut(char)) {
    crate::platform::natives::natives().decompose_compatible(c, out)
}
