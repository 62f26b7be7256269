//! The session's context: blocks of text the system prompt carries from turn to turn
//! (readonly, writable by the model, loadable skills, searchable entries), the tools the model
//! uses on them, and the compaction of long conversations. Think's `configureSession`.
//!
//! Everything is stored in the object's SQLite through [`Sql`], so it survives restarts and
//! is host-tested over rusqlite. Searchable entries are indexed with SQLite FTS5.

use std::cell::RefCell;
use std::rc::Rc;

use serde::Deserialize;

use crate::store::{create_tables, Sql, SqlValue, StoreError};

pub mod compact;
pub mod tools;

#[cfg(test)]
mod tests;

/// What a block holds and who may change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockKind {
    /// Content set by the app; the model only reads it.
    Readonly,
    /// Content the model writes with `set_context`.
    Writable,
    /// Keyed entries the model loads with `load_context` (their list is in the prompt).
    Skill,
    /// Keyed entries the model searches with `search_context`.
    Searchable,
}

impl BlockKind {
    /// The tag shown in the block's header, as Think shows it.
    fn tag(self) -> &'static str {
        match self {
            BlockKind::Readonly => "readonly",
            BlockKind::Writable => "writable",
            BlockKind::Skill => "loadable",
            BlockKind::Searchable => "searchable",
        }
    }

    /// Where the kind renders: the blocks that change least come first, so the prompt's
    /// prefix stays the same between writes and provider prompt caches keep working.
    fn render_rank(self) -> u8 {
        match self {
            BlockKind::Readonly => 0,
            BlockKind::Skill => 1,
            BlockKind::Searchable => 2,
            BlockKind::Writable => 3,
        }
    }
}

/// One context block as the app configures it (`AgentSpec::context`, `THINK_CONTEXT`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextBlock {
    /// The block's name: the tools' `label`, the header's title.
    pub label: String,
    /// What the block is for, shown in its header.
    #[serde(default)]
    pub description: Option<String>,
    /// Its kind.
    #[serde(rename = "type")]
    pub kind: BlockKind,
    /// The most tokens its content may hold; `None` is unbounded.
    #[serde(default)]
    pub max_tokens: Option<usize>,
    /// The initial content (readonly blocks: the content, set again at every start).
    #[serde(default)]
    pub content: Option<String>,
}

/// The shipped agent's default `THINK_CONTEXT`.
pub const DEFAULT_CONTEXT: &str = r#"[{"label":"memory","description":"Facts worth remembering across turns","type":"writable","maxTokens":2000}]"#;

/// Parses a `THINK_CONTEXT` value: a JSON array of blocks with distinct labels.
pub fn parse_blocks(json: &str) -> Result<Vec<ContextBlock>, SessionError> {
    let blocks: Vec<ContextBlock> =
        serde_json::from_str(json).map_err(|e| SessionError::BadConfig(e.to_string()))?;
    for (i, b) in blocks.iter().enumerate() {
        if b.label.trim().is_empty() {
            return Err(SessionError::BadConfig(format!("block {i} has an empty label")));
        }
        if blocks[..i].iter().any(|o| o.label == b.label) {
            return Err(SessionError::BadConfig(format!("label {:?} is used twice", b.label)));
        }
    }
    Ok(blocks)
}

/// Counts the tokens of a text; the app may supply its model's tokenizer.
pub type TokenCounter = Rc<dyn Fn(&str) -> usize>;

/// Think's estimate: `max(chars / 4, words × 1.3)`, rounded up.
pub fn estimate_tokens(text: &str) -> usize {
    let mut estimate = TokenEstimate::default();
    estimate.add(text);
    estimate.tokens()
}

/// [`estimate_tokens`] of a text given in pieces, so a text made of a large part (a tool
/// call's arguments) and a few small ones is counted without being joined first.
#[derive(Debug, Default)]
pub struct TokenEstimate {
    chars: usize,
    words: usize,
    /// Whether the text so far ends inside a word.
    in_word: bool,
}

impl TokenEstimate {
    /// Counts the next piece of the text.
    pub fn add(&mut self, piece: &str) {
        for c in piece.chars() {
            self.chars += 1;
            let word = !c.is_whitespace();
            if word && !self.in_word {
                self.words += 1;
            }
            self.in_word = word;
        }
    }

    /// The estimate of the whole text.
    pub fn tokens(&self) -> usize {
        if self.chars == 0 {
            return 0;
        }
        (self.chars as f64 / 4.0).max(self.words as f64 * 1.3).ceil() as usize
    }
}

/// Why a session operation failed; the text is what the model or the app is told.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SessionError {
    /// No block has this label.
    NoSuchBlock(String),
    /// The block exists but is not of a kind this operation works on.
    WrongKind {
        /// The block.
        label: String,
        /// What the operation needs, e.g. "writable".
        expected: &'static str,
    },
    /// `set_context` was given a readonly block.
    Readonly(String),
    /// A context tool was given a label that is not one of the blocks of the kind it works
    /// on; the message names those that are, as Think's does.
    NotOffered {
        /// The label given.
        label: String,
        /// The kind the tool works on (skill or searchable).
        kind: BlockKind,
        /// The labels of the blocks of that kind.
        offered: Vec<String>,
    },
    /// The write would pass the block's budget; nothing was written.
    OverBudget {
        /// The block.
        label: String,
        /// The tokens the content would have.
        tokens: usize,
        /// The block's budget.
        max: usize,
    },
    /// The configuration could not be read.
    BadConfig(String),
    /// The database failed.
    Store(StoreError),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::NoSuchBlock(l) => write!(f, "block \"{l}\" not found"),
            SessionError::WrongKind { label, expected } => {
                write!(f, "block \"{label}\" is not {expected}")
            }
            SessionError::Readonly(l) => write!(f, "Block \"{l}\" is readonly"),
            SessionError::NotOffered { label, kind, offered } => {
                let (what, which) = match kind {
                    BlockKind::Skill => ("a skill block", "Skill blocks"),
                    _ => ("searchable", "Searchable blocks"),
                };
                write!(f, "\"{label}\" is not {what}. {which}: {}", offered.join(", "))
            }
            SessionError::OverBudget { label, tokens, max } => write!(
                f,
                "Block \"{label}\" exceeds maxTokens: {tokens} > {max}. Shorten the content or replace older facts."
            ),
            SessionError::BadConfig(m) => write!(f, "invalid context blocks: {m}"),
            SessionError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<StoreError> for SessionError {
    fn from(e: StoreError) -> Self {
        SessionError::Store(e)
    }
}

/// A block's size against its budget, for tool results and headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockUsage {
    /// Tokens of its content.
    pub tokens: usize,
    /// Its budget, if any.
    pub max: Option<usize>,
}

impl BlockUsage {
    /// `42% (420/1000 tokens)`, or `420 tokens` without a budget (the tool result's form).
    pub fn describe(&self) -> String {
        match self.max {
            Some(max) if max > 0 => {
                format!("{}% ({}/{max} tokens)", percent(self.tokens, max), self.tokens)
            }
            _ => format!("{} tokens", self.tokens),
        }
    }
}

fn percent(tokens: usize, max: usize) -> usize {
    ((tokens as f64 / max as f64) * 100.0).round() as usize
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The entry's key.
    pub key: String,
    /// Its content.
    pub content: String,
}

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS think_context_blocks (label TEXT PRIMARY KEY, content TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS think_context_entries (label TEXT NOT NULL, key TEXT NOT NULL, \
     description TEXT, content TEXT NOT NULL, PRIMARY KEY (label, key))",
    "CREATE VIRTUAL TABLE IF NOT EXISTS think_context_fts USING fts5(label UNINDEXED, key UNINDEXED, \
     content, tokenize='porter unicode61')",
    "CREATE TABLE IF NOT EXISTS think_context_loaded (label TEXT NOT NULL, key TEXT NOT NULL, \
     PRIMARY KEY (label, key))",
];

/// The blocks of one agent instance over its SQLite: the app's handle (`agent.session()`)
/// and what the tools and the prompt read.
#[derive(Clone)]
pub struct Session {
    sql: Rc<dyn Sql>,
    /// The configured blocks, then those added at run time (extensions').
    blocks: Rc<RefCell<Vec<ContextBlock>>>,
    counter: Option<TokenCounter>,
}

impl Session {
    /// Opens the session: creates its tables, stores readonly content and the first content
    /// of writable blocks that have none yet.
    pub fn open(
        sql: Rc<dyn Sql>,
        blocks: Vec<ContextBlock>,
        counter: Option<TokenCounter>,
    ) -> Result<Self, StoreError> {
        create_tables(sql.as_ref(), SCHEMA)?;
        create_tables(sql.as_ref(), compact::SCHEMA)?;
        for b in &blocks {
            let Some(content) = &b.content else { continue };
            let sql_text = match b.kind {
                BlockKind::Readonly => {
                    "INSERT INTO think_context_blocks (label, content) VALUES (?, ?) \
                     ON CONFLICT(label) DO UPDATE SET content = excluded.content"
                }
                _ => "INSERT OR IGNORE INTO think_context_blocks (label, content) VALUES (?, ?)",
            };
            sql.exec(sql_text, &[b.label.as_str().into(), content.as_str().into()])?;
        }
        Ok(Self { sql, blocks: Rc::new(RefCell::new(blocks)), counter })
    }

    /// A session whose tables could not be created: every operation reports the database's
    /// error, and the agent keeps running without its context.
    pub fn unopened(
        sql: Rc<dyn Sql>,
        blocks: Vec<ContextBlock>,
        counter: Option<TokenCounter>,
    ) -> Self {
        Self { sql, blocks: Rc::new(RefCell::new(blocks)), counter }
    }

    /// The blocks, in configuration order, then those added at run time.
    pub fn blocks(&self) -> Vec<ContextBlock> {
        self.blocks.borrow().clone()
    }

    /// Adds a block at run time (an extension's), refused when its label is taken. Its
    /// content, if any, is kept from an earlier registration under the same label.
    pub fn add_block(&self, block: ContextBlock) -> Result<(), SessionError> {
        if block.label.trim().is_empty() {
            return Err(SessionError::BadConfig("a block has an empty label".into()));
        }
        if self.blocks.borrow().iter().any(|b| b.label == block.label) {
            return Err(SessionError::BadConfig(format!(
                "label {:?} is used by another block",
                block.label
            )));
        }
        self.blocks.borrow_mut().push(block);
        Ok(())
    }

    /// Removes a block added at run time, with its content and entries; false if none had
    /// that label.
    pub fn remove_block(&self, label: &str) -> bool {
        let before = self.blocks.borrow().len();
        self.blocks.borrow_mut().retain(|b| b.label != label);
        if self.blocks.borrow().len() == before {
            return false;
        }
        let tables = [
            "think_context_blocks",
            "think_context_entries",
            "think_context_fts",
            "think_context_loaded",
        ];
        for table in tables {
            if let Err(e) =
                self.sql.exec(&format!("DELETE FROM {table} WHERE label = ?"), &[label.into()])
            {
                crate::platform::log(&format!("think-rs: removing block {label:?}: {e}"));
            }
        }
        true
    }

    /// The labels of blocks of these kinds, in configuration order.
    pub fn labels(&self, kinds: &[BlockKind]) -> Vec<String> {
        let blocks = self.blocks.borrow();
        blocks.iter().filter(|b| kinds.contains(&b.kind)).map(|b| b.label.clone()).collect()
    }

    pub(crate) fn sql(&self) -> &dyn Sql {
        self.sql.as_ref()
    }

    /// Whether the app counts tokens itself (a counter needs the text whole).
    pub fn has_token_counter(&self) -> bool {
        self.counter.is_some()
    }

    /// Counts tokens with the app's counter, or Think's estimate.
    pub fn tokens(&self, text: &str) -> usize {
        match &self.counter {
            Some(c) => c(text),
            None => estimate_tokens(text),
        }
    }

    fn block(&self, label: &str) -> Result<ContextBlock, SessionError> {
        self.blocks
            .borrow()
            .iter()
            .find(|b| b.label == label)
            .cloned()
            .ok_or_else(|| SessionError::NoSuchBlock(label.to_owned()))
    }

    fn text_block(&self, label: &str) -> Result<ContextBlock, SessionError> {
        let b = self.block(label)?;
        match b.kind {
            BlockKind::Readonly | BlockKind::Writable => Ok(b),
            _ => Err(SessionError::WrongKind {
                label: label.to_owned(),
                expected: "a text block (readonly or writable)",
            }),
        }
    }

    fn keyed_block(&self, label: &str, kind: BlockKind) -> Result<ContextBlock, SessionError> {
        let b = self.block(label)?;
        if b.kind != kind {
            let expected = if kind == BlockKind::Skill { "a skill block" } else { "searchable" };
            return Err(SessionError::WrongKind { label: label.to_owned(), expected });
        }
        Ok(b)
    }

    /// The content of a readonly or writable block (empty when never written).
    pub fn get(&self, label: &str) -> Result<String, SessionError> {
        self.text_block(label)?;
        let rows = self
            .sql
            .exec("SELECT content FROM think_context_blocks WHERE label = ?", &[label.into()])?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next()?.into_string())
            .unwrap_or_default())
    }

    /// Replaces a block's content, refused when it passes the budget.
    pub fn set(&self, label: &str, content: &str) -> Result<BlockUsage, SessionError> {
        let block = self.text_block(label)?;
        let usage = BlockUsage { tokens: self.tokens(content), max: block.max_tokens };
        if let Some(max) = block.max_tokens {
            if usage.tokens > max {
                return Err(SessionError::OverBudget {
                    label: label.to_owned(),
                    tokens: usage.tokens,
                    max,
                });
            }
        }
        self.sql.exec(
            "INSERT INTO think_context_blocks (label, content) VALUES (?, ?) \
             ON CONFLICT(label) DO UPDATE SET content = excluded.content",
            &[label.into(), content.into()],
        )?;
        Ok(usage)
    }

    /// Adds `content` on a new line after the block's content, refused past the budget.
    pub fn append(&self, label: &str, content: &str) -> Result<BlockUsage, SessionError> {
        let current = self.get(label)?;
        let joined =
            if current.is_empty() { content.to_owned() } else { format!("{current}\n{content}") };
        self.set(label, &joined)
    }

    /// The usage of a readonly or writable block.
    pub fn usage(&self, label: &str) -> Result<BlockUsage, SessionError> {
        let max = self.text_block(label)?.max_tokens;
        Ok(BlockUsage { tokens: self.tokens(&self.get(label)?), max })
    }

    /// Adds or replaces entry `key` of a skill or searchable block (searchable ones are
    /// indexed for [`Session::search`]).
    pub fn add_entry(
        &self,
        label: &str,
        key: &str,
        content: &str,
        description: Option<&str>,
    ) -> Result<(), SessionError> {
        let kind = self.block(label)?.kind;
        if !matches!(kind, BlockKind::Skill | BlockKind::Searchable) {
            return Err(SessionError::WrongKind {
                label: label.to_owned(),
                expected: "a skill or searchable block",
            });
        }
        let params: [SqlValue; 4] =
            [label.into(), key.into(), description.map(str::to_owned).into(), content.into()];
        let fts = kind == BlockKind::Searchable;
        let sql = self.sql.clone();
        let mut write = || {
            sql.exec(
                "INSERT INTO think_context_entries (label, key, description, content) VALUES (?, ?, ?, ?) \
                 ON CONFLICT(label, key) DO UPDATE SET description = excluded.description, content = excluded.content",
                &params,
            )?;
            if fts {
                sql.exec(
                    "DELETE FROM think_context_fts WHERE label = ? AND key = ?",
                    &[label.into(), key.into()],
                )?;
                sql.exec(
                    "INSERT INTO think_context_fts (label, key, content) VALUES (?, ?, ?)",
                    &[label.into(), key.into(), content.into()],
                )?;
            }
            Ok(())
        };
        self.sql.transaction(&mut write)?;
        Ok(())
    }

    /// Entry `key` of a skill or searchable block, if any.
    pub fn entry(&self, label: &str, key: &str) -> Result<Option<String>, SessionError> {
        self.block(label)?;
        let rows = self.sql.exec(
            "SELECT content FROM think_context_entries WHERE label = ? AND key = ?",
            &[label.into(), key.into()],
        )?;
        Ok(rows.into_iter().next().and_then(|r| r.into_iter().next()?.into_string()))
    }

    /// Removes entry `key` (true if it existed), or with `None` clears a text block.
    pub fn remove(&self, label: &str, key: Option<&str>) -> Result<bool, SessionError> {
        self.block(label)?;
        let Some(key) = key else {
            let had = !self.get(label)?.is_empty();
            self.sql.exec("DELETE FROM think_context_blocks WHERE label = ?", &[label.into()])?;
            return Ok(had);
        };
        let existed = self.entry(label, key)?.is_some();
        let params = [SqlValue::from(label), SqlValue::from(key)];
        for table in ["think_context_entries", "think_context_fts", "think_context_loaded"] {
            self.sql.exec(&format!("DELETE FROM {table} WHERE label = ? AND key = ?"), &params)?;
        }
        Ok(existed)
    }

    /// The entries of a searchable block that match `query`, best first (FTS5 rank), at
    /// most 10. Each word of the query is matched as a term, so the model's punctuation
    /// cannot break the FTS syntax.
    pub fn search(&self, label: &str, query: &str) -> Result<Vec<SearchHit>, SessionError> {
        self.keyed_block(label, BlockKind::Searchable)?;
        let terms: Vec<String> =
            query.split_whitespace().map(|w| format!("\"{}\"", w.replace('"', "\"\""))).collect();
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.sql.exec(
            "SELECT key, content FROM think_context_fts WHERE think_context_fts MATCH ? AND label = ? \
             ORDER BY rank LIMIT 10",
            &[terms.join(" OR ").into(), label.into()],
        )?;
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                let mut it = r.into_iter();
                Some(SearchHit {
                    key: it.next()?.into_string()?,
                    content: it.next()?.into_string()?,
                })
            })
            .collect())
    }

    /// `(key, description)` of every entry of a block, by key.
    pub fn entries(&self, label: &str) -> Result<Vec<(String, Option<String>)>, SessionError> {
        let rows = self.sql.exec(
            "SELECT key, description FROM think_context_entries WHERE label = ? ORDER BY key",
            &[label.into()],
        )?;
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                let mut it = r.into_iter();
                Some((it.next()?.into_string()?, it.next().and_then(SqlValue::into_string)))
            })
            .collect())
    }

    /// Loads a skill entry and marks it loaded; `None` when there is no such key.
    pub fn load(&self, label: &str, key: &str) -> Result<Option<String>, SessionError> {
        self.keyed_block(label, BlockKind::Skill)?;
        let content = self.entry(label, key)?;
        if content.is_some() {
            self.sql.exec(
                "INSERT OR IGNORE INTO think_context_loaded (label, key) VALUES (?, ?)",
                &[label.into(), key.into()],
            )?;
        }
        Ok(content)
    }

    /// The loaded skills, as `label:key`, in load order.
    pub fn loaded(&self) -> Result<Vec<String>, SessionError> {
        let rows =
            self.sql.exec("SELECT label, key FROM think_context_loaded ORDER BY rowid", &[])?;
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                let mut it = r.into_iter();
                Some(format!("{}:{}", it.next()?.into_string()?, it.next()?.into_string()?))
            })
            .collect())
    }

    /// Marks a loaded skill unloaded; false if it was not loaded.
    pub fn unload(&self, label: &str, key: &str) -> Result<bool, SessionError> {
        self.keyed_block(label, BlockKind::Skill)?;
        let params = [SqlValue::from(label), SqlValue::from(key)];
        let loaded = !self
            .sql
            .exec("SELECT 1 FROM think_context_loaded WHERE label = ? AND key = ?", &params)?
            .is_empty();
        self.sql.exec("DELETE FROM think_context_loaded WHERE label = ? AND key = ?", &params)?;
        Ok(loaded)
    }

    /// The blocks as the system prompt shows them, after the app's prompt: per block a
    /// header (label, description, usage, kind) and its content. Empty without blocks.
    pub fn render(&self) -> Result<String, SessionError> {
        let blocks = self.blocks();
        let mut order: Vec<&ContextBlock> = blocks.iter().collect();
        crate::platform::sort::sort_by_key(&mut order, |b| b.kind.render_rank());
        let sep = "═".repeat(46);
        let mut parts = Vec::new();
        for b in order {
            let content = match b.kind {
                BlockKind::Readonly | BlockKind::Writable => self.get(&b.label)?,
                BlockKind::Skill => self
                    .entries(&b.label)?
                    .into_iter()
                    .map(|(k, d)| match d {
                        Some(d) => format!("- {k}: {d}"),
                        None => format!("- {k}"),
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                BlockKind::Searchable => match self.entries(&b.label)?.len() {
                    0 => String::new(),
                    n => format!("{n} entries indexed."),
                },
            };
            if content.is_empty() && b.kind == BlockKind::Readonly {
                continue;
            }
            let mut header = crate::platform::case::to_uppercase(&b.label);
            if let Some(d) = b.description.as_deref().filter(|d| !d.is_empty()) {
                header.push_str(&format!(" ({d})"));
            }
            if let Some(max) = b.max_tokens.filter(|m| *m > 0) {
                let tokens = self.tokens(&content);
                header.push_str(&format!(" [{}% — {tokens}/{max} tokens]", percent(tokens, max)));
            }
            header.push_str(&format!(" [{}]", b.kind.tag()));
            parts.push(format!("{sep}\n{header}\n{sep}\n{content}"));
        }
        Ok(parts.join("\n\n"))
    }

    /// Every block with its kind, budget, usage and content (entries' keys for keyed
    /// blocks): the `getContext` callable's answer, for a client to show what the model keeps.
    pub fn snapshot(&self) -> Result<serde_json::Value, SessionError> {
        let mut out = Vec::new();
        for b in self.blocks().iter() {
            let kind = match b.kind {
                BlockKind::Readonly => "readonly",
                BlockKind::Writable => "writable",
                BlockKind::Skill => "skill",
                BlockKind::Searchable => "searchable",
            };
            let mut v = serde_json::json!({
                "label": b.label, "description": b.description, "type": kind, "maxTokens": b.max_tokens,
            });
            match b.kind {
                BlockKind::Readonly | BlockKind::Writable => {
                    let content = self.get(&b.label)?;
                    v["tokens"] = self.tokens(&content).into();
                    v["content"] = content.into();
                }
                BlockKind::Skill | BlockKind::Searchable => {
                    let keys: Vec<String> =
                        self.entries(&b.label)?.into_iter().map(|(k, _)| k).collect();
                    v["entries"] = keys.into();
                }
            }
            out.push(v);
        }
        Ok(serde_json::Value::Array(out))
    }

    /// `system` followed by the rendered blocks: what each model call is sent.
    pub fn system_prompt(&self, system: &str) -> String {
        match self.render() {
            Ok(blocks) if !blocks.is_empty() => format!("{system}\n\n{blocks}"),
            Ok(_) => system.to_owned(),
            Err(e) => {
                crate::platform::log(&format!("think-rs: rendering the context failed: {e}"));
                system.to_owned()
            }
        }
    }
}

/// The key of an entry written by `set_context`: the slug of its title, else the slug of its
/// content and a hash of it (Think's `contextEntryKey`).
pub fn entry_key(title: Option<&str>, content: &str) -> String {
    match title.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => {
            let slug = slugify(t);
            if slug.is_empty() {
                format!("entry-{}", stable_hash(t))
            } else {
                slug
            }
        }
        None => {
            let slug = slugify(content);
            format!("{}-{}", if slug.is_empty() { "entry" } else { &slug }, stable_hash(content))
        }
    }
}

fn slugify(text: &str) -> String {
    let head: String =
        char::decode_utf16(text.encode_utf16().take(60)).map(|c| c.unwrap_or(' ')).collect();
    let lower = crate::platform::case::to_lowercase(&head);
    let mut out = String::new();
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

/// FNV-1a over UTF-16 code units, in base 36, as Think's `stableHash`.
fn stable_hash(text: &str) -> String {
    let mut hash: u32 = 2_166_136_261;
    for unit in text.encode_utf16() {
        hash ^= unit as u32;
        hash = hash.wrapping_mul(16_777_619);
    }
    let mut n = hash;
    let mut digits = Vec::new();
    loop {
        digits.push(std::char::from_digit(n % 36, 36).unwrap_or('0'));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.iter().rev().collect()
}
