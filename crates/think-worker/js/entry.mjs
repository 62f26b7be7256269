// The shipped Worker's entry: the Rust Worker (built into ../build/), its `ThinkAgent` class
// wrapped for Durable Object RPC (agent.mjs), and the extensions' network gateway.
import * as rust from "../build/index.js";
import { agentClass } from "./agent.mjs";

export default rust.default;
// Extensions' network gateway: their isolates' `globalOutbound` (ctx.exports.ExtensionGateway).
export { ExtensionGateway } from "./extensions/gateway.mjs";

/** The agent, with every RPC method of agent.mjs. */
export const ThinkAgent = agentClass(rust.ThinkAgent);
