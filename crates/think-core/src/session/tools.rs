//! The context tools (layer 4 of the merge): `set_context`, `load_context`,
//! `unload_context` and `search_context`, each offered only when a block of its kind exists.
//! Their results are plain strings, as in Think; a failure is an `Error: …` string.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{entry_key, BlockKind, Session, SessionError};
use crate::tools::{ModelOutput, Tool, ToolContext, ToolDefinition, ToolError, ToolRef};

/// What the model is sent for unloaded skills: decided where messages are converted for
/// the model (`crate::turn::convert`), below the session.
pub use crate::turn::convert::{unloaded_loads, unloaded_placeholder};

#[derive(Clone, Copy)]
enum Op {
    Set,
    Load,
    Unload,
    Search,
}

/// One context tool over the session.
struct ContextTool {
    op: Op,
    session: Session,
    definition: ToolDefinition,
}

/// The context tools the session's blocks call for (none without blocks).
pub fn context_tools(session: &Session) -> Vec<ToolRef> {
    let mut out: Vec<ToolRef> = Vec::new();
    let blocks = session.blocks();
    let writable: Vec<_> = blocks.iter().filter(|b| b.kind != BlockKind::Readonly).collect();
    let keyed: Vec<String> = writable
        .iter()
        .filter(|b| b.kind != BlockKind::Writable)
        .map(|b| format!("\"{}\"", b.label))
        .collect();
    let skills = session.labels(&[BlockKind::Skill]);
    let searchable = session.labels(&[BlockKind::Searchable]);
    let tool = |op, name: &str, description: String, input_schema: Value| -> ToolRef {
        std::rc::Rc::new(ContextTool {
            op,
            session: session.clone(),
            definition: ToolDefinition {
                name: name.to_owned(),
                description,
                input_schema,
                output_schema: None,
            },
        })
    };
    if !writable.is_empty() {
        let labels: Vec<&str> = writable.iter().map(|b| b.label.as_str()).collect();
        let described: Vec<String> = writable
            .iter()
            .map(|b| {
                let kind = match b.kind {
                    BlockKind::Skill => "skill collection, keyed entries",
                    BlockKind::Searchable => "searchable, keyed entries",
                    _ => "writable",
                };
                let about = b.description.as_deref().unwrap_or("no description");
                format!("- \"{}\" ({kind}): {about}", b.label)
            })
            .collect();
        let mut properties = json!({
            "label": {"type": "string", "enum": labels, "description": "Block label to write to"},
            "content": {"type": "string", "description": "The main content to write to the block."},
            "action": {"type": "string", "enum": ["replace", "append"], "description": "replace (default) or append"}
        });
        let mut hint = "";
        if !keyed.is_empty() {
            properties["metadata"] = json!({
                "type": "object",
                "description": format!("Optional metadata for keyed entries (skill collections, searchable blocks: {}). Short content doesn't need metadata; longer loadable entries (skills) benefit from a title and description so the model can pick the right one without loading it.", keyed.join(", ")),
                "properties": {
                    "title": {"type": "string", "description": "Short title. Used as a stable identifier — entries with the same title are updated in place, different titles create new entries."},
                    "description": {"type": "string", "description": "One-line summary shown alongside the title in the system prompt so the model can decide when to load the entry."}
                }
            });
            hint = "\n\nFor keyed blocks (skill collections / searchable), pass `metadata: { title, description }` — title stabilises updates, description helps the model pick entries. Metadata is optional; short content rarely needs it, long loadable entries benefit most.";
        }
        out.push(tool(
            Op::Set,
            "set_context",
            format!(
                "Write to a context block. Available blocks:\n{}\n\nWrites are durable and persist across sessions.{hint}",
                described.join("\n")
            ),
            json!({"type": "object", "properties": properties, "required": ["label", "content"]}),
        ));
    }
    if !skills.is_empty() {
        let quoted: Vec<String> = skills.iter().map(|l| format!("\"{l}\"")).collect();
        let schema = |what: &str| {
            json!({
                "type": "object",
                "properties": {
                    "label": {"type": "string", "enum": skills, "description": "Skill block label"},
                    "key": {"type": "string", "description": what}
                },
                "required": ["label", "key"]
            })
        };
        out.push(tool(
            Op::Load,
            "load_context",
            format!(
                "Load a document from a skill block by key. Available skill blocks: {}. Check the system prompt for available keys.",
                quoted.join(", ")
            ),
            schema("Skill key to load"),
        ));
        out.push(tool(
            Op::Unload,
            "unload_context",
            unload_description(&session.loaded().unwrap_or_default()),
            schema("Skill key to unload"),
        ));
    }
    if !searchable.is_empty() {
        let quoted: Vec<String> = searchable.iter().map(|l| format!("\"{l}\"")).collect();
        out.push(tool(
            Op::Search,
            "search_context",
            format!(
                "Search for information in a searchable context block. ONLY these blocks are searchable: {}. Other blocks cannot be searched.",
                quoted.join(", ")
            ),
            json!({
                "type": "object",
                "properties": {
                    "label": {"type": "string", "enum": searchable, "description": "Searchable block label"},
                    "query": {"type": "string", "description": "Search query"}
                },
                "required": ["label", "query"]
            }),
        ));
    }
    out
}

/// Think's `unload_context` description, which names what is loaded (`label:key`).
fn unload_description(loaded: &[String]) -> String {
    let base = "Unload a previously loaded skill to free context space. The skill remains available for re-loading.";
    if loaded.is_empty() {
        format!("{base} No skills currently loaded.")
    } else {
        format!("{base} Currently loaded: {}.", loaded.join(", "))
    }
}

fn text(input: &Value, field: &str) -> String {
    input.get(field).and_then(Value::as_str).unwrap_or("").to_owned()
}

impl ContextTool {
    /// Refuses a label that is not a block of `kind`, naming those that are (Think's check
    /// before `load_context`, `unload_context` and `search_context` run).
    fn offered(&self, label: &str, kind: BlockKind) -> Result<(), SessionError> {
        let offered = self.session.labels(&[kind]);
        if offered.iter().any(|l| l == label) {
            return Ok(());
        }
        Err(SessionError::NotOffered { label: label.to_owned(), kind, offered })
    }

    fn run(&self, input: &Value) -> Result<String, SessionError> {
        let s = &self.session;
        let label = text(input, "label");
        match self.op {
            Op::Set => {
                let content = text(input, "content");
                let kind = s.block(&label)?.kind;
                if matches!(kind, BlockKind::Skill | BlockKind::Searchable) {
                    // Think reads `metadata.{title, description}`; a `title` or `description`
                    // beside `content`, as models also write them, is read when metadata has none.
                    let field = |name: &str| {
                        input
                            .pointer(&format!("/metadata/{name}"))
                            .or_else(|| input.get(name))
                            .and_then(Value::as_str)
                    };
                    let (title, description) = (field("title"), field("description"));
                    let key = entry_key(title, &content);
                    s.add_entry(&label, &key, &content, description.or(title))?;
                    return Ok(format!("Indexed \"{key}\" in {label}."));
                }
                if kind != BlockKind::Writable {
                    return Err(SessionError::Readonly(label));
                }
                let usage = match input.get("action").and_then(Value::as_str) {
                    Some("append") => s.append(&label, &content)?,
                    _ => s.set(&label, &content)?,
                };
                Ok(format!("Written to {label}. Usage: {}", usage.describe()))
            }
            Op::Load => {
                let key = text(input, "key");
                self.offered(&label, BlockKind::Skill)?;
                Ok(s.load(&label, &key)?.unwrap_or_else(|| format!("Not found: {key}")))
            }
            Op::Unload => {
                let key = text(input, "key");
                self.offered(&label, BlockKind::Skill)?;
                Ok(if s.unload(&label, &key)? {
                    format!("Unloaded \"{key}\" from {label}. Context reclaimed.")
                } else {
                    format!("Skill \"{key}\" is not currently loaded in \"{label}\".")
                })
            }
            Op::Search => {
                self.offered(&label, BlockKind::Searchable)?;
                let hits = s.search(&label, &text(input, "query"))?;
                if hits.is_empty() {
                    return Ok("No results found.".into());
                }
                Ok(hits
                    .iter()
                    .map(|h| format!("[{}]\n{}", h.key, h.content))
                    .collect::<Vec<_>>()
                    .join("\n\n"))
            }
        }
    }
}

#[async_trait(?Send)]
impl Tool for ContextTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        Ok(Value::String(self.run(&input).unwrap_or_else(|e| format!("Error: {e}"))))
    }

    fn model_output(&self, output: &Value) -> ModelOutput {
        match output {
            Value::String(s) => ModelOutput::Text(s.clone()),
            other => ModelOutput::Json(other.clone()),
        }
    }
}
