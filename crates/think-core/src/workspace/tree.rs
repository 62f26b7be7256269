//! Metadata, directories and the operations that touch many rows: stat, listing, glob,
//! mkdir, rm, cp, mv, symlinks, totals and diffs.

use super::io::Resolved;
use super::*;

/// Ancestors [`Workspace::make_parents`] creates in one statement: three bound parameters
/// each, and two more, within the platform's limit.
const MAX_FAST_PARENTS: usize = (MAX_PARAMS - 2) / 3;

impl Workspace {
    /// Metadata of `path`, following symlinks; `None` when nothing is there.
    pub fn stat(&self, path: &str) -> Result<Option<FileInfo>, FsError> {
        self.stat_impl(path, true)
    }

    /// Metadata of `path` itself: a symlink is reported, not followed.
    pub fn lstat(&self, path: &str) -> Result<Option<FileInfo>, FsError> {
        self.stat_impl(path, false)
    }

    fn stat_impl(&self, path: &str, follow: bool) -> Result<Option<FileInfo>, FsError> {
        let norm = path::normalize(path, "stat")?;
        let sql = format!("SELECT {INFO_COLS} FROM {} WHERE path = ?", self.t);
        let rows = self.exec(&sql, &[text(&norm)])?;
        let info = rows.into_iter().next().map(info_from_row);
        let resolved_path = match &info {
            Some(i) if !(follow && i.kind == EntryType::Symlink) => return Ok(info),
            _ => match self.resolve(&norm, follow, "stat", path) {
                Ok(Resolved { path: p, node: Some(_), .. }) => p,
                Ok(_) => return Ok(None),
                Err(e) if e.errno() == Some(Errno::NotDir) => return Ok(None),
                Err(e) => return Err(e),
            },
        };
        let rows = self.exec(&sql, &[text(&resolved_path)])?;
        Ok(rows.into_iter().next().map(info_from_row))
    }

    /// [`Workspace::stat`] plus the content of an inline text file (`text/*`), fetched by the
    /// same statement, so reading a text file costs one round trip instead of two. Other
    /// entries come back without content.
    pub fn stat_with_text(
        &self,
        path: &str,
    ) -> Result<Option<(FileInfo, Option<String>)>, FsError> {
        let norm = path::normalize(path, "stat")?;
        let rows = self.exec(
            &format!(
                "SELECT {INFO_COLS}, CASE WHEN type = 'file' AND storage = 'inline'
                   AND substr(mime_type, 1, 5) = 'text/' THEN content END
                 FROM {} WHERE path = ?",
                self.t
            ),
            &[text(&norm)],
        )?;
        match rows.into_iter().next() {
            Some(mut row) if row.get(2).and_then(SqlValue::as_str) != Some("symlink") => {
                let content = match row.pop() {
                    Some(SqlValue::Text(s)) => Some(s),
                    Some(SqlValue::Blob(b)) => Some(Content::Bytes(b).into_text()),
                    _ => None,
                };
                Ok(Some((info_from_row(row), content)))
            }
            _ => Ok(self.stat(path)?.map(|info| (info, None))),
        }
    }

    /// Whether an entry exists at `path` (a dangling symlink counts, as in Think).
    pub fn exists(&self, path: &str) -> Result<bool, FsError> {
        Ok(self.lstat(path)?.is_some())
    }

    /// One page of a directory's entries: directories, then files, then symlinks, each by
    /// name. A missing directory (or a file) lists as empty, as in Think.
    pub fn read_dir(
        &self,
        dir: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<FileInfo>, FsError> {
        Ok(self
            .read_dir_rows(dir, INFO_COLS, limit, offset)?
            .into_iter()
            .map(info_from_row)
            .collect())
    }

    /// [`Workspace::read_dir`] with just the name, type and size of each entry: what a
    /// listing shows, in three columns instead of eight.
    pub fn read_dir_brief(
        &self,
        dir: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<(String, EntryType, u64)>, FsError> {
        Ok(self
            .read_dir_rows(dir, &format!("name, {TYPE_NUMBER}, size"), limit, offset)?
            .into_iter()
            .map(|mut row| {
                let kind = type_from_number(col_i64(&row, 1));
                let size = col_i64(&row, 2).max(0) as u64;
                (take_str(&mut row, 0), kind, size)
            })
            .collect())
    }

    /// The rows (`cols`) of one page of a directory, following a symlink to it.
    fn read_dir_rows(
        &self,
        dir: &str,
        cols: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<Row>, FsError> {
        let norm = path::normalize(dir, "scandir")?;
        let sql = format!(
            "SELECT {cols} FROM {} WHERE parent_path = ? ORDER BY type, name LIMIT ? OFFSET ?",
            self.t
        );
        let params = |p: &str| {
            [
                text(p),
                SqlValue::Integer(limit.min(i64::MAX as usize) as i64),
                SqlValue::Integer(offset.min(i64::MAX as usize) as i64),
            ]
        };
        let rows = self.exec(&sql, &params(&norm))?;
        if !rows.is_empty() || norm == "/" {
            return Ok(rows);
        }
        // Empty: the directory may be reached through a symlink.
        match self.resolve(&norm, true, "scandir", dir) {
            Ok(r)
                if r.path != norm
                    && r.node.as_ref().is_some_and(|n| n.kind == EntryType::Directory) =>
            {
                self.exec(&sql, &params(&r.path))
            }
            Ok(_) => Ok(Vec::new()),
            Err(e) if e.errno() == Some(Errno::NotDir) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Every entry whose path matches the glob, ordered by path. The root itself is never
    /// returned. SQL narrows by key range and literal suffix; the glob decides in Rust.
    pub fn glob(&self, pattern: &str) -> Result<Vec<FileInfo>, FsError> {
        let g = Glob::new(pattern)?;
        self.glob_compiled(&g)
    }

    /// [`Workspace::glob`] with an already compiled pattern.
    pub fn glob_compiled(&self, g: &Glob) -> Result<Vec<FileInfo>, FsError> {
        Ok(self.glob_rows(g, INFO_COLS, "")?.into_iter().map(info_from_row).collect())
    }

    /// The path and type of every entry whose path matches the glob, ordered by path: what
    /// a search by name shows, in two columns instead of eight.
    pub fn glob_paths(&self, pattern: &str) -> Result<Vec<(String, EntryType)>, FsError> {
        let g = Glob::new(pattern)?;
        Ok(self
            .glob_rows(&g, &format!("path, {TYPE_NUMBER}"), "")?
            .into_iter()
            .map(|mut row| (take_str(&mut row, 0), type_from_number(col_i64(&row, 1))))
            .collect())
    }

    /// The path and size of every file (not directory or symlink) whose path matches the
    /// glob, ordered by path: what a search over file contents needs, in two columns.
    pub fn glob_files(&self, pattern: &str) -> Result<Vec<(String, u64)>, FsError> {
        let g = Glob::new(pattern)?;
        Ok(self
            .glob_rows(&g, "path, size", "AND type = 'file'")?
            .into_iter()
            .map(|mut row| {
                let size = col_i64(&row, 1).max(0) as u64;
                (take_str(&mut row, 0), size)
            })
            .collect())
    }

    /// The path, size and mtime (ms) of every file below `dir`, ordered by path: one range
    /// scan of three columns, for callers that detect changes under a folder (skills).
    pub fn files_below(&self, dir: &str) -> Result<Vec<(String, u64, i64)>, FsError> {
        let dir = path::normalize(dir, "scandir")?;
        let (lo, hi) = path::subtree_bounds(&dir);
        let t = &self.t;
        let rows = self.exec(
            &format!(
                "SELECT path, size, modified_at FROM {t}
                 WHERE path > ? AND path < ? AND type = 'file' ORDER BY path"
            ),
            &[text(&lo), text(&hi)],
        )?;
        Ok(rows
            .into_iter()
            .map(|mut row| {
                let size = col_i64(&row, 1).max(0) as u64;
                let mtime = col_i64(&row, 2);
                (take_str(&mut row, 0), size, mtime)
            })
            .collect())
    }

    /// One page of the files matching `pattern`, in path order, after `after`: at most
    /// `limit` files, with the text of each inline file of at most `text_max` bytes, read
    /// by the same statement. Returns the page and the `after` of the next one (`None` at
    /// the end). When the glob needs more than SQL can decide, the first page lists every
    /// matching file without texts. A search reads a whole tree this way in a few
    /// statements, with the memory of a page bounded by `limit * text_max`.
    pub fn glob_texts(
        &self,
        pattern: &str,
        after: Option<&str>,
        limit: usize,
        text_max: u64,
    ) -> Result<(Vec<FileText>, Option<String>), FsError> {
        let cached =
            self.last_glob.borrow().as_ref().filter(|(p, _)| p == pattern).map(|(_, g)| g.clone());
        let g = match cached {
            Some(g) => g,
            None => {
                let g = Rc::new(Glob::new(pattern)?);
                *self.last_glob.borrow_mut() = Some((pattern.to_owned(), g.clone()));
                g
            }
        };
        if !g.sql_exact() {
            if after.is_some() {
                return Ok((Vec::new(), None));
            }
            let files = self
                .glob_rows(&g, "path, size", "AND type = 'file'")?
                .into_iter()
                .map(|mut row| FileText {
                    size: col_i64(&row, 1).max(0) as u64,
                    path: take_str(&mut row, 0),
                    text: None,
                })
                .collect();
            return Ok((files, None));
        }
        let t = &self.t;
        let cols = "path, size, CASE WHEN storage = 'inline' AND size <= ? THEN content END";
        let text_max = SqlValue::Integer(text_max.min(i64::MAX as u64) as i64);
        let limit = limit.max(1);
        let mut params = vec![text_max];
        let mut sql = format!("SELECT {cols} FROM {t} WHERE type = 'file'");
        match &g.prefilter {
            Prefilter::Exact(p) => {
                sql.push_str(" AND path = ?");
                params.push(text(p));
            }
            Prefilter::Range { lo, hi } => {
                sql.push_str(" AND path >= ? AND path < ?");
                params.push(text(lo));
                params.push(text(hi));
                if let Some(suffix) = &g.suffix {
                    sql.push_str(" AND substr(path, ?) = ?");
                    params.push(SqlValue::Integer(-(suffix.chars().count() as i64)));
                    params.push(text(suffix));
                }
            }
        }
        if let Some(a) = after {
            sql.push_str(" AND path > ?");
            params.push(text(a));
        }
        sql.push_str(" ORDER BY path LIMIT ?");
        params.push(SqlValue::Integer(limit.min(i64::MAX as usize) as i64));
        let rows = self.exec(&sql, &params)?;
        let full = rows.len() == limit;
        let files: Vec<FileText> = rows
            .into_iter()
            .map(|mut row| FileText {
                size: col_i64(&row, 1).max(0) as u64,
                text: match row.pop() {
                    Some(SqlValue::Text(s)) => Some(s),
                    Some(SqlValue::Blob(b)) => Some(Content::Bytes(b).into_text()),
                    _ => None,
                },
                path: take_str(&mut row, 0),
            })
            .collect();
        let next = if full { files.last().map(|f| f.path.clone()) } else { None };
        Ok((files, next))
    }

    /// Rows (`cols`, starting with `path`) of the entries matching `g`, ordered by path,
    /// narrowed in SQL by key range, literal suffix and `and` (a condition or empty).
    pub(super) fn glob_rows(&self, g: &Glob, cols: &str, and: &str) -> Result<Vec<Row>, FsError> {
        let t = &self.t;
        let rows = match &g.prefilter {
            Prefilter::Exact(p) => {
                self.exec(&format!("SELECT {cols} FROM {t} WHERE path = ? {and}"), &[text(p)])?
            }
            Prefilter::Range { lo, hi } => match &g.suffix {
                Some(suffix) => self.exec(
                    &format!(
                        "SELECT {cols} FROM {t} WHERE path >= ? AND path < ?
                         AND substr(path, ?) = ? {and} ORDER BY path"
                    ),
                    &[
                        text(lo),
                        text(hi),
                        SqlValue::Integer(-(suffix.chars().count() as i64)),
                        text(suffix),
                    ],
                )?,
                None => self.exec(
                    &format!(
                        "SELECT {cols} FROM {t} WHERE path >= ? AND path < ? {and} ORDER BY path"
                    ),
                    &[text(lo), text(hi)],
                )?,
            },
        };
        let everything = g.matches_everything();
        Ok(rows
            .into_iter()
            .filter(|r| {
                let p = r.first().and_then(SqlValue::as_str).unwrap_or("/");
                p != "/" && (everything || g.is_match(p))
            })
            .collect())
    }

    /// Creates a directory. Without `recursive` the parent must exist and the path must
    /// not; with it, missing ancestors are created and an existing directory is fine.
    pub fn mkdir(&self, path: &str, recursive: bool) -> Result<(), FsError> {
        let result = self.mkdir_unobserved(path, recursive);
        self.changed(path, result)
    }

    fn mkdir_unobserved(&self, path: &str, recursive: bool) -> Result<(), FsError> {
        let norm = path::normalize(path, "mkdir")?;
        if norm == "/" {
            return Ok(());
        }
        let parent = path::parent(&norm).unwrap_or("/");
        let t = &self.t;
        let now = SqlValue::Integer(self.now());
        let inserted = self.exec_changed(
            &format!(
                "INSERT INTO {t} (path, parent_path, name, type, size, created_at, modified_at)
                 SELECT ?, ?, ?, 'directory', 0, ?, ?
                 WHERE EXISTS (SELECT 1 FROM {t} WHERE path = ? AND type = 'directory')
                 ON CONFLICT(path) DO NOTHING"
            ),
            &[
                text(&norm),
                text(parent),
                text(path::basename(&norm)),
                now.clone(),
                now,
                text(parent),
            ],
        )?;
        if inserted {
            return Ok(());
        }
        let r = self.resolve(&norm, false, "mkdir", path)?;
        match &r.node {
            Some(n) if n.kind == EntryType::Directory && recursive => return Ok(()),
            Some(_) => return Err(FsError::new(Errno::Exist, "mkdir", path)),
            None => {}
        }
        if recursive || r.parent_exists {
            self.ensure_dirs(&r.path, path)
        } else {
            Err(FsError::new(Errno::NoEnt, "mkdir", path))
        }
    }

    /// Makes `dir` and all its ancestors exist as directories: one read of the chain, one
    /// batched insert of what is missing. Symlinked ancestors are followed.
    pub(crate) fn ensure_dirs(&self, dir: &str, shown: &str) -> Result<(), FsError> {
        let r = self.resolve(dir, true, "mkdir", shown)?;
        match &r.node {
            Some(n) if n.kind == EntryType::Directory => return Ok(()),
            Some(_) => return Err(FsError::new(Errno::NotDir, "mkdir", shown)),
            None => {}
        }
        let mut missing: Vec<&str> =
            path::ancestors(&r.path).get(r.existing_ancestors..).unwrap_or_default().to_vec();
        missing.push(&r.path);
        self.create_dirs(&missing)
    }

    /// Creates the ancestors of a resolved path that do not exist yet.
    pub(crate) fn create_missing_ancestors(&self, r: &Resolved) -> Result<(), FsError> {
        if r.parent_exists {
            return Ok(());
        }
        let ancestors = path::ancestors(&r.path);
        self.create_dirs(ancestors.get(r.existing_ancestors..).unwrap_or_default())
    }

    /// Creates the missing ancestors of normalized `path` in one statement, if every one that
    /// exists is a directory (a symlink or a file among them needs the general path, which
    /// follows or refuses it); whether it created any. At most [`MAX_FAST_PARENTS`] levels.
    pub(crate) fn make_parents(&self, path: &str) -> Result<bool, FsError> {
        let dirs = path::ancestors(path);
        if dirs.is_empty() || dirs.len() > MAX_FAST_PARENTS {
            return Ok(false);
        }
        self.insert_dirs(&dirs, true)
    }

    /// Inserts directory rows for `dirs` (parents first), batched to the SQL limits.
    fn create_dirs(&self, missing: &[&str]) -> Result<(), FsError> {
        for batch in batches(missing, 3, 2) {
            self.insert_dirs(batch, false)?;
        }
        Ok(())
    }

    /// One statement inserting directory rows for `dirs` (existing paths are left as they
    /// are); with `only_under_dirs`, none unless every one of `dirs` that exists is a
    /// directory. Whether it inserted any. Three bound parameters per entry, and two more.
    fn insert_dirs(&self, dirs: &[&str], only_under_dirs: bool) -> Result<bool, FsError> {
        let mut params = Vec::with_capacity(3 * dirs.len() + 2);
        for d in dirs {
            params.extend([text(d), text(path::parent(d).unwrap_or("/")), text(path::basename(d))]);
        }
        let now = SqlValue::Integer(self.now());
        params.extend([now.clone(), now]);
        let values = vec!["(?, ?, ?)"; dirs.len()].join(", ");
        let t = &self.t;
        let only = if only_under_dirs {
            format!(
                "NOT EXISTS (SELECT 1 FROM {t} f, a WHERE f.path = a.p AND f.type <> 'directory')"
            )
        } else {
            "true".to_owned()
        };
        self.exec_changed(
            &format!(
                "WITH a(p, pp, n) AS (VALUES {values})
                 INSERT INTO {t} (path, parent_path, name, type, size, created_at, modified_at)
                 SELECT p, pp, n, 'directory', 0, ?, ? FROM a WHERE {only}
                 ON CONFLICT(path) DO NOTHING"
            ),
            &params,
        )
    }

    /// Removes `path`. A non-empty directory needs `recursive` (`ENOTEMPTY` otherwise); a
    /// missing path is an error unless `force`; the root is `EPERM`. Blob objects and chunks
    /// of everything removed are deleted too.
    pub async fn rm(&self, path: &str, recursive: bool, force: bool) -> Result<(), FsError> {
        let result = self.rm_unobserved(path, recursive, force).await;
        self.changed(path, result)
    }

    async fn rm_unobserved(&self, path: &str, recursive: bool, force: bool) -> Result<(), FsError> {
        let norm = path::normalize(path, "rm")?;
        if norm == "/" {
            return Err(FsError::new(Errno::Perm, "rm", path));
        }
        let t = &self.t;
        let rows = self.exec(
            &format!(
                "SELECT {NODE_COLS}, EXISTS (SELECT 1 FROM {t} WHERE parent_path = ?) FROM {t} WHERE path = ?"
            ),
            &[text(&norm), text(&norm)],
        )?;
        let (node, has_children) = match rows.first() {
            Some(row) => (node_from_row(row), col_i64(row, 6) != 0),
            None => {
                let missing =
                    || if force { Ok(()) } else { Err(FsError::new(Errno::NoEnt, "rm", path)) };
                return match self.resolve(&norm, false, "rm", path) {
                    Ok(r) if r.path != norm && r.node.is_some() => {
                        Box::pin(self.rm(&r.path, recursive, force)).await
                    }
                    Ok(_) => missing(),
                    Err(e) if e.errno() == Some(Errno::NotDir) => missing(),
                    Err(e) => Err(e),
                };
            }
        };
        if node.kind == EntryType::Directory && has_children {
            if !recursive {
                return Err(FsError::new(Errno::NotEmpty, "rm", path));
            }
            let (lo, hi) = path::subtree_bounds(&norm);
            let keys: Vec<String> = self
                .exec(
                    &format!(
                        "SELECT r2_key FROM {t} WHERE path > ? AND path < ? AND storage = 'r2'"
                    ),
                    &[text(&lo), text(&hi)],
                )?
                .iter()
                .filter_map(|r| col_opt_str(r, 0))
                .collect();
            self.atomically(&mut || {
                self.exec(
                    &format!(
                        "DELETE FROM {} WHERE chunk_id IN (SELECT chunk_id FROM {t}
                         WHERE path > ? AND path < ? AND storage = 'chunked')",
                        self.c
                    ),
                    &[text(&lo), text(&hi)],
                )?;
                self.exec(
                    &format!("DELETE FROM {t} WHERE path = ? OR (path > ? AND path < ?)"),
                    &[text(&norm), text(&lo), text(&hi)],
                )?;
                Ok(())
            })?;
            return self.delete_blobs(keys).await;
        }
        let chunk = node.chunk_id.filter(|_| node.storage == Storage::Chunked);
        self.atomically(&mut || {
            self.drop_chunks(chunk)?;
            self.exec(&format!("DELETE FROM {t} WHERE path = ?"), &[text(&norm)])?;
            Ok(())
        })?;
        match node.r2_key.filter(|_| node.storage == Storage::Blob) {
            Some(k) => self.delete_blobs(vec![k]).await,
            None => Ok(()),
        }
    }

    /// Finds the entry at `path` without following a final symlink (but following
    /// symlinked ancestors); `ENOENT` when absent.
    fn lnode(&self, path: &str, norm: &str, syscall: &'static str) -> Result<Node, FsError> {
        if let Some(n) = self.lookup(norm)? {
            return Ok(n);
        }
        match self.resolve(norm, false, syscall, path) {
            Ok(Resolved { node: Some(n), .. }) => Ok(n),
            Ok(_) => Err(FsError::new(Errno::NoEnt, syscall, path)),
            Err(e) if e.errno() == Some(Errno::NotDir) => {
                Err(FsError::new(Errno::NoEnt, syscall, path))
            }
            Err(e) => Err(e),
        }
    }

    /// Copies `src` to `dest`. Directories need `recursive`; copying onto an existing
    /// directory merges into it; symlinks are copied as symlinks.
    pub async fn cp(&self, src: &str, dest: &str, recursive: bool) -> Result<(), FsError> {
        let result = self.cp_unobserved(src, dest, recursive).await;
        self.changed(dest, result)
    }

    async fn cp_unobserved(&self, src: &str, dest: &str, recursive: bool) -> Result<(), FsError> {
        let s = path::normalize(src, "cp")?;
        let d = path::normalize(dest, "cp")?;
        let node = self.lnode(src, &s, "cp")?;
        if node.path == d {
            return Err(FsError::new(Errno::Inval, "cp", dest));
        }
        match node.kind {
            EntryType::Symlink => self.symlink(node.target.as_deref().unwrap_or(""), &d),
            EntryType::File => self.copy_file(&node, &d, dest).await,
            EntryType::Directory => {
                if !recursive {
                    return Err(FsError::new(Errno::IsDir, "cp", src));
                }
                if path::is_within(&d, &node.path) {
                    return Err(FsError::new(Errno::Inval, "cp", dest));
                }
                self.copy_tree(&node.path, &d, dest).await
            }
        }
    }

    async fn copy_file(&self, node: &Node, d: &str, shown: &str) -> Result<(), FsError> {
        let dest = self.resolve(d, true, "cp", shown)?;
        if dest.node.as_ref().is_some_and(|n| n.kind == EntryType::Directory) {
            return Err(FsError::new(Errno::IsDir, "cp", shown));
        }
        let mime = self
            .exec(&format!("SELECT mime_type FROM {} WHERE path = ?", self.t), &[text(&node.path)])?
            .first()
            .map(|r| col_str(r, 0))
            .unwrap_or_default();
        let plain_dest = dest.node.as_ref().is_none_or(|n| n.storage == Storage::Inline);
        if node.storage == Storage::Inline && plain_dest {
            self.create_missing_ancestors(&dest)?;
            // Copy inside SQLite so the content never crosses into wasm.
            let t = &self.t;
            let w = self.writer().as_str();
            let now = SqlValue::Integer(self.now());
            self.exec(
                &format!(
                    "INSERT INTO {t} (path, parent_path, name, type, mime_type, size, storage,
                       created_at, modified_at, content, version, hash, changed_by)
                     SELECT ?, ?, ?, 'file', mime_type, size, 'inline', ?, ?, content, 1, hash,
                       '{w}'
                     FROM {t} WHERE path = ?
                     ON CONFLICT(path) DO UPDATE SET mime_type = excluded.mime_type,
                       size = excluded.size, content = excluded.content,
                       modified_at = excluded.modified_at, version = {t}.version + 1,
                       hash = excluded.hash, changed_by = excluded.changed_by"
                ),
                &[
                    text(&dest.path),
                    text(path::parent(&dest.path).unwrap_or("/")),
                    text(path::basename(&dest.path)),
                    now.clone(),
                    now,
                    text(&node.path),
                ],
            )?;
            return Ok(());
        }
        let content = self.load(node, shown).await?;
        self.write_content(&dest.path, content, &mime).await
    }

    async fn copy_tree(&self, s: &str, d: &str, shown: &str) -> Result<(), FsError> {
        let dest = self.resolve(d, true, "cp", shown)?;
        if path::is_within(&dest.path, s) {
            // Reached through a symlink: the copy would land inside its own source.
            return Err(FsError::new(Errno::Inval, "cp", shown));
        }
        match &dest.node {
            Some(n) if n.kind == EntryType::Directory => {
                // Merge into an existing directory entry by entry.
                let mut offset = 0;
                loop {
                    let page = self.read_dir(s, 1000, offset)?;
                    if page.is_empty() {
                        return Ok(());
                    }
                    offset += page.len();
                    for child in page {
                        let to = path::join(&dest.path, &child.name);
                        Box::pin(self.cp(&child.path, &to, true)).await?;
                    }
                }
            }
            Some(_) => return Err(FsError::new(Errno::NotDir, "cp", shown)),
            None => {}
        }
        self.create_missing_ancestors(&dest)?;
        let d = dest.path;
        let t = &self.t;
        let (lo, hi) = path::subtree_bounds(s);
        let skip = s.chars().count() as i64 + 1;
        let w = self.writer().as_str();
        let now = SqlValue::Integer(self.now());
        // Everything but externally stored files is copied in one statement.
        self.exec(
            &format!(
                "INSERT INTO {t} (path, parent_path, name, type, mime_type, size, storage,
                   target, created_at, modified_at, content, hash, changed_by)
                 SELECT ? || substr(path, ?),
                   CASE WHEN path = ? THEN ? ELSE ? || substr(parent_path, ?) END,
                   CASE WHEN path = ? THEN ? ELSE name END,
                   type, mime_type, size, storage, target, ?, ?, content, hash, '{w}'
                 FROM {t}
                 WHERE (path = ? OR (path > ? AND path < ?))
                   AND NOT (type = 'file' AND storage != 'inline')"
            ),
            &[
                text(&d),
                SqlValue::Integer(skip),
                text(s),
                text(path::parent(&d).unwrap_or("/")),
                text(&d),
                SqlValue::Integer(skip),
                text(s),
                text(path::basename(&d)),
                now.clone(),
                now,
                text(s),
                text(&lo),
                text(&hi),
            ],
        )?;
        let externals = self.exec(
            &format!(
                "SELECT {NODE_COLS} FROM {t} WHERE path > ? AND path < ? AND type = 'file'
                 AND storage != 'inline' ORDER BY path"
            ),
            &[text(&lo), text(&hi)],
        )?;
        for row in &externals {
            let n = node_from_row(row);
            let to = path::rebase(&n.path, s, &d);
            self.copy_file(&n, &to, shown).await?;
        }
        Ok(())
    }

    /// Moves (renames) `src` to `dest` with POSIX rename rules: a file replaces a file, a
    /// directory may replace an empty directory, and a directory cannot move into itself.
    pub async fn mv(&self, src: &str, dest: &str) -> Result<(), FsError> {
        let result = self.mv_unobserved(src, dest).await;
        let result = self.changed(src, result);
        self.changed(dest, result)
    }

    async fn mv_unobserved(&self, src: &str, dest: &str) -> Result<(), FsError> {
        let s_norm = path::normalize(src, "rename")?;
        let d_norm = path::normalize(dest, "rename")?;
        if s_norm == "/" {
            return Err(FsError::new(Errno::Perm, "rename", src));
        }
        let node = self.lnode(src, &s_norm, "rename")?;
        let s = node.path.clone();
        // The destination's directory is resolved; its last segment is not followed.
        let d_parent = path::parent(&d_norm).unwrap_or("/");
        let d_parent = if d_norm == "/" {
            return Err(FsError::new(Errno::Perm, "rename", dest));
        } else {
            let r = self.resolve(d_parent, true, "rename", dest)?;
            match &r.node {
                Some(n) if n.kind == EntryType::Directory => r.path,
                Some(_) => return Err(FsError::new(Errno::NotDir, "rename", dest)),
                None => {
                    self.ensure_dirs(&r.path, dest)?;
                    r.path
                }
            }
        };
        let d = path::join(&d_parent, path::basename(&d_norm));
        if d == s {
            return Ok(());
        }
        if node.kind == EntryType::Directory && path::is_within(&d, &s) {
            return Err(FsError::new(Errno::Inval, "rename", dest));
        }
        let t = &self.t;
        let w = self.writer().as_str();
        let existing = self.lookup(&d)?;
        let mut replaced: Option<Node> = None;
        if let Some(e) = existing {
            match (node.kind == EntryType::Directory, e.kind == EntryType::Directory) {
                (false, true) => return Err(FsError::new(Errno::IsDir, "rename", dest)),
                (true, false) => return Err(FsError::new(Errno::NotDir, "rename", dest)),
                (true, true) => {
                    let busy = self.exec(
                        &format!("SELECT 1 FROM {t} WHERE parent_path = ? LIMIT 1"),
                        &[text(&d)],
                    )?;
                    if !busy.is_empty() {
                        return Err(FsError::new(Errno::NotEmpty, "rename", dest));
                    }
                }
                (false, false) => {}
            }
            replaced = Some(e);
        }
        // Blob keys follow paths, so objects are copied to their new keys before the rows
        // move and the old ones are deleted after: a failure leaves at most an orphan.
        let (lo, hi) = path::subtree_bounds(&s);
        let keep_keys = self.keeps_blob_keys();
        let moving_blobs: Vec<(String, String)> = match node.kind {
            _ if keep_keys => Vec::new(),
            EntryType::Directory => self
                .exec(
                    &format!("SELECT path, r2_key FROM {t} WHERE path > ? AND path < ? AND storage = 'r2'"),
                    &[text(&lo), text(&hi)],
                )?
                .iter()
                .map(|r| (col_str(r, 0), col_opt_str(r, 1).unwrap_or_default()))
                .collect(),
            _ if node.storage == Storage::Blob => {
                vec![(s.clone(), node.r2_key.clone().unwrap_or_default())]
            }
            _ => Vec::new(),
        };
        let mut copied: Vec<String> = Vec::new();
        for (p, key) in &moving_blobs {
            let blobs = self.blobs(src)?;
            let new_key = self.blob_key(&path::rebase(p, &s, &d));
            if let Some(bytes) = blobs.get(key).await? {
                let mime = self
                    .exec(&format!("SELECT mime_type FROM {t} WHERE path = ?"), &[text(p)])?
                    .first()
                    .map(|r| col_str(r, 0))
                    .unwrap_or_default();
                blobs.put(&new_key, &bytes, &mime).await?;
                copied.push(new_key);
            }
        }
        let key_prefix = format!("{}/{}", self.blob_prefix, self.namespace);
        let skip = s.chars().count() as i64 + 1;
        let replaced_chunk =
            replaced.as_ref().filter(|n| n.storage == Storage::Chunked).and_then(|n| n.chunk_id);
        let moved = self.atomically(&mut || {
            if replaced.is_some() {
                self.drop_chunks(replaced_chunk)?;
                self.exec(&format!("DELETE FROM {t} WHERE path = ?"), &[text(&d)])?;
            }
            self.exec(
                &format!(
                    "UPDATE {t} SET
                       path = ? || substr(path, ?),
                       parent_path = CASE WHEN path = ? THEN ? ELSE ? || substr(parent_path, ?) END,
                       name = CASE WHEN path = ? THEN ? ELSE name END,
                       r2_key = CASE WHEN storage = 'r2' AND NOT ? THEN ? || ? || substr(path, ?)
                         ELSE r2_key END,
                       version = version + 1, changed_by = '{w}'
                     WHERE path = ? OR (path > ? AND path < ?)"
                ),
                &[
                    text(&d),
                    SqlValue::Integer(skip),
                    text(&s),
                    text(&d_parent),
                    text(&d),
                    SqlValue::Integer(skip),
                    text(&s),
                    text(path::basename(&d)),
                    SqlValue::Integer(keep_keys as i64),
                    text(&key_prefix),
                    text(&d),
                    SqlValue::Integer(skip),
                    text(&s),
                    text(&lo),
                    text(&hi),
                ],
            )?;
            Ok(())
        });
        if let Err(e) = moved {
            let _ = self.delete_blobs(copied).await;
            return Err(e);
        }
        let mut stale: Vec<String> = moving_blobs.into_iter().map(|(_, k)| k).collect();
        if let Some(r) = replaced {
            if let Some(k) = r.r2_key.filter(|k| r.storage == Storage::Blob && !copied.contains(k))
            {
                stale.push(k);
            }
        }
        stale.retain(|k| !copied.contains(k));
        self.delete_blobs(stale).await
    }

    /// Creates a symlink at `link` pointing to `target` (stored verbatim, resolved on use).
    pub fn symlink(&self, target: &str, link: &str) -> Result<(), FsError> {
        let result = self.symlink_unobserved(target, link);
        self.changed(link, result)
    }

    fn symlink_unobserved(&self, target: &str, link: &str) -> Result<(), FsError> {
        if target.trim().is_empty() {
            return Err(FsError::new(Errno::Inval, "symlink", link));
        }
        if target.chars().count() > MAX_SYMLINK_TARGET_LENGTH {
            return Err(FsError::new(Errno::NameTooLong, "symlink", link));
        }
        let norm = path::normalize(link, "symlink")?;
        if norm == "/" {
            return Err(FsError::new(Errno::Perm, "symlink", link));
        }
        let r = self.resolve(&norm, false, "symlink", link)?;
        if r.node.is_some() {
            return Err(FsError::new(Errno::Exist, "symlink", link));
        }
        self.create_missing_ancestors(&r)?;
        let now = SqlValue::Integer(self.now());
        self.exec(
            &format!(
                "INSERT INTO {} (path, parent_path, name, type, size, target, created_at, modified_at)
                 VALUES (?, ?, ?, 'symlink', 0, ?, ?, ?)",
                self.t
            ),
            &[
                text(&r.path),
                text(path::parent(&r.path).unwrap_or("/")),
                text(path::basename(&r.path)),
                text(target),
                now.clone(),
                now,
            ],
        )?;
        Ok(())
    }

    /// The target of the symlink at `path`; `EINVAL` when it is not a symlink.
    pub fn readlink(&self, path: &str) -> Result<String, FsError> {
        let norm = path::normalize(path, "readlink")?;
        let node = self.lnode(path, &norm, "readlink")?;
        match (node.kind, node.target) {
            (EntryType::Symlink, Some(t)) => Ok(t),
            _ => Err(FsError::new(Errno::Inval, "readlink", path)),
        }
    }

    /// Totals over the namespace, in one query.
    pub fn info(&self) -> Result<WorkspaceInfo, FsError> {
        let rows = self.exec(
            &format!(
                "SELECT
                   COALESCE(SUM(type = 'file'), 0),
                   COALESCE(SUM(type = 'directory'), 0),
                   COALESCE(SUM(CASE WHEN type = 'file' THEN size ELSE 0 END), 0),
                   COALESCE(SUM(type = 'file' AND storage = 'r2'), 0)
                 FROM {}",
                self.t
            ),
            &[],
        )?;
        let row = rows.first();
        let get = |i| row.map(|r| col_i64(r, i).max(0) as u64).unwrap_or(0);
        let (grep_index_rows, grep_index_bytes) = self.grams_size()?;
        Ok(WorkspaceInfo {
            grep_index_rows,
            grep_index_bytes,
            file_count: get(0),
            directory_count: get(1),
            total_bytes: get(2),
            r2_file_count: get(3),
        })
    }

    /// A unified diff between two files (`ENOENT` if either is missing, `EFBIG` past
    /// [`MAX_DIFF_LINES`] lines).
    pub async fn diff(&self, path_a: &str, path_b: &str) -> Result<String, FsError> {
        let a = self
            .read_file(path_a)
            .await?
            .ok_or_else(|| FsError::new(Errno::NoEnt, "open", path_a))?;
        let b = self
            .read_file(path_b)
            .await?
            .ok_or_else(|| FsError::new(Errno::NoEnt, "open", path_b))?;
        if diff::line_count(&a) > MAX_DIFF_LINES || diff::line_count(&b) > MAX_DIFF_LINES {
            return Err(FsError::new(Errno::FBig, "diff", path_a));
        }
        Ok(unified_diff(
            &a,
            &b,
            &path::normalize(path_a, "diff")?,
            &path::normalize(path_b, "diff")?,
        ))
    }

    /// A unified diff from the file at `path` to `new_content`.
    pub async fn diff_content(&self, path: &str, new_content: &str) -> Result<String, FsError> {
        let old =
            self.read_file(path).await?.ok_or_else(|| FsError::new(Errno::NoEnt, "open", path))?;
        if diff::line_count(&old) > MAX_DIFF_LINES || diff::line_count(new_content) > MAX_DIFF_LINES
        {
            return Err(FsError::new(Errno::FBig, "diff", path));
        }
        let label = path::normalize(path, "diff")?;
        Ok(unified_diff(&old, new_content, &label, &label))
    }
}

/// An entry's type as a number (0 directory, 1 file, 2 symlink), for listings: a page of a
/// thousand entries then carries no thousand type strings across the SQL bridge.
const TYPE_NUMBER: &str = "CASE type WHEN 'directory' THEN 0 WHEN 'symlink' THEN 2 ELSE 1 END";

/// The type [`TYPE_NUMBER`] encodes.
fn type_from_number(n: i64) -> EntryType {
    match n {
        0 => EntryType::Directory,
        2 => EntryType::Symlink,
        _ => EntryType::File,
    }
}
