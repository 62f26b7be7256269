//! Extensions in the Worker: the network gateway. An extension's isolate with network hosts
//! gets as `globalOutbound` a loopback stub of the `ExtensionGateway` entrypoint
//! (`js/extensions/gateway.mjs`, exported by `js/entry.mjs`) whose props are its grant;
//! the gateway asks [`ExtensionNetGate::check`] about every request and fetches only what it
//! allows, redirects included (each hop comes back through the gateway).

use std::rc::Rc;

use js_sys::{Function, Reflect, JSON};
use serde_json::json;
use wasm_bindgen::prelude::*;

use think_core::net::{check_request, NetworkGrant};

/// The gateway's decision, exported to `js/extensions/gateway.mjs`.
#[wasm_bindgen]
pub struct ExtensionNetGate;

#[wasm_bindgen]
impl ExtensionNetGate {
    /// `{"ok": true, "url": "<the URL to fetch>"}` or `{"ok": false, "error": "<why>"}` for a
    /// request to `url` under `grant` (the gateway's props as JSON).
    pub fn check(url: &str, grant: &str) -> String {
        let verdict = match serde_json::from_str::<NetworkGrant>(grant) {
            Ok(grant) => match check_request(url, &grant) {
                Ok(checked) => json!({"ok": true, "url": checked.as_str()}),
                Err(e) => json!({"ok": false, "error": e.to_string()}),
            },
            Err(e) => json!({"ok": false, "error": format!("the gateway's grant is invalid: {e}")}),
        };
        verdict.to_string()
    }
}

/// Makes the gateway stub of one pass: `ctx.exports.ExtensionGateway({props: grant})`.
pub type GatewayFactory = Rc<dyn Fn(&NetworkGrant) -> Option<JsValue>>;

/// The gateway factory of this object, when the Worker exports `ExtensionGateway` (and has
/// `ctx.exports`, the `enable_ctx_exports` compatibility flag).
pub fn gateway_factory(state: &worker::State) -> Option<GatewayFactory> {
    let raw: &JsValue = state.as_raw().as_ref();
    let exports = Reflect::get(raw, &"exports".into()).ok().filter(|e| e.is_object())?;
    let factory = Reflect::get(&exports, &"ExtensionGateway".into()).ok()?;
    if !factory.is_function() {
        return None;
    }
    let factory: Function = factory.unchecked_into();
    Some(Rc::new(move |grant: &NetworkGrant| {
        let props = JSON::parse(&serde_json::to_string(grant).ok()?).ok()?;
        let options = js_sys::Object::new();
        Reflect::set(&options, &"props".into(), &props).ok()?;
        // Reflect.apply, not `factory.call(…)`: on a loopback stub `.call` is a remote method.
        Reflect::apply(&factory, &exports, &js_sys::Array::of1(&options)).ok()
    }))
}
