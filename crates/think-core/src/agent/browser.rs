//! The agent's side of the browser tools: the browser runtime when the spec configures one
//! and the platform can open its WebSocket, the tools of each turn, and the sweep of idle
//! sessions from the alarm.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::Value;

use super::capability::{Capability, Sweep};
use super::{Agent, AgentSpec, Deps, Feature};
use crate::browser::tools::{settle_output, BrowserTools};
use crate::browser::{Browser, CdpConnector};
use crate::codemode::connectors::Connector;
use crate::tools::{ToolRef, ToolSet};

/// The browser, when the spec enables the tools and the platform has a launcher.
pub(super) fn runtime(spec: &AgentSpec, deps: &Deps) -> Option<Rc<Browser>> {
    let (options, launcher) = (spec.browser.clone()?, deps.browser.clone()?);
    Browser::new(options, launcher, deps.sql.clone(), deps.clock.clone())
        .map_err(|e| {
            crate::platform::log(&format!("think-rs: the browser tools are unavailable: {e}"))
        })
        .ok()
}

/// The browser as a capability: its tools, joined after `execute` (which does not offer
/// them as `tools.*`), and the sweep of idle sessions.
pub(super) struct BrowserCapability;

#[async_trait(?Send)]
impl Capability for BrowserCapability {
    fn name(&self) -> &'static str {
        "the browser"
    }

    fn switch(&self) -> Option<Feature> {
        Some(Feature::Browser)
    }

    /// At start, when the next open session falls idle (closing nothing); on the alarm, the
    /// sweep of idle sessions.
    async fn sweep(&self, agent: &Rc<Agent>, when: Sweep) -> Option<f64> {
        let browser = agent.browser.as_ref()?;
        match when {
            Sweep::Start => browser.next_sweep().ok().flatten(),
            Sweep::Alarm => browser
                .sweep()
                .await
                .map_err(|e| agent.warn("sweeping browser sessions failed", e))
                .ok()
                .flatten(),
        }
    }

    fn tools_over(&self, agent: &Agent, _merged: &ToolSet) -> Vec<ToolRef> {
        agent.browser_tools()
    }
}

impl Agent {
    /// The `cdp` connector, when there is a browser.
    pub(super) fn cdp_connector(&self) -> Option<Rc<dyn Connector>> {
        let browser = self.browser.clone()?;
        Some(Rc::new(CdpConnector::new(browser, self.spec.approval.clone())))
    }

    /// This turn's browser tools: `browser_execute` (with a Code Mode runtime) and the quick
    /// actions; none without a browser.
    fn browser_tools(&self) -> Vec<ToolRef> {
        let (Some(browser), Some(connector)) = (self.browser.clone(), self.cdp_connector()) else {
            return Vec::new();
        };
        BrowserTools {
            browser,
            runtime: self.codemode.clone(),
            connector,
            model: self.model.clone().ok(),
            vision: self.spec.vision,
        }
        .tools()
    }

    /// After an approved or rejected execution: ends its use of the browser and takes the
    /// pixels out of its output.
    pub(super) async fn settle_browser_output(&self, output: Value) -> Value {
        match &self.browser {
            Some(browser) => {
                browser.begin();
                let out = settle_output(browser, output, &mut Vec::new()).await;
                browser.end();
                out
            }
            None => output,
        }
    }
}
