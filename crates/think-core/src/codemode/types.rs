//! TypeScript declarations generated from JSON Schema, for `codemode.describe`: the model
//! reads the types of the methods it is about to call instead of having them all inlined in
//! the tool description.

use serde_json::Value;

use super::connectors::{Connector, MethodSpec};

/// How deep nested schemas are expanded before falling back to `unknown`.
const MAX_DEPTH: usize = 8;

/// The TypeScript type of a JSON Schema.
pub fn schema_to_ts(schema: &Value) -> String {
    to_ts(schema, 0)
}

fn quote_key(k: &str) -> String {
    if super::connectors::is_identifier(k) {
        k.to_owned()
    } else {
        Value::String(k.to_owned()).to_string()
    }
}

fn to_ts(schema: &Value, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return "unknown".into();
    }
    let Some(obj) = schema.as_object() else {
        return if schema == &Value::Bool(false) { "never".into() } else { "unknown".into() };
    };
    if let Some(c) = obj.get("const") {
        return c.to_string();
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        return values.iter().map(Value::to_string).collect::<Vec<_>>().join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = obj.get(key) {
            let parts: Vec<String> = options.iter().map(|o| to_ts(o, depth + 1)).collect();
            return parts.join(" | ");
        }
    }
    if let Some(Value::Array(all)) = obj.get("allOf") {
        let parts: Vec<String> = all.iter().map(|o| to_ts(o, depth + 1)).collect();
        return parts.join(" & ");
    }
    match obj.get("type") {
        Some(Value::Array(types)) => types
            .iter()
            .map(|t| {
                let mut single = obj.clone();
                single.insert("type".into(), t.clone());
                to_ts(&Value::Object(single), depth + 1)
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Some(Value::String(t)) => match t.as_str() {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => match obj.get("items") {
                Some(items) => {
                    let inner = to_ts(items, depth + 1);
                    if inner.contains(' ') {
                        format!("Array<{inner}>")
                    } else {
                        format!("{inner}[]")
                    }
                }
                None => "unknown[]".into(),
            },
            "object" => object_ts(obj, depth),
            _ => "unknown".into(),
        },
        _ if obj.contains_key("properties") => object_ts(obj, depth),
        _ => "unknown".into(),
    }
}

fn object_ts(obj: &serde_json::Map<String, Value>, depth: usize) -> String {
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let indent = "  ".repeat(depth + 1);
    let mut fields = Vec::new();
    if let Some(Value::Object(props)) = obj.get("properties") {
        for (k, v) in props {
            let opt = if required.contains(&k.as_str()) { "" } else { "?" };
            let doc = v
                .get("description")
                .and_then(Value::as_str)
                .map(|d| format!("{indent}/** {} */\n", d.replace("*/", "*\\/")))
                .unwrap_or_default();
            fields.push(format!("{doc}{indent}{}{opt}: {};", quote_key(k), to_ts(v, depth + 1)));
        }
    }
    match obj.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(extra @ Value::Object(_)) => {
            fields.push(format!("{indent}[key: string]: {};", to_ts(extra, depth + 1)))
        }
        _ if fields.is_empty() => return "Record<string, unknown>".into(),
        _ => {}
    }
    if fields.is_empty() {
        return "{}".into();
    }
    format!("{{\n{}\n{}}}", fields.join("\n"), "  ".repeat(depth))
}

/// One method's declaration: `function name(input: …): Promise<…>;` with its description.
pub fn method_declaration(m: &MethodSpec) -> String {
    let output = m.output_schema.as_ref().map_or_else(|| "unknown".to_owned(), schema_to_ts);
    format!(
        "/** {} */\nfunction {}(input: {}): Promise<{}>;",
        m.description.replace("*/", "*\\/").replace('\n', " "),
        m.name,
        schema_to_ts(&m.input_schema),
        output
    )
}

/// A connector's declarations: `declare namespace state { … }`.
pub fn namespace_declaration(c: &dyn Connector) -> String {
    let body: Vec<String> = c
        .methods()
        .iter()
        .map(|m| {
            method_declaration(m).lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
        })
        .collect();
    format!("/** {} */\ndeclare namespace {} {{\n{}\n}}", c.hint(), c.name(), body.join("\n"))
}
