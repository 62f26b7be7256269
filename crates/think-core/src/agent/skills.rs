//! The agent's side of skills ([`crate::skills`]): the `skills()` callable and the skill
//! tools of each turn. The catalog's part in a turn (its refresh, the system prompt, the
//! `allowed-tools` gate) is in the turn itself.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::Value;

use super::capability::Capability;
use super::{Agent, CallError, Feature};
use crate::tools::{Layer, ToolRef};

/// Skills as a capability.
pub(super) struct SkillsCapability;

#[async_trait(?Send)]
impl Capability for SkillsCapability {
    fn name(&self) -> &'static str {
        "skills"
    }

    fn switch(&self) -> Option<Feature> {
        Some(Feature::Skills)
    }

    fn callables(&self) -> &[&'static str] {
        &["skills"]
    }

    /// `skills()`: every skill found, valid or not, after reading what changed.
    async fn call(
        &self,
        agent: &Rc<Agent>,
        _method: &str,
        _args: &[Value],
    ) -> Result<Value, CallError> {
        let catalog =
            agent.skills.refresh(&agent.workspace, agent.deps.blobs.as_deref(), agent.now()).await;
        Ok(serde_json::to_value(&catalog.reports).unwrap_or(Value::Null))
    }

    /// The skill tools over the catalog the turn read; switched off, bash runs no shell
    /// script of a skill either.
    fn tools(&self, agent: &Agent) -> Option<(Layer, Vec<ToolRef>)> {
        let bash_on = agent.spec.is_on(Feature::Bash);
        let runners = crate::skills::ScriptRunners {
            engine: agent.deps.bash_engine.clone().filter(|_| bash_on),
            engine_off: (!bash_on).then(|| Feature::Bash.off_message()),
            sandbox: agent.deps.sandbox.clone(),
        };
        Some((Layer::Skill, agent.skills.tools(agent.workspace.clone(), runners)))
    }
}
