// Drives the think-rs agent from another Worker over Durable Object RPC: one turn with a
// streamed callback and a client tool that this Worker answers, then the transcript.
//   POST /chat?name=support  {"message": "What time zone am I in?"}
//   GET  /messages?name=support
import { RpcTarget } from "cloudflare:workers";
import type { ThinkAgent } from "think-rs";

interface Env {
  AGENT: DurableObjectNamespace<ThinkAgent>;
}

/** Collects the turn's text as the agent streams it. */
class Collector extends RpcTarget {
  text = "";
  error: string | null = null;
  done = false;

  onStart(): void {}

  onEvent(chunk: string): void {
    const event = JSON.parse(chunk) as { type: string; delta?: string };
    if (event.type === "text-delta" && event.delta) this.text += event.delta;
  }

  onError(error: string): void {
    this.error = error;
  }

  onDone(): void {
    this.done = true;
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const name = url.searchParams.get("name") ?? "default";
    const agent = env.AGENT.get(env.AGENT.idFromName(name));

    if (url.pathname === "/chat" && request.method === "POST") {
      const { message } = await request.json<{ message: string }>();
      const collector = new Collector();
      await agent.chat(message, collector, {
        clientTools: [
          {
            name: "getUserTimezone",
            description: "The user's time zone",
            parameters: { type: "object", properties: {} },
          },
        ],
        onClientToolCall: async ({ toolName }) =>
          toolName === "getUserTimezone" ? { timezone: "Europe/Paris" } : null,
      });
      return Response.json({ text: collector.text, error: collector.error, done: collector.done });
    }
    if (url.pathname === "/messages") {
      return Response.json(await agent.getMessages());
    }
    return new Response("Not found", { status: 404 });
  },
} satisfies ExportedHandler<Env>;
