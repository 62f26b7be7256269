// The network gateway of extensions (crates/think-worker/src/extensions.rs): an extension
// isolate with network hosts gets a loopback stub of this entrypoint as its `globalOutbound`,
// with its grant as props. Every request the isolate makes arrives here; the Rust check
// (`ExtensionNetGate.check`: the manifest's hosts, then the private-address filter) decides,
// and only the URL it returns is fetched. Redirects are not followed here: the isolate's own
// fetch follows them, and each hop comes back through this gateway to be checked again.
// The entry module exports it as `ExtensionGateway` (ctx.exports.ExtensionGateway), built
// from its own wasm build: `export const ExtensionGateway = extensionGateway(rust);`.
import { WorkerEntrypoint } from "cloudflare:workers";

/** The gateway entrypoint class over the wasm build `rust` (its `ExtensionNetGate`). */
export function extensionGateway(rust) {
  return class ExtensionGateway extends WorkerEntrypoint {
    async fetch(request) {
      const verdict = JSON.parse(rust.ExtensionNetGate.check(request.url, JSON.stringify(this.ctx.props ?? {})));
      if (!verdict.ok) throw new Error(verdict.error);
      return fetch(new Request(verdict.url, request), { redirect: "manual" });
    }
  };
}
