//! The checkpoint tables and the triggers that fill the undo journal, so the hot write path
//! of the workspace and the transcript issues no extra statement.
//!
//! - `think_ckpt`: one row per checkpoint (its epoch, label, turn, time and the transcript's
//!   seq high-water mark). The newest row is the open epoch.
//! - `cf_wsckjour_<ns>`: the first time a path changes in an epoch, its prior state (or that
//!   it did not exist), keyed by (epoch, path).
//! - `cf_wsckblob_<ns>`: prior content, keyed by the workspace's content hash (unless a blob
//!   stored otherwise already has that key: the hash is not collision resistant): the
//!   inline bytes, or a reference to the R2 object / chunk set the live row used.
//! - `think_ckpt_msgs`: the prior body of a transcript message updated or deleted in an epoch
//!   (only messages the epoch's checkpoint saw: later ones are removed by a rewind anyway), or
//!   that a seq it saw as absent was filled (by a rewind).
//!
//! The triggers are active only while a checkpoint exists. A chunk set a journal blob (or a
//! live row) still names is never deleted: its DELETE is ignored, and the GC sweeps it later.

use crate::store::{Sql, StoreError};

/// The checkpoint list and the transcript journal (agent-wide), with the transcript's table
/// as `{messages}`.
const SHARED: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_ckpt (
        epoch INTEGER PRIMARY KEY AUTOINCREMENT,
        label TEXT,
        turn_id TEXT,
        at INTEGER NOT NULL,
        mark INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS think_ckpt_msgs (
        epoch INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        existed INTEGER NOT NULL DEFAULT 1,
        id TEXT,
        role TEXT,
        body TEXT,
        created_at INTEGER,
        PRIMARY KEY (epoch, seq)) WITHOUT ROWID",
    // A message inserted at a seq the checkpoint saw (only a rewind puts one back there):
    // remembered as absent, so rewinding to the checkpoint removes it again.
    "CREATE TRIGGER IF NOT EXISTS think_ckpt_msg_ins AFTER INSERT ON {messages}
     WHEN NEW.seq <= COALESCE((SELECT mark FROM think_ckpt ORDER BY epoch DESC LIMIT 1), -1)
     BEGIN
       INSERT INTO think_ckpt_msgs (epoch, seq, existed)
       SELECT e.epoch, NEW.seq, 0 FROM (SELECT MAX(epoch) AS epoch FROM think_ckpt) e
       WHERE NOT EXISTS (SELECT 1 FROM think_ckpt_msgs WHERE epoch = e.epoch AND seq = NEW.seq);
     END",
    "CREATE TABLE IF NOT EXISTS think_ckpt_import (
        path TEXT NOT NULL,
        offset INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (path, offset)) WITHOUT ROWID",
    "CREATE TRIGGER IF NOT EXISTS think_ckpt_msg_upd BEFORE UPDATE ON {messages}
     WHEN OLD.seq <= COALESCE((SELECT mark FROM think_ckpt ORDER BY epoch DESC LIMIT 1), -1)
     BEGIN
       INSERT INTO think_ckpt_msgs (epoch, seq, id, role, body, created_at)
       SELECT e.epoch, OLD.seq, OLD.id, OLD.role, OLD.body, OLD.created_at
       FROM (SELECT MAX(epoch) AS epoch FROM think_ckpt) e
       WHERE NOT EXISTS (SELECT 1 FROM think_ckpt_msgs WHERE epoch = e.epoch AND seq = OLD.seq);
     END",
    "CREATE TRIGGER IF NOT EXISTS think_ckpt_msg_del BEFORE DELETE ON {messages}
     WHEN OLD.seq <= COALESCE((SELECT mark FROM think_ckpt ORDER BY epoch DESC LIMIT 1), -1)
     BEGIN
       INSERT INTO think_ckpt_msgs (epoch, seq, id, role, body, created_at)
       SELECT e.epoch, OLD.seq, OLD.id, OLD.role, OLD.body, OLD.created_at
       FROM (SELECT MAX(epoch) AS epoch FROM think_ckpt) e
       WHERE NOT EXISTS (SELECT 1 FROM think_ckpt_msgs WHERE epoch = e.epoch AND seq = OLD.seq);
     END",
];

/// [`SHARED`] on the transcript's table (`crate::chat`).
pub(crate) fn shared() -> impl Iterator<Item = String> {
    let table = crate::chat::MESSAGES_TABLE;
    SHARED.iter().map(move |statement| statement.replace("{messages}", table))
}

/// The condition by which the journal triggers find a blob stored under the row's hash; a
/// trigger without it is of the layout that shared a blob by hash alone.
const BLOB_KEY_CHECK: &str = "x.key = OLD.hash";

/// The table names of one journaled workspace.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    /// The workspace's files table.
    pub t: String,
    /// Its chunk table.
    pub c: String,
    /// The file journal.
    pub j: String,
    /// The content-addressed blobs.
    pub b: String,
    /// R2 keys a prune dropped from SQL but has not yet deleted from the bucket.
    pub g: String,
    /// The one-row running total of the blobs' bytes (kept by triggers).
    pub n: String,
    /// The namespace, for trigger names.
    pub ns: String,
}

impl Tables {
    /// The names for a workspace's namespace and tables.
    pub fn new(ns: &str, t: &str, c: &str) -> Self {
        Self {
            t: t.to_owned(),
            c: c.to_owned(),
            j: format!("cf_wsckjour_{ns}"),
            b: crate::workspace::journal::blob_table(ns),
            g: crate::workspace::journal::gone_table(ns),
            n: format!("cf_wsckbytes_{ns}"),
            ns: ns.to_owned(),
        }
    }

    /// Drops the journal triggers of a database whose triggers keyed a saved content by its
    /// hash alone (so two contents with one hash shared a blob), for [`Tables::schema`] to
    /// create them anew.
    pub fn drop_stale_triggers(&self, sql: &dyn Sql) -> Result<(), StoreError> {
        let ns = &self.ns;
        let upd = format!("cf_wsck_upd_{ns}");
        let stale = !crate::store::triggers_without(sql, &[&upd], BLOB_KEY_CHECK)?.is_empty();
        if stale {
            for event in ["upd", "del"] {
                sql.exec(&format!("DROP TRIGGER IF EXISTS cf_wsck_{event}_{ns}"), &[])?;
            }
        }
        Ok(())
    }

    /// The statements that create the journal tables and triggers (all `IF NOT EXISTS`).
    pub fn schema(&self) -> Vec<String> {
        let Tables { t, c, j, b, n, ns, .. } = self;
        let content = "CASE WHEN OLD.storage = 'inline' THEN OLD.content END";
        let r2_key = "CASE WHEN OLD.storage = 'r2' THEN OLD.r2_key END";
        let chunk_id = "CASE WHEN OLD.storage = 'chunked' THEN OLD.chunk_id END";
        // The blob key: the content hash, unless a blob under it holds other content (the
        // hash is XXH3, which a writer can make collide: `workspace/version.rs`), or the hash
        // is unknown (after an append); then a key unique to this row's state in this epoch.
        let key = format!(
            "CASE WHEN OLD.hash IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {b} x
                 WHERE {BLOB_KEY_CHECK} AND NOT (x.storage IS OLD.storage AND x.size IS OLD.size
                   AND x.content IS {content} AND x.r2_key IS {r2_key}
                   AND x.chunk_id IS {chunk_id}))
               THEN OLD.hash ELSE 'u' || e.epoch || ':' || OLD.rowid || ':' || OLD.version END"
        );
        let save_old = format!(
            "INSERT INTO {b} (key, storage, content, r2_key, chunk_id, size)
               SELECT {key}, OLD.storage, {content}, {r2_key}, {chunk_id}, OLD.size
               FROM (SELECT MAX(epoch) AS epoch FROM think_ckpt) e
               WHERE OLD.type = 'file'
                 AND NOT EXISTS (SELECT 1 FROM {j} WHERE epoch = e.epoch AND path = OLD.path)
                 AND NOT EXISTS (SELECT 1 FROM {b} WHERE key = {key});
             INSERT INTO {j} (epoch, path, existed, parent_path, name, type,
                 mime_type, size, target, created_at, modified_at, version, hash, changed_by, blob)
               SELECT e.epoch, OLD.path, 1, OLD.parent_path, OLD.name, OLD.type, OLD.mime_type,
                 OLD.size, OLD.target, OLD.created_at, OLD.modified_at, OLD.version, OLD.hash,
                 OLD.changed_by, CASE WHEN OLD.type = 'file' THEN {key} END
               FROM (SELECT MAX(epoch) AS epoch FROM think_ckpt) e
               WHERE NOT EXISTS (SELECT 1 FROM {j} WHERE epoch = e.epoch AND path = OLD.path);"
        );
        vec![
            format!(
                "CREATE TABLE IF NOT EXISTS {j} (
                  epoch INTEGER NOT NULL,
                  path TEXT NOT NULL,
                  existed INTEGER NOT NULL,
                  parent_path TEXT,
                  name TEXT,
                  type TEXT,
                  mime_type TEXT,
                  size INTEGER,
                  target TEXT,
                  created_at INTEGER,
                  modified_at INTEGER,
                  version INTEGER,
                  hash TEXT,
                  changed_by TEXT,
                  blob TEXT,
                  PRIMARY KEY (epoch, path)) WITHOUT ROWID"
            ),
            format!("CREATE INDEX IF NOT EXISTS cf_wsckjour_path_{ns} ON {j}(path, epoch)"),
            format!("CREATE INDEX IF NOT EXISTS cf_wsckjour_blob_{ns} ON {j}(blob)"),
            format!(
                "CREATE TABLE IF NOT EXISTS {b} (
                  key TEXT PRIMARY KEY,
                  storage TEXT NOT NULL,
                  content,
                  r2_key TEXT,
                  chunk_id INTEGER,
                  size INTEGER NOT NULL)"
            ),
            format!("CREATE INDEX IF NOT EXISTS cf_wsckblob_r2_{ns} ON {b}(r2_key)"),
            // Retention reads the total from one row instead of summing every blob.
            format!(
                "CREATE TABLE IF NOT EXISTS {n} (id INTEGER PRIMARY KEY, bytes INTEGER NOT NULL)"
            ),
            format!(
                "INSERT INTO {n} (id, bytes) SELECT 1, (SELECT COALESCE(SUM(size), 0) FROM {b})
                 WHERE NOT EXISTS (SELECT 1 FROM {n})"
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS cf_wsckbytes_ins_{ns} AFTER INSERT ON {b}
                 BEGIN UPDATE {n} SET bytes = bytes + NEW.size WHERE id = 1; END"
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS cf_wsckbytes_del_{ns} AFTER DELETE ON {b}
                 BEGIN UPDATE {n} SET bytes = bytes - OLD.size WHERE id = 1; END"
            ),
            crate::workspace::journal::gone_table_ddl(ns),
            format!("CREATE INDEX IF NOT EXISTS cf_wsckblob_chunk_{ns} ON {b}(chunk_id)"),
            format!(
                "CREATE TRIGGER IF NOT EXISTS cf_wsck_ins_{ns} AFTER INSERT ON {t}
                 WHEN EXISTS (SELECT 1 FROM think_ckpt)
                 BEGIN
                   INSERT INTO {j} (epoch, path, existed)
                   SELECT e.epoch, NEW.path, 0 FROM (SELECT MAX(epoch) AS epoch FROM think_ckpt) e
                   WHERE NOT EXISTS (SELECT 1 FROM {j} WHERE epoch = e.epoch AND path = NEW.path);
                 END"
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS cf_wsck_upd_{ns} BEFORE UPDATE ON {t}
                 WHEN EXISTS (SELECT 1 FROM think_ckpt)
                 BEGIN
                   {save_old}
                   INSERT INTO {j} (epoch, path, existed)
                   SELECT e.epoch, NEW.path, 0 FROM (SELECT MAX(epoch) AS epoch FROM think_ckpt) e
                   WHERE NEW.path != OLD.path
                     AND NOT EXISTS (SELECT 1 FROM {j} WHERE epoch = e.epoch AND path = NEW.path);
                 END"
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS cf_wsck_del_{ns} BEFORE DELETE ON {t}
                 WHEN EXISTS (SELECT 1 FROM think_ckpt)
                 BEGIN
                   {save_old}
                 END"
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS cf_wsck_chunk_{ns} BEFORE DELETE ON {c}
                 WHEN EXISTS (SELECT 1 FROM think_ckpt)
                   AND (EXISTS (SELECT 1 FROM {b} WHERE chunk_id = OLD.chunk_id)
                     OR EXISTS (SELECT 1 FROM {t} WHERE chunk_id = OLD.chunk_id
                                AND storage = 'chunked'))
                 BEGIN
                   SELECT RAISE(IGNORE);
                 END"
            ),
        ]
    }
}
