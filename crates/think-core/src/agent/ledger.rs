//! The execution ledger: every server-side tool execution is recorded by tool call id before
//! it runs and again when it finishes. Recovery after a crash reads it instead of running a
//! tool again, which makes server tools at-most-once across restarts:
//! - a call with a recorded result is answered from the ledger, never re-run;
//! - a call that started but has no recorded result (the process died during it) is reported
//!   to the model as interrupted, never re-run, because it may already have had its effect.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::Value;

use crate::protocol::json::from_str_deep;
use crate::store::{Sql, SqlValue, StoreError};
use crate::tools::{ModelOutput, Tool, ToolContext, ToolDefinition, ToolError, ToolRef};

/// Results larger than this are stored as a note instead of in full (rows stay under 2 MB).
const MAX_OUTPUT_BYTES: usize = 1_500_000;
/// Ledger entries older than this are dropped by the cleanup alarm.
pub const RETENTION_MS: f64 = 24.0 * 3_600_000.0;

/// The error a call gets when the process died while it ran.
pub const INTERRUPTED_DURING_RUN: &str =
    "The tool call was interrupted by a restart while it ran; it may or may not have taken effect, so it was not run again.";

/// The error a call that ran code ([`Tool::runs_code`]) gets when the process died while it
/// ran. Locally the runtime stops when sandboxed code exhausts memory (V8 has no per-isolate
/// limit there; `npm start` restarts it), so this names memory for the model to act on.
pub const INTERRUPTED_CODE_DURING_RUN: &str =
    "The code stopped because its runtime stopped and restarted while it ran, which is what code that exhausts memory causes (for example an array or string that grows without bound). It may or may not have taken effect, so it was not run again. Keep less in memory at once.";

/// A ledger entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// The call was recorded as started and has no result (it may have run); `code` when the
    /// tool runs code ([`Tool::runs_code`]).
    Started {
        /// The tool runs code the model or an extension wrote.
        code: bool,
    },
    /// The call finished with this output.
    Succeeded(Value),
    /// The call failed with this error text.
    Failed(String),
}

const SCHEMA: &[&str] = &["CREATE TABLE IF NOT EXISTS think_tool_ledger (
    tool_call_id TEXT PRIMARY KEY,
    tool_name TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    updated_at INTEGER NOT NULL)"];

/// The ledger over one SQL database.
pub struct Ledger<'a> {
    sql: &'a dyn Sql,
}

impl<'a> Ledger<'a> {
    /// Creates the table if it does not exist; once per instance, not per use.
    pub fn create_table(sql: &dyn Sql) -> Result<(), StoreError> {
        crate::store::create_tables(sql, SCHEMA)
    }

    /// The ledger over the table made by [`Ledger::create_table`].
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    /// The entry of a call, if the ledger has one.
    pub fn get(&self, tool_call_id: &str) -> Result<Option<Entry>, StoreError> {
        let rows = self.sql.exec(
            "SELECT status, result FROM think_tool_ledger WHERE tool_call_id = ?",
            &[tool_call_id.into()],
        )?;
        let Some(row) = rows.into_iter().next() else { return Ok(None) };
        let mut it = row.into_iter();
        let status = it.next().and_then(SqlValue::into_string).unwrap_or_default();
        let result = it.next().and_then(SqlValue::into_string).unwrap_or_default();
        Ok(Some(match status.as_str() {
            "done" => Entry::Succeeded(from_str_deep(&result).unwrap_or(Value::Null)),
            "error" => Entry::Failed(result),
            "started_code" => Entry::Started { code: true },
            _ => Entry::Started { code: false },
        }))
    }

    /// Records where a call stands, replacing what was recorded before.
    pub fn record(
        &self,
        tool_call_id: &str,
        tool_name: &str,
        entry: &Entry,
        now: f64,
    ) -> Result<(), StoreError> {
        let (status, result) = match entry {
            Entry::Started { code: false } => ("started", SqlValue::Null),
            Entry::Started { code: true } => ("started_code", SqlValue::Null),
            Entry::Succeeded(v) => {
                let mut text = v.to_string();
                if text.len() > MAX_OUTPUT_BYTES {
                    text = serde_json::json!({"note": "The result was too large to keep for recovery.", "bytes": text.len()})
                        .to_string();
                }
                ("done", SqlValue::Text(text))
            }
            Entry::Failed(e) => ("error", SqlValue::Text(e.chars().take(100_000).collect())),
        };
        self.sql.exec(
            "INSERT INTO think_tool_ledger (tool_call_id, tool_name, status, result, updated_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT(tool_call_id) DO UPDATE SET status = excluded.status, result = excluded.result, updated_at = excluded.updated_at",
            &[tool_call_id.into(), tool_name.into(), status.into(), result, SqlValue::Integer(now as i64)],
        )?;
        Ok(())
    }

    /// Drops entries older than [`RETENTION_MS`].
    pub fn cleanup(&self, now: f64) -> Result<(), StoreError> {
        self.sql.exec(
            "DELETE FROM think_tool_ledger WHERE updated_at < ?",
            &[SqlValue::Integer((now - RETENTION_MS) as i64)],
        )?;
        Ok(())
    }

    /// Drops every entry (a chat clear).
    pub fn clear(&self) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_tool_ledger", &[])?;
        Ok(())
    }
}

/// Wraps a server tool so each execution goes through the ledger.
pub struct LedgeredTool {
    inner: ToolRef,
    sql: Rc<dyn Sql>,
    now: Rc<dyn Fn() -> f64>,
}

impl LedgeredTool {
    /// Wraps `inner` if it runs on the server; client tools pass through unchanged.
    pub fn wrap(inner: ToolRef, sql: Rc<dyn Sql>, now: Rc<dyn Fn() -> f64>) -> ToolRef {
        if !inner.executes_on_server() {
            return inner;
        }
        Rc::new(LedgeredTool { inner, sql, now })
    }

    /// The recorded outcome of a call the ledger already has; otherwise records it started
    /// and returns `None`. Kept out of [`Tool::execute`]'s body, like [`Self::finish`], so
    /// that the body resumed after the call is small (see [`crate::codemode::sandbox`]).
    #[inline(never)]
    fn start(&self, ctx: &ToolContext) -> Option<Result<Value, ToolError>> {
        let prior = Ledger::new(self.sql.as_ref()).get(&ctx.tool_call_id).ok().flatten();
        match prior {
            Some(Entry::Succeeded(v)) => return Some(Ok(v)),
            Some(Entry::Failed(e)) => return Some(Err(ToolError::Failed(e))),
            Some(Entry::Started { code }) => {
                return Some(Err(ToolError::Failed(interrupted_message(code).into())))
            }
            None => {}
        }
        self.record(ctx, &Entry::Started { code: self.inner.runs_code() });
        None
    }

    /// Records how a call ended.
    #[inline(never)]
    fn finish(&self, ctx: &ToolContext, result: &Result<Value, ToolError>) {
        match result {
            Ok(v) => self.record(ctx, &Entry::Succeeded(v.clone())),
            Err(e) => self.record(ctx, &Entry::Failed(e.to_string())),
        }
    }

    fn record(&self, ctx: &ToolContext, entry: &Entry) {
        if let Err(e) = Ledger::new(self.sql.as_ref()).record(
            &ctx.tool_call_id,
            &ctx.tool_name,
            entry,
            (self.now)(),
        ) {
            crate::platform::log(&format!(
                "think-rs: the tool ledger could not record {}: {e}",
                ctx.tool_call_id
            ));
        }
    }
}

#[async_trait(?Send)]
impl Tool for LedgeredTool {
    fn definition(&self) -> &ToolDefinition {
        self.inner.definition()
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        if let Some(prior) = self.start(ctx) {
            return prior;
        }
        let result = self.inner.execute(input, ctx).await;
        self.finish(ctx, &result);
        result
    }

    fn executes_on_server(&self) -> bool {
        true
    }

    fn needs_approval(&self, input: &Value) -> bool {
        self.inner.needs_approval(input)
    }

    fn model_output(&self, output: &Value) -> ModelOutput {
        self.inner.model_output(output)
    }

    fn take_images(&self, tool_call_id: &str) -> Vec<crate::model::ImagePart> {
        self.inner.take_images(tool_call_id)
    }

    fn runs_code(&self) -> bool {
        self.inner.runs_code()
    }
}

/// What the model is told of a call a restart interrupted.
pub fn interrupted_message(code: bool) -> &'static str {
    if code {
        INTERRUPTED_CODE_DURING_RUN
    } else {
        INTERRUPTED_DURING_RUN
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteSql;
    use crate::tools::DynamicTool;
    use serde_json::json;
    use std::cell::Cell;

    #[test]
    fn a_recorded_call_is_never_run_twice() {
        let sql: Rc<dyn Sql> = Rc::new(SqliteSql::new());
        Ledger::create_table(sql.as_ref()).unwrap();
        let runs = Rc::new(Cell::new(0));
        let counter = runs.clone();
        let tool: ToolRef =
            Rc::new(DynamicTool::new("charge", "", json!({"type": "object"}), move |_, _| {
                counter.set(counter.get() + 1);
                async { Ok(json!({"charged": true})) }
            }));
        let wrapped = LedgeredTool::wrap(tool, sql.clone(), Rc::new(|| 1000.0));
        let ctx = ToolContext { tool_call_id: "c1".into(), tool_name: "charge".into() };
        let first = futures::executor::block_on(wrapped.execute(json!({}), &ctx)).unwrap();
        let again = futures::executor::block_on(wrapped.execute(json!({}), &ctx)).unwrap();
        assert_eq!(first, again);
        assert_eq!(runs.get(), 1);

        // A call that started but never finished (the process died) is not re-run.
        let ledger = Ledger::new(sql.as_ref());
        ledger.record("c2", "charge", &Entry::Started { code: false }, 1000.0).unwrap();
        let ctx2 = ToolContext { tool_call_id: "c2".into(), tool_name: "charge".into() };
        let err = futures::executor::block_on(wrapped.execute(json!({}), &ctx2)).unwrap_err();
        assert_eq!(err.to_string(), INTERRUPTED_DURING_RUN);
        assert_eq!(runs.get(), 1);
        ledger.cleanup(1000.0 + RETENTION_MS + 1.0).unwrap();
        assert_eq!(ledger.get("c1").unwrap(), None);
    }

    /// The process dies while a tool that runs code is running (its future is dropped after
    /// the ledger recorded the start): the call is reported with the memory wording, for the
    /// model to change its code, and not run again; other tools keep the general wording.
    #[test]
    fn a_restart_during_code_is_reported_as_memory_and_not_run_again() {
        use futures::FutureExt;
        let sql: Rc<dyn Sql> = Rc::new(SqliteSql::new());
        Ledger::create_table(sql.as_ref()).unwrap();
        let runs = Rc::new(Cell::new(0));
        let make = |name: &str, code: bool| {
            let counter = runs.clone();
            let tool = DynamicTool::new(name, "", json!({"type": "object"}), move |_, _| {
                counter.set(counter.get() + 1);
                futures::future::pending::<Result<Value, ToolError>>()
            });
            let tool: ToolRef = Rc::new(if code { tool.running_code() } else { tool });
            LedgeredTool::wrap(tool, sql.clone(), Rc::new(|| 1000.0))
        };
        let (code_tool, plain_tool) = (make("ext_loop", true), make("charge", false));
        assert!(code_tool.runs_code() && !plain_tool.runs_code());
        let code_ctx = ToolContext { tool_call_id: "k1".into(), tool_name: "ext_loop".into() };
        let plain_ctx = ToolContext { tool_call_id: "k2".into(), tool_name: "charge".into() };
        assert!(code_tool.execute(json!({}), &code_ctx).now_or_never().is_none());
        assert!(plain_tool.execute(json!({}), &plain_ctx).now_or_never().is_none());
        assert_eq!(runs.get(), 2);
        let ledger = Ledger::new(sql.as_ref());
        assert_eq!(ledger.get("k1").unwrap(), Some(Entry::Started { code: true }));
        assert_eq!(ledger.get("k2").unwrap(), Some(Entry::Started { code: false }));

        let err = futures::executor::block_on(code_tool.execute(json!({}), &code_ctx)).unwrap_err();
        assert!(err.to_string().contains("exhausts memory"), "{err}");
        let err =
            futures::executor::block_on(plain_tool.execute(json!({}), &plain_ctx)).unwrap_err();
        assert_eq!(err.to_string(), INTERRUPTED_DURING_RUN);
        assert_eq!(runs.get(), 2, "neither call ran again");
    }
}
