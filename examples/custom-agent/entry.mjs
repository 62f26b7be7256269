// The Worker's entry: the Rust build (build/index.js) and think-worker's JS, which the build
// copies into build/think-worker. Each agent class that `think_agent!` declares is exported
// through `agentClass`, which adds the Durable Object RPC methods (chat, getMessages, …).
import * as rust from "./build/index.js";
import { agentClass } from "./build/think-worker/agent.mjs";
import { extensionGateway } from "./build/think-worker/extensions/gateway.mjs";

export default rust.default;
// The extensions' network gateway (ctx.exports.ExtensionGateway).
export const ExtensionGateway = extensionGateway(rust);

export const TravelAgent = agentClass(rust.TravelAgent);
