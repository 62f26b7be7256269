//! The workspace: a virtual filesystem in the Durable Object's SQLite, with large files in R2.
//!
//! One table per namespace holds every file, directory and symlink, keyed by normalized path.
//! Text is stored as SQLite TEXT and bytes as BLOB, so nothing is base64-encoded. Content too
//! large for a row goes to the blob store (R2) when one is configured, and otherwise into
//! ~1 MB chunks in a side table, so no row comes near the 2 MB limit. Subtrees are key-range
//! scans, and the common operations are one SQL statement each: every SQL call crosses the
//! JS/wasm boundary, so round trips are what a workspace operation costs.
//!
//! Invariant kept by every mutation: each row's `parent_path` names an existing directory row,
//! so a path whose parent is a directory is a real location with no symlink above it.

mod diff;
mod error;
mod glob;
mod grams;
mod io;
pub(crate) mod journal;
pub mod path;
mod recent;
mod tree;
mod version;

#[cfg(test)]
pub(crate) mod tests;

pub use diff::{unified_diff, MAX_DIFF_LINES};
pub use error::{Errno, FsError};
pub use glob::{Glob, Prefilter};
pub use grams::{
    GramBatch, GramQuery, GrepFile, IndexRun, IndexTicket, INDEX_RUN_BYTES, MAX_INDEXED_BYTES,
};
pub use recent::{drop_kept_texts, RecentText, RECENT_TEXT_BYTES, RECENT_TEXT_MAX};
pub(crate) use version::content_hash;
pub use version::{
    FileVersion, StaleWrite, StatSeen, Writer, WriterScope, MAX_HISTORY_BYTES, MAX_HISTORY_VERSIONS,
};

use crate::platform::Clock;
use crate::store::{BlobStore, Row, Sql, SqlValue, StoreError};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Content at or above this size goes to the blob store when one is configured (Think's value).
pub const DEFAULT_INLINE_THRESHOLD: usize = 1_500_000;
/// The largest file the workspace accepts (`EFBIG` above it).
pub const DEFAULT_MAX_FILE_SIZE: usize = 100 * 1024 * 1024;
/// The most content bytes kept in one row; larger content is spilled or chunked.
pub const MAX_INLINE_ROW_BYTES: usize = 1_700_000;
/// Size of one chunk of a large file stored without a blob store.
pub const CHUNK_BYTES: usize = 1_000_000;
/// Symlinks followed before giving up with `ELOOP`.
pub const MAX_SYMLINK_DEPTH: usize = 40;
/// Longest accepted symlink target.
pub const MAX_SYMLINK_TARGET_LENGTH: usize = 4096;

/// Parameters per statement we allow ourselves (the platform limit is 100).
const MAX_PARAMS: usize = 99;
/// Bytes of bound text per batched statement we allow ourselves.
const MAX_BATCH_BYTES: usize = 90_000;

/// What kind of entry a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
}

impl EntryType {
    /// The name stored in SQL and shown in `FileInfo.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::File => "file",
            EntryType::Directory => "directory",
            EntryType::Symlink => "symlink",
        }
    }

    fn parse(s: &str) -> EntryType {
        match s {
            "directory" => EntryType::Directory,
            "symlink" => EntryType::Symlink,
            _ => EntryType::File,
        }
    }
}

/// Metadata of one entry, serialized as Think's `FileInfo` (camelCase, times in ms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    /// Absolute path.
    pub path: String,
    /// The last path component.
    pub name: String,
    /// File, directory or symlink.
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// The MIME type it was written with.
    pub mime_type: String,
    /// Size in bytes.
    pub size: u64,
    /// Creation time, in milliseconds since the epoch.
    pub created_at: i64,
    /// Last modification time, in milliseconds since the epoch.
    pub updated_at: i64,
    /// A symlink's target.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target: Option<String>,
}

/// A file found by [`Workspace::glob_texts`]: its path, its size and, when it was at hand,
/// its text.
#[derive(Debug, Clone, PartialEq)]
pub struct FileText {
    /// Absolute path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// `None` when the file is larger than asked for or not stored inline; read it with
    /// [`Workspace::read_files`].
    pub text: Option<String>,
}

/// Totals over the whole namespace, as Think's `getWorkspaceInfo()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceInfo {
    /// Files in the workspace.
    pub file_count: u64,
    /// Directories in the workspace.
    pub directory_count: u64,
    /// Bytes of all files.
    pub total_bytes: u64,
    /// Files whose content is in R2.
    pub r2_file_count: u64,
    /// Rows of the trigram index `grep` narrows its search with (0 when it is off). Not
    /// part of the JSON, which keeps Think's shape.
    #[serde(skip)]
    pub grep_index_rows: u64,
    /// Estimated bytes of those rows (not part of the JSON either).
    #[serde(skip)]
    pub grep_index_bytes: u64,
}

/// How a workspace is set up.
#[derive(Clone)]
pub struct WorkspaceOptions {
    /// Separates independent filesystems in one database; `^[a-zA-Z][a-zA-Z0-9_]*$`.
    pub namespace: String,
    /// Where large files go (R2 in production). Without one they are chunked in SQLite.
    pub blobs: Option<Rc<dyn BlobStore>>,
    /// Blob keys are `<blob_prefix>/<namespace><path>`; the agent passes its own name so
    /// several agents can share one bucket.
    pub blob_prefix: String,
    /// Content of at least this many bytes goes to the blob store.
    pub inline_threshold: usize,
    /// Writes larger than this fail with `EFBIG`.
    pub max_file_size: usize,
    /// Keep the trigram index that lets `grep` read only the files that may match (see
    /// `grams.rs`). On by default: writes do not index (a changed file is only unmarked,
    /// by a trigger), `grep` indexes the files it had to read, so a search after writes
    /// costs about a scan and the next ones read only candidates.
    pub grep_index: bool,
    /// Refuse the model's `edit` or overwriting `write` without `expectedVersion` of a file
    /// changed since it last read it by another writer (on by default; see `version.rs`).
    pub guard_stale_writes: bool,
}

impl Default for WorkspaceOptions {
    fn default() -> Self {
        Self {
            namespace: "default".to_owned(),
            blobs: None,
            blob_prefix: "workspace".to_owned(),
            inline_threshold: DEFAULT_INLINE_THRESHOLD,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            grep_index: true,
            guard_stale_writes: true,
        }
    }
}

/// The virtual filesystem. Cheap to share behind an `Rc`.
pub struct Workspace {
    sql: Rc<dyn Sql>,
    clock: Rc<dyn Clock>,
    blobs: Option<Rc<dyn BlobStore>>,
    namespace: String,
    blob_prefix: String,
    inline_threshold: usize,
    max_file_size: usize,
    /// Files, directories and symlinks.
    t: String,
    /// Chunks of large files kept in SQLite.
    c: String,
    /// The trigram index (see `grams.rs`).
    g: String,
    /// Content the model has seen, per version (see `version.rs`).
    h: String,
    /// Who the current mutations are attributed to.
    writer: Cell<Writer>,
    /// Whether checkpoints journal this workspace (R2 objects are then shared: journal.rs).
    journaled: Cell<bool>,
    /// Whether the model's unversioned writes are checked against what it last read.
    guard_unseen: bool,
    grep_index: bool,
    initialized: Cell<bool>,
    /// The last glob compiled by [`Workspace::glob_texts`] and its pattern: a paged search
    /// asks with the same pattern for every page.
    last_glob: RefCell<Option<(String, Rc<Glob>)>>,
    /// Told the path of every successful mutation (Think's `onChange`), so the agent can push
    /// the change to the tabs whichever tool, script or callable made it.
    on_change: RefCell<Option<ChangeHook>>,
    /// The model's read statement ([`Workspace::stat_with_seen_text`]), formatted once: it
    /// is the same for every read, and formatting it cost as much as numbering a file's lines.
    read_sql: std::cell::OnceCell<String>,
    /// The model edit's statements, formatted once as `read_sql` is.
    edit_sql: std::cell::OnceCell<version::EditSql>,
    /// The model's fast write ([`Workspace::write_guarded`]) of text bound as bytes, one
    /// statement per guard kind, formatted once as `read_sql` is.
    write_sql: [std::cell::OnceCell<String>; 3],
    /// This workspace's key among the texts kept for the model's next edit (`recent.rs`).
    recent_key: u64,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        recent::forget_workspace(self.recent_key);
    }
}

/// A listener for workspace mutations: receives the changed path, lexically normalized.
pub type ChangeHook = Rc<dyn Fn(&str)>;

/// How a file's content is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Storage {
    Inline,
    Blob,
    Chunked,
}

impl Storage {
    fn as_str(self) -> &'static str {
        match self {
            Storage::Inline => "inline",
            Storage::Blob => "r2",
            Storage::Chunked => "chunked",
        }
    }

    fn parse(s: &str) -> Storage {
        match s {
            "r2" => Storage::Blob,
            "chunked" => Storage::Chunked,
            _ => Storage::Inline,
        }
    }
}

/// File content as written: text stays TEXT in SQLite, bytes become a BLOB.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Content {
    Text(String),
    Bytes(Vec<u8>),
}

impl Content {
    fn into_bytes(self) -> Vec<u8> {
        match self {
            Content::Text(s) => s.into_bytes(),
            Content::Bytes(b) => b,
        }
    }

    fn into_text(self) -> String {
        match self {
            Content::Text(s) => s,
            Content::Bytes(b) => match String::from_utf8(b) {
                Ok(s) => s,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            },
        }
    }
}

/// One row's storage facts, enough to read it or clean up after it.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub path: String,
    pub kind: EntryType,
    pub storage: Storage,
    pub r2_key: Option<String>,
    pub chunk_id: Option<i64>,
    pub target: Option<String>,
}

/// The columns that make a [`Node`], in order.
const NODE_COLS: &str = "path, type, storage, r2_key, chunk_id, target";
/// The columns that make a [`FileInfo`], in order.
const INFO_COLS: &str = "path, name, type, mime_type, size, created_at, modified_at, target";

fn text(v: &str) -> SqlValue {
    SqlValue::Text(v.to_owned())
}

fn col_str(row: &Row, i: usize) -> String {
    row.get(i).and_then(SqlValue::as_str).unwrap_or_default().to_owned()
}

fn col_opt_str(row: &Row, i: usize) -> Option<String> {
    row.get(i).and_then(SqlValue::as_str).map(str::to_owned)
}

fn col_i64(row: &Row, i: usize) -> i64 {
    row.get(i).and_then(SqlValue::as_i64).unwrap_or(0)
}

fn node_from_row(row: &Row) -> Node {
    Node {
        path: col_str(row, 0),
        kind: EntryType::parse(row.get(1).and_then(SqlValue::as_str).unwrap_or("file")),
        storage: Storage::parse(row.get(2).and_then(SqlValue::as_str).unwrap_or("inline")),
        r2_key: col_opt_str(row, 3),
        chunk_id: row.get(4).and_then(SqlValue::as_i64),
        target: col_opt_str(row, 5),
    }
}

/// Moves column `i` out of `row` as a string (empty when it is not text).
fn take_str(row: &mut Row, i: usize) -> String {
    match row.get_mut(i).map(|v| std::mem::replace(v, SqlValue::Null)) {
        Some(SqlValue::Text(s)) => s,
        _ => String::new(),
    }
}

/// Builds a [`FileInfo`] from `INFO_COLS`, moving the strings out of the row.
fn info_from_row(mut row: Row) -> FileInfo {
    let kind = EntryType::parse(row.get(2).and_then(SqlValue::as_str).unwrap_or("file"));
    let target = Some(take_str(&mut row, 7)).filter(|t| !t.is_empty());
    FileInfo {
        path: take_str(&mut row, 0),
        name: take_str(&mut row, 1),
        kind,
        mime_type: take_str(&mut row, 3),
        size: col_i64(&row, 4).max(0) as u64,
        created_at: col_i64(&row, 5),
        updated_at: col_i64(&row, 6),
        target,
    }
}

/// `?, ?, …` with `n` placeholders.
fn placeholders(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}

/// Splits `items` into batches that respect the parameter and statement-size limits.
fn batches<T: AsRef<str>>(items: &[T], per_item_params: usize, reserved: usize) -> Vec<&[T]> {
    let max_items = ((MAX_PARAMS - reserved) / per_item_params.max(1)).max(1);
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, item) in items.iter().enumerate() {
        let len = item.as_ref().len() * per_item_params;
        if i > start && (i - start >= max_items || bytes + len > MAX_BATCH_BYTES) {
            out.push(&items[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += len;
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

impl Workspace {
    /// A workspace over `sql` with default options (namespace `default`, no blob store).
    pub fn new(sql: Rc<dyn Sql>, clock: Rc<dyn Clock>) -> Self {
        Self::build(sql, clock, WorkspaceOptions::default())
    }

    /// A workspace with explicit options; an invalid namespace is `EINVAL`.
    pub fn with_options(
        sql: Rc<dyn Sql>,
        clock: Rc<dyn Clock>,
        options: WorkspaceOptions,
    ) -> Result<Self, FsError> {
        let ns = &options.namespace;
        let valid = ns.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && ns.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(FsError::new(Errno::Inval, "workspace", ns.clone()));
        }
        Ok(Self::build(sql, clock, options))
    }

    fn build(sql: Rc<dyn Sql>, clock: Rc<dyn Clock>, options: WorkspaceOptions) -> Self {
        let ns = options.namespace;
        Self {
            sql,
            clock,
            blobs: options.blobs,
            t: format!("cf_wsfile_{ns}"),
            c: format!("cf_wschunk_{ns}"),
            g: format!("cf_wsgram_{ns}"),
            h: format!("cf_wshist_{ns}"),
            writer: Cell::new(Writer::App),
            journaled: Cell::new(false),
            guard_unseen: options.guard_stale_writes,
            grep_index: options.grep_index,
            namespace: ns,
            blob_prefix: options.blob_prefix,
            inline_threshold: options.inline_threshold,
            max_file_size: options.max_file_size,
            initialized: Cell::new(false),
            last_glob: RefCell::new(None),
            on_change: RefCell::new(None),
            read_sql: std::cell::OnceCell::new(),
            edit_sql: std::cell::OnceCell::new(),
            write_sql: Default::default(),
            recent_key: recent::workspace_key(),
        }
    }

    /// Sets the listener told of every successful mutation (write, append, mkdir, rm, cp, mv,
    /// symlink); it must not call back into the workspace.
    pub fn set_on_change(&self, hook: ChangeHook) {
        *self.on_change.borrow_mut() = Some(hook);
    }

    /// Tells the listener that `path` changed, when `result` is a success.
    fn changed<T>(&self, path: &str, result: Result<T, FsError>) -> Result<T, FsError> {
        if result.is_ok() {
            let hook = self.on_change.borrow().clone();
            if let Some(hook) = hook {
                hook(&path::lexical(path));
            }
        }
        result
    }

    /// The namespace this workspace lives in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The SQL table holding this namespace's entries.
    pub fn table_name(&self) -> &str {
        &self.t
    }

    /// The SQL table holding chunks of large files stored without a blob store.
    pub fn chunk_table_name(&self) -> &str {
        &self.c
    }

    /// The blob key of a file at normalized `path`.
    pub fn blob_key(&self, path: &str) -> String {
        format!("{}/{}{}", self.blob_prefix, self.namespace, path)
    }

    fn now(&self) -> i64 {
        self.clock.now_ms() as i64
    }

    fn exec(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, FsError> {
        self.init()?;
        Ok(self.sql.exec(sql, params)?)
    }

    /// A statement that returns no rows, and whether it changed one ([`Sql::exec_changed`]):
    /// lighter than `RETURNING 1`, which makes the store build and hand back a row.
    fn exec_changed(&self, sql: &str, params: &[SqlValue]) -> Result<bool, FsError> {
        self.init()?;
        Ok(self.sql.exec_changed(sql, params)?)
    }

    fn init(&self) -> Result<(), FsError> {
        if self.initialized.get() {
            return Ok(());
        }
        let (t, c, ns) = (&self.t, &self.c, &self.namespace);
        self.sql.exec(
            &format!(
                "CREATE TABLE IF NOT EXISTS {t} (
                  path TEXT PRIMARY KEY,
                  parent_path TEXT NOT NULL,
                  name TEXT NOT NULL,
                  type TEXT NOT NULL CHECK(type IN ('file','directory','symlink')),
                  mime_type TEXT NOT NULL DEFAULT 'text/plain',
                  size INTEGER NOT NULL DEFAULT 0,
                  storage TEXT NOT NULL DEFAULT 'inline' CHECK(storage IN ('inline','r2','chunked')),
                  r2_key TEXT,
                  chunk_id INTEGER,
                  target TEXT,
                  created_at INTEGER NOT NULL,
                  modified_at INTEGER NOT NULL,
                  content,
                  version INTEGER NOT NULL DEFAULT 1,
                  hash TEXT,
                  changed_by TEXT,
                  undo TEXT,
                  seen INTEGER
                )"
            ),
            &[],
        )?;
        self.migrate_versions()?;
        self.sql.exec(
            &format!("CREATE INDEX IF NOT EXISTS cf_wsdir_{ns} ON {t}(parent_path, type, name)"),
            &[],
        )?;
        self.sql.exec(
            &format!(
                "CREATE TABLE IF NOT EXISTS {c} (
                  chunk_id INTEGER NOT NULL,
                  seq INTEGER NOT NULL,
                  data BLOB NOT NULL,
                  PRIMARY KEY (chunk_id, seq)
                ) WITHOUT ROWID"
            ),
            &[],
        )?;
        let now = SqlValue::Integer(self.now());
        self.sql.exec(
            &format!(
                "INSERT OR IGNORE INTO {t} (path, parent_path, name, type, size, created_at, modified_at)
                 VALUES ('/', '', '', 'directory', 0, ?, ?)"
            ),
            &[now.clone(), now],
        )?;
        self.init_history()?;
        self.detect_journal()?;
        if self.grep_index {
            self.init_grams()?;
        }
        self.initialized.set(true);
        Ok(())
    }

    /// Runs `f` inside one SQL transaction.
    fn atomically(&self, f: &mut dyn FnMut() -> Result<(), FsError>) -> Result<(), FsError> {
        self.init()?;
        let mut inner_err: Option<FsError> = None;
        let result = self.sql.transaction(&mut || match f() {
            Ok(()) => Ok(()),
            Err(e) => {
                let msg = e.to_string();
                inner_err = Some(e);
                Err(StoreError::Aborted(msg))
            }
        });
        match (result, inner_err) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(e)) => Err(e),
            (Err(e), None) => Err(e.into()),
        }
    }

    fn lookup(&self, path: &str) -> Result<Option<Node>, FsError> {
        let rows = self
            .exec(&format!("SELECT {NODE_COLS} FROM {} WHERE path = ?", self.t), &[text(path)])?;
        Ok(rows.first().map(node_from_row))
    }

    fn blobs(&self, path: &str) -> Result<&Rc<dyn BlobStore>, FsError> {
        self.blobs.as_ref().ok_or_else(|| {
            FsError::Store(StoreError::Unavailable(format!(
                "{path} is stored in R2 but no blob store is configured"
            )))
        })
    }

    async fn delete_blobs(&self, keys: Vec<String>) -> Result<(), FsError> {
        if keys.is_empty() {
            return Ok(());
        }
        let Some(blobs) = &self.blobs else { return Ok(()) };
        let keys = self.deletable_blob_keys(keys)?;
        for batch in keys.chunks(1000) {
            blobs.delete(batch).await?;
        }
        Ok(())
    }
}

/// The target a symlink at `link` points to, as a normalized path.
fn symlink_destination(link: &str, target: &str) -> Result<String, FsError> {
    if target.starts_with('/') {
        path::normalize(target, "stat")
    } else {
        let dir = path::parent(link).unwrap_or("/");
        path::normalize(&format!("{dir}/{target}"), "stat")
    }
}
