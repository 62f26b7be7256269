//! HTML as the quick actions return it: the rendered page turned into Markdown
//! (`browser_markdown`, and what `browser_extract` shows the model), and its links made
//! absolute (`browser_links`). A small tolerant tokenizer is enough: the browser has already
//! parsed and serialized the page, so the HTML is well formed.

use url::Url;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Text(String),
    Start { name: String, attrs: Vec<(String, String)> },
    End(String),
}

/// Decodes the character references a serializer writes (and the common named ones).
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end =
            rest[1..].find(|c: char| c == ';' || c == '&' || c.is_whitespace()).map(|i| i + 1);
        let decoded = end.filter(|&e| rest.as_bytes().get(e) == Some(&b';')).and_then(|e| {
            let name = &rest[1..e];
            let c = if let Some(num) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                u32::from_str_radix(num, 16).ok().and_then(char::from_u32)
            } else if let Some(num) = name.strip_prefix('#') {
                num.parse().ok().and_then(char::from_u32)
            } else {
                match name {
                    "amp" => Some('&'),
                    "lt" => Some('<'),
                    "gt" => Some('>'),
                    "quot" => Some('"'),
                    "apos" => Some('\''),
                    "nbsp" => Some('\u{a0}'),
                    "mdash" => Some('—'),
                    "ndash" => Some('–'),
                    "hellip" => Some('…'),
                    "copy" => Some('©'),
                    _ => None,
                }
            };
            c.map(|c| (c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

const RAW_TEXT: &[&str] = &["script", "style", "textarea", "title", "xmp", "noscript"];

fn tokenize(html: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut rest = html;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            tokens.push(Token::Text(decode_entities(rest)));
            break;
        };
        if lt > 0 {
            tokens.push(Token::Text(decode_entities(&rest[..lt])));
        }
        rest = &rest[lt..];
        if let Some(body) = rest.strip_prefix("<!--") {
            rest = body.find("-->").map(|i| &body[i + 3..]).unwrap_or("");
            continue;
        }
        if rest.starts_with("<!") || rest.starts_with("<?") {
            rest = rest.find('>').map(|i| &rest[i + 1..]).unwrap_or("");
            continue;
        }
        let closing = rest.starts_with("</");
        let name_start = if closing { 2 } else { 1 };
        let name_len = rest[name_start..]
            .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .unwrap_or(rest.len() - name_start);
        let name = rest[name_start..name_start + name_len].to_ascii_lowercase();
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            tokens.push(Token::Text("<".into()));
            rest = &rest[1..];
            continue;
        }
        let (attrs, after) = parse_attrs(&rest[name_start + name_len..]);
        rest = after;
        if closing {
            tokens.push(Token::End(name));
            continue;
        }
        let raw = RAW_TEXT.contains(&name.as_str());
        tokens.push(Token::Start { name: name.clone(), attrs });
        if raw {
            let close = format!("</{name}");
            let end = rest.to_ascii_lowercase().find(&close).unwrap_or(rest.len());
            if name == "title" || name == "textarea" {
                tokens.push(Token::Text(decode_entities(&rest[..end])));
            }
            rest = &rest[end..];
        }
    }
    tokens
}

/// Attributes up to the tag's `>`, and what follows it.
fn parse_attrs(mut s: &str) -> (Vec<(String, String)>, &str) {
    let mut attrs = Vec::new();
    loop {
        s = s.trim_start_matches(|c: char| c.is_whitespace() || c == '/');
        if s.is_empty() {
            return (attrs, s);
        }
        if let Some(rest) = s.strip_prefix('>') {
            return (attrs, rest);
        }
        let name_len = s
            .find(|c: char| c.is_whitespace() || c == '=' || c == '>' || c == '/')
            .unwrap_or(s.len());
        let name = s[..name_len].to_ascii_lowercase();
        s = s[name_len..].trim_start();
        let mut value = String::new();
        if let Some(rest) = s.strip_prefix('=') {
            let rest = rest.trim_start();
            let (v, after) = match rest.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let body = &rest[1..];
                    let end = body.find(q).unwrap_or(body.len());
                    (&body[..end], body.get(end + 1..).unwrap_or(""))
                }
                _ => {
                    let end =
                        rest.find(|c: char| c.is_whitespace() || c == '>').unwrap_or(rest.len());
                    (&rest[..end], &rest[end..])
                }
            };
            value = decode_entities(v);
            s = after;
        }
        if name.is_empty() {
            s = s.get(1..).unwrap_or("");
            continue;
        }
        attrs.push((name, value));
    }
}

fn attr<'a>(attrs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The base URL links resolve against: the page's `<base href>` over `page_url`.
fn base_url(tokens: &[Token], page_url: Option<&str>) -> Option<Url> {
    let page = page_url.and_then(|u| Url::parse(u).ok());
    let base = tokens.iter().find_map(|t| match t {
        Token::Start { name, attrs } if name == "base" => attr(attrs, "href").map(str::to_owned),
        _ => None,
    });
    match (base, page) {
        (Some(b), Some(p)) => p.join(&b).ok().or(Some(p)),
        (Some(b), None) => Url::parse(&b).ok(),
        (None, p) => p,
    }
}

fn resolve(base: Option<&Url>, href: &str) -> Option<String> {
    let href = href.trim();
    if href.is_empty()
        || href.starts_with('#')
        || href.to_ascii_lowercase().starts_with("javascript:")
    {
        return None;
    }
    let url = match base {
        Some(b) if b.scheme() != "about" => b.join(href).ok()?,
        _ => Url::parse(href).ok()?,
    };
    Some(url.to_string())
}

/// The page's links (`<a href>`, `<area href>`), absolute, in order, each once; fragments
/// and `javascript:` links are left out, as are relative links of a page with no URL.
pub fn links(html: &str, page_url: Option<&str>) -> Vec<String> {
    let tokens = tokenize(html);
    let base = base_url(&tokens, page_url);
    let mut seen = std::collections::HashSet::new();
    tokens
        .iter()
        .filter_map(|t| match t {
            Token::Start { name, attrs } if name == "a" || name == "area" => {
                resolve(base.as_ref(), attr(attrs, "href")?)
            }
            _ => None,
        })
        .filter(|u| seen.insert(u.clone()))
        .collect()
}

const SKIPPED: &[&str] =
    &["script", "style", "noscript", "template", "head", "svg", "iframe", "select", "button"];
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "nav",
    "aside",
    "form",
    "table",
    "ul",
    "ol",
    "dl",
    "figure",
    "figcaption",
    "details",
    "summary",
    "address",
    "fieldset",
];

struct Markdown {
    out: String,
    base: Option<Url>,
    skip: usize,
    pre: usize,
    lists: Vec<(bool, usize)>,
    /// Open links: their target and where their text starts in `out`.
    links: Vec<(Option<String>, usize)>,
    quotes: Vec<usize>,
    row_cells: usize,
    header_row: bool,
}

impl Markdown {
    fn block(&mut self) {
        let trimmed = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(trimmed);
        if self.out.is_empty() || self.out.ends_with("\n\n") {
            return;
        }
        self.out.push_str(if self.out.ends_with('\n') { "\n" } else { "\n\n" });
    }

    fn line(&mut self) {
        let trimmed = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(trimmed);
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    fn text(&mut self, t: &str) {
        if self.skip > 0 {
            return;
        }
        if self.pre > 0 {
            self.out.push_str(t);
            return;
        }
        let mut collapsed = String::with_capacity(t.len());
        let mut space = false;
        for c in t.chars() {
            if c.is_whitespace() && c != '\u{a0}' {
                space = true;
            } else {
                if space {
                    collapsed.push(' ');
                }
                space = false;
                collapsed.push(if c == '\u{a0}' { ' ' } else { c });
            }
        }
        if space {
            collapsed.push(' ');
        }
        let at_line_start =
            self.out.is_empty() || self.out.ends_with('\n') || self.out.ends_with(' ');
        let text = if at_line_start { collapsed.trim_start() } else { collapsed.as_str() };
        self.out.push_str(text);
    }

    fn start(&mut self, name: &str, attrs: &[(String, String)]) {
        if SKIPPED.contains(&name) {
            self.skip += 1;
            return;
        }
        if self.skip > 0 {
            return;
        }
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.block();
                let level = name[1..].parse::<usize>().unwrap_or(1);
                self.out.push_str(&"#".repeat(level));
                self.out.push(' ');
            }
            "br" => self.out.push_str("  \n"),
            "hr" => {
                self.block();
                self.out.push_str("---\n\n");
            }
            "pre" => {
                self.block();
                self.out.push_str("```\n");
                self.pre += 1;
            }
            "code" if self.pre == 0 => self.out.push('`'),
            "strong" | "b" => self.out.push_str("**"),
            "em" | "i" => self.out.push('_'),
            "blockquote" => {
                self.block();
                self.quotes.push(self.out.len());
            }
            "ul" | "ol" => {
                if self.lists.is_empty() {
                    self.block();
                } else {
                    self.line();
                }
                self.lists.push((name == "ol", 0));
            }
            "li" => {
                self.line();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some((true, n)) => {
                        *n += 1;
                        format!("{n}. ")
                    }
                    _ => "- ".to_owned(),
                };
                self.out.push_str(&"  ".repeat(depth));
                self.out.push_str(&marker);
            }
            "a" => {
                let href = attr(attrs, "href").and_then(|h| resolve(self.base.as_ref(), h));
                self.links.push((href, self.out.len()));
            }
            "img" => {
                let alt = attr(attrs, "alt").unwrap_or("");
                if let Some(src) = attr(attrs, "src").and_then(|s| resolve(self.base.as_ref(), s)) {
                    self.out.push_str(&format!("![{alt}]({src})"));
                }
            }
            "tr" => {
                self.line();
                self.row_cells = 0;
                self.header_row = false;
            }
            "th" | "td" => {
                if name == "th" {
                    self.header_row = true;
                }
                self.out.push_str(if self.row_cells == 0 { "| " } else { " | " });
                self.row_cells += 1;
            }
            _ if BLOCKS.contains(&name) => self.block(),
            _ => {}
        }
    }

    fn end(&mut self, name: &str) {
        if SKIPPED.contains(&name) {
            self.skip = self.skip.saturating_sub(1);
            return;
        }
        if self.skip > 0 {
            return;
        }
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => self.block(),
            "pre" => {
                self.pre = self.pre.saturating_sub(1);
                self.line();
                self.out.push_str("```\n\n");
            }
            "code" if self.pre == 0 => self.out.push('`'),
            "strong" | "b" => self.out.push_str("**"),
            "em" | "i" => self.out.push('_'),
            "blockquote" => {
                if let Some(start) = self.quotes.pop() {
                    let body = self.out.split_off(start);
                    let quoted: Vec<String> = body
                        .trim_end()
                        .lines()
                        .map(|l| format!("> {l}").trim_end().to_owned())
                        .collect();
                    self.out.push_str(&quoted.join("\n"));
                    self.block();
                }
            }
            "ul" | "ol" => {
                self.lists.pop();
                if self.lists.is_empty() {
                    self.block();
                }
            }
            "a" => {
                if let Some((href, start)) = self.links.pop() {
                    let text = self.out.split_off(start.min(self.out.len()));
                    let text = text.trim();
                    match href {
                        Some(h) if !text.is_empty() => self.out.push_str(&format!("[{text}]({h})")),
                        _ => self.out.push_str(text),
                    }
                }
            }
            "tr" => {
                if self.row_cells > 0 {
                    self.out.push_str(" |");
                    if self.header_row {
                        self.out.push('\n');
                        self.out.push_str(&format!("|{}", " --- |".repeat(self.row_cells)));
                    }
                }
                self.line();
            }
            _ if BLOCKS.contains(&name) => self.block(),
            _ => {}
        }
    }
}

/// The page as Markdown: headings, paragraphs, lists, links and images (absolute against
/// `page_url`), emphasis, code, quotes and tables; scripts, styles and the head are left out.
pub fn to_markdown(html: &str, page_url: Option<&str>) -> String {
    let tokens = tokenize(html);
    let mut md = Markdown {
        out: String::new(),
        base: base_url(&tokens, page_url),
        skip: 0,
        pre: 0,
        lists: Vec::new(),
        links: Vec::new(),
        quotes: Vec::new(),
        row_cells: 0,
        header_row: false,
    };
    for token in &tokens {
        match token {
            Token::Text(t) => md.text(t),
            Token::Start { name, attrs } => md.start(name, attrs),
            Token::End(name) => md.end(name),
        }
    }
    let lines: Vec<&str> = md.out.lines().map(str::trim_end).collect();
    let mut out = String::new();
    let mut blank = 0;
    for l in lines {
        if l.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(l);
        out.push('\n');
    }
    out.trim().to_owned()
}

/// The page's `<title>`, if it has one.
pub fn title(html: &str) -> Option<String> {
    let tokens = tokenize(html);
    let at =
        tokens.iter().position(|t| matches!(t, Token::Start { name, .. } if name == "title"))?;
    match tokens.get(at + 1) {
        Some(Token::Text(t)) => Some(t.trim().to_owned()),
        _ => None,
    }
}
