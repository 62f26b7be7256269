//! Persistence of the server list and of the pinned tool definitions in the agent's SQLite,
//! so servers reconnect when the object starts and a changed tool stays held back across
//! restarts. The server table keeps the reference's name and columns.

use super::oauth::AuthRecord;
use super::transport::TransportKind;
use crate::store::{Sql, SqlValue, StoreError};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS cf_agents_mcp_servers (
        id TEXT PRIMARY KEY NOT NULL,
        name TEXT NOT NULL,
        server_url TEXT NOT NULL,
        callback_url TEXT NOT NULL,
        client_id TEXT,
        auth_url TEXT,
        server_options TEXT
    )",
    "CREATE TABLE IF NOT EXISTS think_mcp_oauth (
        server_id TEXT PRIMARY KEY NOT NULL,
        record TEXT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS think_mcp_tool_pins (
        server_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        description TEXT NOT NULL,
        input_schema TEXT NOT NULL,
        PRIMARY KEY (server_id, tool_name)
    )",
];

/// A registered server as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerRow {
    pub id: String,
    pub name: String,
    pub url: String,
    pub transport: TransportKind,
    pub headers: Vec<(String, String)>,
    /// The last Streamable HTTP session, so a woken object resumes it instead of
    /// initialising again (the reference persists it too).
    pub session: Option<SavedSession>,
    /// Where the authorization server sends the user back (`/agents/<class>/<name>/callback`),
    /// when known; only servers that ask for OAuth use it.
    pub callback_url: Option<String>,
}

impl ServerRow {
    /// Whether two rows describe the same server configuration, whatever their sessions.
    pub fn same_config(&self, other: &ServerRow) -> bool {
        self.id == other.id
            && self.name == other.name
            && self.url == other.url
            && self.transport == other.transport
            && self.headers == other.headers
            && self.callback_url == other.callback_url
    }
}

/// What `initialize` established, enough to carry on without repeating it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SavedSession {
    pub session_id: String,
    pub protocol_version: String,
    pub capabilities: Value,
    pub instructions: Option<String>,
}

impl SavedSession {
    fn to_json(&self) -> Value {
        json!({
            "id": self.session_id,
            "protocolVersion": self.protocol_version,
            "capabilities": self.capabilities,
            "instructions": self.instructions,
        })
    }

    fn from_json(v: &Value) -> Option<SavedSession> {
        Some(SavedSession {
            session_id: v["id"].as_str()?.to_owned(),
            protocol_version: v["protocolVersion"].as_str()?.to_owned(),
            capabilities: v.get("capabilities").filter(|c| c.is_object()).cloned()?,
            instructions: v["instructions"].as_str().map(str::to_owned),
        })
    }
}

/// The accepted definition of one tool: what the model was shown when it was first seen or
/// last accepted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pin {
    pub description: String,
    pub input_schema: Value,
}

pub(crate) fn init(sql: &dyn Sql) -> Result<(), StoreError> {
    crate::store::create_tables(sql, SCHEMA)
}

fn text(v: Option<&SqlValue>) -> Option<String> {
    v.and_then(SqlValue::as_str).map(str::to_owned)
}

/// Every server, in the order they were added. Unreadable rows are skipped.
pub(crate) fn load_servers(sql: &dyn Sql) -> Result<Vec<ServerRow>, StoreError> {
    let rows = sql.exec(
        "SELECT id, name, server_url, server_options, callback_url FROM cf_agents_mcp_servers ORDER BY rowid",
        &[],
    )?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let options: Value =
                text(r.get(3)).and_then(|s| serde_json::from_str(&s).ok()).unwrap_or(Value::Null);
            let transport = &options["transport"];
            let headers = transport["headers"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default();
            Some(ServerRow {
                id: text(r.first())?,
                name: text(r.get(1))?,
                url: text(r.get(2))?,
                transport: transport["type"]
                    .as_str()
                    .and_then(TransportKind::parse)
                    .unwrap_or_default(),
                headers,
                session: SavedSession::from_json(&options["session"]),
                callback_url: text(r.get(4)).filter(|s| !s.is_empty()),
            })
        })
        .collect())
}

/// Inserts or updates a server, keeping its place in the order.
pub(crate) fn save_server(sql: &dyn Sql, row: &ServerRow) -> Result<(), StoreError> {
    let headers: Map<String, Value> =
        row.headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let mut options = json!({"transport": {"type": row.transport.as_str(), "headers": headers}});
    if let Some(session) = &row.session {
        options["session"] = session.to_json();
    }
    sql.exec(
        "INSERT INTO cf_agents_mcp_servers (id, name, server_url, callback_url, client_id, auth_url, server_options)
         VALUES (?, ?, ?, ?, NULL, NULL, ?)
         ON CONFLICT(id) DO UPDATE SET name = excluded.name, server_url = excluded.server_url,
             callback_url = excluded.callback_url, server_options = excluded.server_options",
        &[
            row.id.as_str().into(),
            row.name.as_str().into(),
            row.url.as_str().into(),
            row.callback_url.as_deref().unwrap_or("").into(),
            options.to_string().into(),
        ],
    )?;
    Ok(())
}

/// Forgets a server and its pins together.
pub(crate) fn delete_server(sql: &dyn Sql, id: &str) -> Result<(), StoreError> {
    sql.transaction(&mut || {
        sql.exec("DELETE FROM cf_agents_mcp_servers WHERE id = ?", &[id.into()])?;
        sql.exec("DELETE FROM think_mcp_tool_pins WHERE server_id = ?", &[id.into()])?;
        sql.exec("DELETE FROM think_mcp_oauth WHERE server_id = ?", &[id.into()])?;
        Ok(())
    })
}

/// The OAuth records by server id. Unreadable records are skipped (the server then asks for
/// authorization again).
pub(crate) fn load_auth(sql: &dyn Sql) -> Result<HashMap<String, AuthRecord>, StoreError> {
    let rows = sql.exec("SELECT server_id, record FROM think_mcp_oauth", &[])?;
    Ok(rows
        .into_iter()
        .filter_map(|r| Some((text(r.first())?, serde_json::from_str(&text(r.get(1))?).ok()?)))
        .collect())
}

/// Stores a server's OAuth record (registration, tokens, pending authorization), or forgets
/// it when `None`.
pub(crate) fn save_auth(
    sql: &dyn Sql,
    server_id: &str,
    record: Option<&AuthRecord>,
) -> Result<(), StoreError> {
    match record {
        Some(r) => {
            let json = serde_json::to_string(r).unwrap_or_default();
            sql.exec(
                "INSERT INTO think_mcp_oauth (server_id, record) VALUES (?, ?)
                 ON CONFLICT(server_id) DO UPDATE SET record = excluded.record",
                &[server_id.into(), json.into()],
            )?;
        }
        None => {
            sql.exec("DELETE FROM think_mcp_oauth WHERE server_id = ?", &[server_id.into()])?;
        }
    }
    Ok(())
}

/// Pins by server id, then tool name.
pub(crate) fn load_pins(
    sql: &dyn Sql,
) -> Result<HashMap<String, BTreeMap<String, Pin>>, StoreError> {
    let rows = sql.exec(
        "SELECT server_id, tool_name, description, input_schema FROM think_mcp_tool_pins",
        &[],
    )?;
    let mut out: HashMap<String, BTreeMap<String, Pin>> = HashMap::new();
    for r in rows {
        let (Some(server), Some(tool), Some(description), Some(schema)) =
            (text(r.first()), text(r.get(1)), text(r.get(2)), text(r.get(3)))
        else {
            continue;
        };
        let Ok(input_schema) = serde_json::from_str(&schema) else { continue };
        out.entry(server).or_default().insert(tool, Pin { description, input_schema });
    }
    Ok(out)
}

pub(crate) fn save_pins(
    sql: &dyn Sql,
    server_id: &str,
    pins: &[(&str, &Pin)],
) -> Result<(), StoreError> {
    if pins.is_empty() {
        return Ok(());
    }
    sql.transaction(&mut || {
        for (tool, pin) in pins {
            sql.exec(
                "INSERT INTO think_mcp_tool_pins (server_id, tool_name, description, input_schema) VALUES (?, ?, ?, ?)
                 ON CONFLICT(server_id, tool_name) DO UPDATE SET description = excluded.description,
                     input_schema = excluded.input_schema",
                &[
                    server_id.into(),
                    (*tool).into(),
                    pin.description.as_str().into(),
                    pin.input_schema.to_string().into(),
                ],
            )?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteSql;

    #[test]
    fn servers_and_pins_round_trip_in_order() {
        let sql = SqliteSql::new();
        init(&sql).unwrap();
        init(&sql).unwrap();
        let a = ServerRow {
            id: "a".into(),
            name: "A".into(),
            url: "https://a.example/mcp".into(),
            transport: TransportKind::Sse,
            headers: vec![("Authorization".into(), "Bearer t".into())],
            session: None,
            callback_url: Some("https://agent.example/agents/think-agent/a/callback".into()),
        };
        let b = ServerRow {
            id: "b".into(),
            transport: TransportKind::Auto,
            headers: vec![],
            callback_url: None,
            session: Some(SavedSession {
                session_id: "s-1".into(),
                protocol_version: "2025-11-25".into(),
                capabilities: json!({"tools": {}}),
                instructions: None,
            }),
            ..a.clone()
        };
        assert!(a.same_config(&ServerRow { session: b.session.clone(), ..a.clone() }));
        assert!(!a.same_config(&b));
        save_server(&sql, &a).unwrap();
        save_server(&sql, &b).unwrap();
        let renamed = ServerRow { name: "A2".into(), ..a.clone() };
        save_server(&sql, &renamed).unwrap();
        assert_eq!(load_servers(&sql).unwrap(), vec![renamed, b]);

        let pin = Pin { description: "d".into(), input_schema: json!({"type": "object"}) };
        save_pins(&sql, "a", &[("t1", &pin), ("t2", &pin)]).unwrap();
        save_pins(&sql, "b", &[("t1", &pin)]).unwrap();
        let changed = Pin { description: "d2".into(), ..pin.clone() };
        save_pins(&sql, "a", &[("t1", &changed)]).unwrap();
        let pins = load_pins(&sql).unwrap();
        assert_eq!(pins["a"]["t1"], changed);
        assert_eq!(pins["a"]["t2"], pin);

        delete_server(&sql, "a").unwrap();
        assert_eq!(load_servers(&sql).unwrap().len(), 1);
        let pins = load_pins(&sql).unwrap();
        assert!(!pins.contains_key("a"));
        assert!(pins.contains_key("b"));
    }
}
