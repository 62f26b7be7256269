// A sub-agent run under the tool call that started it: its status and the parts rebuilt from
// the child's streamed chunks (by `useAgentToolEvents`), folded once it ended.
import { Part, isShown } from "./Part.jsx";

export function SubAgentRun({ run }) {
  const running = run.status === "running";
  return (
    <details className={`subagent subagent-${run.status}`} data-testid="subagent-run" data-run={run.runId} open={running}>
      <summary>
        <span className="tool-name">{run.display?.name ?? run.agentType}</span>
        <span className="tool-state">{run.status}</span>
      </summary>
      <div className="subagent-parts">
        {run.parts.filter((p) => p?.type && isShown(p)).map((part, i) => (
          <Part key={i} part={part} />
        ))}
        {run.summary && <div className="text subagent-summary">{run.summary}</div>}
        {run.error && <pre className="tool-output tool-error">{run.error}</pre>}
      </div>
    </details>
  );
}
