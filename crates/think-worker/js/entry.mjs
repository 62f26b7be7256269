// The shipped Worker's entry: the Rust Worker (built into ../build/), its `ThinkAgent` class
// wrapped for Durable Object RPC (agent.mjs), and the extensions' network gateway.
import * as rust from "../build/index.js";
import { agentClass } from "./agent.mjs";
import { extensionGateway } from "./extensions/gateway.mjs";

export default rust.default;
// Extensions' network gateway: their isolates' `globalOutbound` (ctx.exports.ExtensionGateway).
export const ExtensionGateway = extensionGateway(rust);

/** The agent, with every RPC method of agent.mjs. */
export const ThinkAgent = agentClass(rust.ThinkAgent);
