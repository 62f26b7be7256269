//! Checkpoints as the app and the tabs see them (issue 21): one taken at each turn's start,
//! before its user message is stored, and the callables `checkpoint(label?)`, `checkpoints()`,
//! `diffCheckpoint(id)`, `rewind(id, {files?, transcript?})` and `forkSession(id, newName)`.
//! The storage (copy-on-write journal, restore, export pages) is `crate::checkpoint`; this
//! file decides when to take one, refuses a rewind while a turn runs, tells every tab what a
//! rewind changed, and carries a fork's pages to the new instance over a [`ForkLink`].

use futures::future::LocalBoxFuture;
use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::capability::Capability;
use super::{Agent, CallError};
use crate::checkpoint::{CheckpointError, Checkpoints, ExportPage, Retention, RewindScope};
use crate::protocol::frames;
use crate::store::{Sql, StoreError};
use crate::workspace::Workspace;

/// Config key set on an instance while a fork is being imported into it: `{token, at}`,
/// `at` being the time of the claim's last progress (its `begin` or latest page).
const CONFIG_FORK_IMPORT: &str = "forkImport";

/// How long a fork's claim may make no progress before another fork may take the instance
/// over (discarding the half-imported state): an interrupted fork never blocks it for good.
pub const FORK_CLAIM_STALE_MS: f64 = 5.0 * 60.0 * 1000.0;

/// A fork's claim on the instance it imports into.
#[derive(serde::Serialize, Deserialize)]
struct ForkClaim {
    token: String,
    /// Last progress, ms since the epoch.
    at: f64,
}

/// How an instance reaches another instance of its class by name, to copy a checkpoint into
/// it (`forkSession`). The Worker's is Durable Object RPC (`forkRpc` in `js/entry.mjs`).
#[async_trait(?Send)]
pub trait ForkLink {
    /// Calls `method` (`begin`, `page`, `finish`) of instance `name` with `arg`; its answer.
    async fn call(&self, name: &str, method: &str, arg: &Value) -> Result<Value, ForkError>;
}

/// Why a fork or a rewind could not be done.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ForkError {
    /// This platform cannot reach other instances.
    Unavailable,
    /// The target instance already holds a conversation or files.
    NotEmpty(String),
    /// The call to the other instance failed.
    Failed(String),
    /// The request was malformed.
    BadRequest(String),
}

impl std::fmt::Display for ForkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ForkError::Unavailable => f.write_str("forkSession: this platform cannot reach other agent instances"),
            ForkError::NotEmpty(name) => write!(
                f,
                "forkSession: the agent instance {name:?} is not empty (it has messages, files or checkpoints); fork into a new name"
            ),
            ForkError::Failed(m) => write!(f, "forkSession: {m}"),
            ForkError::BadRequest(m) => write!(f, "forkSession: {m}"),
        }
    }
}

impl std::error::Error for ForkError {}

impl From<ForkError> for CallError {
    fn from(e: ForkError) -> Self {
        match e {
            ForkError::BadRequest(_) => CallError::BadArguments(e.to_string()),
            ForkError::Unavailable => CallError::Unavailable(e.to_string()),
            _ => CallError::Failed(e.to_string()),
        }
    }
}

impl From<CheckpointError> for CallError {
    fn from(e: CheckpointError) -> Self {
        CallError::Failed(e.to_string())
    }
}

/// `rewind`'s options: `{files?: true, transcript?: true}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RewindOptions {
    #[serde(default = "yes")]
    files: bool,
    #[serde(default = "yes")]
    transcript: bool,
}

fn yes() -> bool {
    true
}

/// The text of a rewind refused while a turn runs.
pub const REWIND_REFUSED: &str =
    "rewind: a turn is running; stop it (or wait for it to end) and rewind again";

/// A fork's calls on the receiving instance.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForkCall {
    token: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    page: Option<ExportPage>,
}

/// Checkpoints as a capability: the store (its tables and the journal's triggers, made as
/// the instance starts), the link a fork goes over, and the callables.
pub(super) struct CheckpointsCapability {
    workspace: Rc<Workspace>,
    retention: Retention,
    /// The store, once made.
    store: RefCell<Option<Rc<Checkpoints>>>,
    /// How `forkSession` reaches the new instance (DO RPC in the Worker).
    link: RefCell<Option<Rc<dyn ForkLink>>>,
}

impl CheckpointsCapability {
    /// Checkpoints of `workspace` (and the transcript in its database), kept as `retention`
    /// says.
    pub(super) fn new(workspace: Rc<Workspace>, retention: Retention) -> Self {
        Self { workspace, retention, store: RefCell::default(), link: RefCell::default() }
    }

    /// The store, made on first use if making it as the instance started failed.
    fn store(&self) -> Result<Rc<Checkpoints>, CheckpointError> {
        if let Some(store) = self.store.borrow().as_ref() {
            return Ok(store.clone());
        }
        let store = Rc::new(Checkpoints::with_retention(self.workspace.clone(), self.retention)?);
        *self.store.borrow_mut() = Some(store.clone());
        Ok(store)
    }
}

#[async_trait(?Send)]
impl Capability for CheckpointsCapability {
    fn name(&self) -> &'static str {
        "checkpoints"
    }

    fn callables(&self) -> &[&'static str] {
        &["checkpoint", "checkpoints", "diffCheckpoint", "rewind", "forkSession"]
    }

    async fn call(
        &self,
        agent: &Rc<Agent>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, CallError> {
        let id = || {
            args.first().and_then(Value::as_str).ok_or_else(|| {
                CallError::BadArguments(format!("{method}: the checkpoint id must be a string"))
            })
        };
        match method {
            "checkpoint" => match args.first() {
                None | Some(Value::Null) => agent.take_checkpoint(None).await,
                Some(Value::String(label)) => agent.take_checkpoint(Some(label)).await,
                Some(_) => {
                    Err(CallError::BadArguments("checkpoint: the label must be a string".into()))
                }
            },
            "checkpoints" => {
                self.store().and_then(|c| c.list()).map(|l| json!(l)).map_err(CallError::from)
            }
            "diffCheckpoint" => {
                let id = id()?;
                Ok(json!(self.store()?.diff(id).await?))
            }
            "rewind" => match (id(), rewind_scope(args.get(1))) {
                (Ok(id), Ok(scope)) => agent.rewind(id, scope).await,
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
            "forkSession" => match (id(), args.get(1).and_then(Value::as_str)) {
                (Ok(id), Some(name)) => agent.fork_session(id, name).await.map_err(CallError::from),
                (Err(e), _) => Err(e),
                (_, None) => Err(CallError::BadArguments(
                    "forkSession: the new instance's name must be a string".into(),
                )),
            },
            _ => Err(CallError::NoSuchMethod(method.to_owned())),
        }
    }

    /// The journal's triggers must be in place before anything writes, turn or not.
    fn create_tables(&self, _sql: &dyn Sql) -> Result<(), StoreError> {
        match self.store() {
            Ok(_) => Ok(()),
            Err(CheckpointError::Store(e)) => Err(e),
            Err(e) => Err(StoreError::Sql(e.to_string())),
        }
    }
}

impl Agent {
    /// The checkpoint store over this instance's workspace and transcript.
    pub(super) fn checkpoint_store(&self) -> Result<Rc<Checkpoints>, CheckpointError> {
        self.checkpoints.store()
    }

    /// Takes the checkpoint a turn starts from, right before its user message `message_id` is
    /// stored, so rewinding to it removes that message and what followed. A failure is logged:
    /// the turn goes on without one.
    pub(super) async fn checkpoint_turn(&self, message_id: Option<&str>, label: Option<&str>) {
        let taken = match self.checkpoint_store() {
            Ok(store) => store.create(label, message_id).await,
            Err(e) => Err(e),
        };
        if let Err(e) = taken {
            self.warn("taking the turn's checkpoint failed", e);
        }
    }

    async fn take_checkpoint(&self, label: Option<&str>) -> Result<Value, CallError> {
        let info = self.checkpoint_store()?.create(label, None).await?;
        Ok(json!(info))
    }

    /// A turn is streaming, waiting for its slot, recovering, or about to auto-continue.
    fn turn_in_progress(&self) -> bool {
        let rt = self.rt.borrow();
        rt.active.is_some() || rt.queued > 0 || rt.recovering || rt.continuation.pending
    }

    /// `rewind(id, scope)`: restores checkpoint `id` (files, transcript or both, in one
    /// transaction, after taking an undo checkpoint), then tells every tab the new message
    /// list and the restored paths. Refused while a turn runs; holding the turn slot keeps a
    /// new turn from starting half-way.
    pub async fn rewind(self: &Rc<Self>, id: &str, scope: RewindScope) -> Result<Value, CallError> {
        let Some(_slot) = self.turn_lock.try_lock() else {
            return Err(CallError::Failed(REWIND_REFUSED.into()));
        };
        if self.turn_in_progress() {
            return Err(CallError::Failed(REWIND_REFUSED.into()));
        }
        let transcript = scope.transcript;
        let outcome = self.checkpoint_store()?.rewind(id, scope).await?;
        if transcript {
            // The summary and skill activations are derived from the transcript (the
            // summary is checked against a fingerprint of what it covers), and the ledger
            // records side effects that did happen: only stream buffers need dropping.
            if let Err(e) = self.streams().and_then(|s| s.forget_removed_messages()) {
                self.warn("dropping the rewound streams failed", e);
            }
            self.broadcast_transcript(None);
        }
        if !outcome.paths.is_empty() {
            let max = super::files::MAX_PUSHED_PATHS;
            let paths = &outcome.paths[..outcome.paths.len().min(max)];
            self.broadcast(&frames::WorkspaceChanged::new(paths, outcome.paths.len() > max), None);
        }
        Ok(json!(outcome))
    }

    /// `forkSession(id, newName)`: copies checkpoint `id` (files and transcript) into the
    /// empty instance `newName` of this class, page by page; this instance keeps its state.
    pub async fn fork_session(&self, id: &str, new_name: &str) -> Result<Value, ForkError> {
        let new_name = new_name.trim();
        if new_name.is_empty() {
            return Err(ForkError::BadRequest("the new instance's name is empty".into()));
        }
        if new_name == self.name() {
            return Err(ForkError::NotEmpty(new_name.to_owned()));
        }
        let link = self.checkpoints.link.borrow().clone().ok_or(ForkError::Unavailable)?;
        let store = self.checkpoint_store().map_err(|e| ForkError::Failed(e.to_string()))?;
        // Export from a checkpoint that exists before reaching out to the new instance.
        let first =
            store.export_page(id, None).await.map_err(|e| ForkError::Failed(e.to_string()))?;
        let token = crate::platform::random_id(self.deps.clock.as_ref(), 16);
        link.call(new_name, "begin", &json!({"token": token, "name": new_name})).await?;
        let mut page = first;
        let mut pages = 0u32;
        loop {
            let next = page.next.clone();
            link.call(new_name, "page", &json!({"token": token, "page": page})).await?;
            pages += 1;
            let Some(cursor) = next else { break };
            page = store
                .export_page(id, Some(&cursor))
                .await
                .map_err(|e| ForkError::Failed(e.to_string()))?;
        }
        let done = link.call(new_name, "finish", &json!({"token": token})).await?;
        Ok(json!({"name": new_name, "checkpoint": id, "pages": pages, "imported": done}))
    }

    /// The receiving side of a fork (DO RPC `forkRpc(method, json)`): `begin` claims this
    /// instance if it is empty, `page` imports one page, `finish` tells the tabs.
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn fork_rpc<'a>(
        self: &'a Rc<Self>,
        method: &'a str,
        arg: &'a str,
    ) -> LocalBoxFuture<'a, Result<Value, ForkError>> {
        Box::pin(self.fork_rpc_inner(method, arg))
    }

    /// The body of [`Self::fork_rpc`].
    async fn fork_rpc_inner(self: &Rc<Self>, method: &str, arg: &str) -> Result<Value, ForkError> {
        let call: ForkCall =
            serde_json::from_str(arg).map_err(|e| ForkError::BadRequest(e.to_string()))?;
        let failed = |e: &dyn std::fmt::Display| ForkError::Failed(e.to_string());
        let store = self.store().map_err(|e| failed(&e))?;
        let claimed: Option<ForkClaim> =
            store.config(CONFIG_FORK_IMPORT).map_err(|e| failed(&e))?.map(|text| {
                // A claim in the older plain-token form counts as made just now.
                serde_json::from_str(&text)
                    .unwrap_or(ForkClaim { token: text, at: self.deps.clock.now_ms() })
            });
        let own = claimed.as_ref().is_some_and(|c| c.token == call.token);
        let now = self.deps.clock.now_ms();
        let claim = |token: &str| {
            let text = json!(ForkClaim { token: token.to_owned(), at: now }).to_string();
            store.set_config(CONFIG_FORK_IMPORT, &text).map_err(|e| failed(&e))
        };
        match method {
            "begin" => {
                let name = call.name.unwrap_or_default();
                match &claimed {
                    Some(c) if now - c.at >= FORK_CLAIM_STALE_MS => self.discard_import().await?,
                    Some(_) => return Err(ForkError::NotEmpty(name)),
                    None if !self.is_empty_instance()? => return Err(ForkError::NotEmpty(name)),
                    None => {}
                }
                claim(&call.token)?;
                if !name.is_empty() {
                    self.set_name(&name);
                }
                Ok(Value::Bool(true))
            }
            "page" if own => {
                let page =
                    call.page.ok_or_else(|| ForkError::BadRequest("page: no page".into()))?;
                let store = self.checkpoint_store().map_err(|e| failed(&e))?;
                store.import_page(&page).await.map_err(|e| match e {
                    CheckpointError::NotEmpty => ForkError::NotEmpty(self.name()),
                    e => failed(&e),
                })?;
                claim(&call.token)?;
                Ok(Value::Bool(true))
            }
            "finish" if own => {
                store.delete_config(CONFIG_FORK_IMPORT).map_err(|e| failed(&e))?;
                self.broadcast_transcript(None);
                self.broadcast(&frames::WorkspaceChanged::new(&[], true), None);
                let files = self.workspace.glob("/**").map(|f| f.len()).unwrap_or(0);
                Ok(json!({"messages": self.history().len(), "entries": files}))
            }
            "page" | "finish" => {
                Err(ForkError::Failed("this instance is not being forked into by that call".into()))
            }
            other => Err(ForkError::BadRequest(format!("unknown method {other}"))),
        }
    }

    /// Drops what an interrupted fork imported (the instance held nothing before its claim):
    /// the transcript, the checkpoints and every workspace entry.
    async fn discard_import(self: &Rc<Self>) -> Result<(), ForkError> {
        let failed = |e: &dyn std::fmt::Display| ForkError::Failed(e.to_string());
        self.clear(None);
        let store = self.checkpoint_store().map_err(|e| failed(&e))?;
        let none = crate::checkpoint::Retention { max_checkpoints: 0, max_bytes: 0 };
        store.prune(none).await.map_err(|e| failed(&e))?;
        for (name, _, _) in self.workspace.read_dir_brief("/", 10_000, 0).map_err(|e| failed(&e))? {
            let path = format!("/{name}");
            self.workspace.rm(&path, true, true).await.map_err(|e| failed(&e))?;
        }
        Ok(())
    }

    /// No messages (stored or queued), no workspace entries and no checkpoints.
    fn is_empty_instance(&self) -> Result<bool, ForkError> {
        let failed = |e: &dyn std::fmt::Display| ForkError::Failed(e.to_string());
        if !self.messages().is_empty() {
            return Ok(false);
        }
        if !self.workspace.read_dir_brief("/", 1, 0).map_err(|e| failed(&e))?.is_empty() {
            return Ok(false);
        }
        let list = self.checkpoint_store().and_then(|c| c.list()).map_err(|e| failed(&e))?;
        Ok(list.is_empty())
    }

    /// Sets how this instance reaches other instances of its class for `forkSession`.
    pub fn set_fork_link(&self, link: Rc<dyn ForkLink>) {
        *self.checkpoints.link.borrow_mut() = Some(link);
    }
}

/// Reads `rewind`'s second argument.
fn rewind_scope(arg: Option<&Value>) -> Result<RewindScope, CallError> {
    let opts = match arg {
        None | Some(Value::Null) => RewindOptions { files: true, transcript: true },
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            CallError::BadArguments(format!(
                "rewind: the options must be {{files?: boolean, transcript?: boolean}}: {e}"
            ))
        })?,
    };
    if !opts.files && !opts.transcript {
        return Err(CallError::BadArguments(
            "rewind: files and transcript are both false, so there is nothing to restore".into(),
        ));
    }
    Ok(RewindScope { files: opts.files, transcript: opts.transcript })
}
