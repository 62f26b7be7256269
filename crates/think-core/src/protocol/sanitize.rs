//! Persistence hygiene for messages: strip ephemeral provider data, and shrink a message
//! that would not fit a SQLite row.
//!
//! Sizes follow the TypeScript reference: row size in UTF-8 bytes of the JSON, and the
//! character budgets of tool outputs and texts in UTF-16 code units (JavaScript's
//! `String.length`), so both implementations compact the same messages the same way.

use super::message::{
    part_type, state, state_of, tool_call_id_of, utf16_len, utf16_prefix, Role, UIMessage,
};
use serde_json::{json, Map, Value};

/// Largest serialized message stored as is; headroom below the 2 MB SQLite row limit.
pub const ROW_MAX_BYTES: usize = 1_800_000;
/// Character budget a tool output is compacted to when a message is too large.
pub const COMPACT_TOOL_OUTPUT_CHARS: usize = 1_000;
/// Text parts longer than this are truncated when compacting tool outputs was not enough.
pub const COMPACT_TEXT_PART_CHARS: usize = 1_000;
const TEXT_PREVIEW_CHARS: usize = 500;
const MAX_DEPTH: usize = 8;
const TRUNCATED_FLAG: &str = "__truncated";
const TRUNCATED_CHARS: &str = "__truncatedChars";

/// Removes data that must not be stored or sent back to a provider: OpenAI's ephemeral
/// `itemId` and `reasoningEncryptedContent` (in `providerMetadata` and
/// `callProviderMetadata`), and reasoning parts with no text and no provider metadata left.
/// Takes the message by value: it can hold a large tool input, which is then not copied.
pub fn sanitize_message(mut message: UIMessage) -> UIMessage {
    message.parts = std::mem::take(&mut message.parts)
        .into_iter()
        .map(|p| strip_openai(strip_openai(p, "providerMetadata"), "callProviderMetadata"))
        .filter(|p| !is_empty_reasoning(p))
        .collect();
    message
}

fn strip_openai(mut part: Value, key: &str) -> Value {
    let Some(p) = part.as_object_mut() else { return part };
    let Some(Value::Object(meta)) = p.get(key) else { return part };
    let Some(Value::Object(openai)) = meta.get("openai") else { return part };
    let mut rest_openai = openai.clone();
    rest_openai.shift_remove("itemId");
    rest_openai.shift_remove("reasoningEncryptedContent");
    let mut rest_meta = meta.clone();
    rest_meta.shift_remove("openai");
    let new_meta = if !rest_openai.is_empty() {
        rest_meta.insert("openai".into(), Value::Object(rest_openai));
        Some(rest_meta)
    } else if !rest_meta.is_empty() {
        Some(rest_meta)
    } else {
        None
    };
    p.shift_remove(key);
    if let Some(m) = new_meta {
        p.insert(key.to_owned(), Value::Object(m));
    }
    part
}

fn is_empty_reasoning(part: &Value) -> bool {
    if part_type(part) != Some("reasoning") {
        return false;
    }
    let text = part.get("text").and_then(Value::as_str).unwrap_or("");
    if !text.trim().is_empty() {
        return false;
    }
    !matches!(part.get("providerMetadata"), Some(Value::Object(m)) if !m.is_empty())
}

/// Serialized size of a message in bytes, as it would be stored (counted, not written).
pub fn message_bytes(message: &UIMessage) -> usize {
    super::json::json_len(message).unwrap_or(usize::MAX)
}

/// Makes a message fit a row: first compacts `output-available` tool outputs to
/// [`COMPACT_TOOL_OUTPUT_CHARS`] (listing their ids in `metadata.compactedToolOutputs`),
/// then, if still too big, truncates text parts oldest first (listing their indices in
/// `metadata.compactedTextParts`). Non-assistant messages only get the text step. Works in
/// place on the message it takes, so a large one is not copied.
pub fn enforce_row_size_limit(message: UIMessage) -> UIMessage {
    if message_bytes(&message) <= ROW_MAX_BYTES {
        return message;
    }
    if message.role != Role::Assistant {
        return truncate_text_parts(message);
    }
    let mut result = message;
    let mut compacted = Vec::new();
    for part in result.parts.iter_mut() {
        if state_of(part) != Some(state::OUTPUT_AVAILABLE) {
            continue;
        }
        let Some(id) = tool_call_id_of(part).map(str::to_owned) else { continue };
        let Some(output) = part.get("output") else { continue };
        let t = truncate_tool_output(output, COMPACT_TOOL_OUTPUT_CHARS);
        if t.truncated {
            part["output"] = t.output;
            compacted.push(Value::String(id));
        }
    }
    if !compacted.is_empty() {
        set_metadata_field(&mut result, "compactedToolOutputs", Value::Array(compacted));
    }
    if message_bytes(&result) <= ROW_MAX_BYTES {
        return result;
    }
    // Tool inputs can be large too (a `write` of a big file); keep their shape, shorten
    // their long strings. The content itself lives on where the tool put it.
    let mut compacted_inputs = Vec::new();
    for part in result.parts.iter_mut() {
        let Some(id) = tool_call_id_of(part).map(str::to_owned) else { continue };
        let Some(input) = part.get_mut("input") else { continue };
        if shorten_strings(input, COMPACT_TOOL_OUTPUT_CHARS) {
            compacted_inputs.push(Value::String(id));
        }
    }
    if !compacted_inputs.is_empty() {
        set_metadata_field(&mut result, "compactedToolInputs", Value::Array(compacted_inputs));
    }
    if message_bytes(&result) <= ROW_MAX_BYTES {
        return result;
    }
    truncate_text_parts(result)
}

/// Shortens every string in `v` longer than `max` UTF-16 units, in place; true if any was.
fn shorten_strings(v: &mut Value, max: usize) -> bool {
    match v {
        Value::String(text) => {
            let len = utf16_len(text);
            if len <= max {
                return false;
            }
            *text = format!("{}... [truncated for storage: {len} chars]", utf16_prefix(text, max));
            true
        }
        Value::Array(items) => items.iter_mut().fold(false, |acc, i| shorten_strings(i, max) | acc),
        Value::Object(map) => map.values_mut().fold(false, |acc, i| shorten_strings(i, max) | acc),
        _ => false,
    }
}

fn set_metadata_field(message: &mut UIMessage, key: &str, value: Value) {
    let mut meta = match message.metadata.take() {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    meta.insert(key.to_owned(), value);
    message.metadata = Some(Value::Object(meta));
}

fn truncate_text_parts(mut message: UIMessage) -> UIMessage {
    let mut indices = Vec::new();
    for i in 0..message.parts.len() {
        if part_type(&message.parts[i]) != Some("text") {
            continue;
        }
        let Some(text) = message.parts[i].get("text").and_then(Value::as_str) else { continue };
        let len = utf16_len(text);
        if len <= COMPACT_TEXT_PART_CHARS {
            continue;
        }
        let replacement = format!(
            "[Text truncated for storage ({len} chars). First {TEXT_PREVIEW_CHARS} chars: {}...]",
            utf16_prefix(text, TEXT_PREVIEW_CHARS)
        );
        message.parts[i]["text"] = Value::String(replacement);
        indices.push(json!(i));
        if message_bytes(&message) <= ROW_MAX_BYTES {
            break;
        }
    }
    if !indices.is_empty() {
        set_metadata_field(&mut message, "compactedTextParts", Value::Array(indices));
    }
    message
}

/// A tool output shrunk to a character budget, keeping its JSON shape where possible.
#[derive(Debug, Clone, PartialEq)]
pub struct TruncatedToolOutput {
    /// The output, cut to fit.
    pub output: Value,
    /// Whether anything was cut.
    pub truncated: bool,
    /// Length of the original output (the string itself, or its JSON).
    pub original_length: usize,
}

/// Shrinks `output` so its JSON (or the string itself) fits `max_chars`: long strings are
/// cut with a `... [truncated N chars]` suffix, arrays lose trailing items, objects get their
/// longest strings shortened and `__truncated` markers, and deep nesting is replaced by a note.
pub fn truncate_tool_output(output: &Value, max_chars: usize) -> TruncatedToolOutput {
    let original_length = length_for(output);
    if original_length <= max_chars {
        return TruncatedToolOutput { output: output.clone(), truncated: false, original_length };
    }
    TruncatedToolOutput {
        output: truncate_value(output, max_chars, original_length, 0),
        truncated: true,
        original_length,
    }
}

/// The suffix appended to a truncated string.
pub fn truncated_suffix(original_length: usize) -> String {
    format!("... [truncated {original_length} chars]")
}

/// UTF-16 length of a value's JSON.
fn json_len(v: &Value) -> usize {
    serde_json::to_string(v).map(|s| utf16_len(&s)).unwrap_or(0)
}

/// Length the budget is measured in: a string counts as itself, anything else as its JSON.
fn length_for(v: &Value) -> usize {
    match v {
        Value::String(s) => utf16_len(s),
        other => json_len(other),
    }
}

fn truncate_value(value: &Value, max: usize, original_length: usize, depth: usize) -> Value {
    match value {
        Value::String(s) => Value::String(truncate_string(s, max, utf16_len(s))),
        Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => {
            Value::String(format!("[Nested output omitted {}]", truncated_suffix(original_length)))
        }
        Value::Array(items) => truncate_array(items, max, original_length, depth),
        Value::Object(map) => truncate_object(map, max, original_length, depth),
        other => other.clone(),
    }
}

fn child_max_chars(max: usize, count: usize) -> usize {
    if count <= 1 {
        return max;
    }
    std::cmp::max(80, max / std::cmp::min(count, 10))
}

fn array_len(item_lens: &[usize]) -> usize {
    2 + item_lens.iter().sum::<usize>() + item_lens.len().saturating_sub(1)
}

fn truncate_array(items: &[Value], max: usize, original_length: usize, depth: usize) -> Value {
    let budget = child_max_chars(max, items.len());
    let mut result: Vec<Value> =
        items.iter().map(|it| truncate_value(it, budget, length_for(it), depth + 1)).collect();
    let mut lens: Vec<usize> = result.iter().map(json_len).collect();
    while result.len() > 1 && array_len(&lens) > max {
        result.pop();
        lens.pop();
    }
    if result.len() < items.len() {
        let note =
            Value::String(format!("Array output truncated {}", truncated_suffix(original_length)));
        lens.push(json_len(&note));
        result.push(note);
    }
    if array_len(&lens) > max {
        return compact_array_marker(max, original_length);
    }
    Value::Array(result)
}

fn entry_len(key: &str, v: &Value) -> usize {
    json_len(&Value::String(key.to_owned())) + 1 + json_len(v)
}

fn object_len(map: &Map<String, Value>) -> usize {
    2 + map.iter().map(|(k, v)| entry_len(k, v)).sum::<usize>() + map.len().saturating_sub(1)
}

fn truncate_object(
    map: &Map<String, Value>,
    max: usize,
    original_length: usize,
    depth: usize,
) -> Value {
    let budget = child_max_chars(max, map.len());
    let mut result = Map::new();
    for (k, v) in map {
        result.insert(k.clone(), truncate_value(v, budget, length_for(v), depth + 1));
    }
    let result_length = object_len(&result);
    if result_length <= max {
        return Value::Object(result);
    }
    shrink_string_fields(&mut result, max);
    if object_len(&result) > max {
        result.insert(TRUNCATED_FLAG.into(), Value::Bool(true));
        result.insert(TRUNCATED_CHARS.into(), json!(result_length));
    }
    if object_len(&result) > max {
        return compact_object_marker(max, original_length);
    }
    Value::Object(result)
}

fn shrink_string_fields(map: &mut Map<String, Value>, max: usize) {
    let mut strings: Vec<(String, String)> =
        map.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned()))).collect();
    crate::platform::sort::sort_by_key(&mut strings, |(_, s)| std::cmp::Reverse(utf16_len(s)));
    let mut total = object_len(map);
    for (key, s) in strings {
        if total <= max {
            return;
        }
        let old = entry_len(&key, &Value::String(s.clone()));
        let new_value = Value::String(truncate_string(&s, max / 4, utf16_len(&s)));
        total = total - old + entry_len(&key, &new_value);
        map.insert(key, new_value);
    }
}

fn truncate_string(value: &str, max: usize, original_length: usize) -> String {
    if utf16_len(value) <= max {
        return value.to_owned();
    }
    let suffix = truncated_suffix(original_length);
    let suffix_len = utf16_len(&suffix);
    if max <= suffix_len {
        return utf16_prefix(&suffix, max).to_owned();
    }
    format!("{}{}", utf16_prefix(value, max - suffix_len), suffix)
}

fn compact_object_marker(max: usize, original_length: usize) -> Value {
    let marker = json!({
        TRUNCATED_FLAG: true,
        TRUNCATED_CHARS: original_length,
        "note": "Tool output omitted because it was too large to preserve structurally."
    });
    if json_len(&marker) <= max {
        return marker;
    }
    json!({TRUNCATED_FLAG: true, TRUNCATED_CHARS: original_length})
}

fn compact_array_marker(max: usize, original_length: usize) -> Value {
    let structured = json!([compact_object_marker(max, original_length)]);
    if json_len(&structured) <= max {
        return structured;
    }
    let marker = json!([format!(
        "Array output omitted because it was too large to preserve structurally {}",
        truncated_suffix(original_length)
    )]);
    if json_len(&marker) <= max {
        return marker;
    }
    json!([utf16_prefix(&truncated_suffix(original_length), max)])
}

#[cfg(test)]
mod input_tests {
    use super::*;
    use crate::protocol::message::UIMessage;

    #[test]
    fn large_tool_inputs_are_shortened_when_outputs_are_not_enough() {
        let big = "x".repeat(1_200_000);
        let part = |id: &str| {
            json!({"type": "tool-write", "toolCallId": id, "state": "output-available",
            "input": {"path": "/big.txt", "content": big}, "output": {"path": "/big.txt", "bytesWritten": 1_200_000, "lines": 1}})
        };
        let m = UIMessage::new("m", Role::Assistant, vec![part("a"), part("b")]);
        let out = enforce_row_size_limit(m.clone());
        assert!(message_bytes(&out) <= ROW_MAX_BYTES);
        assert_eq!(out.parts[0]["input"]["path"], "/big.txt");
        assert!(out.parts[0]["input"]["content"]
            .as_str()
            .unwrap()
            .contains("truncated for storage"));
        assert_eq!(out.metadata.unwrap()["compactedToolInputs"], json!(["a", "b"]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asst(parts: Vec<Value>) -> UIMessage {
        UIMessage::new("m", Role::Assistant, parts)
    }

    #[test]
    fn strips_openai_item_id_keeping_other_fields() {
        let m = asst(vec![
            json!({"type": "text", "text": "Hello!", "providerMetadata": {"openai": {"itemId": "item_abc", "someOtherField": "keep-me"}}}),
        ]);
        let s = sanitize_message(m.clone());
        assert_eq!(
            s.parts[0]["providerMetadata"],
            json!({"openai": {"someOtherField": "keep-me"}})
        );
    }

    #[test]
    fn drops_openai_key_and_metadata_when_nothing_is_left() {
        let m = asst(vec![
            json!({"type": "text", "text": "T", "providerMetadata": {"openai": {"itemId": "i", "reasoningEncryptedContent": "enc"}}}),
            json!({"type": "text", "text": "U", "providerMetadata": {"openai": {"itemId": "i"}, "anthropic": {"x": 1}}}),
        ]);
        let s = sanitize_message(m.clone());
        assert_eq!(s.parts[0], json!({"type": "text", "text": "T"}));
        assert_eq!(s.parts[1]["providerMetadata"], json!({"anthropic": {"x": 1}}));
    }

    #[test]
    fn strips_call_provider_metadata_of_tool_parts() {
        let m = asst(vec![
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-available", "callProviderMetadata": {"openai": {"itemId": "fc_1"}}}),
        ]);
        let s = sanitize_message(m.clone());
        assert!(s.parts[0].get("callProviderMetadata").is_none());
    }

    #[test]
    fn filters_empty_reasoning_but_keeps_redacted_thinking() {
        let m = asst(vec![
            json!({"type": "reasoning", "text": "", "state": "done", "providerMetadata": {"anthropic": {"redactedData": "b64"}}}),
            json!({"type": "reasoning", "text": "", "state": "done"}),
            json!({"type": "reasoning", "text": "  ", "state": "done"}),
            json!({"type": "text", "text": "Here is my answer"}),
            json!({"type": "reasoning", "text": "", "providerMetadata": {"openai": {"itemId": "r", "reasoningEncryptedContent": "e"}}}),
            json!({"type": "reasoning", "text": "Visible thinking", "state": "done"}),
        ]);
        let s = sanitize_message(m.clone());
        assert_eq!(s.parts.len(), 3);
        assert_eq!(s.parts[0]["providerMetadata"]["anthropic"]["redactedData"], "b64");
        assert_eq!(s.parts[1]["type"], "text");
        assert_eq!(s.parts[2]["text"], "Visible thinking");
    }

    #[test]
    fn small_messages_pass_unchanged() {
        let out = "A".repeat(50_000);
        let m = asst(vec![
            json!({"type": "tool-bigTool", "toolCallId": "call_ok", "state": "output-available", "input": {}, "output": out}),
        ]);
        assert_eq!(enforce_row_size_limit(m.clone()), m);
    }

    #[test]
    fn oversized_tool_output_is_compacted_and_recorded() {
        let m = asst(vec![
            json!({"type": "tool-hugeTool", "toolCallId": "call_huge", "state": "output-available", "input": {"q": "big"}, "output": "X".repeat(1_900_000)}),
        ]);
        let r = enforce_row_size_limit(m.clone());
        let out = r.parts[0]["output"].as_str().unwrap();
        assert!(out.contains("[truncated 1900000 chars]"));
        assert_eq!(utf16_len(out), 1000);
        assert_eq!(r.metadata, Some(json!({"compactedToolOutputs": ["call_huge"]})));
        assert!(message_bytes(&r) <= ROW_MAX_BYTES);
        assert_eq!(r.parts[0]["input"], json!({"q": "big"}));
    }

    #[test]
    fn multibyte_output_is_measured_in_bytes() {
        // 700,000 CJK chars are 700,000 UTF-16 units but 2,100,000 UTF-8 bytes.
        let m = asst(vec![
            json!({"type": "tool-cjk", "toolCallId": "c", "state": "output-available", "input": {}, "output": "\u{4e00}".repeat(700_000)}),
        ]);
        let r = enforce_row_size_limit(m.clone());
        assert!(r.parts[0]["output"].as_str().unwrap().contains("[truncated"));
        assert!(message_bytes(&r) <= ROW_MAX_BYTES);
    }

    #[test]
    fn existing_metadata_is_kept_when_compacting() {
        let mut m = asst(vec![
            json!({"type": "tool-t", "toolCallId": "c", "state": "output-available", "output": {"blob": "Y".repeat(1_900_000)}}),
        ]);
        m.metadata = Some(json!({"model": "x"}));
        let r = enforce_row_size_limit(m.clone());
        assert_eq!(r.metadata, Some(json!({"model": "x", "compactedToolOutputs": ["c"]})));
        assert!(json_len(&r.parts[0]["output"]) <= 1000);
    }

    #[test]
    fn large_user_text_is_truncated() {
        let m = UIMessage::new(
            "u",
            Role::User,
            vec![json!({"type": "text", "text": "Z".repeat(1_900_000)})],
        );
        let r = enforce_row_size_limit(m.clone());
        let t = r.parts[0]["text"].as_str().unwrap();
        assert!(t.starts_with("[Text truncated for storage (1900000 chars). First 500 chars: ZZZ"));
        assert!(t.ends_with("...]"));
        assert_eq!(r.metadata, Some(json!({"compactedTextParts": [0]})));
    }

    #[test]
    fn text_truncation_follows_tool_compaction_and_stops_when_it_fits() {
        let big = "w".repeat(1_000_000);
        let m = asst(vec![
            json!({"type": "text", "text": "short"}),
            json!({"type": "text", "text": big.clone()}),
            json!({"type": "tool-t", "toolCallId": "c1", "state": "output-available", "output": "o".repeat(5000)}),
            json!({"type": "text", "text": big.clone()}),
            json!({"type": "text", "text": big}),
        ]);
        let r = enforce_row_size_limit(m.clone());
        assert_eq!(
            r.metadata,
            Some(json!({"compactedToolOutputs": ["c1"], "compactedTextParts": [1, 3]}))
        );
        assert_eq!(utf16_len(r.parts[4]["text"].as_str().unwrap()), 1_000_000);
        assert!(message_bytes(&r) <= ROW_MAX_BYTES);
    }

    #[test]
    fn only_output_available_parts_are_compacted() {
        let m = asst(vec![
            json!({"type": "tool-t", "toolCallId": "c1", "state": "output-error", "output": "e".repeat(1_900_000)}),
        ]);
        let r = enforce_row_size_limit(m.clone());
        assert_eq!(r.parts[0], m.parts[0]);
        assert_eq!(r.metadata, None);
    }

    #[test]
    fn truncate_tool_output_shapes() {
        let small = truncate_tool_output(&json!({"a": 1}), 1000);
        assert!(!small.truncated);
        assert_eq!(small.output, json!({"a": 1}));

        let s = truncate_tool_output(&json!("x".repeat(2000)), 100);
        assert!(s.truncated);
        assert_eq!(s.original_length, 2000);
        let text = s.output.as_str().unwrap();
        assert_eq!(utf16_len(text), 100);
        assert!(text.ends_with("... [truncated 2000 chars]"));

        let tiny = truncate_tool_output(&json!("x".repeat(50)), 10);
        assert_eq!(tiny.output, json!("... [trunc"));

        // Strings are cut to the per-item budget, trailing items dropped, and a note added.
        let arr: Vec<Value> = (0..500).map(|_| json!("y".repeat(150))).collect();
        let a = truncate_tool_output(&Value::Array(arr), 1000);
        let items = a.output.as_array().unwrap();
        assert!(json_len(&a.output) <= 1000);
        assert_eq!(items.len(), 10);
        assert_eq!(
            items.last().unwrap(),
            &json!("Array output truncated ... [truncated 76501 chars]")
        );
        assert_eq!(utf16_len(items[0].as_str().unwrap()), 100);
        // When the note no longer fits, the whole array becomes a structured marker.
        let arr: Vec<Value> = (0..500).map(|i| json!({"i": i, "s": "y".repeat(50)})).collect();
        let a = truncate_tool_output(&Value::Array(arr), 1000);
        assert_eq!(a.output[0]["__truncated"], true);
        assert_eq!(a.output[0]["__truncatedChars"], a.original_length);
        assert_eq!(a.output.as_array().unwrap().len(), 1);

        let obj = json!({"content": "c".repeat(5000), "path": "/a/b", "n": 3});
        let o = truncate_tool_output(&obj, 1000);
        assert!(json_len(&o.output) <= 1000);
        assert_eq!(o.output["path"], "/a/b");
        assert_eq!(o.output["n"], 3);
        assert!(o.output["content"].as_str().unwrap().ends_with("... [truncated 5000 chars]"));
    }

    #[test]
    fn deep_nesting_and_markers() {
        let mut v = json!("leaf".repeat(100));
        for _ in 0..12 {
            v = json!({"k": v});
        }
        let t = truncate_tool_output(&v, 200);
        let mut cur = &t.output;
        let mut depth = 0;
        while let Some(next) = cur.get("k") {
            cur = next;
            depth += 1;
        }
        assert_eq!(depth, 8);
        assert!(cur.as_str().unwrap().starts_with("[Nested output omitted ... [truncated"));

        let many: Map<String, Value> = (0..200).map(|i| (format!("key{i}"), json!(i))).collect();
        let m = truncate_tool_output(&Value::Object(many), 300);
        assert_eq!(m.output["__truncated"], true);
        assert!(m.output.get("note").is_some());
        let m2 = truncate_tool_output(
            &Value::Object((0..200).map(|i| (format!("key{i}"), json!(i))).collect()),
            40,
        );
        assert_eq!(m2.output, json!({"__truncated": true, "__truncatedChars": m2.original_length}));
    }
}
