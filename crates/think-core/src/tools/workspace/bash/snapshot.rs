//! Snapshot phase: walk the workspace breadth-first from `/` (Think's order) and decide which
//! files are mounted into the script's filesystem. Files over the count or size limit, and
//! files that cannot be read, are not mounted: they are listed in `skippedFiles` and protected
//! from being overwritten by write-back.

use super::paths::normalize_workspace_path;
use super::{BashFs, BashOptions, DirEntry, EntryKind};
use crate::workspace::FsError;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::Hasher;

/// A mounted file's length and hash, kept instead of its bytes so the workspace is not held
/// in memory twice (the engine has the copy). Write-back compares against it to tell an
/// update from an unchanged file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentDigest {
    len: u64,
    hash: u64,
}

impl ContentDigest {
    pub fn of(bytes: &[u8]) -> Self {
        let mut h = DefaultHasher::new();
        h.write(bytes);
        Self { len: bytes.len() as u64, hash: h.finish() }
    }
}

/// What write-back needs to know about the workspace as it was before the script ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Baseline {
    /// Mounted files.
    pub files: BTreeMap<String, ContentDigest>,
    /// Every directory of the workspace, including `/`.
    pub dirs: BTreeSet<String>,
    /// Files that exist in the workspace but were not mounted; never written or deleted.
    pub protected: BTreeSet<String>,
}

impl Baseline {
    /// True when a protected path lies strictly below `dir`.
    pub fn has_protected_descendant(&self, dir: &str) -> bool {
        let prefix = if dir.ends_with('/') { dir.to_owned() } else { format!("{dir}/") };
        self.protected.range(prefix.clone()..).next().is_some_and(|p| p.starts_with(&prefix))
    }
}

/// The result of the snapshot phase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Files to mount, in walk order.
    pub files: Vec<(String, Vec<u8>)>,
    pub baseline: Baseline,
    /// Files left out, in walk order (the tool output sorts them).
    pub skipped: Vec<String>,
}

/// What to do with one directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visit {
    /// A directory: it is recorded and will be listed later.
    Descend,
    /// A file to read and mount; report the read with [`SnapshotPlanner::mounted`] or
    /// [`SnapshotPlanner::unreadable`].
    Mount(String),
    /// A file over a limit: skipped and protected.
    Skip,
    /// Anything else (symlinks): neither mounted nor protected, as in Think.
    Ignore,
}

/// The walk's bookkeeping without the I/O, so the limit rules are testable on their own.
#[derive(Debug)]
pub struct SnapshotPlanner {
    max_files: usize,
    max_file_bytes: u64,
    pending: VecDeque<String>,
    snapshot: Snapshot,
}

impl SnapshotPlanner {
    pub fn new(options: &BashOptions) -> Self {
        let mut snapshot = Snapshot::default();
        snapshot.baseline.dirs.insert("/".to_owned());
        Self {
            max_files: options.max_workspace_files,
            max_file_bytes: options.max_workspace_file_bytes,
            pending: VecDeque::from(["/".to_owned()]),
            snapshot,
        }
    }

    /// The next directory to list, breadth-first.
    pub fn next_dir(&mut self) -> Option<String> {
        self.pending.pop_front()
    }

    /// Whether `reserved` more mounted files (read but not yet reported) would reach the
    /// file limit: then the next file's fate depends on whether their reads succeed.
    pub fn full_with(&self, reserved: usize) -> bool {
        self.snapshot.baseline.files.len() + reserved >= self.max_files
    }

    /// Classifies one entry of a listed directory, with `reserved` files to mount whose
    /// reads are not reported yet counted against the limit.
    pub fn visit(&mut self, entry: &DirEntry, reserved: usize) -> Visit {
        let path = normalize_workspace_path(&entry.path);
        match entry.kind {
            EntryKind::Directory => {
                // A directory seen twice (a misbehaving listing) is not walked twice.
                if self.snapshot.baseline.dirs.insert(path.clone()) {
                    self.pending.push_back(path);
                }
                Visit::Descend
            }
            EntryKind::File => {
                if self.full_with(reserved) || entry.size > self.max_file_bytes {
                    self.protect(path);
                    Visit::Skip
                } else {
                    Visit::Mount(path)
                }
            }
            EntryKind::Other => Visit::Ignore,
        }
    }

    /// Records the bytes read for a [`Visit::Mount`] path.
    pub fn mounted(&mut self, path: String, bytes: Vec<u8>) {
        if bytes.len() as u64 > self.max_file_bytes {
            // The listing under-reported the size; the limit is on the real content.
            self.protect(path);
            return;
        }
        self.snapshot.baseline.files.insert(path.clone(), ContentDigest::of(&bytes));
        self.snapshot.files.push((path, bytes));
    }

    /// Records that a [`Visit::Mount`] path could not be read: it is skipped and protected.
    pub fn unreadable(&mut self, path: String) {
        self.protect(path);
    }

    fn protect(&mut self, path: String) {
        if self.snapshot.baseline.protected.insert(path.clone()) {
            self.snapshot.skipped.push(path);
        }
    }

    pub fn finish(self) -> Snapshot {
        self.snapshot
    }
}

/// Walks `fs` and reads the files to mount. A directory that cannot be listed fails the
/// snapshot (the tool cannot know what it would overwrite); a file that cannot be read is
/// skipped and protected.
///
/// A directory's files are read in batches of at most [`BATCH_FILES`] and, by their listed
/// sizes, [`BATCH_BYTES`]. Each file is decided as the one-by-one walk decides it: a batch
/// is read first whenever its files would reach the file limit, since one that fails to
/// read frees its place.
pub async fn take_snapshot(fs: &dyn BashFs, options: &BashOptions) -> Result<Snapshot, FsError> {
    let mut planner = SnapshotPlanner::new(options);
    let mut batch: Vec<String> = Vec::new();
    let mut batch_bytes = 0;
    while let Some(dir) = planner.next_dir() {
        let entries = fs.read_dir(&dir).await?;
        for entry in &entries {
            if entry.kind == EntryKind::File && !batch.is_empty() && planner.full_with(batch.len())
            {
                read_batch(fs, &mut planner, &mut batch).await;
                batch_bytes = 0;
            }
            if let Visit::Mount(path) = planner.visit(entry, batch.len()) {
                batch.push(path);
                batch_bytes += entry.size;
                if batch.len() >= BATCH_FILES || batch_bytes >= BATCH_BYTES {
                    read_batch(fs, &mut planner, &mut batch).await;
                    batch_bytes = 0;
                }
            }
        }
        read_batch(fs, &mut planner, &mut batch).await;
        batch_bytes = 0;
    }
    Ok(planner.finish())
}

/// Most files read in one batch (within the 100 bound parameters of a statement).
const BATCH_FILES: usize = 64;
/// A batch is read once its files' listed sizes reach this, so that one statement's
/// result stays a few MB.
const BATCH_BYTES: u64 = 4 << 20;

/// Reads the files of `batch` and reports each to the planner, in order; empties it.
async fn read_batch(fs: &dyn BashFs, planner: &mut SnapshotPlanner, batch: &mut Vec<String>) {
    if batch.is_empty() {
        return;
    }
    let mut read = fs.read_files_bytes(batch).await.into_iter();
    for path in batch.drain(..) {
        // A file without a result is unreadable: skipped and protected, never overwritten.
        match read.next() {
            Some(Ok(Some(bytes))) => planner.mounted(path, bytes),
            _ => planner.unreadable(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(max_files: usize, max_bytes: u64) -> BashOptions {
        BashOptions {
            max_workspace_files: max_files,
            max_workspace_file_bytes: max_bytes,
            ..BashOptions::default()
        }
    }

    fn file(path: &str, size: u64) -> DirEntry {
        DirEntry { path: path.to_owned(), kind: EntryKind::File, size }
    }

    fn dir(path: &str) -> DirEntry {
        DirEntry { path: path.to_owned(), kind: EntryKind::Directory, size: 0 }
    }

    #[test]
    fn walks_breadth_first_and_records_directories() {
        let mut p = SnapshotPlanner::new(&opts(10, 100));
        assert_eq!(p.next_dir().as_deref(), Some("/"));
        assert_eq!(p.visit(&dir("/b"), 0), Visit::Descend);
        assert_eq!(p.visit(&dir("/a"), 0), Visit::Descend);
        assert_eq!(p.next_dir().as_deref(), Some("/b"));
        assert_eq!(p.visit(&dir("/b/c"), 0), Visit::Descend);
        assert_eq!(p.next_dir().as_deref(), Some("/a"));
        assert_eq!(p.next_dir().as_deref(), Some("/b/c"));
        assert_eq!(p.next_dir(), None);
        let s = p.finish();
        assert_eq!(s.baseline.dirs.iter().collect::<Vec<_>>(), ["/", "/a", "/b", "/b/c"]);
    }

    #[test]
    fn duplicate_directory_is_walked_once() {
        let mut p = SnapshotPlanner::new(&opts(10, 100));
        p.next_dir();
        p.visit(&dir("/a"), 0);
        p.visit(&dir("/a/"), 0);
        assert_eq!(p.next_dir().as_deref(), Some("/a"));
        assert_eq!(p.next_dir(), None);
    }

    #[test]
    fn file_count_limit_counts_mounted_files_only() {
        let mut p = SnapshotPlanner::new(&opts(2, 100));
        p.next_dir();
        assert_eq!(p.visit(&file("/1", 1), 0), Visit::Mount("/1".into()));
        p.mounted("/1".into(), vec![1]);
        assert_eq!(p.visit(&file("/2", 1), 0), Visit::Mount("/2".into()));
        p.unreadable("/2".into());
        // /2 was unreadable, so /3 still fits, as in Think (initialFiles.size counts reads).
        assert_eq!(p.visit(&file("/3", 1), 0), Visit::Mount("/3".into()));
        p.mounted("/3".into(), vec![3]);
        assert_eq!(p.visit(&file("/4", 1), 0), Visit::Skip);
        let s = p.finish();
        assert_eq!(s.files.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["/1", "/3"]);
        assert_eq!(s.skipped, ["/2", "/4"]);
        assert_eq!(s.baseline.protected.iter().collect::<Vec<_>>(), ["/2", "/4"]);
    }

    #[test]
    fn size_limit_is_inclusive_and_checked_on_content_too() {
        let mut p = SnapshotPlanner::new(&opts(10, 3));
        p.next_dir();
        assert_eq!(p.visit(&file("/ok", 3), 0), Visit::Mount("/ok".into()));
        p.mounted("/ok".into(), vec![0; 3]);
        assert_eq!(p.visit(&file("/big", 4), 0), Visit::Skip);
        // Listed as small, read as big.
        assert_eq!(p.visit(&file("/liar", 1), 0), Visit::Mount("/liar".into()));
        p.mounted("/liar".into(), vec![0; 5]);
        let s = p.finish();
        assert_eq!(s.skipped, ["/big", "/liar"]);
        assert!(s.baseline.files.contains_key("/ok"));
        assert!(!s.baseline.files.contains_key("/liar"));
    }

    #[test]
    fn symlinks_are_ignored_and_paths_normalized() {
        let mut p = SnapshotPlanner::new(&opts(10, 10));
        p.next_dir();
        let link = DirEntry { path: "/l".into(), kind: EntryKind::Other, size: 0 };
        assert_eq!(p.visit(&link, 0), Visit::Ignore);
        assert_eq!(p.visit(&file("a//b/../c.txt", 1), 0), Visit::Mount("/a/c.txt".into()));
        let s = p.finish();
        assert!(s.skipped.is_empty() && s.baseline.protected.is_empty());
    }

    #[test]
    fn protected_descendants() {
        let mut b = Baseline::default();
        b.protected.insert("/a/b/big.bin".into());
        b.protected.insert("/ab".into());
        assert!(b.has_protected_descendant("/a"));
        assert!(b.has_protected_descendant("/a/b"));
        assert!(b.has_protected_descendant("/"));
        assert!(!b.has_protected_descendant("/a/b/big.bin"));
        assert!(!b.has_protected_descendant("/a/c"));
        assert!(!b.has_protected_descendant("/ab"));
    }

    #[test]
    fn digest_tells_contents_apart() {
        assert_eq!(ContentDigest::of(b"abc"), ContentDigest::of(b"abc"));
        assert_ne!(ContentDigest::of(b"abc"), ContentDigest::of(b"abd"));
        assert_ne!(ContentDigest::of(b""), ContentDigest::of(b"\0"));
    }
}
