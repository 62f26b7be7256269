//! One interface for the agent's features. Each feature (Code Mode, extensions, MCP, skills,
//! checkpoints, ...) plugs into the agent as a [`Capability`], and every entry point of the
//! agent walks the list instead of naming features one by one: [`Agent::call`] for callables,
//! [`Agent::start`] and [`Agent::on_alarm`] for start-up work and sweeps, the tool merge of
//! each turn, and [`Agent::new`] for the tables.

use std::future::ready;
use std::rc::Rc;

use async_trait::async_trait;
use futures::future::LocalBoxFuture;
use serde_json::Value;

use super::{Agent, CallError, Deps, Feature};
use crate::store::{Sql, StoreError};
use crate::tools::{Layer, ToolRef, ToolSet};

/// When a capability's sweep runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// As the instance starts, before interrupted turns are recovered: settle what the
    /// restart cut off, and say when the feature next needs the alarm.
    Start,
    /// On the Durable Object alarm (when no turn is running).
    Alarm,
}

/// Builds an app's capability for one instance, from the platform pieces it runs on
/// ([`super::AgentSpec::capability`]).
pub type CapabilityFactory = Rc<dyn Fn(&Deps) -> Rc<dyn Capability>>;

/// A feature of the agent: its callables, alarm sweeps, tools of a turn, tables and start-up
/// work, each a method with a default that does nothing, so a feature writes only what it has.
///
/// Where a new feature goes: a type in `src/agent/<feature>.rs` that implements this trait and
/// keeps the feature's own state, added to the built-in list in [`Agent::new`]; an app adds
/// its own with [`super::AgentSpec::capability`]. Nothing else in the agent names it.
///
/// A capability with a [`Capability::switch`] that is off is left out of everything but its
/// tables: its callables refuse with [`Feature::off_error`], and it gets no start, sweep or
/// tool call.
#[async_trait(?Send)]
pub trait Capability {
    /// A short name, for logs.
    fn name(&self) -> &'static str;

    /// The switch that turns all of the feature off, if it has one.
    fn switch(&self) -> Option<Feature> {
        None
    }

    /// The callables (`rpc` methods) it answers. The app's own callables come first; a name
    /// two capabilities declare goes to the one registered first.
    fn callables(&self) -> &[&'static str] {
        &[]
    }

    /// Answers `method`, one of [`Capability::callables`], while the feature is on. A
    /// capability writes it as an `async fn` under `#[async_trait(?Send)]`, like
    /// [`Capability::start`] and [`Capability::sweep`].
    ///
    /// The defaults of the three are spelled out as `#[async_trait]` would write them, with
    /// bodies that do not depend on the capability's type, so the wasm keeps one copy of each
    /// for every capability instead of one per type.
    fn call<'s, 'a, 'm, 'v, 'f>(
        &'s self,
        _agent: &'a Rc<Agent>,
        method: &'m str,
        _args: &'v [Value],
    ) -> LocalBoxFuture<'f, Result<Value, CallError>>
    where
        's: 'f,
        'a: 'f,
        'm: 'f,
        'v: 'f,
        Self: 'f,
    {
        Box::pin(ready(Err(CallError::NoSuchMethod(method.to_owned()))))
    }

    /// Creates what it keeps in the instance's SQLite (tables, triggers), once per instance,
    /// before anything else runs; switched off too, since what a feature stored is kept. A
    /// failure is logged and the agent runs on.
    fn create_tables(&self, _sql: &dyn Sql) -> Result<(), StoreError> {
        Ok(())
    }

    /// Start-up work, run alongside the other capabilities' and the recovery of an
    /// interrupted turn when the instance starts.
    fn start<'s, 'a, 'f>(&'s self, _agent: &'a Rc<Agent>) -> LocalBoxFuture<'f, ()>
    where
        's: 'f,
        'a: 'f,
        Self: 'f,
    {
        Box::pin(ready(()))
    }

    /// Sweeps what is due (expired executions, idle sessions, ...) and returns when it needs
    /// the alarm next; the agent sets the alarm for the earliest time any capability asks for.
    fn sweep<'s, 'a, 'f>(
        &'s self,
        _agent: &'a Rc<Agent>,
        _when: Sweep,
    ) -> LocalBoxFuture<'f, Option<f64>>
    where
        's: 'f,
        'a: 'f,
        Self: 'f,
    {
        Box::pin(ready(None))
    }

    /// Its tools for a turn, and the layer they join. Layers merge in their order (the
    /// workspace's, the agent's own, extensions', context, skills', MCP, the client's): a
    /// later layer's tool replaces an earlier one of the same name, and within a layer the
    /// agent's own tools come before those of capabilities, in registration order.
    fn tools(&self, _agent: &Agent) -> Option<(Layer, Vec<ToolRef>)> {
        None
    }

    /// Tools built over the merged tools of the turn (Code Mode's `execute`, whose `tools.*`
    /// are those), which join the agent's layer after them; each later capability's tools of
    /// this kind are not in what an earlier one sees.
    fn tools_over(&self, _agent: &Agent, _merged: &ToolSet) -> Vec<ToolRef> {
        Vec::new()
    }

    /// Last word on the turn's tools, after every tool is in (extension hooks wrap them).
    fn wrap_tools(&self, _agent: &Agent, _tools: &mut ToolSet) {}
}

impl Agent {
    /// The capabilities whose switch is on.
    pub(super) fn live_capabilities(&self) -> impl Iterator<Item = &Rc<dyn Capability>> {
        self.capabilities.iter().filter(|c| c.switch().is_none_or(|f| self.spec.is_on(f)))
    }

    /// Creates every capability's tables (see [`Capability::create_tables`]).
    pub(super) fn create_capability_tables(&self) {
        for cap in &self.capabilities {
            if let Err(e) = cap.create_tables(self.deps.sql.as_ref()) {
                self.warn(&format!("creating the tables of {} failed", cap.name()), e);
            }
        }
    }

    /// Calls the capability callable `method`: the refusal of a switched-off feature, or
    /// its answer; `NoSuchMethod` when no capability declares it.
    pub(super) async fn call_capability(
        self: &Rc<Self>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, CallError> {
        let Some(cap) = self.capabilities.iter().find(|c| c.callables().contains(&method)) else {
            return Err(CallError::NoSuchMethod(method.to_owned()));
        };
        if let Some(feature) = cap.switch().filter(|f| !self.spec.is_on(*f)) {
            return Err(feature.off_error());
        }
        cap.call(self, method, args).await
    }

    /// Runs the live capabilities' sweeps one after another; the earliest time one of them
    /// needs the alarm.
    pub(super) async fn sweep_capabilities(self: &Rc<Self>, when: Sweep) -> Option<f64> {
        let mut next: Option<f64> = None;
        for cap in self.live_capabilities() {
            if let Some(at) = cap.sweep(self, when).await {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        next
    }

    /// Runs the live capabilities' start-up work together.
    pub(super) async fn start_capabilities(self: &Rc<Self>) {
        futures::future::join_all(self.live_capabilities().map(|c| c.start(self))).await;
    }
}
