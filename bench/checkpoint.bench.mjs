// Checkpoint rows (issue 21): what a checkpoint costs on a workspace of 1,000 × 10 KB files of
// which a turn then changes 10, and how long rewinding those 10 takes. Think has no
// checkpoints, so only think-rs runs (its column prints "—").
import { fileContent } from "./workspace.bench.mjs";

const FILES = Array.from({ length: 1000 }, (_, i) => ({
  path: `/ck/d${String(i % 20).padStart(2, "0")}/f${String(i).padStart(4, "0")}.txt`,
  content: fileContent(i),
}));
// Ten files spread over the tree; each iteration writes new content to them (a fresh
// revision, so the journal cannot deduplicate it against an earlier one).
const CHANGED = FILES.filter((_, i) => i % 100 === 7).map((f) => f.path);
const common = { tool: "checkpoint", setup: FILES, sides: ["rust"], noThink: true, inputs: [{ paths: CHANGED }] };

export default {
  name: "checkpoints",
  workloads: [
    {
      // Timed: taking the checkpoint, then the 10 writes that journal the prior content; 10
      // checkpoints per run on a fresh object (below the retention's 50), so the millisecond
      // clock resolves it. `bytes`: how much the database grew per checkpoint (databaseSize).
      ...common,
      name: "checkpoint + 10 writes (1,000 × 10 KB)",
      fresh: true,
      iterations: 10,
      showBytes: true,
    },
    {
      // The same on one object run after run: past 50 checkpoints every one also prunes the
      // oldest and collects the content no checkpoint needs any more.
      ...common,
      name: "… at the 50-checkpoint retention limit",
      iterations: 20,
    },
    {
      // Untimed: a checkpoint and the 10 writes; timed: the rewind that restores them.
      ...common,
      name: "rewind 10 changed files (1,000 × 10 KB)",
      tool: "rewind",
      fresh: true,
      iterations: 10,
    },
  ],
};
