//! The trigram index behind `grep`: which files may contain a literal, without reading them.
//!
//! Postings live in one table per namespace, `cf_wsgram_<ns>(gram, blk, bits)`: `gram` is
//! three bytes of text, ASCII-lowercased (`b0 << 16 | b1 << 8 | b2`), and row `(gram, blk)`
//! has bit `i` of `bits` set when the file whose rowid is `blk * 32 + i` contains it. 32
//! files per row keep `bits` exact in the f64 that integers cross the JS boundary as.
//! Postings are never cleared, so a rewritten or deleted file may stay a candidate (a
//! false positive the real regex discards), never the reverse.
//!
//! Writes do not touch the index, so they cost what they cost without it. The agent's
//! alarm indexes changed files off the request ([`Workspace::index_unindexed`]), and `grep`
//! helps on the way: a file the index does not cover is a candidate, so `grep` reads it
//! anyway, and adds the trigrams of some of that text (an eighth of what the search covers,
//! at least 1 MB) to a [`GramBatch`], which [`Workspace::index_grams`] writes per 32-file block (each trigram
//! once per block for all the batch's files of the block). So a search right after many
//! writes costs about the scan, and the index fills in the background and search by search.
//!
//! Which files are indexed is the pseudo-gram [`INDEXED`]: its bit for a file is set by
//! [`Workspace::index_grams`], and cleared by SQLite triggers whenever the file's content
//! or path is updated or its row deleted, whatever statement does it. So a file changed
//! by any path is simply unindexed until a search reads it again. (The checks use only
//! columns stored before `content`: reading a later one walks the content's overflow
//! pages.)
//!
//! A text read while another request changed files (a search awaiting R2) must not be
//! marked as the current content. `grep` notes SQLite's `total_changes()` (the rows
//! written on the object's one connection since it opened, triggers' included) when it
//! lists the files, and [`Workspace::index_grams`] marks them only if the count is the
//! same just before it writes: then no row of any table changed between. It costs writes
//! nothing; the triggers once bumped a counter row of their own instead, a real write in
//! every overwrite, delete and move (3.58 M of an edit's 32.89 M instructions in SQLite,
//! natively). A write to another table meanwhile (a turn's messages, the alarm) skips the
//! marks too: that only leaves files for the alarm or the next search to index, never a
//! stale mark. The count restarts with the connection, and tickets live within one call.

use super::*;
use std::collections::HashMap;

/// The pseudo-gram whose bits mark the files whose current content is indexed.
const INDEXED: i64 = -1;
/// The pseudo-gram whose row `(CHANGES, 0)` counted content changes before
/// `total_changes()` replaced it; [`Workspace::init_grams`] deletes it.
const CHANGES: i64 = -2;
/// Files per posting row.
const BLOCK_BITS: i64 = 32;
/// Trigrams of one literal looked up in one statement (a self-join each); a longer literal
/// uses a spread of its trigrams, which narrows about as well.
const MAX_JOINED_GRAMS: usize = 12;
/// Content larger than this is not indexed: `grep` skips files over 1 MB anyway.
pub const MAX_INDEXED_BYTES: usize = 1_048_576;
/// Bytes of JSON bound to one flush statement (the platform limit per statement is 100 KB).
const FLUSH_JSON_BYTES: usize = 90_000;
/// A file's distinct trigrams a [`GramBatch`] gathers (16 bytes each, about 400 files of
/// 10 KB) before it sorts them into its merged postings.
const RAW_POSTINGS: usize = 200_000;
/// Merged postings (one row each) a [`GramBatch`] holds before `grep` writes it: 8 MB, so
/// a first search over 100 MB (245,000 rows) writes once, each row once, whatever order
/// the files are read in, and a larger tree stays within a request's memory.
const BATCH_POSTINGS: usize = 500_000;
/// Text one background run of [`Workspace::index_unindexed`] (one alarm) indexes at most:
/// about half a second of CPU, far below a request's 30 s and its memory.
pub const INDEX_RUN_BYTES: u64 = 16 << 20;
/// Files whose texts [`Workspace::index_unindexed`] reads in one statement (the platform
/// allows 100 bound parameters).
const READ_FILES: usize = 64;
/// Bytes of text [`Workspace::index_unindexed`] reads in one statement, at least one file.
const READ_BYTES: u64 = 4 << 20;

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
    /// Set when the index does not cover the file and could: `grep`, which reads it
    /// anyway, hands its text to [`GramBatch::add`].
    pub unindexed: Option<IndexTicket>,
}

/// An unindexed file as `grep` listed it: its rowid and `total_changes()` then, so that
/// its trigrams are only marked current if no row changed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexTicket {
    rowid: i64,
    changes: i64,
}

/// What one [`Workspace::index_unindexed`] call did, so the alarm knows whether to re-arm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexRun {
    /// Files read and indexed.
    pub files: usize,
    /// Unindexed files were left for a later call.
    pub more: bool,
}

/// Trigrams of files `grep` read and the index did not cover, merged per 32-file block,
/// waiting for [`Workspace::index_grams`].
#[derive(Default)]
pub struct GramBatch {
    /// `(gram, blk, bit)` for each distinct trigram of each file added since the last
    /// [`GramBatch::compact`].
    raw: Vec<(u32, i64, i64)>,
    /// `(gram, blk, bits)`, sorted, one per `(gram, blk)`: the rows to write.
    merged: Vec<(u32, i64, i64)>,
    /// The files whose trigrams are in `postings`.
    tickets: Vec<IndexTicket>,
    /// One bit per possible trigram, all clear between files: the set a file's distinct
    /// trigrams are found with (2 MB, allocated by the first file).
    seen: Vec<u64>,
    /// The current file's distinct trigrams.
    distinct: Vec<u32>,
    /// `(listed, now)` after a flush that marked: tickets listed at `listed` are still
    /// current at `now`, the count after the flush's own writes, so a search that flushes
    /// midway keeps marking the files of its listing.
    rebase: Option<(i64, i64)>,
}

impl GramBatch {
    /// Adds the trigrams of `text`, the content of the file `ticket` was listed with.
    pub fn add(&mut self, ticket: &IndexTicket, text: &str) {
        if text.len() > MAX_INDEXED_BYTES {
            return;
        }
        if self.seen.is_empty() {
            self.seen = vec![0; 1 << 18];
        }
        let (blk, bit) = (ticket.rowid / BLOCK_BITS, 1i64 << (ticket.rowid % BLOCK_BITS));
        for g in text.as_bytes().windows(3).map(gram) {
            let (word, mask) = ((g >> 6) as usize, 1u64 << (g & 63));
            if self.seen[word] & mask == 0 {
                self.seen[word] |= mask;
                self.distinct.push(g);
            }
        }
        for g in self.distinct.drain(..) {
            self.seen[(g >> 6) as usize] = 0;
            self.raw.push((g, blk, bit));
        }
        let changes = match self.rebase {
            Some((listed, now)) if listed == ticket.changes => now,
            _ => ticket.changes,
        };
        self.tickets.push(IndexTicket { rowid: ticket.rowid, changes });
        if self.raw.len() >= RAW_POSTINGS {
            self.compact();
        }
    }

    /// Sorts the raw postings and merges them into `merged`.
    fn compact(&mut self) {
        let mut raw = std::mem::take(&mut self.raw);
        raw.sort_unstable();
        let old = std::mem::take(&mut self.merged);
        let mut out: Vec<(u32, i64, i64)> = Vec::with_capacity(old.len() + raw.len() / 4);
        let (mut a, mut b) = (old.into_iter().peekable(), raw.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if (x.0, x.1) <= (y.0, y.1) => a.next(),
                (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, None) => break,
            };
            let Some((g, blk, bits)) = next else { break };
            match out.last_mut() {
                Some(last) if last.0 == g && last.1 == blk => last.2 |= bits,
                _ => out.push((g, blk, bits)),
            }
        }
        self.merged = out;
    }

    /// Whether the batch holds enough to be written now.
    pub fn is_full(&self) -> bool {
        self.merged.len() >= BATCH_POSTINGS
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.tickets.is_empty()
    }
}

/// The trigram of three bytes, ASCII-lowercased.
fn gram(w: &[u8]) -> u32 {
    u32::from(w[0].to_ascii_lowercase()) << 16
        | u32::from(w[1].to_ascii_lowercase()) << 8
        | u32::from(w[2].to_ascii_lowercase())
}

/// The distinct trigrams of `text`, ASCII-lowercased, sorted.
pub(crate) fn trigrams(text: &[u8]) -> Vec<u32> {
    let mut out: Vec<u32> = text.windows(3).map(gram).collect();
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
        // A file's content or path changed: it is no longer indexed. The unmark skips a
        // bit already clear, as it is for every change of a file after the first until
        // `grep` reads it again: it wrote the same row back each time (3k of 789k
        // instructions per such rewrite, natively with cached statements).
        let changed = format!(
            "UPDATE {g} SET bits = bits & ~(1 << (old.rowid % {BLOCK_BITS}))
             WHERE gram = {INDEXED} AND blk = old.rowid / {BLOCK_BITS}
               AND (bits & (1 << (old.rowid % {BLOCK_BITS}))) != 0; END"
        );
        // Triggers of before (without that skip, or still bumping the `CHANGES` row) lack
        // the body's last words and are replaced.
        let (change, drop) = (format!("cf_wsgram_change_{ns}"), format!("cf_wsgram_drop_{ns}"));
        let outdated =
            crate::store::triggers_without(&*self.sql, &[&change, &drop], ") != 0; END")?
                .into_iter()
                .map(|name| format!("DROP TRIGGER IF EXISTS {name}"));
        for statement in [
            format!("DELETE FROM {g} WHERE gram = {CHANGES}"),
            format!("DROP TRIGGER IF EXISTS cf_wsgram_upd_{ns}"),
            format!("DROP TRIGGER IF EXISTS cf_wsgram_del_{ns}"),
        ]
        .into_iter()
        .chain(outdated)
        .chain([
            format!(
                "CREATE TRIGGER IF NOT EXISTS {change}
                 AFTER UPDATE OF content, path ON {t} BEGIN {changed}"
            ),
            format!("CREATE TRIGGER IF NOT EXISTS {drop} AFTER DELETE ON {t} BEGIN {changed}"),
        ]) {
            self.sql.exec(&statement, &[])?;
        }
        Ok(())
    }

    /// Writes a batch's postings (per 32-file block, each trigram once with the bits of
    /// every file of the block that has it, in `json_each` statements of at most
    /// `FLUSH_JSON_BYTES`), then marks indexed those of its files listed at the current
    /// `total_changes()`, and empties it.
    pub fn index_grams(&self, batch: &mut GramBatch) -> Result<(), FsError> {
        if !self.grep_index || batch.is_empty() {
            return Ok(());
        }
        // Taken before the postings are written: their writes count too.
        let listed = self.total_changes()?;
        batch.compact();
        let merged = std::mem::take(&mut batch.merged);
        let upsert = format!(
            "INSERT INTO {} (gram, blk, bits)
             SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?) WHERE true
             ON CONFLICT(gram, blk) DO UPDATE SET bits = bits | excluded.bits",
            self.g
        );
        self.exec_json_batches(
            &upsert,
            merged.iter().map(|(g, blk, bits)| format!("[{g},{blk},{bits}]")),
        )?;
        // Marked only if no row changed since the listing: then every text read is the
        // file's current content. Nothing runs between this call's statements.
        let mut marks: std::collections::BTreeMap<i64, i64> = Default::default();
        for k in std::mem::take(&mut batch.tickets).into_iter().filter(|k| k.changes == listed) {
            *marks.entry(k.rowid / BLOCK_BITS).or_insert(0) |= 1 << (k.rowid % BLOCK_BITS);
        }
        if marks.is_empty() {
            return Ok(());
        }
        let mark = format!(
            "INSERT INTO {} (gram, blk, bits)
             SELECT {INDEXED}, value ->> 0, value ->> 1 FROM json_each(?) WHERE true
             ON CONFLICT(gram, blk) DO UPDATE SET bits = bits | excluded.bits",
            self.g
        );
        self.exec_json_batches(&mark, marks.iter().map(|(blk, bits)| format!("[{blk},{bits}]")))?;
        let original = match batch.rebase {
            Some((original, now)) if now == listed => original,
            _ => listed,
        };
        batch.rebase = Some((original, self.total_changes()?));
        Ok(())
    }

    /// SQLite's count of rows written on this connection since it opened.
    fn total_changes(&self) -> Result<i64, FsError> {
        let rows = self.exec("SELECT total_changes()", &[])?;
        Ok(rows.first().map(|r| col_i64(r, 0)).unwrap_or(-1))
    }

    /// Indexes files the index does not cover, in rowid order, up to about `max_bytes` of
    /// text (at least one file), off the request path (the agent's alarm calls it). It
    /// takes the same tickets, [`GramBatch`] and [`Workspace::index_grams`] as `grep`, so a
    /// file changed meanwhile is not marked. Says how many files it read and whether more
    /// remain; with nothing to index it runs one query and writes nothing.
    pub fn index_unindexed(&self, max_bytes: u64) -> Result<IndexRun, FsError> {
        if !self.grep_index {
            return Ok(IndexRun::default());
        }
        let (t, g) = (&self.t, &self.g);
        // Only columns stored before `content`, so the listing reads no text.
        let rows = self.exec(
            &format!(
                "SELECT f.rowid, f.size, total_changes()
                 FROM {t} f LEFT JOIN {g} i ON i.gram = {INDEXED} AND i.blk = f.rowid / {BLOCK_BITS}
                 WHERE f.type = 'file' AND f.storage = 'inline' AND f.size <= {MAX_INDEXED_BYTES}
                   AND (i.bits IS NULL OR (i.bits >> (f.rowid % {BLOCK_BITS})) & 1 = 0)
                 ORDER BY f.rowid"
            ),
            &[],
        )?;
        let mut taken: Vec<(IndexTicket, u64)> = Vec::new();
        let mut bytes = 0u64;
        for r in &rows {
            if !taken.is_empty() && bytes >= max_bytes {
                break;
            }
            let size = col_i64(r, 1).max(0) as u64;
            bytes += size;
            taken.push((IndexTicket { rowid: col_i64(r, 0), changes: col_i64(r, 2) }, size));
        }
        let more = taken.len() < rows.len();
        let mut batch = GramBatch::default();
        let mut start = 0;
        while start < taken.len() {
            let mut end = start;
            let mut chunk_bytes = 0;
            while end < taken.len() && end - start < READ_FILES && chunk_bytes < READ_BYTES {
                chunk_bytes += taken[end].1;
                end += 1;
            }
            let chunk = &taken[start..end];
            let texts = self.exec(
                &format!(
                    "SELECT rowid, content FROM {t} WHERE rowid IN ({})",
                    placeholders(chunk.len())
                ),
                &chunk.iter().map(|(k, _)| SqlValue::Integer(k.rowid)).collect::<Vec<_>>(),
            )?;
            let mut by_rowid: HashMap<i64, String> = texts
                .into_iter()
                .map(|mut r| {
                    let text = match r.pop() {
                        Some(SqlValue::Text(s)) => s,
                        Some(SqlValue::Blob(b)) => Content::Bytes(b).into_text(),
                        _ => String::new(),
                    };
                    (col_i64(&r, 0), text)
                })
                .collect();
            // A row gone since the listing is left out; its ticket would not be marked anyway.
            for (ticket, _) in chunk {
                if let Some(text) = by_rowid.remove(&ticket.rowid) {
                    batch.add(ticket, &text);
                }
            }
            if batch.is_full() {
                self.index_grams(&mut batch)?;
            }
            start = end;
        }
        self.index_grams(&mut batch)?;
        Ok(IndexRun { files: taken.len(), more })
    }

    /// Runs `sql`, whose one parameter is a JSON array, over `items` in arrays of at most
    /// [`FLUSH_JSON_BYTES`].
    fn exec_json_batches(
        &self,
        sql: &str,
        items: impl Iterator<Item = String>,
    ) -> Result<(), FsError> {
        let mut json = String::with_capacity(FLUSH_JSON_BYTES + 1024);
        let send = |json: &mut String| -> Result<(), FsError> {
            json.push(']');
            self.exec(sql, &[SqlValue::Text(std::mem::take(json))])?;
            Ok(())
        };
        for item in items {
            json.push(if json.is_empty() { '[' } else { ',' });
            json.push_str(&item);
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
    /// index lets it contain a match of `q` (a file the index does not cover always may,
    /// and carries the ticket that lets `grep` index it). `None` when the index is off or
    /// `q` gives it nothing to narrow by: then `grep` reads pages of texts as before.
    /// Holds paths, never contents.
    pub fn grep_files(
        &self,
        pattern: &str,
        q: &GramQuery,
    ) -> Result<Option<Vec<GrepFile>>, FsError> {
        if !self.grep_index || !q.is_useful() {
            return Ok(None);
        }
        let glob = Glob::new(pattern)?;
        let Some(matches) = self.query_bitmap(q)? else { return Ok(None) };
        let sql = format!("SELECT blk, bits FROM {} WHERE gram = {INDEXED}", self.g);
        let indexed: Bitmap =
            self.exec(&sql, &[])?.iter().map(|r| (col_i64(r, 0), col_i64(r, 1))).collect();
        let bit = |map: &Bitmap, id: i64| {
            map.get(&(id / BLOCK_BITS)).is_some_and(|b| b & (1 << (id % BLOCK_BITS)) != 0)
        };
        // Each row carries the count, so the listing costs no statement of its own.
        let columns = "path, size, rowid, storage = 'inline', total_changes()";
        let rows = self.glob_rows(&glob, columns, "AND type = 'file'")?;
        Ok(Some(
            rows.into_iter()
                .map(|mut row| {
                    let (rowid, size) = (col_i64(&row, 2), col_i64(&row, 1).max(0) as u64);
                    let covered = bit(&indexed, rowid);
                    let indexable = col_i64(&row, 3) != 0 && size <= MAX_INDEXED_BYTES as u64;
                    GrepFile {
                        path: take_str(&mut row, 0),
                        size,
                        candidate: !covered || bit(&matches, rowid),
                        unindexed: (!covered && indexable)
                            .then_some(IndexTicket { rowid, changes: col_i64(&row, 4) }),
                    }
                })
                .collect(),
        ))
    }
}
