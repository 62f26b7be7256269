//! The multi-step loop of one turn: call the model, stream its text and tool calls as UI
//! message chunks, run the called tools (concurrently), feed the results back, and stop on a
//! text answer, a call that waits for a human, an abort, or the step limit.

use futures::future::LocalBoxFuture;
use futures::StreamExt;
use serde_json::{Map, Value};

use std::rc::Rc;

use async_trait::async_trait;

use super::abort::AbortSignal;
use crate::model::{
    FinishReason, Model, ModelError, ModelEvent, ModelMessage, ModelRequest, ModelToolCall,
    ToolArguments,
};
use crate::protocol::chunk;
use crate::tools::definition::ToolDefinition;
use crate::tools::schema::InputValidator;
use crate::tools::{ToolContext, ToolRef, ToolSet};

/// Receives every chunk the turn produces, in order.
pub trait ChunkSink {
    /// Takes one UIMessageChunk, in stream order.
    fn emit(&self, chunk: Value);

    /// Emits a chunk the caller keeps (one that holds a tool's input, which then runs):
    /// a sink that only reads chunks overrides it to spare the copy.
    fn emit_ref(&self, chunk: &Value) {
        self.emit(chunk.clone());
    }

    /// Emits a `tool-input-available` chunk whose `input` (null in `chunk`) is `arguments`,
    /// the model's text, which is exactly the input as serialized: a sink that writes chunks
    /// as text writes the text in place, and one that builds the answer may keep the shared
    /// text instead of a parsed copy. The engine parses the input again for the call, so a
    /// large one is not held parsed while the chunk is written.
    fn emit_input_available(&self, chunk: &Value, arguments: &ToolArguments) {
        let mut chunk = chunk.clone();
        chunk["input"] = arguments.to_value();
        self.emit(chunk);
    }
}

/// Decides whether a call needs a human's approval before it runs (beyond the tool's own rule).
pub trait ApprovalCheck {
    /// Whether this call must wait for a human before it runs.
    fn needs_approval(&self, tool_name: &str, input: &Value) -> bool;
}

impl<F: Fn(&str, &Value) -> bool> ApprovalCheck for F {
    fn needs_approval(&self, tool_name: &str, input: &Value) -> bool {
        self(tool_name, input)
    }
}

/// Everything a turn needs besides the model.
pub struct TurnPlan {
    /// The system prompt.
    pub system: String,
    /// The history up to the turn's message.
    pub messages: Vec<ModelMessage>,
    /// The tools the model may call.
    pub tools: ToolSet,
    /// How many model calls the turn may make.
    pub max_steps: usize,
    /// The `tool_choice` sent to the model, if any.
    pub tool_choice: Option<String>,
    /// Makes approval request ids; the glue supplies random ones.
    pub new_id: Box<dyn Fn() -> String>,
    /// The session's part in each model call (context blocks, compaction), if any.
    pub context: Option<Rc<dyn StepContext>>,
    /// The time in ms since the epoch, for the waits a failed answer asks for; `None` reads
    /// them as 0.
    pub now: Option<Box<dyn Fn() -> f64>>,
    /// Awaited right after each tool output is emitted, and after a step's tools ran, before
    /// the next model call is built. The Worker yields to its event loop here: the writes so
    /// far commit and the output gate lets the output go to the tabs, instead of holding it
    /// while the rest of the step runs (the other calls, the step's end, the next request
    /// built), all of which would commit with it.
    pub yield_now: Option<Rc<dyn Fn() -> LocalBoxFuture<'static, ()>>>,
    /// Runs each tool call as a task of its own, which emits the call's output and yields
    /// before the turn resumes: when the call's I/O answers (a sandbox isolate's reply), the
    /// platform resumes that task alone, so the output leaves without the turn's own code
    /// running first. `None` runs the calls inside the turn.
    pub spawn_call: Option<Rc<dyn Fn(LocalBoxFuture<'static, ()>)>>,
}

impl TurnPlan {
    fn now_ms(&self) -> f64 {
        self.now.as_ref().map_or(0.0, |now| now())
    }
}

/// What the session adds to each model call of a turn.
#[async_trait(?Send)]
pub trait StepContext {
    /// The system prompt of this call: `base` and the context blocks as they are now, so
    /// a write shows from the next call on.
    fn system(&self, base: &str) -> String;
    /// The history this call sends when it is not `messages` itself: `None` while they fit
    /// the model's context (the turn then lends its history to the request, not a copy: it
    /// can hold a large tool argument), else a compacted form (the turn keeps the full
    /// history for its next calls).
    async fn prepare(
        &self,
        system: &str,
        tools: &[ToolDefinition],
        messages: &[ModelMessage],
    ) -> Option<Vec<ModelMessage>>;
    /// After a failed call: the shortened history to retry with when `error` says the
    /// context is too long, or `None` to fail the turn. The turn retries at most once.
    async fn on_model_error(
        &self,
        error: &ModelError,
        system: &str,
        messages: &[ModelMessage],
    ) -> Option<Vec<ModelMessage>>;
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    /// The model answered without further tool calls (or hit the step limit).
    Finished(FinishReason),
    /// A call waits for a human: an approval or a client-side tool.
    AwaitingHuman,
    /// The turn was cancelled.
    Aborted,
    /// The model or the turn failed with this error.
    Failed(String),
    /// The model call failed with a transient error (see [`ModelError::is_transient`]): the
    /// caller may continue the turn later instead of failing it.
    Interrupted {
        /// The error, as [`TurnOutcome::Failed`] would carry it.
        error: String,
        /// The wait the failed answer asked for, in ms.
        retry_after_ms: Option<u64>,
    },
}

impl TurnOutcome {
    /// How a turn ends on model error `e`: interrupted when another call may succeed.
    fn model_failed(e: &ModelError, now_ms: f64) -> Self {
        if e.is_transient() {
            TurnOutcome::Interrupted {
                error: e.to_string(),
                retry_after_ms: e.retry_after_ms(now_ms),
            }
        } else {
            TurnOutcome::Failed(e.to_string())
        }
    }
}

/// A tool call as it streams in.
struct Call {
    id: String,
    name: String,
    /// The argument text as it streamed in, until it is parsed. Kept as its deltas and
    /// joined once at its size: a text grown by doubling leaves every smaller size behind
    /// as a hole in wasm memory, and a model streams a large argument in many small deltas.
    args: Vec<String>,
    /// The arguments for the history, once resolved: the model's own text, which parsed, so
    /// a large argument (a `write`'s content) is not written again for the history.
    history: Option<ToolArguments>,
}

/// Per-step streaming state: which text and reasoning parts are open.
#[derive(Default)]
struct StepState {
    text_id: Option<String>,
    reasoning_id: Option<String>,
    text: String,
    parts: usize,
}

impl StepState {
    fn close_text(&mut self, sink: &dyn ChunkSink) {
        if let Some(id) = self.text_id.take() {
            sink.emit(chunk::text_end(&id));
        }
    }
    fn close_reasoning(&mut self, sink: &dyn ChunkSink) {
        if let Some(id) = self.reasoning_id.take() {
            sink.emit(chunk::reasoning_end(&id));
        }
    }
}

/// Runs the turn to completion. Chunks from `start-step` to `finish-step` go to `sink`; the
/// caller emits `start`, `finish` and the error chunk, because it owns the message.
pub async fn run(
    model: &dyn Model,
    mut plan: TurnPlan,
    approval: &dyn ApprovalCheck,
    sink: Rc<dyn ChunkSink>,
    abort: &AbortSignal,
) -> TurnOutcome {
    let shared = sink;
    let sink: &dyn ChunkSink = &*shared;
    let definitions = plan.tools.definitions();
    let mut last_reason = FinishReason::Stop;
    let mut retried = false;
    for step in 0..plan.max_steps.max(1) {
        if abort.is_aborted() {
            return TurnOutcome::Aborted;
        }
        sink.emit(chunk::start_step());
        let system = match &plan.context {
            Some(c) => c.system(&plan.system),
            None => plan.system.clone(),
        };
        let compacted = match &plan.context {
            Some(c) => match abort.run(c.prepare(&system, &definitions, &plan.messages)).await {
                Some(m) => m,
                None => return TurnOutcome::Aborted,
            },
            None => None,
        };
        // Unless compacted, the history is lent to the request, not copied: it can hold a
        // large tool argument. It is given back once the stream has started.
        let mut lent = compacted.is_none();
        let messages = compacted.unwrap_or_else(|| std::mem::take(&mut plan.messages));
        let mut request = ModelRequest {
            system,
            messages,
            tools: definitions.clone(),
            tool_choice: plan.tool_choice.clone(),
            ..Default::default()
        };
        let mut stream = loop {
            let e = match abort.run(model.stream(&request)).await {
                None => return TurnOutcome::Aborted,
                Some(Ok(s)) => break s,
                Some(Err(e)) => e,
            };
            let shorter = match (&plan.context, retried) {
                (Some(c), false) => c.on_model_error(&e, &request.system, &request.messages).await,
                _ => None,
            };
            let Some(messages) = shorter else {
                return TurnOutcome::model_failed(&e, plan.now_ms());
            };
            retried = true;
            // The shortened history replaces the turn's: it is lent like the full one.
            request.messages = messages;
            lent = true;
        };
        if lent {
            plan.messages = std::mem::take(&mut request.messages);
        }
        let mut st = StepState::default();
        let mut calls: Vec<(usize, Call)> = Vec::new();
        let mut reason = None;
        loop {
            let event = match abort.run(stream.next()).await {
                None => {
                    st.close_text(sink);
                    st.close_reasoning(sink);
                    return TurnOutcome::Aborted;
                }
                Some(None) => break,
                Some(Some(Err(e))) => {
                    st.close_text(sink);
                    st.close_reasoning(sink);
                    return TurnOutcome::model_failed(&e, plan.now_ms());
                }
                Some(Some(Ok(ev))) => ev,
            };
            match event {
                ModelEvent::TextDelta(delta) => {
                    st.close_reasoning(sink);
                    let id = match &st.text_id {
                        Some(id) => id.clone(),
                        None => {
                            let id = format!("txt-{step}-{}", st.parts);
                            st.parts += 1;
                            sink.emit(chunk::text_start(&id));
                            st.text_id = Some(id.clone());
                            id
                        }
                    };
                    st.text.push_str(&delta);
                    sink.emit(chunk::text_delta(&id, &delta));
                }
                ModelEvent::ReasoningDelta(delta) => {
                    st.close_text(sink);
                    let id = match &st.reasoning_id {
                        Some(id) => id.clone(),
                        None => {
                            let id = format!("rsn-{step}-{}", st.parts);
                            st.parts += 1;
                            sink.emit(chunk::reasoning_start(&id));
                            st.reasoning_id = Some(id.clone());
                            id
                        }
                    };
                    sink.emit(chunk::reasoning_delta(&id, &delta));
                }
                ModelEvent::ToolCallStart { index, id, name } => {
                    st.close_text(sink);
                    st.close_reasoning(sink);
                    sink.emit(chunk::tool_input_start(&id, &name));
                    calls.push((index, Call { id, name, args: Vec::new(), history: None }));
                }
                ModelEvent::ToolCallDelta { index, arguments } => {
                    if let Some((_, call)) = calls.iter_mut().find(|(i, _)| *i == index) {
                        // The text travels in the chunk and is taken back: not copied.
                        let mut delta = chunk::tool_input_delta(&call.id, "");
                        delta["inputTextDelta"] = Value::String(arguments);
                        sink.emit_ref(&delta);
                        let arguments = match delta["inputTextDelta"].take() {
                            Value::String(s) => s,
                            _ => String::new(),
                        };
                        push_delta(&mut call.args, arguments);
                    }
                }
                ModelEvent::Finish { reason: r, .. } => reason = Some(r),
            }
        }
        st.close_text(sink);
        st.close_reasoning(sink);
        last_reason = reason.unwrap_or(if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });

        let mut calls: Vec<Call> = calls.into_iter().map(|(_, c)| c).collect();
        let resolved = resolve_calls(&mut calls, &plan, approval, sink);
        let waiting = resolved.iter().any(|r| matches!(r, Resolved::Waiting));
        let results = execute(&calls, resolved, &plan, &shared, abort).await;

        plan.messages.push(ModelMessage::Assistant {
            content: st.text,
            tool_calls: calls
                .iter_mut()
                .zip(&results)
                .filter(|(_, r)| r.is_some())
                .map(|(c, _)| ModelToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.history.take().unwrap_or_else(ToolArguments::empty),
                })
                .collect(),
        });
        for (c, r) in calls.iter().zip(results) {
            if let Some((content, images)) = r {
                plan.messages.push(ModelMessage::Tool {
                    tool_call_id: c.id.clone(),
                    tool_name: c.name.clone(),
                    content,
                    images,
                });
            }
        }
        super::images::bound_turn_images(&mut plan.messages);
        sink.emit(chunk::finish_step());
        if abort.is_aborted() {
            return TurnOutcome::Aborted;
        }
        if waiting {
            return TurnOutcome::AwaitingHuman;
        }
        if calls.is_empty() {
            return TurnOutcome::Finished(last_reason);
        }
        if let Some(pause) = &plan.yield_now {
            pause().await;
        }
    }
    TurnOutcome::Finished(last_reason)
}

/// What happens to one call of a step.
enum Resolved {
    /// Run it with this (validated) input.
    Run(ToolRef, Value),
    /// Already settled with this text for the model (bad input, unknown tool).
    Settled(String),
    /// Waits for a human: an approval or a client-side execution.
    Waiting,
}

/// Argument text is gathered in pieces of about this size (small deltas share one).
const ARGS_PIECE_BYTES: usize = 64 * 1024;

/// Adds a delta to a call's argument pieces: a large one as its own piece, a small one
/// into the last piece while it has room.
fn push_delta(pieces: &mut Vec<String>, delta: String) {
    match pieces.last_mut() {
        Some(last) if last.len() + delta.len() <= ARGS_PIECE_BYTES => last.push_str(&delta),
        _ if delta.len() >= ARGS_PIECE_BYTES => pieces.push(delta),
        _ => {
            let mut piece = String::with_capacity(ARGS_PIECE_BYTES);
            piece.push_str(&delta);
            pieces.push(piece);
        }
    }
}

/// A call's argument deltas as one text, in a buffer of its exact size.
fn joined(deltas: &mut Vec<String>) -> String {
    if deltas.len() == 1 {
        return deltas.pop().unwrap_or_default();
    }
    // The first delta grows to the whole text, in place when the memory after it is free.
    let total = deltas.iter().map(String::len).sum::<usize>();
    let mut pieces = deltas.drain(..);
    let mut text = pieces.next().unwrap_or_default();
    text.reserve_exact(total - text.len());
    for d in pieces {
        text.push_str(&d);
    }
    text
}

/// The history's arguments from the model's text, which parsed (blank text is `{}`).
fn history_arguments(args: String) -> ToolArguments {
    ToolArguments::from_text(args).unwrap_or_else(|_| ToolArguments::empty())
}

/// A call's arguments as JSON; empty arguments are an empty object.
fn parse_args(args: &str) -> Result<Value, serde_json::Error> {
    if args.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    // A large argument (a `write`'s content) is unescaped into a buffer of its final size.
    crate::protocol::json::from_str_exact(args)
}

fn resolve_calls(
    calls: &mut [Call],
    plan: &TurnPlan,
    approval: &dyn ApprovalCheck,
    sink: &dyn ChunkSink,
) -> Vec<Resolved> {
    calls
        .iter_mut()
        .map(|call| {
            let resolved = resolve_call(call, plan, approval, sink);
            call.args = Vec::new();
            resolved
        })
        .collect()
}

/// Decides one call, and leaves its arguments for the history (if they parse) in
/// `call.history`.
fn resolve_call(
    call: &mut Call,
    plan: &TurnPlan,
    approval: &dyn ApprovalCheck,
    sink: &dyn ChunkSink,
) -> Resolved {
    let input_error = |call: &Call, input: Value, text: String, dynamic: bool| {
        let mut c = chunk::tool_input_error(&call.id, &call.name, input, &text);
        if dynamic {
            c = chunk::with_field(c, "dynamic", Value::Bool(true));
        }
        sink.emit(c);
        Resolved::Settled(crate::tools::error_json(&text))
    };
    let Some(tool) = plan.tools.get(&call.name).cloned() else {
        let available: Vec<&str> = plan.tools.names().collect();
        let text = format!(
            "Model tried to call unavailable tool '{}'. Available tools: {}.",
            call.name,
            available.join(", ")
        );
        let args = joined(&mut call.args);
        let input = match parse_args(&args) {
            Ok(input) => {
                call.history = Some(history_arguments(args));
                input
            }
            Err(_) => Value::String(args),
        };
        return input_error(call, input, text, true);
    };
    let args = joined(&mut call.args);
    let parsed = if args.len() >= ANNOUNCE_FROM_TEXT_BYTES {
        parse_args_with_room(&args)
    } else {
        parse_args(&args)
    };
    let input = match parsed {
        Ok(v) => v,
        Err(e) => {
            let text = format!(
                "Invalid input for tool {}: the arguments are not valid JSON ({e}).",
                call.name
            );
            return input_error(call, Value::String(args), text, false);
        }
    };
    call.history = Some(history_arguments(args));
    let schema_check = InputValidator::cached(&tool.definition().input_schema)
        .map_err(|e| format!("Tool {} has an {e}", call.name))
        .and_then(|v| {
            v.validate(&input).map_err(|e| format!("Invalid input for tool {}: {e}", call.name))
        });
    if let Err(text) = schema_check {
        return input_error(call, input, text, false);
    }
    let input = announce_input(call, input, sink);
    if !tool.executes_on_server() {
        return Resolved::Waiting;
    }
    if tool.needs_approval(&input) || approval.needs_approval(&call.name, &input) {
        sink.emit(chunk::tool_approval_request(&(plan.new_id)(), &call.id));
        return Resolved::Waiting;
    }
    Resolved::Run(tool, input)
}

/// Arguments from this size on are announced from their text (see [`announce_input`]).
const ANNOUNCE_FROM_TEXT_BYTES: usize = 1 << 20;

/// Bytes of the announcing frame beyond the arguments' escaped text: its envelope, the
/// request id and the chunk's other fields.
const FRAME_ROOM_BYTES: usize = 1024;

/// [`parse_args`] for a large text, parsed from a copy with room for the frame that will
/// announce it: the input's largest string is unescaped in place in that copy, so once the
/// input is dropped (see [`announce_input`]) the frame, a little larger than the input (its
/// quotes and backslashes escaped once more), fits in its place instead of growing the
/// memory, which wasm never gives back. Same result and errors as [`parse_args`].
fn parse_args_with_room(args: &str) -> Result<Value, serde_json::Error> {
    let escapes = args.bytes().filter(|b| matches!(b, b'"' | b'\\')).count();
    let mut copy = String::with_capacity(args.len() + escapes + FRAME_ROOM_BYTES);
    copy.push_str(args);
    crate::protocol::json::from_string_exact(copy)
}

/// Emits `tool-input-available` for a call and returns its input for the run. A large
/// input that the model's text is exactly the serialization of is dropped and announced
/// from the text, then parsed again: the parsed input, the text and the chunk's frame are
/// never held at once. Otherwise the input travels in the chunk and is taken back: not
/// copied.
fn announce_input(call: &Call, input: Value, sink: &dyn ChunkSink) -> Value {
    if let Some(arguments) = call.history.as_ref().filter(|a| {
        a.text().len() >= ANNOUNCE_FROM_TEXT_BYTES
            && input.is_object()
            && crate::protocol::json::serializes_to(&input, a.text())
    }) {
        drop(input);
        let available = chunk::tool_input_available(&call.id, &call.name, Value::Null);
        sink.emit_input_available(&available, arguments);
        return parse_args(arguments.text()).unwrap_or_default();
    }
    let mut available = chunk::tool_input_available(&call.id, &call.name, input);
    sink.emit_ref(&available);
    available.get_mut("input").map(Value::take).unwrap_or_default()
}

/// Runs the resolved calls concurrently. Returns, per call, the text the model sees next and
/// the images the call handed over (`None` while a call waits for a human).
async fn execute(
    calls: &[Call],
    resolved: Vec<Resolved>,
    plan: &TurnPlan,
    sink: &Rc<dyn ChunkSink>,
    abort: &AbortSignal,
) -> Vec<Option<(String, Vec<crate::model::ImagePart>)>> {
    let runs = calls.iter().zip(resolved).map(|(call, r)| async move {
        let (tool, input) = match r {
            Resolved::Settled(text) => return Some((text, Vec::new())),
            Resolved::Waiting => return None,
            Resolved::Run(tool, input) => (tool, input),
        };
        let ctx = ToolContext { tool_call_id: call.id.clone(), tool_name: call.name.clone() };
        let run = run_call(tool, input, ctx, sink.clone(), abort.clone(), plan.yield_now.clone());
        let Some(spawn) = &plan.spawn_call else { return Some(run.await) };
        let (done, settled) = futures::channel::oneshot::channel();
        spawn(Box::pin(async move {
            let _ = done.send(run.await);
        }));
        Some(settled.await.unwrap_or_else(|_| {
            // The platform dropped the task before it ended: it emitted nothing more.
            let text = "The tool call was interrupted.";
            sink.emit(chunk::tool_output_error(&call.id, text));
            (crate::tools::thrown_error_json(text), Vec::new())
        }))
    });
    futures::future::join_all(runs).await
}

/// One call: runs the tool, emits its output and awaits `yield_now`, so that output leaves
/// before the rest of the step runs.
async fn run_call(
    tool: ToolRef,
    input: Value,
    ctx: ToolContext,
    sink: Rc<dyn ChunkSink>,
    abort: AbortSignal,
    yield_now: Option<Rc<dyn Fn() -> LocalBoxFuture<'static, ()>>>,
) -> (String, Vec<crate::model::ImagePart>) {
    let id = &ctx.tool_call_id;
    let settled = match abort.run(tool.execute(input, &ctx)).await {
        None => {
            let text = "The tool call was aborted.";
            sink.emit(chunk::tool_output_error(id, text));
            (crate::tools::thrown_error_json(text), Vec::new())
        }
        Some(Ok(output)) => {
            let text = tool.model_output(&output).to_text();
            sink.emit(chunk::tool_output_available(id, output));
            (text, tool.take_images(id))
        }
        Some(Err(e)) => {
            sink.emit(chunk::tool_output_error(id, &e.to_string()));
            (crate::tools::thrown_error_json(&e.to_string()), Vec::new())
        }
    };
    if let Some(pause) = yield_now {
        pause().await;
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::ScriptedModel;
    use crate::tools::{typed_tool, DynamicTool, Layer, ToolError};
    use serde_json::json;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Default)]
    struct Sink(RefCell<Vec<Value>>);
    impl ChunkSink for Sink {
        fn emit(&self, chunk: Value) {
            self.0.borrow_mut().push(chunk);
        }
    }
    impl Sink {
        fn types(&self) -> Vec<String> {
            self.0.borrow().iter().map(|c| c["type"].as_str().unwrap_or("").to_owned()).collect()
        }
    }

    fn call(index: usize, id: &str, name: &str, args: &str) -> Vec<ModelEvent> {
        vec![
            ModelEvent::ToolCallStart { index, id: id.into(), name: name.into() },
            ModelEvent::ToolCallDelta { index, arguments: args.into() },
        ]
    }

    fn finish(reason: FinishReason) -> ModelEvent {
        ModelEvent::Finish { reason, usage: None }
    }

    #[derive(schemars::JsonSchema, serde::Deserialize)]
    struct AddInput {
        a: i64,
        b: i64,
    }

    fn tools() -> ToolSet {
        let mut set = ToolSet::new();
        set.add_layer(
            Layer::Agent,
            [
                Rc::new(typed_tool("add", "Adds", |i: AddInput, _ctx| async move {
                    Ok::<_, ToolError>(json!({"sum": i.a + i.b}))
                })) as ToolRef,
                Rc::new(DynamicTool::new(
                    "fail",
                    "Fails",
                    json!({"type": "object"}),
                    |_, _| async { Err(ToolError::Failed("boom".into())) },
                )),
                Rc::new(DynamicTool::without_execute(
                    "ask_user",
                    "Client",
                    json!({"type": "object"}),
                )),
            ],
        );
        set
    }

    fn plan(tools: ToolSet) -> TurnPlan {
        TurnPlan {
            system: "sys".into(),
            messages: vec![ModelMessage::User { content: "hi".into() }],
            tools,
            max_steps: 10,
            tool_choice: None,
            new_id: Box::new(|| "approval_1".into()),
            context: None,
            now: None,
            yield_now: None,
            spawn_call: None,
        }
    }

    fn run_with(
        script: Vec<Vec<ModelEvent>>,
        approval: &dyn ApprovalCheck,
    ) -> (TurnOutcome, Rc<Sink>, Rc<ScriptedModel>) {
        let model = ScriptedModel::new(script);
        let sink = Rc::new(Sink::default());
        let out = futures::executor::block_on(run(
            model.as_ref(),
            plan(tools()),
            approval,
            sink.clone(),
            &AbortSignal::new(),
        ));
        (out, sink, model)
    }

    /// A tool whose every call hands over four images of 1,000 characters, named by call.
    struct Shooter(crate::tools::ToolDefinition);

    #[async_trait::async_trait(?Send)]
    impl crate::tools::Tool for Shooter {
        fn definition(&self) -> &crate::tools::ToolDefinition {
            &self.0
        }
        async fn execute(&self, _: Value, _: &ToolContext) -> Result<Value, ToolError> {
            Ok(json!({"screenshots": "four, described"}))
        }
        fn take_images(&self, id: &str) -> Vec<crate::model::ImagePart> {
            (0..4)
                .map(|k| crate::model::ImagePart {
                    media_type: "image/png".into(),
                    data: format!("{id}.{k}.").chars().cycle().take(1_000).collect(),
                })
                .collect()
        }
    }

    #[test]
    fn a_turn_of_many_screenshots_sends_only_the_newest() {
        let mut set = ToolSet::new();
        let def = crate::tools::ToolDefinition::new("shoot", "Shoots", json!({"type": "object"}));
        set.add_layer(Layer::Agent, [Rc::new(Shooter(def)) as ToolRef]);
        let mut script: Vec<Vec<ModelEvent>> = (0..30)
            .map(|i| {
                let mut step = call(0, &format!("c{i}"), "shoot", "{}");
                step.push(finish(FinishReason::ToolCalls));
                step
            })
            .collect();
        script.push(vec![ModelEvent::TextDelta("Seen.".into()), finish(FinishReason::Stop)]);
        let model = ScriptedModel::new(script);
        let mut turn = plan(set);
        turn.max_steps = 40;
        let out = futures::executor::block_on(run(
            model.as_ref(),
            turn,
            &|_: &str, _: &Value| false,
            Rc::new(Sink::default()),
            &AbortSignal::new(),
        ));
        assert_eq!(out, TurnOutcome::Finished(FinishReason::Stop));
        let seen = model.seen();
        assert_eq!(seen.len(), 31);
        for (step, request) in seen.iter().enumerate() {
            let images: Vec<String> = request
                .messages
                .iter()
                .flat_map(|m| match m {
                    ModelMessage::Tool { images, .. } => images.clone(),
                    _ => Vec::new(),
                })
                .map(|i| i.data.split('.').take(2).collect::<Vec<_>>().join("."))
                .collect();
            // The newest calls' images, at most five calls' worth; every result keeps its text.
            let want: Vec<String> = (step.saturating_sub(5)..step)
                .flat_map(|c| (0..4).map(move |k| format!("c{c}.{k}")))
                .collect();
            assert_eq!(images, want, "request {step}");
            let described = |m: &&ModelMessage| matches!(m, ModelMessage::Tool { content, .. } if content.contains("four, described"));
            assert_eq!(request.messages.iter().filter(described).count(), step);
        }
    }

    #[test]
    fn two_step_tool_turn_feeds_results_back() {
        let mut step1 = vec![ModelEvent::TextDelta("Let me add.".into())];
        step1.extend(call(0, "c1", "add", r#"{"a":2,"b":3}"#));
        step1.extend(call(1, "c2", "fail", "{}"));
        step1.push(finish(FinishReason::ToolCalls));
        let step2 = vec![ModelEvent::TextDelta("It is 5.".into()), finish(FinishReason::Stop)];
        let (out, sink, model) = run_with(vec![step1, step2], &|_: &str, _: &Value| false);
        assert_eq!(out, TurnOutcome::Finished(FinishReason::Stop));
        assert_eq!(
            sink.types(),
            [
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "tool-input-start",
                "tool-input-delta",
                "tool-input-start",
                "tool-input-delta",
                "tool-input-available",
                "tool-input-available",
                "tool-output-available",
                "tool-output-error",
                "finish-step",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step"
            ]
        );
        let chunks = sink.0.borrow();
        assert_eq!(
            chunks[10],
            json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"sum": 5}})
        );
        assert_eq!(chunks[11]["errorText"], "boom");
        let second = &model.seen()[1];
        assert_eq!(second.messages.len(), 4);
        assert_eq!(
            second.messages[2],
            ModelMessage::Tool {
                tool_call_id: "c1".into(),
                tool_name: "add".into(),
                content: "{\"sum\":5}".into(),
                images: Vec::new(),
            }
        );
        assert_eq!(
            second.messages[3],
            ModelMessage::Tool {
                tool_call_id: "c2".into(),
                tool_name: "fail".into(),
                content: r#"{"error":"Error: boom"}"#.into(),
                images: Vec::new(),
            }
        );
    }

    /// Each tool output is followed by a yield to the platform before anything else of the
    /// step runs (the Worker commits there and the output gate lets that output go), and the
    /// step's end by another one before the next model call.
    #[test]
    fn the_turn_yields_after_each_tool_output_and_between_steps() {
        let log: Rc<RefCell<Vec<String>>> = Rc::default();
        struct Logged(Rc<RefCell<Vec<String>>>);
        impl ChunkSink for Logged {
            fn emit(&self, chunk: Value) {
                self.0.borrow_mut().push(chunk["type"].as_str().unwrap_or("").to_owned());
            }
        }
        let mut step1 = call(0, "c1", "add", r#"{"a":2,"b":3}"#);
        step1.extend(call(1, "c2", "fail", "{}"));
        step1.push(finish(FinishReason::ToolCalls));
        let step2 = vec![ModelEvent::TextDelta("5".into()), finish(FinishReason::Stop)];
        let model = ScriptedModel::new(vec![step1, step2]);
        let mut plan = plan(tools());
        let yields = log.clone();
        plan.yield_now = Some(Rc::new(move || {
            yields.borrow_mut().push("yield".into());
            // Pending once, as a timer is: the other calls run meanwhile.
            let mut first = true;
            Box::pin(futures::future::poll_fn(move |cx| {
                if std::mem::take(&mut first) {
                    cx.waker().wake_by_ref();
                    return std::task::Poll::Pending;
                }
                std::task::Poll::Ready(())
            }))
        }));
        let sink = Rc::new(Logged(log.clone()));
        let no = |_: &str, _: &Value| false;
        let out =
            futures::executor::block_on(run(model.as_ref(), plan, &no, sink, &AbortSignal::new()));
        assert_eq!(out, TurnOutcome::Finished(FinishReason::Stop));
        let log = log.borrow();
        let from = log.iter().position(|t| t == "tool-output-available").unwrap();
        assert_eq!(
            log[from..],
            [
                "tool-output-available",
                "yield",
                "tool-output-error",
                "yield",
                "finish-step",
                "yield",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step"
            ]
        );
    }

    /// With `spawn_call`, each call that runs is a task of its own, which emits its output
    /// and yields there; the turn hands the model the same results as when calls run inline.
    #[test]
    fn calls_run_as_tasks_of_their_own_with_spawn_call() {
        let mut pool = futures::executor::LocalPool::new();
        let spawner = futures::task::LocalSpawnExt::spawn_local;
        let tasks = pool.spawner();
        let log: Rc<RefCell<Vec<String>>> = Rc::default();
        struct Logged(Rc<RefCell<Vec<String>>>);
        impl ChunkSink for Logged {
            fn emit(&self, chunk: Value) {
                self.0.borrow_mut().push(chunk["type"].as_str().unwrap_or("").to_owned());
            }
        }
        let mut step1 = call(0, "c1", "add", r#"{"a":2,"b":3}"#);
        step1.extend(call(1, "c2", "fail", "{}"));
        step1.extend(call(2, "c3", "nope", "{}"));
        step1.push(finish(FinishReason::ToolCalls));
        let step2 = vec![ModelEvent::TextDelta("5".into()), finish(FinishReason::Stop)];
        let model = ScriptedModel::new(vec![step1, step2]);
        let mut plan = plan(tools());
        let spawned = log.clone();
        plan.spawn_call = Some(Rc::new(move |task| {
            spawned.borrow_mut().push("spawned".into());
            spawner(&tasks, task).unwrap();
        }));
        let yields = log.clone();
        plan.yield_now = Some(Rc::new(move || {
            yields.borrow_mut().push("yield".into());
            Box::pin(async {})
        }));
        let no = |_: &str, _: &Value| false;
        let sink = Rc::new(Logged(log.clone()));
        let out = pool.run_until(run(model.as_ref(), plan, &no, sink, &AbortSignal::new()));
        assert_eq!(out, TurnOutcome::Finished(FinishReason::Stop));
        let log = log.borrow();
        let from = log.iter().position(|t| t == "spawned").unwrap();
        // The unknown tool is settled at once; the two that run are spawned, and each task
        // emits its output and yields.
        assert_eq!(
            log[from..log.iter().position(|t| t == "finish-step").unwrap()],
            ["spawned", "spawned", "tool-output-available", "yield", "tool-output-error", "yield"]
        );
        let second = &model.seen()[1];
        let tool_texts: Vec<&str> = second
            .messages
            .iter()
            .filter_map(|m| match m {
                ModelMessage::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(tool_texts[0], "{\"sum\":5}");
        assert_eq!(tool_texts[1], r#"{"error":"Error: boom"}"#);
        assert!(tool_texts[2].contains("unavailable tool 'nope'"), "{}", tool_texts[2]);
    }

    #[test]
    fn bad_input_and_unknown_tools_become_errors_the_model_can_correct() {
        let mut step1 = call(0, "c1", "add", r#"{"a":"two"}"#);
        step1.extend(call(1, "c2", "nope", "{}"));
        step1.extend(call(2, "c3", "add", "{not json"));
        step1.push(finish(FinishReason::ToolCalls));
        let (out, sink, model) = run_with(
            vec![step1, vec![ModelEvent::TextDelta("ok".into()), finish(FinishReason::Stop)]],
            &|_: &str, _: &Value| false,
        );
        assert_eq!(out, TurnOutcome::Finished(FinishReason::Stop));
        let errors: Vec<Value> =
            sink.0.borrow().iter().filter(|c| c["type"] == "tool-input-error").cloned().collect();
        assert_eq!(errors.len(), 3);
        assert!(errors[0]["errorText"].as_str().unwrap().contains("/a"), "{}", errors[0]);
        assert_eq!(errors[1]["dynamic"], true);
        assert!(errors[1]["errorText"].as_str().unwrap().contains("unavailable tool 'nope'"));
        assert!(errors[2]["errorText"].as_str().unwrap().contains("not valid JSON"));
        let second = &model.seen()[1];
        assert_eq!(
            second.messages.iter().filter(|m| matches!(m, ModelMessage::Tool { .. })).count(),
            3
        );
    }

    #[test]
    fn approval_and_client_tools_pause_the_turn() {
        let mut step = call(0, "c1", "add", r#"{"a":1,"b":1}"#);
        step.push(finish(FinishReason::ToolCalls));
        let (out, sink, _) = run_with(vec![step], &|name: &str, _: &Value| name == "add");
        assert_eq!(out, TurnOutcome::AwaitingHuman);
        assert!(sink.0.borrow().contains(&json!({"type": "tool-approval-request", "approvalId": "approval_1", "toolCallId": "c1"})));
        assert!(!sink.types().contains(&"tool-output-available".to_owned()));

        let mut step = call(0, "c9", "ask_user", "{}");
        step.push(finish(FinishReason::ToolCalls));
        let (out, sink, _) = run_with(vec![step], &|_: &str, _: &Value| false);
        assert_eq!(out, TurnOutcome::AwaitingHuman);
        assert_eq!(sink.types().last().unwrap(), "finish-step");
        assert!(sink.types().contains(&"tool-input-available".to_owned()));
    }

    #[test]
    fn a_large_input_is_announced_and_run_as_the_parsed_arguments() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let got = seen.clone();
        let mut set = ToolSet::new();
        set.add_layer(
            Layer::Agent,
            [Rc::new(DynamicTool::new(
                "keep",
                "Keeps",
                json!({"type": "object"}),
                move |input, _| {
                    got.borrow_mut().push(input);
                    async { Ok(json!("kept")) }
                },
            )) as ToolRef],
        );
        let input = json!({"path": "/a", "content": "line é\n\"q\"".repeat(120_000)});
        // The model's own text (canonical, then spaced) and what each gives the sink and tool.
        for text in [input.to_string(), serde_json::to_string_pretty(&input).unwrap()] {
            assert!(text.len() >= ANNOUNCE_FROM_TEXT_BYTES);
            let mut step = call(0, "c1", "keep", &text);
            step.push(finish(FinishReason::ToolCalls));
            let model = ScriptedModel::new(vec![
                step,
                vec![ModelEvent::TextDelta("ok".into()), finish(FinishReason::Stop)],
            ]);
            let sink = Rc::new(Sink::default());
            let out = futures::executor::block_on(run(
                model.as_ref(),
                plan(set.clone()),
                &|_: &str, _: &Value| false,
                sink.clone(),
                &AbortSignal::new(),
            ));
            assert_eq!(out, TurnOutcome::Finished(FinishReason::Stop));
            let chunks = sink.0.borrow();
            let available = chunks.iter().find(|c| c["type"] == "tool-input-available").unwrap();
            assert_eq!(
                available,
                &json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "keep", "input": input})
            );
            assert_eq!(seen.borrow_mut().pop(), Some(input.clone()));
            let ModelMessage::Assistant { tool_calls, .. } = &model.seen()[1].messages[1] else {
                panic!("the call is in the history")
            };
            assert_eq!(tool_calls[0].arguments.text(), text, "the history keeps the model's text");
        }
    }

    #[test]
    fn step_limit_and_model_errors() {
        let looping = || {
            let mut s = call(0, "c", "add", r#"{"a":1,"b":1}"#);
            s.push(finish(FinishReason::ToolCalls));
            s
        };
        let model = ScriptedModel::new((0..5).map(|_| looping()).collect());
        let sink = Rc::new(Sink::default());
        let mut p = plan(tools());
        p.max_steps = 3;
        let out = futures::executor::block_on(run(
            model.as_ref(),
            p,
            &|_: &str, _: &Value| false,
            sink.clone(),
            &AbortSignal::new(),
        ));
        assert_eq!(out, TurnOutcome::Finished(FinishReason::ToolCalls));
        assert_eq!(model.seen().len(), 3);

        let (out, _, _) = run_with(vec![], &|_: &str, _: &Value| false);
        assert_eq!(out, TurnOutcome::Failed("no script".into()));
    }

    /// A model whose calls stream some text, then fail with `error`.
    struct Breaking(ModelError);

    #[async_trait(?Send)]
    impl Model for Breaking {
        fn id(&self) -> &str {
            "breaking"
        }
        async fn stream(&self, _: &ModelRequest) -> Result<crate::model::ModelStream, ModelError> {
            let events = vec![Ok(ModelEvent::TextDelta("par".into())), Err(self.0.clone())];
            Ok(futures::stream::iter(events).boxed_local())
        }
    }

    #[test]
    fn a_transient_model_error_interrupts_the_turn_and_any_other_fails_it() {
        use crate::model::retry::RetryAfter;
        use crate::platform::HttpError;
        let status =
            |status, retry_after| ModelError::Status { status, message: "m".into(), retry_after };
        let cases = [
            (ModelError::StreamBroken(HttpError::Body("reset".into())), Some(None)),
            (ModelError::Transient("overloaded".into()), Some(None)),
            (status(429, Some(RetryAfter::Delay(1500.0))), Some(Some(1500))),
            (
                ModelError::RetriesExhausted { attempts: 3, last: Box::new(status(503, None)) },
                Some(None),
            ),
            (ModelError::Reported("bad request".into()), None),
            (status(400, None), None),
        ];
        for (error, transient) in cases {
            let sink = Rc::new(Sink::default());
            let out = futures::executor::block_on(run(
                &Breaking(error.clone()),
                plan(tools()),
                &|_: &str, _: &Value| false,
                sink.clone(),
                &AbortSignal::new(),
            ));
            let expected = match transient {
                Some(retry_after_ms) => {
                    TurnOutcome::Interrupted { error: error.to_string(), retry_after_ms }
                }
                None => TurnOutcome::Failed(error.to_string()),
            };
            assert_eq!(out, expected, "{error:?}");
            assert_eq!(
                sink.types(),
                ["start-step", "text-start", "text-delta", "text-end"],
                "the text is closed"
            );
        }
    }
}
