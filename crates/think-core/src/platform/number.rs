//! Decimal text to `f64` (a `Retry-After` header, an OAuth token's `expires_in` given as a
//! string, the fraction of a second of an ISO date): the grammar and the value of
//! `str::parse::<f64>`, with the digits converted by JavaScript's `parseFloat` in the Worker
//! and by `str::parse` on the host ([`super::natives`]). Both round correctly, so they give
//! the same `f64`.
//!
//! Measured reason (BENCHMARKS.md, "Sizes"): `str::parse::<f64>` keeps core's decimal
//! conversion in the wasm, 4 KB of code and a 10 KB table of powers of five that gzip cannot
//! shrink, for a handful of numbers V8 converts anyway.

/// `s.parse::<f64>().ok()`: an optional sign, then `inf`, `infinity` or `nan` (any case) or a
/// decimal number (`5`, `5.`, `.5`, `1.5e-3`); `None` for anything else, spaces included.
pub fn parse_f64(s: &str) -> Option<f64> {
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let special = if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        f64::INFINITY
    } else if body.eq_ignore_ascii_case("nan") {
        f64::NAN
    } else {
        return is_decimal(body).then(|| super::natives::natives().parse_decimal(s));
    };
    Some(if negative { -special } else { special })
}

/// Whether `s` is `digits`, `digits.`, `.digits` or `digits.digits`, then optionally `e` or
/// `E`, a sign and digits: the numbers of Rust's float grammar, without their sign.
fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |from: usize| {
        b.get(from..).map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count())
    };
    let whole = digits(0);
    let mut at = whole;
    let mut fraction = 0;
    if b.get(at) == Some(&b'.') {
        fraction = digits(at + 1);
        at += 1 + fraction;
    }
    if whole + fraction == 0 {
        return false;
    }
    if matches!(b.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(b.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let exponent = digits(at);
        if exponent == 0 {
            return false;
        }
        at += exponent;
    }
    at == b.len()
}

#[cfg(test)]
mod tests {
    /// The same answer as `str::parse::<f64>` for numbers in every form of its grammar and
    /// for text just outside it (on the host the digits go to `str::parse` too: what this
    /// checks is which text is a number, and the sign and the specials).
    #[test]
    fn parses_what_str_parse_parses() {
        let inputs = [
            "0",
            "-0",
            "+0",
            "5",
            "5.",
            ".5",
            "-.5",
            "+5.25",
            "007",
            "1e5",
            "1E+5",
            "2.5e-3",
            "1e400",
            "-1e400",
            "1e-400",
            "123456789012345678901234567890",
            "0.1",
            "1500",
            "inf",
            "-inf",
            "+Infinity",
            "INF",
            "NaN",
            "-nan",
            "infinit",
            "nanx",
            "",
            "+",
            "-",
            ".",
            "-.",
            "e5",
            ".e5",
            "1e",
            "1e+",
            "1.5e5.0",
            "0x10",
            " 5",
            "5 ",
            "1_000",
            "1,5",
            "--5",
            "+-5",
            "5e-",
            "١",
            "5\u{0}",
        ];
        for s in inputs {
            let (ours, std) = (super::parse_f64(s), s.parse::<f64>().ok());
            assert_eq!(ours.map(f64::to_bits), std.map(f64::to_bits), "{s:?}");
        }
    }
}
