//! The storage operations each tool needs (Think's `ReadOperations`, `WriteOperations`, …),
//! so the tools can run over a store other than [`Workspace`]: a remote filesystem, a
//! sandbox, a read-only view.

use crate::workspace::{
    EntryType, FileInfo, FileText, FsError, GramBatch, GramQuery, GrepFile, RecentText, StaleWrite,
    StatSeen, Workspace, Writer,
};
use async_trait::async_trait;

/// What `read` needs.
#[async_trait(?Send)]
pub trait ReadOps {
    /// File text, `None` when absent.
    async fn read_file(&self, path: &str) -> Result<Option<String>, FsError>;
    /// File bytes, `None` when absent (used to sniff media types).
    async fn read_file_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, FsError>;
    /// Metadata following symlinks, `None` when absent.
    async fn stat(&self, path: &str) -> Result<Option<FileInfo>, FsError>;
    /// Metadata plus, when the store can fetch it in the same step, the file's text (a
    /// read then costs one storage round trip). The default is `stat` alone; `read` then
    /// fetches the text with `read_file`.
    async fn stat_with_text(
        &self,
        path: &str,
    ) -> Result<Option<(FileInfo, Option<String>)>, FsError> {
        Ok(self.stat(path).await?.map(|info| (info, None)))
    }
    /// Notes that the model has read `content` at `path` and returns its version token;
    /// `None` (the default) for stores without versions.
    async fn seen(&self, _path: &str, _content: &str) -> Result<Option<String>, FsError> {
        Ok(None)
    }
    /// `stat_with_text`, with the prefetched text already noted as [`ReadOps::seen`] when
    /// the store can do both in one step: the third element is then the version token, and
    /// `read` does not call `seen`. The default notes nothing.
    async fn stat_with_seen_text(&self, path: &str) -> Result<Option<StatSeen>, FsError> {
        Ok(self.stat_with_text(path).await?.map(|(info, text)| (info, text, None)))
    }
}

/// What `write` and `edit` need to refuse a stale write (see `version.rs`); stores without
/// versions accept every write.
#[async_trait(?Send)]
pub trait VersionOps {
    /// Refuses the write when `path` is not at `expected`, or, without one, when it changed
    /// since the model last saw it by another writer.
    async fn check_fresh(&self, _path: &str, _expected: Option<&str>) -> Result<(), StaleWrite> {
        Ok(())
    }
    /// Notes that the model's own write left `content` at `path`; returns the new version.
    async fn wrote(&self, _path: &str, _content: &str) -> Result<Option<String>, FsError> {
        Ok(None)
    }
}

/// What `write` needs.
#[async_trait(?Send)]
pub trait WriteOps: VersionOps {
    /// Creates or overwrites a text file.
    async fn write_file(&self, path: &str, content: &str) -> Result<(), FsError>;
    /// Creates a directory (and, with `recursive`, its missing ancestors).
    async fn mkdir(&self, path: &str, recursive: bool) -> Result<(), FsError>;
    /// True when `write_file` creates missing parent directories itself, so the tool can
    /// skip its `mkdir` call (one storage round trip fewer).
    fn creates_parents(&self) -> bool {
        false
    }
    /// The model's write: [`VersionOps::check_fresh`], then `write_file` and
    /// [`VersionOps::wrote`]. Stores that can check and write in one step override it. The
    /// text is handed over, so a store that keeps it (for the next edit) need not copy it.
    async fn write_fresh(
        &self,
        path: &str,
        content: String,
        expected: Option<&str>,
    ) -> Result<(), StaleWrite> {
        self.check_fresh(path, expected).await?;
        self.write_file(path, &content).await?;
        self.wrote(path, &content).await?;
        Ok(())
    }
}

/// What `edit` needs.
#[async_trait(?Send)]
pub trait EditOps: VersionOps {
    /// File text, `None` when absent.
    async fn read_file(&self, path: &str) -> Result<Option<String>, FsError>;
    /// Creates or overwrites a text file.
    async fn write_file(&self, path: &str, content: &str) -> Result<(), FsError>;
    /// Overwrites a file `read_file` just returned. Stores that can update an existing
    /// file more cheaply than a general write override it; the default is `write_file`.
    async fn rewrite_file(&self, path: &str, content: &str) -> Result<(), FsError> {
        self.write_file(path, content).await
    }
    /// [`VersionOps::check_fresh`], then `read_file`. Stores that can do both in one step
    /// override it.
    async fn read_fresh(
        &self,
        path: &str,
        expected: Option<&str>,
    ) -> Result<Option<String>, StaleWrite> {
        self.check_fresh(path, expected).await?;
        Ok(self.read_file(path).await?)
    }
    /// `rewrite_file` of the text `previous` that `read_fresh` returned, then
    /// [`VersionOps::wrote`]. `content` keeps the first `kept.0` and the last `kept.1` bytes
    /// of `previous` (at least), which a store that keeps a delta of the change can use.
    async fn rewrite_noted(
        &self,
        path: &str,
        _previous: &str,
        content: &str,
        _kept: (usize, usize),
    ) -> Result<(), FsError> {
        self.rewrite_file(path, content).await?;
        self.wrote(path, content).await?;
        Ok(())
    }
    /// The text the model's last write or edit of `path` left, when the store kept it: a
    /// guess to match against, which only [`EditOps::rewrite_recalled`] may act on. `None`
    /// (the default) for stores that keep none.
    fn recall(&self, _path: &str) -> Option<RecentText> {
        None
    }
    /// [`EditOps::read_fresh`] and [`EditOps::rewrite_noted`] in one step for a text
    /// `recall` returned: `content` replaces it only while the file still holds it and
    /// passes the check for `expected`. `Ok(false)`, with nothing written, otherwise (the
    /// tool then reads the file).
    async fn rewrite_recalled(
        &self,
        _path: &str,
        _recalled: &RecentText,
        _content: String,
        _kept: (usize, usize),
        _expected: Option<&str>,
    ) -> Result<bool, FsError> {
        Ok(false)
    }
}

/// What `list` needs.
#[async_trait(?Send)]
pub trait ListOps {
    /// One page of a directory: directories, then files, then symlinks, each by name.
    async fn read_dir(
        &self,
        dir: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<FileInfo>, FsError>;
    /// The same page as name, type and size only. Stores that can select just these
    /// override it; the default takes them from `read_dir`.
    async fn read_dir_brief(
        &self,
        dir: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<(String, EntryType, u64)>, FsError> {
        Ok(self
            .read_dir(dir, limit, offset)
            .await?
            .into_iter()
            .map(|f| (f.name, f.kind, f.size))
            .collect())
    }
}

/// What `find` needs.
#[async_trait(?Send)]
pub trait FindOps {
    /// Entries matching a glob (Think's semantics), ordered by path.
    async fn glob(&self, pattern: &str) -> Result<Vec<FileInfo>, FsError>;
    /// The same entries as path and type only. Stores that can select just these override
    /// it; the default takes them from `glob`.
    async fn glob_paths(&self, pattern: &str) -> Result<Vec<(String, EntryType)>, FsError> {
        Ok(self.glob(pattern).await?.into_iter().map(|f| (f.path, f.kind)).collect())
    }
}

/// What `grep` needs.
#[async_trait(?Send)]
pub trait GrepOps {
    /// Entries matching a glob; `grep` keeps the files.
    async fn glob(&self, pattern: &str) -> Result<Vec<FileInfo>, FsError>;
    /// Path and size of each file (not directory or symlink) matching a glob, ordered by
    /// path. Stores that can select just these override it; the default filters `glob`.
    async fn glob_files(&self, pattern: &str) -> Result<Vec<(String, u64)>, FsError> {
        Ok(self
            .glob(pattern)
            .await?
            .into_iter()
            .filter(|f| f.kind == EntryType::File)
            .map(|f| (f.path, f.size))
            .collect())
    }
    /// File text, `None` when absent.
    async fn read_file(&self, path: &str) -> Result<Option<String>, FsError>;
    /// One page of the files matching a glob, in path order, after `after` (at most
    /// `limit`), with the text of those the store can return at once when they are at most
    /// `text_max` bytes; `grep` reads the others with `read_files`. Returns the page and
    /// the `after` of the next one, `None` at the end. The default lists every file (from
    /// `glob_files`) in one page, without texts.
    async fn glob_texts(
        &self,
        pattern: &str,
        after: Option<&str>,
        _limit: usize,
        _text_max: u64,
    ) -> Result<(Vec<FileText>, Option<String>), FsError> {
        if after.is_some() {
            return Ok((Vec::new(), None));
        }
        let files = self.glob_files(pattern).await?;
        Ok((
            files.into_iter().map(|(path, size)| FileText { path, size, text: None }).collect(),
            None,
        ))
    }
    /// Every file matching a glob, in path order, with whether the store's trigram index
    /// lets it contain a match of `required`; `None` (the default) when the store has no
    /// index or the query gives it nothing to narrow by, and `grep` reads every file.
    async fn grep_files(
        &self,
        _pattern: &str,
        _required: &GramQuery,
    ) -> Result<Option<Vec<GrepFile>>, FsError> {
        Ok(None)
    }
    /// Writes the trigrams `grep` gathered from the unindexed files `grep_files` listed
    /// and it read, and empties `batch`; a store without an index only empties it.
    async fn index_grams(&self, batch: &mut GramBatch) -> Result<(), FsError> {
        *batch = GramBatch::default();
        Ok(())
    }
    /// Reads several files, in order. Stores that can fetch many files in one request
    /// override this; the default reads them one by one.
    async fn read_files(&self, paths: &[String]) -> Result<Vec<Option<String>>, FsError> {
        let mut out = Vec::with_capacity(paths.len());
        for p in paths {
            out.push(self.read_file(p).await?);
        }
        Ok(out)
    }
}

/// What `delete` needs.
#[async_trait(?Send)]
pub trait DeleteOps {
    /// Removes a path; `force` makes a missing path a success.
    async fn rm(&self, path: &str, recursive: bool, force: bool) -> Result<(), FsError>;
}

#[async_trait(?Send)]
impl ReadOps for Workspace {
    async fn read_file(&self, path: &str) -> Result<Option<String>, FsError> {
        Workspace::read_file(self, path).await
    }
    async fn read_file_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        Workspace::read_file_bytes(self, path).await
    }
    async fn stat(&self, path: &str) -> Result<Option<FileInfo>, FsError> {
        Workspace::stat(self, path)
    }
    async fn stat_with_text(
        &self,
        path: &str,
    ) -> Result<Option<(FileInfo, Option<String>)>, FsError> {
        Workspace::stat_with_text(self, path)
    }
    async fn seen(&self, path: &str, content: &str) -> Result<Option<String>, FsError> {
        self.remember_seen(path, Some(content))
    }
    async fn stat_with_seen_text(&self, path: &str) -> Result<Option<StatSeen>, FsError> {
        Workspace::stat_with_seen_text(self, path)
    }
}

#[async_trait(?Send)]
impl VersionOps for Workspace {
    async fn check_fresh(&self, path: &str, expected: Option<&str>) -> Result<(), StaleWrite> {
        self.check_fresh_for_model(path, expected).await
    }
    async fn wrote(&self, path: &str, content: &str) -> Result<Option<String>, FsError> {
        ReadOps::seen(self, path, content).await
    }
}

#[async_trait(?Send)]
impl WriteOps for Workspace {
    async fn write_file(&self, path: &str, content: &str) -> Result<(), FsError> {
        let _tool = self.writing_as(Writer::Tool);
        Workspace::write_file(self, path, content, "text/plain").await
    }
    async fn mkdir(&self, path: &str, recursive: bool) -> Result<(), FsError> {
        Workspace::mkdir(self, path, recursive)
    }
    fn creates_parents(&self) -> bool {
        true
    }
    async fn write_fresh(
        &self,
        path: &str,
        content: String,
        expected: Option<&str>,
    ) -> Result<(), StaleWrite> {
        let _tool = self.writing_as(Writer::Tool);
        self.write_fresh_for_model(path, content, "text/plain", expected).await
    }
}

#[async_trait(?Send)]
impl EditOps for Workspace {
    async fn read_file(&self, path: &str) -> Result<Option<String>, FsError> {
        Workspace::read_file(self, path).await
    }
    async fn write_file(&self, path: &str, content: &str) -> Result<(), FsError> {
        let _tool = self.writing_as(Writer::Tool);
        Workspace::write_file(self, path, content, "text/plain").await
    }
    async fn rewrite_file(&self, path: &str, content: &str) -> Result<(), FsError> {
        let _tool = self.writing_as(Writer::Tool);
        Workspace::rewrite_file(self, path, content, "text/plain").await
    }
    async fn read_fresh(
        &self,
        path: &str,
        expected: Option<&str>,
    ) -> Result<Option<String>, StaleWrite> {
        self.read_fresh_for_model(path, expected).await
    }
    async fn rewrite_noted(
        &self,
        path: &str,
        previous: &str,
        content: &str,
        kept: (usize, usize),
    ) -> Result<(), FsError> {
        let _tool = self.writing_as(Writer::Tool);
        self.rewrite_kept_for_model(path, content, "text/plain", Some((previous, kept))).await
    }
    fn recall(&self, path: &str) -> Option<RecentText> {
        self.recall_text(path)
    }
    async fn rewrite_recalled(
        &self,
        path: &str,
        recalled: &RecentText,
        content: String,
        kept: (usize, usize),
        expected: Option<&str>,
    ) -> Result<bool, FsError> {
        let _tool = self.writing_as(Writer::Tool);
        Workspace::rewrite_recalled(self, path, recalled, content, kept, expected)
    }
}

#[async_trait(?Send)]
impl ListOps for Workspace {
    async fn read_dir(
        &self,
        dir: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<FileInfo>, FsError> {
        Workspace::read_dir(self, dir, limit, offset)
    }
    async fn read_dir_brief(
        &self,
        dir: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<(String, EntryType, u64)>, FsError> {
        Workspace::read_dir_brief(self, dir, limit, offset)
    }
}

#[async_trait(?Send)]
impl FindOps for Workspace {
    async fn glob(&self, pattern: &str) -> Result<Vec<FileInfo>, FsError> {
        Workspace::glob(self, pattern)
    }
    async fn glob_paths(&self, pattern: &str) -> Result<Vec<(String, EntryType)>, FsError> {
        Workspace::glob_paths(self, pattern)
    }
}

#[async_trait(?Send)]
impl GrepOps for Workspace {
    async fn glob(&self, pattern: &str) -> Result<Vec<FileInfo>, FsError> {
        Workspace::glob(self, pattern)
    }
    async fn glob_files(&self, pattern: &str) -> Result<Vec<(String, u64)>, FsError> {
        Workspace::glob_files(self, pattern)
    }
    async fn glob_texts(
        &self,
        pattern: &str,
        after: Option<&str>,
        limit: usize,
        text_max: u64,
    ) -> Result<(Vec<FileText>, Option<String>), FsError> {
        Workspace::glob_texts(self, pattern, after, limit, text_max)
    }
    async fn read_file(&self, path: &str) -> Result<Option<String>, FsError> {
        Workspace::read_file(self, path).await
    }
    async fn read_files(&self, paths: &[String]) -> Result<Vec<Option<String>>, FsError> {
        Workspace::read_files(self, paths).await
    }
    async fn grep_files(
        &self,
        pattern: &str,
        required: &GramQuery,
    ) -> Result<Option<Vec<GrepFile>>, FsError> {
        Workspace::grep_files(self, pattern, required)
    }
    async fn index_grams(&self, batch: &mut GramBatch) -> Result<(), FsError> {
        Workspace::index_grams(self, batch)
    }
}

#[async_trait(?Send)]
impl DeleteOps for Workspace {
    async fn rm(&self, path: &str, recursive: bool, force: bool) -> Result<(), FsError> {
        Workspace::rm(self, path, recursive, force).await
    }
}
