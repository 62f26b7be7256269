//! Elicitation (MCP `elicitation/create`, form mode): a server asks the user for input in the
//! middle of a request. The request waits here as a pending input, persisted and pushed to
//! every tab as `cf_agent_mcp_elicitation` with the requested schema; a tab answers with
//! `cf_agent_mcp_elicitation_response {id, action, content?}`, the content is validated against
//! the schema, and the server gets `{action: "accept", content}`, `{action: "decline"}` or
//! `{action: "cancel"}`. Nobody answering within the timeout is a `cancel` (the user dismissed
//! it, in the spec's terms). A pending input outlives a restart: it is shown again, and its
//! answer is posted into the server's session it came from.

use crate::store::{Sql, SqlValue, StoreError};
use crate::tools::schema::InputValidator;
use futures::channel::oneshot;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

const SCHEMA: &[&str] = &["CREATE TABLE IF NOT EXISTS think_mcp_elicitations (
    id TEXT PRIMARY KEY NOT NULL,
    record TEXT NOT NULL
)"];

/// One pending input, as stored and as the tabs see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Pending {
    pub id: String,
    pub server_id: String,
    pub server_name: String,
    pub message: String,
    pub requested_schema: Value,
    pub created_at: f64,
    pub expires_at: f64,
    /// The server's JSON-RPC request id, to answer it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub request_id: Option<Value>,
    /// The Streamable HTTP session (id, protocol version) the request came in, for answering
    /// it after a restart.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session: Option<(String, String)>,
}

impl Pending {
    /// The `cf_agent_mcp_elicitation` frame.
    pub fn frame(&self) -> String {
        json!({
            "type": "cf_agent_mcp_elicitation",
            "id": self.id,
            "serverId": self.server_id,
            "serverName": self.server_name,
            "message": self.message,
            "requestedSchema": self.requested_schema,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
        })
        .to_string()
    }
}

/// The `cf_agent_mcp_elicitation_resolved` frame: the input is answered (or timed out) and
/// its form can go.
pub(crate) fn resolved_frame(id: &str, action: &str) -> String {
    json!({"type": "cf_agent_mcp_elicitation_resolved", "id": id, "action": action}).to_string()
}

/// Checks a requested schema is what form elicitation allows: an object of primitive
/// properties (string, number, integer, boolean, or enums of strings), that compiles.
pub(crate) fn check_schema(schema: &Value) -> Result<(), String> {
    if schema["type"] != "object" {
        return Err("requestedSchema must be an object schema".into());
    }
    let props = schema["properties"].as_object().cloned().unwrap_or_default();
    for (name, p) in &props {
        let kind = p["type"].as_str().unwrap_or_default();
        if !matches!(kind, "string" | "number" | "integer" | "boolean") {
            return Err(format!("property {name} is not a string, number, integer or boolean"));
        }
    }
    InputValidator::cached(schema).map(drop).map_err(|e| e.to_string())
}

/// A person's answer, checked: `accept` needs content valid against the schema; `decline`
/// and `cancel` carry none. Returns the `ElicitResult`.
pub(crate) fn answer(
    schema: &Value,
    action: &str,
    content: Option<&Value>,
) -> Result<Value, String> {
    match action {
        "accept" => {
            let content =
                content.filter(|c| c.is_object()).ok_or("accept needs content, an object")?;
            let validator = InputValidator::cached(schema).map_err(|e| e.to_string())?;
            validator.validate(content).map_err(|e| e.to_string())?;
            Ok(json!({"action": "accept", "content": content}))
        }
        "decline" | "cancel" => Ok(json!({ "action": action })),
        other => Err(format!("unknown action {other:?} (use accept, decline or cancel)")),
    }
}

/// A pending input with, while its request is still waiting in this process, the way to
/// resume it.
pub(crate) struct Waiting {
    pub pending: Pending,
    pub reply: Option<oneshot::Sender<Value>>,
}

pub(crate) fn init(sql: &dyn Sql) -> Result<(), StoreError> {
    crate::store::create_tables(sql, SCHEMA)
}

pub(crate) fn load(sql: &dyn Sql) -> Result<Vec<Pending>, StoreError> {
    let rows = sql.exec("SELECT record FROM think_mcp_elicitations ORDER BY rowid", &[])?;
    Ok(rows
        .into_iter()
        .filter_map(|r| serde_json::from_str(r.first().and_then(SqlValue::as_str)?).ok())
        .collect())
}

pub(crate) fn save(sql: &dyn Sql, p: &Pending) -> Result<(), StoreError> {
    let record = serde_json::to_string(p).unwrap_or_default();
    sql.exec(
        "INSERT OR REPLACE INTO think_mcp_elicitations (id, record) VALUES (?, ?)",
        &[p.id.as_str().into(), record.into()],
    )?;
    Ok(())
}

pub(crate) fn delete(sql: &dyn Sql, id: &str) -> Result<(), StoreError> {
    sql.exec("DELETE FROM think_mcp_elicitations WHERE id = ?", &[id.into()])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_and_answers_are_checked() {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}}, "required": ["name"]});
        assert!(check_schema(&schema).is_ok());
        assert!(check_schema(&json!({"type": "string"})).is_err());
        assert!(check_schema(&json!({"type": "object", "properties": {"x": {"type": "object"}}}))
            .is_err());
        assert_eq!(
            answer(&schema, "accept", Some(&json!({"name": "Ada", "age": 36}))),
            Ok(json!({"action": "accept", "content": {"name": "Ada", "age": 36}}))
        );
        assert!(answer(&schema, "accept", Some(&json!({"age": 36}))).unwrap_err().contains("name"));
        assert!(answer(&schema, "accept", Some(&json!({"name": "Ada", "age": -1}))).is_err());
        assert!(answer(&schema, "accept", None).is_err());
        assert_eq!(answer(&schema, "decline", None), Ok(json!({"action": "decline"})));
        assert_eq!(answer(&schema, "cancel", Some(&json!({}))), Ok(json!({"action": "cancel"})));
        assert!(answer(&schema, "maybe", None).is_err());
    }
}
