//! Code Mode: the `execute` tool. The model writes JavaScript; each pass runs it in a fresh
//! sandbox isolate (Worker Loader in the Worker) whose only way out is a set of connectors
//! back into the agent (`state.*`, `tools.*`, `codemode.*`). Every connector call goes
//! through a durable journal in the agent's SQLite, so a call that needs approval pauses the
//! run, and approving re-runs the code from the start with the calls already made served from
//! the journal.
//!
//! Everything here is host-testable; the isolate glue is `src/wasm/loader.rs` with
//! `js/codemode/host.mjs`.

pub mod archive;
pub mod connectors;
mod gzip;
pub mod journal;
pub mod normalize;
pub mod runtime;
pub mod sandbox;
pub mod search;
pub mod tool;
pub mod tree;
pub mod types;
pub mod undo;

#[cfg(test)]
mod tests;

pub use runtime::{CodeMode, ExecuteOptions};
pub use sandbox::{CallError, CallRequest, Dispatcher, Namespace, Sandbox, SandboxError};
pub use sandbox::{SandboxOutcome, SandboxRequest};

/// Code larger than this is refused before it runs.
pub const MAX_CODE_BYTES: usize = 1_000_000;
/// A recorded argument or result larger than this fails the run (rows stay under 2 MB).
pub const MAX_DURABLE_VALUE_BYTES: usize = 1_000_000;
/// The deepest a value may nest (arrays and objects) to be parsed by serde_json, whose guard
/// against deep recursion refuses more. A recorded result nesting deeper fails its call, since
/// the journal reads it back that way and a replay must serve what the first pass saw, not
/// null (reads are exempt: a replay runs them again); so does a deeper final result.
pub const MAX_DURABLE_DEPTH: usize = 127;
/// The final result shown to the model is cut to about this many characters.
pub const MAX_RESULT_CHARS: usize = 24_000;
/// `pending[].args` in the transcript are cut to this many characters (the journal keeps all).
pub const PENDING_ARGS_MAX_CHARS: usize = 2_000;
