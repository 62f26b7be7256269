//! The sandbox in the Worker: Worker Loader isolates, through `js/codemode/host.mjs`. Each
//! pass is a fresh isolate with `globalOutbound: null` and no bindings (an extension with
//! network hosts gets the host's gateway instead, `run_networked`); its connector calls
//! come back through a function passed over RPC that runs the Rust dispatcher. One object's
//! sandbox has at most [`MAX_ISOLATES_IN_FLIGHT`] isolates at once, whoever asks (`execute`,
//! skill scripts, extensions); the others wait their turn, up to their own time limit.

use std::rc::Rc;

use async_trait::async_trait;
use js_sys::{Function, Promise, Reflect};
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use think_core::codemode::sandbox::{Slots, MAX_ISOLATES_IN_FLIGHT};
use think_core::codemode::{
    CallError, CallRequest, Dispatcher, Sandbox, SandboxError, SandboxOutcome, SandboxRequest,
};
use think_core::platform::Clock;

#[wasm_bindgen(module = "/js/codemode/host.mjs")]
extern "C" {
    #[wasm_bindgen(js_name = runInLoader, catch)]
    async fn run_in_loader(
        loader: &JsValue,
        request: String,
        dispatch: &Function,
        outbound: &JsValue,
    ) -> Result<JsValue, JsValue>;
}

/// The binding the sandbox isolates are loaded through (`[[worker_loaders]]`).
pub const LOADER_BINDING: &str = "LOADER";

/// Runs passes in Worker Loader isolates.
pub struct LoaderSandbox {
    loader: JsValue,
    /// Makes the network gateway of one pass from its props (`src/wasm/extensions.rs`).
    gateway: Option<super::extensions::GatewayFactory>,
    /// The one count of isolates in flight for every use of this object's sandbox.
    slots: Slots,
}

impl LoaderSandbox {
    /// The sandbox over the `LOADER` binding of `env`, when the Worker has one.
    pub fn from_env(env: &worker::Env) -> Option<Self> {
        let env: &JsValue = env.as_ref();
        let loader = Reflect::get(env, &LOADER_BINDING.into()).ok()?;
        let has_load = Reflect::get(&loader, &"load".into()).ok().is_some_and(|f| f.is_function());
        has_load.then_some(Self {
            loader,
            gateway: None,
            slots: Slots::new(MAX_ISOLATES_IN_FLIGHT),
        })
    }

    /// Lets [`Sandbox::run_networked`] passes reach the network through `gateway`, which
    /// makes the `globalOutbound` of a pass from its grant.
    pub fn with_gateway(mut self, gateway: super::extensions::GatewayFactory) -> Self {
        self.gateway = Some(gateway);
        self
    }
}

fn text(v: &JsValue, key: &str) -> Option<String> {
    Reflect::get(v, &key.into()).ok().and_then(|v| v.as_string())
}

fn error_text(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|err| String::from(err.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

#[async_trait(?Send)]
impl Sandbox for LoaderSandbox {
    async fn run(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.pass(request, dispatcher, JsValue::NULL).await
    }

    async fn run_networked(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
        network: &think_core::net::NetworkGrant,
    ) -> Result<SandboxOutcome, SandboxError> {
        let outbound = self.gateway.as_ref().and_then(|g| g(network)).ok_or_else(|| {
            SandboxError::Unavailable("the Worker exports no ExtensionGateway".into())
        })?;
        self.pass(request, dispatcher, outbound).await
    }
}

impl LoaderSandbox {
    /// One pass whose `globalOutbound` is `outbound` (`null`: no network).
    async fn pass(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
        outbound: JsValue,
    ) -> Result<SandboxOutcome, SandboxError> {
        // The timer is only made when every slot is taken.
        let slot = match self.slots.try_acquire() {
            Some(slot) => Some(slot),
            None => self.slots.acquire_within(super::WorkerClock.sleep(request.timeout_ms)).await,
        };
        let Some(_slot) = slot else {
            return Err(SandboxError::Unavailable(format!(
                "{MAX_ISOLATES_IN_FLIGHT} sandbox isolates were busy in this agent for the whole {} ms time limit",
                request.timeout_ms
            )));
        };
        let (request, dispatch) = prepare(&request, dispatcher)?;
        let out =
            run_in_loader(&self.loader, request, dispatch.as_ref().unchecked_ref(), &outbound)
                .await
                .map_err(|e| SandboxError::Crashed(error_text(&e)))?;
        outcome(&out)
    }
}

/// The function the sandbox calls the host through.
type DispatchFn = Closure<dyn FnMut(String, String, String, String) -> Promise>;

/// A pass's request as JSON and its dispatch function. This and [`outcome`] are kept out of
/// [`LoaderSandbox::pass`]'s body, so the body resumed once the isolate answers is small:
/// creating the isolate makes V8 drop the agent's baseline-compiled wasm, and whatever runs
/// after it is compiled again (`think_core::codemode::sandbox`).
#[inline(never)]
fn prepare(
    request: &SandboxRequest,
    dispatcher: Rc<dyn Dispatcher>,
) -> Result<(String, DispatchFn), SandboxError> {
    let request =
        serde_json::to_string(request).map_err(|e| SandboxError::Unavailable(e.to_string()))?;
    let dispatch = Closure::<dyn FnMut(String, String, String, String) -> Promise>::new(
        move |connector: String, method: String, args: String, site: String| {
            let dispatcher = dispatcher.clone();
            let busy = super::idle::Busy::enter();
            future_to_promise(async move {
                let _busy = busy;
                let args = serde_json::from_str(&args).unwrap_or(Value::Null);
                let call = CallRequest { connector, method, args, site };
                let reply = match dispatcher.call(call).await {
                    Ok(v) => json!({ "ok": v }),
                    Err(CallError::Paused) => json!({ "paused": true }),
                    Err(e) => json!({ "error": e.to_string() }),
                };
                Ok(JsValue::from_str(&reply.to_string()))
            })
        },
    );
    Ok((request, dispatch))
}

/// The pass's outcome from what `runInLoader` returned.
#[inline(never)]
fn outcome(out: &JsValue) -> Result<SandboxOutcome, SandboxError> {
    let logs: Vec<String> = Reflect::get(out, &"logs".into())
        .ok()
        .filter(js_sys::Array::is_array)
        .map(|v| js_sys::Array::from(&v).iter().filter_map(|l| l.as_string()).collect())
        .unwrap_or_default();
    let error = text(out, "error").unwrap_or_default();
    match text(out, "kind").as_deref() {
        Some("syntax") => Err(SandboxError::Syntax(error)),
        Some("done") => {
            let paused = Reflect::get(out, &"paused".into()).is_ok_and(|v| v.is_truthy());
            let ok = Reflect::get(out, &"ok".into()).is_ok_and(|v| v.is_truthy());
            let result = if paused {
                Err(CallError::Paused.to_string())
            } else if ok {
                let raw = text(out, "result").unwrap_or_else(|| "null".into());
                // A result deeper than serde_json parses is an error, not a silent null.
                serde_json::from_str(&raw).map_err(|e| {
                    format!(
                        "The result could not be returned ({e}): values nest at most {} levels deep",
                        think_core::codemode::MAX_DURABLE_DEPTH
                    )
                })
            } else {
                Err(error)
            };
            Ok(SandboxOutcome { result, logs })
        }
        _ => Err(SandboxError::Crashed(error)),
    }
}
