//! `state.*`: the workspace connector, its method table and the dispatch of each call.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::state_ops::{
    apply_edits, arg, delete_json, find, flag, fs, matches_in, max_depth, not_found, plan_edits,
    pretty, query_json, read_text, set_json, text_matcher,
};
use super::state_schema::{
    apply_options, edit_instruction, find_options, path_prop, search_options, state_output,
    tree_options,
};
use super::{check_args, spec, CallContext, CallKind, Connector, ConnectorError, MethodSpec};
use crate::codemode::{archive, tree, undo};
use crate::platform::digest;
use crate::store::Sql;
use crate::workspace::{StaleWrite, Workspace, Writer};

/// `state.*`: the agent's workspace.
pub struct StateConnector {
    ws: Rc<Workspace>,
    methods: Vec<MethodSpec>,
    /// Where writes record what they replace, so a rollback can undo them (`undo.rs`).
    undo: Option<Rc<dyn Sql>>,
}

impl StateConnector {
    /// The connector over `ws` (the same workspace the file tools use).
    pub fn new(ws: Rc<Workspace>) -> Self {
        use CallKind::{Read, Write};
        let p = path_prop;
        let s = |d: &str| json!({"type": "string", "description": d});
        let b = |d: &str| json!({"type": "boolean", "description": d});
        let methods = vec![
            spec("getCapabilities", "What this workspace supports.", json!({}), &[], Read),
            spec(
                "readFile",
                "Read a text file; with withVersion, {content, version} (the version writeFile's expectedVersion takes).",
                json!({"path": p(), "withVersion": b("Return {content, version} instead of the text")}),
                &["path"],
                Read,
            ),
            spec(
                "writeFile",
                "Create or overwrite a text file (parents are created); with expectedVersion, refused if the file changed since that version.",
                json!({"path": p(), "content": s("The new text"), "expectedVersion": s("The version readFile reported")}),
                &["path", "content"],
                Write,
            ),
            spec(
                "appendFile",
                "Append text to a file (created if missing).",
                json!({"path": p(), "content": s("Text to append")}),
                &["path", "content"],
                Write,
            ),
            spec("readJson", "Read and parse a JSON file.", json!({"path": p()}), &["path"], Read),
            spec(
                "writeJson",
                "Write a value as JSON.",
                json!({"path": p(), "value": {"description": "Any JSON value"}, "options": {"type": "object",
                    "properties": {"spaces": {"type": "integer", "minimum": 0, "description": "Indentation (default 2)"}},
                    "additionalProperties": false}}),
                &["path", "value"],
                Write,
            ),
            spec(
                "queryJson",
                "Read one value from a JSON file by a dotted path such as `a.b[0].c`.",
                json!({"path": p(), "query": s("Dotted path")}),
                &["path", "query"],
                Read,
            ),
            spec("exists", "Whether anything is at a path.", json!({"path": p()}), &["path"], Read),
            spec(
                "stat",
                "Metadata of a path (following symlinks), or null.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "lstat",
                "Metadata of a path itself (not following symlinks), or null.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "mkdir",
                "Create a directory.",
                json!({"path": p(), "recursive": b("Create missing parents")}),
                &["path"],
                Write,
            ),
            spec("readdir", "Names in a directory.", json!({"path": p()}), &["path"], Read),
            spec(
                "readdirWithFileTypes",
                "Entries of a directory with their types.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "glob",
                "Paths matching a glob pattern such as `/src/**/*.ts`.",
                json!({"pattern": s("Glob pattern")}),
                &["pattern"],
                Read,
            ),
            spec(
                "find",
                "Files and directories under a path, filtered by a glob on their path and by \
                 Think's find options (name, type, depth, emptiness, size, modification time).",
                json!({"path": p(), "pattern": s("Glob pattern"), "options": find_options()}),
                &["path"],
                Read,
            ),
            spec(
                "summarizeTree",
                "Counts of the files, directories (the root included) and symlinks under a path, \
                 their total bytes and the deepest level, down to `options.maxDepth`.",
                json!({"path": p(), "options": tree_options()}),
                &["path"],
                Read,
            ),
            spec(
                "searchText",
                "Matches of a string (or, with `options.regex`, a regular expression) in one file.",
                json!({"path": p(), "query": s("Text to find"), "options": search_options()}),
                &["path", "query"],
                Read,
            ),
            spec(
                "searchFiles",
                "Matches of a string (or regular expression) in every file matching a glob.",
                json!({"pattern": s("Glob pattern"), "query": s("Text to find"), "options": search_options()}),
                &["pattern", "query"],
                Read,
            ),
            spec(
                "replaceInFile",
                "Replace every occurrence of a string in a file.",
                json!({"path": p(), "search": s("Text to find"), "replacement": s("Replacement")}),
                &["path", "search", "replacement"],
                Write,
            ),
            spec(
                "rm",
                "Remove a file or directory.",
                json!({"path": p(), "recursive": b("Remove directories and their contents"), "force": b("Ignore a missing path")}),
                &["path"],
                Write,
            ),
            spec(
                "cp",
                "Copy a file or (recursive) a directory.",
                json!({"src": p(), "dest": p(), "recursive": b("Copy directories")}),
                &["src", "dest"],
                Write,
            ),
            spec(
                "mv",
                "Move or rename.",
                json!({"src": p(), "dest": p()}),
                &["src", "dest"],
                Write,
            ),
            spec(
                "symlink",
                "Create a symbolic link.",
                json!({"target": s("What the link points to"), "linkPath": p()}),
                &["target", "linkPath"],
                Write,
            ),
            spec(
                "readlink",
                "The target of a symbolic link.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "diff",
                "Unified diff between two files.",
                json!({"pathA": p(), "pathB": p()}),
                &["pathA", "pathB"],
                Read,
            ),
            spec(
                "diffContent",
                "Unified diff between a file and new content.",
                json!({"path": p(), "newContent": s("Proposed content")}),
                &["path", "newContent"],
                Read,
            ),
            spec(
                "removeTree",
                "Remove a directory and everything under it.",
                json!({"path": p()}),
                &["path"],
                Write,
            ),
            spec(
                "copyTree",
                "Copy a directory tree.",
                json!({"src": p(), "dest": p()}),
                &["src", "dest"],
                Write,
            ),
            spec(
                "moveTree",
                "Move a directory tree.",
                json!({"src": p(), "dest": p()}),
                &["src", "dest"],
                Write,
            ),
            spec(
                "readFileBytes",
                "Read a file's bytes, as base64.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "writeFileBytes",
                "Create or overwrite a file with bytes given as base64.",
                json!({"path": p(), "base64": s("The bytes, base64-encoded")}),
                &["path", "base64"],
                Write,
            ),
            spec(
                "realpath",
                "The path with every symlink resolved.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "resolvePath",
                "Resolve a path against a base directory (`..` and `.` removed).",
                json!({"base": p(), "path": s("Relative or absolute path")}),
                &["base", "path"],
                Read,
            ),
            spec(
                "replaceInFiles",
                "Replace every occurrence of a string in every file matching a glob.",
                json!({"pattern": s("Glob pattern"), "search": s("Text to find"), "replacement": s("Replacement")}),
                &["pattern", "search", "replacement"],
                Write,
            ),
            spec(
                "walkTree",
                "The tree of entries under a path, nested ({path, name, type, size, children}), \
                 children sorted by name, down to `options.maxDepth` levels.",
                json!({"path": p(), "options": tree_options()}),
                &["path"],
                Read,
            ),
            spec(
                "hashFile",
                "The digest of a file as lowercase hex: SHA-256 unless `algorithm` says md5 or sha1.",
                json!({"path": p(), "algorithm": {"enum": ["md5", "sha1", "sha256"]}}),
                &["path"],
                Read,
            ),
            spec(
                "updateJson",
                "Apply set/delete operations (dotted paths such as `a.b[0]`) to a JSON file.",
                json!({"path": p(), "operations": {"type": "array", "items": {"type": "object", "properties": {"op": {"enum": ["set", "delete"]}, "path": s("Dotted path"), "value": {}}, "required": ["op", "path"]}}}),
                &["path", "operations"],
                Write,
            ),
            spec(
                "planEdits",
                "Plan edits without writing: each instruction (`write`, `replace` with search \
                 options, `writeJson`) against the file as it is now, with the new content and a diff.",
                json!({"instructions": {"type": "array", "items": edit_instruction()}}),
                &["instructions"],
                Read,
            ),
            spec(
                "applyEditPlan",
                "Write a plan from planEdits; on a failure the files already written are restored \
                 unless `options.rollbackOnError` is false.",
                json!({"plan": {"type": "object", "properties": {"edits": {"type": "array", "items": {
                    "type": "object", "properties": {"path": p(), "content": s("New content")},
                    "required": ["path", "content"]}}}, "required": ["edits"]},
                    "options": apply_options()}),
                &["plan"],
                Write,
            ),
            spec(
                "applyEdits",
                "Write several files at once ({path, content} each), with diffs; all or nothing \
                 unless `options.rollbackOnError` is false.",
                json!({"edits": {"type": "array", "items": {"type": "object", "properties": {
                    "path": p(), "content": s("New content")}, "required": ["path", "content"],
                    "additionalProperties": false}}, "options": apply_options()}),
                &["edits"],
                Write,
            ),
            spec(
                "createArchive",
                "Write a tar archive of files and directories (each with everything under it).",
                json!({"path": s("The archive to write"), "sources": {"type": "array", "items": p()}}),
                &["path", "sources"],
                Write,
            ),
            spec(
                "listArchive",
                "The entries of a tar archive, sorted by path.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "extractArchive",
                "Extract a tar archive under a directory.",
                json!({"path": p(), "destination": s("Directory to extract into")}),
                &["path", "destination"],
                Write,
            ),
            spec(
                "compressFile",
                "Gzip a file to `destination` (default: the path plus `.gz`).",
                json!({"path": p(), "destination": s("Where to write")}),
                &["path"],
                Write,
            ),
            spec(
                "decompressFile",
                "Gunzip a file to `destination` (default: the path without `.gz`).",
                json!({"path": p(), "destination": s("Where to write")}),
                &["path"],
                Write,
            ),
            spec(
                "detectFile",
                "The media type of a file and whether it is text.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
        ];
        let mut methods = methods;
        for m in &mut methods {
            m.output_schema = state_output(&m.name);
        }
        Self { ws, methods, undo: None }
    }

    /// Records, before each write, what it replaces in the journal's `think_cm_undo` table
    /// in `sql`, so `rollbackExecution` restores the workspace.
    pub fn with_undo(mut self, sql: Rc<dyn Sql>) -> Self {
        self.undo = Some(sql);
        self
    }

    fn is_write(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m.name == method && m.kind == CallKind::Write)
    }
}

#[async_trait(?Send)]
impl Connector for StateConnector {
    fn name(&self) -> &str {
        "state"
    }

    fn hint(&self) -> &str {
        "the workspace filesystem: files, JSON, listing, search and replace, copies and moves, diffs"
    }

    fn methods(&self) -> &[MethodSpec] {
        &self.methods
    }

    fn validate(&self, method: &str, args: &Value) -> Result<(), ConnectorError> {
        let Some(m) = self.methods.iter().find(|m| m.name == method) else {
            return Err(ConnectorError::UnknownMethod(format!("state.{method}")));
        };
        let empty = json!({});
        let args = if args.is_null() { &empty } else { args };
        check_args(&format!("state.{method}"), &m.input_schema, args)
    }

    async fn call(
        &self,
        method: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ConnectorError> {
        self.validate(method, &args)?;
        let args = if args.is_null() { json!({}) } else { args };
        let ws = self.ws.as_ref();
        if let (Some(sql), true) = (&self.undo, self.is_write(method)) {
            if let Some(paths) = undo::affected_paths(ws, method, &args).await {
                let follow = undo::follows_last_symlink(method);
                let log = undo::UndoLog::new(sql.as_ref());
                undo::snapshot(ws, &log, ctx, &paths, follow).await?;
            }
        }
        let path = arg(&args, "path");
        let _code = ws.writing_as(Writer::Code);
        Ok(match method {
            "getCapabilities" => json!({
                "files": true, "json": true, "search": true, "symlinks": true, "diffs": true,
                "bytes": "base64", "archives": "tar", "compression": "gzip", "hashing": ["md5", "sha1", "sha256"],
            }),
            "readFile" if flag(&args, "withVersion") => {
                let content = read_text(ws, path).await?;
                let version = ws.remember_seen(path, Some(&content)).map_err(fs)?;
                json!({"content": content, "version": version})
            }
            "readFile" => Value::String(read_text(ws, path).await?),
            "writeFile" => {
                if let Some(expected) = args.get("expectedVersion").and_then(Value::as_str) {
                    ws.check_version(path, expected).await.map_err(|e| match e {
                        StaleWrite::Fs(e) => fs(e),
                        other => ConnectorError::Failed(other.to_string()),
                    })?;
                }
                ws.write_file(path, arg(&args, "content"), "text/plain").await.map_err(fs)?;
                Value::Null
            }
            "appendFile" => {
                ws.append_file(path, arg(&args, "content"), "text/plain").await.map_err(fs)?;
                Value::Null
            }
            "readJson" => {
                let text = read_text(ws, path).await?;
                serde_json::from_str(&text).map_err(|e| format!("{path} is not JSON: {e}"))?
            }
            "writeJson" => {
                // As Think's `stringifyJsonFileContent`: a trailing newline.
                let spaces = args["options"]["spaces"].as_u64().unwrap_or(2) as usize;
                let text = pretty(&args["value"], spaces) + "\n";
                ws.write_file(path, &text, "application/json").await.map_err(fs)?;
                Value::Null
            }
            "queryJson" => {
                let text = read_text(ws, path).await?;
                let value: Value =
                    serde_json::from_str(&text).map_err(|e| format!("{path} is not JSON: {e}"))?;
                query_json(&value, arg(&args, "query")).cloned().unwrap_or(Value::Null)
            }
            "exists" => Value::Bool(ws.exists(path).map_err(fs)?),
            "stat" => serde_json::to_value(ws.stat(path).map_err(fs)?).unwrap_or(Value::Null),
            "lstat" => serde_json::to_value(ws.lstat(path).map_err(fs)?).unwrap_or(Value::Null),
            "mkdir" => {
                ws.mkdir(path, flag(&args, "recursive")).map_err(fs)?;
                Value::Null
            }
            "readdir" => {
                let entries = ws.read_dir_brief(path, usize::MAX >> 1, 0).map_err(fs)?;
                entries.into_iter().map(|(name, _, _)| Value::String(name)).collect()
            }
            "readdirWithFileTypes" => {
                let entries = ws.read_dir_brief(path, usize::MAX >> 1, 0).map_err(fs)?;
                entries
                    .into_iter()
                    .map(|(name, kind, size)| json!({"name": name, "type": kind.as_str(), "size": size}))
                    .collect()
            }
            "glob" => {
                let paths = ws.glob_paths(arg(&args, "pattern")).map_err(fs)?;
                paths.into_iter().map(|(p, _)| Value::String(p)).collect()
            }
            "find" => find(ws, path, &args)?,
            "summarizeTree" => tree::summarize_tree(ws, path, max_depth(&args))?,
            "searchText" => {
                let options = args.get("options").cloned().unwrap_or(Value::Null);
                let matcher = text_matcher(arg(&args, "query"), &options)?;
                let text = read_text(ws, path).await?;
                Value::Array(matches_in(&text, &matcher, &options))
            }
            "searchFiles" => {
                let options = args.get("options").cloned().unwrap_or(Value::Null);
                let matcher = text_matcher(arg(&args, "query"), &options)?;
                let files = ws.glob_files(arg(&args, "pattern")).map_err(fs)?;
                let paths: Vec<String> = files.into_iter().map(|(p, _)| p).collect();
                let texts = ws.read_files(&paths).await.map_err(fs)?;
                let mut out = Vec::new();
                for (p, t) in paths.iter().zip(texts) {
                    let found = matches_in(&t.unwrap_or_default(), &matcher, &options);
                    if !found.is_empty() {
                        out.push(json!({"path": p, "matches": found}));
                    }
                }
                Value::Array(out)
            }
            "replaceInFile" => {
                let text = read_text(ws, path).await?;
                let search = arg(&args, "search");
                if search.is_empty() {
                    return Err("replaceInFile: search must not be empty".into());
                }
                let count = text.matches(search).count();
                if count > 0 {
                    let next = text.replace(search, arg(&args, "replacement"));
                    ws.rewrite_file(path, &next, "text/plain").await.map_err(fs)?;
                }
                json!({"path": path, "replacements": count})
            }
            "rm" => {
                ws.rm(path, flag(&args, "recursive"), flag(&args, "force")).await.map_err(fs)?;
                Value::Null
            }
            "removeTree" => {
                ws.rm(path, true, true).await.map_err(fs)?;
                Value::Null
            }
            "cp" | "copyTree" => {
                let recursive = method == "copyTree" || flag(&args, "recursive");
                ws.cp(arg(&args, "src"), arg(&args, "dest"), recursive).await.map_err(fs)?;
                Value::Null
            }
            "mv" | "moveTree" => {
                ws.mv(arg(&args, "src"), arg(&args, "dest")).await.map_err(fs)?;
                Value::Null
            }
            "symlink" => {
                ws.symlink(arg(&args, "target"), arg(&args, "linkPath")).map_err(fs)?;
                Value::Null
            }
            "readlink" => Value::String(ws.readlink(path).map_err(fs)?),
            "diff" => {
                Value::String(ws.diff(arg(&args, "pathA"), arg(&args, "pathB")).await.map_err(fs)?)
            }
            "diffContent" => {
                Value::String(ws.diff_content(path, arg(&args, "newContent")).await.map_err(fs)?)
            }
            "readFileBytes" => {
                use base64::Engine;
                let bytes = ws
                    .read_file_bytes(path)
                    .await
                    .map_err(fs)?
                    .ok_or_else(|| not_found("open", path))?;
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            "writeFileBytes" => {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(arg(&args, "base64"))
                    .map_err(|e| format!("writeFileBytes: base64 is not valid: {e}"))?;
                ws.write_file_bytes(path, &bytes, "application/octet-stream").await.map_err(fs)?;
                Value::Null
            }
            "realpath" => match ws.stat(path).map_err(fs)? {
                Some(info) => Value::String(info.path),
                None => return Err(not_found("realpath", path)),
            },
            "resolvePath" => {
                let rel = arg(&args, "path");
                let joined = if rel.starts_with('/') {
                    rel.to_owned()
                } else {
                    format!("{}/{rel}", arg(&args, "base"))
                };
                Value::String(crate::workspace::path::lexical(&joined))
            }
            "replaceInFiles" => {
                let (search, replacement) = (arg(&args, "search"), arg(&args, "replacement"));
                if search.is_empty() {
                    return Err("replaceInFiles: search must not be empty".into());
                }
                let files = ws.glob_files(arg(&args, "pattern")).map_err(fs)?;
                let paths: Vec<String> = files.into_iter().map(|(p, _)| p).collect();
                let texts = ws.read_files(&paths).await.map_err(fs)?;
                let mut changed = Vec::new();
                for (p, t) in paths.iter().zip(texts) {
                    let Some(text) = t else { continue };
                    let count = text.matches(search).count();
                    if count > 0 {
                        let next = text.replace(search, replacement);
                        ws.rewrite_file(p, &next, "text/plain").await.map_err(fs)?;
                        changed.push(json!({"path": p, "replacements": count}));
                    }
                }
                json!({ "files": changed })
            }
            "walkTree" => tree::walk_tree(ws, path, max_depth(&args))?,
            "planEdits" => plan_edits(ws, &args["instructions"]).await?,
            "createArchive" => {
                let sources: Vec<String> = args["sources"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                    .unwrap_or_default();
                archive::create(ws, path, &sources).await?
            }
            "listArchive" => archive::list(ws, path).await?,
            "extractArchive" => archive::extract(ws, path, arg(&args, "destination")).await?,
            "compressFile" => {
                archive::compress(ws, path, args.get("destination").and_then(Value::as_str)).await?
            }
            "decompressFile" => {
                archive::decompress(ws, path, args.get("destination").and_then(Value::as_str))
                    .await?
            }
            "applyEditPlan" => {
                let edits = args["plan"]["edits"].as_array().cloned().unwrap_or_default();
                apply_edits(ws, &edits, &args["options"]).await?
            }
            "applyEdits" => {
                let edits = args["edits"].as_array().cloned().unwrap_or_default();
                apply_edits(ws, &edits, &args["options"]).await?
            }
            "detectFile" => {
                let bytes = ws
                    .read_file_bytes(path)
                    .await
                    .map_err(fs)?
                    .ok_or_else(|| not_found("open", path))?;
                let text = crate::tools::workspace::media::looks_like_text(&bytes);
                let sniffed = crate::tools::workspace::media::sniff(&bytes);
                let fallback = if text { "text/plain" } else { "application/octet-stream" };
                let mime = sniffed.unwrap_or(fallback);
                json!({"path": path, "mimeType": mime, "text": text, "size": bytes.len()})
            }
            "hashFile" => {
                let bytes = ws
                    .read_file_bytes(path)
                    .await
                    .map_err(fs)?
                    .ok_or_else(|| not_found("open", path))?;
                let algorithm = match args.get("algorithm").and_then(Value::as_str) {
                    Some("md5") => digest::Algorithm::Md5,
                    Some("sha1") => digest::Algorithm::Sha1,
                    _ => digest::Algorithm::Sha256,
                };
                Value::String(digest::hex(algorithm, &bytes))
            }
            "updateJson" => {
                let before = read_text(ws, path).await?;
                let mut value: Value = serde_json::from_str(&before)
                    .map_err(|e| format!("{path} is not JSON: {e}"))?;
                let ops = args["operations"].as_array().cloned().unwrap_or_default();
                for op in &ops {
                    let at = op["path"].as_str().unwrap_or("");
                    match op["op"].as_str() {
                        Some("set") => set_json(
                            &mut value,
                            at,
                            op.get("value").cloned().unwrap_or(Value::Null),
                        )?,
                        _ => delete_json(&mut value, at),
                    }
                }
                let content = pretty(&value, 2) + "\n";
                let diff = ws.diff_content(path, &content).await.map_err(fs)?;
                ws.rewrite_file(path, &content, "application/json").await.map_err(fs)?;
                json!({"value": value, "content": content, "diff": diff, "operationsApplied": ops.len()})
            }
            other => return Err(ConnectorError::UnknownMethod(format!("state.{other}"))),
        })
    }

    /// Puts back what the call replaced, from the record [`undo::snapshot`] made before it.
    async fn revert(
        &self,
        method: &str,
        _args: &Value,
        _result: Option<&Value>,
        ctx: &CallContext,
    ) -> Result<bool, ConnectorError> {
        match &self.undo {
            Some(sql) if self.is_write(method) => {
                undo::restore(&self.ws, &undo::UndoLog::new(sql.as_ref()), ctx).await
            }
            _ => Ok(false),
        }
    }
}
