//! `state.*`: the workspace connector, its method table and the dispatch of each call.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::state_ops::{
    apply_edits, arg, delete_json, find, flag, fs, matches_in, max_depth, not_found, plan_edits,
    pretty, query_json, read_text, set_json, text_matcher,
};
use super::state_schema::method_specs;
use super::{check_args, CallContext, CallKind, Connector, ConnectorError, MethodSpec};
use crate::codemode::{archive, tree, undo};
use crate::platform::digest;
use crate::store::Sql;
use crate::workspace::{StaleWrite, Workspace, Writer};

/// Declares the `state.*` methods, each once: its variant, the name the sandbox calls it by
/// and whether it writes. The rest of a method (description and schemas in `state_schema.rs`,
/// the dispatch below, what `undo.rs` records) matches on [`StateMethod`] without a wildcard,
/// so a method declared here but not handled there does not compile.
macro_rules! state_methods {
    ($($variant:ident = $name:literal, $kind:ident;)+) => {
        /// A `state.*` method.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum StateMethod {
            $(
                #[doc = concat!("`state.", $name, "`.")]
                $variant,
            )+
        }

        impl StateMethod {
            /// Every method, in the order `codemode.search` and the type declarations list them.
            pub const ALL: &'static [StateMethod] = &[$(StateMethod::$variant),+];

            /// The name the sandbox calls it by (`readFile` for `state.readFile`).
            pub fn name(self) -> &'static str {
                match self {
                    $(StateMethod::$variant => $name,)+
                }
            }

            /// Read or write: whether replay runs it again or serves it from the journal, and
            /// whether it records what it replaces for a rollback.
            pub fn kind(self) -> CallKind {
                match self {
                    $(StateMethod::$variant => CallKind::$kind,)+
                }
            }

            /// The method the sandbox calls `name`, if there is one.
            pub fn from_name(name: &str) -> Option<StateMethod> {
                match name {
                    $($name => Some(StateMethod::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

state_methods! {
    GetCapabilities = "getCapabilities", Read;
    ReadFile = "readFile", Read;
    WriteFile = "writeFile", Write;
    AppendFile = "appendFile", Write;
    ReadJson = "readJson", Read;
    WriteJson = "writeJson", Write;
    QueryJson = "queryJson", Read;
    Exists = "exists", Read;
    Stat = "stat", Read;
    Lstat = "lstat", Read;
    Mkdir = "mkdir", Write;
    Readdir = "readdir", Read;
    ReaddirWithFileTypes = "readdirWithFileTypes", Read;
    Glob = "glob", Read;
    Find = "find", Read;
    SummarizeTree = "summarizeTree", Read;
    SearchText = "searchText", Read;
    SearchFiles = "searchFiles", Read;
    ReplaceInFile = "replaceInFile", Write;
    Rm = "rm", Write;
    Cp = "cp", Write;
    Mv = "mv", Write;
    Symlink = "symlink", Write;
    Readlink = "readlink", Read;
    Diff = "diff", Read;
    DiffContent = "diffContent", Read;
    RemoveTree = "removeTree", Write;
    CopyTree = "copyTree", Write;
    MoveTree = "moveTree", Write;
    ReadFileBytes = "readFileBytes", Read;
    WriteFileBytes = "writeFileBytes", Write;
    Realpath = "realpath", Read;
    ResolvePath = "resolvePath", Read;
    ReplaceInFiles = "replaceInFiles", Write;
    WalkTree = "walkTree", Read;
    HashFile = "hashFile", Read;
    UpdateJson = "updateJson", Write;
    PlanEdits = "planEdits", Read;
    ApplyEditPlan = "applyEditPlan", Write;
    ApplyEdits = "applyEdits", Write;
    CreateArchive = "createArchive", Write;
    ListArchive = "listArchive", Read;
    ExtractArchive = "extractArchive", Write;
    CompressFile = "compressFile", Write;
    DecompressFile = "decompressFile", Write;
    DetectFile = "detectFile", Read;
}

/// `state.*`: the agent's workspace.
pub struct StateConnector {
    ws: Rc<Workspace>,
    /// One per [`StateMethod`], in declaration order (so `m as usize` indexes it).
    methods: Rc<[MethodSpec]>,
    /// Where writes record what they replace, so a rollback can undo them (`undo.rs`).
    undo: Option<Rc<dyn Sql>>,
}

thread_local! {
    /// The `state.*` methods, built once per instance: every turn's connector shares them
    /// (building their schemas was most of a turn's tool set).
    static STATE_METHODS: Rc<[MethodSpec]> = method_specs().into();
}

impl StateConnector {
    /// The connector over `ws` (the same workspace the file tools use).
    pub fn new(ws: Rc<Workspace>) -> Self {
        Self { ws, methods: STATE_METHODS.with(Rc::clone), undo: None }
    }

    /// Records, before each write, what it replaces in the journal's `think_cm_undo` table
    /// in `sql`, so `rollbackExecution` restores the workspace.
    pub fn with_undo(mut self, sql: Rc<dyn Sql>) -> Self {
        self.undo = Some(sql);
        self
    }
}

/// The declared method the sandbox called `method`, or the error it sees for an unknown one.
fn declared(method: &str) -> Result<StateMethod, ConnectorError> {
    StateMethod::from_name(method)
        .ok_or_else(|| ConnectorError::UnknownMethod(format!("state.{method}")))
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
        let m = declared(method)?;
        let empty = json!({});
        let args = if args.is_null() { &empty } else { args };
        check_args(&format!("state.{method}"), &self.methods[m as usize].input_schema, args)
    }

    async fn call(
        &self,
        method: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ConnectorError> {
        use StateMethod as M;
        self.validate(method, &args)?;
        let m = declared(method)?;
        let args = if args.is_null() { json!({}) } else { args };
        let ws = self.ws.as_ref();
        if let (Some(sql), CallKind::Write) = (&self.undo, m.kind()) {
            if let Some(paths) = undo::affected_paths(ws, m, &args).await {
                let follow = undo::follows_last_symlink(m);
                let log = undo::UndoLog::new(sql.as_ref());
                undo::snapshot(ws, &log, ctx, &paths, follow).await?;
            }
        }
        let path = arg(&args, "path");
        let _code = ws.writing_as(Writer::Code);
        Ok(match m {
            M::GetCapabilities => json!({
                "files": true, "json": true, "search": true, "symlinks": true, "diffs": true,
                "bytes": "base64", "archives": "tar", "compression": "gzip", "hashing": ["md5", "sha1", "sha256"],
            }),
            M::ReadFile if flag(&args, "withVersion") => {
                let content = read_text(ws, path).await?;
                let version = ws.remember_seen(path, Some(&content)).map_err(fs)?;
                json!({"content": content, "version": version})
            }
            M::ReadFile => Value::String(read_text(ws, path).await?),
            M::WriteFile => {
                if let Some(expected) = args.get("expectedVersion").and_then(Value::as_str) {
                    ws.check_version(path, expected).await.map_err(|e| match e {
                        StaleWrite::Fs(e) => fs(e),
                        other => ConnectorError::Failed(other.to_string()),
                    })?;
                }
                ws.write_file(path, arg(&args, "content"), "text/plain").await.map_err(fs)?;
                Value::Null
            }
            M::AppendFile => {
                ws.append_file(path, arg(&args, "content"), "text/plain").await.map_err(fs)?;
                Value::Null
            }
            M::ReadJson => {
                let text = read_text(ws, path).await?;
                serde_json::from_str(&text)
                    .map_err(|e| ConnectorError::Failed(format!("{path} is not JSON: {e}")))?
            }
            M::WriteJson => {
                // As Think's `stringifyJsonFileContent`: a trailing newline.
                let spaces = args["options"]["spaces"].as_u64().unwrap_or(2) as usize;
                let text = pretty(&args["value"], spaces) + "\n";
                ws.write_file(path, &text, "application/json").await.map_err(fs)?;
                Value::Null
            }
            M::QueryJson => {
                let text = read_text(ws, path).await?;
                let value: Value = serde_json::from_str(&text)
                    .map_err(|e| ConnectorError::Failed(format!("{path} is not JSON: {e}")))?;
                query_json(&value, arg(&args, "query")).cloned().unwrap_or(Value::Null)
            }
            M::Exists => Value::Bool(ws.exists(path).map_err(fs)?),
            M::Stat => serde_json::to_value(ws.stat(path).map_err(fs)?).unwrap_or(Value::Null),
            M::Lstat => serde_json::to_value(ws.lstat(path).map_err(fs)?).unwrap_or(Value::Null),
            M::Mkdir => {
                ws.mkdir(path, flag(&args, "recursive")).map_err(fs)?;
                Value::Null
            }
            M::Readdir => {
                let entries = ws.read_dir_brief(path, usize::MAX >> 1, 0).map_err(fs)?;
                entries.into_iter().map(|(name, _, _)| Value::String(name)).collect()
            }
            M::ReaddirWithFileTypes => {
                let entries = ws.read_dir_brief(path, usize::MAX >> 1, 0).map_err(fs)?;
                entries
                    .into_iter()
                    .map(|(name, kind, size)| json!({"name": name, "type": kind.as_str(), "size": size}))
                    .collect()
            }
            M::Glob => {
                let paths = ws.glob_paths(arg(&args, "pattern")).map_err(fs)?;
                paths.into_iter().map(|(p, _)| Value::String(p)).collect()
            }
            M::Find => find(ws, path, &args)?,
            M::SummarizeTree => tree::summarize_tree(ws, path, max_depth(&args))?,
            M::SearchText => {
                let options = args.get("options").cloned().unwrap_or(Value::Null);
                let matcher = text_matcher(arg(&args, "query"), &options)?;
                let text = read_text(ws, path).await?;
                Value::Array(matches_in(&text, &matcher, &options))
            }
            M::SearchFiles => {
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
            M::ReplaceInFile => {
                let text = read_text(ws, path).await?;
                let search = arg(&args, "search");
                if search.is_empty() {
                    return Err(ConnectorError::Failed(
                        "replaceInFile: search must not be empty".into(),
                    ));
                }
                let count = text.matches(search).count();
                if count > 0 {
                    let next = text.replace(search, arg(&args, "replacement"));
                    ws.rewrite_file(path, &next, "text/plain").await.map_err(fs)?;
                }
                json!({"path": path, "replacements": count})
            }
            M::Rm => {
                ws.rm(path, flag(&args, "recursive"), flag(&args, "force")).await.map_err(fs)?;
                Value::Null
            }
            M::RemoveTree => {
                ws.rm(path, true, true).await.map_err(fs)?;
                Value::Null
            }
            M::Cp | M::CopyTree => {
                let recursive = m == M::CopyTree || flag(&args, "recursive");
                ws.cp(arg(&args, "src"), arg(&args, "dest"), recursive).await.map_err(fs)?;
                Value::Null
            }
            M::Mv | M::MoveTree => {
                ws.mv(arg(&args, "src"), arg(&args, "dest")).await.map_err(fs)?;
                Value::Null
            }
            M::Symlink => {
                ws.symlink(arg(&args, "target"), arg(&args, "linkPath")).map_err(fs)?;
                Value::Null
            }
            M::Readlink => Value::String(ws.readlink(path).map_err(fs)?),
            M::Diff => {
                Value::String(ws.diff(arg(&args, "pathA"), arg(&args, "pathB")).await.map_err(fs)?)
            }
            M::DiffContent => {
                Value::String(ws.diff_content(path, arg(&args, "newContent")).await.map_err(fs)?)
            }
            M::ReadFileBytes => {
                use base64::Engine;
                let bytes = ws
                    .read_file_bytes(path)
                    .await
                    .map_err(fs)?
                    .ok_or_else(|| not_found("open", path))?;
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            M::WriteFileBytes => {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(arg(&args, "base64"))
                    .map_err(|e| {
                        ConnectorError::Failed(format!("writeFileBytes: base64 is not valid: {e}"))
                    })?;
                ws.write_file_bytes(path, &bytes, "application/octet-stream").await.map_err(fs)?;
                Value::Null
            }
            M::Realpath => match ws.stat(path).map_err(fs)? {
                Some(info) => Value::String(info.path),
                None => return Err(not_found("realpath", path)),
            },
            M::ResolvePath => {
                let rel = arg(&args, "path");
                let joined = if rel.starts_with('/') {
                    rel.to_owned()
                } else {
                    format!("{}/{rel}", arg(&args, "base"))
                };
                Value::String(crate::workspace::path::lexical(&joined))
            }
            M::ReplaceInFiles => {
                let (search, replacement) = (arg(&args, "search"), arg(&args, "replacement"));
                if search.is_empty() {
                    return Err(ConnectorError::Failed(
                        "replaceInFiles: search must not be empty".into(),
                    ));
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
            M::WalkTree => tree::walk_tree(ws, path, max_depth(&args))?,
            M::PlanEdits => plan_edits(ws, &args["instructions"]).await?,
            M::CreateArchive => {
                let sources: Vec<String> = args["sources"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                    .unwrap_or_default();
                archive::create(ws, path, &sources).await?
            }
            M::ListArchive => archive::list(ws, path).await?,
            M::ExtractArchive => archive::extract(ws, path, arg(&args, "destination")).await?,
            M::CompressFile => {
                archive::compress(ws, path, args.get("destination").and_then(Value::as_str)).await?
            }
            M::DecompressFile => {
                archive::decompress(ws, path, args.get("destination").and_then(Value::as_str))
                    .await?
            }
            M::ApplyEditPlan => {
                let edits = args["plan"]["edits"].as_array().cloned().unwrap_or_default();
                apply_edits(ws, &edits, &args["options"]).await?
            }
            M::ApplyEdits => {
                let edits = args["edits"].as_array().cloned().unwrap_or_default();
                apply_edits(ws, &edits, &args["options"]).await?
            }
            M::DetectFile => {
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
            M::HashFile => {
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
            M::UpdateJson => {
                let before = read_text(ws, path).await?;
                let mut value: Value = serde_json::from_str(&before)
                    .map_err(|e| ConnectorError::Failed(format!("{path} is not JSON: {e}")))?;
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
            Some(sql) if declared(method).is_ok_and(|m| m.kind() == CallKind::Write) => {
                undo::restore(&self.ws, &undo::UndoLog::new(sql.as_ref()), ctx).await
            }
            _ => Ok(false),
        }
    }
}
