//! The agent's side of `THINK_LIMITS` ([`crate::limits`]): the `usage()` callable. The
//! limits themselves are enforced as each turn is admitted and as the model reports tokens.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::Value;

use super::capability::Capability;
use super::{Agent, CallError};
use crate::limits::Meter;

/// Usage and limits as a capability.
pub(super) struct UsageCapability {
    meter: Rc<Meter>,
}

impl UsageCapability {
    /// Reports what `meter` counted.
    pub(super) fn new(meter: Rc<Meter>) -> Self {
        Self { meter }
    }
}

#[async_trait(?Send)]
impl Capability for UsageCapability {
    fn name(&self) -> &'static str {
        "usage"
    }

    fn callables(&self) -> &[&'static str] {
        &["usage"]
    }

    /// `usage()`: each counter in its current window, with its limit and when it resets.
    async fn call(
        &self,
        _agent: &Rc<Agent>,
        _method: &str,
        _args: &[Value],
    ) -> Result<Value, CallError> {
        self.meter.report().map_err(|e| CallError::Failed(e.to_string()))
    }
}
