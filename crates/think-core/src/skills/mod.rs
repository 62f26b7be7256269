//! Skills: folders holding a `SKILL.md` (Agent Skills format) and resource files, which the
//! model discovers in a catalog in the system prompt and loads on demand with
//! `activate_skill`, `read_skill_resource` and `run_skill_script` (Think's `agents/skills`).
//!
//! Skills come from three sources; on a name clash the first wins, in this order:
//! 1. Rust: [`Skill`]s given to `AgentSpec::skill`, with embedded files;
//! 2. R2: every `<prefix><name>/SKILL.md` in the agent's bucket (`AgentSpec::skills_r2`),
//!    re-listed at most every [`R2_REFRESH_MS`];
//! 3. the workspace: every `<dir>/<name>/SKILL.md` (`/skills` by default), found with one
//!    range scan per turn; a skill is re-read only when the size or mtime of one of its
//!    files changed, so thousands of workspace files cost one statement.
//!
//! A skill whose frontmatter is invalid is left out; the reason is logged and shown by the
//! `skills()` callable. Beyond Think, an activated skill's `allowed-tools` is enforced: see
//! [`Skills::needs_approval`].

pub mod frontmatter;
mod gate;
mod js_script;
pub mod resources;
mod script;
mod tools;
pub mod yaml;

#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde::Serialize;

use crate::codemode::Sandbox;
use crate::store::BlobStore;
use crate::tools::workspace::bash::BashEngine;
use crate::tools::ToolRef;
use crate::workspace::{FsError, Workspace};
use frontmatter::{parse_skill_md, SkillMeta};
use resources::ResourceInfo;

/// The workspace folder skills are read from by default.
pub const DEFAULT_SKILLS_DIR: &str = "/skills";
/// How long a listing of the R2 prefix is reused (Think's `refreshIntervalMs`).
pub const R2_REFRESH_MS: f64 = 60_000.0;
/// The first line of the catalog in the system prompt (Think's words).
pub const CATALOG_HEADER: &str =
    "Available skills. When a task matches a skill, use activate_skill with its name before proceeding.";

/// A skill given in Rust: its folder name, its `SKILL.md` and its other files by relative
/// path (`references/forms.md`, `scripts/fill.sh`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skill {
    /// The folder name, which the frontmatter's `name` must equal.
    pub name: String,
    /// The whole `SKILL.md`, frontmatter included.
    pub skill_md: String,
    /// Resource files by path relative to the skill folder.
    pub files: Vec<(String, Vec<u8>)>,
}

impl Skill {
    /// A skill named `name` with this `SKILL.md` and no resources.
    pub fn new(name: impl Into<String>, skill_md: impl Into<String>) -> Self {
        Self { name: name.into(), skill_md: skill_md.into(), files: Vec::new() }
    }

    /// Adds a resource file.
    pub fn file(mut self, path: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        self.files.push((path.into(), content.into()));
        self
    }
}

/// Where skills are read from; part of the agent's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillsConfig {
    /// Whether skills are on at all (`THINK_SKILLS=false` switches them off).
    pub enabled: bool,
    /// The workspace folder holding one folder per skill.
    pub dir: String,
    /// Skills given in Rust, in order.
    pub rust: Vec<Skill>,
    /// A key prefix in the agent's R2 bucket holding one folder per skill.
    pub r2_prefix: Option<String>,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            dir: DEFAULT_SKILLS_DIR.to_owned(),
            rust: Vec::new(),
            r2_prefix: None,
        }
    }
}

/// Which source a skill came from, in precedence order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// `AgentSpec::skill`.
    Rust,
    /// `AgentSpec::skills_r2`.
    R2,
    /// The workspace folder.
    Workspace,
}

impl Source {
    /// The name shown by `skills()`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Rust => "rust",
            Source::R2 => "r2",
            Source::Workspace => "workspace",
        }
    }
}

/// Why a skill's files could not be read.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SkillError {
    /// The workspace failed.
    Fs(FsError),
    /// The blob store failed.
    Store(crate::store::StoreError),
    /// A file listed a moment ago is gone.
    Missing(String),
}

impl std::fmt::Display for SkillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fs(e) => write!(f, "{e}"),
            Self::Store(e) => write!(f, "{e}"),
            Self::Missing(p) => write!(f, "{p} disappeared while it was being read"),
        }
    }
}

impl std::error::Error for SkillError {}

impl From<FsError> for SkillError {
    fn from(e: FsError) -> Self {
        Self::Fs(e)
    }
}

impl From<crate::store::StoreError> for SkillError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::Store(e)
    }
}

/// Where a skill's files are.
#[derive(Debug, Clone)]
enum Files {
    /// Held in memory (Rust and R2 skills).
    Memory(Rc<BTreeMap<String, Vec<u8>>>),
    /// In the workspace folder with this absolute path.
    Workspace(String),
}

/// A valid skill, ready for the tools.
#[derive(Debug, Clone)]
pub struct LoadedSkill {
    /// Its frontmatter.
    pub meta: SkillMeta,
    /// The Markdown after the frontmatter.
    pub body: String,
    /// The whole `SKILL.md`.
    pub raw: String,
    /// Where it came from.
    pub source: Source,
    /// A digest of its files, which changes whenever one of them does.
    pub version: String,
    /// Its files other than `SKILL.md`, sorted by path.
    pub resources: Vec<ResourceInfo>,
    files: Files,
}

impl LoadedSkill {
    /// The bytes of the resource at `path` (relative), `None` when it is not one.
    pub async fn read(&self, ws: &Workspace, path: &str) -> Result<Option<Vec<u8>>, SkillError> {
        if !self.resources.iter().any(|r| r.path == path) {
            return Ok(None);
        }
        match &self.files {
            Files::Memory(files) => Ok(files.get(path).cloned()),
            Files::Workspace(folder) => Ok(ws.read_file_bytes(&format!("{folder}/{path}")).await?),
        }
    }
}

/// What `run_skill_script` runs scripts with: bash scripts in the engine, `.js`/`.mjs` in the
/// Code Mode sandbox. The tool is offered when either exists.
#[derive(Clone, Default)]
pub struct ScriptRunners {
    /// Runs `.sh`/`.bash` scripts.
    pub engine: Option<Rc<dyn BashEngine>>,
    /// Why there is no engine when bash is switched off: what a shell script's run is told.
    pub engine_off: Option<String>,
    /// Runs `.js`/`.mjs` scripts.
    pub sandbox: Option<Rc<dyn Sandbox>>,
}

/// One skill as shown by the `skills()` callable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillReport {
    /// The frontmatter's name when it could be read, else the folder's.
    pub name: String,
    /// The description, empty when unreadable.
    pub description: String,
    /// Where it came from.
    pub source: Source,
    /// Whether the model sees it.
    pub valid: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A skill found in a source: loaded, or refused with its report.
type Entry = Result<Rc<LoadedSkill>, SkillReport>;

/// The skills of one moment, after precedence.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Valid skills the model sees, in precedence order.
    pub skills: Vec<Rc<LoadedSkill>>,
    /// Every skill found, valid or not, in the same order.
    pub reports: Vec<SkillReport>,
}

impl Catalog {
    /// Builds the catalog from the sources' entries in precedence order: the first skill of
    /// a name wins; later ones are reported as shadowed.
    pub fn merge(entries: impl IntoIterator<Item = Entry>) -> Self {
        let mut out = Catalog::default();
        let mut seen: BTreeMap<String, Source> = BTreeMap::new();
        for entry in entries {
            match entry {
                Ok(skill) => {
                    let name = skill.meta.name.clone();
                    let report = SkillReport {
                        name: name.clone(),
                        description: skill.meta.description.clone(),
                        source: skill.source,
                        valid: true,
                        error: None,
                    };
                    if let Some(first) = seen.get(&name) {
                        out.reports.push(SkillReport {
                            valid: false,
                            error: Some(format!(
                                "a {} skill of the same name comes first",
                                first.as_str()
                            )),
                            ..report
                        });
                        continue;
                    }
                    seen.insert(name, skill.source);
                    out.reports.push(report);
                    out.skills.push(skill);
                }
                Err(report) => out.reports.push(report),
            }
        }
        out
    }

    /// The valid skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Rc<LoadedSkill>> {
        self.skills.iter().find(|s| s.meta.name == name)
    }

    /// The catalog section of the system prompt, `None` without valid skills.
    pub fn prompt(&self) -> Option<String> {
        if self.skills.is_empty() {
            return None;
        }
        let mut out = format!("{CATALOG_HEADER}\n");
        for s in &self.skills {
            out.push_str(&format!("\n- {}: {}", s.meta.name, s.meta.description));
        }
        Some(out)
    }
}

/// FNV-1a, a stable digest for versions and change detection.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain([0xffu8].iter()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Loads a skill held in memory (Rust or R2).
fn load_memory(
    source: Source,
    folder: &str,
    skill_md: &str,
    files: BTreeMap<String, Vec<u8>>,
) -> Entry {
    let mut digest: Vec<&[u8]> = vec![skill_md.as_bytes()];
    for (path, bytes) in &files {
        digest.push(path.as_bytes());
        digest.push(bytes);
    }
    let version = format!("{:016x}", fnv(&digest));
    let files: BTreeMap<String, Vec<u8>> =
        files.into_iter().filter(|(p, _)| resources::check_path(p).is_ok()).collect();
    let resources = files.iter().map(|(p, b)| ResourceInfo::new(p, b.len() as u64)).collect();
    build(source, folder, skill_md, version, resources, Files::Memory(Rc::new(files)))
}

/// Validates `skill_md` and assembles the skill, or its refusal (logged).
fn build(
    source: Source,
    folder: &str,
    skill_md: &str,
    version: String,
    resources: Vec<ResourceInfo>,
    files: Files,
) -> Entry {
    match parse_skill_md(skill_md, folder) {
        Ok(parsed) => Ok(Rc::new(LoadedSkill {
            meta: parsed.meta,
            body: parsed.body,
            raw: skill_md.to_owned(),
            source,
            version,
            resources,
            files,
        })),
        Err(e) => Err(refusal(source, folder, e.to_string())),
    }
}

/// The report of a skill left out, logged once when it is found.
fn refusal(source: Source, folder: &str, error: String) -> SkillReport {
    crate::platform::log(&format!(
        "think-rs: skill {folder:?} ({}) is left out: {error}",
        source.as_str()
    ));
    SkillReport {
        name: folder.to_owned(),
        description: String::new(),
        source,
        valid: false,
        error: Some(error),
    }
}

/// A workspace skill as last read, with the digest of its files' sizes and mtimes.
struct Cached {
    digest: u64,
    entry: Entry,
}

/// The agent's skills: the sources, what was last read from each, and the skills activated
/// in the conversation. One per agent instance.
pub struct Skills {
    config: SkillsConfig,
    rust: Vec<Entry>,
    workspace: RefCell<BTreeMap<String, Cached>>,
    r2: RefCell<Option<(f64, Vec<Entry>)>>,
    current: RefCell<Rc<Catalog>>,
    activated: Rc<RefCell<BTreeSet<String>>>,
    /// `SKILL.md` files read from the workspace so far (change detection is tested on it).
    reads: Cell<u64>,
}

impl Skills {
    /// The skills of `config`; Rust skills are validated now.
    pub fn new(config: SkillsConfig) -> Self {
        let rust = config
            .rust
            .iter()
            .map(|s| {
                load_memory(Source::Rust, &s.name, &s.skill_md, s.files.iter().cloned().collect())
            })
            .collect();
        Self {
            config,
            rust,
            workspace: RefCell::new(BTreeMap::new()),
            r2: RefCell::new(None),
            current: RefCell::new(Rc::new(Catalog::default())),
            activated: Rc::new(RefCell::new(BTreeSet::new())),
            reads: Cell::new(0),
        }
    }

    /// Re-reads what changed in the sources and returns the catalog (also kept for
    /// [`Skills::catalog`]). A source that fails is logged and contributes nothing. Switched
    /// off, the catalog is empty, so no skill is shown, offered or gates a tool.
    pub async fn refresh(
        &self,
        ws: &Workspace,
        blobs: Option<&dyn BlobStore>,
        now_ms: f64,
    ) -> Rc<Catalog> {
        if !self.config.enabled {
            let empty = Rc::new(Catalog::default());
            *self.current.borrow_mut() = empty.clone();
            return empty;
        }
        let r2 = self.refresh_r2(blobs, now_ms).await;
        let workspace = match self.refresh_workspace(ws).await {
            Ok(entries) => entries,
            Err(e) => {
                crate::platform::log(&format!(
                    "think-rs: reading skills from {} failed: {e}",
                    self.config.dir
                ));
                Vec::new()
            }
        };
        let catalog = Rc::new(Catalog::merge(self.rust.iter().cloned().chain(r2).chain(workspace)));
        *self.current.borrow_mut() = catalog.clone();
        catalog
    }

    /// The catalog of the last [`Skills::refresh`].
    pub fn catalog(&self) -> Rc<Catalog> {
        self.current.borrow().clone()
    }

    /// `SKILL.md` files read from the workspace since the start.
    pub fn workspace_reads(&self) -> u64 {
        self.reads.get()
    }

    /// One range scan over the skills folder; each folder whose files' sizes and mtimes
    /// changed since the last scan has its `SKILL.md` read again.
    async fn refresh_workspace(&self, ws: &Workspace) -> Result<Vec<Entry>, SkillError> {
        let dir = format!("/{}", self.config.dir.trim_matches('/'));
        let dir = dir.trim_end_matches('/');
        let mut folders: BTreeMap<String, Vec<(String, u64, i64)>> = BTreeMap::new();
        for (path, size, mtime) in ws.files_below(if dir.is_empty() { "/" } else { dir })? {
            let Some(rel) = path.strip_prefix(dir).and_then(|r| r.strip_prefix('/')) else {
                continue;
            };
            let Some((folder, path)) = rel.split_once('/') else { continue };
            folders.entry(folder.to_owned()).or_default().push((path.to_owned(), size, mtime));
        }
        folders.retain(|_, files| files.iter().any(|(p, _, _)| p == "SKILL.md"));
        self.workspace.borrow_mut().retain(|folder, _| folders.contains_key(folder));
        let mut out = Vec::new();
        for (folder, files) in folders {
            let sizes: Vec<String> = files.iter().map(|(p, s, m)| format!("{p}:{s}:{m}")).collect();
            let digest = fnv(&sizes.iter().map(|s| s.as_bytes()).collect::<Vec<_>>());
            let cached = self
                .workspace
                .borrow()
                .get(&folder)
                .filter(|c| c.digest == digest)
                .map(|c| c.entry.clone());
            if let Some(entry) = cached {
                out.push(entry);
                continue;
            }
            let folder_path = format!("{dir}/{folder}");
            self.reads.set(self.reads.get() + 1);
            let entry = match ws.read_file(&format!("{folder_path}/SKILL.md")).await {
                Ok(Some(raw)) => {
                    let resources = files
                        .iter()
                        .filter(|(p, _, _)| p != "SKILL.md" && resources::check_path(p).is_ok())
                        .map(|(p, s, _)| ResourceInfo::new(p, *s))
                        .collect();
                    build(
                        Source::Workspace,
                        &folder,
                        &raw,
                        format!("{digest:016x}"),
                        resources,
                        Files::Workspace(folder_path),
                    )
                }
                Ok(None) => {
                    Err(refusal(Source::Workspace, &folder, "SKILL.md is unreadable".into()))
                }
                Err(e) => Err(refusal(Source::Workspace, &folder, e.to_string())),
            };
            self.workspace.borrow_mut().insert(folder, Cached { digest, entry: entry.clone() });
            out.push(entry);
        }
        Ok(out)
    }

    /// The R2 skills, listed again when the last listing is older than [`R2_REFRESH_MS`].
    async fn refresh_r2(&self, blobs: Option<&dyn BlobStore>, now_ms: f64) -> Vec<Entry> {
        let Some(prefix) = self.config.r2_prefix.as_deref() else { return Vec::new() };
        if let Some((at, entries)) = self.r2.borrow().as_ref() {
            if now_ms - at < R2_REFRESH_MS {
                return entries.clone();
            }
        }
        let entries = match blobs {
            None => vec![refusal(
                Source::R2,
                prefix,
                "no R2 bucket is bound to the agent (binding WORKSPACE_R2)".into(),
            )]
            .into_iter()
            .map(Err)
            .collect(),
            Some(store) => match load_r2(store, prefix).await {
                Ok(entries) => entries,
                Err(e) => vec![Err(refusal(Source::R2, prefix, e.to_string()))],
            },
        };
        *self.r2.borrow_mut() = Some((now_ms, entries.clone()));
        entries
    }

    /// The system prompt with the catalog appended (unchanged without valid skills).
    pub fn system_prompt(&self, base: &str) -> String {
        match self.catalog().prompt() {
            Some(catalog) if base.is_empty() => catalog,
            Some(catalog) => format!("{base}\n\n{catalog}"),
            None => base.to_owned(),
        }
    }

    /// The skill tools over the current catalog; none without a valid skill, and no
    /// `run_skill_script` without a bash engine or a sandbox.
    pub fn tools(&self, ws: Rc<Workspace>, runners: ScriptRunners) -> Vec<ToolRef> {
        tools::skill_tools(self.catalog(), ws, runners, self.activated.clone())
    }

    /// Starts a turn: the skills activated in `messages` (the transcript) are the active
    /// ones; `activate_skill` adds to them as it runs.
    pub fn note_activations(&self, messages: &[crate::protocol::message::UIMessage]) {
        *self.activated.borrow_mut() = gate::activated_in(messages);
    }

    /// Beyond Think: while an activated skill declares `allowed-tools`, a call of any other
    /// tool needs a human's approval. The skill tools themselves are always allowed.
    pub fn needs_approval(&self, tool_name: &str) -> bool {
        gate::needs_approval(&self.catalog(), &self.activated.borrow(), tool_name)
    }
}

/// Lists `prefix` and reads every skill folder under it into memory.
async fn load_r2(store: &dyn BlobStore, prefix: &str) -> Result<Vec<Entry>, SkillError> {
    let prefix = if prefix.is_empty() || prefix.ends_with('/') {
        prefix.to_owned()
    } else {
        format!("{prefix}/")
    };
    let mut keys = store.list(&prefix).await?;
    crate::platform::sort::sort(&mut keys);
    let mut folders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in &keys {
        if let Some((folder, path)) = key[prefix.len()..].split_once('/') {
            folders.entry(folder.to_owned()).or_default().push(path.to_owned());
        }
    }
    let mut out = Vec::new();
    for (folder, paths) in folders {
        if !paths.iter().any(|p| p == "SKILL.md") {
            continue;
        }
        let mut skill_md = None;
        let mut files = BTreeMap::new();
        for path in paths {
            let key = format!("{prefix}{folder}/{path}");
            let bytes = store.get(&key).await?.ok_or(SkillError::Missing(key))?;
            if path == "SKILL.md" {
                skill_md = Some(String::from_utf8_lossy(&bytes).into_owned());
            } else {
                files.insert(path, bytes);
            }
        }
        out.push(load_memory(Source::R2, &folder, &skill_md.unwrap_or_default(), files));
    }
    Ok(out)
}
