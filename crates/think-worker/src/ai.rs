//! [`AiBinding`] over the Worker's `AI` binding: `env.AI.run(model, inputs)` called through
//! js-sys, so the inputs are plain JS objects (JSON-parsed) and the `ReadableStream` the
//! binding returns for `stream: true` is read as it arrives.

use async_trait::async_trait;
use futures::stream::LocalBoxStream;
use futures::StreamExt;
use serde_json::Value;
use wasm_bindgen::{JsCast, JsValue};
use worker::web_sys::ReadableStream;
use worker::{ByteStream, Env};

use think_core::model::workers_ai::{AiBinding, AiRunError, AI_BINDING};
use think_core::platform::HttpError;

/// The `AI` binding of this Worker.
pub struct WorkerAi(JsValue);

impl WorkerAi {
    /// The binding named [`AI_BINDING`], when the Worker has one (an object with `run`).
    pub fn from_env(env: &Env) -> Option<Self> {
        let binding = js_sys::Reflect::get(env.as_ref(), &AI_BINDING.into()).ok()?;
        let run = js_sys::Reflect::get(&binding, &"run".into()).ok()?;
        run.is_function().then_some(WorkerAi(binding))
    }
}

/// The message of a thrown JS value.
fn message(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

#[async_trait(?Send)]
impl AiBinding for WorkerAi {
    async fn run(
        &self,
        model: &str,
        inputs: Value,
    ) -> Result<LocalBoxStream<'static, Result<Vec<u8>, HttpError>>, AiRunError> {
        let fail = |e: JsValue| AiRunError(message(&e));
        let inputs = js_sys::JSON::parse(&inputs.to_string()).map_err(fail)?;
        let run: js_sys::Function = js_sys::Reflect::get(&self.0, &"run".into())
            .map_err(fail)?
            .dyn_into()
            .map_err(|_| AiRunError("env.AI.run is not a function".into()))?;
        let promise = run.call2(&self.0, &model.into(), &inputs).map_err(fail)?;
        let output = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&promise))
            .await
            .map_err(fail)?;
        if let Some(stream) = output.dyn_ref::<ReadableStream>() {
            let bytes = ByteStream::from(stream.clone());
            return Ok(bytes.map(|c| c.map_err(|e| HttpError::Body(e.to_string()))).boxed_local());
        }
        // A model that answered at once (no stream): its object is the one event.
        let text = js_sys::JSON::stringify(&output).map(String::from).map_err(fail)?;
        let body = format!("data: {text}\n\ndata: [DONE]\n\n").into_bytes();
        Ok(futures::stream::iter([Ok(body)]).boxed_local())
    }
}
