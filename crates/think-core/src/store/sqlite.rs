//! The host-test implementation of [`Sql`] over a real SQLite database (rusqlite), so logic
//! written against the Durable Object's SQLite is tested against SQLite itself.

use super::{Row, Sql, SqlValue, StoreError};
use rusqlite::types::{Value, ValueRef};
use std::cell::RefCell;

/// An in-memory SQLite database.
pub struct SqliteSql {
    conn: RefCell<rusqlite::Connection>,
    /// Statements run so far: each is one JS/wasm crossing in the Durable Object.
    statements: std::cell::Cell<usize>,
    /// Virtual-machine steps so far: a measure of the work done that grows with rows visited.
    steps: std::cell::Cell<u64>,
}

impl SqliteSql {
    /// A fresh, empty in-memory database.
    pub fn new() -> Self {
        Self {
            conn: RefCell::new(rusqlite::Connection::open_in_memory().expect("open sqlite")),
            statements: std::cell::Cell::new(0),
            steps: std::cell::Cell::new(0),
        }
    }

    /// A database in the file at `path` (created when missing), for tests that reopen it as
    /// a process restarting after a crash would.
    pub fn open(path: &std::path::Path) -> Self {
        Self {
            conn: RefCell::new(rusqlite::Connection::open(path).expect("open sqlite file")),
            statements: std::cell::Cell::new(0),
            steps: std::cell::Cell::new(0),
        }
    }

    /// How many statements ran so far, for tests that bound the round trips of an operation.
    pub fn statements(&self) -> usize {
        self.statements.get()
    }

    /// How many SQLite VM steps ran so far, for tests that bound the rows an operation visits.
    pub fn steps(&self) -> u64 {
        self.steps.get()
    }
}

impl Default for SqliteSql {
    fn default() -> Self {
        Self::new()
    }
}

fn to_value(v: &SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(i) => Value::Integer(*i),
        SqlValue::Real(f) => Value::Real(*f),
        SqlValue::Text(s) => Value::Text(s.clone()),
        SqlValue::Blob(b) => Value::Blob(b.clone()),
    }
}

fn sql_error(e: rusqlite::Error) -> StoreError {
    StoreError::Sql(e.to_string())
}

impl Sql for SqliteSql {
    fn exec(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, StoreError> {
        self.statements.set(self.statements.get() + 1);
        if params.len() > 100 {
            return Err(StoreError::Limit(format!("too many SQL variables: {}", params.len())));
        }
        if sql.len() > 100_000 {
            return Err(StoreError::Limit("statement too long".into()));
        }
        let conn = self.conn.borrow();
        let mut stmt = conn.prepare(sql).map_err(sql_error)?;
        let values: Vec<Value> = params.iter().map(to_value).collect();
        let cols = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(values.iter())).map_err(sql_error)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(sql_error)? {
            let mut r = Vec::with_capacity(cols);
            for i in 0..cols {
                let v = row.get_ref(i).map_err(sql_error)?;
                r.push(match v {
                    ValueRef::Null => SqlValue::Null,
                    ValueRef::Integer(i) => SqlValue::Integer(i),
                    ValueRef::Real(f) => SqlValue::Real(f),
                    ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                });
            }
            out.push(r);
        }
        drop(rows);
        let steps = stmt.get_status(rusqlite::StatementStatus::VmStep) as u64;
        self.steps.set(self.steps.get() + steps);
        Ok(out)
    }

    /// By SQLite's count of changed rows, its triggers' included (`total_changes` before and
    /// after; `changes` would keep a previous statement's count after one that is no
    /// `INSERT`, `UPDATE` or `DELETE`).
    fn exec_changed(&self, sql: &str, params: &[SqlValue]) -> Result<bool, StoreError> {
        let before = self.conn.borrow().total_changes();
        self.exec(sql, params)?;
        Ok(self.conn.borrow().total_changes() > before)
    }

    fn transaction(&self, f: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.exec("SAVEPOINT think_tx", &[])?;
        match f() {
            Ok(()) => self.exec("RELEASE think_tx", &[]).map(|_| ()),
            Err(e) => {
                self.exec("ROLLBACK TO think_tx", &[])?;
                self.exec("RELEASE think_tx", &[])?;
                Err(e)
            }
        }
    }
}

/// A blob store held in memory, standing in for R2 in host tests of the spill logic.
#[derive(Default)]
pub struct MemoryBlobs {
    /// Every object by key, for tests that look inside the store.
    pub objects: RefCell<std::collections::BTreeMap<String, Vec<u8>>>,
}

#[async_trait::async_trait(?Send)]
impl super::BlobStore for MemoryBlobs {
    async fn put(&self, key: &str, bytes: &[u8], _content_type: &str) -> Result<(), StoreError> {
        self.objects.borrow_mut().insert(key.to_owned(), bytes.to_vec());
        Ok(())
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.objects.borrow().get(key).cloned())
    }
    async fn delete(&self, keys: &[String]) -> Result<(), StoreError> {
        let mut objects = self.objects.borrow_mut();
        for k in keys {
            objects.remove(k);
        }
        Ok(())
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.objects.borrow().keys().filter(|k| k.starts_with(prefix)).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_changed_is_false_exactly_when_no_row_changed_triggers_and_all() {
        let sql = SqliteSql::new();
        for ddl in [
            "CREATE TABLE f (path TEXT PRIMARY KEY, type TEXT, content TEXT, version INTEGER)",
            "CREATE TABLE h (path TEXT, version INTEGER, content TEXT)",
            "CREATE TRIGGER keep AFTER UPDATE OF content ON f
             BEGIN INSERT INTO h VALUES (OLD.path, OLD.version, OLD.content); END",
        ] {
            sql.exec(ddl, &[]).unwrap();
        }
        let text = |s: &str| SqlValue::Text(s.into());
        let insert = "INSERT INTO f VALUES (?, ?, 'one', 1) ON CONFLICT(path) DO NOTHING";
        assert!(sql.exec_changed(insert, &[text("/a"), text("file")]).unwrap());
        assert!(sql.exec_changed(insert, &[text("/d"), text("directory")]).unwrap());
        assert!(!sql.exec_changed(insert, &[text("/a"), text("file")]).unwrap(), "did nothing");
        let rewrite = "UPDATE f SET content = ?, version = version + 1
                       WHERE path = ? AND type = 'file'";
        assert!(sql.exec_changed(rewrite, &[text("two"), text("/a")]).unwrap());
        assert!(!sql.exec_changed(rewrite, &[text("x"), text("/gone")]).unwrap(), "no such row");
        assert!(!sql.exec_changed(rewrite, &[text("x"), text("/d")]).unwrap(), "not a file");
        // The same values still make a change, as SQLite counts them.
        assert!(sql.exec_changed("UPDATE f SET content = content WHERE path = '/a'", &[]).unwrap());
        assert!(!sql.exec_changed("SELECT * FROM f", &[]).unwrap(), "a read after a write");
        let kept = sql.exec("SELECT path, version, content FROM h", &[]).unwrap();
        assert_eq!(kept.len(), 2, "the trigger ran once per change: {kept:?}");
        assert_eq!(sql.statements(), 12);
    }
}
