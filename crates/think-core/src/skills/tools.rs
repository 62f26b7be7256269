//! The three skill tools, with Think's descriptions, input schemas and output shapes
//! (`agents/skills` `registry.ts`). Refusals are tool errors, worded as Think words them.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{json, Value};

use super::resources::{self, Encoding};
use super::{js_script, script, Catalog, LoadedSkill, ScriptRunners};
use crate::tools::{ModelOutput, Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use crate::workspace::Workspace;

const ACTIVATE: &str =
    "Activate a skill by name. Use this when the user's task matches one of the available skills.";
const READ: &str = "Read a bundled resource from an available skill by relative path. Pass name and path, or use a qualified path like skill-name/references/file.md.";
const RUN: &str = "Run a bundled script resource from an available skill. Use only when a skill instructs you to run a script.";

/// The largest resource `read_skill_resource` returns, so one read cannot flood the
/// context or the transcript row (the platform's rows stop at 2 MB).
pub const MAX_READ_BYTES: u64 = 1_000_000;

/// Which of the three tools.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Activate,
    Read,
    Run,
}

/// One skill tool over a catalog snapshot.
struct SkillTool {
    kind: Kind,
    def: ToolDefinition,
    catalog: Rc<Catalog>,
    ws: Rc<Workspace>,
    runners: ScriptRunners,
    activated: Rc<RefCell<BTreeSet<String>>>,
}

/// The tools for `catalog`: none when it has no valid skill; `run_skill_script` only with an
/// engine or a sandbox to run scripts.
pub fn skill_tools(
    catalog: Rc<Catalog>,
    ws: Rc<Workspace>,
    runners: ScriptRunners,
    activated: Rc<RefCell<BTreeSet<String>>>,
) -> Vec<ToolRef> {
    if catalog.skills.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = catalog.skills.iter().map(|s| s.meta.name.as_str()).collect();
    let name = json!({"type": "string", "enum": names});
    let mut defs = vec![
        (
            Kind::Activate,
            "activate_skill",
            ACTIVATE,
            json!({"type": "object", "properties": {"name": name}, "required": ["name"], "additionalProperties": false}),
        ),
        (
            Kind::Read,
            "read_skill_resource",
            READ,
            json!({"type": "object", "properties": {"name": name, "path": {"type": "string", "minLength": 1}}, "required": ["path"], "additionalProperties": false}),
        ),
    ];
    if runners.engine.is_some() || runners.sandbox.is_some() {
        defs.push((
            Kind::Run,
            "run_skill_script",
            RUN,
            json!({"type": "object", "properties": {"name": name, "path": {"type": "string", "minLength": 1}, "input": {}}, "required": ["name", "path"], "additionalProperties": false}),
        ));
    }
    defs.into_iter()
        .map(|(kind, tool_name, description, input_schema)| {
            Rc::new(SkillTool {
                kind,
                def: ToolDefinition {
                    name: tool_name.to_owned(),
                    description: description.to_owned(),
                    input_schema,
                    output_schema: None,
                },
                catalog: catalog.clone(),
                ws: ws.clone(),
                runners: runners.clone(),
                activated: activated.clone(),
            }) as ToolRef
        })
        .collect()
}

/// `activate_skill`'s text: the wrapped body, then Think's "Bundled resources:" list.
pub fn activation_text(skill: &LoadedSkill) -> String {
    let mut out = format!(
        "<skill_content name=\"{}\" version=\"{}\">\n{}\n",
        skill.meta.name,
        skill.version,
        skill.body.trim()
    );
    if !skill.resources.is_empty() {
        out.push_str("\n<skill_resources>\n");
        for r in &skill.resources {
            out.push_str(&format!(
                "  <file kind=\"{}\" encoding=\"{}\" size=\"{}\">{}</file>\n",
                r.kind.as_str(),
                r.encoding.as_str(),
                r.size,
                r.path
            ));
        }
        out.push_str("</skill_resources>\n");
    }
    out.push_str("</skill_content>\n\nBundled resources:\n");
    if skill.resources.is_empty() {
        out.push_str("No bundled resources.");
    }
    let lines: Vec<String> = skill
        .resources
        .iter()
        .map(|r| {
            let mime = resources::mime_of(&r.path).map(|m| format!(", {m}")).unwrap_or_default();
            format!(
                "- {} ({}, {}{mime}, {} bytes)",
                r.path,
                r.kind.as_str(),
                r.encoding.as_str(),
                r.size
            )
        })
        .collect();
    out.push_str(&lines.join("\n"));
    out
}

fn text_arg<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

impl SkillTool {
    fn skill(&self, name: &str) -> Result<&Rc<LoadedSkill>, ToolError> {
        self.catalog.get(name).ok_or_else(|| ToolError::Failed(format!("Skill not found: {name}")))
    }

    fn activate(&self, input: &Value) -> Result<Value, ToolError> {
        let name = text_arg(input, "name").unwrap_or_default();
        let skill = self.skill(name)?;
        self.activated.borrow_mut().insert(name.to_owned());
        Ok(Value::String(activation_text(skill)))
    }

    async fn read(&self, input: &Value) -> Result<Value, ToolError> {
        let path = text_arg(input, "path").unwrap_or_default();
        let (name, rel) = match text_arg(input, "name") {
            Some(name) => {
                resources::check_path(path).map_err(|e| ToolError::Failed(e.to_string()))?;
                (name, path)
            }
            None => {
                let (name, rel) = resources::split_qualified(path)
                    .map_err(|e| ToolError::Failed(e.to_string()))?;
                if self.catalog.get(name).is_none() {
                    return Err(ToolError::Failed(format!(
                        "Unknown skill in qualified resource path: {name}"
                    )));
                }
                (name, rel)
            }
        };
        let skill = self.skill(name)?;
        if let Some(r) = skill.resources.iter().find(|r| r.path == rel) {
            if r.size > MAX_READ_BYTES {
                return Err(ToolError::Failed(format!(
                    "Resource too large to read: {name}/{rel} ({} bytes; the limit is {MAX_READ_BYTES})",
                    r.size
                )));
            }
        }
        let bytes = skill
            .read(&self.ws, rel)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?
            .ok_or_else(|| ToolError::Failed(format!("Resource not found: {name}/{rel}")))?;
        let info = resources::ResourceInfo::new(rel, bytes.len() as u64);
        let content = match info.encoding {
            Encoding::Text => String::from_utf8_lossy(&bytes).into_owned(),
            Encoding::Base64 => base64::engine::general_purpose::STANDARD.encode(&bytes),
        };
        let mime =
            resources::mime_of(rel).map(|m| format!(" mimeType=\"{m}\"")).unwrap_or_default();
        Ok(Value::String(format!(
            "<skill_resource name=\"{name}\" path=\"{rel}\" kind=\"{}\" encoding=\"{}\"{mime}>\n{content}\n</skill_resource>",
            info.kind.as_str(),
            info.encoding.as_str()
        )))
    }

    async fn run(&self, input: &Value) -> Result<Value, ToolError> {
        let name = text_arg(input, "name").unwrap_or_default();
        let path = text_arg(input, "path").unwrap_or_default();
        script::check_script_path(path).map_err(|e| ToolError::Failed(e.to_string()))?;
        let skill = self.skill(name)?;
        let script_input = input.get("input").cloned().unwrap_or_else(|| json!({}));
        let failed = |e: script::ScriptError| ToolError::Failed(e.to_string());
        let output = if matches!(resources::extension(path).as_str(), "js" | "mjs") {
            let Some(sandbox) = &self.runners.sandbox else {
                return Err(failed(script::ScriptError::NoSandbox(path.to_owned())));
            };
            js_script::run_js_script(self.ws.clone(), sandbox.as_ref(), skill, path, script_input)
                .await
                .map_err(failed)?
        } else {
            let Some(engine) = &self.runners.engine else {
                return Err(ToolError::Failed(match &self.runners.engine_off {
                    Some(off) => format!("Shell skill scripts cannot run: {off}"),
                    None => "Skill scripts cannot run here: no bash engine".into(),
                }));
            };
            script::run_script(&self.ws, engine.as_ref(), skill, path, script_input)
                .await
                .map_err(failed)?
        };
        serde_json::to_value(output)
            .map_err(|e| ToolError::Failed(format!("Tool output is not JSON: {e}")))
    }
}

#[async_trait(?Send)]
impl Tool for SkillTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        match self.kind {
            Kind::Activate => self.activate(&input),
            Kind::Read => self.read(&input).await,
            Kind::Run => self.run(&input).await,
        }
    }

    fn model_output(&self, output: &Value) -> ModelOutput {
        match output {
            Value::String(s) => ModelOutput::Text(s.clone()),
            other => ModelOutput::Json(other.clone()),
        }
    }

    fn runs_code(&self) -> bool {
        self.kind == Kind::Run
    }
}
