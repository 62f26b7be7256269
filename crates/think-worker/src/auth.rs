//! The Workers side of access control ([`think_core::auth`]): signatures through WebCrypto
//! (`crypto.subtle.importKey` and `verify`; no crypto crate in the module, see the size note
//! in `think_core::auth`), the JWKS cache kept in JavaScript (so a reset of the wasm instance does
//! not drop it), the JWKS fetched with the Worker's `fetch`, and the gate the Worker entry
//! runs before a request reaches the Durable Object.

use async_trait::async_trait;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use worker::{Request, Response};

use think_core::auth::jwks::{JwksSlot, JwksState};
use think_core::auth::jwt::{Alg, Signatures, VerifyKey};
use think_core::auth::{AccessControl, AuthDeps, AuthRequest, Decision, Refusal};
use think_core::protocol::routing::AgentPath;

#[wasm_bindgen(inline_js = r#"
let jwksState = null;
export function loadJwks() {
  return jwksState;
}
export function saveJwks(text) {
  jwksState = text;
}
const PARAMS = {
  RS256: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
  ES256: { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" },
  HS256: { name: "HMAC", hash: "SHA-256" },
};
export async function verifyJws(alg, jwk, secret, input, signature) {
  const params = PARAMS[alg];
  const key = jwk === undefined
    ? await crypto.subtle.importKey("raw", secret, params, false, ["verify"])
    : await crypto.subtle.importKey("jwk", JSON.parse(jwk), params, false, ["verify"]);
  return crypto.subtle.verify(params, key, signature, input);
}
export function forwardRequest(request, url, exemptHeader, exempt) {
  const forwarded = new Request(url, request);
  forwarded.headers.delete(exemptHeader);
  if (exempt !== undefined) forwarded.headers.set(exemptHeader, exempt);
  return forwarded;
}
"#)]
extern "C" {
    #[wasm_bindgen(js_name = loadJwks)]
    fn load_jwks() -> Option<String>;
    #[wasm_bindgen(js_name = saveJwks)]
    fn save_jwks(text: &str);
    #[wasm_bindgen(js_name = verifyJws)]
    fn verify_jws(
        alg: &str,
        jwk: Option<String>,
        secret: Option<Vec<u8>>,
        input: &[u8],
        signature: &[u8],
    ) -> js_sys::Promise;
    #[wasm_bindgen(js_name = forwardRequest)]
    fn forward_request(
        request: &web_sys::Request,
        url: &str,
        exempt_header: &str,
        exempt: Option<String>,
    ) -> web_sys::Request;
}

/// Signature checks through WebCrypto.
pub struct WebCryptoSignatures;

#[async_trait(?Send)]
impl Signatures for WebCryptoSignatures {
    async fn verify(
        &self,
        alg: Alg,
        key: &VerifyKey<'_>,
        input: &[u8],
        signature: &[u8],
    ) -> Result<bool, String> {
        let (jwk, secret) = match key {
            VerifyKey::Public(jwk) => (Some(jwk.public_jwk().to_string()), None),
            VerifyKey::Secret(s) => (None, Some(s.to_vec())),
        };
        let promise = verify_jws(alg.name(), jwk, secret, input, signature);
        match JsFuture::from(promise).await {
            Ok(v) => Ok(v.as_bool() == Some(true)),
            Err(e) => Err(match e.dyn_into::<js_sys::Error>() {
                Ok(error) => String::from(error.message()),
                Err(other) => other.as_string().unwrap_or_else(|| "the key import failed".into()),
            }),
        }
    }
}

/// The JWKS cache, as JSON text in a JavaScript variable of this module.
pub struct JsJwksSlot;

impl JwksSlot for JsJwksSlot {
    fn load(&self) -> Option<JwksState> {
        load_jwks().and_then(|t| serde_json::from_str(&t).ok())
    }
    fn save(&self, state: &JwksState) {
        if let Ok(text) = serde_json::to_string(state) {
            save_jwks(&text);
        }
    }
}

/// The refusal as an HTTP response: the status, the body and, for a 401,
/// `WWW-Authenticate`.
fn refusal_response(refusal: &Refusal) -> worker::Result<Response> {
    let mut resp = Response::error(refusal.body(), refusal.status())?;
    if let Some(challenge) = refusal.www_authenticate() {
        resp.headers_mut().set("www-authenticate", challenge)?;
    }
    resp.headers_mut().set("cache-control", "no-store")?;
    Ok(resp)
}

/// Checks `req` (to `route`) against `access`: `Ok(Ok(request))` is what to forward (the
/// `token` parameter stripped, the exempt marker set only on the OAuth callback),
/// `Ok(Err(response))` the refusal to answer with.
pub async fn gate(
    req: Request,
    route: &AgentPath,
    access: &AccessControl,
) -> worker::Result<Result<Request, Response>> {
    let url = req.url()?;
    let auth_req = AuthRequest {
        method: req.method().to_string(),
        url: url.clone(),
        headers: req.headers().entries().collect(),
        namespace: route.namespace.clone(),
        instance: route.name.clone(),
        rest: route.rest.clone(),
    };
    let deps = AuthDeps {
        http: &super::FetchHttp,
        clock: &super::WorkerClock,
        signatures: &WebCryptoSignatures,
        jwks: &JsJwksSlot,
    };
    let exempt = match access.check(&auth_req, &deps).await {
        Decision::Allow => None,
        Decision::OAuthCallback => Some(think_core::auth::EXEMPT_OAUTH_CALLBACK.to_owned()),
        Decision::Refuse(refusal) => return Ok(Err(refusal_response(&refusal)?)),
    };
    let mut forwarded_url = url;
    think_core::auth::strip_token(&mut forwarded_url);
    let inner = forward_request(
        req.inner(),
        forwarded_url.as_str(),
        think_core::auth::EXEMPT_HEADER,
        exempt,
    );
    Ok(Ok(Request::from(inner)))
}

/// Reads an exempt marker the Worker set (see [`think_core::auth::EXEMPT_HEADER`]).
pub fn exempt_marker(req: &Request) -> Option<String> {
    req.headers().get(think_core::auth::EXEMPT_HEADER).ok().flatten()
}
