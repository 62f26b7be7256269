//! JSON-RPC 2.0 framing for MCP: building requests and notifications, sorting what the
//! server sends into responses, server requests and notifications, and answering the few
//! server requests a tools-only client must handle.

use super::McpError;
use serde_json::{json, Value};

/// The protocol version we ask for; servers answer with the one they will speak.
pub(crate) const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";

/// Versions we can speak. The older two are what legacy HTTP+SSE servers answer with.
pub(crate) const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

pub(crate) fn request(id: i64, method: &str, params: Option<Value>) -> Value {
    match params {
        Some(p) => json!({"jsonrpc": "2.0", "id": id, "method": method, "params": p}),
        None => json!({"jsonrpc": "2.0", "id": id, "method": method}),
    }
}

pub(crate) fn notification(method: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": method})
}

/// The correlation key of a JSON-RPC id: numbers and strings compare by their text, so a
/// server echoing `1` as `"1"` still matches.
pub(crate) fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// One message from the server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Incoming {
    Response { key: String, outcome: Result<Value, McpError> },
    Request { id: Value, method: String, params: Value },
    Notification { method: String },
}

/// Sorts a decoded message; anything that is not JSON-RPC is dropped.
pub(crate) fn classify(msg: &Value) -> Option<Incoming> {
    let obj = msg.as_object()?;
    let method = obj.get("method").and_then(Value::as_str);
    let id = obj.get("id").filter(|v| !v.is_null());
    match (method, id) {
        (Some(m), Some(id)) => Some(Incoming::Request {
            id: id.clone(),
            method: m.to_owned(),
            params: obj.get("params").cloned().unwrap_or(Value::Null),
        }),
        (Some(m), None) => Some(Incoming::Notification { method: m.to_owned() }),
        (None, Some(id)) => {
            let key = id_key(id)?;
            let outcome = if let Some(err) = obj.get("error") {
                Err(McpError::Rpc {
                    code: err.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                    message: err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown error")
                        .to_owned(),
                })
            } else {
                Ok(obj.get("result").cloned().unwrap_or(Value::Null))
            };
            Some(Incoming::Response { key, outcome })
        }
        (None, None) => None,
    }
}

/// Decodes a body or SSE `data` that holds one message or a batch of them.
pub(crate) fn decode(text: &str) -> Vec<Incoming> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => items.iter().filter_map(classify).collect(),
        Ok(v) => classify(&v).into_iter().collect(),
        Err(_) => Vec::new(),
    }
}

/// A successful reply to a server-initiated request.
pub(crate) fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Our reply to a server-initiated request nobody else handles: `ping` is answered,
/// everything else (sampling, roots, elicitation without a handler) is declined.
pub(crate) fn answer(id: &Value, method: &str) -> Value {
    if method == "ping" {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    } else {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method not found: {method}")}})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_sorts_messages() {
        let r = classify(&json!({"jsonrpc":"2.0","id":3,"result":{"a":1}})).unwrap();
        assert_eq!(r, Incoming::Response { key: "3".into(), outcome: Ok(json!({"a":1})) });
        let e =
            classify(&json!({"jsonrpc":"2.0","id":"3","error":{"code":-32602,"message":"bad"}}))
                .unwrap();
        assert_eq!(
            e,
            Incoming::Response {
                key: "3".into(),
                outcome: Err(McpError::Rpc { code: -32602, message: "bad".into() })
            }
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","id":7,"method":"ping"})),
            Some(Incoming::Request { id: json!(7), method: "ping".into(), params: Value::Null })
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})),
            Some(Incoming::Notification { method: "notifications/tools/list_changed".into() })
        );
        assert_eq!(classify(&json!("nope")), None);
        assert_eq!(decode("not json"), vec![]);
        assert_eq!(
            decode(r#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]"#).len(),
            2
        );
    }

    #[test]
    fn answers_ping_and_declines_the_rest() {
        assert_eq!(answer(&json!(1), "ping"), json!({"jsonrpc":"2.0","id":1,"result":{}}));
        assert_eq!(answer(&json!("x"), "sampling/createMessage")["error"]["code"], json!(-32601));
    }
}
