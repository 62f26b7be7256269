// CPU time of the file-tool rows, per iteration, for builds of the bench crate: a check that
// holds on a loaded machine, where the wall-clock medians of `bench/run.mjs` move by 2×.
//
//   node bench/cpu-ab.mjs <build dir>... [--only <regex>]
//
// Each build dir is a copy of bench/rust-worker/build. For each workload, think-rs and the
// floor each run the same request twice with different `iterations`; the difference of
// workerd's CPU time (summed over its threads from /proc/<pid>/task/*/schedstat, in ns)
// divided by the difference of iterations is one iteration's CPU, without the request's own
// parsing. Three such pairs per side after one untimed; the row prints all three and the
// ratio of the minima. Linux only. The write row measures overwrites (iterations after the
// first find the files written), and both sides' per-iteration input copies count in it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import suite from "./workspace.bench.mjs";
import { rustWorker } from "./workers.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const at = args.indexOf("--only");
const only = new RegExp(at >= 0 ? args.splice(at, 2)[1] : ".");
const ROWS = ["write 1,000 × 10 KB", "read 1,000 files", "edit 200 files (400 edits)", "find **/*.md (10,000 paths)", "list 1,000-entry dir"];
const SPAN = { write: [1, 3], read: [1, 9], edit: [1, 5] };

async function measure(build) {
  const persist = fs.mkdtempSync(path.join(os.tmpdir(), "think-cpu-"));
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    defaultPersistRoot: persist,
    workers: [rustWorker(build)],
  });
  try {
    await mf.ready;
    const worker = await mf.getWorker("rust");
    const children = execSync(`pgrep -P ${process.pid}`).toString().trim().split("\n");
    const pid = children.find((p) => fs.readFileSync(`/proc/${p}/comm`, "utf8").includes("workerd")) ?? children[0];
    const cpu = () =>
      fs.readdirSync(`/proc/${pid}/task`).reduce((sum, t) => {
        try {
          return sum + Number(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
        } catch {
          return sum;
        }
      }, 0);
    const post = async (doName, route, body) => {
      const res = await worker.fetch(`http://bench/${route}?do=${encodeURIComponent(doName)}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const text = await res.text();
      if (!res.ok) throw new Error(`${route}: ${text.slice(0, 300)}`);
      return JSON.parse(text);
    };
    const setup = async (doName, files, extra) => {
      for (let i = 0; i < files.length; i += 250) await post(doName, "setup/files", { files: files.slice(i, i + 250), ...extra });
    };
    let n = 0;
    for (const w of suite.workloads.filter((x) => ROWS.includes(x.name) && only.test(x.name))) {
      const [lo, hi] = SPAN[w.tool] ?? [1, 41];
      const per = { rust: [], floor: [] };
      for (let rep = 0; rep < 4; rep++) {
        for (const side of ["rust", "floor"]) {
          const route = `${side === "rust" ? "run" : "floor"}/${w.tool}`;
          const extra = side === "floor" ? { grepIndex: false } : {};
          const spent = [];
          for (const iterations of [lo, hi]) {
            const name = `${w.tool}-${side}-${w.fresh ? n++ : "shared"}`;
            if (w.fresh || (rep === 0 && iterations === lo)) await setup(name, w.setup ?? [], extra);
            const c0 = cpu();
            await post(name, route, { inputs: w.inputs, iterations, ...extra });
            spent.push(cpu() - c0);
          }
          if (rep > 0) per[side].push((spent[1] - spent[0]) / (hi - lo) / 1e6);
        }
      }
      const f = (xs) => xs.map((x) => x.toFixed(1)).join(" ");
      console.log(`${path.basename(build).padEnd(10)} ${w.name.padEnd(28)} CPU ms per iteration: think-rs ${f(per.rust)} | floor ${f(per.floor)} | ratio of minima ${(Math.min(...per.rust) / Math.min(...per.floor)).toFixed(2)}×`);
    }
  } finally {
    await mf.dispose();
    fs.rmSync(persist, { recursive: true, force: true });
  }
}

const builds = args.length ? args : [path.join(HERE, "rust-worker/build")];
for (const b of builds) await measure(path.resolve(b));
