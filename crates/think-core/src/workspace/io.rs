//! Reading and writing file content, including the spill to the blob store and chunking.

use super::version::{reverse_delta_kept, GuardKind, WriteGuard};
use super::*;

/// A write's destination after symlinks are followed.
pub(crate) struct Resolved {
    /// The normalized path the operation lands on.
    pub path: String,
    /// The entry there, if any.
    pub node: Option<Node>,
    /// Whether every ancestor of `path` exists (as a directory).
    pub parent_exists: bool,
    /// How many of `path`'s ancestors (shallowest first, root excluded) exist; by the
    /// table's invariant the existing ones are a prefix of the chain.
    pub existing_ancestors: usize,
}

/// Largest text bound as bytes (see `ContentRef::bound`).
const TEXT_AS_BYTES_MAX: usize = 64 * 1024;

/// Where new content should go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Placement {
    Inline,
    Blob,
    Chunked,
}

/// Content on its way in, borrowed from the caller: a large file is copied only where it is
/// stored (into R2's buffer, or a chunk at a time), never first into a copy of its own.
#[derive(Clone, Copy)]
pub(crate) enum ContentRef<'a> {
    /// Stored as SQLite TEXT when inline.
    Text(&'a str),
    /// Stored as a BLOB when inline.
    Bytes(&'a [u8]),
}

/// The MIME type the model's tools write, which their statements hold as a literal: each
/// bound parameter costs workerd about 1 µs per statement (a trivial `SELECT` from plain
/// JavaScript: 4.3 µs with none, 13.5 with ten), so the write and the edit bind only what
/// varies, each value once (`?NNN`).
pub(super) const TEXT_PLAIN: &str = "text/plain";

/// How a content binding is stored ([`ContentRef::bound`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored {
    /// Text bound as its UTF-8 bytes and cast back to TEXT by SQLite.
    TextAsBytes,
    /// The binding as it is: bytes as a BLOB, long text as TEXT.
    AsIs,
}

impl Stored {
    /// The SQL expression storing parameter `n`.
    pub(super) fn sql(self, n: usize) -> String {
        match self {
            Stored::TextAsBytes => format!("CAST(?{n} AS TEXT)"),
            Stored::AsIs => format!("?{n}"),
        }
    }
}

/// The SQL of a statement's MIME type: the literal [`TEXT_PLAIN`], or parameter `n`.
fn mime_sql(literal: bool, n: usize) -> String {
    if literal {
        format!("'{TEXT_PLAIN}'")
    } else {
        format!("?{n}")
    }
}

impl<'a> ContentRef<'a> {
    fn len(self) -> usize {
        self.bytes().len()
    }

    fn bytes(self) -> &'a [u8] {
        match self {
            ContentRef::Text(s) => s.as_bytes(),
            ContentRef::Bytes(b) => b,
        }
    }

    /// The value of an inline row (a copy; inline content is at most a row).
    fn to_sql(self) -> SqlValue {
        match self {
            ContentRef::Text(s) => SqlValue::Text(s.to_owned()),
            ContentRef::Bytes(b) => SqlValue::Blob(b.to_vec()),
        }
    }

    /// The binding of an inline row's content and the SQL expression that stores it. Text
    /// up to [`TEXT_AS_BYTES_MAX`] is bound as its UTF-8 bytes and cast to TEXT by SQLite:
    /// the same stored value, without a JavaScript string decoded from it and encoded
    /// again on the way in. Larger text keeps its own binding (see `wasm/sql.rs`). Bytes
    /// are borrowed ([`Sql::exec_changed_blob`]): a copy of the content per write was the
    /// largest item of the write's own code (3 % of its loop, V8 profile).
    pub(super) fn bound(self) -> (Bound<'a>, Stored) {
        match self {
            ContentRef::Text(s) if s.len() <= TEXT_AS_BYTES_MAX => {
                (Bound::Bytes(s.as_bytes()), Stored::TextAsBytes)
            }
            ContentRef::Bytes(b) => (Bound::Bytes(b), Stored::AsIs),
            other => (Bound::Value(other.to_sql()), Stored::AsIs),
        }
    }
}

/// A content binding ([`ContentRef::bound`]): borrowed bytes, or a value of its own.
pub(super) enum Bound<'a> {
    /// Bound as a blob without a copy.
    Bytes(&'a [u8]),
    /// Bound as this value.
    Value(SqlValue),
}

impl Content {
    /// The content as a [`ContentRef`].
    pub(crate) fn as_ref(&self) -> ContentRef<'_> {
        match self {
            Content::Text(s) => ContentRef::Text(s),
            Content::Bytes(b) => ContentRef::Bytes(b),
        }
    }
}

impl Workspace {
    /// Follows symlinks anywhere in `start` (and in the last segment when `follow_last`),
    /// reporting `ENOTDIR` when a file sits where a directory should and `ELOOP` after
    /// [`MAX_SYMLINK_DEPTH`] hops. Two statements per hop; used off the fast paths only.
    pub(crate) fn resolve(
        &self,
        start: &str,
        follow_last: bool,
        syscall: &'static str,
        shown: &str,
    ) -> Result<Resolved, FsError> {
        let mut p = start.to_owned();
        let mut hops = 0usize;
        let hop = |hops: &mut usize| {
            *hops += 1;
            if *hops > MAX_SYMLINK_DEPTH {
                Err(FsError::new(Errno::Loop, syscall, shown))
            } else {
                Ok(())
            }
        };
        'outer: loop {
            let mut wanted: Vec<String> =
                path::ancestors(&p).into_iter().map(str::to_owned).collect();
            let ancestor_count = wanted.len();
            wanted.push(p.clone());
            let mut nodes = std::collections::HashMap::new();
            for batch in batches(&wanted, 1, 0) {
                let rows = self.exec(
                    &format!(
                        "SELECT {NODE_COLS} FROM {} WHERE path IN ({})",
                        self.t,
                        placeholders(batch.len())
                    ),
                    &batch.iter().map(|s| text(s)).collect::<Vec<_>>(),
                )?;
                for row in &rows {
                    let n = node_from_row(row);
                    nodes.insert(n.path.clone(), n);
                }
            }
            let mut parent_exists = true;
            let mut existing_ancestors = 0;
            for a in &wanted[..ancestor_count] {
                match nodes.get(a) {
                    None => {
                        parent_exists = false;
                        break;
                    }
                    Some(n) if n.kind == EntryType::Directory => existing_ancestors += 1,
                    Some(n) if n.kind == EntryType::Symlink => {
                        hop(&mut hops)?;
                        let dest = symlink_destination(a, n.target.as_deref().unwrap_or(""))?;
                        p = path::rebase(&p, a, &dest);
                        continue 'outer;
                    }
                    Some(_) => return Err(FsError::new(Errno::NotDir, syscall, shown)),
                }
            }
            let node = if parent_exists { nodes.remove(&p) } else { None };
            if let Some(n) = &node {
                if follow_last && n.kind == EntryType::Symlink {
                    hop(&mut hops)?;
                    p = symlink_destination(&p, n.target.as_deref().unwrap_or(""))?;
                    continue;
                }
            }
            return Ok(Resolved { path: p, node, parent_exists, existing_ancestors });
        }
    }

    /// Reads a file as text, following symlinks. `None` when nothing is there; invalid
    /// UTF-8 in a binary file is replaced with U+FFFD.
    pub async fn read_file(&self, path: &str) -> Result<Option<String>, FsError> {
        Ok(self.read_content(path).await?.map(Content::into_text))
    }

    /// Reads a file's bytes, following symlinks. `None` when nothing is there.
    pub async fn read_file_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        Ok(self.read_content(path).await?.map(Content::into_bytes))
    }

    /// Reads many files as text in as few statements as the SQL limits allow (inline
    /// content comes back in the same query); results are in the order of `paths`.
    pub async fn read_files(&self, paths: &[String]) -> Result<Vec<Option<String>>, FsError> {
        let mut norms = Vec::with_capacity(paths.len());
        for p in paths {
            norms.push(path::normalize(p, "open")?);
        }
        let mut found = self.inline_contents(&norms)?;
        let mut out = Vec::with_capacity(paths.len());
        for (shown, norm) in paths.iter().zip(&norms) {
            out.push(match found.remove(norm) {
                Some(content) => Some(content.into_text()),
                // Anything else (spilled, symlinked, missing) takes the general path.
                None => self.read_file(shown).await?,
            });
        }
        Ok(out)
    }

    /// [`Workspace::read_file_bytes`] of each of `paths`, in order, with the inline files'
    /// content read in as few statements as the SQL limits allow (the bash snapshot's
    /// reads: one statement per file was most of a snapshot's time).
    pub async fn read_files_bytes(
        &self,
        paths: &[String],
    ) -> Vec<Result<Option<Vec<u8>>, FsError>> {
        let norms: Vec<Option<String>> =
            paths.iter().map(|p| path::normalize(p, "open").ok()).collect();
        let valid: Vec<String> = norms.iter().flatten().cloned().collect();
        // A failed batch leaves every file to its own read, which reports its own error.
        let mut found = self.inline_contents(&valid).unwrap_or_default();
        let mut out = Vec::with_capacity(paths.len());
        for (shown, norm) in paths.iter().zip(&norms) {
            out.push(match norm.as_ref().and_then(|n| found.remove(n)) {
                Some(content) => Ok(Some(content.into_bytes())),
                None => self.read_file_bytes(shown).await,
            });
        }
        out
    }

    /// The content of each inline file among the normalized `norms`, by path; other entries
    /// (spilled, chunked, symlinks, directories, missing) are left out.
    fn inline_contents(
        &self,
        norms: &[String],
    ) -> Result<std::collections::HashMap<String, Content>, FsError> {
        let mut found = std::collections::HashMap::with_capacity(norms.len());
        for batch in batches(norms, 1, 0) {
            let rows = self.exec(
                &format!(
                    "SELECT path, content FROM {} WHERE path IN ({})
                       AND type = 'file' AND storage = 'inline'",
                    self.t,
                    placeholders(batch.len())
                ),
                &batch.iter().map(|s| text(s)).collect::<Vec<_>>(),
            )?;
            for mut row in rows {
                let content = match row.pop() {
                    Some(SqlValue::Text(s)) => Content::Text(s),
                    Some(SqlValue::Blob(b)) => Content::Bytes(b),
                    _ => Content::Text(String::new()),
                };
                found.insert(take_str(&mut row, 0), content);
            }
        }
        Ok(found)
    }

    pub(crate) async fn read_content(&self, path: &str) -> Result<Option<Content>, FsError> {
        let norm = path::normalize(path, "open")?;
        let rows = self.exec(
            &format!("SELECT {NODE_COLS}, content FROM {} WHERE path = ?", self.t),
            &[text(&norm)],
        )?;
        let row = match rows.into_iter().next() {
            Some(row) => row,
            None => {
                let r = match self.resolve(&norm, true, "open", path) {
                    Ok(r) => r,
                    Err(e) if e.errno() == Some(Errno::NotDir) => return Ok(None),
                    Err(e) => return Err(e),
                };
                return match r.node {
                    Some(node) => self.load(&node, path).await.map(Some),
                    None => Ok(None),
                };
            }
        };
        let node = node_from_row(&row);
        match node.kind {
            EntryType::Directory => Err(FsError::new(Errno::IsDir, "read", path)),
            EntryType::Symlink => {
                let r = self.resolve(&norm, true, "open", path)?;
                match r.node {
                    Some(node) => self.load(&node, path).await.map(Some),
                    None => Ok(None),
                }
            }
            EntryType::File if node.storage == Storage::Inline => {
                Ok(Some(match row.into_iter().nth(6) {
                    Some(SqlValue::Text(s)) => Content::Text(s),
                    Some(SqlValue::Blob(b)) => Content::Bytes(b),
                    _ => Content::Text(String::new()),
                }))
            }
            EntryType::File => self.load(&node, path).await.map(Some),
        }
    }

    /// Loads the content of a resolved node.
    pub(crate) async fn load(&self, node: &Node, shown: &str) -> Result<Content, FsError> {
        match (node.kind, node.storage) {
            (EntryType::Directory, _) => Err(FsError::new(Errno::IsDir, "read", shown)),
            (EntryType::Symlink, _) => Err(FsError::new(Errno::NoEnt, "open", shown)),
            (EntryType::File, Storage::Inline) => {
                let rows = self.exec(
                    &format!("SELECT content FROM {} WHERE path = ?", self.t),
                    &[text(&node.path)],
                )?;
                Ok(match rows.into_iter().next().and_then(|r| r.into_iter().next()) {
                    Some(SqlValue::Text(s)) => Content::Text(s),
                    Some(SqlValue::Blob(b)) => Content::Bytes(b),
                    _ => Content::Text(String::new()),
                })
            }
            (EntryType::File, Storage::Chunked) => {
                let rows = self.exec(
                    &format!("SELECT data FROM {} WHERE chunk_id = ? ORDER BY seq", self.c),
                    &[SqlValue::Integer(node.chunk_id.unwrap_or(-1))],
                )?;
                let mut out = Vec::new();
                for row in rows {
                    if let Some(v) = row.into_iter().next() {
                        out.extend(v.into_bytes().unwrap_or_default());
                    }
                }
                Ok(Content::Bytes(out))
            }
            (EntryType::File, Storage::Blob) => {
                let key = node.r2_key.clone().unwrap_or_else(|| self.blob_key(&node.path));
                let bytes = self.blobs(shown)?.get(&key).await?;
                Ok(Content::Bytes(bytes.unwrap_or_default()))
            }
        }
    }

    /// Writes text (stored as SQLite TEXT), creating parent directories and following a
    /// symlink at `path`. `mime` defaults to `text/plain` in Think.
    pub async fn write_file(&self, path: &str, content: &str, mime: &str) -> Result<(), FsError> {
        self.write_ref(path, ContentRef::Text(content), mime).await
    }

    /// Replaces the text of a file that exists and is stored inline, in one `UPDATE`: about
    /// half the cost of the upsert [`Workspace::write_file`] needs when the file may be new.
    /// For a file just read (an edit) that is the common case; anything else (a symlink,
    /// content that must spill, a file gone meanwhile) falls back to `write_file`.
    pub async fn rewrite_file(&self, path: &str, content: &str, mime: &str) -> Result<(), FsError> {
        if self.rewrite_inline(path, content, mime, None)?.is_some() {
            return Ok(());
        }
        self.write_file(path, content, mime).await
    }

    /// The one `UPDATE` of [`Workspace::rewrite_file`]: the content hash it stored, `None`
    /// when it did not apply. `previous`, the text being replaced and how many of its first
    /// and last bytes `content` kept, lets the history keep it as a reverse delta (see
    /// `version.rs`).
    pub(super) fn rewrite_inline(
        &self,
        path: &str,
        content: &str,
        mime: &str,
        previous: Option<(&str, (usize, usize))>,
    ) -> Result<Option<String>, FsError> {
        let norm = path::normalize(path, "open")?;
        if content.len() > self.max_file_size || self.placement(content.len()) != Placement::Inline
        {
            return Ok(None);
        }
        let (value, stored) = ContentRef::Text(content).bound();
        let w = self.writer();
        let literal = mime == TEXT_PLAIN;
        let formatted;
        let sql = if w == Writer::Tool && stored == Stored::TextAsBytes && literal {
            &self.edit_sql().rewrite
        } else {
            formatted = self.rewrite_sql(stored, w, literal);
            &formatted
        };
        let undo = previous.and_then(|(old, kept)| reverse_delta_kept(old, content, kept));
        let hash = content_hash(content.as_bytes());
        let mut params = self.rewrite_params(&hash, undo, &norm);
        if !literal {
            params.push(text(mime));
        }
        if self.exec_bound(sql, params, 0, value)? {
            return self.changed(path, Ok(Some(hash)));
        }
        Ok(None)
    }

    /// The first five bindings of [`Workspace::rewrite_sql`]'s statement, the content's
    /// (`?1`) a NULL, bound by [`Workspace::exec_bound`].
    pub(super) fn rewrite_params(
        &self,
        hash: &str,
        undo: Option<String>,
        norm: &str,
    ) -> Vec<SqlValue> {
        vec![
            SqlValue::Null,
            SqlValue::Integer(self.now()),
            text(hash),
            undo.map_or(SqlValue::Null, SqlValue::Text),
            text(norm),
        ]
    }

    /// Runs `sql`, which returns no rows, once the tables exist, with `content` bound at
    /// `at` (a NULL in `params`); whether it changed a row.
    pub(super) fn exec_bound(
        &self,
        sql: &str,
        mut params: Vec<SqlValue>,
        at: usize,
        content: Bound<'_>,
    ) -> Result<bool, FsError> {
        self.init()?;
        Ok(match content {
            Bound::Bytes(bytes) => self.sql.exec_changed_blob(sql, &params, at, bytes)?,
            Bound::Value(v) => {
                params[at] = v;
                self.sql.exec_changed(sql, &params)?
            }
        })
    }

    /// The statement of [`Workspace::rewrite_inline`] for content stored as `stored` by
    /// writer `w`: `?1` the content, `?2` the time, `?3` its hash (also the tag of `undo`),
    /// `?4` the reverse delta, `?5` the path, and `?6` the MIME type unless it is the
    /// `literal` [`TEXT_PLAIN`].
    pub(super) fn rewrite_sql(&self, stored: Stored, w: Writer, literal: bool) -> String {
        let seen = seen_after_change(w);
        format!(
            "UPDATE {} SET content = {}, size = length(CAST(?1 AS BLOB)), mime_type = {},
               modified_at = ?2, version = version + 1, hash = ?3, changed_by = '{}',
               undo = (version + 1) || ' ' || ?3 || ' ' || ?4, seen = {seen}
             WHERE path = ?5 AND type = 'file' AND storage = 'inline'",
            self.t,
            stored.sql(1),
            mime_sql(literal, 6),
            w.as_str()
        )
    }

    /// Writes bytes (stored as a BLOB), creating parent directories. Think's default `mime`
    /// is `application/octet-stream`.
    pub async fn write_file_bytes(
        &self,
        path: &str,
        bytes: &[u8],
        mime: &str,
    ) -> Result<(), FsError> {
        self.write_ref(path, ContentRef::Bytes(bytes), mime).await
    }

    pub(super) fn placement(&self, size: usize) -> Placement {
        let fits_row = size <= MAX_INLINE_ROW_BYTES;
        match &self.blobs {
            Some(_) if size >= self.inline_threshold || !fits_row => Placement::Blob,
            None if !fits_row => Placement::Chunked,
            _ => Placement::Inline,
        }
    }

    /// [`Workspace::write_ref`] for content the caller owns.
    pub(crate) async fn write_content(
        &self,
        path: &str,
        content: Content,
        mime: &str,
    ) -> Result<(), FsError> {
        self.write_ref(path, content.as_ref(), mime).await
    }

    /// Writes content, creating parent directories and following a symlink at `path`.
    pub(crate) async fn write_ref(
        &self,
        path: &str,
        content: ContentRef<'_>,
        mime: &str,
    ) -> Result<(), FsError> {
        let result = self.write_ref_unobserved(path, content, mime).await;
        self.changed(path, result)
    }

    async fn write_ref_unobserved(
        &self,
        path: &str,
        content: ContentRef<'_>,
        mime: &str,
    ) -> Result<(), FsError> {
        let norm = path::normalize(path, "open")?;
        if content.len() > self.max_file_size {
            return Err(FsError::new(Errno::FBig, "write", path));
        }
        if norm == "/" {
            return Err(FsError::new(Errno::IsDir, "open", path));
        }
        let placement = self.placement(content.len());
        if placement == Placement::Inline
            && self.write_inline(&norm, content, mime, None)?.is_some()
        {
            return Ok(());
        }
        let hash = content_hash(content.bytes());
        self.write_slow(path, &norm, content, mime, placement, &hash).await
    }

    /// The model's text write in one statement, its check included (see
    /// `Workspace::write_fresh_for_model`): the normalized path and the content hash it
    /// stored; `None`, with nothing written, when the check fails or the write needs the
    /// general path.
    pub(super) fn write_guarded(
        &self,
        path: &str,
        content: &str,
        mime: &str,
        guard: &WriteGuard,
    ) -> Result<Option<(String, String)>, FsError> {
        let Ok(norm) = path::normalize(path, "open") else { return Ok(None) };
        if content.len() > self.max_file_size
            || norm == "/"
            || self.placement(content.len()) != Placement::Inline
        {
            return Ok(None);
        }
        let Some(hash) = self.write_inline(&norm, ContentRef::Text(content), mime, Some(guard))?
        else {
            return Ok(None);
        };
        self.changed(path, Ok(()))?;
        Ok(Some((norm, hash)))
    }

    /// Fast path: one statement when the parent directory exists and the path is new or an
    /// inline file (and `guard`, when given, holds). The content hash it stored; `None`
    /// when it did not apply.
    ///
    /// The row is a `VALUES` row whose `parent_path` is NULL unless the parent directory
    /// exists (and, for a guard that needs one, the file), so its `NOT NULL` refuses it: an
    /// `INSERT … SELECT` whose `SELECT` reads the same table would first copy the row,
    /// content and all, into a temporary table. That refusal is ignored (`INSERT OR
    /// IGNORE`: the statement writes nothing and says so), since a statement's error cost
    /// workerd 45-90 µs against 3 µs for a plain one, and every write into a new directory
    /// took it. An existing row that the write must not replace (not an inline file, or the
    /// guard fails) is refused by the `modified_at` the update would give it; the upsert's
    /// update fails on it whatever the insert's conflict clause, so that refusal is the
    /// statement's error, and writes nothing. The statement returns no row, so it runs as
    /// [`Sql::exec_changed`], with no result to pack and decode: a `RETURNING` clause made
    /// SQLite open a temporary B-tree for every write (15k of 279k instructions of an
    /// overwrite, natively).
    fn write_inline(
        &self,
        norm: &str,
        content: ContentRef<'_>,
        mime: &str,
        guard: Option<&WriteGuard>,
    ) -> Result<Option<String>, FsError> {
        let now = SqlValue::Integer(self.now());
        let parent = path::parent(norm).unwrap_or("/");
        let writer = self.writer();
        let (value, stored) = content.bound();
        let hash = content_hash(content.bytes());
        let literal = mime == TEXT_PLAIN;
        // The content (`?4`) is bound by `exec_bound`.
        let mut params = vec![text(norm), text(parent), now, SqlValue::Null, text(&hash)];
        if !literal {
            params.push(text(mime));
        }
        if let Some(g) = guard {
            params.extend(g.params.iter().cloned());
        }
        let at = 3;
        let kind = guard.map(|g| g.kind);
        let formatted;
        let sql = match kind {
            Some(k) if writer == Writer::Tool && stored == Stored::TextAsBytes && literal => self
                .write_sql[k.index()]
            .get_or_init(|| self.write_inline_sql(stored, writer, kind, literal)),
            _ => {
                formatted = self.write_inline_sql(stored, writer, kind, literal);
                &formatted
            }
        };
        self.init()?;
        let bytes = match value {
            Bound::Bytes(b) => Some(b),
            Bound::Value(v) => {
                params[at] = v;
                None
            }
        };
        let run = || match bytes {
            Some(b) => self.sql.exec_changed_blob(sql, &params, at, b),
            None => self.sql.exec_changed(sql, &params),
        };
        let mut result = run();
        // A parent that is missing (not a file or a symlink): made in one statement, then
        // the write again, instead of the general path's resolve and checks.
        if matches!(result, Ok(false))
            && !guard.is_some_and(WriteGuard::must_exist)
            && self.make_parents(norm)?
        {
            result = run();
        }
        match result {
            Ok(true) => Ok(Some(hash)),
            Ok(false) => Ok(None),
            Err(StoreError::Sql(msg)) if self.write_refused(&msg) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether `msg`, an error of [`Workspace::write_inline`]'s statement, is its refusal:
    /// the `NOT NULL` of `modified_at` (see there). Compared within the message: workerd's
    /// has a prefix and a suffix.
    pub(super) fn write_refused(&self, msg: &str) -> bool {
        msg.contains(&format!("NOT NULL constraint failed: {}.modified_at", self.t))
    }

    /// The statement of [`Workspace::write_inline`] for content stored as `stored` by
    /// writer `writer`, making the check of guard kind `guard`: `?1` the path, `?2` its
    /// parent, `?3` the time, `?4` the content, `?5` its hash, then the MIME type unless it
    /// is the `literal` [`TEXT_PLAIN`], then the guard's parameters. The name is the path
    /// after its parent (SQLite counts both in characters).
    pub(super) fn write_inline_sql(
        &self,
        stored: Stored,
        writer: Writer,
        guard: Option<GuardKind>,
        literal: bool,
    ) -> String {
        let t = &self.t;
        let w = writer.as_str();
        let seen = if writer == Writer::Tool { "1" } else { "NULL" };
        let seen_again = seen_after_change(writer);
        let mime = mime_sql(literal, 6);
        let first_guard = if literal { 6 } else { 7 };
        let (must_exist, check) = match guard {
            Some(kind) => {
                let exists = if kind == GuardKind::Expected {
                    format!("AND EXISTS (SELECT 1 FROM {t} WHERE path = ?1)")
                } else {
                    String::new()
                };
                (exists, format!("AND ({})", self.guard_sql(kind, first_guard)))
            }
            None => (String::new(), String::new()),
        };
        let content = stored.sql(4);
        format!(
            "INSERT OR IGNORE INTO {t} (path, parent_path, name, type, mime_type, size,
               storage, created_at, modified_at, content, version, hash, changed_by, seen)
             VALUES (?1, CASE WHEN EXISTS (SELECT 1 FROM {t} WHERE path = ?2
                 AND type = 'directory') {must_exist} THEN ?2 END,
               substr(?1, length(?2) + CASE WHEN ?2 = '/' THEN 1 ELSE 2 END), 'file', {mime},
               length(CAST(?4 AS BLOB)), 'inline', ?3, ?3, {content}, 1, ?5, '{w}', {seen})
             ON CONFLICT(path) DO UPDATE SET mime_type = excluded.mime_type,
               size = excluded.size, content = excluded.content,
               modified_at = CASE WHEN {t}.type = 'file' AND {t}.storage = 'inline' {check}
                 THEN excluded.modified_at END,
               version = {t}.version + 1, hash = excluded.hash,
               changed_by = excluded.changed_by, undo = NULL, seen = {seen_again}"
        )
    }

    async fn write_slow(
        &self,
        shown: &str,
        norm: &str,
        content: ContentRef<'_>,
        mime: &str,
        placement: Placement,
        hash: &str,
    ) -> Result<(), FsError> {
        let r = self.resolve(norm, true, "open", shown)?;
        if let Some(n) = &r.node {
            if n.kind == EntryType::Directory {
                return Err(FsError::new(Errno::IsDir, "open", shown));
            }
        }
        if r.path == "/" {
            return Err(FsError::new(Errno::IsDir, "open", shown));
        }
        self.create_missing_ancestors(&r)?;
        let target = r.path;
        let old = r.node;
        let now = SqlValue::Integer(self.now());
        let size = content.len() as i64;
        let upsert = format!(
            "INSERT INTO {t} (path, parent_path, name, type, mime_type, size, storage, r2_key,
               chunk_id, created_at, modified_at, content, version, hash, changed_by)
             VALUES (?, ?, ?, 'file', ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, '{w}')
             ON CONFLICT(path) DO UPDATE SET mime_type = excluded.mime_type,
               size = excluded.size, storage = excluded.storage, r2_key = excluded.r2_key,
               chunk_id = excluded.chunk_id, target = NULL, content = excluded.content,
               modified_at = excluded.modified_at, version = {t}.version + 1,
               hash = excluded.hash, changed_by = excluded.changed_by, undo = NULL",
            t = self.t,
            w = self.writer().as_str()
        );
        let row_params = |storage: Storage, key: SqlValue, chunk: SqlValue, body: SqlValue| {
            vec![
                text(&target),
                text(path::parent(&target).unwrap_or("/")),
                text(path::basename(&target)),
                text(mime),
                SqlValue::Integer(size),
                text(storage.as_str()),
                key,
                chunk,
                now.clone(),
                now.clone(),
                body,
                text(hash),
            ]
        };
        let old_chunk =
            old.as_ref().filter(|n| n.storage == Storage::Chunked).and_then(|n| n.chunk_id);
        let old_key =
            old.as_ref().filter(|n| n.storage == Storage::Blob).and_then(|n| n.r2_key.clone());
        match placement {
            Placement::Inline => {
                let params =
                    row_params(Storage::Inline, SqlValue::Null, SqlValue::Null, content.to_sql());
                self.atomically(&mut || {
                    self.exec(&upsert, &params)?;
                    self.drop_chunks(old_chunk)
                })?;
                if let Some(k) = old_key {
                    self.delete_blobs(vec![k]).await?;
                }
            }
            Placement::Chunked => {
                let bytes = content.bytes();
                self.atomically(&mut || {
                    let id = self.next_chunk_id()?;
                    for (seq, piece) in bytes.chunks(CHUNK_BYTES).enumerate() {
                        self.exec(
                            &format!(
                                "INSERT INTO {} (chunk_id, seq, data) VALUES (?, ?, ?)",
                                self.c
                            ),
                            &[
                                SqlValue::Integer(id),
                                SqlValue::Integer(seq as i64),
                                SqlValue::Blob(piece.to_vec()),
                            ],
                        )?;
                    }
                    let params = row_params(
                        Storage::Chunked,
                        SqlValue::Null,
                        SqlValue::Integer(id),
                        SqlValue::Null,
                    );
                    self.exec(&upsert, &params)?;
                    self.drop_chunks(old_chunk)
                })?;
                if let Some(k) = old_key {
                    self.delete_blobs(vec![k]).await?;
                }
            }
            Placement::Blob => {
                let key = self.fresh_blob_key(&target)?;
                let blobs = self.blobs(shown)?.clone();
                blobs.put(&key, content.bytes(), mime).await?;
                let params = row_params(Storage::Blob, text(&key), SqlValue::Null, SqlValue::Null);
                let written = self.atomically(&mut || {
                    self.exec(&upsert, &params)?;
                    self.drop_chunks(old_chunk)
                });
                if let Err(e) = written {
                    // The row still names the old object (or none); a new key would be orphaned.
                    if old_key.as_deref() != Some(key.as_str()) {
                        let _ = blobs.delete(std::slice::from_ref(&key)).await;
                    }
                    return Err(e);
                }
                if let Some(k) = old_key.filter(|k| *k != key) {
                    self.delete_blobs(vec![k]).await?;
                }
            }
        }
        Ok(())
    }

    fn next_chunk_id(&self) -> Result<i64, FsError> {
        let rows =
            self.exec(&format!("SELECT COALESCE(MAX(chunk_id), 0) + 1 FROM {}", self.c), &[])?;
        Ok(rows.first().map(|r| col_i64(r, 0)).unwrap_or(1))
    }

    pub(crate) fn drop_chunks(&self, id: Option<i64>) -> Result<(), FsError> {
        if let Some(id) = id {
            self.exec(
                &format!("DELETE FROM {} WHERE chunk_id = ?", self.c),
                &[SqlValue::Integer(id)],
            )?;
        }
        Ok(())
    }

    /// Appends text to a file, creating it when missing. An inline text file grows in one
    /// statement; other files are read, extended and rewritten.
    pub async fn append_file(&self, path: &str, content: &str, mime: &str) -> Result<(), FsError> {
        let norm = path::normalize(path, "open")?;
        let add = content.len() as i64;
        // The grown file must still be one the write path would keep inline.
        let limit = match &self.blobs {
            Some(_) => self.inline_threshold.min(MAX_INLINE_ROW_BYTES + 1),
            None => MAX_INLINE_ROW_BYTES + 1,
        } as i64;
        let t = &self.t;
        let w = self.writer().as_str();
        let appended = self.exec_changed(
            &format!(
                "UPDATE {t} SET content = content || ?, size = size + ?, modified_at = ?,
                   version = version + 1, hash = NULL, changed_by = '{w}', undo = NULL
                 WHERE path = ? AND type = 'file' AND storage = 'inline'
                   AND typeof(content) = 'text' AND size + ? < ? AND size + ? <= ?"
            ),
            &[
                text(content),
                SqlValue::Integer(add),
                SqlValue::Integer(self.now()),
                text(&norm),
                SqlValue::Integer(add),
                SqlValue::Integer(limit),
                SqlValue::Integer(add),
                SqlValue::Integer(self.max_file_size as i64),
            ],
        )?;
        if appended {
            return self.changed(path, Ok(()));
        }
        let existing = self.read_content(path).await?;
        let mime = match (&existing, self.stat(path)?) {
            (Some(_), Some(info)) => info.mime_type,
            _ => mime.to_owned(),
        };
        let combined = match existing {
            None => Content::Text(content.to_owned()),
            Some(Content::Text(mut s)) => {
                s.push_str(content);
                Content::Text(s)
            }
            Some(Content::Bytes(mut b)) => {
                b.extend_from_slice(content.as_bytes());
                match String::from_utf8(b) {
                    Ok(s) => Content::Text(s),
                    Err(e) => Content::Bytes(e.into_bytes()),
                }
            }
        };
        self.write_content(path, combined, &mime).await
    }
}

/// The `seen` a statement that changes a file's content sets (in an `UPDATE`, or an upsert's
/// `DO UPDATE`, where `version` is the old row's): the model's own write notes the version it
/// leaves as seen on the row (see `Workspace::init_history`); any other write leaves it unnoted.
fn seen_after_change(w: Writer) -> &'static str {
    if w == Writer::Tool {
        "version + 1"
    } else {
        "NULL"
    }
}
