//! The child's side of a run: which run this instance works for (one per instance: a child
//! is created for one tool call), the log of its events, and reads of that log from a cursor,
//! which is how the parent tails it, again from the start after the parent restarts.

use serde_json::Value;

use crate::store::{Sql, SqlValue, StoreError};

use super::events::LogEntry;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_agent_tool_child (
    run_id TEXT PRIMARY KEY,
    parent TEXT NOT NULL,
    tool_path TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS think_agent_tool_log (
    cursor INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    sequence INTEGER,
    body TEXT NOT NULL)",
    // The next sequence is the run's highest plus one: without this index every appended
    // event scanned the whole log (a run of n chunks cost n² row visits).
    "CREATE INDEX IF NOT EXISTS think_agent_tool_log_sequence
    ON think_agent_tool_log (run_id, sequence) WHERE sequence IS NOT NULL",
];

/// Most entries one tail call returns; the parent asks again for the rest.
pub const MAX_BATCH_ENTRIES: usize = 256;
/// Most bytes of entries one tail call returns (at least one entry is always returned).
pub const MAX_BATCH_BYTES: usize = 4_000_000;

/// The log over one SQL database.
pub struct ChildLog<'a> {
    sql: &'a dyn Sql,
}

impl<'a> ChildLog<'a> {
    /// Creates the tables if they do not exist; once per instance.
    pub fn create_tables(sql: &dyn Sql) -> Result<(), StoreError> {
        crate::store::create_tables(sql, SCHEMA)
    }

    /// The log over the tables made by [`ChildLog::create_tables`].
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    /// The agent-tool names from the root agent down to this instance, if it is a child:
    /// what its spec is built from when it starts again. Read before the agent's tables
    /// exist, so a missing table means "not a child".
    pub fn role(sql: &dyn Sql) -> Option<Vec<String>> {
        let rows = sql.exec("SELECT tool_path FROM think_agent_tool_child LIMIT 1", &[]).ok()?;
        let text = rows.into_iter().next()?.into_iter().next()?.into_string()?;
        serde_json::from_str(&text).ok()
    }

    /// Takes run `run_id`; false when this instance already has it (a repeated start).
    pub fn start(
        &self,
        run_id: &str,
        parent: &str,
        tool_path: &[String],
        now: f64,
    ) -> Result<bool, StoreError> {
        if self.has(run_id)? {
            return Ok(false);
        }
        self.sql.exec(
            "INSERT INTO think_agent_tool_child (run_id, parent, tool_path, status, created_at) VALUES (?, ?, ?, 'running', ?)",
            &[
                run_id.into(),
                parent.into(),
                serde_json::to_string(tool_path).unwrap_or_else(|_| "[]".into()).into(),
                SqlValue::Integer(now as i64),
            ],
        )?;
        Ok(true)
    }

    /// Whether this instance has run `run_id`.
    pub fn has(&self, run_id: &str) -> Result<bool, StoreError> {
        let rows = self
            .sql
            .exec("SELECT 1 FROM think_agent_tool_child WHERE run_id = ?", &[run_id.into()])?;
        Ok(!rows.is_empty())
    }

    /// The run still in progress, if any.
    pub fn running(&self) -> Result<Option<String>, StoreError> {
        let rows = self.sql.exec(
            "SELECT run_id FROM think_agent_tool_child WHERE status = 'running' LIMIT 1",
            &[],
        )?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .and_then(SqlValue::into_string))
    }

    /// Marks the run ended (its terminal event is in the log).
    pub fn finish(&self, run_id: &str) -> Result<(), StoreError> {
        self.sql.exec(
            "UPDATE think_agent_tool_child SET status = 'done' WHERE run_id = ?",
            &[run_id.into()],
        )?;
        Ok(())
    }

    /// Drops the entries of ended run `run_id` but its terminal event, once its parent has
    /// recorded the outcome (the log serves only the parent's tail): a parent that re-tails
    /// after a crash before its record was durable still reads the outcome. A running run is
    /// left alone. Returns how many entries went.
    pub fn release(&self, run_id: &str) -> Result<usize, StoreError> {
        let rows = self.sql.exec(
            "DELETE FROM think_agent_tool_log WHERE run_id = ?
               AND (sequence IS NULL OR sequence < (SELECT MAX(sequence)
                 FROM think_agent_tool_log WHERE run_id = ? AND sequence IS NOT NULL))
               AND EXISTS (SELECT 1 FROM think_agent_tool_child WHERE run_id = ? AND status = 'done')
             RETURNING 1",
            &[run_id.into(), run_id.into(), run_id.into()],
        )?;
        Ok(rows.len())
    }

    /// Appends an own event and returns its sequence (0, 1, 2, … within the run).
    pub fn append_event(&self, run_id: &str, event: &Value) -> Result<u64, StoreError> {
        let rows = self.sql.exec(
            "SELECT COALESCE(MAX(sequence) + 1, 0) FROM think_agent_tool_log WHERE run_id = ? AND sequence IS NOT NULL",
            &[run_id.into()],
        )?;
        let sequence = rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        self.sql.exec(
            "INSERT INTO think_agent_tool_log (run_id, sequence, body) VALUES (?, ?, ?)",
            &[run_id.into(), SqlValue::Integer(sequence), event.to_string().into()],
        )?;
        Ok(sequence as u64)
    }

    /// Appends a frame of a deeper child, to be relayed up unchanged.
    pub fn append_frame(&self, run_id: &str, frame: &Value) -> Result<(), StoreError> {
        self.sql.exec(
            "INSERT INTO think_agent_tool_log (run_id, sequence, body) VALUES (?, NULL, ?)",
            &[run_id.into(), frame.to_string().into()],
        )?;
        Ok(())
    }

    /// The entries of `run_id` after `cursor`, in order, within the batch limits.
    pub fn entries(&self, run_id: &str, cursor: i64) -> Result<Vec<LogEntry>, StoreError> {
        let rows = self.sql.exec(
            "SELECT cursor, sequence, body FROM think_agent_tool_log WHERE run_id = ? AND cursor > ? ORDER BY cursor LIMIT ?",
            &[run_id.into(), SqlValue::Integer(cursor), SqlValue::Integer(MAX_BATCH_ENTRIES as i64)],
        )?;
        let mut out = Vec::new();
        let mut bytes = 0;
        for row in rows {
            let mut it = row.into_iter();
            let cursor = it.next().and_then(|v| v.as_i64()).unwrap_or(0);
            let sequence = it.next().and_then(|v| v.as_i64()).map(|s| s as u64);
            let body = it.next().and_then(SqlValue::into_string).unwrap_or_default();
            bytes += body.len();
            if bytes > MAX_BATCH_BYTES && !out.is_empty() {
                break;
            }
            let value: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let (event, frame) =
                if sequence.is_some() { (Some(value), None) } else { (None, Some(value)) };
            out.push(LogEntry { cursor, sequence, event, frame });
        }
        Ok(out)
    }
}
