//! The model-facing browser tools: `browser_execute` (Code Mode with the `cdp` global, its
//! runs journalled and approved like `execute`'s) and the quick actions, each opening a page
//! in a context of its own, reading it, and closing it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{json, Value};

use super::bound::{bound_result, strip_media, Screenshot};
use super::connector::Browser;
use super::html;
use super::BrowserError;
use crate::codemode::connectors::Connector;
use crate::codemode::CodeMode;
use crate::model::{Model, ModelEvent, ModelMessage, ModelRequest, ResponseFormat};
use crate::tools::schema::InputValidator;
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};

/// The name of the code tool.
pub const BROWSER_EXECUTE: &str = "browser_execute";

/// Everything the browser tools of a turn are built from.
pub struct BrowserTools {
    /// The agent's browser.
    pub browser: Rc<Browser>,
    /// The Code Mode runtime (`browser_execute` exists only with one).
    pub runtime: Option<Rc<CodeMode>>,
    /// The `cdp` connector.
    pub connector: Rc<dyn Connector>,
    /// The agent's model, for `browser_extract` (absent: no extract tool).
    pub model: Option<Rc<dyn Model>>,
    /// Whether the model takes images: `browser_execute` then hands its screenshots to the
    /// next model request of the turn.
    pub vision: bool,
}

impl BrowserTools {
    /// The tools: `browser_execute` when there is a runtime, and the quick actions.
    pub fn tools(self) -> Vec<ToolRef> {
        let mut out: Vec<ToolRef> = Vec::new();
        if let Some(runtime) = self.runtime.clone() {
            let mut execute =
                BrowserExecute::new(self.browser.clone(), runtime, self.connector.clone());
            execute.shots.vision = self.vision;
            out.push(Rc::new(execute));
        }
        let mut kinds = vec![Quick::Markdown, Quick::Links, Quick::Scrape];
        if self.model.is_some() {
            kinds.push(Quick::Extract);
        }
        if self.browser.options().content_action {
            kinds.push(Quick::Content);
        }
        for kind in kinds {
            out.push(Rc::new(QuickAction::new(kind, self.browser.clone(), self.model.clone())));
        }
        out
    }
}

fn execute_description() -> String {
    [
        "Drive a real browser with JavaScript over the Chrome DevTools Protocol. Send the body of an async function; `return` what you want back.",
        "",
        "`const {sessionId} = await cdp.openPage({url})` opens a page (waiting for its load); `await cdp.send({method, params, sessionId})` sends any CDP command and returns its result, e.g. `(await cdp.send({method: \"Runtime.evaluate\", params: {expression: \"document.title\", returnByValue: true}, sessionId})).result.value`. `cdp.waitForEvent({method, sessionId})` waits for an event; `cdp.spec({domain})` lists a domain's commands; `cdp.sessionInfo()`, `cdp.startSession()`, `cdp.closeSession()`, `cdp.getDebugLog()`, `cdp.clearDebugLog()`.",
        "",
        "A screenshot: `const {data} = await cdp.send({method: \"Page.captureScreenshot\", sessionId}); return {type: \"browser_screenshot\", mediaType: \"image/png\", data}`.",
        "Navigation is limited to allowed hosts. A result with status \"paused\" waits for a human to approve a call: tell the user and wait.",
    ]
    .join("\n")
}

/// The names of every browser tool (`tools.*` in Code Mode leaves them out: a run reaches
/// the browser through `cdp.*`).
pub const TOOL_NAMES: &[&str] = &[
    BROWSER_EXECUTE,
    "browser_markdown",
    "browser_links",
    "browser_scrape",
    "browser_extract",
    "browser_content",
];

/// Most screenshots of one call handed to a vision model; the rest keep their description
/// only. Each one rides on every later model request of the turn, held in memory.
pub const MAX_IMAGES_PER_CALL: usize = 4;

/// Largest screenshot handed to a vision model, in base64 characters (Anthropic refuses
/// images over 5 MB); a larger one keeps its description only.
pub const MAX_IMAGE_CHARS: usize = 5 * 1024 * 1024;

/// Screenshots by tool call, kept for a vision model until the turn takes them.
#[derive(Default)]
struct Shots {
    vision: bool,
    by_call: RefCell<HashMap<String, Vec<Screenshot>>>,
}

impl Shots {
    fn keep(&self, tool_call_id: &str, mut shots: Vec<Screenshot>) {
        shots.retain(|s| s.data.len() <= MAX_IMAGE_CHARS);
        shots.truncate(MAX_IMAGES_PER_CALL);
        if self.vision && !shots.is_empty() {
            self.by_call.borrow_mut().insert(tool_call_id.to_owned(), shots);
        }
    }

    fn take(&self, tool_call_id: &str) -> Vec<Screenshot> {
        self.by_call.borrow_mut().remove(tool_call_id).unwrap_or_default()
    }
}

/// Runs `run` as one use of `browser`, then settles its output (see [`settle_output`]),
/// keeping the screenshots in `shots`.
async fn browser_run(
    browser: &Browser,
    shots: &Shots,
    ctx: &ToolContext,
    run: impl std::future::Future<Output = Result<Value, ToolError>>,
) -> Result<Value, ToolError> {
    browser.begin();
    let output = match run.await {
        Ok(output) => {
            let mut taken = Vec::new();
            let output = settle_output(browser, output, &mut taken).await;
            shots.keep(&ctx.tool_call_id, taken);
            Ok(output)
        }
        Err(e) => Err(e),
    };
    browser.end();
    output
}

/// `execute` with the `cdp` global (Think adds it when a browser is configured): its runs end
/// their browser use and hand screenshots over exactly as `browser_execute`'s do.
pub struct WithBrowser {
    inner: ToolRef,
    browser: Rc<Browser>,
    shots: Shots,
}

impl WithBrowser {
    /// `inner` (the `execute` tool, whose connectors include `cdp`) over `browser`; `vision`
    /// as in [`BrowserTools::vision`].
    pub fn wrap(inner: ToolRef, browser: Rc<Browser>, vision: bool) -> ToolRef {
        Rc::new(Self { inner, browser, shots: Shots { vision, ..Default::default() } })
    }
}

#[async_trait(?Send)]
impl Tool for WithBrowser {
    fn definition(&self) -> &ToolDefinition {
        self.inner.definition()
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        browser_run(&self.browser, &self.shots, ctx, self.inner.execute(input, ctx)).await
    }

    fn take_images(&self, tool_call_id: &str) -> Vec<Screenshot> {
        self.shots.take(tool_call_id)
    }

    fn runs_code(&self) -> bool {
        self.inner.runs_code()
    }
}

/// `browser_execute {code}`.
pub struct BrowserExecute {
    browser: Rc<Browser>,
    runtime: Rc<CodeMode>,
    connector: Rc<dyn Connector>,
    definition: ToolDefinition,
    shots: Shots,
}

impl BrowserExecute {
    /// The tool running code on `runtime` with `connector` as its `cdp` global.
    pub fn new(browser: Rc<Browser>, runtime: Rc<CodeMode>, connector: Rc<dyn Connector>) -> Self {
        let definition = ToolDefinition {
            name: BROWSER_EXECUTE.into(),
            description: execute_description(),
            input_schema: json!({
                "type": "object",
                "properties": {"code": {"type": "string", "description": "JavaScript: the body of an async function, or an async arrow function"}},
                "required": ["code"],
                "additionalProperties": false,
            }),
            output_schema: None,
        };
        Self { browser, runtime, connector, definition, shots: Shots::default() }
    }
}

/// An execution output as the transcript keeps it: screenshots described (their images go
/// to `shots`), long base64 cut. Ends the run's use of the browser (its one-shot session
/// closes unless it paused).
pub async fn settle_output(
    browser: &Browser,
    mut output: Value,
    shots: &mut Vec<Screenshot>,
) -> Value {
    let id = output["executionId"].as_str().unwrap_or_default().to_owned();
    browser.finish_run(&id, output["status"] == "paused").await;
    if let Some(result) = output.get_mut("result") {
        strip_media(result, shots);
    }
    output
}

#[async_trait(?Send)]
impl Tool for BrowserExecute {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let code = input.get("code").and_then(Value::as_str).unwrap_or_default();
        let connectors = [self.connector.clone()];
        let run = self.runtime.execute(code, Some(&ctx.tool_call_id), &connectors);
        browser_run(&self.browser, &self.shots, ctx, async { Ok(run.await) }).await
    }

    fn take_images(&self, tool_call_id: &str) -> Vec<Screenshot> {
        self.shots.take(tool_call_id)
    }

    fn runs_code(&self) -> bool {
        true
    }
}

/// Which quick action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quick {
    /// `browser_markdown`.
    Markdown,
    /// `browser_links`.
    Links,
    /// `browser_scrape`.
    Scrape,
    /// `browser_extract`.
    Extract,
    /// `browser_content`.
    Content,
}

/// A quick-action tool.
pub struct QuickAction {
    kind: Quick,
    browser: Rc<Browser>,
    model: Option<Rc<dyn Model>>,
    definition: ToolDefinition,
}

const SCRAPE_SCRIPT: &str = r#"((selectors) => selectors.map((selector) => ({
  selector,
  results: Array.from(document.querySelectorAll(selector), (el) => {
    const r = el.getBoundingClientRect();
    return { html: el.innerHTML, text: el.innerText, width: r.width, height: r.height, top: r.top, left: r.left,
      attributes: Object.fromEntries(Array.from(el.attributes, (a) => [a.name, a.value])) };
  }),
})))"#;

impl QuickAction {
    /// The tool of `kind` over `browser` (`model` answers `browser_extract`).
    pub fn new(kind: Quick, browser: Rc<Browser>, model: Option<Rc<dyn Model>>) -> Self {
        let mut props = serde_json::Map::new();
        props.insert(
            "url".into(),
            json!({"type": "string", "description": "The page to load (http or https)"}),
        );
        props.insert(
            "html".into(),
            json!({"type": "string", "description": "HTML to render instead of loading a URL"}),
        );
        let (name, description, required) = match kind {
            Quick::Markdown => (
                "browser_markdown",
                "Load a page (or render HTML) in a browser and return it as Markdown.",
                vec![],
            ),
            Quick::Links => (
                "browser_links",
                "Load a page (or render HTML) in a browser and return its links, absolute.",
                vec![],
            ),
            Quick::Scrape => {
                props.insert("selectors".into(), json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "CSS selectors"}));
                ("browser_scrape", "Load a page (or render HTML) and return, for each CSS selector, the matching elements' html, text, size, position and attributes.", vec!["selectors"])
            }
            Quick::Extract => {
                props.insert(
                    "prompt".into(),
                    json!({"type": "string", "description": "What to extract"}),
                );
                props.insert(
                    "schema".into(),
                    json!({"type": "object", "description": "JSON Schema the answer must match"}),
                );
                ("browser_extract", "Load a page (or render HTML) and extract structured JSON from it with the model, following a prompt and/or a JSON Schema.", vec![])
            }
            Quick::Content => (
                "browser_content",
                "Load a page (or render HTML) and return the rendered HTML.",
                vec![],
            ),
        };
        let definition = ToolDefinition {
            name: name.into(),
            description: format!("{description} Give exactly one of url or html."),
            input_schema: json!({"type": "object", "properties": props, "required": required, "additionalProperties": false}),
            output_schema: None,
        };
        Self { kind, browser, model, definition }
    }

    fn invalid(&self, reason: impl Into<String>) -> ToolError {
        ToolError::InvalidInput { tool: self.definition.name.clone(), reason: reason.into() }
    }

    async fn run(&self, input: &Value) -> Result<Value, ToolError> {
        let url = input.get("url").and_then(Value::as_str);
        let html_in = input.get("html").and_then(Value::as_str);
        if url.is_some() == html_in.is_some() {
            return Err(self.invalid("give exactly one of url or html"));
        }
        let prompt = input.get("prompt").and_then(Value::as_str);
        let schema = input.get("schema").filter(|s| s.is_object());
        if self.kind == Quick::Extract {
            if prompt.is_none() && schema.is_none() {
                return Err(self.invalid("give a prompt, a schema, or both"));
            }
            if let Some(s) = schema {
                InputValidator::new(s)
                    .map_err(|e| self.invalid(format!("the schema is not usable: {e}")))?;
            }
        }
        if let Some(u) = url {
            self.browser.policy().check(u).map_err(|e| ToolError::Failed(e.to_string()))?;
        }
        let browser = &self.browser;
        let page = browser.open_page(url, html_in).await.map_err(fail)?;
        let read = self.read(&page.session_id, input).await;
        browser.close_page(page).await;
        let value = read.map_err(fail)?;
        let max = browser.options().max_chars;
        let value = match self.kind {
            Quick::Extract => {
                let (html, page_url) = content_parts(&value);
                let markdown = bound_result(json!(html::to_markdown(html, page_url)), max);
                self.extract(markdown.as_str().unwrap_or_default(), page_url, prompt, schema)
                    .await?
            }
            Quick::Markdown => {
                let (html, page_url) = content_parts(&value);
                json!(html::to_markdown(html, page_url))
            }
            Quick::Links => {
                let (html, page_url) = content_parts(&value);
                json!(html::links(html, page_url))
            }
            Quick::Content => json!(content_parts(&value).0),
            Quick::Scrape => value,
        };
        Ok(bound_result(value, max))
    }

    async fn read(&self, session: &str, input: &Value) -> Result<Value, BrowserError> {
        match self.kind {
            Quick::Scrape => {
                let selectors = input.get("selectors").cloned().unwrap_or(json!([]));
                self.browser.evaluate(session, &format!("{SCRAPE_SCRIPT}({selectors})")).await
            }
            _ => {
                self.browser
                    .evaluate(
                        session,
                        "({html: document.documentElement.outerHTML, url: location.href})",
                    )
                    .await
            }
        }
    }

    async fn extract(
        &self,
        markdown: &str,
        page_url: Option<&str>,
        prompt: Option<&str>,
        schema: Option<&Value>,
    ) -> Result<Value, ToolError> {
        let model = self.model.clone().ok_or_else(|| {
            ToolError::Failed("No model is configured for browser_extract.".into())
        })?;
        let mut task =
            format!("Page: {}\n\n{markdown}\n\n---\n", page_url.unwrap_or("(inline HTML)"));
        if let Some(p) = prompt {
            task.push_str(&format!("Task: {p}\n"));
        }
        if let Some(s) = schema {
            task.push_str(&format!("Answer with one JSON value matching this JSON Schema: {s}\n"));
        }
        task.push_str("Answer with JSON only, no prose and no code fence.");
        let request = ModelRequest {
            system: "You extract structured data from web pages. You answer with JSON only.".into(),
            messages: vec![ModelMessage::User { content: task }],
            response_format: schema
                .filter(|s| s["type"] == "object")
                .map(|s| ResponseFormat { name: "browser_extract".into(), schema: s.clone() }),
            ..Default::default()
        };
        let mut stream = model
            .stream(&request)
            .await
            .map_err(|e| ToolError::Failed(format!("browser_extract: {e}")))?;
        // The answer is the text, or the input of a forced answer tool (Anthropic).
        let (mut text, mut args) = (String::new(), String::new());
        while let Some(event) = stream.next().await {
            match event.map_err(|e| ToolError::Failed(format!("browser_extract: {e}")))? {
                ModelEvent::TextDelta(d) => text.push_str(&d),
                ModelEvent::ToolCallDelta { arguments, .. } => args.push_str(&arguments),
                _ => {}
            }
        }
        if text.trim().is_empty() {
            text = args;
        }
        let body = text
            .trim()
            .trim_start_matches("```json")
            .trim_start_matches("```")
            .trim_end_matches("```")
            .trim();
        let value: Value = serde_json::from_str(body).map_err(|e| {
            ToolError::Failed(format!(
                "browser_extract: the model's answer is not JSON ({e}): {}",
                body.chars().take(300).collect::<String>()
            ))
        })?;
        if let Some(s) = schema {
            InputValidator::new(s).and_then(|v| v.validate(&value)).map_err(|e| {
                ToolError::Failed(format!(
                    "browser_extract: the extracted data does not match the schema: {e}"
                ))
            })?;
        }
        Ok(value)
    }
}

fn content_parts(v: &Value) -> (&str, Option<&str>) {
    let url = v["url"].as_str().filter(|u| *u != "about:blank");
    (v["html"].as_str().unwrap_or_default(), url)
}

fn fail(e: BrowserError) -> ToolError {
    ToolError::Failed(e.to_string())
}

#[async_trait(?Send)]
impl Tool for QuickAction {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        self.browser.begin();
        let out = self.run(&input).await;
        self.browser.end();
        out
    }
}
