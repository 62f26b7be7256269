//! Storage seams: the SQL database and the blob store (R2) that the agent and its workspace
//! sit on. The Durable Object glue implements them over `ctx.storage.sql` and an R2 binding;
//! host tests implement them over a real SQLite file (rusqlite), so the same logic is tested.

use async_trait::async_trait;

#[cfg(test)]
pub mod sqlite;

/// One SQL value, the intersection of what DO SQLite and rusqlite can carry.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Integer(i64),
    /// A float.
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A result row, in column order.
pub type Row = Vec<SqlValue>;

/// A storage failure. The variants say why, so a caller can tell a limit it hit from a
/// database that failed; each displays as the backend's own message (tools show it as is).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed or refused a statement; the text is the backend's message.
    Sql(String),
    /// A statement passes a platform limit (bound parameters or statement length).
    Limit(String),
    /// A value could not be encoded for storage or decoded from it.
    Encoding(String),
    /// The blob store (R2) failed.
    Blob(String),
    /// A transaction was rolled back because its body failed with this message.
    Aborted(String),
    /// The platform lacks a storage API the agent needs.
    Unavailable(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Sql(m)
            | StoreError::Limit(m)
            | StoreError::Encoding(m)
            | StoreError::Blob(m)
            | StoreError::Aborted(m)
            | StoreError::Unavailable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Encoding(e.to_string())
    }
}

/// Runs each `CREATE … IF NOT EXISTS` statement of a schema; once per instance, not per use.
pub fn create_tables(sql: &dyn Sql, schema: &[&str]) -> Result<(), StoreError> {
    for statement in schema {
        sql.exec(statement, &[])?;
    }
    Ok(())
}

/// Synchronous SQL, as the Durable Object's SQLite API is synchronous.
///
/// Platform limits apply to every implementation: rows up to 2 MB, statements up to 100 KB
/// and at most 100 bound parameters. Callers chunk their work to stay inside them.
pub trait Sql {
    /// Runs one statement and returns every row it produced.
    fn exec(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, StoreError>;

    /// Runs one statement that returns no rows and says whether it changed any row (an
    /// `UPDATE` that matched none did not). Cheaper than learning it from `RETURNING`, for
    /// whose result SQLite opens a temporary B-tree on every statement.
    fn exec_changed(&self, sql: &str, params: &[SqlValue]) -> Result<bool, StoreError>;

    /// [`Sql::exec_changed`] with the blob `bytes` bound at parameter `at`, where `params`
    /// holds a NULL: borrowed, so that a file's content is not copied for the call (the
    /// Durable Object's bridge binds it as a view of wasm memory). The default copies it in.
    fn exec_changed_blob(
        &self,
        sql: &str,
        params: &[SqlValue],
        at: usize,
        bytes: &[u8],
    ) -> Result<bool, StoreError> {
        let mut params = params.to_vec();
        if let Some(p) = params.get_mut(at) {
            *p = SqlValue::Blob(bytes.to_vec());
        }
        self.exec_changed(sql, &params)
    }

    /// Runs `f` atomically: every statement inside commits together or not at all.
    fn transaction(&self, f: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError>;
}

/// The names among `triggers` whose stored statement lacks `marker`: triggers an older
/// version created, for the caller to drop before creating them anew (`IF NOT EXISTS`).
/// Compared here, not with `LIKE`, so `marker` is plain text.
pub fn triggers_without(
    sql: &dyn Sql,
    triggers: &[&str],
    marker: &str,
) -> Result<Vec<String>, StoreError> {
    let names = vec!["?"; triggers.len()].join(", ");
    let params: Vec<SqlValue> = triggers.iter().map(|n| SqlValue::Text((*n).to_owned())).collect();
    let rows = sql.exec(
        &format!(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN ({names})"
        ),
        &params,
    )?;
    Ok(rows
        .into_iter()
        .filter(|r| r.get(1).and_then(SqlValue::as_str).is_some_and(|ddl| !ddl.contains(marker)))
        .filter_map(|r| r.first().and_then(SqlValue::as_str).map(str::to_owned))
        .collect())
}

/// Object storage for content too large for a SQLite row (R2 in production).
#[async_trait(?Send)]
pub trait BlobStore {
    /// Stores `bytes` under `key`. Borrowed: the store copies them out where it must (R2
    /// into a JavaScript buffer), so a large file is not first copied for the call.
    async fn put(&self, key: &str, bytes: &[u8], content_type: &str) -> Result<(), StoreError>;
    /// The bytes under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Deletes the given keys (missing ones are fine).
    async fn delete(&self, keys: &[String]) -> Result<(), StoreError>;
    /// Every key under `prefix`, for cleanup and for tests that check for orphans.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError>;
}

impl SqlValue {
    /// The value as an integer (a real is truncated).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            SqlValue::Integer(i) => Some(*i),
            SqlValue::Real(f) => Some(*f as i64),
            _ => None,
        }
    }

    /// The text, if it is text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            SqlValue::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The text, if it is text.
    pub fn into_string(self) -> Option<String> {
        match self {
            SqlValue::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes of a blob or of text.
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        match self {
            SqlValue::Blob(b) => Some(b),
            SqlValue::Text(s) => Some(s.into_bytes()),
            _ => None,
        }
    }

    /// Whether it is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, SqlValue::Null)
    }
}

impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_owned())
    }
}

impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        SqlValue::Integer(v)
    }
}

impl From<Vec<u8>> for SqlValue {
    fn from(v: Vec<u8>) -> Self {
        SqlValue::Blob(v)
    }
}

impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map(Into::into).unwrap_or(SqlValue::Null)
    }
}
