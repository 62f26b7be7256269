// The conversation: the messages as they stream, the error banner and the composer.
import { useEffect, useRef, useState } from "react";
import { Part, isShown } from "./Part.jsx";
import { Rewind } from "./Rewind.jsx";

/** True while a turn is submitted, streaming (from this tab or another) or being recovered. */
export function chatBusy(chat) {
  return chat.status === "submitted" || chat.status === "streaming" || chat.isServerStreaming || chat.isRecovering;
}

export function Chat({ chat, agent, runs, children }) {
  const [draft, setDraft] = useState("");
  const listRef = useRef(null);
  const busy = chatBusy(chat);
  const error =
    chat.error?.message ??
    (chat.connectionError ? `Connection closed: ${chat.connectionError.reason || chat.connectionError.code}` : null);

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

  const approve = (part, approved) => chat.addToolApprovalResponse({ id: part.approval.id, approved });
  // A turn that failed before any text leaves an assistant message with nothing to show:
  // no bubble for it, the error banner says what happened.
  const messages = chat.messages.filter((m) => m.role !== "assistant" || m.parts.some(isShown));

  return (
    <section className="chat">
      <main ref={listRef} className="messages" data-testid="messages">
        {messages.length === 0 && <p className="empty">Ask the agent something.</p>}
        {messages.map((m) => (
          <div key={m.id} className={`msg msg-${m.role}`} data-role={m.role}>
            {m.parts.filter(isShown).map((part, i) => (
              <Part key={i} part={part} onApproval={approve} runs={runs} />
            ))}
            {m.role === "user" && agent && <Rewind agent={agent} message={m} disabled={busy} />}
          </div>
        ))}
        {chat.status === "submitted" && <div className="thinking">thinking…</div>}
        {/* The agent lost the model mid-answer (a crash, a dropped stream, a rate limit) and
            is continuing it: `cf_agent_chat_recovering` and the `recovering` outcome. */}
        {chat.isRecovering && (
          <div className="recovering" data-testid="recovering">
            recovering the answer…
          </div>
        )}
      </main>
      {children}
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
    </section>
  );
}
