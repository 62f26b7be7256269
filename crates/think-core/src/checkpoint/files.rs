//! The file side of a checkpoint: restoring the workspace to it, and diffing it against now.
//!
//! The state of path p at checkpoint K is the journal row of p in the earliest epoch ≥ K that
//! touched p (its prior state on that epoch's first change, which is its state at K), or the
//! live row when no epoch ≥ K touched it.

use super::schema::Tables;
use super::{col_i64, col_str, ChangeKind, CheckpointError, Checkpoints, FileChange};
use crate::store::{Row, Sql, SqlValue, StoreError};
use crate::workspace::{unified_diff, MAX_DIFF_LINES};

/// The largest side (bytes) a diff is computed for.
pub const MAX_DIFF_BYTES: usize = 1_000_000;

/// The condition selecting, in journal `j`, the row of each path in the earliest epoch in
/// `[from, to)`; binds four parameters ([`earliest_params`]).
pub(crate) fn earliest(j: &str) -> String {
    format!(
        "j.epoch >= ? AND j.epoch < ? AND j.epoch = (SELECT MIN(j2.epoch) FROM {j} j2
           WHERE j2.path = j.path AND j2.epoch >= ? AND j2.epoch < ?)"
    )
}

/// The parameters of [`earliest`].
pub(crate) fn earliest_params(from: i64, to: i64) -> Vec<SqlValue> {
    vec![from.into(), to.into(), from.into(), to.into()]
}

/// Puts every path journaled in epochs `[from, now)` back as it was at checkpoint `from`.
/// Runs inside the rewind's transaction, after checkpoint `now` was opened, so the triggers
/// journal what it replaces. Returns the paths restored (not directories) and every path.
pub(crate) fn restore(
    sql: &dyn Sql,
    tables: &Tables,
    from: i64,
    now: i64,
) -> Result<(u32, Vec<String>), StoreError> {
    let Tables { t, j, b, .. } = tables;
    let cond = earliest(j);
    let params = earliest_params(from, now);
    let rows = sql.exec(
        &format!(
            "SELECT j.path, COALESCE(j.type, live.type, 'file') FROM {j} j
             LEFT JOIN {t} live ON live.path = j.path WHERE {cond} ORDER BY j.path"
        ),
        &params,
    )?;
    let files = rows.iter().filter(|r| col_str(r, 1).as_deref() != Some("directory")).count();
    let paths: Vec<String> = rows.iter().filter_map(|r| col_str(r, 0)).collect();
    if paths.is_empty() {
        return Ok((0, paths));
    }
    sql.exec(
        &format!(
            "DELETE FROM {t} WHERE path IN (SELECT j.path FROM {j} j WHERE {cond} AND j.existed = 0)"
        ),
        &params,
    )?;
    sql.exec(
        &format!(
            "INSERT INTO {t} (path, parent_path, name, type, mime_type, size, storage, r2_key,
               chunk_id, target, created_at, modified_at, content, version, hash, changed_by)
             SELECT j.path, j.parent_path, j.name, j.type, j.mime_type, j.size,
               COALESCE(b.storage, 'inline'), b.r2_key, b.chunk_id, j.target, j.created_at,
               j.modified_at, b.content, j.version, j.hash, 'app'
             FROM {j} j LEFT JOIN {b} b ON b.key = j.blob
             WHERE {cond} AND j.existed = 1
             ON CONFLICT(path) DO UPDATE SET parent_path = excluded.parent_path,
               name = excluded.name, type = excluded.type, mime_type = excluded.mime_type,
               size = excluded.size, storage = excluded.storage, r2_key = excluded.r2_key,
               chunk_id = excluded.chunk_id, target = excluded.target,
               created_at = excluded.created_at, modified_at = excluded.modified_at,
               content = excluded.content, version = {t}.version + 1, hash = excluded.hash,
               changed_by = excluded.changed_by"
        ),
        &params,
    )?;
    Ok((files as u32, paths))
}

/// How a journal blob or a live row holds content.
pub(crate) struct Stored {
    pub storage: Option<String>,
    pub content: SqlValue,
    pub r2_key: Option<String>,
    pub chunk_id: Option<i64>,
}

impl Stored {
    /// Reads storage, content, r2_key, chunk_id from `row` starting at column `i`.
    pub(crate) fn from_row(row: &mut Row, i: usize) -> Stored {
        Stored {
            storage: col_str(row, i),
            content: row
                .get_mut(i + 1)
                .map(|v| std::mem::replace(v, SqlValue::Null))
                .unwrap_or(SqlValue::Null),
            r2_key: col_str(row, i + 2),
            chunk_id: row.get(i + 3).and_then(SqlValue::as_i64),
        }
    }
}

impl Checkpoints {
    /// The bytes of content held as `stored`.
    pub(crate) async fn load(&self, stored: Stored) -> Result<Vec<u8>, CheckpointError> {
        match stored.storage.as_deref() {
            Some("r2") => {
                let key = stored.r2_key.unwrap_or_default();
                let blobs = self.ws.blob_store().ok_or_else(|| {
                    StoreError::Blob(format!("{key} is in R2 but no blob store is configured"))
                })?;
                Ok(blobs.get(&key).await?.unwrap_or_default())
            }
            Some("chunked") => {
                let rows = self.sql.exec(
                    &format!("SELECT data FROM {} WHERE chunk_id = ? ORDER BY seq", self.tables.c),
                    &[stored.chunk_id.unwrap_or(-1).into()],
                )?;
                let mut out = Vec::new();
                for row in rows {
                    out.extend(
                        row.into_iter().next().and_then(SqlValue::into_bytes).unwrap_or_default(),
                    );
                }
                Ok(out)
            }
            _ => Ok(stored.content.into_bytes().unwrap_or_default()),
        }
    }
}

/// The changes from checkpoint `from` to now.
pub(crate) async fn diff(cp: &Checkpoints, from: i64) -> Result<Vec<FileChange>, CheckpointError> {
    let Tables { t, j, b, .. } = &cp.tables;
    let cond = earliest(j);
    let rows = cp.sql.exec(
        &format!(
            "SELECT j.path, j.existed, j.type, j.target, j.hash,
               b.storage, b.content, b.r2_key, b.chunk_id,
               live.type, live.target, live.hash,
               live.storage, live.content, live.r2_key, live.chunk_id
             FROM {j} j LEFT JOIN {b} b ON b.key = j.blob LEFT JOIN {t} live ON live.path = j.path
             WHERE {cond} ORDER BY j.path"
        ),
        &earliest_params(from, i64::MAX),
    )?;
    let mut out = Vec::new();
    for mut row in rows {
        let path = col_str(&row, 0).unwrap_or_default();
        let was = if col_i64(&row, 1) != 0 { col_str(&row, 2) } else { None };
        let is = col_str(&row, 9);
        let was = was.filter(|k| k != "directory");
        let is = is.filter(|k| k != "directory");
        let kind = match (&was, &is) {
            (None, None) => continue,
            (None, Some(_)) => ChangeKind::Added,
            (Some(_), None) => ChangeKind::Deleted,
            (Some(a), Some(b)) => {
                let same_target = col_str(&row, 3) == col_str(&row, 10);
                // The same hash is the same content only when it is stored the same way too:
                // the hash is not collision resistant (`workspace/version.rs`).
                let (h1, h2) = (col_str(&row, 4), col_str(&row, 11));
                let same_stored = row.get(5..9) == row.get(12..16);
                if a == b
                    && same_target
                    && (a == "symlink" || (h1.is_some() && h1 == h2 && same_stored))
                {
                    continue;
                }
                ChangeKind::Modified
            }
        };
        if was.as_deref() == Some("symlink") || is.as_deref() == Some("symlink") {
            let show = |k: &Option<String>, target: Option<String>| match k.as_deref() {
                Some("symlink") => format!("a symlink to {}", target.unwrap_or_default()),
                Some(_) => "a file".to_owned(),
                None => "nothing".to_owned(),
            };
            let note = format!(
                "was {}, now {}",
                show(&was, col_str(&row, 3)),
                show(&is, col_str(&row, 10))
            );
            out.push(FileChange { path, kind, diff: None, note: Some(note) });
            continue;
        }
        let old = match was {
            Some(_) => Some(cp.load(Stored::from_row(&mut row, 5)).await?),
            None => None,
        };
        let new = match is {
            Some(_) => Some(cp.load(Stored::from_row(&mut row, 12)).await?),
            None => None,
        };
        // Content stored anew (another chunk set or R2 key) can be the same bytes: that is
        // no change, whether or not a diff could show it.
        if kind == ChangeKind::Modified && old == new {
            continue;
        }
        let (diff, note) = text_diff(&path, old.as_deref(), new.as_deref());
        out.push(FileChange { path, kind, diff, note });
    }
    Ok(out)
}

/// The unified diff of two versions of `path` (absent = empty), or why there is none.
fn text_diff(
    path: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> (Option<String>, Option<String>) {
    let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
    if old.len() > MAX_DIFF_BYTES || new.len() > MAX_DIFF_BYTES {
        return (None, Some(format!("larger than {MAX_DIFF_BYTES} bytes")));
    }
    let (Ok(a), Ok(b)) = (std::str::from_utf8(old), std::str::from_utf8(new)) else {
        return (None, Some("binary".to_owned()));
    };
    if a.lines().count() > MAX_DIFF_LINES || b.lines().count() > MAX_DIFF_LINES {
        return (None, Some(format!("more than {MAX_DIFF_LINES} lines")));
    }
    (Some(unified_diff(a, b, path, path)), None)
}
