//! MCP tools as `Tool`s: the model-facing name, the definition taken from `tools/list`, and
//! how a `tools/call` result is shown to the model. A leaf: the client is reached only through
//! [`ToolCaller`], which it implements.

use crate::tools::{ModelOutput, Tool, ToolContext, ToolDefinition, ToolError};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::rc::Weak;

/// The model-facing name: `tool_<serverId without dashes>_<toolName>`, as the reference names
/// them, so approval globs written for it keep matching.
pub fn tool_name(server_id: &str, tool: &str) -> String {
    format!("tool_{}_{}", server_id.replace('-', ""), tool)
}

/// The description and input schema a server declares for a tool: what pinning compares.
pub(crate) fn declared(tool: &Value) -> (String, Value) {
    let description =
        tool.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
    let schema = tool
        .get("inputSchema")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"type": "object"}));
    (description, schema)
}

/// Whether a `tools/list` entry declares the tool destructive. Only an explicit
/// `destructiveHint: true` counts (the spec's default of true for tools that are not
/// read-only would put every unannotated tool behind approval); `readOnlyHint: true` wins.
pub(crate) fn is_destructive(tool: &Value) -> bool {
    let hint = |k: &str| tool["annotations"][k].as_bool();
    hint("destructiveHint") == Some(true) && hint("readOnlyHint") != Some(true)
}

/// What an MCP tool needs from the client that listed it.
#[async_trait(?Send)]
pub(crate) trait ToolCaller {
    /// Calls `tool` on the server `server_id`; every failure is a `ToolError` the model reads.
    async fn call_tool(
        &self,
        server_id: &str,
        tool: &str,
        input: Value,
    ) -> Result<Value, ToolError>;
}

/// One remote tool, callable through the client that listed it.
pub(crate) struct McpTool {
    definition: ToolDefinition,
    /// Declared destructive and not exempted by the approval policy.
    needs_approval: bool,
    server_id: String,
    remote_name: String,
    client: Weak<dyn ToolCaller>,
}

impl McpTool {
    /// The tool a `tools/list` entry describes, or `None` when it has no name. A tool
    /// declared destructive needs approval when `destructive_needs_approval(name)` says so.
    pub fn new(
        client: Weak<dyn ToolCaller>,
        server_id: &str,
        tool: &Value,
        destructive_needs_approval: &dyn Fn(&str) -> bool,
    ) -> Option<McpTool> {
        let remote_name = tool.get("name").and_then(Value::as_str)?.to_owned();
        let (description, input_schema) = declared(tool);
        let name = tool_name(server_id, &remote_name);
        Some(McpTool {
            needs_approval: is_destructive(tool) && destructive_needs_approval(&name),
            definition: ToolDefinition {
                name,
                description,
                input_schema,
                output_schema: tool.get("outputSchema").filter(|s| s.is_object()).cloned(),
            },
            server_id: server_id.to_owned(),
            remote_name,
            client,
        })
    }
}

#[async_trait(?Send)]
impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// Returns the `CallToolResult` as the server sent it (the reference persists the same);
    /// `model_output` decides what the model reads.
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let Some(client) = self.client.upgrade() else {
            return Err(ToolError::Failed("The MCP client has shut down.".into()));
        };
        client.call_tool(&self.server_id, &self.remote_name, input).await
    }

    fn needs_approval(&self, _input: &Value) -> bool {
        self.needs_approval
    }

    fn model_output(&self, output: &Value) -> ModelOutput {
        model_output(output)
    }
}

/// Structured content when the server gave it, else the content parts as text.
pub(crate) fn model_output(result: &Value) -> ModelOutput {
    match result.get("structuredContent") {
        Some(v) if !v.is_null() => ModelOutput::Json(v.clone()),
        _ => ModelOutput::Text(content_text(result)),
    }
}

/// The text of a result's content parts, one per line; binary parts are summarised so the
/// model knows they exist without reading base64.
pub(crate) fn content_text(result: &Value) -> String {
    let Some(parts) = result.get("content").and_then(Value::as_array) else { return String::new() };
    parts.iter().map(part_text).collect::<Vec<_>>().join("\n")
}

fn part_text(part: &Value) -> String {
    let s = |k: &str| part.get(k).and_then(Value::as_str).unwrap_or_default();
    match s("type") {
        "text" => s("text").to_owned(),
        kind @ ("image" | "audio") => {
            format!("[{kind}: {}, {} bytes]", or_unknown(s("mimeType")), base64_len(s("data")))
        }
        "resource_link" => format!("[resource link: {}]", s("uri")),
        "resource" => {
            let r = part.get("resource").unwrap_or(&Value::Null);
            let rs = |k: &str| r.get(k).and_then(Value::as_str);
            match (rs("text"), rs("blob")) {
                (Some(text), _) => text.to_owned(),
                (None, Some(blob)) => format!(
                    "[resource: {}, {}, {} bytes]",
                    rs("uri").unwrap_or_default(),
                    or_unknown(rs("mimeType").unwrap_or_default()),
                    base64_len(blob)
                ),
                (None, None) => format!("[resource: {}]", rs("uri").unwrap_or_default()),
            }
        }
        "" => "[content]".to_owned(),
        other => format!("[{other} content]"),
    }
}

fn or_unknown(mime: &str) -> &str {
    if mime.is_empty() {
        "unknown type"
    } else {
        mime
    }
}

/// Decoded size of base64 text without decoding it.
fn base64_len(data: &str) -> usize {
    let n = data.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let pad =
        data.bytes().rev().filter(|b| !b.is_ascii_whitespace()).take_while(|b| *b == b'=').count();
    (n / 4 * 3 + (n % 4).saturating_sub(1)).saturating_sub(pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_destructive_hint_counts() {
        let t = |a: Value| json!({"name": "t", "annotations": a});
        assert!(is_destructive(&t(json!({"destructiveHint": true}))));
        assert!(!is_destructive(&t(json!({"destructiveHint": true, "readOnlyHint": true}))));
        assert!(!is_destructive(&t(json!({"destructiveHint": false}))));
        assert!(!is_destructive(&t(json!({}))));
        assert!(!is_destructive(&json!({"name": "t"})));
    }

    #[test]
    fn names_strip_dashes_from_the_server_id_only() {
        assert_eq!(tool_name("a-b_c", "get-weather"), "tool_ab_c_get-weather");
    }

    #[test]
    fn content_parts_become_text_and_binary_is_summarised() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
            {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "bee"}},
            {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AAECAw==", "mimeType": "application/octet-stream"}},
            {"type": "mystery"}
        ]});
        assert_eq!(
            model_output(&result),
            ModelOutput::Text(
                "hello\n[image: image/png, 5 bytes]\n[audio: audio/wav, 3 bytes]\n[resource link: file:///a.txt]\nbee\n[resource: file:///c.bin, application/octet-stream, 4 bytes]\n[mystery content]".into()
            )
        );
    }

    #[test]
    fn structured_content_wins() {
        let result = json!({"content": [{"type": "text", "text": "{\"t\":1}"}], "structuredContent": {"t": 1}});
        assert_eq!(model_output(&result), ModelOutput::Json(json!({"t": 1})));
        assert_eq!(model_output(&json!({})), ModelOutput::Text(String::new()));
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len(""), 0);
        assert_eq!(base64_len("YQ=="), 1);
        assert_eq!(base64_len("YWI="), 2);
        assert_eq!(base64_len("YWJj"), 3);
        assert_eq!(base64_len("YWJjZA"), 4);
    }
}
