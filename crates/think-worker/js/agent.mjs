// The Durable Object class of an agent: a thin `DurableObject` wrapper around the class a
// `think_agent!` declaration exports from the wasm (through js/shim.mjs), because Durable
// Object RPC needs a class that `extends DurableObject` and the exported one does not. Fetch,
// WebSockets and alarms go straight to the Rust object; the RPC methods forward to its `rpc*`
// exports. An entry module exports one per agent class: `export const MyAgent =
// agentClass(rust.MyAgent);` (js/entry.mjs for the shipped agent, examples/custom-agent).
import { DurableObject } from "cloudflare:workers";

/** The RPC-capable Durable Object class for the wasm-exported agent class `Rust`. */
export function agentClass(Rust) {
  return class extends DurableObject {
    #inner;

    constructor(ctx, env) {
      super(ctx, env);
      this.#inner = new Rust(ctx, env);
    }

    fetch(request) {
      return this.#inner.fetch(request);
    }

    webSocketMessage(ws, message) {
      return this.#inner.webSocketMessage(ws, message);
    }

    webSocketClose(ws, code, reason, wasClean) {
      return this.#inner.webSocketClose(ws, code, reason, wasClean);
    }

    webSocketError(ws, error) {
      return this.#inner.webSocketError(ws, error);
    }

    alarm() {
      return this.#inner.alarm();
    }

    /** Runs a turn for `message` (text or a UIMessage); `callback` gets onStart/onEvent/onDone/onError. */
    chat(message, callback, options = {}) {
      return this.#inner.rpcChat(message, callback, options);
    }

    getMessages() {
      return this.#inner.rpcGetMessages();
    }

    clearMessages() {
      return this.#inner.rpcClearMessages();
    }

    /** Agents as tools: a parent's call on this instance as its child (`start`, `events`, `cancel`, `approve`, `messages`); JSON text in and out. */
    subagentRpc(method, arg) {
      return this.#inner.rpcSubagent(method, arg);
    }

    /** forkSession: another instance copying a checkpoint into this one (`begin`, `page`, `finish`); JSON text in and out. */
    forkRpc(method, arg) {
      return this.#inner.rpcFork(method, arg);
    }

    addMcpServer(name, url, options) {
      return this.#inner.rpcCall("addMcpServer", [name, url, options ?? null]);
    }

    removeMcpServer(id) {
      return this.#inner.rpcCall("removeMcpServer", [id]);
    }

    getMcpServers() {
      return this.#inner.rpcCall("getMcpServers", []);
    }

    acceptMcpToolChanges(id) {
      return this.#inner.rpcCall("acceptMcpToolChanges", [id]);
    }

    /** `resources/read` on an MCP server: `{contents: [{uri, mimeType?, text | blob}]}`. */
    readMcpResource(serverId, uri) {
      return this.#inner.rpcCall("readMcpResource", [serverId, uri]);
    }

    /** `prompts/get` on an MCP server: `{description?, messages}`. */
    getMcpPrompt(serverId, name, args) {
      return this.#inner.rpcCall("getMcpPrompt", [serverId, name, args ?? null]);
    }

    /** The instance's turn and token counters with their limits (`THINK_LIMITS`): `{turns: {used, limit, name, windowMs, resetsAt}, tokens: {used, input, output, limit, name, windowMs, resetsAt}}`. */
    usage() {
      return this.#inner.rpcCall("usage", []);
    }

    /** Every skill found, valid or not: `[{name, description, source, valid, error?}]`. */
    skills() {
      return this.#inner.rpcCall("skills", []);
    }

    // Code Mode (the `execute` tool): paused executions, the journal and snippets.
    pendingExecutions(executionId) {
      return this.#inner.rpcCall("pendingExecutions", [executionId ?? null]);
    }

    pendingApprovals(executionId) {
      return this.#inner.rpcCall("pendingApprovals", [executionId ?? null]);
    }

    approveExecution(executionId) {
      return this.#inner.rpcCall("approveExecution", [executionId]);
    }

    rejectExecution(executionId, reason, options) {
      return this.#inner.rpcCall("rejectExecution", [executionId, reason ?? null, options ?? null]);
    }

    executions(limit) {
      return this.#inner.rpcCall("executions", [limit ?? null]);
    }

    /** Asks the connectors to undo an execution's applied calls; `{executionId, reverted, status}`. */
    rollbackExecution(executionId) {
      return this.#inner.rpcCall("rollbackExecution", [executionId]);
    }

    deleteExecution(executionId) {
      return this.#inner.rpcCall("deleteExecution", [executionId]);
    }

    pruneExecutions(keep) {
      return this.#inner.rpcCall("pruneExecutions", [keep ?? null]);
    }

    saveSnippet(name, options) {
      return this.#inner.rpcCall("saveSnippet", [name, options ?? null]);
    }

    snippets() {
      return this.#inner.rpcCall("snippets", []);
    }

    deleteSnippet(name) {
      return this.#inner.rpcCall("deleteSnippet", [name]);
    }

    // Extensions: `[{name, version, description, tools, contextLabels, permissions, hooks, static}]`.
    listExtensions() {
      return this.#inner.rpcCall("listExtensions", []);
    }

    loadExtension(manifest, source) {
      return this.#inner.rpcCall("loadExtension", [manifest, source]);
    }

    /** `{unloaded: true, name, tools, contextLabels}`; an error if it is not loaded or is static. */
    unloadExtension(name) {
      return this.#inner.rpcCall("unloadExtension", [name]);
    }

    // The workspace, as the chat page's panel reads and writes it.
    /** `{entries: [{path, type, size, mimeType, updatedAt}], truncated}`, at most 5,000 entries. */
    listWorkspace() {
      return this.#inner.rpcCall("listWorkspace", []);
    }

    /** `{path, mimeType, size}` plus `text`, `base64` (with `encoding` "base64"), `binary` or `tooLarge`. */
    readWorkspaceFile(path, encoding) {
      return this.#inner.rpcCall("readWorkspaceFile", encoding === undefined ? [path] : [path, encoding]);
    }

    // Checkpoints (files and transcript together; see docs/checkpoints.md).
    /** Takes a checkpoint now; `{id, label, turnId, at, filesChanged}`. */
    checkpoint(label) {
      return this.#inner.rpcCall("checkpoint", [label ?? null]);
    }

    /** Every kept checkpoint, oldest first. */
    checkpoints() {
      return this.#inner.rpcCall("checkpoints", []);
    }

    /** The files changed since checkpoint `id`: `[{path, kind, diff?}]`. */
    diffCheckpoint(id) {
      return this.#inner.rpcCall("diffCheckpoint", [id]);
    }

    /** Restores checkpoint `id` (`{files?: true, transcript?: true}`); refused while a turn runs. */
    rewind(id, options) {
      return this.#inner.rpcCall("rewind", [id, options ?? null]);
    }

    /** Copies checkpoint `id` (files and transcript) into the empty instance `newName`. */
    forkSession(id, newName) {
      return this.#inner.rpcCall("forkSession", [id, newName]);
    }

    /** Writes base64 content (≤ 8 MB) to `path`; `{path, size}`. */
    writeWorkspaceFile(path, base64, mimeType) {
      return this.#inner.rpcCall("writeWorkspaceFile", mimeType === undefined ? [path, base64] : [path, base64, mimeType]);
    }
  };
}
