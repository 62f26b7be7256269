//! The tool system: the `Tool` trait every tool source implements, typed tools whose JSON
//! Schema is derived from a Rust struct, input validation, and the per-turn merge of tool
//! layers in Think's order (later layers win on a name clash).

use async_trait::async_trait;
use futures::future::LocalBoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::marker::PhantomData;
use std::rc::Rc;

pub mod approval;
pub mod definition;
pub mod schema;
pub mod workspace;

pub use definition::ToolDefinition;

/// An image for the model, as base64 (providers send it inline).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ImagePart {
    /// `image/png`, `image/jpeg`, ...
    pub media_type: String,
    /// The base64 data.
    pub data: String,
}

/// Per-call information handed to `execute`.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    /// The model's id for this call.
    pub tool_call_id: String,
    /// The tool's name as the model called it.
    pub tool_name: String,
}

/// A failed execution. Its text (`Display`) reaches the model as the tool's error
/// (`tool-output-error` on the wire) and the turn goes on; the variant says why, so a caller
/// can tell a missing file from a path outside the workspace or a limit hit.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolError {
    /// The input passed the schema but not the tool's own types.
    InvalidInput {
        /// The tool's name.
        tool: String,
        /// What did not fit, as serde words it.
        reason: String,
    },
    /// A workspace operation failed (not found, a directory, outside the root, too large…);
    /// worded as Think's `Workspace` words it where the tools meet it.
    Fs(crate::workspace::FsError),
    /// A client-side tool was asked to run on the server.
    ClientSide {
        /// The tool's name.
        tool: String,
    },
    /// The tool's output could not be serialized to JSON.
    Output(String),
    /// A `bash` call failed outside its script.
    Bash(workspace::bash::BashError),
    /// Any other failure, already worded for the model (MCP servers, bash, the ledger).
    Failed(String),
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::InvalidInput { tool, reason } => {
                write!(f, "Invalid input for tool \"{tool}\": {reason}")
            }
            ToolError::Fs(e) => f.write_str(&workspace::fs_error_text(e)),
            ToolError::ClientSide { tool } => write!(
                f,
                "Tool \"{tool}\" runs on the client and cannot be executed on the server."
            ),
            ToolError::Output(e) => write!(f, "Tool output is not JSON: {e}"),
            ToolError::Bash(e) => e.fmt(f),
            ToolError::Failed(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for ToolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ToolError::Fs(e) => Some(e),
            ToolError::Bash(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::workspace::FsError> for ToolError {
    fn from(e: crate::workspace::FsError) -> Self {
        ToolError::Fs(e)
    }
}

/// How a tool's output is shown to the model, which may differ from what is persisted
/// (Think's `toModelOutput`): `read` sends file text as plain text, not as JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelOutput {
    /// Plain text (Think's `toModelOutput` `{type: "text"}`).
    Text(String),
    /// The output as JSON.
    Json(Value),
    /// A failure the model reads as an error.
    ErrorText(String),
}

/// Most bytes of one tool output the model is sent; the rest is cut with a note. It sits
/// above Think's own largest output (`read`: 2,000 lines of at most 2,000 characters), so
/// Think-sized outputs pass unchanged, and it keeps a runaway tool (an MCP server, a grep
/// over huge context) from filling the model's context and the stored transcript.
pub const MAX_MODEL_OUTPUT_BYTES: usize = 4 * 1024 * 1024;

impl ModelOutput {
    /// The text form sent to providers whose tool messages carry a string, at most
    /// [`MAX_MODEL_OUTPUT_BYTES`] (plus the cut note).
    pub fn to_text(&self) -> String {
        let text = match self {
            ModelOutput::Text(s) => s.clone(),
            ModelOutput::ErrorText(s) => error_json(s),
            ModelOutput::Json(v) => serde_json::to_string(v).unwrap_or_default(),
        };
        bound_output(text, MAX_MODEL_OUTPUT_BYTES)
    }
}

/// `text` cut at a character boundary to at most `max` bytes, followed by
/// `\n... (<size> truncated)` (the bash tool's note, e.g. `2.0 KB`) when anything was cut.
pub fn bound_output(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let dropped = text.len() - cut;
    text.truncate(cut);
    text.push_str("\n... (");
    workspace::media::push_size(&mut text, dropped as u64);
    text.push_str(" truncated)");
    text
}

/// How a failure reads to the model: `{"error": text}`, as the AI SDK's OpenAI provider
/// sends an `error-text` tool result, so prompts written for Think see the same thing.
pub fn error_json(text: &str) -> String {
    serde_json::json!({ "error": text }).to_string()
}

/// How an exception thrown by a tool reads to the model in Think (`String(error)`).
pub fn thrown_error_json(message: &str) -> String {
    error_json(&format!("Error: {message}"))
}

/// A tool the model can call.
#[async_trait(?Send)]
pub trait Tool {
    /// What the model sees of the tool.
    fn definition(&self) -> &ToolDefinition;

    /// Runs the tool on input that has already been validated against the input schema.
    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError>;

    /// False for tools that run elsewhere (client tools): the turn stops at their call.
    fn executes_on_server(&self) -> bool {
        true
    }

    /// Whether this particular call needs a human's approval before it runs.
    fn needs_approval(&self, _input: &Value) -> bool {
        false
    }

    /// The model's view of a successful output.
    fn model_output(&self, output: &Value) -> ModelOutput {
        ModelOutput::Json(output.clone())
    }

    /// Images the call `tool_call_id` produced for a vision model (a browser screenshot),
    /// handed over once after the call: the output, which the transcript keeps, only
    /// describes them.
    fn take_images(&self, _tool_call_id: &str) -> Vec<ImagePart> {
        Vec::new()
    }

    /// Whether a call runs code the model or an extension wrote (a sandbox isolate, bash). A
    /// restart during such a call is reported to the model as what code that exhausts memory
    /// causes, so that it does not write the same code again.
    fn runs_code(&self) -> bool {
        false
    }
}

/// A shared, dynamically typed tool.
pub type ToolRef = Rc<dyn Tool>;

/// Where a tool comes from. The declaration order is the merge order: a later layer's tool
/// replaces an earlier layer's tool of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// The workspace tools (lowest precedence).
    Workspace,
    /// Tools the agent defines.
    Agent,
    /// Tools of loaded extensions.
    Extension,
    /// Tools of context providers.
    Context,
    /// Tools of skills.
    Skill,
    /// Tools of MCP servers.
    Mcp,
    /// Tools the browser declares (client tools).
    Client,
    /// Tools a `before_turn` hook adds for one turn only; they win over everything.
    Turn,
}

/// The merged tools of one turn, by name.
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: BTreeMap<String, (Layer, ToolRef)>,
    order: Vec<String>,
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `tools` from `layer`. A name already present from an earlier or equal layer is
    /// replaced; one from a later layer is kept, so the result does not depend on call order.
    pub fn add_layer(&mut self, layer: Layer, tools: impl IntoIterator<Item = ToolRef>) {
        for tool in tools {
            let name = tool.definition().name.clone();
            match self.tools.get(&name) {
                Some((existing, _)) if *existing > layer => continue,
                Some(_) => {}
                None => self.order.push(name.clone()),
            }
            self.tools.insert(name, (layer, tool));
        }
    }

    /// The tool of that name, if any.
    pub fn get(&self, name: &str) -> Option<&ToolRef> {
        self.tools.get(name).map(|(_, t)| t)
    }

    /// The layer the named tool came from.
    pub fn layer_of(&self, name: &str) -> Option<Layer> {
        self.tools.get(name).map(|(l, _)| *l)
    }

    /// Tool names in first-seen order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Keeps only the named tools (a `before_turn` hook's `active_tools`).
    pub fn retain_names(&mut self, keep: &[String]) {
        self.order.retain(|n| keep.iter().any(|k| k == n));
        let order = &self.order;
        self.tools.retain(|n, _| order.iter().any(|k| k == n));
    }

    /// Replaces every tool with `f(tool)`, keeping names and layers (for wrappers such as the
    /// execution ledger).
    pub fn map_tools(&mut self, mut f: impl FnMut(ToolRef) -> ToolRef) {
        for (_, (_, tool)) in self.tools.iter_mut() {
            *tool = f(tool.clone());
        }
    }

    /// Definitions in first-seen order, as sent to the model.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.order.iter().filter_map(|n| self.get(n)).map(|t| t.definition().clone()).collect()
    }
}

type DynExecute = dyn Fn(Value, ToolContext) -> LocalBoxFuture<'static, Result<Value, ToolError>>;

/// A tool described by raw JSON Schema, for tools only known at run time (MCP, extensions).
pub struct DynamicTool {
    definition: ToolDefinition,
    execute: Option<Rc<DynExecute>>,
    runs_code: bool,
}

impl DynamicTool {
    /// A tool that runs `execute` on the server.
    pub fn new<F, Fut>(name: &str, description: &str, input_schema: Value, execute: F) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + 'static,
    {
        Self {
            definition: ToolDefinition::new(name, description, input_schema),
            execute: Some(Rc::new(move |v, c| Box::pin(execute(v, c)))),
            runs_code: false,
        }
    }

    /// A tool with no server-side execution: the turn pauses at its call (client tools).
    pub fn without_execute(name: &str, description: &str, input_schema: Value) -> Self {
        Self {
            definition: ToolDefinition::new(name, description, input_schema),
            execute: None,
            runs_code: false,
        }
    }

    /// Marks the tool as running sandboxed code (an extension's tool): see [`Tool::runs_code`].
    pub fn running_code(mut self) -> Self {
        self.runs_code = true;
        self
    }

    /// Declares the output's JSON Schema.
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.definition.output_schema = Some(schema);
        self
    }
}

#[async_trait(?Send)]
impl Tool for DynamicTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        match &self.execute {
            Some(f) => f(input, ctx.clone()).await,
            None => Err(ToolError::ClientSide { tool: self.definition.name.clone() }),
        }
    }

    fn executes_on_server(&self) -> bool {
        self.execute.is_some()
    }

    fn runs_code(&self) -> bool {
        self.runs_code
    }
}

/// A tool whose input is the Rust type `I`: its JSON Schema is derived with `schemars`, and
/// validated input is deserialized into `I` before `execute` runs. The Rust counterpart of a
/// Zod-typed tool in Think.
pub struct TypedTool<I, O, F> {
    definition: ToolDefinition,
    execute: F,
    _types: PhantomData<fn(I) -> O>,
}

/// Builds a [`TypedTool`].
pub fn typed_tool<I, O, F, Fut>(name: &str, description: &str, execute: F) -> TypedTool<I, O, F>
where
    I: schemars::JsonSchema + DeserializeOwned + 'static,
    O: Serialize + 'static,
    F: Fn(I, ToolContext) -> Fut + 'static,
    Fut: Future<Output = Result<O, ToolError>> + 'static,
{
    TypedTool {
        definition: ToolDefinition::new(name, description, schema::schema_for::<I>()),
        execute,
        _types: PhantomData,
    }
}

impl<I, O, F> TypedTool<I, O, F> {
    /// Declares the output's JSON Schema, derived from `T`.
    pub fn with_output_schema<T: schemars::JsonSchema>(mut self) -> Self {
        self.definition.output_schema = Some(schema::schema_for::<T>());
        self
    }
}

#[async_trait(?Send)]
impl<I, O, F, Fut> Tool for TypedTool<I, O, F>
where
    I: schemars::JsonSchema + DeserializeOwned + 'static,
    O: Serialize + 'static,
    F: Fn(I, ToolContext) -> Fut + 'static,
    Fut: Future<Output = Result<O, ToolError>> + 'static,
{
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let typed: I = serde_json::from_value(input).map_err(|e| ToolError::InvalidInput {
            tool: self.definition.name.clone(),
            reason: e.to_string(),
        })?;
        let out = (self.execute)(typed, ctx.clone()).await?;
        serde_json::to_value(out).map_err(|e| ToolError::Output(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str) -> ToolRef {
        Rc::new(DynamicTool::without_execute(name, description, json!({"type": "object"})))
    }

    #[test]
    fn later_layers_win_whatever_the_insertion_order() {
        let mut set = ToolSet::new();
        set.add_layer(Layer::Client, [tool("read", "client")]);
        set.add_layer(Layer::Workspace, [tool("read", "workspace"), tool("write", "workspace")]);
        set.add_layer(Layer::Mcp, [tool("read", "mcp"), tool("tool_x_y", "mcp")]);
        set.add_layer(Layer::Agent, [tool("write", "agent")]);
        assert_eq!(set.get("read").unwrap().definition().description, "client");
        assert_eq!(set.layer_of("read"), Some(Layer::Client));
        assert_eq!(set.get("write").unwrap().definition().description, "agent");
        assert_eq!(set.names().collect::<Vec<_>>(), ["read", "write", "tool_x_y"]);
        let order = [
            Layer::Workspace,
            Layer::Agent,
            Layer::Extension,
            Layer::Context,
            Layer::Skill,
            Layer::Mcp,
            Layer::Client,
            Layer::Turn,
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "Think's merge order");
        set.retain_names(&["write".into()]);
        assert_eq!(set.len(), 1);
        assert!(set.get("read").is_none());
    }
}
