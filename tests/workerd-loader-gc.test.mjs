// The pinned workerd must survive what Code Mode does on every `execute` pass: load an anonymous
// Worker Loader isolate, call it, drop it, and let the parent's garbage collector tear it down.
// workerd 1.20260426.1 aborted the whole process there (`jsg/setup.c++:235: … tried to defer
// destruction during isolate shutdown`, the abort two fresh-clone CI runs hit between Code Mode
// tests); workerd fixed it in 1.20260619.1 by deferring the loaded worker's teardown to the next
// turn of the event loop. The test runs the workerd binary Miniflare uses, with `--expose-gc` so
// the collection happens at once instead of whenever the suite's load brings it on.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { tempDir } from "./helpers/worker.mjs";

const require = createRequire(import.meta.url);
const workerd = createRequire(require.resolve("miniflare"))("workerd").default;

const PASSES = 5;

const hostModule = `
export const dropLoadedWorkers = {
  async test(controller, env) {
    for (let pass = 0; pass < ${PASSES}; pass++) {
      let sandbox = env.LOADER.load({
        compatibilityDate: "2025-11-01",
        mainModule: "sandbox.js",
        modules: { "sandbox.js": "export default { fetch() { return new Response('pass ' + " + pass + "); } }" },
      });
      const answer = await (await sandbox.getEntrypoint().fetch("http://sandbox/")).text();
      if (answer !== "pass " + pass) throw new Error("sandbox answered " + answer);
      sandbox = null;
      gc();
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    console.log("passes done: " + ${PASSES});
  },
};
`;

const config = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  v8Flags = ["--expose-gc"],
  services = [(name = "host", worker = (
    modules = [(name = "host.js", esModule = embed "host.js")],
    compatibilityDate = "2025-11-01",
    bindings = [(name = "LOADER", workerLoader = ())],
  ))],
);
`;

test("workerd survives the collection of dropped Worker Loader isolates", async () => {
  const dir = tempDir("think-rs-loader-gc-");
  fs.writeFileSync(path.join(dir, "host.js"), hostModule);
  fs.writeFileSync(path.join(dir, "config.capnp"), config);
  const { code, output } = await new Promise((resolve) => {
    execFile(workerd, ["test", "--experimental", path.join(dir, "config.capnp")], { timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (error.code ?? error.signal) : 0, output: stdout + stderr }),
    );
  });
  assert.doesNotMatch(output, /Fatal uncaught/, output);
  assert.match(output, /\[ PASS \] host:dropLoadedWorkers/, output);
  assert.match(output, new RegExp(`passes done: ${PASSES}`), output);
  assert.equal(code, 0, output);
});
