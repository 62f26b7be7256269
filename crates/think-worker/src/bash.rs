//! The bash tool's engine in the Worker: just-bash, through `js/bash/bridge.mjs`. wasm-bindgen
//! copies the bridge into `build/snippets/`, and the esbuild step of `scripts/wasm-build.sh`
//! bundles just-bash with it.

use async_trait::async_trait;
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

use think_core::tools::workspace::bash::{
    BashEngine, BashError, EngineRequest, EngineResponse, FinalEntry, FinalKind,
};

#[wasm_bindgen(module = "/js/bash/bridge.mjs")]
extern "C" {
    #[wasm_bindgen(js_name = runBash, catch)]
    async fn run_bash_js(request: JsValue) -> Result<JsValue, JsValue>;
}

/// Runs scripts in just-bash inside the isolate.
pub struct JustBash;

#[async_trait(?Send)]
impl BashEngine for JustBash {
    async fn run(&self, request: EngineRequest) -> Result<EngineResponse, BashError> {
        let engine = BashError::Engine;
        let js_request = to_js(request)
            .map_err(|e| engine(format!("bash: could not build the request: {}", message(&e))))?;
        let result =
            run_bash_js(js_request).await.map_err(|e| engine(format!("bash: {}", message(&e))))?;
        from_js(&result)
    }
}

fn set(obj: &Object, key: &str, value: impl Into<JsValue>) -> Result<(), JsValue> {
    Reflect::set(obj, &key.into(), &value.into()).map(|_| ())
}

fn strings(items: Vec<String>) -> Array {
    items.into_iter().map(JsValue::from).collect()
}

fn to_js(request: EngineRequest) -> Result<JsValue, JsValue> {
    let files: Array = request
        .files
        .into_iter()
        .map(|(path, bytes)| Array::of2(&path.into(), &Uint8Array::from(bytes.as_slice())))
        .collect();
    let obj = Object::new();
    set(&obj, "files", files)?;
    set(&obj, "dirs", strings(request.dirs))?;
    set(&obj, "script", request.script)?;
    set(&obj, "cwd", request.cwd)?;
    set(&obj, "timeoutMs", request.timeout_ms as f64)?;
    set(&obj, "network", request.network)?;
    set(&obj, "excludeRoots", strings(request.exclude_roots))?;
    Ok(obj.into())
}

/// The engine answered with something other than the bridge's result shape.
fn unexpected(what: impl std::fmt::Display) -> BashError {
    BashError::Engine(format!("bash: unexpected result from the engine: {what}"))
}

fn get(obj: &JsValue, key: &str) -> Result<JsValue, BashError> {
    Reflect::get(obj, &key.into()).map_err(|_| unexpected(format!("no {key}")))
}

fn from_js(result: &JsValue) -> Result<EngineResponse, BashError> {
    let text = |key: &str| {
        get(result, key)?.as_string().ok_or_else(|| unexpected(format!("{key} is not a string")))
    };
    let raw_entries = get(result, "entries")?;
    if !Array::is_array(&raw_entries) {
        return Err(unexpected("entries is not an array"));
    }
    let mut entries = Vec::new();
    for item in Array::from(&raw_entries).iter() {
        let path = Reflect::get_u32(&item, 0)
            .ok()
            .and_then(|v| v.as_string())
            .ok_or_else(|| unexpected("an entry has no path"))?;
        let kind = match Reflect::get_u32(&item, 1).ok().and_then(|v| v.as_string()).as_deref() {
            Some("file") => FinalKind::File,
            Some("dir") => FinalKind::Dir,
            _ => return Err(unexpected(format!("{path} has an unknown kind"))),
        };
        let content = match Reflect::get_u32(&item, 2) {
            Ok(v) if v.is_instance_of::<Uint8Array>() => {
                Some(v.unchecked_into::<Uint8Array>().to_vec())
            }
            Ok(v) if v.is_null() || v.is_undefined() => None,
            _ => return Err(unexpected(format!("{path} has content that is not a Uint8Array"))),
        };
        entries.push(FinalEntry { path, kind, content });
    }
    Ok(EngineResponse {
        stdout: text("stdout")?,
        stderr: text("stderr")?,
        exit_code: get(result, "exitCode")?
            .as_f64()
            .ok_or_else(|| unexpected("exitCode is not a number"))? as i32,
        aborted: get(result, "aborted")?.is_truthy(),
        error: get(result, "error")?.as_string(),
        entries,
    })
}

/// The message of a thrown JS value.
fn message(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|err| String::from(err.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}
