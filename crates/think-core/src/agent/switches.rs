//! What switching a feature off means. An operator who turns a feature off (after an
//! incident, say) must see all of it gone: no tool offered, no hook run, no context block
//! shown, no callable or alarm that runs it. What the feature stored is kept, so switching it
//! on again brings everything back.
//!
//! [`AgentSpec::is_on`] is the one question every entry point of a feature asks: the builders
//! of the features' runtimes (which are then absent), the capabilities (a switched-off
//! [`super::Capability`] gets no call, start, sweep or tool, and its callables refuse with
//! [`Feature::off_error`]), the skills' catalog, skill scripts, and the recovery of
//! agent-tool runs.

use super::{AgentSpec, CallError};

/// A feature with an off switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Extensions, stored and static (`THINK_EXTENSIONS=false`).
    Extensions,
    /// Code Mode: `execute`, `browser_execute`, paused executions (`THINK_EXECUTE=false`).
    Execute,
    /// The `subagent` tool and its children's runs (`THINK_SUBAGENT=false`).
    Subagents,
    /// The browser tools and sessions (`THINK_BROWSER=false`).
    Browser,
    /// Skills: catalog, skill tools, scripts (`THINK_SKILLS=false`).
    Skills,
    /// `mcp_list_resources` and `mcp_read_resource` (`THINK_MCP_RESOURCES` unset or false).
    McpResources,
    /// The bash tool and the shell scripts of skills (`THINK_BASH=false`).
    Bash,
}

impl Feature {
    /// The setting that switches it.
    pub fn setting(self) -> &'static str {
        match self {
            Feature::Extensions => "THINK_EXTENSIONS",
            Feature::Execute => "THINK_EXECUTE",
            Feature::Subagents => "THINK_SUBAGENT",
            Feature::Browser => "THINK_BROWSER",
            Feature::Skills => "THINK_SKILLS",
            Feature::McpResources => "THINK_MCP_RESOURCES",
            Feature::Bash => "THINK_BASH",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Feature::Extensions => "Extensions are",
            Feature::Execute => "Code Mode (execute) is",
            Feature::Subagents => "Sub-agents are",
            Feature::Browser => "The browser tools are",
            Feature::Skills => "Skills are",
            Feature::McpResources => "The MCP resource tools are",
            Feature::Bash => "Bash is",
        }
    }

    /// What a caller of a switched-off feature is told.
    pub fn off_message(self) -> String {
        format!(
            "{} switched off ({}=false). What it stored is kept and comes back when it is \
             switched on again.",
            self.name(),
            self.setting()
        )
    }

    /// The refusal of a callable of a switched-off feature.
    pub fn off_error(self) -> CallError {
        CallError::Unavailable(self.off_message())
    }
}

impl AgentSpec {
    /// Whether `feature` is switched on: the gate of all of it.
    pub fn is_on(&self, feature: Feature) -> bool {
        match feature {
            Feature::Extensions => self.extensions.enabled,
            Feature::Execute => self.execute.is_some(),
            Feature::Subagents => !self.agent_tools.is_empty(),
            Feature::Browser => self.browser.is_some(),
            Feature::Skills => self.skills.enabled,
            Feature::McpResources => self.mcp_resource_tools,
            Feature::Bash => self.bash.is_some(),
        }
    }
}
