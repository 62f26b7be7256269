//! The shipped agent's configuration from `THINK_*` settings, over any lookup (the Worker's
//! environment in `wasm`, a map in tests). Every `THINK_*` setting is read here:
//!
//! - `THINK_MODEL_PROVIDER`: `openai` (the default when a base URL is set), `anthropic`, or
//!   `workers-ai` (the default when the `AI` binding exists and no base URL is set);
//! - `THINK_MODEL_BASE_URL`, `THINK_MODEL_API_KEY`, `THINK_MODEL`: the endpoint, its key and
//!   the model name (Anthropic's base defaults to `https://api.anthropic.com/v1`, Workers AI's
//!   model to [`DEFAULT_WORKERS_AI_MODEL`]);
//! - `THINK_MODEL_THINKING_BUDGET`: Anthropic's extended thinking, in budget tokens;
//! - `THINK_MODEL_VISION`: `true` says the model takes images (browser screenshots reach it);
//! - `THINK_APPROVAL`: comma-separated names or globs of tools that need approval; an entry
//!   `!glob` lifts the approval that MCP tools annotated `destructiveHint: true` need by default;
//! - `THINK_BASH`: the bash tool, like Think's `workspaceBash`: `false` removes it, a JSON
//!   object sets its options (`{"timeout": 5000, "network": true, "maxWorkspaceFiles": 1000,
//!   "maxWorkspaceFileBytes": 1000000, "maxOutputBytes": 64000}`; missing keys keep Think's
//!   defaults);
//! - `THINK_EXECUTE`: the `execute` tool (Code Mode): `false` removes it, a JSON object sets
//!   its limits (`{"timeout": 60000, "maxInFlight": 10, "retention": 50, "pausedMaxAgeMs":
//!   86400000}`);
//! - `THINK_MESSAGE_CONCURRENCY`: `queue`, `latest`, `merge`, `drop`, `debounce[:ms]`;
//! - `THINK_WAIT_FOR_MCP_CONNECTIONS`: `true` (Think's 10 s), a number of ms, or off;
//! - `THINK_MCP_RESOURCES`: `true` gives the model `mcp_list_resources`/`mcp_read_resource`;
//! - `THINK_ALLOW_PRIVATE_NETWORK`: `true` lets run-time URLs reach private addresses;
//! - `THINK_SKILLS_DIR`: the workspace folder of skills (an absolute path; `/skills`).
//! - `THINK_SKILLS`: `false` switches skills off (no catalog, skill tools or scripts).
//! - `THINK_CONTEXT`: the context blocks, a JSON array `[{label, description?, type,
//!   maxTokens?, content?}]` (default: one writable `memory` block; `[]`: none);
//! - `THINK_CONTEXT_WINDOW`: the model's context window in tokens (default 128000).
//! - `THINK_BROWSER_CDP_URL`, `THINK_BROWSER_ALLOW`, `THINK_BROWSER_SESSION`, `THINK_BROWSER`,
//!   `THINK_BROWSER_BINDING`: the browser tools (see [`browser_options`]).
//! - `THINK_EXTENSIONS`: `false` switches extensions off, stored and static; a JSON
//!   object sets `{"approval": "permissions"|"always"|"never", "toolTimeout": 30000,
//!   "hookTimeout": 5000, "extensions": [{"manifest": {...}, "source": "..."}]}` (the last
//!   being static extensions loaded at every start).
//! - `THINK_SUBAGENT`: the `subagent` tool (agents as tools): `false` removes it, a JSON
//!   object sets `{"depth": 1, "maxConcurrent": 4, "stallMs": 120000}`.
//! - `THINK_CHECKPOINTS`: checkpoint retention, a JSON object
//!   `{"maxCheckpoints": 50, "maxBytes": 500000000}` (either key may be left out).
//! - `THINK_LIMITS`: per-instance limits, a JSON object `{"turnsPerMinute": 20,
//!   "tokensPerDay": 2000000}` (or `"turns"`/`"tokens": {"max", "windowMs"}`; see
//!   [`crate::limits`]).
//! - `THINK_CHAT_RECOVERY`: recovery from transient model errors after output began: `false`
//!   turns it off, a JSON object sets `{"maxAttempts": 10, "initialDelayMs": 1000,
//!   "maxDelayMs": 30000}` (keys left out keep these defaults, Think's).
//!
//! The `THINK_AUTH_*` settings are read by the Worker entry, not here ([`crate::auth`]).
//!
//! A value that cannot be read is ignored with a logged reason, so a typo never stops the agent
//! from starting, and it fails closed: a feature's setting that cannot be read switches the
//! feature off (`THINK_BASH`, `THINK_EXECUTE`, `THINK_EXTENSIONS`, `THINK_SKILLS`,
//! `THINK_SUBAGENT`, `THINK_BROWSER`), an unreadable `THINK_APPROVAL` makes every tool need
//! approval, and an unreadable `THINK_LIMITS` refuses every turn, naming why; the other
//! settings keep their defaults. A typo in a setting meant to restrict never lifts the
//! restriction. A feature switched off is all gone, its stored state kept (see
//! [`super::switches`]).

use std::rc::Rc;

use super::spec::{AgentSpec, ChatRecovery, MessageConcurrency, ModelChoice, DEFAULT_MCP_WAIT_MS};
use crate::checkpoint::Retention;
use crate::model::anthropic::AnthropicConfig;
use crate::model::workers_ai::{AiBinding, DEFAULT_WORKERS_AI_MODEL};
use crate::session::compact::DEFAULT_CONTEXT_WINDOW;
use crate::session::{parse_blocks, DEFAULT_CONTEXT};
use crate::tools::approval::ApprovalPolicy;
use crate::tools::workspace::bash::BashOptions;

/// A setting whose value was ignored, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The setting's name, e.g. `THINK_BASH`.
    pub name: &'static str,
    /// Why its value could not be used.
    pub reason: String,
}

impl std::fmt::Display for SettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ignoring {}: {}", self.name, self.reason)
    }
}

impl std::error::Error for SettingError {}

/// The agent the settings describe; ignored values are logged.
pub fn spec_from_settings(get: impl Fn(&str) -> Option<String>) -> AgentSpec {
    spec_from_settings_and_ai(get, None)
}

/// Like [`spec_from_settings`], on a Worker whose `AI` binding is `ai` (when it has one).
pub fn spec_from_settings_and_ai(
    get: impl Fn(&str) -> Option<String>,
    ai: Option<Rc<dyn AiBinding>>,
) -> AgentSpec {
    let (spec, ignored) = read_settings_and_ai(get, ai);
    for e in ignored {
        crate::platform::log(&format!("think-rs: {e}"));
    }
    spec
}

/// The agent the settings describe, and the settings whose values were ignored.
pub fn read_settings(get: impl Fn(&str) -> Option<String>) -> (AgentSpec, Vec<SettingError>) {
    read_settings_and_ai(get, None)
}

/// [`read_settings`] on a Worker whose `AI` binding is `ai`.
pub fn read_settings_and_ai(
    get: impl Fn(&str) -> Option<String>,
    ai: Option<Rc<dyn AiBinding>>,
) -> (AgentSpec, Vec<SettingError>) {
    let mut ignored = Vec::new();
    let mut ignore =
        |name: &'static str, reason: String| ignored.push(SettingError { name, reason });
    let model = model_choice(&get, ai, &mut ignore);
    let approval = ApprovalPolicy::from_list(&get("THINK_APPROVAL").unwrap_or_default())
        .unwrap_or_else(|e| {
            ignore("THINK_APPROVAL", e.to_string());
            ApprovalPolicy::new().require("*").unwrap_or_default()
        });
    let mcp_wait = match get("THINK_WAIT_FOR_MCP_CONNECTIONS").as_deref().map(str::trim) {
        None | Some("") | Some("false") | Some("0") => None,
        Some("true") => Some(DEFAULT_MCP_WAIT_MS),
        Some(ms) => ms.parse().map(Some).unwrap_or_else(|_| {
            ignore(
                "THINK_WAIT_FOR_MCP_CONNECTIONS",
                format!("expected true, false or ms, not {ms:?}"),
            );
            None
        }),
    };
    let concurrency =
        MessageConcurrency::parse(&get("THINK_MESSAGE_CONCURRENCY").unwrap_or_default())
            .unwrap_or_else(|e| {
                ignore("THINK_MESSAGE_CONCURRENCY", e.to_string());
                MessageConcurrency::Queue
            });
    let bash =
        BashOptions::from_setting(&get("THINK_BASH").unwrap_or_default()).unwrap_or_else(|e| {
            ignore("THINK_BASH", e.to_string());
            None
        });
    let execute =
        crate::codemode::ExecuteOptions::from_setting(&get("THINK_EXECUTE").unwrap_or_default())
            .unwrap_or_else(|e| {
                ignore("THINK_EXECUTE", e.to_string());
                None
            });
    let mut flag = |name: &'static str| {
        flag_setting(get(name).as_deref()).unwrap_or_else(|e| {
            ignore(name, e);
            false
        })
    };
    let mcp_resources = flag("THINK_MCP_RESOURCES");
    let private = flag("THINK_ALLOW_PRIVATE_NETWORK");
    let vision = flag("THINK_MODEL_VISION");
    let skills_on = match get("THINK_SKILLS").as_deref().map(str::trim) {
        None | Some("") => true,
        v => flag_setting(v).unwrap_or_else(|e| {
            ignore("THINK_SKILLS", e);
            false
        }),
    };
    let skills_dir = match get("THINK_SKILLS_DIR").as_deref().map(str::trim) {
        None | Some("") => crate::skills::DEFAULT_SKILLS_DIR.to_owned(),
        Some(dir) if dir.starts_with('/') && !dir.split('/').any(|s| s == "..") => dir.to_owned(),
        Some(other) => {
            ignore(
                "THINK_SKILLS_DIR",
                format!("expected an absolute workspace path without .., not {other:?}"),
            );
            crate::skills::DEFAULT_SKILLS_DIR.to_owned()
        }
    };
    let context = get("THINK_CONTEXT").filter(|v| !v.trim().is_empty());
    let blocks = parse_blocks(context.as_deref().unwrap_or(DEFAULT_CONTEXT)).unwrap_or_else(|e| {
        ignore("THINK_CONTEXT", e.to_string());
        parse_blocks(DEFAULT_CONTEXT).unwrap_or_default()
    });
    let window = match get("THINK_CONTEXT_WINDOW").as_deref().map(str::trim) {
        None | Some("") => DEFAULT_CONTEXT_WINDOW,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                ignore("THINK_CONTEXT_WINDOW", format!("expected a number of tokens, not {v:?}"));
                DEFAULT_CONTEXT_WINDOW
            }
        },
    };
    let (extension_options, statics) =
        read_extensions(&get("THINK_EXTENSIONS").unwrap_or_default(), &mut ignore);
    let subagent = crate::subagents::setting::SubagentSetting::parse(
        &get("THINK_SUBAGENT").unwrap_or_default(),
    )
    .unwrap_or_else(|e| {
        ignore("THINK_SUBAGENT", e.to_string());
        None
    });
    let retention = checkpoint_retention(&get("THINK_CHECKPOINTS").unwrap_or_default())
        .unwrap_or_else(|reason| {
            ignore("THINK_CHECKPOINTS", reason);
            Retention::default()
        });
    let limits = crate::limits::Limits::parse(&get("THINK_LIMITS").unwrap_or_default())
        .unwrap_or_else(|reason| {
            ignore("THINK_LIMITS", reason.clone());
            crate::limits::Limits::refuse_all(reason)
        });
    let recovery =
        chat_recovery(&get("THINK_CHAT_RECOVERY").unwrap_or_default()).unwrap_or_else(|reason| {
            ignore("THINK_CHAT_RECOVERY", reason);
            Some(ChatRecovery::default())
        });
    let mut spec = AgentSpec::new(model)
        .context_window(window)
        .skills_dir(skills_dir)
        .skills_enabled(skills_on)
        .checkpoint_retention(retention)
        .limits(limits)
        .chat_recovery(recovery);
    spec = spec.extensions(extension_options);
    for (manifest, source) in statics {
        spec = spec.extension(manifest, source);
    }
    for block in blocks {
        spec = spec.context(block);
    }
    let spec = spec
        .approval(approval)
        .wait_for_mcp_connections(mcp_wait)
        .mcp_resource_tools(mcp_resources)
        .message_concurrency(concurrency)
        .allow_private_network(private)
        .vision(vision);
    let spec = match bash {
        Some(options) => spec.bash(options),
        None => spec.bash_enabled(false),
    };
    let spec = match execute {
        Some(options) => spec.execute(options),
        None => spec.execute_enabled(false),
    };
    let spec = match browser_options(&get, false) {
        Ok(Some(options)) => spec.browser(options),
        Ok(None) => spec,
        Err(e) => {
            ignored.push(e);
            spec
        }
    };
    let spec = match subagent {
        Some(setting) => with_subagent(spec, setting.depth, setting.limits),
        None => spec,
    };
    (spec, ignored)
}

/// Transient-error recovery from `THINK_CHAT_RECOVERY`: `false` turns it off; keys left out
/// keep their defaults.
fn chat_recovery(value: &str) -> Result<Option<ChatRecovery>, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Setting {
        max_attempts: Option<u32>,
        initial_delay_ms: Option<u64>,
        max_delay_ms: Option<u64>,
    }
    match value.trim() {
        "" => return Ok(Some(ChatRecovery::default())),
        "false" | "0" => return Ok(None),
        _ => {}
    }
    let setting: Setting = serde_json::from_str(value).map_err(|e| {
        format!("expected false or {{\"maxAttempts\": n, \"initialDelayMs\": ms, \"maxDelayMs\": ms}}: {e}")
    })?;
    let default = ChatRecovery::default();
    let recovery = ChatRecovery {
        max_attempts: setting.max_attempts.unwrap_or(default.max_attempts),
        initial_delay_ms: setting.initial_delay_ms.unwrap_or(default.initial_delay_ms),
        max_delay_ms: setting.max_delay_ms.unwrap_or(default.max_delay_ms),
    };
    if recovery.max_attempts == 0 || recovery.max_delay_ms < recovery.initial_delay_ms {
        return Err("maxAttempts must be at least 1 and maxDelayMs at least initialDelayMs".into());
    }
    Ok(Some(recovery))
}

/// Checkpoint retention from `THINK_CHECKPOINTS`: keys left out keep their defaults.
fn checkpoint_retention(value: &str) -> Result<Retention, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Setting {
        max_checkpoints: Option<usize>,
        max_bytes: Option<u64>,
    }
    if value.trim().is_empty() {
        return Ok(Retention::default());
    }
    let setting: Setting = serde_json::from_str(value)
        .map_err(|e| format!("expected {{\"maxCheckpoints\": n, \"maxBytes\": n}}: {e}"))?;
    let default = Retention::default();
    Ok(Retention {
        max_checkpoints: setting.max_checkpoints.unwrap_or(default.max_checkpoints),
        max_bytes: setting.max_bytes.unwrap_or(default.max_bytes),
    })
}

/// The browser tools from `THINK_BROWSER_CDP_URL` (a Chrome's `http://host:port`, which wins)
/// or, when `binding` says the Worker has one, the `BROWSER` binding; `THINK_BROWSER_ALLOW`
/// (hosts, comma-separated), `THINK_BROWSER_SESSION` (`one-shot`, `reuse`, `dynamic`) and
/// `THINK_BROWSER` (`false` turns the tools off; a JSON object sets `maxChars`,
/// `commandTimeoutMs`, `idleMs` and `content`). `THINK_BROWSER_BINDING=false` says the
/// binding cannot reach Browser Run where the Worker runs (`npm start` sets it: `wrangler dev
/// --local` has no Browser Run), so only a CDP URL gives a browser. `None` when there is none.
pub fn browser_options(
    get: &impl Fn(&str) -> Option<String>,
    binding: bool,
) -> Result<Option<crate::browser::BrowserOptions>, SettingError> {
    use crate::browser::{BrowserEndpoint, BrowserOptions, HostPolicy, SessionMode};
    let err = |name: &'static str, reason: String| SettingError { name, reason };
    let extra = non_empty(get("THINK_BROWSER"));
    if matches!(extra.as_deref(), Some("false" | "0")) {
        return Ok(None);
    }
    let binding = binding
        && match non_empty(get("THINK_BROWSER_BINDING")).as_deref() {
            None | Some("true" | "1") => true,
            Some("false" | "0") => false,
            Some(other) => {
                return Err(err(
                    "THINK_BROWSER_BINDING",
                    format!("expected true or false, not {other:?}"),
                ))
            }
        };
    let endpoint = match non_empty(get("THINK_BROWSER_CDP_URL")) {
        Some(url) => {
            crate::net::Url::parse(&url)
                .map_err(|e| err("THINK_BROWSER_CDP_URL", format!("{url:?} is not a URL: {e}")))?;
            BrowserEndpoint::CdpUrl(url)
        }
        None if binding => BrowserEndpoint::Binding,
        None => return Ok(None),
    };
    let mut options = BrowserOptions::new(endpoint);
    options.allowed_hosts = HostPolicy::parse_list(&get("THINK_BROWSER_ALLOW").unwrap_or_default());
    if let Some(mode) = non_empty(get("THINK_BROWSER_SESSION")) {
        options.session_mode =
            SessionMode::parse(&mode).map_err(|e| err("THINK_BROWSER_SESSION", e.to_string()))?;
    }
    if let Some(extra) = extra.filter(|e| e != "true" && e != "1") {
        let bad = |reason: String| err("THINK_BROWSER", reason);
        let v: serde_json::Value = serde_json::from_str(&extra)
            .map_err(|e| bad(format!("not false or a JSON object: {e}")))?;
        let obj = v.as_object().ok_or_else(|| bad("not false or a JSON object".into()))?;
        for (k, v) in obj {
            let n = || {
                v.as_f64()
                    .filter(|n| *n >= 1.0)
                    .ok_or_else(|| bad(format!("{k} must be a positive number")))
            };
            match k.as_str() {
                "maxChars" => options.max_chars = n()? as usize,
                "commandTimeoutMs" => options.command_timeout_ms = n()? as u64,
                "idleMs" => options.idle_ms = n()?,
                "content" => {
                    options.content_action =
                        v.as_bool().ok_or_else(|| bad("content must be true or false".into()))?
                }
                other => return Err(bad(format!("unknown key {other:?}"))),
            }
        }
    }
    Ok(Some(options))
}

/// `THINK_EXTENSIONS`: the options, and the static extensions of its `extensions` key.
fn read_extensions(
    value: &str,
    ignore: &mut impl FnMut(&'static str, String),
) -> (crate::extensions::ExtensionOptions, Vec<(crate::extensions::Manifest, String)>) {
    use crate::extensions::{ExtensionOptions, Manifest};
    let mut parsed: Option<serde_json::Value> = serde_json::from_str(value).ok();
    let statics = parsed
        .as_mut()
        .and_then(|v| v.as_object_mut())
        .and_then(|o| o.remove("extensions"))
        .map(|list| {
            let items = list.as_array().cloned().unwrap_or_default();
            if !list.is_array() {
                ignore("THINK_EXTENSIONS", "extensions must be an array".into());
            }
            items
                .into_iter()
                .filter_map(|item| {
                    let source = item.get("source").and_then(|s| s.as_str()).map(str::to_owned);
                    let manifest = item.get("manifest").cloned().map(Manifest::from_json);
                    match (manifest, source) {
                        (Some(Ok(m)), Some(s)) => Some((m, s)),
                        (Some(Err(e)), _) => {
                            ignore("THINK_EXTENSIONS", e.to_string());
                            None
                        }
                        _ => {
                            ignore(
                                "THINK_EXTENSIONS",
                                "each of extensions needs a manifest and a source".into(),
                            );
                            None
                        }
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let rest = parsed.map(|v| v.to_string()).unwrap_or_else(|| value.to_owned());
    let options = ExtensionOptions::from_setting(&rest).unwrap_or_else(|e| {
        ignore("THINK_EXTENSIONS", e.to_string());
        ExtensionOptions { enabled: false, ..ExtensionOptions::default() }
    });
    (options, statics)
}

/// Trimmed and non-empty, or `None`.
fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The model from `THINK_MODEL_PROVIDER` and the settings it reads.
fn model_choice(
    get: &impl Fn(&str) -> Option<String>,
    ai: Option<Rc<dyn AiBinding>>,
    ignore: &mut impl FnMut(&'static str, String),
) -> ModelChoice {
    let base_url = non_empty(get("THINK_MODEL_BASE_URL"));
    let model = non_empty(get("THINK_MODEL"));
    let api_key = non_empty(get("THINK_MODEL_API_KEY")).unwrap_or_default();
    let provider = non_empty(get("THINK_MODEL_PROVIDER")).map(|p| p.to_ascii_lowercase());
    let provider = match provider.as_deref() {
        None => None,
        Some(p @ ("openai" | "anthropic" | "workers-ai")) => Some(p),
        Some(other) => {
            ignore(
                "THINK_MODEL_PROVIDER",
                format!("expected openai, anthropic or workers-ai, not {other:?}"),
            );
            None
        }
    };
    let provider = provider.unwrap_or(if base_url.is_none() && ai.is_some() {
        "workers-ai"
    } else {
        "openai"
    });
    match provider {
        "anthropic" => {
            let thinking_budget = match non_empty(get("THINK_MODEL_THINKING_BUDGET")) {
                None => None,
                Some(b) => match b.parse::<u32>() {
                    Ok(0) => None,
                    Ok(n) if n >= 1024 => Some(n),
                    _ => {
                        ignore(
                            "THINK_MODEL_THINKING_BUDGET",
                            format!("expected a token count of at least 1024, not {b:?}"),
                        );
                        None
                    }
                },
            };
            match model {
                Some(model) => ModelChoice::Anthropic(AnthropicConfig {
                    base_url: base_url.unwrap_or_else(|| "https://api.anthropic.com/v1".into()),
                    api_key,
                    model,
                    thinking_budget,
                }),
                None => ModelChoice::Unconfigured(
                    "No model is configured: THINK_MODEL_PROVIDER is anthropic but THINK_MODEL \
                     (e.g. claude-sonnet-4-5) is not set."
                        .into(),
                ),
            }
        }
        "workers-ai" => match ai {
            Some(binding) => ModelChoice::WorkersAi {
                model: model.unwrap_or_else(|| DEFAULT_WORKERS_AI_MODEL.into()),
                binding,
            },
            None => ModelChoice::Unconfigured(
                "No model is configured: THINK_MODEL_PROVIDER is workers-ai but the Worker has \
                 no AI binding (add [ai] binding = \"AI\" to wrangler.toml)."
                    .into(),
            ),
        },
        _ => ModelChoice::from_settings(base_url.as_deref(), Some(&api_key), model.as_deref()),
    }
}

/// A true/false setting: unset, empty, `false` and `0` are false; `true` and `1` true.
fn flag_setting(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(format!("expected true or false, not {other:?}")),
    }
}

/// Adds the `subagent` tool that `THINK_SUBAGENT` asks for to `spec`: its child is `spec` as
/// it is now (the parent's model, workspace tools and prompt, a fresh transcript), with a
/// `subagent` tool of its own only while levels remain.
pub(crate) fn with_subagent(
    base: AgentSpec,
    depth: u32,
    limits: crate::subagents::AgentToolLimits,
) -> AgentSpec {
    if depth == 0 {
        return base;
    }
    let child_base = base.clone();
    base.agent_tool_limits(limits).agent_tool(super::AgentTool::subagent(move || {
        with_subagent(child_base.clone(), depth - 1, limits)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::BlockKind;
    use serde_json::json;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> (AgentSpec, Vec<SettingError>) {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        read_settings(|name| map.get(name).cloned())
    }

    /// A binding that is never run: these tests only look at the choice.
    struct IdleAi;

    #[async_trait::async_trait(?Send)]
    impl AiBinding for IdleAi {
        async fn run(
            &self,
            _: &str,
            _: serde_json::Value,
        ) -> Result<
            futures::stream::LocalBoxStream<'static, Result<Vec<u8>, crate::platform::HttpError>>,
            crate::model::workers_ai::AiRunError,
        > {
            unreachable!("settings tests do not run models")
        }
    }

    fn read_with_ai(pairs: &[(&str, &str)]) -> (AgentSpec, Vec<SettingError>) {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        read_settings_and_ai(|name| map.get(name).cloned(), Some(Rc::new(IdleAi)))
    }

    #[test]
    fn checkpoint_retention_from_think_checkpoints() {
        let (spec, ignored) = read(&[]);
        assert!(ignored.is_empty());
        assert_eq!(spec.checkpoint_retention, Retention::default());
        let (spec, ignored) = read(&[("THINK_CHECKPOINTS", r#"{"maxCheckpoints": 2}"#)]);
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(spec.checkpoint_retention.max_checkpoints, 2);
        assert_eq!(spec.checkpoint_retention.max_bytes, Retention::default().max_bytes);
        let (spec, ignored) = read(&[("THINK_CHECKPOINTS", r#"{"keep": 2}"#)]);
        assert_eq!(ignored.len(), 1);
        assert_eq!(ignored[0].name, "THINK_CHECKPOINTS");
        assert_eq!(spec.checkpoint_retention, Retention::default(), "a typo keeps the default");
    }

    #[test]
    fn limits_from_think_limits() {
        let (spec, ignored) =
            read(&[("THINK_LIMITS", r#"{"turnsPerMinute": 3, "tokensPerDay": 900}"#)]);
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(
            spec.limits,
            crate::limits::Limits::default().turns_per_minute(3).tokens_per_day(900)
        );
        let (spec, ignored) = read(&[("THINK_LIMITS", r#"{"turnsPerMinit": 3}"#)]);
        assert_eq!(ignored[0].name, "THINK_LIMITS");
        assert_eq!(spec.limits.turns, None);
        let reason = spec.limits.unreadable.expect("a typo refuses turns, not lifts the limits");
        assert!(reason.contains("turnsPerMinit"), "{reason}");
    }

    #[test]
    fn chat_recovery_from_think_chat_recovery() {
        let (spec, ignored) = read(&[]);
        assert!(ignored.is_empty());
        let default =
            ChatRecovery { max_attempts: 10, initial_delay_ms: 1_000, max_delay_ms: 30_000 };
        assert_eq!(spec.chat_recovery, Some(default), "Think's 10 attempts, 1 s to 30 s");
        let (spec, ignored) = read(&[("THINK_CHAT_RECOVERY", "false")]);
        assert!(ignored.is_empty());
        assert_eq!(spec.chat_recovery, None);
        let (spec, ignored) =
            read(&[("THINK_CHAT_RECOVERY", r#"{"initialDelayMs": 20, "maxDelayMs": 80}"#)]);
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(
            spec.chat_recovery,
            Some(ChatRecovery { max_attempts: 10, initial_delay_ms: 20, max_delay_ms: 80 })
        );
        for bad in
            [r#"{"attempts": 2}"#, r#"{"maxAttempts": 0}"#, r#"{"initialDelayMs": 50000}"#, "yes"]
        {
            let (spec, ignored) = read(&[("THINK_CHAT_RECOVERY", bad)]);
            assert_eq!(ignored.len(), 1, "{bad}");
            assert_eq!(ignored[0].name, "THINK_CHAT_RECOVERY");
            assert_eq!(spec.chat_recovery, Some(default), "{bad}: a typo keeps the default");
        }
    }

    #[test]
    fn model_provider() {
        // The binding alone gives Workers AI with the default model; THINK_MODEL picks another.
        let (spec, _) = read_with_ai(&[]);
        let ModelChoice::WorkersAi { model, .. } = spec.model else {
            panic!("expected Workers AI")
        };
        assert_eq!(model, DEFAULT_WORKERS_AI_MODEL);
        let (spec, _) = read_with_ai(&[("THINK_MODEL", "@cf/openai/gpt-oss-120b")]);
        let ModelChoice::WorkersAi { model, .. } = spec.model else {
            panic!("expected Workers AI")
        };
        assert_eq!(model, "@cf/openai/gpt-oss-120b");
        // A base URL wins over the binding, unless the provider is named.
        let url = ("THINK_MODEL_BASE_URL", "http://127.0.0.1:9/v1");
        let (spec, _) = read_with_ai(&[url, ("THINK_MODEL", "m")]);
        assert!(matches!(spec.model, ModelChoice::OpenAi(_)));
        let (spec, _) =
            read_with_ai(&[url, ("THINK_MODEL", "m"), ("THINK_MODEL_PROVIDER", "workers-ai")]);
        assert!(matches!(spec.model, ModelChoice::WorkersAi { .. }));
        let (spec, _) = read(&[("THINK_MODEL_PROVIDER", "workers-ai")]);
        let ModelChoice::Unconfigured(msg) = spec.model else { panic!("expected unconfigured") };
        assert!(msg.contains("no AI binding"), "{msg}");
        // Anthropic: its own base by default, the key and the thinking budget.
        let (spec, ignored) = read(&[
            ("THINK_MODEL_PROVIDER", " Anthropic "),
            ("THINK_MODEL", "claude-sonnet-4-5"),
            ("THINK_MODEL_API_KEY", "sk-ant"),
            ("THINK_MODEL_THINKING_BUDGET", "2048"),
        ]);
        assert!(ignored.is_empty(), "{ignored:?}");
        let ModelChoice::Anthropic(cfg) = spec.model else { panic!("expected Anthropic") };
        assert_eq!(
            cfg,
            AnthropicConfig {
                base_url: "https://api.anthropic.com/v1".into(),
                api_key: "sk-ant".into(),
                model: "claude-sonnet-4-5".into(),
                thinking_budget: Some(2048),
            }
        );
        let (spec, ignored) = read(&[
            ("THINK_MODEL_PROVIDER", "anthropic"),
            url,
            ("THINK_MODEL", "c"),
            ("THINK_MODEL_THINKING_BUDGET", "lots"),
        ]);
        let ModelChoice::Anthropic(cfg) = spec.model else { panic!("expected Anthropic") };
        assert_eq!((cfg.base_url.as_str(), cfg.thinking_budget), ("http://127.0.0.1:9/v1", None));
        assert_eq!(ignored[0].name, "THINK_MODEL_THINKING_BUDGET");
        let (spec, _) = read(&[("THINK_MODEL_PROVIDER", "anthropic")]);
        assert!(matches!(spec.model, ModelChoice::Unconfigured(_)));
        // An unknown provider is ignored: the default applies.
        let (spec, ignored) = read(&[url, ("THINK_MODEL", "m"), ("THINK_MODEL_PROVIDER", "bard")]);
        assert!(matches!(spec.model, ModelChoice::OpenAi(_)));
        assert_eq!(ignored[0].name, "THINK_MODEL_PROVIDER");
    }

    fn ignored(pairs: &[(&str, &str)]) -> Vec<&'static str> {
        read(pairs).1.iter().map(|e| e.name).collect()
    }

    #[test]
    fn no_settings_give_think_defaults() {
        let (spec, ignored) = read(&[]);
        assert!(ignored.is_empty());
        assert!(matches!(spec.model, ModelChoice::Unconfigured(_)));
        assert!(spec.approval.is_empty());
        assert_eq!(spec.wait_for_mcp_connections, None);
        assert_eq!(spec.message_concurrency, MessageConcurrency::Queue);
        assert_eq!(spec.bash, Some(BashOptions::default()));
        assert!(!spec.net.allow_private);
        assert!(spec.net.allow_loopback);
        assert_eq!(spec.context_window, DEFAULT_CONTEXT_WINDOW);
        assert_eq!(spec.context.len(), 1, "the default memory block");
        let memory = &spec.context[0];
        assert_eq!(
            (memory.label.as_str(), memory.kind, memory.max_tokens),
            ("memory", BlockKind::Writable, Some(2000))
        );
    }

    #[test]
    fn context_blocks() {
        let (spec, errors) = read(&[("THINK_CONTEXT", "[]")]);
        assert!(spec.context.is_empty() && errors.is_empty());
        let (spec, _) = read(&[(
            "THINK_CONTEXT",
            r#"[{"label":"rules","type":"readonly","content":"Be brief."},{"label":"notes","type":"searchable"}]"#,
        )]);
        assert_eq!(spec.context.len(), 2);
        assert_eq!(spec.context[0].content.as_deref(), Some("Be brief."));
        assert_eq!(spec.context[1].kind, BlockKind::Searchable);
        for bad in [
            r#"[{"label":"x","type":"magic"}]"#,
            "{",
            r#"[{"label":"a","type":"writable"},{"label":"a","type":"skill"}]"#,
        ] {
            let (spec, errors) = read(&[("THINK_CONTEXT", bad)]);
            assert_eq!(errors[0].name, "THINK_CONTEXT", "{bad}");
            assert_eq!(spec.context[0].label, "memory", "the default applies");
        }
    }

    #[test]
    fn context_window() {
        let window = |v: &str| read(&[("THINK_CONTEXT_WINDOW", v)]).0.context_window;
        assert_eq!(window("4000"), 4000);
        assert_eq!(window(""), DEFAULT_CONTEXT_WINDOW);
        assert_eq!(window("big"), DEFAULT_CONTEXT_WINDOW);
        assert_eq!(window("0"), DEFAULT_CONTEXT_WINDOW);
        assert_eq!(ignored(&[("THINK_CONTEXT_WINDOW", "big")]), ["THINK_CONTEXT_WINDOW"]);
    }

    #[test]
    fn model_settings() {
        let (spec, _) = read(&[
            ("THINK_MODEL_BASE_URL", "http://127.0.0.1:11434/v1"),
            ("THINK_MODEL_API_KEY", " k "),
            ("THINK_MODEL", "llama3.1"),
        ]);
        let ModelChoice::OpenAi(cfg) = spec.model else { panic!("expected an OpenAI model") };
        assert_eq!(
            (cfg.base_url.as_str(), cfg.api_key.as_str(), cfg.model.as_str()),
            ("http://127.0.0.1:11434/v1", "k", "llama3.1")
        );
        let (spec, _) = read(&[("THINK_MODEL", "m")]);
        let ModelChoice::Unconfigured(msg) = spec.model else { panic!("expected unconfigured") };
        assert!(msg.contains("THINK_MODEL_BASE_URL not set"), "{msg}");
    }

    #[test]
    fn approval() {
        let (spec, _) = read(&[("THINK_APPROVAL", "delete, tool_*_write*")]);
        assert!(spec.approval.needs_approval("delete", &json!({})));
        assert!(spec.approval.needs_approval("tool_abc_write_file", &json!({})));
        assert!(!spec.approval.needs_approval("read", &json!({})));
        let (spec, errors) = read(&[("THINK_APPROVAL", "[")]);
        assert!(
            spec.approval.needs_approval("read", &json!({})),
            "an unreadable list asks for every tool, not none"
        );
        assert_eq!(errors[0].name, "THINK_APPROVAL");
        assert!(errors[0].to_string().starts_with("ignoring THINK_APPROVAL: "));
    }

    #[test]
    fn bash() {
        let (spec, _) = read(&[("THINK_BASH", "false")]);
        assert_eq!(spec.bash, None);
        let (spec, _) = read(&[("THINK_BASH", r#"{"timeout": 5000, "network": true}"#)]);
        let options = spec.bash.unwrap();
        assert_eq!((options.timeout_ms, options.network), (5000, true));
        assert_eq!(options.max_output_bytes, BashOptions::default().max_output_bytes);
        let (spec, errors) = read(&[("THINK_BASH", r#"{"timeuot": 1}"#)]);
        assert_eq!(spec.bash, None, "a setting that cannot be read switches bash off");
        assert_eq!(errors[0].name, "THINK_BASH");
    }

    #[test]
    fn execute() {
        let (spec, _) = read(&[]);
        assert_eq!(spec.execute, Some(crate::codemode::ExecuteOptions::default()));
        let (spec, _) = read(&[("THINK_EXECUTE", "false")]);
        assert_eq!(spec.execute, None);
        let (spec, _) = read(&[("THINK_EXECUTE", r#"{"timeout": 5000, "maxInFlight": 3}"#)]);
        let options = spec.execute.unwrap();
        assert_eq!((options.timeout_ms, options.max_in_flight), (5000, 3));
        let (spec, errors) = read(&[("THINK_EXECUTE", r#"{"timeuot": 1}"#)]);
        assert_eq!(spec.execute, None, "a setting that cannot be read switches execute off");
        assert_eq!(errors[0].name, "THINK_EXECUTE");
        assert_eq!(errors[0].to_string(), r#"ignoring THINK_EXECUTE: unknown key "timeuot""#);
    }

    #[test]
    fn message_concurrency() {
        let (spec, _) = read(&[("THINK_MESSAGE_CONCURRENCY", "debounce:200")]);
        assert_eq!(spec.message_concurrency, MessageConcurrency::Debounce(200));
        let (spec, _) = read(&[("THINK_MESSAGE_CONCURRENCY", "drop")]);
        assert_eq!(spec.message_concurrency, MessageConcurrency::Drop);
        let (spec, errors) = read(&[("THINK_MESSAGE_CONCURRENCY", "sometimes")]);
        assert_eq!(spec.message_concurrency, MessageConcurrency::Queue);
        assert_eq!(errors[0].name, "THINK_MESSAGE_CONCURRENCY");
    }

    #[test]
    fn wait_for_mcp_connections() {
        let wait =
            |v: &str| read(&[("THINK_WAIT_FOR_MCP_CONNECTIONS", v)]).0.wait_for_mcp_connections;
        assert_eq!(wait("true"), Some(DEFAULT_MCP_WAIT_MS));
        assert_eq!(wait(" 2500 "), Some(2500));
        assert_eq!(wait("false"), None);
        assert_eq!(wait("0"), None);
        assert_eq!(wait(""), None);
        assert_eq!(wait("soon"), None);
        assert_eq!(
            ignored(&[("THINK_WAIT_FOR_MCP_CONNECTIONS", "soon")]),
            ["THINK_WAIT_FOR_MCP_CONNECTIONS"]
        );
    }

    #[test]
    fn model_vision() {
        let vision = |v: &str| read(&[("THINK_MODEL_VISION", v)]).0.vision;
        assert!(vision("true"));
        assert!(!vision("false"));
        assert!(!read(&[]).0.vision);
        assert_eq!(ignored(&[("THINK_MODEL_VISION", "sure")]), ["THINK_MODEL_VISION"]);
    }

    #[test]
    fn mcp_resources() {
        let resources = |v: &str| read(&[("THINK_MCP_RESOURCES", v)]).0.mcp_resource_tools;
        assert!(resources("true") && !resources("false") && !read(&[]).0.mcp_resource_tools);
        assert_eq!(ignored(&[("THINK_MCP_RESOURCES", "maybe")]), ["THINK_MCP_RESOURCES"]);
    }

    #[test]
    fn allow_private_network() {
        let private = |v: &str| read(&[("THINK_ALLOW_PRIVATE_NETWORK", v)]).0.net.allow_private;
        assert!(private("true"));
        assert!(private(" 1 "));
        assert!(!private("false"));
        assert!(!private(""));
        assert!(!private("yes please"));
        assert_eq!(
            ignored(&[("THINK_ALLOW_PRIVATE_NETWORK", "yes please")]),
            ["THINK_ALLOW_PRIVATE_NETWORK"]
        );
    }

    #[test]
    fn switches() {
        use crate::agent::Feature::*;
        let all = [Extensions, Execute, Browser, Skills, McpResources, Bash];
        let (spec, ignored) = read(&[("THINK_MCP_RESOURCES", "true")]);
        assert!(ignored.is_empty(), "{ignored:?}");
        assert!(all.iter().all(|f| f == &Browser || spec.is_on(*f)), "on by default");
        assert!(spec.is_on(Subagents), "the subagent tool");
        let (spec, ignored) = read(&[
            ("THINK_EXTENSIONS", "false"),
            ("THINK_EXECUTE", "false"),
            ("THINK_SUBAGENT", "false"),
            ("THINK_BROWSER_CDP_URL", "http://127.0.0.1:9222"),
            ("THINK_BROWSER", "false"),
            ("THINK_SKILLS", "false"),
            ("THINK_MCP_RESOURCES", "false"),
            ("THINK_BASH", "false"),
        ]);
        assert!(ignored.is_empty(), "{ignored:?}");
        for feature in all.into_iter().chain([Subagents]) {
            assert!(!spec.is_on(feature), "{feature:?}");
            assert!(feature.off_message().contains(&format!("({}=false)", feature.setting())));
        }
        assert!(read(&[("THINK_SKILLS", " 1 ")]).0.is_on(Skills));
        let (spec, ignored) = read(&[("THINK_SKILLS", "nope")]);
        assert!(!spec.is_on(Skills), "a typo switches it off");
        assert_eq!(ignored[0].name, "THINK_SKILLS");
        for (name, value, feature) in [
            ("THINK_EXTENSIONS", "flase", Extensions),
            ("THINK_EXECUTE", "no", Execute),
            ("THINK_BASH", "off", Bash),
            ("THINK_SUBAGENT", "nope", Subagents),
        ] {
            let (spec, ignored) = read(&[(name, value)]);
            assert_eq!(ignored.len(), 1, "{name}: {ignored:?}");
            assert!(!spec.is_on(feature), "{name}={value} switches {feature:?} off");
        }
    }

    #[test]
    fn skills_dir() {
        let dir = |v: &str| read(&[("THINK_SKILLS_DIR", v)]).0.skills.dir;
        assert_eq!(read(&[]).0.skills.dir, "/skills");
        assert_eq!(dir(" /team/skills "), "/team/skills");
        assert_eq!(dir("skills"), "/skills");
        assert_eq!(dir("/a/../b"), "/skills");
        assert_eq!(ignored(&[("THINK_SKILLS_DIR", "skills")]), ["THINK_SKILLS_DIR"]);
    }
}
