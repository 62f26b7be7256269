//! The workspace tools: read, write, edit, list, find, grep and delete (and bash).
//!
//! `read`, `write`, `list`, `find`, `grep` and `delete` reproduce Think 0.16's tools: the
//! same descriptions, input schemas, output keys in the same order, and the same strings.
//! `edit` keeps Think's inputs and outputs but matches more robustly (its matcher's cascade
//! is documented in `edit/matcher.rs`).
//! Each tool is built over an operations trait from [`ops`], which [`Workspace`] implements.

pub mod bash;
mod delete;
mod edit;
mod find;
pub(crate) mod grep;
mod list;
pub(crate) mod media;
pub mod ops;
mod read;
mod scan;
mod write;

#[cfg(test)]
mod bounds;
#[cfg(test)]
mod recall_tests;
#[cfg(test)]
pub(crate) mod tests;

pub use delete::delete_tool;
pub use edit::edit_tool;
pub use find::find_tool;
pub use grep::grep_tool;
pub use list::list_tool;
pub use read::read_tool;
pub use write::write_tool;

use super::{ModelOutput, Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use crate::workspace::{Errno, FsError, Workspace};
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::rc::Rc;

/// Options for [`workspace_tools`].
#[derive(Clone)]
pub struct WorkspaceToolsOptions {
    /// Whether the set includes `bash` (Think's default: true). It also needs an engine.
    pub bash: bool,
    /// The bash tool's limits.
    pub bash_options: bash::BashOptions,
    /// Runs the scripts (just-bash in the Worker). Without one there is no bash tool, so the
    /// file tools stay usable where no engine exists.
    pub bash_engine: Option<Rc<dyn bash::BashEngine>>,
}

impl Default for WorkspaceToolsOptions {
    fn default() -> Self {
        Self { bash: true, bash_options: bash::BashOptions::default(), bash_engine: None }
    }
}

/// Think's `createWorkspaceTools`: the file tools over one workspace, in Think's order
/// (read, write, edit, list, find, grep, delete), then `bash` when enabled with an engine.
pub fn workspace_tools(ws: Rc<Workspace>, options: WorkspaceToolsOptions) -> Vec<ToolRef> {
    let mut tools = vec![
        read_tool(ws.clone()),
        write_tool(ws.clone()),
        edit_tool(ws.clone()),
        list_tool(ws.clone()),
        find_tool(ws.clone()),
        grep_tool(ws.clone()),
        delete_tool(ws.clone()),
    ];
    if let (true, Some(engine)) = (options.bash, options.bash_engine) {
        tools.push(bash::bash_tool(ws, engine, options.bash_options));
    }
    tools
}

/// What sets one file tool apart: its name, description, schema, input and what it does
/// over its operations trait. [`FileTool`] supplies the rest of [`Tool`].
#[async_trait(?Send)]
trait FileToolKind: 'static {
    /// The operations trait (object) the tool runs on.
    type Ops: ?Sized + 'static;
    /// The input, deserialized after schema validation.
    type Input: DeserializeOwned;
    /// The tool's name, as the model calls it.
    const NAME: &'static str;
    /// Think's description, word for word.
    const DESCRIPTION: &'static str;
    /// Think's input schema, as the AI SDK serializes it.
    fn schema() -> Value;
    /// Runs one call.
    async fn run(ops: &Self::Ops, input: Self::Input) -> Result<Value, ToolError>;
    /// The model's view of an output (JSON unless the tool says otherwise).
    fn model_output(output: &Value) -> ModelOutput {
        ModelOutput::Json(output.clone())
    }
}

/// A file tool over its operations.
struct FileTool<K: FileToolKind> {
    def: ToolDefinition,
    ops: Rc<K::Ops>,
}

/// The tool `K` over `ops`.
fn file_tool<K: FileToolKind>(ops: Rc<K::Ops>) -> ToolRef {
    Rc::new(FileTool::<K> { def: ToolDefinition::new(K::NAME, K::DESCRIPTION, K::schema()), ops })
}

#[async_trait(?Send)]
impl<K: FileToolKind> Tool for FileTool<K> {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        K::run(&self.ops, parse_input(K::NAME, input)?).await
    }

    fn model_output(&self, output: &Value) -> ModelOutput {
        K::model_output(output)
    }
}

/// Deserializes validated input, reporting a mismatch as the tool's error.
fn parse_input<T: DeserializeOwned>(tool: &str, input: Value) -> Result<T, ToolError> {
    serde_json::from_value(input)
        .map_err(|e| ToolError::InvalidInput { tool: tool.to_owned(), reason: e.to_string() })
}

/// The optional `expectedVersion` property that `write` and `edit` add to Think's schemas
/// (versioned writes): one definition, so both tools describe it alike.
pub(crate) fn expected_version_property() -> serde_json::Value {
    serde_json::json!({
        "type": "string",
        "description": "The version `read` reported; the call is refused if the file changed since"
    })
}

/// A thrown error in Think becomes the tool's error text. Where the tools meet them, the
/// errors are worded as Think's `Workspace` words them; the rest keep the filesystem's
/// Node-style text (`ENOENT: no such file or directory, open '/x'`).
pub(crate) fn fs_error_text(e: &FsError) -> String {
    let FsError::Posix { errno, syscall, path } = e else { return e.to_string() };
    let root = crate::workspace::path::normalize(path, syscall).is_ok_and(|p| p == "/");
    match (errno, *syscall) {
        (Errno::NotEmpty, "rm") => format!("ENOTEMPTY: directory not empty: {path}"),
        (Errno::Perm, "rm") if root => "EPERM: cannot remove root directory".into(),
        (Errno::IsDir, "open") if root => "EISDIR: cannot write to root directory".into(),
        (Errno::IsDir, "open" | "read") => format!("EISDIR: {path} is a directory"),
        (Errno::NameTooLong, _) => {
            format!(
                "ENAMETOOLONG: path exceeds {} characters",
                crate::workspace::path::MAX_PATH_LENGTH
            )
        }
        _ => e.to_string(),
    }
}

/// `{ "error": msg }`, the shape Think returns for failures the model should read.
fn error_output(msg: impl Into<String>) -> Value {
    serde_json::json!({ "error": msg.into() })
}

/// A refused stale write as the tool's error output; a storage failure stays a tool error.
fn stale_output(stale: crate::workspace::StaleWrite) -> Result<Value, crate::tools::ToolError> {
    match stale {
        crate::workspace::StaleWrite::Fs(e) => Err(e.into()),
        other => Ok(error_output(other.to_string())),
    }
}

/// Number of lines as Think counts them (`split("\n").length`).
fn line_count(s: &str) -> usize {
    bytecount::count(s.as_bytes(), b'\n') + 1
}

/// An optional JSON integer that may arrive as `3` or `3.0`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Int(u64);

impl<'de> serde::Deserialize<'de> for Int {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = f64::deserialize(d)?;
        if f.fract() != 0.0 || f < 0.0 || !f.is_finite() {
            return Err(serde::de::Error::custom(format!(
                "expected a non-negative integer, got {f}"
            )));
        }
        Ok(Int(f as u64))
    }
}
