//! A skill's resource files: their kind (by folder), encoding and media type (by
//! extension), and the path rules that keep a read inside the skill. Kinds, extensions and
//! media types are Think's (`agents/skills` `r2.ts`).

use serde::Serialize;

/// What a resource is, from its top folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    /// Under `references/`: documents the model reads when the body says so.
    Reference,
    /// Under `scripts/`: what `run_skill_script` runs.
    Script,
    /// Under `assets/`: templates, images, data.
    Asset,
    /// Anything else beside `SKILL.md`.
    File,
}

impl ResourceKind {
    /// The kind of the resource at `path` (relative to the skill folder).
    pub fn of(path: &str) -> Self {
        if path.starts_with("references/") {
            Self::Reference
        } else if path.starts_with("scripts/") {
            Self::Script
        } else if path.starts_with("assets/") {
            Self::Asset
        } else {
            Self::File
        }
    }

    /// The name shown to the model.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reference => "reference",
            Self::Script => "script",
            Self::Asset => "asset",
            Self::File => "file",
        }
    }
}

/// How a resource's content reaches the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// As UTF-8 text.
    Text,
    /// As base64 of its bytes.
    Base64,
}

impl Encoding {
    /// The name shown to the model.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Base64 => "base64",
        }
    }
}

/// Extensions Think reads as text.
const TEXT_EXTENSIONS: &[&str] = &[
    "bash", "css", "csv", "html", "js", "json", "jsx", "md", "mjs", "py", "sh", "svg", "ts", "tsx",
    "txt", "xml", "yaml", "yml",
];

/// Media types by extension.
const MIME_TYPES: &[(&str, &str)] = &[
    ("css", "text/css"),
    ("gif", "image/gif"),
    ("html", "text/html"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("js", "text/javascript"),
    ("json", "application/json"),
    ("md", "text/markdown"),
    ("mjs", "text/javascript"),
    ("pdf", "application/pdf"),
    ("png", "image/png"),
    ("py", "text/x-python"),
    ("sh", "text/x-shellscript"),
    ("svg", "image/svg+xml"),
    ("ts", "text/typescript"),
    ("tsx", "text/typescript"),
    ("txt", "text/plain"),
    ("webp", "image/webp"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("xml", "application/xml"),
    ("yaml", "application/yaml"),
    ("yml", "application/yaml"),
];

/// The lowercase extension of the last path segment, without the dot.
pub fn extension(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.rfind('.').map(|i| file[i + 1..].to_ascii_lowercase()).unwrap_or_default()
}

/// How the resource at `path` is shown.
pub fn encoding_of(path: &str) -> Encoding {
    if TEXT_EXTENSIONS.contains(&extension(path).as_str()) {
        Encoding::Text
    } else {
        Encoding::Base64
    }
}

/// The media type of `path`, when the extension is known.
pub fn mime_of(path: &str) -> Option<&'static str> {
    let ext = extension(path);
    MIME_TYPES.iter().find(|(e, _)| *e == ext).map(|(_, m)| *m)
}

/// One resource as listed by `activate_skill`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceInfo {
    /// Relative to the skill folder, e.g. `references/forms.md`.
    pub path: String,
    /// From the top folder.
    pub kind: ResourceKind,
    /// From the extension.
    pub encoding: Encoding,
    /// Bytes.
    pub size: u64,
}

impl ResourceInfo {
    /// The listing entry for the file at `path` of `size` bytes.
    pub fn new(path: &str, size: u64) -> Self {
        Self {
            path: path.to_owned(),
            kind: ResourceKind::of(path),
            encoding: encoding_of(path),
            size,
        }
    }
}

/// Why a resource path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathError {
    /// The path climbs out of the skill.
    Climbs,
    /// Absolute, empty segments, `.` or NUL.
    NotNormalized(String),
    /// No skill name in a qualified path.
    Unqualified,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Climbs => f.write_str(
                "Resource paths cannot use \"../\". To read from another skill, use a qualified \
                 path like \"other-skill/references/file.md\".",
            ),
            Self::NotNormalized(p) => {
                write!(f, "Skill resource path must be a normalized relative path: {p}")
            }
            Self::Unqualified => f.write_str(
                "Resource path must include a skill name when name is omitted, for example: \
                 pdf/references/forms.md",
            ),
        }
    }
}

impl std::error::Error for PathError {}

/// Checks that `path` is a normalized path inside a skill: relative, no `.`/`..`/empty
/// segments, no NUL.
pub fn check_path(path: &str) -> Result<(), PathError> {
    let segments: Vec<&str> = path.split('/').collect();
    if segments.contains(&"..") {
        return Err(PathError::Climbs);
    }
    if path.starts_with('/')
        || path.contains('\0')
        || segments.iter().any(|s| s.is_empty() || *s == ".")
    {
        return Err(PathError::NotNormalized(path.to_owned()));
    }
    Ok(())
}

/// Splits a qualified path `skill/rest` into the skill name and the path inside it.
pub fn split_qualified(path: &str) -> Result<(&str, &str), PathError> {
    check_path(path)?;
    match path.split_once('/') {
        Some((name, rest)) if !name.is_empty() && !rest.is_empty() => Ok((name, rest)),
        _ => Err(PathError::Unqualified),
    }
}
