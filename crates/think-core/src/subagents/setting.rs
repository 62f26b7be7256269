//! `THINK_SUBAGENT`: the shipped agent's `subagent` tool. `false` removes it; empty or `true`
//! keeps Think-like defaults; a JSON object sets `{"depth": 1, "maxConcurrent": 4,
//! "stallMs": 120000}` (`depth` is how many levels of children may hand tasks on: 1 means a
//! child has no `subagent` tool of its own).

use serde::Deserialize;

use super::AgentToolLimits;

/// The deepest nesting the setting accepts.
pub const MAX_DEPTH: u32 = 8;

/// What `THINK_SUBAGENT` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubagentSetting {
    /// Levels of children that get a `subagent` tool (the root agent counts as the first).
    pub depth: u32,
    /// The parent's limits.
    pub limits: AgentToolLimits,
}

impl Default for SubagentSetting {
    fn default() -> Self {
        Self { depth: 1, limits: AgentToolLimits::default() }
    }
}

/// Why a `THINK_SUBAGENT` value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubagentSettingError {
    /// Not `true`, `false` or a JSON object of the known keys.
    Invalid(String),
    /// A number out of range.
    OutOfRange(&'static str),
}

impl std::fmt::Display for SubagentSettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubagentSettingError::Invalid(e) => write!(
                f,
                "expected true, false or {{\"depth\", \"maxConcurrent\", \"stallMs\"}}: {e}"
            ),
            SubagentSettingError::OutOfRange(key) => write!(f, "{key} is out of range"),
        }
    }
}

impl std::error::Error for SubagentSettingError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Wire {
    depth: Option<u32>,
    max_concurrent: Option<usize>,
    stall_ms: Option<u64>,
}

impl SubagentSetting {
    /// Parses the setting; `None` means the tool is removed.
    pub fn parse(value: &str) -> Result<Option<Self>, SubagentSettingError> {
        let value = value.trim();
        match value {
            "" | "true" => return Ok(Some(Self::default())),
            "false" => return Ok(None),
            _ => {}
        }
        let wire: Wire = serde_json::from_str(value)
            .map_err(|e| SubagentSettingError::Invalid(e.to_string()))?;
        let mut out = Self::default();
        if let Some(d) = wire.depth {
            if d == 0 || d > MAX_DEPTH {
                return Err(SubagentSettingError::OutOfRange("depth"));
            }
            out.depth = d;
        }
        if let Some(n) = wire.max_concurrent {
            if n == 0 {
                return Err(SubagentSettingError::OutOfRange("maxConcurrent"));
            }
            out.limits.max_concurrent = n;
        }
        if let Some(ms) = wire.stall_ms {
            if ms < 1_000 {
                return Err(SubagentSettingError::OutOfRange("stallMs"));
            }
            out.limits.stall_ms = ms as f64;
        }
        Ok(Some(out))
    }
}
