//! The workspace as the tabs see it: a coalesced `think_workspace_changed` push after every
//! mutation (whichever tool, bash script, Code Mode `state.*` call or callable made it), and
//! the callables a page uses to list, read (to view or download) and write (upload) files.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{json, Value};

use super::capability::{Capability, Sweep};
use super::{Agent, CallError};
use crate::protocol::frames;
use crate::tools::workspace::media::looks_like_text;
use crate::tools::workspace::{workspace_tools, WorkspaceToolsOptions};
use crate::tools::{Layer, ToolRef};

/// How long changes are gathered before one frame tells the tabs: a bash write-back or a
/// Code Mode run that touches many files becomes one push.
pub const WORKSPACE_PUSH_MS: u64 = 50;
/// Paths listed in one push; beyond it the frame says `truncated` and a tab re-lists all.
pub const MAX_PUSHED_PATHS: usize = 100;
/// Entries `listWorkspace()` returns at most (the rest is reported as `truncated`).
pub const MAX_LISTED_ENTRIES: usize = 5_000;
/// Text up to this size is returned for viewing; larger files only by download.
pub const MAX_VIEW_BYTES: usize = 1_000_000;
/// The largest file a page may download or upload through a callable: the base64 of it
/// travels in one WebSocket message, and the isolate holds it a few times over.
pub const MAX_TRANSFER_BYTES: usize = 8 * 1024 * 1024;
/// How long after the first write the alarm indexes for `grep`: the rest of a turn's
/// writes land first, and the request that wrote does no index work.
pub const INDEX_DELAY_MS: f64 = 2_000.0;
/// How soon the alarm comes back while unindexed files remain.
pub const INDEX_REARM_MS: f64 = 100.0;

/// Changes waiting for the next push.
#[derive(Default)]
pub(super) struct WorkspacePush {
    paths: RefCell<BTreeSet<String>>,
    truncated: Cell<bool>,
    scheduled: Cell<bool>,
    /// An alarm to index the changed files is due.
    index_armed: Cell<bool>,
}

/// The workspace as a capability: the workspace tools, the callables a page uses on files,
/// and the alarm's indexing for `grep`.
pub(super) struct FilesCapability;

#[async_trait(?Send)]
impl Capability for FilesCapability {
    fn name(&self) -> &'static str {
        "the workspace"
    }

    fn callables(&self) -> &[&'static str] {
        &["listWorkspace", "readWorkspaceFile", "writeWorkspaceFile"]
    }

    async fn call(
        &self,
        agent: &Rc<Agent>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, CallError> {
        let path = || {
            args.first().and_then(Value::as_str).ok_or_else(|| {
                CallError::BadArguments(format!("{method}: the path must be a string"))
            })
        };
        match method {
            "listWorkspace" => agent.list_workspace(),
            "readWorkspaceFile" => agent.read_workspace_file(path()?, args.get(1)).await,
            "writeWorkspaceFile" => {
                agent.write_workspace_file(path()?, args.get(1), args.get(2)).await
            }
            _ => Err(CallError::NoSuchMethod(method.to_owned())),
        }
    }

    /// The first layer: the file tools and bash, unless the app turned them off.
    fn tools(&self, agent: &Agent) -> Option<(Layer, Vec<ToolRef>)> {
        if !agent.spec.workspace_tools {
            return None;
        }
        let options = WorkspaceToolsOptions {
            bash: agent.spec.bash.is_some(),
            bash_options: agent.spec.bash.clone().unwrap_or_default(),
            bash_engine: agent.deps.bash_engine.clone(),
        };
        Some((Layer::Workspace, workspace_tools(agent.workspace.clone(), options)))
    }

    async fn sweep(&self, agent: &Rc<Agent>, when: Sweep) -> Option<f64> {
        match when {
            Sweep::Start => None,
            Sweep::Alarm => agent.index_workspace(),
        }
    }
}

impl Agent {
    /// Records a changed path and, unless one is already due, schedules a push.
    pub(super) fn workspace_changed(self: &Rc<Self>, path: &str) {
        let push = &self.workspace_push;
        {
            let mut paths = push.paths.borrow_mut();
            if paths.len() < MAX_PUSHED_PATHS {
                paths.insert(path.to_owned());
            } else if !paths.contains(path) {
                push.truncated.set(true);
            }
        }
        if self.workspace.grep_index_enabled() && !push.index_armed.replace(true) {
            self.deps.alarm.set_no_later(self.now() + INDEX_DELAY_MS);
        }
        if push.scheduled.replace(true) {
            return;
        }
        let agent = self.clone();
        self.deps.tasks.spawn(Box::pin(async move {
            agent.deps.clock.sleep(WORKSPACE_PUSH_MS).await;
            agent.flush_workspace_push();
        }));
    }

    /// The alarm's share of `grep`'s index: one bounded batch of unindexed files; while more
    /// remain, when the alarm should come back for the next.
    fn index_workspace(&self) -> Option<f64> {
        self.workspace_push.index_armed.set(false);
        match self.workspace.index_unindexed(crate::workspace::INDEX_RUN_BYTES) {
            Ok(run) if run.more => {
                self.workspace_push.index_armed.set(true);
                return Some(self.now() + INDEX_REARM_MS);
            }
            Ok(_) => {}
            Err(e) => self.warn("indexing the workspace for grep failed", e),
        }
        None
    }

    fn flush_workspace_push(&self) {
        let push = &self.workspace_push;
        push.scheduled.set(false);
        let paths: Vec<String> =
            std::mem::take(&mut *push.paths.borrow_mut()).into_iter().collect();
        let truncated = push.truncated.replace(false);
        if !paths.is_empty() || truncated {
            self.broadcast(&frames::WorkspaceChanged::new(&paths, truncated), None);
        }
    }

    /// `listWorkspace()`: `{entries: [{path, type, size, mimeType, updatedAt}], truncated}`,
    /// ordered by path.
    fn list_workspace(&self) -> Result<Value, CallError> {
        let all = self.workspace.glob("/**").map_err(|e| CallError::Failed(e.to_string()))?;
        let truncated = all.len() > MAX_LISTED_ENTRIES;
        let entries: Vec<Value> = all
            .into_iter()
            .take(MAX_LISTED_ENTRIES)
            .map(|f| {
                json!({"path": f.path, "type": f.kind.as_str(), "size": f.size,
                       "mimeType": f.mime_type, "updatedAt": f.updated_at})
            })
            .collect();
        Ok(json!({"entries": entries, "truncated": truncated}))
    }

    /// `readWorkspaceFile(path, encoding?)`: `{path, mimeType, size}` plus `text` (a text file
    /// of at most [`MAX_VIEW_BYTES`]), `base64` (with encoding `"base64"`, for a download) or
    /// `binary: true` / `tooLarge: true` saying why there is no content.
    async fn read_workspace_file(
        &self,
        path: &str,
        encoding: Option<&Value>,
    ) -> Result<Value, CallError> {
        let base64 = match encoding {
            None | Some(Value::Null) => false,
            Some(Value::String(e)) if e == "base64" => true,
            Some(Value::String(e)) if e == "utf8" => false,
            Some(other) => {
                return Err(CallError::BadArguments(format!(
                    "readWorkspaceFile: encoding must be \"utf8\" or \"base64\", not {other}"
                )))
            }
        };
        let failed = |e: crate::workspace::FsError| CallError::Failed(e.to_string());
        let info =
            self.workspace.stat(path).map_err(failed)?.ok_or_else(|| {
                CallError::Failed(format!("readWorkspaceFile: no such file: {path}"))
            })?;
        if info.kind != crate::workspace::EntryType::File {
            return Err(CallError::Failed(format!("readWorkspaceFile: {path} is not a file")));
        }
        let mut out = json!({"path": info.path, "mimeType": info.mime_type, "size": info.size});
        let limit = if base64 { MAX_TRANSFER_BYTES } else { MAX_VIEW_BYTES };
        if info.size as usize > limit {
            if base64 {
                return Err(CallError::Failed(format!(
                    "readWorkspaceFile: {path} is {} bytes; files of at most {MAX_TRANSFER_BYTES} bytes can be downloaded here",
                    info.size
                )));
            }
            out["tooLarge"] = true.into();
            return Ok(out);
        }
        let bytes = self.workspace.read_file_bytes(path).await.map_err(failed)?.unwrap_or_default();
        if base64 {
            out["base64"] = base64::engine::general_purpose::STANDARD.encode(&bytes).into();
            return Ok(out);
        }
        match String::from_utf8(bytes) {
            Ok(text) if looks_like_text(text.as_bytes()) => out["text"] = text.into(),
            _ => out["binary"] = true.into(),
        }
        Ok(out)
    }

    /// `writeWorkspaceFile(path, base64, mimeType?)`: writes the decoded bytes (an upload),
    /// creating parent directories; `{path, size}`. The workspace's own limits apply too.
    async fn write_workspace_file(
        &self,
        path: &str,
        content: Option<&Value>,
        mime: Option<&Value>,
    ) -> Result<Value, CallError> {
        let bad = |m: String| CallError::BadArguments(format!("writeWorkspaceFile: {m}"));
        let encoded = content
            .and_then(Value::as_str)
            .ok_or_else(|| bad("the content must be a base64 string".into()))?;
        if encoded.len() / 4 * 3 > MAX_TRANSFER_BYTES + 3 {
            return Err(bad(format!(
                "the file is larger than the {MAX_TRANSFER_BYTES} bytes a page can upload"
            )));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| bad(format!("the content is not base64: {e}")))?;
        let mime = match mime {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(m.as_str()).filter(|m| !m.is_empty()),
            Some(_) => return Err(bad("the MIME type must be a string".into())),
        };
        let size = bytes.len();
        // Text is stored as text, as the write tool would, so every reader sees a text file.
        let written = match String::from_utf8(bytes) {
            Ok(text) if looks_like_text(text.as_bytes()) => {
                self.workspace.write_file(path, &text, mime.unwrap_or("text/plain")).await
            }
            Ok(text) => {
                let mime = mime.unwrap_or("application/octet-stream");
                self.workspace.write_file_bytes(path, text.as_bytes(), mime).await
            }
            Err(e) => {
                let mime = mime.unwrap_or("application/octet-stream");
                self.workspace.write_file_bytes(path, e.as_bytes(), mime).await
            }
        };
        written.map_err(|e| CallError::Failed(e.to_string()))?;
        Ok(json!({"path": crate::workspace::path::lexical(path), "size": size}))
    }
}
