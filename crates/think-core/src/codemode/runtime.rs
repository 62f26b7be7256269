//! The durable runtime behind `execute`: runs passes of the code in the sandbox, journals every
//! connector call, pauses for approval, and replays on approve.
//!
//! Replay matches each call by its call site, connector, method and arguments (and how many
//! identical calls came before it), not by arrival order alone, so calls started together
//! with `Promise.all` find their own journal entries whatever order they arrive in. Reads are
//! run again; writes, tool calls and `codemode.step` results are served from the journal; an
//! approved call runs for real, once. A call at a journaled site whose connector, method or
//! arguments changed is a divergence, which fails the run naming the step.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use async_trait::async_trait;
use futures::FutureExt;
use serde_json::{json, Value};

use super::connectors::{CallContext, CallKind, Connector};
use super::journal::{CallState, ExecStatus, ExecutionRow, Journal, LogEntry, Snippet};
use super::normalize::{guard_loops, normalize_code, CodeShape};
use super::sandbox::{
    CallError, CallRequest, Dispatcher, Namespace, Sandbox, SandboxError, SandboxRequest, Slots,
    SnippetModule,
};
use super::{search, types};
use super::{MAX_CODE_BYTES, MAX_DURABLE_DEPTH, MAX_DURABLE_VALUE_BYTES};
use super::{MAX_RESULT_CHARS, PENDING_ARGS_MAX_CHARS};
use crate::platform::{random_id, Clock};
use crate::store::{Sql, StoreError};

/// Think's `execute` defaults where the issue does not change them.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteOptions {
    /// Time limit of one pass, in ms (default 60 s).
    pub timeout_ms: u64,
    /// Executions in flight at once per object (default 10, the Worker Loader limit); more wait.
    pub max_in_flight: usize,
    /// Terminal executions kept (default 50); paused ones are exempt.
    pub retention: usize,
    /// Paused executions older than this are expired as rejected (default 24 h).
    pub paused_max_age_ms: f64,
}

impl Default for ExecuteOptions {
    fn default() -> Self {
        Self {
            timeout_ms: 60_000,
            max_in_flight: 10,
            retention: 50,
            paused_max_age_ms: 24.0 * 3_600_000.0,
        }
    }
}

impl ExecuteOptions {
    /// Parses `THINK_EXECUTE`: empty or `true` keeps the defaults, `false` removes the tool
    /// (`None`), a JSON object sets `timeout`, `maxInFlight`, `retention`, `pausedMaxAgeMs`.
    pub fn from_setting(s: &str) -> Result<Option<Self>, ExecuteSettingError> {
        let s = s.trim();
        match s {
            "" | "true" | "1" => return Ok(Some(Self::default())),
            "false" | "0" => return Ok(None),
            _ => {}
        }
        let v: Value =
            serde_json::from_str(s).map_err(|e| ExecuteSettingError::NotAnObject(e.to_string()))?;
        let obj = v.as_object().ok_or(ExecuteSettingError::NotAnObject(String::new()))?;
        let mut o = Self::default();
        for (k, v) in obj {
            let n = v
                .as_f64()
                .filter(|n| *n >= 1.0)
                .ok_or_else(|| ExecuteSettingError::NotPositive(k.clone()))?;
            match k.as_str() {
                "timeout" => o.timeout_ms = n as u64,
                "maxInFlight" => o.max_in_flight = n as usize,
                "retention" => o.retention = n as usize,
                "pausedMaxAgeMs" => o.paused_max_age_ms = n,
                other => return Err(ExecuteSettingError::UnknownKey(other.to_owned())),
            }
        }
        Ok(Some(o))
    }
}

/// Why a `THINK_EXECUTE` value was not understood.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ExecuteSettingError {
    /// Neither `true`/`false` nor a JSON object (with the parser's words, if any).
    NotAnObject(String),
    /// A limit that is not a positive number.
    NotPositive(String),
    /// A key the setting does not have.
    UnknownKey(String),
}

impl std::fmt::Display for ExecuteSettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAnObject(e) if e.is_empty() => f.write_str("not false or a JSON object"),
            Self::NotAnObject(e) => write!(f, "not false or a JSON object: {e}"),
            Self::NotPositive(k) => write!(f, "{k} must be a positive number"),
            Self::UnknownKey(k) => write!(f, "unknown key {k:?}"),
        }
    }
}

impl std::error::Error for ExecuteSettingError {}

/// Extra time the host waits past the sandbox's own limit before it gives up on a pass.
pub const TIMEOUT_MARGIN_MS: u64 = 2_000;

/// Why the alarm rejected a paused execution.
pub const EXPIRED: &str = "Expired while waiting for approval.";

/// The text a call gets when the process died while it ran.
pub const INTERRUPTED_CALL: &str = "This call was interrupted by a restart while it ran; it may or may not have taken effect, so it was not run again.";

/// A callable's failure.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CodeModeError {
    /// No execution has this id.
    NotFound(String),
    /// The execution is not paused (it has this status).
    NotPaused(String, &'static str),
    /// Bad arguments to a callable.
    Invalid(String),
    /// The journal could not be read or written.
    Store(StoreError),
}

impl std::fmt::Display for CodeModeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodeModeError::NotFound(id) => write!(f, "Execution {id} does not exist"),
            CodeModeError::NotPaused(id, s) => {
                write!(f, "Execution {id} is not paused (it is {s})")
            }
            CodeModeError::Invalid(e) => f.write_str(e),
            CodeModeError::Store(e) => write!(f, "The execution journal failed: {e}"),
        }
    }
}

impl std::error::Error for CodeModeError {}

impl From<StoreError> for CodeModeError {
    fn from(e: StoreError) -> Self {
        CodeModeError::Store(e)
    }
}

/// The Code Mode runtime of one agent.
pub struct CodeMode {
    sql: Rc<dyn Sql>,
    clock: Rc<dyn Clock>,
    sandbox: Rc<dyn Sandbox>,
    options: ExecuteOptions,
    slots: Slots,
}

/// JSON with object keys sorted, so equal arguments compare equal whatever their key order.
pub fn stable_stringify(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            crate::platform::sort::sort(&mut keys);
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), stable_stringify(&map[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            format!("[{}]", items.iter().map(stable_stringify).collect::<Vec<_>>().join(","))
        }
        other => other.to_string(),
    }
}

/// `s` cut to `max` characters, saying how long it was (also for skill scripts' results).
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}… [truncated: {} characters in all]", s.chars().count())
}

fn too_large(what: &str, bytes: usize) -> String {
    format!(
        "{what} is {bytes} bytes, over the 1 MB limit for recorded values. Write large data to a workspace file (state.writeFile) and pass its path instead."
    )
}

/// How many arrays and objects deep `v` nests (a scalar is 0), counted without recursion,
/// since a connector's result (a tree walk) may nest deeper than the stack would allow.
pub(crate) fn nesting(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, depth + 1))),
            Value::Object(o) => stack.extend(o.values().map(|c| (c, depth + 1))),
            _ => continue,
        }
        deepest = deepest.max(depth + 1);
    }
    deepest
}

/// Per-pass state shared by the dispatcher's calls.
#[derive(Default)]
struct Pass {
    log: Vec<LogEntry>,
    used: HashSet<i64>,
    next_seq: i64,
    site_seen: HashMap<String, usize>,
    /// Reads (ephemeral entries) recorded in memory only, written at the end of the pass:
    /// a durable write before each reply would hold it behind a storage flush, and a read is
    /// run again on replay anyway, so nothing depends on it being logged first.
    unsaved: HashSet<i64>,
    /// Reads replayed from an earlier pass whose row must be updated at the end.
    dirty: HashSet<i64>,
    paused: bool,
    fatal: Option<String>,
    in_flight: usize,
    calls: usize,
}

impl Pass {
    fn entry_mut(&mut self, seq: i64) -> Option<&mut LogEntry> {
        self.log.iter_mut().find(|e| e.seq == seq)
    }
}

struct PassDispatcher {
    rt: Rc<CodeMode>,
    execution_id: String,
    connectors: Vec<Rc<dyn Connector>>,
    pass: RefCell<Pass>,
}

enum Matched {
    Serve(Result<Value, String>),
    Run(i64),
    Pause,
}

impl PassDispatcher {
    fn journal(&self) -> Journal<'_> {
        Journal::new(self.rt.sql.as_ref())
    }

    fn warn(&self, e: StoreError) {
        crate::platform::log(&format!("think-rs: the code mode journal failed: {e}"));
    }

    fn set_state(&self, seq: i64, state: CallState, result: Option<&Value>) {
        let ephemeral = {
            let mut pass = self.pass.borrow_mut();
            let ephemeral = match pass.entry_mut(seq) {
                Some(entry) => {
                    entry.state = state;
                    entry.result = result.cloned();
                    entry.ephemeral
                }
                None => false,
            };
            if ephemeral && !pass.unsaved.contains(&seq) {
                pass.dirty.insert(seq);
            }
            ephemeral
        };
        if !ephemeral {
            if let Err(e) = self.journal().update_call(&self.execution_id, seq, state, result) {
                self.warn(e);
            }
        }
    }

    /// Writes the reads of this pass to the journal (see [`Pass::unsaved`]).
    fn flush_reads(&self) {
        let pass = self.pass.borrow();
        let journal = self.journal();
        for entry in pass.log.iter().filter(|e| e.ephemeral) {
            let result = if pass.unsaved.contains(&entry.seq) {
                journal.log_call(&self.execution_id, entry)
            } else if pass.dirty.contains(&entry.seq) {
                journal.update_call(
                    &self.execution_id,
                    entry.seq,
                    entry.state,
                    entry.result.as_ref(),
                )
            } else {
                Ok(())
            };
            if let Err(e) = result {
                self.warn(e);
            }
        }
    }

    fn fail(&self, message: String) -> CallError {
        self.pass.borrow_mut().fatal.get_or_insert_with(|| message.clone());
        CallError::Failed(message)
    }

    /// Finds this call's journal entry, or decides it is new (`Ok(None)`), or a divergence.
    fn find(&self, call: &CallRequest, args_key: &str) -> Result<Option<Matched>, String> {
        let mut pass = self.pass.borrow_mut();
        let nth_at_site = {
            let n = pass.site_seen.entry(call.site.clone()).or_insert(0);
            *n += 1;
            *n - 1
        };
        let same = |e: &LogEntry| {
            e.site == call.site
                && e.connector == call.connector
                && e.method == call.method
                && stable_stringify(&e.args) == args_key
        };
        let found = pass.log.iter().find(|e| !pass.used.contains(&e.seq) && same(e)).cloned();
        let Some(entry) = found else {
            let at_site = pass
                .log
                .iter()
                .filter(|e| e.site == call.site && !e.ephemeral)
                .nth(nth_at_site)
                .filter(|e| !pass.used.contains(&e.seq))
                .cloned();
            if let (Some(e), false) =
                (at_site, call.connector == "codemode" && call.method == "stepDone")
            {
                return Err(format!(
                    "Codemode replay divergence at step {}: the journal has {}.{}({}) at line {}, but the code now calls {}.{}({}) there. The code or the data it reads changed since the run paused; start a new execution.",
                    e.seq,
                    e.connector,
                    e.method,
                    cut(&e.args.to_string(), 200),
                    e.site,
                    call.connector,
                    call.method,
                    cut(args_key, 200)
                ));
            }
            return Ok(None);
        };
        pass.used.insert(entry.seq);
        Ok(Some(match entry.state {
            CallState::Applied | CallState::Error if entry.ephemeral => Matched::Run(entry.seq),
            CallState::Applied => Matched::Serve(Ok(entry.result.unwrap_or(Value::Null))),
            CallState::Error => Matched::Serve(Err(entry
                .result
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "The call failed.".into()))),
            CallState::Approved => Matched::Run(entry.seq),
            CallState::Pending => Matched::Pause,
            CallState::Rejected => Matched::Serve(Err("The call was rejected.".into())),
            CallState::Executing => Matched::Serve(Err(INTERRUPTED_CALL.into())),
            // A rolled-back run is settled and never replayed; kept for completeness.
            CallState::Reverted => Matched::Serve(Err("The call was rolled back.".into())),
        }))
    }

    async fn run_call(
        &self,
        conn: &Rc<dyn Connector>,
        call: &CallRequest,
        seq: i64,
        fresh: bool,
    ) -> Result<Value, CallError> {
        // A new entry is already logged `executing`; a replayed one is marked so now.
        if !fresh {
            self.set_state(seq, CallState::Executing, None);
        }
        let ctx = CallContext { execution_id: self.execution_id.clone(), seq };
        match conn.call(&call.method, call.args.clone(), &ctx).await {
            Ok(v) => {
                let bytes = v.to_string().len();
                let what = || format!("The result of {}.{}", call.connector, call.method);
                let msg = if bytes > MAX_DURABLE_VALUE_BYTES {
                    Some(too_large(&what(), bytes))
                } else if !self.is_read(seq) && nesting(&v) > MAX_DURABLE_DEPTH {
                    Some(format!(
                        "{} nests {} levels deep, over the {MAX_DURABLE_DEPTH} levels a recorded value may have. Return a flatter value (or write it to a workspace file and pass its path).",
                        what(),
                        nesting(&v)
                    ))
                } else {
                    None
                };
                if let Some(msg) = msg {
                    self.set_state(seq, CallState::Error, Some(&Value::String(msg.clone())));
                    return Err(self.fail(msg));
                }
                self.set_state(seq, CallState::Applied, Some(&v));
                Ok(v)
            }
            Err(e) => {
                let e = e.to_string();
                self.set_state(seq, CallState::Error, Some(&Value::String(e.clone())));
                Err(CallError::Failed(e))
            }
        }
    }

    /// Whether entry `seq` is a read, which a replay runs again instead of serving.
    fn is_read(&self, seq: i64) -> bool {
        self.pass.borrow_mut().entry_mut(seq).is_some_and(|e| e.ephemeral)
    }

    fn new_entry(
        &self,
        call: &CallRequest,
        state: CallState,
        approval: bool,
        ephemeral: bool,
    ) -> i64 {
        let entry = {
            let mut pass = self.pass.borrow_mut();
            let seq = pass.next_seq;
            pass.next_seq += 1;
            let entry = LogEntry {
                seq,
                site: call.site.clone(),
                connector: call.connector.clone(),
                method: call.method.clone(),
                args: call.args.clone(),
                result: None,
                state,
                requires_approval: approval,
                ephemeral,
            };
            pass.log.push(entry.clone());
            pass.used.insert(seq);
            if ephemeral {
                pass.unsaved.insert(seq);
            }
            entry
        };
        if !ephemeral {
            if let Err(e) = self.journal().log_call(&self.execution_id, &entry) {
                self.warn(e);
            }
        }
        entry.seq
    }

    async fn codemode_call(&self, call: &CallRequest, args_key: &str) -> Result<Value, CallError> {
        let text_arg = |key: &str| match &call.args {
            Value::String(s) => s.clone(),
            v => v.get(key).and_then(Value::as_str).unwrap_or("").to_owned(),
        };
        let connectors: Vec<&dyn Connector> = self.connectors.iter().map(|c| c.as_ref()).collect();
        match call.method.as_str() {
            "search" => Ok(serde_json::to_value(search::search(&connectors, &text_arg("query")))
                .unwrap_or(Value::Null)),
            "describe" => describe(&connectors, &text_arg("target")).map_err(CallError::Failed),
            "checkSnippetInput" => {
                let name = text_arg("name");
                let snippet = self
                    .journal()
                    .snippets()
                    .unwrap_or_default()
                    .into_iter()
                    .find(|s| s.name == name);
                let schema = snippet.and_then(|s| s.input_schema);
                if let Some(schema) = schema {
                    let input = call.args.get("input").cloned().unwrap_or(Value::Null);
                    crate::tools::schema::InputValidator::cached(&schema)
                        .and_then(|v| v.validate(&input))
                        .map_err(|e| {
                            CallError::Failed(format!("codemode.run({name:?}): invalid input: {e}"))
                        })?;
                }
                Ok(Value::Null)
            }
            "step" => match self.find(call, args_key).map_err(|e| self.fail(e))? {
                Some(Matched::Serve(Ok(v))) => Ok(json!({"replayed": true, "value": v})),
                Some(Matched::Serve(Err(e))) => Err(CallError::Failed(e)),
                Some(Matched::Pause) => Err(CallError::Paused),
                Some(Matched::Run(seq)) => {
                    self.set_state(seq, CallState::Executing, None);
                    Ok(json!({"replayed": false, "seq": seq}))
                }
                None => {
                    let seq = self.new_entry(call, CallState::Executing, false, false);
                    Ok(json!({"replayed": false, "seq": seq}))
                }
            },
            "stepDone" => {
                let seq = call.args.get("seq").and_then(Value::as_i64).unwrap_or(-1);
                let value = call.args.get("value").cloned().unwrap_or(Value::Null);
                let bytes = value.to_string().len();
                if bytes > MAX_DURABLE_VALUE_BYTES {
                    return Err(self.fail(too_large("A codemode.step result", bytes)));
                }
                self.set_state(seq, CallState::Applied, Some(&value));
                Ok(Value::Null)
            }
            other => Err(CallError::Failed(format!("codemode.{other} is not a function"))),
        }
    }
}

/// `codemode.describe(target)`: a namespace's declarations or one method's.
fn describe(connectors: &[&dyn Connector], target: &str) -> Result<Value, String> {
    let (ns, method) = match target.split_once('.') {
        Some((n, m)) => (n, Some(m)),
        None => (target, None),
    };
    let Some(c) = connectors.iter().find(|c| c.name() == ns) else {
        let names: Vec<&str> = connectors.iter().map(|c| c.name()).collect();
        return Err(format!("Unknown namespace {ns:?}; the namespaces are {}", names.join(", ")));
    };
    match method {
        None => Ok(json!({
            "path": ns, "kind": "namespace", "description": c.hint(),
            "types": types::namespace_declaration(*c),
        })),
        Some(m) => {
            let Some(spec) = c.methods().iter().find(|s| s.name == m) else {
                return Err(format!(
                    "{ns}.{m} does not exist; codemode.describe({ns:?}) lists its methods"
                ));
            };
            Ok(json!({
                "path": target, "kind": "method", "description": spec.description,
                "requiresApproval": c.may_need_approval(m),
                "types": types::method_declaration(spec),
            }))
        }
    }
}

#[async_trait(?Send)]
impl Dispatcher for PassDispatcher {
    async fn call(&self, call: CallRequest) -> Result<Value, CallError> {
        if self.pass.borrow().paused {
            return self.after_pause(&call);
        }
        let args_key = stable_stringify(&call.args);
        if args_key.len() > MAX_DURABLE_VALUE_BYTES {
            return Err(self.fail(too_large(
                &format!("The argument of {}.{}", call.connector, call.method),
                args_key.len(),
            )));
        }
        self.pass.borrow_mut().calls += 1;
        if call.connector == "codemode" {
            return self.codemode_call(&call, &args_key).await;
        }
        let Some(conn) = self.connectors.iter().find(|c| c.name() == call.connector).cloned()
        else {
            return Err(CallError::Failed(format!("{} is not defined", call.connector)));
        };
        let kind = conn
            .methods()
            .iter()
            .find(|m| m.name == call.method)
            .map(|m| m.kind)
            .unwrap_or(CallKind::Write);
        self.pass.borrow_mut().in_flight += 1;
        let out = match self.find(&call, &args_key) {
            Err(divergence) => Err(self.fail(divergence)),
            Ok(Some(Matched::Serve(r))) => r.map_err(CallError::Failed),
            Ok(Some(Matched::Pause)) => {
                self.pass.borrow_mut().paused = true;
                Err(CallError::Paused)
            }
            Ok(Some(Matched::Run(seq))) => self.run_call(&conn, &call, seq, false).await,
            Ok(None) => {
                // Bad input fails now, without a journal entry: it never waits for a human.
                if let Err(e) = conn.validate(&call.method, &call.args) {
                    self.pass.borrow_mut().in_flight -= 1;
                    return Err(CallError::Failed(e.to_string()));
                }
                let approval = conn.needs_approval(&call.method, &call.args);
                if approval {
                    self.new_entry(&call, CallState::Pending, true, false);
                    self.pass.borrow_mut().paused = true;
                    Err(CallError::Paused)
                } else {
                    let seq =
                        self.new_entry(&call, CallState::Executing, false, kind == CallKind::Read);
                    self.run_call(&conn, &call, seq, true).await
                }
            }
        };
        self.pass.borrow_mut().in_flight -= 1;
        out
    }
}

impl PassDispatcher {
    /// Once a pass is paused nothing more runs; a further call that needs approval is still
    /// logged as pending, so the human sees every call waiting in parallel.
    fn after_pause(&self, call: &CallRequest) -> Result<Value, CallError> {
        let conn = self.connectors.iter().find(|c| c.name() == call.connector);
        if let Some(conn) = conn {
            let args_key = stable_stringify(&call.args);
            let known = matches!(self.find(call, &args_key), Ok(Some(_)));
            let valid = conn.validate(&call.method, &call.args).is_ok();
            if !known && valid && conn.needs_approval(&call.method, &call.args) {
                self.new_entry(call, CallState::Pending, true, false);
            }
        }
        Err(CallError::Paused)
    }
}

/// Everything the model's output is built from.
struct PassOutcome {
    status: ExecStatus,
    result: Option<Value>,
    error: Option<String>,
    logs: Vec<String>,
    /// The execution's journal has calls (from this pass or an earlier one): the output's
    /// summary reads them; without any it reads nothing.
    calls: bool,
}

/// Rewrites the sandbox's load error (`… at user.js:L:C`) to the model's own line numbers.
fn syntax_message(raw: &str, shape: CodeShape) -> String {
    let first = raw
        .lines()
        .map(str::trim)
        .find(|l| l.contains("SyntaxError"))
        .unwrap_or(raw)
        .trim_start_matches("Uncaught ")
        .to_owned();
    let offset = 1 + usize::from(shape == CodeShape::Function);
    let at = raw.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("at user.js:")?;
        let (line, col) = rest.split_once(':')?;
        Some((line.parse::<usize>().ok()?, col.trim().parse::<usize>().ok()?))
    });
    match at {
        Some((line, col)) => {
            format!("{first} (at line {}, column {col})", line.saturating_sub(offset).max(1))
        }
        None => first,
    }
}

/// What a pass came to, once the sandbox returned (or failed) and its calls settled: the reads
/// are written to the journal here.
#[inline(never)]
fn conclude(
    dispatcher: &PassDispatcher,
    result: Result<super::sandbox::SandboxOutcome, SandboxError>,
    shape: CodeShape,
) -> PassOutcome {
    dispatcher.flush_reads();
    let pass = dispatcher.pass.borrow();
    let (logs, result) = match result {
        Ok(o) => (o.logs, Ok(o.result)),
        Err(e) => (Vec::new(), Err(e)),
    };
    let calls = !pass.log.is_empty();
    let error = |message: String| PassOutcome {
        status: ExecStatus::Error,
        result: None,
        error: Some(message),
        logs: logs.clone(),
        calls,
    };
    if let Some(fatal) = &pass.fatal {
        return error(fatal.clone());
    }
    if pass.paused {
        return PassOutcome { status: ExecStatus::Paused, result: None, error: None, logs, calls };
    }
    match result {
        Ok(Ok(value)) => {
            let bytes = value.to_string().len();
            if bytes > MAX_DURABLE_VALUE_BYTES {
                return error(too_large("The result", bytes));
            }
            PassOutcome {
                status: ExecStatus::Completed,
                result: Some(value),
                error: None,
                logs,
                calls,
            }
        }
        Ok(Err(message)) => error(message),
        Err(SandboxError::Syntax(raw)) => error(syntax_message(&raw, shape)),
        Err(e) => error(e.to_string()),
    }
}

impl CodeMode {
    /// The runtime over `sql` (its tables are created here) running code in `sandbox`.
    pub fn new(
        sql: Rc<dyn Sql>,
        clock: Rc<dyn Clock>,
        sandbox: Rc<dyn Sandbox>,
        options: ExecuteOptions,
    ) -> Result<Rc<Self>, StoreError> {
        Journal::create_tables(sql.as_ref())?;
        let slots = Slots::new(options.max_in_flight);
        Ok(Rc::new(Self { sql, clock, sandbox, options, slots }))
    }

    /// The options in force.
    pub fn options(&self) -> &ExecuteOptions {
        &self.options
    }

    fn journal(&self) -> Journal<'_> {
        Journal::new(self.sql.as_ref())
    }

    fn now(&self) -> f64 {
        self.clock.now_ms()
    }

    /// Runs new code (the `execute` tool). Never fails: problems are `status:"error"` outputs.
    pub async fn execute(
        self: &Rc<Self>,
        code: &str,
        tool_call_id: Option<&str>,
        connectors: &[Rc<dyn Connector>],
    ) -> Value {
        match self.begin(code, tool_call_id) {
            Ok(id) => self.run_pass(&id, code, connectors, true).await,
            Err(output) => output,
        }
    }

    /// Starts execution of `code` in the journal: its id, or the error output when it cannot.
    #[inline(never)]
    fn begin(&self, code: &str, tool_call_id: Option<&str>) -> Result<String, Value> {
        let id = format!("exec_{}", random_id(self.clock.as_ref(), 16));
        if code.len() > MAX_CODE_BYTES {
            return Err(json!({"status": "error", "executionId": id, "error": format!(
                "The code is {} bytes, over the 1 MB limit; nothing ran. Keep data in workspace files and read it with state.readFile.",
                code.len())}));
        }
        if let Err(e) = self.journal().start(&id, code, tool_call_id, self.now()) {
            return Err(
                json!({"status": "error", "executionId": id, "error": format!("The execution journal failed: {e}")}),
            );
        }
        Ok(id)
    }

    /// One pass of execution `id`, settled in the journal; returns the model's output.
    /// `fresh`: the execution was just started, so its journal has no calls yet.
    async fn run_pass(
        self: &Rc<Self>,
        id: &str,
        code: &str,
        connectors: &[Rc<dyn Connector>],
        fresh: bool,
    ) -> Value {
        let _slot = self.slots.acquire().await;
        let outcome = self.pass(id, code, connectors, fresh).await;
        self.settle(id, &outcome)
    }

    /// Records a pass's outcome in the journal and returns the model's output.
    #[inline(never)]
    fn settle(&self, id: &str, outcome: &PassOutcome) -> Value {
        let journal = self.journal();
        if let Err(e) = journal.settle(
            id,
            outcome.status,
            outcome.result.as_ref(),
            outcome.error.as_deref(),
            &outcome.logs,
            self.now(),
        ) {
            crate::platform::log(&format!("think-rs: settling execution {id} failed: {e}"));
        }
        if outcome.status.is_terminal() {
            if let Err(e) = journal.prune(self.options.retention) {
                crate::platform::log(&format!("think-rs: pruning executions failed: {e}"));
            }
        }
        self.output(id, outcome)
    }

    async fn pass(
        self: &Rc<Self>,
        id: &str,
        code: &str,
        connectors: &[Rc<dyn Connector>],
        fresh: bool,
    ) -> PassOutcome {
        let (dispatcher, request, shape) = self.prepare(id, code, connectors, fresh);
        let limit = self.options.timeout_ms + TIMEOUT_MARGIN_MS;
        let run = self.sandbox.run(request, dispatcher.clone()).fuse();
        let timer = self.clock.sleep(limit).fuse();
        futures::pin_mut!(run, timer);
        let result = futures::select! {
            r = run => r,
            _ = timer => Err(SandboxError::Timeout(self.options.timeout_ms)),
        };
        // Calls the code started but did not wait for still finish and record their results.
        let mut waited = 0;
        while dispatcher.pass.borrow().in_flight > 0 && waited < limit {
            self.clock.sleep(5).await;
            waited += 5;
        }
        conclude(&dispatcher, result, shape)
    }

    /// A pass's dispatcher and the sandbox's request, and the shape of the code.
    #[inline(never)]
    fn prepare(
        self: &Rc<Self>,
        id: &str,
        code: &str,
        connectors: &[Rc<dyn Connector>],
        fresh: bool,
    ) -> (Rc<PassDispatcher>, SandboxRequest, CodeShape) {
        let normalized = normalize_code(code);
        let log = if fresh { Vec::new() } else { self.journal().log(id).unwrap_or_default() };
        let next_seq = log.iter().map(|e| e.seq + 1).max().unwrap_or(0);
        let dispatcher = Rc::new(PassDispatcher {
            rt: self.clone(),
            execution_id: id.to_owned(),
            connectors: connectors.to_vec(),
            pass: RefCell::new(Pass { log, next_seq, ..Default::default() }),
        });
        let mut namespaces: Vec<Namespace> = connectors
            .iter()
            .map(|c| Namespace {
                name: c.name().to_owned(),
                methods: c.methods().iter().map(|m| m.name.clone()).collect(),
            })
            .collect();
        namespaces.push(Namespace {
            name: "codemode".into(),
            methods: vec!["search".into(), "describe".into()],
        });
        let snippets = self
            .journal()
            .snippets()
            .unwrap_or_default()
            .into_iter()
            .map(|s| SnippetModule {
                name: s.name,
                body: guard_loops(&normalize_code(&s.code).body),
            })
            .collect();
        let request = SandboxRequest {
            id: format!("{id}_{}", random_id(self.clock.as_ref(), 6)),
            body: guard_loops(&normalized.body),
            namespaces,
            snippets,
            modules: Vec::new(),
            timeout_ms: self.options.timeout_ms,
            reuse: None,
            input: Value::Null,
            output: Default::default(),
        };
        (dispatcher, request, normalized.shape)
    }

    fn output(&self, id: &str, o: &PassOutcome) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("status".into(), o.status.as_str().into());
        out.insert("executionId".into(), id.into());
        match o.status {
            ExecStatus::Completed => {
                let result = o.result.clone().unwrap_or(Value::Null);
                let text = result.to_string();
                let shown = if text.chars().count() > MAX_RESULT_CHARS {
                    Value::String(cut(&text, MAX_RESULT_CHARS))
                } else {
                    result
                };
                out.insert("result".into(), shown);
            }
            ExecStatus::Paused => {
                let pending: Vec<Value> = self
                    .journal()
                    .pending(Some(id))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(eid, e)| pending_json(&eid, &e, Some(PENDING_ARGS_MAX_CHARS)))
                    .collect();
                out.insert("pending".into(), Value::Array(pending));
            }
            _ => {
                out.insert("error".into(), o.error.clone().unwrap_or_default().into());
            }
        }
        if !o.logs.is_empty() {
            out.insert("logs".into(), json!(o.logs));
        }
        if let Some(log) = o.calls.then(|| self.journal().log(id).ok()).flatten() {
            if !log.is_empty() {
                let last: Vec<String> = log
                    .iter()
                    .rev()
                    .take(3)
                    .rev()
                    .map(|e| {
                        format!(
                            "{}.{}({}) {}",
                            e.connector,
                            e.method,
                            cut(&e.args.to_string(), 120),
                            e.state.as_str()
                        )
                    })
                    .collect();
                out.insert("calls".into(), json!({"count": log.len(), "last": last}));
            }
        }
        Value::Object(out)
    }

    /// `pendingExecutions(executionId?)`: the calls waiting for approval, with full args.
    pub fn pending(&self, execution_id: Option<&str>) -> Result<Value, CodeModeError> {
        let items = self.journal().pending(execution_id)?;
        Ok(Value::Array(items.iter().map(|(id, e)| pending_json(id, e, None)).collect()))
    }

    /// `pendingApprovals(executionId?)`: the same, as approval descriptors.
    pub fn pending_approvals(&self, execution_id: Option<&str>) -> Result<Value, CodeModeError> {
        let items = self.journal().pending(execution_id)?;
        Ok(Value::Array(
            items
                .iter()
                .map(|(id, e)| {
                    json!({"executionId": id, "source": "codemode", "descriptor": pending_json(id, e, None)})
                })
                .collect(),
        ))
    }

    /// The execution row, for callers that need its tool call id.
    pub fn execution(&self, id: &str) -> Result<Option<ExecutionRow>, CodeModeError> {
        Ok(self.journal().execution(id)?)
    }

    /// `approveExecution`: approves every pending call of a paused execution and runs the
    /// code again from the start; returns the new output.
    pub async fn approve(
        self: &Rc<Self>,
        id: &str,
        connectors: &[Rc<dyn Connector>],
    ) -> Result<Value, CodeModeError> {
        let row = self.paused_row(id)?;
        let journal = self.journal();
        journal.move_calls(id, CallState::Pending, CallState::Approved)?;
        if !journal.resume(id, self.now())? {
            return Err(CodeModeError::NotPaused(id.to_owned(), "running"));
        }
        Ok(self.run_pass(id, &row.code, connectors, false).await)
    }

    /// `rejectExecution`: settles a paused execution as rejected.
    pub fn reject(&self, id: &str, reason: Option<&str>) -> Result<Value, CodeModeError> {
        self.paused_row(id)?;
        let reason = reason.unwrap_or("Rejected by user");
        let journal = self.journal();
        journal.move_calls(id, CallState::Pending, CallState::Rejected)?;
        journal.settle(id, ExecStatus::Rejected, None, Some(reason), &[], self.now())?;
        journal.prune(self.options.retention)?;
        Ok(json!({"status": "rejected", "executionId": id, "reason": reason}))
    }

    fn paused_row(&self, id: &str) -> Result<ExecutionRow, CodeModeError> {
        let row =
            self.journal().execution(id)?.ok_or_else(|| CodeModeError::NotFound(id.to_owned()))?;
        if row.status != ExecStatus::Paused {
            return Err(CodeModeError::NotPaused(id.to_owned(), row.status.as_str()));
        }
        Ok(row)
    }

    /// `executions(limit?)`: the newest executions, newest first, with their calls.
    pub fn executions(&self, limit: Option<usize>) -> Result<Value, CodeModeError> {
        let journal = self.journal();
        let rows = journal.executions(limit.unwrap_or(20).min(200))?;
        let mut out = Vec::new();
        for row in rows {
            let calls = journal.log(&row.id)?;
            let mut v = serde_json::to_value(&row).unwrap_or(Value::Null);
            v["calls"] = serde_json::to_value(&calls).unwrap_or(Value::Null);
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    /// `rollbackExecution(id)`: asks each connector, newest call first, to undo the execution's
    /// applied calls; the execution becomes `rolled_back` once one call was undone. Failed
    /// undos are reported together after the others ran, as Think does.
    pub async fn rollback(
        &self,
        id: &str,
        connectors: &[Rc<dyn Connector>],
    ) -> Result<Value, CodeModeError> {
        let journal = self.journal();
        let row = journal.execution(id)?.ok_or_else(|| CodeModeError::NotFound(id.to_owned()))?;
        if !row.status.is_terminal() {
            return Err(CodeModeError::Invalid(format!(
                "Execution {id} is {}; only a settled execution can be rolled back",
                row.status.as_str()
            )));
        }
        let mut reverted = 0usize;
        let mut failures = Vec::new();
        let applied = journal
            .log(id)?
            .into_iter()
            .rev()
            .filter(|e| e.state == CallState::Applied && e.connector != "codemode");
        for entry in applied {
            let Some(connector) = connectors.iter().find(|c| c.name() == entry.connector) else {
                continue;
            };
            let ctx = CallContext { execution_id: id.to_owned(), seq: entry.seq };
            match connector.revert(&entry.method, &entry.args, entry.result.as_ref(), &ctx).await {
                Ok(true) => {
                    journal.mark_reverted(id, entry.seq)?;
                    reverted += 1;
                }
                Ok(false) => {}
                Err(e) => failures.push(format!("{}.{}: {e}", entry.connector, entry.method)),
            }
        }
        if reverted > 0 {
            journal.mark_rolled_back(id, self.now())?;
        }
        if !failures.is_empty() {
            return Err(CodeModeError::Invalid(format!(
                "Rollback reverted {reverted} action(s) but {} failed: {}",
                failures.len(),
                failures.join("; ")
            )));
        }
        let status = if reverted > 0 { ExecStatus::RolledBack } else { row.status };
        Ok(json!({"executionId": id, "reverted": reverted, "status": status.as_str()}))
    }

    /// `deleteExecution(id)`: drops an execution and its log; true if it existed.
    pub fn delete_execution(&self, id: &str) -> Result<Value, CodeModeError> {
        Ok(Value::Bool(self.journal().delete(id)?))
    }

    /// `pruneExecutions(keep = 50)`: drops settled executions beyond the newest `keep` (paused
    /// and running ones stay); returns how many went.
    pub fn prune_executions(&self, keep: Option<usize>) -> Result<Value, CodeModeError> {
        Ok(json!(self.journal().prune(keep.unwrap_or(50))?))
    }

    /// `saveSnippet(name, {executionId, description?, inputSchema?})`: keeps an execution's
    /// code under a name, for `codemode.run(name, input)`.
    pub fn save_snippet(&self, name: &str, options: &Value) -> Result<Value, CodeModeError> {
        let valid = !name.is_empty()
            && name.len() <= 100
            && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if !valid {
            return Err(CodeModeError::Invalid(format!(
                "Invalid snippet name {name:?} (letters, digits, _ - . only)"
            )));
        }
        let exec_id = options.get("executionId").and_then(Value::as_str).ok_or_else(|| {
            CodeModeError::Invalid(
                "saveSnippet(name, {executionId}): executionId is required".into(),
            )
        })?;
        let row = self
            .journal()
            .execution(exec_id)?
            .ok_or_else(|| CodeModeError::NotFound(exec_id.to_owned()))?;
        let snippet = Snippet {
            name: name.to_owned(),
            description: options.get("description").and_then(Value::as_str).map(str::to_owned),
            code: row.code,
            input_schema: options.get("inputSchema").cloned(),
            saved_at: self.now() as i64,
        };
        self.journal().save_snippet(&snippet)?;
        Ok(serde_json::to_value(&snippet).unwrap_or(Value::Null))
    }

    /// `snippets()`.
    pub fn snippets(&self) -> Result<Value, CodeModeError> {
        Ok(serde_json::to_value(self.journal().snippets()?).unwrap_or(Value::Null))
    }

    /// `deleteSnippet(name)`: true if it existed.
    pub fn delete_snippet(&self, name: &str) -> Result<Value, CodeModeError> {
        Ok(Value::Bool(self.journal().delete_snippet(name)?))
    }

    /// After a restart: executions still marked running died with the process.
    pub fn recover(&self) -> Result<(), StoreError> {
        let journal = self.journal();
        for row in journal.with_status(ExecStatus::Running)? {
            journal.settle(
                &row.id,
                ExecStatus::Error,
                None,
                Some("The execution was interrupted by a restart."),
                &row.logs,
                self.now(),
            )?;
        }
        journal.prune(self.options.retention).map(|_| ())
    }

    /// When the oldest paused execution expires (ms since the epoch), if any is paused.
    pub fn next_expiry(&self) -> Result<Option<f64>, StoreError> {
        let paused = self.journal().with_status(ExecStatus::Paused)?;
        Ok(paused
            .iter()
            .map(|r| r.updated_at as f64 + self.options.paused_max_age_ms + 1.0)
            .reduce(f64::min))
    }

    /// The alarm's sweep: paused executions past their age are rejected, and running ones
    /// far past their time limit are errors.
    /// Returns the outputs of the executions it expired, by id, for the transcript.
    pub fn sweep(&self) -> Result<Vec<(String, Value)>, StoreError> {
        let journal = self.journal();
        let now = self.now();
        let mut expired = Vec::new();
        for row in journal.with_status(ExecStatus::Paused)? {
            if (row.updated_at as f64) < now - self.options.paused_max_age_ms {
                journal.move_calls(&row.id, CallState::Pending, CallState::Rejected)?;
                journal.settle(
                    &row.id,
                    ExecStatus::Rejected,
                    None,
                    Some(EXPIRED),
                    &row.logs,
                    now,
                )?;
                let output =
                    json!({"status": "rejected", "executionId": row.id, "reason": EXPIRED});
                expired.push((row.id, output));
            }
        }
        let stale = (self.options.timeout_ms + TIMEOUT_MARGIN_MS) as f64 * 2.0;
        for row in journal.with_status(ExecStatus::Running)? {
            if (row.updated_at as f64) < now - stale {
                journal.settle(
                    &row.id,
                    ExecStatus::Error,
                    None,
                    Some("The execution stopped responding."),
                    &row.logs,
                    now,
                )?;
            }
        }
        journal.prune(self.options.retention)?;
        Ok(expired)
    }
}

fn pending_json(execution_id: &str, e: &LogEntry, max_args: Option<usize>) -> Value {
    let args = match max_args {
        Some(max) if e.args.to_string().chars().count() > max => {
            Value::String(cut(&e.args.to_string(), max))
        }
        _ => e.args.clone(),
    };
    json!({"executionId": execution_id, "seq": e.seq, "connector": e.connector, "method": e.method, "args": args})
}
