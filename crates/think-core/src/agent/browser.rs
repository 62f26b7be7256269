//! The agent's side of the browser tools: the browser runtime when the spec configures one
//! and the platform can open its WebSocket, the tools of each turn, and the sweep of idle
//! sessions from the alarm.

use std::rc::Rc;

use serde_json::Value;

use super::{Agent, AgentSpec, Deps};
use crate::browser::tools::{settle_output, BrowserTools};
use crate::browser::{Browser, CdpConnector};
use crate::codemode::connectors::Connector;
use crate::tools::ToolRef;

/// The browser, when the spec enables the tools and the platform has a launcher.
pub(super) fn runtime(spec: &AgentSpec, deps: &Deps) -> Option<Rc<Browser>> {
    let (options, launcher) = (spec.browser.clone()?, deps.browser.clone()?);
    Browser::new(options, launcher, deps.sql.clone(), deps.clock.clone())
        .map_err(|e| {
            crate::platform::log(&format!("think-rs: the browser tools are unavailable: {e}"))
        })
        .ok()
}

impl Agent {
    /// The `cdp` connector, when there is a browser.
    pub(super) fn cdp_connector(&self) -> Option<Rc<dyn Connector>> {
        let browser = self.browser.clone()?;
        Some(Rc::new(CdpConnector::new(browser, self.spec.approval.clone())))
    }

    /// This turn's browser tools: `browser_execute` (with a Code Mode runtime) and the quick
    /// actions; none without a browser.
    pub(super) fn browser_tools(&self) -> Vec<ToolRef> {
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

    /// The alarm's sweep of idle browser sessions; when the next one falls idle.
    pub(super) async fn browser_sweep(&self) -> Option<f64> {
        let browser = self.browser.as_ref()?;
        browser
            .sweep()
            .await
            .map_err(|e| self.warn("sweeping browser sessions failed", e))
            .ok()
            .flatten()
    }

    /// When the next open run session falls idle, without closing anything.
    pub(super) fn browser_next_sweep(&self) -> Option<f64> {
        self.browser.as_ref()?.next_sweep().ok().flatten()
    }
}
