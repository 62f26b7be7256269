//! The sandbox seam, shared by every feature that runs untrusted JavaScript (the `execute`
//! tool, skill scripts in `src/skills/js_script.rs`; extensions and `browser_execute` later):
//! run one piece of code in a fresh isolate whose only way out is [`Dispatcher::call`] into
//! the host, within limits.
//! The Worker implements it with Worker Loader (`src/wasm/loader.rs`); host tests script
//! the calls a program would make.

use std::rc::Rc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One global of the sandbox (`state`, `tools`, …) and the methods it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Namespace {
    /// The global's name.
    pub name: String,
    /// Its methods; each is `async (args) => result` in the sandbox.
    pub methods: Vec<String>,
}

/// A saved snippet as the sandbox loads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnippetModule {
    /// Its name.
    pub name: String,
    /// Its normalized body.
    pub body: String,
}

/// An extra ES module loaded as is, which the body can `import("./<name>")` (a skill's
/// `.js`/`.mjs` script).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxModule {
    /// Its module name in the isolate (ends in `.js`; not `sandbox.js`, `user.js`, `snippet_N.js`).
    pub name: String,
    /// Its source.
    pub source: String,
}

/// One pass: code to run and what it may reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRequest {
    /// Names the isolate (unique per pass).
    pub id: String,
    /// The body of an async function; its return value is the result.
    pub body: String,
    /// Globals backed by the dispatcher. `codemode.step` is provided by the sandbox itself.
    pub namespaces: Vec<Namespace>,
    /// Saved snippets `codemode.run(name, input)` can run, each an async function body with
    /// `input` in scope.
    pub snippets: Vec<SnippetModule>,
    /// Extra modules the body may import; `execute` sends none.
    #[serde(default)]
    pub modules: Vec<SandboxModule>,
    /// Wall-clock limit of the pass inside the isolate; also its CPU limit where supported.
    pub timeout_ms: u64,
}

/// How a pass ended when the code itself ran.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxOutcome {
    /// The returned value (JSON), or the message of what the code threw.
    pub result: Result<Value, String>,
    /// `console.*` lines, in order.
    pub logs: Vec<String>,
}

/// Why a pass did not run to an outcome.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SandboxError {
    /// No isolate could be made (no loader binding, the loader refused).
    Unavailable(String),
    /// The code did not load: a syntax error, with the parser's message and position.
    Syntax(String),
    /// The pass ran past its time (or CPU) limit and was stopped.
    Timeout(u64),
    /// The isolate failed in some other way (out of memory, crashed).
    Crashed(String),
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::Unavailable(e) => write!(f, "The sandbox is unavailable: {e}"),
            SandboxError::Syntax(e) => write!(f, "SyntaxError: {e}"),
            SandboxError::Timeout(ms) => write!(f, "Execution timed out after {ms} ms"),
            SandboxError::Crashed(e) => write!(f, "The sandbox failed: {e}"),
        }
    }
}

impl std::error::Error for SandboxError {}

/// One call from the sandbox into the host.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// The global (`state`, `tools`, `codemode`).
    pub connector: String,
    /// The method on it.
    pub method: String,
    /// Its one argument (`null` when the code passed none).
    pub args: Value,
    /// Where in the code the call was made (`line:column`), so replay can tell apart calls
    /// started in parallel.
    pub site: String,
}

/// Why a call did not return a value.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallError {
    /// The call failed; the code sees a thrown `Error` with this message.
    Failed(String),
    /// The run is paused for approval; the code sees a thrown error and its result is ignored.
    Paused,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Failed(e) => f.write_str(e),
            CallError::Paused => f.write_str("The execution is paused waiting for approval."),
        }
    }
}

impl std::error::Error for CallError {}

/// The host side of the connectors: the sandbox sends every call here.
#[async_trait(?Send)]
pub trait Dispatcher {
    /// Runs one call.
    async fn call(&self, call: CallRequest) -> Result<Value, CallError>;
}

/// Runs code in a fresh isolate.
#[async_trait(?Send)]
pub trait Sandbox {
    /// Runs one pass to its end (or its limit).
    async fn run(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
    ) -> Result<SandboxOutcome, SandboxError>;

    /// Like [`Sandbox::run`], but the isolate's outbound requests go through the host's
    /// network gateway, which lets only `network`'s hosts through (extensions). A sandbox
    /// without a gateway refuses.
    async fn run_networked(
        &self,
        _request: SandboxRequest,
        _dispatcher: Rc<dyn Dispatcher>,
        _network: &crate::extensions::NetworkGrant,
    ) -> Result<SandboxOutcome, SandboxError> {
        Err(SandboxError::Unavailable("this sandbox has no network gateway".into()))
    }
}
