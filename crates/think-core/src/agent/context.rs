//! The agent's side of the session context ([`crate::session`]): the `getContext()`
//! callable and the context tools the blocks call for. The blocks' part in each model call
//! (the system prompt, compaction) is in the turn itself.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::Value;

use super::capability::Capability;
use super::{Agent, CallError};
use crate::tools::{Layer, ToolRef};

/// The session context as a capability.
pub(super) struct ContextCapability;

#[async_trait(?Send)]
impl Capability for ContextCapability {
    fn name(&self) -> &'static str {
        "the session context"
    }

    fn callables(&self) -> &[&'static str] {
        &["getContext"]
    }

    async fn call(
        &self,
        agent: &Rc<Agent>,
        _method: &str,
        _args: &[Value],
    ) -> Result<Value, CallError> {
        agent.session.snapshot().map_err(|e| CallError::Failed(e.to_string()))
    }

    fn tools(&self, agent: &Agent) -> Option<(Layer, Vec<ToolRef>)> {
        Some((Layer::Context, crate::session::tools::context_tools(&agent.session)))
    }
}
