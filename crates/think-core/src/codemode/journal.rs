//! The durable journal of code executions, in the agent's own SQLite: one row per execution,
//! one per connector call (logged `executing` before it runs, then `applied` or `error`, or
//! `pending` when it waits for approval), and the saved snippets.

use serde::Serialize;
use serde_json::Value;

use crate::store::{Sql, SqlValue, StoreError};

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_cm_executions (
        id TEXT PRIMARY KEY,
        code TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        error TEXT,
        logs TEXT,
        tool_call_id TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS think_cm_log (
        execution_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        site TEXT NOT NULL,
        connector TEXT NOT NULL,
        method TEXT NOT NULL,
        args TEXT NOT NULL,
        result TEXT,
        state TEXT NOT NULL,
        requires_approval INTEGER NOT NULL,
        ephemeral INTEGER NOT NULL,
        PRIMARY KEY (execution_id, seq))",
    "CREATE TABLE IF NOT EXISTS think_cm_snippets (
        name TEXT PRIMARY KEY,
        description TEXT,
        code TEXT NOT NULL,
        input_schema TEXT,
        saved_at INTEGER NOT NULL)",
];

/// Where an execution is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecStatus {
    /// A pass is running now.
    Running,
    /// Waiting for a human to approve or reject a pending call.
    Paused,
    /// Ran to its end.
    Completed,
    /// Threw, timed out, diverged or was interrupted.
    Error,
    /// A human (or the expiry alarm) rejected it.
    Rejected,
    /// `rollbackExecution` reverted at least one of its applied calls.
    RolledBack,
}

impl ExecStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecStatus::Running => "running",
            ExecStatus::Paused => "paused",
            ExecStatus::Completed => "completed",
            ExecStatus::Error => "error",
            ExecStatus::Rejected => "rejected",
            ExecStatus::RolledBack => "rolled_back",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "running" => ExecStatus::Running,
            "paused" => ExecStatus::Paused,
            "completed" => ExecStatus::Completed,
            "rejected" => ExecStatus::Rejected,
            "rolled_back" => ExecStatus::RolledBack,
            _ => ExecStatus::Error,
        }
    }

    /// Whether the execution is settled for good.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ExecStatus::Completed
                | ExecStatus::Error
                | ExecStatus::Rejected
                | ExecStatus::RolledBack
        )
    }
}

/// Where one logged call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Started; no result recorded (if the process died here, it is never run again).
    Executing,
    /// Returned; its result is recorded.
    Applied,
    /// Threw; the message is recorded.
    Error,
    /// Waits for approval.
    Pending,
    /// Approved; the next pass runs it for real.
    Approved,
    /// Rejected by a human.
    Rejected,
    /// Applied, then undone by a rollback.
    Reverted,
}

impl CallState {
    /// The state's word as the journal stores it and the `calls` summary shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            CallState::Executing => "executing",
            CallState::Applied => "applied",
            CallState::Error => "error",
            CallState::Pending => "pending",
            CallState::Approved => "approved",
            CallState::Rejected => "rejected",
            CallState::Reverted => "reverted",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "executing" => CallState::Executing,
            "applied" => CallState::Applied,
            "pending" => CallState::Pending,
            "approved" => CallState::Approved,
            "rejected" => CallState::Rejected,
            "reverted" => CallState::Reverted,
            _ => CallState::Error,
        }
    }
}

/// One execution's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionRow {
    /// Its id (`exec_…`).
    pub id: String,
    /// The code as the model sent it.
    pub code: String,
    /// Where it is.
    pub status: ExecStatus,
    /// The final result (JSON), when completed.
    pub result: Option<Value>,
    /// The error or rejection reason.
    pub error: Option<String>,
    /// `console.*` lines of the last pass.
    pub logs: Vec<String>,
    /// The `execute` tool call it belongs to, so its transcript output can be replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch.
    pub updated_at: i64,
}

/// One logged call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// Its place in arrival order of the pass that first made it.
    pub seq: i64,
    /// `line:column` of the call in the code.
    pub site: String,
    /// `state`, `tools`, `codemode`.
    pub connector: String,
    /// The method.
    pub method: String,
    /// Its argument (JSON).
    pub args: Value,
    /// The result, or the error text, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Where the call is.
    pub state: CallState,
    /// Whether it needed approval.
    pub requires_approval: bool,
    /// Reads are run again on replay rather than served from the log.
    pub ephemeral: bool,
}

/// A saved snippet (`codemode.run(name)` runs its code).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snippet {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The code.
    pub code: String,
    /// The JSON Schema of its `input`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Milliseconds since the epoch.
    pub saved_at: i64,
}

/// The journal over one SQL database.
pub struct Journal<'a> {
    sql: &'a dyn Sql,
}

fn text(row: &mut std::vec::IntoIter<SqlValue>) -> Option<String> {
    row.next().and_then(SqlValue::into_string)
}

fn int(row: &mut std::vec::IntoIter<SqlValue>) -> i64 {
    row.next().and_then(|v| v.as_i64()).unwrap_or(0)
}

fn json(s: Option<String>) -> Option<Value> {
    s.and_then(|s| crate::protocol::json::from_str_deep(&s).ok())
}

const EXEC_COLS: &str =
    "id, code, status, result, error, logs, tool_call_id, created_at, updated_at";
const LOG_COLS: &str =
    "seq, site, connector, method, args, result, state, requires_approval, ephemeral";

fn exec_from_row(row: Vec<SqlValue>) -> ExecutionRow {
    let mut it = row.into_iter();
    ExecutionRow {
        id: text(&mut it).unwrap_or_default(),
        code: text(&mut it).unwrap_or_default(),
        status: ExecStatus::parse(&text(&mut it).unwrap_or_default()),
        result: json(text(&mut it)),
        error: text(&mut it),
        logs: json(text(&mut it)).and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default(),
        tool_call_id: text(&mut it),
        created_at: int(&mut it),
        updated_at: int(&mut it),
    }
}

fn log_from_row(row: Vec<SqlValue>) -> LogEntry {
    let mut it = row.into_iter();
    LogEntry {
        seq: int(&mut it),
        site: text(&mut it).unwrap_or_default(),
        connector: text(&mut it).unwrap_or_default(),
        method: text(&mut it).unwrap_or_default(),
        args: json(text(&mut it)).unwrap_or(Value::Null),
        result: json(text(&mut it)),
        state: CallState::parse(&text(&mut it).unwrap_or_default()),
        requires_approval: int(&mut it) != 0,
        ephemeral: int(&mut it) != 0,
    }
}

impl<'a> Journal<'a> {
    /// Creates the tables if they do not exist; once per instance.
    pub fn create_tables(sql: &dyn Sql) -> Result<(), StoreError> {
        for stmt in SCHEMA.iter().chain([&super::undo::SCHEMA]) {
            sql.exec(stmt, &[])?;
        }
        Ok(())
    }

    /// The journal over the tables made by [`Journal::create_tables`].
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    /// Records a new execution as running.
    pub fn start(
        &self,
        id: &str,
        code: &str,
        tool_call_id: Option<&str>,
        now: f64,
    ) -> Result<(), StoreError> {
        self.sql.exec(
            &format!("INSERT INTO think_cm_executions ({EXEC_COLS}) VALUES (?, ?, 'running', NULL, NULL, NULL, ?, ?, ?)"),
            &[id.into(), code.into(), tool_call_id.into(), (now as i64).into(), (now as i64).into()],
        )?;
        Ok(())
    }

    /// One execution.
    pub fn execution(&self, id: &str) -> Result<Option<ExecutionRow>, StoreError> {
        let rows = self.sql.exec(
            &format!("SELECT {EXEC_COLS} FROM think_cm_executions WHERE id = ?"),
            &[id.into()],
        )?;
        Ok(rows.into_iter().next().map(exec_from_row))
    }

    /// The newest `limit` executions, newest first.
    pub fn executions(&self, limit: usize) -> Result<Vec<ExecutionRow>, StoreError> {
        let rows = self.sql.exec(
            &format!("SELECT {EXEC_COLS} FROM think_cm_executions ORDER BY created_at DESC, rowid DESC LIMIT ?"),
            &[(limit as i64).into()],
        )?;
        Ok(rows.into_iter().map(exec_from_row).collect())
    }

    /// Executions in `status`, oldest first.
    pub fn with_status(&self, status: ExecStatus) -> Result<Vec<ExecutionRow>, StoreError> {
        let rows = self.sql.exec(
            &format!("SELECT {EXEC_COLS} FROM think_cm_executions WHERE status = ? ORDER BY created_at, rowid"),
            &[status.as_str().into()],
        )?;
        Ok(rows.into_iter().map(exec_from_row).collect())
    }

    /// Moves an execution to `status` with its outcome.
    pub fn settle(
        &self,
        id: &str,
        status: ExecStatus,
        result: Option<&Value>,
        error: Option<&str>,
        logs: &[String],
        now: f64,
    ) -> Result<(), StoreError> {
        self.sql.exec(
            "UPDATE think_cm_executions SET status = ?, result = ?, error = ?, logs = ?, updated_at = ? WHERE id = ?",
            &[
                status.as_str().into(),
                result.map(Value::to_string).into(),
                error.into(),
                serde_json::to_string(logs).unwrap_or_default().into(),
                (now as i64).into(),
                id.into(),
            ],
        )?;
        Ok(())
    }

    /// Moves a paused execution to running for a new pass; false if it was not paused.
    pub fn resume(&self, id: &str, now: f64) -> Result<bool, StoreError> {
        let rows = self.sql.exec(
            "UPDATE think_cm_executions SET status = 'running', updated_at = ? WHERE id = ? AND status = 'paused' RETURNING id",
            &[(now as i64).into(), id.into()],
        )?;
        Ok(!rows.is_empty())
    }

    /// Every logged call of an execution, by seq.
    pub fn log(&self, execution_id: &str) -> Result<Vec<LogEntry>, StoreError> {
        let rows = self.sql.exec(
            &format!("SELECT {LOG_COLS} FROM think_cm_log WHERE execution_id = ? ORDER BY seq"),
            &[execution_id.into()],
        )?;
        Ok(rows.into_iter().map(log_from_row).collect())
    }

    /// Logs a call.
    pub fn log_call(&self, execution_id: &str, entry: &LogEntry) -> Result<(), StoreError> {
        self.sql.exec(
            &format!("INSERT INTO think_cm_log (execution_id, {LOG_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            &[
                execution_id.into(),
                entry.seq.into(),
                entry.site.as_str().into(),
                entry.connector.as_str().into(),
                entry.method.as_str().into(),
                entry.args.to_string().into(),
                entry.result.as_ref().map(Value::to_string).into(),
                entry.state.as_str().into(),
                i64::from(entry.requires_approval).into(),
                i64::from(entry.ephemeral).into(),
            ],
        )?;
        Ok(())
    }

    /// Records a call's new state (and result).
    pub fn update_call(
        &self,
        execution_id: &str,
        seq: i64,
        state: CallState,
        result: Option<&Value>,
    ) -> Result<(), StoreError> {
        self.sql.exec(
            "UPDATE think_cm_log SET state = ?, result = ? WHERE execution_id = ? AND seq = ?",
            &[
                state.as_str().into(),
                result.map(Value::to_string).into(),
                execution_id.into(),
                seq.into(),
            ],
        )?;
        Ok(())
    }

    /// Moves every call of an execution in state `from` to `to`; returns how many moved.
    pub fn move_calls(
        &self,
        execution_id: &str,
        from: CallState,
        to: CallState,
    ) -> Result<usize, StoreError> {
        let rows = self.sql.exec(
            "UPDATE think_cm_log SET state = ? WHERE execution_id = ? AND state = ? RETURNING seq",
            &[to.as_str().into(), execution_id.into(), from.as_str().into()],
        )?;
        Ok(rows.len())
    }

    /// Calls waiting for approval, of one execution or of all.
    pub fn pending(
        &self,
        execution_id: Option<&str>,
    ) -> Result<Vec<(String, LogEntry)>, StoreError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT execution_id, {LOG_COLS} FROM think_cm_log WHERE state = 'pending'
                 AND (? IS NULL OR execution_id = ?) ORDER BY execution_id, seq"
            ),
            &[execution_id.into(), execution_id.into()],
        )?;
        Ok(rows
            .into_iter()
            .map(|mut row| {
                let id = match row.remove(0) {
                    SqlValue::Text(s) => s,
                    _ => String::new(),
                };
                (id, log_from_row(row))
            })
            .collect())
    }

    /// Drops terminal executions beyond the newest `keep` (paused and running ones are exempt),
    /// with their logs; returns how many went.
    pub fn prune(&self, keep: usize) -> Result<usize, StoreError> {
        let doomed = self.sql.exec(
            "SELECT id FROM think_cm_executions
             WHERE status IN ('completed', 'error', 'rejected', 'rolled_back')
             ORDER BY updated_at DESC, rowid DESC LIMIT -1 OFFSET ?",
            &[(keep as i64).into()],
        )?;
        let mut removed = 0;
        for row in doomed {
            if let Some(SqlValue::Text(id)) = row.into_iter().next() {
                removed += usize::from(self.delete(&id)?);
            }
        }
        Ok(removed)
    }

    /// Deletes an execution, its log and its undo records; false if there was none.
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.sql.exec("DELETE FROM think_cm_log WHERE execution_id = ?", &[id.into()])?;
        self.sql.exec("DELETE FROM think_cm_undo WHERE execution_id = ?", &[id.into()])?;
        let gone = self
            .sql
            .exec("DELETE FROM think_cm_executions WHERE id = ? RETURNING id", &[id.into()])?;
        Ok(!gone.is_empty())
    }

    /// Marks one logged call as undone by a rollback.
    pub fn mark_reverted(&self, execution_id: &str, seq: i64) -> Result<(), StoreError> {
        self.sql.exec(
            "UPDATE think_cm_log SET state = 'reverted' WHERE execution_id = ? AND seq = ?",
            &[execution_id.into(), seq.into()],
        )?;
        Ok(())
    }

    /// Moves an execution to `rolled_back`, keeping its recorded outcome.
    pub fn mark_rolled_back(&self, id: &str, now: f64) -> Result<(), StoreError> {
        self.sql.exec(
            "UPDATE think_cm_executions SET status = 'rolled_back', updated_at = ? WHERE id = ?",
            &[(now as i64).into(), id.into()],
        )?;
        Ok(())
    }

    /// Saves (or replaces) a snippet.
    pub fn save_snippet(&self, s: &Snippet) -> Result<(), StoreError> {
        self.sql.exec(
            "INSERT INTO think_cm_snippets (name, description, code, input_schema, saved_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT(name) DO UPDATE SET description = excluded.description, code = excluded.code,
               input_schema = excluded.input_schema, saved_at = excluded.saved_at",
            &[
                s.name.as_str().into(),
                s.description.clone().into(),
                s.code.as_str().into(),
                s.input_schema.as_ref().map(Value::to_string).into(),
                s.saved_at.into(),
            ],
        )?;
        Ok(())
    }

    /// Every snippet, by name.
    pub fn snippets(&self) -> Result<Vec<Snippet>, StoreError> {
        let rows = self.sql.exec(
            "SELECT name, description, code, input_schema, saved_at FROM think_cm_snippets ORDER BY name",
            &[],
        )?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let mut it = row.into_iter();
                Snippet {
                    name: text(&mut it).unwrap_or_default(),
                    description: text(&mut it),
                    code: text(&mut it).unwrap_or_default(),
                    input_schema: json(text(&mut it)),
                    saved_at: int(&mut it),
                }
            })
            .collect())
    }

    /// Deletes a snippet; false if there was none.
    pub fn delete_snippet(&self, name: &str) -> Result<bool, StoreError> {
        let rows = self
            .sql
            .exec("DELETE FROM think_cm_snippets WHERE name = ? RETURNING name", &[name.into()])?;
        Ok(!rows.is_empty())
    }
}
