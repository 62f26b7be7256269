// BENCH_HEAP_SNAPSHOT=<dir> (bench/run.mjs): what the live V8 heap of an isolate is made of.
// `takeSnapshot` writes a heap snapshot of a Miniflare worker's isolate through the inspector
// (`HeapProfiler.takeHeapSnapshot`, which collects garbage first, so it shows live data only);
// `summarize` prints its self sizes by node type, the largest kinds of node, and the scripts
// whose source text the heap keeps (a bundled module's source stays for lazy compilation).
// `node bench/heap-snapshot.mjs <file.heapsnapshot>` summarizes a snapshot written earlier.
import fs from "node:fs";
import { pathToFileURL } from "node:url";
import WebSocket from "ws";

/** Writes the heap snapshot of worker `worker` (inspector on `port`) to `file`. */
export async function takeSnapshot(port, worker, file) {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
  const target = targets.find((t) => t.id === `core:user:${worker}`);
  if (!target) throw new Error(`heap snapshot: no inspector target for worker ${worker}`);
  const socket = new WebSocket(target.webSocketDebuggerUrl, { maxPayload: 0 });
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  const out = fs.createWriteStream(file);
  let next = 1;
  const pending = new Map();
  socket.on("message", (data) => {
    const m = JSON.parse(data.toString());
    if (m.method === "HeapProfiler.addHeapSnapshotChunk") out.write(m.params.chunk);
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error) p.reject(new Error(`heap snapshot: ${m.error.message}`));
    else p.resolve(m.result);
  });
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  try {
    await send("HeapProfiler.enable");
    await send("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
  } finally {
    socket.close();
    await new Promise((resolve) => out.end(resolve));
  }
  return file;
}

const MB = (b) => `${(b / 1048576).toFixed(2)} MB`;

/** The summary lines of the snapshot in `file`: `top` kinds of node, `scripts` sources. */
export function summarize(file, { top = 15, scripts = 8 } = {}) {
  const snap = JSON.parse(fs.readFileSync(file, "utf8"));
  const meta = snap.snapshot.meta;
  const nf = meta.node_fields.length;
  const ef = meta.edge_fields.length;
  const [typeAt, nameAt, sizeAt, edgesAt] = ["type", "name", "self_size", "edge_count"].map((f) => meta.node_fields.indexOf(f));
  const types = meta.node_types[0];
  const edgeTypes = meta.edge_types[0];
  const { nodes, edges, strings } = snap;
  const byType = new Map();
  const byKind = new Map();
  const sources = [];
  let total = 0;
  for (let i = 0, e = 0; i < nodes.length; i += nf) {
    const type = types[nodes[i + typeAt]];
    const name = String(strings[nodes[i + nameAt]]);
    const size = nodes[i + sizeAt];
    total += size;
    byType.set(type, (byType.get(type) ?? 0) + size);
    const kind = type.endsWith("string") ? type : `${type} ${name.slice(0, 60)}`;
    const k = byKind.get(kind) ?? { size: 0, count: 0 };
    k.size += size;
    k.count++;
    byKind.set(kind, k);
    // A Script's `source` edge: the text the heap keeps for it.
    const edgeCount = nodes[i + edgesAt];
    if (type === "code" && name.startsWith("system / Script")) {
      for (let x = e; x < e + edgeCount * ef; x += ef) {
        if (edgeTypes[edges[x]] === "internal" && strings[edges[x + 1]] === "source") {
          sources.push({ script: name.replace("system / Script / ", "") || "(unnamed)", size: nodes[edges[x + 2] + sizeAt] });
        }
      }
    }
    e += edgeCount * ef;
  }
  const lines = [`${MB(total)} of self size in ${nodes.length / nf} nodes; by type: ${[...byType].sort((a, b) => b[1] - a[1]).map(([t, s]) => `${t} ${MB(s)}`).join(", ")}`];
  for (const [kind, { size, count }] of [...byKind].sort((a, b) => b[1].size - a[1].size).slice(0, top)) {
    lines.push(`  ${MB(size).padStart(9)} ${String(count).padStart(7)}  ${kind}`);
  }
  sources.sort((a, b) => b.size - a.size);
  const kept = sources.reduce((n, s) => n + s.size, 0);
  lines.push(`Script sources kept: ${MB(kept)} in ${sources.length} scripts; the largest:`);
  for (const s of sources.slice(0, scripts)) lines.push(`  ${MB(s.size).padStart(9)}  ${s.script}`);
  return lines;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(summarize(process.argv[2], { top: 40, scripts: 20 }).join("\n"));
}
