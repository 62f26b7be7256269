//! The connectors: what the sandbox's globals reach. `state.*` is the workspace (Think's state
//! API, each method taking one object), `tools.*` the turn's server-side tools, which go
//! through the same approval policy, ledger and output limits as a direct call.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use crate::tools::approval::ApprovalPolicy;
use crate::tools::schema::InputValidator;
use crate::tools::{ToolContext, ToolRef, ToolSet};
use crate::workspace::{EntryType, FsError, Workspace};

/// Why a connector call failed; its text is what the sandboxed code sees thrown.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConnectorError {
    /// No such method (`state.nope`).
    UnknownMethod(String),
    /// The argument does not match the method's schema.
    InvalidInput(String),
    /// The workspace refused (`ENOENT`, `EISDIR`, …).
    Fs(FsError),
    /// The operation or tool failed with this message.
    Failed(String),
}

impl std::fmt::Display for ConnectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectorError::UnknownMethod(path) => write!(f, "{path} is not a function"),
            ConnectorError::InvalidInput(e) | ConnectorError::Failed(e) => f.write_str(e),
            ConnectorError::Fs(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConnectorError {}

impl From<FsError> for ConnectorError {
    fn from(e: FsError) -> Self {
        ConnectorError::Fs(e)
    }
}

impl From<String> for ConnectorError {
    fn from(e: String) -> Self {
        ConnectorError::Failed(e)
    }
}

impl From<&str> for ConnectorError {
    fn from(e: &str) -> Self {
        ConnectorError::Failed(e.to_owned())
    }
}

/// Whether replay serves a call from the journal or runs it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// No effect: runs again on replay.
    Read,
    /// Has an effect: served from the journal on replay, never run twice.
    Write,
}

/// One method of a connector, as `codemode.search` and `codemode.describe` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodSpec {
    /// The method name (`readFile`).
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its one argument.
    pub input_schema: Value,
    /// JSON Schema of its result, when known.
    pub output_schema: Option<Value>,
    /// Read or write.
    pub kind: CallKind,
}

/// Identifies one call for the tool ledger (stable across passes).
#[derive(Debug, Clone, PartialEq)]
pub struct CallContext {
    /// The execution.
    pub execution_id: String,
    /// The call's journal seq.
    pub seq: i64,
}

/// A global of the sandbox, backed by the host.
#[async_trait(?Send)]
pub trait Connector {
    /// The global's name.
    fn name(&self) -> &str;
    /// One line for the tool description.
    fn hint(&self) -> &str;
    /// Its methods.
    fn methods(&self) -> &[MethodSpec];
    /// Whether this call, with these arguments, needs a human's approval first.
    fn needs_approval(&self, _method: &str, _args: &Value) -> bool {
        false
    }
    /// Whether the method may need approval for some arguments (shown by `search`).
    fn may_need_approval(&self, _method: &str) -> bool {
        false
    }
    /// Checks a call's argument against the method's schema (before any approval is asked).
    fn validate(&self, _method: &str, _args: &Value) -> Result<(), ConnectorError> {
        Ok(())
    }
    /// Runs one call; arguments are validated here.
    async fn call(
        &self,
        method: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ConnectorError>;
    /// Undoes an applied call for `rollbackExecution`; false when the method has no undo
    /// (reads, and every built-in method today, as in Think's shell and tool connectors).
    async fn revert(
        &self,
        _method: &str,
        _args: &Value,
        _result: Option<&Value>,
        _ctx: &CallContext,
    ) -> Result<bool, ConnectorError> {
        Ok(false)
    }
}

fn spec(
    name: &str,
    description: &str,
    props: Value,
    required: &[&str],
    kind: CallKind,
) -> MethodSpec {
    MethodSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": false,
        }),
        output_schema: None,
        kind,
    }
}

fn path_prop() -> Value {
    json!({"type": "string", "description": "Absolute workspace path"})
}

/// `state.*`: the agent's workspace.
pub struct StateConnector {
    ws: Rc<Workspace>,
    methods: Vec<MethodSpec>,
    validators: Validators,
}

/// Compiled input schemas by method, built on first use (compiling one costs more than the
/// call it checks).
#[derive(Default)]
struct Validators(std::cell::RefCell<std::collections::HashMap<String, Rc<InputValidator>>>);

impl Validators {
    fn check(
        &self,
        label: &str,
        method: &str,
        schema: &Value,
        args: &Value,
    ) -> Result<(), ConnectorError> {
        let cached = self.0.borrow().get(method).cloned();
        let validator = match cached {
            Some(v) => v,
            None => {
                let v = Rc::new(
                    InputValidator::new(schema).map_err(|e| format!("{label} has an {e}"))?,
                );
                self.0.borrow_mut().insert(method.to_owned(), v.clone());
                v
            }
        };
        validator
            .validate(args)
            .map_err(|e| ConnectorError::InvalidInput(format!("Invalid input for {label}: {e}")))
    }
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
            spec("readFile", "Read a text file.", json!({"path": p()}), &["path"], Read),
            spec(
                "writeFile",
                "Create or overwrite a text file (parents are created).",
                json!({"path": p(), "content": s("The new text")}),
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
                json!({"path": p(), "value": {"description": "Any JSON value"}, "spaces": {"type": "integer", "description": "Indentation (default 2)"}}),
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
                "Files and directories under a path, optionally filtered by a glob on their path.",
                json!({"path": p(), "pattern": s("Glob pattern")}),
                &["path"],
                Read,
            ),
            spec(
                "summarizeTree",
                "Counts and total size of the files under a path.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "searchText",
                "Lines of one file containing a string.",
                json!({"path": p(), "query": s("Text to find")}),
                &["path", "query"],
                Read,
            ),
            spec(
                "searchFiles",
                "Lines containing a string in every file matching a glob.",
                json!({"pattern": s("Glob pattern"), "query": s("Text to find")}),
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
                "The tree of entries under a path, nested.",
                json!({"path": p()}),
                &["path"],
                Read,
            ),
            spec(
                "hashFile",
                "The SHA-256 of a file, as hex.",
                json!({"path": p(), "algorithm": {"const": "sha256"}}),
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
        Self { ws, methods, validators: Validators::default() }
    }
}

/// The result type of a `state.*` method, for `codemode.describe`.
fn state_output(method: &str) -> Option<Value> {
    let string = json!({"type": "string"});
    let info = json!({"anyOf": [{"type": "object", "properties": {
        "path": {"type": "string"}, "name": {"type": "string"},
        "type": {"enum": ["file", "directory", "symlink"]}, "mimeType": {"type": "string"},
        "size": {"type": "number"}, "createdAt": {"type": "number"}, "updatedAt": {"type": "number"},
        "target": {"type": "string"}}, "required": ["path", "name", "type", "size"]}, {"type": "null"}]});
    Some(match method {
        "readFile" | "readFileBytes" | "readlink" | "realpath" | "resolvePath" | "diff"
        | "diffContent" | "hashFile" => string,
        "exists" => json!({"type": "boolean"}),
        "stat" | "lstat" => info,
        "readdir" | "glob" => json!({"type": "array", "items": {"type": "string"}}),
        "readdirWithFileTypes" => {
            json!({"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "type": {"enum": ["file", "directory", "symlink"]},
            "size": {"type": "number"}}, "required": ["name", "type", "size"]}})
        }
        "find" => json!({"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "type": {"enum": ["file", "directory", "symlink"]}},
            "required": ["path", "type"]}}),
        "searchText" => json!({"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "line": {"type": "number"}, "text": {"type": "string"}},
            "required": ["path", "line", "text"]}}),
        "replaceInFile" => json!({"type": "object", "properties": {"path": {"type": "string"},
            "replacements": {"type": "number"}}, "required": ["path", "replacements"]}),
        "detectFile" => json!({"type": "object", "properties": {"path": {"type": "string"},
            "mimeType": {"type": "string"}, "text": {"type": "boolean"}, "size": {"type": "number"}},
            "required": ["path", "mimeType", "text", "size"]}),
        "writeFile" | "appendFile" | "writeFileBytes" | "writeJson" | "mkdir" | "rm" | "cp"
        | "mv" | "symlink" | "removeTree" | "copyTree" | "moveTree" => json!({"type": "null"}),
        _ => return None,
    })
}

fn fs(e: FsError) -> ConnectorError {
    ConnectorError::Fs(e)
}

fn not_found(syscall: &'static str, path: &str) -> ConnectorError {
    ConnectorError::Fs(FsError::new(crate::workspace::Errno::NoEnt, syscall, path))
}

fn arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

fn flag(args: &Value, key: &str) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(false)
}

async fn read_text(ws: &Workspace, path: &str) -> Result<String, ConnectorError> {
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

fn matches_in(path: &str, text: &str, query: &str) -> Vec<Value> {
    text.split('\n')
        .enumerate()
        .filter(|(_, l)| l.contains(query))
        .map(|(i, l)| json!({"path": path, "line": i + 1, "text": l}))
        .collect()
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
        self.validators.check(&format!("state.{method}"), method, &m.input_schema, args)
    }

    async fn call(
        &self,
        method: &str,
        args: Value,
        _ctx: &CallContext,
    ) -> Result<Value, ConnectorError> {
        self.validate(method, &args)?;
        let args = if args.is_null() { json!({}) } else { args };
        let ws = self.ws.as_ref();
        let path = arg(&args, "path");
        Ok(match method {
            "getCapabilities" => json!({
                "files": true, "json": true, "search": true, "symlinks": true, "diffs": true,
                "bytes": "base64", "archives": false, "compression": false, "hashing": ["sha256"],
            }),
            "readFile" => Value::String(read_text(ws, path).await?),
            "writeFile" => {
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
                let spaces = args.get("spaces").and_then(Value::as_u64).unwrap_or(2) as usize;
                let text = pretty(&args["value"], spaces);
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
            "find" => {
                let root = if path.ends_with('/') { path.to_owned() } else { format!("{path}/") };
                let pattern = match args.get("pattern").and_then(Value::as_str) {
                    Some(p) if p.starts_with('/') => p.to_owned(),
                    Some(p) => format!("{root}**/{p}"),
                    None => format!("{root}**"),
                };
                let paths = ws.glob_paths(&pattern).map_err(fs)?;
                paths
                    .into_iter()
                    .map(|(p, kind)| json!({"path": p, "type": kind.as_str()}))
                    .collect()
            }
            "summarizeTree" => {
                let root = path.trim_end_matches('/');
                let files = ws.glob_files(&format!("{root}/**")).map_err(fs)?;
                let dirs = ws
                    .glob_paths(&format!("{root}/**"))
                    .map_err(fs)?
                    .into_iter()
                    .filter(|(_, k)| *k == EntryType::Directory)
                    .count();
                let bytes: u64 = files.iter().map(|(_, s)| s).sum();
                json!({"path": path, "files": files.len(), "directories": dirs, "totalBytes": bytes})
            }
            "searchText" => {
                let text = read_text(ws, path).await?;
                Value::Array(matches_in(path, &text, arg(&args, "query")))
            }
            "searchFiles" => {
                let query = arg(&args, "query");
                let files = ws.glob_files(arg(&args, "pattern")).map_err(fs)?;
                let paths: Vec<String> = files.into_iter().map(|(p, _)| p).collect();
                let texts = ws.read_files(&paths).await.map_err(fs)?;
                let mut out = Vec::new();
                for (p, t) in paths.iter().zip(texts) {
                    let found = matches_in(p, &t.unwrap_or_default(), query);
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
            "walkTree" => {
                let root = path.trim_end_matches('/');
                let mut entries = ws.glob_paths(&format!("{root}/**")).map_err(fs)?;
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                walk(if root.is_empty() { "/" } else { root }, &entries)
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
                Value::String(super::sha256::sha256_hex(&bytes))
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
                let content = pretty(&value, 2);
                let diff = ws.diff_content(path, &content).await.map_err(fs)?;
                ws.rewrite_file(path, &content, "application/json").await.map_err(fs)?;
                json!({"value": value, "content": content, "diff": diff, "operationsApplied": ops.len()})
            }
            other => return Err(ConnectorError::UnknownMethod(format!("state.{other}"))),
        })
    }
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
fn set_json(root: &mut Value, path: &str, value: Value) -> Result<(), String> {
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
                let i: usize = key.parse().map_err(|_| format!("{key:?} is not an array index"))?;
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
            let i: usize = last.parse().map_err(|_| format!("{last:?} is not an array index"))?;
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
fn delete_json(root: &mut Value, path: &str) {
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

/// The nested tree under `root` from a sorted list of every path below it.
fn walk(root: &str, entries: &[(String, EntryType)]) -> Value {
    let prefix = if root == "/" { "/".to_owned() } else { format!("{root}/") };
    let children: Vec<Value> = entries
        .iter()
        .filter(|(p, _)| {
            p.strip_prefix(&prefix).is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
        })
        .map(|(p, kind)| match kind {
            EntryType::Directory => walk(p, entries),
            k => {
                json!({"path": p, "name": crate::workspace::path::basename(p), "type": k.as_str()})
            }
        })
        .collect();
    let name = crate::workspace::path::basename(root);
    json!({"path": root, "name": name, "type": "directory", "children": children})
}

/// JSON with `spaces` of indentation, as `JSON.stringify(v, null, spaces)`.
fn pretty(v: &Value, spaces: usize) -> String {
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

/// `tools.*`: the turn's server-side tools, through their ledger wrappers and the agent's
/// approval policy.
pub struct ToolsConnector {
    tools: Vec<ToolRef>,
    policy: ApprovalPolicy,
    methods: Vec<MethodSpec>,
    validators: Validators,
}

impl ToolsConnector {
    /// Every tool of `set` that runs on the server, except those named in `exclude`.
    pub fn new(set: &ToolSet, policy: ApprovalPolicy, exclude: &[&str]) -> Self {
        let tools: Vec<ToolRef> = set
            .names()
            .filter(|n| !exclude.contains(n) && is_identifier(n))
            .filter_map(|n| set.get(n).cloned())
            .filter(|t| t.executes_on_server())
            .collect();
        let methods = tools
            .iter()
            .map(|t| {
                let d = t.definition();
                MethodSpec {
                    name: d.name.clone(),
                    description: d.description.clone(),
                    input_schema: d.input_schema.clone(),
                    output_schema: d.output_schema.clone(),
                    kind: CallKind::Write,
                }
            })
            .collect();
        Self { tools, policy, methods, validators: Validators::default() }
    }

    fn tool(&self, name: &str) -> Option<&ToolRef> {
        self.tools.iter().find(|t| t.definition().name == name)
    }
}

/// Whether `name` is a plain JavaScript identifier (reachable as `tools.name`).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

#[async_trait(?Send)]
impl Connector for ToolsConnector {
    fn name(&self) -> &str {
        "tools"
    }

    fn hint(&self) -> &str {
        "the agent's tools (workspace tools, its own tools, MCP tools), one method per tool"
    }

    fn methods(&self) -> &[MethodSpec] {
        &self.methods
    }

    fn needs_approval(&self, method: &str, args: &Value) -> bool {
        self.tool(method)
            .is_some_and(|t| t.needs_approval(args) || self.policy.needs_approval(method, args))
    }

    fn may_need_approval(&self, method: &str) -> bool {
        self.policy
            .patterns()
            .any(|p| globset::Glob::new(p).is_ok_and(|g| g.compile_matcher().is_match(method)))
    }

    fn validate(&self, method: &str, args: &Value) -> Result<(), ConnectorError> {
        let Some(tool) = self.tool(method) else {
            return Err(ConnectorError::UnknownMethod(format!("tools.{method}")));
        };
        let empty = Value::Object(Map::new());
        let args = if args.is_null() { &empty } else { args };
        let label = format!("tool {method}");
        self.validators.check(&label, method, &tool.definition().input_schema, args)
    }

    async fn call(
        &self,
        method: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ConnectorError> {
        self.validate(method, &args)?;
        let Some(tool) = self.tool(method) else {
            return Err(ConnectorError::UnknownMethod(format!("tools.{method}")));
        };
        let args = if args.is_null() { Value::Object(Map::new()) } else { args };
        let ctx = ToolContext {
            tool_call_id: format!("cm_{}_{}", ctx.execution_id, ctx.seq),
            tool_name: method.to_owned(),
        };
        tool.execute(args, &ctx).await.map_err(|e| ConnectorError::Failed(e.to_string()))
    }
}
