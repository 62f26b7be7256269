// A tool call: name, state, input and output as collapsible JSON, approval buttons, and the
// sub-agent runs it started (from `agent-tool-event` frames).
import { browserTools } from "../browser-tools.js";
import { JsonView } from "./JsonView.jsx";
import { SubAgentRun } from "./SubAgentRun.jsx";
import { ExtensionPermissions } from "./ExtensionPermissions.jsx";
import { ChildTranscript } from "./ChildTranscript.jsx";

/** The shipped agent tool; a finished call of it can show its child's steps on demand. */
const AGENT_TOOL = "subagent";

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

export function toolName(part) {
  return part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
}

export function ToolCall({ part, onApproval, runs }) {
  const name = toolName(part);
  const pending = part.state === "approval-requested";
  const subRuns = runs?.getRunsForToolCall(part.toolCallId) ?? [];
  return (
    <div className={`tool tool-${part.state}`} data-tool={name} data-state={part.state}>
      <div className="tool-head">
        <span className="tool-name">{name}</span>
        {name in browserTools && <span className="tool-where">in your browser</span>}
        <span className="tool-state">{stateLabel(part)}</span>
      </div>
      {name === "load_extension" && part.input !== undefined && <ExtensionPermissions input={part.input} />}
      {part.input !== undefined && <JsonView className="tool-input" label="input" value={part.input} />}
      {part.state === "output-available" && <JsonView className="tool-output" label="output" value={part.output} />}
      {part.state === "output-error" && <pre className="tool-output tool-error">{part.errorText}</pre>}
      {pending && onApproval && (
        <div className="tool-actions">
          <button className="approve" onClick={() => onApproval(part, true)}>Approve</button>
          <button className="deny" onClick={() => onApproval(part, false)}>Deny</button>
        </div>
      )}
      {subRuns.length === 0 && name === AGENT_TOOL && part.state === "output-available" && runs?.drillBase && (
        <ChildTranscript base={runs.drillBase} toolCallId={part.toolCallId} />
      )}
      {subRuns.map((run) => (
        <SubAgentRun key={run.runId} run={run} runs={runs} />
      ))}
    </div>
  );
}
