//! The chat transcript and per-agent settings in SQLite. One row per UI message, each kept
//! under the 2 MB row limit by the sanitizer before it is written.

use serde_json::Value;

use crate::protocol::message::UIMessage;
use crate::store::{Sql, SqlValue, StoreError};

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS think_config (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
];

/// Transcript and settings storage for one agent instance.
pub struct ChatStore<'a> {
    sql: &'a dyn Sql,
}

impl<'a> ChatStore<'a> {
    /// Creates the tables if they do not exist; once per instance, not per use.
    pub fn create_tables(sql: &dyn Sql) -> Result<(), StoreError> {
        for s in SCHEMA {
            sql.exec(s, &[])?;
        }
        Ok(())
    }

    /// The store over tables made by [`ChatStore::create_tables`].
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    /// Every message in transcript order. Rows that no longer parse are skipped, not fatal.
    pub fn messages(&self) -> Result<Vec<UIMessage>, StoreError> {
        let rows = self.sql.exec("SELECT body FROM think_messages ORDER BY seq", &[])?;
        Ok(rows
            .into_iter()
            .filter_map(|mut r| r.pop()?.into_string())
            .filter_map(|body| serde_json::from_str::<Value>(&body).ok())
            .filter_map(|v| UIMessage::from_value(v).ok())
            .collect())
    }

    pub fn message(&self, id: &str) -> Result<Option<UIMessage>, StoreError> {
        let rows = self.sql.exec("SELECT body FROM think_messages WHERE id = ?", &[id.into()])?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|mut r| r.pop()?.into_string())
            .and_then(|b| serde_json::from_str::<Value>(&b).ok())
            .and_then(|v| UIMessage::from_value(v).ok()))
    }

    pub fn has_message(&self, id: &str) -> Result<bool, StoreError> {
        Ok(!self.sql.exec("SELECT 1 FROM think_messages WHERE id = ?", &[id.into()])?.is_empty())
    }

    /// Inserts `message`, or replaces the stored message with the same id in place.
    pub fn upsert(&self, message: &UIMessage, now_ms: f64) -> Result<(), StoreError> {
        let body =
            serde_json::to_string(&message.to_value()).map_err(|e| StoreError(e.to_string()))?;
        self.sql.exec(
            "INSERT INTO think_messages (id, role, body, created_at) VALUES (?, ?, ?, ?)
             ON CONFLICT(id) DO UPDATE SET body = excluded.body, role = excluded.role",
            &[
                message.id.as_str().into(),
                message.role.as_str().into(),
                body.into(),
                SqlValue::Integer(now_ms as i64),
            ],
        )?;
        Ok(())
    }

    /// Deletes the messages stored after the one with id `keep_through` (a regenerate).
    pub fn truncate_after(&self, keep_through: &str) -> Result<(), StoreError> {
        self.sql.exec(
            "DELETE FROM think_messages WHERE seq > (SELECT seq FROM think_messages WHERE id = ?)",
            &[keep_through.into()],
        )?;
        Ok(())
    }

    pub fn clear(&self) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_messages", &[])?;
        Ok(())
    }

    pub fn config(&self, key: &str) -> Result<Option<String>, StoreError> {
        let rows = self.sql.exec("SELECT value FROM think_config WHERE key = ?", &[key.into()])?;
        Ok(rows.into_iter().next().and_then(|mut r| r.pop()?.into_string()))
    }

    pub fn set_config(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.sql.exec(
            "INSERT INTO think_config (key, value) VALUES (?, ?)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            &[key.into(), value.into()],
        )?;
        Ok(())
    }

    pub fn delete_config(&self, key: &str) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_config WHERE key = ?", &[key.into()])?;
        Ok(())
    }
}
