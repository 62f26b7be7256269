// A small syntax highlighter for the file viewer: comments, strings, numbers and keywords by
// file extension, as React-ready tokens. It is not a parser; it keeps web/dist small.

const C_LIKE = { line: "//", block: ["/*", "*/"] };
const HASH = { line: "#" };
const LANGS = {
  js: { ...C_LIKE, kw: "async await break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield" },
  rs: { ...C_LIKE, kw: "as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while Some None Ok Err" },
  py: { ...HASH, kw: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield" },
  sh: { ...HASH, kw: "case do done elif else esac export fi for function if in local return then until while echo cd set" },
  json: { kw: "true false null" },
  toml: { ...HASH, kw: "true false" },
  css: { block: ["/*", "*/"], kw: "" },
  go: { ...C_LIKE, kw: "break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false" },
};
const ALIASES = { mjs: "js", cjs: "js", jsx: "js", ts: "js", tsx: "js", bash: "sh", yaml: "toml", yml: "toml", jsonc: "json", c: "go", h: "go", java: "go" };

/** The language table for `path`, or null for plain text. */
export function languageOf(path) {
  const ext = path.split("/").pop().split(".").pop().toLowerCase();
  const name = ALIASES[ext] ?? ext;
  return LANGS[name] ? name : null;
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

function tokenizer(lang) {
  const parts = [];
  if (lang.block) parts.push(`(?<comment>${escape(lang.block[0])}[\\s\\S]*?(?:${escape(lang.block[1])}|$))`);
  if (lang.line) parts.push(`(?<line>${escape(lang.line)}[^\\n]*)`);
  parts.push(`(?<string>"(?:[^"\\\\\\n]|\\\\.)*"?|'(?:[^'\\\\\\n]|\\\\.)*'?|\`(?:[^\`\\\\]|\\\\.)*\`?)`);
  parts.push(`(?<number>\\b\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?\\b|\\b0[xX][\\da-fA-F]+\\b)`);
  if (lang.kw) parts.push(`(?<keyword>\\b(?:${lang.kw.split(" ").join("|")})\\b)`);
  return new RegExp(parts.join("|"), "g");
}

const cache = new Map();

/** Splits `text` into `[{kind, text}]` tokens (kind null for plain text). */
export function highlight(text, langName) {
  const lang = LANGS[langName];
  if (!lang) return [{ kind: null, text }];
  if (!cache.has(langName)) cache.set(langName, tokenizer(lang));
  const re = cache.get(langName);
  re.lastIndex = 0;
  const out = [];
  let at = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > at) out.push({ kind: null, text: text.slice(at, m.index) });
    const g = m.groups;
    const kind = g.comment !== undefined || g.line !== undefined ? "comment" : g.string !== undefined ? "string" : g.number !== undefined ? "number" : "keyword";
    out.push({ kind, text: m[0] });
    at = m.index + m[0].length;
  }
  if (at < text.length) out.push({ kind: null, text: text.slice(at) });
  return out;
}
