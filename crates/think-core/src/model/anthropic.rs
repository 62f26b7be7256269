//! The Anthropic Messages provider (streaming): `POST <base>/messages` with `x-api-key` and
//! `anthropic-version`. The stable prefix (tools, then the system prompt) carries
//! `cache_control` breakpoints so repeated steps of a turn read it from the prompt cache;
//! thinking blocks stream as reasoning, and are sent back with their signatures when a step
//! that thought also called tools, as the API requires.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::stream::{decoded, post_for_events, Decode};
use super::{
    FinishReason, Model, ModelError, ModelEvent, ModelMessage, ModelRequest, ModelStream, Usage,
};
use crate::platform::sse::SseParser;
use crate::platform::HttpClient;

/// The `anthropic-version` header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request names none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// How many steps' thinking blocks are kept for sending back.
const THINKING_MEMO_STEPS: usize = 64;

/// Where and how to reach the Messages API.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicConfig {
    /// Base URL including the version segment, e.g. `https://api.anthropic.com/v1`.
    pub base_url: String,
    /// Sent as `x-api-key`; empty sends none.
    pub api_key: String,
    /// The model name, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// Extended thinking's `budget_tokens`; `None` leaves thinking off.
    pub thinking_budget: Option<u32>,
}

/// Thinking blocks of past steps that called tools, by the step's first tool-use id: the API
/// wants them back, unchanged, in front of those tool calls.
#[derive(Default)]
struct ThinkingMemo {
    blocks: HashMap<String, Vec<Value>>,
    order: VecDeque<String>,
}

impl ThinkingMemo {
    fn insert(&mut self, tool_use_id: String, blocks: Vec<Value>) {
        if self.blocks.insert(tool_use_id.clone(), blocks).is_none() {
            self.order.push_back(tool_use_id);
        }
        while self.order.len() > THINKING_MEMO_STEPS {
            if let Some(old) = self.order.pop_front() {
                self.blocks.remove(&old);
            }
        }
    }
}

/// A streaming Messages API client.
pub struct AnthropicModel {
    config: AnthropicConfig,
    http: Rc<dyn HttpClient>,
    memo: Rc<RefCell<ThinkingMemo>>,
}

impl AnthropicModel {
    /// A client for `config`, fetching through `http`.
    pub fn new(config: AnthropicConfig, http: Rc<dyn HttpClient>) -> Self {
        Self { config, http, memo: Rc::default() }
    }

    /// The JSON body of a streaming request, as sent on the wire.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let ephemeral = json!({"type": "ephemeral"});
        let mut system = Vec::new();
        if !request.system.is_empty() {
            system.push(json!({"type": "text", "text": request.system}));
        }
        // Later system messages join the system prompt (the API has no system role).
        for m in &request.messages {
            if let ModelMessage::System { content } = m {
                system.push(json!({"type": "text", "text": content}));
            }
        }
        if let Some(Value::Object(first)) = system.first_mut() {
            first.insert("cache_control".into(), ephemeral.clone());
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(self.config.model));
        let budget = self.config.thinking_budget.filter(|_| self.thinking_is_whole(request));
        let max_tokens = request
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_TOKENS)
            .max(budget.map_or(0, |b| b + 1024));
        body.insert("max_tokens".into(), json!(max_tokens));
        if !system.is_empty() {
            body.insert("system".into(), Value::Array(system));
        }
        body.insert("messages".into(), Value::Array(self.messages(&request.messages)));
        if !request.tools.is_empty() {
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})
                })
                .collect();
            if let Some(Value::Object(last)) = tools.last_mut() {
                last.insert("cache_control".into(), ephemeral);
            }
            body.insert("tools".into(), Value::Array(tools));
            if let Some(choice) = request.tool_choice.as_deref() {
                let choice = match choice {
                    "auto" => json!({"type": "auto"}),
                    "required" | "any" => json!({"type": "any"}),
                    "none" => json!({"type": "none"}),
                    name => json!({"type": "tool", "name": name}),
                };
                body.insert("tool_choice".into(), choice);
            }
        }
        match budget {
            Some(b) => {
                body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": b}));
            }
            None => {
                if let Some(t) = request.temperature {
                    body.insert("temperature".into(), json!(t));
                }
            }
        }
        if let Some(format) = request.response_format.as_ref().filter(|_| budget.is_none()) {
            force_answer_tool(&mut body, format);
        }
        body.insert("stream".into(), json!(true));
        Value::Object(body)
    }

    /// Whether every tool-calling step since the last user message still has its thinking
    /// blocks (kept in memory, so lost when the object restarts mid-turn). Without them the
    /// API refuses a request that thinks, so such a step is sent without thinking.
    fn thinking_is_whole(&self, request: &ModelRequest) -> bool {
        let memo = self.memo.borrow();
        let since_user = request
            .messages
            .iter()
            .rposition(|m| matches!(m, ModelMessage::User { .. }))
            .map_or(0, |i| i + 1);
        request.messages[since_user..].iter().all(|m| match m {
            ModelMessage::Assistant { tool_calls, .. } => {
                tool_calls.first().is_none_or(|c| memo.blocks.contains_key(&c.id))
            }
            _ => true,
        })
    }

    /// The conversation as alternating user/assistant messages of content blocks: tool results
    /// travel in user messages, consecutive same-role messages are merged.
    fn messages(&self, messages: &[ModelMessage]) -> Vec<Value> {
        let memo = self.memo.borrow();
        let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
        for m in messages {
            let (role, blocks) = match m {
                ModelMessage::System { .. } => continue,
                ModelMessage::User { content } => ("user", text_block(content)),
                ModelMessage::Assistant { content, tool_calls } => {
                    let mut blocks = Vec::new();
                    if let Some(thinking) = tool_calls.first().and_then(|c| memo.blocks.get(&c.id))
                    {
                        blocks.extend(thinking.iter().cloned());
                    }
                    blocks.extend(text_block(content));
                    blocks.extend(tool_calls.iter().map(|c| {
                        let input = match c.arguments.to_value() {
                            input @ Value::Object(_) => input,
                            _ => json!({}),
                        };
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input})
                    }));
                    ("assistant", blocks)
                }
                ModelMessage::Tool { tool_call_id, content, images, .. } => {
                    ("user", vec![tool_result(tool_call_id, content, images)])
                }
            };
            if blocks.is_empty() {
                continue;
            }
            match out.last_mut() {
                Some((last, existing)) if *last == role => existing.extend(blocks),
                _ => out.push((role, blocks)),
            }
        }
        out.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect()
    }
}

/// Structured output as a forced tool whose input is the answer, when the request offers no
/// tools and the schema describes an object (the API's `input_schema` must); otherwise, and
/// when thinking (which refuses a forced tool), the schema is left to the prompt.
fn force_answer_tool(body: &mut Map<String, Value>, format: &super::ResponseFormat) {
    if body.contains_key("tools") || format.schema.get("type") != Some(&json!("object")) {
        return;
    }
    let tool = json!({
        "name": format.name,
        "description": "Give your answer as this tool's input.",
        "input_schema": format.schema,
    });
    body.insert("tools".into(), json!([tool]));
    body.insert("tool_choice".into(), json!({"type": "tool", "name": format.name}));
}

/// A `tool_result` block: its text, or a text block and base64 `image` blocks when the result
/// carries images.
fn tool_result(id: &str, content: &str, images: &[super::ImagePart]) -> Value {
    if images.is_empty() {
        return json!({"type": "tool_result", "tool_use_id": id, "content": content});
    }
    let mut blocks = text_block(content);
    blocks.extend(images.iter().map(|i| {
        json!({"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.data}})
    }));
    json!({"type": "tool_result", "tool_use_id": id, "content": blocks})
}

/// A text block for non-empty text (the API refuses empty ones).
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

#[async_trait(?Send)]
impl Model for AnthropicModel {
    fn id(&self) -> &str {
        &self.config.model
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let url = format!("{}/messages", self.config.base_url.trim_end_matches('/'));
        let mut headers = vec![("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned())];
        if !self.config.api_key.is_empty() {
            headers.push(("x-api-key".to_owned(), self.config.api_key.clone()));
        }
        let body = crate::protocol::json::to_body(&self.request_body(request))
            .map_err(|e| ModelError::Encode(e.to_string()))?;
        let response = post_for_events(self.http.as_ref(), url, headers, body).await?;
        Ok(decoded(response.body, EventDecoder::new(self.memo.clone())))
    }
}

/// What one content block of the answer is, by its index.
enum Block {
    Text,
    Thinking {
        text: String,
        signature: String,
    },
    Redacted(Value),
    /// A tool call; `args` is whether any argument text arrived.
    ToolUse {
        args: bool,
    },
    Other,
}

/// Decoding state for one streamed answer.
struct EventDecoder {
    parser: SseParser,
    blocks: HashMap<u64, Block>,
    /// Thinking blocks of this answer, in order, to remember if it calls tools.
    thinking: Vec<Value>,
    first_tool_use: Option<String>,
    memo: Rc<RefCell<ThinkingMemo>>,
    finish: Option<FinishReason>,
    usage: Usage,
    stopped: bool,
}

impl EventDecoder {
    fn new(memo: Rc<RefCell<ThinkingMemo>>) -> Self {
        Self {
            parser: SseParser::new(),
            blocks: HashMap::new(),
            thinking: Vec::new(),
            first_tool_use: None,
            memo,
            finish: None,
            usage: Usage::default(),
            stopped: false,
        }
    }

    fn event(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let v: Value =
            serde_json::from_str(data).map_err(|e| ModelError::UnreadableChunk(e.to_string()))?;
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        let str_at = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                    self.usage.input_tokens = n("input_tokens")
                        + n("cache_creation_input_tokens")
                        + n("cache_read_input_tokens");
                    self.usage.output_tokens = n("output_tokens");
                }
            }
            "content_block_start" => {
                let block = v.get("content_block").cloned().unwrap_or(Value::Null);
                let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
                let b = match kind {
                    "text" => {
                        let text = str_at("/content_block/text");
                        if !text.is_empty() {
                            out.push(ModelEvent::TextDelta(text));
                        }
                        Block::Text
                    }
                    "thinking" => Block::Thinking {
                        text: str_at("/content_block/thinking"),
                        signature: str_at("/content_block/signature"),
                    },
                    "redacted_thinking" => Block::Redacted(block),
                    "tool_use" => {
                        let id = str_at("/content_block/id");
                        let name = str_at("/content_block/name");
                        self.first_tool_use.get_or_insert_with(|| id.clone());
                        out.push(ModelEvent::ToolCallStart { index: index as usize, id, name });
                        Block::ToolUse { args: false }
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, b);
            }
            "content_block_delta" => {
                let delta = v.get("delta").cloned().unwrap_or(Value::Null);
                let field = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                match (delta.get("type").and_then(Value::as_str), self.blocks.get_mut(&index)) {
                    (Some("text_delta"), _) => {
                        let text = field("text");
                        if !text.is_empty() {
                            out.push(ModelEvent::TextDelta(text));
                        }
                    }
                    (Some("thinking_delta"), Some(Block::Thinking { text, .. })) => {
                        let more = field("thinking");
                        text.push_str(&more);
                        if !more.is_empty() {
                            out.push(ModelEvent::ReasoningDelta(more));
                        }
                    }
                    (Some("signature_delta"), Some(Block::Thinking { signature, .. })) => {
                        signature.push_str(&field("signature"));
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { args, .. })) => {
                        let part = field("partial_json");
                        if !part.is_empty() {
                            *args = true;
                            out.push(ModelEvent::ToolCallDelta {
                                index: index as usize,
                                arguments: part,
                            });
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some(Block::Thinking { text, signature }) => self
                    .thinking
                    .push(json!({"type": "thinking", "thinking": text, "signature": signature})),
                Some(Block::Redacted(block)) => self.thinking.push(block),
                Some(Block::ToolUse { args: false, .. }) => out.push(ModelEvent::ToolCallDelta {
                    index: index as usize,
                    arguments: "{}".into(),
                }),
                Some(Block::ToolUse { args: true } | Block::Text | Block::Other) | None => {}
            },
            "message_delta" => {
                if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.finish = Some(match reason {
                        "end_turn" | "stop_sequence" | "pause_turn" => FinishReason::Stop,
                        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
                        "tool_use" => FinishReason::ToolCalls,
                        "refusal" => FinishReason::ContentFilter,
                        _ => FinishReason::Other,
                    });
                }
                if let Some(n) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.usage.output_tokens = n;
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let message = str_at("/error/message");
                let message = if message.is_empty() { v.to_string() } else { message };
                return Err(match str_at("/error/type").as_str() {
                    "overloaded_error" | "rate_limit_error" | "api_error" => {
                        ModelError::Transient(message)
                    }
                    _ => ModelError::Reported(message),
                });
            }
            _ => {} // ping and future event types
        }
        Ok(())
    }
}

impl Decode for EventDecoder {
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<ModelEvent>, ModelError> {
        let mut out = Vec::new();
        for ev in self.parser.push(bytes) {
            self.event(&ev.data, &mut out)?;
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        let mut out = Vec::new();
        if let Some(ev) = self.parser.finish() {
            self.event(&ev.data, &mut out)?;
        }
        if !self.stopped && self.finish.is_none() {
            return Err(ModelError::Reported("the stream ended before message_stop".into()));
        }
        if let Some(id) = self.first_tool_use.take() {
            if !self.thinking.is_empty() {
                self.memo.borrow_mut().insert(id, std::mem::take(&mut self.thinking));
            }
        }
        let reason = self.finish.unwrap_or(FinishReason::Other);
        out.push(ModelEvent::Finish { reason, usage: Some(self.usage.clone()) });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelToolCall, ResponseFormat};
    use crate::platform::{HttpError, HttpRequest, HttpResponse};
    use crate::tools::definition::ToolDefinition;
    use futures::StreamExt;

    /// A scripted answer: status, headers, body.
    type Answer = (u16, Vec<(String, String)>, String);

    /// Answers each request with the next scripted answer and records it.
    struct Scripted {
        answers: RefCell<Vec<Answer>>,
        seen: RefCell<Vec<HttpRequest>>,
    }

    #[async_trait(?Send)]
    impl HttpClient for Scripted {
        async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
            self.seen.borrow_mut().push(req);
            let (status, headers, body) = self.answers.borrow_mut().remove(0);
            let chunks: Vec<Result<Vec<u8>, HttpError>> =
                body.as_bytes().chunks(11).map(|c| Ok(c.to_vec())).collect();
            Ok(HttpResponse { status, headers, body: futures::stream::iter(chunks).boxed_local() })
        }
    }

    fn sse(events: &[Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {}\n\n", e["type"].as_str().unwrap(), e))
            .collect()
    }

    fn model(answers: Vec<(u16, &str)>, budget: Option<u32>) -> (AnthropicModel, Rc<Scripted>) {
        let http = Rc::new(Scripted {
            answers: RefCell::new(
                answers.into_iter().map(|(s, b)| (s, vec![], b.to_owned())).collect(),
            ),
            seen: RefCell::new(vec![]),
        });
        let config = AnthropicConfig {
            base_url: "http://a/v1/".into(),
            api_key: "sk-ant".into(),
            model: "claude-test".into(),
            thinking_budget: budget,
        };
        (AnthropicModel::new(config, http.clone()), http)
    }

    fn collect(m: &AnthropicModel, req: &ModelRequest) -> Vec<Result<ModelEvent, ModelError>> {
        futures::executor::block_on(async {
            match m.stream(req).await {
                Ok(s) => s.collect().await,
                Err(e) => vec![Err(e)],
            }
        })
    }

    fn thinking_then_tool_use() -> String {
        sse(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 20, "cache_read_input_tokens": 100, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Look at "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "the file."}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Reading."}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"pa"}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "th\":\"/a\"}"}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "list", "input": {}}}),
            json!({"type": "content_block_stop", "index": 3}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
            json!({"type": "message_stop"}),
        ])
    }

    #[test]
    fn a_response_format_is_a_forced_tool_unless_thinking() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let format = ResponseFormat { name: "browser_extract".into(), schema: schema.clone() };
        let req = ModelRequest {
            messages: vec![ModelMessage::User { content: "x".into() }],
            response_format: Some(format),
            ..Default::default()
        };
        let body = model(vec![], None).0.request_body(&req);
        assert_eq!(body["tools"][0]["name"], "browser_extract");
        assert_eq!(body["tools"][0]["input_schema"], schema);
        assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "browser_extract"}));
        let thinking = model(vec![], Some(2048)).0.request_body(&req);
        assert!(thinking.get("tools").is_none() && thinking.get("tool_choice").is_none());
    }

    #[test]
    fn tool_images_are_image_blocks_in_the_tool_result() {
        let (m, _) = model(vec![], None);
        let req = ModelRequest { messages: crate::model::screenshot_step(), ..Default::default() };
        let body = m.request_body(&req);
        let results = &body["messages"][2]["content"];
        assert_eq!(
            results[0],
            json!({"type": "tool_result", "tool_use_id": "c1", "content": [
                {"type": "text", "text": "result c1"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            ]})
        );
        assert_eq!(
            results[1],
            json!({"type": "tool_result", "tool_use_id": "c2", "content": "result c2"})
        );
    }

    #[test]
    fn thinking_text_and_tool_use_stream_as_events() {
        let body = thinking_then_tool_use();
        let (m, _) = model(vec![(200, &body)], Some(2000));
        let events: Vec<ModelEvent> =
            collect(&m, &ModelRequest::default()).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            events,
            vec![
                ModelEvent::ReasoningDelta("Look at ".into()),
                ModelEvent::ReasoningDelta("the file.".into()),
                ModelEvent::TextDelta("Reading.".into()),
                ModelEvent::ToolCallStart { index: 2, id: "toolu_1".into(), name: "read".into() },
                ModelEvent::ToolCallDelta { index: 2, arguments: "{\"pa".into() },
                ModelEvent::ToolCallDelta { index: 2, arguments: "th\":\"/a\"}".into() },
                ModelEvent::ToolCallStart { index: 3, id: "toolu_2".into(), name: "list".into() },
                ModelEvent::ToolCallDelta { index: 3, arguments: "{}".into() },
                ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: Some(Usage { input_tokens: 120, output_tokens: 42 })
                },
            ]
        );
    }

    #[test]
    fn request_carries_headers_cache_breakpoints_and_the_transcript_as_blocks() {
        let body = thinking_then_tool_use();
        let done = sse(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
            json!({"type": "message_stop"}),
        ]);
        let (m, http) = model(vec![(200, &body), (200, &done)], Some(2000));
        let tool = |name: &str| ToolDefinition {
            name: name.into(),
            description: format!("{name} a file"),
            input_schema: json!({"type": "object"}),
            output_schema: None,
        };
        let mut req = ModelRequest {
            system: "be brief".into(),
            messages: vec![ModelMessage::User { content: "read /a".into() }],
            tools: vec![tool("read"), tool("list")],
            tool_choice: Some("required".into()),
            temperature: Some(0.3),
            ..Default::default()
        };
        collect(&m, &req);
        req.messages.extend([
            ModelMessage::Assistant {
                content: "Reading.".into(),
                tool_calls: vec![
                    ModelToolCall {
                        id: "toolu_1".into(),
                        name: "read".into(),
                        arguments: json!({"path": "/a"}).into(),
                    },
                    ModelToolCall {
                        id: "toolu_2".into(),
                        name: "list".into(),
                        arguments: json!({}).into(),
                    },
                ],
            },
            ModelMessage::Tool {
                tool_call_id: "toolu_1".into(),
                tool_name: "read".into(),
                content: "1\tx".into(),
                images: Vec::new(),
            },
            ModelMessage::Tool {
                tool_call_id: "toolu_2".into(),
                tool_name: "list".into(),
                content: "a".into(),
                images: Vec::new(),
            },
        ]);
        collect(&m, &req);
        let seen = http.seen.borrow();
        assert_eq!(seen[1].url, "http://a/v1/messages");
        let header = |n: &str| seen[1].headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(header("x-api-key").as_deref(), Some("sk-ant"));
        assert_eq!(header("anthropic-version").as_deref(), Some(ANTHROPIC_VERSION));
        let sent: Value = serde_json::from_slice(&seen[1].body.as_ref().unwrap().to_vec()).unwrap();
        assert_eq!(sent["stream"], true);
        assert_eq!(sent["model"], "claude-test");
        assert_eq!(
            sent["system"],
            json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(sent["tools"][0].get("cache_control"), None);
        assert_eq!(sent["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
        assert_eq!(sent["tool_choice"], json!({"type": "any"}));
        assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 2000}));
        assert_eq!(sent.get("temperature"), None, "thinking refuses a temperature");
        assert_eq!(sent["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(
            sent["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "read /a"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look at the file.", "signature": "sig=="},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "/a"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "list", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\tx"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "a"},
                ]},
            ])
        );
    }

    #[test]
    fn redacted_thinking_goes_back_unchanged() {
        let step = sse(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "opaque=="}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_r", "name": "list", "input": {}}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
            json!({"type": "message_stop"}),
        ]);
        let (m, _) = model(vec![(200, &step)], Some(1024));
        let events = collect(&m, &ModelRequest::default());
        assert!(events.iter().all(|e| !matches!(e, Ok(ModelEvent::ReasoningDelta(_)))));
        let call = ModelToolCall {
            id: "toolu_r".into(),
            name: "list".into(),
            arguments: json!({}).into(),
        };
        let next = ModelRequest {
            messages: vec![
                ModelMessage::User { content: "go".into() },
                ModelMessage::Assistant { content: String::new(), tool_calls: vec![call] },
            ],
            ..Default::default()
        };
        let body = m.request_body(&next);
        assert_eq!(
            body["messages"][1]["content"][0],
            json!({"type": "redacted_thinking", "data": "opaque=="})
        );
        assert_eq!(body["thinking"]["budget_tokens"], 1024);
    }

    #[test]
    fn a_tool_loop_whose_thinking_was_lost_is_continued_without_thinking() {
        let (m, http) = model(vec![(200, "")], Some(2000));
        let req = ModelRequest {
            messages: vec![
                ModelMessage::User { content: "go".into() },
                ModelMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ModelToolCall {
                        id: "toolu_before_restart".into(),
                        name: "list".into(),
                        arguments: json!({}).into(),
                    }],
                },
                ModelMessage::Tool {
                    tool_call_id: "toolu_before_restart".into(),
                    tool_name: "list".into(),
                    content: "a".into(),
                    images: Vec::new(),
                },
            ],
            ..Default::default()
        };
        collect(&m, &req);
        let sent: Value =
            serde_json::from_slice(&http.seen.borrow()[0].body.as_ref().unwrap().to_vec()).unwrap();
        assert_eq!(sent.get("thinking"), None);
        let fresh = ModelRequest { messages: req.messages[..1].to_vec(), ..Default::default() };
        assert_eq!(m.request_body(&fresh)["thinking"]["budget_tokens"], 2000);
    }

    #[test]
    fn errors_become_model_errors() {
        let err = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#;
        let (m, _) = model(vec![(400, err)], None);
        let events = collect(&m, &ModelRequest::default());
        assert_eq!(
            events[0].as_ref().unwrap_err().to_string(),
            "The model request failed with HTTP 400: max_tokens: too big"
        );
        let overloaded = sse(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]);
        let (m, _) = model(vec![(200, &overloaded)], None);
        let events = collect(&m, &ModelRequest::default());
        assert_eq!(events, vec![Err(ModelError::Transient("Overloaded".into()))]);
        assert!(events[0].as_ref().unwrap_err().is_retryable());
        let (m, _) = model(
            vec![(
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            )],
            None,
        );
        let e = collect(&m, &ModelRequest::default()).remove(0).unwrap_err();
        assert!(e.is_retryable(), "{e}");
        let cut = sse(&[json!({"type": "message_start", "message": {"usage": {}}})]);
        let (m, _) = model(vec![(200, &cut)], None);
        let e = collect(&m, &ModelRequest::default()).remove(0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "The model reported an error: the stream ended before message_stop"
        );
    }
}
