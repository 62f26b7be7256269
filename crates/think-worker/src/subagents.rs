//! Agents as tools in the Worker: a parent reaches each child, another instance of the same
//! Durable Object class named from the parent's name and the tool call id, over Durable Object
//! RPC (`subagentRpc(method, json)` on the JS class in `js/entry.mjs`), and a child answers
//! those calls here. Values cross as JSON text.

use std::rc::Rc;

use async_trait::async_trait;
use js_sys::{Function, Reflect};
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::{JsCast, JsValue};
use worker::Env;

use think_core::agent::Agent;
use think_core::protocol::routing::camel_case_to_kebab_case;
use think_core::subagents::events::Batch;
use think_core::subagents::{ChildLink, LinkError, StartRequest};

/// Reaches children through the namespace binding of this object's own class.
pub struct DoLink {
    env: Env,
    binding: String,
}

impl DoLink {
    /// The link for class `class_name`: the binding whose kebab-case name is the class's.
    pub fn new(env: &Env, class_name: &str) -> Option<Self> {
        let kebab = camel_case_to_kebab_case(class_name);
        let obj: &js_sys::Object = AsRef::<JsValue>::as_ref(env).unchecked_ref();
        let binding = js_sys::Object::keys(obj).iter().filter_map(|k| k.as_string()).find(|k| {
            camel_case_to_kebab_case(k) == kebab
                && Reflect::get(obj, &k.into())
                    .ok()
                    .and_then(|ns| Reflect::get(&ns, &"idFromName".into()).ok())
                    .is_some_and(|f| f.is_function())
        })?;
        Some(Self { env: env.clone(), binding })
    }

    /// The stub of the instance of this class named `child`.
    pub(super) fn stub(&self, child: &str) -> Result<JsValue, LinkError> {
        let failed = |e: JsValue| LinkError::Failed(format!("{e:?}"));
        let env: &JsValue = self.env.as_ref();
        let ns = Reflect::get(env, &self.binding.as_str().into()).map_err(failed)?;
        let id_from_name: Function =
            Reflect::get(&ns, &"idFromName".into()).map_err(failed)?.unchecked_into();
        let id = Reflect::apply(&id_from_name, &ns, &js_sys::Array::of1(&child.into()))
            .map_err(failed)?;
        let get: Function = Reflect::get(&ns, &"get".into()).map_err(failed)?.unchecked_into();
        Reflect::apply(&get, &ns, &js_sys::Array::of1(&id)).map_err(failed)
    }

    /// Calls `stub.subagentRpc(method, JSON)` and parses the JSON it answers.
    async fn call(&self, child: &str, method: &str, arg: &Value) -> Result<Value, LinkError> {
        let stub = self.stub(child)?;
        let out =
            super::rpc::call_stub(&stub, "subagentRpc", &[method.into(), arg.to_string().into()])
                .await
                .map_err(|e| LinkError::Failed(super::rpc::js_error_text(&e)))?;
        let text = out.as_string().unwrap_or_else(|| "null".into());
        serde_json::from_str(&text).map_err(|e| LinkError::Failed(e.to_string()))
    }
}

#[async_trait(?Send)]
impl ChildLink for DoLink {
    async fn start(&self, child: &str, req: &StartRequest) -> Result<(), LinkError> {
        let arg = serde_json::to_value(req).unwrap_or(Value::Null);
        self.call(child, "start", &arg).await.map(|_| ())
    }

    async fn events(
        &self,
        child: &str,
        run_id: &str,
        cursor: i64,
        wait_ms: u64,
    ) -> Result<Batch, LinkError> {
        let out = self
            .call(child, "events", &json!({"runId": run_id, "cursor": cursor, "waitMs": wait_ms}))
            .await?;
        serde_json::from_value(out).map_err(|e| LinkError::Failed(e.to_string()))
    }

    async fn cancel(&self, child: &str, run_id: &str) -> Result<(), LinkError> {
        self.call(child, "cancel", &json!({"runId": run_id})).await.map(|_| ())
    }

    async fn approve(
        &self,
        child: &str,
        tool_call_id: &str,
        approved: bool,
    ) -> Result<bool, LinkError> {
        let out = self
            .call(child, "approve", &json!({"toolCallId": tool_call_id, "approved": approved}))
            .await?;
        Ok(out.as_bool().unwrap_or(false))
    }

    async fn messages(&self, child: &str, path: &[String]) -> Result<Value, LinkError> {
        self.call(child, "messages", &json!({"path": path})).await
    }

    async fn release(&self, child: &str, run_id: &str) -> Result<(), LinkError> {
        self.call(child, "release", &json!({"runId": run_id})).await.map(|_| ())
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventsArgs {
    run_id: String,
    cursor: i64,
    wait_ms: u64,
}

#[derive(Deserialize)]
struct PathArgs {
    #[serde(default)]
    path: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunArgs {
    run_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApproveArgs {
    tool_call_id: String,
    approved: bool,
}

fn bad(e: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&format!("subagentRpc: {e}")).into()
}

/// Answers a parent's call on `agent` (a `start` is handled by the host, which may first
/// rebuild the agent with the child's spec). The answer is JSON text.
pub async fn answer(agent: &Rc<Agent>, method: &str, arg: &str) -> Result<JsValue, JsValue> {
    let out = match method {
        "start" => {
            let req: StartRequest = serde_json::from_str(arg).map_err(bad)?;
            agent.start_agent_tool_run(req).map_err(bad)?;
            Value::Bool(true)
        }
        "events" => {
            let a: EventsArgs = serde_json::from_str(arg).map_err(bad)?;
            serde_json::to_value(agent.agent_tool_events(&a.run_id, a.cursor, a.wait_ms).await)
                .map_err(bad)?
        }
        "cancel" => {
            let a: RunArgs = serde_json::from_str(arg).map_err(bad)?;
            agent.cancel_agent_tool_run(&a.run_id);
            Value::Bool(true)
        }
        "release" => {
            let a: RunArgs = serde_json::from_str(arg).map_err(bad)?;
            agent.release_agent_tool_run(&a.run_id);
            Value::Bool(true)
        }
        "approve" => {
            let a: ApproveArgs = serde_json::from_str(arg).map_err(bad)?;
            Value::Bool(agent.agent_tool_approval(&a.tool_call_id, a.approved))
        }
        "messages" => {
            let a: PathArgs = serde_json::from_str(arg).map_err(bad)?;
            if a.path.is_empty() {
                Value::Array(
                    agent
                        .messages()
                        .iter()
                        .map(think_core::protocol::message::UIMessage::to_value)
                        .collect(),
                )
            } else {
                agent.subagents().child_messages(&a.path).await.map_err(bad)?
            }
        }
        other => return Err(bad(format!("unknown method {other}"))),
    };
    Ok(JsValue::from_str(&out.to_string()))
}
