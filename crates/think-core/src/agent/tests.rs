//! Host tests of the agent's own logic (the continuation barrier, the turn body, tool merge
//! order) over real SQLite, with test doubles for the sockets, the clock and the model.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use async_trait::async_trait;
use futures::executor::{LocalPool, LocalSpawner};
use futures::task::LocalSpawnExt;
use serde_json::{json, Value};

use super::{Agent, AgentSpec, Deps, ModelChoice, TurnConfig};
use crate::model::{FinishReason, ModelEvent, ModelMessage};
use crate::platform::{Alarm, HttpClient, HttpError, HttpRequest, HttpResponse, Sockets, Tasks};
use crate::store::sqlite::SqliteSql;
use crate::test_support::{text, ManualClock, ScriptedModel};

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

struct Spawner(LocalSpawner);

impl Tasks for Spawner {
    fn spawn(&self, task: futures::future::LocalBoxFuture<'static, ()>) {
        let _ = self.0.spawn_local(task);
    }
}

/// The object's one alarm: the time it is set for.
#[derive(Default)]
struct TestAlarm(RefCell<Option<f64>>);
impl Alarm for TestAlarm {
    fn set(&self, at_ms: f64) {
        *self.0.borrow_mut() = Some(at_ms);
    }
    fn set_no_later(&self, at_ms: f64) {
        let mut at = self.0.borrow_mut();
        *at = Some(at.map_or(at_ms, |t| t.min(at_ms)));
    }
}

struct NoHttp;
#[async_trait(?Send)]
impl HttpClient for NoHttp {
    async fn fetch(&self, _req: HttpRequest) -> Result<HttpResponse, HttpError> {
        Err(HttpError::Connect("no network in host tests".into()))
    }
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
    alarm: Rc<TestAlarm>,
}

impl Harness {
    fn new(spec: impl FnOnce(ModelChoice) -> AgentSpec) -> Self {
        Self::over(Rc::new(SqliteSql::new()), None, spec)
    }

    /// An agent over `sql` (a restart, when an earlier agent used it) with `sandbox`.
    fn over(
        sql: Rc<SqliteSql>,
        sandbox: Option<Rc<dyn crate::codemode::Sandbox>>,
        spec: impl FnOnce(ModelChoice) -> AgentSpec,
    ) -> Self {
        let pool = LocalPool::new();
        let sockets = Rc::new(TestSockets::default());
        sockets.0.borrow_mut().insert("tab".into(), Vec::new());
        let clock = ManualClock::new();
        let model = ScriptedModel::with_fallback(text("(unscripted)"));
        let alarm = Rc::new(TestAlarm::default());
        let deps = Deps {
            sql,
            sockets: sockets.clone(),
            clock: clock.clone(),
            http: Rc::new(NoHttp),
            blobs: None,
            bash_engine: None,
            sandbox,
            tasks: Rc::new(Spawner(pool.spawner())),
            alarm: alarm.clone(),
            instance_id: "test".into(),
            browser: None,
        };
        let agent = Agent::new("ThinkAgent", spec(ModelChoice::Custom(model.clone())), deps);
        Self { pool, agent, sockets, clock, model, alarm }
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
        self.model.seen().len()
    }

    fn frames(&self) -> Vec<Value> {
        self.frames_of("tab")
    }

    fn frames_of(&self, conn: &str) -> Vec<Value> {
        self.sockets.0.borrow()[conn].clone()
    }

    /// Opens another connection, as a tab that connects now.
    fn connect(&mut self, conn: &str) {
        self.sockets.0.borrow_mut().insert(conn.into(), Vec::new());
        self.agent.on_connect(conn);
        self.pool.run_until_stalled();
    }

    /// A new instance over this one's storage, sockets and clock, as after a crash: whatever
    /// the old one had in flight is dropped with its task pool.
    fn restart(self, spec: impl FnOnce(ModelChoice) -> AgentSpec) -> Self {
        let Harness { pool, agent, sockets, clock, alarm, .. } = self;
        let mut deps = agent.deps.clone();
        drop(pool);
        drop(agent);
        let pool = LocalPool::new();
        deps.tasks = Rc::new(Spawner(pool.spawner()));
        let model = ScriptedModel::with_fallback(text("(unscripted)"));
        let agent = Agent::new("ThinkAgent", spec(ModelChoice::Custom(model.clone())), deps);
        Self { pool, agent, sockets, clock, model, alarm }
    }

    /// Delivers a frame from connection `conn`.
    fn send_from(&mut self, conn: &str, frame: Value) {
        let (agent, conn, text) = (self.agent.clone(), conn.to_owned(), frame.to_string());
        let _ =
            self.pool.spawner().spawn_local(async move { agent.on_message(&conn, &text).await });
        self.pool.run_until_stalled();
    }
}

fn pick_tool() -> Value {
    json!([{"name": "pick", "description": "Pick one", "parameters": {"type": "object"}}])
}

#[test]
fn parallel_client_results_fire_one_continuation_after_the_last() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.push([client_calls(&["a", "b", "c"])]);
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
    let seen = h.model.seen()[1].messages.clone();
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
    h.model.push([client_calls(&["a"])]);
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
    h.model.push([client_calls(&["a", "b"])]);
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
    h.model.push([text("ok")]);
    h.chat(
        "hello",
        json!({"clientTools": pick_tool(), "userTimezone": "Europe/Paris", "plan": {"tier": 2}}),
    );
    assert_eq!(*seen_body.borrow(), json!({"userTimezone": "Europe/Paris", "plan": {"tier": 2}}));
    let tools: Vec<String> = h.model.seen()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(tools, ["read", "pick"]);
}

#[test]
fn client_tools_override_workspace_tools_of_the_same_name() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.push([text("ok")]);
    let read = json!([{"name": "read", "description": "Read from the browser", "parameters": {"type": "object"}}]);
    h.chat("hello", json!({"clientTools": read}));
    let req = &h.model.seen()[0];
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
    h.model.push([step, text("both written")]);
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

#[test]
fn a_message_holding_a_value_at_the_parse_limit_is_kept_in_the_transcript() {
    let h = Harness::new(AgentSpec::new);
    let store = super::store::ChatStore::new(h.agent.deps.sql.as_ref());
    // 127 levels: the deepest a tool result parsed from a frame or a stream can be. Inside
    // the message's parts it is stored deeper, beyond serde_json's limit.
    let output: Value = serde_json::from_str(&format!("{}1{}", "[".repeat(127), "]".repeat(127)))
        .expect("serde_json parses 127 levels");
    let part = json!({"type": "tool-deep", "toolCallId": "c1", "state": "output-available",
        "input": {}, "output": output});
    let m = crate::protocol::message::UIMessage::new(
        "a-deep",
        crate::protocol::message::Role::Assistant,
        vec![part.clone()],
    );
    store.upsert(&m, 1.0).unwrap();
    let kept = store.messages().unwrap();
    assert_eq!(kept.len(), 1, "the message is read back, not skipped");
    assert_eq!(kept[0].parts[0]["output"], part["output"]);
}

#[test]
fn queued_messages_left_by_a_crash_are_answered_in_order_on_start() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.push([text("first answer"), text("answer to q1"), text("answer to q2")]);
    h.chat("first", json!({}));
    // What a crash leaves: two messages in the queue whose turns never started.
    let store = super::store::ChatStore::new(h.agent.deps.sql.as_ref());
    for (request, text) in [("r-q1", "q1"), ("r-q2", "q2")] {
        let m = crate::protocol::message::UIMessage::new(
            format!("u-{text}"),
            crate::protocol::message::Role::User,
            vec![json!({"type": "text", "text": text})],
        );
        store.enqueue(request, &m).unwrap();
    }
    assert_eq!(h.model_calls(), 1);
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(agent.start());
    h.pool.run_until_stalled();
    assert_eq!(h.model_calls(), 3, "each queued message gets its own turn");
    let last_user = |i: usize| match h.model.seen()[i].messages.last() {
        Some(ModelMessage::User { content }) => format!("{content:?}"),
        other => panic!("{other:?}"),
    };
    assert!(last_user(1).contains("q1"), "{}", last_user(1));
    assert!(last_user(2).contains("q2"), "{}", last_user(2));
    assert_eq!(
        transcript_texts(&h),
        ["first", "first answer", "q1", "answer to q1", "q2", "answer to q2"]
    );
}

/// A chat request frame for `text` from a tab whose transcript is `earlier` plus `text`.
fn chat_frame(text: &str, earlier: &[&str]) -> Value {
    let mut messages: Vec<Value> = earlier
        .iter()
        .map(|t| json!({"id": format!("u-{t}"), "role": "user", "parts": [{"type": "text", "text": t}]}))
        .collect();
    messages.push(json!({"id": format!("u-{text}"), "role": "user", "parts": [{"type": "text", "text": text}]}));
    let body = json!({"messages": messages, "trigger": "submit-message"});
    json!({"type": "cf_agent_use_chat_request", "id": format!("r-{text}"), "init": {"method": "POST", "body": body.to_string()}})
}

fn responses_of(frames: &[Value], id: &str) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "cf_agent_use_chat_response" && f["id"] == id)
        .cloned()
        .collect()
}

/// A turn streams (each stream waits 100 ms before it ends) and tab `silent` connects
/// meanwhile, so it is offered the stream; the next turn answers `next`.
fn silent_tab_joins_a_stream(next: &str) -> Harness {
    let mut h = Harness::new(AgentSpec::new);
    h.model.delay_streams(h.clock.clone(), 100);
    h.model.push([text("first answer"), text(next)]);
    h.chat("first", json!({}));
    h.connect("silent");
    h
}

/// The text of every message of the transcript the tabs see.
fn transcript_texts(h: &Harness) -> Vec<String> {
    h.agent
        .messages()
        .iter()
        .map(|m| m.parts.iter().filter_map(|p| p["text"].as_str()).collect())
        .collect()
}

#[test]
fn a_tab_that_never_acks_gets_the_transcript_when_the_stream_ends_and_its_own_turn() {
    let mut h = silent_tab_joins_a_stream("answer for the silent tab");
    let offer = h.frames_of("silent")[0].clone();
    assert_eq!(offer, json!({"type": "cf_agent_stream_resuming", "id": "r-first"}));
    h.advance(100.0);
    let silent = h.frames_of("silent");
    assert!(responses_of(&silent, "r-first").is_empty(), "nothing of the offered stream, unasked");
    let last = silent.last().unwrap();
    assert_eq!(last["type"], "cf_agent_chat_messages", "the offer ended with the stream");
    assert_eq!(last["messages"].as_array().unwrap().len(), 2);

    h.send_from("silent", chat_frame("mine", &["first"]));
    h.advance(100.0);
    let own = responses_of(&h.frames_of("silent"), "r-mine");
    assert!(own.iter().any(|f| f["body"].as_str().unwrap_or("").contains("answer for the silent")));
    assert_eq!(own.last().unwrap()["done"], true);
}

#[test]
fn a_tab_that_never_acks_follows_the_live_stream_once_it_sends_a_message() {
    let mut h = silent_tab_joins_a_stream("second answer");
    h.send_from("silent", chat_frame("mine", &["first"]));
    h.advance(100.0);
    let silent = h.frames_of("silent");
    let live = responses_of(&silent, "r-first");
    // The text streamed before it joined; the rest of the stream reaches it live.
    let bodies: Vec<&str> = live.iter().filter_map(|f| f["body"].as_str()).collect();
    assert!(bodies.iter().any(|b| b.contains(r#""type":"finish""#)), "{bodies:?}");
    assert_eq!(live.last().unwrap()["done"], true);
    h.advance(100.0);
    let own = responses_of(&h.frames_of("silent"), "r-mine");
    assert_eq!(own.last().unwrap()["done"], true);
}

/// The `seq` of every frame of request `id` that carries a chunk, replayed or live, in order.
fn chunk_seqs(frames: &[Value], id: &str) -> Vec<u64> {
    responses_of(frames, id).iter().filter_map(|f| f["seq"].as_u64()).collect()
}

/// The handshake frames (`stream_*`) a connection was sent, by type and probe id.
fn handshake(frames: &[Value]) -> Vec<(String, Value)> {
    frames
        .iter()
        .filter(|f| f["type"].as_str().is_some_and(|t| t.starts_with("cf_agent_stream_")))
        .map(|f| (f["type"].as_str().unwrap_or_default().to_owned(), f["probeId"].clone()))
        .collect()
}

/// A tab's resume probe whose answer was lost with its old socket is retried on its new one
/// right after the request the tab buffered while offline. The socket that sent the request
/// reads the stream as that request's response: it is not offered its own stream (an ACK
/// would replay what it already has), and its probe is answered when the stream is over.
#[test]
fn a_probe_from_the_socket_that_sent_the_streaming_request_is_answered_when_it_ends() {
    let mut h = Harness::new(AgentSpec::new);
    h.connect("tab");
    h.model.delay_streams(h.clock.clone(), 100);
    h.model.push([text("the answer")]);
    h.chat("question", json!({}));
    // The answer streams: the probe arrives mid-stream.
    assert!(!chunk_seqs(&h.frames(), "r-question").is_empty());
    h.send(json!({"type": "cf_agent_stream_resume_request", "probeId": "p1"}));
    assert_eq!(handshake(&h.frames()), [("cf_agent_stream_pending".to_owned(), json!("p1"))]);
    h.advance(100.0);
    let frames = h.frames();
    let seqs = chunk_seqs(&frames, "r-question");
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "each chunk once, in order");
    assert!(responses_of(&frames, "r-question").iter().all(|f| f.get("replay").is_none()));
    assert_eq!(
        handshake(&frames),
        [
            ("cf_agent_stream_pending".to_owned(), json!("p1")),
            ("cf_agent_stream_resume_none".to_owned(), json!("p1")),
        ]
    );
    let done = frames.iter().position(|f| f["id"] == "r-question" && f["done"] == true);
    let none = frames.iter().position(|f| f["type"] == "cf_agent_stream_resume_none");
    assert!(done < none, "the probe is answered after the stream's end");
}

/// The same probe while the request waits for its slot (here the debounce window): the
/// tab is parked, and the stream that then starts is its own, so it stays parked.
#[test]
fn a_probe_parked_before_the_tabs_own_stream_starts_is_not_offered_that_stream() {
    let mut h = Harness::new(|m| {
        AgentSpec::new(m).message_concurrency(super::MessageConcurrency::Debounce(50))
    });
    h.connect("tab");
    h.model.push([text("the answer")]);
    h.chat("question", json!({}));
    h.send(json!({"type": "cf_agent_stream_resume_request", "probeId": "p1"}));
    assert_eq!(handshake(&h.frames()), [("cf_agent_stream_pending".to_owned(), json!("p1"))]);
    h.advance(50.0);
    let frames = h.frames();
    let seqs = chunk_seqs(&frames, "r-question");
    assert!(!seqs.is_empty());
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "each chunk once, in order");
    assert_eq!(
        handshake(&frames),
        [
            ("cf_agent_stream_pending".to_owned(), json!("p1")),
            ("cf_agent_stream_resume_none".to_owned(), json!("p1")),
        ]
    );
}

/// A tab whose socket dropped while its own answer streamed comes back under the same id:
/// its new socket missed frames, so it is offered the stream like any tab and gets no live
/// frame of it until it ACKs; the replay then brings each chunk once.
#[test]
fn a_tab_that_reconnects_during_its_own_stream_gets_each_chunk_once_after_its_ack() {
    let mut h = Harness::new(AgentSpec::new);
    h.connect("tab");
    h.model.delay_streams(h.clock.clone(), 100);
    h.model.push([text("the answer")]);
    h.chat("question", json!({}));
    let before = chunk_seqs(&h.frames(), "r-question");
    assert!(!before.is_empty());
    h.connect("tab");
    assert_eq!(handshake(&h.frames()), [("cf_agent_stream_resuming".to_owned(), Value::Null)]);
    h.advance(100.0);
    assert!(
        responses_of(&h.frames(), "r-question").is_empty(),
        "no live frame of the stream before the ACK"
    );
    h.send(json!({"type": "cf_agent_stream_resume_ack", "id": "r-question"}));
    let frames = h.frames();
    let seqs = chunk_seqs(&frames, "r-question");
    assert!(seqs.len() > before.len());
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "each chunk once, in order");
    let dones = responses_of(&frames, "r-question").iter().filter(|f| f["done"] == true).count();
    assert_eq!(dones, 1, "one terminal frame");
}

#[test]
fn queue_mode_sends_each_turn_the_history_up_to_its_own_message() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.delay_streams(h.clock.clone(), 50);
    h.model.push([text("answer one"), text("answer two"), text("answer three")]);
    h.chat("one", json!({}));
    h.connect("other");
    h.send_from("other", chat_frame("two", &[]));
    h.send_from("tab", chat_frame("three", &["one"]));
    assert_eq!(
        transcript_texts(&h),
        ["one", "two", "three"],
        "queued messages are shown at the end"
    );
    for _ in 0..3 {
        h.advance(50.0);
    }
    let last_user: Vec<String> = h
        .model
        .seen()
        .iter()
        .map(|r| match r.messages.last() {
            Some(ModelMessage::User { content }) => format!("{content:?}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(last_user.len(), 3);
    for (seen, want) in last_user.iter().zip(["one", "two", "three"]) {
        assert!(seen.contains(want), "{seen} should end with {want}");
    }
    assert_eq!(
        transcript_texts(&h),
        ["one", "answer one", "two", "answer two", "three", "answer three"]
    );
}

/// A model call that runs the `write` tool on `path`.
fn write_call(path: &str) -> Vec<ModelEvent> {
    let args = json!({"path": path, "content": "hello"}).to_string();
    vec![
        ModelEvent::ToolCallStart { index: 0, id: "w1".into(), name: "write".into() },
        ModelEvent::ToolCallDelta { index: 0, arguments: args },
        ModelEvent::Finish { reason: FinishReason::ToolCalls, usage: None },
    ]
}

fn workspace_pushes(frames: &[Value]) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == "think_workspace_changed").cloned().collect()
}

/// Calls a callable over the `rpc` frame and returns its reply frame.
fn rpc(h: &mut Harness, id: &str, method: &str, args: Value) -> Value {
    h.send(json!({"type": "rpc", "id": id, "method": method, "args": args}));
    h.frames().into_iter().rfind(|f| f["type"] == "rpc" && f["id"] == id).expect("an rpc reply")
}

#[test]
fn workspace_changes_reach_every_tab_as_one_coalesced_push() {
    let mut h = Harness::new(AgentSpec::new);
    h.connect("other");
    h.model.push([write_call("/notes/a.txt"), text("saved")]);
    h.chat("save", json!({}));
    assert!(workspace_pushes(&h.frames()).is_empty(), "nothing before the window ends");
    h.advance(super::files::WORKSPACE_PUSH_MS as f64);
    for conn in ["tab", "other"] {
        let pushes = workspace_pushes(&h.frames_of(conn));
        assert_eq!(
            pushes,
            [
                json!({"type": "think_workspace_changed", "paths": ["/notes/a.txt"], "truncated": false})
            ]
        );
    }
    // An upload, a mkdir from Rust and a failed write within one window: one push, the
    // successful paths only.
    let b64 = "aGk="; // "hi"
    let reply = rpc(&mut h, "1", "writeWorkspaceFile", json!(["up/x.txt", b64, "text/plain"]));
    assert_eq!(reply["result"], json!({"path": "/up/x.txt", "size": 2}), "{reply}");
    h.agent.workspace().mkdir("/made", false).unwrap();
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(async move {
        assert!(agent.workspace().write_file("/up/x.txt/child", "x", "text/plain").await.is_err());
    });
    h.pool.run_until_stalled();
    h.advance(super::files::WORKSPACE_PUSH_MS as f64);
    let pushes = workspace_pushes(&h.frames_of("other"));
    assert_eq!(pushes.len(), 2);
    assert_eq!(pushes[1]["paths"], json!(["/made", "/up/x.txt"]));
    // Past the bound the push says `truncated` instead of listing everything.
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(async move {
        for i in 0..150 {
            agent.workspace().write_file(&format!("/many/{i}"), "x", "text/plain").await.unwrap();
        }
    });
    h.pool.run_until_stalled();
    h.advance(super::files::WORKSPACE_PUSH_MS as f64);
    let last = workspace_pushes(&h.frames()).pop().unwrap();
    assert_eq!(last["paths"].as_array().unwrap().len(), super::files::MAX_PUSHED_PATHS);
    assert_eq!(last["truncated"], true);
}

#[test]
fn workspace_callables_list_view_download_and_upload() {
    let mut h = Harness::new(AgentSpec::new);
    let png = "iVBORw0KGgoAAAANSUhEUg=="; // a PNG header: not text
    assert_eq!(
        rpc(&mut h, "w1", "writeWorkspaceFile", json!(["/img/a.png", png, "image/png"]))["success"],
        true
    );
    assert_eq!(
        rpc(&mut h, "w2", "writeWorkspaceFile", json!(["/src/main.rs", "Zm4gbWFpbigpIHt9", ""]))
            ["success"],
        true
    );
    let list = rpc(&mut h, "l", "listWorkspace", json!([]))["result"].clone();
    let paths: Vec<&str> =
        list["entries"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/img", "/img/a.png", "/src", "/src/main.rs"]);
    assert_eq!(list["entries"][0]["type"], "directory");
    assert_eq!(list["truncated"], false);
    let text = rpc(&mut h, "r1", "readWorkspaceFile", json!(["/src/main.rs"]))["result"].clone();
    assert_eq!(
        text,
        json!({"path": "/src/main.rs", "mimeType": "text/plain", "size": 12, "text": "fn main() {}"})
    );
    let bin = rpc(&mut h, "r2", "readWorkspaceFile", json!(["/img/a.png"]))["result"].clone();
    assert_eq!(bin["binary"], true);
    assert_eq!(bin["mimeType"], "image/png");
    let down =
        rpc(&mut h, "r3", "readWorkspaceFile", json!(["/img/a.png", "base64"]))["result"].clone();
    assert_eq!(down["base64"], png);
    // Bad input is a clear error, and the object keeps answering.
    let bad = rpc(&mut h, "e1", "writeWorkspaceFile", json!(["/x", "not base64!"]));
    assert_eq!(bad["success"], false);
    assert!(bad["error"].as_str().unwrap().contains("not base64"), "{bad}");
    let missing = rpc(&mut h, "e2", "readWorkspaceFile", json!(["/nope"]));
    assert!(missing["error"].as_str().unwrap().contains("no such file"), "{missing}");
    let dir = rpc(&mut h, "e3", "readWorkspaceFile", json!(["/img"]));
    assert!(dir["error"].as_str().unwrap().contains("not a file"), "{dir}");
    let enc = rpc(&mut h, "e4", "readWorkspaceFile", json!(["/img/a.png", "hex"]));
    assert!(enc["error"].as_str().unwrap().contains("encoding"), "{enc}");
    let no_path = rpc(&mut h, "e5", "writeWorkspaceFile", json!([1, "aGk="]));
    assert!(no_path["error"].as_str().unwrap().contains("path must be a string"), "{no_path}");
    let onto_dir = rpc(&mut h, "e6", "writeWorkspaceFile", json!(["/img", "aGk="]));
    assert!(onto_dir["error"].as_str().unwrap().contains("EISDIR"), "{onto_dir}");
    assert_eq!(
        rpc(&mut h, "l2", "listWorkspace", json!([]))["result"]["entries"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}

fn ids(messages: &[crate::protocol::message::UIMessage]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone()).collect()
}

#[test]
fn each_turn_starts_from_a_checkpoint_that_a_rewind_returns_to_and_every_tab_is_told() {
    let mut h = Harness::new(AgentSpec::new);
    h.connect("other");
    h.model.push([text("first")]);
    h.chat("one", json!({}));
    let after_one = ids(&h.agent.messages());
    h.model.push([write_call("/notes/a.txt"), text("saved")]);
    h.chat("two", json!({}));
    h.advance(super::files::WORKSPACE_PUSH_MS as f64);
    assert!(h.agent.workspace().stat("/notes/a.txt").unwrap().is_some());

    let list = rpc(&mut h, "l", "checkpoints", json!([]))["result"].clone();
    let turns: Vec<Value> = list.as_array().unwrap().iter().map(|c| c["turnId"].clone()).collect();
    assert_eq!(turns, [json!("u-one"), json!("u-two")], "{list}");
    let id = list[1]["id"].as_str().unwrap().to_owned();

    let streams = |h: &Harness| {
        let rows = h.agent.deps.sql.exec("SELECT message_id FROM think_streams", &[]).unwrap();
        rows.iter().filter_map(|r| r[0].as_str().map(str::to_owned)).collect::<Vec<_>>()
    };
    let last = h.agent.messages().last().unwrap().id.clone();
    assert!(streams(&h).contains(&last), "the second answer's stream is kept for resumes");
    let seen = h.frames_of("other").len();
    let reply = rpc(&mut h, "r", "rewind", json!([id]));
    assert_eq!(reply["success"], true, "{reply}");
    assert!(!streams(&h).contains(&last), "no resume replays the removed answer");
    assert_eq!(
        ids(&h.agent.messages()),
        after_one,
        "the second turn's message and answer are gone"
    );
    assert!(h.agent.workspace().stat("/notes/a.txt").unwrap().is_none(), "its file is gone");
    let told = &h.frames_of("other")[seen..];
    let transcript = told.iter().find(|f| f["type"] == "cf_agent_chat_messages").expect("messages");
    let sent: Vec<&str> = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(sent, after_one);
    let push = told.iter().find(|f| f["type"] == "think_workspace_changed").expect("a push");
    assert!(push["paths"].as_array().unwrap().contains(&json!("/notes/a.txt")), "{push}");
}

#[test]
fn a_rewind_is_refused_while_a_turn_runs() {
    let mut h = Harness::new(AgentSpec::new);
    let id = rpc(&mut h, "c", "checkpoint", json!(["start"]))["result"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    h.model.delay_streams(h.clock.clone(), 1_000);
    h.model.push([text("slow")]);
    h.chat("wait", json!({}));
    let refused = rpc(&mut h, "r1", "rewind", json!([id]));
    assert_eq!(refused["success"], false);
    assert_eq!(refused["error"], super::REWIND_REFUSED);
    assert_eq!(h.agent.messages().len(), 1, "nothing was rewound");
    h.advance(1_000.0);
    let done = rpc(&mut h, "r2", "rewind", json!([id]));
    assert_eq!(done["success"], true, "{done}");
    assert!(h.agent.messages().is_empty());
}

/// Reaches another host agent directly, as DO RPC reaches another instance; the connection
/// is lost after the given number of pages.
struct LocalFork(Rc<Agent>, std::cell::Cell<u32>);

#[async_trait(?Send)]
impl super::ForkLink for LocalFork {
    async fn call(
        &self,
        _name: &str,
        method: &str,
        arg: &Value,
    ) -> Result<Value, super::ForkError> {
        if method == "page" {
            if self.1.get() == 0 {
                return Err(super::ForkError::Failed("the connection was lost".into()));
            }
            self.1.set(self.1.get() - 1);
        }
        self.0.fork_rpc(method, &arg.to_string()).await
    }
}

#[test]
fn a_fork_copies_the_checkpoint_and_the_original_keeps_its_state() {
    let mut src = Harness::new(AgentSpec::new);
    let mut dst = Harness::new(AgentSpec::new);
    src.agent.set_fork_link(Rc::new(LocalFork(dst.agent.clone(), u32::MAX.into())));
    // Three files of 400 KB: more than one page (720 KiB of content) crosses to the fork.
    let big: Vec<String> = (0..3).map(|i| format!("{i}").repeat(400_000)).collect();
    for (i, content) in big.iter().enumerate() {
        let (ws, content) = (src.agent.workspace().clone(), content.clone());
        let path = format!("/big/{i}.txt");
        let _ = src.pool.spawner().spawn_local(async move {
            ws.write_file(&path, &content, "text/plain").await.unwrap();
        });
    }
    src.pool.run_until_stalled();
    src.model.push([text("first")]);
    src.chat("one", json!({}));
    let at_one = src.agent.messages();
    src.model.push([write_call("/notes/a.txt"), text("saved")]);
    src.chat("two", json!({}));
    let list = rpc(&mut src, "l", "checkpoints", json!([]))["result"].clone();
    let id = list[1]["id"].as_str().unwrap().to_owned();

    let forked = rpc(&mut src, "f", "forkSession", json!([id, "copy"]));
    assert_eq!(forked["success"], true, "{forked}");
    assert!(forked["result"]["pages"].as_u64().unwrap() >= 2, "{forked}");
    dst.pool.run_until_stalled();
    for (i, content) in big.iter().enumerate() {
        let (ws, path) = (dst.agent.workspace().clone(), format!("/big/{i}.txt"));
        let read = futures::executor::block_on(ws.read_file(&path)).unwrap();
        assert_eq!(read.as_deref(), Some(content.as_str()), "{path}");
    }
    assert_eq!(dst.agent.messages(), at_one, "the fork has the transcript at the checkpoint");
    assert!(dst.agent.workspace().stat("/notes/a.txt").unwrap().is_none());
    assert_eq!(src.agent.messages().len(), 4, "the original keeps both turns");
    assert!(src.agent.workspace().stat("/notes/a.txt").unwrap().is_some());

    let again = rpc(&mut src, "f2", "forkSession", json!([id, "copy"]));
    assert_eq!(again["success"], false);
    assert!(again["error"].as_str().unwrap().contains("is not empty"), "{again}");
}

#[test]
fn a_regenerate_takes_a_checkpoint_that_brings_the_old_answer_back() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.push([write_call("/notes/a.txt"), text("first answer")]);
    h.chat("one", json!({}));
    let before = h.agent.messages();
    assert!(before.len() >= 2, "{before:?}");
    h.model.push([text("second answer")]);
    let kept = json!([{"id": "u-one", "role": "user", "parts": [{"type": "text", "text": "one"}]}]);
    let body = json!({"messages": kept, "trigger": "regenerate-message"});
    h.send(json!({"type": "cf_agent_use_chat_request", "id": "r-regen", "init": {"method": "POST", "body": body.to_string()}}));
    assert_ne!(h.agent.messages(), before, "the answer was regenerated");
    let list = rpc(&mut h, "l", "checkpoints", json!([]))["result"].clone();
    let labels: Vec<Value> = list.as_array().unwrap().iter().map(|c| c["label"].clone()).collect();
    assert_eq!(labels, [Value::Null, json!("regenerate")], "{list}");
    let id = list[1]["id"].as_str().unwrap().to_owned();
    let reply = rpc(&mut h, "r", "rewind", json!([id]));
    assert_eq!(reply["success"], true, "{reply}");
    assert_eq!(h.agent.messages(), before, "the old answer is back");
    assert!(h.agent.workspace().stat("/notes/a.txt").unwrap().is_some());
}

#[test]
fn an_interrupted_fork_can_be_taken_over_once_its_claim_is_stale() {
    let mut src = Harness::new(AgentSpec::new);
    let dst = Harness::new(AgentSpec::new);
    for i in 0..2 {
        let ws = src.agent.workspace().clone();
        let _ = src.pool.spawner().spawn_local(async move {
            ws.write_file(&format!("/big/{i}.txt"), &"z".repeat(500_000), "text/plain")
                .await
                .unwrap();
        });
    }
    src.pool.run_until_stalled();
    src.model.push([text("first")]);
    src.chat("one", json!({}));
    let list = rpc(&mut src, "l", "checkpoints", json!([]))["result"].clone();
    let id = list[0]["id"].as_str().unwrap().to_owned();
    // The first fork dies after one page: the target holds part of the import.
    src.agent.set_fork_link(Rc::new(LocalFork(dst.agent.clone(), 1.into())));
    let dead = rpc(&mut src, "f1", "forkSession", json!([id, "copy"]));
    assert_eq!(dead["success"], false, "{dead}");
    let full = Rc::new(LocalFork(dst.agent.clone(), u32::MAX.into()));
    src.agent.set_fork_link(full);
    // While the claim is fresh, nobody else may fork into it.
    dst.clock.advance(super::checkpoints::FORK_CLAIM_STALE_MS - 1_000.0);
    let early = rpc(&mut src, "f2", "forkSession", json!([id, "copy"]));
    assert!(early["error"].as_str().unwrap_or("").contains("is not empty"), "{early}");
    // Once it made no progress for long enough, a new fork takes over and starts clean.
    dst.clock.advance(1_000.0);
    let taken = rpc(&mut src, "f3", "forkSession", json!([id, "copy"]));
    assert_eq!(taken["success"], true, "{taken}");
    let mut at_checkpoint = Vec::new();
    for i in 0..2 {
        let ws = dst.agent.workspace().clone();
        let read = futures::executor::block_on(ws.read_file(&format!("/big/{i}.txt"))).unwrap();
        at_checkpoint.push(read);
    }
    assert_eq!(at_checkpoint, vec![Some("z".repeat(500_000)); 2]);
    assert!(dst.agent.messages().is_empty(), "the checkpoint preceded the first message");
    let entries = dst.agent.workspace().glob("/**").unwrap().len();
    assert_eq!(entries, 3, "/big and its two files, nothing left from the dead fork");
}

struct Unobserved;
impl super::TurnObserver for Unobserved {
    fn on_start(&self, _request_id: &str) {}
    fn on_event(&self, _chunk: &str) {}
    fn on_error(&self, _error: &str) {}
    fn on_done(&self) {}
}

#[test]
fn the_turn_checkpoint_precedes_the_user_message_on_every_path_and_policy() {
    use crate::protocol::message::{Role, UIMessage};
    for policy in [super::MessageConcurrency::Queue, super::MessageConcurrency::Latest] {
        let mut h = Harness::new(|m| AgentSpec::new(m).message_concurrency(policy));
        h.model.push([text("a")]);
        h.chat("one", json!({}));
        let after_one = ids(&h.agent.messages());
        // A programmatic turn (DO RPC `chat()`, and a sub-agent's run).
        let message =
            UIMessage::new("u-rpc", Role::User, vec![json!({"type": "text", "text": "rpc"})]);
        let rpc_turn = super::RpcTurn {
            observer: Rc::new(Unobserved),
            client_tools: Vec::new(),
            executor: None,
            abort: None,
        };
        let agent = h.agent.clone();
        let _ = h.pool.spawner().spawn_local(async move { agent.chat(message, rpc_turn).await });
        h.pool.run_until_stalled();
        assert_eq!(h.agent.messages().len(), 4, "{policy:?}");
        let list = rpc(&mut h, "l", "checkpoints", json!([]))["result"].clone();
        let turns: Vec<Value> =
            list.as_array().unwrap().iter().map(|c| c["turnId"].clone()).collect();
        assert_eq!(turns, [json!("u-one"), json!("u-rpc")], "{policy:?}");
        let reply = rpc(&mut h, "r", "rewind", json!([list[1]["id"]]));
        assert_eq!(reply["success"], true, "{reply}");
        assert_eq!(ids(&h.agent.messages()), after_one, "{policy:?}");
    }
}

/// Runs the alarm as the platform does: it is no longer set while it runs.
fn fire_alarm(h: &mut Harness) {
    h.alarm.0.borrow_mut().take();
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(async move { agent.on_alarm().await });
    h.pool.run_until_stalled();
}

#[test]
fn writes_arm_the_alarm_that_indexes_them_for_grep_and_an_idle_alarm_does_nothing() {
    use super::files::INDEX_DELAY_MS;
    use crate::platform::Clock;
    let mut h = Harness::new(AgentSpec::new);
    // An earlier alarm (a sweep) is kept: indexing never pushes it back.
    h.alarm.set(h.clock.now_ms() + 500.0);
    for i in 0..40 {
        let body = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            format!("file {i} body"),
        );
        let reply = rpc(
            &mut h,
            &format!("w{i}"),
            "writeWorkspaceFile",
            json!([format!("/d/{i}.txt"), body, "text/plain"]),
        );
        assert_eq!(reply["result"]["path"], json!(format!("/d/{i}.txt")), "{reply}");
    }
    assert_eq!(*h.alarm.0.borrow(), Some(h.clock.now_ms() + 500.0));
    h.alarm.0.borrow_mut().take();
    h.send(json!({"type": "rpc", "id": "w-late", "method": "writeWorkspaceFile", "args": ["/d/late.txt", "aGk=", "text/plain"]}));
    assert_eq!(*h.alarm.0.borrow(), None, "armed once per batch of writes, not per write");
    fire_alarm(&mut h);
    // Everything written is indexed: the alarm left nothing, so it did not re-arm.
    assert_eq!(*h.alarm.0.borrow(), None);
    let ws = h.agent.workspace().clone();
    assert_eq!(ws.index_unindexed(crate::workspace::INDEX_RUN_BYTES).unwrap().files, 0);
    let rows = ws.info().unwrap().grep_index_rows;
    // The next write arms the alarm again, at the delay.
    rpc(&mut h, "w-new", "writeWorkspaceFile", json!(["/d/new.txt", "bmV3IGJvZHk=", "text/plain"]));
    assert_eq!(*h.alarm.0.borrow(), Some(h.clock.now_ms() + INDEX_DELAY_MS));
    fire_alarm(&mut h);
    assert!(ws.info().unwrap().grep_index_rows > rows);
    // With nothing to index the alarm writes nothing and does not re-arm.
    let rows = ws.info().unwrap().grep_index_rows;
    fire_alarm(&mut h);
    assert_eq!(*h.alarm.0.borrow(), None);
    assert_eq!(ws.info().unwrap().grep_index_rows, rows);
}

#[test]
fn a_rewind_while_an_approval_waits_drops_the_paused_call_and_the_next_turn_runs() {
    let policy = crate::tools::approval::ApprovalPolicy::from_list("write").unwrap();
    let mut h = Harness::new(move |m| AgentSpec::new(m).approval(policy));
    h.model.push([text("first")]);
    h.chat("one", json!({}));
    let after_one = ids(&h.agent.messages());
    h.model.push([write_call("/notes/a.txt")]);
    h.chat("two", json!({}));
    assert!(h.agent.workspace().stat("/notes/a.txt").unwrap().is_none(), "the write waits");
    let list = rpc(&mut h, "l", "checkpoints", json!([]))["result"].clone();
    let id = list[1]["id"].as_str().unwrap().to_owned();
    let reply = rpc(&mut h, "r", "rewind", json!([id]));
    assert_eq!(reply["success"], true, "a paused turn does not hold a rewind back: {reply}");
    assert_eq!(ids(&h.agent.messages()), after_one, "the paused call's message is gone");
    // A late answer to the dropped call finds nothing to approve: nothing runs.
    h.send(json!({"type": "cf_agent_tool_approval", "toolCallId": "w1", "approved": true, "autoContinue": true}));
    assert!(h.agent.workspace().stat("/notes/a.txt").unwrap().is_none());
    assert_eq!(ids(&h.agent.messages()), after_one);
    h.model.push([text("three")]);
    h.chat("three", json!({}));
    assert_eq!(h.agent.messages().len(), after_one.len() + 2, "the next turn runs");
}

#[test]
fn a_turn_over_its_limit_does_not_reach_the_model_and_the_tab_is_told_why() {
    let mut h = Harness::new(|model| {
        AgentSpec::new(model).limits(crate::limits::Limits::default().turns_per_minute(1))
    });
    h.model.push([text("first")]);
    h.chat("one", json!({}));
    assert_eq!(h.model_calls(), 1);
    h.advance(1000.0);
    h.chat("two", json!({}));
    assert_eq!(h.model_calls(), 1, "the refused turn did not reach the model");
    let errors: Vec<Value> =
        h.frames().into_iter().filter(|f| f["id"] == "r-two" && f["error"] == true).collect();
    assert_eq!(errors.len(), 1, "{:?}", h.frames());
    let body = errors[0]["body"].as_str().unwrap();
    assert!(body.contains("turnsPerMinute (1 turns per minute)"), "{body}");
    assert!(body.contains("(in 59 s)"), "{body}");
    assert!(h.frames().iter().any(|f| f["id"] == "r-two" && f["done"] == true));
    // The object keeps serving: usage() over rpc, and a turn once the window closed.
    h.send(json!({"type": "rpc", "id": "u1", "method": "usage", "args": []}));
    let reply = h.frames().into_iter().find(|f| f["id"] == "u1").unwrap();
    assert_eq!(reply["result"]["turns"]["used"], 1);
    assert_eq!(reply["result"]["turns"]["limit"], 1);
    assert_eq!(reply["result"]["tokens"]["limit"], Value::Null);
    h.advance(59_000.0);
    h.model.push([text("third")]);
    h.chat("three", json!({}));
    assert_eq!(h.model_calls(), 2);
    let messages: Vec<String> = h.agent.messages().iter().map(|m| m.id.clone()).collect();
    assert!(messages.contains(&"u-two".to_owned()), "the refused message is kept: {messages:?}");
}

/// A sandbox that runs nothing: it counts the passes asked of it and refuses them.
#[derive(Default)]
struct CountingSandbox(std::cell::Cell<usize>);

#[async_trait(?Send)]
impl crate::codemode::Sandbox for CountingSandbox {
    async fn run(
        &self,
        _request: crate::codemode::SandboxRequest,
        _dispatcher: Rc<dyn crate::codemode::Dispatcher>,
    ) -> Result<crate::codemode::SandboxOutcome, crate::codemode::SandboxError> {
        self.0.set(self.0.get() + 1);
        Err(crate::codemode::SandboxError::Unavailable("this test runs no code".into()))
    }
}

/// What one turn of a (re)started agent offered and showed, and how its callables answered.
struct Seen {
    tools: Vec<String>,
    system: String,
    sandbox_passes: usize,
    replies: Vec<Value>,
}

/// Starts an agent over `sql` with `spec`, runs one turn and calls `callables` (no args).
fn turn_over(
    sql: &Rc<SqliteSql>,
    turn: &str,
    spec: impl FnOnce(ModelChoice) -> AgentSpec,
    callables: &[&str],
) -> Seen {
    let sandbox = Rc::new(CountingSandbox::default());
    let mut h = Harness::over(sql.clone(), Some(sandbox.clone()), spec);
    let started = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(started.start());
    h.pool.run_until_stalled();
    h.model.push([text("ok")]);
    h.chat(turn, json!({}));
    let request = h.model.seen()[0].clone();
    let replies =
        callables.iter().map(|m| rpc(&mut h, &format!("{turn}-{m}"), m, json!([]))).collect();
    Seen {
        tools: request.tools.iter().map(|t| t.name.clone()).collect(),
        system: request.system,
        sandbox_passes: sandbox.0.get(),
        replies,
    }
}

#[test]
fn extensions_switched_off_are_all_gone_and_come_back_when_switched_on() {
    use crate::extensions::{ExtensionOptions, Manifest};
    let sql = Rc::new(SqliteSql::new());
    // Stored while extensions were on: a tool, a context block and a beforeTurn hook.
    let manifest = Manifest::from_json(json!({"name": "math", "version": "1",
        "context": [{"label": "notes", "type": "writable", "description": "Math notes"}]}))
    .unwrap();
    let described = serde_json::from_value(json!({"tools": [{"name": "add",
        "description": "Add", "parameters": {"a": {"type": "number"}}, "required": ["a"]}],
        "hooks": ["beforeTurn"]}))
    .unwrap();
    crate::extensions::store::ExtensionStore::open(sql.clone())
        .unwrap()
        .put(&manifest, "({})", &described, None)
        .unwrap();
    let spec = |enabled: bool| {
        move |m| AgentSpec::new(m).extensions(ExtensionOptions { enabled, ..Default::default() })
    };

    let off = turn_over(&sql, "off", spec(false), &["listExtensions", "loadExtension"]);
    for name in ["math_add", "load_extension", "list_extensions"] {
        assert!(!off.tools.contains(&name.to_owned()), "{name} offered: {:?}", off.tools);
    }
    assert!(!off.system.contains("MATH_NOTES"), "no block of an extension: {}", off.system);
    assert_eq!(off.sandbox_passes, 0, "no hook ran");
    for reply in &off.replies {
        assert_eq!(reply["success"], false, "{reply}");
        let error = reply["error"].as_str().unwrap();
        assert!(
            error.starts_with("Extensions are switched off (THINK_EXTENSIONS=false)"),
            "{error}"
        );
    }

    let on = turn_over(&sql, "on", spec(true), &["listExtensions"]);
    assert!(on.tools.contains(&"math_add".to_owned()), "{:?}", on.tools);
    assert!(on.tools.contains(&"load_extension".to_owned()));
    assert!(on.system.contains("MATH_NOTES (Math notes)"), "{}", on.system);
    assert!(on.sandbox_passes > 0, "the beforeTurn hook was run");
    assert_eq!(on.replies[0]["result"][0]["name"], "math", "{}", on.replies[0]);
}

#[test]
fn code_mode_switched_off_refuses_its_callables_and_offers_no_execute() {
    let sql = Rc::new(SqliteSql::new());
    let off = turn_over(
        &sql,
        "off",
        |m| AgentSpec::new(m).execute_enabled(false),
        &["approveExecution", "rejectExecution", "pendingExecutions", "executions"],
    );
    assert!(!off.tools.contains(&"execute".to_owned()));
    for reply in &off.replies {
        let error = reply["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("Code Mode (execute) is switched off (THINK_EXECUTE=false)"),
            "{reply}"
        );
    }
    let on = turn_over(&sql, "on", AgentSpec::new, &["pendingExecutions"]);
    assert!(on.tools.contains(&"execute".to_owned()), "{:?}", on.tools);
    assert_eq!(on.replies[0]["success"], true, "{}", on.replies[0]);
}

#[test]
fn skills_switched_off_show_and_offer_nothing_and_their_files_stay() {
    let sql = Rc::new(SqliteSql::new());
    let ws = crate::workspace::Workspace::new(sql.clone(), ManualClock::new());
    futures::executor::block_on(ws.write_file(
        "/skills/greet/SKILL.md",
        "---\nname: greet\ndescription: Greets people warmly\n---\nSay hello.",
        "text/markdown",
    ))
    .unwrap();
    let off = turn_over(&sql, "off", |m| AgentSpec::new(m).skills_enabled(false), &["skills"]);
    assert!(!off.tools.iter().any(|t| t.contains("skill")), "{:?}", off.tools);
    assert!(!off.system.contains("Greets people warmly"), "{}", off.system);
    let error = off.replies[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("Skills are switched off (THINK_SKILLS=false)"),
        "{}",
        off.replies[0]
    );

    let on = turn_over(&sql, "on", AgentSpec::new, &["skills"]);
    assert!(on.tools.contains(&"activate_skill".to_owned()), "{:?}", on.tools);
    assert!(on.system.contains("Greets people warmly"), "{}", on.system);
    assert_eq!(on.replies[0]["result"][0]["name"], "greet", "{}", on.replies[0]);
}

#[test]
fn a_context_block_left_out_is_neither_shown_nor_offered_and_its_content_comes_back() {
    let sql = Rc::new(SqliteSql::new());
    let memory = crate::session::parse_blocks(crate::session::DEFAULT_CONTEXT).unwrap();
    let with_memory = |m| memory.iter().cloned().fold(AgentSpec::new(m), AgentSpec::context);
    let h = Harness::over(sql.clone(), None, with_memory);
    h.agent.session().set("memory", "the sky is green").unwrap();
    drop(h);
    let off = turn_over(&sql, "off", AgentSpec::new, &[]);
    assert!(!off.system.contains("the sky is green"), "{}", off.system);
    assert!(!off.tools.contains(&"set_context".to_owned()), "{:?}", off.tools);
    let on = turn_over(&sql, "on", with_memory, &[]);
    assert!(on.system.contains("the sky is green"), "{}", on.system);
    assert!(on.tools.contains(&"set_context".to_owned()), "{:?}", on.tools);
}

/// The tools that run model-written code say so to the ledger (through every wrapper a turn
/// puts around them), so that a restart during one of their calls is reported as memory;
/// the file tools do not.
#[test]
fn the_turns_code_running_tools_are_the_ones_the_ledger_reports_as_code() {
    let sandbox: Rc<dyn crate::codemode::Sandbox> = Rc::new(CountingSandbox::default());
    let h = Harness::over(Rc::new(SqliteSql::new()), Some(sandbox), AgentSpec::new);
    let tools = h.agent.turn_tools(None);
    let runs_code = |name: &str| tools.get(name).unwrap_or_else(|| panic!("no {name}")).runs_code();
    assert!(runs_code("execute"));
    for name in ["read", "write", "edit", "list", "find", "grep", "delete"] {
        assert!(!runs_code(name), "{name}");
    }
}

// ── Newer clients' fields, transient-error recovery, approval repair ────────────────────────

/// The `cf_agent_use_chat_response` frames of request `id` a connection got.
fn responses(frames: &[Value], id: &str) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "cf_agent_use_chat_response" && f["id"] == id)
        .cloned()
        .collect()
}

/// The text a connection's chunk frames of request `id` streamed.
fn streamed_text(frames: &[Value], id: &str) -> String {
    responses(frames, id)
        .iter()
        .filter(|f| f["error"] != true)
        .filter_map(|f| serde_json::from_str::<Value>(f["body"].as_str()?).ok())
        .filter(|c| c["type"] == "text-delta")
        .map(|c| c["delta"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn quick_recovery(max_attempts: u32) -> super::ChatRecovery {
    super::ChatRecovery { max_attempts, initial_delay_ms: 100, max_delay_ms: 1000 }
}

fn broken() -> crate::model::ModelError {
    crate::model::ModelError::StreamBroken(HttpError::Body("connection reset".into()))
}

#[test]
fn chunks_carry_their_index_and_the_terminal_frame_the_outcome_and_the_users_messages() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.push([text("hello")]);
    h.chat("hi", json!({}));
    let frames = responses(&h.frames(), "r-hi");
    let (done, chunks) = frames.split_last().unwrap();
    let seqs: Vec<u64> = chunks.iter().map(|f| f["seq"].as_u64().expect("a seq")).collect();
    assert_eq!(seqs, (0..chunks.len() as u64).collect::<Vec<_>>(), "0, 1, 2, … in order");
    assert_eq!(
        *done,
        json!({"type": "cf_agent_use_chat_response", "id": "r-hi", "body": "", "done": true,
               "outcome": "completed", "messageIds": ["u-hi"]})
    );
    // A late ACK replays every chunk with the seq its live frame carried, and the outcome.
    h.send(json!({"type": "cf_agent_stream_resume_ack", "id": "r-hi"}));
    let replayed: Vec<Value> =
        responses(&h.frames(), "r-hi").into_iter().filter(|f| f["replay"] == true).collect();
    let (end, replayed_chunks) = replayed.split_last().unwrap();
    assert_eq!(replayed_chunks.len(), chunks.len());
    for (live, replay) in chunks.iter().zip(replayed_chunks) {
        assert_eq!((&live["seq"], &live["body"]), (&replay["seq"], &replay["body"]));
    }
    assert_eq!(
        (&end["done"], &end["outcome"], &end["messageIds"]),
        (&json!(true), &json!("completed"), &json!(["u-hi"]))
    );
}

#[test]
fn the_transcript_a_tab_gets_as_it_connects_says_so_and_no_other_does() {
    let mut h = Harness::new(AgentSpec::new);
    h.model.push([text("hello")]);
    h.chat("hi", json!({}));
    h.connect("late");
    let transcripts: Vec<Value> =
        h.frames_of("late").into_iter().filter(|f| f["type"] == "cf_agent_chat_messages").collect();
    assert_eq!(transcripts.len(), 1);
    assert_eq!(transcripts[0]["connect"], true);
    assert_eq!(transcripts[0]["messages"].as_array().unwrap().len(), 2);
    assert!(
        h.frames()
            .iter()
            .filter(|f| f["type"] == "cf_agent_chat_messages")
            .all(|f| f.get("connect").is_none()),
        "a transcript sent during or after a turn is authoritative"
    );
}

#[test]
fn a_stopped_turn_ends_aborted_and_a_dropped_send_skipped() {
    let mut h =
        Harness::new(|m| AgentSpec::new(m).message_concurrency(super::MessageConcurrency::Drop));
    h.model.delay_streams(h.clock.clone(), 1000);
    h.model.push([text("long answer")]);
    h.chat("one", json!({}));
    h.chat("two", json!({}));
    let dropped = responses(&h.frames(), "r-two");
    assert_eq!(
        dropped,
        [json!({"type": "cf_agent_use_chat_response", "id": "r-two", "body": "", "done": true,
                "outcome": "skipped", "messageIds": ["u-two"]})]
    );
    h.send(json!({"type": "cf_agent_chat_request_cancel", "id": "r-one"}));
    let done = responses(&h.frames(), "r-one").into_iter().find(|f| f["done"] == true).unwrap();
    assert_eq!(done["outcome"], "aborted");
}

#[test]
fn a_transient_error_after_output_waits_then_continues_the_same_message() {
    let mut h = Harness::new(|m| AgentSpec::new(m).chat_recovery(Some(quick_recovery(3))));
    h.model.push_broken(vec![ModelEvent::TextDelta("Hello ".into())], broken());
    h.model.push([text("world.")]);
    h.chat("hi", json!({}));
    let frames = h.frames();
    let first = responses(&frames, "r-hi");
    let message_id = serde_json::from_str::<Value>(first[0]["body"].as_str().unwrap()).unwrap()
        ["messageId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(first.iter().all(|f| f["error"] != true), "no error reaches the tab: {first:?}");
    assert_eq!(
        first.last().unwrap(),
        &json!({"type": "cf_agent_use_chat_response", "id": "r-hi", "body": "", "done": true,
                "outcome": "recovering", "messageIds": ["u-hi"]})
    );
    let recovering = |f: &Value| f["type"] == "cf_agent_chat_recovering";
    let pos = |pred: &dyn Fn(&Value) -> bool| frames.iter().position(pred).unwrap();
    assert!(pos(&recovering) < pos(&|f| f["id"] == "r-hi" && f["done"] == true));
    assert_eq!(
        frames[pos(&recovering)],
        json!({"type": "cf_agent_chat_recovering", "recovering": true, "id": "r-hi"})
    );
    // The partial answer is kept while the recovery waits; a probe is told a stream is coming.
    let stored = h.agent.messages();
    assert_eq!((stored.len(), stored[1].id.as_str()), (2, message_id.as_str()));
    h.send(json!({"type": "cf_agent_stream_resume_request", "probeId": "p1"}));
    assert_eq!(h.frames().last().unwrap()["type"], "cf_agent_stream_pending");
    h.advance(99.0);
    assert_eq!(h.model_calls(), 1, "the backoff is 100 ms");
    h.advance(1.0);
    assert_eq!(h.model_calls(), 2);
    let ModelMessage::Assistant { content, .. } =
        h.model.seen()[1].messages.last().unwrap().clone()
    else {
        panic!("the model is sent its partial answer")
    };
    assert_eq!(content, "Hello ");
    let frames = h.frames();
    let offer = frames.iter().find(|f| f["type"] == "cf_agent_stream_resuming").unwrap();
    let second = offer["id"].as_str().unwrap().to_owned();
    assert_ne!(second, "r-hi");
    h.send(json!({"type": "cf_agent_stream_resume_ack", "id": second}));
    let frames = h.frames();
    let cont = responses(&frames, &second);
    assert!(cont.iter().all(|f| f["continuation"] == true), "{cont:?}");
    assert!(cont.iter().all(|f| f["replay"] == true), "the probing tab waited for its ACK");
    assert_eq!(streamed_text(&frames, &second), "world.");
    let done = cont.iter().find(|f| f["done"] == true).unwrap();
    assert_eq!((&done["outcome"], &done["messageIds"]), (&json!("completed"), &json!(["u-hi"])));
    assert_eq!(
        frames.iter().rfind(|f| recovering(f)).unwrap(),
        &json!({"type": "cf_agent_chat_recovering", "recovering": false, "id": "r-hi"})
    );
    // One assistant message, under the first stream's id, with both pieces of text.
    let stored = h.agent.messages();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1].id, message_id);
    let texts: Vec<&str> = stored[1].parts.iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(texts, ["Hello ", "world."]);
}

#[test]
fn recovery_gives_up_after_its_attempts_and_an_error_before_output_fails_at_once() {
    let mut h = Harness::new(|m| AgentSpec::new(m).chat_recovery(Some(quick_recovery(2))));
    for piece in ["a", "b", "c"] {
        h.model.push_broken(vec![ModelEvent::TextDelta(piece.into())], broken());
    }
    h.chat("hi", json!({}));
    h.advance(100.0);
    assert_eq!(h.model_calls(), 2);
    h.advance(199.0);
    assert_eq!(h.model_calls(), 2, "the second wait is 200 ms");
    h.advance(1.0);
    assert_eq!(h.model_calls(), 3);
    h.advance(10_000.0);
    assert_eq!(h.model_calls(), 3, "two recoveries, then the turn ends");
    let frames = h.frames();
    let error = frames.iter().find(|f| f["error"] == true).expect("the error reaches the tab");
    assert_eq!(
        error["body"],
        "The model stream broke off: connection reset (gave up after 2 recovery attempts)"
    );
    let last = frames.iter().rfind(|f| f["type"] == "cf_agent_use_chat_response").unwrap();
    assert_eq!(last["outcome"], "error");
    let texts: Vec<String> = h.agent.messages()[1]
        .parts
        .iter()
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(texts, ["a", "b", "c"], "every attempt's output stays in the one message");

    let mut h = Harness::new(|m| AgentSpec::new(m).chat_recovery(Some(quick_recovery(2))));
    h.model.push_broken(vec![], broken());
    h.chat("hi", json!({}));
    h.advance(1000.0);
    assert_eq!(h.model_calls(), 1, "no output yet: the turn fails as before");
    let frames = responses(&h.frames(), "r-hi");
    assert_eq!(frames[frames.len() - 2]["body"], "The model stream broke off: connection reset");
    assert_eq!(frames.last().unwrap()["outcome"], "error");

    let mut h = Harness::new(|m| AgentSpec::new(m).chat_recovery(None));
    h.model.push_broken(vec![ModelEvent::TextDelta("a".into())], broken());
    h.chat("hi", json!({}));
    h.advance(1000.0);
    assert_eq!(h.model_calls(), 1, "recovery off: the error ends the turn");
    assert_eq!(responses(&h.frames(), "r-hi").last().unwrap()["outcome"], "error");
}

#[test]
fn a_stop_during_the_recovery_wait_ends_the_turn_aborted() {
    let mut h = Harness::new(|m| AgentSpec::new(m).chat_recovery(Some(quick_recovery(3))));
    h.model.push_broken(vec![ModelEvent::TextDelta("Hel".into())], broken());
    h.chat("hi", json!({}));
    h.send(json!({"type": "cf_agent_chat_request_cancel", "id": "r-hi"}));
    h.advance(10_000.0);
    assert_eq!(h.model_calls(), 1, "no continuation after the stop");
    let ends: Vec<Value> =
        responses(&h.frames(), "r-hi").into_iter().filter(|f| f["done"] == true).collect();
    assert_eq!(
        ends.iter().map(|f| f["outcome"].clone()).collect::<Vec<_>>(),
        ["recovering", "aborted"]
    );
    assert_eq!(
        h.frames().iter().rfind(|f| f["type"] == "cf_agent_chat_recovering").unwrap()["recovering"],
        false
    );
    h.send(json!({"type": "cf_agent_stream_resume_request", "probeId": "p"}));
    assert_eq!(
        h.frames().last().unwrap(),
        &json!({"type": "cf_agent_stream_resume_none", "reason": "idle", "probeId": "p"})
    );
}

#[test]
fn a_restart_during_the_recovery_wait_still_continues_the_message() {
    let spec = |m| AgentSpec::new(m).chat_recovery(Some(quick_recovery(3)));
    let mut h = Harness::new(spec);
    h.model.push_broken(vec![ModelEvent::TextDelta("Hello ".into())], broken());
    h.chat("hi", json!({}));
    let message_id = h.agent.messages()[1].id.clone();
    // The process dies during the wait: a new instance over the same storage starts.
    let mut h = h.restart(spec);
    h.model.push([text("world.")]);
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(async move { agent.start().await });
    h.pool.run_until_stalled();
    assert_eq!(h.model_calls(), 1, "the restart took the wait's place");
    let stored = h.agent.messages();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1].id, message_id);
    let texts: Vec<&str> = stored[1].parts.iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(texts, ["Hello ", "world."]);
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(async move { agent.start().await });
    h.pool.run_until_stalled();
    assert_eq!(h.model_calls(), 1, "it is owed once");
}

#[test]
fn an_approved_call_a_new_turn_moves_past_becomes_an_error_and_never_runs() {
    let policy = crate::tools::approval::ApprovalPolicy::from_list("write").unwrap();
    let mut h = Harness::new(move |m| AgentSpec::new(m).approval(policy));
    h.model.push([write_call("/notes/a.txt")]);
    h.chat("one", json!({}));
    h.send(json!({"type": "cf_agent_tool_approval", "toolCallId": "w1", "approved": true, "autoContinue": false}));
    h.advance(500.0);
    assert_eq!(h.model_calls(), 1, "no continuation was asked for");
    let part = |h: &Harness| {
        h.agent.messages()[1].parts.iter().find(|p| p["toolCallId"] == "w1").unwrap().clone()
    };
    assert_eq!(part(&h)["state"], "approval-responded");
    h.model.push([text("ok")]);
    h.chat("two", json!({}));
    assert!(h.agent.workspace().stat("/notes/a.txt").unwrap().is_none(), "the call never ran");
    let settled = part(&h);
    assert_eq!(settled["state"], "output-error");
    assert_eq!(settled["errorText"], crate::protocol::repair::APPROVED_NOT_RUN_ERROR);
    let seen = h.model.seen()[1].messages.clone();
    let told = seen.iter().any(|m| {
        matches!(m, ModelMessage::Tool { tool_call_id, content, .. }
            if tool_call_id == "w1" && content.contains("approved but did not run"))
    });
    assert!(told, "the model is told: {seen:?}");
    let repaired =
        h.frames().into_iter().filter(|f| f["type"] == "cf_agent_chat_messages").any(|f| {
            f["messages"][1]["parts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["state"] == "output-error")
        });
    assert!(repaired, "the tabs get the repaired transcript");
}

#[test]
fn an_approval_whose_continuation_is_due_is_not_repaired() {
    let policy = crate::tools::approval::ApprovalPolicy::from_list("write").unwrap();
    let mut h = Harness::new(move |m| AgentSpec::new(m).approval(policy));
    h.model.push([write_call("/notes/a.txt")]);
    h.chat("one", json!({}));
    h.model.push([text("written")]);
    // Approved with a continuation, then a new message before the coalescing window ends.
    h.send(json!({"type": "cf_agent_tool_approval", "toolCallId": "w1", "approved": true, "autoContinue": true}));
    h.model.push([text("two")]);
    h.chat("two", json!({}));
    h.advance(100.0);
    assert!(h.agent.workspace().stat("/notes/a.txt").unwrap().is_some(), "the approved call ran");
}

/// A feature plugged in the way every built-in one is, recording what the agent asks of it.
struct Probe {
    switch: Option<super::Feature>,
    layer: crate::tools::Layer,
    /// Names of its layered tools; its tool built over the merge is `probe_over`.
    tools: Vec<&'static str>,
    /// What its sweeps answer at start and on the alarm.
    due: (Option<f64>, Option<f64>),
    log: Rc<RefCell<Vec<String>>>,
}

impl Probe {
    fn note(&self, what: String) {
        self.log.borrow_mut().push(what);
    }
}

fn probe_tool(name: &str, description: &str) -> crate::tools::DynamicTool {
    crate::tools::DynamicTool::new(name, description, json!({"type": "object"}), |_, _| async {
        Ok(json!("probed"))
    })
}

#[async_trait(?Send)]
impl super::Capability for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn switch(&self) -> Option<super::Feature> {
        self.switch
    }

    fn callables(&self) -> &[&'static str] {
        &["probe", "shadowed", "listWorkspace"]
    }

    async fn call(
        &self,
        _agent: &Rc<Agent>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, super::CallError> {
        self.note(format!("call {method}"));
        Ok(json!({"probe": method, "args": args}))
    }

    fn create_tables(&self, sql: &dyn crate::store::Sql) -> Result<(), crate::store::StoreError> {
        self.note("tables".into());
        sql.exec("CREATE TABLE IF NOT EXISTS probe_notes (note TEXT)", &[]).map(|_| ())
    }

    async fn start(&self, _agent: &Rc<Agent>) {
        self.note("start".into());
    }

    async fn sweep(&self, _agent: &Rc<Agent>, when: super::Sweep) -> Option<f64> {
        self.note(format!("sweep {when:?}"));
        match when {
            super::Sweep::Start => self.due.0,
            super::Sweep::Alarm => self.due.1,
        }
    }

    fn tools(&self, _agent: &Agent) -> Option<(crate::tools::Layer, Vec<crate::tools::ToolRef>)> {
        let tools = self.tools.iter().map(|n| Rc::new(probe_tool(n, "from the probe")) as _);
        Some((self.layer, tools.collect()))
    }

    fn tools_over(
        &self,
        _agent: &Agent,
        merged: &crate::tools::ToolSet,
    ) -> Vec<crate::tools::ToolRef> {
        let names: Vec<&str> = merged.names().collect();
        self.note(format!("over {}", names.join(",")));
        vec![Rc::new(probe_tool("probe_over", "over the merge"))]
    }

    fn wrap_tools(&self, _agent: &Agent, tools: &mut crate::tools::ToolSet) {
        self.note(format!("wrap {}", tools.names().any(|n| n == "probe_over")));
    }
}

/// An agent with the app's tool `shared`, the app callable `shadowed` and `probe` plugged
/// in; the log of what the probe was asked.
fn probed(probe: Probe) -> (Harness, Rc<RefCell<Vec<String>>>) {
    let log = probe.log.clone();
    let probe = Rc::new(probe);
    let h = Harness::new(move |model| {
        AgentSpec::new(model)
            .tool(probe_tool("shared", "the app's own"))
            .callable("shadowed", |_| async { Ok::<_, super::CallError>(json!("the app's")) })
            .capability(move |_| probe.clone())
    });
    (h, log)
}

fn probe(layer: crate::tools::Layer, tools: &[&'static str]) -> Probe {
    Probe { switch: None, layer, tools: tools.to_vec(), due: (None, None), log: Rc::default() }
}

#[test]
fn a_capability_answers_its_callables_after_the_apps_own_and_the_built_in_ones() {
    let (mut h, log) = probed(probe(crate::tools::Layer::Context, &[]));
    let reply = rpc(&mut h, "1", "probe", json!([1, "two"]));
    assert_eq!(reply["result"], json!({"probe": "probe", "args": [1, "two"]}), "{reply}");
    // The app's callable of the same name wins, and so does a built-in registered earlier.
    assert_eq!(rpc(&mut h, "2", "shadowed", json!([]))["result"], "the app's");
    let listed = rpc(&mut h, "3", "listWorkspace", json!([]));
    assert_eq!(listed["result"], json!({"entries": [], "truncated": false}), "{listed}");
    assert_eq!(log.borrow().iter().filter(|l| l.starts_with("call")).count(), 1, "{log:?}");
    let unknown = rpc(&mut h, "4", "probe2", json!([]));
    assert_eq!(unknown["error"], "Method probe2 does not exist");
}

#[test]
fn a_capabilitys_tables_are_made_once_as_the_instance_starts() {
    let (mut h, log) = probed(probe(crate::tools::Layer::Context, &[]));
    let sql = h.agent.deps.sql.clone();
    sql.exec("INSERT INTO probe_notes (note) VALUES ('kept')", &[]).unwrap();
    h.model.push([text("ok")]);
    h.chat("hello", json!({}));
    fire_alarm(&mut h);
    rpc(&mut h, "1", "probe", json!([]));
    assert_eq!(log.borrow().iter().filter(|l| *l == "tables").count(), 1, "{log:?}");
    assert_eq!(log.borrow().first().map(String::as_str), Some("tables"), "before anything");
    let rows = sql.exec("SELECT note FROM probe_notes", &[]).unwrap();
    assert_eq!(rows.len(), 1);
}

#[test]
fn a_capabilitys_start_work_runs_and_its_sweeps_set_the_alarm() {
    let mut p = probe(crate::tools::Layer::Context, &[]);
    let now = clock_start();
    p.due = (Some(now + 5_000.0), Some(now + 7_000.0));
    let (mut h, log) = probed(p);
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(agent.start());
    h.pool.run_until_stalled();
    assert_eq!(*h.alarm.0.borrow(), Some(now + 5_000.0));
    fire_alarm(&mut h);
    assert_eq!(*h.alarm.0.borrow(), Some(now + 7_000.0));
    let log = log.borrow();
    let asked: Vec<&str> =
        log.iter().map(String::as_str).filter(|l| !l.starts_with("tables")).collect();
    assert_eq!(asked, ["sweep Start", "start", "sweep Alarm"]);
}

#[test]
fn a_start_sweep_asks_no_later_than_the_cleanup_interval() {
    let mut p = probe(crate::tools::Layer::Context, &[]);
    let now = clock_start();
    p.due = (Some(now + 10.0 * super::CLEANUP_MS), None);
    let (mut h, _) = probed(p);
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(agent.start());
    h.pool.run_until_stalled();
    assert_eq!(*h.alarm.0.borrow(), Some(now + super::CLEANUP_MS));
}

#[test]
fn a_capabilitys_tools_join_their_layer_in_the_merge_order() {
    use crate::tools::Layer;
    // Context tools: after the app's and the workspace's, before the client's. Over the
    // workspace's `read` and the app's `shared`, under the client's `pick`.
    let (mut h, log) = probed(probe(Layer::Context, &["read", "shared", "probe_ctx", "pick"]));
    h.model.push([text("ok")]);
    h.chat("hello", json!({"clientTools": pick_tool()}));
    let tools = &h.model.seen()[0].tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let at =
        |n: &str| names.iter().position(|x| *x == n).unwrap_or_else(|| panic!("{n}: {names:?}"));
    let from = |n: &str| tools[at(n)].description.clone();
    assert_eq!(from("read"), "from the probe");
    assert_eq!(from("shared"), "from the probe");
    assert_eq!(from("pick"), "Pick one");
    // Each name keeps the place it was first merged at.
    assert_eq!(at("read"), 0);
    assert!(at("write") < at("shared") && at("shared") < at("probe_ctx"), "{names:?}");
    assert!(at("probe_ctx") < at("pick") && at("pick") < at("probe_over"), "{names:?}");
    // The tool built over the merge saw every layered tool, and the wrap saw it.
    let log = log.borrow();
    let over = log.iter().find(|l| l.starts_with("over ")).expect("tools_over ran");
    assert!(over.contains("probe_ctx") && over.contains("pick") && !over.contains("probe_over"));
    assert!(log.contains(&"wrap true".to_owned()), "{log:?}");
}

#[test]
fn a_capabilitys_workspace_tool_gives_way_to_the_apps_own() {
    use crate::tools::Layer;
    let (mut h, _) = probed(probe(Layer::Workspace, &["shared", "probe_ws"]));
    h.model.push([text("ok")]);
    h.chat("hello", json!({}));
    let tools = &h.model.seen()[0].tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let shared = tools.iter().find(|t| t.name == "shared").unwrap();
    assert_eq!(shared.description, "the app's own");
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    // In the workspace layer, after the built-in workspace tools (registered earlier).
    assert!(at("delete") < at("probe_ws") && at("probe_ws") < at("probe_over"), "{names:?}");
}

#[test]
fn a_switched_off_capability_refuses_its_callables_and_gets_no_start_sweep_or_tool() {
    let mut p = probe(crate::tools::Layer::Context, &["probe_ctx"]);
    // The browser is off unless the spec configures one.
    p.switch = Some(super::Feature::Browser);
    p.due = (Some(clock_start() + 5_000.0), Some(clock_start() + 7_000.0));
    let (mut h, log) = probed(p);
    let reply = rpc(&mut h, "1", "probe", json!([]));
    assert_eq!(reply["error"], json!(super::Feature::Browser.off_message()), "{reply}");
    let agent = h.agent.clone();
    let _ = h.pool.spawner().spawn_local(agent.start());
    h.pool.run_until_stalled();
    fire_alarm(&mut h);
    assert_eq!(*h.alarm.0.borrow(), None, "no sweep asked for the alarm");
    h.model.push([text("ok")]);
    h.chat("hello", json!({}));
    let names: Vec<String> = h.model.seen()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert!(!names.iter().any(|n| n.starts_with("probe")), "{names:?}");
    // What it stores is kept while it is off: its tables are made all the same.
    assert_eq!(*log.borrow(), ["tables"]);
}

/// The time a harness's clock starts at.
fn clock_start() -> f64 {
    use crate::platform::Clock;
    ManualClock::new().now_ms()
}
