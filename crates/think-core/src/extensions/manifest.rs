//! An extension's manifest: who it is, what it may reach, the context blocks it brings and
//! the hooks it subscribes to. Everything here is checked before any isolate is made, so a
//! bad manifest is a clear error to whoever loads it and nothing is registered.

use serde::{Deserialize, Serialize};

use super::ExtensionError;
use crate::net::HostPattern;
use crate::session::{BlockKind, ContextBlock};

/// Longest extension name accepted (tool names are `<prefix>_<tool>`, at most 64 characters).
pub const MAX_NAME_CHARS: usize = 48;
/// Longest version string accepted.
pub const MAX_VERSION_CHARS: usize = 32;
/// Longest tool name a provider accepts (OpenAI's function-name limit).
pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// How much of the workspace the extension's `host` may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceAccess {
    /// No workspace calls.
    #[default]
    None,
    /// `readFile`, `listFiles`, `find`, `grep`.
    Read,
    /// Reads plus `writeFile` and `deleteFile`.
    ReadWrite,
}

/// Whether the extension may read the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessagesAccess {
    /// No transcript.
    #[default]
    None,
    /// `getMessages()`: the text of each message.
    Read,
}

/// The keyword forms of the context permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextKeyword {
    /// `read: "all"`: every block.
    All,
    /// `write: "own"`: the blocks the manifest declares.
    Own,
}

/// Which context blocks a permission covers: a keyword or a list of labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ContextScope {
    /// `"all"` or `"own"`.
    Keyword(ContextKeyword),
    /// These labels (as the session names them, prefixed ones included).
    Labels(Vec<String>),
}

/// Context block access.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextAccess {
    /// Blocks `getContext` may read (`"all"` or labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<ContextScope>,
    /// Blocks `setContext` may write (`"own"` or labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<ContextScope>,
}

impl ContextAccess {
    fn is_empty(&self) -> bool {
        self.read.is_none() && self.write.is_none()
    }
}

/// What the extension may reach. Everything defaults to nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Hosts its `fetch` may reach: `api.example.com`, `*.example.com`, optionally `:port`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
    /// Workspace access.
    #[serde(default)]
    pub workspace: WorkspaceAccess,
    /// Context block access.
    #[serde(default, skip_serializing_if = "ContextAccess::is_empty")]
    pub context: ContextAccess,
    /// Transcript access.
    #[serde(default)]
    pub messages: MessagesAccess,
}

/// A context block the extension brings; it registers as `<prefix>_<label>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextDecl {
    /// The label inside the extension.
    pub label: String,
    /// Shown in the block's header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `readonly`, `writable`, `skill` or `searchable`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The block's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<usize>,
}

/// A hook an extension may subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HookName {
    /// Before each turn: may narrow the tools or replace the system prompt.
    BeforeTurn,
    /// Before each tool call (observes).
    BeforeToolCall,
    /// After each tool call (observes).
    AfterToolCall,
    /// After each model step (observes).
    OnStepFinish,
}

impl HookName {
    /// Every hook, in the order the turn meets them.
    pub const ALL: [HookName; 4] = [
        HookName::BeforeTurn,
        HookName::BeforeToolCall,
        HookName::AfterToolCall,
        HookName::OnStepFinish,
    ];

    /// The name the source uses.
    pub fn as_str(self) -> &'static str {
        match self {
            HookName::BeforeTurn => "beforeTurn",
            HookName::BeforeToolCall => "beforeToolCall",
            HookName::AfterToolCall => "afterToolCall",
            HookName::OnStepFinish => "onStepFinish",
        }
    }

    /// The hook of that name, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == name)
    }
}

/// The manifest (Think's `ExtensionManifest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Unique among the loaded extensions.
    pub name: String,
    /// Any version string.
    pub version: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What it may reach.
    #[serde(default)]
    pub permissions: Permissions,
    /// The context blocks it brings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<ContextDecl>,
    /// Hooks it may run; empty means every hook its source defines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookName>,
}

/// Think's `sanitizeName`: every character but ASCII letters and digits becomes `_`, runs of
/// `_` collapse, and `_` at either end is trimmed. `None` when nothing is left.
pub fn sanitize_name(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() { c } else { '_' };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let trimmed = out.trim_matches('_');
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

/// Whether `name` is usable as a tool name by every provider: `[A-Za-z0-9_-]`, 1–64 chars.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn invalid(reason: impl Into<String>) -> ExtensionError {
    ExtensionError::InvalidManifest(reason.into())
}

impl Manifest {
    /// Reads and checks a manifest from JSON.
    pub fn from_json(value: serde_json::Value) -> Result<Self, ExtensionError> {
        let manifest: Manifest =
            serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// The tool and context prefix: the sanitized name.
    pub fn prefix(&self) -> String {
        sanitize_name(&self.name).unwrap_or_default()
    }

    /// Checks everything that can be checked without running the source.
    pub fn validate(&self) -> Result<(), ExtensionError> {
        let name = self.name.trim();
        if name.is_empty() {
            return Err(invalid("the name must not be empty"));
        }
        if name != self.name {
            return Err(invalid("the name must not start or end with spaces"));
        }
        if self.name.chars().count() > MAX_NAME_CHARS {
            return Err(invalid(format!("the name is longer than {MAX_NAME_CHARS} characters")));
        }
        if sanitize_name(&self.name).is_none() {
            return Err(invalid(format!(
                "the name {:?} has no letter or digit to build its tool prefix from",
                self.name
            )));
        }
        if self.version.trim().is_empty() {
            return Err(invalid("the version must not be empty"));
        }
        if self.version.chars().count() > MAX_VERSION_CHARS {
            return Err(invalid(format!(
                "the version is longer than {MAX_VERSION_CHARS} characters"
            )));
        }
        for host in &self.permissions.network {
            HostPattern::parse(host).map_err(|e| invalid(e.to_string()))?;
        }
        let scopes = [&self.permissions.context.read, &self.permissions.context.write];
        for (scope, keyword) in scopes.into_iter().zip([ContextKeyword::All, ContextKeyword::Own]) {
            match scope {
                Some(ContextScope::Keyword(k)) if *k != keyword => {
                    let which = if keyword == ContextKeyword::All { "read" } else { "write" };
                    return Err(invalid(format!(
                        "permissions.context.{which} takes {:?} or a list of labels",
                        if keyword == ContextKeyword::All { "all" } else { "own" }
                    )));
                }
                Some(ContextScope::Labels(labels))
                    if labels.iter().any(|l| l.trim().is_empty()) =>
                {
                    return Err(invalid("a context permission lists an empty label"));
                }
                _ => {}
            }
        }
        for (i, c) in self.context.iter().enumerate() {
            if c.label.is_empty()
                || !c.label.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
            {
                return Err(invalid(format!(
                    "context label {:?} must be letters, digits, _ or -",
                    c.label
                )));
            }
            if self.context[..i].iter().any(|o| o.label == c.label) {
                return Err(invalid(format!("context label {:?} is declared twice", c.label)));
            }
            block_kind(&c.kind)?;
            if c.max_tokens == Some(0) {
                return Err(invalid(format!("context {:?}: maxTokens must be positive", c.label)));
            }
        }
        Ok(())
    }

    /// The session labels of its context blocks (`<prefix>_<label>`).
    pub fn context_labels(&self) -> Vec<String> {
        let prefix = self.prefix();
        self.context.iter().map(|c| format!("{prefix}_{}", c.label)).collect()
    }

    /// Its context blocks as the session registers them.
    pub fn context_blocks(&self) -> Vec<ContextBlock> {
        let prefix = self.prefix();
        self.context
            .iter()
            .filter_map(|c| {
                Some(ContextBlock {
                    label: format!("{prefix}_{}", c.label),
                    description: c.description.clone(),
                    kind: block_kind(&c.kind).ok()?,
                    max_tokens: c.max_tokens,
                    content: None,
                })
            })
            .collect()
    }

    /// Whether loading it grants more than reading: network hosts or workspace writes (what
    /// needs a human's approval by default when the model loads it).
    pub fn grants_more_than_read(&self) -> bool {
        !self.permissions.network.is_empty()
            || self.permissions.workspace == WorkspaceAccess::ReadWrite
    }
}

fn block_kind(kind: &str) -> Result<BlockKind, ExtensionError> {
    Ok(match kind {
        "readonly" => BlockKind::Readonly,
        "writable" => BlockKind::Writable,
        "skill" => BlockKind::Skill,
        "searchable" => BlockKind::Searchable,
        other => {
            return Err(invalid(format!(
                "context type {other:?} is not readonly, writable, skill or searchable"
            )))
        }
    })
}
