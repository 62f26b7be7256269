//! The OpenAI Chat Completions provider (streaming). The same wire format is served by OpenAI,
//! Workers AI's OpenAI-compatible endpoint, Ollama, vLLM and most gateways, so one provider
//! covers them all.

use std::rc::Rc;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use super::stream::{decoded, post_for_events};
use super::{
    FinishReason, Model, ModelError, ModelEvent, ModelMessage, ModelRequest, ModelStream,
    ToolArguments, Usage,
};
use crate::platform::sse::SseParser;
use crate::platform::HttpClient;

/// Where and how to reach an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL including the version segment, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; empty sends none.
    pub api_key: String,
    /// The model name, e.g. `gpt-4o-mini`.
    pub model: String,
}

/// A streaming Chat Completions client.
pub struct OpenAiChatModel {
    config: OpenAiConfig,
    http: Rc<dyn HttpClient>,
}

impl OpenAiChatModel {
    /// A client for `config`, fetching through `http`.
    pub fn new(config: OpenAiConfig, http: Rc<dyn HttpClient>) -> Self {
        Self { config, http }
    }

    /// The JSON body of a streaming request, as sent on the wire.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        Self::chat_body(&self.config.model, request)
    }

    /// The Chat Completions body for `model`, also the shape of the Workers AI binding's inputs.
    pub fn chat_body(model: &str, request: &ModelRequest) -> Value {
        serde_json::to_value(WireRequest::new(model, request)).unwrap_or(Value::Null)
    }

    /// The body as bytes, serialized straight from the request (no JSON tree in between) in
    /// fixed-size pieces, so a large tool argument in the history is written once, in
    /// pieces, not again in a tree nor in one block of its size.
    pub fn request_bytes(
        &self,
        request: &ModelRequest,
    ) -> Result<crate::platform::RequestBody, serde_json::Error> {
        crate::protocol::json::to_body(&WireRequest::new(&self.config.model, request))
    }
}

/// A Chat Completions request body, borrowing from the [`ModelRequest`].
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<WireTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<WireResponseFormat<'a>>,
    stream: bool,
    stream_options: StreamOptions,
}

/// `{type: "json_schema", json_schema: {name, schema, strict: false}}`: not strict, as strict
/// mode refuses schemas without `additionalProperties: false` everywhere.
#[derive(Serialize)]
struct WireResponseFormat<'a> {
    r#type: &'static str,
    json_schema: WireJsonSchema<'a>,
}

#[derive(Serialize)]
struct WireJsonSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// One message in the provider's shape.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    /// Tool results' images, as a user message of parts.
    #[serde(rename = "user")]
    UserParts {
        content: Vec<WirePart<'a>>,
    },
    Assistant {
        /// `null` for a message that only calls tools, as OpenAI sends it.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A part of a user message with images.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart<'a> {
    Text { text: String },
    ImageUrl { image_url: DataUrl<'a> },
}

/// `{"url": "data:<type>;base64,<data>"}`, written straight from the image (no copy).
struct DataUrl<'a>(&'a super::ImagePart);

impl Serialize for DataUrl<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        let url = format_args!("data:{};base64,{}", self.0.media_type, self.0.data);
        map.serialize_entry("url", &url)?;
        map.end()
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireCall<'a>,
}

#[derive(Serialize)]
struct WireCall<'a> {
    name: &'a str,
    arguments: ArgumentsText<'a>,
}

/// Tool-call arguments, sent as JSON text (a string) as the API wants: the history's text
/// as it is, so a large argument is not first serialized again for the request.
struct ArgumentsText<'a>(&'a ToolArguments);

impl Serialize for ArgumentsText<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.text())
    }
}

impl<'a> WireRequest<'a> {
    fn new(model: &'a str, request: &'a ModelRequest) -> Self {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(WireMessage::System { content: &request.system });
        }
        push_messages(&mut messages, &request.messages);
        let tools = (!request.tools.is_empty()).then(|| {
            request
                .tools
                .iter()
                .map(|t| WireTool {
                    r#type: "function",
                    function: WireFunction {
                        name: &t.name,
                        description: &t.description,
                        parameters: &t.input_schema,
                    },
                })
                .collect()
        });
        WireRequest {
            model,
            messages,
            tool_choice: tools.as_ref().and(request.tool_choice.as_deref()),
            tools,
            max_tokens: request.max_output_tokens,
            temperature: request.temperature,
            response_format: request.response_format.as_ref().map(|f| WireResponseFormat {
                r#type: "json_schema",
                json_schema: WireJsonSchema { name: &f.name, schema: &f.schema, strict: false },
            }),
            stream: true,
            stream_options: StreamOptions { include_usage: true },
        }
    }
}

/// Appends `messages`, each run of tool results followed by one user message holding their
/// images (OpenAI tool messages carry text only, and nothing may come between a call's
/// results).
fn push_messages<'a>(out: &mut Vec<WireMessage<'a>>, messages: &'a [ModelMessage]) {
    let mut parts = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        out.push(WireMessage::from(m));
        if let ModelMessage::Tool { tool_call_id, images, .. } = m {
            for image in images {
                parts
                    .push(WirePart::Text { text: format!("Image from tool call {tool_call_id}:") });
                parts.push(WirePart::ImageUrl { image_url: DataUrl(image) });
            }
        }
        let run_ends = !matches!(messages.get(i + 1), Some(ModelMessage::Tool { .. }));
        if run_ends && !parts.is_empty() {
            out.push(WireMessage::UserParts { content: std::mem::take(&mut parts) });
        }
    }
}

impl<'a> From<&'a ModelMessage> for WireMessage<'a> {
    fn from(m: &'a ModelMessage) -> Self {
        match m {
            ModelMessage::System { content } => WireMessage::System { content },
            ModelMessage::User { content } => WireMessage::User { content },
            ModelMessage::Assistant { content, tool_calls } => WireMessage::Assistant {
                content: (!content.is_empty() || tool_calls.is_empty()).then_some(content.as_str()),
                tool_calls: tool_calls
                    .iter()
                    .map(|c| WireToolCall {
                        id: &c.id,
                        r#type: "function",
                        function: WireCall {
                            name: &c.name,
                            arguments: ArgumentsText(&c.arguments),
                        },
                    })
                    .collect(),
            },
            ModelMessage::Tool { tool_call_id, content, .. } => {
                WireMessage::Tool { tool_call_id, content }
            }
        }
    }
}

#[async_trait(?Send)]
impl Model for OpenAiChatModel {
    fn id(&self) -> &str {
        &self.config.model
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let url = format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'));
        let body = self.request_bytes(request).map_err(|e| ModelError::Encode(e.to_string()))?;
        let mut headers = Vec::new();
        if !self.config.api_key.is_empty() {
            headers.push(("authorization".to_owned(), format!("Bearer {}", self.config.api_key)));
        }
        let response = post_for_events(self.http.as_ref(), url, headers, body).await?;
        Ok(decoded(response.body, ChunkDecoder::new()))
    }
}

/// Whether an `error` object in the stream says the failure is temporary: a retryable HTTP
/// status as its `code` (vLLM, LiteLLM and other gateways put the status there), or a `type`
/// or `code` naming a server error, an overload or a rate limit (OpenAI's `server_error`,
/// Anthropic-style names from gateways).
fn is_temporary_stream_error(err: &Value) -> bool {
    let code = err.get("code");
    let status = code.and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()));
    if status.is_some_and(|s| matches!(s, 408 | 409 | 429 | 500..=599)) {
        return true;
    }
    ["type", "code"].iter().filter_map(|k| err.get(*k).and_then(Value::as_str)).any(|name| {
        matches!(
            name,
            "server_error"
                | "rate_limit_exceeded"
                | "rate_limit_error"
                | "overloaded_error"
                | "api_error"
                | "service_unavailable"
        )
    })
}

/// Decoding state for one streamed response.
#[derive(Default)]
pub struct ChunkDecoder {
    parser: SseParser,
    /// Tool-call indexes already announced with `ToolCallStart`.
    started: Vec<usize>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
}

impl ChunkDecoder {
    /// A decoder at the start of a response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes a chunk of response bytes into events.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<ModelEvent>, ModelError> {
        let mut out = Vec::new();
        for ev in self.parser.push(bytes) {
            self.data(ev.data, &mut out)?;
        }
        Ok(out)
    }

    /// Ends the stream: flushes a trailing event and emits the final `Finish`.
    pub fn finish(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        let mut out = Vec::new();
        if let Some(ev) = self.parser.finish() {
            self.data(ev.data, &mut out)?;
        }
        let reason = self.finish.unwrap_or(if self.started.is_empty() {
            FinishReason::Other
        } else {
            FinishReason::ToolCalls
        });
        out.push(ModelEvent::Finish { reason, usage: self.usage.take() });
        self.done = true;
        Ok(out)
    }

    fn data(&mut self, data: String, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let trimmed = data.trim();
        if trimmed.is_empty() || trimmed == "[DONE]" {
            return Ok(());
        }
        let parsed = if trimmed.len() == data.len() {
            parse_chunk(data)
        } else {
            parse_chunk(trimmed.to_owned())
        };
        let mut v = parsed.map_err(|e| ModelError::UnreadableChunk(e.to_string()))?;
        if let Some(err) = v.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            return Err(if is_temporary_stream_error(err) {
                ModelError::Transient(msg)
            } else {
                ModelError::Reported(msg)
            });
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(Usage {
                input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
                output_tokens: u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
            });
        }
        let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) else {
            return Ok(());
        };
        for choice in choices {
            if let Some(delta) = choice.get_mut("delta") {
                for key in ["reasoning_content", "reasoning"] {
                    if let Some(r) =
                        delta.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
                    {
                        out.push(ModelEvent::ReasoningDelta(r.to_owned()));
                    }
                }
                if let Some(t) =
                    delta.get("content").and_then(Value::as_str).filter(|s| !s.is_empty())
                {
                    out.push(ModelEvent::TextDelta(t.to_owned()));
                }
                if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
                    for (pos, call) in calls.iter_mut().enumerate() {
                        self.tool_call(pos, call, out);
                    }
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(match reason {
                    "stop" => FinishReason::Stop,
                    "length" => FinishReason::Length,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "content_filter" => FinishReason::ContentFilter,
                    _ => FinishReason::Other,
                });
            }
        }
        Ok(())
    }

    /// Announces a call the first time its index is seen, and moves its argument text out of
    /// the parsed chunk (a large argument is not copied).
    fn tool_call(&mut self, pos: usize, call: &mut Value, out: &mut Vec<ModelEvent>) {
        let index = call.get("index").and_then(Value::as_u64).map(|i| i as usize).unwrap_or(pos);
        let function = call.get("function");
        if !self.started.contains(&index) {
            let name = function.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or("");
            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                return;
            }
            self.started.push(index);
            let id = if id.is_empty() { format!("call_{index}") } else { id.to_owned() };
            out.push(ModelEvent::ToolCallStart { index, id, name: name.to_owned() });
        }
        if let Some(Value::String(args)) = call.pointer_mut("/function/arguments") {
            if !args.is_empty() {
                out.push(ModelEvent::ToolCallDelta { index, arguments: std::mem::take(args) });
            }
        }
    }
}

/// Parses one chunk's JSON. A chunk can carry a whole file in a tool call's argument
/// string, which [`crate::protocol::json::from_string_exact`] unescapes in place, in the
/// chunk's own buffer, rather than through serde_json's doubling scratch buffer.
fn parse_chunk(data: String) -> Result<Value, serde_json::Error> {
    crate::protocol::json::from_string_exact(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelToolCall, ResponseFormat};
    use crate::platform::{HttpError, HttpRequest, HttpResponse};
    use crate::tools::definition::ToolDefinition;
    use futures::StreamExt;

    #[test]
    fn a_large_chunk_parses_to_the_same_value_with_its_arguments_unescaped_apart() {
        let content = "line \"quoted\" \\ tab\t é 😀 \u{1}\n".repeat(4000);
        let args = serde_json::to_string(&json!({"path": "/a", "content": content})).unwrap();
        let chunk = json!({"id": "x", "choices": [
            {"index": 0, "delta": {"content": "hi", "tool_calls": [
                {"index": 0, "id": "c0", "function": {"name": "write", "arguments": args}},
                {"index": 1, "function": {"arguments": {"not": "a string"}}},
                {"index": 2, "function": {"arguments": args.clone() + "\\u00e9 \\ud83d\\ude00"}},
            ]}},
            {"index": 1, "delta": {}},
        ], "usage": null});
        // serde_json writes é and 😀 as themselves; an ASCII-only writer escapes them.
        let plain = serde_json::to_string(&chunk).unwrap();
        let ascii = crate::protocol::json::ascii_escaped(&plain);
        for text in [plain, ascii] {
            assert!(text.len() > 64 * 1024);
            assert_eq!(
                parse_chunk(text.clone()).unwrap(),
                serde_json::from_str::<Value>(&text).unwrap()
            );
        }
        let lone = r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"\ud800x"}}]}}],"pad":""#
            .to_owned()
            + &"p".repeat(64 * 1024)
            + "\"}";
        assert_eq!(
            parse_chunk(lone.clone()).map_err(|e| e.to_string()),
            serde_json::from_str::<Value>(&lone).map_err(|e| e.to_string())
        );
        assert!(parse_chunk("[".repeat(64 * 1024 + 1)).is_err());
    }
    use serde_json::json;
    use std::cell::RefCell;

    /// Replays one canned HTTP response, split into the given chunks, and records the request.
    struct Canned {
        status: u16,
        chunks: Vec<Vec<u8>>,
        seen: RefCell<Option<HttpRequest>>,
    }

    #[async_trait(?Send)]
    impl HttpClient for Canned {
        async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
            *self.seen.borrow_mut() = Some(req);
            let chunks: Vec<Result<Vec<u8>, HttpError>> =
                self.chunks.iter().cloned().map(Ok).collect();
            Ok(HttpResponse {
                status: self.status,
                headers: vec![],
                body: futures::stream::iter(chunks).boxed_local(),
            })
        }
    }

    fn model(status: u16, body: &str, chunk: usize) -> (OpenAiChatModel, Rc<Canned>) {
        let canned = Rc::new(Canned {
            status,
            chunks: body.as_bytes().chunks(chunk).map(<[u8]>::to_vec).collect(),
            seen: RefCell::new(None),
        });
        let m = OpenAiChatModel::new(
            OpenAiConfig {
                base_url: "http://x/v1/".into(),
                api_key: "k".into(),
                model: "m".into(),
            },
            canned.clone(),
        );
        (m, canned)
    }

    fn collect(m: &OpenAiChatModel, req: &ModelRequest) -> Vec<Result<ModelEvent, ModelError>> {
        futures::executor::block_on(async {
            match m.stream(req).await {
                Ok(s) => s.collect().await,
                Err(e) => vec![Err(e)],
            }
        })
    }

    #[test]
    fn text_and_parallel_tool_calls_stream_in_order() {
        let body = concat!(
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":{\"name\":\"list\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"/a\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":5}}\n\n",
            "data: [DONE]\n\n"
        );
        let (m, _) = model(200, body, 7);
        let events: Vec<ModelEvent> =
            collect(&m, &ModelRequest::default()).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            events,
            vec![
                ModelEvent::TextDelta("Hel".into()),
                ModelEvent::TextDelta("lo".into()),
                ModelEvent::ToolCallStart { index: 0, id: "call_a".into(), name: "read".into() },
                ModelEvent::ToolCallDelta { index: 0, arguments: "{\"pa".into() },
                ModelEvent::ToolCallStart { index: 1, id: "call_b".into(), name: "list".into() },
                ModelEvent::ToolCallDelta { index: 1, arguments: "{}".into() },
                ModelEvent::ToolCallDelta { index: 0, arguments: "th\":\"/a\"}".into() },
                ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: Some(Usage { input_tokens: 12, output_tokens: 5 })
                },
            ]
        );
    }

    #[test]
    fn a_response_format_is_a_json_schema_format() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let format = ResponseFormat { name: "browser_extract".into(), schema: schema.clone() };
        let req = ModelRequest { response_format: Some(format), ..Default::default() };
        let body = OpenAiChatModel::chat_body("m", &req);
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "browser_extract", "schema": schema, "strict": false}})
        );
        assert!(OpenAiChatModel::chat_body("m", &ModelRequest::default())
            .get("response_format")
            .is_none());
    }

    #[test]
    fn tool_images_follow_the_run_of_tool_results_as_a_user_message() {
        let req = ModelRequest { messages: crate::model::screenshot_step(), ..Default::default() };
        let body = OpenAiChatModel::chat_body("m", &req);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
        assert_eq!(
            body["messages"][2],
            json!({"role": "tool", "tool_call_id": "c1", "content": "result c1"})
        );
        assert_eq!(
            body["messages"][4]["content"],
            json!([
                {"type": "text", "text": "Image from tool call c1:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ])
        );
    }

    #[test]
    fn request_body_carries_history_tools_and_streaming_flags() {
        let (m, canned) = model(200, "data: [DONE]\n\n", 100);
        let req = ModelRequest {
            system: "be brief".into(),
            messages: vec![
                ModelMessage::User { content: "hi".into() },
                ModelMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ModelToolCall {
                        id: "c1".into(),
                        name: "read".into(),
                        arguments: json!({"path": "/a"}).into(),
                    }],
                },
                ModelMessage::Tool {
                    tool_call_id: "c1".into(),
                    tool_name: "read".into(),
                    content: "1\tx".into(),
                    images: Vec::new(),
                },
            ],
            tools: vec![ToolDefinition {
                name: "read".into(),
                description: "Read".into(),
                input_schema: json!({"type": "object"}),
                output_schema: None,
            }],
            ..Default::default()
        };
        let events = collect(&m, &req);
        assert!(matches!(
            events.last(),
            Some(Ok(ModelEvent::Finish { reason: FinishReason::Other, .. }))
        ));
        let seen = canned.seen.borrow().clone().unwrap();
        assert_eq!(seen.url, "http://x/v1/chat/completions");
        assert!(seen.headers.contains(&("authorization".into(), "Bearer k".into())));
        let body: Value = serde_json::from_slice(&seen.body.unwrap().to_vec()).unwrap();
        assert_eq!(body["stream"], true);
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"/a\"}"
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "1\tx"})
        );
        assert_eq!(body["tools"][0]["function"]["name"], "read");
    }

    #[test]
    fn http_errors_and_stream_errors_become_model_errors() {
        let (m, _) = model(401, "{\"error\":{\"message\":\"bad key\"}}", 5);
        let events = collect(&m, &ModelRequest::default());
        assert_eq!(
            events,
            vec![Err(ModelError::Status {
                status: 401,
                message: "bad key".into(),
                retry_after: None
            })]
        );
        let text = events[0].as_ref().unwrap_err().to_string();
        assert_eq!(text, "The model request failed with HTTP 401: bad key");

        let (m, _) = model(200, "data: {\"error\":{\"message\":\"overloaded\"}}\n\n", 9);
        let events = collect(&m, &ModelRequest::default());
        assert_eq!(events, vec![Err(ModelError::Reported("overloaded".into()))]);
        let text = events[0].as_ref().unwrap_err().to_string();
        assert_eq!(text, "The model reported an error: overloaded");

        // A stream error that says it is temporary (a status, or a server/overload name) is
        // transient; one that does not is only reported.
        for err in [
            r#"{"message":"busy","type":"server_error"}"#,
            r#"{"message":"busy","code":503}"#,
            r#"{"message":"busy","code":"429"}"#,
            r#"{"message":"busy","code":"rate_limit_exceeded"}"#,
        ] {
            let (m, _) = model(200, &format!("data: {{\"error\":{err}}}\n\n"), 9);
            let events = collect(&m, &ModelRequest::default());
            assert_eq!(events, vec![Err(ModelError::Transient("busy".into()))], "{err}");
        }
        for err in
            [r#"{"message":"no","type":"invalid_request_error"}"#, r#"{"message":"no","code":400}"#]
        {
            let (m, _) = model(200, &format!("data: {{\"error\":{err}}}\n\n"), 9);
            let events = collect(&m, &ModelRequest::default());
            assert_eq!(events, vec![Err(ModelError::Reported("no".into()))], "{err}");
        }

        let (m, _) = model(200, "data: {not json\n\n", 9);
        let events = collect(&m, &ModelRequest::default());
        let Err(e @ ModelError::UnreadableChunk(_)) = &events[0] else { panic!("{events:?}") };
        assert!(e.to_string().starts_with("The model sent an unreadable stream chunk: "));
    }

    #[test]
    fn transport_failures_keep_their_cause() {
        let url = "http://m/v1/chat/completions".to_owned();
        let e = ModelError::Unreachable { url, source: HttpError::Connect("refused".into()) };
        assert_eq!(
            e.to_string(),
            "Could not reach the model at http://m/v1/chat/completions: refused"
        );
        assert!(std::error::Error::source(&e).is_some());
        let e = ModelError::StreamBroken(HttpError::Body("reset".into()));
        assert_eq!(e.to_string(), "The model stream broke off: reset");
        assert!(e.is_transient() && !e.is_retryable(), "a broken stream is recovered, not retried");
        assert_eq!(ModelError::other("no script").to_string(), "no script");
    }
}
