//! `run_skill_script` for `.js`/`.mjs`: the script is an ES module whose default export,
//! `async function (input, ctx)`, runs in a fresh Code Mode sandbox isolate (no network, no
//! bindings, 30 s). `ctx` reaches back into the host only through [`ScriptDispatcher`]: the
//! skill's own files read-only, the workspace read-only, and up to 20 output files.

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::resources::{check_path, ResourceKind};
use super::script::{
    OutputFile, ScriptError, ScriptOutput, MAX_OUTPUT_FILES, MAX_OUTPUT_FILE_BYTES,
};
use super::LoadedSkill;
use crate::codemode::normalize::guard_loops;
use crate::codemode::runtime::cut;
use crate::codemode::sandbox::SandboxModule;
use crate::codemode::{
    CallError, CallRequest, Dispatcher, Namespace, Sandbox, SandboxError, SandboxRequest,
    MAX_RESULT_CHARS,
};
use crate::tools::workspace::bash::{
    output::truncate_output, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_MS, TIMEOUT_EXIT_CODE,
};
use crate::workspace::Workspace;

/// The global the sandbox gets for `ctx`'s host calls (hidden behind `ctx`).
const CONNECTOR: &str = "__skill";
/// The module name the script is loaded under in the isolate.
const SCRIPT_MODULE: &str = "skill_script.js";

/// The host side of `ctx`: reads of the skill and the workspace, and the output files.
pub struct ScriptDispatcher {
    ws: Rc<Workspace>,
    skill: LoadedSkill,
    outputs: RefCell<Vec<OutputFile>>,
    omitted: RefCell<Vec<String>>,
}

fn path_arg(args: &Value) -> Result<&str, CallError> {
    args.get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| CallError::Failed("path must be a string".into()))
}

impl ScriptDispatcher {
    /// A dispatcher for one run of a script of `skill`.
    pub fn new(ws: Rc<Workspace>, skill: LoadedSkill) -> Self {
        Self { ws, skill, outputs: RefCell::default(), omitted: RefCell::default() }
    }

    async fn read_skill_file(&self, path: &str) -> Result<Value, CallError> {
        let rel = path.strip_prefix("./").unwrap_or(path);
        check_path(rel).map_err(|e| CallError::Failed(format!("ctx.readFile({path:?}): {e}")))?;
        if rel == "SKILL.md" {
            return Ok(Value::String(self.skill.raw.clone()));
        }
        let bytes = self
            .skill
            .read(&self.ws, rel)
            .await
            .map_err(|e| CallError::Failed(format!("ctx.readFile({path:?}): {e}")))?
            .ok_or_else(|| CallError::Failed(format!("ctx.readFile: no such skill file: {rel}")))?;
        Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    }

    async fn read_workspace_file(&self, path: &str) -> Result<Value, CallError> {
        match self.ws.read_file(path).await {
            Ok(Some(text)) => Ok(Value::String(text)),
            Ok(None) => {
                Err(CallError::Failed(format!("ctx.workspace.readFile: no such file: {path}")))
            }
            Err(e) => Err(CallError::Failed(format!("ctx.workspace.readFile({path:?}): {e}"))),
        }
    }

    fn write_output(&self, path: &str, content: Option<&str>) -> Result<Value, CallError> {
        let rel = path.strip_prefix("/output/").unwrap_or(path);
        check_path(rel)
            .map_err(|e| CallError::Failed(format!("ctx.writeOutput({path:?}): {e}")))?;
        let content = content.ok_or_else(|| {
            CallError::Failed("ctx.writeOutput(path, content): content must be a string".into())
        })?;
        let full = format!("/output/{rel}");
        let mut outputs = self.outputs.borrow_mut();
        outputs.retain(|f| f.path != full);
        if content.len() > MAX_OUTPUT_FILE_BYTES {
            self.omitted
                .borrow_mut()
                .push(format!("{full}: larger than {MAX_OUTPUT_FILE_BYTES} bytes"));
        } else if outputs.len() >= MAX_OUTPUT_FILES {
            self.omitted
                .borrow_mut()
                .push(format!("{full}: more than {MAX_OUTPUT_FILES} output files"));
        } else {
            outputs.push(OutputFile {
                path: full.clone(),
                encoding: "text",
                content: content.to_owned(),
            });
        }
        Ok(Value::String(full))
    }
}

#[async_trait(?Send)]
impl Dispatcher for ScriptDispatcher {
    async fn call(&self, call: CallRequest) -> Result<Value, CallError> {
        if call.connector != CONNECTOR {
            return Err(CallError::Failed(format!("unknown connector {}", call.connector)));
        }
        let path = path_arg(&call.args)?;
        match call.method.as_str() {
            "readFile" => self.read_skill_file(path).await,
            "readWorkspaceFile" => self.read_workspace_file(path).await,
            "writeOutput" => {
                self.write_output(path, call.args.get("content").and_then(Value::as_str))
            }
            other => Err(CallError::Failed(format!("unknown method ctx.{other}"))),
        }
    }
}

/// The sandbox request for `path` of `skill` run with `input`: the script as a module, and a
/// body that builds `ctx` and calls the default export.
pub fn script_request(
    skill: &LoadedSkill,
    path: &str,
    source: &str,
    input: &Value,
) -> SandboxRequest {
    let meta = json!({"name": skill.meta.name, "description": skill.meta.description});
    let body = format!(
        "const mod = await import(\"./{SCRIPT_MODULE}\");\n\
         if (typeof mod.default !== \"function\") throw new TypeError({missing});\n\
         const host = globalThis.{CONNECTOR};\n\
         const ctx = Object.freeze({{\n\
           skill: Object.freeze({meta}),\n\
           readFile: (path) => host.readFile({{ path }}),\n\
           writeOutput: (path, content) => host.writeOutput({{ path, content }}),\n\
           workspace: Object.freeze({{ readFile: (path) => host.readWorkspaceFile({{ path }}) }}),\n\
         }});\n\
         return await mod.default({input}, ctx);",
        missing = Value::String(format!(
            "{path} must `export default async function (input, ctx)`"
        )),
    );
    SandboxRequest {
        id: format!("skill_{}_{}", skill.meta.name, skill.version),
        body,
        namespaces: vec![Namespace {
            name: CONNECTOR.into(),
            methods: vec!["readFile".into(), "readWorkspaceFile".into(), "writeOutput".into()],
        }],
        snippets: Vec::new(),
        modules: vec![SandboxModule { name: SCRIPT_MODULE.into(), source: guard_loops(source) }],
        timeout_ms: DEFAULT_TIMEOUT_MS,
        reuse: None,
        input: Value::Null,
        output: Default::default(),
    }
}

/// Splits the sandbox's console lines: `console.warn`/`error` go to stderr, the rest to stdout.
fn split_logs(logs: &[String]) -> (String, String) {
    let (mut stdout, mut stderr) = (String::new(), String::new());
    for line in logs {
        match line.strip_prefix("[warn] ").or_else(|| line.strip_prefix("[error] ")) {
            Some(rest) => stderr.push_str(&format!("{rest}\n")),
            None => stdout.push_str(&format!("{line}\n")),
        }
    }
    (stdout, stderr)
}

/// Runs the `.js`/`.mjs` script `path` of `skill` in `sandbox`.
pub async fn run_js_script(
    ws: Rc<Workspace>,
    sandbox: &dyn Sandbox,
    skill: &LoadedSkill,
    path: &str,
    input: Value,
) -> Result<ScriptOutput, ScriptError> {
    if !skill.resources.iter().any(|r| r.path == path && r.kind == ResourceKind::Script) {
        return Err(ScriptError::NotFound(format!("{}/{path}", skill.meta.name)));
    }
    let bytes = skill
        .read(&ws, path)
        .await
        .map_err(ScriptError::Read)?
        .ok_or_else(|| ScriptError::NotFound(format!("{}/{path}", skill.meta.name)))?;
    let source = String::from_utf8(bytes)
        .map_err(|_| ScriptError::Engine(format!("{path} is not UTF-8 text")))?;
    let request = script_request(skill, path, &source, &input);
    let dispatcher = Rc::new(ScriptDispatcher::new(ws, skill.clone()));
    let outcome = sandbox.run(request, dispatcher.clone()).await;
    let timeout = format!("Script timed out after {DEFAULT_TIMEOUT_MS} ms");
    let (stdout, mut stderr, exit_code, result) = match outcome {
        Ok(o) => {
            let (stdout, mut stderr) = split_logs(&o.logs);
            match o.result {
                Ok(value) => (stdout, stderr, 0, Some(value)),
                Err(e) if e.starts_with("Execution timed out after") => {
                    stderr.push_str(&timeout);
                    (stdout, stderr, TIMEOUT_EXIT_CODE, None)
                }
                Err(e) => {
                    stderr.push_str(&e);
                    (stdout, stderr, 1, None)
                }
            }
        }
        Err(SandboxError::Timeout(_)) => (String::new(), String::new(), TIMEOUT_EXIT_CODE, None),
        Err(SandboxError::Syntax(e)) => {
            (String::new(), format!("{path}: SyntaxError: {e}"), 1, None)
        }
        Err(e) => return Err(ScriptError::Engine(e.to_string())),
    };
    if exit_code == TIMEOUT_EXIT_CODE && stderr.is_empty() {
        stderr = timeout;
    }
    let result = result.map(|v| {
        let text = v.to_string();
        if text.chars().count() > MAX_RESULT_CHARS {
            Value::String(cut(&text, MAX_RESULT_CHARS))
        } else {
            v
        }
    });
    Ok(ScriptOutput {
        stdout: truncate_output(&stdout, DEFAULT_MAX_OUTPUT_BYTES),
        stderr: truncate_output(&stderr, DEFAULT_MAX_OUTPUT_BYTES),
        exit_code,
        output_files: dispatcher.outputs.take(),
        omitted_output_files: dispatcher.omitted.take(),
        result,
    })
}
