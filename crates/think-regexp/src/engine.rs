//! The engine behind [`RegExp`](super::RegExp): a trait that the platform implements, as
//! ripgrep's `grep-matcher` defines the matcher that `grep-regex` implements. The Workers
//! glue installs V8's irregexp (`think_worker`'s `regexp.rs`); the host uses
//! `regex`/`fancy_regex` on a translation of the JS pattern (`host`), also when nothing is
//! installed.

use std::any::Any;
use std::sync::OnceLock;

use super::{Flags, GaveUp, RegExpError, Subject};

/// Compiles patterns with JavaScript's `new RegExp(source, flags)` semantics.
pub trait Engine: Sync {
    /// Compiles `source`; a pattern JavaScript refuses is a [`RegExpError::Syntax`] with the
    /// engine's message.
    fn compile(&self, source: &str, flags: Flags) -> Result<Box<dyn Compiled>, RegExpError>;
    /// What this engine keeps per text for repeated searches (a JS string and an offset
    /// map in V8); [`Compiled`] methods find it in [`Subject::prepared`].
    fn prepare(&self, text: &str) -> Box<dyn Any>;
}

/// A pattern compiled by an [`Engine`]. Offsets are bytes of the UTF-8 text, on character
/// boundaries. The methods are those of [`RegExp`](super::RegExp), which documents them.
pub trait Compiled {
    /// Whether a match can depend on text outside its line (look-around).
    fn per_line(&self) -> bool;
    /// Whether `text` contains a match.
    fn is_match(&self, text: &str) -> Result<bool, GaveUp>;
    /// Whether `subject[start..end]` contains a match.
    fn is_match_in(&self, subject: &Subject, start: usize, end: usize) -> Result<bool, GaveUp>;
    /// The first match at or after `from`; with `candidate`, a match of a prefilter that
    /// matches at least the pattern's lines is enough.
    fn find_at(
        &self,
        subject: &Subject,
        from: usize,
        candidate: bool,
    ) -> Result<Option<(usize, usize)>, GaveUp>;
    /// The successive matches in `text`, as `matchAll`.
    fn find_all(&self, text: &str) -> Vec<(usize, usize)>;
    /// `text` with every match replaced by `replacement` taken literally.
    fn replace_all(&self, text: &str, replacement: &str) -> Result<String, GaveUp>;
}

static INSTALLED: OnceLock<&'static dyn Engine> = OnceLock::new();

/// Installs the platform's engine; the first call wins.
pub fn install(engine: &'static dyn Engine) {
    let _ = INSTALLED.set(engine);
}

/// The installed engine, or the host's.
pub(crate) fn engine() -> &'static dyn Engine {
    match INSTALLED.get() {
        Some(engine) => *engine,
        #[cfg(not(target_arch = "wasm32"))]
        None => &super::host::HostEngine,
        #[cfg(target_arch = "wasm32")]
        None => panic!(
            "no regular-expression engine is installed: call think_regexp::engine::install at start-up"
        ),
    }
}
