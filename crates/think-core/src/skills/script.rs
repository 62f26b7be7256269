//! `run_skill_script`: a skill's `.sh`/`.bash` script runs in the bash tool's engine over a
//! filesystem of its own: the skill's files at `/skill`, the input at `/input.json` (also on
//! stdin), the skill's metadata at `/context.json`, a snapshot of the workspace at
//! `/workspace` whose changes are discarded (read-only), and an empty `/output` whose files
//! are returned. No network, a 30 s timeout. `.js`/`.mjs` scripts run in the Code Mode
//! sandbox instead (`super::js_script`).

use serde::Serialize;
use serde_json::{json, Value};

use super::resources::{check_path, extension, PathError};
use super::{LoadedSkill, SkillError};
use crate::tools::workspace::bash::{
    output::truncate_output, take_snapshot, BashEngine, BashOptions, EngineRequest, FinalKind,
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_MS, TIMEOUT_EXIT_CODE,
};
use crate::workspace::Workspace;

/// Most output files returned (Think's `MAX_OUTPUT_ARTIFACTS`).
pub const MAX_OUTPUT_FILES: usize = 20;
/// Largest output file returned (Think's `MAX_OUTPUT_ARTIFACT_BYTES`).
pub const MAX_OUTPUT_FILE_BYTES: usize = 64_000;

/// Why a script did not run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ScriptError {
    /// The path is not under `scripts/` or not normalized.
    Path(String),
    /// An extension no runner handles.
    Unsupported(String),
    /// A TypeScript script: the sandbox runs JavaScript only.
    TypeScript(String),
    /// A JavaScript script, but this agent has no Code Mode sandbox.
    NoSandbox(String),
    /// The path names no script of the skill.
    NotFound(String),
    /// Reading the skill's files failed.
    Read(SkillError),
    /// The engine could not run the script.
    Engine(String),
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Path(e) => f.write_str(e),
            Self::Unsupported(p) => write!(
                f,
                "Unsupported skill script extension \"{}\" for {p}. Supported extensions: .sh, .bash, .js, .mjs",
                Some(extension(p)).filter(|e| !e.is_empty()).map(|e| format!(".{e}")).unwrap_or_else(|| "(none)".into())
            ),
            Self::TypeScript(p) => write!(
                f,
                "TypeScript skill scripts are not supported ({p}): the sandbox runs JavaScript \
                 only. Ship the script as .js or .mjs."
            ),
            Self::NoSandbox(p) => write!(
                f,
                "JavaScript skill scripts need the Code Mode sandbox, which this agent does not \
                 have ({p}). Only .sh and .bash scripts run here."
            ),
            Self::NotFound(p) => write!(f, "Script not found: {p}"),
            Self::Read(e) => write!(f, "Skill script failed: {e}"),
            Self::Engine(e) => write!(f, "Skill script failed: {e}"),
        }
    }
}

impl std::error::Error for ScriptError {}

/// Checks a script path as Think does: under `scripts/`, normalized, a known extension.
pub fn check_script_path(path: &str) -> Result<(), ScriptError> {
    if !path.starts_with("scripts/") {
        return Err(ScriptError::Path(format!(
            "Skill script path must start with \"scripts/\": {path}"
        )));
    }
    check_path(path).map_err(|e| match e {
        PathError::Climbs | PathError::NotNormalized(_) => ScriptError::Path(format!(
            "Skill script path must be a normalized relative path under \"scripts/\": {path}"
        )),
        other => ScriptError::Path(other.to_string()),
    })?;
    match extension(path).as_str() {
        "sh" | "bash" | "js" | "mjs" => Ok(()),
        "ts" | "tsx" => Err(ScriptError::TypeScript(path.to_owned())),
        _ => Err(ScriptError::Unsupported(path.to_owned())),
    }
}

/// A file the script left in `/output`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputFile {
    /// Absolute, e.g. `/output/report.txt`.
    pub path: String,
    /// `text` for UTF-8, else `base64`.
    pub encoding: &'static str,
    /// The content in that encoding.
    pub content: String,
}

/// What `run_skill_script` returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptOutput {
    /// Cut to 64,000 bytes.
    pub stdout: String,
    /// Cut to 64,000 bytes.
    pub stderr: String,
    /// 124 after the timeout.
    pub exit_code: i32,
    /// At most [`MAX_OUTPUT_FILES`] files of at most [`MAX_OUTPUT_FILE_BYTES`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_files: Vec<OutputFile>,
    /// Output files left out, with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub omitted_output_files: Vec<String>,
    /// A JavaScript script's return value (JSON), cut as `execute`'s result is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

/// Runs `path` of `skill` with `input`.
pub async fn run_script(
    ws: &Workspace,
    engine: &dyn BashEngine,
    skill: &LoadedSkill,
    path: &str,
    input: Value,
) -> Result<ScriptOutput, ScriptError> {
    let script = skill.resources.iter().find(|r| r.path == path);
    if script.is_none_or(|r| r.kind != super::resources::ResourceKind::Script) {
        return Err(ScriptError::NotFound(format!("{}/{path}", skill.meta.name)));
    }
    let mut files = vec![
        ("/input.json".to_owned(), input.to_string().into_bytes()),
        (
            "/context.json".to_owned(),
            json!({"skill": {
                "name": skill.meta.name,
                "description": skill.meta.description,
                "license": skill.meta.license,
                "compatibility": skill.meta.compatibility,
                "allowedTools": skill.meta.allowed_tools,
                "metadata": skill.meta.metadata,
                "source": skill.source,
                "version": skill.version,
            }})
            .to_string()
            .into_bytes(),
        ),
        ("/skill/SKILL.md".to_owned(), skill.raw.clone().into_bytes()),
    ];
    for r in &skill.resources {
        if let Some(bytes) = skill.read(ws, &r.path).await.map_err(ScriptError::Read)? {
            files.push((format!("/skill/{}", r.path), bytes));
        }
    }
    let mut dirs = vec!["/output".to_owned(), "/skill".to_owned(), "/workspace".to_owned()];
    let options = BashOptions::default();
    let snapshot =
        take_snapshot(ws, &options).await.map_err(|e| ScriptError::Engine(e.to_string()))?;
    for (p, bytes) in snapshot.files {
        files.push((format!("/workspace{p}"), bytes));
    }
    dirs.extend(
        snapshot.baseline.dirs.iter().filter(|d| *d != "/").map(|d| format!("/workspace{d}")),
    );
    crate::platform::sort::sort(&mut dirs);
    let request = EngineRequest {
        files,
        dirs,
        script: format!("bash /skill/{path} < /input.json"),
        cwd: "/skill".to_owned(),
        timeout_ms: DEFAULT_TIMEOUT_MS,
        network: false,
        exclude_roots: vec!["/tmp".to_owned(), "/workspace".to_owned(), "/skill".to_owned()],
    };
    let response = engine.run(request).await.map_err(|e| ScriptError::Engine(e.to_string()))?;
    if let Some(error) = response.error {
        return Err(ScriptError::Engine(error));
    }
    let mut output_files = Vec::new();
    let mut omitted = Vec::new();
    for entry in response.entries {
        let (FinalKind::File, Some(bytes)) = (entry.kind, entry.content) else { continue };
        if !entry.path.starts_with("/output/") {
            continue;
        }
        if bytes.len() > MAX_OUTPUT_FILE_BYTES {
            omitted.push(format!("{}: larger than {MAX_OUTPUT_FILE_BYTES} bytes", entry.path));
        } else if output_files.len() >= MAX_OUTPUT_FILES {
            omitted.push(format!("{}: more than {MAX_OUTPUT_FILES} output files", entry.path));
        } else {
            let (encoding, content) = match String::from_utf8(bytes) {
                Ok(text) => ("text", text),
                Err(e) => {
                    use base64::Engine as _;
                    ("base64", base64::engine::general_purpose::STANDARD.encode(e.as_bytes()))
                }
            };
            output_files.push(OutputFile { path: entry.path, encoding, content });
        }
    }
    let mut stderr = response.stderr;
    let exit_code = if response.aborted {
        stderr.push_str(&format!("\nScript timed out after {DEFAULT_TIMEOUT_MS} ms"));
        TIMEOUT_EXIT_CODE
    } else {
        response.exit_code
    };
    Ok(ScriptOutput {
        stdout: truncate_output(&response.stdout, DEFAULT_MAX_OUTPUT_BYTES),
        stderr: truncate_output(&stderr, DEFAULT_MAX_OUTPUT_BYTES),
        exit_code,
        output_files,
        omitted_output_files: omitted,
        result: None,
    })
}
