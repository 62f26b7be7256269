// The Code Mode rows of `npm run bench` alone (see bench.mjs), in a Miniflare of their own:
// `bash bench/codemode/build.sh && node bench/codemode/run.mjs`.
import { Miniflare } from "miniflare";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { addWorkers, run } from "./bench.mjs";

const persistDir = fs.mkdtempSync(path.join(os.tmpdir(), "think-bench-cm-"));
// A first worker that only routes nothing: the bench's entry worker in `npm run bench`.
const entry = { name: "entry", modules: true, script: "export default { fetch: () => new Response('') }" };
const mf = new Miniflare(await addWorkers({ host: "127.0.0.1", port: 0, defaultPersistRoot: persistDir, workers: [entry] }));
await mf.ready;
try {
  await run(mf);
} finally {
  await mf.dispose();
  fs.rmSync(persistDir, { recursive: true, force: true });
}
process.exit(0);
