//! Retention: the oldest checkpoints are dropped past a count or past a total of journaled
//! content, and content no remaining checkpoint needs is collected (blob rows, chunk sets,
//! and R2 objects, which are deleted after the SQL commit and only when no live row names
//! them).

use super::schema::Tables;
use super::{col_i64, col_str, CheckpointError, Checkpoints};
use crate::store::StoreError;
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

    async fn drop_oldest(
        &self,
        keep: Retention,
        floor: i64,
    ) -> Result<PruneStats, CheckpointError> {
        let Tables { t, c, j, b, .. } = &self.tables;
        let mut stats = PruneStats::default();
        let mut r2_keys = Vec::new();
        loop {
            let rows = self.sql.exec(
                &format!(
                    "SELECT (SELECT COUNT(*) FROM think_ckpt), (SELECT MIN(epoch) FROM think_ckpt),
                       (SELECT COALESCE(SUM(size), 0) FROM {b})"
                ),
                &[],
            )?;
            let row = rows.first().cloned().unwrap_or_default();
            let (count, oldest, bytes) = (col_i64(&row, 0), col_i64(&row, 1), col_i64(&row, 2));
            let over = count > keep.max_checkpoints as i64 || bytes.max(0) as u64 > keep.max_bytes;
            if count <= floor || !over {
                break;
            }
            self.sql.transaction(&mut || {
                self.sql.exec(&format!("DELETE FROM {j} WHERE epoch = ?"), &[oldest.into()])?;
                self.sql.exec("DELETE FROM think_ckpt_msgs WHERE epoch = ?", &[oldest.into()])?;
                self.sql.exec("DELETE FROM think_ckpt WHERE epoch = ?", &[oldest.into()])?;
                let gone = self.sql.exec(
                    &format!(
                        "DELETE FROM {b} WHERE NOT EXISTS (SELECT 1 FROM {j} WHERE blob = {b}.key)
                         RETURNING r2_key, size"
                    ),
                    &[],
                )?;
                stats.checkpoints_dropped += 1;
                stats.blobs_dropped += gone.len() as u32;
                stats.bytes_freed += gone.iter().map(|r| col_i64(r, 1).max(0) as u64).sum::<u64>();
                r2_keys.extend(gone.iter().filter_map(|r| col_str(r, 0)));
                // Chunk sets neither a live row nor a blob names (the trigger lets these go).
                self.sql.exec(
                    &format!(
                        "DELETE FROM {c} WHERE chunk_id NOT IN
                           (SELECT chunk_id FROM {t} WHERE chunk_id IS NOT NULL)
                         AND chunk_id NOT IN (SELECT chunk_id FROM {b} WHERE chunk_id IS NOT NULL)"
                    ),
                    &[],
                )?;
                Ok::<(), StoreError>(())
            })?;
        }
        let deletable = self.ws.deletable_blob_keys(r2_keys)?;
        if let (Some(blobs), false) = (self.ws.blob_store(), deletable.is_empty()) {
            for batch in deletable.chunks(1000) {
                blobs.delete(batch).await?;
            }
            stats.r2_deleted = deletable.len() as u32;
        }
        Ok(stats)
    }
}
