//! What a browser result may cost the model's context: quick-action results are bounded by
//! `maxChars` (strings cut with a note, arrays trimmed, anything else previewed), and
//! `browser_execute` results lose their pixels (screenshots become a short description) and
//! any other long base64 string.

use base64::Engine;
use serde_json::{json, Value};

/// Base64 strings longer than this are replaced by a note.
pub const MAX_BASE64_CHARS: usize = 4_096;

/// `value` bounded to about `max_chars` characters of JSON, as Think's `boundResult`.
pub fn bound_result(value: Value, max_chars: usize) -> Value {
    match value {
        Value::String(s) => {
            let total = s.chars().count();
            if total <= max_chars {
                return Value::String(s);
            }
            let head: String = s.chars().take(max_chars).collect();
            Value::String(format!("{head}\n\n[truncated {} characters]", total - max_chars))
        }
        Value::Array(mut items) => {
            let len = |items: &[Value]| Value::Array(items.to_vec()).to_string().chars().count();
            if len(&items) <= max_chars {
                return Value::Array(items);
            }
            // Drop from the end, halving the step, so a long list costs few re-measures.
            let mut keep = items.len();
            let mut step = keep.div_ceil(2);
            while step > 0 {
                while keep > 0 && len(&items[..keep]) > max_chars {
                    keep = keep.saturating_sub(step);
                }
                while keep < items.len() && len(&items[..keep + 1]) <= max_chars {
                    keep += 1;
                }
                step /= 2;
            }
            items.truncate(keep);
            Value::Array(items)
        }
        other => {
            let text = other.to_string();
            let total = text.chars().count();
            if total <= max_chars {
                return other;
            }
            json!({
                "truncated": true,
                "note": format!("The result is {total} characters of JSON, over the {max_chars} allowed (maxChars); this is its beginning."),
                "preview": text.chars().take(max_chars).collect::<String>(),
            })
        }
    }
}

/// A screenshot taken out of a result: an image part for the model.
pub type Screenshot = crate::model::ImagePart;

fn looks_base64(s: &str) -> bool {
    s.len() > MAX_BASE64_CHARS
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r'))
}

/// The width and height a PNG's header states.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" {
        return None;
    }
    let w = u32::from_be_bytes(bytes[16..20].try_into().ok()?);
    let h = u32::from_be_bytes(bytes[20..24].try_into().ok()?);
    Some((w, h))
}

/// Replaces every `{type:"browser_screenshot", mediaType, data}` in `value` with a
/// description of the image (and returns the images), and every other base64 string over
/// [`MAX_BASE64_CHARS`] with a note.
pub fn strip_media(value: &mut Value, shots: &mut Vec<Screenshot>) {
    match value {
        Value::Object(map) => {
            let is_shot = map.get("type").and_then(Value::as_str) == Some("browser_screenshot");
            if is_shot {
                if let Some(data) = map.get("data").and_then(Value::as_str).map(str::to_owned) {
                    let media_type = map
                        .get("mediaType")
                        .and_then(Value::as_str)
                        .unwrap_or("image/png")
                        .to_owned();
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(data.trim())
                        .unwrap_or_default();
                    map.remove("data");
                    map.insert("bytes".into(), json!(bytes.len()));
                    if let Some((w, h)) = png_size(&bytes) {
                        map.insert("width".into(), json!(w));
                        map.insert("height".into(), json!(h));
                    }
                    map.insert(
                        "note".into(),
                        json!("A screenshot was taken; its pixels are not kept in the transcript."),
                    );
                    shots.push(Screenshot { media_type, data });
                    return;
                }
            }
            for v in map.values_mut() {
                strip_media(v, shots);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip_media(v, shots)),
        Value::String(s) if looks_base64(s) => {
            *s = format!(
                "[base64 data of {} characters removed; return {{type: \"browser_screenshot\", mediaType, data}} for an image]",
                s.len()
            );
        }
        _ => {}
    }
}
