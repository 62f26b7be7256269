//! The parent's run registry: one row per agent-tool call, keyed by the stable run id
//! `agent-tool:<toolCallId>`, so that after a crash recovery finds the child it started and
//! tails it again instead of starting another, and so that a child's transcript is shown only
//! for a run the parent has.

use serde_json::Value;

use crate::store::{Sql, SqlValue, StoreError};

use super::events::Outcome;
use super::StartRequest;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_agent_tool_runs (
    run_id TEXT PRIMARY KEY,
    tool_call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    child_name TEXT NOT NULL,
    status TEXT NOT NULL,
    request TEXT,
    result TEXT,
    started_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL)",
    // The terminal frame each run (own or relayed from deeper down) ended with, as the tabs
    // were sent it: a tab that was away then (a crash, a dropped socket) is sent it again
    // when it connects, or it would show the run as running for ever.
    "CREATE TABLE IF NOT EXISTS think_agent_tool_ends (
    parent_tool_call_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    frame TEXT NOT NULL,
    ended_at INTEGER NOT NULL,
    PRIMARY KEY (parent_tool_call_id, run_id))",
];

/// How many ended runs a connecting tab is sent the terminal frame of (the latest ones).
pub const MAX_REPLAYED_ENDS: usize = 32;
/// Past this size a kept terminal frame loses `result` and has its texts cut to
/// [`MAX_END_TEXT`], so the replay to a connecting tab stays small.
pub const MAX_END_BYTES: usize = 32 * 1024;
/// The longest text of a terminal frame that was cut (see [`MAX_END_BYTES`]).
pub const MAX_END_TEXT: usize = 8 * 1024;

/// The run id of the agent-tool call `tool_call_id`.
pub fn run_id(tool_call_id: &str) -> String {
    format!("agent-tool:{tool_call_id}")
}

/// The name of the child instance that runs `tool_call_id` for parent `parent`: stable, so a
/// restarted parent reaches the same child.
pub fn child_name(parent: &str, tool_call_id: &str) -> String {
    format!("{parent}~{tool_call_id}")
}

/// One registered run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// `agent-tool:<toolCallId>`.
    pub run_id: String,
    /// The parent's tool call.
    pub tool_call_id: String,
    /// The agent tool's name.
    pub tool_name: String,
    /// The child instance's name.
    pub child_name: String,
    /// `running`, `finished`, `error`, `aborted` or `interrupted`.
    pub status: String,
    /// The tool's output once the run ended.
    pub result: Option<Value>,
    /// What the child is (or is to be) started with: a run that was still waiting for a
    /// slot when the parent crashed is started after the restart, for the first time.
    pub request: Option<StartRequest>,
}

impl Run {
    /// Whether the child may still be working.
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
}

/// What recovery does with a tool call a crash cut short.
#[derive(Debug, Clone, PartialEq)]
pub enum Reattach {
    /// Not an agent-tool run: the ledger settles it as any other tool.
    NotARun,
    /// The child may still be working: tail it again from the start of its log.
    Tail(Box<Run>),
    /// The run ended before the crash: its recorded output answers the call.
    Settled(Value),
}

/// The registry over one SQL database.
pub struct Registry<'a> {
    sql: &'a dyn Sql,
}

impl<'a> Registry<'a> {
    /// Creates the tables if they do not exist; once per instance.
    pub fn create_table(sql: &dyn Sql) -> Result<(), StoreError> {
        crate::store::create_tables(sql, SCHEMA)
    }

    /// The registry over the tables made by [`Registry::create_table`].
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    /// Registers a new run as `running`; an existing one (same tool call) is kept as it is
    /// and returned, so a call is never started twice.
    pub fn register(
        &self,
        tool_call_id: &str,
        tool_name: &str,
        child_name: &str,
        request: &StartRequest,
        now: f64,
    ) -> Result<Run, StoreError> {
        let id = run_id(tool_call_id);
        let request =
            serde_json::to_string(request).map_err(|e| StoreError::Encoding(e.to_string()))?;
        self.sql.exec(
            "INSERT INTO think_agent_tool_runs (run_id, tool_call_id, tool_name, child_name, status, request, started_at, updated_at)
             VALUES (?, ?, ?, ?, 'running', ?, ?, ?) ON CONFLICT(run_id) DO NOTHING",
            &[
                id.as_str().into(),
                tool_call_id.into(),
                tool_name.into(),
                child_name.into(),
                request.into(),
                SqlValue::Integer(now as i64),
                SqlValue::Integer(now as i64),
            ],
        )?;
        self.get(tool_call_id)?.ok_or_else(|| StoreError::Sql(format!("run {id} was not stored")))
    }

    /// The run of a tool call, if there is one.
    pub fn get(&self, tool_call_id: &str) -> Result<Option<Run>, StoreError> {
        let rows = self.sql.exec(
            "SELECT run_id, tool_call_id, tool_name, child_name, status, result, request FROM think_agent_tool_runs WHERE run_id = ?",
            &[run_id(tool_call_id).into()],
        )?;
        Ok(rows.into_iter().next().map(|row| {
            let mut it = row.into_iter();
            let mut text = || it.next().and_then(SqlValue::into_string).unwrap_or_default();
            fn json<T: serde::de::DeserializeOwned>(t: String) -> Option<T> {
                serde_json::from_str(&t).ok()
            }
            Run {
                run_id: text(),
                tool_call_id: text(),
                tool_name: text(),
                child_name: text(),
                status: text(),
                result: json(text()),
                request: json(text()),
            }
        }))
    }

    /// Records how a run ended.
    pub fn finish(
        &self,
        tool_call_id: &str,
        outcome: &Outcome,
        now: f64,
    ) -> Result<(), StoreError> {
        let mut result = outcome.to_tool_output().to_string();
        if result.len() > 1_500_000 {
            result = serde_json::json!({"note": "The result was too large to keep.", "bytes": result.len()})
                .to_string();
        }
        self.sql.exec(
            "UPDATE think_agent_tool_runs SET status = ?, result = ?, updated_at = ? WHERE run_id = ?",
            &[
                outcome.status().into(),
                result.into(),
                SqlValue::Integer(now as i64),
                run_id(tool_call_id).into(),
            ],
        )?;
        Ok(())
    }

    /// What recovery does with tool call `tool_call_id`.
    pub fn reattach(&self, tool_call_id: &str) -> Result<Reattach, StoreError> {
        Ok(match self.get(tool_call_id)? {
            None => Reattach::NotARun,
            Some(run) if run.is_running() => Reattach::Tail(Box::new(run)),
            Some(run) => Reattach::Settled(run.result.unwrap_or(Value::Null)),
        })
    }

    /// The run whose child is shown at `/sub/<segment>`: `segment` is the parent's tool call
    /// id (or the child's instance name).
    pub fn by_segment(&self, segment: &str) -> Result<Option<Run>, StoreError> {
        if let Some(run) = self.get(segment)? {
            return Ok(Some(run));
        }
        let rows = self.sql.exec(
            "SELECT tool_call_id FROM think_agent_tool_runs WHERE child_name = ?",
            &[segment.into()],
        )?;
        match rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .and_then(SqlValue::into_string)
        {
            Some(id) => self.get(&id),
            None => Ok(None),
        }
    }

    /// Keeps `frame`, an `agent-tool-event` whose event ended its run, for tabs that connect
    /// later ([`Registry::ends`]); only the latest [`MAX_REPLAYED_ENDS`] are kept.
    pub fn note_end(&self, frame: &Value, now: f64) -> Result<(), StoreError> {
        let text_of = |key: &str| frame.get(key).and_then(Value::as_str).unwrap_or("");
        let parent = text_of("parentToolCallId");
        let run = frame.pointer("/event/runId").and_then(Value::as_str).unwrap_or("");
        let mut text = frame.to_string();
        if text.len() > MAX_END_BYTES {
            text = shrunk_end(frame).to_string();
        }
        self.sql.exec(
            "INSERT INTO think_agent_tool_ends (parent_tool_call_id, run_id, frame, ended_at) VALUES (?, ?, ?, ?)
             ON CONFLICT(parent_tool_call_id, run_id) DO UPDATE SET frame = excluded.frame, ended_at = excluded.ended_at",
            &[parent.into(), run.into(), text.into(), SqlValue::Integer(now as i64)],
        )?;
        self.sql.exec(
            "DELETE FROM think_agent_tool_ends WHERE rowid NOT IN
               (SELECT rowid FROM think_agent_tool_ends ORDER BY ended_at DESC, rowid DESC LIMIT ?)",
            &[SqlValue::Integer(MAX_REPLAYED_ENDS as i64)],
        )?;
        Ok(())
    }

    /// The kept terminal frames, oldest first.
    pub fn ends(&self) -> Result<Vec<Value>, StoreError> {
        let rows = self
            .sql
            .exec("SELECT frame FROM think_agent_tool_ends ORDER BY ended_at, rowid", &[])?;
        Ok(rows
            .into_iter()
            .filter_map(|r| r.into_iter().next()?.into_string())
            .filter_map(|t| serde_json::from_str(&t).ok())
            .collect())
    }

    /// Drops every run and kept terminal frame (a chat clear).
    pub fn clear(&self) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_agent_tool_runs", &[])?;
        self.sql.exec("DELETE FROM think_agent_tool_ends", &[])?;
        Ok(())
    }
}

/// A terminal frame past [`MAX_END_BYTES`] as it is kept: without `result` (the clients read
/// `summary`) and with each text cut to [`MAX_END_TEXT`].
fn shrunk_end(frame: &Value) -> Value {
    let mut frame = frame.clone();
    if let Some(event) = frame.get_mut("event").and_then(Value::as_object_mut) {
        event.remove("result");
        for key in ["summary", "error", "reason"] {
            if let Some(Value::String(text)) = event.get_mut(key) {
                if text.len() > MAX_END_TEXT {
                    let mut end = MAX_END_TEXT;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.truncate(end);
                    text.push('…');
                }
            }
        }
    }
    frame
}
