// Workloads for the workspace tools. Each runs the same tool inputs on both sides (see
// bench/run.mjs for the format); the data is generated here, once, so both get identical input.

const KB = 1024;

/** A small deterministic PRNG (mulberry32), so every run sees the same files. */
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  "let const return value index buffer stream token parse render state query cache fetch " +
  "merge split join update delete insert select order group limit offset result error " +
  "async await yield match struct impl trait enum type alias module import export default"
).split(" ");

/** ~10 KB of code-like text. File i carries a unique marker line (for edits), "needle" in
 * every 20th file, and a `fn_NNN(x, y)` call in every 10th (for the regex). */
export function fileContent(i) {
  const rand = rng(i + 1);
  const lines = [`// file ${i}`, `const marker_${i} = ${i};`];
  let size = lines.join("\n").length;
  let n = 0;
  while (size < 10 * KB) {
    const words = Array.from({ length: 6 + Math.floor(rand() * 6) }, () => WORDS[Math.floor(rand() * WORDS.length)]);
    let line = `${"  ".repeat(n % 3)}${words.join(" ")};`;
    if (n === 40 && i % 20 === 0) line = `  // the needle is here in file ${i}`;
    if (n === 80 && i % 10 === 0) line = `  result = fn_${String(i).padStart(3, "0").slice(-3)}(x, y);`;
    lines.push(line);
    size += line.length + 1;
    n++;
  }
  return lines.join("\n").slice(0, 10 * KB);
}

const FILES = Array.from({ length: 1000 }, (_, i) => ({
  path: `/data/d${String(i % 20).padStart(2, "0")}/f${String(i).padStart(4, "0")}.txt`,
  content: fileContent(i),
}));

const EXTS = ["md", "ts", "txt", "json", "rs", "js", "css", "html", "toml", "yaml"];
const TREE = [];
for (let a = 0; a < 10; a++)
  for (let b = 0; b < 10; b++)
    for (let c = 0; c < 10; c++)
      for (let x = 0; x < 10; x++) TREE.push({ path: `/tree/a${a}/b${b}/c${c}/x${x}.${EXTS[(a + b + c + x) % 10]}`, content: "" });

const FLAT = Array.from({ length: 1000 }, (_, i) => ({ path: `/flat/entry-${String(i).padStart(4, "0")}.txt`, content: `entry ${i}\n` }));

export default {
  name: "workspace tools",
  workloads: [
    {
      name: "write 1,000 × 10 KB",
      tool: "write",
      fresh: true,
      goal: 2,
      floorGoal: 1.25,
      inputs: FILES.map((f) => ({ path: f.path, content: f.content })),
    },
    {
      name: "read 1,000 files",
      tool: "read",
      setup: FILES,
      goal: 2,
      floorGoal: 1.25,
      inputs: FILES.map((f) => ({ path: f.path })),
    },
    {
      // 200 edits, then 200 that undo them, five times over: every edit is an exact,
      // unique replacement, and the run is long enough for the millisecond clock.
      name: "edit 200 files (400 edits)",
      tool: "edit",
      fresh: true,
      setup: FILES,
      goal: 2,
      floorGoal: 1.25,
      iterations: 5,
      inputs: [
        ...FILES.slice(0, 200).map((f, i) => ({
          path: f.path,
          old_string: `const marker_${i} = ${i};`,
          new_string: `const marker_${i} = ${i + 1};`,
        })),
        ...FILES.slice(0, 200).map((f, i) => ({
          path: f.path,
          old_string: `const marker_${i} = ${i + 1};`,
          new_string: `const marker_${i} = ${i};`,
        })),
      ],
    },
    {
      name: "grep literal (1,000 files)",
      tool: "grep",
      setup: FILES,
      goal: 3,
      iterations: 3,
      rustOptions: { indexAlarm: true },
      inputs: [{ query: "the needle is here", fixedString: true }],
    },
    {
      name: "grep regex (1,000 files)",
      tool: "grep",
      setup: FILES,
      goal: 3,
      iterations: 3,
      rustOptions: { indexAlarm: true },
      inputs: [{ query: "fn_\\d{3}\\(x, y\\)" }],
    },
    // The rows above find grep's trigram index built by the alarm their set-up's writes set
    // (as a user's next turn does), and keep their set-up object across runs. The next rows
    // time the first search after the files were written, on a fresh object: once that
    // alarm has run, and before it ran, when the search reads every file and indexes an
    // eighth of the text (at least 1 MB) as it goes.
    ...[
      ["grep literal", { query: "the needle is here", fixedString: true }],
      ["grep regex", { query: "fn_\\d{3}\\(x, y\\)" }],
    ].flatMap(([name, input]) => [
      {
        name: `${name}, first after the writes and the index alarm`,
        tool: "grep",
        fresh: true,
        setup: FILES,
        rustOptions: { indexAlarm: true },
        warmup: 1,
        reps: 3,
        inputs: [input],
      },
      {
        name: `${name}, first after the writes, before the alarm (index cold)`,
        tool: "grep",
        fresh: true,
        setup: FILES,
        warmup: 1,
        reps: 3,
        inputs: [input],
      },
    ]),
    {
      name: "find **/*.md (10,000 paths)",
      tool: "find",
      setup: TREE,
      goal: 3,
      iterations: 5,
      inputs: [{ pattern: "**/*.md" }],
    },
    {
      name: "list 1,000-entry dir",
      tool: "list",
      setup: FLAT,
      iterations: 10,
      inputs: [{ path: "/flat", limit: 1000 }],
    },
  ],
};

/** Tool calls run in order on a fresh workspace on each side; their outputs are compared. */
export const parity = [
  { tool: "write", input: { path: "/p/a.txt", content: "héllo\nwörld\nthird" } },
  { tool: "write", input: { path: "/p/deep/er/b.md", content: "# title\n\n  indented line\nfoo Foo FOO\n" } },
  { tool: "write", input: { path: "/p/long.txt", content: `${"x".repeat(2500)}\nshort` } },
  { tool: "write", input: { path: "/p/many.txt", content: Array.from({ length: 2105 }, (_, i) => `line ${i + 1}`).join("\n") } },
  { tool: "write", input: { path: "/p/crlf.txt", content: "one\r\ntwo\r\nthree\r\n" } },
  { tool: "write", input: { path: "/p/size.bin", content: "z".repeat(1536) } },
  { tool: "write", input: { path: "../../etc/passwd", content: "root:x:0:0" } },
  { tool: "write", input: { path: "/p/dollar.js", content: "const a = 1;\nconst b = 2;\n" } },
  { tool: "read", input: { path: "/p/a.txt" } },
  { tool: "read", input: { path: "/p/a.txt", offset: 2 } },
  { tool: "read", input: { path: "/p/a.txt", offset: 2, limit: 1 } },
  { tool: "read", input: { path: "/p/a.txt", limit: 10 } },
  { tool: "read", input: { path: "/p/a.txt", offset: 9 } },
  { tool: "read", input: { path: "/p/long.txt" } },
  { tool: "read", input: { path: "/p/many.txt" } },
  { tool: "read", input: { path: "/p/many.txt", offset: 100, limit: 3000 } },
  { tool: "read", input: { path: "/p/crlf.txt" } },
  { tool: "read", input: { path: "/nope.txt" } },
  { tool: "read", input: { path: "/p" } },
  { tool: "read", input: { path: "/etc/passwd" } },
  { tool: "read", input: { path: "/../../etc/./passwd" } },
  { tool: "edit", input: { path: "/p/a.txt", old_string: "wörld", new_string: "world" } },
  { tool: "edit", input: { path: "/p/deep/er/b.md", old_string: "indented   line", new_string: "indented line!" } },
  { tool: "edit", input: { path: "/p/deep/er/b.md", old_string: "foo", new_string: "bar" } },
  { tool: "edit", input: { path: "/p/deep/er/b.md", old_string: "not in the file at all qqq", new_string: "x" } },
  { tool: "edit", input: { path: "/p/new.txt", old_string: "", new_string: "created\nfile" } },
  { tool: "edit", input: { path: "/p/new.txt", old_string: "", new_string: "again" } },
  { tool: "edit", input: { path: "/p/missing.txt", old_string: "a", new_string: "b" } },
  { tool: "edit", input: { path: "/p/crlf.txt", old_string: "two\nthree", new_string: "2\n3" } },
  { tool: "edit", input: { path: "/p/dollar.js", old_string: "const a = 1;", new_string: "const a = '$$ $& $`';" } },
  { tool: "read", input: { path: "/p/dollar.js" } },
  { tool: "read", input: { path: "/p/crlf.txt" } },
  { tool: "list", input: { path: "/p" } },
  { tool: "list", input: { path: "/p", limit: 2, offset: 1 } },
  { tool: "list", input: { path: "/" } },
  { tool: "list", input: { path: "/nowhere" } },
  { tool: "list", input: { path: "/p/a.txt" } },
  { tool: "find", input: { pattern: "**/*.md" } },
  { tool: "find", input: { pattern: "/p/*" } },
  { tool: "find", input: { pattern: "**/*.{md,txt}" } },
  { tool: "find", input: { pattern: "/p/?.txt" } },
  { tool: "find", input: { pattern: "/p/[ab].*" } },
  { tool: "find", input: { pattern: "**" } },
  { tool: "find", input: { pattern: "/nothing/**" } },
  { tool: "grep", input: { query: "foo" } },
  { tool: "grep", input: { query: "foo", caseSensitive: true } },
  { tool: "grep", input: { query: "Foo", fixedString: true, contextLines: 2 } },
  { tool: "grep", input: { query: "^line 1\\d$", include: "/p/*.txt" } },
  { tool: "grep", input: { query: "(unclosed" } },
  { tool: "grep", input: { query: "x", include: "**/*.md" } },
  { tool: "grep", input: { query: "l(?=ine 20)" } },
  { tool: "grep", input: { query: "line", include: "/p/many.txt" } },
  { tool: "delete", input: { path: "/p/size.bin" } },
  { tool: "delete", input: { path: "/p/never" } },
  { tool: "delete", input: { path: "/p/deep" } },
  { tool: "delete", input: { path: "/" } },
  { tool: "delete", input: { path: "/p/deep", recursive: true } },
  { tool: "list", input: { path: "/p" } },
  { tool: "write", input: { path: "/", content: "x" } },
  { tool: "write", input: { path: "/p", content: "x" } },
  { tool: "write", input: { path: "/p/a.txt/child", content: "x" } },
  { tool: "write", input: { path: "/p/a\u0000b", content: "x" } },
  { tool: "write", input: { path: `/${"d".repeat(4100)}`, content: "x" } },
  { tool: "edit", input: { path: "/p", old_string: "a", new_string: "b" } },
  { tool: "edit", input: { path: "/p/a.txt/child", old_string: "a", new_string: "b" } },
  { tool: "read", input: { path: "/p/a.txt/child" } },
  { tool: "list", input: { path: "/p/a.txt/child" } },
  { tool: "delete", input: { path: "/p/a.txt/child" } },
  { tool: "delete", input: { path: "/p/a.txt/child", recursive: true } },
  { tool: "find", input: { pattern: "/p/[z-a]" } },
  { tool: "grep", input: { query: "x", include: "/p/[z-a]" } },
];
