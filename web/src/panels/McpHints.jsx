// The hints an MCP server gives about a tool (`annotations`): read-only and destructive tools
// get a badge in the MCP panel; a destructive one also needs approval by default.

/** Badges for a tool's `readOnlyHint` / `destructiveHint` (nothing for an unannotated tool). */
export function ToolHints({ annotations }) {
  return (
    <>
      {annotations?.readOnlyHint === true && (
        <span className="badge hint-readonly" data-hint="readOnly" title="readOnlyHint: the tool does not change anything">read-only</span>
      )}
      {annotations?.destructiveHint === true && (
        <span className="badge hint-destructive" data-hint="destructive" title="destructiveHint: needs approval unless THINK_APPROVAL relaxes it">destructive</span>
      )}
    </>
  );
}
