//! The model-facing tools (Think's `createExtensionTools`): `load_extension`, which may need
//! a human's approval for the permissions it asks for, and `list_extensions`.

use std::rc::Rc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::manifest::{Manifest, Permissions, WorkspaceAccess};
use super::{Extensions, LoadApproval};
use crate::tools::{DynamicTool, Tool, ToolContext, ToolDefinition, ToolError, ToolRef};

/// `load_extension`'s description (Think's, with what think-rs enforces).
pub const LOAD_DESCRIPTION: &str = "Load an extension from JavaScript source code. The source is a JS object expression with { tools, hooks }. Each tool has: description, parameters (JSON Schema properties), optional required array, and an async execute function. The execute function receives (args, host) where host provides workspace access (host.readFile, host.writeFile, host.deleteFile, host.listFiles, host.find, host.grep), context access (host.getContext, host.setContext), and message access (host.getMessages), each only as far as the extension's permissions allow. NOTE: `host` exists ONLY inside extension source code passed to this tool — it is NOT a global in the `execute` code sandbox or anywhere else. The extension's fetch reaches only the hosts listed in `network`. Hooks are optional lifecycle functions (beforeTurn, beforeToolCall, afterToolCall, onStepFinish). IMPORTANT: Use only lowercase letters, numbers, and underscores in the extension name. Tool names are prefixed: name 'math' with tool 'add' becomes 'math_add'. New tools become available on the next message turn — call them by their full prefixed name.";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadInput {
    name: String,
    version: String,
    #[serde(default)]
    description: Option<String>,
    source: String,
    #[serde(default)]
    workspace_access: Option<WorkspaceAccess>,
    #[serde(default)]
    network: Option<Vec<String>>,
}

fn load_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Unique name for the extension"},
            "version": {"type": "string", "description": "Semver version (e.g. '1.0.0')"},
            "description": {"type": "string", "description": "Human-readable description"},
            "source": {"type": "string", "description": "JavaScript object expression with { tools, hooks }. Example:\n{\n  tools: {\n    greet: {\n      description: \"Greet someone\",\n      parameters: { name: { type: \"string\" } },\n      required: [\"name\"],\n      execute: async (args) => \"Hello, \" + args.name\n    }\n  }\n}"},
            "workspace_access": {"type": "string", "enum": ["none", "read", "read-write"], "description": "Workspace access level for the extension (default: none)"},
            "network": {"type": "array", "items": {"type": "string"}, "description": "Network hosts the extension needs access to (default: none)"}
        },
        "required": ["name", "version", "source"],
        "additionalProperties": false
    })
}

/// `load_extension`.
pub struct LoadExtensionTool {
    ext: Rc<Extensions>,
    definition: ToolDefinition,
}

impl LoadExtensionTool {
    /// The tool over these extensions.
    pub fn new(ext: Rc<Extensions>) -> Self {
        Self {
            ext,
            definition: ToolDefinition::new("load_extension", LOAD_DESCRIPTION, load_schema()),
        }
    }
}

/// Whether a `load_extension` call with `input` waits for a human under `approval`.
pub fn load_needs_approval(approval: LoadApproval, input: &Value) -> bool {
    match approval {
        LoadApproval::Always => true,
        LoadApproval::Never => false,
        LoadApproval::Permissions => {
            let network =
                input.get("network").and_then(Value::as_array).is_some_and(|n| !n.is_empty());
            network || input.get("workspace_access").and_then(Value::as_str) == Some("read-write")
        }
    }
}

#[async_trait(?Send)]
impl Tool for LoadExtensionTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn needs_approval(&self, input: &Value) -> bool {
        load_needs_approval(self.ext.options().approval, input)
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let input: LoadInput = serde_json::from_value(input).map_err(|e| {
            ToolError::InvalidInput { tool: "load_extension".into(), reason: e.to_string() }
        })?;
        let manifest = Manifest {
            name: input.name.clone(),
            version: input.version,
            description: input.description,
            permissions: Permissions {
                network: input.network.unwrap_or_default(),
                workspace: input.workspace_access.unwrap_or_default(),
                ..Permissions::default()
            },
            context: Vec::new(),
            hooks: Vec::new(),
        };
        let prefix = manifest.prefix();
        let info = self.ext.load(manifest, input.source).await?;
        Ok(json!({
            "loaded": true,
            "name": info.name,
            "prefix": prefix,
            "version": info.version,
            "tools": info.tools,
            "message": format!(
                "Extension \"{}\" loaded. On the NEXT message turn, call these tools by their full name: {}.",
                input.name,
                info.tools.join(", ")
            ),
        }))
    }
}

/// `list_extensions`.
pub fn list_extensions_tool(ext: Rc<Extensions>) -> ToolRef {
    Rc::new(DynamicTool::new(
        "list_extensions",
        "List all currently loaded extensions and their tools.",
        json!({"type": "object", "properties": {}}),
        move |_, _| {
            let ext = ext.clone();
            async move {
                let list = ext.list();
                let extensions: Vec<Value> = list
                    .iter()
                    .map(|e| {
                        json!({
                            "name": e.name, "version": e.version, "description": e.description,
                            "tools": e.tools, "permissions": e.permissions,
                        })
                    })
                    .collect();
                Ok(json!({"count": extensions.len(), "extensions": extensions}))
            }
        },
    ))
}

/// Every extension tool of a turn: the loaded extensions' tools, then (unless the app turned
/// [`super::ExtensionOptions::model_tools`] off) `load_extension` and `list_extensions`.
pub fn turn_tools(ext: &Rc<Extensions>) -> Vec<ToolRef> {
    let mut tools = ext.tools();
    if ext.options().model_tools {
        tools.push(Rc::new(LoadExtensionTool::new(ext.clone())));
        tools.push(list_extensions_tool(ext.clone()));
    }
    tools
}
