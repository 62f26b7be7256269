//! The connectors: what the sandbox's globals reach. `state.*` is the workspace (Think's state
//! API, each method taking one object), `tools.*` the turn's server-side tools, which go
//! through the same approval policy, ledger and output limits as a direct call.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::tools::schema::InputValidator;
use crate::workspace::FsError;

mod state;
mod state_ops;
mod state_schema;
mod tools;

pub use state::{StateConnector, StateMethod};
pub use state_ops::query_json;
pub use tools::ToolsConnector;

/// Why a connector call failed; its text is what the sandboxed code sees thrown.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConnectorError {
    /// No such method (`state.nope`).
    UnknownMethod(String),
    /// The argument does not match the method's schema.
    InvalidInput(String),
    /// The workspace refused (`ENOENT`, `EISDIR`, …).
    Fs(FsError),
    /// The operation or tool failed with this message.
    Failed(String),
}

impl std::fmt::Display for ConnectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectorError::UnknownMethod(path) => write!(f, "{path} is not a function"),
            ConnectorError::InvalidInput(e) | ConnectorError::Failed(e) => f.write_str(e),
            ConnectorError::Fs(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConnectorError {}

impl From<FsError> for ConnectorError {
    fn from(e: FsError) -> Self {
        ConnectorError::Fs(e)
    }
}

/// Whether replay serves a call from the journal or runs it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// No effect: runs again on replay.
    Read,
    /// Has an effect: served from the journal on replay, never run twice.
    Write,
}

/// One method of a connector, as `codemode.search` and `codemode.describe` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodSpec {
    /// The method name (`readFile`).
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its one argument.
    pub input_schema: Value,
    /// JSON Schema of its result, when known.
    pub output_schema: Option<Value>,
    /// Read or write.
    pub kind: CallKind,
}

/// Identifies one call for the tool ledger (stable across passes).
#[derive(Debug, Clone, PartialEq)]
pub struct CallContext {
    /// The execution.
    pub execution_id: String,
    /// The call's journal seq.
    pub seq: i64,
}

/// A global of the sandbox, backed by the host.
#[async_trait(?Send)]
pub trait Connector {
    /// The global's name.
    fn name(&self) -> &str;
    /// One line for the tool description.
    fn hint(&self) -> &str;
    /// Its methods.
    fn methods(&self) -> &[MethodSpec];
    /// Whether this call, with these arguments, needs a human's approval first.
    fn needs_approval(&self, _method: &str, _args: &Value) -> bool {
        false
    }
    /// Whether the method may need approval for some arguments (shown by `search`).
    fn may_need_approval(&self, _method: &str) -> bool {
        false
    }
    /// Checks a call's argument against the method's schema (before any approval is asked).
    fn validate(&self, _method: &str, _args: &Value) -> Result<(), ConnectorError> {
        Ok(())
    }
    /// Runs one call; arguments are validated here.
    async fn call(
        &self,
        method: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ConnectorError>;
    /// Undoes an applied call for `rollbackExecution`; false when the method has no undo
    /// (reads, and tools: `state.*` writes have one, which Think's shell connector lacks).
    async fn revert(
        &self,
        _method: &str,
        _args: &Value,
        _result: Option<&Value>,
        _ctx: &CallContext,
    ) -> Result<bool, ConnectorError> {
        Ok(false)
    }
}

/// A method spec with an object schema of `props` (shared by the connectors of other layers).
pub(crate) fn spec(
    name: &str,
    description: &str,
    props: Value,
    required: &[&str],
    kind: CallKind,
) -> MethodSpec {
    MethodSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": false,
        }),
        output_schema: None,
        kind,
    }
}

/// Checks a connector call's `args` against its method's schema, with the shared compiled
/// validator ([`InputValidator::cached`]).
pub(crate) fn check_args(label: &str, schema: &Value, args: &Value) -> Result<(), ConnectorError> {
    InputValidator::cached(schema)
        .map_err(|e| ConnectorError::Failed(format!("{label} has an {e}")))?
        .validate(args)
        .map_err(|e| ConnectorError::InvalidInput(format!("Invalid input for {label}: {e}")))
}

/// Whether `name` is a plain JavaScript identifier (reachable as `tools.name`).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}
