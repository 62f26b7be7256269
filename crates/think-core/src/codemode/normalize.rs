//! Turns what models actually send into one async function body: a Markdown fence is
//! stripped, an `async () => { … }` arrow (or `async function`) is called as is, and a bare
//! block of statements is wrapped, its last expression statement becoming the result.
//!
//! This is a lexer, not a parser: it tracks strings, template literals, comments, regular
//! expression literals and bracket depth, which is enough to find top-level statements.
//! Syntax errors are left for the sandbox's own parser, which reports them with a position.

use std::collections::VecDeque;

/// How the code was understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeShape {
    /// One function expression, called with no arguments.
    Function,
    /// Statements, wrapped into a function body.
    Statements,
}

/// The normalized code: the body of an `async () => { … }` that runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The body (JavaScript statements).
    pub body: String,
    /// What the input was.
    pub shape: CodeShape,
}

/// Normalizes model-written code (see the module docs).
pub fn normalize_code(code: &str) -> Normalized {
    let code = strip_fence(code);
    let trimmed = code.trim();
    let expr = trimmed.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    if is_function_expression(expr) {
        return Normalized {
            body: format!("return await (\n{expr}\n)();"),
            shape: CodeShape::Function,
        };
    }
    let statements = top_level_statements(trimmed);
    let body = match statements.last() {
        Some(&(start, end)) if is_expression_start(&trimmed[start..end]) => {
            let last =
                trimmed[start..end].trim_end_matches(|c: char| c == ';' || c.is_whitespace());
            format!("{}\nreturn (\n{last}\n);", &trimmed[..start])
        }
        _ => trimmed.to_owned(),
    };
    Normalized { body, shape: CodeShape::Statements }
}

/// The content of the first Markdown code fence, or the text itself when there is none.
pub fn strip_fence(code: &str) -> &str {
    let Some(open) = code.find("```") else { return code };
    // Only a fence that opens a line counts.
    if !code[..open].trim_end_matches([' ', '\t']).is_empty()
        && !code[..open].trim_end_matches([' ', '\t']).ends_with('\n')
    {
        return code;
    }
    let after = &code[open + 3..];
    let Some(line_end) = after.find('\n') else { return code };
    let info = after[..line_end].trim();
    if info.contains(char::is_whitespace) && !info.is_empty() {
        return code;
    }
    let body = &after[line_end + 1..];
    match body.find("\n```").map(|i| i + 1).or_else(|| body.starts_with("```").then_some(0)) {
        Some(close) => &body[..close],
        None => body.trim_end_matches('`'),
    }
}

/// Whether `s` is exactly one function expression: `async () => …`, `async x => …`,
/// `async function …`, `() => …`, optionally in parentheses.
fn is_function_expression(s: &str) -> bool {
    let s = s.trim();
    if s.starts_with('(') {
        if let Some(close) = matching_close(s, 0) {
            if close == s.len() - 1 {
                return is_function_expression(&s[1..close]);
            }
        }
    }
    let rest = match s.strip_prefix("async") {
        Some(r) if r.starts_with(|c: char| c.is_whitespace() || c == '(') => r.trim_start(),
        _ => s,
    };
    if let Some(f) = rest.strip_prefix("function") {
        // `function name(…) { … }` must end where its body closes.
        let Some(brace) = f.find('{') else { return false };
        let offset = s.len() - f.len() + brace;
        return matching_close(s, offset) == Some(s.len() - 1);
    }
    // An arrow: parameters, `=>`, then a body that runs to the end.
    let params_end = if rest.starts_with('(') {
        let offset = s.len() - rest.len();
        match matching_close(s, offset) {
            Some(c) => c + 1,
            None => return false,
        }
    } else {
        let ident = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'));
        match ident {
            Some(n) if n > 0 => s.len() - rest.len() + n,
            _ => return false,
        }
    };
    let after = s[params_end..].trim_start();
    let Some(body) = after.strip_prefix("=>") else { return false };
    let body = body.trim_start();
    if body.starts_with('{') {
        let offset = s.len() - body.len();
        return matching_close(s, offset) == Some(s.len() - 1);
    }
    // An expression body: it must not be followed by more top-level statements.
    top_level_statements(body).len() == 1
}

/// The byte index of the bracket closing the one at `open`.
fn matching_close(s: &str, open: usize) -> Option<usize> {
    let mut lexer = Lexer::new(s);
    let mut depth_at_open = None;
    while let Some(tok) = lexer.next() {
        match tok {
            Tok::Open(i) if i == open => depth_at_open = Some(lexer.depth - 1),
            Tok::Close(i) if Some(lexer.depth) == depth_at_open => return Some(i),
            _ => {}
        }
    }
    None
}

/// Byte ranges of the top-level statements of `s` (comments and blank space between them
/// are not part of any range).
pub fn top_level_statements(s: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut lexer = Lexer::new(s);
    let mut last_sig: Option<(usize, char)> = None;
    let mut boundary_after_newline = false;
    while let Some(tok) = lexer.next() {
        match tok {
            Tok::Newline(i) if lexer.depth == 0 => {
                if let (Some(st), Some((_, c))) = (start, last_sig) {
                    let continues_line = ",+-*/%&|^!~?:=<>.([{".contains(c);
                    if boundary_after_newline || !continues_line {
                        let next = s[i..].trim_start();
                        let next_continues = next
                            .starts_with(|c: char| ".,)]}?:+-*/%&|^=<>".contains(c))
                            && !next.starts_with("++")
                            && !next.starts_with("--");
                        if !next_continues {
                            out.push((st, i));
                            start = None;
                        }
                    }
                }
                boundary_after_newline = false;
            }
            Tok::Newline(_) => {}
            Tok::Sig(i, c) => {
                if start.is_none() {
                    start = Some(i);
                }
                last_sig = Some((i, c));
                if c == ';' && lexer.depth == 0 {
                    if let Some(st) = start.take() {
                        out.push((st, i + 1));
                    }
                }
                boundary_after_newline = false;
            }
            Tok::Open(i) => {
                if start.is_none() {
                    start = Some(i);
                }
                last_sig = Some((i, s[i..].chars().next().unwrap_or('(')));
                boundary_after_newline = false;
            }
            Tok::Close(i) => {
                last_sig = Some((i, ')'));
                // A block closing at the top level ends its statement at the newline.
                boundary_after_newline = lexer.depth == 0 && s[i..].starts_with('}');
            }
        }
    }
    if let Some(st) = start {
        out.push((st, s.trim_end().len().max(st)));
    }
    out
}

/// Whether a statement starts like an expression (so it can be returned).
fn is_expression_start(stmt: &str) -> bool {
    let stmt = stmt.trim_start();
    const KEYWORDS: &[&str] = &[
        "const", "let", "var", "if", "for", "while", "do", "switch", "try", "return", "throw",
        "function", "class", "import", "export", "break", "continue", "debugger", "with",
    ];
    if stmt.starts_with('{') || stmt.starts_with(';') || stmt.is_empty() {
        return false;
    }
    let word: String = stmt.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    if word == "async" && stmt[5..].trim_start().starts_with("function") {
        return false;
    }
    !KEYWORDS.contains(&word.as_str())
}

enum Tok {
    /// A significant character outside brackets' open/close (offset, char).
    Sig(usize, char),
    Open(usize),
    Close(usize),
    Newline(usize),
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Code,
    /// Inside `${ … }` of a template: back to the template when its brace closes.
    TemplateExpr,
}

/// Walks JavaScript source, skipping strings, comments, templates and regex literals.
struct Lexer<'a> {
    s: &'a str,
    bytes: &'a [u8],
    i: usize,
    depth: usize,
    /// Open brackets; `TemplateExpr` marks a `${` that returns into a template.
    stack: Vec<Mode>,
    /// The last significant character, to tell a regex from a division.
    prev: Option<u8>,
    prev_word: String,
}

impl<'a> Lexer<'a> {
    fn new(s: &'a str) -> Self {
        Self {
            s,
            bytes: s.as_bytes(),
            i: 0,
            depth: 0,
            stack: Vec::new(),
            prev: None,
            prev_word: String::new(),
        }
    }

    fn regex_allowed(&self) -> bool {
        match self.prev {
            None => true,
            Some(c) => {
                b"(,=:[!&|?{};+-*%<>~^".contains(&c)
                    || matches!(
                        self.prev_word.as_str(),
                        "return"
                            | "typeof"
                            | "case"
                            | "in"
                            | "of"
                            | "void"
                            | "await"
                            | "yield"
                            | "delete"
                    )
            }
        }
    }

    /// Skips a template literal body from just after its backtick (or a closing `}` of an
    /// expression); returns true when it stopped at `${`.
    fn skip_template(&mut self) -> bool {
        while self.i < self.bytes.len() {
            match self.bytes[self.i] {
                b'\\' => self.i += 2,
                b'`' => {
                    self.i += 1;
                    return false;
                }
                b'$' if self.bytes.get(self.i + 1) == Some(&b'{') => {
                    self.i += 2;
                    return true;
                }
                _ => self.i += 1,
            }
        }
        false
    }

    fn next(&mut self) -> Option<Tok> {
        while self.i < self.bytes.len() {
            let c = self.bytes[self.i];
            let at = self.i;
            match c {
                b'\n' => {
                    self.i += 1;
                    return Some(Tok::Newline(at));
                }
                b' ' | b'\t' | b'\r' => self.i += 1,
                b'/' if self.bytes.get(at + 1) == Some(&b'/') => {
                    while self.i < self.bytes.len() && self.bytes[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                b'/' if self.bytes.get(at + 1) == Some(&b'*') => {
                    self.i =
                        self.s[at + 2..].find("*/").map_or(self.bytes.len(), |e| at + 2 + e + 2);
                }
                b'/' if self.regex_allowed() => {
                    self.i += 1;
                    let mut class = false;
                    while self.i < self.bytes.len() {
                        match self.bytes[self.i] {
                            b'\\' => self.i += 1,
                            b'[' => class = true,
                            b']' => class = false,
                            b'/' if !class => break,
                            b'\n' => break,
                            _ => {}
                        }
                        self.i += 1;
                    }
                    self.i += 1;
                    while self.i < self.bytes.len() && self.bytes[self.i].is_ascii_alphabetic() {
                        self.i += 1;
                    }
                    self.prev = Some(b'a');
                    self.prev_word.clear();
                    return Some(Tok::Sig(at, 'r'));
                }
                b'"' | b'\'' => {
                    self.i += 1;
                    while self.i < self.bytes.len()
                        && self.bytes[self.i] != c
                        && self.bytes[self.i] != b'\n'
                    {
                        if self.bytes[self.i] == b'\\' {
                            self.i += 1;
                        }
                        self.i += 1;
                    }
                    self.i += 1;
                    self.prev = Some(b'"');
                    self.prev_word.clear();
                    return Some(Tok::Sig(at, '"'));
                }
                b'`' => {
                    self.i += 1;
                    self.prev = Some(b'"');
                    self.prev_word.clear();
                    if self.skip_template() {
                        self.stack.push(Mode::TemplateExpr);
                        self.depth += 1;
                        self.prev = Some(b'{');
                        return Some(Tok::Open(at));
                    }
                    return Some(Tok::Sig(at, '"'));
                }
                b'(' | b'[' | b'{' => {
                    self.i += 1;
                    self.stack.push(Mode::Code);
                    self.depth += 1;
                    self.prev = Some(c);
                    self.prev_word.clear();
                    return Some(Tok::Open(at));
                }
                b')' | b']' | b'}' => {
                    self.i += 1;
                    let mode = self.stack.pop().unwrap_or(Mode::Code);
                    self.depth = self.depth.saturating_sub(1);
                    self.prev = Some(if c == b'}' { b'}' } else { b')' });
                    self.prev_word.clear();
                    if mode == Mode::TemplateExpr && c == b'}' && self.skip_template() {
                        self.stack.push(Mode::TemplateExpr);
                        self.depth += 1;
                        // The template goes on: report it as one closing and one opening.
                        return Some(Tok::Close(at));
                    }
                    if c == b')' {
                        // `if (x) /re/.test(y)` is rare; `(a) / b` is division.
                        self.prev = Some(b'a');
                    }
                    return Some(Tok::Close(at));
                }
                _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 => {
                    let start = self.i;
                    while self.i < self.bytes.len()
                        && (self.bytes[self.i].is_ascii_alphanumeric()
                            || self.bytes[self.i] == b'_'
                            || self.bytes[self.i] == b'$'
                            || self.bytes[self.i] >= 0x80)
                    {
                        self.i += 1;
                    }
                    self.prev = Some(b'a');
                    self.prev_word = self.s.get(start..self.i).unwrap_or("").to_owned();
                    return Some(Tok::Sig(at, 'a'));
                }
                _ => {
                    self.i += 1;
                    self.prev = Some(c);
                    self.prev_word.clear();
                    return Some(Tok::Sig(at, c as char));
                }
            }
        }
        None
    }
}

/// The guard a loop calls where `await` is allowed (the code's own async body): it throws
/// past the deadline and now and then yields to the event loop, so the object keeps serving
/// other requests while a CPU-bound loop runs.
pub const TICK: &str = "(await __cm_tick())";
/// The guard a loop calls inside a nested (maybe synchronous) function: it only throws.
pub const GUARD: &str = "__cm_guard()";

#[derive(Clone, PartialEq)]
enum Frame {
    /// `(`; for a loop header, its keyword.
    Paren {
        before: Option<String>,
        header: Option<&'static str>,
        semis: Vec<usize>,
        of_in: bool,
        /// The parameters of an `async` function or method.
        is_async: bool,
    },
    Bracket,
    Brace {
        function: bool,
        is_async: bool,
    },
    Template,
}

/// Adds a deadline guard to every loop: `while (c)` becomes `while (GUARD && (c))`,
/// `for (a; c; b)` gets the guard in its condition, and a `for … of/in` body starts with
/// it. Loops in the code's own body use [`TICK`] (which may `await`), loops in nested
/// functions [`GUARD`]. This is what stops `while (true) {}` where the isolate has no CPU
/// limit of its own (local workerd ignores Worker Loader's `limits.cpuMs`).
pub fn guard_loops(body: &str) -> String {
    let mut inserts: Vec<(usize, String)> = Vec::new();
    let mut lexer = Lexer::new(body);
    let mut frames: Vec<Frame> = Vec::new();
    let mut last_word: Option<String> = None;
    let mut last_chars: [char; 2] = [' ', ' '];
    let mut loop_kw: Option<&'static str> = None;
    let mut body_guard_pending: Option<String> = None;
    let mut depth_before;
    // The last few significant tokens, to tell `async (…) =>`, `async x =>`, `async f(…)`.
    let mut recent: VecDeque<String> = VecDeque::new();
    let mut last_paren_async = false;
    let push = |recent: &mut VecDeque<String>, t: String| {
        if recent.len() == 5 {
            recent.pop_front();
        }
        recent.push_back(t);
    };
    let back = |recent: &VecDeque<String>, n: usize| -> bool {
        recent.len() >= n && recent[recent.len() - n] == "async"
    };
    // `await` is allowed where the innermost function is async (or is the code's own body).
    let guard_here = |frames: &[Frame]| {
        let innermost = frames.iter().rev().find_map(|f| match f {
            Frame::Brace { function: true, is_async } => Some(*is_async),
            _ => None,
        });
        if innermost.unwrap_or(true) {
            TICK
        } else {
            GUARD
        }
    };
    loop {
        depth_before = lexer.depth;
        let Some(tok) = lexer.next() else { break };
        match tok {
            Tok::Newline(_) => continue,
            Tok::Sig(i, c) => {
                // Only a `{` right after the header is the loop's body.
                body_guard_pending = None;
                if c == 'a' {
                    let word = lexer.prev_word.clone();
                    let property = last_chars[1] == '.';
                    match word.as_str() {
                        "while" | "for" if !property => {
                            loop_kw = Some(if word == "for" { "for" } else { "while" })
                        }
                        "await" if loop_kw == Some("for") => {}
                        "of" | "in" => {
                            if let Some(Frame::Paren { header: Some("for"), of_in, .. }) =
                                frames.last_mut()
                            {
                                *of_in = true;
                            }
                            loop_kw = None;
                        }
                        _ => loop_kw = None,
                    }
                    push(&mut recent, word.clone());
                    last_paren_async = false;
                    last_word = Some(word);
                    last_chars = [last_chars[1], 'a'];
                    continue;
                }
                if c == ';' {
                    if let Some(Frame::Paren { header: Some("for"), semis, .. }) = frames.last_mut()
                    {
                        semis.push(i);
                    }
                }
                if c != 'r' && c != '"' {
                    loop_kw = None;
                }
                if c != '=' && c != '>' {
                    last_paren_async = false;
                }
                push(&mut recent, c.to_string());
                last_word = None;
                last_chars = [last_chars[1], c];
            }
            Tok::Open(i) => {
                let ch = body[i..].chars().next().unwrap_or('(');
                let frame = match ch {
                    '(' => Frame::Paren {
                        before: last_word.clone(),
                        header: loop_kw.take(),
                        semis: Vec::new(),
                        of_in: false,
                        is_async: back(&recent, 1)
                            || back(&recent, 2)
                            || (back(&recent, 3) && recent[recent.len() - 2] == "function"),
                    },
                    '[' => Frame::Bracket,
                    '{' => {
                        let arrow = last_chars == ['=', '>'];
                        let after_params = last_chars[1] == ')';
                        let function =
                            arrow || (after_params && lexer_prev_paren_is_call(&last_word));
                        // `async (…) => {`, `async f(…) {`, or `async x => {`.
                        let is_async =
                            function && (last_paren_async || (arrow && back(&recent, 4)));
                        Frame::Brace { function, is_async }
                    }
                    _ => Frame::Template,
                };
                if let (Frame::Brace { .. }, Some(g)) = (&frame, body_guard_pending.take()) {
                    inserts.push((i + 1, format!(" {g};")));
                }
                frames.push(frame);
                push(&mut recent, ch.to_string());
                last_paren_async = false;
                last_word = None;
                last_chars = [last_chars[1], ch];
                loop_kw = None;
            }
            Tok::Close(i) => {
                if lexer.depth == depth_before {
                    // A template's `}` … `${`: the same expression frame goes on.
                    continue;
                }
                let frame = frames.pop();
                let ch = body[i..].chars().next().unwrap_or(')');
                body_guard_pending = None;
                if let Some(Frame::Paren { header: Some(kw), semis, of_in, .. }) = &frame {
                    let g = guard_here(&frames);
                    let open = header_open(body, i);
                    match (*kw, semis.as_slice(), of_in) {
                        ("while", _, _) => {
                            inserts.push((open + 1, format!("{g} && (")));
                            inserts.push((i, ")".into()));
                        }
                        ("for", [a, b], false) => {
                            if body[a + 1..*b].trim().is_empty() {
                                inserts.push((a + 1, format!(" {g}")));
                            } else {
                                inserts.push((a + 1, format!(" {g} && (")));
                                inserts.push((*b, ")".into()));
                            }
                        }
                        ("for", _, true) => body_guard_pending = Some(g.to_owned()),
                        _ => {}
                    }
                }
                last_paren_async = matches!(frame, Some(Frame::Paren { is_async: true, .. }));
                push(&mut recent, ch.to_string());
                // What a `{` right after this `)` opens depends on the word before its `(`.
                last_word = match frame {
                    Some(Frame::Paren { before, .. }) => before.map(|b| format!("){b}")),
                    _ => None,
                };
                last_chars = [last_chars[1], if ch == '}' { '}' } else { ')' }];
            }
        }
    }
    crate::platform::sort::sort_by_key(&mut inserts, |b| std::cmp::Reverse(b.0));
    let mut out = body.to_owned();
    for (at, text) in inserts {
        out.insert_str(at, &text);
    }
    out
}

/// Whether a `{` after `)` opens a function body: it does unless the `(` followed a control
/// keyword (`if (…) {`, `for (…) {`, `catch (e) {`, …). `marker` is `)<word before (>`.
fn lexer_prev_paren_is_call(marker: &Option<String>) -> bool {
    const CONTROL: &[&str] = &["if", "for", "while", "switch", "catch", "with", "await"];
    match marker.as_deref().and_then(|m| m.strip_prefix(')')) {
        Some(word) => !CONTROL.contains(&word),
        None => marker.is_none(),
    }
}

/// The `(` matching the `)` at `close`.
fn header_open(s: &str, close: usize) -> usize {
    let mut lexer = Lexer::new(s);
    let mut opens: Vec<usize> = Vec::new();
    let mut depth_before;
    loop {
        depth_before = lexer.depth;
        match lexer.next() {
            Some(Tok::Open(i)) => opens.push(i),
            Some(Tok::Close(i)) if lexer.depth != depth_before => {
                let open = opens.pop().unwrap_or(0);
                if i == close {
                    return open;
                }
            }
            Some(_) => {}
            None => return 0,
        }
    }
}
