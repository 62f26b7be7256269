//! JSON Schema handling: deriving schemas from Rust types and validating tool input before a
//! tool runs, so a malformed call becomes an error the model can read and correct.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::Value;

mod validator;

/// The JSON Schema of `T`, with the meta keys providers reject (`$schema`, `title`) removed.
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        map.remove("$schema");
        map.remove("title");
    }
    v
}

/// Why a schema did not compile, or an input did not fit it; the Display text is what the
/// model reads.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema itself is not valid JSON Schema (from a client, an MCP server, an app).
    InvalidSchema(String),
    /// The input breaks the schema: up to five `<path>: <message>` problems.
    InvalidInput(Vec<String>),
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaError::InvalidSchema(e) => write!(f, "invalid JSON Schema: {e}"),
            SchemaError::InvalidInput(problems) => f.write_str(&problems.join("; ")),
        }
    }
}

impl std::error::Error for SchemaError {}

/// How many compiled schemas [`InputValidator::cached`] keeps before it starts afresh.
pub const VALIDATOR_CACHE_SIZE: usize = 256;

thread_local! {
    static VALIDATORS: RefCell<HashMap<String, Rc<InputValidator>>> = RefCell::new(HashMap::new());
}

/// A compiled input schema.
pub struct InputValidator {
    inner: validator::Compiled,
}

impl InputValidator {
    /// Compiles `schema`. A schema that does not compile is reported as text, so a bad schema
    /// from a client or an MCP server becomes a clear error instead of a crash.
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        // A bare `{}` or a schema without a type is accepted as-is: tools may take anything.
        validator::compile(schema).map(|inner| Self { inner }).map_err(SchemaError::InvalidSchema)
    }

    /// The compiled validator of `schema`, compiled once per isolate and then reused:
    /// compiling costs more than the check, and every tool call (direct, or from Code
    /// Mode's sandbox) checks its input. Keyed by the schema's JSON text, so a tool whose
    /// schema changes (an MCP server, a client) gets a fresh one; at most
    /// [`VALIDATOR_CACHE_SIZE`] are kept.
    pub fn cached(schema: &Value) -> Result<Rc<Self>, SchemaError> {
        let key = schema.to_string();
        if let Some(v) = VALIDATORS.with(|c| c.borrow().get(&key).cloned()) {
            return Ok(v);
        }
        let v = Rc::new(Self::new(schema)?);
        VALIDATORS.with(|c| {
            let mut c = c.borrow_mut();
            if c.len() >= VALIDATOR_CACHE_SIZE {
                c.clear();
            }
            c.insert(key, v.clone());
        });
        Ok(v)
    }

    /// Checks `input`, reporting up to five problems as `<path>: <message>` lines.
    pub fn validate(&self, input: &Value) -> Result<(), SchemaError> {
        let problems: Vec<String> = self
            .inner
            .problems(input, 5)
            .into_iter()
            .map(|p| {
                let at = if p.path.is_empty() { "(root)" } else { &p.path };
                format!("{at}: {}", p.message)
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SchemaError::InvalidInput(problems))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(schemars::JsonSchema, serde::Deserialize)]
    #[allow(dead_code)]
    struct Weather {
        /// City name
        city: String,
        days: Option<u32>,
    }

    #[test]
    fn derived_schema_has_properties_and_required() {
        let s = schema_for::<Weather>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"]["city"]["type"], "string");
        assert_eq!(s["required"], json!(["city"]));
        assert!(s.get("$schema").is_none());
        assert!(s.get("title").is_none());
    }

    #[test]
    fn validation_errors_name_the_path() {
        let v = InputValidator::new(&schema_for::<Weather>()).unwrap();
        assert!(v.validate(&json!({"city": "Paris"})).is_ok());
        let err = v.validate(&json!({"city": 3})).unwrap_err();
        assert!(matches!(&err, SchemaError::InvalidInput(p) if p.len() == 1));
        assert!(err.to_string().contains("/city"), "{err}");
        let err = v.validate(&json!({})).unwrap_err();
        assert!(err.to_string().contains("city"), "{err}");
    }

    #[test]
    fn cached_validators_are_shared_per_schema() {
        let schema = schema_for::<Weather>();
        let a = InputValidator::cached(&schema).unwrap();
        let b = InputValidator::cached(&schema).unwrap();
        assert!(Rc::ptr_eq(&a, &b));
        let other = InputValidator::cached(&json!({"type": "object"})).unwrap();
        assert!(!Rc::ptr_eq(&a, &other));
        assert!(b.validate(&json!({"city": 3})).is_err());
        assert!(InputValidator::cached(&json!({"type": 12})).is_err());
    }

    #[test]
    fn bad_schema_is_an_error_not_a_panic() {
        let err = InputValidator::new(&json!({"type": 12})).err().unwrap();
        assert!(matches!(err, SchemaError::InvalidSchema(_)));
        assert!(err.to_string().starts_with("invalid JSON Schema"), "{err}");
    }
}
