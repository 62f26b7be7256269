//! Full Unicode uppercasing (a context block's label, an agent class name's routing slug):
//! `String.prototype.toUpperCase` in the Worker, `str::to_uppercase` on the host
//! ([`super::natives`]). Both apply
//! Unicode's default case mapping; the crate's own code never uppercases anything else.
//!
//! Measured reason (BENCHMARKS.md, "Sizes"): `str::to_uppercase` keeps core's uppercase
//! table, 13.6 KB of the wasm's data section, beside the same table in V8.

/// `s` in uppercase, as JavaScript's `toUpperCase` gives it.
pub fn to_uppercase(s: &str) -> String {
    super::natives::natives().to_uppercase(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn uppercases_beyond_ascii() {
        assert_eq!(super::to_uppercase("straße µ ǆ"), "STRASSE Μ Ǆ");
    }
}
