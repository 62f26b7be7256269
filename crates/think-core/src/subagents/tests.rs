//! Host tests of agents as tools: the registry, the child log's sequencing and the parent's
//! replay, re-attach decisions, the outcome shapes, the stall rule and the concurrency cap,
//! then whole parent/child/grandchild runs over real agents and SQLite, joined by an
//! in-process link that plays the part of Durable Object RPC.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use async_trait::async_trait;
use futures::executor::{LocalPool, LocalSpawner};
use futures::task::LocalSpawnExt;
use serde_json::{json, Value};

use super::child::ChildLog;
use super::events::{self, Batch, EventKind, Outcome, RunFrames};
use super::registry::{Reattach, Registry};
use super::*;
use crate::agent::{Agent, AgentSpec, Deps, ModelChoice};
use crate::model::{FinishReason, ModelEvent};
use crate::platform::{Alarm, HttpClient, HttpError, HttpRequest, HttpResponse, Sockets};
use crate::store::sqlite::SqliteSql;
use crate::test_support::{text, ManualClock, ScriptedModel};
use crate::tools::approval::ApprovalPolicy;

fn sql() -> Rc<SqliteSql> {
    Rc::new(SqliteSql::new())
}

#[test]
fn the_registry_registers_a_call_once_and_decides_reattach() {
    let db = sql();
    Registry::create_table(db.as_ref()).unwrap();
    let reg = Registry::new(db.as_ref());
    assert_eq!(reg.reattach("c1").unwrap(), Reattach::NotARun);
    let req = StartRequest {
        run_id: "agent-tool:c1".into(),
        child_name: "p~c1".into(),
        parent_name: "p".into(),
        tool_path: vec!["subagent".into()],
        input: "task".into(),
    };
    let run = reg.register("c1", "subagent", "p~c1", &req, 1.0).unwrap();
    assert_eq!(run.request.as_ref(), Some(&req));
    assert_eq!(run.run_id, "agent-tool:c1");
    assert!(run.is_running());
    let again = reg.register("c1", "other", "elsewhere", &req, 2.0).unwrap();
    assert_eq!(again, run, "a second registration keeps the first");
    assert_eq!(reg.reattach("c1").unwrap(), Reattach::Tail(Box::new(run.clone())));
    reg.finish("c1", &Outcome::Answer(json!("42")), 3.0).unwrap();
    assert_eq!(reg.reattach("c1").unwrap(), Reattach::Settled(json!("42")));
    assert_eq!(reg.by_segment("c1").unwrap().unwrap().child_name, "p~c1");
    assert_eq!(reg.by_segment("p~c1").unwrap().unwrap().tool_call_id, "c1");
    assert_eq!(reg.by_segment("c2").unwrap(), None);
}

#[test]
fn the_child_log_sequences_own_events_and_keeps_relayed_frames_in_order() {
    let db = sql();
    ChildLog::create_tables(db.as_ref()).unwrap();
    let log = ChildLog::new(db.as_ref());
    assert_eq!(ChildLog::role(db.as_ref()), None);
    let path = vec!["subagent".to_string(), "subagent".to_string()];
    assert!(log.start("agent-tool:a", "root", &path, 1.0).unwrap());
    assert!(!log.start("agent-tool:a", "root", &path, 2.0).unwrap(), "a repeated start is refused");
    assert_eq!(ChildLog::role(db.as_ref()), Some(path));
    assert_eq!(log.append_event("agent-tool:a", &events::started()).unwrap(), 0);
    let deeper = json!({"type": "agent-tool-event", "parentToolCallId": "g", "sequence": 0, "event": {"kind": "started"}});
    log.append_frame("agent-tool:a", &deeper).unwrap();
    assert_eq!(
        log.append_event("agent-tool:a", &events::chunk(&json!({"type": "start"}))).unwrap(),
        1
    );
    let all = log.entries("agent-tool:a", 0).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all.iter().map(|e| e.sequence).collect::<Vec<_>>(), [Some(0), None, Some(1)]);
    assert_eq!(all[1].frame.as_ref(), Some(&deeper));
    let rest = log.entries("agent-tool:a", all[0].cursor).unwrap();
    assert_eq!(rest, all[1..].to_vec(), "a tail from a cursor gets what follows it");
    assert_eq!(log.running().unwrap().as_deref(), Some("agent-tool:a"));
    log.finish("agent-tool:a").unwrap();
    assert_eq!(log.running().unwrap(), None);
}

#[test]
fn replays_are_marked_and_the_parents_own_events_follow_the_childs() {
    let mut frames = RunFrames::default();
    let first = frames.own("call", 0, events::started());
    assert_eq!(
        first,
        json!({"type": "agent-tool-event", "parentToolCallId": "call", "sequence": 0, "event": {"kind": "started"}})
    );
    frames.own("call", 1, events::chunk(&json!({"type": "text-delta", "id": "t", "delta": "hi"})));
    frames.relayed(json!({"type": "agent-tool-event", "parentToolCallId": "deep", "sequence": 0, "event": {"kind": "started"}}));
    let aborted = frames.local("call", events::failed(EventKind::Aborted, "stop"));
    assert_eq!(aborted["sequence"], 2, "after every event of the child");
    let replay: Vec<Value> = frames.replay().collect();
    assert_eq!(replay.len(), 4);
    assert!(replay.iter().all(|f| f["replay"] == true));
    assert_eq!(replay[2]["parentToolCallId"], "deep");
}

#[test]
fn outcomes_become_the_tools_answer_or_a_failure_shape() {
    let answer = Outcome::from_event(&events::finished(&json!("done"))).unwrap();
    assert_eq!(answer.to_tool_output(), json!("done"));
    assert_eq!(Outcome::from_event(&events::chunk(&json!({}))), None);
    for (kind, status, retryable) in [
        (EventKind::Error, "error", true),
        (EventKind::Aborted, "aborted", false),
        (EventKind::Interrupted, "interrupted", true),
    ] {
        let out = Outcome::from_event(&events::failed(kind, "why")).unwrap().to_tool_output();
        assert_eq!(
            out,
            json!({"ok": false, "status": status, "error": "why", "retryable": retryable})
        );
    }
    let schema =
        json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});
    assert_eq!(
        tool::validate_answer(json!("```json\n{\"n\": 3}\n```"), &schema),
        Outcome::Answer(json!({"n": 3}))
    );
    let bad = tool::validate_answer(json!("{\"n\": \"x\"}"), &schema).to_tool_output();
    assert_eq!(bad["status"], "error");
    assert!(bad["error"].as_str().unwrap().contains("output schema"), "{bad}");
    assert_eq!(tool::user_message(&json!({"task": "sum it"})), "sum it");
    assert_eq!(tool::user_message(&json!({"a": 1})), "{\"a\":1}");
}

#[test]
fn a_child_silent_for_the_stall_time_is_stalled() {
    assert!(!events::stalled(119_999.0, 0.0, events::STALL_MS));
    assert!(events::stalled(120_000.0, 0.0, events::STALL_MS));
}

#[test]
fn drill_in_paths_name_the_child_segment() {
    let segments = |p: &str| drill_in_segments(p);
    assert_eq!(
        segments("/agents/think-agent/p/sub/call_1/get-messages"),
        Some(vec!["call_1".into()])
    );
    assert_eq!(
        segments("/agents/think-agent/p/sub/a/sub/b/get-messages"),
        Some(vec!["a".into(), "b".into()])
    );
    assert_eq!(segments("/agents/think-agent/p/get-messages"), None);
    assert_eq!(segments("/agents/think-agent/p/sub//get-messages"), None);
    assert_eq!(segments("/agents/think-agent/p/sub/a/b/get-messages"), None);
}

#[test]
fn the_setting_adds_subagent_with_depth_and_limits() {
    use super::setting::SubagentSetting;
    assert_eq!(SubagentSetting::parse("false").unwrap(), None);
    assert_eq!(SubagentSetting::parse("").unwrap(), Some(SubagentSetting::default()));
    let s = SubagentSetting::parse(r#"{"depth": 2, "maxConcurrent": 2, "stallMs": 5000}"#)
        .unwrap()
        .unwrap();
    assert_eq!((s.depth, s.limits.max_concurrent, s.limits.stall_ms), (2, 2, 5000.0));
    assert!(SubagentSetting::parse(r#"{"depth": 0}"#).is_err());
    assert!(SubagentSetting::parse(r#"{"deep": 1}"#).is_err());
    let spec = crate::agent::settings::with_subagent(
        AgentSpec::new(ModelChoice::Unconfigured("x".into())),
        s.depth,
        s.limits,
    );
    let path = |n: usize| vec!["subagent".to_string(); n];
    let names =
        |spec: &AgentSpec| spec.agent_tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&spec), ["subagent"]);
    assert_eq!(names(&spec.child_spec(&path(1)).unwrap()), ["subagent"]);
    assert!(names(&spec.child_spec(&path(2)).unwrap()).is_empty(), "the last level has none");
    assert!(spec.child_spec(&path(3)).is_none());
    let shipped = |v: &str| {
        let (spec, ignored) = crate::agent::settings::read_settings(|k| {
            (k == "THINK_SUBAGENT").then(|| v.to_owned())
        });
        (names(&spec), ignored.len())
    };
    assert_eq!(
        shipped(""),
        (vec!["subagent".to_string()], 0),
        "the shipped agent has it by default"
    );
    assert_eq!(shipped("false"), (vec![], 0), "THINK_SUBAGENT=false removes it");
    assert_eq!(
        shipped("{\"depth\": 9}"),
        (vec![], 1),
        "a bad value switches it off, with a reason"
    );
}

#[test]
fn at_most_the_cap_hold_a_slot_and_the_rest_wait_in_order() {
    let slots = Rc::new(Slots { max: 2, used: Default::default(), waiting: Default::default() });
    let mut pool = LocalPool::new();
    let order = Rc::new(RefCell::new(Vec::new()));
    let held: Rc<RefCell<Vec<Slot>>> = Rc::default();
    for i in 0..4 {
        let (slots, order, held) = (slots.clone(), order.clone(), held.clone());
        pool.spawner()
            .spawn_local(async move {
                let slot = slots.acquire().await;
                order.borrow_mut().push(i);
                held.borrow_mut().push(slot);
            })
            .unwrap();
    }
    pool.run_until_stalled();
    assert_eq!(*order.borrow(), [0, 1]);
    let first = held.borrow_mut().remove(0);
    drop(first);
    pool.run_until_stalled();
    assert_eq!(*order.borrow(), [0, 1, 2]);
    held.borrow_mut().clear();
    pool.run_until_stalled();
    assert_eq!(*order.borrow(), [0, 1, 2, 3]);
    held.borrow_mut().clear();
    assert_eq!(slots.used.get(), 0);
}

// ---- whole runs over real agents --------------------------------------------------------

/// Records frames per connection.
#[derive(Default)]
struct Tabs(RefCell<BTreeMap<String, Vec<Value>>>);

impl Sockets for Tabs {
    fn ids(&self) -> Vec<String> {
        self.0.borrow().keys().cloned().collect()
    }
    fn send(&self, id: &str, text: &str) {
        if let Some(f) = self.0.borrow_mut().get_mut(id) {
            f.push(serde_json::from_str(text).unwrap_or(Value::Null));
        }
    }
}

struct Spawner(LocalSpawner);
impl crate::platform::Tasks for Spawner {
    fn spawn(&self, task: futures::future::LocalBoxFuture<'static, ()>) {
        let _ = self.0.spawn_local(task);
    }
}

struct NoAlarm;
impl Alarm for NoAlarm {
    fn set(&self, _: f64) {}
    fn set_no_later(&self, _: f64) {}
}

struct NoHttp;
#[async_trait(?Send)]
impl HttpClient for NoHttp {
    async fn fetch(&self, _: HttpRequest) -> Result<HttpResponse, HttpError> {
        Err(HttpError::Connect("no network in host tests".into()))
    }
}

/// Every instance of the "class": its storage survives a restart, its agent does not.
struct World {
    pool: RefCell<LocalPool>,
    spawner: RefCell<LocalSpawner>,
    clock: Rc<ManualClock>,
    root_spec: AgentSpec,
    storage: RefCell<BTreeMap<String, Rc<SqliteSql>>>,
    link: Rc<LocalLink>,
}

/// Builds the instance of a name, given the tool path of a first start.
type MakeInstance = Box<dyn Fn(&str, Option<&[String]>) -> Rc<Agent>>;

/// The in-process stand-in for Durable Object RPC: builds an instance on first use, as the
/// runtime does, with the spec its stored role names.
struct LocalLink {
    instances: RefCell<BTreeMap<String, Rc<Agent>>>,
    /// Instances built before any start told them their role (as the runtime does, they run
    /// the root spec until then, and a first start rebuilds them as the child).
    roleless: RefCell<std::collections::BTreeSet<String>>,
    make: RefCell<Option<MakeInstance>>,
}

impl LocalLink {
    fn get(&self, name: &str, path: Option<&[String]>) -> Rc<Agent> {
        if let Some(a) = self.instances.borrow().get(name) {
            return a.clone();
        }
        let agent = (self.make.borrow().as_ref().unwrap())(name, path);
        if path.is_none() && agent.subagents().current().is_none() {
            self.roleless.borrow_mut().insert(name.to_owned());
        }
        self.instances.borrow_mut().insert(name.to_owned(), agent.clone());
        agent
    }
}

#[async_trait(?Send)]
impl ChildLink for LocalLink {
    async fn start(&self, child: &str, req: &StartRequest) -> Result<(), LinkError> {
        if self.roleless.borrow_mut().remove(child) {
            self.instances.borrow_mut().remove(child);
        }
        let agent = self.get(child, Some(&req.tool_path));
        agent.start_agent_tool_run(req.clone()).map_err(|e| LinkError::Failed(e.to_string()))
    }
    async fn events(
        &self,
        child: &str,
        run_id: &str,
        cursor: i64,
        wait_ms: u64,
    ) -> Result<Batch, LinkError> {
        Ok(self.get(child, None).agent_tool_events(run_id, cursor, wait_ms).await)
    }
    async fn cancel(&self, child: &str, run_id: &str) -> Result<(), LinkError> {
        self.get(child, None).cancel_agent_tool_run(run_id);
        Ok(())
    }
    async fn approve(&self, child: &str, id: &str, approved: bool) -> Result<bool, LinkError> {
        Ok(self.get(child, None).agent_tool_approval(id, approved))
    }
    async fn release(&self, child: &str, run_id: &str) -> Result<(), LinkError> {
        self.get(child, None).release_agent_tool_run(run_id);
        Ok(())
    }
    async fn messages(&self, child: &str, path: &[String]) -> Result<Value, LinkError> {
        let agent = self.get(child, None);
        if !path.is_empty() {
            return agent.subagents().child_messages(path).await;
        }
        Ok(Value::Array(agent.messages().iter().map(|m| m.to_value()).collect()))
    }
}

impl World {
    fn new(root_spec: AgentSpec) -> Rc<Self> {
        let pool = LocalPool::new();
        let world = Rc::new(World {
            spawner: RefCell::new(pool.spawner()),
            pool: RefCell::new(pool),
            clock: ManualClock::new(),
            root_spec,
            storage: RefCell::new(BTreeMap::new()),
            link: Rc::new(LocalLink {
                instances: Default::default(),
                roleless: Default::default(),
                make: RefCell::new(None),
            }),
        });
        Self::wire(&world);
        world
    }

    /// Installs the instance factory (again after a restart).
    fn wire(world: &Rc<Self>) {
        let weak = Rc::downgrade(world);
        *world.link.make.borrow_mut() =
            Some(Box::new(move |name, path| weak.upgrade().unwrap().instance(name, path)));
    }

    fn spawn(&self, f: impl std::future::Future<Output = ()> + 'static) {
        let _ = self.spawner.borrow().spawn_local(f);
    }

    /// A crash: every running future of every instance is gone; storage stays.
    fn crash(&self) {
        let pool = LocalPool::new();
        *self.spawner.borrow_mut() = pool.spawner();
        // A killed process runs no destructors: the old futures are forgotten, not dropped.
        std::mem::forget(self.pool.replace(pool));
        std::mem::forget(std::mem::take(&mut *self.link.instances.borrow_mut()));
    }

    fn instance(&self, name: &str, path: Option<&[String]>) -> Rc<Agent> {
        let db = self.storage.borrow_mut().entry(name.to_owned()).or_insert_with(sql).clone();
        let role = ChildLog::role(db.as_ref()).or_else(|| path.map(<[String]>::to_vec));
        let spec = role
            .as_deref()
            .and_then(|p| self.root_spec.child_spec(p))
            .unwrap_or_else(|| self.root_spec.clone());
        let tabs = Rc::new(Tabs::default());
        let deps = Deps {
            sql: db,
            sockets: tabs,
            clock: self.clock.clone(),
            http: Rc::new(NoHttp),
            blobs: None,
            bash_engine: None,
            sandbox: None,
            browser: None,
            tasks: Rc::new(Spawner(self.spawner.borrow().clone())),
            alarm: Rc::new(NoAlarm),
            instance_id: name.into(),
        };
        let agent = Agent::new("ThinkAgent", spec, deps);
        agent.set_name(name);
        agent.subagents().set_link(self.link.clone());
        self.spawn(agent.clone().start());
        agent
    }
}

/// The root instance with one tab, `tab`.
fn root(world: &Rc<World>) -> (Rc<Agent>, Rc<Tabs>) {
    root_with(world, world.root_spec.clone())
}

/// The root instance with one tab, running `spec` (a restart with other settings).
fn root_with(world: &Rc<World>, spec: AgentSpec) -> (Rc<Agent>, Rc<Tabs>) {
    let w = world;
    let db = w.storage.borrow_mut().entry("root".into()).or_insert_with(sql).clone();
    let tabs = Rc::new(Tabs::default());
    tabs.0.borrow_mut().insert("tab".into(), Vec::new());
    let deps = Deps {
        sql: db,
        sockets: tabs.clone(),
        clock: w.clock.clone(),
        http: Rc::new(NoHttp),
        blobs: None,
        bash_engine: None,
        sandbox: None,
        browser: None,
        tasks: Rc::new(Spawner(w.spawner.borrow().clone())),
        alarm: Rc::new(NoAlarm),
        instance_id: "root".into(),
    };
    let agent = Agent::new("ThinkAgent", spec, deps);
    agent.set_name("root");
    agent.subagents().set_link(w.link.clone());
    w.spawn(agent.clone().start());
    (agent, tabs)
}

fn run(world: &Rc<World>) {
    world.pool.borrow_mut().run_until_stalled();
}

/// Runs until nothing is left to do, moving time to each next timer (at most `max_ms`).
fn run_for(world: &Rc<World>, max_ms: f64) {
    let start = world.clock.now();
    loop {
        run(world);
        let clock = world.clock.clone();
        if clock.now() - start >= max_ms || !clock.advance_to_next_timer() {
            break;
        }
    }
}

fn send(world: &Rc<World>, agent: &Rc<Agent>, frame: Value) {
    let (agent, text) = (agent.clone(), frame.to_string());
    world.spawn(async move { agent.on_message("tab", &text).await });
    run(world);
}

fn chat(world: &Rc<World>, agent: &Rc<Agent>, text: &str) {
    let body = json!({"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}], "trigger": "submit-message"});
    send(
        world,
        agent,
        json!({"type": "cf_agent_use_chat_request", "id": "r1", "init": {"method": "POST", "body": body.to_string()}}),
    );
}

fn call(id: &str, name: &str, args: Value) -> Vec<ModelEvent> {
    vec![
        ModelEvent::ToolCallStart { index: 0, id: id.into(), name: name.into() },
        ModelEvent::ToolCallDelta { index: 0, arguments: args.to_string() },
        ModelEvent::Finish { reason: FinishReason::ToolCalls, usage: None },
    ]
}

fn agent_events(tabs: &Tabs) -> Vec<Value> {
    tabs.0.borrow()["tab"].iter().filter(|f| f["type"] == "agent-tool-event").cloned().collect()
}

fn tool_output(agent: &Agent, id: &str) -> Option<Value> {
    agent.messages().iter().flat_map(|m| m.parts.clone()).find(|p| p["toolCallId"] == id).map(|p| {
        p.get("output")
            .cloned()
            .unwrap_or_else(|| json!({"state": p["state"], "errorText": p["errorText"]}))
    })
}

/// A root agent whose model calls `subagent` and then answers, and a child model per level.
fn nested_spec(
    root_model: Rc<ScriptedModel>,
    levels: Vec<Rc<ScriptedModel>>,
    approval: Option<&str>,
) -> AgentSpec {
    fn level(
        models: Rc<Vec<Rc<ScriptedModel>>>,
        depth: usize,
        approval: Option<String>,
    ) -> AgentSpec {
        let mut spec = AgentSpec::new(ModelChoice::Custom(models[depth].clone()))
            .workspace_tools(false)
            .context_window(100_000);
        if let Some(a) = &approval {
            spec = spec.approval(ApprovalPolicy::from_list(a).unwrap());
        }
        if depth + 1 < models.len() {
            let m = models.clone();
            spec = spec.agent_tool(AgentTool::subagent(move || {
                level(m.clone(), depth + 1, approval.clone())
            }));
        }
        spec
    }
    let mut models = vec![root_model];
    models.extend(levels);
    level(Rc::new(models), 0, approval.map(str::to_owned))
}

#[test]
fn a_parent_runs_its_child_streams_its_events_and_continues_with_the_answer() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent
        .push([call("c1", "subagent", json!({"task": "add 2 and 2"})), text("The child says 4.")]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([text("4")]);
    let world = World::new(nested_spec(parent.clone(), vec![child.clone()], None));
    let (agent, tabs) = root(&world);
    chat(&world, &agent, "ask the child");
    run_for(&world, 10_000.0);
    assert_eq!(tool_output(&agent, "c1"), Some(json!("4")));
    let last = parent.seen().last().unwrap().messages.clone();
    assert!(format!("{last:?}").contains('4'), "the parent's model saw the child's answer");
    assert_eq!(parent.seen().len(), 2);
    assert_eq!(child.seen().len(), 1);
    assert!(
        format!("{:?}", child.seen()[0].messages).contains("add 2 and 2"),
        "the child got the task"
    );
    let frames = agent_events(&tabs);
    assert!(frames.iter().all(|f| f["parentToolCallId"] == "c1"));
    let seqs: Vec<u64> = frames.iter().map(|f| f["sequence"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "sequences run 0, 1, 2, …");
    assert_eq!(frames[0]["event"]["kind"], "started");
    assert!(frames.iter().any(
        |f| f["event"]["chunk"]["type"] == "text-delta" && f["event"]["chunk"]["delta"] == "4"
    ));
    assert_eq!(
        frames.last().unwrap()["event"],
        json!({"kind": "finished", "result": "4", "runId": "agent-tool:c1", "summary": "4"})
    );
    let child_agent = world.link.get("root~c1", None);
    let texts = format!("{:?}", child_agent.messages());
    assert!(
        texts.contains("add 2 and 2") && texts.contains('4'),
        "the child kept its own transcript"
    );
    assert_eq!(agent.subagents().child_for("c1").unwrap().as_deref(), Some("root~c1"));
    assert_eq!(agent.subagents().child_for("nope").unwrap(), None);
}

/// Once the parent recorded the outcome, the child keeps only the run's terminal event in
/// its log (one row per chunk otherwise stays forever); a tail from the start still ends
/// the run with its answer, as a parent re-attaching after a crash would read it.
#[test]
fn a_recorded_run_leaves_only_its_terminal_event_in_the_childs_log() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([call("c1", "subagent", json!({"task": "count"})), text("done")]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([text("one two three four five")]);
    let world = World::new(nested_spec(parent.clone(), vec![child.clone()], None));
    let (agent, tabs) = root(&world);
    chat(&world, &agent, "go");
    run_for(&world, 10_000.0);
    assert_eq!(tool_output(&agent, "c1"), Some(json!("one two three four five")));
    assert!(agent_events(&tabs).len() > 3, "the run streamed several events");
    let db = world.storage.borrow().get("root~c1").unwrap().clone();
    let left = ChildLog::new(db.as_ref()).entries("agent-tool:c1", 0).unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    let finished = left[0].event.clone().unwrap();
    assert_eq!(finished["kind"], "finished");
    assert_eq!(
        Outcome::from_event(&finished),
        Some(Outcome::Answer(json!("one two three four five")))
    );
    assert_eq!(left[0].sequence, Some(agent_events(&tabs).len() as u64 - 1));
}

#[test]
fn a_running_run_keeps_its_log_when_released() {
    let db = sql();
    ChildLog::create_tables(db.as_ref()).unwrap();
    let log = ChildLog::new(db.as_ref());
    log.start("agent-tool:a", "root", &["subagent".to_string()], 1.0).unwrap();
    log.append_event("agent-tool:a", &events::started()).unwrap();
    log.append_frame("agent-tool:a", &json!({"type": "agent-tool-event"})).unwrap();
    log.append_event("agent-tool:a", &events::chunk(&json!({"type": "start"}))).unwrap();
    assert_eq!(log.release("agent-tool:a").unwrap(), 0, "a running run is left alone");
    log.append_event("agent-tool:a", &events::finished(&json!("x"))).unwrap();
    log.finish("agent-tool:a").unwrap();
    assert_eq!(log.release("agent-tool:a").unwrap(), 3);
    let left = log.entries("agent-tool:a", 0).unwrap();
    assert_eq!(left.iter().map(|e| e.sequence).collect::<Vec<_>>(), [Some(2)]);
    assert_eq!(log.release("agent-tool:a").unwrap(), 0, "a second release drops nothing");
}

#[test]
fn a_tab_joining_mid_run_is_replayed_the_events_so_far() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([call("c1", "subagent", json!({"task": "slow"})), text("ok")]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([text("slow answer")]);
    let world = World::new(nested_spec(parent, vec![child.clone()], None));
    child.delay_streams(world.clock.clone(), 1_000);
    let (agent, tabs) = root(&world);
    chat(&world, &agent, "go");
    let before = agent_events(&tabs).len();
    assert!(before >= 2, "started and the first chunks arrived: {before}");
    tabs.0.borrow_mut().insert("late".into(), Vec::new());
    agent.on_connect("late");
    let late: Vec<Value> = tabs.0.borrow()["late"]
        .iter()
        .filter(|f| f["type"] == "agent-tool-event")
        .cloned()
        .collect();
    assert_eq!(late.len(), before);
    assert!(late.iter().all(|f| f["replay"] == true));
    run_for(&world, 10_000.0);
    let live_after: Vec<Value> = tabs.0.borrow()["late"]
        .iter()
        .filter(|f| f["type"] == "agent-tool-event" && f.get("replay").is_none())
        .cloned()
        .collect();
    assert_eq!(live_after.last().unwrap()["event"]["kind"], "finished", "then it follows live");
    assert_eq!(live_after[0]["sequence"].as_u64().unwrap(), before as u64);
}

#[test]
fn cancelling_the_parents_turn_cancels_the_child_and_its_child() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([call("c1", "subagent", json!({"task": "delegate"}))]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([call("c2", "subagent", json!({"task": "deep"}))]);
    let grandchild = ScriptedModel::with_fallback(text("(grandchild)"));
    grandchild.push([text("never finishes")]);
    let world = World::new(nested_spec(parent, vec![child, grandchild.clone()], None));
    grandchild.delay_streams(world.clock.clone(), 10_000_000);
    let (agent, tabs) = root(&world);
    chat(&world, &agent, "go");
    assert_eq!(grandchild.seen().len(), 1, "the grandchild is working");
    let deep: Vec<Value> =
        agent_events(&tabs).into_iter().filter(|f| f["parentToolCallId"] == "c2").collect();
    assert!(!deep.is_empty(), "the grandchild's events reach the root's tab");
    send(&world, &agent, json!({"type": "cf_agent_chat_request_cancel", "id": "r1"}));
    run_for(&world, 1_000.0);
    let frames = agent_events(&tabs);
    let kinds = |id: &str| -> Vec<Value> {
        frames
            .iter()
            .filter(|f| f["parentToolCallId"] == id)
            .map(|f| f["event"]["kind"].clone())
            .collect()
    };
    assert_eq!(kinds("c1").last(), Some(&json!("aborted")), "{:?}", kinds("c1"));
    let link = world.link.clone();
    let child_agent = link.get("root~c1", None);
    assert_eq!(child_agent.subagents().current(), None, "the child's run ended");
    let grand = link.get("root~c1~c2", None);
    assert_eq!(grand.subagents().current(), None, "the grandchild's run ended too");
    let grand_log =
        ChildLog::new(world.storage.borrow()["root~c1~c2"].as_ref() as &dyn crate::store::Sql)
            .entries("agent-tool:c2", 0)
            .unwrap();
    assert_eq!(grand_log.last().unwrap().event.as_ref().unwrap()["kind"], "aborted");
}

#[test]
fn a_childs_approval_is_answered_from_the_parents_tab_two_levels_down() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([call("c1", "subagent", json!({"task": "delegate"})), text("all done")]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([call("c2", "subagent", json!({"task": "write it"})), text("child done")]);
    let grandchild = ScriptedModel::with_fallback(text("(grandchild)"));
    grandchild.push([call("g1", "danger", json!({})), text("grandchild done")]);
    let mut spec = nested_spec(parent.clone(), vec![child, grandchild.clone()], Some("danger"));
    // The grandchild has a `danger` tool that needs approval.
    let m = grandchild.clone();
    spec.agent_tools[0].child = {
        let inner = spec.agent_tools[0].child.clone();
        Rc::new(move || {
            let mut c = inner();
            let m = m.clone();
            let g = c.agent_tools[0].child.clone();
            c.agent_tools[0].child = Rc::new(move || {
                let _ = &m;
                g().tool(crate::tools::DynamicTool::new(
                    "danger",
                    "",
                    json!({"type": "object"}),
                    |_, _| async { Ok(json!("danger ran")) },
                ))
            });
            c
        })
    };
    let world = World::new(spec);
    let (agent, tabs) = root(&world);
    chat(&world, &agent, "go");
    run_for(&world, 2_000.0);
    let request = agent_events(&tabs)
        .into_iter()
        .find(|f| f["event"]["chunk"]["type"] == "tool-approval-request")
        .expect("the grandchild's approval request reached the root's tab");
    assert_eq!(request["parentToolCallId"], "c2");
    assert_eq!(request["event"]["chunk"]["toolCallId"], "g1");
    assert_eq!(parent.seen().len(), 1, "the parent still waits for its child");
    send(
        &world,
        &agent,
        json!({"type": "cf_agent_tool_approval", "toolCallId": "g1", "approved": true, "autoContinue": true}),
    );
    run_for(&world, 10_000.0);
    assert_eq!(tool_output(&agent, "c1"), Some(json!("child done")));
    assert_eq!(parent.seen().len(), 2);
    let grand = world.link.get("root~c1~c2", None);
    assert_eq!(
        tool_output(&grand, "g1"),
        Some(json!("danger ran")),
        "the approved call ran in the grandchild"
    );
    let drill = |path: &[&str]| {
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        futures::executor::block_on(agent.subagents().child_messages(&path)).unwrap()
    };
    assert!(
        drill(&["c1", "c2"]).to_string().contains("write it"),
        "the grandchild, through its parent"
    );
    assert_eq!(drill(&["c1", "nope"]), Value::Null);
    assert_eq!(drill(&["c2"]), Value::Null, "the root has no run c2: only its child has");
}

#[test]
fn a_child_silent_past_the_stall_time_is_reported_interrupted() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([call("c1", "subagent", json!({"task": "hang"})), text("gave up")]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([text("never")]);
    let world = World::new(nested_spec(parent, vec![child.clone()], None));
    child.delay_streams(world.clock.clone(), 10_000_000);
    let (agent, tabs) = root(&world);
    chat(&world, &agent, "go");
    run_for(&world, 130_000.0);
    let out = tool_output(&agent, "c1").unwrap();
    assert_eq!(out["ok"], false);
    assert_eq!(out["status"], "interrupted");
    assert_eq!(out["retryable"], true);
    assert_eq!(agent_events(&tabs).last().unwrap()["event"]["kind"], "interrupted");
}

#[test]
fn after_a_crash_the_parent_reattaches_to_its_child_and_never_starts_it_again() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([call("c1", "subagent", json!({"task": "long job"})), text("parent finished")]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([text("first answer"), text("after restart")]);
    let world = World::new(nested_spec(parent.clone(), vec![child.clone()], None));
    child.delay_streams(world.clock.clone(), 5_000);
    let (agent, _) = root(&world);
    chat(&world, &agent, "go");
    assert_eq!(child.seen().len(), 1, "the child is mid-answer");
    // The crash: every running future of every instance is gone; storage stays.
    std::mem::forget(agent);
    world.crash();
    let (agent, tabs) = root(&world);
    run_for(&world, 60_000.0);
    let out = tool_output(&agent, "c1").unwrap();
    // The child recovered its own interrupted turn (its second model call continues it).
    assert!(out.as_str().is_some_and(|t| t.contains("after restart")), "{out}");
    assert_eq!(child.seen().len(), 2, "one call before the crash, one continuation after");
    let child_agent = world.link.get("root~c1", None);
    let users = child_agent
        .messages()
        .iter()
        .filter(|m| m.role == crate::protocol::message::Role::User)
        .count();
    assert_eq!(users, 1, "the child was given its task once");
    assert_eq!(parent.seen().len(), 2, "the parent continued after re-attaching");
    assert!(agent_events(&tabs).iter().any(|f| f["event"]["kind"] == "finished"));
}

/// The `(parentToolCallId, runId, sequence)` key by which `agents`' `useAgentToolEvents`
/// drops an event it already applied, and the status it leaves the run in: a tab's view.
fn tab_view(frames: &[Value], call: &str) -> (Vec<String>, &'static str) {
    let mut seen = std::collections::BTreeSet::new();
    let mut status = "unknown";
    for f in frames.iter().filter(|f| f["parentToolCallId"] == call) {
        let key = format!("{}\0{}\0{}", f["parentToolCallId"], f["event"]["runId"], f["sequence"]);
        if !seen.insert(key) {
            continue;
        }
        status = match (status, f["event"]["kind"].as_str()) {
            (_, Some("started")) if status == "unknown" => "running",
            ("unknown", _) => "unknown",
            (_, Some("finished")) => "completed",
            (_, Some("error")) => "error",
            (_, Some("aborted")) => "aborted",
            (_, Some("interrupted")) => "interrupted",
            (s, _) => s,
        };
    }
    (seen.into_iter().collect(), status)
}

/// After a crash the parent recovers with no tab connected (the tabs reconnect later): a tab
/// that comes back is sent the end of the run it saw start, at a sequence it has not seen,
/// so the run it was following ends.
#[test]
fn a_tab_back_after_a_crash_is_sent_the_end_of_the_run_it_was_following() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([call("c1", "subagent", json!({"task": "long job"})), text("parent finished")]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([text("first answer"), text("after restart")]);
    let world = World::new(nested_spec(parent.clone(), vec![child.clone()], None));
    child.delay_streams(world.clock.clone(), 5_000);
    let (agent, tabs) = root(&world);
    chat(&world, &agent, "go");
    let before = agent_events(&tabs);
    assert_eq!(tab_view(&before, "c1").1, "running");
    std::mem::forget(agent);
    world.crash();
    let (agent, tabs) = root(&world);
    tabs.0.borrow_mut().clear();
    run_for(&world, 60_000.0);
    let answer = tool_output(&agent, "c1").unwrap();
    assert!(answer.as_str().unwrap().contains("after restart"), "{answer}");
    tabs.0.borrow_mut().insert("tab".into(), Vec::new());
    agent.on_connect("tab");
    let replayed = agent_events(&tabs);
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert_eq!(replayed[0]["replay"], true);
    assert_eq!(replayed[0]["event"]["kind"], "finished");
    assert_eq!(replayed[0]["event"]["summary"], answer);
    let db = world.storage.borrow().get("root~c1").unwrap().clone();
    let log = ChildLog::new(db.as_ref()).entries("agent-tool:c1", 0).unwrap();
    assert_eq!(replayed[0]["sequence"].as_u64(), log.last().unwrap().sequence);
    let (keys, status) = tab_view(&[before.clone(), replayed].concat(), "c1");
    assert_eq!(status, "completed", "the tab that followed the run sees it end");
    assert_eq!(keys.len(), before.len() + 1);
    // A chat clear forgets the ended runs.
    send(&world, &agent, json!({"type": "cf_agent_chat_clear"}));
    tabs.0.borrow_mut().insert("other".into(), Vec::new());
    agent.on_connect("other");
    assert!(!tabs.0.borrow()["other"].iter().any(|f| f["type"] == "agent-tool-event"));
}

/// A link to a child that has lost the run: it knows no such run and cannot be started.
struct LostChild;

#[async_trait(?Send)]
impl ChildLink for LostChild {
    async fn start(&self, _: &str, _: &StartRequest) -> Result<(), LinkError> {
        Err(LinkError::Failed("gone".into()))
    }
    async fn events(&self, _: &str, _: &str, _: i64, _: u64) -> Result<Batch, LinkError> {
        Ok(Batch { unknown: true, ..Batch::default() })
    }
    async fn cancel(&self, _: &str, _: &str) -> Result<(), LinkError> {
        Ok(())
    }
    async fn approve(&self, _: &str, _: &str, _: bool) -> Result<bool, LinkError> {
        Ok(false)
    }
    async fn messages(&self, _: &str, _: &[String]) -> Result<Value, LinkError> {
        Ok(Value::Null)
    }
    async fn release(&self, _: &str, _: &str) -> Result<(), LinkError> {
        Ok(())
    }
}

/// A run re-attached after a crash whose child no longer has it ends with an `error` event
/// the tabs receive (and a tab connecting later is sent), not in silence.
#[test]
fn a_run_whose_child_lost_it_ends_with_an_error_event_for_the_tabs() {
    let db = sql();
    let tabs = Rc::new(Tabs::default());
    tabs.0.borrow_mut().insert("tab".into(), Vec::new());
    let mut pool = LocalPool::new();
    let deps = SubagentDeps {
        sql: db.clone(),
        sockets: tabs.clone(),
        clock: ManualClock::new(),
        tasks: Rc::new(Spawner(pool.spawner())),
    };
    let subagents = Subagents::new(deps, AgentToolLimits::default());
    subagents.set_link(Rc::new(LostChild));
    let req = StartRequest {
        run_id: "agent-tool:c1".into(),
        child_name: "p~c1".into(),
        parent_name: "p".into(),
        tool_path: vec!["subagent".into()],
        input: "task".into(),
    };
    Registry::new(db.as_ref()).register("c1", "subagent", "p~c1", &req, 1.0).unwrap();
    let out = pool.run_until(subagents.reattach(None, "c1")).unwrap();
    assert_eq!(out["status"], "error");
    let frames = agent_events(&tabs);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["event"]["kind"], "error");
    assert_eq!(frames[0]["event"]["runId"], "agent-tool:c1");
    tabs.0.borrow_mut().insert("tab".into(), Vec::new());
    subagents.replay_to("tab");
    let replayed = agent_events(&tabs);
    assert_eq!(replayed.len(), 1);
    assert_eq!(
        (replayed[0]["event"].clone(), replayed[0]["replay"].clone()),
        (frames[0]["event"].clone(), json!(true))
    );
}

#[test]
fn the_latest_ended_runs_are_kept_small_for_replay() {
    let db = sql();
    Registry::create_table(db.as_ref()).unwrap();
    let reg = Registry::new(db.as_ref());
    let end = |i: usize, summary: String| {
        let event = events::for_clients(
            events::finished(&Value::String(summary)),
            &format!("agent-tool:c{i}"),
            None,
        );
        RunFrames::default().own(&format!("c{i}"), 3, event)
    };
    for i in 0..registry::MAX_REPLAYED_ENDS + 5 {
        reg.note_end(&end(i, format!("answer {i}")), i as f64).unwrap();
    }
    let ends = reg.ends().unwrap();
    assert_eq!(ends.len(), registry::MAX_REPLAYED_ENDS);
    assert_eq!(ends[0]["parentToolCallId"], "c5", "the oldest go first");
    assert_eq!(
        ends.last().unwrap()["event"]["summary"],
        format!("answer {}", registry::MAX_REPLAYED_ENDS + 4)
    );
    // The same run noted again (a re-tail after a crash) is kept once.
    reg.note_end(&end(5, "answer 5".into()), 100.0).unwrap();
    assert_eq!(reg.ends().unwrap().len(), registry::MAX_REPLAYED_ENDS);
    let big = end(99, "é".repeat(100_000));
    reg.note_end(&big, 200.0).unwrap();
    let kept = reg.ends().unwrap().pop().unwrap();
    assert!(kept.to_string().len() <= registry::MAX_END_BYTES, "{}", kept.to_string().len());
    assert_eq!(kept["event"].get("result"), None);
    assert!(kept["event"]["summary"].as_str().unwrap().ends_with('…'));
    assert_eq!(
        (kept["sequence"].clone(), kept["event"]["kind"].clone()),
        (json!(3), json!("finished"))
    );
}

#[test]
fn after_a_crash_with_subagents_switched_off_the_child_is_stopped_not_followed() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([call("c1", "subagent", json!({"task": "long job"})), text("parent finished")]);
    let child = ScriptedModel::with_fallback(text("(child)"));
    child.push([text("first answer"), text("after restart")]);
    let world = World::new(nested_spec(parent.clone(), vec![child.clone()], None));
    child.delay_streams(world.clock.clone(), 5_000);
    let (agent, _) = root(&world);
    chat(&world, &agent, "go");
    assert_eq!(child.seen().len(), 1, "the child is mid-answer");
    std::mem::forget(agent);
    world.crash();
    // The restart has THINK_SUBAGENT=false: the root's spec has no agent tool.
    let off = AgentSpec::new(ModelChoice::Custom(parent.clone()))
        .workspace_tools(false)
        .context_window(100_000);
    let (agent, tabs) = root_with(&world, off);
    run_for(&world, 60_000.0);
    let out = tool_output(&agent, "c1").unwrap();
    assert!(
        out.to_string().contains("Sub-agents are switched off (THINK_SUBAGENT=false)"),
        "{out}"
    );
    let last = agent_events(&tabs).last().cloned().unwrap();
    assert_eq!(last["event"]["kind"], "error", "{last}");
    let child_agent = world.link.get("root~c1", None);
    assert_eq!(child_agent.subagents().current(), None, "the child was told to stop");
    assert_eq!(parent.seen().len(), 2, "the parent's turn went on without the child");
}

/// One model call that makes `n` calls of `subagent` at once.
fn parallel_calls(n: usize) -> Vec<ModelEvent> {
    let mut events = Vec::new();
    for i in 0..n {
        events.push(ModelEvent::ToolCallStart {
            index: i,
            id: format!("p{i}"),
            name: "subagent".into(),
        });
        events.push(ModelEvent::ToolCallDelta {
            index: i,
            arguments: json!({"task": format!("job {i}")}).to_string(),
        });
    }
    events.push(ModelEvent::Finish { reason: FinishReason::ToolCalls, usage: None });
    events
}

#[test]
fn children_past_the_cap_wait_and_one_still_waiting_at_a_crash_is_started_once_after_it() {
    let parent = ScriptedModel::with_fallback(text("(parent)"));
    parent.push([parallel_calls(3), text("all three done")]);
    let child = ScriptedModel::with_fallback(text("child answer"));
    let limits = AgentToolLimits { max_concurrent: 2, ..Default::default() };
    let spec = nested_spec(parent.clone(), vec![child.clone()], None).agent_tool_limits(limits);
    let world = World::new(spec);
    child.delay_streams(world.clock.clone(), 5_000);
    let (agent, _) = root(&world);
    chat(&world, &agent, "go");
    assert_eq!(child.seen().len(), 2, "two children work, the third waits for a slot");
    assert!(
        !world.storage.borrow().contains_key("root~p2"),
        "the third child was not even started"
    );
    std::mem::forget(agent);
    world.crash();
    let (agent, _) = root(&world);
    run_for(&world, 60_000.0);
    for i in 0..3 {
        let out = tool_output(&agent, &format!("p{i}")).unwrap();
        assert_eq!(out, json!("child answer"), "p{i}");
        let c = world.link.get(&format!("root~p{i}"), None);
        let users =
            c.messages().iter().filter(|m| m.role == crate::protocol::message::Role::User).count();
        assert_eq!(users, 1, "child p{i} was given its task once");
    }
    assert_eq!(parent.seen().len(), 2, "the parent continued once with every answer");
}

#[test]
fn events_reach_the_tabs_with_the_fields_use_agent_tool_events_reads() {
    let started = events::for_clients(events::started(), "agent-tool:c", Some("subagent"));
    assert_eq!(
        started,
        json!({"kind": "started", "runId": "agent-tool:c", "agentType": "subagent", "order": 0})
    );
    let chunk = json!({"type": "text-delta", "id": "t", "delta": "hi"});
    let event = events::for_clients(events::chunk(&chunk), "agent-tool:c", None);
    assert_eq!(event["chunk"], chunk);
    assert_eq!(serde_json::from_str::<Value>(event["body"].as_str().unwrap()).unwrap(), chunk);
    let text = events::for_clients(events::finished(&json!("four")), "agent-tool:c", None);
    assert_eq!((text["result"].clone(), text["summary"].clone()), (json!("four"), json!("four")));
    let object = events::for_clients(events::finished(&json!({"n": 4})), "agent-tool:c", None);
    assert_eq!(object["summary"], "{\"n\":4}");
    let aborted =
        events::for_clients(events::failed(EventKind::Aborted, "stop"), "agent-tool:c", None);
    assert_eq!(
        (aborted["error"].clone(), aborted["reason"].clone()),
        (json!("stop"), json!("stop"))
    );
    assert_eq!(Outcome::from_event(&text), Some(Outcome::Answer(json!("four"))));
}

/// The SQLite VM steps of appending one event (and one relayed frame) after `logged` events.
fn steps_of_an_append_after(logged: usize) -> u64 {
    let db = sql();
    ChildLog::create_tables(db.as_ref()).unwrap();
    let log = ChildLog::new(db.as_ref());
    log.start("agent-tool:a", "root", &["subagent".to_string()], 1.0).unwrap();
    let chunk = events::chunk(&json!({"type": "text-delta", "id": "t", "delta": "word "}));
    for _ in 0..logged {
        log.append_event("agent-tool:a", &chunk).unwrap();
    }
    let before = db.steps();
    assert_eq!(log.append_event("agent-tool:a", &chunk).unwrap(), logged as u64);
    log.append_frame("agent-tool:a", &json!({"type": "agent-tool-event"})).unwrap();
    db.steps() - before
}

/// A long child run (a streamed answer is thousands of chunks) must not scan its whole log
/// for every chunk it appends: that made a run of n chunks cost n² row visits.
#[test]
fn appending_to_the_child_log_costs_the_same_however_long_it_is() {
    let (short, long) = (steps_of_an_append_after(10), steps_of_an_append_after(5_000));
    assert!(long < short * 2, "{long} VM steps after 5,000 events vs {short} after 10");
}
