//! The Workers AI provider over the `AI` binding (`env.AI.run(model, inputs)` with
//! `stream: true`). The inputs are OpenAI-style `messages` and `tools`; the stream is SSE in
//! one of two shapes, both read here: OpenAI's `choices[].delta` (newer models such as
//! Kimi K2, gpt-oss, Llama 4) and the native `{response, tool_calls, usage}` (older models).
//! The binding itself sits behind [`AiBinding`] so this core runs on the host.

use std::rc::Rc;

use async_trait::async_trait;
use futures::stream::LocalBoxStream;
use serde_json::{json, Value};

use super::openai::{ChunkDecoder, OpenAiChatModel};
use super::stream::{decoded, Decode};
use super::{Model, ModelError, ModelEvent, ModelRequest, ModelStream};
use crate::platform::sse::SseParser;
use crate::platform::HttpError;

/// The model the shipped agent uses on Workers AI when `THINK_MODEL` names none (the model
/// Think's own examples use; it supports function calling and streams OpenAI-style).
pub const DEFAULT_WORKERS_AI_MODEL: &str = "@cf/moonshotai/kimi-k2.7-code";

/// The binding's name in `wrangler.toml` (`[ai] binding = "AI"`).
pub const AI_BINDING: &str = "AI";

/// Why the binding refused a run: the message of what `env.AI.run` threw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AiRunError(pub String);

impl std::fmt::Display for AiRunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AiRunError {}

/// "Run this model with these inputs and give me the stream": the `AI` binding's `run`.
#[async_trait(?Send)]
pub trait AiBinding {
    /// Starts `model` on `inputs` (which ask for `stream: true`); yields the SSE body.
    async fn run(
        &self,
        model: &str,
        inputs: Value,
    ) -> Result<LocalBoxStream<'static, Result<Vec<u8>, HttpError>>, AiRunError>;
}

/// A Workers AI model reached through the binding.
pub struct WorkersAiModel {
    model: String,
    binding: Rc<dyn AiBinding>,
}

impl WorkersAiModel {
    /// `model` (e.g. [`DEFAULT_WORKERS_AI_MODEL`]) run through `binding`.
    pub fn new(model: &str, binding: Rc<dyn AiBinding>) -> Self {
        Self { model: model.to_owned(), binding }
    }

    /// The inputs of `env.AI.run`: the OpenAI body without `model` and `stream_options`, and
    /// no `null` contents (the binding's schema refuses them).
    pub fn inputs(&self, request: &ModelRequest) -> Value {
        let mut body = OpenAiChatModel::chat_body(&self.model, request);
        if let Value::Object(o) = &mut body {
            o.remove("model");
            o.remove("stream_options");
            // The binding's JSON mode takes another shape, on some models only: the prompt
            // carries the schema.
            o.remove("response_format");
            if let Some(Value::Array(messages)) = o.get_mut("messages") {
                for m in messages {
                    match m.get("content") {
                        Some(Value::Null) => m["content"] = json!(""),
                        Some(Value::Array(parts)) => m["content"] = json!(images_note(parts)),
                        _ => {}
                    }
                }
            }
        }
        body
    }
}

/// What a Workers AI model reads instead of tool results' images (the OpenAI shape's user
/// message of parts): the binding's chat models take text only.
fn images_note(parts: &[Value]) -> String {
    let n = parts.iter().filter(|p| p["type"] == "image_url").count();
    format!("[{n} image(s) from the tool results above were not sent: this model takes text only.]")
}

/// A thrown `run` error as a model error: capacity and rate limits (Workers AI codes 3040
/// and 3036, or words to that effect) are temporary and get retried; local dev's "needs to be
/// run remotely" gets the ways out.
fn run_error(e: AiRunError) -> ModelError {
    let text = e.0.to_ascii_lowercase();
    if text.contains("needs to be run remotely") {
        return ModelError::Reported(format!(
            "{}: Workers AI runs on Cloudflare only. Deploy, or use `wrangler dev --remote`, or \
             set THINK_MODEL_BASE_URL (and THINK_MODEL) to a local OpenAI-compatible endpoint.",
            e.0
        ));
    }
    let transient = ["3040", "3036", "capacity", "rate limit", "overloaded", "temporarily"]
        .iter()
        .any(|w| text.contains(w));
    if transient {
        ModelError::Transient(e.0)
    } else {
        ModelError::Reported(e.0)
    }
}

#[async_trait(?Send)]
impl Model for WorkersAiModel {
    fn id(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let body = self.binding.run(&self.model, self.inputs(request)).await.map_err(run_error)?;
        Ok(decoded(body, NativeOrOpenAi::default()))
    }
}

/// Reads both stream shapes: native chunks are rewritten as OpenAI chunks and decoded by the
/// OpenAI provider's decoder, so tool-call and finish handling is shared.
#[derive(Default)]
struct NativeOrOpenAi {
    parser: SseParser,
    inner: ChunkDecoder,
}

impl NativeOrOpenAi {
    fn data(&mut self, data: &str) -> Result<Vec<ModelEvent>, ModelError> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Vec::new());
        }
        let mut v: Value =
            serde_json::from_str(data).map_err(|e| ModelError::UnreadableChunk(e.to_string()))?;
        if v.get("choices").is_none() && v.get("error").is_none() {
            v = openai_chunk(&v);
        }
        self.inner.push(format!("data: {v}\n\n").as_bytes())
    }
}

/// A native chunk (`{response, tool_calls, usage, finish_reason}`) in the OpenAI shape.
fn openai_chunk(native: &Value) -> Value {
    let mut delta = json!({});
    if let Some(text) = native.get("response").and_then(Value::as_str) {
        delta["content"] = json!(text);
    }
    if let Some(calls) = native.get("tool_calls").and_then(Value::as_array) {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(pos, c)| {
                let f = c.get("function").unwrap_or(c);
                let args = match f.get("arguments") {
                    Some(Value::String(s)) => json!(s),
                    Some(Value::Null) | None => Value::Null,
                    Some(other) => json!(other.to_string()),
                };
                json!({
                    "index": c.get("index").cloned().unwrap_or(json!(pos)),
                    "id": c.get("id").cloned().unwrap_or(Value::Null),
                    "function": {"name": f.get("name").cloned().unwrap_or(Value::Null), "arguments": args},
                })
            })
            .collect();
        delta["tool_calls"] = Value::Array(calls);
    }
    let mut chunk = json!({"choices": [{"index": 0, "delta": delta}]});
    if let Some(reason) = native.get("finish_reason").filter(|r| r.is_string()) {
        chunk["choices"][0]["finish_reason"] = reason.clone();
    }
    if let Some(usage) = native.get("usage") {
        chunk["usage"] = usage.clone();
    }
    chunk
}

impl Decode for NativeOrOpenAi {
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<ModelEvent>, ModelError> {
        let mut out = Vec::new();
        for ev in self.parser.push(bytes) {
            out.extend(self.data(&ev.data)?);
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        let mut out = Vec::new();
        if let Some(ev) = self.parser.finish() {
            out.extend(self.data(&ev.data)?);
        }
        out.extend(self.inner.finish()?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FinishReason, ModelMessage, ModelToolCall, Usage};
    use futures::StreamExt;
    use std::cell::RefCell;

    /// A binding that records its inputs and streams a canned body, or throws.
    struct FakeAi {
        answer: Result<String, AiRunError>,
        seen: RefCell<Vec<(String, Value)>>,
    }

    #[async_trait(?Send)]
    impl AiBinding for FakeAi {
        async fn run(
            &self,
            model: &str,
            inputs: Value,
        ) -> Result<LocalBoxStream<'static, Result<Vec<u8>, HttpError>>, AiRunError> {
            self.seen.borrow_mut().push((model.to_owned(), inputs));
            let body = self.answer.clone()?;
            let chunks: Vec<Result<Vec<u8>, HttpError>> =
                body.as_bytes().chunks(9).map(|c| Ok(c.to_vec())).collect();
            Ok(futures::stream::iter(chunks).boxed_local())
        }
    }

    fn run(
        answer: Result<&str, &str>,
        req: &ModelRequest,
    ) -> (Vec<Result<ModelEvent, ModelError>>, Rc<FakeAi>) {
        let ai = Rc::new(FakeAi {
            answer: answer.map(str::to_owned).map_err(|e| AiRunError(e.into())),
            seen: RefCell::new(vec![]),
        });
        let m = WorkersAiModel::new(DEFAULT_WORKERS_AI_MODEL, ai.clone());
        let events = futures::executor::block_on(async {
            match m.stream(req).await {
                Ok(s) => s.collect().await,
                Err(e) => vec![Err(e)],
            }
        });
        (events, ai)
    }

    fn ok(events: Vec<Result<ModelEvent, ModelError>>) -> Vec<ModelEvent> {
        events.into_iter().map(Result::unwrap).collect()
    }

    #[test]
    fn native_chunks_with_text_tool_calls_and_usage() {
        let body = concat!(
            "data: {\"response\":\"Let me \",\"p\":\"abc\"}\n\n",
            "data: {\"response\":\"look.\"}\n\n",
            "data: {\"response\":\"\",\"tool_calls\":[{\"name\":\"read\",\"arguments\":{\"path\":\"/a\"}}]}\n\n",
            "data: {\"response\":\"\",\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":7,\"total_tokens\":37}}\n\n",
            "data: [DONE]\n\n"
        );
        let (events, _) = run(Ok(body), &ModelRequest::default());
        assert_eq!(
            ok(events),
            vec![
                ModelEvent::TextDelta("Let me ".into()),
                ModelEvent::TextDelta("look.".into()),
                ModelEvent::ToolCallStart { index: 0, id: "call_0".into(), name: "read".into() },
                ModelEvent::ToolCallDelta { index: 0, arguments: "{\"path\":\"/a\"}".into() },
                ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: Some(Usage { input_tokens: 30, output_tokens: 7 })
                },
            ]
        );
    }

    #[test]
    fn openai_chunks_with_reasoning_and_argument_deltas() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"chatcmpl-tool-1\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"/a\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n",
            "data: [DONE]\n\n"
        );
        let (events, _) = run(Ok(body), &ModelRequest::default());
        assert_eq!(
            ok(events),
            vec![
                ModelEvent::ReasoningDelta("hmm".into()),
                ModelEvent::ToolCallStart {
                    index: 0,
                    id: "chatcmpl-tool-1".into(),
                    name: "read".into()
                },
                ModelEvent::ToolCallDelta { index: 0, arguments: "{\"path\":".into() },
                ModelEvent::ToolCallDelta { index: 0, arguments: "\"/a\"}".into() },
                ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: Some(Usage { input_tokens: 3, output_tokens: 4 })
                },
            ]
        );
    }

    #[test]
    fn tool_images_become_a_text_note() {
        let req = ModelRequest { messages: crate::model::screenshot_step(), ..Default::default() };
        let (_, ai) = run(Ok("data: [DONE]\n\n"), &req);
        let (_, inputs) = ai.seen.borrow()[0].clone();
        let last = &inputs["messages"][4];
        assert_eq!(last["role"], "user");
        assert_eq!(
            last["content"],
            "[1 image(s) from the tool results above were not sent: this model takes text only.]"
        );
        assert!(!inputs.to_string().contains("iVBORw0KGgo"), "no pixels sent");
    }

    #[test]
    fn inputs_are_openai_messages_without_nulls_and_ask_for_a_stream() {
        let req = ModelRequest {
            system: "sys".into(),
            messages: vec![
                ModelMessage::User { content: "hi".into() },
                ModelMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ModelToolCall {
                        id: "c".into(),
                        name: "read".into(),
                        arguments: json!({}).into(),
                    }],
                },
            ],
            ..Default::default()
        };
        let (_, ai) = run(Ok("data: [DONE]\n\n"), &req);
        let (model, inputs) = ai.seen.borrow()[0].clone();
        assert_eq!(model, DEFAULT_WORKERS_AI_MODEL);
        assert_eq!(inputs["stream"], true);
        assert_eq!(inputs.get("model"), None);
        assert_eq!(inputs.get("stream_options"), None);
        assert_eq!(inputs["messages"][0], json!({"role": "system", "content": "sys"}));
        assert_eq!(inputs["messages"][2]["content"], "");
        assert_eq!(inputs["messages"][2]["tool_calls"][0]["function"]["name"], "read");
    }

    #[test]
    fn thrown_errors_are_reported_and_capacity_is_temporary() {
        let (events, _) = run(Err("Binding AI needs to be run remotely"), &ModelRequest::default());
        let text = events[0].as_ref().unwrap_err().to_string();
        assert!(text.contains("wrangler dev --remote"), "{text}");
        let (events, _) = run(Err("5007: No such model"), &ModelRequest::default());
        assert_eq!(events, vec![Err(ModelError::Reported("5007: No such model".into()))]);
        let (events, _) = run(Err("3040: Capacity temporarily exceeded"), &ModelRequest::default());
        assert!(events[0].as_ref().unwrap_err().is_retryable());
        let (events, _) =
            run(Ok("data: {\"error\":{\"message\":\"bad input\"}}\n\n"), &ModelRequest::default());
        assert_eq!(events, vec![Err(ModelError::Reported("bad input".into()))]);
    }
}
