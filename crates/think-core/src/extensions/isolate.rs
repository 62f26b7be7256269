//! One operation of an extension in a Code Mode sandbox isolate: its source as a module
//! (`export default (<source>);`, loops guarded as Code Mode guards them), the isolate-side
//! runtime `runtime.js` (beside this file), and a body that runs the operation it is handed as
//! its input: `describe`, a tool or a hook. The modules and body are the same for every
//! operation of one load, so the operations of a load share one isolate, named by
//! [`Pass::reuse`] (Think keeps one isolate per extension too): the source is compiled once,
//! and what its code keeps in module state lives from one call to the next. With network
//! hosts the pass goes through the sandbox's gateway, otherwise the isolate has no outbound
//! at all.

use std::rc::Rc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::bridge::{HostBridge, HostMethod, HOST_CONNECTOR};
use super::manifest::Manifest;
use super::ExtensionError;
use crate::codemode::normalize::guard_loops;
use crate::codemode::sandbox::{OutputLimits, SandboxModule};
use crate::codemode::{Namespace, Sandbox, SandboxError, SandboxRequest};
use crate::net::NetworkGrant;

/// The module the extension's source is loaded as.
pub const SOURCE_MODULE: &str = "think_extension.js";
/// The isolate-side runtime's module name.
pub const RUNTIME_MODULE: &str = "think_ext_runtime.js";
const RUNTIME_JS: &str = include_str!("runtime.js");

/// A tool as the source describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDescriptor {
    /// Its name inside the extension.
    pub name: String,
    /// Its description.
    pub description: String,
    /// JSON-Schema properties of its input.
    pub parameters: Value,
    /// Required property names.
    pub required: Value,
}

impl ToolDescriptor {
    /// The input schema the model is sent and the host validates against.
    pub fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": self.parameters, "required": self.required})
    }
}

/// What `describe` found in the source.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Description {
    /// Its tools, in source order.
    pub tools: Vec<ToolDescriptor>,
    /// The names of the hook functions it defines.
    pub hooks: Vec<String>,
}

/// One operation.
pub enum Op<'a> {
    /// List the tools and hooks.
    Describe,
    /// Run a tool.
    Tool {
        /// The tool's name inside the extension.
        name: &'a str,
        /// Its (validated) input.
        args: Value,
    },
    /// Run a hook.
    Hook {
        /// The hook's name.
        name: &'a str,
        /// What the hook is shown.
        context: Value,
    },
}

/// Everything a pass needs besides the operation.
pub struct Pass<'a> {
    /// The sandbox.
    pub sandbox: &'a dyn Sandbox,
    /// Its source.
    pub source: &'a str,
    /// Its network grant; `None` is no outbound at all.
    pub network: Option<NetworkGrant>,
    /// Its `host`.
    pub bridge: Rc<HostBridge>,
    /// The pass's time limit.
    pub timeout_ms: u64,
    /// The largest result, in bytes of JSON.
    pub max_result_bytes: usize,
    /// The key of the isolate this load's operations share; `None` runs each in a fresh one.
    pub reuse: Option<String>,
}

/// The body of every operation: the runtime runs the operation handed in as the input.
const BODY: &str =
    "const rt = await import(\"./think_ext_runtime.js\");\nreturn await rt.run(__think_input);";

/// The sandbox request of one operation.
pub fn request(pass: &Pass<'_>, op: &Op<'_>, id: String) -> SandboxRequest {
    let op = match op {
        Op::Describe => json!({"kind": "describe"}),
        Op::Tool { name, args } => {
            json!({"kind": "tool", "name": name, "args": args, "maxChars": pass.max_result_bytes})
        }
        Op::Hook { name, context } => json!({
            "kind": "hook", "name": name, "context": context, "maxChars": pass.max_result_bytes
        }),
    };
    SandboxRequest {
        id,
        body: BODY.into(),
        namespaces: vec![Namespace {
            name: HOST_CONNECTOR.into(),
            methods: HostMethod::ALL.iter().map(|m| m.as_str().to_owned()).collect(),
        }],
        snippets: Vec::new(),
        modules: vec![
            SandboxModule {
                name: SOURCE_MODULE.into(),
                source: guard_loops(&format!("export default (\n{}\n);\n", pass.source)),
            },
            SandboxModule { name: RUNTIME_MODULE.into(), source: RUNTIME_JS.into() },
        ],
        timeout_ms: pass.timeout_ms,
        reuse: pass.reuse.clone(),
        input: op,
        output: OutputLimits { max_result_chars: pass.max_result_bytes, ..Default::default() },
    }
}

/// The key of the isolate a load's operations share: the load's random `token` (a load after
/// an unload has another, so it never enters its predecessor's isolate) and a hash of what
/// the isolate is made of and may do (the manifest, hence the network grant, the source, the
/// runtime, and `limits`, the private-network switch and time limits in force).
pub fn isolate_key(manifest: &Manifest, source: &str, limits: &str, token: &str) -> String {
    let mut made_of = serde_json::to_string(manifest).unwrap_or_default();
    for part in [source, RUNTIME_JS, limits] {
        made_of.push('\0');
        made_of.push_str(part);
    }
    format!("ext:{token}:{:016x}", xxhash_rust::xxh3::xxh3_64(made_of.as_bytes()))
}

/// Runs one operation and returns its JSON result, or why there is none.
pub async fn run(pass: &Pass<'_>, op: Op<'_>, id: String) -> Result<Value, ExtensionError> {
    let request = request(pass, &op, id);
    let dispatcher = pass.bridge.clone();
    let outcome = match &pass.network {
        Some(grant) => pass.sandbox.run_networked(request, dispatcher, grant).await,
        None => pass.sandbox.run(request, dispatcher).await,
    };
    let outcome = outcome.map_err(|e| match e {
        SandboxError::Syntax(e) => ExtensionError::InvalidSource(format!("SyntaxError: {e}")),
        SandboxError::Timeout(ms) => ExtensionError::Timeout(ms),
        SandboxError::Unavailable(e) => ExtensionError::Unavailable(e),
        other => ExtensionError::Failed(other.to_string()),
    })?;
    let value = outcome.result.map_err(|e| {
        if e.starts_with("Execution timed out after") {
            ExtensionError::Timeout(pass.timeout_ms)
        } else if let Some(size) = e.strip_prefix("RangeError: The result is ") {
            let chars = size.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
            ExtensionError::TooLarge { bytes: chars, max: pass.max_result_bytes }
        } else {
            ExtensionError::Failed(e)
        }
    })?;
    let bytes = serde_json::to_string(&value).map(|s| s.len()).unwrap_or(0);
    if bytes > pass.max_result_bytes {
        return Err(ExtensionError::TooLarge { bytes, max: pass.max_result_bytes });
    }
    Ok(value)
}
