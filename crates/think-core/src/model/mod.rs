//! The model seam: a provider-neutral request and event stream, and the `Model` trait that
//! providers implement. `openai` speaks the OpenAI Chat Completions API (OpenAI, Ollama, vLLM,
//! gateways), `anthropic` the Anthropic Messages API, `workers_ai` the Workers AI binding;
//! `retry` wraps any of them with the AI SDK's retry policy.

use async_trait::async_trait;
use futures::stream::LocalBoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::protocol::arguments::ToolArguments;
pub use crate::tools::ImagePart;

use crate::platform::HttpError;
use crate::tools::definition::ToolDefinition;

pub mod anthropic;
pub mod openai;
pub mod retry;
pub mod stream;
pub mod workers_ai;

/// One message of the conversation as a model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ModelMessage {
    /// Instructions for the whole conversation.
    System {
        /// The text.
        content: String,
    },
    /// What the user said.
    User {
        /// The text.
        content: String,
    },
    /// What the model answered, with the tools it called.
    Assistant {
        /// The text of the answer.
        content: String,
        /// The tool calls of this step, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ModelToolCall>,
    },
    /// The result of one tool call, fed back to the model.
    Tool {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The tool's name, for providers that want it.
        tool_name: String,
        /// What the model reads of the result.
        content: String,
        /// Images the result carries (a browser screenshot), for vision models; empty
        /// otherwise. They live for the rest of the turn only: the transcript keeps the text.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImagePart>,
    },
}

/// A tool call the model made, with its arguments as JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelToolCall {
    /// The provider's call id, which the result must quote.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub arguments: ToolArguments,
}

/// Everything a provider needs for one model call (one step of a turn).
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<ModelMessage>,
    /// The tools offered in this step.
    pub tools: Vec<ToolDefinition>,
    /// `None` = provider default ("auto" when tools are present).
    pub tool_choice: Option<String>,
    /// Cap on generated tokens; `None` = provider default.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature; `None` = provider default.
    pub temperature: Option<f64>,
    /// A JSON Schema the answer must follow (structured output), for providers that enforce
    /// one; the caller still validates the answer.
    pub response_format: Option<ResponseFormat>,
}

/// Structured output: the answer is one JSON value matching `schema`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseFormat {
    /// A name for the schema (OpenAI's `json_schema.name`, Anthropic's forced tool).
    pub name: String,
    /// The JSON Schema.
    pub schema: Value,
}

/// Token usage of one call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// Why a model call ended, in the AI SDK's vocabulary (the `finish` chunk carries it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The token limit cut it off.
    Length,
    /// The provider's filter stopped it.
    ContentFilter,
    /// It stopped to have tools called.
    ToolCalls,
    /// The call failed.
    Error,
    /// Any other reason, or none given.
    Other,
}

/// A streamed piece of a model's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// More answer text.
    TextDelta(String),
    /// More reasoning text, for providers that stream it.
    ReasoningDelta(String),
    /// A tool call begins; `index` identifies it among parallel calls of this step.
    ToolCallStart {
        /// The call's position among this step's calls.
        index: usize,
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More argument text for the call at `index`.
    ToolCallDelta {
        /// The call's position among this step's calls.
        index: usize,
        /// A piece of the arguments' JSON text.
        arguments: String,
    },
    /// The call ended.
    Finish {
        /// Why it ended.
        reason: FinishReason,
        /// Token usage, when the provider reports it.
        usage: Option<Usage>,
    },
}

/// Why a model call failed. The Display text is what the user sees in the turn's error.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelError {
    /// The request could not be encoded as JSON.
    Encode(String),
    /// No response from the endpoint (DNS, refused connection, unreachable network).
    Unreachable {
        /// The URL that was fetched.
        url: String,
        /// What the HTTP layer reported.
        source: HttpError,
    },
    /// The endpoint answered with a non-2xx status.
    Status {
        /// The HTTP status code.
        status: u16,
        /// The provider's error message, or the start of the body.
        message: String,
        /// The wait the answer asked for (`retry-after-ms` / `retry-after`).
        retry_after: Option<retry::RetryAfter>,
    },
    /// The stream carried an `error` object from the provider.
    Reported(String),
    /// The stream carried an error the provider calls temporary (Anthropic's
    /// `overloaded_error`, `rate_limit_error`, `api_error`); worth another attempt.
    Transient(String),
    /// Every attempt failed; `last` is the final attempt's error.
    RetriesExhausted {
        /// How many calls were made.
        attempts: u32,
        /// What the last one failed with.
        last: Box<ModelError>,
    },
    /// A stream chunk was not the JSON the protocol promises.
    UnreadableChunk(String),
    /// The response body broke off mid-stream.
    StreamBroken(HttpError),
    /// Any other failure, for [`Model`] implementations outside this crate; shown as is.
    Other(String),
}

impl ModelError {
    /// A failure described by `message` alone, for custom [`Model`]s.
    pub fn other(message: impl Into<String>) -> Self {
        ModelError::Other(message.into())
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::Encode(e) => write!(f, "Could not encode the model request: {e}"),
            ModelError::Unreachable { url, source } => {
                write!(f, "Could not reach the model at {url}: {source}")
            }
            ModelError::Status { status, message, .. } => {
                write!(f, "The model request failed with HTTP {status}: {message}")
            }
            ModelError::Reported(m) | ModelError::Transient(m) => {
                write!(f, "The model reported an error: {m}")
            }
            ModelError::RetriesExhausted { attempts, last } => {
                write!(f, "Failed after {attempts} attempts. Last error: {last}")
            }
            ModelError::UnreadableChunk(e) => {
                write!(f, "The model sent an unreadable stream chunk: {e}")
            }
            ModelError::StreamBroken(e) => write!(f, "The model stream broke off: {e}"),
            ModelError::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelError::Unreachable { source, .. } | ModelError::StreamBroken(source) => {
                Some(source)
            }
            ModelError::RetriesExhausted { last, .. } => Some(last.as_ref()),
            _ => None,
        }
    }
}

/// The event stream of one call.
pub type ModelStream = LocalBoxStream<'static, Result<ModelEvent, ModelError>>;

/// A language model that streams.
#[async_trait(?Send)]
pub trait Model {
    /// A short name for logs and metadata.
    fn id(&self) -> &str;
    /// Starts one call; the stream yields its events as they arrive.
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError>;
}

/// A step that called two tools, the first of which returned a screenshot: the providers'
/// image encoding tests share it.
#[cfg(test)]
pub(crate) fn screenshot_step() -> Vec<ModelMessage> {
    let call = |id: &str| ModelToolCall {
        id: id.into(),
        name: "browser_execute".into(),
        arguments: serde_json::json!({}).into(),
    };
    let result = |id: &str, images: Vec<ImagePart>| ModelMessage::Tool {
        tool_call_id: id.into(),
        tool_name: "browser_execute".into(),
        content: format!("result {id}"),
        images,
    };
    vec![
        ModelMessage::User { content: "look".into() },
        ModelMessage::Assistant {
            content: String::new(),
            tool_calls: vec![call("c1"), call("c2")],
        },
        result(
            "c1",
            vec![ImagePart { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() }],
        ),
        result("c2", Vec::new()),
    ]
}
