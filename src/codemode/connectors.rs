//! The connectors: what the sandbox's globals reach. `state.*` is the workspace (Think's state
//! API, each method taking one object), `tools.*` the turn's server-side tools, which go
//! through the same approval policy, ledger and output limits as a direct call.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::{archive, tree, undo};
use crate::platform::digest;
use crate::regexp::{self, RegExp};
use crate::store::Sql;
use crate::tools::approval::ApprovalPolicy;
use crate::tools::schema::InputValidator;
use crate::tools::{ToolContext, ToolRef, ToolSet};
use crate::workspace::{EntryType, FsError, Glob, StaleWrite, Workspace, Writer};

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
    /// (reads, and tools: `state.*` writes have one, which Think's shell connector lacks).
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

/// A method spec with an object schema of `props` (shared by the connectors of other layers).
pub(crate) fn spec(
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
    methods: Rc<[MethodSpec]>,
    /// Where writes record what they replace, so a rollback can undo them (`undo.rs`).
    undo: Option<Rc<dyn Sql>>,
}

/// Checks a connector call's `args` against its method's schema, with the shared compiled
/// validator ([`InputValidator::cached`]).
pub(crate) fn check_args(label: &str, schema: &Value, args: &Value) -> Result<(), ConnectorError> {
    InputValidator::cached(schema)
        .map_err(|e| format!("{label} has an {e}"))?
        .validate(args)
        .map_err(|e| ConnectorError::InvalidInput(format!("Invalid input for {label}: {e}")))
}

thread_local! {
    /// The `state.*` methods, built once per instance: every turn's connector shares them
    /// (building their schemas was most of a turn's tool set).
    static STATE_METHODS: Rc<[MethodSpec]> = Rc::from(StateConnector::method_specs());
}

impl StateConnector {
    /// The connector over `ws` (the same workspace the file tools use).
    pub fn new(ws: Rc<Workspace>) -> Self {
        Self { ws, methods: STATE_METHODS.with(Rc::clone), undo: None }
    }

    fn method_specs() -> Vec<MethodSpec> {
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
        methods
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

/// The result type of a `state.*` method, for `codemode.describe`.
fn state_output(method: &str) -> Option<Value> {
    let string = json!({"type": "string"});
    let info = json!({"anyOf": [{"type": "object", "properties": {
        "path": {"type": "string"}, "name": {"type": "string"},
        "type": {"enum": ["file", "directory", "symlink"]}, "mimeType": {"type": "string"},
        "size": {"type": "number"}, "createdAt": {"type": "number"}, "updatedAt": {"type": "number"},
        "target": {"type": "string"}}, "required": ["path", "name", "type", "size"]}, {"type": "null"}]});
    Some(match method {
        "readFile" => json!({"anyOf": [string, {"type": "object", "properties": {
            "content": {"type": "string"}, "version": {"type": ["string", "null"]}},
            "required": ["content", "version"]}]}),
        "readFileBytes" | "readlink" | "realpath" | "resolvePath" | "diff" | "diffContent"
        | "hashFile" => string,
        "exists" => json!({"type": "boolean"}),
        "stat" | "lstat" => info,
        "readdir" | "glob" => json!({"type": "array", "items": {"type": "string"}}),
        "readdirWithFileTypes" => {
            json!({"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "type": {"enum": ["file", "directory", "symlink"]},
            "size": {"type": "number"}}, "required": ["name", "type", "size"]}})
        }
        "find" => json!({"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "name": {"type": "string"},
            "type": {"enum": ["file", "directory", "symlink"]}, "depth": {"type": "number"},
            "size": {"type": "number"}, "mtime": {"type": "number"}},
            "required": ["path", "name", "type", "depth", "size", "mtime"]}}),
        "searchText" => json!({"type": "array", "items": text_match()}),
        "searchFiles" => json!({"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "matches": {"type": "array", "items": text_match()}},
            "required": ["path", "matches"]}}),
        "replaceInFile" => json!({"type": "object", "properties": {"path": {"type": "string"},
            "replacements": {"type": "number"}}, "required": ["path", "replacements"]}),
        "summarizeTree" => {
            let n = json!({"type": "number"});
            json!({"type": "object", "properties": {"files": n, "directories": n, "symlinks": n,
                "totalBytes": n, "maxDepth": n},
                "required": ["files", "directories", "symlinks", "totalBytes", "maxDepth"]})
        }
        "walkTree" => {
            let node = |children: Value| {
                json!({"type": "object", "properties": {"path": {"type": "string"},
                    "name": {"type": "string"}, "type": {"enum": ["file", "directory", "symlink"]},
                    "size": {"type": "number"}, "children": children},
                    "required": ["path", "name", "type", "size"]})
            };
            // One level spelled out; deeper ones are the same shape.
            node(json!({"type": "array", "items": node(json!({"type": "array"}))}))
        }
        "detectFile" => json!({"type": "object", "properties": {"path": {"type": "string"},
            "mimeType": {"type": "string"}, "text": {"type": "boolean"}, "size": {"type": "number"}},
            "required": ["path", "mimeType", "text", "size"]}),
        "writeFile" | "appendFile" | "writeFileBytes" | "writeJson" | "mkdir" | "rm" | "cp"
        | "mv" | "symlink" | "removeTree" | "copyTree" | "moveTree" => json!({"type": "null"}),
        _ => return None,
    })
}

fn text_match() -> Value {
    let lines = json!({"type": "array", "items": {"type": "string"}});
    json!({"type": "object", "properties": {"line": {"type": "number"},
        "column": {"type": "number"}, "match": {"type": "string"}, "lineText": {"type": "string"},
        "beforeLines": lines, "afterLines": lines}, "required": ["line", "column", "match", "lineText"]})
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

/// The `options` of `find`, as in Think's shell (`mtime*` take epoch milliseconds or an ISO
/// date).
/// Think's `StateTreeOptions`.
fn tree_options() -> Value {
    json!({"type": "object", "properties": {
        "maxDepth": {"type": "integer", "minimum": 0, "description": "Levels of children to list (default: all)"},
    }, "additionalProperties": false})
}

fn max_depth(args: &Value) -> Option<u64> {
    args["options"]["maxDepth"].as_u64()
}

fn find_options() -> Value {
    let kind = json!({"enum": ["file", "directory", "symlink"]});
    let time = json!({"type": ["number", "string"], "description": "Epoch ms or ISO date"});
    let count = json!({"type": "integer", "minimum": 0});
    json!({"type": "object", "additionalProperties": false, "properties": {
        "name": {"type": "string", "description": "Glob on the entry's name, e.g. `*.md`"},
        "pathPattern": {"type": "string", "description": "Glob on the path (relative to `path` unless absolute)"},
        "type": {"anyOf": [kind, {"type": "array", "items": kind}]},
        "minDepth": count, "maxDepth": count,
        "empty": {"type": "boolean", "description": "Only empty files and directories"},
        "sizeMin": count, "sizeMax": count,
        "mtimeAfter": time, "mtimeBefore": time}})
}

/// `find`: every entry under `path` (depth 1 = its children) that passes the options.
fn find(ws: &Workspace, path: &str, args: &Value) -> Result<Value, ConnectorError> {
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
        let bad = || ConnectorError::from(format!("find: options.{key} is not a date"));
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
    let ms: f64 = format!("0.{frac}").parse::<f64>().ok()? * 1000.0;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((((days * 24 + h) * 60 + mi) * 60 + sec) as f64 * 1000.0 + ms)
}

/// One `planEdits` instruction, as in Think's shell.
fn edit_instruction() -> Value {
    let p = path_prop();
    json!({"anyOf": [
        {"type": "object", "properties": {"kind": {"const": "write"}, "path": p,
            "content": {"type": "string"}}, "required": ["kind", "path", "content"],
            "additionalProperties": false},
        {"type": "object", "properties": {"kind": {"const": "replace"}, "path": p,
            "search": {"type": "string"}, "replacement": {"type": "string"},
            "options": search_options()}, "required": ["kind", "path", "search", "replacement"],
            "additionalProperties": false},
        {"type": "object", "properties": {"kind": {"const": "writeJson"}, "path": p, "value": {},
            "options": {"type": "object", "properties": {"spaces": {"type": "integer", "minimum": 0}},
                "additionalProperties": false}}, "required": ["kind", "path", "value"],
            "additionalProperties": false}]})
}

fn apply_options() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
        "dryRun": {"type": "boolean", "description": "Report without writing"},
        "rollbackOnError": {"type": "boolean", "description": "Restore written files on a failure (default true)"}}})
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
async fn plan_edits(ws: &Workspace, instructions: &Value) -> Result<Value, ConnectorError> {
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
                    format!(
                        "planEdits: replacing in {path} failed: the pattern backtracked too much"
                    )
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
async fn apply_edits(
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
                    return Err(
                        format!("applyEdits failed at {path}: {e} (not rolled back)").into()
                    );
                }
                for (p, before) in written.iter().rev() {
                    let undone = match before {
                        Some(text) => ws.write_file(p, text, "text/plain").await,
                        None => ws.rm(p, false, true).await,
                    };
                    if let Err(u) = undone {
                        return Err(format!(
                            "applyEdits failed at {path}: {e}; rolling back {p} failed too: {u}"
                        )
                        .into());
                    }
                }
                return Err(format!("applyEdits failed at {path}: {e} (rolled back)").into());
            }
        }
    }
    Ok(json!({"dryRun": dry_run, "edits": results, "totalChanged": total_changed}))
}

/// The `options` of `searchText` / `searchFiles` / `replaceInFile(s)`, as in Think's shell.
fn search_options() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
        "caseSensitive": {"type": "boolean", "description": "false: ignore case (default true)"},
        "regex": {"type": "boolean", "description": "The query is a regular expression"},
        "wholeWord": {"type": "boolean", "description": "Match whole words only"},
        "contextBefore": {"type": "integer", "minimum": 0, "description": "Lines of context before"},
        "contextAfter": {"type": "integer", "minimum": 0, "description": "Lines of context after"},
        "maxMatches": {"type": "integer", "minimum": 1, "description": "Stop after this many (per file)"}}})
}

/// The matcher of a search, built as Think's `createTextMatcher` builds its `RegExp`: the
/// query (escaped unless `regex`), `\b` around it for `wholeWord`, case folded when
/// `caseSensitive` is false; it is a JS regular expression (`crate::regexp`: V8's own in the
/// Worker), so look-around, backreferences, `\d`, `\w`, `\b` and `.` are JS's.
fn text_matcher(query: &str, options: &Value) -> Result<RegExp, ConnectorError> {
    if query.is_empty() {
        return Err("Search query must not be empty".into());
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
        .map_err(|e| ConnectorError::from(format!("Invalid search pattern: {e}")))
}

fn count_opt(options: &Value, key: &str) -> usize {
    options.get(key).and_then(Value::as_u64).map_or(0, |n| n as usize)
}

/// Every match of `matcher` in `text`, as Think's `StateTextMatch` (1-based line and UTF-16
/// column, with context lines when asked).
fn matches_in(text: &str, matcher: &RegExp, options: &Value) -> Vec<Value> {
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
        Self { tools, policy, methods }
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
            .any(|p| crate::tools::approval::NameGlob::new(p).is_ok_and(|g| g.is_match(method)))
    }

    fn validate(&self, method: &str, args: &Value) -> Result<(), ConnectorError> {
        let Some(tool) = self.tool(method) else {
            return Err(ConnectorError::UnknownMethod(format!("tools.{method}")));
        };
        let empty = Value::Object(Map::new());
        let args = if args.is_null() { &empty } else { args };
        let label = format!("tool {method}");
        check_args(&label, &tool.definition().input_schema, args)
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
