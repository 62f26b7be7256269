//! The indexed search against the scan: the same random files, written through every write
//! path, give the same output for random patterns whether the trigram index is used or not.

use super::*;
use crate::store::sqlite::SqliteSql;
use crate::store::Sql;
use crate::tools::workspace::bounds::Rng;
use crate::tools::workspace::tests::WatchedSql;
use crate::tools::ToolContext;
use crate::workspace::tests::{block_on, clock};
use crate::workspace::{GramBatch, Workspace, WorkspaceOptions};

/// Words with mixed case, digits, punctuation and characters whose case folds reach
/// outside ASCII (the Kelvin sign, the long s), so that folding mistakes show.
const WORDS: &[&str] = &[
    "needle",
    "Needle",
    "NEEDLE",
    "haystack",
    "fn_123(x, y)",
    "fn_9",
    "kelvin",
    "\u{212A}elvin",
    "ſtraw",
    "straw",
    "STRAW",
    "é",
    "été",
    "ÉTÉ",
    "foo",
    "bar",
    "foobar",
    "the",
    "Thistle",
    "a",
    "ab",
    "abc",
    "x",
    "  ",
    "\t",
    ";",
    "// note",
    "0x1F",
    "dollar$",
    "[brackets]",
];

fn random_text(rng: &mut Rng) -> String {
    let mut out = String::new();
    for _ in 0..rng.below(20) {
        out.push_str(rng.pick(WORDS));
        out.push_str(match rng.below(6) {
            0 => "\n",
            1 => "",
            _ => " ",
        });
    }
    out
}

fn random_pattern(rng: &mut Rng, texts: &[String]) -> (String, bool) {
    let word = rng.pick(WORDS).to_owned();
    let other = rng.pick(WORDS).to_owned();
    let fixed = rng.below(3) == 0;
    if fixed {
        // A piece of some file, or a word.
        let text = &texts[rng.below(texts.len())];
        let chars: Vec<char> = text.chars().collect();
        if !chars.is_empty() && rng.below(2) == 0 {
            let from = rng.below(chars.len());
            let len = 1 + rng.below(12);
            return (chars[from..(from + len).min(chars.len())].iter().collect(), true);
        }
        return (word, true);
    }
    let w = regex::escape(&word);
    let o = regex::escape(&other);
    let pattern = match rng.below(8) {
        0 => w,
        1 => format!("{w}.*{o}"),
        2 => format!("({w}|{o})"),
        3 => format!("\\b{w}"),
        4 => format!("{w}\\s*{o}"),
        5 => format!("(?:{w})+x?"),
        6 => format!("[a-z]{w}"),
        _ => format!("{w}\\d*"),
    };
    (pattern, false)
}

/// Applies one random write, through the same path, to both workspaces.
fn random_write(rng: &mut Rng, both: &[&Workspace], paths: &[&str], texts: &mut Vec<String>) {
    let path = rng.pick(paths);
    let text = random_text(rng);
    let op = rng.below(10);
    for ws in both {
        let _ = block_on(async {
            match op {
                0..=2 => ws.write_file(path, &text, "text/plain").await,
                3 => ws.rewrite_file(path, &text, "text/plain").await,
                4 => ws.append_file(path, &text, "text/plain").await,
                5 => ws.rm(path, false, true).await,
                6 => ws.mv(path, paths[(path.len() + text.len()) % paths.len()]).await,
                7 => ws.write_file_bytes(path, text.as_bytes(), "text/plain").await,
                8 => ws.symlink(paths[text.len() % paths.len()], path),
                _ => ws.cp(path, paths[(path.len() + 3 * text.len()) % paths.len()], false).await,
            }
        });
    }
    texts.push(text);
}

#[test]
fn indexed_grep_gives_the_output_of_the_scan() {
    let sql = Rc::new(SqliteSql::new());
    let make = |namespace: &str, grep_index: bool| {
        let options = WorkspaceOptions {
            namespace: namespace.into(),
            grep_index,
            ..WorkspaceOptions::default()
        };
        Rc::new(Workspace::with_options(sql.clone(), clock(), options).unwrap())
    };
    let (indexed, scanned) = (make("indexed", true), make("scanned", false));
    let tools = [grep_tool(indexed.clone()), grep_tool(scanned.clone())];
    let paths = ["/a.txt", "/b.md", "/d/c.txt", "/d/e/f.txt", "/g.txt", "/h.rs", "/d/i.md"];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut texts = vec![String::new()];
    let (mut narrowed, mut checked) = (0, 0);
    for round in 0..60 {
        for _ in 0..6 {
            random_write(&mut rng, &[&indexed, &scanned], &paths, &mut texts);
        }
        for _ in 0..15 {
            let (query, fixed) = random_pattern(&mut rng, &texts);
            let case_sensitive = rng.below(2) == 0;
            let include = ["**/*", "/d/**", "**/*.md"][rng.below(3)];
            let input = json!({
                "query": query, "fixedString": fixed, "caseSensitive": case_sensitive,
                "include": include, "contextLines": rng.below(2),
            });
            let ctx = ToolContext::default();
            let out: Vec<Value> =
                tools.iter().map(|t| block_on(t.execute(input.clone(), &ctx)).unwrap()).collect();
            assert_eq!(out[0], out[1], "round {round}: {input}");
            checked += 1;
            let matcher = Matcher::new(&query, fixed, case_sensitive).unwrap();
            if let Some(files) = indexed.grep_files(include, matcher.required()).unwrap() {
                narrowed += usize::from(files.iter().any(|f| !f.candidate));
            }
        }
    }
    // The comparison means something only if the index did exclude files.
    assert!(narrowed * 4 > checked, "the index excluded files in {narrowed} of {checked} searches");
}

/// A workspace with the index (the default) and a grep tool over it.
fn indexed_workspace() -> (Rc<Workspace>, ToolRef) {
    let ws = Rc::new(Workspace::new(Rc::new(SqliteSql::new()), clock()));
    (ws.clone(), grep_tool(ws))
}

/// Each file's verdict for a search of "needle": `(path, candidate, unindexed)`.
fn verdict(ws: &Workspace) -> Vec<(String, bool, bool)> {
    ws.grep_files("**/*", &GramQuery::Literal(b"needle".to_vec()))
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|f| (f.path, f.candidate, f.unindexed.is_some()))
        .collect()
}

fn search(tool: &ToolRef, query: &str) -> Value {
    let input = json!({"query": query, "fixedString": true});
    block_on(tool.execute(input, &ToolContext::default())).unwrap()
}

#[test]
fn grep_indexes_what_it_reads_and_changed_files_are_unmarked() {
    let (ws, tool) = indexed_workspace();
    block_on(ws.write_file("/a.txt", "a Needle here", "text/plain")).unwrap();
    block_on(ws.write_file("/b.txt", "only hay", "text/plain")).unwrap();
    // Writes do not index: both files are read by the first search.
    assert_eq!(verdict(&ws), [("/a.txt".into(), true, true), ("/b.txt".into(), true, true)]);
    // No postings, nor any row for the count of changes.
    assert_eq!(ws.info().unwrap().grep_index_rows, 0);
    assert_eq!(search(&tool, "needle")["totalMatches"], 1);
    assert_eq!(verdict(&ws), [("/a.txt".into(), true, false), ("/b.txt".into(), false, false)]);
    // An append changes the content: the trigger unmarks the file, so it is read again.
    block_on(ws.append_file("/b.txt", " and a needle", "text/plain")).unwrap();
    assert_eq!(verdict(&ws), [("/a.txt".into(), true, false), ("/b.txt".into(), true, true)]);
    assert_eq!(search(&tool, "needle")["totalMatches"], 2);
    block_on(ws.rewrite_file("/b.txt", "hay again", "text/plain")).unwrap();
    assert_eq!(search(&tool, "needle")["totalMatches"], 1);
    // Postings are never cleared: /b.txt is indexed again but stays a (false) candidate.
    assert_eq!(verdict(&ws), [("/a.txt".into(), true, false), ("/b.txt".into(), true, false)]);
    // A search limited by its glob indexes only the files it covers.
    block_on(ws.write_file("/d/c.txt", "hay", "text/plain")).unwrap();
    block_on(ws.write_file("/e.txt", "hay", "text/plain")).unwrap();
    let input = json!({"query": "needle", "include": "/d/**"});
    block_on(tool.execute(input, &ToolContext::default())).unwrap();
    let unindexed: Vec<String> = verdict(&ws).into_iter().filter(|v| v.2).map(|v| v.0).collect();
    assert_eq!(unindexed, ["/e.txt"]);
    let info = ws.info().unwrap();
    assert!(info.grep_index_rows > 10, "{info:?}");
    // `grep_index: false` keeps no index.
    let off = WorkspaceOptions { grep_index: false, ..WorkspaceOptions::default() };
    let off = Workspace::with_options(Rc::new(SqliteSql::new()), clock(), off).unwrap();
    block_on(off.write_file("/a.txt", "a needle", "text/plain")).unwrap();
    let q = GramQuery::Literal(b"needle".to_vec());
    assert_eq!(off.grep_files("**/*", &q).unwrap(), None);
    assert_eq!(off.info().unwrap().grep_index_rows, 0);
}

#[test]
fn texts_read_while_files_changed_are_not_marked_indexed() {
    let (ws, _) = indexed_workspace();
    for p in ["/a.txt", "/b.txt", "/c.txt"] {
        block_on(ws.write_file(p, "hay", "text/plain")).unwrap();
    }
    let q = GramQuery::Literal(b"needle".to_vec());
    let index_as_listed = |change: &dyn Fn()| {
        let listed = ws.grep_files("**/*", &q).unwrap().unwrap();
        change();
        let mut batch = GramBatch::default();
        for f in &listed {
            batch.add(f.unindexed.as_ref().unwrap(), "hay");
        }
        ws.index_grams(&mut batch).unwrap();
        assert!(batch.is_empty());
    };
    // A change between the listing and the flush (here a move, which changes no content
    // but what a path reads): the texts read may be stale, so none is marked.
    index_as_listed(&|| {
        block_on(ws.mv("/a.txt", "/z.txt")).unwrap();
        block_on(ws.mv("/b.txt", "/a.txt")).unwrap();
    });
    assert!(verdict(&ws).iter().all(|v| v.1 && v.2), "{:?}", verdict(&ws));
    block_on(ws.write_file("/b.txt", "hay", "text/plain")).unwrap();
    // Any write meanwhile, even of another file, skips the marks: conservative.
    index_as_listed(&|| block_on(ws.write_file("/other.txt", "hay", "text/plain")).unwrap());
    assert!(verdict(&ws).iter().all(|v| v.1 && v.2), "{:?}", verdict(&ws));
    // Without one, they are.
    index_as_listed(&|| {});
    assert!(verdict(&ws).iter().all(|v| !v.1 && !v.2), "{:?}", verdict(&ws));
}

#[test]
fn a_flush_midway_keeps_marking_the_rest_of_its_listing() {
    let (ws, tool) = indexed_workspace();
    for p in ["/a.txt", "/b.txt", "/c.txt", "/d.txt"] {
        block_on(ws.write_file(p, "hay", "text/plain")).unwrap();
    }
    let q = GramQuery::Literal(b"needle".to_vec());
    let listed = ws.grep_files("**/*", &q).unwrap().unwrap();
    let ticket = |i: usize| listed[i].unindexed.unwrap();
    let mut batch = GramBatch::default();
    batch.add(&ticket(0), "hay");
    ws.index_grams(&mut batch).unwrap();
    // The flush's own writes do not stale the listing's other tickets...
    batch.add(&ticket(1), "hay");
    ws.index_grams(&mut batch).unwrap();
    batch.add(&ticket(2), "hay");
    ws.index_grams(&mut batch).unwrap();
    let unindexed =
        || -> Vec<String> { verdict(&ws).into_iter().filter(|v| v.2).map(|v| v.0).collect() };
    assert_eq!(unindexed(), ["/d.txt"]);
    // ... but a change after a flush does.
    let listed = ws.grep_files("**/*", &q).unwrap().unwrap();
    block_on(ws.rewrite_file("/a.txt", "hay", "text/plain")).unwrap();
    batch.add(listed[3].unindexed.as_ref().unwrap(), "hay");
    ws.index_grams(&mut batch).unwrap();
    assert_eq!(unindexed(), ["/a.txt", "/d.txt"]);
    // And the search still finds what is there.
    block_on(ws.rewrite_file("/d.txt", "a needle", "text/plain")).unwrap();
    assert_eq!(search(&tool, "needle")["totalMatches"], 1);
    assert!(unindexed().is_empty(), "{:?}", unindexed());
}

#[test]
fn a_batch_larger_than_its_raw_buffer_is_merged_and_written_whole() {
    let (ws, tool) = indexed_workspace();
    let mut rng = Rng(7);
    // Four files of 300 KB of random punctuation, digits and lowercase letters: some
    // 180,000 distinct trigrams each, so the batch compacts its raw postings into its
    // merged ones more than once during the first search.
    let alphabet: Vec<char> = ('!'..='@').chain('['..='~').collect();
    let texts: Vec<String> = (0..4)
        .map(|_| (0..300_000).map(|_| alphabet[rng.below(alphabet.len())]).collect())
        .collect();
    for (i, t) in texts.iter().enumerate() {
        block_on(ws.write_file(&format!("/f{i}.txt"), t, "text/plain")).unwrap();
    }
    let needle = &texts[2][150_000..150_040];
    let first = search(&tool, needle);
    assert_eq!(first["filesWithMatches"], 1, "{first}");
    // Every file is indexed now, and only the one holding the needle is a candidate.
    let q = GramQuery::Literal(needle.as_bytes().to_vec());
    let files = ws.grep_files("**/*", &q).unwrap().unwrap();
    let candidates: Vec<&str> =
        files.iter().filter(|f| f.candidate).map(|f| f.path.as_str()).collect();
    assert_eq!(candidates, ["/f2.txt"]);
    assert!(files.iter().all(|f| f.unindexed.is_none()));
    assert_eq!(search(&tool, needle), first);
}

#[test]
fn files_indexed_off_the_request_are_not_read_by_the_first_grep() {
    let sql = Rc::new(WatchedSql::default());
    let ws = Rc::new(Workspace::new(sql.clone(), clock()));
    let tool = grep_tool(ws.clone());
    for i in 0..100 {
        let body = if i == 42 { "a needle".to_owned() } else { format!("hay {i}") };
        block_on(ws.write_file(&format!("/f/{i:03}.txt"), &body, "text/plain")).unwrap();
    }
    // In bounded runs (here about 10 files each), each one saying whether more remain.
    let mut runs = Vec::new();
    loop {
        let run = ws.index_unindexed(60).unwrap();
        runs.push(run.files);
        if !run.more {
            break;
        }
    }
    assert_eq!(runs.len(), 10, "{runs:?}");
    assert_eq!(runs.iter().sum::<usize>(), 100);
    assert!(verdict(&ws).iter().all(|v| !v.2), "every file is indexed");
    // The first grep reads only its one candidate, in as many statements as the next one.
    let cost = || {
        let (statements, read) = (sql.statements.get(), sql.texts_read.get());
        assert_eq!(search(&tool, "needle")["totalMatches"], 1);
        (sql.statements.get() - statements, sql.texts_read.get() - read)
    };
    let first = cost();
    assert_eq!(first.1, 1);
    assert_eq!(cost(), first);
    // With nothing left to index, a run reads no text and writes nothing: one query.
    let rows = ws.info().unwrap().grep_index_rows;
    let (statements, read) = (sql.statements.get(), sql.texts_read.get());
    assert_eq!(ws.index_unindexed(1 << 20).unwrap(), crate::workspace::IndexRun::default());
    assert_eq!((sql.statements.get() - statements, sql.texts_read.get() - read), (1, 0));
    assert_eq!(ws.info().unwrap().grep_index_rows, rows);
}

#[test]
fn a_file_changed_while_the_alarm_indexes_is_not_marked() {
    let sql = Rc::new(WatchedSql::default());
    let ws = Rc::new(Workspace::new(sql.clone(), clock()));
    for p in ["/a.txt", "/b.txt"] {
        block_on(ws.write_file(p, "hay", "text/plain")).unwrap();
    }
    // Another request rewrites /a.txt between the listing and the reading of the texts.
    *sql.before_read.borrow_mut() =
        Some("UPDATE cf_wsfile_default SET content = 'a needle' WHERE path = '/a.txt'".into());
    assert_eq!(ws.index_unindexed(1 << 20).unwrap().files, 2);
    assert!(sql.before_read.borrow().is_none(), "the change ran");
    assert!(verdict(&ws).iter().all(|v| v.1 && v.2), "{:?}", verdict(&ws));
    // The next run indexes the current texts, and grep still finds the change.
    assert_eq!(ws.index_unindexed(1 << 20).unwrap().files, 2);
    assert_eq!(verdict(&ws), [("/a.txt".into(), true, false), ("/b.txt".into(), false, false)]);
    assert_eq!(search(&grep_tool(ws.clone()), "needle")["totalMatches"], 1);
}

#[test]
fn one_search_indexes_a_bounded_share_and_the_next_ones_the_rest() {
    let (ws, tool) = indexed_workspace();
    let unindexed = |ws: &Workspace| verdict(ws).iter().filter(|v| v.2).count();
    let searches = |ws: &Workspace| {
        let first = search(&tool, "needle");
        assert_eq!(first["totalMatches"], 1, "{first}");
        let mut left = vec![unindexed(ws)];
        while *left.last().unwrap() > 0 && left.len() < 20 {
            assert_eq!(search(&tool, "needle"), first);
            left.push(unindexed(ws));
        }
        left
    };
    // 3 MB of files of 100 KB: at least 1 MB per search, 11 files (the budget is checked
    // before each).
    for i in 0..30 {
        let body = format!("{} {}", "hay ".repeat(25_000), if i == 17 { "needle" } else { "" });
        block_on(ws.write_file(&format!("/f/{i:02}.txt"), &body, "text/plain")).unwrap();
    }
    assert_eq!(searches(&ws), [19, 8, 0]);
    // 10 MB in all: an eighth of it per search, 13 files.
    for i in 30..100 {
        let body = "hay ".repeat(25_000) + " ";
        block_on(ws.write_file(&format!("/f/{i:02}.txt"), &body, "text/plain")).unwrap();
    }
    assert_eq!(searches(&ws), [57, 44, 31, 18, 5, 0]);
    let candidates: Vec<String> = verdict(&ws).into_iter().filter(|v| v.1).map(|v| v.0).collect();
    assert_eq!(candidates, ["/f/17.txt"]);
}

/// The index's triggers of before (the unmark that wrote a clear bit back, the counter row
/// every change bumped) are replaced on start, the counter row goes, and files are still
/// unmarked and re-indexed as before.
#[test]
fn index_triggers_from_before_are_replaced() {
    let triggers = |sql: &SqliteSql| -> Vec<String> {
        sql.exec(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'cf_wsgram_%'
             ORDER BY name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap().to_owned())
        .collect()
    };
    let counter_rows = |sql: &SqliteSql| {
        let rows = sql.exec("SELECT count(*) FROM cf_wsgram_default WHERE gram = -2", &[]);
        rows.unwrap()[0][0].as_i64().unwrap()
    };
    let unmark = "UPDATE cf_wsgram_default SET bits = bits & ~(1 << (old.rowid % 32))
         WHERE gram = -1 AND blk = old.rowid / 32";
    let count = "UPDATE cf_wsgram_default SET bits = bits + 1 WHERE gram = -2 AND blk = 0;";
    // As databases were before: the unmark wrote its row whether the bit was set or not,
    // then it skipped a clear bit but every change bumped a counter row.
    let generations = [
        format!("{unmark}; {count}"),
        format!("{unmark} AND (bits & (1 << (old.rowid % 32))) != 0; {count}"),
    ];
    for old in generations {
        let sql = Rc::new(SqliteSql::new());
        {
            let ws = Workspace::new(sql.clone(), clock());
            block_on(ws.write_file("/a.txt", "a needle", "text/plain")).unwrap();
        }
        assert_eq!(triggers(&sql).len(), 2);
        for (name, event) in [("change", "UPDATE OF content, path"), ("drop", "DELETE")] {
            sql.exec(&format!("DROP TRIGGER cf_wsgram_{name}_default"), &[]).unwrap();
            sql.exec(
                &format!(
                    "CREATE TRIGGER cf_wsgram_{name}_default AFTER {event} ON cf_wsfile_default
                     BEGIN {old} END"
                ),
                &[],
            )
            .unwrap();
        }
        sql.exec("INSERT INTO cf_wsgram_default VALUES (-2, 0, 7)", &[]).unwrap();
        let ws = Rc::new(Workspace::new(sql.clone(), clock()));
        let tool = grep_tool(ws.clone());
        assert_eq!(search(&tool, "needle")["totalMatches"], 1);
        let now = triggers(&sql);
        assert_eq!(now.len(), 2);
        assert!(now.iter().all(|t| t.contains("!= 0") && !t.contains("bits + 1")), "{now:?}");
        assert_eq!(counter_rows(&sql), 0);
        // Indexed, then changed twice (the second unmark finds its bit clear): read again.
        assert_eq!(verdict(&ws), [("/a.txt".into(), true, false)]);
        block_on(ws.rewrite_file("/a.txt", "hay", "text/plain")).unwrap();
        block_on(ws.rewrite_file("/a.txt", "a needle again", "text/plain")).unwrap();
        assert_eq!(verdict(&ws), [("/a.txt".into(), true, true)]);
        assert_eq!(search(&tool, "needle")["totalMatches"], 1);
        assert_eq!(verdict(&ws), [("/a.txt".into(), true, false)]);
        // A later start keeps the new triggers as they are.
        assert!(Workspace::new(sql.clone(), clock()).exists("/").unwrap());
        assert_eq!(triggers(&sql), now);
    }
}
