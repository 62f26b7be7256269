//! The `host` object an extension's tools and hooks receive, on the host side. Each call
//! from the isolate arrives here as a [`CallRequest`] and is checked against the manifest's
//! permissions before anything is done: workspace reads for `read`, writes and deletes for
//! `read-write`, context blocks per `context`, the transcript's text for `messages: "read"`.
//! A call the permissions do not cover fails with a [`PermissionError`], which the extension
//! sees as a thrown `Error`.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::manifest::{ContextKeyword, ContextScope, MessagesAccess, Permissions, WorkspaceAccess};
use crate::codemode::{CallError, CallRequest, Dispatcher};
use crate::protocol::message::{text_of, UIMessage};
use crate::session::Session;
use crate::tools::ToolContext;
use crate::workspace::Workspace;

/// The global the isolate's `host` object calls through (hidden behind `host`).
pub const HOST_CONNECTOR: &str = "__think_ext_host";
/// Most entries `listFiles` and `find` return.
pub const MAX_LIST_ENTRIES: usize = 1000;
/// Most messages `getMessages` returns.
pub const MAX_MESSAGES: usize = 200;

/// One method of `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostMethod {
    /// `readFile(path)`: the text, or `null` when there is no such file.
    ReadFile,
    /// `listFiles(dir)`: the entries of a folder.
    ListFiles,
    /// `find(pattern)`: the paths matching a glob.
    Find,
    /// `grep({query, …})`: the `grep` tool's search.
    Grep,
    /// `writeFile(path, content)`.
    WriteFile,
    /// `deleteFile(path)`.
    DeleteFile,
    /// `getContext(label)`: a context block's text.
    GetContext,
    /// `setContext(label, content)`: replaces a context block's text.
    SetContext,
    /// `getMessages(limit?)`: `[{id, role, text}]`, oldest first.
    GetMessages,
}

impl HostMethod {
    /// Every method, as the isolate's `host` object has them.
    pub const ALL: [HostMethod; 9] = [
        HostMethod::ReadFile,
        HostMethod::ListFiles,
        HostMethod::Find,
        HostMethod::Grep,
        HostMethod::WriteFile,
        HostMethod::DeleteFile,
        HostMethod::GetContext,
        HostMethod::SetContext,
        HostMethod::GetMessages,
    ];

    /// The method's name on `host`.
    pub fn as_str(self) -> &'static str {
        match self {
            HostMethod::ReadFile => "readFile",
            HostMethod::ListFiles => "listFiles",
            HostMethod::Find => "find",
            HostMethod::Grep => "grep",
            HostMethod::WriteFile => "writeFile",
            HostMethod::DeleteFile => "deleteFile",
            HostMethod::GetContext => "getContext",
            HostMethod::SetContext => "setContext",
            HostMethod::GetMessages => "getMessages",
        }
    }

    /// The method of that name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// A `host` call the manifest's permissions do not cover.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PermissionError {
    /// A workspace call above the granted level.
    Workspace {
        /// The method called.
        method: &'static str,
        /// The level it needs.
        needs: WorkspaceAccess,
        /// The level granted.
        granted: WorkspaceAccess,
    },
    /// `getContext` of a block the manifest may not read.
    ContextRead(String),
    /// `setContext` of a block the manifest may not write.
    ContextWrite(String),
    /// `getMessages` without `messages: "read"`.
    Messages,
}

fn level(access: WorkspaceAccess) -> &'static str {
    match access {
        WorkspaceAccess::None => "none",
        WorkspaceAccess::Read => "read",
        WorkspaceAccess::ReadWrite => "read-write",
    }
}

impl std::fmt::Display for PermissionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PermissionError::Workspace { method, needs, granted } => write!(
                f,
                "Permission denied: host.{method} needs workspace \"{}\" permission; this \
                 extension has \"{}\"",
                level(*needs),
                level(*granted)
            ),
            PermissionError::ContextRead(label) => write!(
                f,
                "Permission denied: this extension may not read context block \"{label}\""
            ),
            PermissionError::ContextWrite(label) => write!(
                f,
                "Permission denied: this extension may not write context block \"{label}\""
            ),
            PermissionError::Messages => f.write_str(
                "Permission denied: host.getMessages needs the messages \"read\" permission",
            ),
        }
    }
}

impl std::error::Error for PermissionError {}

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// Whether `permissions` cover `method` with `args`; `own` are the extension's own context
/// labels (`<prefix>_<label>`).
pub fn authorize(
    permissions: &Permissions,
    own: &[String],
    method: HostMethod,
    args: &Value,
) -> Result<(), PermissionError> {
    let granted = permissions.workspace;
    let needs = match method {
        HostMethod::ReadFile | HostMethod::ListFiles | HostMethod::Find | HostMethod::Grep => {
            Some(WorkspaceAccess::Read)
        }
        HostMethod::WriteFile | HostMethod::DeleteFile => Some(WorkspaceAccess::ReadWrite),
        _ => None,
    };
    if let Some(needs) = needs {
        let ok = match needs {
            WorkspaceAccess::Read => granted != WorkspaceAccess::None,
            _ => granted == WorkspaceAccess::ReadWrite,
        };
        return if ok {
            Ok(())
        } else {
            Err(PermissionError::Workspace { method: method.as_str(), needs, granted })
        };
    }
    let label = arg(args, "label").unwrap_or_default();
    let listed = |scope: &Option<ContextScope>, keyword: ContextKeyword| match scope {
        Some(ContextScope::Keyword(k)) if *k == keyword => match keyword {
            ContextKeyword::All => true,
            ContextKeyword::Own => own.iter().any(|l| l == label),
        },
        Some(ContextScope::Labels(labels)) => labels.iter().any(|l| l == label),
        _ => false,
    };
    match method {
        HostMethod::GetContext => {
            // An extension always reads its own blocks back.
            let ok = own.iter().any(|l| l == label)
                || listed(&permissions.context.read, ContextKeyword::All);
            ok.then_some(()).ok_or_else(|| PermissionError::ContextRead(label.to_owned()))
        }
        HostMethod::SetContext => listed(&permissions.context.write, ContextKeyword::Own)
            .then_some(())
            .ok_or_else(|| PermissionError::ContextWrite(label.to_owned())),
        HostMethod::GetMessages => (permissions.messages == MessagesAccess::Read)
            .then_some(())
            .ok_or(PermissionError::Messages),
        _ => Ok(()),
    }
}

/// Reads the transcript for `getMessages`.
pub type Transcript = Rc<dyn Fn() -> Vec<UIMessage>>;

/// What the bridge reaches on the agent's side.
#[derive(Clone)]
pub struct BridgeEnv {
    /// The agent's workspace.
    pub workspace: Rc<Workspace>,
    /// The agent's context blocks.
    pub session: Session,
    /// The agent's transcript.
    pub transcript: Transcript,
}

/// The host side of one extension's `host` object.
pub struct HostBridge {
    permissions: Permissions,
    own: Vec<String>,
    env: BridgeEnv,
}

impl HostBridge {
    /// The bridge of an extension with these permissions and own context labels.
    pub fn new(permissions: Permissions, own: Vec<String>, env: BridgeEnv) -> Self {
        Self { permissions, own, env }
    }

    async fn perform(&self, method: HostMethod, args: &Value) -> Result<Value, String> {
        let ws = &self.env.workspace;
        let text = |key: &str| {
            arg(args, key)
                .ok_or_else(|| format!("host.{}: {key} must be a string", method.as_str()))
        };
        let fs = |e: crate::workspace::FsError| e.to_string();
        match method {
            HostMethod::ReadFile => Ok(ws.read_file(text("path")?).await.map_err(fs)?.into()),
            HostMethod::ListFiles => {
                let dir = arg(args, "dir").unwrap_or("/");
                let entries = ws.read_dir(dir, MAX_LIST_ENTRIES, 0).map_err(fs)?;
                serde_json::to_value(entries).map_err(|e| e.to_string())
            }
            HostMethod::Find => {
                let mut found = ws.glob(text("pattern")?).map_err(fs)?;
                found.truncate(MAX_LIST_ENTRIES);
                Ok(found.into_iter().map(|f| Value::String(f.path)).collect())
            }
            HostMethod::Grep => {
                let tool = crate::tools::workspace::grep_tool(ws.clone());
                let ctx = ToolContext { tool_call_id: String::new(), tool_name: "grep".into() };
                let input = args.get("options").cloned().unwrap_or_else(|| json!({}));
                tool.execute(input, &ctx).await.map_err(|e| e.to_string())
            }
            HostMethod::WriteFile => {
                let content = text("content")?;
                ws.write_file(text("path")?, content, "text/plain").await.map_err(fs)?;
                Ok(Value::Null)
            }
            HostMethod::DeleteFile => {
                ws.rm(text("path")?, false, false).await.map_err(fs)?;
                Ok(Value::Null)
            }
            HostMethod::GetContext => {
                self.env.session.get(text("label")?).map(Value::String).map_err(|e| e.to_string())
            }
            HostMethod::SetContext => {
                let usage = self
                    .env
                    .session
                    .set(text("label")?, text("content")?)
                    .map_err(|e| e.to_string())?;
                Ok(json!({"tokens": usage.tokens, "maxTokens": usage.max}))
            }
            HostMethod::GetMessages => {
                let limit = args
                    .get("limit")
                    .and_then(Value::as_u64)
                    .map_or(MAX_MESSAGES, |n| (n as usize).min(MAX_MESSAGES));
                let messages = (self.env.transcript)();
                let skip = messages.len().saturating_sub(limit);
                Ok(messages
                    .iter()
                    .skip(skip)
                    .map(|m| json!({"id": m.id, "role": m.role, "text": text_of(m)}))
                    .collect())
            }
        }
    }
}

#[async_trait(?Send)]
impl Dispatcher for HostBridge {
    async fn call(&self, call: CallRequest) -> Result<Value, CallError> {
        if call.connector != HOST_CONNECTOR {
            return Err(CallError::Failed(format!("unknown connector {}", call.connector)));
        }
        let method = HostMethod::parse(&call.method)
            .ok_or_else(|| CallError::Failed(format!("host.{} is not a function", call.method)))?;
        authorize(&self.permissions, &self.own, method, &call.args)
            .map_err(|e| CallError::Failed(e.to_string()))?;
        self.perform(method, &call.args).await.map_err(CallError::Failed)
    }
}
