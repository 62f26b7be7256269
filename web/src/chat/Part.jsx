// One part of a message: text, reasoning, or a tool call (with its sub-agent runs).
import { ToolCall } from "./ToolCall.jsx";

export const isTool = (part) => part.type === "dynamic-tool" || part.type.startsWith("tool-");

/** Whether a part has anything to show (empty text and step markers do not). */
export function isShown(part) {
  if (part.type === "text" || part.type === "reasoning") return Boolean(part.text);
  return isTool(part);
}

export function Part({ part, onApproval, runs }) {
  if (part.type === "text") return <div className="text">{part.text}</div>;
  if (part.type === "reasoning") {
    return (
      <details className="reasoning">
        <summary>Reasoning</summary>
        {part.text}
      </details>
    );
  }
  if (isTool(part)) return <ToolCall part={part} onApproval={onApproval} runs={runs} />;
  return null;
}
