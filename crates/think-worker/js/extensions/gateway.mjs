// The network gateway of extensions (src/wasm/extensions.rs): an extension isolate with
// network hosts gets a loopback stub of this entrypoint as its `globalOutbound`, with its
// grant as props. Every request the isolate makes arrives here; the Rust check
// (`ExtensionNetGate.check`: the manifest's hosts, then the private-address filter) decides,
// and only the URL it returns is fetched. Redirects are not followed here: the isolate's own
// fetch follows them, and each hop comes back through this gateway to be checked again.
import { WorkerEntrypoint } from "cloudflare:workers";
import { ExtensionNetGate } from "../../build/index.js";

export class ExtensionGateway extends WorkerEntrypoint {
  async fetch(request) {
    const verdict = JSON.parse(ExtensionNetGate.check(request.url, JSON.stringify(this.ctx.props ?? {})));
    if (!verdict.ok) throw new Error(verdict.error);
    return fetch(new Request(verdict.url, request), { redirect: "manual" });
  }
}
