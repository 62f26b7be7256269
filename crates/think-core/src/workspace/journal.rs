//! The workspace's side of checkpoints (`crate::checkpoint`): what the undo journal needs to
//! reach inside the workspace, and the two rules that keep journaled content alive.
//!
//! Once a workspace is journaled, an R2 object or a chunk set may be shared by a live row and
//! by the journal's blobs (content a checkpoint needs). So, while journaled:
//! - an R2 object is deleted only when neither a live row nor a journal blob names it
//!   ([`Workspace::deletable_blob_keys`]), and
//! - new content never overwrites an object in use: a write picks a fresh key
//!   ([`Workspace::fresh_blob_key`]), and `mv` keeps each object's key instead of copying it
//!   to a key following the new path.
//!
//! Chunks are kept by a SQLite trigger the journal installs, so no statement is added here.

use super::*;

/// The SQL table of journaled content (content-addressed blobs) for namespace `ns`.
pub(crate) fn blob_table(ns: &str) -> String {
    format!("cf_wsckblob_{ns}")
}

/// The SQL table of R2 keys a prune dropped but has not deleted from the bucket yet; a new
/// write never picks one of these keys, so a later sweep cannot delete fresh content.
pub(crate) fn gone_table(ns: &str) -> String {
    format!("cf_wsckgone_{ns}")
}

/// The statement that creates [`gone_table`] for namespace `ns`.
pub(crate) fn gone_table_ddl(ns: &str) -> String {
    format!("CREATE TABLE IF NOT EXISTS {} (key TEXT PRIMARY KEY) WITHOUT ROWID", gone_table(ns))
}

impl Workspace {
    /// Marks this workspace as journaled by checkpoints (and creates its tables): from now
    /// on R2 objects are shared by reference, as described above.
    pub(crate) fn start_journal(&self) -> Result<(), FsError> {
        self.init()?;
        self.journaled.set(true);
        Ok(())
    }

    /// Notices, once per instance, that checkpoints journal this workspace (their blob
    /// table exists), so R2 objects are shared safely even before `Checkpoints` is built.
    pub(crate) fn detect_journal(&self) -> Result<(), FsError> {
        let rows = self.sql.exec(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
            &[text(&blob_table(&self.namespace))],
        )?;
        if !rows.is_empty() {
            self.journaled.set(true);
            // Databases journaled before the pending-delete table existed get it here.
            self.sql.exec(&gone_table_ddl(&self.namespace), &[])?;
        }
        Ok(())
    }

    /// The SQL database this workspace lives in.
    pub(crate) fn sql(&self) -> &Rc<dyn Sql> {
        &self.sql
    }

    /// The blob store large files spill to, if any.
    pub(crate) fn blob_store(&self) -> Option<&Rc<dyn BlobStore>> {
        self.blobs.as_ref()
    }

    /// Milliseconds since the epoch, from the workspace's clock.
    pub(crate) fn now_ms(&self) -> i64 {
        self.now()
    }

    /// Creates the workspace's tables if that has not happened in this instance yet.
    pub(crate) fn ensure_tables(&self) -> Result<(), FsError> {
        self.init()
    }

    /// Of `keys`, those no live row and no journal blob names: the ones safe to delete.
    pub(crate) fn deletable_blob_keys(&self, keys: Vec<String>) -> Result<Vec<String>, FsError> {
        if !self.journaled.get() || keys.is_empty() {
            return Ok(keys);
        }
        let bt = blob_table(&self.namespace);
        let mut in_use = std::collections::HashSet::new();
        for batch in batches(&keys, 2, 0) {
            let marks = placeholders(batch.len());
            let mut params: Vec<SqlValue> = batch.iter().map(|k| text(k)).collect();
            params.extend(batch.iter().map(|k| text(k)));
            let rows = self.exec(
                &format!(
                    "SELECT r2_key FROM {} WHERE r2_key IN ({marks}) AND storage = 'r2'
                     UNION SELECT r2_key FROM {bt} WHERE r2_key IN ({marks})",
                    self.t
                ),
                &params,
            )?;
            in_use.extend(rows.iter().filter_map(|r| col_opt_str(r, 0)));
        }
        Ok(keys.into_iter().filter(|k| !in_use.contains(k)).collect())
    }

    /// The key new R2 content for `path` goes to: the path's own key, unless (journaled)
    /// a live row or a journal blob still names it; then a key of its own next to it.
    pub(crate) fn fresh_blob_key(&self, path: &str) -> Result<String, FsError> {
        let key = self.blob_key(path);
        if !self.journaled.get() {
            return Ok(key);
        }
        let bt = blob_table(&self.namespace);
        let gt = gone_table(&self.namespace);
        let taken = |k: &str| -> Result<bool, FsError> {
            let rows = self.exec(
                &format!(
                    "SELECT 1 FROM {} WHERE r2_key = ? UNION ALL SELECT 1 FROM {bt} WHERE r2_key = ?
                     UNION ALL SELECT 1 FROM {gt} WHERE key = ?",
                    self.t
                ),
                &[text(k), text(k), text(k)],
            )?;
            Ok(!rows.is_empty())
        };
        if !taken(&key)? {
            return Ok(key);
        }
        let mut n = self.now();
        loop {
            let candidate = format!("{key}~{n}");
            if !taken(&candidate)? {
                return Ok(candidate);
            }
            n += 1;
        }
    }

    /// Whether `mv` keeps R2 keys in place (journaled) rather than following the new path.
    pub(crate) fn keeps_blob_keys(&self) -> bool {
        self.journaled.get()
    }
}
