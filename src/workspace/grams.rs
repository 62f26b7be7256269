//! The trigram index behind `grep`: which files may contain a literal, without reading them.
//!
//! Postings live in one table per namespace, `cf_wsgram_<ns>(gram, blk, bits)`: `gram` is
//! three bytes of text, ASCII-lowercased (`b0 << 16 | b1 << 8 | b2`), and row `(gram, blk)`
//! has bit `i` of `bits` set when the file whose rowid is `blk * 32 + i` contains it. 32
//! files per row keep `bits` exact in the f64 that integers cross the JS boundary as.
//! Postings are never cleared, so a rewritten or deleted file may stay a candidate (a
//! false positive the real regex discards), never the reverse.
//!
//! A write does not touch the index itself: it queues its file's trigrams, and the queue is
//! written in one pass ([`Workspace::flush_grams`]) once it holds [`FLUSH_FILES`] files,
//! before any search, and before any change that does not queue (appends, copies, moves,
//! deletes, bytes, content in R2 or chunks), so the queue only ever describes current
//! content. Files of one 32-file block share most trigrams, so a pass upserts far fewer
//! rows than the files' trigrams added up. A queue lost with the isolate leaves its files
//! unindexed: read by every search, never missed.
//!
//! Which files are indexed is the pseudo-gram [`INDEXED`]: its bit for a file is set by the
//! statement that adds the file's trigrams, and cleared by SQLite triggers whenever the
//! file's content is updated or its row deleted, whatever statement does it. So a file
//! changed by a path that does not index it (an append, a copy, content in R2) is simply
//! unindexed, and a search reads it as before.

use super::*;
use std::cell::RefCell;
use std::collections::HashMap;

/// The pseudo-gram whose bits mark the files whose current content is indexed.
const INDEXED: i64 = -1;
/// Files per posting row.
const BLOCK_BITS: i64 = 32;
/// Trigrams of one literal looked up in one statement (a self-join each); a longer literal
/// uses a spread of its trigrams, which narrows about as well.
const MAX_JOINED_GRAMS: usize = 12;
/// Content larger than this is not indexed: `grep` skips files over 1 MB anyway.
pub const MAX_INDEXED_BYTES: usize = 1_048_576;
/// Queued files that make the queue be written.
const FLUSH_FILES: usize = 32;
/// Bytes of JSON bound to one flush statement (the platform limit per statement is 100 KB).
const FLUSH_JSON_BYTES: usize = 90_000;

/// Files written since the last flush, with their trigrams: `(rowid, trigrams)`.
pub(crate) type PendingGrams = RefCell<Vec<(i64, Vec<u32>)>>;

/// What a file must contain to match a pattern, as `grep` derives it from the pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GramQuery {
    /// No constraint: every file is a candidate.
    All,
    /// The bytes, compared ASCII-case-insensitively (shorter than three: no constraint).
    Literal(Vec<u8>),
    /// Every part holds.
    And(Vec<GramQuery>),
    /// At least one part holds.
    Or(Vec<GramQuery>),
}

impl GramQuery {
    /// Whether the query constrains anything the index can use.
    pub fn is_useful(&self) -> bool {
        match self {
            GramQuery::All => false,
            GramQuery::Literal(b) => b.len() >= 3,
            GramQuery::And(parts) => parts.iter().any(GramQuery::is_useful),
            GramQuery::Or(parts) => !parts.is_empty() && parts.iter().all(GramQuery::is_useful),
        }
    }
}

/// A file matched by [`Workspace::grep_files`]: path, size, and whether it may match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepFile {
    /// Absolute path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// False only when the index proves the file cannot match.
    pub candidate: bool,
}

/// The distinct trigrams of `text`, ASCII-lowercased, sorted.
pub(crate) fn trigrams(text: &[u8]) -> Vec<u32> {
    let mut out: Vec<u32> = text
        .windows(3)
        .map(|w| {
            u32::from(w[0].to_ascii_lowercase()) << 16
                | u32::from(w[1].to_ascii_lowercase()) << 8
                | u32::from(w[2].to_ascii_lowercase())
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Per-block bitmaps of files; a missing block is all zeros.
type Bitmap = HashMap<i64, i64>;

impl Workspace {
    /// Whether this workspace keeps the trigram index.
    pub fn grep_index_enabled(&self) -> bool {
        self.grep_index
    }

    /// Creates the index table and the triggers that unmark changed files.
    pub(crate) fn init_grams(&self) -> Result<(), FsError> {
        let (t, g, ns) = (&self.t, &self.g, &self.namespace);
        self.sql.exec(
            &format!(
                "CREATE TABLE IF NOT EXISTS {g} (
                  gram INTEGER NOT NULL,
                  blk INTEGER NOT NULL,
                  bits INTEGER NOT NULL,
                  PRIMARY KEY (gram, blk)
                ) WITHOUT ROWID"
            ),
            &[],
        )?;
        let unmark = format!(
            "UPDATE {g} SET bits = bits & ~(1 << (old.rowid % {BLOCK_BITS}))
             WHERE gram = {INDEXED} AND blk = old.rowid / {BLOCK_BITS}"
        );
        self.sql.exec(
            &format!(
                "CREATE TRIGGER IF NOT EXISTS cf_wsgram_upd_{ns} AFTER UPDATE OF content ON {t}
                 BEGIN {unmark}; END"
            ),
            &[],
        )?;
        self.sql.exec(
            &format!(
                "CREATE TRIGGER IF NOT EXISTS cf_wsgram_del_{ns} AFTER DELETE ON {t}
                 BEGIN {unmark}; END"
            ),
            &[],
        )?;
        Ok(())
    }

    /// Queues the trigrams of the file at `rowid`, whose content was just written as
    /// `text`; the next flush adds them and marks the file indexed.
    pub(crate) fn index_text(&self, rowid: i64, text: &str) -> Result<(), FsError> {
        if !self.grep_index || text.len() > MAX_INDEXED_BYTES {
            return Ok(());
        }
        let full = {
            let mut pending = self.pending_grams.borrow_mut();
            pending.push((rowid, trigrams(text.as_bytes())));
            pending.len() >= FLUSH_FILES
        };
        if full {
            self.flush_grams()?;
        }
        Ok(())
    }

    /// Writes the queued trigrams: per 32-file block, each trigram once with the bits of
    /// every queued file of the block that has it, plus the blocks' [`INDEXED`] bits, in
    /// statements of at most [`FLUSH_JSON_BYTES`] of `[gram, blk, bits]` triples.
    pub(crate) fn flush_grams(&self) -> Result<(), FsError> {
        let pending = std::mem::take(&mut *self.pending_grams.borrow_mut());
        if pending.is_empty() {
            return Ok(());
        }
        let mut merged: std::collections::BTreeMap<(i64, i64), i64> = Default::default();
        for (rowid, grams) in &pending {
            let (blk, bit) = (rowid / BLOCK_BITS, 1i64 << (rowid % BLOCK_BITS));
            *merged.entry((INDEXED, blk)).or_insert(0) |= bit;
            for &g in grams {
                *merged.entry((i64::from(g), blk)).or_insert(0) |= bit;
            }
        }
        drop(pending);
        let sql = format!(
            "INSERT INTO {} (gram, blk, bits)
             SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?) WHERE true
             ON CONFLICT(gram, blk) DO UPDATE SET bits = bits | excluded.bits",
            self.g
        );
        let mut json = String::with_capacity(FLUSH_JSON_BYTES + 64);
        let send = |json: &mut String| -> Result<(), FsError> {
            json.push(']');
            self.exec(&sql, &[SqlValue::Text(std::mem::take(json))])?;
            Ok(())
        };
        for ((gram, blk), bits) in merged {
            json.push(if json.is_empty() { '[' } else { ',' });
            json.push_str(&format!("[{gram},{blk},{bits}]"));
            if json.len() >= FLUSH_JSON_BYTES {
                send(&mut json)?;
            }
        }
        if !json.is_empty() {
            send(&mut json)?;
        }
        Ok(())
    }

    /// Rows and an estimate of the bytes the index holds (three integers and the row
    /// overhead each).
    pub(crate) fn grams_size(&self) -> Result<(u64, u64), FsError> {
        if !self.grep_index {
            return Ok((0, 0));
        }
        self.flush_grams()?;
        let rows = self.exec(&format!("SELECT count(*) FROM {}", self.g), &[])?;
        let n = rows.first().map(|r| col_i64(r, 0).max(0) as u64).unwrap_or(0);
        Ok((n, n * 16))
    }

    /// The bitmap of files that may satisfy `q`; `None` when every file may.
    fn query_bitmap(&self, q: &GramQuery) -> Result<Option<Bitmap>, FsError> {
        match q {
            GramQuery::All => Ok(None),
            GramQuery::Literal(bytes) if bytes.len() < 3 => Ok(None),
            GramQuery::Literal(bytes) => self.literal_bitmap(bytes).map(Some),
            GramQuery::And(parts) => {
                let mut acc: Option<Bitmap> = None;
                for part in parts {
                    let Some(b) = self.query_bitmap(part)? else { continue };
                    acc = Some(match acc {
                        None => b,
                        Some(a) => a
                            .into_iter()
                            .filter_map(|(k, v)| b.get(&k).map(|w| (k, v & w)))
                            .filter(|&(_, v)| v != 0)
                            .collect(),
                    });
                    if acc.as_ref().is_some_and(HashMap::is_empty) {
                        break;
                    }
                }
                Ok(acc)
            }
            GramQuery::Or(parts) => {
                let mut acc = Bitmap::new();
                for part in parts {
                    let Some(b) = self.query_bitmap(part)? else { return Ok(None) };
                    for (k, v) in b {
                        *acc.entry(k).or_insert(0) |= v;
                    }
                }
                Ok(Some(acc))
            }
        }
    }

    /// Files containing every trigram of `bytes` (up to [`MAX_JOINED_GRAMS`] of them).
    fn literal_bitmap(&self, bytes: &[u8]) -> Result<Bitmap, FsError> {
        let all = trigrams(bytes);
        let picked: Vec<u32> = if all.len() <= MAX_JOINED_GRAMS {
            all
        } else {
            (0..MAX_JOINED_GRAMS).map(|i| all[i * all.len() / MAX_JOINED_GRAMS]).collect()
        };
        let g = &self.g;
        let mut sql = String::from("SELECT a0.blk, a0.bits");
        for i in 1..picked.len() {
            sql.push_str(&format!(" & a{i}.bits"));
        }
        sql.push_str(&format!(" FROM {g} a0"));
        for i in 1..picked.len() {
            sql.push_str(&format!(" JOIN {g} a{i} ON a{i}.gram = ? AND a{i}.blk = a0.blk"));
        }
        sql.push_str(" WHERE a0.gram = ?");
        let mut params: Vec<SqlValue> =
            picked[1..].iter().map(|&x| SqlValue::Integer(i64::from(x))).collect();
        params.push(SqlValue::Integer(i64::from(picked[0])));
        let rows = self.exec(&sql, &params)?;
        Ok(rows
            .iter()
            .map(|r| (col_i64(r, 0), col_i64(r, 1)))
            .filter(|&(_, bits)| bits != 0)
            .collect())
    }

    /// Every file matching the glob `pattern`, in path order, each marked with whether the
    /// index lets it contain a match of `q` (a file the index does not cover always may).
    /// `None` when the index is off or `q` gives it nothing to narrow by: then `grep` reads
    /// pages of texts as before. Holds paths, never contents.
    pub fn grep_files(
        &self,
        pattern: &str,
        q: &GramQuery,
    ) -> Result<Option<Vec<GrepFile>>, FsError> {
        if !self.grep_index || !q.is_useful() {
            return Ok(None);
        }
        let glob = Glob::new(pattern)?;
        self.flush_grams()?;
        let Some(matches) = self.query_bitmap(q)? else { return Ok(None) };
        let indexed: Bitmap = self
            .exec(&format!("SELECT blk, bits FROM {} WHERE gram = {INDEXED}", self.g), &[])?
            .iter()
            .map(|r| (col_i64(r, 0), col_i64(r, 1)))
            .collect();
        let bit = |map: &Bitmap, id: i64| {
            map.get(&(id / BLOCK_BITS)).is_some_and(|b| b & (1 << (id % BLOCK_BITS)) != 0)
        };
        Ok(Some(
            self.glob_rows(&glob, "path, size, rowid", "AND type = 'file'")?
                .into_iter()
                .map(|mut row| {
                    let id = col_i64(&row, 2);
                    GrepFile {
                        size: col_i64(&row, 1).max(0) as u64,
                        candidate: !bit(&indexed, id) || bit(&matches, id),
                        path: take_str(&mut row, 0),
                    }
                })
                .collect(),
        ))
    }
}
