//! `SKILL.md` frontmatter in the Agent Skills format: a YAML block between `---` lines, then
//! the Markdown body. The YAML is read by [`super::yaml`] (the subset the format needs; see
//! there why not a crate); the format's rules are then checked here, and a skill that breaks
//! one is left out with the reason.

use super::yaml::{self, Node};
use std::collections::BTreeMap;

/// Longest `name` the format allows.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest `description` the format allows.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility` the format allows.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// Why a `SKILL.md` was refused; shown by the `skills()` callable and logged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrontmatterError {
    /// The file does not start with a `---` line closed by another.
    Missing,
    /// The YAML does not parse.
    Yaml(String),
    /// The YAML is not a mapping of keys to values.
    NotAMapping,
    /// A required field is absent or empty.
    Required(&'static str),
    /// A field has the wrong type.
    WrongType(&'static str, &'static str),
    /// A field is longer than the format allows.
    TooLong(&'static str, usize),
    /// `name` has characters or hyphens the format refuses.
    BadName(String),
    /// `name` differs from the skill's folder.
    NameMismatch {
        /// The frontmatter's `name`.
        name: String,
        /// The folder's name.
        folder: String,
    },
}

impl std::fmt::Display for FrontmatterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => {
                f.write_str("SKILL.md must start with YAML frontmatter between --- lines")
            }
            Self::Yaml(e) => write!(f, "frontmatter is not valid YAML: {e}"),
            Self::NotAMapping => f.write_str("frontmatter must be a YAML mapping"),
            Self::Required(k) => write!(f, "frontmatter field `{k}` is required"),
            Self::WrongType(k, t) => write!(f, "frontmatter field `{k}` must be {t}"),
            Self::TooLong(k, max) => {
                write!(f, "frontmatter field `{k}` must be at most {max} characters")
            }
            Self::BadName(n) => write!(
                f,
                "name {n:?} must be 1-{MAX_NAME_CHARS} lowercase letters, digits and hyphens, \
                 not starting or ending with a hyphen and without `--`"
            ),
            Self::NameMismatch { name, folder } => {
                write!(f, "name {name:?} must equal the skill's folder name {folder:?}")
            }
        }
    }
}

impl std::error::Error for FrontmatterError {}

/// The frontmatter fields of a valid skill.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkillMeta {
    /// The skill's name, equal to its folder.
    pub name: String,
    /// When to use the skill; the catalog line the model reads.
    pub description: String,
    /// License name or file, as written.
    pub license: Option<String>,
    /// Environment requirements, as written.
    pub compatibility: Option<String>,
    /// Tools the skill pre-approves (space- or comma-separated in the file); `None` when the
    /// field is absent, which puts no restriction in place.
    pub allowed_tools: Option<Vec<String>>,
    /// Extra string properties (`version`, `author`, ...).
    pub metadata: BTreeMap<String, String>,
}

/// A parsed `SKILL.md`: its fields and the Markdown body after the frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSkill {
    /// The validated frontmatter.
    pub meta: SkillMeta,
    /// Everything after the closing `---`.
    pub body: String,
}

/// Splits `raw` into the YAML text and the body, or `None` without frontmatter.
fn split(raw: &str) -> Option<(&str, &str)> {
    let raw = raw.strip_prefix('\u{feff}').unwrap_or(raw);
    let rest = raw.strip_prefix("---\n").or_else(|| raw.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// Whether `name` follows the format: 1-64 of `a-z0-9-`, no leading, trailing or double hyphen.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// A scalar's text.
fn scalar_text(v: &Node) -> Option<String> {
    match v {
        Node::Scalar(s) => Some(s.clone()),
        _ => None,
    }
}

fn optional_text(
    map: &Node,
    key: &'static str,
    max: Option<usize>,
) -> Result<Option<String>, FrontmatterError> {
    match map.get(key) {
        None | Some(Node::Null) => Ok(None),
        Some(v) => {
            let text = scalar_text(v).ok_or(FrontmatterError::WrongType(key, "a string"))?;
            let text = text.trim().to_owned();
            if let Some(max) = max.filter(|m| text.chars().count() > *m) {
                return Err(FrontmatterError::TooLong(key, max));
            }
            Ok(Some(text).filter(|t| !t.is_empty()))
        }
    }
}

/// `allowed-tools` as names: a string split on spaces and commas, or a YAML list. A
/// `Bash(git:*)`-style entry keeps its tool name.
fn allowed_tools(v: &Node) -> Result<Vec<String>, FrontmatterError> {
    let items: Vec<String> = match v {
        Node::List(items) => items
            .iter()
            .map(|i| scalar_text(i).ok_or(FrontmatterError::WrongType("allowed-tools", "a list")))
            .collect::<Result<_, _>>()?,
        other => scalar_text(other)
            .ok_or(FrontmatterError::WrongType("allowed-tools", "a string or a list"))?
            .split([' ', ',', '\t', '\n'])
            .map(str::to_owned)
            .collect(),
    };
    Ok(items
        .iter()
        .map(|t| t.split('(').next().unwrap_or("").trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect())
}

/// Parses and validates `raw`. `folder` is the skill's directory name, which `name` must
/// equal.
pub fn parse_skill_md(raw: &str, folder: &str) -> Result<ParsedSkill, FrontmatterError> {
    let (text, body) = split(raw).ok_or(FrontmatterError::Missing)?;
    let map = yaml::parse(text).map_err(|e| FrontmatterError::Yaml(e.to_string()))?;
    match map {
        Node::Map(_) => {}
        Node::Null => return Err(FrontmatterError::Required("name")),
        _ => return Err(FrontmatterError::NotAMapping),
    }
    let name = optional_text(&map, "name", None)?.ok_or(FrontmatterError::Required("name"))?;
    if !valid_name(&name) {
        return Err(FrontmatterError::BadName(name));
    }
    if name != folder {
        return Err(FrontmatterError::NameMismatch { name, folder: folder.to_owned() });
    }
    let description = optional_text(&map, "description", Some(MAX_DESCRIPTION_CHARS))?
        .ok_or(FrontmatterError::Required("description"))?;
    let allowed_tools = match map.get("allowed-tools") {
        None | Some(Node::Null) => None,
        Some(v) => Some(allowed_tools(v)?),
    };
    let metadata = match map.get("metadata") {
        None | Some(Node::Null) => BTreeMap::new(),
        Some(Node::Map(entries)) => entries
            .iter()
            .map(|(k, v)| match scalar_text(v) {
                Some(v) => Ok((k.clone(), v)),
                None => Err(FrontmatterError::WrongType("metadata", "a map of strings")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(FrontmatterError::WrongType("metadata", "a map of strings")),
    };
    Ok(ParsedSkill {
        meta: SkillMeta {
            name,
            description,
            license: optional_text(&map, "license", None)?,
            compatibility: optional_text(&map, "compatibility", Some(MAX_COMPATIBILITY_CHARS))?,
            allowed_tools,
            metadata,
        },
        body: body.to_owned(),
    })
}
