//! The contract with the engine that actually runs a script: just-bash behind
//! `js/bash/bridge.mjs` in the Worker (`src/wasm/bash.rs`), a fake in host tests. Field for
//! field this is the bridge's `runBash(request)` → result, so the wasm glue is a plain
//! conversion.
//!
//! request: `{files: [[path, Uint8Array]…], dirs: [path…], script, cwd, timeoutMs, network,
//! excludeRoots: [path…]}`; result: `{stdout, stderr, exitCode, aborted, error: string|null,
//! entries: [[path, "file"|"dir", Uint8Array|null]…]}`.

use async_trait::async_trait;

/// What the engine needs for one run. Paths are normalized and absolute.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineRequest {
    /// Files to mount, with their bytes.
    pub files: Vec<(String, Vec<u8>)>,
    /// Every workspace directory (sorted), created before the script runs so empty ones exist.
    pub dirs: Vec<String>,
    /// The script to run.
    pub script: String,
    /// The working directory it starts in.
    pub cwd: String,
    /// The engine aborts the script after this long and reports `aborted`.
    pub timeout_ms: u64,
    /// Registers just-bash's `curl` (with Think's empty allow-list) when true.
    pub network: bool,
    /// New paths under these roots are never written back, so the engine may leave them out
    /// of `entries` instead of copying their bytes (scratch files in `/tmp` can be large).
    pub exclude_roots: Vec<String>,
}

/// Kind of a path in the engine's final filesystem (symlinks are reported as what they
/// point to, as Think's `stat`-based sync sees them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// One path of the final filesystem.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalEntry {
    /// Absolute path.
    pub path: String,
    /// File or directory.
    pub kind: FinalKind,
    /// File bytes; `None` means "identical to the mounted file at this path" (the bridge
    /// elides unchanged content so untouched files are not copied back). Always `None` for
    /// directories.
    pub content: Option<Vec<u8>>,
}

/// What the engine reports after a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EngineResponse {
    /// What the script printed on stdout.
    pub stdout: String,
    /// What the script printed on stderr.
    pub stderr: String,
    /// The script's exit code (124 after a timeout).
    pub exit_code: i32,
    /// The timeout fired during the run.
    pub aborted: bool,
    /// Set when the engine's `exec` threw instead of returning a result.
    pub error: Option<String>,
    /// The final filesystem except `/`, possibly without new paths under `exclude_roots`.
    pub entries: Vec<FinalEntry>,
}

/// Runs scripts. `Err` is an engine failure (for example the bridge could not start), which
/// the tool reports as its error; a failing script is an `Ok` with a non-zero exit code.
#[async_trait(?Send)]
pub trait BashEngine {
    /// Runs one script over the mounted files; `Err` is [`super::BashError::Engine`].
    async fn run(&self, request: EngineRequest) -> Result<EngineResponse, super::BashError>;
}
