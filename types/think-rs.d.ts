// TypeScript declarations for think-rs: the Durable Object RPC surface of the `ThinkAgent`
// class (crates/think-worker/js/entry.mjs) and the WebSocket frames it speaks beyond the `agents` chat protocol.
// Copy this file into a caller Worker's project and include it in its tsconfig; then
// `import type { ThinkAgent } from "think-rs"`. docs/rpc.md describes every method, and
// docs/protocol.md every frame. `npm test` checks that every method of the class is declared
// here and type-checks examples/caller-worker against this file (tests/docs/docs.test.mjs).

declare module "think-rs" {
  import type { DurableObject } from "cloudflare:workers";

  /** Any JSON value: what crosses Durable Object RPC and the `rpc` frame. */
  export type Json = null | boolean | number | string | JsonArray | JsonObject;
  export interface JsonObject {
    [key: string]: Json;
  }
  export interface JsonArray extends Array<Json> {}

  /** A part of a UI message (AI SDK 7 `UIMessage` parts: text, reasoning, `tool-<name>`, …). */
  export interface UIMessagePart {
    type: string;
    [key: string]: Json | undefined;
  }

  /** A message of the transcript, as `getMessages()` and the chat frames carry it. */
  export interface UIMessage {
    id: string;
    role: "system" | "user" | "assistant";
    parts: UIMessagePart[];
    metadata?: Json;
  }

  /** A tool the caller runs itself, declared for one `chat()` turn (never persisted). */
  export interface ClientToolSchema {
    name: string;
    description?: string;
    /** The JSON Schema of its input. */
    parameters?: Json;
  }

  /** What `onClientToolCall` receives when the model calls a client tool. */
  export interface ClientToolCall {
    toolName: string;
    input: Json;
    toolCallId: string;
  }

  /**
   * The callback object of `chat()`: pass an `RpcTarget` (from "cloudflare:workers") so the
   * agent can call back into the caller. Implement all four methods: over RPC the agent cannot
   * tell a missing one, and each call of it logs an error.
   */
  export interface ChatCallback {
    /** The turn started under this request id. */
    onStart(info: { requestId: string }): void | Promise<void>;
    /** One UIMessageChunk as JSON text (`start`, `text-delta`, `tool-input-available`, …). */
    onEvent(chunk: string): void | Promise<void>;
    /** The turn failed; the text is the error the tabs see too. */
    onError(error: string): void | Promise<void>;
    /** The turn ended (after `onError` too). Called once. */
    onDone(): void | Promise<void>;
  }

  export interface ChatOptions {
    /** Stops the turn when it aborts (not covered by the tests across Workers RPC). */
    signal?: AbortSignal;
    /** Client tools for this turn only. */
    clientTools?: ClientToolSchema[];
    /** Runs a client tool; a throw becomes `output-error` for the model. */
    onClientToolCall?(call: ClientToolCall): Json | Promise<Json>;
  }

  /** `usage()`: one window's counter. */
  export interface UsageWindow {
    used: number;
    /** The limit's maximum, or null when only counted. */
    limit: number | null;
    /** The limit's name in `THINK_LIMITS` (`turnsPerMinute`, `tokensPerDay`, …). */
    name: string | null;
    windowMs: number;
    /** When the open window closes (ms since the epoch), or null when none is open. */
    resetsAt: number | null;
  }

  export interface Usage {
    turns: UsageWindow;
    tokens: UsageWindow & { input: number; output: number };
  }

  export interface SkillReport {
    name: string;
    description: string;
    source: "rust" | "r2" | "workspace";
    valid: boolean;
    error?: string;
  }

  export type McpTransport = "streamable-http" | "sse" | "auto";

  export interface AddMcpServerOptions {
    transport?: McpTransport | { type: McpTransport; headers?: Record<string, string> };
    headers?: Record<string, string>;
    id?: string;
    /** The origin OAuth callbacks go to (default: the origin requests reached the agent on). */
    callbackHost?: string;
    callbackPath?: string;
    /** A client registered by hand, for authorization servers without dynamic registration. */
    clientId?: string;
    clientSecret?: string;
  }

  export type McpServerState = "authenticating" | "connecting" | "discovering" | "ready" | "failed";

  export interface AddedMcpServer {
    id: string;
    state: McpServerState;
    /** The authorization URL to show the user, while `state` is `authenticating`. */
    authUrl?: string;
    error?: string;
  }

  export interface PendingToolChange {
    tool: string;
    changes: string[];
    previous: { description: Json; inputSchema: Json };
    current: { description: Json; inputSchema: Json };
  }

  export interface McpServerEntry {
    name: string;
    server_url: string;
    auth_url: string | null;
    state: McpServerState;
    error: string | null;
    instructions: string | null;
    capabilities: Json;
    pendingToolChanges?: PendingToolChange[];
  }

  /** `getMcpServers()` and the `cf_agent_mcp_servers` frame's `mcp`. */
  export interface McpState {
    servers: Record<string, McpServerEntry>;
    tools: Array<{ name: string; serverId: string; [key: string]: Json }>;
    prompts: Array<{ name: string; serverId: string; [key: string]: Json }>;
    resources: Array<{ uri: string; serverId: string; [key: string]: Json }>;
  }

  export interface McpResourceContents {
    contents: Array<{ uri: string; mimeType?: string; text?: string; blob?: string }>;
  }

  export interface McpPrompt {
    description?: string;
    messages: Json[];
  }

  /** A Code Mode call waiting for approval. */
  export interface PendingCall {
    executionId: string;
    seq: number;
    connector: string;
    method: string;
    args: Json;
  }

  export type ExecutionStatus = "running" | "paused" | "completed" | "error" | "rejected" | "rolled_back";

  /** What `execute` returns to the model, and `approveExecution` to its caller. */
  export type ExecuteOutput =
    | { status: "completed"; executionId: string; result: Json; logs?: string[]; calls?: Json }
    | { status: "paused"; executionId: string; pending: PendingCall[] }
    | { status: "error"; executionId: string; error: string; logs?: string[] }
    | { status: "rejected"; executionId: string; reason: string };

  export interface LoggedCall {
    seq: number;
    /** `line:column` of the call in the code. */
    site: string;
    connector: string;
    method: string;
    args: Json;
    result?: Json;
    state: "executing" | "applied" | "error" | "pending" | "approved" | "rejected" | "reverted";
    requiresApproval: boolean;
    ephemeral: boolean;
  }

  export interface Execution {
    id: string;
    code: string;
    status: ExecutionStatus;
    result: Json;
    error: string | null;
    logs: string[];
    toolCallId?: string;
    createdAt: number;
    updatedAt: number;
    calls: LoggedCall[];
  }

  export interface Snippet {
    name: string;
    description?: string;
    code: string;
    inputSchema?: Json;
    savedAt: number;
  }

  export interface ExtensionManifest {
    name: string;
    version: string;
    description?: string;
    permissions?: {
      network?: string[];
      workspace?: "none" | "read" | "read-write";
      context?: { read?: string[] | "all"; write?: string[] | "own" };
      messages?: "none" | "read";
    };
    context?: Array<{
      label: string;
      description?: string;
      type: "readonly" | "writable" | "skill" | "searchable";
      maxTokens?: number;
    }>;
    hooks?: Array<"beforeTurn" | "beforeToolCall" | "afterToolCall" | "onStepFinish">;
  }

  export interface ExtensionInfo {
    name: string;
    version: string;
    description: string | null;
    tools: string[];
    contextLabels: string[];
    permissions: Json;
    hooks: string[];
    /** Hooks off since a run of theirs ended with the runtime, until the next load. */
    stoppedHooks?: string[];
    /** From the agent's configuration: cannot be unloaded. */
    static: boolean;
  }

  export interface WorkspaceEntry {
    path: string;
    type: "file" | "directory" | "symlink";
    size: number;
    mimeType: string;
    updatedAt: number;
  }

  export interface WorkspaceFile {
    path: string;
    mimeType: string;
    size: number;
    /** A text file of at most 1 MB, read without `"base64"`. */
    text?: string;
    /** With `"base64"`: the bytes (files up to 8 MB). */
    base64?: string;
    binary?: true;
    tooLarge?: true;
  }

  export interface Checkpoint {
    id: string;
    label: string | null;
    turnId: string | null;
    /** Ms since the epoch. */
    at: number;
    /** Files changed between this checkpoint and the next one (or now). */
    filesChanged: number;
  }

  export interface CheckpointChange {
    path: string;
    kind: "added" | "modified" | "deleted";
    diff: string | null;
    note?: string;
  }

  export interface RewindResult {
    /** The checkpoint taken before the rewind: `rewind(undo.id)` takes it back. */
    undo: Checkpoint;
    filesRestored: number;
    messagesRemoved: number;
    paths: string[];
  }

  export interface ForkResult {
    name: string;
    checkpoint: string;
    pages: number;
    imported: { messages: number; entries: number };
  }

  /** A context block as `getContext()` (an `rpc`-frame callable) reports it. */
  export interface ContextBlockReport {
    label: string;
    description: string | null;
    type: "readonly" | "writable" | "skill" | "searchable";
    maxTokens: number | null;
    tokens?: number;
    content?: string;
    entries?: string[];
  }

  /**
   * The agent's Durable Object class as other Workers see it over RPC: bind it with
   * `[[durable_objects.bindings]] class_name = "ThinkAgent"`, `script_name = "think-rs"`, and
   * type the binding `DurableObjectNamespace<ThinkAgent>`. Failures reject with an `Error`
   * whose message says why (a bad argument, a switched-off feature, a refused rewind, …).
   */
  export class ThinkAgent extends DurableObject {
    /** Runs a turn for `message` (text or a UIMessage); resolves when the turn has ended. */
    chat(message: string | UIMessage, callback: ChatCallback, options?: ChatOptions): Promise<void>;
    /** The transcript. */
    getMessages(): UIMessage[];
    /** Clears the transcript; every tab gets `cf_agent_chat_clear`. */
    clearMessages(): void;

    addMcpServer(name: string, url: string, options?: AddMcpServerOptions): Promise<AddedMcpServer>;
    removeMcpServer(id: string): Promise<null>;
    getMcpServers(): Promise<McpState>;
    /** Lets the model see a server's changed tool definitions; `{accepted}` counts them. */
    acceptMcpToolChanges(id: string): Promise<{ accepted: number }>;
    readMcpResource(serverId: string, uri: string): Promise<McpResourceContents>;
    getMcpPrompt(serverId: string, name: string, args?: Record<string, string>): Promise<McpPrompt>;

    usage(): Promise<Usage>;
    skills(): Promise<SkillReport[]>;

    pendingExecutions(executionId?: string): Promise<PendingCall[]>;
    pendingApprovals(
      executionId?: string,
    ): Promise<Array<{ executionId: string; source: "codemode"; descriptor: PendingCall }>>;
    approveExecution(executionId: string): Promise<ExecuteOutput>;
    rejectExecution(
      executionId: string,
      reason?: string,
      options?: { autoContinue?: boolean },
    ): Promise<ExecuteOutput>;
    executions(limit?: number): Promise<Execution[]>;
    rollbackExecution(
      executionId: string,
    ): Promise<{ executionId: string; reverted: number; status: ExecutionStatus }>;
    deleteExecution(executionId: string): Promise<boolean>;
    pruneExecutions(keep?: number): Promise<number>;
    saveSnippet(
      name: string,
      options: { executionId: string; description?: string; inputSchema?: Json },
    ): Promise<Snippet>;
    snippets(): Promise<Snippet[]>;
    deleteSnippet(name: string): Promise<boolean>;

    listExtensions(): Promise<ExtensionInfo[]>;
    loadExtension(manifest: ExtensionManifest, source: string): Promise<ExtensionInfo>;
    unloadExtension(
      name: string,
    ): Promise<{ unloaded: true; name: string; tools: string[]; contextLabels: string[] }>;

    listWorkspace(): Promise<{ entries: WorkspaceEntry[]; truncated: boolean }>;
    readWorkspaceFile(path: string, encoding?: "utf8" | "base64"): Promise<WorkspaceFile>;
    writeWorkspaceFile(path: string, base64: string, mimeType?: string): Promise<{ path: string; size: number }>;

    checkpoint(label?: string): Promise<Checkpoint>;
    checkpoints(): Promise<Checkpoint[]>;
    diffCheckpoint(id: string): Promise<CheckpointChange[]>;
    rewind(id: string, options?: { files?: boolean; transcript?: boolean }): Promise<RewindResult>;
    forkSession(id: string, newName: string): Promise<ForkResult>;

    /** Internal: a parent agent's call on this instance as its child (agents as tools). */
    subagentRpc(method: string, arg: string): Promise<Json>;
    /** Internal: the receiving side of `forkSession`; JSON text in and out. */
    forkRpc(method: string, arg: string): Promise<string>;
  }

  /**
   * The callables a tab reaches over the WebSocket's `rpc` frame (`agent.call(method, args)`):
   * the RPC methods but the chat's and the internal ones, plus `getContext`.
   */
  export type ThinkCallables = Omit<
    ThinkAgent,
    keyof DurableObject | "chat" | "getMessages" | "clearMessages" | "subagentRpc" | "forkRpc"
  > & {
    /** Every context block with its budget, token count and content (keys for keyed blocks). */
    getContext(): Promise<ContextBlockReport[]>;
  };

  /** How a chat request ended, on its terminal `cf_agent_use_chat_response`. */
  export type ChatOutcome = "completed" | "error" | "aborted" | "skipped" | "recovering";

  /** One frame of a chat stream (standard `agents` frame, with the fields 0.32 reads). */
  export interface ChatResponseFrame {
    type: "cf_agent_use_chat_response";
    id: string;
    /** One UIMessageChunk as JSON text, an error text (with `error`), or empty. */
    body: string;
    done: boolean;
    error?: true;
    seq?: number;
    outcome?: ChatOutcome;
    continuation?: true;
    messageIds?: string[];
    replay?: true;
    replayComplete?: true;
  }

  /** think-rs's own frames, server to client. */
  export type ThinkServerFrame =
    /** Workspace paths changed (at most 100 per 50 ms window; else `truncated`). */
    | { type: "think_workspace_changed"; paths: string[]; truncated: boolean }
    /** The answer to a frame think-rs could not read (clients ignore unknown types). */
    | { type: "cf_agent_protocol_error"; error: string }
    /** An event of a child agent running as tool call `parentToolCallId`. */
    | {
        type: "agent-tool-event";
        parentToolCallId: string;
        sequence: number;
        event: AgentToolEvent;
        replay?: true;
      }
    /** An MCP server asks the user for input (form mode). */
    | {
        type: "cf_agent_mcp_elicitation";
        id: string;
        serverId: string;
        serverName: string;
        message: string;
        requestedSchema: Json;
        createdAt: number;
        expiresAt: number;
      }
    | { type: "cf_agent_mcp_elicitation_error"; id: string; error: string }
    | { type: "cf_agent_mcp_elicitation_resolved"; id: string; action: "accept" | "decline" | "cancel" };

  /** think-rs's own frames, client to server. */
  export type ThinkClientFrame = {
    type: "cf_agent_mcp_elicitation_response";
    id: string;
    action: "accept" | "decline" | "cancel";
    content?: { [key: string]: Json };
  };

  /** The `event` of an `agent-tool-event` frame. */
  export type AgentToolEvent = { runId: string } & (
    | { kind: "started"; agentType?: string; order: number }
    | { kind: "chunk"; chunk: Json; body: string }
    | { kind: "finished"; result: Json; summary: string }
    | { kind: "error" | "interrupted"; error: string }
    | { kind: "aborted"; error: string; reason?: string }
  );
}
