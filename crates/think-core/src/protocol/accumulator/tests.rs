use super::*;

fn acc() -> StreamAccumulator {
    StreamAccumulator::new("msg-1", false)
}

fn feed(a: &mut StreamAccumulator, chunks: &[Value]) {
    for c in chunks {
        a.apply(c);
    }
}

#[test]
fn an_input_kept_as_text_reads_as_the_parsed_input() {
    let input = json!({"path": "/a", "content": "x\ny"});
    let arguments = ToolArguments::from_text(input.to_string()).unwrap();
    let start = json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "write"});
    let available = |input: Value| json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "write", "input": input});
    let output =
        json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"ok": true}});
    let mut parsed = acc();
    feed(&mut parsed, &[start.clone(), available(input.clone()), output.clone()]);
    let mut text = acc();
    text.apply(&start);
    text.apply_input_available(&available(Value::Null), arguments.clone());
    text.apply(&output);
    assert_eq!(text.parts()[0]["input"], Value::Null, "not held parsed");
    assert_eq!(text.message(), parsed.message());
    assert_eq!(text.take_message(), parsed.take_message());
    // An input settled before is not replaced by a later announcement.
    let mut settled = acc();
    feed(&mut settled, &[start, available(json!({"a": 1}))]);
    settled.apply_input_available(&available(Value::Null), arguments);
    assert_eq!(settled.message().parts[0]["input"], json!({"a": 1}));
}

#[test]
fn text_lifecycle() {
    let mut a = acc();
    assert_eq!(a.apply(&json!({"type": "text-start"})), ChunkAction::Applied);
    assert_eq!(a.parts(), &[json!({"type": "text", "text": "", "state": "streaming"})]);
    feed(
        &mut a,
        &[
            json!({"type": "text-delta", "delta": "hello "}),
            json!({"type": "text-delta", "delta": "world"}),
        ],
    );
    assert_eq!(a.parts()[0]["text"], "hello world");
    a.apply(&json!({"type": "text-end"}));
    assert_eq!(a.parts()[0]["state"], "done");
}

#[test]
fn text_delta_without_start_creates_part() {
    let mut a = acc();
    a.apply(&json!({"type": "text-delta", "delta": "resumed"}));
    assert_eq!(a.parts(), &[json!({"type": "text", "text": "resumed", "state": "streaming"})]);
    a.apply(&json!({"type": "text-end"}));
    assert_eq!(a.parts()[0]["state"], "done");
}

#[test]
fn multiple_text_segments_are_separate_parts() {
    let mut a = acc();
    feed(
        &mut a,
        &[
            json!({"type": "text-start"}),
            json!({"type": "text-delta", "delta": "first"}),
            json!({"type": "text-end"}),
            json!({"type": "text-start"}),
            json!({"type": "text-delta", "delta": "second"}),
        ],
    );
    assert_eq!(a.parts().len(), 2);
    assert_eq!(a.parts()[0]["text"], "first");
    assert_eq!(a.parts()[1]["text"], "second");
}

#[test]
fn reasoning_lifecycle_and_provider_metadata() {
    let mut a = acc();
    feed(
        &mut a,
        &[
            json!({"type": "reasoning-start"}),
            json!({"type": "reasoning-delta", "delta": "thinking", "providerMetadata": {"custom": {"fromDelta": true}}}),
            json!({"type": "reasoning-end", "providerMetadata": {"anthropic": {"signature": "sig-xyz"}}}),
        ],
    );
    assert_eq!(a.parts().len(), 1);
    assert_eq!(a.parts()[0]["text"], "thinking");
    assert_eq!(a.parts()[0]["state"], "done");
    assert_eq!(
        a.parts()[0]["providerMetadata"],
        json!({"custom": {"fromDelta": true}, "anthropic": {"signature": "sig-xyz"}})
    );
}

#[test]
fn reasoning_without_metadata_has_no_field() {
    let mut a = acc();
    feed(
        &mut a,
        &[
            json!({"type": "reasoning-start"}),
            json!({"type": "reasoning-delta", "delta": "t"}),
            json!({"type": "reasoning-end"}),
        ],
    );
    assert!(a.parts()[0].get("providerMetadata").is_none());
    let mut b = acc();
    b.apply(&json!({"type": "reasoning-delta", "delta": "resumed", "providerMetadata": {"anthropic": {"redactedData": "enc"}}}));
    assert_eq!(b.parts()[0]["providerMetadata"], json!({"anthropic": {"redactedData": "enc"}}));
    assert_eq!(b.parts()[0]["text"], "resumed");
}

#[test]
fn file_and_source_parts() {
    let mut a = acc();
    feed(
        &mut a,
        &[
            json!({"type": "file", "mediaType": "image/png", "url": "https://e/img.png"}),
            json!({"type": "source-url", "sourceId": "s1", "url": "https://e", "title": "Example"}),
            json!({"type": "source-document", "sourceId": "s2", "mediaType": "application/pdf", "title": "Doc", "filename": "doc.pdf"}),
        ],
    );
    assert_eq!(
        a.parts()[0],
        json!({"type": "file", "mediaType": "image/png", "url": "https://e/img.png"})
    );
    assert_eq!(
        a.parts()[1],
        json!({"type": "source-url", "sourceId": "s1", "url": "https://e", "title": "Example"})
    );
    assert_eq!(
        a.parts()[2],
        json!({"type": "source-document", "sourceId": "s2", "mediaType": "application/pdf", "title": "Doc", "filename": "doc.pdf"})
    );
}

#[test]
fn step_start_aliases() {
    let mut a = acc();
    assert_eq!(a.apply(&json!({"type": "step-start"})), ChunkAction::Applied);
    a.apply(&json!({"type": "start-step"}));
    assert_eq!(a.parts(), &[json!({"type": "step-start"}), json!({"type": "step-start"})]);
}

#[test]
fn data_parts_append_reconcile_and_skip_transient() {
    let mut a = acc();
    feed(
        &mut a,
        &[
            json!({"type": "data-status", "id": "d1", "data": {"v": 1}}),
            json!({"type": "data-status", "id": "d1", "data": {"v": 2}}),
            json!({"type": "data-status", "id": "d2", "data": {"v": 3}}),
            json!({"type": "data-other", "id": "d1", "data": {"v": 4}}),
            json!({"type": "data-log", "data": {"msg": "first"}}),
            json!({"type": "data-log", "data": {"msg": "second"}}),
            json!({"type": "data-log"}),
        ],
    );
    assert_eq!(a.parts().len(), 6);
    assert_eq!(a.parts()[0], json!({"type": "data-status", "id": "d1", "data": {"v": 2}}));
    assert_eq!(a.parts()[5], json!({"type": "data-log"}));
    assert_eq!(
        a.apply(&json!({"type": "data-ephemeral", "transient": true, "data": {}})),
        ChunkAction::Applied
    );
    assert_eq!(
        a.apply(&json!({"type": "data-status", "id": "d1", "transient": true, "data": {"v": 9}})),
        ChunkAction::Applied
    );
    assert_eq!(a.parts().len(), 6);
    assert_eq!(a.parts()[0]["data"], json!({"v": 2}));
}

#[test]
fn tool_streaming_lifecycle() {
    let mut a = acc();
    a.apply(&json!({"type": "tool-input-start", "toolCallId": "tc1", "toolName": "search"}));
    assert_eq!(
        a.parts()[0],
        json!({"type": "tool-search", "toolCallId": "tc1", "toolName": "search", "state": "input-streaming"})
    );
    a.apply(
        &json!({"type": "tool-input-delta", "toolCallId": "tc1", "input": {"query": "partial"}}),
    );
    assert_eq!(a.parts()[0]["input"], json!({"query": "partial"}));
    a.apply(&json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "search", "input": {"query": "full"}}));
    assert_eq!(a.parts()[0]["state"], "input-available");
    assert_eq!(a.parts()[0]["input"], json!({"query": "full"}));
    assert_eq!(
        a.apply(
            &json!({"type": "tool-output-available", "toolCallId": "tc1", "output": {"result": 42}})
        ),
        ChunkAction::Applied
    );
    assert_eq!(a.parts()[0]["state"], "output-available");
    assert_eq!(a.parts()[0]["output"], json!({"result": 42}));
    assert!(a.parts()[0].get("preliminary").is_none());
    assert_eq!(a.parts().len(), 1);
}

#[test]
fn tool_input_available_without_start_and_metadata_fields() {
    let mut a = acc();
    a.apply(&json!({
        "type": "tool-input-available", "toolCallId": "tc1", "toolName": "calc", "input": {"x": 1},
        "providerExecuted": true, "providerMetadata": {"p": {"k": 1}}, "title": "Calc"
    }));
    assert_eq!(
        a.parts()[0],
        json!({"type": "tool-calc", "toolCallId": "tc1", "toolName": "calc", "state": "input-available",
               "input": {"x": 1}, "providerExecuted": true, "callProviderMetadata": {"p": {"k": 1}}, "title": "Calc"})
    );
    let mut b = acc();
    b.apply(&json!({"type": "tool-input-start", "toolCallId": "t", "toolName": "x", "providerExecuted": false, "title": "T"}));
    assert_eq!(b.parts()[0]["providerExecuted"], false);
    assert_eq!(b.parts()[0]["title"], "T");
    assert!(b.parts()[0].get("callProviderMetadata").is_none());
}

#[test]
fn tool_input_normalization() {
    for bad in [
        json!(null),
        json!(""),
        json!([{"id": 1}]),
        json!([]),
        json!(42),
        json!(true),
        json!("hello"),
        json!("{\"a\":"),
    ] {
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": bad}));
        assert_eq!(a.parts()[0]["input"], json!({}), "new part, input {bad}");
        let mut b = acc();
        b.apply(&json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t"}));
        b.apply(&json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "t", "input": bad, "errorText": "boom"}));
        assert_eq!(b.parts()[0]["input"], json!({}));
        assert_eq!(b.parts()[0]["state"], "output-error");
    }
    let mut a = acc();
    a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t"}));
    assert_eq!(a.parts()[0]["input"], json!({}), "absent input");
    let mut a = acc();
    a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": "{\"prompt\":\"a cat\"}"}));
    assert_eq!(a.parts()[0]["input"], json!({"prompt": "a cat"}));
    assert_eq!(normalize_tool_input(Some(&json!({"a": 1}))), (json!({"a": 1}), false));
    assert_eq!(normalize_tool_input(Some(&json!("[1,2]"))), (json!({}), true));
    assert_eq!(normalize_tool_input(None), (json!({}), true));
}

fn resolved(a: &mut StreamAccumulator, id: &str, name: &str, input: Value, output: Value) {
    feed(
        a,
        &[
            json!({"type": "tool-input-start", "toolCallId": id, "toolName": name}),
            json!({"type": "tool-input-available", "toolCallId": id, "toolName": name, "input": input}),
            json!({"type": "tool-output-available", "toolCallId": id, "output": output}),
        ],
    );
}

#[test]
fn replayed_tool_round_trip_leaves_part_untouched() {
    let mut a = acc();
    resolved(
        &mut a,
        "call_1",
        "changeBackground",
        json!({"color": "green"}),
        json!({"success": true}),
    );
    let before = a.parts().to_vec();
    feed(
        &mut a,
        &[
            json!({"type": "tool-input-start", "toolCallId": "call_1", "toolName": "changeBackground"}),
            json!({"type": "tool-input-delta", "toolCallId": "call_1", "input": {}}),
            json!({"type": "tool-input-available", "toolCallId": "call_1", "toolName": "changeBackground", "input": {"color": "green"}}),
            json!({"type": "tool-output-available", "toolCallId": "call_1", "output": {"success": true}}),
        ],
    );
    assert_eq!(a.parts(), &before[..]);
}

#[test]
fn input_start_does_not_regress_in_flight_part() {
    let mut a = acc();
    feed(
        &mut a,
        &[
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "w"}),
            json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "w", "input": {"city": "London"}}),
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "w"}),
        ],
    );
    assert_eq!(a.parts().len(), 1);
    assert_eq!(a.parts()[0]["state"], "input-available");
    assert_eq!(a.parts()[0]["input"], json!({"city": "London"}));
}

#[test]
fn input_error_guards() {
    let mut a = acc();
    resolved(&mut a, "c", "w", json!({"city": "London"}), json!("Sunny"));
    a.apply(&json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "w", "input": "{\"city\": \"Lond", "errorText": "Unexpected end"}));
    assert_eq!(a.parts()[0]["state"], "output-available");
    assert!(a.parts()[0].get("errorText").is_none());
    assert_eq!(a.parts()[0]["input"], json!({"city": "London"}));

    let mut b = acc();
    b.apply(&json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "w"}));
    b.apply(&json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "w", "errorText": "Unexpected end"}));
    assert_eq!(b.parts()[0]["state"], "output-error");
    assert_eq!(b.parts()[0]["errorText"], "Unexpected end");
}

#[test]
fn unknown_tool_input_error_persists_as_tool_part() {
    // §7: a call to an unknown tool arrives as tool-input-error with dynamic:true.
    let mut a = acc();
    a.apply(&json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "nope", "input": {"a": 1}, "errorText": "no such tool", "dynamic": true}));
    assert_eq!(
        a.parts()[0],
        json!({"type": "tool-nope", "toolCallId": "c", "toolName": "nope", "state": "output-error", "input": {"a": 1}, "errorText": "no such tool"})
    );
}

#[test]
fn approval_request_sets_state_and_reports_action() {
    let mut a = acc();
    a.apply(&json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "danger", "input": {}}));
    let r = a.apply(&json!({
        "type": "tool-approval-request", "toolCallId": "tc1", "approvalId": "apr-1",
        "approvalDescriptor": {"action": "danger", "summary": "Approve danger"}
    }));
    assert_eq!(r, ChunkAction::ToolApprovalRequest { tool_call_id: "tc1".into() });
    assert_eq!(a.parts()[0]["state"], "approval-requested");
    assert_eq!(
        a.parts()[0]["approval"],
        json!({"id": "apr-1", "descriptor": {"action": "danger", "summary": "Approve danger"}})
    );
    // A replayed tool-input-available must not regress it.
    a.apply(&json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "danger", "input": {}}));
    assert_eq!(a.parts()[0]["state"], "approval-requested");
    // Missing part still reports the action.
    let mut b = acc();
    let r = b.apply(
        &json!({"type": "tool-approval-request", "toolCallId": "tc-missing", "approvalId": "x"}),
    );
    assert_eq!(r, ChunkAction::ToolApprovalRequest { tool_call_id: "tc-missing".into() });
    assert!(b.parts().is_empty());
}

#[test]
fn approval_request_and_denial_do_not_regress_settled_parts() {
    for st in ["approval-responded", "output-available", "output-error", "output-denied"] {
        let existing = json!({"type": "tool-x", "toolCallId": "c", "state": st, "approval": {"id": "a", "approved": true}});
        let mut a = acc().with_existing(vec![existing.clone()], None);
        a.apply(&json!({"type": "tool-approval-request", "toolCallId": "c", "approvalId": "b"}));
        a.apply(&json!({"type": "tool-output-denied", "toolCallId": "c"}));
        assert_eq!(a.parts()[0], existing, "state {st}");
    }
    let mut a = acc();
    a.apply(
        &json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "rm", "input": {}}),
    );
    a.apply(&json!({"type": "tool-output-denied", "toolCallId": "c"}));
    assert_eq!(a.parts()[0]["state"], "output-denied");
}

#[test]
fn output_error_and_preliminary() {
    let mut a = acc();
    a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "calc", "input": {}}));
    a.apply(&json!({"type": "tool-output-available", "toolCallId": "c", "output": {"partial": true}, "preliminary": true}));
    assert_eq!(a.parts()[0]["preliminary"], true);
    a.apply(&json!({"type": "tool-output-available", "toolCallId": "c", "output": {"partial": false}, "preliminary": false}));
    assert_eq!(a.parts()[0]["preliminary"], false);
    a.apply(&json!({"type": "tool-output-error", "toolCallId": "c", "errorText": "timeout"}));
    assert_eq!(a.parts()[0]["state"], "output-error");
    assert_eq!(a.parts()[0]["errorText"], "timeout");
}

#[test]
fn cross_message_tool_updates() {
    let mut a = acc();
    let r = a.apply(&json!({"type": "tool-output-available", "toolCallId": "tc-other", "output": {"data": "prev"}}));
    assert_eq!(
        r,
        ChunkAction::CrossMessageToolUpdate {
            tool_call_id: "tc-other".into(),
            update: CrossMessageUpdate::Output {
                output: Some(json!({"data": "prev"})),
                preliminary: None
            }
        }
    );
    assert!(a.parts().is_empty());
    let r = a.apply(
        &json!({"type": "tool-output-error", "toolCallId": "tc-other", "errorText": "failed"}),
    );
    assert_eq!(
        r,
        ChunkAction::CrossMessageToolUpdate {
            tool_call_id: "tc-other".into(),
            update: CrossMessageUpdate::Error { error_text: Some("failed".into()) }
        }
    );
    let r = a.apply(&json!({"type": "tool-output-available", "toolCallId": "tc-other", "output": "partial", "preliminary": true}));
    let u = r.cross_message_update().unwrap();
    let applied = u
        .apply(&json!({"type": "tool-x", "toolCallId": "tc-other", "state": "approval-responded"}));
    assert_eq!(applied["preliminary"], true);
    assert_eq!(applied["output"], "partial");

    a.apply(&json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "calc", "input": {}}));
    assert_eq!(
        a.apply(&json!({"type": "tool-output-available", "toolCallId": "tc1", "output": 42})),
        ChunkAction::Applied
    );
}

#[test]
fn start_adopts_id_and_merges_metadata() {
    let mut a = acc();
    let r = a.apply(&json!({"type": "start", "messageId": "server-id-1", "messageMetadata": {"model": "gpt-4"}}));
    assert_eq!(
        r,
        ChunkAction::Start {
            message_id: Some("server-id-1".into()),
            metadata: Some(json!({"model": "gpt-4"}).as_object().unwrap().clone())
        }
    );
    assert_eq!(a.message_id(), "server-id-1");
    assert_eq!(a.metadata(), json!({"model": "gpt-4"}).as_object());

    let mut b = StreamAccumulator::new("m1", false)
        .with_existing(vec![], json!({"existing": true}).as_object().cloned());
    b.apply(&json!({"type": "start", "messageMetadata": {"model": "gpt-4"}}));
    assert_eq!(b.metadata(), json!({"existing": true, "model": "gpt-4"}).as_object());
    assert_eq!(b.message_id(), "m1");

    let mut c = acc();
    c.apply(&json!({"type": "start", "messageId": "x"}));
    assert_eq!(c.message_id(), "x");
    assert!(c.metadata().is_none());
}

#[test]
fn continuation_keeps_id_and_existing_parts() {
    let mut a = StreamAccumulator::new("client-id", true).with_existing(
        vec![json!({"type": "text", "text": "previous"})],
        json!({"model": "gpt-4"}).as_object().cloned(),
    );
    assert!(a.is_continuation());
    assert_eq!(a.parts().len(), 1);
    a.apply(&json!({"type": "start", "messageId": "server-id"}));
    assert_eq!(a.message_id(), "client-id");
    assert_eq!(a.metadata(), json!({"model": "gpt-4"}).as_object());
}

#[test]
fn finish_metadata_and_errors() {
    let mut a = acc();
    let r = a.apply(
        &json!({"type": "finish", "finishReason": "stop", "messageMetadata": {"tokens": 100}}),
    );
    assert_eq!(
        r,
        ChunkAction::Finish {
            finish_reason: Some("stop".into()),
            metadata: json!({"tokens": 100}).as_object().cloned()
        }
    );
    assert_eq!(
        a.apply(&json!({"type": "finish"})),
        ChunkAction::Finish { finish_reason: None, metadata: None }
    );
    let r = a.apply(&json!({"type": "message-metadata", "messageMetadata": {"b": 2}}));
    assert_eq!(
        r,
        ChunkAction::MessageMetadata { metadata: json!({"b": 2}).as_object().cloned().unwrap() }
    );
    assert_eq!(a.metadata(), json!({"tokens": 100, "b": 2}).as_object());
    assert_eq!(
        a.apply(&json!({"type": "message-metadata", "messageMetadata": [1]})),
        ChunkAction::MessageMetadata { metadata: Map::new() }
    );
    assert_eq!(a.apply(&json!({"type": "finish-step"})), ChunkAction::Applied);
    assert!(a.parts().is_empty());
    assert_eq!(
        a.apply(&json!({"type": "error", "errorText": "LLM failed"})),
        ChunkAction::Error("LLM failed".into())
    );
    match a.apply(&json!({"type": "error"})) {
        ChunkAction::Error(t) => assert!(t.contains("error")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_and_malformed_chunks_are_ignored() {
    let mut a = acc();
    assert_eq!(a.apply(&json!({"type": "unknown-type"})), ChunkAction::Ignored);
    assert_eq!(a.apply(&json!({"no": "type"})), ChunkAction::Ignored);
    assert_eq!(a.apply(&json!("text-start")), ChunkAction::Ignored);
    assert_eq!(a.apply(&json!({"type": 5})), ChunkAction::Ignored);
    assert_eq!(a.apply(&json!({"type": "text-delta", "delta": {"x": 1}})), ChunkAction::Applied);
    assert_eq!(a.apply(&json!({"type": "tool-input-delta"})), ChunkAction::Applied);
    assert_eq!(a.parts().len(), 1);
}

#[test]
fn message_snapshot() {
    let mut a = StreamAccumulator::new("m1", false);
    feed(
        &mut a,
        &[
            json!({"type": "text-start"}),
            json!({"type": "text-delta", "delta": "hello"}),
            json!({"type": "start", "messageMetadata": {"model": "gpt-4"}}),
        ],
    );
    let m = a.message();
    assert_eq!(m.id, "m1");
    assert_eq!(m.role, Role::Assistant);
    assert_eq!(m.parts.len(), 1);
    assert_eq!(m.metadata, Some(json!({"model": "gpt-4"})));
    assert!(acc().message().to_value().get("metadata").is_none());
}

fn msg(id: &str, role: Role, text: &str) -> UIMessage {
    UIMessage::new(id, role, vec![json!({"type": "text", "text": text})])
}

#[test]
fn merge_into_transcripts() {
    let user = msg("user-1", Role::User, "hello");
    let asst = msg("asst-1", Role::Assistant, "hi");
    let mut a = StreamAccumulator::new("new-msg", false);
    a.apply(&json!({"type": "text-start"}));
    let r = a.merge_into(std::slice::from_ref(&user));
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].id, "new-msg");
    assert_eq!(a.merge_into(&[]).len(), 1);

    let mut b = StreamAccumulator::new("asst-1", false);
    feed(
        &mut b,
        &[json!({"type": "text-start"}), json!({"type": "text-delta", "delta": "updated"})],
    );
    let r = b.merge_into(&[user.clone(), asst.clone()]);
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].parts[0]["text"], "updated");
    assert_eq!(r[0], user);

    let mut c = StreamAccumulator::new("unknown-id", true);
    feed(
        &mut c,
        &[json!({"type": "text-start"}), json!({"type": "text-delta", "delta": "continued"})],
    );
    let r = c.merge_into(&[user.clone(), asst.clone()]);
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].id, "asst-1");
    assert_eq!(r[1].parts[0]["text"], "continued");
    let r = c.merge_into(std::slice::from_ref(&user));
    assert_eq!(r[1].id, "unknown-id");

    let first = msg("asst-first", Role::Assistant, "old");
    let target = msg("target-id", Role::Assistant, "target");
    let mut d = StreamAccumulator::new("target-id", true);
    feed(
        &mut d,
        &[json!({"type": "text-start"}), json!({"type": "text-delta", "delta": "updated"})],
    );
    let r = d.merge_into(&[target, first.clone()]);
    assert_eq!(r[0].id, "target-id");
    assert_eq!(r[0].parts[0]["text"], "updated");
    assert_eq!(r[1], first);
}

#[test]
fn mid_stream_tool_result_lands_in_accumulator() {
    let mut a = acc();
    a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "getUserTimezone", "input": {}}));
    let u = ToolPartUpdate::tool_result(
        "c",
        super::super::tool_state::ToolResultOutcome::Output(Some(json!("Europe/Paris"))),
    );
    assert!(a.apply_tool_update(&u));
    assert!(!a.apply_tool_update(&u));
    assert_eq!(a.message().parts[0]["output"], "Europe/Paris");
}

#[test]
fn replay_chunk_detection() {
    let parts = vec![
        json!({"type": "tool-a", "toolCallId": "s", "state": "input-streaming"}),
        json!({"type": "tool-a", "toolCallId": "r", "state": "output-available"}),
        json!({"type": "tool-a", "toolCallId": "ap", "state": "approval-responded"}),
        json!({"type": "tool-a", "toolCallId": "ia", "state": "input-available"}),
    ];
    assert!(!is_replay_chunk(&parts, &json!({"type": "text-start"})));
    assert!(!is_replay_chunk(&parts, &json!({"type": "tool-input-start", "toolCallId": "new"})));
    assert!(is_replay_chunk(&parts, &json!({"type": "tool-input-start", "toolCallId": "s"})));
    assert!(!is_replay_chunk(&parts, &json!({"type": "tool-input-delta", "toolCallId": "s"})));
    assert!(is_replay_chunk(&parts, &json!({"type": "tool-input-delta", "toolCallId": "r"})));
    assert!(is_replay_chunk(&parts, &json!({"type": "tool-input-available", "toolCallId": "ia"})));
    assert!(!is_replay_chunk(&parts, &json!({"type": "tool-input-available"})));
    assert!(is_replay_chunk(&parts, &json!({"type": "tool-output-denied", "toolCallId": "ap"})));
    assert!(is_replay_chunk(&parts, &json!({"type": "tool-approval-request", "toolCallId": "r"})));
    assert!(!is_replay_chunk(
        &parts,
        &json!({"type": "tool-approval-request", "toolCallId": "ia"})
    ));
    assert!(!is_replay_chunk(&parts, &json!({"type": "tool-output-denied", "toolCallId": "zz"})));
}
