// The bash tool: snapshot the workspace into just-bash, run `wc -l` over 1,000 files, and
// write back (nothing changes). Both sides run the same just-bash version (3.4.2) on the same
// files, so the difference is what surrounds the shell: reading the snapshot out of SQLite,
// handing it over, and comparing it afterwards.

const FILES = Array.from({ length: 1000 }, (_, i) => ({
  path: `/src/m${String(i % 25).padStart(2, "0")}/file${String(i).padStart(4, "0")}.txt`,
  content: Array.from({ length: 20 + (i % 30) }, (_, n) => `line ${n + 1} of file ${i}: ${"abcdefgh".repeat(1 + (n % 5))}`).join("\n") + "\n",
}));

export default {
  name: "bash tool",
  workloads: [
    {
      name: "bash: snapshot + wc -l over 1,000 files",
      tool: "bash",
      setup: FILES,
      goal: 2,
      inputs: [{ script: "wc -l src/*/*.txt | tail -n 1" }],
    },
    {
      // The same snapshot and write-back around a script that does nothing: what the harness
      // itself costs, apart from the shell's own work.
      name: "bash: snapshot + true (1,000 files)",
      tool: "bash",
      setup: FILES,
      inputs: [{ script: "true" }],
    },
  ],
};

/** The same script's output on both sides, byte for byte (and a write-back case). */
export const parity = [
  { tool: "write", input: { path: "/p/a.txt", content: "one\ntwo\nthree\n" } },
  { tool: "bash", input: { script: "wc -l /p/a.txt && echo new > /p/b.txt && rm /p/a.txt && mkdir -p /p/d/e" } },
  { tool: "bash", input: { script: "ls -R /p; cat /nope; exit 3" } },
];
