//! Compaction: when the conversation sent to the model would pass its budget, the middle of
//! it is replaced by a summary the model writes. The first messages and a recent tail stay
//! verbatim, a tool call is never parted from its result, and the stored transcript is never
//! rewritten: only what the model is sent changes. The summary is stored with how far it
//! reaches, and extended as the conversation grows instead of being written again.

use std::borrow::Cow;

use futures::StreamExt;

use super::tools::context_tools;
use super::{BlockKind, Session, TokenEstimate};
use crate::model::{
    Model, ModelError, ModelEvent, ModelMessage, ModelRequest, ModelToolCall, ToolArguments,
};
use crate::store::{SqlValue, StoreError};
use crate::tools::{ToolContext, ToolDefinition};

pub(super) const SCHEMA: &[&str] = &["CREATE TABLE IF NOT EXISTS think_context_summary \
     (id INTEGER PRIMARY KEY CHECK (id = 1), covered INTEGER NOT NULL, fingerprint TEXT NOT NULL, \
     summary TEXT NOT NULL)"];

/// The context window assumed when the app names none (`THINK_CONTEXT_WINDOW`).
pub const DEFAULT_CONTEXT_WINDOW: usize = 128_000;

/// The messages at the start of the conversation that are always sent verbatim.
pub const HEAD_MESSAGES: usize = 3;

/// The most tokens of recent messages sent verbatim after a compaction.
pub const TAIL_TOKENS: usize = 20_000;

/// The system prompt of the summarization call.
pub const SUMMARY_PROMPT: &str = "You summarize conversations so that they can continue \
without their earlier messages. Write a concise summary of the conversation excerpt you are \
given, extending the previous summary if there is one. Keep every fact, decision, name, file \
path, number and open question that a later reply might need; drop greetings and repetition. \
Answer with the summary only.";

/// The system prompt of the memory flush, the model's one chance to keep facts before the
/// messages that hold them are compacted.
pub const FLUSH_PROMPT: &str = "The earlier part of this conversation, shown below, is about \
to be compacted into a short summary. If it holds facts worth remembering across turns that \
are not yet in your writable context blocks, save them now with set_context (append). \
Otherwise answer with nothing.";

/// How the model is told that messages were compacted into a summary.
pub fn summary_message(count: usize, summary: &str) -> ModelMessage {
    ModelMessage::User {
        content: format!(
            "[Summary of {count} earlier messages, compacted to fit the context window]\n{summary}"
        ),
    }
}

/// How the model is told that messages were cut without a summary.
pub fn cut_note(count: usize, why: &str) -> ModelMessage {
    ModelMessage::User {
        content: format!(
            "[Note: {count} earlier messages were cut to fit the context window; no summary \
             could be written ({why})]"
        ),
    }
}

/// Where a compaction cuts: `[0, head)` and `[tail, len)` are kept verbatim, the middle
/// `[head, tail)` is compacted. Neither boundary falls between a tool call and its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The end of the verbatim head.
    pub head: usize,
    /// The start of the verbatim tail.
    pub tail: usize,
}

fn is_tool_result(m: &ModelMessage) -> bool {
    matches!(m, ModelMessage::Tool { .. })
}

/// A message as plain text, for token counts and the summarization call.
pub fn message_text(m: &ModelMessage) -> String {
    // Written into a buffer of its final size: an argument can be a whole file.
    let mut len = 0;
    message_pieces(m, &mut |piece| len += piece.len());
    let mut text = String::with_capacity(len);
    message_pieces(m, &mut |piece| text.push_str(piece));
    text
}

/// [`message_text`] as the pieces it joins, in order, so that hashing and counting read a
/// large tool argument in place instead of in a copy.
fn message_pieces(m: &ModelMessage, put: &mut dyn FnMut(&str)) {
    match m {
        ModelMessage::System { content } => {
            put("system: ");
            put(content);
        }
        ModelMessage::User { content } => {
            put("user: ");
            put(content);
        }
        ModelMessage::Assistant { content, tool_calls } => {
            put("assistant: ");
            put(content);
            for c in tool_calls {
                put("\n[called ");
                put(&c.name);
                put(" ");
                put(c.arguments.text());
                put("]");
            }
        }
        ModelMessage::Tool { tool_name, content, .. } => {
            put("[");
            put(tool_name);
            put(" result] ");
            put(content);
        }
    }
}

/// Where to cut `messages` so that the tail holds at most `tail_tokens` (at least one
/// message); `None` when there is no middle to compact.
pub fn plan_cut(
    messages: &[ModelMessage],
    tokens: &dyn Fn(&ModelMessage) -> usize,
    tail_tokens: usize,
) -> Option<Cut> {
    let len = messages.len();
    let head = head_end(messages);
    let mut tail = len;
    let mut sum = 0;
    while tail > head {
        let t = tokens(&messages[tail - 1]);
        if sum + t > tail_tokens && tail < len {
            break;
        }
        sum += t;
        tail -= 1;
    }
    while tail > head && is_tool_result(&messages[tail]) {
        tail -= 1;
    }
    (tail > head).then_some(Cut { head, tail })
}

impl Session {
    /// Forgets what belongs to the conversation (its compaction summary, the skills it
    /// loaded) when the transcript is cleared; the blocks stay.
    pub fn forget_conversation(&self) -> Result<(), StoreError> {
        self.sql().exec("DELETE FROM think_context_summary", &[])?;
        self.sql().exec("DELETE FROM think_context_loaded", &[])?;
        Ok(())
    }
}

/// The end of the verbatim head: [`HEAD_MESSAGES`], and the results of its last calls.
fn head_end(messages: &[ModelMessage]) -> usize {
    let mut head = HEAD_MESSAGES.min(messages.len());
    while head < messages.len() && is_tool_result(&messages[head]) {
        head += 1;
    }
    head
}

/// FNV-1a (64 bit) over the messages' text, in hex.
fn fingerprint(messages: &[ModelMessage]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for m in messages {
        message_pieces(m, &mut |piece| eat(piece.as_bytes()));
        eat(&[0]);
    }
    format!("{hash:016x}")
}

/// The stored summary: it covers the messages from the head up to `covered`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSummary {
    /// The end (exclusive) of the messages it covers.
    pub covered: usize,
    /// A hash of the messages up to `covered`, so a summary of a history that changed since
    /// (an edit, a regenerate) is not used.
    pub fingerprint: String,
    /// Its text.
    pub summary: String,
}

/// Compacts what one turn sends to the model, over the session's storage.
pub struct Compactor<'a> {
    /// The session: storage, token counts and the writable blocks of the memory flush.
    pub session: &'a Session,
    /// The model that writes summaries (the turn's own).
    pub model: &'a dyn Model,
    /// The model's context window in tokens.
    pub context_window: usize,
}

impl Compactor<'_> {
    /// The tokens the conversation may take before it is compacted: 75% of the window,
    /// leaving room for the answer.
    pub fn budget(&self) -> usize {
        self.context_window * 3 / 4
    }

    /// The tail kept verbatim: [`TAIL_TOKENS`], or less for a small window.
    pub fn tail_tokens(&self) -> usize {
        TAIL_TOKENS.min(self.budget() * 3 / 10)
    }

    fn tokens(&self, m: &ModelMessage) -> usize {
        if self.session.has_token_counter() {
            return self.session.tokens(&message_text(m));
        }
        let mut estimate = TokenEstimate::default();
        message_pieces(m, &mut |piece| estimate.add(piece));
        estimate.tokens()
    }

    /// The stored summary, if any.
    pub fn stored(&self) -> Result<Option<StoredSummary>, StoreError> {
        let rows = self.session.sql().exec(
            "SELECT covered, fingerprint, summary FROM think_context_summary WHERE id = 1",
            &[],
        )?;
        Ok(rows.into_iter().next().and_then(|r| {
            let mut it = r.into_iter();
            Some(StoredSummary {
                covered: it.next()?.as_i64()? as usize,
                fingerprint: it.next()?.into_string()?,
                summary: it.next()?.into_string()?,
            })
        }))
    }

    fn store(&self, s: &StoredSummary) -> Result<(), StoreError> {
        self.session.sql().exec(
            "INSERT INTO think_context_summary (id, covered, fingerprint, summary) VALUES (1, ?, ?, ?) \
             ON CONFLICT(id) DO UPDATE SET covered = excluded.covered, \
             fingerprint = excluded.fingerprint, summary = excluded.summary",
            &[
                SqlValue::Integer(s.covered as i64),
                s.fingerprint.as_str().into(),
                s.summary.as_str().into(),
            ],
        )?;
        Ok(())
    }

    /// What the model is sent of `messages` with `system` (and `extra` tokens of tool
    /// definitions): the messages themselves while they fit the budget, else the head, the
    /// summary of the middle and the tail. `force` compacts even under the budget (after the
    /// provider said the context is too long); `None` then means nothing could be cut.
    /// Messages that fit come back borrowed: a history can hold a large tool argument.
    pub async fn prepare<'m>(
        &self,
        system: &str,
        extra: usize,
        messages: &'m [ModelMessage],
        force: bool,
    ) -> Option<Cow<'m, [ModelMessage]>> {
        let sum = |ms: &[ModelMessage]| ms.iter().map(|m| self.tokens(m)).sum::<usize>();
        let fixed = self.session.tokens(system) + extra;
        if !force && fixed + sum(messages) <= self.budget() {
            return Some(Cow::Borrowed(messages));
        }
        let head = head_end(messages);
        let mut stored = match self.stored() {
            Ok(Some(s))
                if s.covered > head
                    && s.covered <= messages.len()
                    && s.fingerprint == fingerprint(&messages[..s.covered]) =>
            {
                Some(s)
            }
            Ok(_) => None,
            Err(e) => {
                crate::platform::log(&format!("think-rs: reading the summary failed: {e}"));
                None
            }
        };
        // While the stored summary and what follows it fit, they are sent as they are: the
        // summary is extended only when the budget is passed again, not on every turn.
        if let (false, Some(s)) = (force, &stored) {
            let summary = summary_message(s.covered - head, &s.summary);
            let reuse = fixed
                + sum(&messages[..head])
                + self.tokens(&summary)
                + sum(&messages[s.covered..]);
            if reuse <= self.budget() {
                let mut out = messages[..head].to_vec();
                out.push(summary);
                out.extend_from_slice(&messages[s.covered..]);
                return Some(Cow::Owned(out));
            }
        }
        let tail_tokens =
            if force { self.tail_tokens().min(sum(messages) / 2) } else { self.tail_tokens() };
        let Some(cut) = plan_cut(messages, &|m| self.tokens(m), tail_tokens) else {
            return (!force).then_some(Cow::Borrowed(messages));
        };
        if stored.as_ref().is_some_and(|s| s.covered > cut.tail) {
            stored = None;
        }
        let from = stored.as_ref().map_or(cut.head, |s| s.covered);
        if from < cut.tail {
            self.flush_memory(&messages[from..cut.tail]).await;
        }
        let mut covered = from;
        let piece_budget = (self.budget() / 2).max(1);
        while covered < cut.tail {
            let mut end = covered;
            let mut sum = 0;
            while end < cut.tail
                && (end == covered || sum + self.tokens(&messages[end]) <= piece_budget)
            {
                sum += self.tokens(&messages[end]);
                end += 1;
            }
            let previous = stored.as_ref().map(|s| s.summary.as_str());
            match self.summarize(previous, &messages[covered..end]).await {
                Ok(summary) => {
                    let fingerprint = fingerprint(&messages[..end]);
                    let s = StoredSummary { covered: end, fingerprint, summary };
                    if let Err(e) = self.store(&s) {
                        crate::platform::log(&format!("think-rs: storing the summary failed: {e}"));
                    }
                    stored = Some(s);
                    covered = end;
                }
                Err(e) => {
                    let mut out = messages[..cut.head].to_vec();
                    out.push(cut_note(cut.tail - cut.head, &e.to_string()));
                    out.extend_from_slice(&messages[cut.tail..]);
                    return Some(Cow::Owned(out));
                }
            }
        }
        let mut out = messages[..cut.head].to_vec();
        let summary = stored.map(|s| s.summary).unwrap_or_default();
        out.push(summary_message(cut.tail - cut.head, &summary));
        out.extend_from_slice(&messages[cut.tail..]);
        Some(Cow::Owned(out))
    }

    /// One summarization call: the previous summary and the new messages in, the summary out.
    async fn summarize(
        &self,
        previous: Option<&str>,
        messages: &[ModelMessage],
    ) -> Result<String, ModelError> {
        let mut text = String::new();
        if let Some(p) = previous {
            text.push_str(&format!("Previous summary:\n{p}\n\n"));
        }
        text.push_str("Conversation excerpt:\n");
        for m in messages {
            text.push_str(&message_text(m));
            text.push('\n');
        }
        let request = ModelRequest {
            system: SUMMARY_PROMPT.to_owned(),
            messages: vec![ModelMessage::User { content: text }],
            ..Default::default()
        };
        let mut stream = self.model.stream(&request).await?;
        let mut out = String::new();
        while let Some(event) = stream.next().await {
            if let ModelEvent::TextDelta(d) = event? {
                out.push_str(&d);
            }
        }
        if out.trim().is_empty() {
            return Err(ModelError::other("the model wrote an empty summary"));
        }
        Ok(out.trim().to_owned())
    }

    /// The memory flush: one model call that sees the messages about to be compacted and may
    /// call `set_context` to save facts into a writable block. Failures are logged and
    /// compaction goes on.
    async fn flush_memory(&self, messages: &[ModelMessage]) {
        if self.session.labels(&[BlockKind::Writable]).is_empty() {
            return;
        }
        let tools: Vec<_> = context_tools(self.session)
            .into_iter()
            .filter(|t| t.definition().name == "set_context")
            .collect();
        let mut text = String::new();
        for m in messages {
            text.push_str(&message_text(m));
            text.push('\n');
        }
        let limit = self.budget() / 2 * 4;
        if text.len() > limit {
            let mut start = text.len() - limit;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            text = text[start..].to_owned();
        }
        let request = ModelRequest {
            system: self.session.system_prompt(FLUSH_PROMPT),
            messages: vec![ModelMessage::User { content: text }],
            tools: tools.iter().map(|t| t.definition().clone()).collect(),
            ..Default::default()
        };
        let calls = match collect_calls(self.model, &request).await {
            Ok(calls) => calls,
            Err(e) => {
                crate::platform::log(&format!("think-rs: the memory flush failed: {e}"));
                return;
            }
        };
        for call in calls.into_iter().filter(|c| c.name == "set_context") {
            let ctx = ToolContext { tool_call_id: call.id.clone(), tool_name: call.name.clone() };
            if let Some(tool) = tools.first() {
                let _ = tool.execute(call.arguments.to_value(), &ctx).await;
            }
        }
    }
}

/// The tool calls of one model call, with their arguments parsed.
async fn collect_calls(
    model: &dyn Model,
    request: &ModelRequest,
) -> Result<Vec<ModelToolCall>, ModelError> {
    let mut stream = model.stream(request).await?;
    let mut calls: Vec<(usize, ModelToolCall, String)> = Vec::new();
    while let Some(event) = stream.next().await {
        match event? {
            ModelEvent::ToolCallStart { index, id, name } => calls.push((
                index,
                ModelToolCall { id, name, arguments: ToolArguments::empty() },
                String::new(),
            )),
            ModelEvent::ToolCallDelta { index, arguments } => {
                if let Some((_, _, args)) = calls.iter_mut().find(|(i, _, _)| *i == index) {
                    args.push_str(&arguments);
                }
            }
            _ => {}
        }
    }
    Ok(calls
        .into_iter()
        .filter_map(|(_, mut call, args)| {
            call.arguments = ToolArguments::from_text(args).ok()?;
            Some(call)
        })
        .collect())
}

/// Whether a model error says the prompt is longer than the model's context.
pub fn is_context_overflow(error: &ModelError) -> bool {
    let text = crate::platform::case::to_lowercase(&error.to_string());
    [
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "prompt is too long",
        "too many tokens",
        "input is too long",
        "reduce the length",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// The session's part in a turn's model calls: the blocks rendered into each call's system
/// prompt, and one compaction when the provider says the context is too long.
pub struct SessionStep {
    /// The session.
    pub session: Session,
    /// The turn's model, which also writes summaries.
    pub model: std::rc::Rc<dyn Model>,
    /// The model's context window in tokens.
    pub context_window: usize,
}

impl SessionStep {
    fn compactor(&self) -> Compactor<'_> {
        Compactor {
            session: &self.session,
            model: self.model.as_ref(),
            context_window: self.context_window,
        }
    }
}

#[async_trait::async_trait(?Send)]
impl crate::turn::engine::StepContext for SessionStep {
    fn system(&self, base: &str) -> String {
        self.session.system_prompt(base)
    }

    async fn prepare(
        &self,
        system: &str,
        tools: &[ToolDefinition],
        messages: &[ModelMessage],
    ) -> Option<Vec<ModelMessage>> {
        let tool_tokens = self.session.tokens(&serde_json::to_string(tools).unwrap_or_default());
        match self.compactor().prepare(system, tool_tokens, messages, false).await {
            Some(Cow::Owned(compacted)) => Some(compacted),
            Some(Cow::Borrowed(_)) | None => None,
        }
    }

    async fn on_model_error(
        &self,
        error: &ModelError,
        system: &str,
        messages: &[ModelMessage],
    ) -> Option<Vec<ModelMessage>> {
        if !is_context_overflow(error) {
            return None;
        }
        self.compactor().prepare(system, 0, messages, true).await.map(Cow::into_owned)
    }
}
