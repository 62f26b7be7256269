//! Text, number and digest functions that the platform computes natively, behind one trait so
//! that the core calls no JavaScript: upper- and lowercasing (`String.prototype.toUpperCase`
//! and `toLowerCase`), the NFKD form of a character (`String.prototype.normalize`), decimal text to a number
//! (`parseFloat`) and MD5/SHA digests (`node:crypto`).
//!
//! The Workers glue installs its implementation once, when the first agent starts
//! (`think_worker::natives`). On the host, or before anything is installed there, the
//! functions come from Rust crates that are host-only dependencies. The measured reasons for
//! not shipping those crates in the wasm are in `case.rs`, `number.rs`, `digest.rs` and the
//! edit tool's `nfkd.rs`.

use std::sync::OnceLock;

use super::digest::Algorithm;

/// What the platform computes natively. An implementation must give the results of the
/// JavaScript functions named on each method.
pub trait Natives: Sync {
    /// `s.toUpperCase()`: Unicode's default full case mapping.
    fn to_uppercase(&self, s: &str) -> String;
    /// `s.toLowerCase()`: Unicode's default full case mapping, final sigma included.
    fn to_lowercase(&self, s: &str) -> String;
    /// Calls `out` with each character of `c.normalize("NFKD")`.
    fn decompose_compatible(&self, c: char, out: &mut dyn FnMut(char));
    /// `parseFloat(s)`, for `s` a sign and a decimal number of Rust's float grammar
    /// ([`super::number::parse_f64`] checks it): the correctly rounded `f64`.
    fn parse_decimal(&self, s: &str) -> f64;
    /// The `algorithm` digest of `bytes` as lowercase hex.
    fn digest_hex(&self, algorithm: Algorithm, bytes: &[u8]) -> String;
}

static INSTALLED: OnceLock<&'static dyn Natives> = OnceLock::new();

/// Installs the platform's natives; the first call wins, later ones are ignored (every
/// agent class of a Worker installs the same ones).
pub fn install(natives: &'static dyn Natives) {
    let _ = INSTALLED.set(natives);
}

/// The installed natives, or the Rust ones on the host.
pub(crate) fn natives() -> &'static dyn Natives {
    match INSTALLED.get() {
        Some(natives) => *natives,
        None => &RustNatives,
    }
}

/// The Rust implementation: the host's, from host-only crates. In a wasm build nothing
/// installed is a embedding error, reported by a panic that names the fix.
struct RustNatives;

#[cfg(not(target_arch = "wasm32"))]
impl Natives for RustNatives {
    fn to_uppercase(&self, s: &str) -> String {
        s.to_uppercase()
    }

    fn to_lowercase(&self, s: &str) -> String {
        s.to_lowercase()
    }

    fn decompose_compatible(&self, c: char, out: &mut dyn FnMut(char)) {
        unicode_normalization::char::decompose_compatible(c, out)
    }

    fn parse_decimal(&self, s: &str) -> f64 {
        s.parse().unwrap_or(f64::NAN)
    }

    fn digest_hex(&self, algorithm: Algorithm, bytes: &[u8]) -> String {
        use sha2::Digest;
        let digest = match algorithm {
            Algorithm::Md5 => md5::Md5::digest(bytes).to_vec(),
            Algorithm::Sha1 => sha1::Sha1::digest(bytes).to_vec(),
            Algorithm::Sha256 => sha2::Sha256::digest(bytes).to_vec(),
        };
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(target_arch = "wasm32")]
impl Natives for RustNatives {
    fn to_uppercase(&self, _: &str) -> String {
        not_installed()
    }

    fn to_lowercase(&self, _: &str) -> String {
        not_installed()
    }

    fn decompose_compatible(&self, _: char, _: &mut dyn FnMut(char)) {
        not_installed()
    }

    fn parse_decimal(&self, _: &str) -> f64 {
        not_installed()
    }

    fn digest_hex(&self, _: Algorithm, _: &[u8]) -> String {
        not_installed()
    }
}

#[cfg(target_arch = "wasm32")]
fn not_installed() -> ! {
    panic!("the platform natives are not installed: call think_core::platform::natives::install at start-up")
}
