//! Extensions: sandboxed JavaScript, written by the app (`AgentSpec::extension`) or by the
//! model (`load_extension`), that adds tools, context blocks and hooks at run time (Think's
//! `ExtensionManager`). The operations of one load run in one Code Mode sandbox isolate,
//! entered again for each (a fresh one after a crash or a timeout, see [`isolate`]); the
//! isolate reaches the agent only through the `host` object, whose every call [`bridge`]
//! checks against the manifest's permissions, and the network only through the host's
//! gateway, which lets through just the hosts the manifest lists
//! ([`crate::net::grant`]).
//!
//! Loaded extensions are stored in SQLite with what their source describes, so they come
//! back after a restart without running anything ([`store`]); the app's static ones are
//! described again at every start and come first.

pub mod bridge;
pub mod hooks;
pub mod isolate;
pub mod manifest;
pub mod store;
pub mod tools;

#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde::Serialize;
use serde_json::Value;

pub use crate::net::grant::{check_request, GatewayError, HostPattern, NetworkGrant};
pub use bridge::{BridgeEnv, HostBridge, PermissionError};
pub use manifest::{sanitize_name, HookName, Manifest, Permissions, WorkspaceAccess};

use crate::codemode::Sandbox;
use crate::store::{Sql, StoreError};
use crate::tools::schema::InputValidator;
use crate::tools::{DynamicTool, ToolError, ToolRef};
use isolate::{Description, Op, Pass};

/// The largest source accepted.
pub const MAX_SOURCE_BYTES: usize = 512 * 1024;
/// Think's time limit of one tool call.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 30_000;
/// Think's time limit of one hook.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 5_000;
/// The largest tool or hook result, in bytes of JSON.
pub const MAX_RESULT_BYTES: usize = 1_000_000;
/// Most extension isolates in flight per object (the platform's Worker Loader limit); more
/// passes wait in order.
pub const MAX_ISOLATES_IN_FLIGHT: usize = 10;

/// Why an extension could not be loaded, unloaded or run. The text is what the model (as
/// a tool error) or the app (as an `rpc` error) is told.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ExtensionError {
    /// The manifest is not valid.
    InvalidManifest(String),
    /// The source does not load or does not describe valid tools.
    InvalidSource(String),
    /// An extension of this name is loaded.
    AlreadyLoaded(String),
    /// No extension of this name is loaded.
    NotLoaded(String),
    /// The extension comes from the app's spec and cannot be unloaded at run time.
    Static(String),
    /// There is no sandbox to run extensions in.
    Unavailable(String),
    /// The extension's code threw, or its isolate failed.
    Failed(String),
    /// It ran past its time limit (ms).
    Timeout(u64),
    /// Its result was too large.
    TooLarge {
        /// The result's size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The database failed.
    Store(StoreError),
}

impl std::fmt::Display for ExtensionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExtensionError::InvalidManifest(e) => write!(f, "Invalid extension manifest: {e}"),
            ExtensionError::InvalidSource(e) => write!(f, "Invalid extension source: {e}"),
            ExtensionError::AlreadyLoaded(n) => {
                write!(f, "Extension \"{n}\" is already loaded. Unload it first.")
            }
            ExtensionError::NotLoaded(n) => write!(f, "Extension \"{n}\" is not loaded."),
            ExtensionError::Static(n) => write!(
                f,
                "Extension \"{n}\" is part of the agent's configuration and cannot be unloaded."
            ),
            ExtensionError::Unavailable(e) => write!(f, "Extensions are unavailable: {e}"),
            ExtensionError::Failed(e) => f.write_str(e),
            ExtensionError::Timeout(ms) => write!(f, "The extension timed out after {ms} ms"),
            ExtensionError::TooLarge { bytes, max } => {
                write!(f, "The extension's result is {bytes} bytes, over the limit of {max}")
            }
            ExtensionError::Store(e) => write!(f, "Storing the extension failed: {e}"),
        }
    }
}

impl std::error::Error for ExtensionError {}

impl From<StoreError> for ExtensionError {
    fn from(e: StoreError) -> Self {
        ExtensionError::Store(e)
    }
}

impl From<ExtensionError> for ToolError {
    fn from(e: ExtensionError) -> Self {
        ToolError::Failed(e.to_string())
    }
}

/// Who must approve a `load_extension` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadApproval {
    /// A load asking for network hosts or workspace `read-write` waits for a human.
    #[default]
    Permissions,
    /// Every load waits for a human.
    Always,
    /// No load waits (the app trusts the model with any permission).
    Never,
}

/// The limits and policies of extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionOptions {
    /// Whether extensions run at all (`THINK_EXTENSIONS=false` switches them off): off, no
    /// stored or static extension is offered, hooked in or shown, and their callables
    /// refuse; the stored ones are kept for when it is on again.
    pub enabled: bool,
    /// Whether the model gets `load_extension` and `list_extensions` (an app that wants only
    /// its own extensions turns this off).
    pub model_tools: bool,
    /// Who approves `load_extension`.
    pub approval: LoadApproval,
    /// Time limit of one tool call (and of loading a source).
    pub tool_timeout_ms: u64,
    /// Time limit of one hook.
    pub hook_timeout_ms: u64,
    /// The largest result, in bytes of JSON.
    pub max_result_bytes: usize,
    /// Whether listed hosts may be private or loopback addresses.
    pub allow_private_network: bool,
}

impl Default for ExtensionOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            model_tools: true,
            approval: LoadApproval::Permissions,
            tool_timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
            hook_timeout_ms: DEFAULT_HOOK_TIMEOUT_MS,
            max_result_bytes: MAX_RESULT_BYTES,
            allow_private_network: false,
        }
    }
}

/// Why a `THINK_EXTENSIONS` value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionsSettingError(pub String);

impl std::fmt::Display for ExtensionsSettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ExtensionsSettingError {}

impl ExtensionOptions {
    /// Reads `THINK_EXTENSIONS`: empty or `true` (the defaults), `false` (extensions off), or `{"approval": "permissions"|"always"|"never", "toolTimeout": ms,
    /// "hookTimeout": ms}`.
    pub fn from_setting(value: &str) -> Result<Self, ExtensionsSettingError> {
        let bad = |m: String| ExtensionsSettingError(m);
        let mut options = Self::default();
        match value.trim() {
            "" | "true" => return Ok(options),
            "false" => {
                options.enabled = false;
                return Ok(options);
            }
            _ => {}
        }
        let v: Value = serde_json::from_str(value)
            .map_err(|e| bad(format!("expected true, false or a JSON object: {e}")))?;
        let obj = v.as_object().ok_or_else(|| bad("expected a JSON object".into()))?;
        for (key, val) in obj {
            match key.as_str() {
                "approval" => {
                    options.approval = match val.as_str() {
                        Some("permissions") => LoadApproval::Permissions,
                        Some("always") => LoadApproval::Always,
                        Some("never") => LoadApproval::Never,
                        _ => {
                            return Err(bad(format!(
                                "approval must be permissions, always or never, not {val}"
                            )))
                        }
                    }
                }
                "toolTimeout" | "hookTimeout" => {
                    let ms = val
                        .as_u64()
                        .filter(|ms| *ms > 0)
                        .ok_or_else(|| bad(format!("{key} must be a positive number of ms")))?;
                    if key == "toolTimeout" {
                        options.tool_timeout_ms = ms;
                    } else {
                        options.hook_timeout_ms = ms;
                    }
                }
                other => return Err(bad(format!("unknown key {other:?}"))),
            }
        }
        Ok(options)
    }
}

/// One loaded extension.
pub struct Loaded {
    /// Its manifest.
    pub manifest: Manifest,
    /// Its source.
    pub source: String,
    /// What the source described.
    pub description: Description,
    /// The hooks it runs.
    pub hooks: Vec<HookName>,
    /// From the app's spec (not stored, cannot be unloaded).
    pub is_static: bool,
    /// The key of the isolate its operations share ([`isolate::isolate_key`]); `None` runs
    /// each in a fresh isolate (no store to keep a load token in).
    pub isolate: Option<String>,
}

impl Loaded {
    fn full_names(&self) -> Vec<String> {
        let prefix = self.manifest.prefix();
        self.description.tools.iter().map(|t| format!("{prefix}_{}", t.name)).collect()
    }
}

/// What `listExtensions()` and `list_extensions` report of one extension.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its description.
    pub description: Option<String>,
    /// Its tools' full names.
    pub tools: Vec<String>,
    /// Its context blocks' labels.
    pub context_labels: Vec<String>,
    /// Its permissions.
    pub permissions: Permissions,
    /// The hooks it runs.
    pub hooks: Vec<HookName>,
    /// Hooks that are off because a run of theirs ended with the process (locally: code that
    /// exhausted memory), until the extension is loaded again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stopped_hooks: Vec<HookName>,
    /// From the app's spec.
    #[serde(rename = "static")]
    pub is_static: bool,
}

impl From<&Loaded> for ExtensionInfo {
    fn from(l: &Loaded) -> Self {
        ExtensionInfo {
            name: l.manifest.name.clone(),
            version: l.manifest.version.clone(),
            description: l.manifest.description.clone(),
            tools: l.full_names(),
            context_labels: l.manifest.context_labels(),
            permissions: l.manifest.permissions.clone(),
            hooks: l.hooks.clone(),
            stopped_hooks: Vec::new(),
            is_static: l.is_static,
        }
    }
}

/// The extensions of one agent instance.
pub struct Extensions {
    sandbox: Option<Rc<dyn Sandbox>>,
    store: Option<store::ExtensionStore>,
    env: BridgeEnv,
    options: ExtensionOptions,
    statics: Vec<(Manifest, String)>,
    loaded: RefCell<Vec<Rc<Loaded>>>,
    started: futures::lock::Mutex<bool>,
    passes: Cell<u64>,
    slots: crate::codemode::sandbox::Slots,
    /// (extension, hook) pairs whose run ended with the process; skipped until a reload.
    stopped_hooks: RefCell<Vec<(String, HookName)>>,
    /// The load token of the app's static extensions in this instance (they are described
    /// again at every start, so their isolates are this instance's own).
    static_token: RefCell<Option<String>>,
}

impl Extensions {
    /// The extensions over `sql`: the stored ones are registered at once (from what they
    /// described when loaded); `statics` are described by [`Extensions::ensure_started`].
    pub fn new(
        sql: Rc<dyn Sql>,
        sandbox: Option<Rc<dyn Sandbox>>,
        env: BridgeEnv,
        options: ExtensionOptions,
        statics: Vec<(Manifest, String)>,
    ) -> Self {
        let store = store::ExtensionStore::open(sql)
            .map_err(|e| crate::platform::log(&format!("think-rs: extensions store: {e}")))
            .ok();
        let this = Self {
            sandbox,
            store,
            env,
            options,
            statics,
            loaded: RefCell::default(),
            started: futures::lock::Mutex::new(false),
            passes: Cell::new(0),
            slots: crate::codemode::sandbox::Slots::new(MAX_ISOLATES_IN_FLIGHT),
            stopped_hooks: RefCell::default(),
            static_token: RefCell::default(),
        };
        this.note_stopped_hooks();
        this.restore();
        this
    }

    /// Reads which hooks a dead process was running (see [`store::ExtensionStore::stopped_hooks`]).
    /// Locally a hook whose code exhausts memory stops the whole runtime, and it would stop it
    /// again on every turn; on Cloudflare the platform ends only its isolate and the hook
    /// fails. Either way the turn goes on without it.
    fn note_stopped_hooks(&self) {
        let Some(store) = &self.store else { return };
        match store.stopped_hooks() {
            Ok(pairs) => {
                let mut stopped = self.stopped_hooks.borrow_mut();
                for (extension, hook) in pairs {
                    let Some(hook) = HookName::parse(&hook) else { continue };
                    crate::platform::log(&format!(
                        "think-rs: extension {extension:?} {}: a run ended with the runtime (most likely its code exhausted memory); the hook is off until the extension is loaded again",
                        hook.as_str()
                    ));
                    stopped.push((extension, hook));
                }
            }
            Err(e) => crate::platform::log(&format!("think-rs: extensions: {e}")),
        }
    }

    fn is_stopped(&self, extension: &str, hook: HookName) -> bool {
        self.stopped_hooks.borrow().iter().any(|(e, h)| e == extension && *h == hook)
    }

    fn forget_stopped(&self, extension: &str) {
        self.stopped_hooks.borrow_mut().retain(|(e, _)| e != extension);
        if let Some(store) = &self.store {
            if let Err(e) = store.clear_hook_runs(extension) {
                crate::platform::log(&format!("think-rs: extensions: {e}"));
            }
        }
    }

    /// The options in force.
    pub fn options(&self) -> &ExtensionOptions {
        &self.options
    }

    fn restore(&self) {
        let Some(store) = &self.store else { return };
        let rows = match store.all() {
            Ok(rows) => rows,
            Err(e) => return crate::platform::log(&format!("think-rs: extensions: {e}")),
        };
        for row in rows {
            let registered = row.and_then(|(manifest, source, description, token)| {
                let hooks = hooks_of(&manifest, &description)?;
                // A row stored before load tokens gets one now.
                let token = token.or_else(|| {
                    let token = store.new_token().ok()?;
                    store.set_token(&manifest.name, &token).ok()?;
                    Some(token)
                });
                let isolate = token.map(|t| self.isolate_key(&manifest, &source, &t));
                self.register(Loaded {
                    manifest,
                    source,
                    description,
                    hooks,
                    is_static: false,
                    isolate,
                })
            });
            if let Err(e) = registered {
                crate::platform::log(&format!("think-rs: a stored extension was skipped: {e}"));
            }
        }
    }

    /// Loads the app's static extensions (once per instance), before their first use.
    pub async fn ensure_started(&self) {
        let mut started = self.started.lock().await;
        if *started {
            return;
        }
        *started = true;
        let mut placed_statics = 0;
        for (manifest, source) in &self.statics {
            let token = self.static_token();
            let loaded = self.describe(manifest.clone(), source.clone(), true, token).await;
            let placed = loaded.and_then(|l| {
                if let Some(dup) = self.get(&l.manifest.name) {
                    // A stored extension of the same name gives way to the app's own.
                    self.loaded.borrow_mut().retain(|x| !Rc::ptr_eq(x, &dup));
                    self.drop_blocks(&dup.manifest);
                }
                self.check_free(&l.manifest)?;
                self.add_blocks(&l.manifest)?;
                self.loaded.borrow_mut().insert(placed_statics, Rc::new(l));
                placed_statics += 1;
                Ok(())
            });
            if let Err(e) = placed {
                crate::platform::log(&format!(
                    "think-rs: static extension {:?} was not loaded: {e}",
                    manifest.name
                ));
            }
        }
    }

    /// The loaded extension of that name.
    pub fn get(&self, name: &str) -> Option<Rc<Loaded>> {
        self.loaded.borrow().iter().find(|l| l.manifest.name == name).cloned()
    }

    /// Every loaded extension, static ones first, then in load order.
    pub fn list(&self) -> Vec<ExtensionInfo> {
        let stopped = self.stopped_hooks.borrow();
        self.loaded
            .borrow()
            .iter()
            .map(|l| {
                let mut info = ExtensionInfo::from(l.as_ref());
                info.stopped_hooks =
                    stopped.iter().filter(|(e, _)| *e == info.name).map(|(_, h)| *h).collect();
                info
            })
            .collect()
    }

    fn check_free(&self, manifest: &Manifest) -> Result<(), ExtensionError> {
        if self.get(&manifest.name).is_some() {
            return Err(ExtensionError::AlreadyLoaded(manifest.name.clone()));
        }
        let prefix = manifest.prefix();
        if let Some(other) = self.loaded.borrow().iter().find(|l| l.manifest.prefix() == prefix) {
            return Err(ExtensionError::InvalidManifest(format!(
                "its tool prefix {prefix:?} is taken by extension {:?}",
                other.manifest.name
            )));
        }
        Ok(())
    }

    fn register(&self, loaded: Loaded) -> Result<(), ExtensionError> {
        self.check_free(&loaded.manifest)?;
        self.add_blocks(&loaded.manifest)?;
        self.loaded.borrow_mut().push(Rc::new(loaded));
        Ok(())
    }

    fn add_blocks(&self, manifest: &Manifest) -> Result<(), ExtensionError> {
        let blocks = manifest.context_blocks();
        for (i, block) in blocks.iter().enumerate() {
            if let Err(e) = self.env.session.add_block(block.clone()) {
                for added in &blocks[..i] {
                    self.env.session.remove_block(&added.label);
                }
                return Err(ExtensionError::InvalidManifest(e.to_string()));
            }
        }
        Ok(())
    }

    fn drop_blocks(&self, manifest: &Manifest) {
        for label in manifest.context_labels() {
            self.env.session.remove_block(&label);
        }
    }

    fn pass<'a>(&'a self, loaded: &'a Loaded, timeout_ms: u64) -> Result<Pass<'a>, ExtensionError> {
        self.pass_for(&loaded.manifest, &loaded.source, timeout_ms, loaded.isolate.clone())
    }

    /// The isolate key of a load of `manifest` and `source` with `token`, under the options
    /// in force.
    fn isolate_key(&self, manifest: &Manifest, source: &str, token: &str) -> String {
        let o = &self.options;
        let limits = format!(
            "{} {} {} {}",
            o.allow_private_network, o.tool_timeout_ms, o.hook_timeout_ms, o.max_result_bytes
        );
        isolate::isolate_key(manifest, source, &limits, token)
    }

    /// The load token of the static extensions, made once per instance.
    fn static_token(&self) -> Option<String> {
        let mut token = self.static_token.borrow_mut();
        if token.is_none() {
            *token = self.store.as_ref().and_then(|s| s.new_token().ok());
        }
        token.clone()
    }

    fn pass_for<'a>(
        &'a self,
        manifest: &'a Manifest,
        source: &'a str,
        timeout_ms: u64,
        reuse: Option<String>,
    ) -> Result<Pass<'a>, ExtensionError> {
        let sandbox = self.sandbox.as_deref().ok_or_else(|| {
            ExtensionError::Unavailable("the agent has no sandbox (the LOADER binding)".into())
        })?;
        let hosts = &manifest.permissions.network;
        Ok(Pass {
            sandbox,
            source,
            network: (!hosts.is_empty()).then(|| NetworkGrant {
                hosts: hosts.clone(),
                allow_private: self.options.allow_private_network,
            }),
            bridge: Rc::new(HostBridge::new(
                manifest.permissions.clone(),
                manifest.context_labels(),
                self.env.clone(),
            )),
            timeout_ms,
            max_result_bytes: self.options.max_result_bytes,
            reuse,
        })
    }

    fn next_id(&self, manifest: &Manifest) -> String {
        self.passes.set(self.passes.get() + 1);
        format!("ext_{}_{}", manifest.prefix(), self.passes.get())
    }

    /// Checks the manifest, runs the source's `describe` (in the isolate of the load with
    /// `token`, which its calls then find warm) and checks what it describes.
    async fn describe(
        &self,
        manifest: Manifest,
        source: String,
        is_static: bool,
        token: Option<String>,
    ) -> Result<Loaded, ExtensionError> {
        manifest.validate()?;
        if source.len() > MAX_SOURCE_BYTES {
            return Err(ExtensionError::InvalidSource(format!(
                "the source is {} bytes, over the limit of {MAX_SOURCE_BYTES}",
                source.len()
            )));
        }
        if source.trim().is_empty() {
            return Err(ExtensionError::InvalidSource("the source is empty".into()));
        }
        let isolate = token.map(|t| self.isolate_key(&manifest, &source, &t));
        let pass =
            self.pass_for(&manifest, &source, self.options.tool_timeout_ms, isolate.clone())?;
        let id = self.next_id(&manifest);
        let _slot = self.slots.acquire().await;
        let value = isolate::run(&pass, Op::Describe, id).await.map_err(|e| match e {
            ExtensionError::Failed(m) => ExtensionError::InvalidSource(m),
            other => other,
        })?;
        let description: Description = serde_json::from_value(value)
            .map_err(|e| ExtensionError::InvalidSource(format!("describe() returned {e}")))?;
        check_description(&manifest, &description)?;
        let hooks = hooks_of(&manifest, &description)?;
        Ok(Loaded { manifest, source, description, hooks, is_static, isolate })
    }

    /// Loads an extension at run time (the model's `load_extension`, or the app): checks
    /// it, describes it in an isolate, registers its tools (from the next turn on) and its
    /// context blocks (now), and stores it.
    pub async fn load(
        &self,
        manifest: Manifest,
        source: String,
    ) -> Result<ExtensionInfo, ExtensionError> {
        self.ensure_started().await;
        self.check_free(&manifest)?;
        let token = self.store.as_ref().and_then(|s| s.new_token().ok());
        let loaded = self.describe(manifest, source, false, token.clone()).await?;
        // Another load of the name may have finished while this one was described.
        self.check_free(&loaded.manifest)?;
        if let Some(store) = &self.store {
            store.put(&loaded.manifest, &loaded.source, &loaded.description, token.as_deref())?;
        }
        self.forget_stopped(&loaded.manifest.name);
        let info = ExtensionInfo::from(&loaded);
        if let Err(e) = self.register(loaded) {
            if let Some(store) = &self.store {
                let _ = store.delete(&info.name);
            }
            return Err(e);
        }
        Ok(info)
    }

    /// Unloads an extension: its tools leave the next turn, its context blocks go, and its
    /// stored copy is deleted.
    pub async fn unload(&self, name: &str) -> Result<ExtensionInfo, ExtensionError> {
        self.ensure_started().await;
        let loaded = self.get(name).ok_or_else(|| ExtensionError::NotLoaded(name.to_owned()))?;
        if loaded.is_static {
            return Err(ExtensionError::Static(name.to_owned()));
        }
        if let Some(store) = &self.store {
            store.delete(name)?;
        }
        self.loaded.borrow_mut().retain(|l| !Rc::ptr_eq(l, &loaded));
        self.drop_blocks(&loaded.manifest);
        self.forget_stopped(name);
        Ok(ExtensionInfo::from(loaded.as_ref()))
    }

    /// The tools of every loaded extension, named `<prefix>_<tool>` and described
    /// `[<name>] <description>`.
    pub fn tools(self: &Rc<Self>) -> Vec<ToolRef> {
        let mut out = Vec::new();
        for loaded in self.loaded.borrow().iter() {
            let prefix = loaded.manifest.prefix();
            for t in &loaded.description.tools {
                let full = format!("{prefix}_{}", t.name);
                let description = format!("[{}] {}", loaded.manifest.name, t.description);
                let (this, loaded, name) = (self.clone(), loaded.clone(), t.name.clone());
                let tool =
                    DynamicTool::new(&full, &description, t.input_schema(), move |args, _| {
                        let (this, loaded, name) = (this.clone(), loaded.clone(), name.clone());
                        async move {
                            this.call_tool(&loaded, &name, args).await.map_err(ToolError::from)
                        }
                    })
                    .running_code();
                out.push(Rc::new(tool) as ToolRef);
            }
        }
        out
    }

    /// Runs one tool of `loaded` with `args`.
    pub async fn call_tool(
        &self,
        loaded: &Rc<Loaded>,
        name: &str,
        args: Value,
    ) -> Result<Value, ExtensionError> {
        let live = self.get(&loaded.manifest.name).is_some_and(|l| Rc::ptr_eq(&l, loaded));
        if !live {
            return Err(ExtensionError::Failed(format!(
                "Extension \"{}\" has been unloaded. Tool \"{}_{name}\" is no longer available.",
                loaded.manifest.name,
                loaded.manifest.prefix()
            )));
        }
        let pass = self.pass(loaded, self.options.tool_timeout_ms)?;
        let id = self.next_id(&loaded.manifest);
        let _slot = self.slots.acquire().await;
        isolate::run(&pass, Op::Tool { name, args }, id).await
    }

    /// The loaded extensions that run `hook`, in order, less those whose run of it ended
    /// with the process.
    pub fn subscribers(&self, hook: HookName) -> Vec<Rc<Loaded>> {
        self.loaded
            .borrow()
            .iter()
            .filter(|l| l.hooks.contains(&hook) && !self.is_stopped(&l.manifest.name, hook))
            .cloned()
            .collect()
    }

    /// Runs `hook` of `loaded` on `context`, within the hook time limit.
    pub async fn run_hook(
        &self,
        loaded: &Loaded,
        hook: HookName,
        context: Value,
    ) -> Result<Value, ExtensionError> {
        let pass = self.pass(loaded, self.options.hook_timeout_ms)?;
        let id = self.next_id(&loaded.manifest);
        let _slot = self.slots.acquire().await;
        let log = |e: ExtensionError| crate::platform::log(&format!("think-rs: extensions: {e}"));
        let run = self.store.as_ref().and_then(|store| {
            let run = store.hook_started(&loaded.manifest.name, hook.as_str());
            Some((store, run.map_err(log).ok()?))
        });
        let result = isolate::run(&pass, Op::Hook { name: hook.as_str(), context }, id).await;
        if let Some((store, run)) = run {
            store.hook_finished(run).unwrap_or_else(log);
        }
        result
    }
}

/// The hooks `loaded` runs: the hook functions its source defines, narrowed to the
/// manifest's `hooks` when it lists any. A function of an unknown name is an error.
fn hooks_of(manifest: &Manifest, d: &Description) -> Result<Vec<HookName>, ExtensionError> {
    let mut hooks = Vec::new();
    for name in &d.hooks {
        let hook = HookName::parse(name).ok_or_else(|| {
            ExtensionError::InvalidSource(format!(
                "hooks.{name} is not a hook (beforeTurn, beforeToolCall, afterToolCall, \
                 onStepFinish)"
            ))
        })?;
        if manifest.hooks.is_empty() || manifest.hooks.contains(&hook) {
            hooks.push(hook);
        }
    }
    Ok(hooks)
}

/// Checks the described tools: names usable by every provider, properties an object,
/// `required` a list of names, and a schema the host's validator compiles.
fn check_description(manifest: &Manifest, d: &Description) -> Result<(), ExtensionError> {
    let bad = |m: String| ExtensionError::InvalidSource(m);
    let prefix = manifest.prefix();
    for t in &d.tools {
        let full = format!("{prefix}_{}", t.name);
        if !manifest::valid_tool_name(&full) {
            return Err(bad(format!(
                "tool {:?}: its full name {full:?} must be 1-{} letters, digits, _ or -",
                t.name,
                manifest::MAX_TOOL_NAME_CHARS
            )));
        }
        if !t.parameters.is_object() {
            return Err(bad(format!(
                "tools.{}.parameters must be an object of JSON-Schema properties",
                t.name
            )));
        }
        let required_ok = t.required.as_array().is_some_and(|r| r.iter().all(|n| n.is_string()));
        if !required_ok {
            return Err(bad(format!("tools.{}.required must be a list of property names", t.name)));
        }
        InputValidator::new(&t.input_schema())
            .map_err(|e| bad(format!("tools.{}: its schema does not compile: {e}", t.name)))?;
    }
    Ok(())
}
