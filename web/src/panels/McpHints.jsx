// The hints an MCP server gives about a tool (`annotations`), as badges in the MCP panel: each
// of readOnlyHint, destructiveHint, idempotentHint and openWorldHint that the server gave
// (an absent hint shows nothing: the spec's defaults are not claims of the server). A
// destructive tool also needs approval by default.

const HINTS = [
  { key: "readOnlyHint", hint: "readOnly", yes: "read-only", no: "may modify", about: "the tool does not change anything" },
  { key: "destructiveHint", hint: "destructive", yes: "destructive", no: "non-destructive", about: "needs approval unless THINK_APPROVAL relaxes it" },
  { key: "idempotentHint", hint: "idempotent", yes: "idempotent", no: "not idempotent", about: "calling it again with the same arguments has no further effect" },
  { key: "openWorldHint", hint: "openWorld", yes: "open world", no: "closed world", about: "it reaches outside entities (the web, other systems)" },
];

/** Badges for the boolean hints a tool's `annotations` carry (nothing for an unannotated tool). */
export function ToolHints({ annotations }) {
  return (
    <>
      {HINTS.filter(({ key }) => typeof annotations?.[key] === "boolean").map(({ key, hint, yes, no, about }) => {
        const on = annotations[key];
        return (
          <span key={key} className={`badge hint-${hint}${on ? "" : " hint-off"}`} data-hint={hint} data-value={String(on)} title={`${key}: ${on} (${about})`}>
            {on ? yes : no}
          </span>
        );
      })}
    </>
  );
}
