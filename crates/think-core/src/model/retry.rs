//! Retries for model calls, with the AI SDK's policy (`retryWithExponentialBackoff`
//! RespectingRetryHeaders in `ai`): up to 2 retries, waiting 2 s then 4 s, or what the
//! answer's `retry-after-ms` / `retry-after` header asks when that is under 60 s. Retried: HTTP
//! 408, 409, 429 and 5xx (Anthropic's 529 included) and stream errors the provider calls
//! temporary, when they arrive before any output. The waiting goes through the agent's
//! [`Clock`], so host tests drive it without sleeping and an aborted turn stops it.

use std::rc::Rc;

use async_trait::async_trait;
use futures::StreamExt;

use super::{Model, ModelError, ModelRequest, ModelStream};
use crate::platform::number::parse_f64;
use crate::platform::Clock;

/// How often and how long to retry (the AI SDK's `maxRetries` and backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 turns retrying off.
    pub max_retries: u32,
    /// The wait before the first retry, in ms.
    pub initial_delay_ms: u64,
    /// Each further wait is the previous one times this.
    pub backoff_factor: u64,
}

impl Default for RetryPolicy {
    /// The AI SDK's defaults: `maxRetries: 2`, `initialDelayInMs: 2000`, `backoffFactor: 2`.
    fn default() -> Self {
        Self { max_retries: 2, initial_delay_ms: 2000, backoff_factor: 2 }
    }
}

/// The wait an HTTP answer asked for, as read from its headers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryAfter {
    /// Wait this many ms (`retry-after-ms`, or `retry-after` in seconds).
    Delay(f64),
    /// Wait until this time, in ms since the epoch (`retry-after` as an HTTP date).
    At(f64),
}

impl RetryAfter {
    /// Reads `retry-after-ms`, then `retry-after` (seconds or an IMF-fixdate), from `headers`.
    pub fn from_headers(headers: &[(String, String)]) -> Option<Self> {
        let get = |name: &str| {
            headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim())
        };
        if let Some(ms) = get("retry-after-ms").and_then(parse_f64) {
            return Some(RetryAfter::Delay(ms));
        }
        let value = get("retry-after")?;
        match parse_f64(value) {
            Some(seconds) => Some(RetryAfter::Delay(seconds * 1000.0)),
            None => http_date_ms(value).map(RetryAfter::At),
        }
    }

    /// The wait in ms from `now_ms`.
    fn delay_ms(self, now_ms: f64) -> f64 {
        match self {
            RetryAfter::Delay(ms) => ms,
            RetryAfter::At(at) => at - now_ms,
        }
    }
}

/// An IMF-fixdate (`Wed, 21 Oct 2015 07:28:00 GMT`) as ms since the epoch.
fn http_date_ms(s: &str) -> Option<f64> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else { return None };
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [h, m, sec] = hms.as_slice() else { return None };
    // Days from 1970-01-01 to the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + m * 60 + sec) * 1000) as f64)
}

impl ModelError {
    /// Whether another attempt may succeed: the AI SDK's retryable statuses (408, 409, 429,
    /// 5xx), a temporary stream error, or no answer at all.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => matches!(status, 408 | 409 | 429 | 500..),
            ModelError::Transient(_) => true,
            _ => false,
        }
    }

    /// The wait the failed answer asked for, if any.
    fn retry_after(&self) -> Option<RetryAfter> {
        match self {
            ModelError::Status { retry_after, .. } => *retry_after,
            ModelError::RetriesExhausted { last, .. } => last.retry_after(),
            _ => None,
        }
    }

    /// Whether a turn whose answer had begun may recover from this error by continuing
    /// later: a retryable one (also after the retries ran out) or a stream that broke off.
    pub fn is_transient(&self) -> bool {
        match self {
            ModelError::StreamBroken(_) => true,
            ModelError::RetriesExhausted { last, .. } => last.is_transient(),
            _ => self.is_retryable(),
        }
    }

    /// The wait in ms the failed answer asked for (none, or one already past, is `None`).
    pub fn retry_after_ms(&self, now_ms: f64) -> Option<u64> {
        let ms = self.retry_after()?.delay_ms(now_ms);
        (ms >= 0.0).then(|| ms.ceil() as u64)
    }
}

/// The wait before the next attempt: the answer's own wait when it is sane (0 to 60 s, or
/// shorter than the backoff), else the backoff.
fn wait_ms(error: &ModelError, backoff_ms: u64, now_ms: f64) -> u64 {
    match error.retry_after().map(|r| r.delay_ms(now_ms)) {
        Some(ms) if ms >= 0.0 && (ms < 60_000.0 || ms < backoff_ms as f64) => ms.ceil() as u64,
        _ => backoff_ms,
    }
}

/// Wraps a [`Model`] so that failed calls are retried by [`RetryPolicy`]. A call counts as
/// failed when it errs before its first event; once output has streamed, errors pass through.
pub struct Retrying {
    inner: Rc<dyn Model>,
    clock: Rc<dyn Clock>,
    policy: RetryPolicy,
}

impl Retrying {
    /// `inner` with the AI SDK's default policy, waiting on `clock`.
    pub fn new(inner: Rc<dyn Model>, clock: Rc<dyn Clock>) -> Self {
        Self { inner, clock, policy: RetryPolicy::default() }
    }

    /// The same wrapper with another policy.
    pub fn with_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }
}

#[async_trait(?Send)]
impl Model for Retrying {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let mut backoff = self.policy.initial_delay_ms;
        let mut attempts = 1;
        loop {
            let error = match self.inner.stream(request).await {
                Err(e) => e,
                Ok(mut stream) => match stream.next().await {
                    Some(Err(e)) => e,
                    first => return Ok(futures::stream::iter(first).chain(stream).boxed_local()),
                },
            };
            let retry = error.is_retryable() && attempts <= self.policy.max_retries;
            if !retry {
                return Err(if attempts == 1 {
                    error
                } else {
                    ModelError::RetriesExhausted { attempts, last: Box::new(error) }
                });
            }
            let wait = wait_ms(&error, backoff, self.clock.now_ms());
            crate::platform::log(&format!(
                "think-rs: model call {attempts} failed ({error}); retrying in {wait} ms"
            ));
            self.clock.sleep(wait).await;
            backoff = backoff.saturating_mul(self.policy.backoff_factor);
            attempts += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FinishReason, ModelEvent};
    use std::cell::RefCell;

    /// A clock whose sleeps return at once and are recorded.
    #[derive(Default)]
    struct SleepLog(RefCell<Vec<u64>>);

    #[async_trait(?Send)]
    impl Clock for SleepLog {
        fn now_ms(&self) -> f64 {
            1_445_412_480_000.0 // Wed, 21 Oct 2015 07:28:00 GMT
        }
        async fn sleep(&self, ms: u64) {
            self.0.borrow_mut().push(ms);
        }
        fn random_bytes(&self, buf: &mut [u8]) {
            buf.fill(7);
        }
    }

    /// What one call yields: its events, or the error `stream` itself returns.
    type Events = Vec<Result<ModelEvent, ModelError>>;
    type Outcome = Result<Events, ModelError>;

    /// Answers each call with the next scripted outcome and counts the calls.
    struct Script(RefCell<Vec<Outcome>>);

    #[async_trait(?Send)]
    impl Model for Script {
        fn id(&self) -> &str {
            "script"
        }
        async fn stream(&self, _: &ModelRequest) -> Result<ModelStream, ModelError> {
            let next = self.0.borrow_mut().remove(0);
            next.map(|events| futures::stream::iter(events).boxed_local())
        }
    }

    fn status(code: u16, wait_ms: Option<f64>) -> ModelError {
        let retry_after = wait_ms.map(RetryAfter::Delay);
        ModelError::Status { status: code, message: "busy".into(), retry_after }
    }

    fn ok() -> Events {
        vec![
            Ok(ModelEvent::TextDelta("hi".into())),
            Ok(ModelEvent::Finish { reason: FinishReason::Stop, usage: None }),
        ]
    }

    fn run(script: Vec<Outcome>) -> (Outcome, Vec<u64>, usize) {
        let left = Rc::new(Script(RefCell::new(script)));
        let clock = Rc::new(SleepLog::default());
        let model = Retrying::new(left.clone(), clock.clone());
        let out = futures::executor::block_on(async {
            match model.stream(&ModelRequest::default()).await {
                Ok(s) => Ok(s.collect::<Vec<_>>().await),
                Err(e) => Err(e),
            }
        });
        let sleeps = clock.0.borrow().clone();
        let remaining = left.0.borrow().len();
        (out, sleeps, remaining)
    }

    #[test]
    fn a_429_with_retry_after_is_retried_after_that_wait() {
        let (out, sleeps, _) = run(vec![Err(status(429, Some(1500.0))), Ok(ok())]);
        assert_eq!(out.unwrap(), ok());
        assert_eq!(sleeps, [1500]);
    }

    #[test]
    fn backoff_is_2s_then_4s_and_the_third_failure_is_reported() {
        let (out, sleeps, remaining) = run(vec![
            Err(status(500, None)),
            Err(status(503, None)),
            Err(status(529, None)),
            Ok(ok()),
        ]);
        assert_eq!(sleeps, [2000, 4000]);
        assert_eq!(remaining, 1, "no fourth call");
        let e = out.unwrap_err();
        assert_eq!(
            e.to_string(),
            "Failed after 3 attempts. Last error: The model request failed with HTTP 529: busy"
        );
    }

    #[test]
    fn client_errors_are_not_retried() {
        let (out, sleeps, remaining) = run(vec![Err(status(400, None)), Ok(ok())]);
        assert_eq!(out.unwrap_err(), status(400, None));
        assert!(sleeps.is_empty());
        assert_eq!(remaining, 1);
        let (out, _, _) = run(vec![Err(status(408, None)), Err(status(401, None))]);
        assert!(matches!(out, Err(ModelError::RetriesExhausted { attempts: 2, .. })));
    }

    #[test]
    fn a_temporary_stream_error_before_output_is_retried_but_not_after() {
        let overloaded = || Err(ModelError::Transient("Overloaded".into()));
        let (out, sleeps, _) = run(vec![Ok(vec![overloaded()]), Ok(ok())]);
        assert_eq!(out.unwrap(), ok());
        assert_eq!(sleeps, [2000]);
        let late = vec![Ok(ModelEvent::TextDelta("par".into())), overloaded()];
        let (out, sleeps, _) = run(vec![Ok(late.clone()), Ok(ok())]);
        assert_eq!(out.unwrap(), late);
        assert!(sleeps.is_empty());
    }

    #[test]
    fn unreasonable_waits_fall_back_to_the_backoff() {
        let (_, sleeps, _) = run(vec![Err(status(429, Some(120_000.0))), Ok(ok())]);
        assert_eq!(sleeps, [2000]);
    }

    /// A scripted HTTP answer: status, headers, body.
    type Answer = (u16, Vec<(String, String)>, &'static str);

    /// Answers each request with the next scripted answer.
    struct Http(RefCell<Vec<Answer>>);

    #[async_trait(?Send)]
    impl crate::platform::HttpClient for Http {
        async fn fetch(
            &self,
            _: crate::platform::HttpRequest,
        ) -> Result<crate::platform::HttpResponse, crate::platform::HttpError> {
            let (status, headers, body) = self.0.borrow_mut().remove(0);
            let chunk = Ok(body.as_bytes().to_vec());
            Ok(crate::platform::HttpResponse {
                status,
                headers,
                body: futures::stream::iter([chunk]).boxed_local(),
            })
        }
    }

    #[test]
    fn the_openai_provider_honours_retry_after_on_a_429() {
        let header = vec![("Retry-After".to_owned(), "3".to_owned())];
        let http = Rc::new(Http(RefCell::new(vec![
            (429, header, r#"{"error":{"message":"rate limited"}}"#),
            (
                200,
                vec![],
                "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n",
            ),
        ])));
        let config = crate::model::openai::OpenAiConfig {
            base_url: "http://m/v1".into(),
            api_key: String::new(),
            model: "m".into(),
        };
        let provider = Rc::new(crate::model::openai::OpenAiChatModel::new(config, http.clone()));
        let clock = Rc::new(SleepLog::default());
        let model = Retrying::new(provider, clock.clone());
        let events = futures::executor::block_on(async {
            model.stream(&ModelRequest::default()).await.unwrap().collect::<Vec<_>>().await
        });
        assert_eq!(events[0], Ok(ModelEvent::TextDelta("ok".into())));
        assert_eq!(*clock.0.borrow(), [3000]);
        assert!(http.0.borrow().is_empty());
    }

    #[test]
    fn retry_after_headers_are_read() {
        let h = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
        assert_eq!(
            RetryAfter::from_headers(&h("Retry-After", "3")),
            Some(RetryAfter::Delay(3000.0))
        );
        assert_eq!(
            RetryAfter::from_headers(&h("retry-after-ms", "250")),
            Some(RetryAfter::Delay(250.0))
        );
        let at = RetryAfter::from_headers(&h("retry-after", "Wed, 21 Oct 2015 07:28:05 GMT"));
        assert_eq!(at, Some(RetryAfter::At(1_445_412_485_000.0)));
        assert_eq!(at.unwrap().delay_ms(SleepLog::default().now_ms()), 5000.0);
        assert_eq!(RetryAfter::from_headers(&h("retry-after", "soon")), None);
        assert_eq!(RetryAfter::from_headers(&[]), None);
    }
}
