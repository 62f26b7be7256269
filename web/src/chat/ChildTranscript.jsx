// A finished sub-agent call seen from a tab that was not there while it ran: the parent keeps
// a run's events only while it runs, so the child's steps are read on demand from the drill-in
// route (`…/sub/<toolCallId>/get-messages`), one level at a time.
import { useState } from "react";
import { Part, isShown } from "./Part.jsx";
import { authHeaders } from "../access.jsx";

const NO_RUNS = () => [];

export function ChildTranscript({ base, toolCallId }) {
  const [state, setState] = useState({ messages: null, error: null });
  const url = `${base}/sub/${encodeURIComponent(toolCallId)}`;
  const load = (event) => {
    if (!event.currentTarget.open || state.messages) return;
    fetch(`${url}/get-messages`, { headers: authHeaders() })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`${r.status} ${r.statusText}`))))
      .then((messages) => setState({ messages, error: null }))
      .catch((e) => setState({ messages: null, error: `The child's steps could not be read: ${e.message}` }));
  };
  // The child's own agent-tool calls drill one level further down.
  const runs = { getRunsForToolCall: NO_RUNS, drillBase: url };
  return (
    <details className="subagent subagent-transcript" data-testid="subagent-transcript" onToggle={load}>
      <summary>
        <span className="tool-name">child agent</span>
        <span className="tool-state">steps</span>
      </summary>
      <div className="subagent-parts">
        {state.messages?.map((m) => (
          <div key={m.id} className={`child-msg child-${m.role}`} data-role={m.role}>
            {m.parts.filter(isShown).map((part, i) => (
              <Part key={i} part={part} runs={runs} />
            ))}
          </div>
        ))}
        {state.error && <pre className="tool-output tool-error">{state.error}</pre>}
      </div>
    </details>
  );
}
