//! The YAML that `SKILL.md` frontmatter uses, read by hand. Why not a crate: `yaml-rust2`
//! (pure Rust, the lightest full parser that builds for wasm32) added 95,752 B raw and
//! 45,633 B gzip to `index_bg.wasm` (measured with `bash scripts/build.sh`), more than the
//! rest of the skills feature, to read six keys. This reads the subset the Agent Skills
//! format needs and refuses the rest with a clear error, so a skill is never misread:
//!
//! - block mappings by indentation, `key: value`, quoted keys, `#` comments;
//! - scalars: plain (also continued on more-indented lines, folded with spaces; unlike full
//!   YAML, the first line may contain `: `, as descriptions often do), `'single'`
//!   (`''` escapes a quote), `"double"` (`\" \\ \/ \n \t \r \0 \uXXXX` escapes), block
//!   scalars `|` and `>` with the `-`/`+` chomping indicators;
//! - sequences: block (`- item`, at the key's indentation or deeper) and flow (`[a, "b"]`);
//! - flow mappings of scalars (`{version: "1.0"}`);
//! - refused: anchors, aliases, tags, multi-line quoted scalars, nested flow collections,
//!   duplicate keys.
//!
//! Every scalar is a string (`1.0` stays `"1.0"`): the format's fields are strings.

/// One value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// `~`, `null` or nothing.
    Null,
    /// Any scalar, as text.
    Scalar(String),
    /// A sequence.
    List(Vec<Node>),
    /// A mapping, in file order.
    Map(Vec<(String, Node)>),
}

impl Node {
    /// The value of `key` in a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Why the YAML could not be read; `line` counts from 1 inside the frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// The line of the problem.
    pub line: usize,
    /// What is wrong there.
    pub message: String,
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for YamlError {}

struct Line<'a> {
    indent: usize,
    text: &'a str,
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, YamlError> {
    Err(YamlError { line: line + 1, message: message.into() })
}

/// Whether `text` (trimmed) is blank or a comment.
fn is_blank(text: &str) -> bool {
    let t = text.trim();
    t.is_empty() || t.starts_with('#')
}

/// `text` without a trailing ` # comment` (outside quotes, which callers handle first).
fn strip_comment(text: &str) -> &str {
    let bytes = text.as_bytes();
    for i in 0..bytes.len() {
        if bytes[i] == b'#' && (i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t') {
            return text[..i].trim_end();
        }
    }
    text.trim_end()
}

/// Parses the frontmatter text into a mapping (or `Null` when it holds nothing).
pub fn parse(text: &str) -> Result<Node, YamlError> {
    let lines = text
        .lines()
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            let indent = l.len() - l.trim_start_matches(' ').len();
            Line { indent, text: &l[indent..] }
        })
        .collect();
    let mut p = Parser { lines, pos: 0 };
    p.skip_blank();
    if p.pos >= p.lines.len() {
        return Ok(Node::Null);
    }
    if p.lines[p.pos].text.starts_with('\t') {
        return err(p.pos, "tabs cannot indent YAML");
    }
    let first = &p.lines[p.pos];
    let indent = first.indent;
    let node = if first.text == "-" || first.text.starts_with("- ") {
        p.list(indent)?
    } else {
        p.map(indent)?
    };
    p.skip_blank();
    if p.pos < p.lines.len() {
        return err(p.pos, "unexpected indentation");
    }
    Ok(node)
}

impl<'a> Parser<'a> {
    fn skip_blank(&mut self) {
        while self.pos < self.lines.len() && is_blank(self.lines[self.pos].text) {
            self.pos += 1;
        }
    }

    /// The next non-blank line's index, without moving.
    fn peek(&self) -> Option<usize> {
        (self.pos..self.lines.len()).find(|&i| !is_blank(self.lines[i].text))
    }

    fn map(&mut self, indent: usize) -> Result<Node, YamlError> {
        let mut entries: Vec<(String, Node)> = Vec::new();
        while let Some(i) = self.peek() {
            let line = &self.lines[i];
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return err(i, "unexpected indentation");
            }
            let text = line.text;
            if text == "-" || text.starts_with("- ") {
                return err(i, "a list item where a key was expected");
            }
            let (key, rest) = split_key(text).ok_or(YamlError {
                line: i + 1,
                message: format!("expected `key: value`, found {text:?}"),
            })?;
            let key = scalar(key.trim(), i)?;
            if entries.iter().any(|(k, _)| *k == key) {
                return err(i, format!("duplicate key {key:?}"));
            }
            self.pos = i + 1;
            let value = self.value(rest.trim(), indent, i)?;
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }

    /// The value after `key:` on line `at` (whose indentation is `indent`).
    fn value(&mut self, rest: &str, indent: usize, at: usize) -> Result<Node, YamlError> {
        let rest_nc = if rest.starts_with(['"', '\'']) { rest } else { strip_comment(rest) };
        if rest_nc.is_empty() {
            let Some(next) = self.peek() else { return Ok(Node::Null) };
            let line = &self.lines[next];
            let item = line.text == "-" || line.text.starts_with("- ");
            if item && line.indent >= indent {
                return self.list(line.indent);
            }
            if line.indent > indent {
                return self.map(line.indent);
            }
            return Ok(Node::Null);
        }
        if let Some(header) = rest_nc.strip_prefix('|') {
            return self.block(header, indent, at, true);
        }
        if let Some(header) = rest_nc.strip_prefix('>') {
            return self.block(header, indent, at, false);
        }
        if rest_nc.starts_with('[') {
            return flow_list(rest_nc, at);
        }
        if rest_nc.starts_with('{') {
            return flow_map(rest_nc, at);
        }
        if rest.starts_with(['"', '\'']) {
            let (value, after) = quoted(rest, at)?;
            if !is_blank(after) {
                return err(at, format!("unexpected text after a quoted value: {after:?}"));
            }
            return Ok(Node::Scalar(value));
        }
        // A plain scalar, possibly continued on more-indented lines.
        let mut value = plain(rest_nc, at)?;
        while let Some(next) = self.peek() {
            let line = &self.lines[next];
            if line.indent <= indent {
                break;
            }
            if split_key(line.text).is_some() {
                return err(next, "unexpected indentation");
            }
            value.push(' ');
            value.push_str(strip_comment(line.text).trim());
            self.pos = next + 1;
        }
        Ok(if value == "~" || value == "null" { Node::Null } else { Node::Scalar(value) })
    }

    fn list(&mut self, indent: usize) -> Result<Node, YamlError> {
        let mut items = Vec::new();
        while let Some(i) = self.peek() {
            let line = &self.lines[i];
            let item = line.text == "-" || line.text.starts_with("- ");
            if line.indent != indent || !item {
                if line.indent > indent {
                    return err(i, "unexpected indentation");
                }
                break;
            }
            let rest = line.text[1..].trim();
            self.pos = i + 1;
            if split_key(rest).is_some() && !rest.starts_with(['"', '\'', '[', '{']) {
                return err(i, "mappings inside lists are not supported in frontmatter");
            }
            items.push(self.value(rest, indent, i)?);
        }
        Ok(Node::List(items))
    }

    /// A `|` (literal) or `>` (folded) block scalar whose header follows the indicator.
    fn block(
        &mut self,
        header: &str,
        indent: usize,
        at: usize,
        literal: bool,
    ) -> Result<Node, YamlError> {
        let header = strip_comment(header).trim();
        let chomp = match header {
            "" => ' ',
            "-" => '-',
            "+" => '+',
            other => return err(at, format!("unsupported block scalar header {other:?}")),
        };
        let mut body: Vec<String> = Vec::new();
        let mut block_indent = None;
        while self.pos < self.lines.len() {
            let line = &self.lines[self.pos];
            if line.text.is_empty() {
                body.push(String::new());
                self.pos += 1;
                continue;
            }
            let min = *block_indent.get_or_insert(line.indent);
            if line.indent <= indent || line.indent < min {
                break;
            }
            // Indentation beyond the block's own is content.
            body.push(format!("{}{}", " ".repeat(line.indent - min), line.text));
            self.pos += 1;
        }
        let trailing = body.iter().rev().take_while(|l| l.is_empty()).count();
        let content = &body[..body.len() - trailing];
        let mut text = String::new();
        if literal {
            text = content.join("\n");
        } else {
            for (n, line) in content.iter().enumerate() {
                if n > 0 {
                    let prev = &content[n - 1];
                    // A blank line is a newline; the break before it is dropped.
                    if line.is_empty() || line.starts_with(' ') || prev.starts_with(' ') {
                        text.push('\n');
                    } else if !prev.is_empty() {
                        text.push(' ');
                    }
                }
                text.push_str(line);
            }
        }
        match chomp {
            '-' => {}
            '+' if !content.is_empty() => text.push_str(&"\n".repeat(trailing + 1)),
            _ if !content.is_empty() => text.push('\n'),
            _ => {}
        }
        Ok(Node::Scalar(text))
    }
}

/// Splits `key: rest` (or `key:` at the end) outside quotes.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut quote = None;
    for (i, &b) in bytes.iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') if i == 0 => quote = Some(b),
            (Some(q), c) if c == q => quote = None,
            (None, b':')
                if i + 1 == bytes.len() || bytes[i + 1] == b' ' || bytes[i + 1] == b'\t' =>
            {
                return Some((&text[..i], &text[i + 1..]))
            }
            (None, b'#') if i > 0 && bytes[i - 1] == b' ' => return None,
            _ => {}
        }
    }
    None
}

/// A scalar in a key or a flow collection: quoted or plain.
fn scalar(text: &str, at: usize) -> Result<String, YamlError> {
    if text.starts_with(['"', '\'']) {
        let (value, after) = quoted(text, at)?;
        if !after.trim().is_empty() {
            return err(at, format!("unexpected text after a quoted value: {after:?}"));
        }
        return Ok(value);
    }
    plain(text, at)
}

/// A plain scalar; refuses what would change its meaning in full YAML.
fn plain(text: &str, at: usize) -> Result<String, YamlError> {
    match text.chars().next() {
        Some('&') => err(at, "anchors are not supported in frontmatter"),
        Some('*') => err(at, "aliases are not supported in frontmatter"),
        Some('!') => err(at, "tags are not supported in frontmatter"),
        Some('@' | '`') => err(at, format!("a plain value cannot start with {:?}", &text[..1])),
        _ => Ok(text.trim().to_owned()),
    }
}

/// A quoted scalar at the start of `text` and what follows it.
fn quoted(text: &str, at: usize) -> Result<(String, &str), YamlError> {
    let q = text.as_bytes()[0] as char;
    let mut out = String::new();
    let mut chars = text[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match (q, c) {
            ('\'', '\'') => {
                if text[1 + i + 1..].starts_with('\'') {
                    out.push('\'');
                    chars.next();
                } else {
                    return Ok((out, &text[1 + i + 1..]));
                }
            }
            ('"', '"') => return Ok((out, &text[1 + i + 1..])),
            ('"', '\\') => {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    '"' | '\\' | '/' => out.push(e),
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                        match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                            Some(c) if hex.len() == 4 => out.push(c),
                            _ => return err(at, format!("bad escape \\u{hex}")),
                        }
                    }
                    other => return err(at, format!("unsupported escape \\{other}")),
                }
            }
            _ => out.push(c),
        }
    }
    err(at, "a quoted value must close on its line")
}

/// Splits the inside of a flow collection on commas outside quotes.
fn flow_items(inner: &str, at: usize) -> Result<Vec<&str>, YamlError> {
    let mut items = Vec::new();
    let mut quote = None;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '[' | ']' | '{' | '}') => {
                return err(at, "nested flow collections are not supported in frontmatter")
            }
            (None, ',') => {
                items.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = inner[start..].trim();
    if !last.is_empty() {
        items.push(last);
    }
    Ok(items)
}

/// The inside of `[...]` / `{...}` on one line (a trailing comment allowed).
fn flow_inner(text: &str, open: char, close: char, at: usize) -> Result<&str, YamlError> {
    let body = text.strip_prefix(open).unwrap_or(text);
    match body.rfind(close) {
        Some(end) if is_blank(&body[end + 1..]) => Ok(&body[..end]),
        _ => err(at, format!("a flow collection must close with {close:?} on its line")),
    }
}

fn flow_list(text: &str, at: usize) -> Result<Node, YamlError> {
    let inner = flow_inner(text, '[', ']', at)?;
    let items = flow_items(inner, at)?;
    Ok(Node::List(
        items.into_iter().map(|i| scalar(i, at).map(Node::Scalar)).collect::<Result<_, _>>()?,
    ))
}

fn flow_map(text: &str, at: usize) -> Result<Node, YamlError> {
    let inner = flow_inner(text, '{', '}', at)?;
    let mut entries: Vec<(String, Node)> = Vec::new();
    for item in flow_items(inner, at)? {
        let (k, v) = split_key(item).ok_or(YamlError {
            line: at + 1,
            message: format!("expected `key: value` in {item:?}"),
        })?;
        let key = scalar(k.trim(), at)?;
        let v = v.trim();
        entries.push((key, if v.is_empty() { Node::Null } else { Node::Scalar(scalar(v, at)?) }));
    }
    Ok(Node::Map(entries))
}
