//! What a model sees of a tool. A leaf module (serde only), so the model layer can describe
//! tools without depending on the tool system or the workspace behind it.

use serde::Serialize;
use serde_json::Value;

/// What a model sees of a tool: its name, description and input (and optional output) schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model to decide when to call it.
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
    /// JSON Schema of its output, when the tool declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

impl ToolDefinition {
    /// A definition without an output schema, the usual case.
    pub fn new(name: &str, description: &str, input_schema: Value) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema,
            output_schema: None,
        }
    }
}
