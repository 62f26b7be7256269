//! [`BashFs`] over the agent's [`Workspace`], so the tool reads and writes the real VFS.

use super::{BashFs, DirEntry, EntryKind};
use crate::tools::workspace::media::looks_like_text;
use crate::workspace::{EntryType, FsError, Workspace, Writer};
use async_trait::async_trait;

/// Entries per `read_dir` page, as Think's snapshot walk pages them.
const PAGE: usize = 1000;

#[async_trait(?Send)]
impl BashFs for Workspace {
    async fn read_dir(&self, dir: &str) -> Result<Vec<DirEntry>, FsError> {
        let mut entries = Vec::new();
        loop {
            let page = Workspace::read_dir(self, dir, PAGE, entries.len())?;
            let full = page.len() == PAGE;
            entries.extend(page.into_iter().map(|info| DirEntry {
                kind: match info.kind {
                    EntryType::File => EntryKind::File,
                    EntryType::Directory => EntryKind::Directory,
                    EntryType::Symlink => EntryKind::Other,
                },
                size: info.size,
                path: info.path,
            }));
            if !full {
                return Ok(entries);
            }
        }
    }

    async fn read_file_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        Workspace::read_file_bytes(self, path).await
    }

    async fn read_files_bytes(&self, paths: &[String]) -> Vec<Result<Option<Vec<u8>>, FsError>> {
        Workspace::read_files_bytes(self, paths).await
    }

    async fn mkdir(&self, path: &str) -> Result<(), FsError> {
        let _bash = self.writing_as(Writer::Bash);
        Workspace::mkdir(self, path, true)
    }

    /// Text (valid UTF-8 that looks like text) is stored as text, like the `write` tool's
    /// files; anything else as bytes, so binary output round-trips byte for byte.
    async fn write_file_bytes(&self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        let _bash = self.writing_as(Writer::Bash);
        let result = match std::str::from_utf8(bytes) {
            Ok(text) if looks_like_text(bytes) => {
                Workspace::write_file(self, path, text, "text/plain").await
            }
            _ => Workspace::write_file_bytes(self, path, bytes, "application/octet-stream").await,
        };
        result
    }

    async fn remove(&self, path: &str, recursive: bool) -> Result<(), FsError> {
        let _bash = self.writing_as(Writer::Bash);
        Workspace::rm(self, path, recursive, true).await
    }
}
