//! A JSON Schema validator for tool input, written here instead of using the `jsonschema`
//! crate: that crate and what it pulls in (`referencing`, `fluent_uri`, `num_bigint`,
//! `data_encoding`, `jsonschema_regex`, the `regex` crate's full Unicode tables) made up
//! about 200 KB of the gzipped wasm module (`bench/wasm-crates.py`, BENCHMARKS.md
//! "Sizes"), for the few keywords tool schemas use. This one covers the validation
//! keywords of drafts 4 to 2020-12 (`format` is not checked, as before), resolves `$ref`
//! within the schema's own document, and words each problem as `jsonschema` 0.61 did, since
//! the model reads those messages to correct its call.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::regexp::{Flags, RegExp, RegExpError};

/// How deep schemas may nest while one value is checked (`$ref` cycles that never descend
/// into the value end here instead of overflowing the stack).
const MAX_DEPTH: usize = 128;
/// How many enum options a message lists before it summarises the rest.
const MAX_DISPLAYED_ENUM_VARIANTS: usize = 3;

/// A `pattern` or `patternProperties` key, compiled once as ECMA-262 says (`u` mode, where
/// `\p{…}` is a class); a pattern only valid without `u` is taken as JS would without it.
/// `None` for a valid pattern that can backtrack exponentially (`crate::regexp::guard`): it is
/// not run, and every text counts as matching it, as when the host engine gives up, so the
/// schema and its tool stay usable and a costly pattern never rejects valid input.
struct Pattern(Option<RegExp>);

impl Pattern {
    fn compile(source: &str) -> Result<Pattern, String> {
        let unicode = Flags { unicode: true, ..Flags::default() };
        match RegExp::new(source, unicode).or_else(|_| RegExp::new(source, Flags::default())) {
            Ok(re) => Ok(Pattern(Some(re))),
            Err(RegExpError::Catastrophic(_)) => Ok(Pattern(None)),
            Err(_) => Err(format!("{} is not a valid regular expression", Value::from(source))),
        }
    }

    /// Whether `text` matches; a pattern that gives up or is not run counts as a match.
    fn is_match(&self, text: &str) -> bool {
        self.0.as_ref().is_none_or(|re| re.is_match(text).unwrap_or(true))
    }
}

/// A checked schema: the document and its compiled patterns.
pub(super) struct Compiled {
    root: Value,
    patterns: HashMap<String, Pattern>,
    /// Drafts before 2019-09 ignore the keywords beside a `$ref`.
    ref_overrides: bool,
}

/// A problem found at an instance location.
pub(super) struct Problem {
    /// JSON Pointer of the value, empty at the root.
    pub path: String,
    /// What is wrong, in `jsonschema`'s words.
    pub message: String,
}

/// The JSON type names, in the order `jsonschema` lists them.
const TYPES: [&str; 7] = ["null", "boolean", "integer", "number", "string", "array", "object"];

/// Checks that `schema` is usable (keyword values of the right kind, patterns that compile,
/// references that resolve) and compiles it; the error says what is wrong and where.
pub(super) fn compile(schema: &Value) -> Result<Compiled, String> {
    let draft = schema.get("$schema").and_then(Value::as_str).unwrap_or("");
    let old = ["draft-03", "draft-04", "draft-06", "draft-07"];
    let mut c = Compiled {
        root: schema.clone(),
        patterns: HashMap::new(),
        ref_overrides: old.iter().any(|d| draft.contains(d)),
    };
    let mut patterns = HashMap::new();
    check_schema(schema, schema, "", &mut patterns)?;
    c.patterns = patterns;
    Ok(c)
}

/// Checks one (sub)schema at `at` (a JSON Pointer into the schema, for the message).
fn check_schema(
    root: &Value,
    s: &Value,
    at: &str,
    patterns: &mut HashMap<String, Pattern>,
) -> Result<(), String> {
    let map = match s {
        Value::Bool(_) => return Ok(()),
        Value::Object(m) => m,
        other => return Err(format!("{other} is not of types \"boolean\", \"object\" at {at}")),
    };
    let fail = |k: &str, what: &str| Err(format!("\"{k}\" must be {what} at {at}/{k}"));
    for (k, v) in map {
        let sub = |p: &mut HashMap<String, Pattern>, v: &Value, tail: &str| {
            check_schema(root, v, &format!("{at}/{k}{tail}"), p)
        };
        match k.as_str() {
            "type" => {
                let ok = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
                let fine = match v {
                    Value::Array(ts) => ts.iter().all(ok),
                    t => ok(t),
                };
                if !fine {
                    return fail(k, "a JSON type name or a list of them");
                }
            }
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                let Some(m) = v.as_object() else { return fail(k, "an object") };
                for (name, v) in m {
                    if k == "patternProperties" {
                        add_pattern(patterns, name).map_err(|e| format!("{e} at {at}/{k}"))?;
                    }
                    sub(patterns, v, &format!("/{}", escape(name)))?;
                }
            }
            "additionalProperties"
            | "additionalItems"
            | "contains"
            | "propertyNames"
            | "not"
            | "if"
            | "then"
            | "else"
            | "unevaluatedProperties"
            | "unevaluatedItems" => sub(patterns, v, "")?,
            "items" => match v {
                Value::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        sub(patterns, v, &format!("/{i}"))?;
                    }
                }
                v => sub(patterns, v, "")?,
            },
            "prefixItems" | "allOf" | "anyOf" | "oneOf" => {
                let Some(items) = v.as_array().filter(|a| !a.is_empty()) else {
                    return fail(k, "a non-empty list of schemas");
                };
                for (i, v) in items.iter().enumerate() {
                    sub(patterns, v, &format!("/{i}"))?;
                }
            }
            "required" if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => {
                return fail(k, "a list of property names");
            }
            "enum" if !v.is_array() => return fail(k, "a list"),
            "dependentRequired" => {
                let lists = v.as_object().is_some_and(|m| {
                    m.values().all(|l| l.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
                });
                if !lists {
                    return fail(k, "an object of property name lists");
                }
            }
            "dependencies" => {
                let Some(m) = v.as_object() else { return fail(k, "an object") };
                for (name, d) in m {
                    match d {
                        Value::Array(a) if a.iter().all(Value::is_string) => {}
                        Value::Array(_) => return fail(k, "an object of lists or schemas"),
                        d => sub(patterns, d, &format!("/{}", escape(name)))?,
                    }
                }
            }
            "pattern" => {
                let Some(p) = v.as_str() else { return fail(k, "a string") };
                add_pattern(patterns, p).map_err(|e| format!("{e} at {at}/{k}"))?;
            }
            "multipleOf" if !v.as_f64().is_some_and(|m| m > 0.0) => {
                return fail(k, "a number above 0")
            }
            "maximum" | "minimum" if !v.is_number() => return fail(k, "a number"),
            "exclusiveMaximum" | "exclusiveMinimum" if !v.is_number() && !v.is_boolean() => {
                return fail(k, "a number")
            }
            "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties"
            | "minProperties" | "minContains" | "maxContains"
                if !v.as_f64().is_some_and(|n| n >= 0.0 && n.fract() == 0.0) =>
            {
                return fail(k, "a non-negative integer")
            }
            "uniqueItems" if !v.is_boolean() => return fail(k, "a boolean"),
            "$ref" => {
                let Some(r) = v.as_str() else { return fail(k, "a string") };
                if resolve(root, r).is_none() {
                    return Err(format!("Unresolvable reference {} at {at}/$ref", Value::from(r)));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn add_pattern(patterns: &mut HashMap<String, Pattern>, source: &str) -> Result<(), String> {
    if !patterns.contains_key(source) {
        patterns.insert(source.to_owned(), Pattern::compile(source)?);
    }
    Ok(())
}

/// The subschema a same-document `$ref` (`#`, `#/json/pointer`) names.
fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let pointer = r.strip_prefix('#')?;
    let decoded = percent_decode(pointer)?;
    root.pointer(&decoded)
}

/// `%XX` escapes in a URI fragment, decoded.
fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A property name as a JSON Pointer segment.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Where problems go: at most `limit`, so a check that only needs a yes or no stops early.
struct Sink {
    limit: usize,
    problems: Vec<Problem>,
}

impl Sink {
    fn full(&self) -> bool {
        self.problems.len() >= self.limit
    }

    fn push(&mut self, path: &str, message: String) {
        if !self.full() {
            self.problems.push(Problem { path: path.to_owned(), message });
        }
    }
}

impl Compiled {
    /// Up to `limit` problems of `input`, in schema keyword order.
    pub(super) fn problems(&self, input: &Value, limit: usize) -> Vec<Problem> {
        let mut sink = Sink { limit, problems: Vec::new() };
        self.check(&self.root, input, "", 0, &mut sink);
        sink.problems
    }

    fn valid(&self, s: &Value, v: &Value, depth: usize) -> bool {
        let mut sink = Sink { limit: 1, problems: Vec::new() };
        self.check(s, v, "", depth, &mut sink);
        sink.problems.is_empty()
    }

    /// Checks `v` (at `path`) against schema `s`; returns the properties and the array
    /// items (as a count of leading ones, or all) that `s` evaluated, for
    /// `unevaluatedProperties` / `unevaluatedItems`.
    fn check(&self, s: &Value, v: &Value, path: &str, depth: usize, out: &mut Sink) -> Seen {
        let mut seen = Seen::default();
        let map = match s {
            Value::Bool(true) => return Seen::all(),
            Value::Bool(false) => {
                out.push(path, format!("False schema does not allow {v}"));
                return seen;
            }
            Value::Object(m) => m,
            _ => return seen,
        };
        if depth > MAX_DEPTH {
            out.push(path, "the schema nests too deeply (a $ref cycle?)".to_owned());
            return seen;
        }
        let deeper = depth + 1;
        if let (true, Some(r)) = (self.ref_overrides, map.get("$ref").and_then(Value::as_str)) {
            if let Some(target) = resolve(&self.root, r) {
                return self.check(target, v, path, deeper, out);
            }
        }
        for (k, kv) in map {
            if out.full() {
                break;
            }
            match k.as_str() {
                "type" => {
                    let ok = match kv {
                        Value::Array(ts) => ts.iter().any(|t| is_type(v, t)),
                        t => is_type(v, t),
                    };
                    if !ok {
                        out.push(path, type_message(v, kv));
                    }
                }
                "enum" => {
                    let options = kv.as_array().map(Vec::as_slice).unwrap_or_default();
                    if !options.iter().any(|o| equal(o, v)) {
                        out.push(path, enum_message(v, options));
                    }
                }
                "const" if !equal(kv, v) => out.push(path, format!("{kv} was expected")),
                "$ref" => {
                    if let Some(target) = kv.as_str().and_then(|r| resolve(&self.root, r)) {
                        seen.merge(self.check(target, v, path, deeper, out));
                    }
                }
                "allOf" => {
                    for sub in kv.as_array().into_iter().flatten() {
                        seen.merge(self.check(sub, v, path, deeper, out));
                    }
                }
                "anyOf" => {
                    let mut any = false;
                    for sub in kv.as_array().into_iter().flatten() {
                        if self.valid(sub, v, deeper) {
                            any = true;
                            seen.merge(self.seen(sub, v, deeper));
                        }
                    }
                    if !any {
                        out.push(path, format!("{v} is not valid under any of the schemas listed in the 'anyOf' keyword"));
                    }
                }
                "oneOf" => {
                    let subs = kv.as_array().map(Vec::as_slice).unwrap_or_default();
                    let valid: Vec<&Value> =
                        subs.iter().filter(|sub| self.valid(sub, v, deeper)).collect();
                    match valid.as_slice() {
                        [] => out.push(path, format!("{v} is not valid under any of the schemas listed in the 'oneOf' keyword")),
                        [one] => seen.merge(self.seen(one, v, deeper)),
                        _ => out.push(path, format!("{v} is valid under more than one of the schemas listed in the 'oneOf' keyword")),
                    }
                }
                "not" if self.valid(kv, v, deeper) => {
                    out.push(path, format!("{kv} is not allowed for {v}"))
                }
                "if" => {
                    let branch = if self.valid(kv, v, deeper) {
                        seen.merge(self.seen(kv, v, deeper));
                        "then"
                    } else {
                        "else"
                    };
                    if let Some(sub) = map.get(branch) {
                        seen.merge(self.check(sub, v, path, deeper, out));
                    }
                }
                _ => match v {
                    Value::Number(_) => self.number(k, kv, map, v, path, out),
                    Value::String(text) => self.string(k, kv, text, v, path, out),
                    Value::Array(items) => {
                        self.array(k, kv, map, items, v, path, deeper, out, &mut seen)
                    }
                    Value::Object(obj) => {
                        self.object(k, kv, map, obj, v, path, deeper, out, &mut seen)
                    }
                    _ => {}
                },
            }
        }
        seen
    }

    /// What a schema that `v` is known to pass evaluated.
    fn seen(&self, s: &Value, v: &Value, depth: usize) -> Seen {
        let mut sink = Sink { limit: 1, problems: Vec::new() };
        self.check(s, v, "", depth, &mut sink)
    }

    fn number(
        &self,
        k: &str,
        kv: &Value,
        map: &Map<String, Value>,
        v: &Value,
        path: &str,
        out: &mut Sink,
    ) {
        let (Some(x), Some(limit)) = (v.as_f64(), kv.as_f64()) else {
            return;
        };
        // Draft 4 spells an exclusive bound as a boolean beside `maximum` / `minimum`.
        let exclusive = |flag: &str| map.get(flag) == Some(&Value::Bool(true));
        let message = match k {
            "maximum" if exclusive("exclusiveMaximum") && x >= limit => {
                format!("{v} is greater than or equal to the maximum of {kv}")
            }
            "maximum" if x > limit => format!("{v} is greater than the maximum of {kv}"),
            "minimum" if exclusive("exclusiveMinimum") && x <= limit => {
                format!("{v} is less than or equal to the minimum of {kv}")
            }
            "minimum" if x < limit => format!("{v} is less than the minimum of {kv}"),
            "exclusiveMaximum" if kv.is_number() && x >= limit => {
                format!("{v} is greater than or equal to the maximum of {kv}")
            }
            "exclusiveMinimum" if kv.is_number() && x <= limit => {
                format!("{v} is less than or equal to the minimum of {kv}")
            }
            "multipleOf" if !is_multiple(v, kv, x, limit) => {
                format!("{v} is not a multiple of {limit}")
            }
            _ => return,
        };
        out.push(path, message);
    }

    fn string(&self, k: &str, kv: &Value, text: &str, v: &Value, path: &str, out: &mut Sink) {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        match (k, kv.as_u64()) {
            ("maxLength", Some(n)) if text.chars().count() as u64 > n => {
                out.push(path, format!("{v} is longer than {n} character{}", plural(n)))
            }
            ("minLength", Some(n)) if (text.chars().count() as u64) < n => {
                out.push(path, format!("{v} is shorter than {n} character{}", plural(n)))
            }
            ("pattern", _) => {
                let source = kv.as_str().unwrap_or_default();
                if self.patterns.get(source).is_some_and(|p| !p.is_match(text)) {
                    out.push(path, format!("{v} does not match \"{source}\""));
                }
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn array(
        &self,
        k: &str,
        kv: &Value,
        map: &Map<String, Value>,
        items: &[Value],
        v: &Value,
        path: &str,
        depth: usize,
        out: &mut Sink,
        seen: &mut Seen,
    ) {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        let at = |i: usize| format!("{path}/{i}");
        match k {
            "maxItems" | "minItems" => {
                let n = kv.as_u64().unwrap_or(0);
                let len = items.len() as u64;
                if k == "maxItems" && len > n {
                    out.push(path, format!("{v} has more than {n} item{}", plural(n)));
                } else if k == "minItems" && len < n {
                    out.push(path, format!("{v} has less than {n} item{}", plural(n)));
                }
            }
            "uniqueItems" if kv == &Value::Bool(true) => {
                let dup = (0..items.len())
                    .any(|i| items[i + 1..].iter().any(|other| equal(&items[i], other)));
                if dup {
                    out.push(path, format!("{v} has non-unique elements"));
                }
            }
            "prefixItems" => {
                let subs = kv.as_array().map(Vec::as_slice).unwrap_or_default();
                for (i, (sub, item)) in subs.iter().zip(items).enumerate() {
                    self.check(sub, item, &at(i), depth, out);
                }
                seen.items = seen.items.max(subs.len().min(items.len()));
            }
            "items" => {
                if let Value::Array(subs) = kv {
                    for (i, (sub, item)) in subs.iter().zip(items).enumerate() {
                        self.check(sub, item, &at(i), depth, out);
                    }
                    seen.items = seen.items.max(subs.len().min(items.len()));
                    return;
                }
                let skip = map.get("prefixItems").and_then(Value::as_array).map_or(0, Vec::len);
                for (i, item) in items.iter().enumerate().skip(skip) {
                    self.check(kv, item, &at(i), depth, out);
                }
                seen.items = usize::MAX;
            }
            "additionalItems" => {
                let Some(Value::Array(subs)) = map.get("items") else { return };
                if kv == &Value::Bool(false) && items.len() > subs.len() {
                    let extra: Vec<String> =
                        items[subs.len()..].iter().map(Value::to_string).collect();
                    let verb = if extra.len() == 1 { "was" } else { "were" };
                    out.push(
                        path,
                        format!(
                            "Additional items are not allowed ({} {verb} unexpected)",
                            extra.join(", ")
                        ),
                    );
                } else {
                    for (i, item) in items.iter().enumerate().skip(subs.len()) {
                        self.check(kv, item, &at(i), depth, out);
                    }
                }
                seen.items = usize::MAX;
            }
            "contains" => {
                let matching = items.iter().filter(|item| self.valid(kv, item, depth)).count();
                let min = map.get("minContains").and_then(Value::as_u64).unwrap_or(1) as usize;
                let max = map.get("maxContains").and_then(Value::as_u64);
                if matching == 0 && min > 0 {
                    out.push(path, format!("None of {v} are valid under the given schema"));
                } else if matching < min {
                    out.push(
                        path,
                        format!("{v} has less than {min} items valid under the given schema"),
                    );
                } else if max.is_some_and(|m| matching as u64 > m) {
                    out.push(
                        path,
                        format!(
                            "{v} has more than {} items valid under the given schema",
                            max.unwrap_or(0)
                        ),
                    );
                }
            }
            "unevaluatedItems" => {
                let done = self.evaluated(map, v, depth).items;
                for (i, item) in items.iter().enumerate().skip(done) {
                    if kv == &Value::Bool(false) {
                        let extra: Vec<String> = items[i..].iter().map(Value::to_string).collect();
                        let verb = if extra.len() == 1 { "was" } else { "were" };
                        out.push(
                            path,
                            format!(
                                "Unevaluated items are not allowed ({} {verb} unexpected)",
                                extra.join(", ")
                            ),
                        );
                        break;
                    }
                    self.check(kv, item, &at(i), depth, out);
                }
                seen.items = usize::MAX;
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn object(
        &self,
        k: &str,
        kv: &Value,
        map: &Map<String, Value>,
        obj: &Map<String, Value>,
        v: &Value,
        path: &str,
        depth: usize,
        out: &mut Sink,
        seen: &mut Seen,
    ) {
        let plural = |n: u64| if n == 1 { "y" } else { "ies" };
        let at = |name: &str| format!("{path}/{}", escape(name));
        match k {
            "required" => {
                for name in kv.as_array().into_iter().flatten() {
                    if name.as_str().is_some_and(|n| !obj.contains_key(n)) {
                        out.push(path, format!("{name} is a required property"));
                    }
                }
            }
            "maxProperties" | "minProperties" => {
                let n = kv.as_u64().unwrap_or(0);
                let len = obj.len() as u64;
                if k == "maxProperties" && len > n {
                    out.push(path, format!("{v} has more than {n} propert{}", plural(n)));
                } else if k == "minProperties" && len < n {
                    out.push(path, format!("{v} has less than {n} propert{}", plural(n)));
                }
            }
            "properties" => {
                for (name, sub) in kv.as_object().into_iter().flatten() {
                    if let Some(value) = obj.get(name) {
                        self.check(sub, value, &at(name), depth, out);
                        seen.properties.push(name.clone());
                    }
                }
            }
            "patternProperties" => {
                for (source, sub) in kv.as_object().into_iter().flatten() {
                    let Some(p) = self.patterns.get(source) else { continue };
                    for (name, value) in obj.iter().filter(|(name, _)| p.is_match(name)) {
                        self.check(sub, value, &at(name), depth, out);
                        seen.properties.push(name.clone());
                    }
                }
            }
            "additionalProperties" => {
                let declared = map.get("properties").and_then(Value::as_object);
                let patterns: Vec<&Pattern> = map
                    .get("patternProperties")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .filter_map(|(source, _)| self.patterns.get(source))
                    .collect();
                let extra: Vec<&String> = obj
                    .keys()
                    .filter(|name| !declared.is_some_and(|d| d.contains_key(*name)))
                    .filter(|name| !patterns.iter().any(|p| p.is_match(name)))
                    .collect();
                self.extra_properties("Additional properties", kv, obj, &extra, path, depth, out);
                seen.all_properties = true;
            }
            "unevaluatedProperties" => {
                let done = self.evaluated(map, v, depth);
                let extra: Vec<&String> = obj
                    .keys()
                    .filter(|name| !done.all_properties && !done.properties.contains(name))
                    .collect();
                self.extra_properties("Unevaluated properties", kv, obj, &extra, path, depth, out);
                seen.all_properties = true;
            }
            "propertyNames" => {
                for name in obj.keys() {
                    let mut sink = Sink { limit: 1, problems: Vec::new() };
                    self.check(kv, &Value::from(name.as_str()), "", depth, &mut sink);
                    if let Some(p) = sink.problems.pop() {
                        out.push(path, p.message);
                    }
                }
            }
            "dependentRequired" | "dependencies" | "dependentSchemas" => {
                for (name, dep) in kv.as_object().into_iter().flatten() {
                    if !obj.contains_key(name) {
                        continue;
                    }
                    match dep {
                        Value::Array(needed) => {
                            for n in needed {
                                if n.as_str().is_some_and(|n| !obj.contains_key(n)) {
                                    out.push(path, format!("{n} is a required property"));
                                }
                            }
                        }
                        sub => seen.merge(self.check(sub, v, path, depth, out)),
                    }
                }
            }
            _ => {}
        }
    }

    /// `additionalProperties` / `unevaluatedProperties` (`what`) with schema `kv` over the
    /// properties `extra`: refused all at once by `false`, else each checked against `kv`.
    #[allow(clippy::too_many_arguments)]
    fn extra_properties(
        &self,
        what: &str,
        kv: &Value,
        obj: &Map<String, Value>,
        extra: &[&String],
        path: &str,
        depth: usize,
        out: &mut Sink,
    ) {
        if kv == &Value::Bool(false) {
            if !extra.is_empty() {
                out.push(path, unexpected(what, extra));
            }
            return;
        }
        for name in extra {
            self.check(kv, &obj[name.as_str()], &format!("{path}/{}", escape(name)), depth, out);
        }
    }

    /// What the keywords of `map` other than the `unevaluated*` ones evaluate of `v`.
    fn evaluated(&self, map: &Map<String, Value>, v: &Value, depth: usize) -> Seen {
        let mut rest = map.clone();
        rest.remove("unevaluatedProperties");
        rest.remove("unevaluatedItems");
        self.seen(&Value::Object(rest), v, depth)
    }
}

/// What a schema evaluated of an object or array (JSON Schema's annotations, reduced to
/// what `unevaluatedProperties` / `unevaluatedItems` need).
#[derive(Default)]
struct Seen {
    properties: Vec<String>,
    all_properties: bool,
    items: usize,
}

impl Seen {
    fn all() -> Seen {
        Seen { properties: Vec::new(), all_properties: true, items: usize::MAX }
    }

    fn merge(&mut self, other: Seen) {
        self.properties.extend(other.properties);
        self.all_properties |= other.all_properties;
        self.items = self.items.max(other.items);
    }
}

fn is_type(v: &Value, t: &Value) -> bool {
    match (t.as_str().unwrap_or_default(), v) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn type_message(v: &Value, t: &Value) -> String {
    let Value::Array(ts) = t else { return format!("{v} is not of type {t}") };
    let mut names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
    crate::platform::sort::sort_by_key(&mut names, |n| TYPES.iter().position(|t| t == n));
    names.dedup();
    if let [one] = names.as_slice() {
        return format!("{v} is not of type \"{one}\"");
    }
    let mut s = format!("{v} is not of types ");
    for (i, n) in names.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(s, "{sep}\"{n}\"");
    }
    s
}

fn enum_message(v: &Value, options: &[Value]) -> String {
    let mut s = format!("{v} is not one of ");
    let total = options.len();
    if total <= MAX_DISPLAYED_ENUM_VARIANTS {
        for (i, o) in options.iter().enumerate() {
            let sep = match i {
                0 => "",
                i if i == total - 1 => " or ",
                _ => ", ",
            };
            let _ = write!(s, "{sep}{o}");
        }
    } else {
        let shown = MAX_DISPLAYED_ENUM_VARIANTS - 1;
        for (i, o) in options.iter().take(shown).enumerate() {
            let _ = write!(s, "{}{o}", if i == 0 { "" } else { ", " });
        }
        let _ = write!(s, " or {} other candidates", total - shown);
    }
    s
}

/// `<what> are not allowed ('a', 'b' were unexpected)`.
fn unexpected(what: &str, names: &[&String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    let verb = if names.len() == 1 { "was" } else { "were" };
    format!("{what} are not allowed ({} {verb} unexpected)", quoted.join(", "))
}

/// `x` is a multiple of `m`: exactly for integers, within float rounding otherwise.
fn is_multiple(v: &Value, kv: &Value, x: f64, m: f64) -> bool {
    if let (Some(a), Some(b)) = (v.as_i64(), kv.as_i64()) {
        return b != 0 && a % b == 0;
    }
    let q = x / m;
    q.is_finite() && (q - q.round()).abs() < 1e-9
}

/// JSON equality where numbers compare by value (`1` equals `1.0`), as JSON Schema wants.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| equal(a, b)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The `<path>: <message>` lines for `input`, as the model reads them.
    fn problems(schema: Value, input: Value) -> Vec<String> {
        let c = compile(&schema).unwrap();
        c.problems(&input, 5).into_iter().map(|p| format!("{}: {}", p.path, p.message)).collect()
    }

    #[test]
    fn messages_are_worded_as_jsonschema_words_them() {
        let s = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[A-Z]"},
                "days": {"type": ["integer", "null"], "minimum": 1, "exclusiveMaximum": 8},
                "unit": {"enum": ["c", "f"]},
                "many": {"enum": [1, 2, 3, 4]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 1, "uniqueItems": true},
                "k": {"const": 7},
                "step": {"multipleOf": 2}
            },
            "required": ["city", "when"],
            "additionalProperties": false
        });
        assert_eq!(
            problems(s.clone(), json!({"city": 3, "days": "x", "a": 1, "b": 2})),
            [
                "/city: 3 is not of type \"string\"",
                "/days: \"x\" is not of types \"null\", \"integer\"",
                ": \"when\" is a required property",
                ": Additional properties are not allowed ('a', 'b' were unexpected)",
            ]
        );
        assert_eq!(
            problems(
                s.clone(),
                json!({"city": "abcd", "when": 1, "days": 0, "unit": "k", "many": 9})
            ),
            [
                "/city: \"abcd\" is longer than 3 characters",
                "/city: \"abcd\" does not match \"^[A-Z]\"",
                "/days: 0 is less than the minimum of 1",
                "/unit: \"k\" is not one of \"c\" or \"f\"",
                "/many: 9 is not one of 1, 2 or 2 other candidates",
            ]
        );
        assert_eq!(
            problems(
                s,
                json!({"city": "A", "when": 1, "days": 8, "tags": ["x", "x", 3], "k": 8, "step": 3, "c": 0})
            ),
            [
                "/city: \"A\" is shorter than 2 characters",
                "/days: 8 is greater than or equal to the maximum of 8",
                "/tags/2: 3 is not of type \"string\"",
                "/tags: [\"x\",\"x\",3] has more than 1 item",
                "/tags: [\"x\",\"x\",3] has non-unique elements",
            ]
        );
        let one = json!({"properties": {"a": {}}, "additionalProperties": false});
        assert_eq!(
            problems(one, json!({"z": 1})),
            [": Additional properties are not allowed ('z' was unexpected)"]
        );
        assert_eq!(problems(json!({"const": 7}), json!(8)), [": 7 was expected"]);
        assert_eq!(problems(json!({"multipleOf": 2}), json!(3)), [": 3 is not a multiple of 2"]);
        assert_eq!(
            problems(json!({"maximum": 2}), json!(3)),
            [": 3 is greater than the maximum of 2"]
        );
        assert_eq!(problems(json!({"minItems": 2}), json!([1])), [": [1] has less than 2 items"]);
        assert_eq!(
            problems(json!({"maxProperties": 1}), json!({"a": 1, "b": 2})),
            [": {\"a\":1,\"b\":2} has more than 1 property"]
        );
        assert_eq!(problems(json!(false), json!(1)), [": False schema does not allow 1"]);
        assert_eq!(
            problems(json!({"not": {"type": "string"}}), json!("x")),
            [": {\"type\":\"string\"} is not allowed for \"x\""]
        );
    }

    #[test]
    fn combinators_and_conditionals() {
        let any = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        assert!(problems(any.clone(), json!(3)).is_empty());
        assert_eq!(
            problems(any, json!(true)),
            [": true is not valid under any of the schemas listed in the 'anyOf' keyword"]
        );
        let one = json!({"oneOf": [{"type": "integer"}, {"minimum": 0}]});
        assert!(problems(one.clone(), json!(-1)).is_empty());
        assert_eq!(
            problems(one.clone(), json!(1)),
            [": 1 is valid under more than one of the schemas listed in the 'oneOf' keyword"]
        );
        assert_eq!(
            problems(one, json!(-0.5)),
            [": -0.5 is not valid under any of the schemas listed in the 'oneOf' keyword"]
        );
        let all = json!({"allOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert_eq!(
            problems(all, json!({})),
            [": \"a\" is a required property", ": \"b\" is a required property"]
        );
        let cond = json!({"if": {"properties": {"kind": {"const": "file"}}}, "then": {"required": ["path"]}, "else": {"required": ["url"]}});
        assert_eq!(
            problems(cond.clone(), json!({"kind": "file"})),
            [": \"path\" is a required property"]
        );
        assert_eq!(problems(cond, json!({"kind": "web"})), [": \"url\" is a required property"]);
        let dep = json!({"dependentRequired": {"a": ["b"]}, "propertyNames": {"maxLength": 2}});
        assert_eq!(
            problems(dep, json!({"a": 1, "long": 2})),
            [": \"b\" is a required property", ": \"long\" is longer than 2 characters"]
        );
    }

    #[test]
    fn references_resolve_within_the_document() {
        // schemars' shape: definitions under `$defs`, referenced by pointer.
        let s = json!({
            "type": "object",
            "properties": {"edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}}},
            "$defs": {"Edit": {"type": "object", "required": ["old"], "properties": {"old": {"type": "string"}}}}
        });
        assert_eq!(
            problems(s, json!({"edits": [{"old": "x"}, {}]})),
            ["/edits/1: \"old\" is a required property"]
        );
        // Draft 7 (zod-to-json-schema): `definitions`, and keywords beside `$ref` ignored.
        let d7 = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"n": {"type": "number"}},
            "properties": {"x": {"$ref": "#/definitions/n", "type": "string"}}
        });
        assert!(problems(d7.clone(), json!({"x": 1})).is_empty());
        assert_eq!(problems(d7, json!({"x": "a"})), ["/x: \"a\" is not of type \"number\""]);
        // A recursive schema checks nested values; a cycle that never descends stops.
        let tree = json!({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}});
        assert_eq!(
            problems(tree, json!({"kids": [{"kids": [3]}]})),
            ["/kids/0/kids/0: 3 is not of type \"object\""]
        );
        let cycle = json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
        assert_eq!(problems(cycle, json!(1)).len(), 1);
        // Names with `/` and `~` are escaped in the instance path.
        let odd = json!({"properties": {"a/b~": {"type": "string"}}});
        assert_eq!(problems(odd, json!({"a/b~": 1})), ["/a~1b~0: 1 is not of type \"string\""]);
    }

    #[test]
    fn unevaluated_properties_see_through_combinators() {
        let s = json!({
            "allOf": [{"properties": {"a": {}}}],
            "properties": {"b": {}},
            "unevaluatedProperties": false
        });
        assert!(problems(s.clone(), json!({"a": 1, "b": 2})).is_empty());
        assert_eq!(
            problems(s, json!({"a": 1, "c": 3})),
            [": Unevaluated properties are not allowed ('c' was unexpected)"]
        );
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(problems(json!({"type": "integer"}), json!(2.0)).is_empty());
        assert_eq!(
            problems(json!({"type": "integer"}), json!(2.5)),
            [": 2.5 is not of type \"integer\""]
        );
        assert!(problems(json!({"enum": [1]}), json!(1.0)).is_empty());
        assert!(problems(json!({"multipleOf": 0.1}), json!(0.3)).is_empty());
        // Draft 4's boolean exclusive bounds.
        let d4 = json!({"minimum": 1, "exclusiveMinimum": true});
        assert_eq!(problems(d4, json!(1)), [": 1 is less than or equal to the minimum of 1"]);
    }

    #[test]
    fn tuples_and_contains() {
        let prefix = json!({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}});
        assert_eq!(problems(prefix, json!(["a", "b"])), ["/1: \"b\" is not of type \"integer\""]);
        let tuple = json!({"items": [{"type": "string"}], "additionalItems": false});
        assert_eq!(
            problems(tuple, json!(["a", 1, 2])),
            [": Additional items are not allowed (1, 2 were unexpected)"]
        );
        let contains = json!({"contains": {"type": "string"}});
        assert_eq!(
            problems(contains, json!([1])),
            [": None of [1] are valid under the given schema"]
        );
    }

    #[test]
    fn patterns_have_unicode_properties() {
        let letters = json!({"pattern": "^\\p{L}+$"});
        assert!(problems(letters.clone(), json!("Ωmega")).is_empty());
        assert_eq!(problems(letters, json!("a1")), [": \"a1\" does not match \"^\\p{L}+$\""]);
        assert!(problems(json!({"pattern": "\\p{Greek}"}), json!("Ω")).is_empty());
        assert!(problems(json!({"pattern": "^\\p{Alphabetic}$"}), json!("Ω")).is_empty());
        assert_eq!(problems(json!({"pattern": "^\\p{Alphabetic}$"}), json!("1")).len(), 1);
        assert!(compile(&json!({"pattern": "(x"})).is_err());
    }

    #[test]
    fn an_exponential_pattern_is_left_unchecked() {
        let schema =
            json!({"properties": {"name": {"type": "string", "pattern": "^(\\w+\\s?)*$"}}});
        let input = json!({"name": format!("{}!", "a".repeat(5_000))});
        let started = std::time::Instant::now();
        assert!(problems(schema, input).is_empty());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(problems(json!({"pattern": "^a+$"}), json!("b")).len() == 1);
    }

    #[test]
    fn a_bad_schema_is_refused_with_where() {
        let err = |s: Value| compile(&s).err().unwrap();
        assert_eq!(
            err(json!({"type": 12})),
            "\"type\" must be a JSON type name or a list of them at /type"
        );
        assert!(
            err(json!({"properties": {"a": {"pattern": "("}}})).contains("/properties/a/pattern")
        );
        assert!(err(json!({"$ref": "#/$defs/none"})).starts_with("Unresolvable reference"));
        assert!(err(json!({"$ref": "https://example.com/s.json"}))
            .starts_with("Unresolvable reference"));
        assert!(err(json!({"required": "a"})).contains("list of property names"));
        assert!(err(json!(3)).contains("is not of types"));
        assert!(compile(&json!({"format": "email", "x-custom": 1})).is_ok());
    }
}
