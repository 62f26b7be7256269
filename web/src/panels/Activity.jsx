// What the agent is doing or holding besides the chat: Code Mode executions waiting for
// approval, running sub-agents, loaded extensions, and the context blocks with their usage.
// A section whose callable does not exist in this agent (the feature is off) is not shown.
import { useCallback, useEffect, useState } from "react";
import { Panel, errorText, isMissingMethod } from "./Panel.jsx";
import { PermissionList } from "../chat/ExtensionPermissions.jsx";

/** Calls `method` whenever `deps` change; `{value, error, missing, reload}`. */
function useCallable(agent, method, args, deps) {
  const [state, setState] = useState({ value: undefined, error: null, missing: false });
  const reload = useCallback(() => {
    agent.call(method, args).then(
      (value) => setState({ value, error: null, missing: false }),
      (e) => setState({ value: undefined, error: errorText(e), missing: isMissingMethod(e) }),
    );
  }, [agent, method]);
  useEffect(() => {
    const t = setTimeout(reload, 150); // coalesce a burst of message updates into one call
    return () => clearTimeout(t);
  }, [reload, ...deps]);
  return { ...state, reload };
}

function Executions({ agent, pending }) {
  const [error, setError] = useState(null);
  const byRun = new Map();
  for (const action of pending.value ?? []) {
    if (!byRun.has(action.executionId)) byRun.set(action.executionId, []);
    byRun.get(action.executionId).push(action);
  }
  const settle = async (method, id) => {
    try {
      const out = await agent.call(method, method === "rejectExecution" ? [id, "Rejected in the chat page"] : [id]);
      setError(out?.status === "error" ? out.error : null);
    } catch (e) {
      setError(errorText(e));
    }
    pending.reload();
  };
  return (
    <div className="activity-section" data-testid="activity-executions">
      <h3>Code Mode approvals</h3>
      {pending.value !== undefined && byRun.size === 0 && <p className="empty">Nothing waiting.</p>}
      {[...byRun].map(([id, actions]) => (
        <div key={id} className="execution" data-execution={id}>
          <code>{id}</code>
          <ul>
            {actions.map((a) => (
              <li key={a.seq}>
                <code>{`${a.connector}.${a.method}`}</code> <span className="panel-note">{JSON.stringify(a.args)}</span>
              </li>
            ))}
          </ul>
          <div className="tool-actions">
            <button type="button" className="approve" onClick={() => settle("approveExecution", id)}>Approve</button>
            <button type="button" className="deny" onClick={() => settle("rejectExecution", id)}>Reject</button>
          </div>
        </div>
      ))}
      {(error || pending.error) && <div className="status bad">{error || pending.error}</div>}
    </div>
  );
}

function SubAgents({ runs }) {
  const all = Object.values(runs.runsById);
  const running = all.filter((r) => r.status === "running");
  return (
    <div className="activity-section" data-testid="activity-subagents">
      <h3>Sub-agents</h3>
      {running.length === 0 && <p className="empty">None running{all.length ? ` (${all.length} finished)` : ""}.</p>}
      <ul>
        {running.map((r) => (
          <li key={r.runId} data-run={r.runId}>
            <code>{r.display?.name ?? r.agentType}</code> <span className="panel-note">under {r.parentToolCallId ?? "no tool call"}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Loaded extensions as `listExtensions()` gives them: name, version, tools, permissions;
 * a static one (from the agent's configuration) cannot be unloaded. */
function Extensions({ agent, extensions }) {
  const [error, setError] = useState(null);
  const list = Array.isArray(extensions.value) ? extensions.value : [];
  const unload = (name) =>
    agent.call("unloadExtension", [name]).then(
      () => (setError(null), extensions.reload()),
      (e) => (setError(errorText(e)), extensions.reload()),
    );
  return (
    <div className="activity-section" data-testid="activity-extensions">
      <h3>Extensions</h3>
      {list.length === 0 && <p className="empty">None loaded.</p>}
      <ul>
        {list.map((x) => (
          <li key={x.name} className="extension" data-extension={x.name}>
            <div className="context-head">
              <code>{x.name}</code> <span className="panel-note">{x.version}</span>
              {x.static ? (
                <span className="badge" title="part of the agent's configuration">static</span>
              ) : (
                <button type="button" className="remove" onClick={() => unload(x.name)}>Unload</button>
              )}
            </div>
            {x.description && <div className="panel-note">{x.description}</div>}
            <div className="extension-tools">
              {(x.tools ?? []).map((t) => <code key={t} data-tool={t}>{t}</code>)}
              {x.hooks?.length > 0 && <span className="panel-note"> hooks: {x.hooks.join(", ")}</span>}
            </div>
            <PermissionList network={x.permissions?.network} workspace={x.permissions?.workspace} />
          </li>
        ))}
      </ul>
      {(error || extensions.error) && <div className="status bad">{error || extensions.error}</div>}
    </div>
  );
}

function ContextBlocks({ blocks }) {
  return (
    <div className="activity-section" data-testid="activity-context">
      <h3>Context</h3>
      {blocks.value?.length === 0 && <p className="empty">No context blocks.</p>}
      <ul>
        {(blocks.value ?? []).map((b) => {
          const used = b.tokens ?? 0;
          const share = b.maxTokens ? Math.min(1, used / b.maxTokens) : 0;
          return (
            <li key={b.label} className="context-block" data-label={b.label}>
              <div className="context-head">
                <code>{b.label}</code> <span className="badge">{b.type}</span>
                <span className="panel-note context-usage">
                  {b.entries ? `${b.entries.length} entries` : b.maxTokens ? `${used} / ${b.maxTokens} tokens` : `${used} tokens`}
                </span>
              </div>
              {b.maxTokens > 0 && b.tokens !== undefined && (
                <div className="meter" title={`${Math.round(share * 100)}%`}>
                  <div style={{ width: `${share * 100}%` }} />
                </div>
              )}
              {b.content && <pre className="context-content">{b.content}</pre>}
            </li>
          );
        })}
      </ul>
      {blocks.error && <div className="status bad">{blocks.error}</div>}
    </div>
  );
}

export function ActivityPanel({ agent, chat, runs, connected }) {
  // Everything here changes with the transcript (a paused execution, a block the model
  // wrote, an extension it loaded), so it is re-read when the messages do.
  const deps = [connected, chat.messages, chat.status];
  const pending = useCallable(agent, "pendingExecutions", [], deps);
  const extensions = useCallable(agent, "listExtensions", [], deps);
  const blocks = useCallable(agent, "getContext", [], deps);
  return (
    <Panel title="Activity" testId="panel-activity">
      {!pending.missing && <Executions agent={agent} pending={pending} />}
      <SubAgents runs={runs} />
      {!extensions.missing && extensions.value !== undefined && <Extensions agent={agent} extensions={extensions} />}
      {!blocks.missing && <ContextBlocks blocks={blocks} />}
    </Panel>
  );
}
