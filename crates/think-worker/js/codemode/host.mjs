// The JS half of think-rs's sandbox (src/wasm/loader.rs): runs one pass of model-written code
// in a Worker Loader isolate with no network (`globalOutbound: null`) and no bindings. Its
// only way out is `dispatch`, a function passed over RPC that calls back into the Rust agent.
// Rust owns everything else: normalization, the journal, approval, limits.
// A pass is a fresh isolate (`loader.load`) unless its request names a `reuse` key (an
// extension's): then the isolate of that key is entered again (`loader.get`), one pass at a
// time, until a pass of it crashes or times out, after which the key gets a fresh isolate.
// Imported from Rust with `#[wasm_bindgen(module = "/js/codemode/host.mjs")]`.

// The fixed entry module of every sandbox isolate. The code runs as `./user.js`, so stack
// frames there give each connector call its call site (`line:column`).
const SANDBOX_MODULE = String.raw`
import { WorkerEntrypoint } from "cloudflare:workers";
import run from "./user.js";

const PAUSED = "__THINK_CODEMODE_PAUSED__";

function site() {
  const stack = new Error().stack || "";
  const m = /(user|snippet_\d+)\.js:(\d+):(\d+)/.exec(stack);
  if (!m) return "?";
  return (m[1] === "user" ? "" : m[1] + ":") + m[2] + ":" + m[3];
}

function text(v) {
  if (typeof v === "string") return v;
  try {
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s;
  } catch {
    return String(v);
  }
}

// The limits of the pass in progress, read by the loop guards.
let active = { deadline: 0, message: "Execution timed out", spins: 0, expired: true, lastYield: 0 };
const guard = () => {
  if (active.expired || ((++active.spins & 1023) === 0 && Date.now() > active.deadline)) {
    active.expired = true;
    throw new Error(active.message);
  }
  return true;
};
const tick = () => {
  guard();
  if ((active.spins & 1023) === 0 && Date.now() - active.lastYield > 10) {
    const limits = active;
    return new Promise((resolve) => setTimeout(() => {
      limits.lastYield = Date.now();
      resolve(true);
    }, 0));
  }
  return true;
};
Object.defineProperty(globalThis, "__cm_guard", { value: guard });
Object.defineProperty(globalThis, "__cm_tick", { value: tick });

export default class Sandbox extends WorkerEntrypoint {
  async evaluate(spec, dispatch) {
    // What leaves the isolate is bounded here, before it is copied into the host: the logs to
    // spec.maxLogChars in all (lines past it are counted, not kept) and the result's JSON to
    // spec.maxResultChars (the host's limit, in UTF-16 units, which never exceed UTF-8 bytes).
    const logs = [];
    let logChars = 0;
    let droppedLogs = 0;
    const log = (prefix) => (...a) => {
      if (logChars >= spec.maxLogChars) {
        droppedLogs++;
        return;
      }
      let line = prefix + a.map(text).join(" ");
      if (logChars + line.length > spec.maxLogChars) line = line.slice(0, spec.maxLogChars - logChars) + " [cut]";
      logChars += line.length;
      logs.push(line);
    };
    const done = () => {
      if (droppedLogs > 0) logs.push("[" + droppedLogs + " more log lines dropped: the logs are limited to " + spec.maxLogChars + " characters]");
      return logs;
    };
    console.log = log("");
    console.info = log("");
    console.debug = log("");
    console.warn = log("[warn] ");
    console.error = log("[error] ");
    let paused = false;
    // The host calls in flight: the pass ends only once they are answered (or its time is up),
    // so no call is left running when the host lets this isolate go.
    const inflight = new Set();
    const call = async (connector, method, args, where) => {
      if (paused) throw new Error(PAUSED);
      const json = args === undefined ? "null" : JSON.stringify(args);
      if (json === undefined) throw new TypeError(connector + "." + method + ": the argument is not JSON");
      const pending = dispatch(connector, method, json, where);
      inflight.add(pending);
      let answer;
      try {
        answer = await pending;
      } finally {
        inflight.delete(pending);
        pending[Symbol.dispose]?.();
      }
      const reply = JSON.parse(answer);
      if (reply.paused) {
        paused = true;
        throw new Error(PAUSED);
      }
      if ("error" in reply) throw new Error(reply.error);
      return reply.ok;
    };
    for (const ns of spec.namespaces) {
      const obj = Object.create(null);
      for (const method of ns.methods) {
        obj[method] = (args) => call(ns.name, method, args, site());
      }
      if (ns.name === "codemode") {
        obj.step = async (name, fn) => {
          const where = site();
          if (typeof fn !== "function") throw new TypeError("codemode.step(name, fn): fn must be a function");
          const r = await call("codemode", "step", { name: String(name) }, where);
          if (r.replayed) return r.value;
          const value = await fn();
          await call("codemode", "stepDone", { seq: r.seq, value: value === undefined ? null : value }, where);
          return value;
        };
        obj.run = async (name, input) => {
          const i = spec.snippets.findIndex((s) => s.name === name);
          if (i < 0) throw new Error("codemode.run: no snippet named " + JSON.stringify(name));
          const arg = input === undefined ? {} : input;
          // The host checks the input against the snippet's inputSchema.
          await call("codemode", "checkSnippetInput", { name, input: arg }, site());
          const mod = await import("./snippet_" + i + ".js");
          return mod.default(arg);
        };
      }
      globalThis[ns.name] = Object.freeze(obj);
    }
    // Loop guards (src/codemode/normalize.rs adds the calls): past the deadline every loop
    // throws; loops in the code's own body also yield to the event loop every ~10 ms, so the
    // Durable Object that shares this thread keeps serving its other requests. The guards
    // are defined once per isolate and read this pass's limits (one pass at a time).
    const deadline = Date.now() + spec.timeoutMs;
    const timeoutMessage = "Execution timed out after " + spec.timeoutMs + " ms";
    active = { deadline, message: timeoutMessage, spins: 0, expired: false, lastYield: Date.now() };
    let timer;
    const limit = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(timeoutMessage)), spec.timeoutMs);
    });
    let outcome;
    try {
      const value = await Promise.race([run(spec.input), limit]);
      if (paused) {
        outcome = { paused: true, logs: done() };
      } else {
        const json = value === undefined ? "null" : JSON.stringify(value);
        if (json !== undefined && json.length > spec.maxResultChars) {
          const mb = (json.length / 1e6).toFixed(1);
          const error = "The result is " + mb + " million characters of JSON, over the limit of " + spec.maxResultChars + ": return less (a summary or a slice), or write it to a file.";
          outcome = { ok: false, error, logs: done() };
        } else {
          outcome = { ok: true, result: json === undefined ? "null" : json, logs: done() };
        }
      }
    } catch (e) {
      if (paused) {
        outcome = { paused: true, logs: done() };
      } else {
        const message = e instanceof Error ? (e.name && e.name !== "Error" ? e.name + ": " : "") + e.message : String(e);
        outcome = { ok: false, error: message, logs: done() };
      }
    } finally {
      clearTimeout(timer);
    }
    // Calls the code started without awaiting them (or left behind by a pause or a throw).
    const left = deadline - Date.now();
    if (inflight.size > 0 && left > 0) {
      let wait;
      await Promise.race([
        Promise.allSettled([...inflight]),
        new Promise((resolve) => { wait = setTimeout(resolve, left); }),
      ]);
      clearTimeout(wait);
    }
    return outcome;
  }
}
`;

/**
 * The code as the body of the module's default export, with the pass's `input` (an
 * extension's operation; none for `execute`) as `__think_input`. Line 2 of user.js is its
 * first line.
 */
function userModule(body) {
  return "export default async (__think_input) => {\n" + body + "\n};\n";
}

/**
 * A hash of the sandbox module (FNV-1a), part of every reused isolate's name, so that a host
 * with another sandbox module never enters an isolate loaded with this one.
 */
const SANDBOX_TAG = (() => {
  let h = 0x811c9dc5;
  for (let i = 0; i < SANDBOX_MODULE.length; i++) h = Math.imul(h ^ SANDBOX_MODULE.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16);
})();
/** The generation of each reuse key: bumped when a pass of its isolate crashed or timed out. */
const generations = new Map();
/** Reused isolates with a pass in flight: a second pass of the key takes a fresh isolate. */
const busy = new Set();

/**
 * Runs one pass.
 * @param {WorkerLoader} loader the LOADER binding
 * @param {string} requestJson a SandboxRequest: {id, body, namespaces:[{name, methods}], snippets,
 *   modules:[{name, source}] (extra modules loaded as is), timeoutMs, reuse?, input?}
 * @param {(connector: string, method: string, argsJson: string, site: string) => Promise<string>} dispatch
 *   answers `{"ok": value}`, `{"error": message}` or `{"paused": true}`
 * @param {Fetcher|null} [outbound] the isolate's `globalOutbound` (an extension's network
 *   gateway); none by default
 * @returns {Promise<{kind: "done"|"syntax"|"crash", ok?: boolean, result?: string, error?: string,
 *   paused?: boolean, logs?: string[]}>}
 */
export async function runInLoader(loader, requestJson, dispatch, outbound = null) {
  const spec = JSON.parse(requestJson);
  const modules = { "sandbox.js": SANDBOX_MODULE, "user.js": userModule(spec.body) };
  spec.snippets.forEach((s, i) => {
    modules["snippet_" + i + ".js"] = "export default async (input) => {\n" + s.body + "\n};\n";
  });
  for (const m of spec.modules ?? []) modules[m.name] = m.source;
  const code = {
    compatibilityDate: "2025-06-01",
    mainModule: "sandbox.js",
    modules,
    env: {},
    globalOutbound: outbound ?? null,
  };
  // A reused isolate is named by its key and generation; its code (the same for every pass of
  // the key) carries no limit, which each pass sets for itself on its entrypoint.
  let shared = null;
  if (spec.reuse) {
    const named = spec.reuse + "#" + SANDBOX_TAG + "#" + (generations.get(spec.reuse) ?? 0);
    if (!busy.has(named)) shared = named;
  }
  const limits = { cpuMs: spec.timeoutMs };
  let worker;
  try {
    worker = shared ? loader.get(shared, () => code) : loader.load({ ...code, limits });
  } catch (e) {
    return { kind: "crash", error: errorText(e) };
  }
  if (shared) busy.add(shared);
  let entrypoint;
  let call;
  let outcome;
  try {
    entrypoint = shared ? worker.getEntrypoint(null, { limits }) : worker.getEntrypoint();
    call = entrypoint.evaluate(
      {
        namespaces: spec.namespaces,
        timeoutMs: spec.timeoutMs,
        snippets: spec.snippets.map((s) => ({ name: s.name })),
        maxResultChars: spec.maxResultChars,
        maxLogChars: spec.maxLogChars,
        input: spec.input ?? null,
      },
      dispatch,
    );
    const out = await call;
    outcome = { kind: "done", ok: out.ok, result: out.result, error: out.error, paused: out.paused, logs: out.logs };
  } catch (e) {
    const message = errorText(e);
    if (/SyntaxError/.test(message)) {
      outcome = { kind: "syntax", error: message };
    } else if (/memory limit|out of memory/i.test(message)) {
      // On Cloudflare the platform ends an isolate over its memory limit and the call rejects
      // with a message that says so ("Worker has exceeded memory limit.").
      outcome = { kind: "crash", error: "The code ran out of memory: its isolate exceeded the memory limit and was stopped (" + message + ")" };
    } else {
      outcome = { kind: "crash", error: message };
    }
  } finally {
    // What the host holds of the isolate is released here, while the isolate is alive, rather
    // than by the host's garbage collector at some later time, while workerd may be tearing the
    // isolate down (docs/codemode.md; CONTRIBUTING.md, "Pins"). The call's promise owns its
    // result, whose disposal releases the call on the sandbox's side; the worker and its
    // entrypoint have disposers in newer workerd only.
    dispose(call);
    dispose(entrypoint);
    dispose(worker);
    if (shared) busy.delete(shared);
  }
  // An isolate whose pass crashed, or timed out (its code may still be running), is not
  // entered again: the key's next pass loads a fresh one.
  if (shared && (outcome.kind !== "done" || (outcome.ok === false && /^Execution timed out after/.test(outcome.error ?? "")))) {
    generations.set(spec.reuse, (generations.get(spec.reuse) ?? 0) + 1);
  }
  return outcome;
}

function errorText(e) {
  return e instanceof Error ? (e.name && e.name !== "Error" ? e.name + ": " : "") + e.message : String(e);
}

function dispose(resource) {
  try {
    resource?.[Symbol.dispose]?.();
  } catch {
    // A handle that cannot be released early is left to the garbage collector.
  }
}
