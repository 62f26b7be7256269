//! The resumable stream buffer: every chunk of a turn's stream, kept in SQLite so a tab that
//! reconnects mid-stream can be replayed what it missed, and so a turn interrupted by a crash
//! can be reconstructed. Chunks are packed several to a row; a row never passes 512 KB of
//! chunk text, far under the 2 MB row limit, and a single larger chunk is split across rows.

use crate::protocol::frames::ChatOutcome;
use crate::store::{Sql, SqlValue, StoreError};

/// Most chunks per packed row.
pub const CHUNKS_PER_ROW: usize = 10;
/// Most bytes of chunk text per row.
pub const ROW_BYTES: usize = 512_000;
/// Completed streams are kept this long for late resumes.
pub const COMPLETED_RETENTION_MS: f64 = 10.0 * 60_000.0;
/// Streams still marked streaming after this long are abandoned.
pub const ABANDONED_RETENTION_MS: f64 = 60.0 * 60_000.0;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_streams (
        id TEXT PRIMARY KEY,
        message_id TEXT NOT NULL,
        status TEXT NOT NULL,
        continuation INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        message_ids TEXT,
        extends INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS think_stream_chunks (
        stream_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (stream_id, seq))",
];

/// Where a stream stands; a finished stream's status is also how its request ended (the
/// `outcome` a late replay's `done` frame carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStatus {
    /// Chunks are still being written (or the process died while they were).
    Streaming,
    /// The stream ended normally or waiting for a human.
    Completed,
    /// The turn failed; a resume gets the terminal error.
    Error,
    /// The turn was cancelled, or a crash cut it and it was not continued.
    Aborted,
    /// The stream stopped and a recovery continues its turn under another request.
    Recovering,
}

impl StreamStatus {
    fn as_str(self) -> &'static str {
        match self {
            StreamStatus::Streaming => "streaming",
            StreamStatus::Completed => "completed",
            StreamStatus::Error => "error",
            StreamStatus::Aborted => "aborted",
            StreamStatus::Recovering => "recovering",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "completed" => StreamStatus::Completed,
            "error" => StreamStatus::Error,
            "aborted" => StreamStatus::Aborted,
            "recovering" => StreamStatus::Recovering,
            _ => StreamStatus::Streaming,
        }
    }

    /// The outcome of a request whose stream ended so (a stream still marked streaming was
    /// cut by a crash).
    pub fn outcome(self) -> ChatOutcome {
        match self {
            StreamStatus::Completed => ChatOutcome::Completed,
            StreamStatus::Error => ChatOutcome::Error,
            StreamStatus::Streaming | StreamStatus::Aborted => ChatOutcome::Aborted,
            StreamStatus::Recovering => ChatOutcome::Recovering,
        }
    }
}

/// One stored stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRecord {
    /// The stream's request id.
    pub id: String,
    /// The id of the assistant message it builds.
    pub message_id: String,
    /// Where it stands.
    pub status: StreamStatus,
    /// It continues the previous assistant message.
    pub continuation: bool,
    /// When its status last changed, for retention.
    pub updated_at: f64,
    /// The user messages its request carried (its terminal frames name them).
    pub message_ids: Vec<String>,
    /// Its chunks extend the stored message `message_id` (a recovery's continuation) rather
    /// than build a new one.
    pub extends: bool,
}

/// Where a stream's buffer stands: how much the caller holds unwritten, and the next row.
#[derive(Debug, Default)]
pub struct FlushCursor {
    /// Bytes of the chunks not yet written.
    unflushed_bytes: usize,
    next_seq: i64,
}

impl FlushCursor {
    /// Notes one more pending chunk of `len` bytes (`pending` of them in all); true when
    /// enough is unwritten to flush now.
    pub fn note(&mut self, pending: usize, len: usize) -> bool {
        self.unflushed_bytes += len;
        pending >= CHUNKS_PER_ROW || self.unflushed_bytes >= ROW_BYTES
    }
}

/// The buffer over one SQL database.
pub struct StreamBuffer<'a> {
    sql: &'a dyn Sql,
}

impl<'a> StreamBuffer<'a> {
    /// Creates the tables if they do not exist, and adds `message_ids` and `extends` to a
    /// table made before them; once per instance, not per use.
    pub fn create_tables(sql: &dyn Sql) -> Result<(), StoreError> {
        crate::store::create_tables(sql, SCHEMA)?;
        for (column, ddl) in
            [("message_ids", "message_ids TEXT"), ("extends", "extends INTEGER NOT NULL DEFAULT 0")]
        {
            if sql.exec(&format!("SELECT {column} FROM think_streams LIMIT 0"), &[]).is_err() {
                sql.exec(&format!("ALTER TABLE think_streams ADD COLUMN {ddl}"), &[])?;
            }
        }
        Ok(())
    }

    /// The buffer over tables made by [`StreamBuffer::create_tables`].
    pub fn new(sql: &'a dyn Sql) -> Self {
        Self { sql }
    }

    /// Opens the buffer of stream `id`, dropping any chunks an earlier stream of that id left.
    /// `message_ids` are the user messages its request carried; with `extends` its chunks add
    /// to the stored message `message_id`.
    pub fn start(
        &self,
        id: &str,
        message_id: &str,
        continuation: bool,
        extends: bool,
        message_ids: &[String],
        now: f64,
    ) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_stream_chunks WHERE stream_id = ?", &[id.into()])?;
        let ids = match message_ids {
            [] => SqlValue::Null,
            ids => serde_json::to_string(ids)?.into(),
        };
        self.sql.exec(
            "INSERT OR REPLACE INTO think_streams (id, message_id, status, continuation, created_at, updated_at, message_ids, extends)
             VALUES (?, ?, 'streaming', ?, ?, ?, ?, ?)",
            &[id.into(), message_id.into(), SqlValue::Integer(continuation as i64), SqlValue::Integer(now as i64), SqlValue::Integer(now as i64), ids, SqlValue::Integer(extends as i64)],
        )?;
        Ok(())
    }

    /// Writes the pending chunks as packed rows (splitting a chunk larger than a row) and
    /// empties `pending`: once written, a chunk lives in SQLite only, so a large one is not
    /// held in memory for the rest of the turn.
    pub fn flush(
        &self,
        id: &str,
        pending: &mut Vec<String>,
        cursor: &mut FlushCursor,
    ) -> Result<(), StoreError> {
        let chunks = std::mem::take(pending);
        cursor.unflushed_bytes = 0;
        let mut pack: Vec<&str> = Vec::new();
        let mut pack_bytes = 0;
        let seq = &mut cursor.next_seq;
        for body in &chunks {
            if body.len() > ROW_BYTES {
                self.write_pack(id, seq, &mut pack)?;
                pack_bytes = 0;
                let pieces = split_utf8(body, ROW_BYTES);
                let last = pieces.len() - 1;
                for (i, piece) in pieces.into_iter().enumerate() {
                    let kind = if i == last { "frag-end" } else { "frag" };
                    self.insert_row(id, seq, kind, piece)?;
                }
                continue;
            }
            if pack_bytes + body.len() > ROW_BYTES {
                self.write_pack(id, seq, &mut pack)?;
                pack_bytes = 0;
            }
            pack_bytes += body.len();
            pack.push(body);
        }
        self.write_pack(id, seq, &mut pack)
    }

    fn write_pack(&self, id: &str, seq: &mut i64, pack: &mut Vec<&str>) -> Result<(), StoreError> {
        if pack.is_empty() {
            return Ok(());
        }
        let body = serde_json::to_string(&pack)?;
        pack.clear();
        self.insert_row(id, seq, "pack", &body)
    }

    /// Writes one row. The body is bound as bytes and stored as text (`CAST(? AS TEXT)`, the
    /// same UTF-8): the SQLite bridge binds a large blob straight from wasm memory, where a
    /// large text would become a JavaScript string per row (a chunk carrying a whole file
    /// crosses as garbage of its size in the JS heap).
    fn insert_row(
        &self,
        id: &str,
        seq: &mut i64,
        kind: &str,
        body: &str,
    ) -> Result<(), StoreError> {
        self.sql.exec(
            "INSERT OR REPLACE INTO think_stream_chunks (stream_id, seq, kind, body) VALUES (?, ?, ?, CAST(? AS TEXT))",
            &[id.into(), SqlValue::Integer(*seq), kind.into(), SqlValue::Blob(body.as_bytes().to_vec())],
        )?;
        *seq += 1;
        Ok(())
    }

    /// Every stored chunk of a stream, in order.
    pub fn chunks(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.sql.exec(
            "SELECT kind, body FROM think_stream_chunks WHERE stream_id = ? ORDER BY seq",
            &[id.into()],
        )?;
        let mut out = Vec::new();
        let mut frag = String::new();
        for row in rows {
            let mut it = row.into_iter();
            let kind = it.next().and_then(SqlValue::into_string).unwrap_or_default();
            let body = it.next().and_then(SqlValue::into_string).unwrap_or_default();
            match kind.as_str() {
                "frag" => frag.push_str(&body),
                "frag-end" => {
                    frag.push_str(&body);
                    out.push(std::mem::take(&mut frag));
                }
                _ => {
                    if let Ok(pack) = serde_json::from_str::<Vec<String>>(&body) {
                        out.extend(pack);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Marks a stream finished (its chunks stay for late resumes).
    pub fn finish(&self, id: &str, status: StreamStatus, now: f64) -> Result<(), StoreError> {
        self.sql.exec(
            "UPDATE think_streams SET status = ?, updated_at = ? WHERE id = ?",
            &[status.as_str().into(), SqlValue::Integer(now as i64), id.into()],
        )?;
        Ok(())
    }

    /// The record of stream `id`, if kept.
    pub fn get(&self, id: &str) -> Result<Option<StreamRecord>, StoreError> {
        Ok(self.query("WHERE id = ?", &[id.into()])?.into_iter().next())
    }

    /// Streams left `streaming` by a process that died.
    pub fn interrupted(&self) -> Result<Vec<StreamRecord>, StoreError> {
        self.query("WHERE status = 'streaming' ORDER BY created_at", &[])
    }

    fn query(&self, clause: &str, params: &[SqlValue]) -> Result<Vec<StreamRecord>, StoreError> {
        let rows = self.sql.exec(
            &format!("SELECT id, message_id, status, continuation, updated_at, message_ids, extends FROM think_streams {clause}"),
            params,
        )?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let mut it = r.into_iter();
                StreamRecord {
                    id: it.next().and_then(SqlValue::into_string).unwrap_or_default(),
                    message_id: it.next().and_then(SqlValue::into_string).unwrap_or_default(),
                    status: StreamStatus::parse(
                        it.next().as_ref().and_then(SqlValue::as_str).unwrap_or(""),
                    ),
                    continuation: it.next().and_then(|v| v.as_i64()).unwrap_or(0) != 0,
                    updated_at: it.next().and_then(|v| v.as_i64()).unwrap_or(0) as f64,
                    message_ids: it
                        .next()
                        .and_then(SqlValue::into_string)
                        .and_then(|v| serde_json::from_str(&v).ok())
                        .unwrap_or_default(),
                    extends: it.next().and_then(|v| v.as_i64()).unwrap_or(0) != 0,
                }
            })
            .collect())
    }

    /// Deletes finished streams past their retention and abandoned ones; returns how many.
    pub fn cleanup(&self, now: f64) -> Result<usize, StoreError> {
        let done_before = SqlValue::Integer((now - COMPLETED_RETENTION_MS) as i64);
        let abandoned_before = SqlValue::Integer((now - ABANDONED_RETENTION_MS) as i64);
        let stale = self.sql.exec(
            "SELECT id FROM think_streams WHERE (status != 'streaming' AND updated_at < ?) OR updated_at < ?",
            &[done_before, abandoned_before],
        )?;
        let ids: Vec<String> =
            stale.into_iter().filter_map(|mut r| r.pop()?.into_string()).collect();
        for id in &ids {
            self.delete(id)?;
        }
        Ok(ids.len())
    }

    /// Deletes one stream and its chunks.
    pub fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_stream_chunks WHERE stream_id = ?", &[id.into()])?;
        self.sql.exec("DELETE FROM think_streams WHERE id = ?", &[id.into()])?;
        Ok(())
    }

    /// Deletes every stream (a chat clear).
    pub fn clear(&self) -> Result<(), StoreError> {
        self.sql.exec("DELETE FROM think_stream_chunks", &[])?;
        self.sql.exec("DELETE FROM think_streams", &[])?;
        Ok(())
    }

    /// Drops the finished streams of messages no longer in the transcript (after a rewind
    /// removed them), so no late resume replays an answer the conversation no longer has.
    pub fn forget_removed_messages(&self) -> Result<(), StoreError> {
        let gone = "SELECT id FROM think_streams WHERE status != 'streaming'
                    AND message_id NOT IN (SELECT id FROM think_messages)";
        self.sql
            .exec(&format!("DELETE FROM think_stream_chunks WHERE stream_id IN ({gone})"), &[])?;
        self.sql.exec(&format!("DELETE FROM think_streams WHERE id IN ({gone})"), &[])?;
        Ok(())
    }

    /// Whether any stream is kept at all (to decide if a cleanup alarm is needed).
    pub fn any(&self) -> Result<bool, StoreError> {
        Ok(!self.sql.exec("SELECT 1 FROM think_streams LIMIT 1", &[])?.is_empty())
    }
}

/// Splits `s` into pieces of at most `max` bytes on character boundaries.
fn split_utf8(s: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out.push(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteSql;

    #[test]
    fn chunks_round_trip_in_packs_and_fragments() {
        let sql = SqliteSql::new();
        StreamBuffer::create_tables(&sql).unwrap();
        let buf = StreamBuffer::new(&sql);
        buf.start("r1", "m1", true, false, &["u1".to_owned()], 1000.0).unwrap();
        let mut cursor = FlushCursor::default();
        let mut all = Vec::new();
        let mut pending = Vec::new();
        for i in 0..25 {
            let body = format!("{{\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"{i}\"}}");
            let len = body.len();
            all.push(body.clone());
            pending.push(body);
            if cursor.note(pending.len(), len) {
                buf.flush("r1", &mut pending, &mut cursor).unwrap();
                assert!(pending.is_empty(), "written chunks are not kept");
            }
        }
        let big = format!(
            "{{\"type\":\"tool-output-available\",\"output\":\"{}\"}}",
            "é".repeat(700_000)
        );
        all.push(big.clone());
        all.push("{\"type\":\"finish\"}".into());
        pending.extend([big, "{\"type\":\"finish\"}".into()]);
        buf.flush("r1", &mut pending, &mut cursor).unwrap();
        assert_eq!(buf.chunks("r1").unwrap(), all);
        let max_row = sql
            .exec("SELECT max(length(CAST(body AS BLOB))) FROM think_stream_chunks", &[])
            .unwrap()[0][0]
            .as_i64()
            .unwrap();
        assert!(max_row as usize <= ROW_BYTES + 64, "{max_row}");
        let not_text = sql
            .exec("SELECT count(*) FROM think_stream_chunks WHERE typeof(body) != 'text'", &[])
            .unwrap()[0][0]
            .as_i64();
        assert_eq!(not_text, Some(0), "rows are stored as text");
        let rec = buf.get("r1").unwrap().unwrap();
        assert_eq!(rec.status, StreamStatus::Streaming);
        assert_eq!(rec.message_ids, ["u1"]);
        assert!(rec.continuation);
        assert_eq!(buf.interrupted().unwrap().len(), 1);
        buf.finish("r1", StreamStatus::Completed, 2000.0).unwrap();
        assert!(buf.interrupted().unwrap().is_empty());
    }

    #[test]
    fn cleanup_honours_retention() {
        let sql = SqliteSql::new();
        StreamBuffer::create_tables(&sql).unwrap();
        let buf = StreamBuffer::new(&sql);
        buf.start("done", "m", false, false, &[], 0.0).unwrap();
        buf.finish("done", StreamStatus::Completed, 0.0).unwrap();
        buf.start("live", "m", false, false, &[], 0.0).unwrap();
        buf.start("fresh", "m", false, false, &[], COMPLETED_RETENTION_MS).unwrap();
        assert_eq!(buf.cleanup(COMPLETED_RETENTION_MS + 1.0).unwrap(), 1);
        assert!(buf.get("done").unwrap().is_none());
        assert!(buf.get("live").unwrap().is_some(), "a streaming stream is kept until abandoned");
        assert_eq!(buf.cleanup(ABANDONED_RETENTION_MS + 1.0).unwrap(), 1);
        assert!(buf.get("live").unwrap().is_none());
        assert!(buf.get("fresh").unwrap().is_some());
    }

    #[test]
    fn every_ended_status_reads_back_as_its_outcome() {
        let sql = SqliteSql::new();
        StreamBuffer::create_tables(&sql).unwrap();
        let buf = StreamBuffer::new(&sql);
        for (status, outcome) in [
            (StreamStatus::Completed, ChatOutcome::Completed),
            (StreamStatus::Error, ChatOutcome::Error),
            (StreamStatus::Aborted, ChatOutcome::Aborted),
            (StreamStatus::Recovering, ChatOutcome::Recovering),
        ] {
            buf.start("s", "m", false, false, &[], 0.0).unwrap();
            buf.finish("s", status, 1.0).unwrap();
            let rec = buf.get("s").unwrap().unwrap();
            assert_eq!((rec.status, rec.status.outcome()), (status, outcome));
            assert!(buf.interrupted().unwrap().is_empty(), "{status:?} is not interrupted");
            assert!(rec.message_ids.is_empty());
        }
    }

    #[test]
    fn a_table_from_before_message_ids_gets_the_column() {
        let sql = SqliteSql::new();
        sql.exec(
            "CREATE TABLE think_streams (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, status TEXT NOT NULL,
             continuation INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)",
            &[],
        )
        .unwrap();
        sql.exec("INSERT INTO think_streams VALUES ('old', 'm', 'completed', 0, 0, 0)", &[])
            .unwrap();
        StreamBuffer::create_tables(&sql).unwrap();
        StreamBuffer::create_tables(&sql).unwrap();
        let buf = StreamBuffer::new(&sql);
        assert!(buf.get("old").unwrap().unwrap().message_ids.is_empty());
        assert!(!buf.get("old").unwrap().unwrap().extends);
        buf.start("new", "m", true, true, &["a".into(), "b".into()], 0.0).unwrap();
        let new = buf.get("new").unwrap().unwrap();
        assert_eq!(
            (new.message_ids.as_slice(), new.extends),
            (&["a".to_owned(), "b".to_owned()][..], true)
        );
    }
}
