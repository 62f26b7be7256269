//! A tool call's arguments as the model wrote them: the shape shared by the stream
//! accumulator (this layer), the turn engine and the model providers (above it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call's arguments, kept as their (valid) JSON text rather than as a parsed tree,
/// and shared: the history holds a large argument (a `write`'s content) once, in the form a
/// provider writes into its request as it is, and a copy of the history (a compacted
/// request, a retry) shares the text instead of copying it.
#[derive(Debug, Clone)]
pub struct ToolArguments(std::rc::Rc<String>);

impl ToolArguments {
    /// The arguments of `value`, as JSON text in a buffer of its exact size.
    pub fn from_value(value: &Value) -> Self {
        Self(std::rc::Rc::new(super::json::to_string_exact(value)))
    }

    /// Arguments from JSON text, checked (without building a tree) to be valid JSON.
    pub fn from_text(text: String) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<&serde_json::value::RawValue>(&text)?;
        Ok(Self(std::rc::Rc::new(text)))
    }

    /// `{}`: a call without arguments.
    pub fn empty() -> Self {
        Self(std::rc::Rc::new("{}".to_owned()))
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The arguments parsed, for code that reads them.
    pub fn to_value(&self) -> Value {
        super::json::from_str_exact(self.text()).unwrap_or(Value::Null)
    }

    /// Whether the arguments are a JSON object (what providers with typed inputs require).
    pub fn is_object(&self) -> bool {
        self.text().trim_start().starts_with('{')
    }
}

/// Serialized as the JSON value itself, not as a string of it.
impl Serialize for ToolArguments {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw: &serde_json::value::RawValue =
            serde_json::from_str(self.text()).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolArguments {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        Ok(Self(std::rc::Rc::new(String::from(Box::<str>::from(raw)))))
    }
}

impl From<Value> for ToolArguments {
    fn from(value: Value) -> Self {
        Self::from_value(&value)
    }
}

/// Two arguments are equal when they are the same JSON, whatever their spacing.
impl PartialEq for ToolArguments {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text() || self.to_value() == other.to_value()
    }
}

impl std::fmt::Display for ToolArguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}
