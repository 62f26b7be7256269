//! Undo for `state.*` writes, so `rollbackExecution` really restores the workspace: before a
//! write runs, what is at every path it may change is recorded in the journal's
//! `think_cm_undo` table (a file's bytes and type, a directory, a symlink's target, or that
//! nothing was there), and reverting the call puts exactly that back.
//!
//! A file over [`MAX_UNDO_FILE_BYTES`] (or past [`MAX_UNDO_CALL_BYTES`] for one call) is not
//! copied: its row says so, and reverting that call fails with a note naming the file,
//! before anything is changed. Rows stay under the 2 MB SQLite row limit this way.

use serde_json::Value;

use super::connectors::{CallContext, ConnectorError, StateMethod};
use crate::store::{Sql, SqlValue, StoreError};
use crate::workspace::{path, EntryType, Workspace};

/// The largest previous content kept for one file (a SQLite row holds at most 2 MB).
pub const MAX_UNDO_FILE_BYTES: u64 = 1_000_000;
/// The most previous content kept for one call, across its files.
pub const MAX_UNDO_CALL_BYTES: u64 = 16_000_000;

/// The table, created with the journal's.
pub(crate) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS think_cm_undo (
    execution_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,
    content BLOB,
    mime TEXT,
    target TEXT,
    size INTEGER NOT NULL,
    PRIMARY KEY (execution_id, seq, idx))";

/// What was at one path before a call.
#[derive(Debug, Clone, PartialEq)]
enum Prior {
    /// Nothing: reverting removes whatever is there.
    Absent,
    /// A directory.
    Directory,
    /// A file with these bytes and media type.
    File(Vec<u8>, String),
    /// A symlink to this target.
    Symlink(String),
    /// A file whose content was too large to keep (its size).
    TooLarge(u64),
}

impl Prior {
    fn kind(&self) -> &'static str {
        match self {
            Prior::Absent => "absent",
            Prior::Directory => "directory",
            Prior::File(..) => "file",
            Prior::Symlink(_) => "symlink",
            Prior::TooLarge(_) => "too_large",
        }
    }
}

/// Whether a write method changes the content at its path, following a symlink there (as
/// the workspace's writes do), rather than the entry itself (rm, mv, cp, mkdir, symlink).
pub fn follows_last_symlink(method: StateMethod) -> bool {
    use StateMethod as M;
    !matches!(
        method,
        M::Rm
            | M::RemoveTree
            | M::Cp
            | M::CopyTree
            | M::Mv
            | M::MoveTree
            | M::Mkdir
            | M::Symlink
            | M::ExtractArchive
    )
}

/// The paths a `state.*` write may change (each with everything under it), or `None` for a
/// method that changes nothing (reads).
pub async fn affected_paths(
    ws: &Workspace,
    method: StateMethod,
    args: &Value,
) -> Option<Vec<String>> {
    use StateMethod as M;
    let s = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let edits = |list: &Value| -> Vec<String> {
        list.as_array()
            .map(|a| a.iter().filter_map(|e| e["path"].as_str()).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    Some(match method {
        M::WriteFile
        | M::AppendFile
        | M::WriteJson
        | M::Mkdir
        | M::ReplaceInFile
        | M::Rm
        | M::RemoveTree
        | M::WriteFileBytes
        | M::UpdateJson
        | M::CreateArchive => vec![s("path")],
        M::Cp | M::CopyTree => vec![s("dest")],
        M::Mv | M::MoveTree => vec![s("src"), s("dest")],
        M::Symlink => vec![s("linkPath")],
        M::ExtractArchive => vec![s("destination")],
        M::CompressFile => vec![args
            .get("destination")
            .and_then(Value::as_str)
            .map_or_else(|| format!("{}.gz", s("path")), str::to_owned)],
        M::DecompressFile => {
            let p = s("path");
            vec![match args.get("destination").and_then(Value::as_str) {
                Some(d) => d.to_owned(),
                None if p.to_ascii_lowercase().ends_with(".gz") => p[..p.len() - 3].to_owned(),
                None => p,
            }]
        }
        // Only the files that contain the search text change.
        M::ReplaceInFiles => {
            let files = ws.glob_files(&s("pattern")).unwrap_or_default();
            let paths: Vec<String> = files.into_iter().map(|(p, _)| p).collect();
            let texts = ws.read_files(&paths).await.unwrap_or_default();
            let search = s("search");
            paths
                .into_iter()
                .zip(texts)
                .filter(|(_, t)| t.as_deref().is_some_and(|t| t.contains(search.as_str())))
                .map(|(p, _)| p)
                .collect()
        }
        M::ApplyEdits => edits(&args["edits"]),
        M::ApplyEditPlan => edits(&args["plan"]["edits"]),
        // Reads change nothing.
        M::GetCapabilities
        | M::ReadFile
        | M::ReadJson
        | M::QueryJson
        | M::Exists
        | M::Stat
        | M::Lstat
        | M::Readdir
        | M::ReaddirWithFileTypes
        | M::Glob
        | M::Find
        | M::SummarizeTree
        | M::SearchText
        | M::SearchFiles
        | M::Readlink
        | M::Diff
        | M::DiffContent
        | M::ReadFileBytes
        | M::Realpath
        | M::ResolvePath
        | M::WalkTree
        | M::HashFile
        | M::PlanEdits
        | M::ListArchive
        | M::DetectFile => return None,
    })
}

/// The undo rows of one agent's executions.
pub struct UndoLog<'a> {
    sql: &'a dyn Sql,
}

impl<'a> UndoLog<'a> {
    /// The log over the agent's SQLite (the table is made by `Journal::create_tables`).
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    fn insert(
        &self,
        ctx: &CallContext,
        idx: i64,
        at: &str,
        prior: &Prior,
    ) -> Result<(), StoreError> {
        let (content, mime, target, size) = match prior {
            Prior::File(bytes, mime) => (
                SqlValue::Blob(bytes.clone()),
                SqlValue::Text(mime.clone()),
                SqlValue::Null,
                bytes.len() as i64,
            ),
            Prior::Symlink(t) => (SqlValue::Null, SqlValue::Null, SqlValue::Text(t.clone()), 0),
            Prior::TooLarge(n) => (SqlValue::Null, SqlValue::Null, SqlValue::Null, *n as i64),
            Prior::Absent | Prior::Directory => (SqlValue::Null, SqlValue::Null, SqlValue::Null, 0),
        };
        self.sql.exec(
            "INSERT OR REPLACE INTO think_cm_undo (execution_id, seq, idx, path, kind, content, mime, target, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                SqlValue::Text(ctx.execution_id.clone()),
                SqlValue::Integer(ctx.seq),
                SqlValue::Integer(idx),
                SqlValue::Text(at.to_owned()),
                SqlValue::Text(prior.kind().into()),
                content,
                mime,
                target,
                SqlValue::Integer(size),
            ],
        )?;
        Ok(())
    }

    fn rows(&self, ctx: &CallContext) -> Result<Vec<(String, Prior)>, StoreError> {
        let rows = self.sql.exec(
            "SELECT path, kind, content, mime, target, size FROM think_cm_undo WHERE execution_id = ? AND seq = ? ORDER BY idx",
            &[SqlValue::Text(ctx.execution_id.clone()), SqlValue::Integer(ctx.seq)],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let text = |i: usize| r.get(i).and_then(SqlValue::as_str).unwrap_or("").to_owned();
                let prior = match text(1).as_str() {
                    "directory" => Prior::Directory,
                    "file" => {
                        let bytes = match r.get(2) {
                            Some(SqlValue::Blob(b)) => b.clone(),
                            Some(SqlValue::Text(t)) => t.clone().into_bytes(),
                            _ => Vec::new(),
                        };
                        Prior::File(bytes, text(3))
                    }
                    "symlink" => Prior::Symlink(text(4)),
                    "too_large" => {
                        Prior::TooLarge(r.get(5).and_then(SqlValue::as_i64).unwrap_or(0) as u64)
                    }
                    _ => Prior::Absent,
                };
                (text(0), prior)
            })
            .collect())
    }
}

/// Records what is now at each of `roots` (and below it) for call `ctx`, before it runs. A
/// root is taken where the workspace will act on it (symlinks in it followed, the last one
/// only when `follow_last`); a path the workspace cannot resolve is skipped, since the call
/// fails there. A path that does not exist is recorded as its highest missing ancestor being
/// absent, so the parents the call creates go too.
pub async fn snapshot(
    ws: &Workspace,
    log: &UndoLog<'_>,
    ctx: &CallContext,
    roots: &[String],
    follow_last: bool,
) -> Result<(), ConnectorError> {
    let mut entries: Vec<(String, Prior)> = Vec::new();
    let mut budget = MAX_UNDO_CALL_BYTES;
    for root in roots {
        let Ok(norm) = path::normalize(root, "open") else { continue };
        let Ok(resolved) = ws.resolve(&norm, follow_last, "open", root) else { continue };
        let root = resolved.path;
        if entries.iter().any(|(p, _)| path::is_within(&root, p)) {
            continue;
        }
        let Some(info) = ws.lstat(&root).map_err(ConnectorError::Fs)? else {
            let mut top = root.as_str();
            while let Some(parent) = path::parent(top).filter(|p| *p != "/") {
                if ws.lstat(parent).map_err(ConnectorError::Fs)?.is_some() {
                    break;
                }
                top = parent;
            }
            entries.retain(|(p, _)| !path::is_within(p, top));
            entries.push((top.to_owned(), Prior::Absent));
            continue;
        };
        entries.retain(|(p, _)| !path::is_within(p, &root));
        let mut below = Vec::new();
        if info.kind == EntryType::Directory {
            let pattern = if root == "/" { "/**".to_owned() } else { format!("{root}/**") };
            below = ws.glob(&pattern).map_err(ConnectorError::Fs)?;
        }
        for entry in std::iter::once(info).chain(below) {
            let prior = match entry.kind {
                EntryType::Directory => Prior::Directory,
                EntryType::Symlink => Prior::Symlink(entry.target.clone().unwrap_or_default()),
                _ if entry.size > MAX_UNDO_FILE_BYTES || entry.size > budget => {
                    Prior::TooLarge(entry.size)
                }
                _ => {
                    let bytes =
                        ws.read_file_bytes(&entry.path).await.map_err(ConnectorError::Fs)?;
                    let bytes = bytes.unwrap_or_default();
                    budget = budget.saturating_sub(bytes.len() as u64);
                    Prior::File(bytes, entry.mime_type.clone())
                }
            };
            entries.push((entry.path, prior));
        }
    }
    for (idx, (at, prior)) in entries.iter().enumerate() {
        log.insert(ctx, idx as i64, at, prior)
            .map_err(|e| ConnectorError::Failed(e.to_string()))?;
    }
    Ok(())
}

/// Puts back what [`snapshot`] recorded for call `ctx`. `Ok(false)` when the call has no
/// record; an error, before anything changes, when a file's previous content was not kept.
pub async fn restore(
    ws: &Workspace,
    log: &UndoLog<'_>,
    ctx: &CallContext,
) -> Result<bool, ConnectorError> {
    let rows = log.rows(ctx).map_err(|e| ConnectorError::Failed(e.to_string()))?;
    if rows.is_empty() {
        return Ok(false);
    }
    if let Some((at, Prior::TooLarge(size))) =
        rows.iter().find(|(_, p)| matches!(p, Prior::TooLarge(_)))
    {
        return Err(ConnectorError::Failed(format!(
            "the previous content of {at} ({size} bytes) was over the undo limit ({MAX_UNDO_FILE_BYTES} bytes per file, {MAX_UNDO_CALL_BYTES} per call), so it was not kept; nothing of this call was undone"
        )));
    }
    // Every recorded root is cleared first (a root is an entry no earlier entry contains),
    // then the recorded entries are put back, parents before children.
    let mut roots: Vec<&str> = Vec::new();
    for (at, _) in &rows {
        if !roots.iter().any(|r| path::is_within(at, r)) {
            roots.push(at);
        }
    }
    for root in &roots {
        if *root == "/" {
            for (name, _, _) in ws.read_dir_brief("/", usize::MAX >> 1, 0)? {
                ws.rm(&path::join("/", &name), true, true).await?;
            }
        } else {
            ws.rm(root, true, true).await?;
        }
    }
    for (at, prior) in &rows {
        match prior {
            Prior::Absent | Prior::TooLarge(_) => {}
            Prior::Directory if at == "/" => {}
            Prior::Directory => ws.mkdir(at, true)?,
            Prior::File(bytes, mime) => ws.write_file_bytes(at, bytes, mime).await?,
            Prior::Symlink(target) => {
                if let Some(parent) = path::parent(at) {
                    ws.mkdir(parent, true)?;
                }
                ws.symlink(target, at)?;
            }
        }
    }
    Ok(true)
}
