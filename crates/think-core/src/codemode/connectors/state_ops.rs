//! The operations behind the `state.*` methods that are more than one workspace call: find,
//! search, edit plans, JSON paths.

use serde_json::{json, Value};

use super::ConnectorError;
use crate::platform::number::parse_f64;
use crate::regexp::{self, RegExp};
use crate::workspace::{EntryType, FsError, Glob, Workspace};

pub(super) fn fs(e: FsError) -> ConnectorError {
    ConnectorError::Fs(e)
}

pub(super) fn not_found(syscall: &'static str, path: &str) -> ConnectorError {
    ConnectorError::Fs(FsError::new(crate::workspace::Errno::NoEnt, syscall, path))
}

pub(super) fn arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn flag(args: &Value, key: &str) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(false)
}

pub(super) async fn read_text(ws: &Workspace, path: &str) -> Result<String, ConnectorError> {
    ws.read_file(path).await.map_err(fs)?.ok_or_else(|| not_found("open", path))
}

/// Follows a dotted path (`a.b[0].c`) into a JSON value.
pub fn query_json<'a>(value: &'a Value, query: &str) -> Option<&'a Value> {
    let mut cur = value;
    let normalized = query.replace('[', ".").replace(']', "");
    for key in normalized.split('.').filter(|k| !k.is_empty()) {
        cur = match cur {
            Value::Array(a) => a.get(key.parse::<usize>().ok()?)?,
            Value::Object(o) => o.get(key)?,
            _ => return None,
        };
    }
    Some(cur)
}

pub(super) fn max_depth(args: &Value) -> Option<u64> {
    args["options"]["maxDepth"].as_u64()
}

/// `find`: every entry under `path` (depth 1 = its children) that passes the options.
pub(super) fn find(ws: &Workspace, path: &str, args: &Value) -> Result<Value, ConnectorError> {
    let o = args.get("options").cloned().unwrap_or(Value::Null);
    let root = if path.ends_with('/') { path.to_owned() } else { format!("{path}/") };
    let under = |p: &str| if p.starts_with('/') { p.to_owned() } else { format!("{root}**/{p}") };
    let pattern = args.get("pattern").and_then(Value::as_str).map_or(format!("{root}**"), under);
    let path_glob = o.get("pathPattern").and_then(Value::as_str).map(|p| Glob::new(&under(p)));
    let path_glob = path_glob.transpose().map_err(fs)?;
    let name_glob = o.get("name").and_then(Value::as_str).map(|n| Glob::new(&format!("/{n}")));
    let name_glob = name_glob.transpose().map_err(fs)?;
    let kinds: Vec<&str> = match o.get("type") {
        Some(Value::String(k)) => vec![k.as_str()],
        Some(Value::Array(ks)) => ks.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let time = |key: &'static str| {
        let bad = || ConnectorError::Failed(format!("find: options.{key} is not a date"));
        o.get(key).map(|v| epoch_ms(v).ok_or_else(bad)).transpose()
    };
    let (after, before) = (time("mtimeAfter")?, time("mtimeBefore")?);
    let num = |key: &str| o.get(key).and_then(Value::as_u64);
    let entries = ws.glob(&pattern).map_err(fs)?;
    let parents: std::collections::HashSet<&str> =
        entries.iter().filter_map(|e| crate::workspace::path::parent(&e.path)).collect();
    let base_depth = root.matches('/').count();
    let mut out = Vec::new();
    for e in &entries {
        let depth = (e.path.matches('/').count() + 1).saturating_sub(base_depth) as u64;
        let empty = match e.kind {
            EntryType::Directory => !parents.contains(e.path.as_str()),
            _ => e.size == 0,
        };
        let keep = name_glob.as_ref().is_none_or(|g| g.is_match(&format!("/{}", e.name)))
            && path_glob.as_ref().is_none_or(|g| g.is_match(&e.path))
            && (kinds.is_empty() || kinds.contains(&e.kind.as_str()))
            && num("minDepth").is_none_or(|d| depth >= d)
            && num("maxDepth").is_none_or(|d| depth <= d)
            && o.get("empty").and_then(Value::as_bool).is_none_or(|want| want == empty)
            && num("sizeMin").is_none_or(|n| e.size >= n)
            && num("sizeMax").is_none_or(|n| e.size <= n)
            && after.is_none_or(|t| e.updated_at as f64 > t)
            && before.is_none_or(|t| (e.updated_at as f64) < t);
        if keep {
            out.push(json!({"path": e.path, "name": e.name, "type": e.kind.as_str(),
                "depth": depth, "size": e.size, "mtime": e.updated_at}));
        }
    }
    Ok(Value::Array(out))
}

/// Epoch milliseconds from a number or an ISO date (`2026-01-31`, `2026-01-31T10:00:00Z`,
/// with optional fraction); `None` for anything else.
fn epoch_ms(v: &Value) -> Option<f64> {
    if let Some(n) = v.as_f64() {
        return Some(n);
    }
    let s = v.as_str()?.trim_end_matches('Z');
    let (date, time) = s.split_once('T').unwrap_or((s, "00:00:00"));
    let d: Vec<i64> = date.split('-').map(str::parse).collect::<Result<_, _>>().ok()?;
    let [y, m, day] = d[..] else { return None };
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms.split(':').map(str::parse).collect::<Result<_, _>>().ok()?;
    let (h, mi, sec) = (*t.first()?, *t.get(1).unwrap_or(&0), *t.get(2).unwrap_or(&0));
    let ms = parse_f64(&format!("0.{frac}"))? * 1000.0;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((((days * 24 + h) * 60 + mi) * 60 + sec) as f64 * 1000.0 + ms)
}

/// A file's text, `None` when it does not exist.
async fn text_if_exists(ws: &Workspace, path: &str) -> Result<Option<String>, ConnectorError> {
    ws.read_file(path).await.map_err(fs)
}

fn edit_diff(path: &str, before: Option<&str>, after: &str) -> String {
    crate::workspace::unified_diff(before.unwrap_or(""), after, path, path)
}

/// `planEdits`: each instruction against the file as it is now (instructions do not see each
/// other, as in Think), nothing written.
pub(super) async fn plan_edits(
    ws: &Workspace,
    instructions: &Value,
) -> Result<Value, ConnectorError> {
    let instructions = instructions.as_array().cloned().unwrap_or_default();
    let mut edits = Vec::new();
    let mut total_changed = 0;
    for ins in &instructions {
        let path = arg(ins, "path");
        let before = text_if_exists(ws, path).await?;
        let content = match arg(ins, "kind") {
            "write" => arg(ins, "content").to_owned(),
            "writeJson" => {
                let spaces = ins["options"]["spaces"].as_u64().unwrap_or(2) as usize;
                pretty(&ins["value"], spaces) + "\n"
            }
            _ => {
                let Some(text) = before.as_deref() else {
                    return Err(not_found("open", path));
                };
                let options = ins.get("options").cloned().unwrap_or(Value::Null);
                let matcher = text_matcher(arg(ins, "search"), &options)?;
                matcher.replace_all(text, arg(ins, "replacement")).map_err(|_| {
                    ConnectorError::Failed(format!(
                        "planEdits: replacing in {path} failed: the pattern backtracked too much"
                    ))
                })?
            }
        };
        let changed = before.as_deref() != Some(content.as_str());
        total_changed += usize::from(changed);
        let diff =
            if changed { edit_diff(path, before.as_deref(), &content) } else { String::new() };
        edits.push(json!({"instruction": ins, "path": path, "changed": changed,
            "content": content, "diff": diff}));
    }
    Ok(json!({"edits": edits, "totalChanged": total_changed,
        "totalInstructions": instructions.len()}))
}

/// `applyEdits` / `applyEditPlan`: writes each changed file in order; on a failure the files
/// already written get their old content back (or are removed if they were new) unless
/// `rollbackOnError` is false, and the error says which happened.
pub(super) async fn apply_edits(
    ws: &Workspace,
    edits: &[Value],
    options: &Value,
) -> Result<Value, ConnectorError> {
    let dry_run = flag(options, "dryRun");
    let mut results = Vec::new();
    let mut written: Vec<(String, Option<String>)> = Vec::new();
    let mut total_changed = 0;
    for edit in edits {
        let (path, content) = (arg(edit, "path"), arg(edit, "content"));
        let step = async {
            let before = text_if_exists(ws, path).await?;
            let changed = before.as_deref() != Some(content);
            if changed && !dry_run {
                ws.write_file(path, content, "text/plain").await.map_err(fs)?;
            }
            Ok::<_, ConnectorError>((before, changed))
        };
        match step.await {
            Ok((before, changed)) => {
                let diff = if changed {
                    edit_diff(path, before.as_deref(), content)
                } else {
                    String::new()
                };
                if changed && !dry_run {
                    written.push((path.to_owned(), before));
                }
                total_changed += usize::from(changed);
                results.push(
                    json!({"path": path, "changed": changed, "content": content, "diff": diff}),
                );
            }
            Err(e) => {
                if options.get("rollbackOnError") == Some(&Value::Bool(false)) {
                    return Err(ConnectorError::Failed(format!(
                        "applyEdits failed at {path}: {e} (not rolled back)"
                    )));
                }
                for (p, before) in written.iter().rev() {
                    let undone = match before {
                        Some(text) => ws.write_file(p, text, "text/plain").await,
                        None => ws.rm(p, false, true).await,
                    };
                    if let Err(u) = undone {
                        return Err(ConnectorError::Failed(format!(
                            "applyEdits failed at {path}: {e}; rolling back {p} failed too: {u}"
                        )));
                    }
                }
                return Err(ConnectorError::Failed(format!(
                    "applyEdits failed at {path}: {e} (rolled back)"
                )));
            }
        }
    }
    Ok(json!({"dryRun": dry_run, "edits": results, "totalChanged": total_changed}))
}

/// The matcher of a search, built as Think's `createTextMatcher` builds its `RegExp`: the
/// query (escaped unless `regex`), `\b` around it for `wholeWord`, case folded when
/// `caseSensitive` is false; it is a JS regular expression (`crate::regexp`: V8's own in the
/// Worker), so look-around, backreferences, `\d`, `\w`, `\b` and `.` are JS's.
pub(super) fn text_matcher(query: &str, options: &Value) -> Result<RegExp, ConnectorError> {
    if query.is_empty() {
        return Err(ConnectorError::Failed("Search query must not be empty".into()));
    }
    let mut source = if flag(options, "regex") { query.to_owned() } else { regexp::escape(query) };
    if flag(options, "wholeWord") {
        source = format!(r"\b(?:{source})\b");
    }
    let flags = regexp::Flags {
        ignore_case: options.get("caseSensitive") == Some(&Value::Bool(false)),
        ..regexp::Flags::default()
    };
    RegExp::new(&source, flags)
        .map_err(|e| ConnectorError::Failed(format!("Invalid search pattern: {e}")))
}

fn count_opt(options: &Value, key: &str) -> usize {
    options.get(key).and_then(Value::as_u64).map_or(0, |n| n as usize)
}

/// Every match of `matcher` in `text`, as Think's `StateTextMatch` (1-based line and UTF-16
/// column, with context lines when asked).
pub(super) fn matches_in(text: &str, matcher: &RegExp, options: &Value) -> Vec<Value> {
    let (before, after) = (count_opt(options, "contextBefore"), count_opt(options, "contextAfter"));
    let max = options.get("maxMatches").and_then(Value::as_u64).map(|n| n as usize);
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        for (start, end) in matcher.find_all(line) {
            let found = &line[start..end];
            let mut hit = json!({
                "line": i + 1,
                "column": line[..start].encode_utf16().count() + 1,
                "match": found,
                "lineText": line,
            });
            if before > 0 {
                hit["beforeLines"] = json!(lines[i.saturating_sub(before)..i]);
            }
            if after > 0 {
                hit["afterLines"] =
                    json!(lines[(i + 1).min(lines.len())..(i + 1 + after).min(lines.len())]);
            }
            out.push(hit);
            if max.is_some_and(|n| out.len() >= n) {
                return out;
            }
        }
    }
    out
}

fn json_keys(path: &str) -> Vec<String> {
    path.replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Sets the value at a dotted path, creating objects (or extending arrays) on the way.
pub(super) fn set_json(root: &mut Value, path: &str, value: Value) -> Result<(), ConnectorError> {
    let keys = json_keys(path);
    let Some((last, parents)) = keys.split_last() else {
        *root = value;
        return Ok(());
    };
    let mut cur = root;
    for key in parents {
        if !cur.is_object() && !cur.is_array() {
            *cur = json!({});
        }
        cur = match cur {
            Value::Array(a) => {
                let i: usize = key.parse().map_err(|_| {
                    ConnectorError::Failed(format!("{key:?} is not an array index"))
                })?;
                if a.len() <= i {
                    a.resize(i + 1, Value::Null);
                }
                &mut a[i]
            }
            Value::Object(o) => o.entry(key.clone()).or_insert_with(|| json!({})),
            _ => unreachable!("made a container above"),
        };
    }
    match cur {
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| ConnectorError::Failed(format!("{last:?} is not an array index")))?;
            if a.len() <= i {
                a.resize(i + 1, Value::Null);
            }
            a[i] = value;
        }
        Value::Object(o) => {
            o.insert(last.clone(), value);
        }
        other => *other = json!({ last.clone(): value }),
    }
    Ok(())
}

/// Removes the value at a dotted path, if it is there.
pub(super) fn delete_json(root: &mut Value, path: &str) {
    let keys = json_keys(path);
    let Some((last, parents)) = keys.split_last() else { return };
    let mut cur = root;
    for key in parents {
        let next = match cur {
            Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            Value::Object(o) => o.get_mut(key),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match cur {
        Value::Array(a) => {
            if let Ok(i) = last.parse::<usize>() {
                if i < a.len() {
                    a.remove(i);
                }
            }
        }
        Value::Object(o) => {
            o.shift_remove(last);
        }
        _ => {}
    }
}

/// JSON with `spaces` of indentation, as `JSON.stringify(v, null, spaces)`.
pub(super) fn pretty(v: &Value, spaces: usize) -> String {
    if spaces == 0 {
        return v.to_string();
    }
    let indent = vec![b' '; spaces.min(10)];
    let fmt = serde_json::ser::PrettyFormatter::with_indent(&indent);
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    match serde::Serialize::serialize(v, &mut ser) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => v.to_string(),
    }
}
