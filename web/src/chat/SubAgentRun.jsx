// A sub-agent run under the tool call that started it: its status and the parts rebuilt from
// the child's streamed chunks (by `useAgentToolEvents`), folded once it ended. A tool call of
// the child shows its own runs (a grandchild's frames name the child's tool call id), and one
// waiting for approval is answered from here: the parent routes the answer to its child.
import { Part, isShown } from "./Part.jsx";

export function SubAgentRun({ run, runs }) {
  const running = run.status === "running";
  const parts = run.parts.filter((p) => p?.type && isShown(p));
  // The answer is usually the child's last text already; it is shown apart only when it is not
  // (JSON from an output schema).
  const lastText = parts.findLast((p) => p.type === "text")?.text;
  return (
    <details className={`subagent subagent-${run.status}`} data-testid="subagent-run" data-run={run.runId} open={running}>
      <summary>
        <span className="tool-name">{run.display?.name ?? run.agentType}</span>
        <span className="tool-state">{run.status}</span>
      </summary>
      <div className="subagent-parts">
        {parts.map((part, i) => (
          <Part key={i} part={part} runs={{ ...runs, drillBase: undefined }} onApproval={runs.approve} />
        ))}
        {run.summary && run.summary !== lastText && <div className="text subagent-summary">{run.summary}</div>}
        {run.error && <pre className="tool-output tool-error">{run.error}</pre>}
      </div>
    </details>
  );
}
