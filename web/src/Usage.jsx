// The instance's turn and token counters (`usage()`), with their limits when THINK_LIMITS sets
// them: read when the tab connects and after every turn, so nothing polls.
import { useEffect, useState } from "react";

const compact = (n) => (n >= 1e6 ? `${+(n / 1e6).toFixed(1)}M` : n >= 1e4 ? `${Math.round(n / 1e3)}k` : String(n));

function per(ms) {
  if (ms === 60000) return "min";
  if (ms === 86400000) return "day";
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

function Counter({ label, entry, testid }) {
  const over = entry.limit !== null && entry.used >= entry.limit;
  const resets = entry.resetsAt ? `resets ${new Date(entry.resetsAt).toLocaleTimeString()}` : "";
  const title = [entry.name ?? "no limit", resets].filter(Boolean).join(", ");
  return (
    <span className={`usage-counter${over ? " over" : ""}`} data-testid={testid} title={title}>
      {label} {compact(entry.used)}
      {entry.limit !== null && `/${compact(entry.limit)}`} per {per(entry.windowMs)}
    </span>
  );
}

export function UsageMeter({ agent, connected, busy }) {
  const [usage, setUsage] = useState(null);
  useEffect(() => {
    if (!connected || busy) return;
    let live = true;
    agent
      .call("usage", [])
      .then((u) => live && setUsage(u))
      .catch(() => {});
    return () => {
      live = false;
    };
  }, [agent, connected, busy]);
  if (!usage) return null;
  return (
    <span className="usage" data-testid="usage">
      <Counter label="turns" entry={usage.turns} testid="usage-turns" />
      <Counter label="tokens" entry={usage.tokens} testid="usage-tokens" />
    </span>
  );
}
