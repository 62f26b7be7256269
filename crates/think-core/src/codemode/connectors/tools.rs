//! `tools.*`: the turn's server-side tools, through their ledger wrappers and the agent's
//! approval policy.

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{
    check_args, is_identifier, CallContext, CallKind, Connector, ConnectorError, MethodSpec,
};
use crate::tools::approval::ApprovalPolicy;
use crate::tools::{ToolContext, ToolRef, ToolSet};

/// `tools.*`: the turn's server-side tools, through their ledger wrappers and the agent's
/// approval policy.
pub struct ToolsConnector {
    tools: Vec<ToolRef>,
    policy: ApprovalPolicy,
    methods: Vec<MethodSpec>,
}

impl ToolsConnector {
    /// Every tool of `set` that runs on the server, except those named in `exclude`.
    pub fn new(set: &ToolSet, policy: ApprovalPolicy, exclude: &[&str]) -> Self {
        let tools: Vec<ToolRef> = set
            .names()
            .filter(|n| !exclude.contains(n) && is_identifier(n))
            .filter_map(|n| set.get(n).cloned())
            .filter(|t| t.executes_on_server())
            .collect();
        let methods = tools
            .iter()
            .map(|t| {
                let d = t.definition();
                MethodSpec {
                    name: d.name.clone(),
                    description: d.description.clone(),
                    input_schema: d.input_schema.clone(),
                    output_schema: d.output_schema.clone(),
                    kind: CallKind::Write,
                }
            })
            .collect();
        Self { tools, policy, methods }
    }

    fn tool(&self, name: &str) -> Option<&ToolRef> {
        self.tools.iter().find(|t| t.definition().name == name)
    }
}

#[async_trait(?Send)]
impl Connector for ToolsConnector {
    fn name(&self) -> &str {
        "tools"
    }

    fn hint(&self) -> &str {
        "the agent's tools (workspace tools, its own tools, MCP tools), one method per tool"
    }

    fn methods(&self) -> &[MethodSpec] {
        &self.methods
    }

    fn needs_approval(&self, method: &str, args: &Value) -> bool {
        self.tool(method)
            .is_some_and(|t| t.needs_approval(args) || self.policy.needs_approval(method, args))
    }

    fn may_need_approval(&self, method: &str) -> bool {
        self.policy
            .patterns()
            .any(|p| crate::tools::approval::NameGlob::new(p).is_ok_and(|g| g.is_match(method)))
    }

    fn validate(&self, method: &str, args: &Value) -> Result<(), ConnectorError> {
        let Some(tool) = self.tool(method) else {
            return Err(ConnectorError::UnknownMethod(format!("tools.{method}")));
        };
        let empty = Value::Object(Map::new());
        let args = if args.is_null() { &empty } else { args };
        let label = format!("tool {method}");
        check_args(&label, &tool.definition().input_schema, args)
    }

    async fn call(
        &self,
        method: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ConnectorError> {
        self.validate(method, &args)?;
        let Some(tool) = self.tool(method) else {
            return Err(ConnectorError::UnknownMethod(format!("tools.{method}")));
        };
        let args = if args.is_null() { Value::Object(Map::new()) } else { args };
        let ctx = ToolContext {
            tool_call_id: format!("cm_{}_{}", ctx.execution_id, ctx.seq),
            tool_name: method.to_owned(),
        };
        tool.execute(args, &ctx).await.map_err(|e| ConnectorError::Failed(e.to_string()))
    }
}
