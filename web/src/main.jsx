// The chat page served at `/`: the unmodified `agents` React hooks talking to the Rust agent.
// It streams text, shows tool calls, asks the user to approve gated tools, and runs the
// browser tool `getUserTimezone` itself. The agent instance comes from `?name=` (default "default").
import { StrictMode, useEffect, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import { useAgent } from "agents/react";
import { useAgentChat } from "agents/chat/react";
import "./style.css";

const agentName = new URLSearchParams(location.search).get("name") || "default";

// Tools the page runs; their schemas travel with every chat request as `clientTools`.
const browserTools = {
  getUserTimezone: {
    description: "Returns the user's IANA time zone (for example Europe/Berlin), read from their browser.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
    execute: () => ({ timezone: Intl.DateTimeFormat().resolvedOptions().timeZone }),
  },
};

const STATE_LABELS = {
  "input-streaming": "preparing",
  "input-available": "running",
  "approval-requested": "needs approval",
  "output-available": "done",
  "output-error": "error",
  "output-denied": "denied",
};

function stateLabel(part) {
  if (part.state === "approval-responded") return part.approval?.approved ? "approved" : "denied";
  const label = STATE_LABELS[part.state] ?? part.state;
  return part.approval?.approved && part.state === "output-available" ? `approved · ${label}` : label;
}

function show(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function ToolCall({ part, onApproval }) {
  const name = part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
  const pending = part.state === "approval-requested";
  return (
    <div className={`tool tool-${part.state}`} data-tool={name} data-state={part.state}>
      <div className="tool-head">
        <span className="tool-name">{name}</span>
        {name in browserTools && <span className="tool-where">in your browser</span>}
        <span className="tool-state">{stateLabel(part)}</span>
      </div>
      {part.input !== undefined && <pre className="tool-input">{show(part.input)}</pre>}
      {part.state === "output-available" && <pre className="tool-output">{show(part.output)}</pre>}
      {part.state === "output-error" && <pre className="tool-output tool-error">{part.errorText}</pre>}
      {pending && (
        <div className="tool-actions">
          <button className="approve" onClick={() => onApproval(part.approval.id, true)}>Approve</button>
          <button className="deny" onClick={() => onApproval(part.approval.id, false)}>Deny</button>
        </div>
      )}
    </div>
  );
}

function Part({ part, onApproval }) {
  if (part.type === "text") return <div className="text">{part.text}</div>;
  if (part.type === "reasoning") {
    return (
      <details className="reasoning">
        <summary>Reasoning</summary>
        {part.text}
      </details>
    );
  }
  if (part.type === "dynamic-tool" || part.type.startsWith("tool-")) return <ToolCall part={part} onApproval={onApproval} />;
  return null;
}

function App() {
  const [connected, setConnected] = useState(false);
  const [draft, setDraft] = useState("");
  const listRef = useRef(null);
  const agent = useAgent({
    agent: "ThinkAgent",
    name: agentName,
    onOpen: () => setConnected(true),
    onClose: () => setConnected(false),
  });
  const chat = useAgentChat({
    agent,
    tools: browserTools,
    // The server owns the transcript (as with Think's own React hook).
    syncMessagesToServer: false,
    onToolCall: async ({ toolCall, addToolOutput }) => {
      const tool = browserTools[toolCall.toolName];
      if (!tool) return;
      try {
        addToolOutput({ toolCallId: toolCall.toolCallId, output: await tool.execute(toolCall.input) });
      } catch (e) {
        addToolOutput({ toolCallId: toolCall.toolCallId, state: "output-error", errorText: String(e?.message ?? e) });
      }
    },
  });

  const busy = chat.status === "submitted" || chat.status === "streaming" || chat.isServerStreaming;
  const error = chat.error?.message ?? (chat.connectionError ? `Connection closed: ${chat.connectionError.reason || chat.connectionError.code}` : null);

  useEffect(() => {
    const list = listRef.current;
    if (list) list.scrollTop = list.scrollHeight;
  }, [chat.messages]);

  function send(event) {
    event.preventDefault();
    const text = draft.trim();
    if (!text) return;
    setDraft("");
    chat.sendMessage({ text });
  }

  const approve = (id, approved) => chat.addToolApprovalResponse({ id, approved });

  return (
    <div className="app">
      <header>
        <h1>think-rs</h1>
        <span className="agent-name" title="agent instance">{agentName}</span>
        <span className={`conn ${connected ? "on" : "off"}`} data-testid="connection">
          {connected ? "connected" : "connecting…"}
        </span>
        <button className="clear" onClick={() => chat.clearHistory()} disabled={busy || chat.messages.length === 0}>
          Clear
        </button>
      </header>
      <main ref={listRef} className="messages" data-testid="messages">
        {chat.messages.length === 0 && <p className="empty">Ask the agent something.</p>}
        {chat.messages.map((m) => (
          <div key={m.id} className={`msg msg-${m.role}`} data-role={m.role}>
            {m.parts.map((part, i) => (
              <Part key={i} part={part} onApproval={approve} />
            ))}
          </div>
        ))}
        {chat.status === "submitted" && <div className="thinking">thinking…</div>}
      </main>
      {error && (
        <div className="error" role="alert" data-testid="error">
          <span>{error}</span>
          {chat.error && <button onClick={() => chat.clearError()}>Dismiss</button>}
        </div>
      )}
      <form className="composer" onSubmit={send}>
        <textarea
          value={draft}
          placeholder="Message the agent (Enter to send, Shift+Enter for a new line)"
          rows={2}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) send(e);
          }}
        />
        <div className="buttons">
          <button type="submit" className="send" disabled={!draft.trim()}>Send</button>
          <button type="button" className="stop" onClick={() => chat.stop()} disabled={!busy}>Stop</button>
        </div>
      </form>
    </div>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
