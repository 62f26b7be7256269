//! Loaded extensions in the object's SQLite, so they are loaded again after a restart, in
//! the order they were first loaded. One row per extension: its manifest and its source
//! (a source is at most [`super::MAX_SOURCE_BYTES`], well under the 2 MB row limit), and
//! the random token of that load, which names its isolate (so a load after an unload, even
//! of the same source, never enters the isolate of the one before).

use std::rc::Rc;

use super::isolate::Description;
use super::manifest::Manifest;
use super::ExtensionError;
use crate::store::{create_tables, Sql, SqlValue};

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_extensions (\
     name TEXT PRIMARY KEY, seq INTEGER NOT NULL, manifest TEXT NOT NULL, source TEXT NOT NULL, \
     description TEXT NOT NULL, token TEXT)",
    // One row per hook run while it runs. A row found when the object starts is a run that
    // ended with its process: `stopped` marks it, and that hook stays off until the
    // extension is loaded again.
    "CREATE TABLE IF NOT EXISTS think_extension_hook_runs (\
     run INTEGER PRIMARY KEY, extension TEXT NOT NULL, hook TEXT NOT NULL, \
     stopped INTEGER NOT NULL DEFAULT 0)",
];

/// The stored extensions of one agent instance.
#[derive(Clone)]
pub struct ExtensionStore {
    sql: Rc<dyn Sql>,
}

impl ExtensionStore {
    /// Opens the store, creating its table (and the token column a table of before lacks).
    pub fn open(sql: Rc<dyn Sql>) -> Result<Self, ExtensionError> {
        create_tables(sql.as_ref(), SCHEMA)?;
        let table = sql.exec(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'think_extensions'",
            &[],
        )?;
        let has_token = table
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .and_then(SqlValue::into_string)
            .is_some_and(|ddl| ddl.contains("token"));
        if !has_token {
            sql.exec("ALTER TABLE think_extensions ADD COLUMN token TEXT", &[])?;
        }
        Ok(Self { sql })
    }

    /// A new random token (64 bits, as hex), from SQLite's own generator.
    pub fn new_token(&self) -> Result<String, ExtensionError> {
        let rows = self.sql.exec("SELECT lower(hex(randomblob(8)))", &[])?;
        rows.into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .and_then(SqlValue::into_string)
            .ok_or_else(|| {
                ExtensionError::Store(crate::store::StoreError::Encoding("no token".into()))
            })
    }

    /// Gives the stored extension `name` the token `token` (a row stored before tokens).
    pub fn set_token(&self, name: &str, token: &str) -> Result<(), ExtensionError> {
        self.sql.exec(
            "UPDATE think_extensions SET token = ? WHERE name = ?",
            &[token.into(), name.into()],
        )?;
        Ok(())
    }

    /// Stores an extension, with what its source described and its load's token, after the
    /// last one.
    pub fn put(
        &self,
        manifest: &Manifest,
        source: &str,
        description: &Description,
        token: Option<&str>,
    ) -> Result<(), ExtensionError> {
        let encode = |e: serde_json::Error| {
            ExtensionError::Store(crate::store::StoreError::Encoding(e.to_string()))
        };
        let json = serde_json::to_string(manifest).map_err(encode)?;
        let described = serde_json::to_string(description).map_err(encode)?;
        self.sql.exec(
            "INSERT INTO think_extensions (name, seq, manifest, source, description, token) \
             VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM think_extensions), ?, ?, ?, ?)",
            &[
                manifest.name.as_str().into(),
                json.into(),
                source.into(),
                described.into(),
                token.map_or(SqlValue::Null, SqlValue::from),
            ],
        )?;
        Ok(())
    }

    /// Forgets an extension; false when none was stored under that name.
    pub fn delete(&self, name: &str) -> Result<bool, ExtensionError> {
        let rows = self
            .sql
            .exec("DELETE FROM think_extensions WHERE name = ? RETURNING name", &[name.into()])?;
        Ok(!rows.is_empty())
    }

    /// Notes that a run of `hook` of `extension` has started; its number, for
    /// [`ExtensionStore::hook_finished`].
    pub fn hook_started(&self, extension: &str, hook: &str) -> Result<i64, ExtensionError> {
        let rows = self.sql.exec(
            "INSERT INTO think_extension_hook_runs (extension, hook) VALUES (?, ?) RETURNING run",
            &[extension.into(), hook.into()],
        )?;
        match rows.into_iter().next().and_then(|r| r.into_iter().next()) {
            Some(SqlValue::Integer(run)) => Ok(run),
            _ => Err(ExtensionError::Store(crate::store::StoreError::Encoding(
                "no run number".into(),
            ))),
        }
    }

    /// Notes that run `run` has ended (with a result or an error).
    pub fn hook_finished(&self, run: i64) -> Result<(), ExtensionError> {
        self.sql.exec("DELETE FROM think_extension_hook_runs WHERE run = ?", &[run.into()])?;
        Ok(())
    }

    /// At start: marks every run left over as stopped with its process, and returns the
    /// (extension, hook) pairs that ever stopped one.
    pub fn stopped_hooks(&self) -> Result<Vec<(String, String)>, ExtensionError> {
        self.sql.exec("UPDATE think_extension_hook_runs SET stopped = 1 WHERE stopped = 0", &[])?;
        let rows = self.sql.exec(
            "SELECT DISTINCT extension, hook FROM think_extension_hook_runs ORDER BY extension, hook",
            &[],
        )?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let mut cells = row.into_iter().map(SqlValue::into_string);
                (
                    cells.next().flatten().unwrap_or_default(),
                    cells.next().flatten().unwrap_or_default(),
                )
            })
            .collect())
    }

    /// Forgets the hook runs of `extension` (it was loaded again or unloaded).
    pub fn clear_hook_runs(&self, extension: &str) -> Result<(), ExtensionError> {
        self.sql.exec(
            "DELETE FROM think_extension_hook_runs WHERE extension = ?",
            &[extension.into()],
        )?;
        Ok(())
    }

    /// Every stored extension in load order; a row that no longer reads as a manifest is
    /// returned as the error it gives, so the caller can report it and go on.
    pub fn all(&self) -> Result<Vec<Result<Stored, ExtensionError>>, ExtensionError> {
        let rows = self.sql.exec(
            "SELECT manifest, source, description, token FROM think_extensions ORDER BY seq",
            &[],
        )?;
        Ok(rows.into_iter().map(decode).collect())
    }
}

/// A stored extension: its manifest, source, description and load token (none for a row
/// stored before tokens).
pub type Stored = (Manifest, String, Description, Option<String>);

fn decode(row: crate::store::Row) -> Result<Stored, ExtensionError> {
    let mut cells = row.into_iter().map(SqlValue::into_string);
    let (manifest, source, description, token) = (
        cells.next().flatten().unwrap_or_default(),
        cells.next().flatten().unwrap_or_default(),
        cells.next().flatten().unwrap_or_default(),
        cells.next().flatten(),
    );
    let value = serde_json::from_str(&manifest)
        .map_err(|e| ExtensionError::InvalidManifest(e.to_string()))?;
    let description = serde_json::from_str(&description)
        .map_err(|e| ExtensionError::InvalidSource(format!("its stored description: {e}")))?;
    Ok((Manifest::from_json(value)?, source, description, token))
}
