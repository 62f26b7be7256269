// Grep at scale: 10,000 files of 10 KB (100 MB) in one workspace, searched by one grep call
// each, on think-rs and the floor (the TypeScript reference is left out: its set-up alone
// would hold the tree twice). The patterns are selective, so the search covers the whole
// tree without stopping at the 200-match cap: the literal is in one file, the regex in
// ten. Each runs with grep's trigram index (the default: the alarm the set-up's writes set
// builds it in the background before the runs, as before a user's next turn), without it
// (`grepIndex: false`; identical outputs), and for the literal also cold: the first
// search after the writes, on a fresh object (one run, think-rs only), before and after
// the alarm the writes set has indexed the tree in the background.
// The table shows the peak wasm heap a call needed, beyond what was live before it; the
// notes give the index's rows and the database size. The write and edit rows show that
// writes cost the same with the index as without it (writes do not index).
import tools, { fileContent } from "./workspace.bench.mjs";

const FILES = Array.from({ length: 10_000 }, (_, i) => ({
  path: `/big/d${String(i % 100).padStart(2, "0")}/f${String(i).padStart(5, "0")}.txt`,
  content: fileContent(i),
}));

const grep = (name, input, grepIndex) => ({
  name: `${name}${grepIndex ? "" : ", no index"}`,
  tool: "grep",
  setup: FILES,
  sides: ["rust", "floor"],
  showMemory: true,
  warmup: 1,
  reps: 3,
  inputs: [input],
  ...(grepIndex ? { rustOptions: { indexAlarm: true } } : { rustOptions: { grepIndex: false }, sameOutputAs: name }),
});

const literal = { query: "the needle is here in file 9980", fixedString: true };
const regex = { query: "fn_99\\d\\(x, y\\)" };
// No literal of three characters: the index cannot narrow, and the search scans.
const unnarrowed = { query: "f\\w\\s+\\d{9}" };

const cold = {
  name: "grep literal, 1 file matches (100 MB), first after the writes (index cold)",
  tool: "grep",
  fresh: true,
  setup: FILES,
  sides: ["rust"],
  showMemory: true,
  warmup: 0,
  reps: 1,
  inputs: [literal],
};

// The same search once the alarm the writes set has indexed the tree in the background.
const afterAlarm = {
  ...cold,
  name: "grep literal, 1 file matches (100 MB), first after the writes and the index alarm",
  rustOptions: { indexAlarm: true },
};

const WRITES = FILES.slice(0, 1000).map((f) => ({ path: f.path, content: f.content }));
const write = (grepIndex) => ({
  name: `write 1,000 × 10 KB${grepIndex ? ", grep index on (default)" : ", no grep index"}`,
  tool: "write",
  fresh: true,
  sides: ["rust", "floor"],
  inputs: WRITES,
  ...(grepIndex ? {} : { rustOptions: { grepIndex: false } }),
});

// The edit row of the workspace suite (the same 200 files edited and undone five times,
// index on) without the index, for comparison.
const edit = tools.workloads.find((w) => w.tool === "edit");
const editUnindexed = {
  ...edit,
  name: `${edit.name}, no grep index`,
  sides: ["rust", "floor"],
  goal: undefined,
  floorGoal: undefined,
  rustOptions: { grepIndex: false },
};

export default {
  name: "grep at scale (10,000 files, 100 MB) and the index's cost",
  workloads: [
    grep("grep literal, 1 file matches (100 MB)", literal, true),
    grep("grep literal, 1 file matches (100 MB)", literal, false),
    cold,
    afterAlarm,
    grep("grep regex, 10 files match (100 MB)", regex, true),
    grep("grep regex, 10 files match (100 MB)", regex, false),
    grep("grep regex without a literal (100 MB)", unnarrowed, true),
    write(true),
    write(false),
    editUnindexed,
  ],
};
