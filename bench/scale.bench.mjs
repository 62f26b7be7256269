// Grep at scale: 10,000 files of 10 KB (100 MB) in one workspace, searched by one grep call
// each, on think-rs and the floor (the TypeScript reference is left out: its set-up alone
// would hold the tree twice). The patterns are selective, so the search reads the whole
// tree without stopping at the 200-match cap: the literal is in one file, the regex in
// ten. The table shows the peak wasm heap a call needed, beyond what was live before it.
import { fileContent } from "./workspace.bench.mjs";

const FILES = Array.from({ length: 10_000 }, (_, i) => ({
  path: `/big/d${String(i % 100).padStart(2, "0")}/f${String(i).padStart(5, "0")}.txt`,
  content: fileContent(i),
}));

const row = (name, input) => ({
  name,
  tool: "grep",
  setup: FILES,
  sides: ["rust", "floor"],
  showMemory: true,
  warmup: 1,
  reps: 3,
  inputs: [input],
});

export default {
  name: "grep at scale (10,000 files, 100 MB)",
  workloads: [
    row("grep literal, 1 file matches (100 MB)", { query: "the needle is here in file 9980", fixedString: true }),
    row("grep regex, 10 files match (100 MB)", { query: "fn_99\\d\\(x, y\\)" }),
  ],
};
