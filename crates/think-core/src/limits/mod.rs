//! Per-instance limits on turns and tokens (`THINK_LIMITS`), and the counters `usage()`
//! reports. Each counter runs in a window that opens with the first turn (or the first
//! tokens) after the previous window closed and lasts the limit's length: a minute for
//! `turnsPerMinute`, a day for `tokensPerDay`, or `windowMs` of the general forms. The
//! counters live in the instance's SQLite, so an eviction does not reset them.
//!
//! A turn is checked before it reaches the model ([`Meter::admit_turn`]): when a limit is used
//! up the turn ends with an error naming it and when it resets. Tokens (input plus output, as
//! the provider reports them) are counted as each model call finishes ([`Metered`]), so the
//! turn that crosses `tokensPerDay` completes and the next one is refused.

#[cfg(test)]
mod tests;

use std::rc::Rc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{json, Map, Value};

use crate::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream, Usage};
use crate::platform::Clock;
use crate::store::{Sql, SqlValue, StoreError};

/// A minute, the window of `turnsPerMinute`.
pub const MINUTE_MS: u64 = 60_000;
/// A day, the window of `tokensPerDay`.
pub const DAY_MS: u64 = 86_400_000;

/// One limit: at most `max` per window of `window_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The most allowed in one window.
    pub max: u64,
    /// The window's length in ms.
    pub window_ms: u64,
    /// The setting's name for it (`turnsPerMinute`, `tokensPerDay`, `turns`, `tokens`), which
    /// the refusal names.
    pub name: String,
}

/// The limits of one instance; `None` counts without limiting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// Turns per window.
    pub turns: Option<Limit>,
    /// Tokens (input plus output) per window.
    pub tokens: Option<Limit>,
    /// Why the setting could not be read, when it could not: every turn is refused with this
    /// reason rather than run unlimited, since a limit guards a bill.
    pub unreadable: Option<String>,
}

impl Limits {
    /// At most `n` turns a minute.
    pub fn turns_per_minute(mut self, n: u64) -> Self {
        self.turns = Some(Limit { max: n, window_ms: MINUTE_MS, name: "turnsPerMinute".into() });
        self
    }

    /// At most `n` tokens a day.
    pub fn tokens_per_day(mut self, n: u64) -> Self {
        self.tokens = Some(Limit { max: n, window_ms: DAY_MS, name: "tokensPerDay".into() });
        self
    }

    /// Limits that refuse every turn, naming `reason`: what a `THINK_LIMITS` that cannot be
    /// read means (a typo must not lift the limits it meant to set).
    pub fn refuse_all(reason: impl Into<String>) -> Self {
        Self { unreadable: Some(reason.into()), ..Self::default() }
    }

    /// Reads `THINK_LIMITS`: a JSON object with `turnsPerMinute` and `tokensPerDay` (counts),
    /// or the general forms `"turns": {"max": n, "windowMs": ms}` and `"tokens": {…}` in
    /// their place. Empty means no limit.
    pub fn parse(setting: &str) -> Result<Self, String> {
        let setting = setting.trim();
        if setting.is_empty() {
            return Ok(Self::default());
        }
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(setting) else {
            return Err(format!("expected a JSON object, not {setting:?}"));
        };
        let mut limits = Self::default();
        for (key, value) in &map {
            let (slot, limit) = match key.as_str() {
                "turnsPerMinute" => (&mut limits.turns, count(key, value, MINUTE_MS)?),
                "tokensPerDay" => (&mut limits.tokens, count(key, value, DAY_MS)?),
                "turns" => (&mut limits.turns, general(key, value)?),
                "tokens" => (&mut limits.tokens, general(key, value)?),
                other => {
                    return Err(format!(
                        "unknown key {other:?} (turnsPerMinute, tokensPerDay, turns, tokens)"
                    ))
                }
            };
            if let Some(before) = slot.replace(limit) {
                return Err(format!("{key} and {} set the same limit", before.name));
            }
        }
        Ok(limits)
    }
}

fn count(key: &str, value: &Value, window_ms: u64) -> Result<Limit, String> {
    let max = value.as_u64().ok_or_else(|| format!("{key} must be a whole number"))?;
    Ok(Limit { max, window_ms, name: key.to_owned() })
}

fn general(key: &str, value: &Value) -> Result<Limit, String> {
    let field = |f: &str| value.get(f).and_then(Value::as_u64);
    match (field("max"), field("windowMs")) {
        (Some(max), Some(window_ms)) if window_ms > 0 => {
            Ok(Limit { max, window_ms, name: key.to_owned() })
        }
        _ => Err(format!("{key} must be {{\"max\": <count>, \"windowMs\": <ms above 0>}}")),
    }
}

/// A used-up limit, as the turn's error tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitHit {
    /// The limit.
    pub limit: Limit,
    /// What it counts (`turns` or `tokens`).
    pub unit: &'static str,
    /// When its window closes (ms since the epoch).
    pub resets_at: f64,
    /// When it was hit.
    pub now: f64,
}

/// A window length in words: `minute`, `day`, `10 s`, `1500 ms`.
fn window_words(ms: u64) -> String {
    match ms {
        MINUTE_MS => "minute".into(),
        DAY_MS => "day".into(),
        ms if ms % 1000 == 0 => format!("{} s", ms / 1000),
        ms => format!("{ms} ms"),
    }
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let wait = ((self.resets_at - self.now) / 1000.0).ceil().max(0.0);
        write!(
            f,
            "Limit reached: {} ({} {} per {}) is used up for this agent instance; it resets at \
             {} (in {wait} s).",
            self.limit.name,
            self.limit.max,
            self.unit,
            window_words(self.limit.window_ms),
            crate::platform::iso8601_ms(self.resets_at as i64),
        )
    }
}

impl std::error::Error for LimitHit {}

/// Why a turn was refused before it reached the model.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TurnRefused {
    /// A limit is used up.
    Limit(LimitHit),
    /// `THINK_LIMITS` could not be read, so no turn runs until it is fixed.
    Unreadable(String),
}

impl std::fmt::Display for TurnRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Limit(hit) => hit.fmt(f),
            Self::Unreadable(reason) => write!(
                f,
                "Turns are refused: THINK_LIMITS could not be read ({reason}). The deployment \
                 must fix the setting before this agent runs turns."
            ),
        }
    }
}

impl std::error::Error for TurnRefused {}

impl From<LimitHit> for TurnRefused {
    fn from(hit: LimitHit) -> Self {
        Self::Limit(hit)
    }
}

const SCHEMA: &[&str] = &["CREATE TABLE IF NOT EXISTS think_usage (
        kind TEXT PRIMARY KEY,
        started INTEGER NOT NULL,
        used INTEGER NOT NULL,
        input INTEGER NOT NULL DEFAULT 0,
        output INTEGER NOT NULL DEFAULT 0
    )"];

/// A counter's current window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Count {
    /// When the window opened; `None` when none is open.
    started: Option<i64>,
    used: u64,
    input: u64,
    output: u64,
}

/// Counts an instance's turns and tokens and enforces its [`Limits`].
pub struct Meter {
    sql: Rc<dyn Sql>,
    clock: Rc<dyn Clock>,
    limits: Limits,
}

impl Meter {
    /// The meter over the instance's SQLite; creates its table.
    pub fn new(sql: Rc<dyn Sql>, clock: Rc<dyn Clock>, limits: Limits) -> Self {
        if let Err(e) = crate::store::create_tables(sql.as_ref(), SCHEMA) {
            crate::platform::log(&format!("think-rs: creating the usage table failed: {e}"));
        }
        Self { sql, clock, limits }
    }

    fn window(&self, kind: &str) -> u64 {
        let limit = if kind == "turns" { &self.limits.turns } else { &self.limits.tokens };
        limit.as_ref().map_or(if kind == "turns" { MINUTE_MS } else { DAY_MS }, |l| l.window_ms)
    }

    /// The counter `kind` in the window open at `now` (zero when it closed).
    fn current(&self, kind: &str, now: i64) -> Result<Count, StoreError> {
        let rows = self.sql.exec(
            "SELECT started, used, input, output FROM think_usage WHERE kind = ?",
            &[SqlValue::Text(kind.into())],
        )?;
        let Some(row) = rows.first() else { return Ok(Count::default()) };
        let n = |i: usize| row.get(i).and_then(SqlValue::as_i64).unwrap_or(0);
        let started = n(0);
        if now >= started.saturating_add(self.window(kind) as i64) {
            return Ok(Count::default());
        }
        let u = |i: usize| n(i).max(0) as u64;
        Ok(Count { started: Some(started), used: u(1), input: u(2), output: u(3) })
    }

    fn save(&self, kind: &str, count: &Count) -> Result<(), StoreError> {
        let int = |v: u64| SqlValue::Integer(v.min(i64::MAX as u64) as i64);
        self.sql.exec(
            "INSERT INTO think_usage (kind, started, used, input, output) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT(kind) DO UPDATE SET started = excluded.started, used = excluded.used,
             input = excluded.input, output = excluded.output",
            &[
                SqlValue::Text(kind.into()),
                SqlValue::Integer(count.started.unwrap_or(0)),
                int(count.used),
                int(count.input),
                int(count.output),
            ],
        )?;
        Ok(())
    }

    fn hit(
        &self,
        kind: &'static str,
        limit: &Option<Limit>,
        count: &Count,
        now: i64,
    ) -> Option<LimitHit> {
        let limit = limit.as_ref()?;
        (count.used >= limit.max).then(|| LimitHit {
            limit: limit.clone(),
            unit: kind,
            resets_at: (count.started.unwrap_or(now) + limit.window_ms as i64) as f64,
            now: now as f64,
        })
    }

    /// Admits a turn: refused when a limit is used up or the limits could not be read, else
    /// counted. A storage failure admits the turn (and is logged): the counters guard a bill,
    /// they must not stop the agent.
    pub fn admit_turn(&self) -> Result<(), TurnRefused> {
        if let Some(reason) = &self.limits.unreadable {
            return Err(TurnRefused::Unreadable(reason.clone()));
        }
        let now = self.clock.now_ms() as i64;
        let checked = (|| {
            let turns = self.current("turns", now)?;
            let tokens = self.current("tokens", now)?;
            if let Some(hit) = self
                .hit("turns", &self.limits.turns, &turns, now)
                .or_else(|| self.hit("tokens", &self.limits.tokens, &tokens, now))
            {
                return Ok(Err(hit.into()));
            }
            let next =
                Count { started: turns.started.or(Some(now)), used: turns.used + 1, ..turns };
            self.save("turns", &next)?;
            Ok(Ok(()))
        })();
        checked.unwrap_or_else(|e: StoreError| {
            crate::platform::log(&format!("think-rs: counting a turn failed: {e}"));
            Ok(())
        })
    }

    /// Adds one model call's usage to the token counter.
    pub fn record_tokens(&self, usage: &Usage) {
        let now = self.clock.now_ms() as i64;
        let result = self.current("tokens", now).and_then(|c| {
            let next = Count {
                started: c.started.or(Some(now)),
                used: c.used + usage.input_tokens + usage.output_tokens,
                input: c.input + usage.input_tokens,
                output: c.output + usage.output_tokens,
            };
            self.save("tokens", &next)
        });
        if let Err(e) = result {
            crate::platform::log(&format!("think-rs: counting tokens failed: {e}"));
        }
    }

    /// `usage()`: each counter in its current window, with its limit and when it resets.
    pub fn report(&self) -> Result<Value, StoreError> {
        let now = self.clock.now_ms() as i64;
        let entry = |kind: &str, limit: &Option<Limit>| -> Result<Value, StoreError> {
            let count = self.current(kind, now)?;
            let window_ms = self.window(kind);
            let mut out = Map::new();
            out.insert("used".into(), count.used.into());
            if kind == "tokens" {
                out.insert("input".into(), count.input.into());
                out.insert("output".into(), count.output.into());
            }
            out.insert("limit".into(), limit.as_ref().map(|l| l.max).into());
            out.insert("name".into(), limit.as_ref().map(|l| l.name.clone()).into());
            out.insert("windowMs".into(), window_ms.into());
            out.insert(
                "resetsAt".into(),
                count.started.map(|s| s.saturating_add(window_ms as i64)).into(),
            );
            Ok(Value::Object(out))
        };
        Ok(json!({
            "turns": entry("turns", &self.limits.turns)?,
            "tokens": entry("tokens", &self.limits.tokens)?,
        }))
    }
}

/// A model whose calls' usage is added to a [`Meter`].
pub struct Metered {
    inner: Rc<dyn Model>,
    meter: Rc<Meter>,
}

impl Metered {
    /// `inner`, counted by `meter`.
    pub fn new(inner: Rc<dyn Model>, meter: Rc<Meter>) -> Self {
        Self { inner, meter }
    }
}

#[async_trait(?Send)]
impl Model for Metered {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let stream = self.inner.stream(request).await?;
        let meter = self.meter.clone();
        Ok(stream
            .inspect(move |event| {
                if let Ok(ModelEvent::Finish { usage: Some(usage), .. }) = event {
                    meter.record_tokens(usage);
                }
            })
            .boxed_local())
    }
}
