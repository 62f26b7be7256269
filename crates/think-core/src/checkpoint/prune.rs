//! Retention: the oldest checkpoints are dropped past a count or past a total of journaled
//! content, and content no remaining checkpoint needs is collected (blob rows, chunk sets,
//! and R2 objects, which are deleted after the SQL commit and only when no live row names
//! them).

use super::schema::Tables;
use super::{col_i64, col_str, CheckpointError, Checkpoints};
use crate::store::{SqlValue, StoreError};
use serde::{Deserialize, Serialize};

/// How many checkpoints, and how much old content, to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// The most checkpoints kept (the newest ones).
    pub max_checkpoints: usize,
    /// The most bytes of journaled prior content kept (R2 and chunked content included).
    pub max_bytes: u64,
}

impl Default for Retention {
    /// The last 50 checkpoints, or 500 MB of old content, whichever is hit first.
    fn default() -> Self {
        Self { max_checkpoints: 50, max_bytes: 500_000_000 }
    }
}

/// What a prune dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneStats {
    /// Checkpoints dropped, oldest first.
    pub checkpoints_dropped: u32,
    /// Content blobs no remaining checkpoint needed.
    pub blobs_dropped: u32,
    /// Their bytes.
    pub bytes_freed: u64,
    /// R2 objects deleted with them.
    pub r2_deleted: u32,
}

impl Checkpoints {
    /// Drops the oldest checkpoints until `keep` holds (a count of 0 drops them all, which
    /// stops the journal until the next checkpoint), then collects what they alone held.
    pub async fn prune(&self, keep: Retention) -> Result<PruneStats, CheckpointError> {
        self.drop_oldest(keep, 0).await
    }

    /// [`Checkpoints::prune`] that always keeps the newest checkpoint (used on `create`).
    pub(crate) async fn enforce(&self, keep: &Retention) -> Result<PruneStats, CheckpointError> {
        self.drop_oldest(*keep, 1).await
    }

    /// Drops the oldest checkpoints past `keep` (never fewer than `floor` remain), each
    /// batch in one transaction that also records the R2 keys it frees; then sweeps every
    /// recorded key (this prune's, and any an earlier one left when its isolate died).
    /// The cost is that of what is dropped: the byte total is one row kept by triggers, and
    /// only the blobs the dropped journal rows named are examined.
    async fn drop_oldest(
        &self,
        keep: Retention,
        floor: i64,
    ) -> Result<PruneStats, CheckpointError> {
        let Tables { t, c, j, b, g, n, .. } = &self.tables;
        let mut stats = PruneStats::default();
        let mut pending = false;
        loop {
            let rows = self.sql.exec(
                &format!(
                    "SELECT (SELECT COUNT(*) FROM think_ckpt),
                       (SELECT COALESCE(MAX(bytes), 0) FROM {n}), EXISTS (SELECT 1 FROM {g})"
                ),
                &[],
            )?;
            let row = rows.first().cloned().unwrap_or_default();
            let (count, bytes) = (col_i64(&row, 0), col_i64(&row, 1));
            pending |= col_i64(&row, 2) != 0;
            let by_count = count - keep.max_checkpoints as i64;
            let by_bytes = bytes.max(0) as u64 > keep.max_bytes;
            // Over the count: drop the surplus at once; over the bytes: one at a time.
            let drop = by_count.max(i64::from(by_bytes)).min(count - floor);
            if drop <= 0 {
                break;
            }
            let cut = self.sql.exec(
                "SELECT epoch FROM think_ckpt ORDER BY epoch LIMIT 1 OFFSET ?",
                &[(drop - 1).into()],
            )?;
            let cut = SqlValue::Integer(cut.first().map(|r| col_i64(r, 0)).unwrap_or(0));
            // The blobs only the dropped epochs name.
            let doomed = format!(
                "SELECT blob FROM {j} WHERE epoch <= ? AND blob IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM {j} k WHERE k.blob = {j}.blob AND k.epoch > ?)"
            );
            self.sql.transaction(&mut || {
                self.sql.exec(
                    &format!(
                        "INSERT INTO {g} (key) SELECT r2_key FROM {b}
                         WHERE key IN ({doomed}) AND r2_key IS NOT NULL
                         ON CONFLICT(key) DO NOTHING"
                    ),
                    &[cut.clone(), cut.clone()],
                )?;
                let gone = self.sql.exec(
                    &format!("DELETE FROM {b} WHERE key IN ({doomed}) RETURNING size, chunk_id"),
                    &[cut.clone(), cut.clone()],
                )?;
                self.sql.exec(
                    &format!("DELETE FROM {j} WHERE epoch <= ?"),
                    std::slice::from_ref(&cut),
                )?;
                self.sql.exec(
                    "DELETE FROM think_ckpt_msgs WHERE epoch <= ?",
                    std::slice::from_ref(&cut),
                )?;
                self.sql
                    .exec("DELETE FROM think_ckpt WHERE epoch <= ?", std::slice::from_ref(&cut))?;
                stats.checkpoints_dropped += drop as u32;
                stats.blobs_dropped += gone.len() as u32;
                stats.bytes_freed += gone.iter().map(|r| col_i64(r, 0).max(0) as u64).sum::<u64>();
                // Chunk sets neither a live row nor a blob names (the trigger let these stay);
                // skipped outright when the workspace has no chunks at all.
                self.sql.exec(
                    &format!(
                        "DELETE FROM {c} WHERE EXISTS (SELECT 1 FROM {c} LIMIT 1)
                         AND chunk_id NOT IN (SELECT chunk_id FROM {t} WHERE chunk_id IS NOT NULL)
                         AND chunk_id NOT IN (SELECT chunk_id FROM {b} WHERE chunk_id IS NOT NULL)"
                    ),
                    &[],
                )?;
                Ok::<(), StoreError>(())
            })?;
        }
        if pending {
            stats.r2_deleted = self.sweep_gone().await?;
        }
        Ok(stats)
    }

    /// Deletes from R2 the objects a prune recorded as freed (those no live row or blob
    /// names by now), then forgets them; a failure leaves them recorded for the next sweep.
    async fn sweep_gone(&self) -> Result<u32, CheckpointError> {
        let g = &self.tables.g;
        let mut deleted = 0;
        loop {
            let keys: Vec<String> = self
                .sql
                .exec(&format!("SELECT key FROM {g} LIMIT 1000"), &[])?
                .iter()
                .filter_map(|r| col_str(r, 0))
                .collect();
            if keys.is_empty() {
                return Ok(deleted);
            }
            let deletable = self.ws.deletable_blob_keys(keys.clone())?;
            if let (Some(blobs), false) = (self.ws.blob_store(), deletable.is_empty()) {
                blobs.delete(&deletable).await?;
            }
            deleted += deletable.len() as u32;
            for batch in keys.chunks(100) {
                let marks = vec!["?"; batch.len()].join(", ");
                let params: Vec<SqlValue> = batch.iter().map(|k| k.as_str().into()).collect();
                self.sql.exec(&format!("DELETE FROM {g} WHERE key IN ({marks})"), &params)?;
            }
        }
    }
}
