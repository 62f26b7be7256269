//! The `bash` tool: runs a script in just-bash (a simulated bash in JavaScript) over a copy
//! of the workspace, then writes the changes back. Think's behaviour (`createBashTool` in
//! `@cloudflare/think` 0.16 `tools/workspace.js`), with just-bash 3.4.2.
//!
//! Rust owns every decision: which files are mounted (`snapshot.rs`), what may be written or
//! deleted and in which order (`writeback.rs`), and the output (`output.rs`). The engine that
//! runs the script is behind [`BashEngine`]; in the Worker it is `js/bash/bridge.mjs`.
//! The workspace is behind [`BashFs`], a small adapter over the `Workspace`.

use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use crate::workspace::FsError;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::rc::Rc;

mod engine;
pub(crate) mod output;
mod paths;
mod snapshot;
mod workspace_fs;
mod writeback;

pub use engine::{BashEngine, EngineRequest, EngineResponse, FinalEntry, FinalKind};
pub use output::{BashOutput, TIMEOUT_EXIT_CODE};
pub(crate) use snapshot::{take_snapshot, Snapshot};
use writeback::{apply_write_back, plan_write_back};
pub use writeback::{ChangedFiles, EXCLUDED_ROOTS};

/// Think's description of the tool, word for word.
pub const DESCRIPTION: &str = "Run a Bash script against the workspace. Use for shell-style workflows that combine multiple file operations. The script runs in a sandboxed virtual filesystem with the workspace mounted at `/` (also the default working directory) — there is no `/workspace` or `/home`; use absolute paths like `/notes.txt`. Changed files are written back to the workspace.";

/// Think's defaults (`DEFAULT_BASH_*` in `tools/workspace.js`).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Files mounted at most (Think's `maxWorkspaceFiles`).
pub const DEFAULT_MAX_WORKSPACE_FILES: usize = 1_000;
/// Largest file mounted, in bytes (Think's `maxWorkspaceFileBytes`).
pub const DEFAULT_MAX_WORKSPACE_FILE_BYTES: u64 = 1_000_000;
/// stdout and stderr are each cut to this many bytes (Think's `maxOutputBytes`).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64_000;

/// Limits of the tool, configured like Think's `workspaceBash: {timeout, network,
/// maxWorkspaceFiles, maxWorkspaceFileBytes, maxOutputBytes}` (missing keys take defaults).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct BashOptions {
    /// Wall time after which the script is aborted (exit code 124).
    #[serde(rename = "timeout")]
    pub timeout_ms: u64,
    /// Registers `curl` (with an empty allow-list, as Think does).
    pub network: bool,
    /// Files beyond this count (in walk order) are not mounted.
    pub max_workspace_files: usize,
    /// Files larger than this are not mounted.
    pub max_workspace_file_bytes: u64,
    /// stdout and stderr are each cut to this many UTF-8 bytes.
    pub max_output_bytes: usize,
}

impl BashOptions {
    /// Reads a setting written like Think's `workspaceBash`: `true`/`false`, or a JSON object
    /// of options (`{"timeout": 5000, "network": true}`); empty means the default. `None`
    /// turns the tool off.
    pub fn from_setting(setting: &str) -> Result<Option<Self>, BashSettingError> {
        match setting.trim() {
            "" | "true" => Ok(Some(Self::default())),
            "false" => Ok(None),
            json => serde_json::from_str(json)
                .map(Some)
                .map_err(|e| BashSettingError { reason: e.to_string() }),
        }
    }
}

/// A `THINK_BASH`-style setting that is neither `true`, `false` nor a JSON object of
/// [`BashOptions`].
#[derive(Debug, Clone, PartialEq)]
pub struct BashSettingError {
    /// Why the JSON did not parse as options (serde's words: an unknown field, a wrong type).
    pub reason: String,
}

impl std::fmt::Display for BashSettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "expected true, false or a JSON object of bash options: {}", self.reason)
    }
}

impl std::error::Error for BashSettingError {}

impl Default for BashOptions {
    fn default() -> Self {
        Self {
            timeout_ms: DEFAULT_TIMEOUT_MS,
            network: false,
            max_workspace_files: DEFAULT_MAX_WORKSPACE_FILES,
            max_workspace_file_bytes: DEFAULT_MAX_WORKSPACE_FILE_BYTES,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

/// The tool's input.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BashInput {
    /// The script to run.
    pub script: String,
    /// Defaults to `/`, the workspace root.
    pub cwd: Option<String>,
}

/// Kind of a workspace entry as listed by [`BashFs::read_dir`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file: mounted.
    File,
    /// A directory: walked.
    Directory,
    /// Symlinks and anything else: not mounted.
    Other,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Absolute path.
    pub path: String,
    /// What the entry is.
    pub kind: EntryKind,
    /// Size in bytes (files).
    pub size: u64,
}

/// Why a `bash` call failed outside the script (a failing script is an output, not this).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BashError {
    /// The workspace could not be listed for the snapshot.
    Fs(FsError),
    /// The engine could not run the script (for example the bridge could not start), in
    /// the engine's words.
    Engine(String),
}

impl std::fmt::Display for BashError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BashError::Fs(e) => e.fmt(f),
            BashError::Engine(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for BashError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BashError::Fs(e) => Some(e),
            BashError::Engine(_) => None,
        }
    }
}

impl From<FsError> for BashError {
    fn from(e: FsError) -> Self {
        BashError::Fs(e)
    }
}

/// The workspace operations the tool needs; their errors' text goes into the tool output.
#[async_trait(?Send)]
pub trait BashFs {
    /// Every entry directly inside `dir` (all pages), in the workspace's listing order.
    async fn read_dir(&self, dir: &str) -> Result<Vec<DirEntry>, FsError>;
    /// The file's bytes, or `None` when it cannot be read as a file.
    async fn read_file_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, FsError>;
    /// [`BashFs::read_file_bytes`] of each of `paths`, in order: the snapshot reads a
    /// directory's files at once, which a store can do in fewer round trips.
    async fn read_files_bytes(&self, paths: &[String]) -> Vec<Result<Option<Vec<u8>>, FsError>> {
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            out.push(self.read_file_bytes(path).await);
        }
        out
    }
    /// `mkdir -p`: creates missing parents; an existing directory is not an error.
    async fn mkdir(&self, path: &str) -> Result<(), FsError>;
    /// Writes the file, creating missing parent directories.
    async fn write_file_bytes(&self, path: &str, bytes: &[u8]) -> Result<(), FsError>;
    /// `rm -f` (with `-r` when `recursive`): a missing path is not an error.
    async fn remove(&self, path: &str, recursive: bool) -> Result<(), FsError>;
}

/// Runs one `bash` tool call: snapshot, run, write back, assemble the output. `Err` only for
/// failures outside the script (the workspace cannot be listed, the engine cannot run).
pub async fn run_bash(
    fs: &dyn BashFs,
    engine: &dyn BashEngine,
    options: &BashOptions,
    input: BashInput,
) -> Result<BashOutput, BashError> {
    let Snapshot { files, baseline, skipped } = take_snapshot(fs, options).await?;
    let request = EngineRequest {
        files,
        dirs: baseline.dirs.iter().cloned().collect(),
        script: input.script,
        cwd: paths::normalize_workspace_path(input.cwd.as_deref().unwrap_or("/")),
        timeout_ms: options.timeout_ms,
        network: options.network,
        exclude_roots: EXCLUDED_ROOTS.iter().map(|r| (*r).to_owned()).collect(),
    };
    let mut response = engine.run(request).await?;
    let plan = plan_write_back(&baseline, std::mem::take(&mut response.entries));
    let (changed, errors) = apply_write_back(fs, plan).await;
    Ok(output::assemble_output(&response, changed, skipped, errors, options.max_output_bytes))
}

/// The `bash` tool over `fs` (usually the agent's `Workspace`), running scripts in `engine`.
pub fn bash_tool(fs: Rc<dyn BashFs>, engine: Rc<dyn BashEngine>, options: BashOptions) -> ToolRef {
    // Think's Zod schema as the AI SDK serializes it.
    let schema = json!({
        "type": "object",
        "properties": {
            "script": {"type": "string", "description": "Bash script to run"},
            "cwd": {"description": "Working directory for the script. Defaults to / (the workspace root)", "type": "string"}
        },
        "required": ["script"],
        "additionalProperties": false
    });
    Rc::new(BashTool { def: ToolDefinition::new("bash", DESCRIPTION, schema), fs, engine, options })
}

struct BashTool {
    def: ToolDefinition,
    fs: Rc<dyn BashFs>,
    engine: Rc<dyn BashEngine>,
    options: BashOptions,
}

#[async_trait(?Send)]
impl Tool for BashTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let input: BashInput = serde_json::from_value(input).map_err(|e| {
            ToolError::InvalidInput { tool: "bash".to_owned(), reason: e.to_string() }
        })?;
        let output = run_bash(self.fs.as_ref(), self.engine.as_ref(), &self.options, input)
            .await
            .map_err(ToolError::Bash)?;
        serde_json::to_value(output).map_err(|e| ToolError::Output(e.to_string()))
    }

    fn runs_code(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
