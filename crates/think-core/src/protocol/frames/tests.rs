use super::*;
use crate::protocol::message::{Role, UIMessage};
use crate::protocol::tool_state::ToolResultOutcome;
use serde::Serialize;
use serde_json::{json, Value};

#[test]
fn chunk_frame_text_is_the_serde_frame() {
    for (seq, continuation) in [(0, false), (7, true), (u64::MAX, false)] {
        let chunk = json!({"type": "text-delta", "id": "t", "delta": "é\n\"q\\"});
        let text = chat_chunk_frame_text("req-\"1", &chunk, seq, continuation);
        let body = chunk.to_string();
        let frame = ChatResponse::chunk("req-\"1", &body, seq).in_continuation(continuation);
        assert_eq!(text, to_text(&frame));
    }
}

fn s(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap()
}

fn val(v: &impl Serialize) -> Value {
    serde_json::to_value(v).unwrap()
}

fn frame(v: Value) -> String {
    v.to_string()
}

fn chat_request(body: &Value) -> String {
    frame(
        json!({"id": "V1StGXR8", "init": {"method": "POST", "body": body.to_string()}, "type": types::USE_CHAT_REQUEST}),
    )
}

#[test]
fn parses_reference_chat_request() {
    let raw = r#"{"id":"V1StGXR8","init":{"method":"POST","body":"{\"messages\":[{\"id\":\"msg_1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"hi\"}]}],\"trigger\":\"submit-message\",\"clientTools\":[{\"name\":\"getUserTimezone\",\"description\":\"tz\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}],\"myField\":1}"},"type":"cf_agent_use_chat_request"}"#;
    let ClientFrame::ChatRequest(req) = parse_client_frame(raw).unwrap() else { panic!() };
    assert_eq!(req.id, "V1StGXR8");
    assert_eq!(req.messages.len(), 1);
    assert_eq!(req.messages[0].role, Role::User);
    assert_eq!(req.trigger, Trigger::SubmitMessage);
    let tools = req.client_tools.unwrap();
    assert_eq!(tools[0].name, "getUserTimezone");
    assert_eq!(tools[0].description.as_deref(), Some("tz"));
    assert_eq!(tools[0].parameters, Some(json!({"type": "object", "properties": {}})));
    assert_eq!(req.body, *json!({"myField": 1}).as_object().unwrap());
}

#[test]
fn chat_request_trigger_and_client_tools_variants() {
    let parse = |body: Value| match parse_client_frame(&chat_request(&body)) {
        Ok(ClientFrame::ChatRequest(r)) => r,
        other => panic!("{other:?}"),
    };
    let r = parse(json!({"messages": [], "trigger": "regenerate-message"}));
    assert_eq!(r.trigger, Trigger::RegenerateMessage);
    assert_eq!(r.client_tools, None);
    assert!(r.body.is_empty());
    assert_eq!(parse(json!({"messages": [], "clientTools": []})).client_tools, Some(vec![]));
    assert_eq!(parse(json!({"messages": [], "clientTools": null})).client_tools, Some(vec![]));
    assert_eq!(parse(json!({"messages": [], "trigger": "weird"})).trigger, Trigger::SubmitMessage);
}

fn chat_err(raw: &str) -> FrameError {
    match parse_client_frame(raw) {
        Err(e) => e,
        Ok(f) => panic!("expected error, got {f:?}"),
    }
}

#[test]
fn malformed_chat_requests_are_answered_on_the_request() {
    let cases = [
        (
            frame(
                json!({"id": "r1", "init": {"method": "POST", "body": "{not json"}, "type": types::USE_CHAT_REQUEST}),
            ),
            "not valid JSON",
        ),
        (
            frame(
                json!({"id": "r1", "init": {"method": "GET", "body": "{}"}, "type": types::USE_CHAT_REQUEST}),
            ),
            "unsupported method GET",
        ),
        (
            frame(json!({"id": "r1", "init": {"body": "{}"}, "type": types::USE_CHAT_REQUEST})),
            "only POST",
        ),
        (frame(json!({"id": "r1", "type": types::USE_CHAT_REQUEST})), "missing init"),
        (
            frame(json!({"id": "r1", "init": {"method": "POST"}, "type": types::USE_CHAT_REQUEST})),
            "missing request body",
        ),
        (
            frame(
                json!({"id": "r1", "init": {"method": "POST", "body": {"messages": []}}, "type": types::USE_CHAT_REQUEST}),
            ),
            "JSON string",
        ),
        (chat_request(&json!([1])).replace("V1StGXR8", "r1"), "not a JSON object"),
        (
            chat_request(&json!({"messages": {}})).replace("V1StGXR8", "r1"),
            "messages must be an array",
        ),
        (
            chat_request(&json!({"trigger": "submit-message"})).replace("V1StGXR8", "r1"),
            "no messages",
        ),
        (
            chat_request(&json!({"messages": [{"id": "m", "role": "user", "parts": "x"}]}))
                .replace("V1StGXR8", "r1"),
            "messages[0]: message parts is not an array",
        ),
        (
            chat_request(&json!({"messages": [], "clientTools": [{"description": "d"}]}))
                .replace("V1StGXR8", "r1"),
            "clientTools[0] has no name",
        ),
        (
            chat_request(&json!({"messages": [], "clientTools": "x"})).replace("V1StGXR8", "r1"),
            "clientTools must be an array",
        ),
    ];
    for (raw, want) in cases {
        let e = chat_err(&raw);
        assert_eq!(e.reply, ErrorReply::ChatResponse { id: "r1".into() }, "{raw}");
        assert!(e.message.contains(want), "{raw}: {}", e.message);
        let reply = e.reply_frame();
        assert_eq!(
            s(&reply),
            format!(
                r#"{{"type":"cf_agent_use_chat_response","id":"r1","body":{},"done":true,"error":true}}"#,
                json!(e.message)
            )
        );
    }
}

#[test]
fn chat_request_without_id_gets_protocol_error() {
    for raw in [
        frame(json!({"init": {"method": "POST", "body": "{}"}, "type": types::USE_CHAT_REQUEST})),
        frame(json!({"id": 5, "type": types::USE_CHAT_REQUEST})),
        frame(json!({"id": "", "type": types::USE_CHAT_REQUEST})),
    ] {
        let e = chat_err(&raw);
        assert_eq!(e.reply, ErrorReply::ProtocolError);
        assert_eq!(val(&e.reply_frame())["type"], "cf_agent_protocol_error");
        assert_eq!(val(&e.reply_frame())["error"], json!(e.message));
    }
}

#[test]
fn non_json_and_non_objects_are_protocol_errors() {
    for raw in ["not json", "", "{broken", "[1,2]", "42", "\"cf_agent_chat_clear\"", "null"] {
        let e = chat_err(raw);
        assert_eq!(e.reply, ErrorReply::ProtocolError, "{raw}");
    }
    assert!(chat_err("[1]").message.contains("not a JSON object (got array)"));
}

#[test]
fn unknown_or_untyped_objects_go_to_the_app() {
    assert_eq!(
        parse_client_frame(r#"{"id":"abc"}"#).unwrap(),
        ClientFrame::Other(json!({"id": "abc"}).as_object().unwrap().clone())
    );
    assert!(matches!(
        parse_client_frame(r#"{"type":"unknown_type"}"#).unwrap(),
        ClientFrame::Other(_)
    ));
    assert!(matches!(parse_client_frame(r#"{"type":7}"#).unwrap(), ClientFrame::Other(_)));
    // Server-to-client types sent by a client are not protocol requests either.
    for t in [
        types::USE_CHAT_RESPONSE,
        types::STREAM_RESUMING,
        types::STREAM_RESUME_NONE,
        types::MESSAGE_UPDATED,
    ] {
        assert!(
            matches!(
                parse_client_frame(&frame(json!({"type": t}))).unwrap(),
                ClientFrame::Other(_)
            ),
            "{t}"
        );
    }
}

#[test]
fn parses_simple_frames() {
    assert_eq!(
        parse_client_frame(r#"{"type":"cf_agent_chat_clear"}"#).unwrap(),
        ClientFrame::Clear
    );
    assert_eq!(
        parse_client_frame(r#"{"id":"req-1","type":"cf_agent_chat_request_cancel"}"#).unwrap(),
        ClientFrame::Cancel { id: "req-1".into() }
    );
    assert_eq!(
        parse_client_frame(r#"{"type":"cf_agent_stream_resume_request"}"#).unwrap(),
        ClientFrame::StreamResumeRequest { probe_id: None }
    );
    assert_eq!(
        parse_client_frame(r#"{"type":"cf_agent_stream_resume_request","probeId":"probe-1"}"#)
            .unwrap(),
        ClientFrame::StreamResumeRequest { probe_id: Some("probe-1".into()) }
    );
    assert_eq!(
        parse_client_frame(r#"{"type":"cf_agent_stream_resume_request","probeId":3}"#).unwrap(),
        ClientFrame::StreamResumeRequest { probe_id: None }
    );
    assert_eq!(
        parse_client_frame(r#"{"type":"cf_agent_stream_resume_ack","id":"req-1"}"#).unwrap(),
        ClientFrame::StreamResumeAck { id: "req-1".into() }
    );
    let msgs = json!([{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]);
    assert_eq!(
        parse_client_frame(&frame(json!({"type": "cf_agent_chat_messages", "messages": msgs})))
            .unwrap(),
        ClientFrame::ChatMessages { messages: msgs.as_array().unwrap().clone() }
    );
    assert_eq!(
        parse_client_frame(r#"{"type":"cf_agent_chat_messages"}"#).unwrap(),
        ClientFrame::ChatMessages { messages: vec![] }
    );
    assert_eq!(
        parse_client_frame(r#"{"state":{"n":1},"type":"cf_agent_state"}"#).unwrap(),
        ClientFrame::State { state: json!({"n": 1}) }
    );
    assert_eq!(
        parse_client_frame(r#"{"state":null,"type":"cf_agent_state"}"#).unwrap(),
        ClientFrame::State { state: Value::Null }
    );
    assert_eq!(chat_err(r#"{"type":"cf_agent_state"}"#).reply, ErrorReply::ProtocolError);
    assert!(chat_err(r#"{"type":"cf_agent_chat_request_cancel"}"#).message.contains("missing id"));
    assert!(chat_err(r#"{"type":"cf_agent_stream_resume_ack","id":1}"#)
        .message
        .contains("id must be a string"));
}

#[test]
fn parses_tool_results() {
    let full = frame(json!({
        "type": "cf_agent_tool_result", "toolCallId": "tc1", "toolName": "getWeather", "output": {"temp": 72},
        "state": "output-available", "autoContinue": true, "clientTools": [{"name": "tool1", "description": "desc"}]
    }));
    let ClientFrame::ToolResult(r) = parse_client_frame(&full).unwrap() else { panic!() };
    assert_eq!(r.tool_call_id, "tc1");
    assert_eq!(r.tool_name, "getWeather");
    assert_eq!(r.output, Some(json!({"temp": 72})));
    assert!(r.auto_continue);
    assert_eq!(
        r.client_tools,
        Some(vec![ClientToolSchema {
            name: "tool1".into(),
            description: Some("desc".into()),
            parameters: None
        }])
    );
    assert_eq!(r.outcome(), ToolResultOutcome::Output(Some(json!({"temp": 72}))));

    let ClientFrame::ToolResult(m) = parse_client_frame(
        r#"{"type":"cf_agent_tool_result","toolCallId":"tc1","output":"result"}"#,
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(m.tool_name, "");
    assert!(!m.auto_continue);
    assert_eq!(m.client_tools, None);

    let ClientFrame::ToolResult(e) = parse_client_frame(
        r#"{"type":"cf_agent_tool_result","toolCallId":"call_1","toolName":"x","output":null,"state":"output-error","errorText":"User declined","autoContinue":false}"#,
    )
    .unwrap() else { panic!() };
    assert_eq!(e.outcome(), ToolResultOutcome::Error(Some("User declined".into())));

    assert!(chat_err(r#"{"type":"cf_agent_tool_result","output":1}"#)
        .message
        .contains("missing toolCallId"));
    assert!(chat_err(r#"{"type":"cf_agent_tool_result","toolCallId":"a","errorText":5}"#)
        .message
        .contains("errorText must be a string"));
    assert!(chat_err(r#"{"type":"cf_agent_tool_result","toolCallId":"a","clientTools":[3]}"#)
        .message
        .contains("clientTools[0]"));
}

#[test]
fn parses_tool_approvals() {
    assert_eq!(
        parse_client_frame(r#"{"type":"cf_agent_tool_approval","toolCallId":"call_2","approved":true,"autoContinue":true}"#).unwrap(),
        ClientFrame::ToolApproval(ToolApprovalFrame { tool_call_id: "call_2".into(), approved: true, auto_continue: true })
    );
    assert_eq!(
        parse_client_frame(
            r#"{"type":"cf_agent_tool_approval","toolCallId":"c","approved":false}"#
        )
        .unwrap(),
        ClientFrame::ToolApproval(ToolApprovalFrame {
            tool_call_id: "c".into(),
            approved: false,
            auto_continue: false
        })
    );
    assert!(chat_err(r#"{"type":"cf_agent_tool_approval","toolCallId":"c","approved":"yes"}"#)
        .message
        .contains("approved must be a boolean"));
    assert!(chat_err(r#"{"type":"cf_agent_tool_approval","toolCallId":"c"}"#)
        .message
        .contains("missing approved"));
}

#[test]
fn parses_rpc_and_answers_malformed_calls() {
    assert_eq!(
        parse_client_frame(r#"{"args":[1,"a"],"id":"u-1","method":"getStats","type":"rpc"}"#)
            .unwrap(),
        ClientFrame::Rpc(RpcRequest {
            id: "u-1".into(),
            method: "getStats".into(),
            args: vec![json!(1), json!("a")]
        })
    );
    for (raw, want) in [
        (r#"{"args":[],"id":"u-1","type":"rpc"}"#, "missing method"),
        (r#"{"args":[],"id":"u-1","method":3,"type":"rpc"}"#, "method must be a string"),
        (r#"{"args":{},"id":"u-1","method":"m","type":"rpc"}"#, "args must be an array"),
        (r#"{"id":"u-1","method":"m","type":"rpc"}"#, "missing args"),
    ] {
        let e = chat_err(raw);
        assert_eq!(e.reply, ErrorReply::Rpc { id: "u-1".into() });
        assert!(e.message.contains(want), "{}", e.message);
        assert_eq!(
            s(&e.reply_frame()),
            format!(r#"{{"error":{},"id":"u-1","success":false,"type":"rpc"}}"#, json!(e.message))
        );
    }
    assert_eq!(
        chat_err(r#"{"args":[],"method":"m","type":"rpc"}"#).reply,
        ErrorReply::ProtocolError
    );
}

#[test]
fn base_agent_frames_key_order() {
    assert_eq!(
        s(&Identity::new("default", "my-agent")),
        r#"{"name":"default","agent":"my-agent","type":"cf_agent_identity"}"#
    );
    assert_eq!(
        s(&McpServers::new(&json!({"servers": {}, "tools": [], "prompts": [], "resources": []}))),
        r#"{"mcp":{"servers":{},"tools":[],"prompts":[],"resources":[]},"type":"cf_agent_mcp_servers"}"#
    );
    assert_eq!(
        s(&RpcResult::new("i", &json!(3))),
        r#"{"done":true,"id":"i","result":3,"success":true,"type":"rpc"}"#
    );
    assert_eq!(
        s(&RpcError::new("i", "Method x does not exist")),
        r#"{"error":"Method x does not exist","id":"i","success":false,"type":"rpc"}"#
    );
    assert_eq!(
        s(&ProtocolError::new("bad")),
        r#"{"type":"cf_agent_protocol_error","error":"bad"}"#
    );
}

#[test]
fn chat_stream_frames() {
    let chunk = crate::protocol::chunk::start(Some("srv"), None).to_string();
    assert_eq!(
        s(&ChatResponse::chunk("V1StGXR8", &chunk, 0)),
        r#"{"type":"cf_agent_use_chat_response","id":"V1StGXR8","body":"{\"type\":\"start\",\"messageId\":\"srv\"}","done":false,"seq":0}"#
    );
    assert_eq!(
        s(&ChatResponse::chunk("r", "{}", 3).in_continuation(true)),
        r#"{"type":"cf_agent_use_chat_response","id":"r","body":"{}","done":false,"seq":3,"continuation":true}"#
    );
    let ids = ["u1".to_owned(), "u2".to_owned()];
    assert_eq!(
        s(&ChatResponse::done("r", ChatOutcome::Completed).for_messages(&ids)),
        r#"{"type":"cf_agent_use_chat_response","id":"r","body":"","done":true,"outcome":"completed","messageIds":["u1","u2"]}"#
    );
    assert_eq!(
        s(&ChatResponse::done("r", ChatOutcome::Recovering).in_continuation(true)),
        r#"{"type":"cf_agent_use_chat_response","id":"r","body":"","done":true,"outcome":"recovering","continuation":true}"#
    );
    assert_eq!(
        s(&ChatResponse::error("r", "boom").in_continuation(true).for_messages(&ids)),
        r#"{"type":"cf_agent_use_chat_response","id":"r","body":"boom","done":false,"error":true,"continuation":true,"messageIds":["u1","u2"]}"#
    );
    // A chunk is not terminal: it never names the request's messages.
    assert!(val(&ChatResponse::chunk("r", "{}", 0).for_messages(&ids)).get("messageIds").is_none());
    for (outcome, text) in [
        (ChatOutcome::Error, "error"),
        (ChatOutcome::Aborted, "aborted"),
        (ChatOutcome::Skipped, "skipped"),
    ] {
        assert_eq!(val(&ChatResponse::done("r", outcome))["outcome"], text);
    }
    assert_eq!(
        s(&Replay::chunk("r", "{\"type\":\"text-start\"}", 0)),
        r#"{"body":"{\"type\":\"text-start\"}","done":false,"id":"r","type":"cf_agent_use_chat_response","replay":true,"seq":0}"#
    );
    assert_eq!(
        s(&Replay::chunk("r", "{}", 4).in_continuation(true)),
        r#"{"body":"{}","done":false,"id":"r","type":"cf_agent_use_chat_response","replay":true,"seq":4,"continuation":true}"#
    );
    assert_eq!(
        s(&Replay::complete("r")),
        r#"{"body":"","done":false,"id":"r","type":"cf_agent_use_chat_response","replay":true,"replayComplete":true}"#
    );
    assert_eq!(
        s(&Replay::done("r").in_continuation(true).ended(ChatOutcome::Aborted, &ids)),
        r#"{"body":"","done":true,"id":"r","type":"cf_agent_use_chat_response","replay":true,"continuation":true,"messageIds":["u1","u2"],"outcome":"aborted"}"#
    );
    assert_eq!(
        s(&TerminalError::new("r", "boom").for_messages(&ids)),
        r#"{"body":"boom","done":true,"error":true,"id":"r","type":"cf_agent_use_chat_response","messageIds":["u1","u2"]}"#
    );
}

#[test]
fn origin_message_ids_are_the_trailing_user_messages() {
    let m = |id: &str, role| UIMessage::new(id, role, vec![]);
    let msgs =
        [m("u0", Role::User), m("a1", Role::Assistant), m("u1", Role::User), m("u2", Role::User)];
    assert_eq!(origin_message_ids(&msgs), ["u1", "u2"]);
    assert!(origin_message_ids(&msgs[..2]).is_empty(), "an assistant message last: none");
    assert!(origin_message_ids(&[]).is_empty());
}

#[test]
fn transcript_frames() {
    let m = UIMessage::new("m1", Role::User, vec![json!({"type": "text", "text": "hi"})]);
    assert_eq!(
        s(&ChatMessages::new(std::slice::from_ref(&m))),
        r#"{"type":"cf_agent_chat_messages","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#
    );
    assert_eq!(
        s(&ChatMessages::on_connect(&[])),
        r#"{"type":"cf_agent_chat_messages","messages":[],"connect":true}"#
    );
    assert_eq!(
        s(&MessageUpdated::new(&m)),
        r#"{"type":"cf_agent_message_updated","message":{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}}"#
    );
    assert_eq!(s(&ChatClear::new()), r#"{"type":"cf_agent_chat_clear"}"#);
    assert_eq!(
        s(&ChatRecovering::settled(None)),
        r#"{"type":"cf_agent_chat_recovering","recovering":false}"#
    );
}

// Golden resume-handshake frames (resume-handshake-frames.ts), compared as exact bytes.

#[test]
fn golden_stream_resuming() {
    assert_eq!(
        s(&StreamResuming::new("req-1", None)),
        r#"{"type":"cf_agent_stream_resuming","id":"req-1"}"#
    );
    assert_eq!(
        s(&StreamResuming::new("req-1", Some("p"))),
        r#"{"type":"cf_agent_stream_resuming","id":"req-1","probeId":"p"}"#
    );
}

#[test]
fn golden_stream_resume_none() {
    let idle = StreamResumeNone::new(ResumeNoneReason::Idle, None);
    assert_eq!(s(&idle), r#"{"type":"cf_agent_stream_resume_none","reason":"idle"}"#);
    assert!(val(&idle).get("id").is_none());
    assert_eq!(
        s(&StreamResumeNone::new(ResumeNoneReason::ContinuationOwned, None)),
        r#"{"type":"cf_agent_stream_resume_none","reason":"continuation-owned"}"#
    );
    assert_eq!(
        s(&StreamResumeNone::new(ResumeNoneReason::Idle, Some("probe-1"))),
        r#"{"type":"cf_agent_stream_resume_none","reason":"idle","probeId":"probe-1"}"#
    );
}

#[test]
fn golden_replay_done_is_clean_close() {
    let f = Replay::done("req-1");
    assert_eq!(
        s(&f),
        r#"{"body":"","done":true,"id":"req-1","type":"cf_agent_use_chat_response","replay":true}"#
    );
    assert!(val(&f).get("error").is_none());
}

#[test]
fn golden_terminal_error_has_no_replay_flag() {
    let f = TerminalError::new("req-1", "boom");
    assert_eq!(
        s(&f),
        r#"{"body":"boom","done":true,"error":true,"id":"req-1","type":"cf_agent_use_chat_response"}"#
    );
    assert!(val(&f).get("replay").is_none());
}

#[test]
fn golden_stream_pending_id_only_when_present() {
    assert_eq!(
        s(&StreamPending::new(Some("req-1"), None)),
        r#"{"type":"cf_agent_stream_pending","id":"req-1"}"#
    );
    assert_eq!(s(&StreamPending::new(None, None)), r#"{"type":"cf_agent_stream_pending"}"#);
    assert_eq!(
        s(&StreamPending::new(Some(""), Some("p"))),
        r#"{"type":"cf_agent_stream_pending","probeId":"p"}"#
    );
    assert_eq!(
        s(&StreamPending::new(Some("c"), Some("p"))),
        r#"{"type":"cf_agent_stream_pending","id":"c","probeId":"p"}"#
    );
}

#[test]
fn golden_recovering_id_only_when_present() {
    assert_eq!(
        s(&ChatRecovering::started(Some("req-1"))),
        r#"{"type":"cf_agent_chat_recovering","recovering":true,"id":"req-1"}"#
    );
    let no_id = ChatRecovering::started(None);
    assert_eq!(s(&no_id), r#"{"type":"cf_agent_chat_recovering","recovering":true}"#);
    assert!(val(&no_id).get("id").is_none());
}

#[test]
fn golden_frame_types_match_constants() {
    let kind = |v: Value| v["type"].as_str().unwrap_or_default().to_owned();
    assert_eq!(kind(val(&StreamResuming::new("x", None))), types::STREAM_RESUMING);
    assert_eq!(
        kind(val(&StreamResumeNone::new(ResumeNoneReason::Idle, None))),
        types::STREAM_RESUME_NONE
    );
    assert_eq!(kind(val(&Replay::done("x"))), types::USE_CHAT_RESPONSE);
    assert_eq!(kind(val(&TerminalError::new("x", "y"))), types::USE_CHAT_RESPONSE);
    assert_eq!(kind(val(&ChatRecovering::started(Some("x")))), types::CHAT_RECOVERING);
    assert_eq!(kind(val(&StreamPending::new(Some("x"), None))), types::STREAM_PENDING);
}

/// Deterministic xorshift so the fuzz corpus is the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn fuzz_parser_never_panics() {
    let seeds = [
        r#"{"id":"V1StGXR8","init":{"method":"POST","body":"{\"messages\":[{\"id\":\"m\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"hi\"}]}],\"trigger\":\"submit-message\",\"clientTools\":[{\"name\":\"t\"}]}"},"type":"cf_agent_use_chat_request"}"#,
        r#"{"type":"cf_agent_tool_result","toolCallId":"c","toolName":"x","output":{"a":[1,2]},"state":"output-error","errorText":"e","autoContinue":true,"clientTools":[{"name":"x"}]}"#,
        r#"{"type":"cf_agent_tool_approval","toolCallId":"c","approved":true,"autoContinue":true}"#,
        r#"{"args":[1,{"x":null}],"id":"u","method":"m","type":"rpc"}"#,
        r#"{"type":"cf_agent_stream_resume_request","probeId":"p"}"#,
        r#"{"state":{"deep":[[[]]]},"type":"cf_agent_state"}"#,
    ];
    let alphabet: Vec<char> =
        "{}[]\":,\\ abcdefghijklmnopqrstuvwxyz0123456789-_.eE+tfnul\u{0}\u{7f}é😀\n\t"
            .chars()
            .collect();
    let keys = [
        "type",
        "id",
        "init",
        "method",
        "body",
        "messages",
        "parts",
        "role",
        "toolCallId",
        "approved",
        "args",
        "state",
        "clientTools",
        "probeId",
    ];
    let values = [
        "null",
        "true",
        "1",
        "-0.5e9",
        "\"\"",
        "\"POST\"",
        "[]",
        "{}",
        "\"cf_agent_use_chat_request\"",
        "\"rpc\"",
        "\"cf_agent_tool_result\"",
        "\"cf_agent_tool_approval\"",
        "\"{\\\"messages\\\":[1]}\"",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut inputs: Vec<String> = Vec::new();
    for i in 0..1000 {
        let input = match i % 5 {
            0 => (0..rng.below(80)).map(|_| alphabet[rng.below(alphabet.len())]).collect(),
            1 => {
                let seed = seeds[rng.below(seeds.len())];
                let cut = rng.below(seed.len() + 1);
                let cut = (0..=cut).rev().find(|c| seed.is_char_boundary(*c)).unwrap_or(0);
                seed[..cut].to_owned()
            }
            2 => {
                let seed = seeds[rng.below(seeds.len())];
                let mut bytes: Vec<char> = seed.chars().collect();
                for _ in 0..1 + rng.below(4) {
                    let pos = rng.below(bytes.len());
                    bytes[pos] = alphabet[rng.below(alphabet.len())];
                }
                bytes.into_iter().collect()
            }
            3 => {
                let n = rng.below(6);
                let fields: Vec<String> = (0..n)
                    .map(|_| {
                        format!(
                            "\"{}\":{}",
                            keys[rng.below(keys.len())],
                            values[rng.below(values.len())]
                        )
                    })
                    .collect();
                format!("{{{}}}", fields.join(","))
            }
            _ => {
                let depth = 1 + rng.below(5000);
                let open = if rng.below(2) == 0 { "[" } else { "{\"a\":" };
                open.repeat(depth)
            }
        };
        inputs.push(input);
    }
    let mut ok = 0;
    for input in &inputs {
        match parse_client_frame(input) {
            Ok(_) => ok += 1,
            Err(e) => {
                let reply = val(&e.reply_frame());
                assert!(reply.get("type").and_then(Value::as_str).is_some(), "{input:?}");
                assert!(!e.message.is_empty());
            }
        }
    }
    assert!(ok > 0 && ok < inputs.len(), "corpus exercises both paths ({ok} ok)");
}
