//! Turns a response body into a [`ModelStream`] through a provider's decoder, so each provider
//! only says how bytes become events.

use std::collections::VecDeque;

use futures::stream::LocalBoxStream;
use futures::StreamExt;
use serde_json::Value;

use super::retry::RetryAfter;
use super::{ModelError, ModelEvent, ModelStream};
use crate::platform::{HttpClient, HttpError, HttpRequest, HttpResponse, RequestBody};

/// POSTs `body` (JSON bytes, in pieces) to `url`, asking for an event stream, with the provider's `headers`.
/// A non-2xx answer becomes [`ModelError::Status`] with the provider's message and wait.
pub async fn post_for_events(
    http: &dyn HttpClient,
    url: String,
    extra_headers: Vec<(String, String)>,
    body: RequestBody,
) -> Result<HttpResponse, ModelError> {
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), "text/event-stream".to_owned()),
    ];
    headers.extend(extra_headers);
    let request = HttpRequest {
        method: "POST".into(),
        url: url.clone(),
        headers,
        body: Some(body),
        ..Default::default()
    };
    let response =
        http.fetch(request).await.map_err(|source| ModelError::Unreachable { url, source })?;
    if (200..300).contains(&response.status) {
        return Ok(response);
    }
    let status = response.status;
    let retry_after = RetryAfter::from_headers(&response.headers);
    let text = response.bytes().await.unwrap_or_default();
    Err(ModelError::Status { status, message: error_message(&text), retry_after })
}

/// The `error.message` of an error body (OpenAI's and Anthropic's shape), or the body itself.
fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("message"))
                .and_then(|m| m.as_str().map(str::to_owned))
        })
        .unwrap_or_else(|| text.chars().take(500).collect())
}

/// A provider's incremental decoder of its streamed answer.
pub trait Decode {
    /// Decodes a chunk of body bytes into events.
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<ModelEvent>, ModelError>;
    /// The body ended: flushes what is left and emits the final `Finish`.
    fn finish(&mut self) -> Result<Vec<ModelEvent>, ModelError>;
}

impl Decode for super::openai::ChunkDecoder {
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<ModelEvent>, ModelError> {
        super::openai::ChunkDecoder::push(self, bytes)
    }
    fn finish(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        super::openai::ChunkDecoder::finish(self)
    }
}

/// The events `decoder` reads from `body`, ending after the first error.
pub fn decoded<D: Decode + 'static>(
    body: LocalBoxStream<'static, Result<Vec<u8>, HttpError>>,
    decoder: D,
) -> ModelStream {
    let state = (body, decoder, VecDeque::new(), false);
    futures::stream::unfold(state, |(mut body, mut decoder, mut queue, mut ended)| async move {
        loop {
            if let Some(item) = queue.pop_front() {
                return Some((item, (body, decoder, queue, ended)));
            }
            if ended {
                return None;
            }
            let decoded = match body.next().await {
                Some(Ok(bytes)) => decoder.push(&bytes),
                Some(Err(e)) => Err(ModelError::StreamBroken(e)),
                None => {
                    ended = true;
                    decoder.finish()
                }
            };
            match decoded {
                Ok(events) => queue.extend(events.into_iter().map(Ok)),
                Err(e) => {
                    ended = true;
                    queue.push_back(Err(e));
                }
            }
        }
    })
    .boxed_local()
}
