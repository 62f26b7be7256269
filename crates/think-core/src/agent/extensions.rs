//! The agent's side of extensions: the runtime over the agent's sandbox, workspace, session
//! and transcript; the callables `listExtensions()`, `loadExtension(manifest, source)` and
//! `unloadExtension(name)`; and the turn's `beforeTurn` and `onStepFinish` hooks.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::capability::Capability;
use super::store::ChatStore;
use super::{Agent, AgentSpec, CallError, Deps, Feature, TurnContext};
use crate::extensions::hooks::TurnSnapshot;
use crate::extensions::{BridgeEnv, ExtensionError, Extensions, HookName, Manifest};
use crate::session::Session;
use crate::tools::{Layer, ToolRef, ToolSet};
use crate::workspace::Workspace;

/// The runtime, when extensions are switched on and the platform has a sandbox to run them
/// in. Without it no extension is registered: no tool, hook or context block of one exists.
pub(super) fn runtime(
    spec: &AgentSpec,
    deps: &Deps,
    workspace: &Rc<Workspace>,
    session: &Session,
) -> Option<Rc<Extensions>> {
    if !spec.is_on(Feature::Extensions) {
        return None;
    }
    let sandbox = deps.sandbox.clone()?;
    let sql = deps.sql.clone();
    let env = BridgeEnv {
        workspace: workspace.clone(),
        session: session.clone(),
        transcript: Rc::new(move || ChatStore::new(sql.as_ref()).messages().unwrap_or_default()),
    };
    let mut options = spec.extensions.clone();
    options.allow_private_network = spec.net.allow_private;
    Some(Rc::new(Extensions::new(
        deps.sql.clone(),
        Some(sandbox),
        env,
        options,
        spec.static_extensions.clone(),
    )))
}

fn failed(e: ExtensionError) -> CallError {
    CallError::Failed(e.to_string())
}

/// Extensions as a capability: their callables, their start, their tools and the hooks
/// that wrap every tool of a turn.
pub(super) struct ExtensionsCapability;

#[async_trait(?Send)]
impl Capability for ExtensionsCapability {
    fn name(&self) -> &'static str {
        "extensions"
    }

    fn switch(&self) -> Option<Feature> {
        Some(Feature::Extensions)
    }

    fn callables(&self) -> &[&'static str] {
        &["listExtensions", "loadExtension", "unloadExtension"]
    }

    async fn call(
        &self,
        agent: &Rc<Agent>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, CallError> {
        let Some(ext) = agent.extensions.clone() else {
            return Err(CallError::Unavailable(
                "Extensions are unavailable: the agent has no sandbox (the LOADER binding)".into(),
            ));
        };
        ext.ensure_started().await;
        match method {
            "listExtensions" => Ok(serde_json::to_value(ext.list()).unwrap_or(Value::Null)),
            "loadExtension" => {
                let manifest = args.first().cloned().unwrap_or(Value::Null);
                let Some(source) = args.get(1).and_then(Value::as_str) else {
                    return Err(CallError::BadArguments(
                        "loadExtension(manifest, source): source must be a string".into(),
                    ));
                };
                match Manifest::from_json(manifest) {
                    Ok(m) => ext.load(m, source.to_owned()).await.map(|info| json!(info)),
                    Err(e) => Err(e),
                }
                .map_err(failed)
            }
            _ => {
                let Some(name) = args.first().and_then(Value::as_str) else {
                    return Err(CallError::BadArguments(
                        "unloadExtension(name): name must be a string".into(),
                    ));
                };
                ext.unload(name).await.map_err(failed).map(|info| {
                    json!({"unloaded": true, "name": info.name, "tools": info.tools,
                           "contextLabels": info.context_labels})
                })
            }
        }
    }

    /// Loads the static and stored extensions.
    async fn start(&self, agent: &Rc<Agent>) {
        if let Some(ext) = &agent.extensions {
            ext.ensure_started().await;
        }
    }

    fn tools(&self, agent: &Agent) -> Option<(Layer, Vec<ToolRef>)> {
        let ext = agent.extensions.as_ref()?;
        Some((Layer::Extension, crate::extensions::tools::turn_tools(ext)))
    }

    /// The `beforeToolCall`/`afterToolCall` hooks around every tool of the turn.
    fn wrap_tools(&self, agent: &Agent, tools: &mut ToolSet) {
        if let Some(ext) = &agent.extensions {
            ext.wrap_tool_hooks(tools);
        }
    }
}

impl Agent {
    /// Runs the extensions' `beforeTurn` hooks over the turn's context.
    pub(super) async fn extensions_before_turn(&self, ctx: &mut TurnContext) {
        let Some(ext) = self.extensions.clone() else { return };
        let snapshot = TurnSnapshot {
            system: &ctx.system,
            tool_names: ctx.tools.names().map(str::to_owned).collect(),
            message_count: ctx.messages.len(),
            continuation: ctx.continuation,
            body: &ctx.body,
        };
        let change = ext.before_turn(snapshot).await;
        if let Some(system) = change.system {
            ctx.system = system;
        }
        if let Some(active) = change.active_tools {
            ctx.tools.retain_names(&active);
        }
    }

    /// Tells the `onStepFinish` hooks that a step ended (in the background: they observe).
    pub(super) fn extensions_step_finished(&self, step: usize) {
        let Some(ext) = self.extensions.clone() else { return };
        if ext.subscribers(HookName::OnStepFinish).is_empty() {
            return;
        }
        self.deps.tasks.spawn(Box::pin(async move {
            ext.observe(HookName::OnStepFinish, json!({"stepNumber": step})).await;
        }));
    }
}
