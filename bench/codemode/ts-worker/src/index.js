// The Think side of the Code Mode bench: Think 0.16.0's `createExecuteTool` over
// `@cloudflare/shell`'s Workspace, with the LOADER binding, in a Durable Object. POST /execute
// {code} runs the tool once and reports the time spent inside the object; /noop does nothing.
import { DurableObject } from "cloudflare:workers";
import { Workspace, createWorkspaceStateBackend } from "@cloudflare/shell";
import { createExecuteTool } from "@cloudflare/think/tools/execute";
export { CodemodeRuntime } from "@cloudflare/codemode";

export class BenchCodemodeTs extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.workspace = new Workspace({ sql: ctx.storage.sql, name: () => "bench" });
    this.tool = createExecuteTool({ ctx, tools: {}, state: createWorkspaceStateBackend(this.workspace), loader: env.LOADER });
  }

  async fetch(request) {
    // A round trip with no work, which the bench subtracts from the caller's view of /execute.
    if (new URL(request.url).pathname === "/noop") return Response.json({});
    const { code } = await request.json();
    const t0 = performance.now();
    const output = await this.tool.execute({ code }, { toolCallId: "bench", messages: [] });
    const ms = performance.now() - t0;
    return Response.json({ ms, output });
  }
}

export default {
  fetch(request, env) {
    const name = new URL(request.url).searchParams.get("do") ?? "bench";
    return env.BENCH_CM_TS.get(env.BENCH_CM_TS.idFromName(name)).fetch(request);
  },
};
