//! The Durable Object RPC surface (`chat`, `getMessages`, `clearMessages`, callables), called
//! through the JS `DurableObject` wrapper in `js/entry.mjs`. Values cross as JSON.

use std::cell::RefCell;
use std::rc::Rc;

use futures::channel::mpsc;
use futures::StreamExt;
use js_sys::{Function, Promise, Reflect, JSON};
use serde_json::{json, Value};
use wasm_bindgen::{closure::Closure, JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use think_core::agent::{Agent, CallError, ClientToolExecutor, RpcTurn, TurnObserver};
use think_core::protocol::frames::ClientToolSchema;
use think_core::protocol::message::{Role, UIMessage};
use think_core::turn::abort::AbortSignal;

fn to_json(v: &JsValue) -> Result<Value, JsValue> {
    if v.is_undefined() {
        return Ok(Value::Null);
    }
    let text = JSON::stringify(v)?.as_string().unwrap_or_else(|| "null".into());
    serde_json::from_str(&text).map_err(|e| JsValue::from_str(&e.to_string()))
}

fn to_js(v: &Value) -> Result<JsValue, JsValue> {
    JSON::parse(&v.to_string())
}

/// `obj[name]` if it can be called. RPC stubs' methods are callable without being
/// `Function` instances, so this checks `typeof` rather than the prototype.
fn method(obj: &JsValue, name: &str) -> Option<Function> {
    let f = Reflect::get(obj, &name.into()).ok()?;
    f.is_function().then(|| f.unchecked_into::<Function>())
}

/// Calls `obj[name](arg)` and awaits it if it returns a promise.
async fn call(obj: &JsValue, name: &str, arg: &JsValue) -> Result<JsValue, JsValue> {
    let Some(f) = method(obj, name) else { return Ok(JsValue::UNDEFINED) };
    // Reflect.apply, not `f.call(...)`: on an RPC stub, `.call` would itself be a remote method.
    let out = Reflect::apply(&f, obj, &js_sys::Array::of1(arg))?;
    settle(out).await
}

/// Calls RPC method `name` of a Durable Object stub with `args` and awaits its answer.
pub(super) async fn call_stub(
    stub: &JsValue,
    name: &str,
    args: &[JsValue],
) -> Result<JsValue, JsValue> {
    let f = method(stub, name).ok_or_else(|| {
        JsValue::from(js_sys::Error::new(&format!("the stub has no method {name}")))
    })?;
    let list: js_sys::Array = args.iter().collect();
    settle(Reflect::apply(&f, stub, &list)?).await
}

/// The message of a thrown JavaScript value.
pub(super) fn js_error_text(e: &JsValue) -> String {
    error_text(e.clone())
}

/// Awaits `v` if it is thenable (RPC results are thenables, not always `Promise`s).
async fn settle(v: JsValue) -> Result<JsValue, JsValue> {
    if method(&v, "then").is_some() {
        JsFuture::from(Promise::resolve(&v)).await
    } else {
        Ok(v)
    }
}

enum Event {
    Start(String),
    Chunk(String),
    Error(String),
    Done,
}

/// Queues the turn's events; `forward` delivers them to the caller's callback in order.
struct ChannelObserver(RefCell<Option<mpsc::UnboundedSender<Event>>>);

impl ChannelObserver {
    fn push(&self, e: Event) {
        if let Some(tx) = self.0.borrow().as_ref() {
            let _ = tx.unbounded_send(e);
        }
    }
}

impl TurnObserver for ChannelObserver {
    fn on_start(&self, request_id: &str) {
        self.push(Event::Start(request_id.to_owned()));
    }
    fn on_event(&self, chunk: &str) {
        self.push(Event::Chunk(chunk.to_owned()));
    }
    fn on_error(&self, error: &str) {
        self.push(Event::Error(error.to_owned()));
    }
    fn on_done(&self) {
        self.push(Event::Done);
        self.0.borrow_mut().take();
    }
}

async fn forward(callback: JsValue, mut rx: mpsc::UnboundedReceiver<Event>) {
    while let Some(event) = rx.next().await {
        let result = match event {
            Event::Start(id) => match to_js(&json!({"requestId": id})) {
                Ok(arg) => call(&callback, "onStart", &arg).await,
                Err(e) => Err(e),
            },
            Event::Chunk(body) => call(&callback, "onEvent", &JsValue::from_str(&body)).await,
            Event::Error(e) => call(&callback, "onError", &JsValue::from_str(&e)).await,
            Event::Done => call(&callback, "onDone", &JsValue::UNDEFINED).await,
        };
        if let Err(e) = result {
            think_core::platform::log(&format!("think-rs: a chat() callback failed: {e:?}"));
        }
    }
}

/// Runs client tools through the caller's `onClientToolCall({toolName, input, toolCallId})`.
struct JsClientTools(JsValue);

#[async_trait::async_trait(?Send)]
impl ClientToolExecutor for JsClientTools {
    async fn call(
        &self,
        tool_name: &str,
        input: Value,
        tool_call_id: &str,
    ) -> Result<Value, CallError> {
        let failed = |e: JsValue| CallError::Failed(error_text(e));
        let arg =
            to_js(&json!({"toolName": tool_name, "input": input, "toolCallId": tool_call_id}))
                .map_err(|e| CallError::Failed(format!("{e:?}")))?;
        let f: &Function = self.0.unchecked_ref();
        let out =
            Reflect::apply(f, &JsValue::UNDEFINED, &js_sys::Array::of1(&arg)).map_err(failed)?;
        let out = settle(out).await.map_err(failed)?;
        to_json(&out).map_err(failed)
    }
}

fn error_text(e: JsValue) -> String {
    Reflect::get(&e, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "the client tool failed".into())
}

/// `chat(message, callback, {signal?, clientTools?, onClientToolCall?})`.
pub async fn chat(
    agent: &Rc<Agent>,
    message: JsValue,
    callback: JsValue,
    options: JsValue,
) -> Result<JsValue, JsValue> {
    let message = match to_json(&message)? {
        Value::String(text) => UIMessage::new(
            think_core::platform::random_uuid(&super::WorkerClock),
            Role::User,
            vec![json!({"type": "text", "text": text})],
        ),
        other => UIMessage::from_value(other)
            .map_err(|e| JsValue::from_str(&format!("chat(): invalid message: {e}")))?,
    };
    let opts = if options.is_object() { options } else { js_sys::Object::new().into() };
    let client_tools: Vec<ClientToolSchema> = match Reflect::get(&opts, &"clientTools".into()) {
        Ok(v) if !v.is_undefined() && !v.is_null() => serde_json::from_value(to_json(&v)?)
            .map_err(|e| JsValue::from_str(&format!("chat(): invalid clientTools: {e}")))?,
        _ => Vec::new(),
    };
    let executor = Reflect::get(&opts, &"onClientToolCall".into())
        .ok()
        .filter(|f| f.is_function())
        .map(|f| Rc::new(JsClientTools(f)) as Rc<dyn ClientToolExecutor>);
    let abort = AbortSignal::new();
    let signal = Reflect::get(&opts, &"signal".into()).unwrap_or(JsValue::UNDEFINED);
    let _listener = if let Some(add) = method(&signal, "addEventListener") {
        let a = abort.clone();
        let cb = Closure::<dyn FnMut()>::new(move || a.abort());
        add.call2(&signal, &"abort".into(), cb.as_ref())?;
        if Reflect::get(&signal, &"aborted".into()).ok().and_then(|v| v.as_bool()) == Some(true) {
            abort.abort();
        }
        Some(cb)
    } else {
        None
    };
    let (tx, rx) = mpsc::unbounded();
    let observer = Rc::new(ChannelObserver(RefCell::new(Some(tx))));
    let rpc = RpcTurn { observer: observer.clone(), client_tools, executor, abort: Some(abort) };
    let run = async {
        agent.chat(message, rpc).await;
        // Ends the event stream even if the turn ended on a path that did not.
        observer.on_done();
    };
    futures::join!(run, forward(callback, rx));
    Ok(JsValue::UNDEFINED)
}

/// `getMessages()`: the transcript as UI messages.
pub fn get_messages(agent: &Agent) -> Result<JsValue, JsValue> {
    to_js(&Value::Array(agent.messages().iter().map(UIMessage::to_value).collect()))
}

/// A callable by name (`addMcpServer`, `removeMcpServer`, `getMcpServers`, the app's own).
pub async fn call_method(
    agent: &Rc<Agent>,
    name: String,
    args: JsValue,
) -> Result<JsValue, JsValue> {
    let args = match to_json(&args)? {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        other => vec![other],
    };
    match agent.call(&name, args).await {
        Ok(v) => to_js(&v),
        Err(e) => Err(js_sys::Error::new(&e.to_string()).into()),
    }
}
