// Collapsible JSON: objects and arrays fold per level, long strings are cut with a button to
// show the rest, and a long value as a whole starts folded (its summary says how long).
import { useState } from "react";

const FOLD_CHARS = 1500;
const FOLD_LINES = 30;
const STRING_CHARS = 400;
const OPEN_ENTRIES = 20;

function LongString({ text }) {
  const [all, setAll] = useState(false);
  if (all || text.length <= STRING_CHARS) return <span className="json-string">{JSON.stringify(text)}</span>;
  return (
    <span className="json-string">
      {JSON.stringify(text.slice(0, STRING_CHARS))}…{" "}
      <button type="button" className="link" onClick={() => setAll(true)}>
        show {text.length - STRING_CHARS} more characters
      </button>
    </span>
  );
}

function JsonNode({ value, depth }) {
  if (value === null || value === undefined) return <span className="json-null">{String(value)}</span>;
  if (typeof value === "string") return <LongString text={value} />;
  if (typeof value !== "object") return <span className={`json-${typeof value}`}>{String(value)}</span>;
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  if (entries.length === 0) return <span className="json-punct">{open + close}</span>;
  const what = Array.isArray(value) ? `${entries.length} items` : `${entries.length} keys`;
  return (
    <details className="json-node" open={depth < 2 && entries.length <= OPEN_ENTRIES}>
      <summary className="json-punct">
        {open}
        <span className="json-folded">
          {" "}
          <span className="json-count">{what}</span> {close}
        </span>
      </summary>
      {entries.map(([k, v]) => (
        <div key={k} className="json-entry">
          <span className="json-key">{Array.isArray(value) ? k : JSON.stringify(k)}</span>: <JsonNode value={v} depth={depth + 1} />
        </div>
      ))}
      <span className="json-punct">{close}</span>
    </details>
  );
}

export function JsonView({ value, label, className = "" }) {
  const text = typeof value === "string" ? value : (JSON.stringify(value, null, 2) ?? String(value));
  const lines = text.split("\n").length;
  const long = text.length > FOLD_CHARS || lines > FOLD_LINES;
  const preview = text.replace(/\s+/g, " ").slice(0, 80);
  return (
    <details className={`json ${className}`} open={!long} data-folded={long ? "true" : "false"}>
      <summary>
        <span className="json-label">{label}</span>
        {long && <span className="json-size"> {lines} lines, {text.length} characters</span>}
        <span className="json-preview">{preview}</span>
      </summary>
      {typeof value === "string" ? <pre className="json-text">{value}</pre> : <div className="json-body"><JsonNode value={value} depth={0} /></div>}
    </details>
  );
}
