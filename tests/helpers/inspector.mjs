// Reads a worker isolate's memory through the V8 inspector that Miniflare opens on
// `inspectorPort`: the V8 heap and ArrayBuffer stores (`Runtime.getHeapUsage`), a full
// collection, and the wasm linear memory of every `WebAssembly.Memory` in
// the isolate (found with `Runtime.queryObjects`, so the product needs no debug route).
import net from "node:net";
import WebSocket from "ws";

/** A TCP port on 127.0.0.1 that nothing listens on now, for Miniflare's `inspectorPort`. */
export async function freePort() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * Connects to the isolate of the Miniflare worker named `worker` (`core:user:<name>`).
 * Returns `{ heap, gc, wasmBytes, close }`.
 */
export async function openInspector(port, worker) {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
  const target = targets.find((t) => t.id === `core:user:${worker}`);
  if (!target) throw new Error(`inspector: no target for worker ${worker} (${targets.map((t) => t.id).join(", ")})`);
  const socket = new WebSocket(target.webSocketDebuggerUrl, { maxPayload: 0 });
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  let next = 1;
  const pending = new Map();
  const contexts = [];
  // Exceptions nobody caught and console.error calls in the isolate, as text.
  const errors = [];
  socket.on("message", (data) => {
    const reply = JSON.parse(data.toString());
    if (reply.method === "Runtime.executionContextCreated") contexts.push(reply.params.context.id);
    if (reply.method === "Runtime.exceptionThrown") {
      const d = reply.params.exceptionDetails;
      errors.push(`uncaught: ${d.exception?.description ?? d.text}`);
    }
    if (reply.method === "Runtime.consoleAPICalled" && reply.params.type === "error") {
      errors.push(`console.error: ${reply.params.args.map((a) => a.value ?? a.description ?? "").join(" ")}`);
    }
    const p = pending.get(reply.id);
    if (!p) return;
    pending.delete(reply.id);
    clearTimeout(p.timer);
    if (reply.error) p.reject(new Error(`inspector: ${p.method}: ${reply.error.message}`));
    else p.resolve(reply.result);
  });
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = next++;
      // Generous: a request waits while the isolate runs a long synchronous stretch.
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`inspector: ${method} timed out`));
      }, 120000);
      pending.set(id, { resolve, reject, timer, method });
      socket.send(JSON.stringify({ id, method, params }));
    });
  // Reports the isolate's execution contexts; `evaluate` needs one of them.
  await send("Runtime.enable");
  const group = "think-rs-memory";
  /** Every `WebAssembly.Memory` as a remote array. `queryObjects` runs a full GC first. */
  async function memories() {
    const { result: proto } = await send("Runtime.evaluate", {
      expression: "WebAssembly.Memory.prototype",
      objectGroup: group,
      ...(contexts.length ? { contextId: contexts[0] } : {}),
    });
    const { objects } = await send("Runtime.queryObjects", { prototypeObjectId: proto.objectId, objectGroup: group });
    return objects;
  }
  return {
    /**
     * `{ usedSize, totalSize, backingStorageSize }` in bytes: the V8 heap (garbage included)
     * and the ArrayBuffer backing stores outside it (wasm memory excluded).
     */
    heap: () => send("Runtime.getHeapUsage"),
    /**
     * A full garbage collection, so that a following `heap()` shows live data only. Through
     * `queryObjects`, which collects synchronously: `HeapProfiler.collectGarbage` waits for
     * a task the isolate runs only when it gets an event.
     */
    async gc() {
      await memories();
      await send("Runtime.releaseObjectGroup", { objectGroup: group });
    },
    /** The summed `buffer.byteLength` of every wasm memory in the isolate (after a full GC). */
    async wasmBytes() {
      const objects = await memories();
      const { result } = await send("Runtime.callFunctionOn", {
        objectId: objects.objectId,
        functionDeclaration: "function () { return this.reduce((n, m) => n + m.buffer.byteLength, 0); }",
        returnByValue: true,
      });
      await send("Runtime.releaseObjectGroup", { objectGroup: group });
      return result.value;
    },
    /** Uncaught exceptions and `console.error` calls seen in the isolate since it was opened. */
    errors,
    /** The value of a JS `expression` evaluated in the isolate (returned by value). */
    async evaluate(expression) {
      const { result, exceptionDetails } = await send("Runtime.evaluate", {
        expression,
        returnByValue: true,
        ...(contexts.length ? { contextId: contexts[0] } : {}),
      });
      if (exceptionDetails) throw new Error(`inspector: ${expression}: ${exceptionDetails.text}`);
      return result.value;
    },
    /**
     * The entry shim's idle-reset state (crates/think-worker/js/shim.mjs): `{resets, inFlight, pending, busy,
     * lastReset: {bytes, needed, after, at} | null, lastCheck: {bytes, needed, held} | null, dropped}`,
     * `busy` being the Rust side's background tasks, `dropped` the bytes of caches dropped at idle points.
     */
    idleReset() {
      return this.evaluate(
        "(() => { const i = globalThis.__thinkIdleReset; return { resets: i.resets, inFlight: i.inFlight, pending: i.pending, busy: i.busyTasks(), lastReset: i.lastReset, lastCheck: i.lastCheck, dropped: i.dropped }; })()",
      );
    },
    /**
     * Waits until the isolate is quiescent (no call in flight, no background task, no check
     * pending) with at least `minResets` idle resets done, and returns `idleReset()`.
     */
    async quiescent(minResets = 0, timeoutMs = 30000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const s = await this.idleReset();
        if (s.resets >= minResets && s.inFlight === 0 && !s.pending && s.busy === 0) return s;
        if (Date.now() > deadline) throw new Error(`inspector: not quiescent after ${timeoutMs} ms: ${JSON.stringify(s)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    /** A raw inspector command (`Profiler.start`, …), for bench/reset-cost.mjs. */
    send,
    close: () => socket.close(),
  };
}

/**
 * Samples `inspector.heap()` back to back until `stop()` is called, and resolves `stop()` with
 * the largest `usedSize + backingStorageSize` seen. A sample waits while the isolate is busy, so this sees the heap
 * at the points where the isolate yields (awaits of storage, R2 and fetch), not every instant.
 */
export function sampleHeapPeak(inspector) {
  let running = true;
  let peak = 0;
  const loop = (async () => {
    while (running) {
      const h = await inspector.heap();
      peak = Math.max(peak, h.usedSize + (h.backingStorageSize ?? 0));
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return peak;
    },
  };
}
