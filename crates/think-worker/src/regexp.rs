//! The regular-expression engine of `think_core::regexp` in the Worker: V8's own `RegExp`. A pattern is compiled twice: without `g`/`m` for
//! tests of one string (what Think's tools do, line by line), and with `g` (and `m` when
//! asked) for searches over a whole text, which resume at `lastIndex`. Offsets in JS are
//! UTF-16 code units; [`Subject`] maps them to byte offsets by walking forward from the last
//! position it mapped (searches move forward, so a text is walked about once).

use js_sys::JsString;
use std::cell::Cell;
use think_core::regexp::engine::{Compiled, Engine};
use think_core::regexp::{Flags, GaveUp, RegExpError, Subject};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

#[wasm_bindgen]
extern "C" {
    /// `RegExp`, imported here (rather than `js_sys::RegExp`) so that its constructor reports
    /// a `SyntaxError` and its methods take a JS string made once per text.
    #[wasm_bindgen(js_name = RegExp)]
    type Native;
    #[wasm_bindgen(constructor, catch, js_class = "RegExp")]
    fn new(source: &str, flags: &str) -> Result<Native, JsValue>;
    #[wasm_bindgen(method)]
    fn test(this: &Native, text: &JsString) -> bool;
    /// The match array, or `null`.
    #[wasm_bindgen(method)]
    fn exec(this: &Native, text: &JsString) -> JsValue;
    #[wasm_bindgen(method, getter = lastIndex)]
    fn last_index(this: &Native) -> u32;
    #[wasm_bindgen(method, setter = lastIndex)]
    fn set_last_index(this: &Native, at: u32);
    /// What `exec` returns when it finds a match.
    type MatchArray;
    /// Where the match starts.
    #[wasm_bindgen(method, getter)]
    fn index(this: &MatchArray) -> u32;
}

/// V8's engine.
pub struct V8Engine;

impl Engine for V8Engine {
    fn compile(&self, source: &str, flags: Flags) -> Result<Box<dyn Compiled>, RegExpError> {
        Ok(Box::new(RegExp::new(source, flags)?))
    }

    fn prepare(&self, text: &str) -> Box<dyn std::any::Any> {
        Box::new(Prepared::new(text))
    }
}

/// Installs [`V8Engine`] (idempotent).
pub fn install() {
    think_core::regexp::engine::install(&V8Engine);
}

/// A text's JS string, with the byte ↔ UTF-16 mapping.
struct Prepared {
    js: JsString,
    /// An ASCII text has equal offsets in both.
    ascii: bool,
    /// A byte offset and the UTF-16 offset of the same place, to walk from.
    mark: Cell<(usize, u32)>,
}

/// The text of `s` and what [`V8Engine::prepare`] made of it.
fn parts<'s, 't>(s: &'s Subject<'t>) -> (&'t str, &'s Prepared) {
    let prepared = s.prepared().downcast_ref::<Prepared>();
    (s.text(), prepared.expect("a subject prepared by another engine"))
}

impl Prepared {
    /// `text` as a JS string, with the mapping at its start.
    fn new(text: &str) -> Prepared {
        Prepared { js: JsString::from(text), ascii: text.is_ascii(), mark: Cell::new((0, 0)) }
    }

    /// The UTF-16 offset of byte `at` (a character boundary) of `text`.
    fn unit_of(&self, text: &str, at: usize) -> u32 {
        if self.ascii {
            return at as u32;
        }
        let (mut byte, mut unit) = self.mark.get();
        if at < byte {
            (byte, unit) = (0, 0);
        }
        for c in text[byte..at].chars() {
            unit += c.len_utf16() as u32;
        }
        byte = at;
        self.mark.set((byte, unit));
        unit
    }

    /// The byte offset of UTF-16 offset `at`; inside a surrogate pair (a match of one code
    /// unit without `u`), the offset after the character.
    fn byte_of(&self, text: &str, at: u32) -> usize {
        if self.ascii {
            return at as usize;
        }
        let (mut byte, mut unit) = self.mark.get();
        if at < unit {
            (byte, unit) = (0, 0);
        }
        let mut chars = text[byte..].chars();
        while unit < at {
            let Some(c) = chars.next() else { break };
            unit += c.len_utf16() as u32;
            byte += c.len_utf8();
        }
        self.mark.set((byte, unit));
        byte
    }
}

/// A compiled pattern (see `think_core::regexp::RegExp`, whose methods these are).
struct RegExp {
    /// Without `g` and `m`: for `test`.
    single: Native,
    /// With `g` (and `m` if asked): for searches from `lastIndex`.
    global: Native,
    per_line: bool,
}

fn flags_of(flags: Flags, global: bool) -> String {
    let mut out = String::new();
    for (on, c) in [
        (global, 'g'),
        (flags.ignore_case, 'i'),
        (global && flags.multi_line, 'm'),
        (flags.unicode, 'u'),
    ] {
        if on {
            out.push(c);
        }
    }
    out
}

fn compile(source: &str, flags: &str) -> Result<Native, RegExpError> {
    Native::new(source, flags).map_err(|e| {
        let message = js_sys::Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string());
        RegExpError::Syntax(
            message.unwrap_or_else(|| format!("Invalid regular expression: /{source}/")),
        )
    })
}

impl RegExp {
    /// Compiles `source` with `flags`.
    fn new(source: &str, flags: Flags) -> Result<RegExp, RegExpError> {
        let single = compile(source, &flags_of(flags, false))?;
        let global = compile(source, &flags_of(flags, true))?;
        // Look-around sees past the line a match is on; anything else matches in the whole
        // text wherever it matches on its line alone. Over-counting (an escaped `(`) only
        // costs speed.
        let per_line = ["(?=", "(?!", "(?<=", "(?<!"].iter().any(|l| source.contains(l));
        Ok(RegExp { single, global, per_line })
    }

    /// The UTF-16 range of the first match from `at`.
    fn next(&self, js: &JsString, at: u32) -> Option<(u32, u32)> {
        self.global.set_last_index(at);
        let found = self.global.exec(js);
        if found.is_null() {
            return None;
        }
        let start = found.unchecked_into::<MatchArray>().index();
        Some((start, self.global.last_index()))
    }
}

impl Compiled for RegExp {
    /// Whether candidates must be found line by line.
    fn per_line(&self) -> bool {
        self.per_line
    }

    /// Whether `text` contains a match.
    fn is_match(&self, text: &str) -> Result<bool, GaveUp> {
        Ok(self.single.test(&JsString::from(text)))
    }

    /// Whether `s[start..end]` contains a match.
    fn is_match_in(&self, s: &Subject, start: usize, end: usize) -> Result<bool, GaveUp> {
        let (text, p) = parts(s);
        if start == 0 && end == text.len() {
            return Ok(self.single.test(&p.js));
        }
        let (a, b) = (p.unit_of(text, start), p.unit_of(text, end));
        Ok(self.single.test(&p.js.substring(a, b)))
    }

    /// The first match from `from`; a candidate is the match itself (`_candidate`).
    fn find_at(
        &self,
        s: &Subject,
        from: usize,
        _candidate: bool,
    ) -> Result<Option<(usize, usize)>, GaveUp> {
        let (text, p) = parts(s);
        if from > text.len() {
            return Ok(None);
        }
        let found = self.next(&p.js, p.unit_of(text, from));
        Ok(found.map(|(a, b)| (p.byte_of(text, a), p.byte_of(text, b))))
    }

    /// The successive matches in `text`.
    fn find_all(&self, text: &str) -> Vec<(usize, usize)> {
        let p = Prepared::new(text);
        let mut out = Vec::new();
        let mut at = 0;
        while at <= p.js.length() {
            let Some((a, b)) = self.next(&p.js, at) else { break };
            out.push((p.byte_of(text, a), p.byte_of(text, b)));
            // An empty match moves on by one code unit, as `matchAll` does.
            at = if b == a { b + 1 } else { b };
        }
        out
    }

    /// `text` with every match replaced literally.
    fn replace_all(&self, text: &str, replacement: &str) -> Result<String, GaveUp> {
        // `$` is the only special character of a replacement string; `$$` is a literal one.
        let literal = replacement.replace('$', "$$");
        let js = JsString::from(text);
        self.global.set_last_index(0);
        Ok(String::from(js.replace_by_pattern(self.global.unchecked_ref(), &literal)))
    }
}
