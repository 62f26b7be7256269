//! Checkpoints of the workspace and the transcript together, and rewinding to them (issue 21).
//!
//! A checkpoint is an *epoch* of a copy-on-write undo journal, not a copy: taking one inserts
//! one row, so an unchanged workspace of any size costs a row. The first time a path (or a
//! transcript message the checkpoint saw) changes within an epoch, SQLite triggers save its
//! prior state (`schema.rs`); prior content is content-addressed, and R2 objects and chunk
//! sets are shared by reference with the live rows. Restoring checkpoint K applies, for every
//! path journaled in an epoch ≥ K, the earliest saved state among them (`files.rs`), inside one
//! SQL transaction that first opens a new checkpoint, so a rewind is itself undoable.
//! Retention drops the oldest epochs and collects the content no epoch needs (`prune.rs`);
//! `fork.rs` pages the state at a checkpoint into another instance.

mod files;
mod fork;
mod prune;
mod schema;
#[cfg(test)]
mod tests;

pub use fork::{ExportItem, ExportPage, MAX_PAGE_BYTES};
pub use prune::{PruneStats, Retention};

use crate::chat::MESSAGES_TABLE as MESSAGES;
use crate::store::{Row, Sql, SqlValue, StoreError};
use crate::workspace::{FsError, Workspace};
use schema::Tables;
use serde::{Deserialize, Serialize};
use std::rc::Rc;

/// One checkpoint as the app lists it (wire: `{id, label, turnId, at, filesChanged}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    /// Opaque id (`c<epoch>`), stable for the life of the checkpoint.
    pub id: String,
    /// The label the app gave it, if any.
    pub label: Option<String>,
    /// The turn it was taken for, if any.
    pub turn_id: Option<String>,
    /// When it was taken, in ms since the epoch.
    pub at: i64,
    /// Paths (not directories) changed between this checkpoint and the next one (or now).
    pub files_changed: u32,
}

/// How a path differs between a checkpoint and now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Absent at the checkpoint, present now.
    Added,
    /// Present at both, with different content, type or target.
    Modified,
    /// Present at the checkpoint, absent now.
    Deleted,
}

/// One changed path with the unified diff from the checkpoint's content to the current one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Absolute path.
    pub path: String,
    /// Added, modified or deleted.
    pub kind: ChangeKind,
    /// The unified diff (checkpoint → now); `None` when `note` says why.
    pub diff: Option<String>,
    /// Why there is no diff: binary content, too large, or a symlink/type change.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
}

/// What a rewind restores (both by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RewindScope {
    /// Restore the workspace.
    pub files: bool,
    /// Restore the transcript.
    pub transcript: bool,
}

impl Default for RewindScope {
    fn default() -> Self {
        Self { files: true, transcript: true }
    }
}

/// What a rewind did; `undo` is the checkpoint it took first (rewind to it to undo).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindOutcome {
    /// The checkpoint of the state before the rewind.
    pub undo: CheckpointInfo,
    /// Paths (not directories) put back as they were.
    pub files_restored: u32,
    /// Transcript messages removed (those after the checkpoint).
    pub messages_removed: u32,
    /// Every path the rewind changed, so the caller can tell the tabs.
    pub paths: Vec<String>,
}

/// Why a checkpoint operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckpointError {
    /// No checkpoint has this id (never taken, or pruned).
    NotFound(String),
    /// A turn is running (the agent refuses rewinds meanwhile).
    TurnRunning,
    /// An import into an instance that already has files or messages.
    NotEmpty,
    /// An export page that cannot be imported (its text says why).
    BadPage(String),
    /// The database failed.
    Store(StoreError),
    /// The workspace failed.
    Fs(FsError),
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointError::NotFound(id) => write!(f, "no checkpoint {id:?}"),
            CheckpointError::TurnRunning => f.write_str("a turn is running; try again after it"),
            CheckpointError::NotEmpty => {
                f.write_str("a fork is imported into an empty instance only")
            }
            CheckpointError::BadPage(m) => write!(f, "bad export page: {m}"),
            CheckpointError::Store(e) => write!(f, "checkpoint storage failed: {e}"),
            CheckpointError::Fs(e) => write!(f, "checkpoint workspace failed: {e}"),
        }
    }
}

impl std::error::Error for CheckpointError {}

impl From<StoreError> for CheckpointError {
    fn from(e: StoreError) -> Self {
        CheckpointError::Store(e)
    }
}

impl From<FsError> for CheckpointError {
    fn from(e: FsError) -> Self {
        CheckpointError::Fs(e)
    }
}

/// Checkpoints of one agent: its workspace and its transcript ([`MESSAGES`]).
pub struct Checkpoints {
    ws: Rc<Workspace>,
    sql: Rc<dyn Sql>,
    tables: Tables,
    retention: Retention,
}

pub(crate) fn col_i64(row: &Row, i: usize) -> i64 {
    row.get(i).and_then(SqlValue::as_i64).unwrap_or(0)
}

pub(crate) fn col_str(row: &Row, i: usize) -> Option<String> {
    row.get(i).and_then(SqlValue::as_str).map(str::to_owned)
}

/// The epoch behind an id `c<epoch>`.
fn epoch_of(id: &str) -> Result<i64, CheckpointError> {
    id.strip_prefix('c')
        .and_then(|n| n.parse::<i64>().ok())
        .ok_or_else(|| CheckpointError::NotFound(id.to_owned()))
}

impl Checkpoints {
    /// Checkpoints over the agent's workspace (and the transcript in the same database),
    /// with the default [`Retention`]. Creates the tables and triggers (once per instance).
    pub fn new(ws: Rc<Workspace>) -> Result<Self, CheckpointError> {
        Self::with_retention(ws, Retention::default())
    }

    /// [`Checkpoints::new`] with an explicit retention, applied whenever one is taken.
    pub fn with_retention(
        ws: Rc<Workspace>,
        retention: Retention,
    ) -> Result<Self, CheckpointError> {
        let sql = ws.sql().clone();
        ws.ensure_tables()?;
        crate::chat::ChatStore::create_tables(sql.as_ref())?;
        for statement in schema::shared() {
            sql.exec(&statement, &[])?;
        }
        let tables = Tables::new(ws.namespace(), ws.table_name(), ws.chunk_table_name());
        tables.drop_stale_triggers(sql.as_ref())?;
        for statement in tables.schema() {
            sql.exec(&statement, &[])?;
        }
        ws.start_journal()?;
        Ok(Self { ws, sql, tables, retention })
    }

    /// The workspace these checkpoints cover.
    pub fn workspace(&self) -> &Rc<Workspace> {
        &self.ws
    }

    /// Takes a checkpoint: one row, whatever the workspace's size; then applies retention.
    pub async fn create(
        &self,
        label: Option<&str>,
        turn_id: Option<&str>,
    ) -> Result<CheckpointInfo, CheckpointError> {
        let info = self.insert_checkpoint(label, turn_id)?;
        self.enforce(&self.retention.clone()).await?;
        Ok(info)
    }

    /// Inserts the checkpoint row (its transcript mark is the current last seq).
    fn insert_checkpoint(
        &self,
        label: Option<&str>,
        turn_id: Option<&str>,
    ) -> Result<CheckpointInfo, CheckpointError> {
        let at = self.ws.now_ms();
        let rows = self.sql.exec(
            &format!(
                "INSERT INTO think_ckpt (label, turn_id, at, mark)
                 VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) FROM {MESSAGES}))
                 RETURNING epoch"
            ),
            &[label.into(), turn_id.into(), SqlValue::Integer(at)],
        )?;
        let epoch = rows.first().map(|r| col_i64(r, 0)).unwrap_or(0);
        Ok(CheckpointInfo {
            id: format!("c{epoch}"),
            label: label.map(str::to_owned),
            turn_id: turn_id.map(str::to_owned),
            at,
            files_changed: 0,
        })
    }

    /// Every checkpoint, oldest first, with the files changed after each.
    pub fn list(&self) -> Result<Vec<CheckpointInfo>, CheckpointError> {
        let Tables { t, j, .. } = &self.tables;
        let rows = self.sql.exec(
            &format!(
                "SELECT k.epoch, k.label, k.turn_id, k.at,
                   (SELECT COUNT(*) FROM {j} jj LEFT JOIN {t} live ON live.path = jj.path
                    WHERE jj.epoch = k.epoch
                      AND COALESCE(jj.type, live.type, 'file') != 'directory')
                 FROM think_ckpt k ORDER BY k.epoch"
            ),
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| CheckpointInfo {
                id: format!("c{}", col_i64(r, 0)),
                label: col_str(r, 1),
                turn_id: col_str(r, 2),
                at: col_i64(r, 3),
                files_changed: col_i64(r, 4).max(0) as u32,
            })
            .collect())
    }

    /// The checkpoint `id`, or `NotFound`.
    fn lookup(&self, id: &str) -> Result<(i64, i64), CheckpointError> {
        let epoch = epoch_of(id)?;
        let rows =
            self.sql.exec("SELECT epoch, mark FROM think_ckpt WHERE epoch = ?", &[epoch.into()])?;
        let row = rows.first().ok_or_else(|| CheckpointError::NotFound(id.to_owned()))?;
        Ok((col_i64(row, 0), col_i64(row, 1)))
    }

    /// Restores checkpoint `id` (the workspace, the transcript or both) in one SQL
    /// transaction that first takes a checkpoint of the present, returned as `undo`. No R2
    /// object is written or deleted: restored files name the objects their checkpoint kept.
    pub async fn rewind(
        &self,
        id: &str,
        scope: RewindScope,
    ) -> Result<RewindOutcome, CheckpointError> {
        let (epoch, mark) = self.lookup(id)?;
        let label = format!("before rewind to {id}");
        let mut outcome: Option<RewindOutcome> = None;
        let mut inner: Option<CheckpointError> = None;
        let result = self.sql.transaction(&mut || {
            let run = || -> Result<RewindOutcome, CheckpointError> {
                let undo = self.insert_checkpoint(Some(&label), None)?;
                let now = epoch_of(&undo.id)?;
                let (files_restored, paths) = if scope.files {
                    files::restore(self.sql.as_ref(), &self.tables, epoch, now)?
                } else {
                    (0, Vec::new())
                };
                let messages_removed = if scope.transcript {
                    restore_transcript(self.sql.as_ref(), epoch, now, mark)?
                } else {
                    0
                };
                Ok(RewindOutcome { undo, files_restored, messages_removed, paths })
            };
            match run() {
                Ok(o) => {
                    outcome = Some(o);
                    Ok(())
                }
                Err(e) => {
                    let msg = e.to_string();
                    inner = Some(e);
                    Err(StoreError::Aborted(msg))
                }
            }
        });
        match (result, inner, outcome) {
            (Ok(()), _, Some(mut o)) => {
                o.undo.files_changed = o.files_restored;
                Ok(o)
            }
            (_, Some(e), _) => Err(e),
            (Err(e), None, _) => Err(e.into()),
            (Ok(()), None, None) => {
                Err(CheckpointError::Store(StoreError::Aborted("the rewind did not run".into())))
            }
        }
    }

    /// The paths changed since checkpoint `id`, with unified diffs of text files.
    pub async fn diff(&self, id: &str) -> Result<Vec<FileChange>, CheckpointError> {
        let (epoch, _) = self.lookup(id)?;
        files::diff(self, epoch).await
    }
}

/// Removes the messages after `mark`, removes those put at seqs the checkpoint saw empty,
/// and puts back the bodies saved in epochs ≥ `from` (before `now`); returns how many
/// messages were removed.
fn restore_transcript(sql: &dyn Sql, from: i64, now: i64, mark: i64) -> Result<u32, StoreError> {
    let removed =
        sql.exec(&format!("DELETE FROM {MESSAGES} WHERE seq > ? RETURNING 1"), &[mark.into()])?;
    let earliest = "m.epoch >= ? AND m.epoch < ? AND m.seq <= ?
        AND m.epoch = (SELECT MIN(epoch) FROM think_ckpt_msgs m2
                       WHERE m2.seq = m.seq AND m2.epoch >= ? AND m2.epoch < ?)";
    let params: Vec<SqlValue> = vec![from.into(), now.into(), mark.into(), from.into(), now.into()];
    // Seqs filled since (by a rewind) go first, so no id is held twice meanwhile.
    let refilled = sql.exec(
        &format!(
            "DELETE FROM {MESSAGES} WHERE seq IN
               (SELECT m.seq FROM think_ckpt_msgs m WHERE {earliest} AND m.existed = 0)
             RETURNING 1"
        ),
        &params,
    )?;
    sql.exec(
        &format!(
            "INSERT INTO {MESSAGES} (seq, id, role, body, created_at)
             SELECT m.seq, m.id, m.role, m.body, m.created_at FROM think_ckpt_msgs m
             WHERE {earliest} AND m.existed = 1
             ON CONFLICT(seq) DO UPDATE SET id = excluded.id, role = excluded.role,
               body = excluded.body, created_at = excluded.created_at"
        ),
        &params,
    )?;
    Ok((removed.len() + refilled.len()) as u32)
}
