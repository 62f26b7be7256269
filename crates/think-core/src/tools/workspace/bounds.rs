//! Property tests with a time bound per tool (issue 10): generated and adversarial inputs up
//! to each tool's size limits, each call bounded in the test thread's CPU time so that other
//! processes on a shared machine do not make the bounds flaky (wall time where the platform
//! has no per-thread clock). `cargo test --lib bounds -- --nocapture` prints every time.

use super::*;
use crate::store::sqlite::SqliteSql;
use crate::tools::ToolContext;
use crate::workspace::tests::{block_on, clock};
use serde_json::{json, Value};
use std::time::Instant;

/// CPU seconds the calling thread has used (Linux: `/proc/thread-self/stat`).
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesized command name; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Runs `f` and fails when it takes more than `secs` of CPU time; returns its result and
/// the time taken, for the report of worst times.
pub(crate) fn within<T>(secs: f64, what: &str, f: impl FnOnce() -> T) -> (T, f64) {
    let (cpu0, wall0) = (thread_cpu_seconds(), Instant::now());
    let out = f();
    let took = match (cpu0, thread_cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => wall0.elapsed().as_secs_f64(),
    };
    println!("time bound: {what}: {took:.2} s (bound {secs} s)");
    assert!(took < secs, "{what} took {took:.2} s of CPU (bound {secs} s)");
    (out, took)
}

/// A small deterministic generator (xorshift64*), so a failing input can be reproduced.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }

    /// `len` characters drawn from `alphabet`.
    fn text(&mut self, alphabet: &[char], len: usize) -> String {
        (0..len).map(|_| alphabet[self.below(alphabet.len())]).collect()
    }
}

fn ws() -> Rc<Workspace> {
    Rc::new(Workspace::new(Rc::new(SqliteSql::new()), clock()))
}

fn call(tool: &ToolRef, input: Value) -> Value {
    block_on(tool.execute(input, &ToolContext::default())).expect("tool succeeds")
}

/// Bound for one call of a tool in a debug build, in CPU seconds.
const BOUND: f64 = 5.0;

/// A file of about `bytes` made of `line` repeated (each line ends in `\n`).
fn repeated(line: &str, bytes: usize) -> String {
    line.repeat(bytes / line.len().max(1))
}

#[test]
fn grep_lines_and_context_stay_bounded() {
    let ws = ws();
    let max = grep::MAX_FILE_SIZE as usize;
    // Files at the size limit: one long line, a million empty lines, lines of `a`s that feed
    // backtracking patterns, and generated text.
    block_on(ws.write_file("/long.txt", &"ab".repeat(max / 2), "text/plain")).unwrap();
    block_on(ws.write_file("/empty.txt", &"\n".repeat(max), "text/plain")).unwrap();
    block_on(ws.write_file(
        "/aaa.txt",
        &repeated(&format!("{}!\n", "a".repeat(30)), max),
        "text/plain",
    ))
    .unwrap();
    let mut rng = Rng(0x5EED);
    let alphabet: Vec<char> = "abc xyz_09(){}[]é\t".chars().collect();
    let mut gen = String::new();
    while gen.len() < max - 200 {
        let len = rng.below(120);
        gen.push_str(&rng.text(&alphabet, len));
        gen.push('\n');
    }
    block_on(ws.write_file("/gen.txt", &gen, "text/plain")).unwrap();
    let grep = grep_tool(ws.clone());
    let queries = [
        "^",
        "$",
        "a",
        "b$",
        "(a+)+$",
        "(a|aa)+!",
        "(a+)+\\1!",
        "(?=a)a{10,}",
        "(?<=a)b",
        "[\\D\\W]x",
        "(x+x+)+y",
        "\\bzz\\b",
        "(.*)*q",
        "é",
        ".{100}",
        "(.*)*q(?=a)a{10,}(?<=a)b",
        "^(a|aa)+\\1$",
    ];
    for q in queries {
        for ctx in [0, 10] {
            let out = within(BOUND, &format!("grep {q:?} contextLines {ctx}"), || {
                call(&grep, json!({"query": q, "contextLines": ctx}))
            })
            .0;
            let text = serde_json::to_string(&out).unwrap();
            // 200 matches of at most 21 lines each, lines cut at 2,000 characters.
            assert!(text.len() < 200 * 21 * 2_100, "{q}: {} bytes", text.len());
        }
    }
    // An exponential pattern is refused before it runs (`regexp::guard`) ...
    let out = within(BOUND, "grep catastrophic", || call(&grep, json!({"query": "^(a|a)+\\1$"})));
    let error = out.0["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("grep: the pattern \"^(a|a)+\\1$\" repeats"), "{}", out.0);
    // ... and a polynomial one the host engine gives up on stops the search early, with a note.
    let costly = "^(a*)(a*)(a*)(a*)(a*)(a*)(?=!)a";
    let out = within(BOUND, "grep costly", || call(&grep, json!({"query": costly})));
    assert_eq!(out.0["truncated"], json!(true));
    assert_eq!(out.0["note"], json!(grep::GAVE_UP_NOTE));
    for _ in 0..20 {
        let q: String = (0..rng.below(6) + 1).map(|_| rng.pick(&queries)).collect();
        within(BOUND, &format!("grep generated {q:?}"), || {
            call(&grep, json!({"query": q, "contextLines": rng.below(11)}))
        });
    }
}

#[test]
fn find_globs_stay_bounded() {
    let ws = ws();
    for d in 0..40 {
        for f in 0..50 {
            let path = format!("/d{d}/sub{}/deeper/file{f}.{}", f % 7, ["ts", "md", "rs"][f % 3]);
            block_on(ws.write_file(&path, "x", "text/plain")).unwrap();
        }
    }
    let find = find_tool(ws.clone());
    let mut rng = Rng(0xF12D);
    let parts = [
        "**/",
        "**",
        "*",
        "?",
        "[a-z]",
        "[!x]",
        "{a,b}",
        "{*.ts,{x,{y,z}}}",
        "d1",
        "/",
        ".ts",
        "{",
        "[",
    ];
    let mut patterns: Vec<String> = vec![
        "**/".repeat(1_300),
        format!("{}*", "*?".repeat(2_000)),
        format!("{}{}", "{a,".repeat(500), "}".repeat(500)),
        "[".repeat(4_000),
    ];
    for _ in 0..30 {
        let n = rng.below(40) + 1;
        patterns.push((0..n).map(|_| rng.pick(&parts)).collect());
    }
    for p in &patterns {
        let shown: String = p.chars().take(40).collect();
        within(BOUND, &format!("find {shown:?} ({} chars)", p.len()), || {
            // A pattern the regex engine rejects is an error; either way it answers.
            let _ = block_on(find.execute(json!({"pattern": p}), &ToolContext::default()));
        });
    }
}

#[test]
fn read_numbering_stays_bounded() {
    let ws = ws();
    let big = 20 * 1024 * 1024;
    block_on(ws.write_file("/short.txt", &"\n".repeat(big), "text/plain")).unwrap();
    block_on(ws.write_file("/one.txt", &"é".repeat(big / 2), "text/plain")).unwrap();
    block_on(ws.write_file(
        "/mixed.txt",
        &repeated(&format!("{}\n", "x".repeat(3_000)), big),
        "text/plain",
    ))
    .unwrap();
    let read = read_tool(ws.clone());
    for path in ["/short.txt", "/one.txt", "/mixed.txt"] {
        for input in [
            json!({"path": path}),
            json!({"path": path, "offset": 10_000_000}),
            json!({"path": path, "offset": 5_000, "limit": 2_000}),
        ] {
            let out = within(BOUND, &format!("read {input}"), || call(&read, input.clone())).0;
            let content = out["content"].as_str().unwrap_or("");
            assert!(content.len() < 2_000 * 2_100 * 2, "{input}: {} bytes", content.len());
        }
    }
}

#[test]
fn diff_stays_bounded_at_its_line_limit() {
    use crate::workspace::{unified_diff, MAX_DIFF_LINES};
    let mut rng = Rng(0xD1FF);
    let alphabet: Vec<char> = "abcdefgh".chars().collect();
    let lines = |rng: &mut Rng, n: usize| -> Vec<String> {
        (0..n).map(|_| rng.text(&alphabet, 12)).collect()
    };
    let a = lines(&mut rng, MAX_DIFF_LINES).join("\n");
    let b = lines(&mut rng, MAX_DIFF_LINES).join("\n");
    within(BOUND, "diff of two unrelated 10,000-line files", || unified_diff(&a, &b, "a", "b"));
    // Every other line changed, and one file the other reversed.
    let a_lines: Vec<String> = lines(&mut rng, MAX_DIFF_LINES);
    let mut b_lines = a_lines.clone();
    for (k, l) in b_lines.iter_mut().enumerate() {
        if k % 2 == 0 {
            l.push('!');
        }
    }
    within(BOUND, "diff with every other line changed", || {
        unified_diff(&a_lines.join("\n"), &b_lines.join("\n"), "a", "b")
    });
    let reversed: Vec<String> = a_lines.iter().rev().cloned().collect();
    within(BOUND, "diff against the reverse", || {
        unified_diff(&a_lines.join("\n"), &reversed.join("\n"), "a", "b")
    });
}

#[test]
fn js_regex_translation_stays_bounded() {
    let mut rng = Rng(0x4E6E);
    let parts = [
        "(",
        ")",
        "[",
        "]",
        "\\",
        "\\d",
        "[\\D]",
        "[^\\S\\w]",
        "{2}",
        "{2,",
        "}",
        "*",
        "+?",
        "?",
        "(?=",
        "(?<!",
        "(?<n>",
        "\\k<n>",
        "\\1",
        "|",
        "a",
        "é",
        ".",
        "^",
        "$",
        "\\u0041",
        "\\cA",
        "--",
        "&&",
    ];
    let mut patterns: Vec<String> = vec![
        "(".repeat(4_000),
        "[".repeat(4_000),
        "\\d".repeat(2_000),
        "(?<n>a)".repeat(500),
        "a{1,1000}".repeat(300),
    ];
    for _ in 0..200 {
        let n = rng.below(400) + 1;
        patterns.push((0..n).map(|_| rng.pick(&parts)).collect());
    }
    for p in &patterns {
        let shown: String = p.chars().take(40).collect();
        within(BOUND, &format!("regex {shown:?} ({} chars)", p.len()), || {
            if let Ok(m) = grep::Matcher::new(p, false, false) {
                m.matching_lines(&"aé1 b\n".repeat(10_000), 200);
            }
        });
    }
}

#[test]
fn bash_snapshot_stays_bounded() {
    use bash::take_snapshot;
    use bash::BashOptions;
    let ws = ws();
    let options = BashOptions::default();
    // More files than the snapshot takes, some over its size limit, in deep directories.
    for k in 0..(bash::DEFAULT_MAX_WORKSPACE_FILES + 200) {
        let depth = k % 30;
        let dir: String = (0..depth).map(|d| format!("/d{d}")).collect();
        let body = if k % 100 == 0 { "x".repeat(1_100_000) } else { format!("file {k}\n") };
        block_on(ws.write_file(&format!("{dir}/f{k}.txt"), &body, "text/plain")).unwrap();
    }
    let snapshot = within(BOUND, "bash snapshot of 1,200 files", || {
        block_on(take_snapshot(ws.as_ref(), &options)).unwrap()
    })
    .0;
    let _ = snapshot;
}
