//! `forkSession` in the Worker: the source instance reaches the new one (same class, named by
//! the caller) over Durable Object RPC, `forkRpc(method, json)` on the JS class in
//! `js/entry.mjs`, through the namespace binding the agents-as-tools link already found.

use async_trait::async_trait;
use serde_json::Value;

use super::subagents::DoLink;
use think_core::agent::{ForkError, ForkLink};

#[async_trait(?Send)]
impl ForkLink for DoLink {
    async fn call(&self, name: &str, method: &str, arg: &Value) -> Result<Value, ForkError> {
        let stub = self.stub(name).map_err(|e| ForkError::Failed(e.to_string()))?;
        let out = super::rpc::call_stub(&stub, "forkRpc", &[method.into(), arg.to_string().into()])
            .await
            .map_err(|e| match super::rpc::js_error_text(&e) {
                text if text.contains("is not empty") => ForkError::NotEmpty(name.to_owned()),
                text => ForkError::Failed(text),
            })?;
        let text = out.as_string().unwrap_or_else(|| "null".into());
        serde_json::from_str(&text).map_err(|e| ForkError::Failed(e.to_string()))
    }
}
