// The JS-regex corpus: patterns as a model writes them for `grep`, each with inputs (single
// lines, as grep tests them). `node tests/regex-corpus/generate.mjs` writes cases.json with
// Node's result for each input (`new RegExp(pattern, flags)`, first match or null); the Rust
// side (src/tools/workspace/grep/jsregex.rs, test `regex_corpus`) must give the same.
const U = ["abc", "ABC", "123", "٣", "é", "É", "_", "-", " ", "\t", "\u00a0", "\u0085", "\ufeff", "\u2028", "\u1680", "\u180e", "\u3000", "\u212a", "\u017f", "k", "s", "x y", "a1_b", "café", "naïve", "Ⅻ", "²", "０"];
export const cases = [
  // Class escapes, outside and inside brackets, negated and not.
  ...["\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "[\\d]", "[\\D]", "[\\w]", "[\\W]", "[\\s]", "[\\S]",
    "[^\\d]", "[^\\D]", "[^\\w]", "[^\\W]", "[^\\s]", "[^\\S]", "[\\d\\s]", "[\\D\\s]", "[^\\d\\s]",
    "[^\\w\\s]", "[\\W\\d]", "[^\\W\\d]", "[\\S\\s]", "[^\\S\\s]", "[\\w-]", "[\\d-z]", "[a-\\d]",
    "[\\s\\S]x", "^\\d+$", "^\\w+$", "^\\W+$", "^\\S+$", "^\\s+$", "[\\Dé]", "[^\\Dé]"].flatMap((p) => [
    { pattern: p, flags: "g", inputs: U },
    { pattern: p, flags: "gi", inputs: U },
  ]),
  // Word boundaries (JS: ASCII word characters only).
  { pattern: "\\bcaf\\b", flags: "gi", inputs: ["café", "caf", "caf é", "xcaf"] },
  { pattern: "\\bna", flags: "gi", inputs: ["naïve", "ïna", "éna", "a na"] },
  { pattern: "ve\\b", flags: "g", inputs: ["naïve", "veé", "ve_", "ve!"] },
  { pattern: "\\Bx", flags: "g", inputs: ["ax", "éx", " x", "x"] },
  // Dot, anchors, escapes.
  { pattern: "a.b", flags: "gi", inputs: ["a b", "a\rb", "a\u2028b", "a\u0085b", "aéb", "a\u{1F600}b"] },
  { pattern: "^.$", flags: "g", inputs: ["x", "é", "\u{1F600}", ""] },
  { pattern: "\\u0041\\x42\\0", flags: "g", inputs: ["AB\0", "AB0"] },
  { pattern: "\\cI|\\cA", flags: "g", inputs: ["\u0001", "\t", "c"] },
  { pattern: "a\\/b", flags: "g", inputs: ["a/b"] },
  { pattern: "[\\b]", flags: "g", inputs: ["\b", "b"] },
  // Empty and negated-empty classes, literal brackets and braces.
  { pattern: "[^]", flags: "g", inputs: ["x", ""] },
  { pattern: "a[]", flags: "g", inputs: ["a", "a[]"] },
  { pattern: "[[]", flags: "g", inputs: ["[", "x"] },
  { pattern: "x]", flags: "g", inputs: ["x]"] },
  { pattern: "a{2}|b{1,}|c{,2}", flags: "g", inputs: ["aa", "b", "c{,2}", "a"] },
  { pattern: "function foo() {", flags: "g", inputs: ["function foo {", "function foo() {"] },
  { pattern: "[a&&b]|[~~]", flags: "g", inputs: ["&", "~", "a"] },
  { pattern: "[a--b]", flags: "g", inputs: ["-", "a", "b", "c"] },
  // Look-around and backreferences.
  { pattern: "foo(?=bar)", flags: "gi", inputs: ["foobar", "foobaz", "FOOBAR"] },
  { pattern: "(?<!\\$)\\b\\d+", flags: "g", inputs: ["$42", "x 42", "42"] },
  { pattern: "(\\w)\\1", flags: "gi", inputs: ["hello", "abc", "aA"] },
  { pattern: "(?<q>['\"]).*?\\k<q>", flags: "g", inputs: ["say 'hi'", "say \"hi'", "'a' 'b'"] },
  // Common searches.
  { pattern: "TODO|FIXME", flags: "gi", inputs: ["// todo: x", "fixme", "nothing"] },
  { pattern: "import .* from ['\"]react['\"]", flags: "g", inputs: ["import React from 'react';", "import x from \"react-dom\""] },
  { pattern: "^\\s*export (async )?function \\w+", flags: "g", inputs: ["export function f()", "  export async function g_1(", "exported function"] },
  { pattern: "\\$\\{[^}]+\\}", flags: "g", inputs: ["`${a + b}`", "${}", "$ {a}"] },
  { pattern: "[A-Z][a-z]+Error", flags: "g", inputs: ["TypeError", "typeerror", "XMLError"] },
  { pattern: "[A-Z][a-z]+Error", flags: "gi", inputs: ["TypeError", "typeerror", "Ⓐerror"] },
  { pattern: "colou?r", flags: "gi", inputs: ["Color", "COLOUR", "colr"] },
  // Case folding beyond ASCII.
  { pattern: "straße", flags: "gi", inputs: ["STRASSE", "Straße", "STRAẞE"] },
  { pattern: "σ", flags: "gi", inputs: ["Σ", "ς", "σ"] },
  { pattern: "k", flags: "gi", inputs: ["K", "\u212a"] },
  { pattern: "é", flags: "gi", inputs: ["É", "e"] },
  // Quantifiers: lazy ones are fine, a quantifier on a quantifier is not.
  { pattern: "a*?b|(?:xy)+?|c{2}?|d??", flags: "g", inputs: ["aab", "xyxy", "ccc", "d", "e"] },
  // Invalid patterns.
  ...["(", "a)", "[a", "*a", "a**", "\\", "(?<n>a)(?<n>b)", "a{2,1}", "a+??", "a{2}*", "a?+", "x|*"].map((p) => ({ pattern: p, flags: "g", inputs: ["a"] })),
];
