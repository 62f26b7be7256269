//! The optional model-facing pair `mcp_list_resources` / `mcp_read_resource` (off by default:
//! `AgentSpec::mcp_resource_tools`, `THINK_MCP_RESOURCES=true`), so the model can read what
//! connected servers publish as resources. A leaf: the client is reached through
//! [`ResourceAccess`].

use super::McpError;
use crate::tools::{ModelOutput, Tool, ToolContext, ToolDefinition, ToolError};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::rc::{Rc, Weak};

/// What the resource tools need from the client.
#[async_trait(?Send)]
pub(crate) trait ResourceAccess {
    /// The resources the connected servers listed, each with its `serverId`; only those of
    /// `server` when given.
    fn list_resources(&self, server: Option<&str>) -> Vec<Value>;
    /// `resources/read` on `server`.
    async fn read_resource(&self, server: &str, uri: &str) -> Result<Value, McpError>;
}

/// The two tools, bound to a client.
pub(crate) fn tools(client: Weak<dyn ResourceAccess>) -> Vec<crate::tools::ToolRef> {
    vec![
        Rc::new(ListResources {
            definition: ToolDefinition {
                name: "mcp_list_resources".into(),
                description: "List the resources (documents, files, data) that the connected MCP \
                              servers publish. Read one with mcp_read_resource."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"serverId": {"type": "string", "description": "Only this server's resources."}},
                }),
                output_schema: None,
            },
            client: client.clone(),
        }),
        Rc::new(ReadResource {
            definition: ToolDefinition {
                name: "mcp_read_resource".into(),
                description: "Read a resource of a connected MCP server by its serverId and uri \
                              (as mcp_list_resources lists them)."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"serverId": {"type": "string"}, "uri": {"type": "string"}},
                    "required": ["serverId", "uri"],
                }),
                output_schema: None,
            },
            client,
        }),
    ]
}

fn gone() -> ToolError {
    ToolError::Failed("The MCP client has shut down.".into())
}

struct ListResources {
    definition: ToolDefinition,
    client: Weak<dyn ResourceAccess>,
}

#[async_trait(?Send)]
impl Tool for ListResources {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let client = self.client.upgrade().ok_or_else(gone)?;
        let listed = client.list_resources(input["serverId"].as_str());
        let resources: Vec<Value> = listed
            .iter()
            .map(|r| {
                let mut out = json!({"serverId": r["serverId"], "uri": r["uri"]});
                for key in ["name", "title", "description", "mimeType"] {
                    if let Some(v) = r.get(key).filter(|v| !v.is_null()) {
                        out[key] = v.clone();
                    }
                }
                out
            })
            .collect();
        Ok(json!({ "resources": resources }))
    }
}

struct ReadResource {
    definition: ToolDefinition,
    client: Weak<dyn ResourceAccess>,
}

#[async_trait(?Send)]
impl Tool for ReadResource {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let client = self.client.upgrade().ok_or_else(gone)?;
        let (Some(server), Some(uri)) = (input["serverId"].as_str(), input["uri"].as_str()) else {
            return Err(ToolError::Failed("serverId and uri must be strings".into()));
        };
        client.read_resource(server, uri).await.map_err(|e| ToolError::Failed(e.to_string()))
    }

    fn model_output(&self, output: &Value) -> ModelOutput {
        ModelOutput::Text(contents_text(output))
    }
}

/// A `resources/read` result as the model reads it: text contents as they are, binary ones
/// summarised.
pub(crate) fn contents_text(result: &Value) -> String {
    let Some(contents) = result["contents"].as_array() else { return String::new() };
    contents
        .iter()
        .map(|c| match (c["text"].as_str(), c["blob"].as_str()) {
            (Some(text), _) => text.to_owned(),
            (None, Some(blob)) => format!(
                "[{}: {}, {} base64 characters]",
                c["uri"].as_str().unwrap_or_default(),
                c["mimeType"].as_str().unwrap_or("binary"),
                blob.len()
            ),
            (None, None) => format!("[{}]", c["uri"].as_str().unwrap_or_default()),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_become_text_and_blobs_are_summarised() {
        let r = json!({"contents": [
            {"uri": "a", "text": "alpha"},
            {"uri": "b", "mimeType": "image/png", "blob": "AAAA"},
            {"uri": "c"}
        ]});
        assert_eq!(contents_text(&r), "alpha\n[b: image/png, 4 base64 characters]\n[c]");
        assert_eq!(contents_text(&json!({})), "");
    }
}
