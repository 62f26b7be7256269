//! Full Unicode upper- and lowercasing (a context block's label, an agent class name's
//! routing slug, Code Mode's method search, ids derived from names):
//! `String.prototype.toUpperCase` and `toLowerCase` in the Worker, `str::to_uppercase` and
//! `str::to_lowercase` on the host ([`super::natives`]). Both apply Unicode's default case
//! mapping; the crate's own code changes the case of nothing else beyond ASCII.
//!
//! Measured reason (BENCHMARKS.md, "Sizes"): `str::to_uppercase` keeps core's uppercase
//! table, 13.6 KB of the wasm's data section, beside the same table in V8; `str::to_lowercase`
//! keeps the lowercase table, 13 KB more (8 KB of the gzipped wasm).

/// `s` in uppercase, as JavaScript's `toUpperCase` gives it.
pub fn to_uppercase(s: &str) -> String {
    super::natives::natives().to_uppercase(s)
}

/// `s` in lowercase, as JavaScript's `toLowerCase` gives it.
pub fn to_lowercase(s: &str) -> String {
    super::natives::natives().to_lowercase(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn uppercases_beyond_ascii() {
        assert_eq!(super::to_uppercase("straße µ ǆ"), "STRASSE Μ Ǆ");
    }

    #[test]
    fn lowercases_beyond_ascii() {
        assert_eq!(super::to_lowercase("ΟΔΟΣ İ Ǆ \u{212A}"), "οδος i\u{307} ǆ k");
    }
}
