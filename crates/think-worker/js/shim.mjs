// Writes the Worker entry module (`shim.js`) for a wasm-bindgen `--target module` output
// directory, the part of worker-build that scripts/wasm-build.sh replaces. Usage:
//   node js/shim.mjs <out-dir>
// It reads <out-dir>/index.js and emits <out-dir>/shim.js, which esbuild then bundles:
// - the default export is a `WorkerEntrypoint` whose handlers are the Rust `#[event]` exports
//   (`fetch`, `queue`, `scheduled`, `email`, `connect` get `(arg, env, ctx)`);
// - every exported Rust class is re-exported behind a Proxy that, after a wasm trap
//   (`WebAssembly.RuntimeError`, e.g. a Rust panic under panic=abort), resets the wasm
//   instance (`__wbg_reset_state`, from wasm-bindgen's `--experimental-reset-state-function`)
//   and rebuilds the object on its next use, so one panic does not brick the isolate;
// - the same reset gives back linear memory, which wasm cannot shrink: when the last call in
//   flight through these proxies settles and the Rust side reports no background task
//   (`__think_busy_tasks`, src/wasm/idle.rs), the instance is reset and each object rebuilt on
//   its next use, as after an eviction, if the memory exceeds the idle-reset threshold or
//   holds more than a slack of free memory beyond what the work since the last idle point
//   needed at once (`__think_take_peak_bytes`, counted by the agent's allocator).
//   The threshold is `THINK_IDLE_RESET_MB` from the env of the first object or entrypoint
//   built (default 16; 0 turns the reset off), the slack a quarter of it; docs/deploy.md "Idle reset".
// - at each idle point, reset or not, the caches kept for the work in flight are dropped
//   (`__think_drop_caches`: the texts kept for the model's next edit, workspace/recent.rs).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/** Exports of the wasm-bindgen glue that are plumbing, not Worker handlers. */
const INTERNAL = new Set(["__wbg_reset_state", "__worker_init_state", "__think_busy_tasks", "__think_memory_bytes", "__think_take_peak_bytes", "__think_drop_caches"]);
/** Handlers the runtime calls with one argument; Rust takes `(arg, env, ctx)`. */
const EVENT_HANDLERS = new Set(["fetch", "queue", "scheduled", "email", "connect"]);

/** The exported function and class names of a wasm-bindgen module text. */
export function exportsOf(glue) {
  const functions = [];
  const classes = [];
  for (const m of glue.matchAll(/^export (async )?function\s+([A-Za-z_$][\w$]*)\s*\(/gm)) {
    if (!INTERNAL.has(m[2])) functions.push(m[2]);
  }
  for (const m of glue.matchAll(/^export class\s+([A-Za-z_$][\w$]*)/gm)) classes.push(m[1]);
  return { functions, classes };
}

/** The handler lines installed on the entrypoint's prototype. */
function handlerLines(functions) {
  return functions.map((name) =>
    EVENT_HANDLERS.has(name)
      ? `Entrypoint.prototype.${name} = function ${name}(arg) {\n  return rust.${name}.call(this, arg, this.env, this.ctx);\n};`
      : `Entrypoint.prototype.${name} = rust.${name};`,
  );
}

/** The shim module text for the given exports. */
export function shimSource({ functions, classes }) {
  return `import { WorkerEntrypoint } from "cloudflare:workers";
import * as rust from "./index.js";

Error.stackTraceLimit = 100;
const wasmState = rust.__worker_init_state();

function isTrap(error) {
  return error instanceof WebAssembly.RuntimeError;
}

function noteTrap(error) {
  if (isTrap(error)) {
    console.error("Critical", error);
    wasmState.criticalError = true;
  }
}

function resetAfterTrap() {
  if (!wasmState.criticalError) return;
  console.log("Reinitializing Wasm application");
  rust.__wbg_reset_state();
  wasmState.criticalError = false;
  wasmState.instanceId++;
}

addEventListener("error", (event) => noteTrap(event.error));

/**
 * Resetting the instance when idle gives back the linear memory a large call grew. \`inFlight\`
 * counts the calls through the guards below that have not settled; \`resets\`, \`lastReset\`,
 * \`lastCheck\` and \`dropped\` (the bytes of caches dropped at idle points so far) are for
 * the tests and the bench (\`globalThis.__thinkIdleReset\`).
 * \`baseBytes\` is the memory of an instance before its first call (static data and stack).
 */
const idle = {
  thresholdBytes: 16 * 1024 * 1024,
  slackBytes: 4 * 1024 * 1024,
  configured: false,
  inFlight: 0,
  pending: false,
  resets: 0,
  lastReset: null,
  lastCheck: null,
  dropped: 0,
  baseBytes: 0,
};
globalThis.__thinkIdleReset = idle;
const canMeasure = typeof rust.__think_memory_bytes === "function" && typeof rust.__think_busy_tasks === "function";
const countsLive = typeof rust.__think_take_peak_bytes === "function";
const dropsCaches = typeof rust.__think_drop_caches === "function";
idle.busyTasks = () => (canMeasure ? rust.__think_busy_tasks() : 0);
if (canMeasure) idle.baseBytes = rust.__think_memory_bytes();

function configureIdleReset(env) {
  if (idle.configured || !env) return;
  idle.configured = true;
  const mb = Number(env.THINK_IDLE_RESET_MB);
  if (env.THINK_IDLE_RESET_MB !== undefined && Number.isFinite(mb) && mb >= 0) {
    idle.thresholdBytes = mb * 1024 * 1024;
    idle.slackBytes = idle.thresholdBytes / 4;
  }
}

function enter() {
  resetAfterTrap();
  idle.inFlight++;
}

/**
 * Resets the instance if it is quiescent and its memory is over the threshold, or if the
 * memory it holds beyond its base and beyond the most heap bytes live at once since the last
 * idle point (\`needed\`) exceeds the slack: a peak that the work since then did not need is
 * given back, memory that each turn needs again (or holds live) is kept.
 */
function checkIdle() {
  idle.pending = false;
  if (idle.inFlight > 0 || !canMeasure || wasmState.criticalError) return;
  if (rust.__think_busy_tasks() > 0) return;
  if (dropsCaches) idle.dropped += rust.__think_drop_caches();
  if (idle.thresholdBytes === 0) return;
  const bytes = rust.__think_memory_bytes();
  const needed = countsLive ? rust.__think_take_peak_bytes() : 0;
  const held = bytes - idle.baseBytes - needed;
  idle.lastCheck = { bytes, needed, held };
  if (bytes <= idle.thresholdBytes && !(needed > 0 && held > idle.slackBytes)) return;
  rust.__wbg_reset_state();
  wasmState.instanceId++;
  idle.resets++;
  idle.lastReset = { bytes, needed, after: rust.__think_memory_bytes(), at: Date.now() };
  const mb = (n) => (n / 1048576).toFixed(1);
  console.log(\`think-rs: idle reset of the wasm instance, linear memory \${mb(bytes)} MB (\${mb(needed)} MB needed at once since the last idle point) -> \${mb(idle.lastReset.after)} MB\`);
}

/**
 * Checks in a microtask, once no Rust code is on the stack: called when the last call in
 * flight settles and, from src/wasm/idle.rs, when the last background task ends.
 */
idle.schedule = () => {
  if (idle.pending) return;
  idle.pending = true;
  queueMicrotask(checkIdle);
};

function leave() {
  idle.inFlight--;
  if (idle.inFlight === 0) idle.schedule();
}

class Entrypoint extends WorkerEntrypoint {}

${handlerLines(functions).join("\n")}

function guard(method) {
  return new Proxy(method, {
    apply(fn, self, args) {
      enter();
      let result;
      try {
        result = fn.apply(self, args);
      } catch (error) {
        noteTrap(error);
        leave();
        throw error;
      }
      if (!result || typeof result.then !== "function") {
        leave();
        return result;
      }
      return result.then(
        (value) => {
          leave();
          return value;
        },
        (error) => {
          noteTrap(error);
          leave();
          throw error;
        },
      );
    },
  });
}

const forward = {
  set: (slot, key, value, receiver) => Reflect.set(slot.instance, key, value, receiver),
  has: (slot, key) => Reflect.has(slot.instance, key),
  deleteProperty: (slot, key) => Reflect.deleteProperty(slot.instance, key),
  apply: (slot, self, args) => Reflect.apply(slot.instance, self, args),
  construct: (slot, args, newTarget) => Reflect.construct(slot.instance, args, newTarget),
  getPrototypeOf: (slot) => Reflect.getPrototypeOf(slot.instance),
  setPrototypeOf: (slot, proto) => Reflect.setPrototypeOf(slot.instance, proto),
  isExtensible: (slot) => Reflect.isExtensible(slot.instance),
  preventExtensions: (slot) => Reflect.preventExtensions(slot.instance),
  getOwnPropertyDescriptor: (slot, key) => Reflect.getOwnPropertyDescriptor(slot.instance, key),
  defineProperty: (slot, key, descriptor) => Reflect.defineProperty(slot.instance, key, descriptor),
  ownKeys: (slot) => Reflect.ownKeys(slot.instance),
};

const rebuildAfterTrap = {
  construct(ctor, args, newTarget) {
    try {
      configureIdleReset(args[1]);
      resetAfterTrap();
      const slot = {
        instance: Reflect.construct(ctor, args, newTarget),
        instanceId: wasmState.instanceId,
      };
      return new Proxy(slot, {
        ...forward,
        get(slot, key, receiver) {
          if (slot.instanceId !== wasmState.instanceId) {
            slot.instance = Reflect.construct(ctor, args, newTarget);
            slot.instanceId = wasmState.instanceId;
          }
          const value = Reflect.get(slot.instance, key, receiver);
          return typeof value === "function" ? guard(value) : value;
        },
      });
    } catch (error) {
      wasmState.criticalError = true;
      throw error;
    }
  },
};

export default new Proxy(Entrypoint, rebuildAfterTrap);
${classes.map((name) => `export const ${name} = new Proxy(rust.${name}, rebuildAfterTrap);`).join("\n")}
`;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const outDir = process.argv[2];
  if (!outDir) {
    console.error("usage: node js/shim.mjs <wasm-bindgen out-dir>");
    process.exit(2);
  }
  const glue = readFileSync(join(outDir, "index.js"), "utf8");
  const found = exportsOf(glue);
  if (!found.functions.includes("fetch")) {
    console.error(`shim: ${outDir}/index.js exports no fetch handler; is this wasm-bindgen --target module output?`);
    process.exit(1);
  }
  writeFileSync(join(outDir, "shim.js"), shimSource(found));
}
