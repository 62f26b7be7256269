// The TypeScript reference side of `npm run bench`: `@cloudflare/shell`'s Workspace and the
// workspace tools of `@cloudflare/think` 0.16.0, in a Durable Object set up the way Think
// sets up its own (`new Workspace({ sql: ctx.storage.sql, name })`, plus the R2 bucket the
// think-rs agent has). It answers the same routes as bench/rust-worker (see its lib.rs).
import { DurableObject } from "cloudflare:workers";
import { Workspace } from "@cloudflare/shell";
import { createWorkspaceTools } from "@cloudflare/think/tools/workspace";

const json = (value, status = 200) =>
  new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } });

export class BenchTs extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.ws = new Workspace({ sql: ctx.storage.sql, r2: env.WORKSPACE_R2, name: () => `bench-ts/${ctx.id}` });
    this.tools = createWorkspaceTools(this.ws);
  }

  async fetch(request) {
    const url = new URL(request.url);
    const body = request.method === "POST" ? await request.json() : null;
    const parts = url.pathname.replace(/^\//, "").split("/");
    if (parts[0] === "setup" && parts[1] === "files") return this.setupFiles(body);
    if (parts[0] === "run" && parts.length === 2) return this.run(parts[1], body);
    if (parts[0] === "call" && parts.length === 2) return this.call(parts[1], body);
    if (parts[0] === "memory") return json({});
    return json({ error: `no route ${url.pathname}` }, 404);
  }

  async setupFiles({ files }) {
    for (const f of files) await this.ws.writeFile(f.path, f.content);
    return json({ written: files.length });
  }

  async run(name, { inputs, iterations = 1, keepOutputs = false }) {
    const tool = this.tools[name];
    if (!tool) return json({ error: `no tool ${name}` }, 404);
    const ctx = { toolCallId: "bench", messages: [] };
    // Inputs are copied before the clock starts, as the AI SDK hands each call its own object.
    const batches = Array.from({ length: Math.max(1, iterations) }, () => structuredClone(inputs));
    let outputs = [];
    let errors = 0;
    const start = performance.now();
    for (const batch of batches) {
      outputs = [];
      errors = 0;
      for (const input of batch) {
        try {
          outputs.push(await tool.execute(input, ctx));
        } catch (e) {
          errors++;
          outputs.push({ thrown: e instanceof Error ? e.message : String(e) });
        }
      }
    }
    const ms = (performance.now() - start) / batches.length;
    return json({ ms, calls: inputs.length, errors, ...(keepOutputs ? { outputs } : {}) });
  }

  async call(name, { input }) {
    const tool = this.tools[name];
    if (!tool) return json({ error: `no tool ${name}` }, 404);
    try {
      return json({ output: await tool.execute(input, { toolCallId: "call", messages: [] }) });
    } catch (e) {
      return json({ thrown: e instanceof Error ? e.message : String(e) });
    }
  }
}

export default {
  async fetch(request, env) {
    const name = new URL(request.url).searchParams.get("do") ?? "default";
    return env.BENCH_TS.get(env.BENCH_TS.idFromName(name)).fetch(request);
  },
};
