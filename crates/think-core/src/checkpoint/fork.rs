//! Forking: the full state at a checkpoint (files and transcript) in pages that each fit one
//! Durable Object RPC call, and the receiving instance's import of them.
//!
//! Inline and chunked content travels as bytes, at most [`MAX_PAGE_BYTES`] per page (a large
//! file spans pages, and the importer stages its parts in SQL until the last one). An R2 file
//! travels by reference: the importer reads the object from the shared bucket and writes it
//! as a file of its own, so the two instances never share an object.

use super::files::{earliest, earliest_params, Stored};
use super::schema::Tables;
use super::{col_i64, col_str, CheckpointError, Checkpoints};
use crate::chat::MESSAGES_TABLE as MESSAGES;
use crate::store::SqlValue;
use serde::{Deserialize, Serialize};

/// Content bytes per page: base64 of it, with the entries' metadata, stays under 1 MB.
pub const MAX_PAGE_BYTES: usize = 720 * 1024;
/// Entries read from SQL per step of a page.
const ROWS_PER_STEP: i64 = 64;

/// One page of an export; pass `next` back to get the following one (`None`: done).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportPage {
    /// The checkpoint exported.
    pub checkpoint: String,
    /// Whether this is the first page (the importer checks it is empty then).
    pub first: bool,
    /// Entries in path order, then messages in transcript order.
    pub items: Vec<ExportItem>,
    /// The cursor of the next page.
    pub next: Option<String>,
}

/// An entry's times (ms since the epoch), which the importer restores: a fork shows when
/// each file was made and last changed, not when it was copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryTimes {
    /// When the entry was created.
    pub created_at: i64,
    /// When it last changed.
    pub modified_at: i64,
}

/// One entry of an export page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum ExportItem {
    /// A directory.
    Directory {
        /// Absolute path.
        path: String,
        /// Its times (absent in pages of before they were exported).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<EntryTimes>,
    },
    /// A symlink.
    Symlink {
        /// Absolute path.
        path: String,
        /// Its target, verbatim.
        target: String,
        /// Its times.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<EntryTimes>,
    },
    /// A piece of a file's content (the whole file when `offset` is 0 and `last`).
    File {
        /// Absolute path.
        path: String,
        /// Its MIME type.
        mime_type: String,
        /// Stored as text (else bytes).
        text: bool,
        /// Where this piece starts.
        offset: u64,
        /// The piece, base64 on the wire.
        #[serde(with = "b64")]
        bytes: Vec<u8>,
        /// Whether this piece ends the file.
        last: bool,
        /// The file's times, on its last piece.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<EntryTimes>,
    },
    /// A file whose content is the R2 object `key` (in the bucket both instances share).
    R2File {
        /// Absolute path.
        path: String,
        /// Its MIME type.
        mime_type: String,
        /// The object's key.
        key: String,
        /// Its size in bytes.
        size: u64,
        /// Its times.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<EntryTimes>,
    },
    /// A transcript message.
    Message {
        /// Its position in the transcript.
        seq: i64,
        /// The message id.
        id: String,
        /// Its role.
        role: String,
        /// The UI message JSON.
        body: String,
        /// When it was stored (ms).
        created_at: i64,
    },
}

mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// Where an export page resumes.
enum Cursor {
    /// In the files, at `path` (inclusive), `offset` bytes into it.
    Files { path: String, offset: u64 },
    /// In the transcript, after `seq`.
    Messages { after: i64 },
}

impl Cursor {
    fn parse(s: Option<&str>) -> Result<Cursor, CheckpointError> {
        let Some(s) = s else { return Ok(Cursor::Files { path: String::new(), offset: 0 }) };
        let bad = || CheckpointError::BadPage(format!("cursor {s:?}"));
        if let Some(rest) = s.strip_prefix("m:") {
            return Ok(Cursor::Messages { after: rest.parse().map_err(|_| bad())? });
        }
        let rest = s.strip_prefix("f:").ok_or_else(bad)?;
        let (offset, path) = rest.split_once(':').ok_or_else(bad)?;
        Ok(Cursor::Files { path: path.to_owned(), offset: offset.parse().map_err(|_| bad())? })
    }
}

impl Checkpoints {
    /// One page of the state at checkpoint `id`: start with `cursor` `None`, then pass each
    /// page's `next` until it is `None`. Each page holds at most [`MAX_PAGE_BYTES`] of content
    /// (a single transcript message larger than that gets a page of its own).
    pub async fn export_page(
        &self,
        id: &str,
        cursor: Option<&str>,
    ) -> Result<ExportPage, CheckpointError> {
        let (epoch, mark) = self.lookup(id)?;
        let first = cursor.is_none();
        let mut items = Vec::new();
        let mut budget = MAX_PAGE_BYTES;
        let next = match Cursor::parse(cursor)? {
            Cursor::Files { path, offset } => {
                match self.export_files(epoch, path, offset, &mut items, &mut budget).await? {
                    Some(next) => Some(next),
                    None => self.export_messages(epoch, mark, 0, &mut items, &mut budget)?,
                }
            }
            Cursor::Messages { after } => {
                self.export_messages(epoch, mark, after, &mut items, &mut budget)?
            }
        };
        Ok(ExportPage { checkpoint: id.to_owned(), first, items, next })
    }

    /// Adds file entries from (`path`, `offset`) on; returns the cursor where the budget ran
    /// out, or `None` when every entry is in.
    async fn export_files(
        &self,
        epoch: i64,
        mut path: String,
        mut offset: u64,
        items: &mut Vec<ExportItem>,
        budget: &mut usize,
    ) -> Result<Option<String>, CheckpointError> {
        let Tables { t, j, b, .. } = &self.tables;
        let cond = earliest(j);
        let sql = format!(
            "SELECT path, type, mime_type, target, storage, src, r2_key, chunk_id, size, is_text,
               created_at, modified_at
             FROM (
               SELECT path, type, mime_type, target, storage, 'live' AS src, r2_key, chunk_id,
                 size, typeof(content) = 'text' AS is_text, created_at, modified_at
               FROM {t} WHERE path NOT IN (SELECT path FROM {j} WHERE epoch >= ?)
               UNION ALL
               SELECT j.path, j.type, j.mime_type, j.target, COALESCE(b.storage, 'inline'),
                 b.key, b.r2_key, b.chunk_id, j.size, typeof(b.content) = 'text',
                 j.created_at, j.modified_at
               FROM {j} j LEFT JOIN {b} b ON b.key = j.blob WHERE {cond} AND j.existed = 1)
             WHERE path >= ? AND path != '/' ORDER BY path LIMIT ?"
        );
        loop {
            let mut params = vec![SqlValue::Integer(epoch)];
            params.extend(earliest_params(epoch, i64::MAX));
            params.push(path.clone().into());
            params.push(ROWS_PER_STEP.into());
            let rows = self.sql.exec(&sql, &params)?;
            if rows.is_empty() {
                return Ok(None);
            }
            let step = rows.len() as i64;
            for row in rows {
                let p = col_str(&row, 0).unwrap_or_default();
                if p != path {
                    offset = 0;
                }
                let overhead = p.len() + 64;
                if *budget < overhead && !items.is_empty() {
                    return Ok(Some(format!("f:{offset}:{p}")));
                }
                *budget = budget.saturating_sub(overhead);
                let mime = col_str(&row, 2).unwrap_or_default();
                let times = match (row.get(10), row.get(11)) {
                    (Some(SqlValue::Integer(c)), Some(SqlValue::Integer(m))) => {
                        Some(EntryTimes { created_at: *c, modified_at: *m })
                    }
                    _ => None,
                };
                match col_str(&row, 1).as_deref() {
                    Some("directory") => {
                        items.push(ExportItem::Directory { path: p.clone(), times })
                    }
                    Some("symlink") => items.push(ExportItem::Symlink {
                        path: p.clone(),
                        target: col_str(&row, 3).unwrap_or_default(),
                        times,
                    }),
                    _ => {
                        let size = col_i64(&row, 8).max(0) as u64;
                        let storage = col_str(&row, 4).unwrap_or_default();
                        if storage == "r2" {
                            items.push(ExportItem::R2File {
                                path: p.clone(),
                                mime_type: mime,
                                key: col_str(&row, 6).unwrap_or_default(),
                                size,
                                times,
                            });
                        } else {
                            let src = col_str(&row, 5).unwrap_or_default();
                            let text = col_i64(&row, 9) != 0;
                            let chunk = row.get(7).and_then(SqlValue::as_i64);
                            // Write pieces until the file ends or the budget does.
                            loop {
                                let want = (size - offset.min(size)).min(*budget as u64);
                                if want == 0 && offset < size {
                                    return Ok(Some(format!("f:{offset}:{p}")));
                                }
                                let bytes =
                                    self.piece(&storage, &src, &p, chunk, offset, want).await?;
                                *budget -= bytes.len();
                                let end = offset + bytes.len() as u64;
                                let last = end >= size;
                                items.push(ExportItem::File {
                                    path: p.clone(),
                                    mime_type: mime.clone(),
                                    text,
                                    offset,
                                    bytes,
                                    last,
                                    times: times.filter(|_| last),
                                });
                                if last {
                                    break;
                                }
                                offset = end;
                            }
                        }
                    }
                }
                path = format!("{p}\u{0}");
                offset = 0;
            }
            if step < ROWS_PER_STEP {
                return Ok(None);
            }
        }
    }

    /// `len` bytes of a file's content from `offset`: from its live row (`src` = `live`),
    /// or from the journal blob `src`, or from its chunks.
    async fn piece(
        &self,
        storage: &str,
        src: &str,
        path: &str,
        chunk: Option<i64>,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, CheckpointError> {
        let Tables { t, c, b, .. } = &self.tables;
        if storage == "chunked" {
            let chunk_bytes = crate::workspace::CHUNK_BYTES as u64;
            let mut out = Vec::new();
            let mut at = offset;
            while (out.len() as u64) < len {
                let rows = self.sql.exec(
                    &format!("SELECT substr(data, ?, ?) FROM {c} WHERE chunk_id = ? AND seq = ?"),
                    &[
                        ((at % chunk_bytes) as i64 + 1).into(),
                        ((len - out.len() as u64).min(chunk_bytes - at % chunk_bytes) as i64)
                            .into(),
                        chunk.unwrap_or(-1).into(),
                        ((at / chunk_bytes) as i64).into(),
                    ],
                )?;
                let got = rows
                    .into_iter()
                    .next()
                    .and_then(|r| r.into_iter().next())
                    .and_then(SqlValue::into_bytes)
                    .unwrap_or_default();
                if got.is_empty() {
                    break;
                }
                at += got.len() as u64;
                out.extend(got);
            }
            return Ok(out);
        }
        let (table, key_col, key) = if src == "live" { (t, "path", path) } else { (b, "key", src) };
        let rows = self.sql.exec(
            &format!("SELECT substr(CAST(content AS BLOB), ?, ?) FROM {table} WHERE {key_col} = ?"),
            &[(offset as i64 + 1).into(), (len as i64).into(), key.into()],
        )?;
        let stored = Stored {
            storage: Some("inline".into()),
            content: rows
                .into_iter()
                .next()
                .and_then(|r| r.into_iter().next())
                .unwrap_or(SqlValue::Null),
            r2_key: None,
            chunk_id: None,
        };
        self.load(stored).await
    }

    /// Adds the transcript at the checkpoint (mark `mark`) after `after`.
    fn export_messages(
        &self,
        epoch: i64,
        mark: i64,
        after: i64,
        items: &mut Vec<ExportItem>,
        budget: &mut usize,
    ) -> Result<Option<String>, CheckpointError> {
        let mut after = after;
        loop {
            let rows = self.sql.exec(
                &format!(
                    "SELECT seq, id, role, body, created_at FROM (
                   SELECT seq, id, role, body, created_at FROM {MESSAGES}
                   WHERE seq <= ? AND seq NOT IN
                     (SELECT seq FROM think_ckpt_msgs WHERE epoch >= ?)
                   UNION ALL
                   SELECT m.seq, m.id, m.role, m.body, m.created_at FROM think_ckpt_msgs m
                   WHERE m.epoch >= ? AND m.seq <= ? AND m.existed = 1
                     AND m.epoch = (SELECT MIN(m2.epoch) FROM think_ckpt_msgs m2
                                    WHERE m2.seq = m.seq AND m2.epoch >= ?))
                 WHERE seq > ? ORDER BY seq LIMIT ?"
                ),
                &[
                    mark.into(),
                    epoch.into(),
                    epoch.into(),
                    mark.into(),
                    epoch.into(),
                    after.into(),
                    ROWS_PER_STEP.into(),
                ],
            )?;
            if rows.is_empty() {
                return Ok(None);
            }
            let step = rows.len() as i64;
            for row in rows {
                let body = col_str(&row, 3).unwrap_or_default();
                let cost = body.len() + 128;
                if cost > *budget && !items.is_empty() {
                    return Ok(Some(format!("m:{after}")));
                }
                *budget = budget.saturating_sub(cost);
                after = col_i64(&row, 0);
                items.push(ExportItem::Message {
                    seq: after,
                    id: col_str(&row, 1).unwrap_or_default(),
                    role: col_str(&row, 2).unwrap_or_default(),
                    body,
                    created_at: col_i64(&row, 4),
                });
            }
            if step < ROWS_PER_STEP {
                return Ok(None);
            }
        }
    }

    /// Applies one export page to this (empty) instance. Pages must come in order; the
    /// first is refused unless the workspace and the transcript are empty.
    pub async fn import_page(&self, page: &ExportPage) -> Result<(), CheckpointError> {
        let ws = &self.ws;
        if page.first {
            let info = ws.info()?;
            let messages = self.sql.exec(&format!("SELECT 1 FROM {MESSAGES} LIMIT 1"), &[])?;
            if info.file_count > 0 || info.directory_count > 1 || !messages.is_empty() {
                return Err(CheckpointError::NotEmpty);
            }
            self.sql.exec("DELETE FROM think_ckpt_import", &[])?;
        }
        for item in &page.items {
            match item {
                ExportItem::Directory { path, .. } => ws.mkdir(path, true)?,
                ExportItem::Symlink { path, target, .. } => ws.symlink(target, path)?,
                ExportItem::File { path, mime_type, text, offset, bytes, last, .. } => {
                    let whole = if *offset == 0 && *last {
                        bytes.clone()
                    } else {
                        self.sql.exec(
                            "INSERT OR REPLACE INTO think_ckpt_import (path, offset, data)
                             VALUES (?, ?, ?)",
                            &[path.as_str().into(), (*offset as i64).into(), bytes.clone().into()],
                        )?;
                        if !*last {
                            continue;
                        }
                        let rows = self.sql.exec(
                            "DELETE FROM think_ckpt_import WHERE path = ? RETURNING offset, data",
                            &[path.as_str().into()],
                        )?;
                        let mut parts: Vec<(i64, Vec<u8>)> = rows
                            .into_iter()
                            .map(|mut r| {
                                let data = r.pop().and_then(SqlValue::into_bytes);
                                (col_i64(&r, 0), data.unwrap_or_default())
                            })
                            .collect();
                        crate::platform::sort::sort_by_key(&mut parts, |(o, _)| *o);
                        let mut whole = Vec::new();
                        for (o, data) in parts {
                            if o as usize != whole.len() {
                                return Err(CheckpointError::BadPage(format!(
                                    "{path}: a piece at {o} follows {} bytes",
                                    whole.len()
                                )));
                            }
                            whole.extend(data);
                        }
                        whole
                    };
                    match (text, String::from_utf8(whole)) {
                        (true, Ok(s)) => ws.write_file(path, &s, mime_type).await?,
                        (_, Ok(s)) => ws.write_file_bytes(path, s.as_bytes(), mime_type).await?,
                        (_, Err(e)) => ws.write_file_bytes(path, e.as_bytes(), mime_type).await?,
                    }
                }
                ExportItem::R2File { path, mime_type, key, .. } => {
                    let blobs = ws.blob_store().ok_or_else(|| {
                        CheckpointError::BadPage(format!(
                            "{path} is in R2 but this instance has no blob store"
                        ))
                    })?;
                    let bytes = blobs.get(key).await?.ok_or_else(|| {
                        CheckpointError::BadPage(format!("{path}: the R2 object {key} is gone"))
                    })?;
                    ws.write_file_bytes(path, &bytes, mime_type).await?;
                }
                ExportItem::Message { seq, id, role, body, created_at } => {
                    self.sql.exec(
                        &format!(
                            "INSERT INTO {MESSAGES} (seq, id, role, body, created_at)
                             VALUES (?, ?, ?, ?, ?)"
                        ),
                        &[
                            (*seq).into(),
                            id.as_str().into(),
                            role.as_str().into(),
                            body.as_str().into(),
                            (*created_at).into(),
                        ],
                    )?;
                }
            }
            if let Some((path, times)) = item.times() {
                self.sql.exec(
                    &format!(
                        "UPDATE {} SET created_at = ?, modified_at = ? WHERE path = ?",
                        self.tables.t
                    ),
                    &[times.created_at.into(), times.modified_at.into(), path.into()],
                )?;
            }
        }
        Ok(())
    }
}

impl ExportItem {
    /// The entry's path and the times to restore once it is written.
    fn times(&self) -> Option<(&str, EntryTimes)> {
        match self {
            ExportItem::Directory { path, times }
            | ExportItem::Symlink { path, times, .. }
            | ExportItem::File { path, times, .. }
            | ExportItem::R2File { path, times, .. } => times.map(|t| (path.as_str(), t)),
            ExportItem::Message { .. } => None,
        }
    }
}
