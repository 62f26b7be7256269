//! How an agent is configured: its model, system prompt, tools, approval policy, hooks and
//! callable methods. A crate user builds one `AgentSpec` per Durable Object class.

use std::collections::BTreeMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use serde_json::{Map, Value};

use crate::model::anthropic::{AnthropicConfig, AnthropicModel};
use crate::model::openai::{OpenAiChatModel, OpenAiConfig};
use crate::model::retry::Retrying;
use crate::model::workers_ai::{AiBinding, WorkersAiModel};
use crate::model::{Model, ModelMessage};
use crate::net::NetPolicy;
use crate::platform::{Clock, HttpClient};
use crate::session::compact::DEFAULT_CONTEXT_WINDOW;
use crate::session::{ContextBlock, TokenCounter};
use crate::skills::{Skill, SkillsConfig};
use crate::tools::approval::ApprovalPolicy;
use crate::tools::workspace::bash::BashOptions;
use crate::tools::{ToolRef, ToolSet};

/// Think's default step limit per turn.
pub const DEFAULT_MAX_STEPS: usize = 10;

/// The system prompt used when an agent sets none.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a careful, capable assistant. \
Answer directly and accurately. When a task needs information or actions you do not have, \
use the tools available in this turn, then explain what you found or did. \
If a tool fails, read its error and try again with corrected input rather than giving up.";

/// Which model answers, or why none can.
#[derive(Clone)]
pub enum ModelChoice {
    /// An OpenAI-compatible Chat Completions endpoint, reached with the Worker's fetch.
    OpenAi(OpenAiConfig),
    /// The Anthropic Messages API, reached with the Worker's fetch.
    Anthropic(AnthropicConfig),
    /// A Workers AI model, run through the `AI` binding.
    WorkersAi {
        /// The model name, e.g. `@cf/moonshotai/kimi-k2.7-code`.
        model: String,
        /// The binding.
        binding: Rc<dyn AiBinding>,
    },
    /// Any other implementation of [`Model`], used as is (no retries added).
    Custom(Rc<dyn Model>),
    /// No model is configured; every turn answers with this message instead of failing.
    Unconfigured(String),
}

impl ModelChoice {
    /// The model this choice names: the built-in providers fetch through `http` and retry
    /// with the AI SDK's policy, waiting on `clock`; `Unconfigured` gives its message.
    pub fn build(
        &self,
        http: Rc<dyn HttpClient>,
        clock: Rc<dyn Clock>,
    ) -> Result<Rc<dyn Model>, crate::model::ModelError> {
        let provider: Rc<dyn Model> = match self {
            ModelChoice::OpenAi(cfg) => Rc::new(OpenAiChatModel::new(cfg.clone(), http)),
            ModelChoice::Anthropic(cfg) => Rc::new(AnthropicModel::new(cfg.clone(), http)),
            ModelChoice::WorkersAi { model, binding } => {
                Rc::new(WorkersAiModel::new(model, binding.clone()))
            }
            ModelChoice::Custom(m) => return Ok(m.clone()),
            ModelChoice::Unconfigured(msg) => return Err(crate::model::ModelError::other(msg)),
        };
        Ok(Rc::new(Retrying::new(provider, clock)))
    }

    /// The shipped agent's choice, from `THINK_MODEL_BASE_URL`, `THINK_MODEL_API_KEY` and
    /// `THINK_MODEL`. A missing base URL or model name yields a message naming them.
    pub fn from_settings(
        base_url: Option<&str>,
        api_key: Option<&str>,
        model: Option<&str>,
    ) -> Self {
        let base_url = base_url.map(str::trim).filter(|s| !s.is_empty());
        let model = model.map(str::trim).filter(|s| !s.is_empty());
        match (base_url, model) {
            (Some(base_url), Some(model)) => ModelChoice::OpenAi(OpenAiConfig {
                base_url: base_url.to_owned(),
                api_key: api_key.unwrap_or("").trim().to_owned(),
                model: model.to_owned(),
            }),
            _ => {
                let mut missing = Vec::new();
                if base_url.is_none() {
                    missing.push("THINK_MODEL_BASE_URL");
                }
                if model.is_none() {
                    missing.push("THINK_MODEL");
                }
                ModelChoice::Unconfigured(format!(
                    "No model is configured: {} not set. Set THINK_MODEL_BASE_URL (an OpenAI-compatible \
                     base URL such as http://127.0.0.1:11434/v1), THINK_MODEL (the model name) and, if the \
                     endpoint needs one, THINK_MODEL_API_KEY, in the environment or in .dev.vars, then restart \
                     (or deploy with the Workers AI binding, [ai] binding = \"AI\", and no base URL).",
                    missing.join(" and ")
                ))
            }
        }
    }
}

/// What a `before_turn` hook sees.
pub struct TurnContext {
    /// The system prompt the turn will send.
    pub system: String,
    /// The history the model will be sent.
    pub messages: Vec<ModelMessage>,
    /// The merged tools of this turn, in Think's layer order.
    pub tools: ToolSet,
    /// True for auto-continuations after a tool result or approval.
    pub continuation: bool,
    /// Custom fields of the chat request body (everything but messages, trigger, clientTools).
    pub body: Map<String, Value>,
}

/// What a `before_turn` hook may change for one turn.
#[derive(Default)]
pub struct TurnConfig {
    /// Keep only these tools (after `tools` below are added).
    pub active_tools: Option<Vec<String>>,
    /// Tools added for this turn only; they win over every layer.
    pub tools: Vec<ToolRef>,
    /// Replaces the system prompt for this turn.
    pub system: Option<String>,
    /// Replaces the step limit for this turn.
    pub max_steps: Option<usize>,
    /// The `tool_choice` sent to the model for this turn (`auto`, `required` or `none`).
    pub tool_choice: Option<String>,
}

/// A child agent offered to the model as a tool, built from an [`AgentSpec`].
pub type AgentTool = crate::subagents::AgentTool<AgentSpec>;

/// The `before_turn` hook.
pub type BeforeTurn = Rc<dyn Fn(&TurnContext) -> TurnConfig>;

/// A method clients may call with an `rpc` frame (a `@callable` in Think).
pub type Callable = Rc<dyn Fn(Vec<Value>) -> LocalBoxFuture<'static, Result<Value, CallError>>>;

/// Why a call failed: an `rpc` method, or a client tool a programmatic caller runs. The text
/// is what the caller is told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// No callable has this name.
    NoSuchMethod(String),
    /// The arguments are not what the callable takes.
    BadArguments(String),
    /// Something the callable needs is unavailable.
    Unavailable(String),
    /// The callable ran and failed with this message.
    Failed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NoSuchMethod(m) => write!(f, "Method {m} does not exist"),
            CallError::BadArguments(m) | CallError::Unavailable(m) | CallError::Failed(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for CallError {}

/// Why a `THINK_MESSAGE_CONCURRENCY` value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownConcurrency(pub String);

impl std::fmt::Display for UnknownConcurrency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown message concurrency {:?} (queue, latest, merge, drop, debounce[:ms])",
            self.0
        )
    }
}

impl std::error::Error for UnknownConcurrency {}

/// Recovery of a turn whose model call failed with a transient error (HTTP 408, 409, 429,
/// 5xx, a provider's "overloaded" or "server" stream error, a stream that broke off) after the
/// answer had begun: the turn waits, then continues the same assistant message (Think 0.23's
/// bounded chat recovery). `None` in [`AgentSpec::chat_recovery`] ends such turns with the
/// error instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatRecovery {
    /// Continuations one turn may make before it ends with the error (Think: 10).
    pub max_attempts: u32,
    /// The wait before the first continuation, doubled for each next one (Think: 1 s).
    pub initial_delay_ms: u64,
    /// The longest backoff (Think: 30 s). A provider's `Retry-After` may stretch one wait to
    /// at most 60 s.
    pub max_delay_ms: u64,
}

impl Default for ChatRecovery {
    fn default() -> Self {
        Self { max_attempts: 10, initial_delay_ms: 1_000, max_delay_ms: 30_000 }
    }
}

/// The longest wait a provider's `Retry-After` can ask of a recovery (Think's cap).
pub const MAX_RECOVERY_RETRY_AFTER_MS: u64 = 60_000;

impl ChatRecovery {
    /// The wait before continuation number `attempt` (from 1): the doubling backoff, capped,
    /// stretched to what the failed answer asked for (`retry_after_ms`) up to a minute.
    pub fn delay_ms(&self, attempt: u32, retry_after_ms: Option<u64>) -> u64 {
        let doubled =
            self.initial_delay_ms.saturating_mul(1u64 << attempt.saturating_sub(1).min(32));
        let backoff = doubled.min(self.max_delay_ms);
        match retry_after_ms {
            Some(ms) => ms.max(backoff).min(MAX_RECOVERY_RETRY_AFTER_MS.max(backoff)),
            None => backoff,
        }
    }
}

/// The configuration of one agent class.
#[derive(Clone)]
pub struct AgentSpec {
    pub(crate) system_prompt: String,
    pub(crate) max_steps: usize,
    pub(crate) tools: Vec<ToolRef>,
    pub(crate) model: ModelChoice,
    pub(crate) approval: ApprovalPolicy,
    pub(crate) before_turn: Option<BeforeTurn>,
    pub(crate) callables: BTreeMap<String, Callable>,
    pub(crate) workspace_tools: bool,
    /// Whether the workspace keeps `grep`'s trigram index (`WorkspaceOptions::grep_index`).
    pub(crate) grep_index: bool,
    /// Whether the model's unversioned writes of files changed behind it are refused.
    pub(crate) guard_stale_writes: bool,
    pub(crate) checkpoint_retention: crate::checkpoint::Retention,
    pub(crate) include_mcp_tools: bool,
    /// Whether `mcp_list_resources`/`mcp_read_resource` join the MCP tools (off by default).
    pub(crate) mcp_resource_tools: bool,
    pub(crate) wait_for_mcp_connections: Option<u64>,
    pub(crate) message_concurrency: MessageConcurrency,
    /// The bash tool's limits; `None` removes the tool (Think's `workspaceBash = false`).
    pub(crate) bash: Option<BashOptions>,
    /// What the agent may fetch on others' word (MCP server URLs, ...).
    pub(crate) net: NetPolicy,
    /// Where skills come from (Rust, R2, the workspace folder).
    pub(crate) skills: SkillsConfig,
    /// The `execute` tool's limits; `None` removes it (`THINK_EXECUTE=false`).
    pub(crate) execute: Option<crate::codemode::ExecuteOptions>,
    /// The session's context blocks, in configuration order.
    pub(crate) context: Vec<ContextBlock>,
    /// The model's context window in tokens, which sets the compaction budget.
    pub(crate) context_window: usize,
    /// Counts tokens for block budgets and compaction; `None` uses Think's estimate.
    pub(crate) token_counter: Option<TokenCounter>,
    /// The browser tools' configuration; `None` offers no browser tool.
    pub(crate) browser: Option<crate::browser::BrowserOptions>,
    /// Whether the model takes images (browser screenshots reach it as image parts).
    pub(crate) vision: bool,
    /// Extensions' limits and whether the model may load them (`THINK_EXTENSIONS`).
    pub(crate) extensions: crate::extensions::ExtensionOptions,
    /// The app's own extensions, loaded at every start before the stored ones.
    pub(crate) static_extensions: Vec<(crate::extensions::Manifest, String)>,
    /// Child agents offered as tools (agents as tools).
    pub(crate) agent_tools: Vec<AgentTool>,
    /// How many children run at once and when a silent one is given up.
    pub(crate) agent_tool_limits: crate::subagents::AgentToolLimits,
    /// Turns and tokens allowed per window on each instance (`THINK_LIMITS`).
    pub(crate) limits: crate::limits::Limits,
    /// Recovery from transient model errors after output began; `None` turns it off.
    pub(crate) chat_recovery: Option<ChatRecovery>,
    /// The app's own features, built for each instance after the built-in ones.
    pub(crate) capabilities: Vec<super::CapabilityFactory>,
}

/// What happens to a message sent while a turn is running or queued (Think's
/// `messageConcurrency`). Regenerates, continuations and programmatic turns always queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageConcurrency {
    /// Every message gets its own turn, in order.
    #[default]
    Queue,
    /// Every message is kept, but only the newest queued one gets a turn.
    Latest,
    /// Like `Latest`: the model sees every kept message in its one turn.
    Merge,
    /// A message sent during a turn is refused and not kept.
    Drop,
    /// A message waits this many ms and is skipped if a newer one arrives meanwhile.
    Debounce(u64),
}

/// Think's default debounce window.
pub const DEFAULT_DEBOUNCE_MS: u64 = 750;

impl MessageConcurrency {
    /// Parses `queue`, `latest`, `merge`, `drop`, `debounce` or `debounce:<ms>`.
    pub fn parse(s: &str) -> Result<Self, UnknownConcurrency> {
        let s = s.trim();
        Ok(match s {
            "" | "queue" => MessageConcurrency::Queue,
            "latest" => MessageConcurrency::Latest,
            "merge" => MessageConcurrency::Merge,
            "drop" => MessageConcurrency::Drop,
            "debounce" => MessageConcurrency::Debounce(DEFAULT_DEBOUNCE_MS),
            other => match other.strip_prefix("debounce:").map(|ms| ms.trim().parse::<u64>()) {
                Some(Ok(ms)) => MessageConcurrency::Debounce(ms),
                _ => return Err(UnknownConcurrency(other.to_owned())),
            },
        })
    }
}

/// Think's wait when `waitForMcpConnections` is `true`.
pub const DEFAULT_MCP_WAIT_MS: u64 = 10_000;

impl AgentSpec {
    /// An agent answered by `model`, with Think's defaults for everything else.
    pub fn new(model: ModelChoice) -> Self {
        Self {
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
            max_steps: DEFAULT_MAX_STEPS,
            tools: Vec::new(),
            model,
            approval: ApprovalPolicy::new(),
            before_turn: None,
            callables: BTreeMap::new(),
            workspace_tools: true,
            grep_index: true,
            guard_stale_writes: true,
            checkpoint_retention: crate::checkpoint::Retention::default(),
            include_mcp_tools: true,
            mcp_resource_tools: false,
            wait_for_mcp_connections: None,
            message_concurrency: MessageConcurrency::Queue,
            bash: Some(BashOptions::default()),
            net: NetPolicy::default(),
            skills: SkillsConfig::default(),
            execute: Some(crate::codemode::ExecuteOptions::default()),
            context: Vec::new(),
            context_window: DEFAULT_CONTEXT_WINDOW,
            token_counter: None,
            browser: None,
            vision: false,
            extensions: Default::default(),
            static_extensions: Vec::new(),
            agent_tools: Vec::new(),
            agent_tool_limits: Default::default(),
            limits: Default::default(),
            chat_recovery: Some(ChatRecovery::default()),
            capabilities: Vec::new(),
        }
    }

    /// Plugs in a feature of the app: `build` makes its [`super::Capability`] for each
    /// instance, from the platform pieces the instance runs on. Its callables come after the
    /// built-in ones of the same name, its tools join the layer it names.
    pub fn capability(
        mut self,
        build: impl Fn(&super::Deps) -> Rc<dyn super::Capability> + 'static,
    ) -> Self {
        self.capabilities.push(Rc::new(build));
        self
    }

    /// Limits each instance's turns and tokens (`THINK_LIMITS`); a turn over a limit ends
    /// with an error naming it and when it resets, without reaching the model.
    pub fn limits(mut self, limits: crate::limits::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Offers a child agent as a tool: the model's call runs the child in its own instance
    /// and returns its final answer (see [`crate::subagents`]).
    pub fn agent_tool(mut self, tool: AgentTool) -> Self {
        self.agent_tools.retain(|t| t.name != tool.name);
        self.agent_tools.push(tool);
        self
    }

    /// How many children run at once (default 4; more wait) and how long a child may make
    /// no progress before it is reported `interrupted` (default 120 s).
    pub fn agent_tool_limits(mut self, limits: crate::subagents::AgentToolLimits) -> Self {
        self.agent_tool_limits = limits;
        self
    }

    /// The spec of the child reached through the agent tools named by `path`, from this
    /// agent down; `None` when a name is not an agent tool.
    pub fn child_spec(&self, path: &[String]) -> Option<AgentSpec> {
        let mut spec = self.clone();
        for name in path {
            let tool = spec.agent_tools.iter().find(|t| &t.name == name)?;
            spec = (tool.child)();
        }
        Some(spec)
    }

    /// Adds an extension of the app: `source` is a JavaScript object expression
    /// `({ tools: {...}, hooks: {...} })`, run in sandboxed isolates with what `manifest`
    /// permits. It is loaded at every start, before those the model loaded.
    pub fn extension(
        mut self,
        manifest: crate::extensions::Manifest,
        source: impl Into<String>,
    ) -> Self {
        self.static_extensions.retain(|(m, _)| m.name != manifest.name);
        self.static_extensions.push((manifest, source.into()));
        self
    }

    /// Extensions' limits, approval policy and whether the model gets `load_extension` and
    /// `list_extensions`.
    pub fn extensions(mut self, options: crate::extensions::ExtensionOptions) -> Self {
        self.extensions = options;
        self
    }

    /// Says the model takes images (`THINK_MODEL_VISION=true`): a `browser_execute`
    /// screenshot then reaches the next model request of the turn as an image part; without
    /// it the model reads the screenshot's text description only.
    pub fn vision(mut self, vision: bool) -> Self {
        self.vision = vision;
        self
    }

    /// Offers the browser tools (`browser_execute` and the quick actions) over the browser
    /// `options` names: a `cdpUrl` Chrome or the Browser Run binding.
    pub fn browser(mut self, options: crate::browser::BrowserOptions) -> Self {
        self.browser = Some(options);
        self
    }

    /// Whether the agent has a browser, so that the glue offers its platform's default one
    /// only to an agent that has none.
    pub fn has_browser(&self) -> bool {
        self.browser.is_some()
    }

    /// Adds a skill given in Rust; it wins over R2 and workspace skills of the same name.
    pub fn skill(mut self, skill: Skill) -> Self {
        self.skills.rust.push(skill);
        self
    }

    /// Reads skills from `<prefix><name>/SKILL.md` in the agent's R2 bucket; they win over
    /// workspace skills of the same name.
    pub fn skills_r2(mut self, prefix: impl Into<String>) -> Self {
        self.skills.r2_prefix = Some(prefix.into());
        self
    }

    /// The workspace folder holding one folder per skill (default `/skills`).
    pub fn skills_dir(mut self, dir: impl Into<String>) -> Self {
        self.skills.dir = dir.into();
        self
    }

    /// Whether skills are on (default: yes; `THINK_SKILLS=false`). Off, no catalog, skill
    /// tool or script exists and `skills()` refuses; the skills' files stay where they are.
    pub fn skills_enabled(mut self, enabled: bool) -> Self {
        self.skills.enabled = enabled;
        self
    }

    /// Adds a context block to the system prompt (Think's `configureSession` blocks); the
    /// context tools of its kind join the turns.
    pub fn context(mut self, block: ContextBlock) -> Self {
        self.context.retain(|b| b.label != block.label);
        self.context.push(block);
        self
    }

    /// The model's context window in tokens: the conversation is compacted past 75% of it.
    pub fn context_window(mut self, tokens: usize) -> Self {
        self.context_window = tokens.max(1);
        self
    }

    /// Counts tokens with the app's tokenizer instead of `max(chars/4, words×1.3)`.
    pub fn token_counter(mut self, counter: impl Fn(&str) -> usize + 'static) -> Self {
        self.token_counter = Some(Rc::new(counter));
        self
    }

    /// Lets URLs the agent did not configure itself (MCP servers added at run time) reach
    /// private network addresses: RFC 1918, link-local, unique-local and the other classes
    /// [`crate::net`] refuses by default. Loopback is allowed either way.
    pub fn allow_private_network(mut self, allow: bool) -> Self {
        self.net.allow_private = allow;
        self
    }

    /// How overlapping chat messages are handled.
    pub fn message_concurrency(mut self, policy: MessageConcurrency) -> Self {
        self.message_concurrency = policy;
        self
    }

    /// Whether MCP servers' tools join the merge (default true). Off, they are not even
    /// converted, so a turn pays nothing for them.
    pub fn include_mcp_tools(mut self, include: bool) -> Self {
        self.include_mcp_tools = include;
        self
    }

    /// Whether the model gets `mcp_list_resources` and `mcp_read_resource` to read the
    /// resources connected MCP servers publish (default off; `THINK_MCP_RESOURCES=true`).
    pub fn mcp_resource_tools(mut self, enabled: bool) -> Self {
        self.mcp_resource_tools = enabled;
        self
    }

    /// Before each model call, wait up to `ms` for MCP servers that are still connecting, so
    /// a turn right after a restart does not miss their tools. `None` (the default) waits not.
    pub fn wait_for_mcp_connections(mut self, ms: Option<u64>) -> Self {
        self.wait_for_mcp_connections = ms;
        self
    }

    /// Whether the workspace file tools join every turn (Think's default: yes).
    pub fn workspace_tools(mut self, enabled: bool) -> Self {
        self.workspace_tools = enabled;
        self
    }

    /// Whether the workspace keeps a trigram index so that `grep` reads only the files that
    /// may match (default: yes; see `WorkspaceOptions::grep_index`).
    /// `grep`'s output is the same either way.
    pub fn grep_index(mut self, enabled: bool) -> Self {
        self.grep_index = enabled;
        self
    }

    /// Whether an `edit` or overwriting `write` without `expectedVersion` of a file that
    /// bash, Code Mode or the app changed since the model last read it is refused with the
    /// diff (default: yes; Think has no such guard).
    pub fn guard_stale_writes(mut self, enabled: bool) -> Self {
        self.guard_stale_writes = enabled;
        self
    }

    /// How many turn checkpoints, and how much of the old content they keep, are retained
    /// (default: the last 50, or 500 MB); older ones are dropped with the content only they
    /// held.
    pub fn checkpoint_retention(mut self, retention: crate::checkpoint::Retention) -> Self {
        self.checkpoint_retention = retention;
        self
    }

    /// How a turn recovers from a transient model error after its answer began (default
    /// [`ChatRecovery::default`], Think's 10 attempts from 1 s to 30 s); `None` ends the turn
    /// with the error instead.
    pub fn chat_recovery(mut self, recovery: Option<ChatRecovery>) -> Self {
        self.chat_recovery = recovery;
        self
    }

    /// The bash tool's limits (Think's `workspaceBash` options); this also enables it.
    pub fn bash(mut self, options: BashOptions) -> Self {
        self.bash = Some(options);
        self
    }

    /// Whether the workspace tools include `bash` (Think's default: yes). Enabling keeps
    /// options set with [`AgentSpec::bash`].
    pub fn bash_enabled(mut self, enabled: bool) -> Self {
        self.bash = if enabled { self.bash.or_else(|| Some(BashOptions::default())) } else { None };
        self
    }

    /// The `execute` tool's limits (Code Mode); this also enables it. It needs a sandbox
    /// (the Worker's `LOADER` binding); without one there is no `execute` tool.
    pub fn execute(mut self, options: crate::codemode::ExecuteOptions) -> Self {
        self.execute = Some(options);
        self
    }

    /// Whether the agent offers the `execute` tool (default: yes, when a sandbox exists).
    pub fn execute_enabled(mut self, enabled: bool) -> Self {
        self.execute =
            if enabled { self.execute.or_else(|| Some(Default::default())) } else { None };
        self
    }

    /// Sets the system prompt every turn starts from.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// Sets how many model calls one turn may make (tool round trips included).
    pub fn max_steps(mut self, steps: usize) -> Self {
        self.max_steps = steps.max(1);
        self
    }

    /// Adds a tool to the agent's own layer (after the workspace tools, before MCP and client tools).
    pub fn tool(mut self, tool: impl crate::tools::Tool + 'static) -> Self {
        self.tools.push(Rc::new(tool));
        self
    }

    /// Adds an already built tool to the agent layer.
    pub fn tool_ref(mut self, tool: ToolRef) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets which tool calls wait for a human's approval.
    pub fn approval(mut self, policy: ApprovalPolicy) -> Self {
        self.approval = policy;
        self
    }

    /// Sets a hook that sees each turn's context and may change its tools, prompt and limits.
    pub fn before_turn(mut self, hook: impl Fn(&TurnContext) -> TurnConfig + 'static) -> Self {
        self.before_turn = Some(Rc::new(hook));
        self
    }

    /// Registers an `rpc`-callable method. Its error is a [`CallError`] (`CallError::Failed`
    /// carries the text the client is shown), or an app error type that converts into one.
    pub fn callable<F, Fut, E>(mut self, name: &str, f: F) -> Self
    where
        F: Fn(Vec<Value>) -> Fut + 'static,
        Fut: std::future::Future<Output = Result<Value, E>> + 'static,
        E: Into<CallError> + 'static,
    {
        let f = Rc::new(f);
        self.callables.insert(
            name.to_owned(),
            Rc::new(move |args| {
                let fut = f(args);
                Box::pin(async move { fut.await.map_err(Into::into) })
            }),
        );
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `$t: From<$s>`, decided at compile time: the inherent constant exists only when
    /// the bound holds, otherwise the trait's `false` is found.
    macro_rules! converts_from {
        ($t:ty, $s:ty) => {{
            struct Probe<T, S>(std::marker::PhantomData<(T, S)>);
            // One of the two constants is never used in each expansion.
            #[allow(dead_code)]
            trait No {
                const YES: bool = false;
            }
            impl<T, S> No for Probe<T, S> {}
            #[allow(dead_code)]
            impl<T: From<S>, S> Probe<T, S> {
                const YES: bool = true;
            }
            <Probe<$t, $s>>::YES
        }};
    }

    /// A stray `?` on a `String` error must not compile into an error of these layers: each
    /// failure names its variant (`CallError::Failed`, `ToolError::Failed`, ...).
    #[test]
    fn error_enums_take_no_bare_strings() {
        use crate::codemode::connectors::ConnectorError;
        use crate::tools::ToolError;
        assert!(converts_from!(ToolError, crate::workspace::FsError), "the probe sees From");
        let found = [
            ("CallError: From<String>", converts_from!(CallError, String)),
            ("CallError: From<&str>", converts_from!(CallError, &'static str)),
            ("ToolError: From<String>", converts_from!(ToolError, String)),
            ("ToolError: From<&str>", converts_from!(ToolError, &'static str)),
            ("ConnectorError: From<String>", converts_from!(ConnectorError, String)),
            ("ConnectorError: From<&str>", converts_from!(ConnectorError, &'static str)),
        ];
        let found: Vec<&str> =
            found.iter().filter(|(_, yes)| *yes).map(|(name, _)| *name).collect();
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn concurrency_policies_parse() {
        assert_eq!(MessageConcurrency::parse("").unwrap(), MessageConcurrency::Queue);
        assert_eq!(MessageConcurrency::parse("latest").unwrap(), MessageConcurrency::Latest);
        assert_eq!(MessageConcurrency::parse("merge").unwrap(), MessageConcurrency::Merge);
        assert_eq!(MessageConcurrency::parse("drop").unwrap(), MessageConcurrency::Drop);
        assert_eq!(
            MessageConcurrency::parse("debounce").unwrap(),
            MessageConcurrency::Debounce(750)
        );
        assert_eq!(
            MessageConcurrency::parse("debounce:200").unwrap(),
            MessageConcurrency::Debounce(200)
        );
        assert!(MessageConcurrency::parse("sometimes").is_err());
    }

    #[test]
    fn model_settings_name_what_is_missing() {
        match ModelChoice::from_settings(Some("http://x/v1"), None, Some("m")) {
            ModelChoice::OpenAi(cfg) => {
                assert_eq!((cfg.base_url.as_str(), cfg.api_key.as_str()), ("http://x/v1", ""))
            }
            _ => panic!("expected a configured model"),
        }
        match ModelChoice::from_settings(None, Some("k"), Some(" ")) {
            ModelChoice::Unconfigured(msg) => {
                assert!(msg.contains("THINK_MODEL_BASE_URL and THINK_MODEL not set"), "{msg}");
            }
            _ => panic!("expected unconfigured"),
        }
    }
}

#[cfg(test)]
mod recovery_tests {
    use super::*;

    #[test]
    fn the_recovery_backoff_doubles_from_1_s_to_30_s_and_honours_retry_after() {
        let r = ChatRecovery::default();
        let waits: Vec<u64> = (1..=8).map(|n| r.delay_ms(n, None)).collect();
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
        assert_eq!(r.delay_ms(40, None), 30_000, "no overflow");
        assert_eq!(r.delay_ms(1, Some(5_000)), 5_000, "Retry-After stretches a wait");
        assert_eq!(r.delay_ms(3, Some(10)), 4_000, "but never shortens the backoff");
        assert_eq!(r.delay_ms(1, Some(600_000)), 60_000, "at most a minute");
        let quick = ChatRecovery { max_attempts: 3, initial_delay_ms: 20, max_delay_ms: 50 };
        assert_eq!([1, 2, 3].map(|n| quick.delay_ms(n, None)), [20, 40, 50]);
    }
}
