//! MD5, SHA-1 and SHA-256 digests (Code Mode's `state.hashFile`, MCP OAuth's PKCE challenge):
//! in the Worker the platform's `node:crypto` ([`super::natives`]), on the host the
//! RustCrypto crates, host-only dependencies.
//!
//! Measured reason (BENCHMARKS.md, "Sizes"): `md-5`, `sha1`, `sha2` and the hand-written
//! SHA-256 this replaces were about 13 KB of wasm code, for digests `node:crypto` computes
//! natively and faster.

/// A digest algorithm `state.hashFile` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Algorithm {
    /// MD5 (for checksums only).
    Md5,
    /// SHA-1 (for checksums only).
    Sha1,
    /// SHA-256.
    Sha256,
}

impl Algorithm {
    /// The name `node:crypto` knows it by.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "md5",
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha256 => "sha256",
        }
    }
}

/// The digest of `bytes` as lowercase hex.
pub fn hex(algorithm: Algorithm, bytes: &[u8]) -> String {
    super::natives::natives().digest_hex(algorithm, bytes)
}

/// The SHA-256 digest of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let hex = hex(Algorithm::Sha256, bytes);
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(hex(Algorithm::Md5, b"abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(hex(Algorithm::Sha1, b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            hex(Algorithm::Sha256, b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(Algorithm::Sha256, &[b'a'; 1000]),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
        assert_eq!(sha256(b"")[..4], [0xe3, 0xb0, 0xc4, 0x42]);
    }
}
