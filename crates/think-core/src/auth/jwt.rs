//! The rules a JWT must pass: its form, an algorithm that fits the key it names, a valid
//! signature (checked by [`Signatures`], WebCrypto in the Worker), then its claims (`exp`
//! required, `nbf` honoured, both with [`LEEWAY_S`] of leeway; `iss` and `aud` when
//! configured). Nothing here trusts the token before its signature is checked: the header only
//! chooses which key to try.

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{Map, Value};

use super::jwks::Jwk;

/// Leeway on `exp` and `nbf`, in seconds, for clocks that disagree a little.
pub const LEEWAY_S: f64 = 60.0;

/// The algorithms accepted. `none` and every other algorithm are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256, with an RSA key of the JWKS.
    Rs256,
    /// ECDSA on P-256 with SHA-256, with an EC key of the JWKS.
    Es256,
    /// HMAC-SHA-256 with the shared secret (`THINK_AUTH_JWT_SECRET`).
    Hs256,
}

impl Alg {
    /// The JOSE name.
    pub fn name(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
            Alg::Hs256 => "HS256",
        }
    }
}

/// The key a signature is checked with.
#[derive(Debug, Clone, PartialEq)]
pub enum VerifyKey<'a> {
    /// A public key of the JWKS.
    Public(&'a Jwk),
    /// The shared HS256 secret.
    Secret(&'a [u8]),
}

/// Checks signatures (WebCrypto's `crypto.subtle.verify` in the Worker).
#[async_trait(?Send)]
pub trait Signatures {
    /// Whether `signature` is `alg`'s signature of `input` under `key`. `Err` when the key
    /// cannot be used at all (the runtime refused to import it).
    async fn verify(
        &self,
        alg: Alg,
        key: &VerifyKey<'_>,
        input: &[u8],
        signature: &[u8],
    ) -> Result<bool, String>;
}

/// Why a JWT was refused. The text goes into the 401's body: it says what is wrong with the
/// credential, never anything about an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtError {
    /// Not three base64url parts, or a header or payload that is not a JSON object.
    Malformed(String),
    /// `alg: none`.
    AlgNone,
    /// An algorithm other than RS256, ES256 and HS256.
    UnsupportedAlg(String),
    /// HS256 without `THINK_AUTH_JWT_SECRET`, or RS256/ES256 without a JWKS.
    AlgNotEnabled(Alg),
    /// A JWKS-signed token without a `kid`.
    NoKid,
    /// A `kid` that the JWKS does not hold (after a refetch, when one was allowed).
    UnknownKid(String),
    /// The key named by `kid` is not of the algorithm's type (an RSA key for ES256, ...).
    AlgDoesNotFitKey {
        /// The token's algorithm.
        alg: Alg,
        /// The key's id.
        kid: String,
    },
    /// The signature does not verify.
    BadSignature,
    /// The runtime would not use the key.
    Key(String),
    /// No `exp` claim, or one that is not a number.
    NoExp,
    /// `exp` (plus leeway) has passed.
    Expired,
    /// `nbf` (minus leeway) has not come yet.
    NotYetValid,
    /// `iss` is not `THINK_AUTH_ISSUER`.
    WrongIssuer,
    /// `aud` does not name `THINK_AUTH_AUDIENCE`.
    WrongAudience,
    /// A `crit` header names extensions this validator does not understand.
    Critical,
}

impl std::fmt::Display for JwtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JwtError::Malformed(m) => write!(f, "malformed JWT: {m}"),
            JwtError::AlgNone => f.write_str("JWT algorithm \"none\" is refused"),
            JwtError::UnsupportedAlg(a) => {
                write!(f, "JWT algorithm {a:?} is not accepted (RS256, ES256, HS256)")
            }
            JwtError::AlgNotEnabled(Alg::Hs256) => {
                f.write_str("HS256 JWTs are not accepted (THINK_AUTH_JWT_SECRET is not set)")
            }
            JwtError::AlgNotEnabled(a) => {
                write!(f, "{} JWTs are not accepted (no JWKS is configured)", a.name())
            }
            JwtError::NoKid => f.write_str("the JWT names no key (kid)"),
            JwtError::UnknownKid(k) => write!(f, "the JWT's key {k:?} is not in the JWKS"),
            JwtError::AlgDoesNotFitKey { alg, kid } => {
                write!(f, "the JWT's algorithm {} does not fit key {kid:?}", alg.name())
            }
            JwtError::BadSignature => f.write_str("the JWT's signature does not verify"),
            JwtError::Key(m) => write!(f, "the JWT's key cannot be used: {m}"),
            JwtError::NoExp => f.write_str("the JWT has no expiry (exp)"),
            JwtError::Expired => f.write_str("the JWT has expired"),
            JwtError::NotYetValid => f.write_str("the JWT is not valid yet (nbf)"),
            JwtError::WrongIssuer => f.write_str("the JWT's issuer is not accepted"),
            JwtError::WrongAudience => f.write_str("the JWT's audience is not accepted"),
            JwtError::Critical => f.write_str("the JWT has critical header parameters"),
        }
    }
}

impl std::error::Error for JwtError {}

/// A JWT split and decoded, not yet trusted.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The algorithm the header claims.
    pub alg: Alg,
    /// The header's `kid`.
    pub kid: Option<String>,
    /// The claims.
    pub claims: Map<String, Value>,
    /// `<header>.<payload>`, the signed bytes.
    pub signing_input: String,
    /// The decoded signature.
    pub signature: Vec<u8>,
}

fn b64(part: &str, what: &str) -> Result<Vec<u8>, JwtError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| JwtError::Malformed(format!("the {what} is not base64url")))
}

fn object(bytes: &[u8], what: &str) -> Result<Map<String, Value>, JwtError> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(JwtError::Malformed(format!("the {what} is not a JSON object"))),
    }
}

/// Whether `credential` has the shape of a compact JWS (three dot-separated parts).
pub fn looks_like_jwt(credential: &str) -> bool {
    credential.split('.').count() == 3 && !credential.contains(char::is_whitespace)
}

/// Splits and decodes a compact JWS and reads its algorithm.
pub fn parse(token: &str) -> Result<Parsed, JwtError> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed("expected three parts".into()));
    };
    let header = object(&b64(h, "header")?, "header")?;
    let claims = object(&b64(p, "payload")?, "payload")?;
    let signature = b64(s, "signature")?;
    let alg = match header.get("alg").and_then(Value::as_str) {
        Some("RS256") => Alg::Rs256,
        Some("ES256") => Alg::Es256,
        Some("HS256") => Alg::Hs256,
        Some(a) if a.eq_ignore_ascii_case("none") => return Err(JwtError::AlgNone),
        Some(a) => return Err(JwtError::UnsupportedAlg(a.to_owned())),
        None => return Err(JwtError::Malformed("the header has no alg".into())),
    };
    if header.contains_key("crit") {
        return Err(JwtError::Critical);
    }
    let kid = header.get("kid").and_then(Value::as_str).map(str::to_owned);
    Ok(Parsed { alg, kid, claims, signing_input: format!("{h}.{p}"), signature })
}

/// Whether `key` may check an `alg` signature: its type (RSA for RS256, EC P-256 for ES256),
/// and its own `alg` and `use` when it states them.
pub fn key_fits(alg: Alg, key: &Jwk) -> bool {
    let kind = match alg {
        Alg::Rs256 => key.kty == "RSA",
        Alg::Es256 => key.kty == "EC" && key.crv.as_deref() == Some("P-256"),
        Alg::Hs256 => false,
    };
    kind && key.alg.as_deref().is_none_or(|a| a == alg.name())
        && key.use_.as_deref().is_none_or(|u| u == "sig")
}

/// What the claims must satisfy besides the time checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimRules {
    /// `THINK_AUTH_ISSUER`: `iss` must equal it.
    pub issuer: Option<String>,
    /// `THINK_AUTH_AUDIENCE`: `aud` must be it or an array holding it.
    pub audience: Option<String>,
}

/// Checks the claims of a token whose signature verified, at `now_ms`.
pub fn check_claims(
    claims: &Map<String, Value>,
    rules: &ClaimRules,
    now_ms: f64,
) -> Result<(), JwtError> {
    let now = now_ms / 1000.0;
    let exp = claims.get("exp").and_then(Value::as_f64).ok_or(JwtError::NoExp)?;
    if now > exp + LEEWAY_S {
        return Err(JwtError::Expired);
    }
    match claims.get("nbf") {
        None => {}
        Some(nbf) => match nbf.as_f64() {
            Some(nbf) if now + LEEWAY_S >= nbf => {}
            _ => return Err(JwtError::NotYetValid),
        },
    }
    if let Some(issuer) = &rules.issuer {
        if claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str()) {
            return Err(JwtError::WrongIssuer);
        }
    }
    if let Some(audience) = &rules.audience {
        let named = match claims.get("aud") {
            Some(Value::String(a)) => a == audience,
            Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(audience.as_str())),
            _ => false,
        };
        if !named {
            return Err(JwtError::WrongAudience);
        }
    }
    Ok(())
}

/// Verifies `parsed`'s signature with `key`.
pub async fn verify(
    parsed: &Parsed,
    key: &VerifyKey<'_>,
    signatures: &dyn Signatures,
) -> Result<(), JwtError> {
    match signatures
        .verify(parsed.alg, key, parsed.signing_input.as_bytes(), &parsed.signature)
        .await
    {
        Ok(true) => Ok(()),
        Ok(false) => Err(JwtError::BadSignature),
        Err(e) => Err(JwtError::Key(e)),
    }
}

/// Whether the identity `claim` reaches instance `name`: the instance named exactly by it,
/// or `<claim>:<anything>`.
pub fn claim_reaches(claim: &str, name: &str) -> bool {
    !claim.is_empty()
        && (name == claim || name.strip_prefix(claim).is_some_and(|rest| rest.starts_with(':')))
}
