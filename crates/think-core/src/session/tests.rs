//! Host tests of the session over real SQLite (FTS5 included) and the scripted model.

use std::cell::Cell;
use std::rc::Rc;

use async_trait::async_trait;
use futures::executor::block_on;
use serde_json::{json, Value};

use super::compact::{plan_cut, Compactor, SessionStep, SUMMARY_PROMPT};
use super::tools::{context_tools, unloaded_placeholder};
use super::*;
use crate::model::{
    FinishReason, Model, ModelError, ModelEvent, ModelMessage, ModelRequest, ModelStream,
    ModelToolCall,
};
use crate::protocol::message::{Role, UIMessage};
use crate::store::sqlite::SqliteSql;
use crate::test_support::{text, ScriptedModel};
use crate::tools::{ToolContext, ToolRef, ToolSet};
use crate::turn::convert::to_model_messages;

fn block(label: &str, kind: BlockKind, max: Option<usize>) -> ContextBlock {
    ContextBlock {
        label: label.into(),
        description: Some(format!("{label} block")),
        kind,
        max_tokens: max,
        content: None,
    }
}

fn session(blocks: Vec<ContextBlock>) -> (Rc<SqliteSql>, Session) {
    let sql = Rc::new(SqliteSql::new());
    let s = Session::open(sql.clone(), blocks, None).unwrap();
    (sql, s)
}

fn tool(s: &Session, name: &str) -> ToolRef {
    context_tools(s).into_iter().find(|t| t.definition().name == name).expect(name)
}

fn call(t: &ToolRef, input: Value) -> String {
    let out = block_on(t.execute(input, &ToolContext::default())).unwrap();
    out.as_str().unwrap().to_owned()
}

#[test]
fn token_estimate_is_the_larger_of_chars_and_words() {
    assert_eq!(estimate_tokens(""), 0);
    assert_eq!(estimate_tokens("abcdefgh"), 2, "8 chars / 4");
    assert_eq!(estimate_tokens("a b c d e f g h i j"), 13, "10 words × 1.3");
    let counted = Session::open(Rc::new(SqliteSql::new()), vec![], Some(Rc::new(|_: &str| 7)));
    assert_eq!(counted.unwrap().tokens("anything"), 7, "the app's counter wins");
}

#[test]
fn writes_report_usage_and_refuse_past_the_budget() {
    let (_, s) = session(vec![block("memory", BlockKind::Writable, Some(10))]);
    let set = tool(&s, "set_context");
    assert_eq!(
        call(&set, json!({"label": "memory", "content": "abcdefghijklmnop"})),
        "Written to memory. Usage: 40% (4/10 tokens)"
    );
    assert_eq!(
        call(&set, json!({"label": "memory", "content": "qrst", "action": "append"})),
        "Written to memory. Usage: 60% (6/10 tokens)"
    );
    assert_eq!(s.get("memory").unwrap(), "abcdefghijklmnop\nqrst");
    let refused =
        call(&set, json!({"label": "memory", "content": "x".repeat(60), "action": "append"}));
    assert_eq!(
        refused,
        "Error: Block \"memory\" exceeds maxTokens: 21 > 10. Shorten the content or replace older facts."
    );
    assert_eq!(
        s.get("memory").unwrap(),
        "abcdefghijklmnop\nqrst",
        "a refused write changes nothing"
    );
    assert_eq!(
        call(&set, json!({"label": "memory", "content": "new"})),
        "Written to memory. Usage: 20% (2/10 tokens)",
        "replace is the default"
    );
    assert_eq!(s.usage("memory").unwrap().describe(), "20% (2/10 tokens)");
}

#[test]
fn the_prompt_renders_headers_in_a_stable_order_and_survives_a_reopen() {
    let mut rules = block("rules", BlockKind::Readonly, None);
    rules.content = Some("Be brief.".into());
    let blocks = vec![
        block("memory", BlockKind::Writable, Some(1000)),
        rules,
        block("docs", BlockKind::Skill, None),
        block("notes", BlockKind::Searchable, None),
    ];
    let (sql, s) = session(blocks.clone());
    s.set("memory", &"word ".repeat(323)).unwrap();
    s.add_entry("docs", "deploy", "How to deploy", Some("Deploying the app")).unwrap();
    s.add_entry("notes", "n1", "a note", None).unwrap();
    let sep = "═".repeat(46);
    let expected = format!(
        "{sep}\nRULES (rules block) [readonly]\n{sep}\nBe brief.\n\n\
         {sep}\nDOCS (docs block) [loadable]\n{sep}\n- deploy: Deploying the app\n\n\
         {sep}\nNOTES (notes block) [searchable]\n{sep}\n1 entries indexed.\n\n\
         {sep}\nMEMORY (memory block) [42% — 420/1000 tokens] [writable]\n{sep}\n{}",
        "word ".repeat(323)
    );
    assert_eq!(s.render().unwrap(), expected);
    assert!(s.system_prompt("You help.").starts_with("You help.\n\n"));
    let snapshot = s.snapshot().unwrap();
    assert_eq!(snapshot[0]["type"], "writable");
    assert_eq!(
        (snapshot[0]["tokens"].as_u64(), snapshot[0]["maxTokens"].as_u64()),
        (Some(420), Some(1000))
    );
    assert_eq!(snapshot[2]["entries"], json!(["deploy"]));
    let reopened = Session::open(sql, blocks, None).unwrap();
    assert_eq!(reopened.render().unwrap(), expected, "blocks live in SQLite");
}

#[test]
fn writable_content_is_seeded_once_readonly_content_every_start() {
    let sql = Rc::new(SqliteSql::new());
    let mut memory = block("memory", BlockKind::Writable, None);
    memory.content = Some("seed".into());
    let mut rules = block("rules", BlockKind::Readonly, None);
    rules.content = Some("v1".into());
    let s = Session::open(sql.clone(), vec![memory.clone(), rules.clone()], None).unwrap();
    s.set("memory", "learned").unwrap();
    rules.content = Some("v2".into());
    let s = Session::open(sql, vec![memory, rules], None).unwrap();
    assert_eq!(
        (s.get("memory").unwrap().as_str(), s.get("rules").unwrap().as_str()),
        ("learned", "v2")
    );
    let set = tool(&s, "set_context");
    assert!(call(&set, json!({"label": "rules", "content": "x"})).starts_with("Error: "));
}

#[test]
fn fts_search_ranks_the_best_match_first() {
    let (_, s) = session(vec![block("notes", BlockKind::Searchable, None)]);
    let set = tool(&s, "set_context");
    assert_eq!(
        call(
            &set,
            json!({"label": "notes", "content": "The deploy uses wrangler and a token.", "metadata": {"title": "Deploy Steps!"}})
        ),
        "Indexed \"deploy-steps\" in notes."
    );
    s.add_entry("notes", "cats", "Cats sleep most of the day.", None).unwrap();
    s.add_entry("notes", "both", "Wrangler deploy deploy deploy: the deploy checklist.", None)
        .unwrap();
    let search = tool(&s, "search_context");
    let found = call(&search, json!({"label": "notes", "query": "deploy"}));
    assert!(found.starts_with("[both]\n"), "{found}");
    assert!(found.contains("[deploy-steps]\nThe deploy uses wrangler"), "{found}");
    assert!(!found.contains("[cats]"), "{found}");
    assert_eq!(call(&search, json!({"label": "notes", "query": "penguins"})), "No results found.");
    assert_eq!(
        call(&search, json!({"label": "notes", "query": "\"unbalanced ("})),
        "No results found."
    );
    // An entry rewritten under the same title replaces its index row.
    call(
        &set,
        json!({"label": "notes", "content": "Now about penguins.", "metadata": {"title": "Deploy steps"}}),
    );
    assert!(
        call(&search, json!({"label": "notes", "query": "penguins"})).starts_with("[deploy-steps]")
    );
    assert!(!call(&search, json!({"label": "notes", "query": "token"})).contains("deploy-steps"));
    let untitled = call(&set, json!({"label": "notes", "content": "Hello World"}));
    assert!(
        untitled.starts_with("Indexed \"hello-world-") && untitled.ends_with("\" in notes."),
        "{untitled}"
    );
}

#[test]
fn tools_follow_the_kinds_of_the_blocks() {
    let names = |blocks: Vec<ContextBlock>| -> Vec<String> {
        context_tools(&session(blocks).1).iter().map(|t| t.definition().name.clone()).collect()
    };
    assert!(names(vec![]).is_empty());
    assert!(names(vec![block("r", BlockKind::Readonly, None)]).is_empty());
    assert_eq!(names(vec![block("m", BlockKind::Writable, None)]), ["set_context"]);
    assert_eq!(
        names(vec![block("d", BlockKind::Skill, None)]),
        ["set_context", "load_context", "unload_context"]
    );
    assert_eq!(
        names(vec![block("n", BlockKind::Searchable, None)]),
        ["set_context", "search_context"]
    );
    let (_, s) = session(vec![
        block("m", BlockKind::Writable, None),
        block("n", BlockKind::Searchable, None),
        block("d", BlockKind::Skill, None),
    ]);
    let set = tool(&s, "set_context");
    assert_eq!(
        set.definition().input_schema["properties"]["label"]["enum"],
        json!(["m", "n", "d"]),
        "every block but the readonly ones, in configuration order"
    );
    let described = &set.definition().description;
    assert!(
        described.contains("- \"d\" (skill collection, keyed entries): d block"),
        "{described}"
    );
    assert!(described.contains("- \"n\" (searchable, keyed entries): n block"), "{described}");
    assert!(described.contains("- \"m\" (writable): m block"), "{described}");
    let metadata = set.definition().input_schema["properties"]["metadata"]["description"].clone();
    assert!(metadata.as_str().unwrap().contains("searchable blocks: \"n\", \"d\")"), "{metadata}");
    assert_eq!(
        tool(&s, "load_context").definition().input_schema["properties"]["label"]["enum"],
        json!(["d"])
    );
}

#[test]
fn set_context_indexes_a_skill_entry_that_load_context_returns_and_the_prompt_lists() {
    let mut rules = block("rules", BlockKind::Readonly, None);
    rules.content = Some("Be brief.".into());
    let (_, s) = session(vec![block("playbooks", BlockKind::Skill, None), rules]);
    let set = tool(&s, "set_context");
    assert_eq!(set.definition().input_schema["properties"]["label"]["enum"], json!(["playbooks"]));
    assert_eq!(
        call(
            &set,
            json!({"label": "playbooks", "content": "1. tag\n2. publish", "metadata": {"title": "Release", "description": "How to ship"}})
        ),
        "Indexed \"release\" in playbooks."
    );
    let load = tool(&s, "load_context");
    assert_eq!(call(&load, json!({"label": "playbooks", "key": "release"})), "1. tag\n2. publish");
    assert!(s.render().unwrap().contains("PLAYBOOKS (playbooks block) [loadable]\n"));
    assert!(s.render().unwrap().ends_with("\n- release: How to ship"), "{}", s.render().unwrap());
    // The same title updates the entry in place; without a description the title is shown.
    assert_eq!(
        call(
            &set,
            json!({"label": "playbooks", "content": "v2", "metadata": {"title": "release"}})
        ),
        "Indexed \"release\" in playbooks."
    );
    assert_eq!(call(&load, json!({"label": "playbooks", "key": "release"})), "v2");
    assert!(s.render().unwrap().ends_with("\n- release: release"));
    // A title beside the content, as the model may write it, keys the entry as metadata's does.
    assert_eq!(
        call(&set, json!({"label": "playbooks", "title": "release", "content": "v3"})),
        "Indexed \"release\" in playbooks."
    );
    assert_eq!(call(&load, json!({"label": "playbooks", "key": "release"})), "v3");
    // Without a title the key is the content's slug and hash.
    let untitled = call(&set, json!({"label": "playbooks", "content": "Roll back"}));
    assert!(untitled.starts_with("Indexed \"roll-back-"), "{untitled}");
    assert_eq!(s.entries("playbooks").unwrap().len(), 2);
    // Think's errors.
    assert_eq!(
        call(&set, json!({"label": "rules", "content": "x"})),
        "Error: Block \"rules\" is readonly"
    );
    assert_eq!(
        call(&set, json!({"label": "nope", "content": "x"})),
        "Error: block \"nope\" not found"
    );
    assert_eq!(
        call(&load, json!({"label": "rules", "key": "release"})),
        "Error: \"rules\" is not a skill block. Skill blocks: playbooks"
    );
    assert_eq!(
        call(&tool(&s, "unload_context"), json!({"label": "nope", "key": "release"})),
        "Error: \"nope\" is not a skill block. Skill blocks: playbooks"
    );
}

fn load_part(id: &str, key: &str, output: &str) -> Value {
    json!({"type": "tool-load_context", "toolCallId": id, "state": "output-available", "input": {"label": "docs", "key": key}, "output": output})
}

#[test]
fn unloading_replaces_the_earlier_load_in_what_the_model_is_sent() {
    let (_, s) = session(vec![block("docs", BlockKind::Skill, None)]);
    s.add_entry("docs", "deploy", "LONG DEPLOY GUIDE", None).unwrap();
    let load = tool(&s, "load_context");
    let unload = tool(&s, "unload_context");
    assert_eq!(
        call(&unload, json!({"label": "docs", "key": "deploy"})),
        "Skill \"deploy\" is not currently loaded in \"docs\"."
    );
    assert_eq!(call(&load, json!({"label": "docs", "key": "deploy"})), "LONG DEPLOY GUIDE");
    assert_eq!(call(&load, json!({"label": "docs", "key": "nope"})), "Not found: nope");
    assert!(tool(&s, "unload_context")
        .definition()
        .description
        .ends_with(" Currently loaded: docs:deploy."));
    let unloaded = call(&unload, json!({"label": "docs", "key": "deploy"}));
    assert!(tool(&s, "unload_context")
        .definition()
        .description
        .ends_with(" No skills currently loaded."));
    assert_eq!(unloaded, "Unloaded \"deploy\" from docs. Context reclaimed.");
    let mut tools = ToolSet::new();
    tools.add_layer(crate::tools::Layer::Context, context_tools(&s));
    let transcript = vec![
        UIMessage::new("u", Role::User, vec![json!({"type": "text", "text": "load it"})]),
        UIMessage::new(
            "a",
            Role::Assistant,
            vec![
                json!({"type": "step-start"}),
                load_part("c1", "deploy", "LONG DEPLOY GUIDE"),
                json!({"type": "step-start"}),
                json!({"type": "tool-unload_context", "toolCallId": "c2", "state": "output-available", "input": {"label": "docs", "key": "deploy"}, "output": unloaded}),
                json!({"type": "step-start"}),
                load_part("c3", "deploy", "LONG DEPLOY GUIDE"),
            ],
        ),
    ];
    let sent = to_model_messages(&transcript, &tools);
    let results: Vec<&str> = sent
        .iter()
        .filter_map(|m| match m {
            ModelMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [unloaded_placeholder("deploy").as_str(), unloaded.as_str(), "LONG DEPLOY GUIDE"],
        "a load after the unload is kept; plain strings are sent as text"
    );
    assert_eq!(
        transcript[1].parts[1]["output"], "LONG DEPLOY GUIDE",
        "the transcript is not rewritten"
    );
}

fn user(i: usize, words: usize) -> ModelMessage {
    ModelMessage::User { content: format!("m{i} {}", "word ".repeat(words)) }
}

fn tool_pair(i: usize) -> Vec<ModelMessage> {
    vec![
        ModelMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ModelToolCall {
                id: format!("c{i}"),
                name: "read".into(),
                arguments: json!({}).into(),
            }],
        },
        ModelMessage::Tool {
            tool_call_id: format!("c{i}"),
            tool_name: "read".into(),
            content: "x ".repeat(50),
            images: Vec::new(),
        },
    ]
}

#[test]
fn the_cut_keeps_head_and_tail_and_never_parts_a_tool_pair() {
    let tokens = |m: &ModelMessage| estimate_tokens(&compact::message_text(m));
    // head: user, call, result (the head may not end between them either)
    let mut messages = vec![user(0, 5)];
    messages.extend(tool_pair(1));
    messages.push(ModelMessage::Tool {
        tool_call_id: "c1b".into(),
        tool_name: "read".into(),
        content: "y".into(),
        images: Vec::new(),
    });
    for i in 2..20 {
        messages.push(user(i, 20));
        messages.extend(tool_pair(i));
    }
    for tail_tokens in [1, 40, 100, 200, 500] {
        let cut = plan_cut(&messages, &tokens, tail_tokens).unwrap();
        assert_eq!(cut.head, 4, "the first 3 messages and the result that belongs to them");
        assert!(
            !matches!(messages[cut.tail], ModelMessage::Tool { .. }),
            "tail starts at {}",
            cut.tail
        );
        let tail: usize = messages[cut.tail..].iter().map(tokens).sum();
        let one_more = tokens(&messages[cut.tail - 1]);
        assert!(
            tail <= tail_tokens.max(tokens(messages.last().unwrap()) + 200),
            "{tail} for {tail_tokens}"
        );
        assert!(
            cut.tail < messages.len() && (tail + one_more > tail_tokens || cut.tail == cut.head)
        );
    }
    assert_eq!(plan_cut(&messages[..3], &tokens, 1), None, "nothing between head and tail");
}

/// A model that fails its first `fail` calls with `error`, then plays a scripted model.
struct Failing {
    fail: Cell<usize>,
    error: ModelError,
    inner: Rc<ScriptedModel>,
}

#[async_trait(?Send)]
impl Model for Failing {
    fn id(&self) -> &str {
        "failing"
    }
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        if self.fail.get() > 0 {
            self.fail.set(self.fail.get() - 1);
            return Err(self.error.clone());
        }
        self.inner.stream(request).await
    }
}

fn long_conversation(n: usize) -> Vec<ModelMessage> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(user(i, 30));
        out.push(ModelMessage::Assistant { content: format!("answer {i}"), tool_calls: vec![] });
    }
    out
}

#[test]
fn compaction_summarizes_the_middle_stores_it_and_extends_it() {
    let (_, s) = session(vec![]);
    let model = ScriptedModel::with_fallback(text("SUMMARY"));
    let c = Compactor { session: &s, model: model.as_ref(), context_window: 2000 };
    let short = long_conversation(3);
    assert_eq!(
        block_on(c.prepare("sys", 0, &short, false)).unwrap(),
        short,
        "under budget: verbatim"
    );
    assert!(model.seen().is_empty());

    let messages = long_conversation(60);
    let sent = block_on(c.prepare("sys", 0, &messages, false)).unwrap();
    assert_eq!(&sent[..3], &messages[..3], "head kept");
    let ModelMessage::User { content } = &sent[3] else { panic!("{:?}", sent[3]) };
    assert!(content.contains("SUMMARY") && content.starts_with("[Summary of "), "{content}");
    assert_eq!(sent.last(), messages.last(), "tail kept");
    assert!(model.seen().iter().all(|r| r.system == SUMMARY_PROMPT && r.tools.is_empty()));
    let calls = model.seen().len();
    let stored = c.stored().unwrap().unwrap();
    assert_eq!(stored.summary, "SUMMARY");
    let total: usize = sent.iter().map(|m| estimate_tokens(&compact::message_text(m))).sum();
    assert!(total <= c.budget(), "{total} > {}", c.budget());

    // The same history again: the stored summary is used, no model call.
    let again = block_on(c.prepare("sys", 0, &messages, false)).unwrap();
    assert_eq!(again, sent);
    assert_eq!(model.seen().len(), calls, "not recomputed");

    // A little more: the stored summary and everything after it still fit, no model call.
    let more = long_conversation(62);
    let sent_more = block_on(c.prepare("sys", 0, &more, false)).unwrap();
    assert_eq!(model.seen().len(), calls, "the summary is extended only past the budget");
    assert_eq!(&sent_more[..4], &sent[..4]);
    assert_eq!(&sent_more[4..], &more[stored.covered..], "everything after the summary, verbatim");

    // Grown: only the new middle is summarized, starting from the stored summary.
    let grown = long_conversation(100);
    let sent = block_on(c.prepare("sys", 0, &grown, false)).unwrap();
    assert!(model.seen().len() > calls);
    let asked = compact::message_text(&model.seen()[calls].messages[0]);
    assert!(asked.starts_with("user: Previous summary:\nSUMMARY"), "{asked}");
    assert!(!asked.contains("m3 "), "the old middle is not sent again");
    assert!(matches!(&sent[3], ModelMessage::User { content } if content.contains("SUMMARY")));
    assert_eq!(sent.last(), grown.last());
    assert!(c.stored().unwrap().unwrap().covered > stored.covered);

    // Clearing the chat forgets the summary.
    s.forget_conversation().unwrap();
    assert!(c.stored().unwrap().is_none());
    block_on(c.prepare("sys", 0, &grown, false)).unwrap();

    // An earlier message changed (an edit): the stored summary is not used.
    let calls = model.seen().len();
    let mut edited = grown.clone();
    edited[5] = user(5, 3);
    block_on(c.prepare("sys", 0, &edited, false)).unwrap();
    let asked = compact::message_text(&model.seen()[calls].messages[0]);
    assert!(asked.starts_with("user: Conversation excerpt:\n"), "summarized afresh: {asked}");
}

#[test]
fn a_failed_summary_cuts_the_middle_with_a_note() {
    let (_, s) = session(vec![]);
    let model = ScriptedModel::new(vec![]);
    let c = Compactor { session: &s, model: model.as_ref(), context_window: 2000 };
    let messages = long_conversation(60);
    let sent = block_on(c.prepare("sys", 0, &messages, false)).unwrap();
    let ModelMessage::User { content } = &sent[3] else { panic!() };
    assert!(content.starts_with("[Note: ") && content.contains("no script"), "{content}");
    assert_eq!(sent.last(), messages.last());
    assert!(c.stored().unwrap().is_none(), "nothing stored");
}

#[test]
fn the_memory_flush_lets_the_model_save_facts_before_compaction() {
    let (_, s) = session(vec![block("memory", BlockKind::Writable, Some(2000))]);
    let model = ScriptedModel::with_fallback(text("S"));
    model.push([vec![
        ModelEvent::ToolCallStart { index: 0, id: "f1".into(), name: "set_context".into() },
        ModelEvent::ToolCallDelta {
            index: 0,
            arguments: r#"{"label":"memory","content":"user likes tea","action":"append"}"#.into(),
        },
        ModelEvent::Finish { reason: FinishReason::ToolCalls, usage: None },
    ]]);
    let c = Compactor { session: &s, model: model.as_ref(), context_window: 2000 };
    block_on(c.prepare("sys", 0, &long_conversation(60), false)).unwrap();
    assert_eq!(s.get("memory").unwrap(), "user likes tea");
    let seen = model.seen();
    assert_eq!(seen[0].tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["set_context"]);
    assert_eq!(seen[1].system, SUMMARY_PROMPT, "the summary comes after the flush");
}

struct Sink;
impl crate::turn::engine::ChunkSink for Sink {
    fn emit(&self, _chunk: Value) {}
}

#[test]
fn a_context_length_error_compacts_once_and_retries() {
    let (_, s) = session(vec![block("memory", BlockKind::Writable, None)]);
    s.set("memory", "FACT").unwrap();
    let inner = ScriptedModel::with_fallback(text("answered"));
    let overflow = ModelError::Status {
        status: 400,
        message: "This model's maximum context length is 8192 tokens".into(),
        retry_after: None,
    };
    let model: Rc<dyn Model> =
        Rc::new(Failing { fail: Cell::new(1), error: overflow.clone(), inner: inner.clone() });
    let plan = |messages| crate::turn::engine::TurnPlan {
        system: "sys".into(),
        messages,
        tools: ToolSet::new(),
        max_steps: 1,
        tool_choice: None,
        new_id: Box::new(|| "a".into()),
        context: Some(Rc::new(SessionStep {
            session: s.clone(),
            model: model.clone(),
            context_window: 1_000_000,
        })),
        now: None,
        yield_now: None,
        spawn_call: None,
    };
    let approval = |_: &str, _: &Value| false;
    let abort = crate::turn::abort::AbortSignal::default();
    let messages = long_conversation(40);
    let out = block_on(crate::turn::engine::run(
        model.as_ref(),
        plan(messages.clone()),
        &approval,
        Rc::new(Sink),
        &abort,
    ));
    assert_eq!(out, crate::turn::engine::TurnOutcome::Finished(FinishReason::Stop));
    let seen = inner.seen();
    assert!(seen.iter().any(|r| r.system == SUMMARY_PROMPT), "a summary was written");
    let retry = seen.last().unwrap();
    assert!(
        retry.system.starts_with("sys\n\n") && retry.system.contains("FACT"),
        "blocks are in every call"
    );
    assert!(retry.messages.len() < messages.len(), "retried with a compacted history");
    drop(seen);

    // Twice too long: one retry only, then the error stands.
    let inner = ScriptedModel::with_fallback(text("SUMMARY"));
    let model: Rc<dyn Model> = Rc::new(Failing { fail: Cell::new(2), error: overflow, inner });
    let out = block_on(crate::turn::engine::run(
        model.as_ref(),
        plan(messages.clone()),
        &approval,
        Rc::new(Sink),
        &abort,
    ));
    assert!(
        matches!(out, crate::turn::engine::TurnOutcome::Failed(m) if m.contains("maximum context length"))
    );

    // Any other error fails at once.
    let inner = ScriptedModel::with_fallback(text("x"));
    let other = ModelError::Status { status: 401, message: "bad key".into(), retry_after: None };
    let model: Rc<dyn Model> =
        Rc::new(Failing { fail: Cell::new(1), error: other, inner: inner.clone() });
    let out = block_on(crate::turn::engine::run(
        model.as_ref(),
        plan(messages),
        &approval,
        Rc::new(Sink),
        &abort,
    ));
    assert!(matches!(out, crate::turn::engine::TurnOutcome::Failed(_)));
    assert!(inner.seen().is_empty());
}

#[test]
fn a_turn_whose_tool_results_pass_the_budget_is_compacted_at_its_next_call() {
    let (_, s) = session(vec![]);
    let inner = ScriptedModel::with_fallback(text("SUMMARY"));
    let big_call = |id: &str| {
        vec![
            ModelEvent::ToolCallStart { index: 0, id: id.into(), name: "big".into() },
            ModelEvent::ToolCallDelta { index: 0, arguments: "{}".into() },
            ModelEvent::Finish { reason: FinishReason::ToolCalls, usage: None },
        ]
    };
    inner.push([big_call("b1"), big_call("b2")]);
    let model: Rc<dyn Model> = inner.clone();
    let mut tools = ToolSet::new();
    tools.add_layer(
        crate::tools::Layer::Agent,
        [Rc::new(crate::tools::DynamicTool::new(
            "big",
            "Big output",
            json!({"type": "object"}),
            |_, _| async { Ok(Value::String("x ".repeat(770))) },
        )) as ToolRef],
    );
    let plan = crate::turn::engine::TurnPlan {
        system: "sys".into(),
        messages: long_conversation(3),
        tools,
        max_steps: 5,
        tool_choice: None,
        new_id: Box::new(|| "a".into()),
        context: Some(Rc::new(SessionStep {
            session: s.clone(),
            model: model.clone(),
            context_window: 2000,
        })),
        now: None,
        yield_now: None,
        spawn_call: None,
    };
    let approval = |_: &str, _: &Value| false;
    let abort = crate::turn::abort::AbortSignal::default();
    let out =
        block_on(crate::turn::engine::run(model.as_ref(), plan, &approval, Rc::new(Sink), &abort));
    assert_eq!(out, crate::turn::engine::TurnOutcome::Finished(FinishReason::Stop));
    let seen = inner.seen();
    let systems: Vec<&str> = seen.iter().map(|r| r.system.as_str()).collect();
    assert_eq!(&systems[..2], ["sys", "sys"], "one big result still fits");
    assert_eq!(seen[1].messages.len(), 8);
    assert!(
        systems[2..systems.len() - 1].iter().all(|s| *s == SUMMARY_PROMPT),
        "the third call is compacted first"
    );
    assert_eq!(systems.last(), Some(&"sys"));
    let last = &seen.last().unwrap().messages;
    assert!(
        matches!(&last[3], ModelMessage::User { content } if content.contains("SUMMARY")),
        "{last:?}"
    );
    assert!(
        matches!(last.last(), Some(ModelMessage::Tool { tool_call_id, .. }) if tool_call_id == "b2")
    );
    assert!(last.len() < 10, "{} messages", last.len());
}
