//! The chat transcript and per-agent settings in SQLite, below the agent and the checkpoints
//! that both use its tables. One row per UI message, each kept
//! under the 2 MB row limit by the sanitizer before it is written. Under the `queue` policy a
//! user message waits in its own table until its turn starts, so the model never sees a
//! message whose turn has not come, and each answer follows its own message.

use serde_json::Value;

use crate::protocol::message::UIMessage;
use crate::store::{Sql, SqlValue, StoreError};

/// The transcript's table: one row per UI message, in `seq` order. Checkpoints journal it.
pub const MESSAGES_TABLE: &str = "think_messages";

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS think_config (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS think_queued_messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        request_id TEXT NOT NULL,
        id TEXT NOT NULL UNIQUE,
        body TEXT NOT NULL)",
];

/// Parses stored message bodies, skipping rows that no longer parse.
fn parse_bodies(rows: Vec<crate::store::Row>) -> impl Iterator<Item = UIMessage> {
    rows.into_iter()
        .filter_map(|mut r| r.pop()?.into_string())
        .filter_map(|body| crate::protocol::json::from_str_deep::<Value>(&body).ok())
        .filter_map(|v| UIMessage::from_value(v).ok())
}

/// Transcript and settings storage for one agent instance.
pub struct ChatStore<'a> {
    sql: &'a dyn Sql,
}

impl<'a> ChatStore<'a> {
    /// Creates the tables if they do not exist; once per instance, not per use.
    pub fn create_tables(sql: &dyn Sql) -> Result<(), StoreError> {
        crate::store::create_tables(sql, SCHEMA)
    }

    /// The store over tables made by [`ChatStore::create_tables`].
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    /// Every message in transcript order. Rows that no longer parse are skipped, not fatal.
    pub fn messages(&self) -> Result<Vec<UIMessage>, StoreError> {
        let rows = self.sql.exec("SELECT body FROM think_messages ORDER BY seq", &[])?;
        Ok(parse_bodies(rows).collect())
    }

    /// The transcript's message `id`, if it is there.
    pub fn message(&self, id: &str) -> Result<Option<UIMessage>, StoreError> {
        let rows = self.sql.exec("SELECT body FROM think_messages WHERE id = ?", &[id.into()])?;
        Ok(parse_bodies(rows).next())
    }

    /// Whether a message with this id is in the transcript or waiting in the queue.
    pub fn has_message(&self, id: &str) -> Result<bool, StoreError> {
        let rows = self.sql.exec(
            "SELECT 1 FROM think_messages WHERE id = ?
             UNION ALL SELECT 1 FROM think_queued_messages WHERE id = ?",
            &[id.into(), id.into()],
        )?;
        Ok(!rows.is_empty())
    }

    /// Puts a user message in the queue, to enter the transcript when turn `request_id` starts.
    pub fn enqueue(&self, request_id: &str, message: &UIMessage) -> Result<(), StoreError> {
        self.sql.exec(
            "INSERT OR IGNORE INTO think_queued_messages (request_id, id, body) VALUES (?, ?, ?)",
            &[request_id.into(), message.id.as_str().into(), body_of(message)?.into()],
        )?;
        Ok(())
    }

    /// Every queued message in arrival order, with the turn it waits for.
    pub fn queued(&self) -> Result<Vec<(String, UIMessage)>, StoreError> {
        let rows = self
            .sql
            .exec("SELECT request_id, body FROM think_queued_messages ORDER BY seq", &[])?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let mut it = row.into_iter();
                let request_id = it.next()?.into_string()?;
                let message = parse_bodies(vec![it.collect()]).next()?;
                Some((request_id, message))
            })
            .collect())
    }

    /// Moves the messages queued for turn `request_id` to the end of the transcript, in
    /// order, atomically; returns them (none when a clear dropped them meanwhile).
    pub fn take_queued(&self, request_id: &str, now_ms: f64) -> Result<Vec<UIMessage>, StoreError> {
        let mine: Vec<UIMessage> =
            self.queued()?.into_iter().filter(|(r, _)| r == request_id).map(|(_, m)| m).collect();
        self.sql.transaction(&mut || {
            for m in &mine {
                self.upsert(m, now_ms)?;
            }
            self.sql.exec(
                "DELETE FROM think_queued_messages WHERE request_id = ?",
                &[request_id.into()],
            )?;
            Ok(())
        })?;
        Ok(mine)
    }

    /// Inserts `message`, or replaces the stored message with the same id in place.
    pub fn upsert(&self, message: &UIMessage, now_ms: f64) -> Result<(), StoreError> {
        self.sql.exec(
            "INSERT INTO think_messages (id, role, body, created_at) VALUES (?, ?, ?, ?)
             ON CONFLICT(id) DO UPDATE SET body = excluded.body, role = excluded.role",
            &[
                message.id.as_str().into(),
                message.role.as_str().into(),
                body_of(message)?.into(),
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

    /// Drops the transcript and every queued message.
    pub fn clear(&self) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_messages", &[])?;
        self.sql.exec("DELETE FROM think_queued_messages", &[])?;
        Ok(())
    }

    /// A stored setting, if set.
    pub fn config(&self, key: &str) -> Result<Option<String>, StoreError> {
        let rows = self.sql.exec("SELECT value FROM think_config WHERE key = ?", &[key.into()])?;
        Ok(rows.into_iter().next().and_then(|mut r| r.pop()?.into_string()))
    }

    /// Stores a setting, replacing its old value.
    pub fn set_config(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.sql.exec(
            "INSERT INTO think_config (key, value) VALUES (?, ?)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            &[key.into(), value.into()],
        )?;
        Ok(())
    }

    /// Forgets a setting.
    pub fn delete_config(&self, key: &str) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_config WHERE key = ?", &[key.into()])?;
        Ok(())
    }
}

/// A message as stored: its UI JSON.
fn body_of(message: &UIMessage) -> Result<String, StoreError> {
    Ok(serde_json::to_string(&message.to_value())?)
}
