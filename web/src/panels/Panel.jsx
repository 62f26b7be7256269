// A titled, collapsible box in the side column.
export function Panel({ title, testId, extra, children, onDragOver, onDrop, className = "" }) {
  return (
    <section className={`panel ${className}`} data-testid={testId} onDragOver={onDragOver} onDrop={onDrop}>
      <details open>
        <summary>
          <span className="panel-title">{title}</span>
          {extra}
        </summary>
        <div className="panel-body">{children}</div>
      </details>
    </section>
  );
}

/** The message of a failed call, for showing next to what failed. */
export function errorText(e) {
  return String(e?.message ?? e);
}

/** True when a call failed because the agent has no such callable (the feature is off). */
export function isMissingMethod(e) {
  return /does not exist|not callable|unavailable/i.test(errorText(e));
}
