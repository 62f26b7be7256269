//! File versions: a counter and a content hash per file, who changed it and when, and the
//! bounded history of content the model has seen, so a stale write can be refused with a diff.
//!
//! The content hash is XXH3-64 (seed 0, as 16 lowercase hex digits of its canonical big-endian
//! form), computed in wasm by the `xxhash-rust` crate. It is a version token, the check of text
//! rebuilt from reverse deltas, and the key under which the checkpoint journal saves content
//! (which checks the stored content too, below). It was the first 64 bits of SHA-256 through
//! `node:crypto`, about 9 % of a model write and 17 % of an edit (8-10 µs per 10 KB in
//! workerd); XXH3 of 10 KB costs 0.48 µs in this build's wasm (BENCHMARKS.md, "Workspace tools against Think", the
//! `perf-hash` pass). Rows written before keep their SHA-based hash until their next write:
//! stored hashes are only compared with stored hashes or tokens made from them, except in
//! [`Workspace::seen_content`]'s check of rebuilt text, which accepts either scheme
//! (`hash_names`).
//!
//! Security: XXH3 is not collision resistant. Anyone who can write a file and see the token the
//! model holds can craft different content with the same hash (the seed is public), where the
//! truncated SHA-256 needed about 2^64 work for that (second preimage) and 2^32 for some pair of
//! colliding texts (birthday bound), so it was never a cryptographic guarantee either. What such
//! a collision buys: the model's stale `write` or `edit` passes the version check and replaces
//! (or edits) content the model did not see, without the refusal and its diff; a rebuilt old
//! text could pass its check and show a wrong diff. The writer who can plant colliding content
//! can already write that file, and anything the model's write then leaves there, directly: the
//! check keeps concurrent writers (bash, Code Mode, the app) from silently clobbering each
//! other by accident, and guards no trust boundary, so the non-cryptographic hash is acceptable.
//! The deltas come from this crate's own statements, never from a writer. A rewind, though,
//! undoes what a writer (a misled model included) did, so there a hash alone must not decide:
//! the checkpoint journal (`checkpoint/schema.rs`) shares a saved blob only when its stored
//! content (or R2 object, or chunk set) is the same too, and a checkpoint's diff compares them
//! likewise, so a collision can neither make a rewind restore other content nor hide a change.
//! Accidental collisions stay at 2^-64 per comparison, as with the truncated SHA-256. Should a
//! token ever guard more, XXH3 with a per-workspace secret would stop crafted collisions.

use super::*;

/// Text kept per seen version for the refusal diff; larger content is not kept.
pub const MAX_HISTORY_BYTES: usize = 64 * 1024;
/// Seen versions kept per file.
pub const MAX_HISTORY_VERSIONS: i64 = 4;

/// Who made a change, recorded with every version so a refusal can say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The model's own file tools.
    Tool,
    /// A bash script's write-back.
    Bash,
    /// Code Mode's `state.*`.
    Code,
    /// The application (callables, RPC, extensions).
    App,
}

impl Writer {
    /// The name stored in SQL and shown in refusals.
    pub fn as_str(self) -> &'static str {
        match self {
            Writer::Tool => "tool",
            Writer::Bash => "bash",
            Writer::Code => "code",
            Writer::App => "app",
        }
    }

    fn parse(s: &str) -> Option<Writer> {
        Some(match s {
            "tool" => Writer::Tool,
            "bash" => Writer::Bash,
            "code" => Writer::Code,
            "app" => Writer::App,
            _ => return None,
        })
    }
}

/// A file's version as the model sees it: `"<counter>:<hash>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileVersion {
    /// Bumped by every change of the file's content.
    pub counter: i64,
    /// The content's XXH3-64 as 16 hex digits (the first 16 of its SHA-256 for rows written
    /// before that); `None` after an append or a tree copy.
    pub hash: Option<String>,
    /// Who made the last change (`None` for rows older than versioning).
    pub changed_by: Option<Writer>,
    /// When, in milliseconds since the epoch.
    pub changed_at: i64,
}

impl FileVersion {
    /// The token handed to the model and accepted back as `expectedVersion`.
    pub fn token(&self) -> String {
        // `itoa` (serde_json's own integer writer), not `format!`: its machinery was a tenth
        // of `read`'s wasm time besides SQL (V8 profile, 1.19 of 24 µs per read).
        let hash = self.hash.as_deref().unwrap_or("-");
        let mut digits = itoa::Buffer::new();
        let counter = digits.format(self.counter);
        let mut s = String::with_capacity(counter.len() + 1 + hash.len());
        s.push_str(counter);
        s.push(':');
        s.push_str(hash);
        s
    }

    /// Splits a token into its counter and hash; `None` when it is not one.
    pub fn parse_token(token: &str) -> Option<(i64, Option<String>)> {
        let (c, h) = token.split_once(':').unwrap_or((token, "-"));
        let counter = c.trim().parse().ok()?;
        Some((counter, Some(h.trim().to_owned()).filter(|h| h != "-" && !h.is_empty())))
    }

    /// Whether this (current) version is still the one `token` names: the same content
    /// hash when both are known (so a file deleted and recreated is caught), else the same
    /// counter.
    pub fn matches(&self, token: &str) -> bool {
        match Self::parse_token(token) {
            Some((c, h)) => match (h, &self.hash) {
                (Some(h), Some(now)) => h == *now,
                _ => c == self.counter,
            },
            None => false,
        }
    }
}

/// The content hash stored with each version: XXH3-64 of `bytes` as 16 lowercase hex digits.
pub(crate) fn content_hash(bytes: &[u8]) -> String {
    // Written digit by digit: `format!`'s machinery was as much as the hash of a short text.
    let h = xxhash_rust::xxh3::xxh3_64(bytes);
    (0..16).rev().map(|i| char::from(b"0123456789abcdef"[(h >> (4 * i)) as usize & 15])).collect()
}

/// The content hash rows written before XXH3 hold: the first 16 hex digits of SHA-256.
fn legacy_content_hash(bytes: &[u8]) -> String {
    let mut hex = crate::platform::digest::hex(crate::platform::digest::Algorithm::Sha256, bytes);
    hex.truncate(16);
    hex
}

/// Whether `stored`, a hash noted with a version, is the hash of `bytes` under either
/// scheme: the current one first, SHA-256's only when that fails (an old row, or other text).
fn hash_names(stored: &str, bytes: &[u8]) -> bool {
    stored == content_hash(bytes) || stored == legacy_content_hash(bytes)
}

/// Restores the previous writer when dropped.
pub struct WriterScope<'a> {
    ws: &'a Workspace,
    previous: Writer,
}

impl Drop for WriterScope<'_> {
    fn drop(&mut self) {
        self.ws.writer.set(self.previous);
    }
}

impl Workspace {
    /// Attributes the mutations made while the returned scope lives to `writer`.
    pub fn writing_as(&self, writer: Writer) -> WriterScope<'_> {
        let previous = self.writer.replace(writer);
        WriterScope { ws: self, previous }
    }

    /// Who the current mutations are attributed to.
    pub fn writer(&self) -> Writer {
        self.writer.get()
    }

    /// Adds the version columns (and the model edit's `undo` and the model write's `seen`,
    /// see [`Workspace::init_history`]) to a table created before them.
    pub(super) fn migrate_versions(&self) -> Result<(), FsError> {
        let t = &self.t;
        if self.sql.exec(&format!("SELECT seen FROM {t} LIMIT 0"), &[]).is_ok() {
            return Ok(());
        }
        if self.sql.exec(&format!("SELECT undo FROM {t} LIMIT 0"), &[]).is_err() {
            if self.sql.exec(&format!("SELECT version FROM {t} LIMIT 0"), &[]).is_err() {
                for col in ["version INTEGER NOT NULL DEFAULT 1", "hash TEXT", "changed_by TEXT"] {
                    self.sql.exec(&format!("ALTER TABLE {t} ADD COLUMN {col}"), &[])?;
                }
            }
            self.sql.exec(&format!("ALTER TABLE {t} ADD COLUMN undo TEXT"), &[])?;
        }
        self.sql.exec(&format!("ALTER TABLE {t} ADD COLUMN seen INTEGER"), &[])?;
        Ok(())
    }

    /// The history table of content the model has seen: one slot per version modulo
    /// [`MAX_HISTORY_VERSIONS`], so it stays bounded without a pruning statement.
    ///
    /// Seen text is kept lazily: a note of the live version stores no text. The model's own
    /// fast write or edit notes it on the files row (`seen` = its version, no history row);
    /// any other note is a history row marked `pending` (its text is the live row's). A
    /// trigger on the files table moves the row's note, and copies the old text into the
    /// pending notes, when the version is overwritten, deleted or moved. So a version that is
    /// never overwritten costs no second copy of its text.
    ///
    /// A rowid table, with its key in a separate index: in a `WITHOUT ROWID` table the key's
    /// B-tree holds the whole row, and SQLite loads a row that overflows its page (any kept
    /// text past about 1 KB) in full for every key comparison, so each look-up and note
    /// cost several copies of the text (the table was created that way at first; such a
    /// table is rebuilt once).
    pub(super) fn init_history(&self) -> Result<(), FsError> {
        let h = &self.h;
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {h} (
              path TEXT NOT NULL,
              slot INTEGER NOT NULL,
              version INTEGER NOT NULL,
              hash TEXT,
              content TEXT,
              pending INTEGER NOT NULL DEFAULT 0,
              PRIMARY KEY (path, slot)
            )"
        );
        self.sql.exec(&create, &[])?;
        let (t, ns) = (&self.t, &self.namespace);
        // The table's schema, and whether the trigger of the first lazy-note version (which
        // only kept old text, and would fill the notes the model's writes now make) is there.
        // And which of the three history triggers predate the row's `seen` (the change
        // trigger of before the model edit's reverse delta among them).
        let (change, new, del) = (
            format!("cf_wshist_change_{ns}"),
            format!("cf_wshist_new_{ns}"),
            format!("cf_wshist_del_{ns}"),
        );
        let found = self
            .sql
            .exec(
                "SELECT type, sql, name FROM sqlite_master WHERE (type = 'table' AND name = ?)
                   OR (type = 'trigger' AND name IN (?, ?, ?, ?))",
                &[
                    text(h),
                    SqlValue::Text(format!("cf_wshist_upd_{ns}")),
                    text(&change),
                    text(&new),
                    text(&del),
                ],
            )
            .unwrap_or_default();
        let schema = found
            .iter()
            .find(|r| col_opt_str(r, 0).as_deref() == Some("table"))
            .and_then(|r| col_opt_str(r, 1))
            .map(|sql| sql.to_ascii_uppercase());
        let trigger = |name: &str| {
            found.iter().find(|r| {
                col_opt_str(r, 0).as_deref() == Some("trigger")
                    && col_opt_str(r, 2).as_deref() == Some(name)
            })
        };
        let old_trigger = trigger(&format!("cf_wshist_upd_{ns}")).is_some();
        let before_seen = |name: &str| {
            trigger(name).and_then(|r| col_opt_str(r, 1)).is_some_and(|sql| !sql.contains(".seen"))
        };
        let outdated: Vec<&String> =
            [&change, &new, &del].into_iter().filter(|n| before_seen(n)).collect();
        let old = schema.as_deref().is_some_and(|sql| sql.contains("WITHOUT ROWID"));
        if !old && schema.as_deref().is_some_and(|sql| !sql.contains("PENDING")) {
            self.sql.exec(
                &format!("ALTER TABLE {h} ADD COLUMN pending INTEGER NOT NULL DEFAULT 0"),
                &[],
            )?;
        }
        if old {
            let sql = &self.sql;
            let mut rebuild = || -> Result<(), StoreError> {
                sql.exec(&format!("ALTER TABLE {h} RENAME TO {h}_old"), &[])?;
                sql.exec(&create, &[])?;
                sql.exec(
                    &format!(
                        "INSERT INTO {h} (path, slot, version, hash, content)
                         SELECT path, slot, version, hash, content FROM {h}_old"
                    ),
                    &[],
                )?;
                sql.exec(&format!("DROP TABLE {h}_old"), &[])?;
                Ok(())
            };
            self.sql.transaction(&mut rebuild)?;
        }
        if old_trigger {
            self.sql.exec(&format!("DROP TRIGGER IF EXISTS cf_wshist_upd_{ns}"), &[])?;
        }
        for name in outdated {
            self.sql.exec(&format!("DROP TRIGGER IF EXISTS {name}"), &[])?;
        }
        let keep_old = format!(
            "UPDATE {h} SET content = OLD.content, pending = 0 WHERE path = OLD.path AND pending = 1"
        );
        // The model's edit keeps the version it replaces as a reverse delta (see
        // [`reverse_delta_kept`]) instead of a copy of the old text: the statement sets `undo`,
        // tagged with the new version and hash, so that a value an earlier statement left
        // behind (a rewind or a move does not set it) is not taken for this change's unless the
        // change leads to that very version and text; `seen_content` checks every rebuilt text
        // against its noted hash besides. The delta is stored as a BLOB, which no read takes
        // for kept text.
        let delta = "NEW.changed_by = 'tool' AND NEW.version = OLD.version + 1
                 AND substr(NEW.undo, 1, length(NEW.version) + length(NEW.hash) + 2)
                   = NEW.version || ' ' || NEW.hash || ' '";
        // Skipped (a constant condition, checked before any look-up) when the row noted its
        // version itself: a pending note is of the live version, so `keep_seen` below
        // rewrites that very slot anyway.
        let keep_old_or_delta = format!(
            "UPDATE {h} SET content = CASE WHEN version = OLD.version AND hash IS NOT NULL
                 AND {delta} THEN CAST(NEW.undo AS BLOB) ELSE OLD.content END, pending = 0
             WHERE OLD.seen IS NOT OLD.version AND path = OLD.path AND pending = 1"
        );
        // The version the model's own fast write or edit left is noted on the row itself
        // (`seen` = its version, see `Workspace::write_inline`): one row written, not two.
        // When that version is overwritten, deleted or moved, its note moves into the
        // history, with the old text (or the edit's delta) when a note would keep it.
        let keep_seen = |with_delta: bool| {
            let kept = if with_delta {
                format!(
                    "CASE WHEN OLD.hash IS NOT NULL AND {delta} THEN CAST(NEW.undo AS BLOB)
                       ELSE OLD.content END"
                )
            } else {
                "OLD.content".to_owned()
            };
            format!(
                "INSERT INTO {h} (path, slot, version, hash, content, pending)
                 SELECT OLD.path, OLD.version % {MAX_HISTORY_VERSIONS}, OLD.version, OLD.hash,
                   CASE WHEN typeof(OLD.content) = 'text' AND OLD.size <= {MAX_HISTORY_BYTES}
                     THEN {kept} END, 0
                 WHERE OLD.seen IS OLD.version AND OLD.type = 'file'
                 {UPSERT_NOTE}"
            )
        };
        // Any other write of a file by the model (`changed_by = 'tool'`, only the file tools
        // write that) is noted as seen by the write's statement itself, as `remember_stored`
        // notes it. On an update the old text goes into the pending notes first, in the same
        // trigger: two triggers on one event run in no defined order, and the old text
        // must not land in the new note.
        let note = format!(
            "INSERT INTO {h} (path, slot, version, hash, content, pending)
             SELECT NEW.path, NEW.version % {MAX_HISTORY_VERSIONS}, NEW.version, NEW.hash, NULL,
               typeof(NEW.content) = 'text' AND NEW.size <= {MAX_HISTORY_BYTES}
             WHERE NEW.changed_by = 'tool' AND NEW.type = 'file' AND NEW.seen IS NOT NEW.version
             {UPSERT_NOTE}"
        );
        let (keep_seen_edit, keep_seen_gone) = (keep_seen(true), keep_seen(false));
        for ddl in [
            format!(
                "CREATE TRIGGER IF NOT EXISTS {change} AFTER UPDATE OF content, version, path
                 ON {t} BEGIN {keep_old_or_delta}; {keep_seen_edit}; {note}; END"
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS {new} AFTER INSERT ON {t}
                 WHEN NEW.changed_by = 'tool' AND NEW.type = 'file' AND NEW.seen IS NOT NEW.version
                 BEGIN {note}; END"
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS {del} AFTER DELETE ON {t}
                 BEGIN {keep_old}; {keep_seen_gone}; END"
            ),
        ] {
            self.sql.exec(&ddl, &[])?;
        }
        Ok(())
    }

    /// The version of the file at `path` (symlinks not followed); `None` when no file is there.
    pub fn version(&self, path: &str) -> Result<Option<FileVersion>, FsError> {
        Ok(self.version_and_seen(path)?.map(|(v, _)| v))
    }

    /// The SQL of the newest seen version's token for the row `f` (NULL when none): the
    /// row's own version when the model's write noted it there, else the history's newest.
    fn newest_seen_sql(&self) -> String {
        format!(
            "CASE WHEN f.seen IS f.version THEN f.version || ':' || COALESCE(f.hash, '-') ELSE
              (SELECT s.version || ':' || COALESCE(s.hash, '-') FROM {} s
               WHERE s.path = f.path ORDER BY s.version DESC LIMIT 1) END",
            self.h
        )
    }

    /// The file's version and the token of the newest version the model has seen, in one
    /// statement (the guard runs before every model write).
    fn version_and_seen(
        &self,
        path: &str,
    ) -> Result<Option<(FileVersion, Option<String>)>, FsError> {
        let norm = path::normalize(path, "stat")?;
        let rows = self.exec(
            &format!(
                "SELECT {VERSION_COLS}, {} FROM {} f WHERE path = ? AND type = 'file'",
                self.newest_seen_sql(),
                self.t,
            ),
            &[text(&norm)],
        )?;
        Ok(rows.first().map(|r| version_from_row(r, 0)))
    }

    /// The model's read of a text file in one statement when it can be: [`Workspace::stat`]
    /// and, for an inline `text/*` file, its text and the version token the model now knows,
    /// noted as seen. The note is written only when this version (same counter and hash, its
    /// text kept or not alike) is not noted yet, so a re-read writes nothing. Entries without prefetched text come back
    /// without a token (the caller notes what it reads itself).
    pub fn stat_with_seen_text(&self, path: &str) -> Result<Option<StatSeen>, FsError> {
        let norm = path::normalize(path, "stat")?;
        // Two columns: the metadata as one short text (see `ReadHeader`) and the text. Each
        // column a row carries costs SQLite a value, JavaScript a string and a property, and
        // the bridge its packing: ten columns cost about 3 µs more per read than these two.
        // The path and name are the normalized path and its last segment, so they are not
        // selected; nor is a symlink's target, since a symlink is read through `stat`. The
        // seen note is a `CASE`, not `seen IS version OR EXISTS (..)`: SQLite evaluates both
        // sides of an `OR` in a value, so the subquery's two cursors and its seek ran on every
        // read, also on the common one whose note is current (`EXPLAIN`, SQLite 3.40).
        let sql = self.read_sql.get_or_init(|| {
            format!(
                "SELECT substr(type, 1, 1) || ',' || size || ',' || created_at || ','
                   || modified_at || ',' || version || ','
                   || (2 * (typeof(content) = 'text' AND hash IS NOT NULL AND (CASE WHEN seen IS version
                     THEN 1 ELSE EXISTS (SELECT 1 FROM {h} s WHERE s.path = f.path
                       AND s.slot = f.version % {MAX_HISTORY_VERSIONS}
                       AND s.version = f.version AND s.hash = f.hash
                       AND (typeof(s.content) = 'text' OR s.pending = 1)
                         = (f.size <= {MAX_HISTORY_BYTES})) END))
                     + (typeof(content) = 'text'))
                   || ',' || COALESCE('+' || hash, '') || ',' || mime_type AS h,
                   CASE WHEN type = 'file' AND storage = 'inline'
                     AND substr(mime_type, 1, 5) = 'text/' THEN content END AS c
                 FROM {t} f WHERE path = ?",
                t = self.t,
                h = self.h,
            )
        });
        let rows = self.exec(sql, &[text(&norm)])?;
        let Some(mut row) = rows.into_iter().next() else {
            return Ok(self.stat(path)?.map(|info| (info, None, None)));
        };
        // Text crosses into wasm encoded in place (see `wasm/sql.rs`); bytes stored under a
        // text type are decoded as `read_file` decodes them.
        let content = match row.pop() {
            Some(SqlValue::Text(s)) => Some(s),
            Some(SqlValue::Blob(b)) => Some(Content::Bytes(b).into_text()),
            _ => None,
        };
        let header = row.first().and_then(SqlValue::as_str).and_then(ReadHeader::parse);
        let Some(header) = header.filter(|h| h.kind != EntryType::Symlink) else {
            return Ok(self.stat(path)?.map(|info| (info, None, None)));
        };
        let ReadHeader {
            kind,
            size,
            created_at,
            updated_at,
            counter,
            noted,
            stored_text,
            hash,
            mime_type,
        } = header;
        let info = FileInfo {
            name: path::basename(&norm).to_owned(),
            kind,
            mime_type: mime_type.to_owned(),
            size,
            created_at,
            updated_at,
            target: None,
            path: norm,
        };
        let Some(content) = content else { return Ok(Some((info, None, None))) };
        let token = if noted || stored_text {
            if !noted {
                self.remember_stored(path)?;
            }
            let hash = hash.map(str::to_owned);
            Some(FileVersion { counter, hash, changed_by: None, changed_at: 0 }.token())
        } else {
            self.remember_seen(path, Some(&content))?
        };
        Ok(Some((info, Some(content), token)))
    }

    /// The model's read before an edit, in one statement when the file is inline: the
    /// check of [`Workspace::check_fresh_for_model`], then the file's text (`None` when no
    /// file is there), as [`Workspace::read_file`] returns it.
    pub async fn read_fresh_for_model(
        &self,
        path: &str,
        expected: Option<&str>,
    ) -> Result<Option<String>, StaleWrite> {
        let norm = path::normalize(path, "stat")?;
        if expected.is_none() {
            // The check made by the statement itself: a flag and the text, not the version
            // and the seen token (400 edits: 31.0 → 27.5 ms CPU, bench/cpu-ab.mjs). A stale
            // file takes the statement below, which says why.
            let rows = self.exec(&self.edit_sql().checked_read, &[text(&norm)])?;
            let Some(mut row) = rows.into_iter().next() else {
                self.check_fresh_for_model(path, expected).await?;
                return Ok(self.read_file(path).await?);
            };
            if let Some(SqlValue::Integer(1)) = row.first() {
                return Ok(Some(stored_text(row.pop())));
            }
        }
        let rows = self.exec(&self.edit_sql().read, &[text(&norm)])?;
        let Some(mut row) = rows.into_iter().next() else {
            self.check_fresh_for_model(path, expected).await?;
            return Ok(self.read_file(path).await?);
        };
        let content = stored_text(row.pop());
        self.check_state(path, expected, Some(version_from_row(&row, 0))).await?;
        Ok(Some(content))
    }

    /// The model's write of text, checked as [`Workspace::check_fresh_for_model`] checks
    /// it and noted as seen afterwards. A new or inline file in an existing directory is
    /// checked and written by one statement (the check is part of its `WHERE`) and noted by
    /// a second, which copies the text inside SQLite; anything else, a refusal included,
    /// takes the general path: check, write, note. The model's tools' text written by the
    /// one statement is kept for their next edit (see `recent.rs`), moved when it is owned.
    pub async fn write_fresh_for_model<'a>(
        &self,
        path: &str,
        content: impl Into<std::borrow::Cow<'a, str>>,
        mime: &str,
        expected: Option<&str>,
    ) -> Result<(), StaleWrite> {
        let content = content.into();
        if let Some(guard) = self.write_guard(expected) {
            if let Some((norm, hash)) = self.write_guarded(path, &content, mime, &guard)? {
                self.note_written(path)?;
                self.keep_text(&norm, &hash, content.into_owned());
                return Ok(());
            }
        }
        self.check_fresh_for_model(path, expected).await?;
        self.write_file(path, &content, mime).await?;
        self.remember_seen(path, Some(&content))?;
        Ok(())
    }

    /// [`Workspace::rewrite_file`] of the model's edit, noted as seen: the note copies the
    /// text inside SQLite when the rewrite stayed inline. `previous`, the text the edit
    /// replaced (as the model's read returned it), lets the history keep that version as a
    /// reverse delta instead of a copy (see `reverse_delta_kept`).
    pub async fn rewrite_for_model(
        &self,
        path: &str,
        content: &str,
        mime: &str,
        previous: Option<&str>,
    ) -> Result<(), FsError> {
        self.rewrite_kept_for_model(path, content, mime, previous.map(|old| (old, (0, 0)))).await
    }

    /// [`Workspace::rewrite_for_model`] with `previous` and how many of its first and last
    /// bytes `content` kept, as the edit's match knows them (see `reverse_delta_kept`).
    pub async fn rewrite_kept_for_model(
        &self,
        path: &str,
        content: &str,
        mime: &str,
        previous: Option<(&str, (usize, usize))>,
    ) -> Result<(), FsError> {
        if let Some(hash) = self.rewrite_inline(path, content, mime, previous)? {
            self.note_written(path)?;
            self.keep_text(&path::normalize(path, "open")?, &hash, content.to_owned());
            return Ok(());
        }
        self.write_file(path, content, mime).await?;
        self.remember_seen(path, Some(content))?;
        Ok(())
    }

    /// The model edit's statements, formatted on first use (formatting them took a few µs
    /// of every edit): see [`EditSql`].
    pub(super) fn edit_sql(&self) -> &EditSql {
        self.edit_sql.get_or_init(|| {
            let read = format!(
                "SELECT {VERSION_COLS}, {}, content FROM {} f
                 WHERE path = ? AND type = 'file' AND storage = 'inline'",
                self.newest_seen_sql(),
                self.t,
            );
            // 1 when `check_state` passes without a token: the fast write's guard for no
            // token (the guard off, or the unseen-write check) on the row.
            let kind = self.write_guard(None).map_or(GuardKind::Unchecked, |g| g.kind);
            let checked_read = format!(
                "SELECT ({}) IS 1, content FROM {t}
                 WHERE path = ? AND type = 'file' AND storage = 'inline'",
                self.guard_sql(kind, 2),
                t = self.t,
            );
            let rewrite = self.rewrite_sql(super::io::Stored::TextAsBytes, Writer::Tool, true);
            let pinned = format!("{rewrite} AND {}.hash = ?6", self.t);
            let recalled =
                [format!("{pinned} AND ({})", self.guard_sql(GuardKind::Unseen, 7)), pinned];
            EditSql { read, checked_read, rewrite, recalled }
        })
    }

    /// The check a fast write must make for `expected` (see [`WriteGuard`]); `None` when
    /// the token does not parse (the general path refuses it).
    fn write_guard(&self, expected: Option<&str>) -> Option<WriteGuard> {
        match expected {
            Some(token) => {
                let (counter, hash) = FileVersion::parse_token(token)?;
                let hash = hash.as_deref().map_or(SqlValue::Null, text);
                Some(WriteGuard {
                    kind: GuardKind::Expected,
                    params: vec![hash, SqlValue::Integer(counter)],
                })
            }
            None if self.guard_unseen => {
                Some(WriteGuard { kind: GuardKind::Unseen, params: Vec::new() })
            }
            None => Some(WriteGuard { kind: GuardKind::Unchecked, params: Vec::new() }),
        }
    }

    /// The SQL condition of guard `kind` on the files table's row, the guard's `params`
    /// bound from parameter `?{at}` on.
    pub(super) fn guard_sql(&self, kind: GuardKind, at: usize) -> String {
        let t = &self.t;
        match kind {
            GuardKind::Expected => format!(
                "CASE WHEN ?{at} IS NOT NULL AND {t}.hash IS NOT NULL THEN {t}.hash = ?{at}
                         ELSE {t}.version = ?{} END",
                at + 1
            ),
            // A `CASE`, not `seen IS version OR COALESCE(..)`: in a value (the edit's read
            // selects the check) SQLite evaluates both sides of an `OR`, so the history's
            // look-up and sort ran also when the row notes its version itself (callgrind over
            // rusqlite, the bench's 400 edits, inside sqlite3_step: the read 11.3M -> 7.8M
            // instructions; the floor's bare read 3.6M).
            GuardKind::Unseen => format!(
                "CASE WHEN {t}.seen IS {t}.version THEN 1 ELSE COALESCE((SELECT CASE
                       WHEN s.hash IS NOT NULL AND {t}.hash IS NOT NULL THEN s.hash = {t}.hash
                       ELSE s.version = {t}.version END
                     FROM {} s WHERE s.path = {t}.path ORDER BY s.version DESC LIMIT 1), 1) END",
                self.h
            ),
            GuardKind::Unchecked => "1".to_owned(),
        }
    }

    /// Notes the inline text a fast write just left at `path` as seen: the write's own
    /// statement did when the model's tools wrote it (on the row's `seen`), a second
    /// statement does for any other writer.
    fn note_written(&self, path: &str) -> Result<(), FsError> {
        if self.writer() == Writer::Tool {
            return Ok(());
        }
        self.remember_stored(path)
    }

    /// Notes the current inline text of `path` as seen, without copying it: the note is
    /// `pending` (its text is the live row's, copied by the history trigger once this version
    /// is overwritten) when [`Workspace::remember_seen`] would have kept the text. The same
    /// as [`Workspace::remember_seen`] of the stored text, without binding or copying it.
    fn remember_stored(&self, path: &str) -> Result<(), FsError> {
        let norm = path::normalize(path, "open")?;
        self.exec(
            &format!(
                "INSERT INTO {h} (path, slot, version, hash, content, pending)
                 SELECT path, version % {MAX_HISTORY_VERSIONS}, version, hash, NULL,
                   typeof(content) = 'text' AND size <= {MAX_HISTORY_BYTES}
                 FROM {t} WHERE path = ? AND type = 'file'
                 {UPSERT_NOTE}",
                t = self.t,
                h = self.h,
            ),
            &[text(&norm)],
        )?;
        Ok(())
    }

    /// Records that the model has seen `content` as the current version of `path` and
    /// returns that version's token (`None` when no file is there), in one statement.
    /// Content over [`MAX_HISTORY_BYTES`] is noted without its text.
    pub fn remember_seen(
        &self,
        path: &str,
        content: Option<&str>,
    ) -> Result<Option<String>, FsError> {
        let norm = path::normalize(path, "open")?;
        let kept = content.filter(|c| c.len() <= MAX_HISTORY_BYTES);
        let rows = self.exec(
            &format!(
                "INSERT INTO {h} (path, slot, version, hash, content, pending)
                 SELECT path, version % {MAX_HISTORY_VERSIONS}, version, hash, ?, 0 FROM {t}
                 WHERE path = ? AND type = 'file'
                 {UPSERT_NOTE}
                 RETURNING version, hash",
                t = self.t,
                h = self.h
            ),
            &[kept.map_or(SqlValue::Null, text), text(&norm)],
        )?;
        Ok(rows.first().map(|r| {
            FileVersion {
                counter: col_i64(r, 0),
                hash: col_opt_str(r, 1),
                changed_by: None,
                changed_at: 0,
            }
            .token()
        }))
    }

    /// The text the model saw as version `counter` of `path`, when it was kept: as text, or
    /// as reverse deltas down from a later version whose text is kept (each step checked
    /// against the hash noted with its version, so a delta never yields other text).
    pub(super) fn seen_content(&self, norm: &str, counter: i64) -> Result<Option<String>, FsError> {
        let mut deltas = Vec::new();
        let mut version = counter;
        let base = loop {
            // The live row's note, when the model's write noted this version there; else the
            // history's. A row that notes its version owns that version's slot, as the note
            // it stands for would have replaced the slot's row: so the history keeps the same
            // versions whichever way the live one was noted.
            let rows = self.exec(
                &format!(
                    "SELECT 0 AS o, CASE WHEN typeof(content) = 'text'
                       AND size <= {MAX_HISTORY_BYTES} THEN content END, hash
                     FROM {t} WHERE path = ? AND version = ? AND seen IS version
                       AND type = 'file'
                     UNION ALL
                     SELECT 1, COALESCE(s.content, CASE WHEN s.pending = 1 THEN
                       (SELECT f.content FROM {t} f WHERE f.path = s.path AND f.version = s.version)
                       END), s.hash
                     FROM {h} s WHERE s.path = ? AND s.version = ?
                       AND NOT EXISTS (SELECT 1 FROM {t} f WHERE f.path = s.path
                         AND f.seen IS f.version AND f.version % {MAX_HISTORY_VERSIONS} = s.slot)
                     ORDER BY o LIMIT 1",
                    t = self.t,
                    h = self.h
                ),
                &[text(norm), SqlValue::Integer(version), text(norm), SqlValue::Integer(version)],
            )?;
            let Some(mut row) = rows.into_iter().next() else { return Ok(None) };
            let hash = col_opt_str(&row, 2);
            match row.swap_remove(1) {
                SqlValue::Text(s) => break s,
                // At most one delta per kept version: a longer chain is not one.
                SqlValue::Blob(b) if (deltas.len() as i64) < MAX_HISTORY_VERSIONS => {
                    let Some(delta) = Delta::parse(&b) else { return Ok(None) };
                    if delta.version != version + 1 {
                        return Ok(None);
                    }
                    version = delta.version;
                    deltas.push((delta, hash));
                }
                _ => return Ok(None),
            }
        };
        let mut text = base;
        for (delta, hash) in deltas.iter().rev() {
            match delta.apply(&text) {
                Some(old) if hash.as_deref().is_some_and(|h| hash_names(h, old.as_bytes())) => {
                    text = old;
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(text))
    }

    /// Checks that `path` is still at the version `expected` names; otherwise a
    /// [`StaleWrite`] saying who changed it, when, and the diff since (when that is kept).
    pub async fn check_version(&self, path: &str, expected: &str) -> Result<(), StaleWrite> {
        let current = self.version(path)?;
        self.compare(path, expected, current).await
    }

    async fn compare(
        &self,
        path: &str,
        expected: &str,
        current: Option<FileVersion>,
    ) -> Result<(), StaleWrite> {
        let Some(current) = current else {
            return Err(StaleWrite::Gone { path: path.to_owned(), expected: expected.to_owned() });
        };
        if current.matches(expected) {
            return Ok(());
        }
        let norm = path::normalize(path, "open")?;
        let old = match FileVersion::parse_token(expected) {
            Some((c, _)) => self.seen_content(&norm, c)?,
            None => None,
        };
        let diff = match old {
            Some(old) => Some(self.diff_content_rev(path, &old).await?),
            None => None,
        };
        Err(StaleWrite::Changed {
            path: path.to_owned(),
            expected: expected.to_owned(),
            current,
            diff,
        })
    }

    /// The model's write check, one statement when it passes: `expected` when given;
    /// otherwise, when the guard is on and the model has read the file, that nobody
    /// changed it since.
    pub async fn check_fresh_for_model(
        &self,
        path: &str,
        expected: Option<&str>,
    ) -> Result<(), StaleWrite> {
        let state = self.version_and_seen(path)?;
        self.check_state(path, expected, state).await
    }

    /// [`Workspace::check_fresh_for_model`] on the state [`Workspace::version_and_seen`]
    /// returned.
    async fn check_state(
        &self,
        path: &str,
        expected: Option<&str>,
        state: Option<(FileVersion, Option<String>)>,
    ) -> Result<(), StaleWrite> {
        match (expected, state) {
            (Some(expected), state) => self.compare(path, expected, state.map(|(v, _)| v)).await,
            (None, Some((current, Some(seen)))) if self.guard_unseen => {
                self.compare(path, &seen, Some(current)).await
            }
            (None, _) => Ok(()),
        }
    }

    /// The unified diff from `old` to the file's current text.
    async fn diff_content_rev(&self, path: &str, old: &str) -> Result<String, FsError> {
        let new = self.read_file(path).await?.unwrap_or_default();
        Ok(unified_diff(old, &new, path, path))
    }
}

/// What [`Workspace::stat_with_seen_text`] returns: the metadata, the prefetched text and,
/// with it, the version token noted as seen.
pub type StatSeen = (FileInfo, Option<String>, Option<String>);

/// The metadata column of the model's read ([`Workspace::stat_with_seen_text`]):
/// `<t>,<size>,<created>,<modified>,<version>,<flags>,<+hash or empty>,<mime type>`, where
/// `<t>` is the type's first letter and `<flags>` has bit 1 set when this version is noted
/// as seen and bit 0 when the content is stored as text. The MIME type is last, so it may
/// hold commas; a hash is hex digits.
struct ReadHeader<'a> {
    kind: EntryType,
    size: u64,
    created_at: i64,
    updated_at: i64,
    counter: i64,
    noted: bool,
    stored_text: bool,
    hash: Option<&'a str>,
    mime_type: &'a str,
}

impl<'a> ReadHeader<'a> {
    /// `None` when `s` is not such a header.
    fn parse(s: &'a str) -> Option<ReadHeader<'a>> {
        let mut parts = s.splitn(8, ',');
        let mut next = || parts.next();
        let kind = match next()? {
            "f" => EntryType::File,
            "d" => EntryType::Directory,
            "s" => EntryType::Symlink,
            _ => return None,
        };
        let mut int = || next()?.parse::<i64>().ok();
        let (size, created_at, updated_at, counter, flags) =
            (int()?, int()?, int()?, int()?, int()?);
        let hash = next()?;
        let hash = match hash.strip_prefix('+') {
            Some(h) => Some(h),
            None if hash.is_empty() => None,
            None => return None,
        };
        Some(ReadHeader {
            kind,
            size: size.max(0) as u64,
            created_at,
            updated_at,
            counter,
            noted: flags & 2 != 0,
            stored_text: flags & 1 != 0,
            hash,
            mime_type: next()?,
        })
    }
}

/// The columns [`version_from_row`] reads, then the newest seen token.
const VERSION_COLS: &str = "version, hash, changed_by, modified_at";

/// The version in `VERSION_COLS` from column `at` on, and the seen token after them.
fn version_from_row(r: &Row, at: usize) -> (FileVersion, Option<String>) {
    let version = FileVersion {
        counter: col_i64(r, at),
        hash: col_opt_str(r, at + 1),
        changed_by: col_opt_str(r, at + 2).as_deref().and_then(Writer::parse),
        changed_at: col_i64(r, at + 3),
    };
    (version, col_opt_str(r, at + 4))
}

/// How a note replaces the one in its slot (an upsert: cheaper than `INSERT OR REPLACE`,
/// which deletes the old row and inserts a new one).
const UPSERT_NOTE: &str = "ON CONFLICT (path, slot) DO UPDATE SET version = excluded.version,
    hash = excluded.hash, content = excluded.content, pending = excluded.pending";

/// Largest replaced text kept as a reverse delta; an edit that replaces more keeps a copy.
const MAX_DELTA_BYTES: usize = 4 * 1024;

/// [`reverse_delta_kept`] with nothing known kept (the tests).
#[cfg(test)]
pub(crate) fn reverse_delta(old: &str, new: &str) -> Option<String> {
    reverse_delta_kept(old, new, (0, 0))
}

/// The `undo` a model edit's statement stores with the text `new` that replaces `old`, when
/// the history would keep `old`: `"<p> <q> <replaced>"`, where `old` is the first `p` and
/// the last `q` bytes of `new` with `replaced` between them. The statement prefixes the new
/// version and hash (`"<version> <hash> "`); the history trigger stores the whole value as
/// the old version's note (see [`Workspace::init_history`]).
///
/// `old` and `new` are known to share at least their first `kept.0` and their last `kept.1`
/// bytes (an exact edit's splice): those are not compared again. Comparing both ends of a
/// 10 KB file was most of `rewrite_inline`'s 6.5 % of the edit row's V8 profile (0.8 % after;
/// with the edit's single searcher, 400 edits: median 29.1 → 25.7 ms CPU).
pub(crate) fn reverse_delta_kept(old: &str, new: &str, kept: (usize, usize)) -> Option<String> {
    if old.len() > MAX_HISTORY_BYTES {
        return None;
    }
    let (o, n) = (old.as_bytes(), new.as_bytes());
    let len = o.len().min(n.len());
    let known = kept.0.min(len);
    let mut p = known + common_prefix(&o[known..], &n[known..]);
    while !(old.is_char_boundary(p) && new.is_char_boundary(p)) {
        p -= 1;
    }
    let room = len - p;
    let known = kept.1.min(room);
    let mut q = known + common_suffix(&o[..o.len() - known], &n[..n.len() - known], room - known);
    while !(old.is_char_boundary(o.len() - q) && new.is_char_boundary(n.len() - q)) {
        q -= 1;
    }
    let replaced = &old[p..o.len() - q];
    (replaced.len() <= MAX_DELTA_BYTES).then(|| format!("{p} {q} {replaced}"))
}

/// How many bytes `a` and `b` share from the start, compared [`BLOCK`] bytes a step as four
/// words with one branch (a byte loop over a 10 KB file cost about a fifth of the edit; eight
/// bytes a step, each with its bounds check, still showed as 6-7 % of it in a V8 profile).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let same = a.chunks_exact(BLOCK).zip(b.chunks_exact(BLOCK));
    let mut i = same.take_while(|(x, y)| same_block(x, y)).count() * BLOCK;
    while i < len && a[i] == b[i] {
        i += 1;
    }
    i
}

/// How many bytes `a` and `b` share at their ends, at most `max`, as [`common_prefix`].
fn common_suffix(a: &[u8], b: &[u8], max: usize) -> usize {
    let (a, b) = (&a[a.len() - max..], &b[b.len() - max..]);
    let same = a.rchunks_exact(BLOCK).zip(b.rchunks_exact(BLOCK));
    let mut k = same.take_while(|(x, y)| same_block(x, y)).count() * BLOCK;
    while k < max && a[max - 1 - k] == b[max - 1 - k] {
        k += 1;
    }
    k
}

/// The step of [`common_prefix`] and [`common_suffix`], in bytes.
const BLOCK: usize = 32;

/// Whether two blocks (exact chunks of [`BLOCK`] bytes) are equal: the XOR of their four
/// words, ORed, is zero.
#[inline(always)]
fn same_block(x: &[u8], y: &[u8]) -> bool {
    let (Ok(x), Ok(y)) = (<&[u8; BLOCK]>::try_from(x), <&[u8; BLOCK]>::try_from(y)) else {
        return x == y;
    };
    let word =
        |s: &[u8; BLOCK], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap_or([0; 8]));
    (0..BLOCK).step_by(8).fold(0, |acc, i| acc | (word(x, i) ^ word(y, i))) == 0
}

/// A reverse delta as the history keeps it: `"<version> <hash> <p> <q> <replaced>"` (see
/// [`reverse_delta_kept`]), the text before `version` rebuilt from that version's text.
pub(super) struct Delta {
    version: i64,
    prefix: usize,
    suffix: usize,
    pub(super) replaced: String,
}

impl Delta {
    pub(super) fn parse(bytes: &[u8]) -> Option<Delta> {
        let s = std::str::from_utf8(bytes).ok()?;
        let mut parts = s.splitn(5, ' ');
        let version = parts.next()?.parse().ok()?;
        let _hash = parts.next()?;
        let prefix = parts.next()?.parse().ok()?;
        let suffix = parts.next()?.parse().ok()?;
        Some(Delta { version, prefix, suffix, replaced: parts.next()?.to_owned() })
    }

    /// The older text, from the newer one; `None` when the delta does not fit it.
    pub(super) fn apply(&self, newer: &str) -> Option<String> {
        let tail = newer.len().checked_sub(self.suffix)?;
        let head = newer.get(..self.prefix.min(tail))?;
        let end = newer.get(tail..)?;
        if head.len() != self.prefix {
            return None;
        }
        Some([head, self.replaced.as_str(), end].concat())
    }
}

/// The text of an inline file's `content` column, as [`Workspace::read_file`] returns it.
fn stored_text(content: Option<SqlValue>) -> String {
    match content {
        Some(SqlValue::Text(s)) => s,
        Some(SqlValue::Blob(b)) => Content::Bytes(b).into_text(),
        _ => String::new(),
    }
}

/// The model edit's statements.
pub(super) struct EditSql {
    /// Its read ([`Workspace::read_fresh_for_model`]): the version, the newest seen token
    /// and the text of an inline file.
    read: String,
    /// Its read when no version is named: whether the file passes the check, and its text.
    checked_read: String,
    /// The model's rewrite of text bound as bytes ([`Workspace::rewrite_inline`]).
    pub(super) rewrite: String,
    /// The rewrite of a kept text (`Workspace::rewrite_recalled`): the rewrite, applied
    /// only to the row whose hash is the kept text's, with the stale-write check of a
    /// write without a version (first) or without any (second).
    pub(super) recalled: [String; 2],
}

/// The check a model write's statement makes on the row it would overwrite: a condition of
/// its `kind` (see [`Workspace::guard_sql`]) whose `?` are bound to `params`, in order.
pub(crate) struct WriteGuard {
    pub kind: GuardKind,
    pub params: Vec<SqlValue>,
}

impl WriteGuard {
    /// Whether the check keeps the write from creating a file: a write that names a version
    /// needs one there.
    pub fn must_exist(&self) -> bool {
        self.kind == GuardKind::Expected
    }
}

/// Which check a [`WriteGuard`] makes; each kind's statement is formatted once per workspace
/// (see `Workspace::write_inline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuardKind {
    /// The row is the version `expectedVersion` names: its hash when both have one, else its
    /// counter.
    Expected,
    /// The model saw the row's version last, or never saw the file (the stale-write guard).
    Unseen,
    /// No check (the guard is off).
    Unchecked,
}

impl GuardKind {
    /// The kind's slot in `Workspace::write_sql`.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A write refused because the file is no longer the version the writer saw.
#[derive(Debug)]
#[non_exhaustive]
pub enum StaleWrite {
    /// The file changed since `expected`.
    Changed {
        /// The path as given.
        path: String,
        /// The version the writer named.
        expected: String,
        /// The file's version now.
        current: FileVersion,
        /// The diff from the expected version's content to now, when that content was kept.
        diff: Option<String>,
    },
    /// The file no longer exists.
    Gone {
        /// The path as given.
        path: String,
        /// The version the writer named.
        expected: String,
    },
    /// The check itself failed.
    Fs(FsError),
}

impl std::fmt::Display for StaleWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StaleWrite::Changed { path, expected, current, diff } => {
                let who = current.changed_by.map_or("an unknown writer", Writer::as_str);
                let when = crate::platform::iso8601_ms(current.changed_at);
                write!(
                    f,
                    "{path} changed since version {expected}: it is now version {} (changed by {who} at {when}). Read it again and redo the change on the current content.",
                    current.token()
                )?;
                match diff {
                    Some(d) => write!(f, "\nChanges since version {expected}:\n{d}"),
                    None => write!(f, "\nThe content of version {expected} is no longer kept, so no diff can be shown."),
                }
            }
            StaleWrite::Gone { path, expected } => {
                write!(f, "{path} was deleted since version {expected}.")
            }
            StaleWrite::Fs(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StaleWrite {}

impl From<FsError> for StaleWrite {
    fn from(e: FsError) -> Self {
        StaleWrite::Fs(e)
    }
}
