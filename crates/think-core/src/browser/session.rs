//! Browser sessions and where they are kept. A session is a browser context (its own
//! cookies, storage and tabs) in the browser; its id lives in the object's SQLite, so a run
//! paused for approval finds its pages again after the object restarts, and the sweep can
//! close what idle runs left open.

use serde::Serialize;

use super::BrowserError;
use crate::store::{Sql, SqlValue, StoreError};

/// Which session a `browser_execute` run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionMode {
    /// A fresh session per run, closed when the run ends (the browser tools' default).
    #[default]
    OneShot,
    /// One shared session, kept across runs.
    Reuse,
    /// A fresh session per run, which the code may promote to the shared one with
    /// `cdp.startSession()`.
    Dynamic,
}

impl SessionMode {
    /// Parses `one-shot`, `reuse` or `dynamic`.
    pub fn parse(s: &str) -> Result<Self, BrowserError> {
        match s.trim() {
            "" | "one-shot" | "oneshot" => Ok(Self::OneShot),
            "reuse" => Ok(Self::Reuse),
            "dynamic" => Ok(Self::Dynamic),
            other => Err(BrowserError::InvalidInput(format!(
                "unknown browser session mode {other:?} (one-shot, reuse, dynamic)"
            ))),
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OneShot => "one-shot",
            Self::Reuse => "reuse",
            Self::Dynamic => "dynamic",
        }
    }
}

/// The key of the shared session.
pub const SHARED_KEY: &str = "shared:default";
/// The context of a run row whose session is the shared one: the sweep leaves it open (the
/// run owns nothing to close) and drops it with the tombstones.
pub const USES_SHARED: &str = "@shared";

/// The key of a run's own session.
pub fn run_key(execution_id: &str) -> String {
    format!("run:{execution_id}")
}

/// One stored session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// `shared:default` or `run:<executionId>`.
    pub key: String,
    /// The browser context id.
    pub context_id: String,
    /// When it was opened, ms since the epoch.
    pub created_at: f64,
    /// When a call last used it.
    pub last_used: f64,
    /// Set once it was closed: why (`swept`, `closed`); the row stays so a later resume
    /// of the run fails loudly.
    pub closed: Option<String>,
}

const SCHEMA: &[&str] = &["CREATE TABLE IF NOT EXISTS think_browser_sessions (
    key TEXT PRIMARY KEY, context_id TEXT NOT NULL, created_at INTEGER NOT NULL,
    last_used INTEGER NOT NULL, closed TEXT)"];

/// Closed run rows are kept this long (for loud failures on resume), then deleted.
pub const TOMBSTONE_MS: f64 = 7.0 * 24.0 * 3_600_000.0;

/// The session table.
pub struct Sessions<'a> {
    sql: &'a dyn Sql,
}

fn row(r: Vec<SqlValue>) -> Option<SessionRow> {
    let mut it = r.into_iter();
    Some(SessionRow {
        key: it.next()?.into_string()?,
        context_id: it.next()?.into_string()?,
        created_at: it.next()?.as_i64()? as f64,
        last_used: it.next()?.as_i64()? as f64,
        closed: it.next().and_then(SqlValue::into_string),
    })
}

impl<'a> Sessions<'a> {
    /// Creates the table (once per instance).
    pub fn create_tables(sql: &dyn Sql) -> Result<(), StoreError> {
        crate::store::create_tables(sql, SCHEMA)
    }

    /// The table over `sql`.
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    /// The session under `key`, closed or not.
    pub fn get(&self, key: &str) -> Result<Option<SessionRow>, StoreError> {
        let rows = self.sql.exec(
            "SELECT key, context_id, created_at, last_used, closed FROM think_browser_sessions WHERE key = ?",
            &[key.into()],
        )?;
        Ok(rows.into_iter().next().and_then(row))
    }

    /// Records an open session under `key` (replacing what was there).
    pub fn put(&self, key: &str, context_id: &str, now: f64) -> Result<(), StoreError> {
        self.sql.exec(
            "INSERT OR REPLACE INTO think_browser_sessions (key, context_id, created_at, last_used, closed) VALUES (?, ?, ?, ?, NULL)",
            &[key.into(), context_id.into(), (now as i64).into(), (now as i64).into()],
        )?;
        Ok(())
    }

    /// Notes a use of `key`.
    pub fn touch(&self, key: &str, now: f64) -> Result<(), StoreError> {
        self.sql.exec(
            "UPDATE think_browser_sessions SET last_used = ? WHERE key = ?",
            &[(now as i64).into(), key.into()],
        )?;
        Ok(())
    }

    /// Marks `key` closed, saying why.
    pub fn mark_closed(&self, key: &str, why: &str) -> Result<(), StoreError> {
        self.sql.exec(
            "UPDATE think_browser_sessions SET closed = ? WHERE key = ?",
            &[why.into(), key.into()],
        )?;
        Ok(())
    }

    /// Forgets `key`.
    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_browser_sessions WHERE key = ?", &[key.into()])?;
        Ok(())
    }

    /// Open run sessions last used before `before`.
    pub fn idle_runs(&self, before: f64) -> Result<Vec<SessionRow>, StoreError> {
        let rows = self.sql.exec(
            "SELECT key, context_id, created_at, last_used, closed FROM think_browser_sessions WHERE key LIKE 'run:%' AND closed IS NULL AND context_id != ? AND last_used < ?",
            &[USES_SHARED.into(), (before as i64).into()],
        )?;
        Ok(rows.into_iter().filter_map(row).collect())
    }

    /// When the oldest open run session was last used, if any is open.
    pub fn oldest_open_run(&self) -> Result<Option<f64>, StoreError> {
        let rows = self.sql.exec(
            "SELECT MIN(last_used) FROM think_browser_sessions WHERE key LIKE 'run:%' AND closed IS NULL AND context_id != ?",
            &[USES_SHARED.into()],
        )?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .and_then(|v| v.as_i64())
            .map(|v| v as f64))
    }

    /// Deletes closed rows, and runs' rows on the shared session, older than `before`.
    pub fn prune_closed(&self, before: f64) -> Result<(), StoreError> {
        self.sql.exec(
            "DELETE FROM think_browser_sessions WHERE (closed IS NOT NULL OR context_id = ?) AND last_used < ?",
            &[USES_SHARED.into(), (before as i64).into()],
        )?;
        Ok(())
    }
}
