//! Host tests of the agent's own logic (the continuation barrier, the turn body, tool merge
//! order) over real SQLite, with test doubles for the sockets, the clock and the model.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use futures::executor::{LocalPool, LocalSpawner};
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use serde_json::{json, Value};

use super::{Agent, AgentSpec, Deps, ModelChoice, TurnConfig};
use crate::model::{
    FinishReason, Model, ModelError, ModelEvent, ModelMessage, ModelRequest, ModelStream,
};
use crate::platform::{
    Alarm, Clock, HttpClient, HttpError, HttpRequest, HttpResponse, Sockets, Tasks,
};
use crate::store::sqlite::SqliteSql;

/// Records every frame sent to each connection.
#[derive(Default)]
struct TestSockets(RefCell<BTreeMap<String, Vec<Value>>>);

impl Sockets for TestSockets {
    fn ids(&self) -> Vec<String> {
        self.0.borrow().keys().cloned().collect()
    }
    fn send(&self, id: &str, text: &str) {
        if let Some(frames) = self.0.borrow_mut().get_mut(id) {
            frames.push(serde_json::from_str(text).unwrap_or(Value::Null));
        }
    }
}

/// A pending sleep: when it is due, whether it fired, and who to wake.
type Timer = (f64, Rc<Cell<bool>>, Option<Waker>);

/// Time that moves only when the test says so.
#[derive(Default)]
struct ManualClock {
    now: Cell<f64>,
    timers: RefCell<Vec<Timer>>,
}

impl ManualClock {
    fn advance(&self, ms: f64) {
        self.now.set(self.now.get() + ms);
        let now = self.now.get();
        for (at, done, waker) in self.timers.borrow_mut().iter_mut() {
            if *at <= now && !done.get() {
                done.set(true);
                if let Some(w) = waker.take() {
                    w.wake();
                }
            }
        }
    }
}

struct Sleep {
    done: Rc<Cell<bool>>,
    index: usize,
    clock: Rc<ManualClock>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.done.get() {
            return Poll::Ready(());
        }
        self.clock.timers.borrow_mut()[self.index].2 = Some(cx.waker().clone());
        Poll::Pending
    }
}

struct ClockHandle(Rc<ManualClock>);

#[async_trait(?Send)]
impl Clock for ClockHandle {
    fn now_ms(&self) -> f64 {
        self.0.now.get()
    }
    async fn sleep(&self, ms: u64) {
        let done = Rc::new(Cell::new(ms == 0));
        let index = {
            let mut timers = self.0.timers.borrow_mut();
            timers.push((self.0.now.get() + ms as f64, done.clone(), None));
            timers.len() - 1
        };
        Sleep { done, index, clock: self.0.clone() }.await
    }
    fn random_bytes(&self, buf: &mut [u8]) {
        let seed = self.0.timers.borrow().len() as u8;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = seed.wrapping_mul(31).wrapping_add(i as u8 * 7);
        }
    }
}

struct Spawner(LocalSpawner);

impl Tasks for Spawner {
    fn spawn(&self, task: futures::future::LocalBoxFuture<'static, ()>) {
        let _ = self.0.spawn_local(task);
    }
}

struct NoAlarm;
impl Alarm for NoAlarm {
    fn set(&self, _at_ms: f64) {}
}

struct NoHttp;
#[async_trait(?Send)]
impl HttpClient for NoHttp {
    async fn fetch(&self, _req: HttpRequest) -> Result<HttpResponse, HttpError> {
        Err(HttpError("no network in host tests".into()))
    }
}

/// Plays one event list per model call and records each request.
#[derive(Default)]
struct ScriptedModel {
    calls: RefCell<VecDeque<Vec<ModelEvent>>>,
    seen: RefCell<Vec<ModelRequest>>,
}

#[async_trait(?Send)]
impl Model for ScriptedModel {
    fn id(&self) -> &str {
        "scripted"
    }
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        self.seen.borrow_mut().push(request.clone());
        let events = self.calls.borrow_mut().pop_front().unwrap_or_else(|| text("(unscripted)"));
        Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed_local())
    }
}

fn text(t: &str) -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta(t.into()),
        ModelEvent::Finish { reason: FinishReason::Stop, usage: None },
    ]
}

fn client_calls(ids: &[&str]) -> Vec<ModelEvent> {
    let mut events = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        events.push(ModelEvent::ToolCallStart { index: i, id: (*id).into(), name: "pick".into() });
        events.push(ModelEvent::ToolCallDelta { index: i, arguments: "{}".into() });
    }
    events.push(ModelEvent::Finish { reason: FinishReason::ToolCalls, usage: None });
    events
}

struct Harness {
    pool: LocalPool,
    agent: Rc<Agent>,
    sockets: Rc<TestSockets>,
    clock: Rc<ManualClock>,
    model: Rc<ScriptedModel>,
}

impl Harness {
    fn new(spec: impl FnOnce(ModelChoice) -> AgentSpec) -> Self {
        let pool = LocalPool::new();
        let sockets = Rc::new(TestSockets::default());
        sockets.0.borrow_mut().insert("tab".into(), Vec::new());
        let clock = Rc::new(ManualClock::default());
        clock.now.set(1_000_000.0);
        let model = Rc::new(ScriptedModel::default());
        let deps = Deps {
            sql: Rc::new(SqliteSql::new()),
            sockets: sockets.clone(),
            clock: Rc::new(ClockHandle(clock.clone())),
            http: Rc::new(NoHttp),
            blobs: None,
            bash_engine: None,
            sandbox: None,
            tasks: Rc::new(Spawner(pool.spawner())),
            alarm: Rc::new(NoAlarm),
            instance_id: "test".into(),
        };
        let agent = Agent::new("ThinkAgent", spec(ModelChoice::Custom(model.clone())), deps);
        Self { pool, agent, sockets, clock, model }
    }

    /// Delivers a frame from the tab and runs everything that can run now.
    fn send(&mut self, frame: Value) {
        let agent = self.agent.clone();
        let text = frame.to_string();
        let _ =
            self.pool.spawner().spawn_local(async move { agent.on_message("tab", &text).await });
        self.pool.run_until_stalled();
    }

    fn advance(&mut self, ms: f64) {
        self.clock.advance(ms);
        self.pool.run_until_stalled();
    }

    fn chat(&mut self, text: &str, body: Value) {
        let mut b = json!({
            "messages": [{"id": format!("u-{text}"), "role": "user", "parts": [{"type": "text", "text": text}]}],
            "trigger": "submit-message"
        });
        if let (Some(b), Some(extra)) = (b.as_object_mut(), body.as_object()) {
            b.extend(extra.clone());
        }
        self.send(json!({"type": "cf_agent_use_chat_request", "id": format!("r-{text}"), "init": {"method": "POST", "body": b.to_string()}}));
    }

    fn result(&mut self, id: &str, output: &str, auto_continue: bool) {
        self.send(json!({"type": "cf_agent_tool_result", "toolCallId": id, "toolName": "pick", "output": output, "autoContinue": auto_continue}));
    }

    fn model_calls(&self) -> usize {
        self.model.seen.borrow().len()
    }

    fn frames(&self) -> Vec<Value> {
        self.sockets.0.borrow()["tab"].clone()
    }
}

fn pick_tool() -> Value {
    json!([{"name": "pick", "description": "Pick one", "parameters": {"type": "object"}}])
}

#[test]
fn parallel_client_results_fire_one_continuation_after_the_last() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.calls.borrow_mut().push_back(client_calls(&["a", "b", "c"]));
    h.chat("go", json!({"clientTools": pick_tool()}));
    assert_eq!(h.model_calls(), 1);
    h.result("a", "1", true);
    h.advance(60.0);
    assert_eq!(h.model_calls(), 1, "the batch is incomplete: nothing fires");
    h.result("b", "2", true);
    h.advance(20.0);
    h.result("c", "3", true);
    h.advance(20.0);
    assert_eq!(h.model_calls(), 1, "still inside the coalescing window of the last result");
    h.advance(40.0);
    assert_eq!(h.model_calls(), 2, "exactly one continuation after the last result");
    let seen = h.model.seen.borrow()[1].messages.clone();
    let tools: Vec<&ModelMessage> =
        seen.iter().filter(|m| matches!(m, ModelMessage::Tool { .. })).collect();
    assert_eq!(tools.len(), 3);
    h.advance(1000.0);
    assert_eq!(h.model_calls(), 2);
    let continued = h
        .frames()
        .iter()
        .filter(|f| f["type"] == "cf_agent_use_chat_response" && f["continuation"] == true)
        .count();
    assert!(continued > 0);
}

#[test]
fn results_without_auto_continue_and_repeats_start_nothing() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.calls.borrow_mut().push_back(client_calls(&["a"]));
    h.chat("go", json!({"clientTools": pick_tool()}));
    h.result("a", "1", false);
    h.advance(500.0);
    assert_eq!(h.model_calls(), 1, "no autoContinue, no continuation");
    let updates = h.frames().iter().filter(|f| f["type"] == "cf_agent_message_updated").count();
    assert_eq!(updates, 1);
    h.result("a", "1", true);
    h.advance(500.0);
    assert_eq!(
        h.model_calls(),
        1,
        "a re-applied identical result changes nothing and starts nothing"
    );
    assert_eq!(h.frames().iter().filter(|f| f["type"] == "cf_agent_message_updated").count(), 1);
}

#[test]
fn a_result_without_auto_continue_rearms_a_pending_continuation() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.calls.borrow_mut().push_back(client_calls(&["a", "b"]));
    h.chat("go", json!({"clientTools": pick_tool()}));
    h.result("a", "1", true);
    h.advance(60.0);
    h.result("b", "2", false);
    h.advance(60.0);
    assert_eq!(
        h.model_calls(),
        2,
        "the late sibling completes the batch the first result asked to continue"
    );
}

#[test]
fn before_turn_sees_the_body_and_narrows_the_tools() {
    let seen_body = Rc::new(RefCell::new(Value::Null));
    let seen = seen_body.clone();
    let mut h = Harness::new(move |model| {
        AgentSpec::new(model).before_turn(move |ctx| {
            *seen.borrow_mut() = Value::Object(ctx.body.clone());
            TurnConfig {
                active_tools: Some(vec!["read".into(), "pick".into()]),
                ..Default::default()
            }
        })
    });
    h.model.calls.borrow_mut().push_back(text("ok"));
    h.chat(
        "hello",
        json!({"clientTools": pick_tool(), "userTimezone": "Europe/Paris", "plan": {"tier": 2}}),
    );
    assert_eq!(*seen_body.borrow(), json!({"userTimezone": "Europe/Paris", "plan": {"tier": 2}}));
    let tools: Vec<String> =
        h.model.seen.borrow()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(tools, ["read", "pick"]);
}

#[test]
fn client_tools_override_workspace_tools_of_the_same_name() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.calls.borrow_mut().push_back(text("ok"));
    let read = json!([{"name": "read", "description": "Read from the browser", "parameters": {"type": "object"}}]);
    h.chat("hello", json!({"clientTools": read}));
    let req = &h.model.seen.borrow()[0];
    let read_defs: Vec<_> = req.tools.iter().filter(|t| t.name == "read").collect();
    assert_eq!(read_defs.len(), 1);
    assert_eq!(read_defs[0].description, "Read from the browser");
    assert!(req.tools.iter().any(|t| t.name == "write"), "other workspace tools stay");
}

#[test]
fn an_answer_larger_than_a_row_is_compacted_before_it_is_stored() {
    let mut h = Harness::new(AgentSpec::new);
    let big = "y".repeat(1_200_000);
    let write = |i: usize, path: &str| {
        let args = json!({"path": path, "content": big}).to_string();
        vec![
            ModelEvent::ToolCallStart { index: i, id: format!("w{i}"), name: "write".into() },
            ModelEvent::ToolCallDelta { index: i, arguments: args },
        ]
    };
    let mut step = write(0, "/a.txt");
    step.extend(write(1, "/b.txt"));
    step.push(ModelEvent::Finish { reason: FinishReason::ToolCalls, usage: None });
    h.model.calls.borrow_mut().extend([step, text("both written")]);
    h.chat("write two big files", json!({}));
    let messages = h.agent.messages();
    assert_eq!(messages.len(), 2, "the answer was stored");
    let stored = messages[1].to_value().to_string();
    assert!(stored.len() <= crate::protocol::sanitize::ROW_MAX_BYTES, "{} bytes", stored.len());
    assert_eq!(messages[1].metadata.as_ref().unwrap()["compactedToolInputs"], json!(["w0", "w1"]));
    let file =
        futures::executor::block_on(h.agent.workspace().read_file("/b.txt")).unwrap().unwrap();
    assert_eq!(file.len(), 1_200_000, "the content itself is in the workspace");
}
