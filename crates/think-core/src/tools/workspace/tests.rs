//! The workspace tools against a real `Workspace` (SQLite) and against custom stores.

use super::ops::*;
use super::*;
use crate::store::sqlite::SqliteSql;
use crate::tools::{ModelOutput, ToolContext};
use crate::workspace::tests::{block_on, clock};
use crate::workspace::{EntryType, FileInfo, Workspace};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;

fn ws() -> Rc<Workspace> {
    Rc::new(Workspace::new(Rc::new(SqliteSql::new()), clock()))
}

fn run(tool: &ToolRef, input: Value) -> Result<Value, crate::tools::ToolError> {
    block_on(tool.execute(input, &ToolContext::default()))
}

fn ok(tool: &ToolRef, input: Value) -> Value {
    run(tool, input).expect("tool succeeds")
}

fn put(ws: &Workspace, path: &str, content: &str) {
    block_on(ws.write_file(path, content, "text/plain")).unwrap();
}

/// The definitions' text and schemas are compared with Think's own, generated from the pinned
/// package at test time, by tests/tool-schemas.test.mjs; here: the order, and that every
/// schema compiles for input validation.
#[test]
fn definitions_are_in_thinks_order_and_compile() {
    let tools = workspace_tools(ws(), WorkspaceToolsOptions::default());
    let names: Vec<&str> = tools.iter().map(|t| t.definition().name.as_str()).collect();
    assert_eq!(names, ["read", "write", "edit", "list", "find", "grep", "delete"]);
    for tool in &tools {
        crate::tools::schema::InputValidator::new(&tool.definition().input_schema).unwrap();
    }
}

#[test]
fn read_numbers_lines_and_pages() {
    let ws = ws();
    let read = read_tool(ws.clone());
    put(&ws, "/a.txt", "one\ntwo\nthree\n");
    let out = ok(&read, json!({"path": "/a.txt"}));
    assert_eq!(
        out,
        json!({"path": "/a.txt", "content": "1\tone\n2\ttwo\n3\tthree\n4\t", "totalLines": 4,
            "version": format!("1:{}", crate::workspace::content_hash(b"one\ntwo\nthree\n"))})
    );
    assert_eq!(read.model_output(&out), ModelOutput::Text("1\tone\n2\ttwo\n3\tthree\n4\t".into()));
    let out = ok(&read, json!({"path": "/a.txt", "offset": 2, "limit": 1}));
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        format!(
            r#"{{"path":"/a.txt","content":"2\ttwo","totalLines":4,"fromLine":2,"toLine":2,"version":"{}"}}"#,
            out["version"].as_str().unwrap()
        )
    );
    let out = ok(&read, json!({"path": "/a.txt", "offset": 3, "limit": 10}));
    assert_eq!((out["fromLine"].clone(), out["toLine"].clone()), (json!(3), json!(4)));
    let out = ok(&read, json!({"path": "/a.txt", "offset": 9}));
    assert_eq!(out["content"], "");

    let long = "x".repeat(2500);
    let many: Vec<String> =
        (0..2100).map(|i| if i == 0 { long.clone() } else { format!("l{i}") }).collect();
    put(&ws, "/big.txt", &many.join("\n"));
    let out = ok(&read, json!({"path": "/big.txt"}));
    let content = out["content"].as_str().unwrap();
    assert!(content.starts_with(&format!("1\t{}... (truncated)\n2\tl1", "x".repeat(2000))));
    assert!(content.ends_with("2000\tl1999\n... (100 more lines truncated)"));
    assert_eq!(out["totalLines"], 2100);

    let out = ok(&read, json!({"path": "/big.txt", "offset": 51, "limit": 3000}));
    let content = out["content"].as_str().unwrap();
    assert!(content.starts_with("51\tl50\n52\tl51\n"), "{}", &content[..40]);
    assert!(content.ends_with("2050\tl2049\n... (50 more lines truncated)"));
    assert_eq!((out["fromLine"].clone(), out["toLine"].clone()), (json!(51), json!(2100)));
}

#[test]
fn read_cuts_long_lines_in_utf16_units() {
    let ws = ws();
    let read = read_tool(ws.clone());
    // 1,999 units of "é" (one unit, two bytes) then an astral char (two units). JS
    // `slice(0, 2000)` would keep a lone high surrogate, which a Rust string cannot hold, so
    // the cut falls before the astral char.
    let line = format!("{}\u{1F600}tail", "é".repeat(1999));
    put(&ws, "/u.txt", &format!("{line}\n{}", "é".repeat(2000)));
    let out = ok(&read, json!({"path": "/u.txt"}));
    assert_eq!(
        out["content"],
        format!("1\t{}... (truncated)\n2\t{}", "é".repeat(1999), "é".repeat(2000))
    );
}

#[test]
fn read_errors_echo_the_path_as_given() {
    let ws = ws();
    let read = read_tool(ws.clone());
    let out = ok(&read, json!({"path": "../../etc/passwd"}));
    assert_eq!(out, json!({"error": "File not found: ../../etc/passwd"}));
    assert_eq!(
        read.model_output(&out),
        ModelOutput::ErrorText("File not found: ../../etc/passwd".into())
    );
    put(&ws, "/d/f.txt", "x");
    assert_eq!(ok(&read, json!({"path": "/d"})), json!({"error": "/d is a directory, not a file"}));
    let write = write_tool(ws.clone());
    assert_eq!(
        ok(&write, json!({"path": "../../etc/passwd", "content": "root"})),
        json!({"path": "../../etc/passwd", "bytesWritten": 4, "lines": 1})
    );
    assert_eq!(ok(&read, json!({"path": "/etc/passwd"}))["content"], "1\troot");
}

#[test]
fn read_detects_images_pdfs_and_binary() {
    let ws = ws();
    let read = read_tool(ws.clone());
    let png = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
    block_on(ws.write_file_bytes("/img/logo.bin", &png, "application/octet-stream")).unwrap();
    let out = ok(&read, json!({"path": "/img/logo.bin"}));
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        r#"{"kind":"image","path":"/img/logo.bin","name":"logo.bin","mediaType":"image/png","sizeBytes":12}"#
    );
    assert_eq!(read.model_output(&out), ModelOutput::Json(out.clone()));
    block_on(ws.write_file_bytes("/doc.pdf", b"%PDF-1.4\n...", "application/pdf; charset=binary"))
        .unwrap();
    assert_eq!(ok(&read, json!({"path": "/doc.pdf"}))["kind"], "file");
    block_on(ws.write_file_bytes("/blob", &[1, 2, 0, 3], "application/octet-stream")).unwrap();
    assert_eq!(
        ok(&read, json!({"path": "/blob"})),
        json!({"kind": "binary", "path": "/blob", "name": "blob", "mediaType": "application/octet-stream", "sizeBytes": 4, "unsupported": true})
    );
    block_on(ws.write_file_bytes("/notes", b"plain words", "application/octet-stream")).unwrap();
    assert_eq!(ok(&read, json!({"path": "/notes"}))["content"], "1\tplain words");
    block_on(ws.write_file_bytes("/data.json", b"{}", "application/json")).unwrap();
    assert_eq!(ok(&read, json!({"path": "/data.json"}))["content"], "1\t{}");
}

/// A store that records calls, to check what the tools ask of a custom backend.
#[derive(Default)]
struct MapStore {
    files: RefCell<BTreeMap<String, String>>,
    calls: RefCell<Vec<String>>,
}

fn info(path: &str, size: usize) -> FileInfo {
    FileInfo {
        path: path.into(),
        name: path.rsplit('/').next().unwrap_or("").into(),
        kind: EntryType::File,
        mime_type: "text/plain".into(),
        size: size as u64,
        created_at: 0,
        updated_at: 0,
        target: None,
    }
}

/// A store without versions accepts every write.
impl VersionOps for MapStore {}

#[async_trait(?Send)]
impl WriteOps for MapStore {
    async fn write_file(&self, path: &str, content: &str) -> Result<(), crate::workspace::FsError> {
        self.calls.borrow_mut().push(format!("write {path}"));
        self.files.borrow_mut().insert(path.into(), content.into());
        Ok(())
    }
    async fn mkdir(&self, path: &str, recursive: bool) -> Result<(), crate::workspace::FsError> {
        self.calls.borrow_mut().push(format!("mkdir {path} {recursive}"));
        Ok(())
    }
}

#[async_trait(?Send)]
impl GrepOps for MapStore {
    async fn glob(&self, _pattern: &str) -> Result<Vec<FileInfo>, crate::workspace::FsError> {
        Ok(self.files.borrow().iter().map(|(p, c)| info(p, c.len())).collect())
    }
    async fn read_file(&self, path: &str) -> Result<Option<String>, crate::workspace::FsError> {
        self.calls.borrow_mut().push(format!("read {path}"));
        Ok(self.files.borrow().get(path).cloned())
    }
}

#[test]
fn tools_run_over_a_custom_store() {
    let store = Rc::new(MapStore::default());
    let write = write_tool(store.clone());
    ok(&write, json!({"path": "/a/b/c.txt", "content": "hello\nworld"}));
    ok(&write, json!({"path": "/top.txt", "content": "hi"}));
    assert_eq!(*store.calls.borrow(), ["mkdir /a/b true", "write /a/b/c.txt", "write /top.txt"]);
    store.calls.borrow_mut().clear();
    let grep = grep_tool(store.clone());
    let out = ok(&grep, json!({"query": "WORLD"}));
    assert_eq!(out["matches"], json!(["/a/b/c.txt:2: world"]));
    assert_eq!(
        *store.calls.borrow(),
        ["read /a/b/c.txt", "read /top.txt"],
        "default read_files reads one by one"
    );
}

#[test]
fn list_formats_entries() {
    let ws = ws();
    let list = list_tool(ws.clone());
    put(&ws, "/d/small.txt", "abc");
    put(&ws, "/d/kb.txt", &"x".repeat(1280));
    block_on(ws.write_file_bytes(
        "/d/mb.bin",
        &vec![1u8; 3 * 1024 * 1024 / 2],
        "application/octet-stream",
    ))
    .unwrap();
    ws.mkdir("/d/sub", false).unwrap();
    ws.symlink("/d/small.txt", "/d/link").unwrap();
    let out = ok(&list, json!({"path": "/d"}));
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        r#"{"path":"/d","count":5,"entries":["sub/","kb.txt (1.3 KB)","mb.bin (1.5 MB)","small.txt (3 B)","link"]}"#
    );
    assert_eq!(
        ok(&list, json!({"path": "/d", "limit": 2, "offset": 1}))["entries"],
        json!(["kb.txt (1.3 KB)", "mb.bin (1.5 MB)"])
    );
    assert_eq!(ok(&list, json!({})), json!({"path": "/", "count": 1, "entries": ["d/"]}));
    assert_eq!(
        ok(&list, json!({"path": "/missing"})),
        json!({"path": "/missing", "count": 0, "entries": []})
    );
}

#[test]
fn find_lists_paths_and_truncates() {
    let ws = ws();
    let find = find_tool(ws.clone());
    for i in 0..205 {
        put(&ws, &format!("/notes/n{i:03}.md"), "x");
    }
    put(&ws, "/src/a.ts", "x");
    let out = ok(&find, json!({"pattern": "**/*.ts"}));
    assert_eq!(out, json!({"pattern": "**/*.ts", "count": 1, "files": ["/src/a.ts"]}));
    let out = ok(&find, json!({"pattern": "**/*.md"}));
    assert_eq!(out["count"], 205);
    assert_eq!(out["files"].as_array().unwrap().len(), 200);
    assert_eq!((out["truncated"].clone(), out["showing"].clone()), (json!(true), json!(200)));
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["pattern", "count", "files", "truncated", "showing"]);
    assert_eq!(ok(&find, json!({"pattern": "/*"}))["files"], json!(["/notes/", "/src/"]));
}

#[test]
fn grep_output_strings_and_context_objects() {
    let ws = ws();
    let grep = grep_tool(ws.clone());
    put(&ws, "/src/a.ts", "import x\nconst Foo = 1;\nexport default Foo;\n");
    put(&ws, "/src/b.md", "nothing here\n");
    put(&ws, "/docs/c.md", "foo bar\n");
    let out = ok(&grep, json!({"query": "foo"}));
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        r#"{"query":"foo","filesSearched":3,"filesWithMatches":2,"totalMatches":3,"matches":["/docs/c.md:1: foo bar","/src/a.ts:2: const Foo = 1;","/src/a.ts:3: export default Foo;"]}"#
    );
    let out = ok(
        &grep,
        json!({"query": "Foo", "caseSensitive": true, "include": "**/*.ts", "contextLines": 1}),
    );
    assert_eq!(out["filesSearched"], 1);
    assert_eq!(
        out["matches"],
        json!([
            {"file": "/src/a.ts", "line": 2, "context": "  1\timport x\n> 2\tconst Foo = 1;\n  3\texport default Foo;"},
            {"file": "/src/a.ts", "line": 3, "context": "  2\tconst Foo = 1;\n> 3\texport default Foo;\n  4\t"}
        ])
    );
    put(&ws, "/re.txt", "a.b\naxb\nprice: $5 (approx)\n");
    assert_eq!(
        ok(&grep, json!({"query": "a.b", "fixedString": true, "include": "/re.txt"}))["matches"],
        json!(["/re.txt:1: a.b"])
    );
    assert_eq!(ok(&grep, json!({"query": "$5 (", "fixedString": true}))["totalMatches"], 1);
    assert_eq!(ok(&grep, json!({"query": "^a.b$", "include": "/re.txt"}))["totalMatches"], 2);
    assert_eq!(
        ok(&grep, json!({"query": "(?<=\\$)\\d", "include": "/re.txt"}))["matches"],
        json!(["/re.txt:3: price: $5 (approx)"])
    );
    assert_eq!(ok(&grep, json!({"query": "default Foo;$"}))["totalMatches"], 1);
}

#[test]
fn grep_invalid_regex_caps_and_skips() {
    let ws = ws();
    let grep = grep_tool(ws.clone());
    put(&ws, "/a.txt", "x\n");
    assert_eq!(ok(&grep, json!({"query": "foo("})), json!({"error": "Invalid regex: foo("}));
    assert_eq!(ok(&grep, json!({"query": "a**"})), json!({"error": "Invalid regex: a**"}));
    // JS reads a `{` that is not a quantifier as a literal.
    put(&ws, "/f.js", "function f() {\n}\n");
    assert_eq!(ok(&grep, json!({"query": "f() {"}))["totalMatches"], 0);
    assert_eq!(ok(&grep, json!({"query": "f\\(\\) {"}))["totalMatches"], 1);

    let lines: String = (0..150).map(|i| format!("hit {i}\n")).collect();
    put(&ws, "/many1.txt", &lines);
    put(&ws, "/many2.txt", &lines);
    put(&ws, "/many3.txt", &lines);
    put(&ws, "/huge.txt", &format!("hit\n{}", "y".repeat(1_048_577)));
    let out = ok(&grep, json!({"query": "hit"}));
    assert_eq!(out["totalMatches"], 200);
    assert_eq!(out["filesWithMatches"], 2);
    assert_eq!(out["truncated"], true);
    assert_eq!(out["matches"].as_array().unwrap().len(), 200);
    assert_eq!(
        (out["filesSkipped"].clone(), out["note"].clone()),
        (json!(1), json!("1 file(s) skipped (larger than 1 MB)"))
    );
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "query",
            "filesSearched",
            "filesWithMatches",
            "totalMatches",
            "matches",
            "truncated",
            "filesSkipped",
            "note"
        ]
    );
}

#[test]
fn grep_pages_reads_spilled_files_and_filters_globs_sql_cannot() {
    let sql = Rc::new(SqliteSql::new());
    let blobs = Rc::new(crate::store::sqlite::MemoryBlobs::default());
    let options = crate::workspace::WorkspaceOptions {
        blobs: Some(blobs.clone()),
        inline_threshold: 64,
        ..Default::default()
    };
    let ws = Rc::new(Workspace::with_options(sql, clock(), options).unwrap());
    let grep = grep_tool(ws.clone());
    for i in 0..300 {
        put(&ws, &format!("/p/{i:03}.txt"), if i % 100 == 99 { "the mark" } else { "plain" });
    }
    put(&ws, "/p/r2.txt", &format!("{}\nthe mark in R2", "x".repeat(100)));
    assert_eq!(blobs.objects.borrow().len(), 1);
    let out = ok(&grep, json!({"query": "MARK"}));
    assert_eq!(
        out["matches"],
        json!([
            "/p/099.txt:1: the mark",
            "/p/199.txt:1: the mark",
            "/p/299.txt:1: the mark",
            "/p/r2.txt:2: the mark in R2"
        ])
    );
    assert_eq!(out["filesSearched"], 301);
    let out = ok(&grep, json!({"query": "mark", "include": "/p/?99.txt"}));
    assert_eq!(
        out["matches"],
        json!(["/p/099.txt:1: the mark", "/p/199.txt:1: the mark", "/p/299.txt:1: the mark"])
    );
    assert_eq!(out["filesSearched"], 3);
    // The cap stops the search mid-page.
    for i in 0..300 {
        put(&ws, &format!("/q/{i:03}.txt"), "hit");
    }
    let out = ok(&grep, json!({"query": "hit", "include": "/q/**"}));
    assert_eq!(
        (out["totalMatches"].clone(), out["filesSearched"].clone()),
        (json!(200), json!(200))
    );
    assert_eq!(out["matches"][199], "/q/199.txt:1: hit");
    // A bad glob is reported before a bad regex, as in Think.
    let err = run(&grep, json!({"query": "(", "include": "[z-a]"})).unwrap_err();
    assert!(err.to_string().starts_with("EINVAL"), "{}", err.to_string());
}

#[test]
fn grep_candidates_never_skip_a_matching_line() {
    let m = grep::Matcher::new("b\\s*$", false, false).unwrap();
    assert_eq!(m.matching_lines("ab\ncd\nb  \nb", 10), vec![0, 2, 3]);
    let m = grep::Matcher::new("x[^y]+z", false, true).unwrap();
    assert_eq!(
        m.matching_lines("x\nz\nxaz", 10),
        vec![2],
        "a match spanning lines is not a line match"
    );
    let m = grep::Matcher::new("a(?!\\s)", false, true).unwrap();
    assert_eq!(m.matching_lines("a\nb", 10), vec![0], "look-ahead sees only the line");
}

#[test]
fn grep_fixed_strings_ignore_ascii_case_like_js() {
    let m = grep::Matcher::new("Needle.", true, false).unwrap();
    let text = "a needle. here\nNEEDLE.\nneedleX\nno\nxx nEeDlE.";
    assert_eq!(m.matching_lines(text, 10), vec![0, 1, 4]);
    assert_eq!(m.matching_lines(text, 2), vec![0, 1]);
    // JS's `i` flag leaves non-ASCII letters whose upper case is ASCII alone (ſ, K).
    let m = grep::Matcher::new("sk", true, false).unwrap();
    assert_eq!(m.matching_lines("\u{17F}k\ns\u{212A}\nSK", 10), vec![2]);
    // A line break in a fixed string can never be inside one line.
    let m = grep::Matcher::new("a\nb", true, false).unwrap();
    assert_eq!(m.matching_lines("a\nb", 10), Vec::<usize>::new());
    // The scan for the rare byte agrees with a plain search at every offset and length.
    let mut seed = 7u32;
    let mut hay = String::new();
    for _ in 0..3000 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
        hay.push(b"abcxyzXYZ \n"[(seed >> 16) as usize % 11] as char);
    }
    for needle in ["xyz", "Zz", "c x", "ZYX", "a", "xYzAbC"] {
        let m = grep::Matcher::new(needle, true, false).unwrap();
        let lower = hay.to_ascii_lowercase();
        let want: Vec<usize> = lower
            .split('\n')
            .enumerate()
            .filter(|(_, l)| l.contains(&needle.to_ascii_lowercase()))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(m.matching_lines(&hay, usize::MAX), want, "{needle}");
        let m = grep::Matcher::new(needle, true, true).unwrap();
        let want: Vec<usize> = hay
            .split('\n')
            .enumerate()
            .filter(|(_, l)| l.contains(needle))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(m.matching_lines(&hay, usize::MAX), want, "{needle} (case-sensitive)");
    }
    let m = grep::Matcher::new("é x", true, true).unwrap();
    assert_eq!(m.matching_lines("a é x\né X\n", 10), vec![0], "non-ASCII, exact");
}

#[test]
fn delete_semantics() {
    let ws = ws();
    let delete = delete_tool(ws.clone());
    put(&ws, "/d/x.txt", "x");
    // Errors are worded as Think's Workspace words them, with the path as given.
    let err = run(&delete, json!({"path": "/d/../d"})).unwrap_err();
    assert_eq!(err.to_string(), "ENOTEMPTY: directory not empty: /d/../d");
    let err = run(&delete, json!({"path": "/"})).unwrap_err();
    assert_eq!(err.to_string(), "EPERM: cannot remove root directory");
    assert_eq!(ok(&delete, json!({"path": "/nope"})), json!({"deleted": "/nope"}));
    assert_eq!(ok(&delete, json!({"path": "/d", "recursive": true})), json!({"deleted": "/d"}));
    assert!(!ws.exists("/d/x.txt").unwrap());
}

#[test]
fn tool_errors_use_thinks_wording() {
    let ws = ws();
    let (write, edit) = (write_tool(ws.clone()), edit_tool(ws.clone()));
    put(&ws, "/dir/f.txt", "x");
    let err = |tool: &ToolRef, input: Value| run(tool, input).unwrap_err().to_string();
    assert_eq!(
        err(&write, json!({"path": "/..", "content": "x"})),
        "EISDIR: cannot write to root directory"
    );
    assert_eq!(err(&write, json!({"path": "/dir", "content": "x"})), "EISDIR: /dir is a directory");
    assert_eq!(
        err(&edit, json!({"path": "/dir", "old_string": "a", "new_string": "b"})),
        "EISDIR: /dir is a directory"
    );
    let long = format!("/{}", "d".repeat(4100));
    assert_eq!(
        err(&write, json!({"path": long, "content": "x"})),
        "ENAMETOOLONG: path exceeds 4096 characters"
    );
    // Others keep the filesystem's Node-style text.
    assert_eq!(
        err(&write, json!({"path": "/dir/f.txt/x", "content": "x"})),
        "ENOTDIR: not a directory, open '/dir/f.txt/x'"
    );
}

#[test]
fn edit_outputs() {
    let ws = ws();
    let edit = edit_tool(ws.clone());
    assert_eq!(
        serde_json::to_string(&ok(
            &edit,
            json!({"path": "/n.txt", "old_string": "", "new_string": "a\nb"})
        ))
        .unwrap(),
        r#"{"path":"/n.txt","created":true,"lines":2}"#
    );
    assert_eq!(
        ok(&edit, json!({"path": "/n.txt", "old_string": "", "new_string": "x"})),
        json!({"error": "File already exists. Provide old_string to edit, or use the write tool to overwrite."})
    );
    assert_eq!(
        serde_json::to_string(&ok(
            &edit,
            json!({"path": "/n.txt", "old_string": "b", "new_string": "c"})
        ))
        .unwrap(),
        r#"{"path":"/n.txt","replaced":true,"lines":2}"#
    );
    put(&ws, "/w.txt", "x  =  1\n");
    assert_eq!(
        serde_json::to_string(&ok(
            &edit,
            json!({"path": "/w.txt", "old_string": "x = 1", "new_string": "x = 2"})
        ))
        .unwrap(),
        r#"{"path":"/w.txt","replaced":true,"fuzzyMatch":true,"lines":2,"matchLevel":"whitespace"}"#
    );
    put(&ws, "/dup.txt", "a\na\n");
    assert_eq!(
        ok(&edit, json!({"path": "/dup.txt", "old_string": "a", "new_string": "b"})),
        json!({"error": "old_string appears 2 times in the file. Include more surrounding context to make the match unique."})
    );
    assert_eq!(
        ok(&edit, json!({"path": "/none.txt", "old_string": "a", "new_string": "b"})),
        json!({"error": "File not found: /none.txt"})
    );
    let miss = ok(&edit, json!({"path": "/dup.txt", "old_string": "zzz", "new_string": "b"}));
    assert_eq!(
        miss,
        json!({"error": "old_string not found in file. Make sure it matches exactly, including whitespace and indentation. Read the file first to verify."})
    );
}

#[derive(serde::Deserialize)]
struct Corpus {
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    id: String,
    category: String,
    path: String,
    file: Option<String>,
    old_string: String,
    new_string: String,
    expected: Option<String>,
    expected_error: Option<String>,
    expected_hint: Option<String>,
}

/// The error kind an edit error message names (shared with bench/edit-corpus/run.mjs).
fn error_kind(msg: &str) -> &'static str {
    if msg.contains("times in the file") || msg.contains("multiple locations") {
        "ambiguous"
    } else if msg.starts_with("old_string not found") {
        "not_found"
    } else if msg.starts_with("File already exists") {
        "exists"
    } else if msg.starts_with("File not found") {
        "file_not_found"
    } else {
        "other"
    }
}

#[test]
fn edit_corpus() {
    let corpus: Corpus =
        serde_json::from_str(include_str!("../../../../../tests/edit-corpus/cases.json")).unwrap();
    assert!(corpus.cases.len() >= 60);
    let mut by_category: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &corpus.cases {
        let ws = ws();
        if let Some(f) = &case.file {
            put(&ws, &case.path, f);
        }
        let out = run(
            &edit_tool(ws.clone()),
            json!({"path": case.path, "old_string": case.old_string, "new_string": case.new_string}),
        );
        let now = block_on(ws.read_file(&case.path)).unwrap();
        let passed = match (&out, &case.expected, &case.expected_error) {
            (Ok(v), Some(expected), _) if v.get("error").is_none() => {
                now.as_deref() == Some(expected.as_str())
            }
            (Ok(v), None, Some(kind)) => match v.get("error").and_then(Value::as_str) {
                Some(msg) => {
                    error_kind(msg) == kind
                        && now == case.file
                        && case.expected_hint.as_ref().is_none_or(|h| msg.contains(h.as_str()))
                }
                None => false,
            },
            _ => false,
        };
        let entry = by_category.entry(case.category.clone()).or_default();
        entry.1 += 1;
        if passed {
            entry.0 += 1;
        } else {
            failures.push(format!("{}: {:?} -> {:?}", case.id, out, now));
        }
    }
    let passed: usize = by_category.values().map(|v| v.0).sum();
    println!(
        "edit corpus: {passed}/{} passed ({:.1}%)",
        corpus.cases.len(),
        100.0 * passed as f64 / corpus.cases.len() as f64
    );
    for (cat, (p, n)) in &by_category {
        println!("  {cat:20} {p}/{n}");
    }
    assert!(failures.is_empty(), "failing cases:\n{}", failures.join("\n"));
}

/// SQLite that counts statements (each one JS/wasm crossing in the Durable Object) and
/// the files whose texts they read, and can run another request's change just before the
/// next statement that reads texts.
#[derive(Default)]
pub(crate) struct WatchedSql {
    inner: SqliteSql,
    pub(crate) statements: std::cell::Cell<usize>,
    pub(crate) texts_read: std::cell::Cell<usize>,
    pub(crate) before_read: std::cell::RefCell<Option<String>>,
}

impl crate::store::Sql for WatchedSql {
    fn exec(
        &self,
        sql: &str,
        params: &[crate::store::SqlValue],
    ) -> Result<Vec<crate::store::Row>, crate::store::StoreError> {
        self.statements.set(self.statements.get() + 1);
        if sql.contains(" content FROM") {
            self.texts_read.set(self.texts_read.get() + params.len());
            if let Some(change) = self.before_read.borrow_mut().take() {
                self.inner.exec(&change, &[])?;
            }
        }
        self.inner.exec(sql, params)
    }
    fn exec_changed(
        &self,
        sql: &str,
        params: &[crate::store::SqlValue],
    ) -> Result<bool, crate::store::StoreError> {
        self.statements.set(self.statements.get() + 1);
        self.inner.exec_changed(sql, params)
    }
    fn transaction(
        &self,
        f: &mut dyn FnMut() -> Result<(), crate::store::StoreError>,
    ) -> Result<(), crate::store::StoreError> {
        self.inner.transaction(f)
    }
}

#[test]
fn statements_per_operation_stay_minimal() {
    let sql = Rc::new(WatchedSql::default());
    let ws = Rc::new(Workspace::new(sql.clone(), clock()));
    let tools = workspace_tools(ws.clone(), WorkspaceToolsOptions::default());
    let by_name = |n: &str| tools.iter().find(|t| t.definition().name == n).unwrap().clone();
    let (read, write, edit, list, find, grep) = (
        by_name("read"),
        by_name("write"),
        by_name("edit"),
        by_name("list"),
        by_name("find"),
        by_name("grep"),
    );
    ws.mkdir("/docs", false).unwrap();
    let statements = |f: &dyn Fn()| {
        let before = sql.statements.get();
        f();
        sql.statements.get() - before
    };
    let body = "lorem ipsum\n".repeat(850);
    // Versioned writes: the write's check (version, what the model saw) is part of the
    // write's own statement, and so is the note of the version the model now knows (a
    // trigger on the files table; see workspace/version.rs).
    assert_eq!(
        statements(&|| {
            ok(&write, json!({"path": "/docs/a.md", "content": body}));
        }),
        1
    );
    assert_eq!(
        statements(&|| {
            ok(&write, json!({"path": "/docs/a.md", "content": "changed"}));
        }),
        1
    );
    // Metadata, text and version in one statement; the model's own write noted this
    // version already, so nothing is written.
    assert_eq!(
        statements(&|| {
            ok(&read, json!({"path": "/docs/a.md"}));
        }),
        1
    );
    // A file the model has not seen: the first read notes it, a re-read does not.
    put(&ws, "/docs/b.md", "app\n");
    assert_eq!(statements(&|| drop(ok(&read, json!({"path": "/docs/b.md"})))), 2);
    assert_eq!(statements(&|| drop(ok(&read, json!({"path": "/docs/b.md"})))), 1);
    // A new directory under an existing one, and an append to an inline text, are one
    // statement each: the store says whether it changed a row (no `RETURNING`, no fallback).
    assert_eq!(statements(&|| ws.mkdir("/docs/sub", false).unwrap()), 1);
    // A write into directories that do not exist yet: the write, refused for its missing
    // parent, one statement making both levels, and the write again.
    assert_eq!(
        statements(&|| {
            ok(&write, json!({"path": "/docs/new/deeper/c.md", "content": "c"}));
        }),
        3
    );
    assert_eq!(ws.lstat("/docs/new/deeper").unwrap().unwrap().kind, EntryType::Directory);
    assert_eq!(
        statements(&|| block_on(ws.append_file("/docs/b.md", "more\n", "text/plain")).unwrap()),
        1
    );
    // The check and the read in one statement, the rewrite (which notes itself).
    put(&ws, "/docs/e.md", "more\n");
    assert_eq!(
        statements(&|| {
            ok(&edit, json!({"path": "/docs/e.md", "old_string": "more", "new_string": "x"}));
        }),
        2
    );
    // The text the model's own write or edit left is kept: the check is part of the
    // rewrite's statement, pinned to that text's hash (see workspace/recent.rs).
    assert_eq!(
        statements(&|| {
            ok(&edit, json!({"path": "/docs/a.md", "old_string": "changed", "new_string": "x"}));
        }),
        1
    );
    for i in 0..250 {
        put(&ws, &format!("/docs/f{i}.md"), "needle\n");
    }
    assert_eq!(
        statements(&|| {
            ok(&list, json!({"path": "/docs", "limit": 1000}));
        }),
        1
    );
    assert_eq!(
        statements(&|| {
            ok(&find, json!({"pattern": "**/*.md"}));
        }),
        1
    );
    // Pages of files with their texts: 64, then (small files) the other 187, for a
    // pattern without a literal of three characters.
    assert_eq!(
        statements(&|| {
            ok(&grep, json!({"query": "z+"}));
        }),
        2
    );
    // With one, the trigram index: the first search looks the literal up, lists the files
    // and which are indexed (none), reads the 251 in batches of 99, and indexes them (one
    // statement of postings, one marking them, and SQLite's count of changes read before
    // and after them); the next reads none of them.
    assert_eq!(
        statements(&|| {
            ok(&grep, json!({"query": "zzz"}));
        }),
        10
    );
    assert_eq!(
        statements(&|| {
            ok(&grep, json!({"query": "zzz"}));
        }),
        3
    );
    // A first write into a new directory tree: the fast attempt, one insert of the three
    // directories, the write.
    assert_eq!(statements(&|| put(&ws, "/new/deep/dir/x.txt", "x")), 3);
    assert_eq!(statements(&|| put(&ws, "/new/deep/dir/y.txt", "y")), 1);
}

#[test]
fn grep_cuts_long_lines_around_the_match() {
    let ws = ws();
    let long = format!("{}NEEDLE{}", "a".repeat(600_000), "b".repeat(400_000));
    put(&ws, "/big.txt", &format!("short NEEDLE line\n{long}\nafter\n"));
    let grep = grep_tool(ws.clone());
    let out = ok(&grep, json!({"query": "needle"}));
    let matches = out["matches"].as_array().unwrap();
    assert_eq!(matches[0], json!("/big.txt:1: short NEEDLE line"), "short lines stay whole");
    let cut = matches[1].as_str().unwrap();
    assert!(cut.len() < 1_000, "{} bytes", cut.len());
    assert!(cut.starts_with("/big.txt:2: [… 599875 characters cut] aaa"), "{}", &cut[..60]);
    assert!(cut.contains("aNEEDLEb"), "the match is shown");
    assert!(cut.ends_with("bbb [… 399631 characters cut]"), "{}", &cut[cut.len() - 60..]);
    // A regex match and a context line (no match of its own: cut from its start).
    put(&ws, "/ctx.txt", &format!("{}\nkey = 1\n", "z".repeat(5_000)));
    let out = ok(&grep, json!({"query": "key\\s=", "include": "/ctx.txt", "contextLines": 1}));
    let context = out["matches"][0]["context"].as_str().unwrap();
    assert_eq!(
        context,
        format!("  1\t{} [… 4500 characters cut]\n> 2\tkey = 1\n  3\t", "z".repeat(500))
    );
    // A line of exactly MAX_LINE_CHARS is shown whole.
    put(&ws, "/edge.txt", &format!("x{}", "y".repeat(grep::MAX_LINE_CHARS - 1)));
    let out = ok(&grep, json!({"query": "x", "include": "/edge.txt"}));
    assert_eq!(out["matches"][0].as_str().unwrap().len(), "/edge.txt:1: ".len() + 2000);
}

#[test]
fn model_output_is_bounded() {
    let big = ModelOutput::Text("é".repeat(crate::tools::MAX_MODEL_OUTPUT_BYTES));
    let text = big.to_text();
    assert!(text.len() <= crate::tools::MAX_MODEL_OUTPUT_BYTES + 40);
    assert!(text.ends_with("\n... (4.0 MB truncated)"), "{}", &text[text.len() - 40..]);
    let small = ModelOutput::Json(json!({"a": 1}));
    assert_eq!(small.to_text(), r#"{"a":1}"#);
}

#[test]
fn tool_errors_say_why() {
    let ws = ws();
    ws.mkdir("/d", false).unwrap();
    put(&ws, "/d/f.txt", "x");
    let err = run(&delete_tool(ws.clone()), json!({"path": "/d"})).unwrap_err();
    assert!(
        matches!(&err, crate::tools::ToolError::Fs(e) if e.errno() == Some(crate::workspace::Errno::NotEmpty)),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "ENOTEMPTY: directory not empty: /d");
    let err = run(&read_tool(ws.clone()), json!({"path": 3})).unwrap_err();
    assert!(matches!(&err, crate::tools::ToolError::InvalidInput { tool, .. } if tool == "read"));
    assert!(err.to_string().starts_with("Invalid input for tool \"read\": "), "{err}");
}

fn err(tool: &ToolRef, input: Value) -> String {
    let out = ok(tool, input);
    out["error"].as_str().unwrap_or_else(|| panic!("refused: {out}")).to_owned()
}

#[test]
fn read_reports_the_version_that_write_and_edit_accept() {
    let ws = ws();
    let (read, write, edit) =
        (read_tool(ws.clone()), write_tool(ws.clone()), edit_tool(ws.clone()));
    put(&ws, "/v.txt", "one\ntwo\n");
    let v1 = ok(&read, json!({"path": "/v.txt"}))["version"].as_str().unwrap().to_owned();
    assert!(v1.starts_with("1:"), "{v1}");
    let out = ok(
        &edit,
        json!({"path": "/v.txt", "old_string": "two", "new_string": "2", "expectedVersion": v1}),
    );
    assert_eq!(out["replaced"], true);
    // The same version again is stale now: the model's own edit moved it on.
    let msg = err(&write, json!({"path": "/v.txt", "content": "x", "expectedVersion": v1}));
    assert!(
        msg.contains("changed since version 1:") && msg.contains("changed by tool at"),
        "{msg}"
    );
    assert!(msg.contains("-two") && msg.contains("+2"), "{msg}");
    assert_eq!(block_on(ws.read_file("/v.txt")).unwrap().unwrap(), "one\n2\n");
    let v2 = ok(&read, json!({"path": "/v.txt"}))["version"].as_str().unwrap().to_owned();
    ok(&write, json!({"path": "/v.txt", "content": "x", "expectedVersion": v2}));
    assert_eq!(block_on(ws.read_file("/v.txt")).unwrap().unwrap(), "x");
}

#[test]
fn a_write_behind_the_models_back_is_refused_without_expected_version() {
    let ws = ws();
    let (read, write, edit) =
        (read_tool(ws.clone()), write_tool(ws.clone()), edit_tool(ws.clone()));
    put(&ws, "/g.txt", "keep\nold\n");
    ok(&read, json!({"path": "/g.txt"}));
    // The model's own edits never trip the guard.
    ok(&edit, json!({"path": "/g.txt", "old_string": "old", "new_string": "mine"}));
    ok(&edit, json!({"path": "/g.txt", "old_string": "mine", "new_string": "mine2"}));
    // Bash's write-back changes it behind the model.
    block_on(crate::tools::workspace::bash::BashFs::write_file_bytes(
        ws.as_ref(),
        "/g.txt",
        b"keep\nbash\n",
    ))
    .unwrap();
    let msg = err(&edit, json!({"path": "/g.txt", "old_string": "keep", "new_string": "k"}));
    assert!(msg.contains("changed by bash at"), "{msg}");
    assert!(msg.contains("-mine2") && msg.contains("+bash"), "{msg}");
    let msg = err(&write, json!({"path": "/g.txt", "content": "clobber"}));
    assert!(msg.contains("changed by bash"), "{msg}");
    assert_eq!(block_on(ws.read_file("/g.txt")).unwrap().unwrap(), "keep\nbash\n");
    // Reading again lets the edit through; files the model never read are not guarded.
    ok(&read, json!({"path": "/g.txt"}));
    ok(&edit, json!({"path": "/g.txt", "old_string": "keep", "new_string": "k"}));
    put(&ws, "/unread.txt", "a");
    ok(&write, json!({"path": "/unread.txt", "content": "b"}));
}

#[test]
fn a_versioned_write_to_a_deleted_file_is_refused_and_creates_nothing() {
    let ws = ws();
    let (read, write, edit) =
        (read_tool(ws.clone()), write_tool(ws.clone()), edit_tool(ws.clone()));
    put(&ws, "/d/gone.txt", "here\n");
    let v = ok(&read, json!({"path": "/d/gone.txt"}))["version"].clone();
    block_on(ws.rm("/d/gone.txt", false, false)).unwrap();
    let msg = err(&write, json!({"path": "/d/gone.txt", "content": "x", "expectedVersion": v}));
    assert!(msg.contains("was deleted since version"), "{msg}");
    let msg = err(
        &edit,
        json!({"path": "/d/gone.txt", "old_string": "here", "new_string": "x", "expectedVersion": v}),
    );
    assert!(msg.contains("was deleted since version"), "{msg}");
    assert_eq!(block_on(ws.read_file("/d/gone.txt")).unwrap(), None);
    // A version that is not one is refused too, before anything is written.
    put(&ws, "/d/kept.txt", "kept");
    let msg = err(&write, json!({"path": "/d/kept.txt", "content": "x", "expectedVersion": "v?"}));
    assert!(msg.contains("changed since version v?"), "{msg}");
    assert_eq!(block_on(ws.read_file("/d/kept.txt")).unwrap().unwrap(), "kept");
}

#[test]
fn the_guard_can_be_turned_off() {
    let ws = Rc::new(
        Workspace::with_options(
            Rc::new(SqliteSql::new()),
            clock(),
            crate::workspace::WorkspaceOptions { guard_stale_writes: false, ..Default::default() },
        )
        .unwrap(),
    );
    let (read, write) = (read_tool(ws.clone()), write_tool(ws.clone()));
    put(&ws, "/o.txt", "a");
    let v = ok(&read, json!({"path": "/o.txt"}))["version"].clone();
    put(&ws, "/o.txt", "app");
    ok(&write, json!({"path": "/o.txt", "content": "model"}));
    // An explicit expectedVersion is still checked.
    let msg = err(&write, json!({"path": "/o.txt", "content": "again", "expectedVersion": v}));
    assert!(msg.contains("changed by tool"), "{msg}");
}
