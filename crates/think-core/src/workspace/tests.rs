//! Workspace behaviour against real SQLite (and an in-memory blob store for the R2 spill).

use super::*;
use crate::store::sqlite::{MemoryBlobs, SqliteSql};
use std::future::Future;

/// Drives a future whose awaits are all immediately ready (SQLite and `MemoryBlobs`).
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// A clock that advances one millisecond per reading, so timestamps are distinct.
pub(crate) fn clock() -> Rc<dyn Clock> {
    crate::test_support::ManualClock::ticking(1_700_000_000_000.0, 1.0)
}

pub(crate) fn ws() -> (Rc<SqliteSql>, Workspace) {
    let sql = Rc::new(SqliteSql::new());
    let ws = Workspace::new(sql.clone(), clock());
    (sql, ws)
}

fn ws_with_blobs(threshold: usize) -> (Rc<SqliteSql>, Rc<MemoryBlobs>, Workspace) {
    let sql = Rc::new(SqliteSql::new());
    let blobs = Rc::new(MemoryBlobs::default());
    let ws = Workspace::with_options(
        sql.clone(),
        clock(),
        WorkspaceOptions {
            blobs: Some(blobs.clone()),
            blob_prefix: "agent".into(),
            inline_threshold: threshold,
            ..Default::default()
        },
    )
    .unwrap();
    (sql, blobs, ws)
}

fn keys(blobs: &MemoryBlobs) -> Vec<String> {
    blobs.objects.borrow().keys().cloned().collect()
}

fn errno<T: std::fmt::Debug>(r: Result<T, FsError>) -> Errno {
    r.unwrap_err().errno().expect("posix error")
}

fn write(ws: &Workspace, p: &str, s: &str) {
    block_on(ws.write_file(p, s, "text/plain")).unwrap();
}

fn read(ws: &Workspace, p: &str) -> Option<String> {
    block_on(ws.read_file(p)).unwrap()
}

fn names(list: &[FileInfo]) -> Vec<&str> {
    list.iter().map(|f| f.name.as_str()).collect()
}

fn paths(list: &[FileInfo]) -> Vec<&str> {
    list.iter().map(|f| f.path.as_str()).collect()
}

#[test]
fn write_read_and_auto_parents() {
    let (_, ws) = ws();
    assert_eq!(read(&ws, "/nope.txt"), None);
    write(&ws, "/a/b/c.txt", "hello");
    assert_eq!(read(&ws, "/a/b/c.txt").as_deref(), Some("hello"));
    assert_eq!(read(&ws, "a/./b/../b/c.txt").as_deref(), Some("hello"));
    assert_eq!(ws.stat("/a").unwrap().unwrap().kind, EntryType::Directory);
    assert_eq!(ws.stat("/a/b").unwrap().unwrap().kind, EntryType::Directory);
    write(&ws, "/a/b/c.txt", "bye");
    assert_eq!(read(&ws, "/a/b/c.txt").as_deref(), Some("bye"));
    assert_eq!(errno(block_on(ws.read_file("/a"))), Errno::IsDir);
    assert_eq!(errno(block_on(ws.write_file("/a", "x", "text/plain"))), Errno::IsDir);
    assert_eq!(errno(block_on(ws.write_file("/", "x", "text/plain"))), Errno::IsDir);
    // A file where a directory is needed.
    assert_eq!(errno(block_on(ws.write_file("/a/b/c.txt/d", "x", "text/plain"))), Errno::NotDir);
    assert_eq!(read(&ws, "/a/b/c.txt/d"), None);
    assert_eq!(
        errno(block_on(ws.write_file("/a/b/c.txt/d/e/f", "x", "text/plain"))),
        Errno::NotDir
    );
    assert!(ws.lstat("/a/b/c.txt/d").unwrap().is_none(), "no directory made under a file");
    // Missing levels under an existing one are made as directories, with the parents' names.
    write(&ws, "/a/x/y/z.txt", "deep");
    assert_eq!(read(&ws, "/a/x/y/z.txt").as_deref(), Some("deep"));
    for (dir, listed) in [("/a", vec!["b", "x"]), ("/a/x", vec!["y"]), ("/a/x/y", vec!["z.txt"])] {
        assert_eq!(ws.lstat(dir).unwrap().unwrap().kind, EntryType::Directory, "{dir}");
        assert_eq!(names(&ws.read_dir(dir, 10, 0).unwrap()), listed, "{dir}");
    }
}

#[test]
fn traversal_stays_in_root() {
    let (_, ws) = ws();
    write(&ws, "../../etc/passwd", "root:x");
    assert_eq!(read(&ws, "/etc/passwd").as_deref(), Some("root:x"));
    let all = ws.glob("/**").unwrap();
    assert_eq!(paths(&all), vec!["/etc", "/etc/passwd"]);
}

#[test]
fn file_info_shape_and_timestamps() {
    let (_, ws) = ws();
    write(&ws, "/x.md", "héllo");
    let a = ws.stat("/x.md").unwrap().unwrap();
    assert_eq!(a.size, 6);
    assert_eq!(a.mime_type, "text/plain");
    let v = serde_json::to_value(&a).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["path", "name", "type", "mimeType", "size", "createdAt", "updatedAt"]);
    assert_eq!(v["type"], "file");
    write(&ws, "/x.md", "changed");
    let b = ws.stat("/x.md").unwrap().unwrap();
    assert_eq!(b.created_at, a.created_at, "overwrite keeps the creation time");
    assert!(b.updated_at > a.updated_at);
}

#[test]
fn binary_content_round_trips_as_blob() {
    let (sql, ws) = ws();
    let bytes: Vec<u8> = (0..=255u8).collect();
    block_on(ws.write_file_bytes("/bin.dat", &bytes, "application/octet-stream")).unwrap();
    assert_eq!(block_on(ws.read_file_bytes("/bin.dat")).unwrap().unwrap(), bytes);
    let ty = sql
        .exec(
            &format!("SELECT typeof(content) FROM {} WHERE path = '/bin.dat'", ws.table_name()),
            &[],
        )
        .unwrap();
    assert_eq!(ty[0][0], SqlValue::Text("blob".into()));
    write(&ws, "/t.txt", "text");
    let ty = sql
        .exec(
            &format!("SELECT typeof(content) FROM {} WHERE path = '/t.txt'", ws.table_name()),
            &[],
        )
        .unwrap();
    assert_eq!(ty[0][0], SqlValue::Text("text".into()), "text is stored as TEXT, not base64");
    assert!(read(&ws, "/bin.dat").unwrap().contains('\u{FFFD}'));
    assert_eq!(ws.stat("/bin.dat").unwrap().unwrap().mime_type, "application/octet-stream");
}

#[test]
fn read_dir_orders_and_pages() {
    let (_, ws) = ws();
    write(&ws, "/d/b.txt", "1");
    write(&ws, "/d/a.txt", "22");
    ws.mkdir("/d/zdir", false).unwrap();
    ws.mkdir("/d/adir", false).unwrap();
    ws.symlink("/d/a.txt", "/d/alink").unwrap();
    let all = ws.read_dir("/d", 1000, 0).unwrap();
    assert_eq!(names(&all), vec!["adir", "zdir", "a.txt", "b.txt", "alink"]);
    assert_eq!(all[4].target.as_deref(), Some("/d/a.txt"));
    assert_eq!(names(&ws.read_dir("/d", 2, 1).unwrap()), vec!["zdir", "a.txt"]);
    assert!(ws.read_dir("/missing", 10, 0).unwrap().is_empty());
    assert!(ws.read_dir("/d/a.txt", 10, 0).unwrap().is_empty());
    assert_eq!(names(&ws.read_dir("/", 10, 0).unwrap()), vec!["d"]);
}

#[test]
fn glob_matches_with_prefix_and_suffix() {
    let (_, ws) = ws();
    for p in
        ["/README.md", "/docs/a.md", "/docs/deep/b.md", "/src/x.ts", "/src/y.md.bak", "/docs.md"]
    {
        write(&ws, p, "x");
    }
    assert_eq!(
        paths(&ws.glob("**/*.md").unwrap()),
        vec!["/README.md", "/docs.md", "/docs/a.md", "/docs/deep/b.md"]
    );
    assert_eq!(paths(&ws.glob("/docs/*.md").unwrap()), vec!["/docs/a.md"]);
    assert_eq!(
        paths(&ws.glob("/docs/**").unwrap()),
        vec!["/docs/a.md", "/docs/deep", "/docs/deep/b.md"]
    );
    assert_eq!(paths(&ws.glob("/src/x.ts").unwrap()), vec!["/src/x.ts"]);
    assert_eq!(paths(&ws.glob("/*.{md,ts}").unwrap()), vec!["/README.md", "/docs.md"]);
    let dirs: Vec<_> =
        ws.glob("**/*").unwrap().into_iter().filter(|f| f.kind == EntryType::Directory).collect();
    assert_eq!(paths(&dirs), vec!["/docs", "/docs/deep", "/src"], "the root is not listed");
}

#[test]
fn brief_listings_match_the_full_ones() {
    let (_, ws) = ws();
    write(&ws, "/d/b.txt", "bb");
    write(&ws, "/d/sub/x", "x");
    ws.symlink("/d", "/link").unwrap();
    ws.symlink("/d/b.txt", "/d/ln").unwrap();
    for dir in ["/d", "/link", "/missing", "/d/b.txt"] {
        let full: Vec<_> = ws
            .read_dir(dir, 10, 0)
            .unwrap()
            .into_iter()
            .map(|f| (f.name, f.kind, f.size))
            .collect();
        assert_eq!(ws.read_dir_brief(dir, 10, 0).unwrap(), full, "{dir}");
    }
    assert_eq!(
        ws.read_dir_brief("/d", 1, 1).unwrap(),
        vec![("b.txt".to_owned(), EntryType::File, 2)]
    );
    for pattern in ["**/*", "/d/*", "**/*.txt", "/link"] {
        let full: Vec<_> =
            ws.glob(pattern).unwrap().into_iter().map(|f| (f.path, f.kind)).collect();
        assert_eq!(ws.glob_paths(pattern).unwrap(), full, "{pattern}");
    }
}

#[test]
fn glob_knows_when_sql_alone_decides() {
    let exact = |p: &str| Glob::new(p).unwrap().sql_exact();
    for p in ["**/*", "**", "/src/**", "/src/**/*", "**/*.md", "/docs/**/*.test.ts", "/a/b.txt"] {
        assert!(exact(p), "{p}");
    }
    for p in ["*.md", "/src/*.ts", "**/*/index.ts", "**/test/*.ts", "/src/**/x*.ts", "**/*.{md,ts}"]
    {
        assert!(!exact(p), "{p}");
    }
}

#[test]
fn glob_texts_pages_with_texts_up_to_a_size() {
    let (_, blobs, ws) = ws_with_blobs(100);
    for i in 0..5 {
        write(&ws, &format!("/t/f{i}.md"), &format!("file {i}"));
    }
    write(&ws, "/t/big.md", &"b".repeat(60));
    write(&ws, "/t/spilled.md", &"s".repeat(150));
    write(&ws, "/t/other.txt", "not md");
    ws.mkdir("/t/dir.md", true).unwrap();
    assert_eq!(keys(&blobs).len(), 1);
    let (page, next) = ws.glob_texts("**/*.md", None, 3, 50).unwrap();
    let got: Vec<_> = page.iter().map(|f| (f.path.as_str(), f.size, f.text.as_deref())).collect();
    assert_eq!(
        got,
        vec![
            ("/t/big.md", 60, None),
            ("/t/f0.md", 6, Some("file 0")),
            ("/t/f1.md", 6, Some("file 1"))
        ],
        "over text_max: no text; directories are not files"
    );
    assert_eq!(next.as_deref(), Some("/t/f1.md"));
    let (page, next) = ws.glob_texts("**/*.md", next.as_deref(), 3, 50).unwrap();
    assert_eq!(paths_of(&page), vec!["/t/f2.md", "/t/f3.md", "/t/f4.md"]);
    let (page, next) = ws.glob_texts("**/*.md", next.as_deref(), 3, 1000).unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(
        (page[0].path.as_str(), page[0].text.as_deref()),
        ("/t/spilled.md", None),
        "in R2: read it separately"
    );
    assert_eq!(next, None);
    // A glob SQL cannot decide alone: every match, no texts, one page.
    let (page, next) = ws.glob_texts("/t/f*.md", None, 2, 1000).unwrap();
    assert_eq!(paths_of(&page), vec!["/t/f0.md", "/t/f1.md", "/t/f2.md", "/t/f3.md", "/t/f4.md"]);
    assert!(page.iter().all(|f| f.text.is_none()) && next.is_none());
    assert_eq!(errno(ws.glob_texts("[z-a]", None, 2, 10).map(|_| ())), Errno::Inval);
}

fn paths_of(files: &[FileText]) -> Vec<&str> {
    files.iter().map(|f| f.path.as_str()).collect()
}

#[test]
fn rewrite_updates_inline_files_and_falls_back_otherwise() {
    let (sql, blobs, ws) = ws_with_blobs(100);
    block_on(ws.write_file_bytes("/a.bin", b"\x00\x01", "application/octet-stream")).unwrap();
    block_on(ws.rewrite_file("/a.bin", "now text", "text/plain")).unwrap();
    let info = ws.stat("/a.bin").unwrap().unwrap();
    assert_eq!((info.size, info.mime_type.as_str()), (8, "text/plain"));
    assert_eq!(read(&ws, "/a.bin").as_deref(), Some("now text"));
    let kind: Vec<Row> = sql
        .exec("SELECT typeof(content) FROM cf_wsfile_default WHERE path = '/a.bin'", &[])
        .unwrap();
    assert_eq!(kind[0][0], SqlValue::Text("text".into()), "stored as TEXT, as write_file would");
    // Through a symlink, into R2 when it grows, and for a missing file: the general write.
    ws.symlink("/a.bin", "/link").unwrap();
    block_on(ws.rewrite_file("/link", "via link", "text/plain")).unwrap();
    assert_eq!(read(&ws, "/a.bin").as_deref(), Some("via link"));
    assert_eq!(ws.lstat("/link").unwrap().unwrap().kind, EntryType::Symlink);
    block_on(ws.rewrite_file("/a.bin", &"g".repeat(150), "text/plain")).unwrap();
    assert_eq!(keys(&blobs).len(), 1);
    assert_eq!(read(&ws, "/a.bin").map(|s| s.len()), Some(150));
    block_on(ws.rewrite_file("/a.bin", "small again", "text/plain")).unwrap();
    assert!(keys(&blobs).is_empty(), "back inline, the object is gone");
    block_on(ws.rewrite_file("/new/file.txt", "fresh", "text/plain")).unwrap();
    assert_eq!(read(&ws, "/new/file.txt").as_deref(), Some("fresh"));
}

#[test]
fn mkdir_rules() {
    let (_, ws) = ws();
    assert_eq!(errno(ws.mkdir("/a/b", false)), Errno::NoEnt);
    ws.mkdir("/a/b", true).unwrap();
    ws.mkdir("/a/b", true).unwrap();
    assert_eq!(errno(ws.mkdir("/a/b", false)), Errno::Exist);
    write(&ws, "/f", "x");
    assert_eq!(errno(ws.mkdir("/f", true)), Errno::Exist);
    assert_eq!(errno(ws.mkdir("/f/g", true)), Errno::NotDir);
    ws.mkdir("/", false).unwrap();
    let deep = "/d".repeat(150);
    ws.mkdir(&deep, true).unwrap();
    assert_eq!(ws.stat(&deep).unwrap().unwrap().kind, EntryType::Directory);
    assert_eq!(ws.info().unwrap().directory_count, 1 + 2 + 150);
}

#[test]
fn rm_rules() {
    let (_, ws) = ws();
    write(&ws, "/d/e/f.txt", "x");
    write(&ws, "/d/g.txt", "x");
    write(&ws, "/de.txt", "sibling with a shared prefix");
    let e = block_on(ws.rm("/d", false, false)).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::NotEmpty));
    assert_eq!(e.to_string(), "ENOTEMPTY: directory not empty, rm '/d'");
    let e = block_on(ws.rm("/", true, true)).unwrap_err();
    assert_eq!(e.to_string(), "EPERM: operation not permitted, rm '/'");
    assert_eq!(errno(block_on(ws.rm("/nope", false, false))), Errno::NoEnt);
    block_on(ws.rm("/nope", false, true)).unwrap();
    block_on(ws.rm("/d", true, false)).unwrap();
    assert!(!ws.exists("/d").unwrap());
    assert!(!ws.exists("/d/e/f.txt").unwrap());
    assert_eq!(read(&ws, "/de.txt").as_deref(), Some("sibling with a shared prefix"));
    ws.mkdir("/empty", false).unwrap();
    block_on(ws.rm("/empty", false, false)).unwrap();
    block_on(ws.rm("/de.txt", false, false)).unwrap();
    let info = ws.info().unwrap();
    // Postings outlive the files (see grams.rs); the totals do not.
    assert_eq!(
        (info.file_count, info.directory_count, info.total_bytes, info.r2_file_count),
        (0, 1, 0, 0)
    );
}

#[test]
fn cp_and_mv() {
    let (_, ws) = ws();
    write(&ws, "/src/a.txt", "A");
    write(&ws, "/src/sub/b.txt", "B");
    ws.symlink("a.txt", "/src/link").unwrap();
    block_on(ws.cp("/src/a.txt", "/copy/a2.txt", false)).unwrap();
    assert_eq!(read(&ws, "/copy/a2.txt").as_deref(), Some("A"));
    assert_eq!(errno(block_on(ws.cp("/src", "/dst", false))), Errno::IsDir);
    assert_eq!(errno(block_on(ws.cp("/src", "/src/inner", true))), Errno::Inval);
    ws.symlink("/src", "/srclink").unwrap();
    assert_eq!(errno(block_on(ws.cp("/src", "/srclink/inner", true))), Errno::Inval);
    block_on(ws.rm("/srclink", false, false)).unwrap();
    block_on(ws.cp("/src", "/dst", true)).unwrap();
    assert_eq!(read(&ws, "/dst/sub/b.txt").as_deref(), Some("B"));
    assert_eq!(ws.readlink("/dst/link").unwrap(), "a.txt");
    assert_eq!(
        read(&ws, "/dst/link").as_deref(),
        Some("A"),
        "relative link resolves in its new dir"
    );
    assert_eq!(names(&ws.read_dir("/dst", 100, 0).unwrap()), vec!["sub", "a.txt", "link"]);
    // Copy onto an existing directory merges.
    write(&ws, "/merge/keep.txt", "K");
    block_on(ws.cp("/src", "/merge", true)).unwrap();
    assert_eq!(
        names(&ws.read_dir("/merge", 100, 0).unwrap()),
        vec!["sub", "a.txt", "keep.txt", "link"]
    );

    block_on(ws.mv("/dst", "/moved/here")).unwrap();
    assert!(!ws.exists("/dst").unwrap());
    assert_eq!(read(&ws, "/moved/here/sub/b.txt").as_deref(), Some("B"));
    assert_eq!(names(&ws.read_dir("/moved/here/sub", 10, 0).unwrap()), vec!["b.txt"]);
    assert_eq!(errno(block_on(ws.mv("/moved", "/moved/here/x"))), Errno::Inval);
    assert_eq!(errno(block_on(ws.mv("/moved/here", "/src"))), Errno::NotEmpty);
    assert_eq!(errno(block_on(ws.mv("/src/a.txt", "/moved"))), Errno::IsDir);
    assert_eq!(errno(block_on(ws.mv("/moved", "/src/a.txt"))), Errno::NotDir);
    assert_eq!(errno(block_on(ws.mv("/none", "/x"))), Errno::NoEnt);
    block_on(ws.mv("/src/a.txt", "/copy/a2.txt")).unwrap();
    assert_eq!(read(&ws, "/copy/a2.txt").as_deref(), Some("A"));
    assert_eq!(read(&ws, "/src/a.txt"), None);
    ws.mkdir("/emptydir", false).unwrap();
    block_on(ws.mv("/moved/here/sub", "/emptydir")).unwrap();
    assert_eq!(read(&ws, "/emptydir/b.txt").as_deref(), Some("B"));
}

#[test]
fn symlinks_follow_and_loop() {
    let (_, ws) = ws();
    write(&ws, "/real/file.txt", "data");
    ws.symlink("/real", "/alias").unwrap();
    ws.symlink("file.txt", "/real/rel").unwrap();
    assert_eq!(read(&ws, "/alias/file.txt").as_deref(), Some("data"));
    assert_eq!(read(&ws, "/alias/rel").as_deref(), Some("data"));
    assert_eq!(ws.stat("/alias").unwrap().unwrap().kind, EntryType::Directory);
    let l = ws.lstat("/alias").unwrap().unwrap();
    assert_eq!((l.kind, l.target.as_deref()), (EntryType::Symlink, Some("/real")));
    assert_eq!(ws.stat("/alias/rel").unwrap().unwrap().path, "/real/file.txt");
    write(&ws, "/alias/new.txt", "through the link");
    assert_eq!(read(&ws, "/real/new.txt").as_deref(), Some("through the link"));
    // A missing directory under a symlinked one is made at the link's target.
    write(&ws, "/alias/sub/deeper.txt", "under the target");
    assert_eq!(read(&ws, "/real/sub/deeper.txt").as_deref(), Some("under the target"));
    assert_eq!(ws.lstat("/real/sub").unwrap().unwrap().kind, EntryType::Directory);
    assert_eq!(ws.lstat("/alias").unwrap().unwrap().kind, EntryType::Symlink);
    block_on(ws.rm("/real/sub", true, false)).unwrap();
    assert_eq!(names(&ws.read_dir("/alias", 10, 0).unwrap()), vec!["file.txt", "new.txt", "rel"]);
    write(&ws, "/real/rel", "written via link");
    assert_eq!(read(&ws, "/real/file.txt").as_deref(), Some("written via link"));
    assert_eq!(ws.readlink("/real/rel").unwrap(), "file.txt");
    assert_eq!(errno(ws.readlink("/real/file.txt")), Errno::Inval);
    assert_eq!(errno(ws.symlink("/x", "/alias")), Errno::Exist);
    assert_eq!(errno(ws.symlink("", "/e")), Errno::Inval);
    ws.symlink("/loop2", "/loop1").unwrap();
    ws.symlink("/loop1", "/loop2").unwrap();
    assert_eq!(errno(block_on(ws.read_file("/loop1"))), Errno::Loop);
    assert_eq!(errno(ws.stat("/loop1")), Errno::Loop);
    assert!(ws.lstat("/loop1").unwrap().is_some());
    ws.symlink("/nowhere", "/dangling").unwrap();
    assert!(ws.exists("/dangling").unwrap());
    assert!(ws.stat("/dangling").unwrap().is_none());
    write(&ws, "/dangling", "created");
    assert_eq!(read(&ws, "/nowhere").as_deref(), Some("created"));
    block_on(ws.rm("/alias", false, false)).unwrap();
    assert_eq!(
        read(&ws, "/real/file.txt").as_deref(),
        Some("written via link"),
        "rm removes the link only"
    );
}

#[test]
fn append_grows_inline_and_other_files() {
    let (_, ws) = ws();
    block_on(ws.append_file("/log.txt", "a", "text/plain")).unwrap();
    block_on(ws.append_file("/log.txt", "b", "text/plain")).unwrap();
    assert_eq!(read(&ws, "/log.txt").as_deref(), Some("ab"));
    assert_eq!(ws.stat("/log.txt").unwrap().unwrap().size, 2);
    block_on(ws.write_file_bytes("/b.bin", b"xy", "application/x-thing")).unwrap();
    block_on(ws.append_file("/b.bin", "z", "text/plain")).unwrap();
    assert_eq!(read(&ws, "/b.bin").as_deref(), Some("xyz"));
    assert_eq!(ws.stat("/b.bin").unwrap().unwrap().mime_type, "application/x-thing");
    assert_eq!(errno(block_on(ws.append_file("/", "z", "text/plain"))), Errno::IsDir);
}

#[test]
fn blob_spill_and_cleanup_leave_no_orphans() {
    let (sql, blobs, ws) = ws_with_blobs(100);
    let big = "x".repeat(500);
    write(&ws, "/big.txt", &big);
    assert_eq!(keys(&blobs), vec!["agent/default/big.txt"]);
    let row = sql
        .exec(
            &format!(
                "SELECT storage, content IS NULL, size FROM {} WHERE path = '/big.txt'",
                ws.table_name()
            ),
            &[],
        )
        .unwrap();
    assert_eq!(
        row[0],
        vec![SqlValue::Text("r2".into()), SqlValue::Integer(1), SqlValue::Integer(500)]
    );
    assert_eq!(read(&ws, "/big.txt").as_deref(), Some(big.as_str()));
    assert_eq!(ws.info().unwrap().r2_file_count, 1);

    // Overwrite with small content: the object goes away.
    write(&ws, "/big.txt", "small");
    assert!(keys(&blobs).is_empty());
    assert_eq!(read(&ws, "/big.txt").as_deref(), Some("small"));

    // rm of a file and a recursive rm of a tree.
    write(&ws, "/big.txt", &big);
    block_on(ws.rm("/big.txt", false, false)).unwrap();
    assert!(keys(&blobs).is_empty());
    write(&ws, "/t/a.txt", &big);
    write(&ws, "/t/u/b.txt", &big);
    write(&ws, "/t/small.txt", "s");
    assert_eq!(keys(&blobs).len(), 2);
    block_on(ws.rm("/t", true, false)).unwrap();
    assert!(keys(&blobs).is_empty());

    // mv moves the object to the key of the new path.
    write(&ws, "/m/a.txt", &big);
    block_on(ws.mv("/m/a.txt", "/m/b.txt")).unwrap();
    assert_eq!(keys(&blobs), vec!["agent/default/m/b.txt"]);
    assert_eq!(read(&ws, "/m/b.txt").as_deref(), Some(big.as_str()));
    block_on(ws.mv("/m", "/n")).unwrap();
    assert_eq!(keys(&blobs), vec!["agent/default/n/b.txt"]);
    assert_eq!(read(&ws, "/n/b.txt").as_deref(), Some(big.as_str()));
    // mv over an existing spilled file replaces its object.
    write(&ws, "/n/c.txt", &"y".repeat(300));
    block_on(ws.mv("/n/c.txt", "/n/b.txt")).unwrap();
    assert_eq!(keys(&blobs), vec!["agent/default/n/b.txt"]);
    assert_eq!(read(&ws, "/n/b.txt").unwrap(), "y".repeat(300));
    // mv of a small file over a spilled one deletes the object.
    write(&ws, "/n/tiny.txt", "t");
    block_on(ws.mv("/n/tiny.txt", "/n/b.txt")).unwrap();
    assert!(keys(&blobs).is_empty());

    // cp copies the object.
    write(&ws, "/c/a.txt", &big);
    block_on(ws.cp("/c/a.txt", "/c/b.txt", false)).unwrap();
    block_on(ws.cp("/c", "/c2", true)).unwrap();
    assert_eq!(
        keys(&blobs),
        vec![
            "agent/default/c/a.txt",
            "agent/default/c/b.txt",
            "agent/default/c2/a.txt",
            "agent/default/c2/b.txt"
        ]
    );
    assert_eq!(read(&ws, "/c2/b.txt").as_deref(), Some(big.as_str()));
    block_on(ws.rm("/c", true, false)).unwrap();
    block_on(ws.rm("/c2", true, false)).unwrap();
    block_on(ws.rm("/n", true, false)).unwrap();
    assert!(keys(&blobs).is_empty());
    // Every remaining row that claims R2 storage has its object.
    let r2_rows = sql
        .exec(&format!("SELECT COUNT(*) FROM {} WHERE storage = 'r2'", ws.table_name()), &[])
        .unwrap();
    assert_eq!(r2_rows[0][0], SqlValue::Integer(0));
}

#[test]
fn five_megabyte_file_via_blob_store() {
    let (_, blobs, ws) = ws_with_blobs(DEFAULT_INLINE_THRESHOLD);
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
    block_on(ws.write_file_bytes("/data/five.bin", &data, "application/octet-stream")).unwrap();
    assert_eq!(keys(&blobs), vec!["agent/default/data/five.bin"]);
    assert_eq!(block_on(ws.read_file_bytes("/data/five.bin")).unwrap().unwrap(), data);
    assert_eq!(ws.stat("/data/five.bin").unwrap().unwrap().size, 5_000_000);
    // Just below the threshold stays inline.
    write(&ws, "/inline.txt", &"a".repeat(DEFAULT_INLINE_THRESHOLD - 1));
    assert_eq!(keys(&blobs).len(), 1);
}

fn max_row_bytes(sql: &SqliteSql, ws: &Workspace) -> i64 {
    let a = sql
        .exec(
            &format!(
                "SELECT COALESCE(MAX(length(CAST(content AS BLOB))), 0) FROM {}",
                ws.table_name()
            ),
            &[],
        )
        .unwrap();
    let b = sql
        .exec(&format!("SELECT COALESCE(MAX(length(data)), 0) FROM {}", ws.chunk_table_name()), &[])
        .unwrap();
    a[0][0].as_i64().unwrap().max(b[0][0].as_i64().unwrap())
}

fn chunk_count(sql: &SqliteSql, ws: &Workspace) -> i64 {
    sql.exec(&format!("SELECT COUNT(*) FROM {}", ws.chunk_table_name()), &[]).unwrap()[0][0]
        .as_i64()
        .unwrap()
}

#[test]
fn large_files_without_blob_store_are_chunked() {
    let (sql, ws) = ws();
    let text: String = (0..5_000_000usize).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let text = format!("{text}é✓");
    write(&ws, "/five.txt", &text);
    assert!(max_row_bytes(&sql, &ws) <= CHUNK_BYTES as i64, "no row over the chunk size");
    assert_eq!(chunk_count(&sql, &ws), 6);
    assert_eq!(read(&ws, "/five.txt").as_deref(), Some(text.as_str()));
    assert_eq!(ws.stat("/five.txt").unwrap().unwrap().size, text.len() as u64);
    // Grep-style batch reads, copies and moves keep working.
    block_on(ws.cp("/five.txt", "/copy.txt", false)).unwrap();
    assert_eq!(chunk_count(&sql, &ws), 12);
    block_on(ws.mv("/copy.txt", "/dir/moved.txt")).unwrap();
    assert_eq!(read(&ws, "/dir/moved.txt").as_deref(), Some(text.as_str()));
    block_on(ws.append_file("/dir/moved.txt", "!", "text/plain")).unwrap();
    assert!(read(&ws, "/dir/moved.txt").unwrap().ends_with("✓!"));
    assert_eq!(chunk_count(&sql, &ws), 12, "rewrite replaced the old chunks");
    write(&ws, "/five.txt", "now small");
    assert_eq!(chunk_count(&sql, &ws), 6);
    block_on(ws.rm("/dir", true, false)).unwrap();
    assert_eq!(chunk_count(&sql, &ws), 0);
    assert!(max_row_bytes(&sql, &ws) < 2_000_000);
}

#[test]
fn file_size_cap() {
    let sql = Rc::new(SqliteSql::new());
    let ws = Workspace::with_options(
        sql,
        clock(),
        WorkspaceOptions { max_file_size: 10, ..Default::default() },
    )
    .unwrap();
    write(&ws, "/ok", "0123456789");
    assert_eq!(errno(block_on(ws.write_file("/no", "01234567890", "text/plain"))), Errno::FBig);
    assert_eq!(errno(block_on(ws.append_file("/ok", "x", "text/plain"))), Errno::FBig);
}

#[test]
fn namespaces_are_separate_and_validated() {
    let sql = Rc::new(SqliteSql::new());
    let a = Workspace::with_options(
        sql.clone(),
        clock(),
        WorkspaceOptions { namespace: "a".into(), ..Default::default() },
    )
    .unwrap();
    let b = Workspace::with_options(
        sql.clone(),
        clock(),
        WorkspaceOptions { namespace: "b_2".into(), ..Default::default() },
    )
    .unwrap();
    write(&a, "/x", "in a");
    assert_eq!(read(&b, "/x"), None);
    for bad in ["", "1a", "a-b", "a b", "_a"] {
        let e = Workspace::with_options(
            sql.clone(),
            clock(),
            WorkspaceOptions { namespace: bad.into(), ..Default::default() },
        );
        assert!(e.is_err(), "{bad}");
    }
}

#[test]
fn info_and_diff() {
    let (_, ws) = ws();
    write(&ws, "/a.txt", "one\ntwo\nthree");
    write(&ws, "/b.txt", "one\n2\nthree");
    let i = ws.info().unwrap();
    assert_eq!((i.file_count, i.directory_count, i.total_bytes, i.r2_file_count), (2, 1, 24, 0));
    let v = serde_json::to_value(i).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"fileCount": 2, "directoryCount": 1, "totalBytes": 24, "r2FileCount": 0})
    );
    assert_eq!(
        block_on(ws.diff("/a.txt", "b.txt")).unwrap(),
        "--- /a.txt\n+++ /b.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three"
    );
    assert_eq!(block_on(ws.diff_content("/a.txt", "one\ntwo\nthree")).unwrap(), "");
    assert_eq!(errno(block_on(ws.diff("/a.txt", "/zz"))), Errno::NoEnt);
    let huge = "x\n".repeat(10_001);
    assert_eq!(errno(block_on(ws.diff_content("/a.txt", &huge))), Errno::FBig);
}

#[test]
fn error_display_is_posix_style() {
    let e = FsError::new(Errno::NoEnt, "open", "/x");
    assert_eq!(e.to_string(), "ENOENT: no such file or directory, open '/x'");
    assert!(e.is_not_found());
}

#[test]
fn batch_reads_keep_order_and_fall_back() {
    let (_, blobs, ws) = ws_with_blobs(100);
    write(&ws, "/a.txt", "inline");
    write(&ws, "/big.txt", &"b".repeat(200));
    ws.symlink("/a.txt", "/link").unwrap();
    block_on(ws.write_file_bytes("/bin", &[0xFF, b'x'], "application/octet-stream")).unwrap();
    let paths: Vec<String> =
        ["/big.txt", "/missing", "/link", "a.txt", "/bin"].iter().map(|s| s.to_string()).collect();
    let got = block_on(ws.read_files(&paths)).unwrap();
    assert_eq!(
        got,
        vec![
            Some("b".repeat(200)),
            None,
            Some("inline".to_owned()),
            Some("inline".to_owned()),
            Some("\u{FFFD}x".to_owned())
        ]
    );
    assert_eq!(keys(&blobs).len(), 1);
    let many: Vec<String> = (0..250).map(|i| format!("/m/{i}")).collect();
    for p in &many {
        write(&ws, p, p);
    }
    let got = block_on(ws.read_files(&many)).unwrap();
    assert!(got.iter().zip(&many).all(|(g, p)| g.as_deref() == Some(p.as_str())));
}

#[test]
fn invalid_glob_is_einval() {
    let (_, ws) = ws();
    assert_eq!(errno(ws.glob("/[z-a]")), Errno::Inval);
    assert!(ws.glob("/[a-z]").unwrap().is_empty());
}

#[test]
fn every_write_path_bumps_the_version_and_records_the_writer() {
    let (_sql, ws) = ws();
    block_on(async {
        ws.write_file("/a.txt", "one\n", "text/plain").await.unwrap();
        let v1 = ws.version("/a.txt").unwrap().unwrap();
        assert_eq!(v1.counter, 1);
        assert_eq!(v1.changed_by, Some(Writer::App));
        assert_eq!(v1.hash.as_deref(), Some(content_hash(b"one\n").as_str()));
        {
            let _bash = ws.writing_as(Writer::Bash);
            ws.rewrite_file("/a.txt", "two\n", "text/plain").await.unwrap();
        }
        let v2 = ws.version("/a.txt").unwrap().unwrap();
        assert_eq!((v2.counter, v2.changed_by), (2, Some(Writer::Bash)));
        assert_eq!(ws.writer(), Writer::App, "the scope restores the writer");
        let _code = ws.writing_as(Writer::Code);
        ws.append_file("/a.txt", "three\n", "text/plain").await.unwrap();
        let v3 = ws.version("/a.txt").unwrap().unwrap();
        assert_eq!((v3.counter, v3.changed_by, v3.hash), (3, Some(Writer::Code), None));
        ws.write_file("/a.txt", "four\n", "text/plain").await.unwrap();
        assert_eq!(ws.version("/a.txt").unwrap().unwrap().counter, 4);
        ws.cp("/a.txt", "/b.txt", false).await.unwrap();
        ws.cp("/a.txt", "/b.txt", false).await.unwrap();
        let b = ws.version("/b.txt").unwrap().unwrap();
        assert_eq!(b.counter, 2);
        assert_eq!(b.hash, ws.version("/a.txt").unwrap().unwrap().hash);
        ws.mkdir("/t", false).unwrap();
        ws.cp("/a.txt", "/t/a.txt", false).await.unwrap();
        ws.cp("/t", "/u", true).await.unwrap();
        let tree = ws.version("/u/a.txt").unwrap().unwrap();
        assert_eq!(
            (tree.counter, tree.hash, tree.changed_by),
            (1, b.hash.clone(), Some(Writer::Code))
        );
        ws.mv("/b.txt", "/c.txt").await.unwrap();
        assert_eq!(ws.version("/c.txt").unwrap().unwrap().counter, 3);
        assert!(ws.version("/b.txt").unwrap().is_none());
    });
}

#[test]
fn large_writes_through_the_slow_path_are_versioned() {
    let (_sql, _blobs, ws) = ws_with_blobs(10);
    block_on(async {
        ws.write_file("/big.txt", "0123456789abcdef", "text/plain").await.unwrap();
        ws.write_file("/big.txt", "fedcba9876543210", "text/plain").await.unwrap();
        let v = ws.version("/big.txt").unwrap().unwrap();
        assert_eq!(v.counter, 2);
        assert_eq!(v.hash.as_deref(), Some(content_hash(b"fedcba9876543210").as_str()));
    });
}

#[test]
fn a_table_from_before_versioning_is_migrated() {
    let sql = Rc::new(SqliteSql::new());
    sql.exec(
        "CREATE TABLE cf_wsfile_default (path TEXT PRIMARY KEY, parent_path TEXT NOT NULL,
           name TEXT NOT NULL, type TEXT NOT NULL, mime_type TEXT NOT NULL DEFAULT 'text/plain',
           size INTEGER NOT NULL DEFAULT 0, storage TEXT NOT NULL DEFAULT 'inline',
           r2_key TEXT, chunk_id INTEGER, target TEXT, created_at INTEGER NOT NULL,
           modified_at INTEGER NOT NULL, content)",
        &[],
    )
    .unwrap();
    sql.exec(
        "INSERT INTO cf_wsfile_default (path, parent_path, name, type, created_at, modified_at)
         VALUES ('/', '', '', 'directory', 0, 0),
                ('/old.txt', '/', 'old.txt', 'file', 0, 0)",
        &[],
    )
    .unwrap();
    let ws = Workspace::new(sql, clock());
    let old = ws.version("/old.txt").unwrap().unwrap();
    assert_eq!((old.counter, old.hash, old.changed_by), (1, None, None));
    block_on(ws.write_file("/old.txt", "new", "text/plain")).unwrap();
    assert_eq!(ws.version("/old.txt").unwrap().unwrap().counter, 2);
}

#[test]
fn a_stale_version_is_refused_with_who_when_and_the_diff() {
    let (_sql, ws) = ws();
    block_on(async {
        ws.write_file("/f.txt", "alpha\nbeta\n", "text/plain").await.unwrap();
        let seen = ws.version("/f.txt").unwrap().unwrap();
        let token = ws.remember_seen("/f.txt", Some("alpha\nbeta\n")).unwrap();
        assert_eq!(token.as_deref(), Some(seen.token().as_str()));
        ws.check_version("/f.txt", &seen.token()).await.unwrap();
        {
            let _bash = ws.writing_as(Writer::Bash);
            ws.write_file("/f.txt", "alpha\ngamma\n", "text/plain").await.unwrap();
        }
        let err = ws.check_version("/f.txt", &seen.token()).await.unwrap_err().to_string();
        assert!(err.contains("changed by bash at 2023-11-14T22:13:"), "{err}");
        assert!(err.contains("it is now version 2:"), "{err}");
        assert!(err.contains("-beta") && err.contains("+gamma"), "{err}");
        // Counter 1 was never kept: the refusal says there is no diff.
        let err = ws.check_version("/f.txt", "7:0000").await.unwrap_err().to_string();
        assert!(err.contains("no longer kept"), "{err}");
        // Same content again: the hash matches although the counter moved on.
        ws.write_file("/f.txt", "alpha\nbeta\n", "text/plain").await.unwrap();
        ws.check_version("/f.txt", &seen.token()).await.unwrap();
        ws.rm("/f.txt", false, false).await.unwrap();
        let err = ws.check_version("/f.txt", &seen.token()).await.unwrap_err().to_string();
        assert!(err.contains("was deleted"), "{err}");
    });
}

#[test]
fn seen_history_is_bounded() {
    let (_sql, ws) = ws();
    block_on(async {
        let big = "x".repeat(MAX_HISTORY_BYTES + 1);
        for i in 0..10 {
            ws.write_file("/h.txt", &format!("{i}"), "text/plain").await.unwrap();
            ws.remember_seen("/h.txt", Some(&big)).unwrap();
        }
        let rows = ws.exec("SELECT COUNT(*), COUNT(content) FROM cf_wshist_default", &[]).unwrap();
        assert_eq!(col_i64(&rows[0], 0), MAX_HISTORY_VERSIONS);
        assert_eq!(col_i64(&rows[0], 1), 0, "over-size content is not kept");
    });
}

#[test]
fn a_without_rowid_history_is_rebuilt_with_its_notes() {
    let (sql, ws) = with_old_history("WITHOUT ROWID");
    assert!(ws.exists("/").unwrap());
    let rows =
        sql.exec("SELECT sql FROM sqlite_master WHERE name = 'cf_wshist_default'", &[]).unwrap();
    let ddl = rows[0][0].as_str().unwrap().to_owned();
    assert!(!ddl.contains("WITHOUT ROWID"), "{ddl}");
    assert_eq!(
        ws.seen_content("/f.txt", 1).unwrap().as_deref(),
        Some("seen text"),
        "the notes survive the rebuild"
    );
    let rows = sql.exec("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE '%_old'", &[]).unwrap();
    assert_eq!(col_i64(&rows[0], 0), 0);
}

/// The note of `path`'s version `v`: (content, pending), from the history row, or
/// `(None, 1)` when the model's write noted the live version on its row (its text is the
/// row's, as a pending note's).
fn note(sql: &SqliteSql, path: &str, v: i64) -> (Option<String>, i64) {
    let (p, v) = (text(path), SqlValue::Integer(v));
    let rows = sql
        .exec(
            "SELECT 0 AS o, content, pending FROM cf_wshist_default WHERE path = ? AND version = ?
             UNION ALL SELECT 1, NULL, 1 FROM cf_wsfile_default
               WHERE path = ? AND version = ? AND seen IS version
             ORDER BY o LIMIT 1",
            &[p.clone(), v.clone(), p, v],
        )
        .unwrap();
    (col_opt_str(&rows[0], 1), col_i64(&rows[0], 2))
}

#[test]
fn seen_text_is_copied_into_the_history_only_when_its_version_is_replaced() {
    let (sql, ws) = ws();
    block_on(ws.write_fresh_for_model("/a.txt", "one\n", "text/plain", None)).unwrap();
    assert_eq!(note(&sql, "/a.txt", 1), (None, 1), "the model's write is noted without a copy");
    write(&ws, "/b.txt", "bee\n");
    write(&ws, "/c.txt", "sea\n");
    for p in ["/b.txt", "/c.txt"] {
        let (_, text, token) = ws.stat_with_seen_text(p).unwrap().unwrap();
        assert!(text.is_some() && token.is_some());
    }
    assert_eq!(note(&sql, "/b.txt", 1), (None, 1), "a read is noted without a copy");
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap().as_deref(), Some("one\n"));

    write(&ws, "/a.txt", "two\n");
    assert_eq!(note(&sql, "/a.txt", 1), (Some("one\n".into()), 0), "overwritten: copied");
    let refusal = block_on(ws.write_fresh_for_model("/a.txt", "three\n", "text/plain", None))
        .unwrap_err()
        .to_string();
    assert!(refusal.contains("-one\n+two"), "{refusal}");
    block_on(ws.rm("/b.txt", false, false)).unwrap();
    assert_eq!(note(&sql, "/b.txt", 1), (Some("bee\n".into()), 0), "deleted: copied");
    block_on(ws.mv("/c.txt", "/d.txt")).unwrap();
    assert_eq!(note(&sql, "/c.txt", 1), (Some("sea\n".into()), 0), "moved: copied");
}

/// The model's read reports the metadata `stat` reports and the version `version` reports,
/// whatever the MIME type holds (its metadata crosses as one text column).
#[test]
fn the_models_read_reports_what_stat_and_version_report() {
    let (_, ws) = ws();
    let odd = "text/plain; charset=\"utf-8\", x=ü,,";
    block_on(ws.write_file("/d/odd.txt", "one\ntwo", odd)).unwrap();
    write(&ws, "/d/plain.txt", "");
    block_on(ws.append_file("/d/plain.txt", "appended\n", "text/plain")).unwrap();
    block_on(ws.write_file_bytes("/d/pic.png", &[0x89, b'P', b'N', b'G'], "image/png")).unwrap();
    ws.symlink("/d/odd.txt", "/d/link").unwrap();
    for p in ["/d/odd.txt", "/d/plain.txt", "/d/pic.png", "/d", "/d/link", "/d/../d/./odd.txt"] {
        let (info, text, token) = ws.stat_with_seen_text(p).unwrap().unwrap();
        let stat = ws.stat(p).unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::to_value(&stat).unwrap(),
            "{p}"
        );
        let version = ws.version(p).unwrap().filter(|_| text.is_some()).map(|v| v.token());
        assert_eq!(token, version, "{p}");
    }
    let (info, text, _) = ws.stat_with_seen_text("/d/odd.txt").unwrap().unwrap();
    assert_eq!((info.mime_type.as_str(), text.as_deref()), (odd, Some("one\ntwo")));
    assert!(
        ws.version("/d/plain.txt").unwrap().unwrap().hash.is_none(),
        "an append drops the hash"
    );
    assert!(ws.stat_with_seen_text("/d/none.txt").unwrap().is_none());
}

#[test]
fn a_history_without_the_pending_column_gets_it() {
    let (sql, ws) = with_old_history("");
    assert!(ws.exists("/").unwrap());
    assert_eq!(note(&sql, "/f.txt", 1), (Some("seen text".into()), 0));
}

/// A workspace opened over a history table in an older layout (`options` after its columns)
/// holding one note of `/f.txt` version 1.
fn with_old_history(options: &str) -> (Rc<SqliteSql>, Workspace) {
    let sql = Rc::new(SqliteSql::new());
    sql.exec(
        &format!(
            "CREATE TABLE cf_wshist_default (path TEXT NOT NULL, slot INTEGER NOT NULL,
               version INTEGER NOT NULL, hash TEXT, content TEXT, PRIMARY KEY (path, slot))
             {options}"
        ),
        &[],
    )
    .unwrap();
    sql.exec("INSERT INTO cf_wshist_default VALUES ('/f.txt', 1, 1, 'abc', 'seen text')", &[])
        .unwrap();
    let ws = Workspace::new(sql.clone(), clock());
    (sql, ws)
}

#[test]
fn the_history_trigger_and_the_checkpoint_journal_both_keep_an_overwritten_version() {
    use crate::checkpoint::{Checkpoints, RewindScope};
    let sql = Rc::new(SqliteSql::new());
    let ws = Rc::new(Workspace::new(sql.clone(), clock()));
    let cp = Checkpoints::new(ws.clone()).unwrap();
    block_on(ws.write_fresh_for_model("/a.txt", "one\n", "text/plain", None)).unwrap();
    let k = block_on(cp.create(Some("k"), None)).unwrap();
    write(&ws, "/a.txt", "two\n");
    assert_eq!(note(&sql, "/a.txt", 1), (Some("one\n".into()), 0), "the history kept it");
    let refusal = block_on(ws.write_fresh_for_model("/a.txt", "three\n", "text/plain", None))
        .unwrap_err()
        .to_string();
    assert!(refusal.contains("-one\n+two"), "{refusal}");
    block_on(cp.rewind(&k.id, RewindScope::default())).unwrap();
    assert_eq!(read(&ws, "/a.txt").as_deref(), Some("one\n"), "the journal kept it");
    block_on(ws.write_fresh_for_model("/a.txt", "three\n", "text/plain", None))
        .expect("the version the model saw is back");
    assert_eq!(read(&ws, "/a.txt").as_deref(), Some("three\n"));
}

#[test]
fn a_model_write_is_noted_by_its_own_statement_and_keeps_the_text_it_replaces() {
    let (sql, ws) = ws();
    let _tool = ws.writing_as(Writer::Tool);
    block_on(ws.write_fresh_for_model("/a.txt", "one\n", "text/plain", None)).unwrap();
    assert_eq!(note(&sql, "/a.txt", 1), (None, 1), "the insert noted itself");
    block_on(ws.write_fresh_for_model("/a.txt", "two\n", "text/plain", None)).unwrap();
    assert_eq!(note(&sql, "/a.txt", 1), (Some("one\n".into()), 0), "the old text was kept");
    assert_eq!(note(&sql, "/a.txt", 2), (None, 1), "and not copied into the new note");
    block_on(ws.rewrite_for_model("/a.txt", "three\n", "text/plain", None)).unwrap();
    assert_eq!(note(&sql, "/a.txt", 2), (Some("two\n".into()), 0));
    assert_eq!(note(&sql, "/a.txt", 3), (None, 1), "the rewrite noted itself");
    drop(_tool);
    // Another writer's change is not noted, and the model's write is refused with the diff.
    write(&ws, "/a.txt", "four\n");
    assert_eq!(note(&sql, "/a.txt", 3), (Some("three\n".into()), 0));
    let rows = sql
        .exec("SELECT COUNT(*) FROM cf_wshist_default WHERE path = '/a.txt' AND version = 4", &[])
        .unwrap();
    assert_eq!(col_i64(&rows[0], 0), 0);
    let _tool = ws.writing_as(Writer::Tool);
    let refusal = block_on(ws.write_fresh_for_model("/a.txt", "five\n", "text/plain", None))
        .unwrap_err()
        .to_string();
    assert!(refusal.contains("-three\n+four"), "{refusal}");
}

/// A database whose change trigger is the one that only kept old text, under `name` (the
/// first lazy-note version's `cf_wshist_upd_`, or the change trigger before reverse deltas).
fn database_with_keep_old_trigger(name: &str) -> Rc<SqliteSql> {
    let sql = Rc::new(SqliteSql::new());
    assert!(Workspace::new(sql.clone(), clock()).exists("/").unwrap());
    sql.exec("DROP TRIGGER cf_wshist_change_default", &[]).unwrap();
    sql.exec(
        &format!(
            "CREATE TRIGGER {name} AFTER UPDATE OF content, version, path
             ON cf_wsfile_default BEGIN UPDATE cf_wshist_default SET content = OLD.content,
             pending = 0 WHERE path = OLD.path AND pending = 1; END"
        ),
        &[],
    )
    .unwrap();
    sql
}

#[test]
fn the_first_lazy_note_trigger_is_replaced() {
    let sql = database_with_keep_old_trigger("cf_wshist_upd_default");
    let ws = Workspace::new(sql.clone(), clock());
    let _tool = ws.writing_as(Writer::Tool);
    block_on(ws.write_fresh_for_model("/a.txt", "one\n", "text/plain", None)).unwrap();
    block_on(ws.write_fresh_for_model("/a.txt", "two\n", "text/plain", None)).unwrap();
    assert_eq!(note(&sql, "/a.txt", 1), (Some("one\n".into()), 0));
    assert_eq!(note(&sql, "/a.txt", 2), (None, 1), "no old trigger filled the new note");
    let rows = sql
        .exec("SELECT COUNT(*) FROM sqlite_master WHERE name = 'cf_wshist_upd_default'", &[])
        .unwrap();
    assert_eq!(col_i64(&rows[0], 0), 0);
}

/// The history row of `path`'s version `v` as stored: (SQLite type of its content, bytes).
fn note_kind(sql: &SqliteSql, path: &str, v: i64) -> (String, i64) {
    let rows = sql
        .exec(
            "SELECT typeof(content), length(CAST(content AS BLOB)) FROM cf_wshist_default
             WHERE path = ? AND version = ?",
            &[text(path), SqlValue::Integer(v)],
        )
        .unwrap();
    (col_opt_str(&rows[0], 0).unwrap(), col_i64(&rows[0], 1))
}

/// The refusal of the model's write of `path` naming, as `expectedVersion`, version
/// `counter` with the text `seen`.
fn model_write_as_of(ws: &Workspace, path: &str, counter: i64, seen: &str) -> String {
    let hash = Some(content_hash(seen.as_bytes()));
    let token = FileVersion { counter, hash, changed_by: None, changed_at: 0 }.token();
    block_on(ws.write_fresh_for_model(path, "x", "text/plain", Some(&token)))
        .unwrap_err()
        .to_string()
}

#[test]
fn a_model_edit_keeps_the_version_it_replaces_as_a_reverse_delta() {
    let (sql, ws) = ws();
    let body = "line of text\n".repeat(400);
    let v1 = format!("{body}marker = 1;\n{body}");
    let v2 = format!("{body}marker = 2;\n{body}");
    let v3 = format!("{body}marker = 3;\n{body}");
    let _tool = ws.writing_as(Writer::Tool);
    block_on(ws.write_fresh_for_model("/a.txt", &v1, "text/plain", None)).unwrap();
    block_on(ws.rewrite_for_model("/a.txt", &v2, "text/plain", Some(&v1))).unwrap();
    block_on(ws.rewrite_for_model("/a.txt", &v3, "text/plain", Some(&v2))).unwrap();
    // Versions 1 and 2 are kept as deltas of a few bytes, not as 10 KB copies.
    for v in [1, 2] {
        let (kind, bytes) = note_kind(&sql, "/a.txt", v);
        assert_eq!(kind, "blob", "version {v}");
        assert!(bytes < 64, "version {v}: {bytes} bytes");
    }
    assert_eq!(ws.seen_content("/a.txt", 2).unwrap().as_deref(), Some(v2.as_str()));
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap().as_deref(), Some(v1.as_str()));
    // The refusal diff of a stale version crosses both deltas.
    let refusal = model_write_as_of(&ws, "/a.txt", 1, &v1);
    assert!(refusal.contains("-marker = 1;\n+marker = 3;"), "{refusal}");
    // Another writer's change behind the model keeps the model's last version as text.
    drop(_tool);
    write(&ws, "/a.txt", "bash\n");
    assert_eq!(note_kind(&sql, "/a.txt", 3).0, "text");
    let _tool = ws.writing_as(Writer::Tool);
    let refusal = block_on(ws.write_fresh_for_model("/a.txt", "y", "text/plain", None))
        .unwrap_err()
        .to_string();
    assert!(refusal.contains("+bash"), "{refusal}");
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap().as_deref(), Some(v1.as_str()));
}

#[test]
fn a_reverse_delta_that_does_not_rebuild_the_noted_text_gives_no_diff() {
    let (sql, ws) = ws();
    let _tool = ws.writing_as(Writer::Tool);
    block_on(ws.write_fresh_for_model("/a.txt", "one two three\n", "text/plain", None)).unwrap();
    block_on(ws.rewrite_for_model(
        "/a.txt",
        "one 2 three\n",
        "text/plain",
        Some("one two three\n"),
    ))
    .unwrap();
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap().as_deref(), Some("one two three\n"));
    // A delta whose result is not the text noted for version 1 (its hash) is no text.
    sql.exec(
        "UPDATE cf_wshist_default SET content = CAST(replace(CAST(content AS TEXT), 'two', 'TWO')
           AS BLOB) WHERE path = '/a.txt' AND version = 1",
        &[],
    )
    .unwrap();
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap(), None);
    // A value of `undo` that an earlier statement left is not taken for this one's: a
    // rewrite without the previous text keeps a copy.
    block_on(ws.rewrite_for_model("/a.txt", "one 3 three\n", "text/plain", None)).unwrap();
    assert_eq!(note(&sql, "/a.txt", 2), (Some("one 2 three\n".into()), 0));
}

#[test]
fn a_change_trigger_without_reverse_deltas_is_replaced() {
    let sql = database_with_keep_old_trigger("cf_wshist_change_default");
    let ws = Workspace::new(sql.clone(), clock());
    let _tool = ws.writing_as(Writer::Tool);
    block_on(ws.write_fresh_for_model("/a.txt", "one\n", "text/plain", None)).unwrap();
    block_on(ws.rewrite_for_model("/a.txt", "two\n", "text/plain", Some("one\n"))).unwrap();
    assert_eq!(note_kind(&sql, "/a.txt", 1).0, "blob");
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap().as_deref(), Some("one\n"));
}

/// A database as a workspace leaves it, then without the history triggers and without
/// the files table's `columns` (dropped in order), as one from before them.
fn database_without(columns: &[&str]) -> Rc<SqliteSql> {
    let sql = Rc::new(SqliteSql::new());
    assert!(Workspace::new(sql.clone(), clock()).exists("/").unwrap());
    for trigger in ["change", "new", "del"] {
        sql.exec(&format!("DROP TRIGGER cf_wshist_{trigger}_default"), &[]).unwrap();
    }
    for column in columns {
        sql.exec(&format!("ALTER TABLE cf_wsfile_default DROP COLUMN {column}"), &[]).unwrap();
    }
    sql
}

#[test]
fn a_table_without_the_undo_column_gets_it() {
    // As a database from before it: the columns after it (`seen`) and the triggers that
    // read them absent.
    let sql = database_without(&["seen", "undo"]);
    let ws = Workspace::new(sql.clone(), clock());
    let _tool = ws.writing_as(Writer::Tool);
    block_on(ws.write_fresh_for_model("/a.txt", "one\n", "text/plain", None)).unwrap();
    block_on(ws.rewrite_for_model("/a.txt", "two\n", "text/plain", Some("one\n"))).unwrap();
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap().as_deref(), Some("one\n"));
}

#[test]
fn reverse_deltas_rebuild_the_old_text_at_any_edge() {
    use super::version::{reverse_delta, Delta};
    let cases = [
        ("", "x"),
        ("x", ""),
        ("abc", "abc"),
        ("same start, other end", "same start, changed"),
        ("other start, same end", "changed, same end"),
        ("aaaaaaaaaaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ("0123456789abcdef0123456789", "0123456789abXdef0123456789"),
        ("héllo wörld, ünïcode ✓ text", "héllo wørld, ünïcode ✗ text"),
        ("ééééééééééé", "éééééèéééééé"),
    ];
    for (old, new) in cases {
        let undo = reverse_delta(old, new).unwrap();
        let delta = Delta::parse(format!("2 h {undo}").as_bytes()).unwrap();
        assert_eq!(delta.apply(new).as_deref(), Some(old), "{old:?} -> {new:?}: {undo:?}");
        assert!(delta.replaced.len() <= old.len());
    }
    let long = "x".repeat(100);
    let undo = reverse_delta(&format!("{long}OLD{long}"), &format!("{long}NEW!{long}")).unwrap();
    assert_eq!(undo, "100 100 OLD", "only the replaced bytes are kept");
    // The shared start and end are found whole across the scan's 32-byte steps: one byte
    // changed at every offset of texts of lengths around those steps.
    for len in [1, 31, 32, 33, 63, 64, 65, 100, 257] {
        let old: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        for at in 0..len {
            let mut new = old.clone().into_bytes();
            new[at] = b'#';
            let new = String::from_utf8(new).unwrap();
            let want = format!("{at} {} {}", len - at - 1, &old[at..at + 1]);
            assert_eq!(reverse_delta(&old, &new).as_deref(), Some(want.as_str()), "{len} {at}");
        }
    }
}

#[test]
fn a_move_after_a_model_edit_keeps_the_text_not_the_edits_delta() {
    let (sql, ws) = ws();
    let _tool = ws.writing_as(Writer::Tool);
    block_on(ws.write_fresh_for_model("/a.txt", "one\n", "text/plain", None)).unwrap();
    block_on(ws.rewrite_for_model("/a.txt", "two\n", "text/plain", Some("one\n"))).unwrap();
    // The row still carries the edit's `undo`, tagged with its version and hash, which a
    // move keeps: the moved-away version 2 must be kept as text.
    block_on(ws.mv("/a.txt", "/b.txt")).unwrap();
    assert_eq!(note(&sql, "/a.txt", 2), (Some("two\n".into()), 0));
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap().as_deref(), Some("one\n"));
}

#[test]
fn history_triggers_from_before_the_rows_seen_note_are_replaced() {
    // As a database from before `seen`: no column, and the three triggers of then, which
    // noted every model write in the history as a pending note.
    let sql = database_without(&["seen"]);
    let (h, t) = ("cf_wshist_default", "cf_wsfile_default");
    let upsert = "ON CONFLICT (path, slot) DO UPDATE SET version = excluded.version,
        hash = excluded.hash, content = excluded.content, pending = excluded.pending";
    let note_sql = format!(
        "INSERT INTO {h} (path, slot, version, hash, content, pending)
         SELECT NEW.path, NEW.version % 4, NEW.version, NEW.hash, NULL,
           typeof(NEW.content) = 'text' AND NEW.size <= 65536
         WHERE NEW.changed_by = 'tool' AND NEW.type = 'file' {upsert}"
    );
    let keep_old = format!(
        "UPDATE {h} SET content = OLD.content, pending = 0 WHERE path = OLD.path AND pending = 1"
    );
    for ddl in [
        format!(
            "CREATE TRIGGER cf_wshist_change_default AFTER UPDATE OF content, version, path
             ON {t} BEGIN UPDATE {h} SET content = CASE WHEN version = OLD.version
               AND hash IS NOT NULL AND NEW.changed_by = 'tool'
               AND NEW.version = OLD.version + 1
               AND substr(NEW.undo, 1, length(NEW.version) + length(NEW.hash) + 2)
                 = NEW.version || ' ' || NEW.hash || ' '
             THEN CAST(NEW.undo AS BLOB) ELSE OLD.content END, pending = 0
             WHERE path = OLD.path AND pending = 1; {note_sql}; END"
        ),
        format!(
            "CREATE TRIGGER cf_wshist_new_default AFTER INSERT ON {t}
             WHEN NEW.changed_by = 'tool' AND NEW.type = 'file' BEGIN {note_sql}; END"
        ),
        format!("CREATE TRIGGER cf_wshist_del_default AFTER DELETE ON {t} BEGIN {keep_old}; END"),
    ] {
        sql.exec(&ddl, &[]).unwrap();
    }
    // The model's write under the old triggers: a pending note in the history.
    sql.exec(
        &format!(
            "INSERT INTO {t} (path, parent_path, name, type, size, created_at, modified_at,
               content, version, hash, changed_by) VALUES ('/a.txt', '/', 'a.txt', 'file', 4,
               0, 0, 'one\n', 1, ?, 'tool')"
        ),
        &[text(&content_hash(b"one\n"))],
    )
    .unwrap();
    let rows = sql.exec(&format!("SELECT pending FROM {h} WHERE path = '/a.txt'"), &[]);
    assert_eq!(col_i64(&rows.unwrap()[0], 0), 1);
    let ws = Workspace::new(sql.clone(), clock());
    let _tool = ws.writing_as(Writer::Tool);
    // The old note is still the model's: its write passes and keeps the text it replaces.
    block_on(ws.write_fresh_for_model("/a.txt", "two\n", "text/plain", None)).unwrap();
    assert_eq!(note(&sql, "/a.txt", 1), (Some("one\n".into()), 0));
    let rows = sql.exec(&format!("SELECT seen, version FROM {t} WHERE path = '/a.txt'"), &[]);
    let row = &rows.unwrap()[0];
    assert_eq!((col_i64(row, 0), col_i64(row, 1)), (2, 2), "noted on the row now");
    let rows = sql
        .exec(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'
               AND name LIKE 'cf_wshist_%' AND sql LIKE '%.seen%'",
            &[],
        )
        .unwrap();
    assert_eq!(col_i64(&rows[0], 0), 3, "all three triggers replaced");
    // Another writer's change behind it is refused with the diff from the model's version.
    drop(_tool);
    write(&ws, "/a.txt", "three\n");
    assert_eq!(note(&sql, "/a.txt", 2), (Some("two\n".into()), 0));
    let _tool = ws.writing_as(Writer::Tool);
    let refusal = block_on(ws.write_fresh_for_model("/a.txt", "four\n", "text/plain", None))
        .unwrap_err()
        .to_string();
    assert!(refusal.contains("-two\n+three"), "{refusal}");
}

#[test]
fn a_version_noted_on_the_row_bounds_the_history_as_its_note_would() {
    let (_sql, ws) = ws();
    let _tool = ws.writing_as(Writer::Tool);
    for i in 1..=5 {
        block_on(ws.write_fresh_for_model("/a.txt", &format!("v{i}\n"), "text/plain", None))
            .unwrap();
    }
    // Version 5 is noted on the row and takes version 1's slot: the last four are kept.
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap(), None);
    for i in 2..=5 {
        assert_eq!(ws.seen_content("/a.txt", i).unwrap(), Some(format!("v{i}\n")), "v{i}");
    }
    let refusal = model_write_as_of(&ws, "/a.txt", 1, "v1\n");
    assert!(refusal.contains("no longer kept"), "{refusal}");
    // A file deleted and written again by the model: its new version 1 is the one noted.
    block_on(ws.rm("/a.txt", false, false)).unwrap();
    block_on(ws.write_fresh_for_model("/a.txt", "again\n", "text/plain", None)).unwrap();
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap().as_deref(), Some("again\n"));
}

#[test]
fn the_content_hash_is_xxh3_64_as_the_reference_sanity_check_gives_it() {
    // The buffer and the seed-0 values of xxHash's own sanity check (`cli/xsum_sanity_check.c`,
    // `XSUM_fillTestBuffer` and `XSUM_XXH3_testdata`), one length per code path of XXH3.
    const PRIME32: u64 = 2_654_435_761;
    const PRIME64: u64 = 11_400_714_785_074_694_797;
    let mut byte_gen = PRIME32;
    let buffer: Vec<u8> = (0..2367)
        .map(|_| {
            let b = (byte_gen >> 56) as u8;
            byte_gen = byte_gen.wrapping_mul(PRIME64);
            b
        })
        .collect();
    let vectors: [(usize, &str); 13] = [
        (0, "2d06800538d394c2"),
        (1, "c44bdff4074eecdb"),
        (6, "27b56a84cd2d7325"),
        (12, "a713daf0dfbb77e7"),
        (24, "a3fe70bf9d3510eb"),
        (48, "397da259ecba1f11"),
        (80, "bcdefbbb2c47c90a"),
        (195, "cd94217ee362ec3a"),
        (403, "cdeb804d65c6dea4"),
        (512, "617e49599013cb6b"),
        (2048, "dd59e2c3a5f038e0"),
        (2240, "6e73a90539cf2948"),
        (2367, "cb37aeb9e5d361ed"),
    ];
    for (len, expected) in vectors {
        assert_eq!(content_hash(&buffer[..len]), expected, "length {len}");
    }
}

/// The hash a version got before XXH3: the first 16 hex digits of SHA-256 (computed here
/// with `sha2`, not by the code under test).
fn sha256_16(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_database_hashed_with_sha256_keeps_its_tokens_and_diffs() {
    let (sql, ws) = ws();
    let body = "line of text\n".repeat(400);
    let v: Vec<String> = (1..=4).map(|i| format!("{body}marker = {i};\n{body}")).collect();
    {
        let _tool = ws.writing_as(Writer::Tool);
        block_on(ws.write_fresh_for_model("/a.txt", &v[0], "text/plain", None)).unwrap();
        block_on(ws.rewrite_for_model("/a.txt", &v[1], "text/plain", Some(&v[0]))).unwrap();
        block_on(ws.rewrite_for_model("/a.txt", &v[2], "text/plain", Some(&v[1]))).unwrap();
    }
    // As the old scheme stored them: the live row's and every noted version's hash.
    sql.exec(
        "UPDATE cf_wsfile_default SET hash = ? WHERE path = '/a.txt'",
        &[text(&sha256_16(&v[2]))],
    )
    .unwrap();
    for (i, t) in v[..3].iter().enumerate() {
        sql.exec(
            "UPDATE cf_wshist_default SET hash = ? WHERE path = '/a.txt' AND version = ?",
            &[text(&sha256_16(t)), SqlValue::Integer(i as i64 + 1)],
        )
        .unwrap();
    }
    let old_token = |i: usize| format!("{}:{}", i + 1, sha256_16(&v[i]));

    let ws = Workspace::new(sql.clone(), clock());
    let _tool = ws.writing_as(Writer::Tool);
    assert_eq!(
        ws.version("/a.txt").unwrap().unwrap().token(),
        old_token(2),
        "rows keep their hash"
    );
    // The token the model holds still names the file, and so does the version it read.
    let read = block_on(ws.read_fresh_for_model("/a.txt", Some(&old_token(2)))).unwrap();
    assert_eq!(read.as_deref(), Some(v[2].as_str()));
    assert!(block_on(ws.read_fresh_for_model("/a.txt", None)).unwrap().is_some());
    // The first edit after the upgrade hashes with XXH3; its delta joins the old ones.
    block_on(ws.rewrite_for_model("/a.txt", &v[3], "text/plain", Some(&v[2]))).unwrap();
    let now = ws.version("/a.txt").unwrap().unwrap();
    assert_eq!(now.hash.as_deref(), Some(content_hash(v[3].as_bytes()).as_str()));
    assert_ne!(now.hash.as_deref(), Some(sha256_16(&v[3]).as_str()));
    assert_eq!(note_kind(&sql, "/a.txt", 3).0, "blob");
    // A stale old token is refused with the diff rebuilt through deltas of both schemes.
    for (i, old) in v[..3].iter().enumerate() {
        assert_eq!(ws.seen_content("/a.txt", i as i64 + 1).unwrap().as_deref(), Some(old.as_str()));
    }
    let refusal =
        block_on(ws.write_fresh_for_model("/a.txt", "x", "text/plain", Some(&old_token(0))))
            .unwrap_err()
            .to_string();
    assert!(refusal.contains("-marker = 1;\n+marker = 4;"), "{refusal}");
    // A rebuilt text that matches neither scheme's hash is still no text.
    sql.exec(
        "UPDATE cf_wshist_default SET hash = '0123456789abcdef' WHERE path = '/a.txt' AND version = 2",
        &[],
    )
    .unwrap();
    assert_eq!(ws.seen_content("/a.txt", 1).unwrap(), None);
}

/// The model's fast write formats its statement once per guard kind and reuses it: each kind's
/// cached text is the statement formatted afresh, and writes through it check as before.
#[test]
fn the_models_write_reuses_one_statement_per_guard_kind() {
    use version::GuardKind;
    let model_write = |ws: &Workspace, text: &str, expected: Option<&str>| {
        let _tool = ws.writing_as(Writer::Tool);
        block_on(ws.write_fresh_for_model("/d/a.txt", text, "text/plain", expected))
    };
    let cached = |ws: &Workspace, kind: GuardKind| ws.write_sql[kind.index()].get().cloned();
    let formatted = |ws: &Workspace, kind: GuardKind| {
        ws.write_inline_sql(io::Stored::TextAsBytes, Writer::Tool, Some(kind), true)
    };

    // The stale-write guard (on by default): twice by the statement, then a refusal.
    let (sql, ws) = ws();
    ws.mkdir("/d", false).unwrap();
    for text in ["one\n", "two\n"] {
        let before = sql.statements();
        model_write(&ws, text, None).unwrap();
        assert_eq!(sql.statements() - before, 1, "one statement for {text:?}");
    }
    assert_eq!(cached(&ws, GuardKind::Unseen), Some(formatted(&ws, GuardKind::Unseen)));
    write(&ws, "/d/a.txt", "app\n");
    let refusal = model_write(&ws, "three\n", None).unwrap_err().to_string();
    assert!(refusal.contains("-two\n+app"), "{refusal}");
    assert_eq!(read(&ws, "/d/a.txt").as_deref(), Some("app\n"));

    // A named version: the current one passes (twice), an older one is refused.
    for text in ["four\n", "five\n"] {
        let token = ws.version("/d/a.txt").unwrap().unwrap().token();
        model_write(&ws, text, Some(&token)).unwrap();
    }
    assert_eq!(cached(&ws, GuardKind::Expected), Some(formatted(&ws, GuardKind::Expected)));
    let old = FileVersion { counter: 1, hash: None, changed_by: None, changed_at: 0 }.token();
    assert!(model_write(&ws, "six\n", Some(&old)).is_err());
    assert!(model_write(&ws, "six\n", Some(&old)).is_err(), "refused again by the same statement");
    assert_eq!(read(&ws, "/d/a.txt").as_deref(), Some("five\n"));
    let gone = "/d/gone.txt";
    let _tool = ws.writing_as(Writer::Tool);
    assert!(block_on(ws.write_fresh_for_model(gone, "x", "text/plain", Some(&old))).is_err());
    assert_eq!(read(&ws, gone), None, "a named version needs a file");
    drop(_tool);

    // The guard off: the model overwrites another writer's change unchecked.
    let sql = Rc::new(SqliteSql::new());
    let options = WorkspaceOptions { guard_stale_writes: false, ..Default::default() };
    let ws = Workspace::with_options(sql.clone(), clock(), options).unwrap();
    ws.mkdir("/d", false).unwrap();
    model_write(&ws, "one\n", None).unwrap();
    write(&ws, "/d/a.txt", "app\n");
    let before = sql.statements();
    model_write(&ws, "two\n", None).unwrap();
    assert_eq!(sql.statements() - before, 1);
    assert_eq!(read(&ws, "/d/a.txt").as_deref(), Some("two\n"));
    assert_eq!(cached(&ws, GuardKind::Unchecked), Some(formatted(&ws, GuardKind::Unchecked)));
    assert_eq!(cached(&ws, GuardKind::Unseen), None, "only the kinds used are formatted");
}

/// The fast write's refusal is its statement's `NOT NULL` error on `modified_at`, as SQLite
/// and workerd word it; any other error is an error. A missing parent is no error: the
/// statement writes nothing (`INSERT OR IGNORE`), and the parent is made.
#[test]
fn the_fast_write_tells_its_refusal_from_other_errors() {
    let (sql, ws) = ws();
    for msg in [
        "NOT NULL constraint failed: cf_wsfile_default.modified_at",
        "Error: NOT NULL constraint failed: cf_wsfile_default.modified_at: SQLITE_CONSTRAINT",
    ] {
        assert!(ws.write_refused(msg), "{msg}");
    }
    for msg in [
        "NOT NULL constraint failed: cf_wsfile_default.name",
        "NOT NULL constraint failed: cf_wsfile_other.modified_at",
        "UNIQUE constraint failed: cf_wsfile_default.path",
        "database or disk is full",
    ] {
        assert!(!ws.write_refused(msg), "{msg}");
    }
    let statement = ws.write_inline_sql(io::Stored::TextAsBytes, Writer::Tool, None, true);
    assert!(statement.starts_with("INSERT OR IGNORE INTO"), "{statement}");
    ws.stat("/").unwrap();
    let before = sql.statements();
    write(&ws, "/fresh/dir/a.txt", "x");
    assert_eq!(sql.statements() - before, 3, "ignored, the two levels made, written");
    // Refused by each rule, the write takes the general path, or fails as it did.
    ws.mkdir("/dir", false).unwrap();
    write(&ws, "/new/a.txt", "created with its parent\n");
    assert_eq!(read(&ws, "/new/a.txt").as_deref(), Some("created with its parent\n"));
    assert_eq!(errno(block_on(ws.write_file("/dir", "x", "text/plain"))), Errno::IsDir);
    assert!(ws.stat("/dir").unwrap().unwrap().kind == EntryType::Directory);
}

#[test]
fn version_tokens_are_the_counter_a_colon_and_the_hash() {
    for counter in [0, 1, 9, 10, 99, 12_345, -1, -40, i64::MAX, i64::MIN] {
        for hash in [None, Some("00ff".to_owned())] {
            let want = format!("{counter}:{}", hash.as_deref().unwrap_or("-"));
            let token = FileVersion { counter, hash, changed_by: None, changed_at: 0 }.token();
            assert_eq!(token, want);
        }
    }
}

/// The model's read before an edit checks the row's own note before the history: when the
/// row notes its version, the history (four kept versions here, none there) is not looked
/// at, so both reads take the same SQLite steps (a value `OR` evaluated its history
/// subquery, and its sort, on every read).
#[test]
fn edit_read_of_a_noted_row_skips_the_history() {
    let (sql, ws) = ws();
    let _tool = ws.writing_as(Writer::Tool);
    let text = |i: usize| format!("line one\nversion {i}\n");
    for p in ["/a.txt", "/b.txt"] {
        let _app = ws.writing_as(Writer::App);
        block_on(ws.write_file(p, &text(0), "text/plain")).unwrap();
    }
    for i in 1..=6 {
        block_on(ws.rewrite_for_model("/a.txt", &text(i), "text/plain", Some(&text(i - 1))))
            .unwrap();
    }
    block_on(ws.rewrite_for_model("/b.txt", &text(1), "text/plain", Some(&text(0)))).unwrap();
    let kept = |p: &str| {
        let rows = sql
            .exec("SELECT count(*) FROM cf_wshist_default WHERE path = ?", &[super::text(p)])
            .unwrap();
        col_i64(&rows[0], 0)
    };
    assert_eq!((kept("/a.txt"), kept("/b.txt")), (4, 0));
    let steps = |p: &str| {
        let before = sql.steps();
        let read = block_on(ws.read_fresh_for_model(p, None)).unwrap();
        assert!(read.is_some_and(|r| r.starts_with("line one")));
        sql.steps() - before
    };
    assert_eq!(steps("/a.txt"), steps("/b.txt"));
    // And the check still refuses an edit of a version the model has not seen.
    {
        let _app = ws.writing_as(Writer::App);
        block_on(ws.write_file("/a.txt", "changed by the app\n", "text/plain")).unwrap();
    }
    assert!(matches!(
        block_on(ws.read_fresh_for_model("/a.txt", None)),
        Err(StaleWrite::Changed { diff: Some(_), .. })
    ));
}

/// SQL that refuses every statement, as a database that went away does.
struct Down;

impl Sql for Down {
    fn exec(&self, _: &str, _: &[SqlValue]) -> Result<Vec<Row>, StoreError> {
        Err(StoreError::Sql("disk I/O error".into()))
    }
    fn exec_changed(&self, _: &str, _: &[SqlValue]) -> Result<bool, StoreError> {
        Err(StoreError::Sql("disk I/O error".into()))
    }
    fn transaction(&self, _: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
        Err(StoreError::Sql("disk I/O error".into()))
    }
}

#[test]
fn a_storage_failure_keeps_the_store_error_and_its_text() {
    let ws = Workspace::new(Rc::new(Down), clock());
    let e = block_on(ws.read_file("/a")).unwrap_err();
    assert_eq!(e, FsError::Store(StoreError::Sql("disk I/O error".into())));
    assert_eq!(e.to_string(), "EIO: storage error, disk I/O error");
    let source = std::error::Error::source(&e).map(ToString::to_string);
    assert_eq!(source.as_deref(), Some("disk I/O error"));
    assert_eq!(e.errno(), None);
}
