// The page: the chat on the left, the panels on the right. Every panel talks to the agent
// through its callables (`agent.call`) and follows its pushes (MCP state, workspace changes,
// sub-agent events), so nothing polls.
import { useState } from "react";
import { useAgent, useAgentToolEvents } from "agents/react";
import { useAgentChat } from "agents/chat/react";
import { browserTools, runBrowserTool } from "./browser-tools.js";
import { Chat, chatBusy } from "./chat/Chat.jsx";
import { Elicitations } from "./chat/Elicitation.jsx";
import { WorkspacePanel } from "./panels/Workspace.jsx";
import { McpPanel } from "./panels/Mcp.jsx";
import { ActivityPanel } from "./panels/Activity.jsx";
import { UsageMeter } from "./Usage.jsx";

const EMPTY_MCP = { servers: {}, tools: [], prompts: [], resources: [] };

export function App({ name, token, forget }) {
  const [connected, setConnected] = useState(false);
  const [mcp, setMcp] = useState(EMPTY_MCP);
  // Bumped by every `think_workspace_changed` push; the workspace panel re-reads on it.
  const [workspaceChange, setWorkspaceChange] = useState({ seq: 0, paths: [] });
  const agent = useAgent({
    agent: "ThinkAgent",
    name,
    // The WebSocket's credential: browsers cannot set headers on it (the Worker strips it).
    query: token ? { token } : undefined,
    onOpen: () => setConnected(true),
    onClose: () => setConnected(false),
    onMcpUpdate: (state) => setMcp(state ?? EMPTY_MCP),
    onMessage: (message) => {
      if (typeof message.data !== "string" || !message.data.includes("think_workspace_changed")) return;
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (frame.type === "think_workspace_changed") {
        setWorkspaceChange((prev) => ({ seq: prev.seq + 1, paths: frame.truncated ? null : frame.paths }));
      }
    },
  });
  const chat = useAgentChat({
    agent,
    tools: browserTools,
    // The server owns the transcript (as with Think's own React hook).
    syncMessagesToServer: false,
    headers: token ? { Authorization: `Bearer ${token}` } : undefined,
    onToolCall: ({ toolCall, addToolOutput }) => runBrowserTool(toolCall, addToolOutput),
  });
  const events = useAgentToolEvents({ agent });
  // A child's tool call is not in this chat's messages, so its approval goes to the parent
  // as the frame itself, by tool call id.
  const runs = {
    ...events,
    drillBase: `/agents/think-agent/${encodeURIComponent(name)}`,
    approve: (part, approved) =>
      agent.send(JSON.stringify({ type: "cf_agent_tool_approval", toolCallId: part.toolCallId, approved, autoContinue: true })),
  };

  return (
    <div className="app">
      <header>
        <h1>think-rs</h1>
        <span className="agent-name" title="agent instance">{name}</span>
        <span className={`conn ${connected ? "on" : "off"}`} data-testid="connection">
          {connected ? "connected" : "connecting…"}
        </span>
        <UsageMeter agent={agent} connected={connected} busy={chatBusy(chat)} />
        <button className="clear" onClick={() => chat.clearHistory()} disabled={chatBusy(chat) || chat.messages.length === 0}>
          Clear
        </button>
        {token && (
          <button className="forget" onClick={forget} title="Forget this tab's token">
            Lock
          </button>
        )}
      </header>
      <div className="body">
        <Chat chat={chat} agent={agent} runs={runs}>
          <Elicitations agent={agent} />
        </Chat>
        <aside className="side">
          <WorkspacePanel agent={agent} connected={connected} change={workspaceChange} />
          <McpPanel agent={agent} mcp={mcp} />
          <ActivityPanel agent={agent} chat={chat} runs={runs} connected={connected} />
        </aside>
      </div>
    </div>
  );
}
