// Access to the agent (README "Access control"): before the chat opens, the page asks the
// agent's `get-messages` route whether it may read this instance. When the deploy wants a
// credential the page asks for a token (a shared token or a JWT) and keeps it in this tab's
// session storage; it then travels as `Authorization: Bearer` on HTTP and as `?token=` on
// the WebSocket, which browsers cannot give headers.
import { useEffect, useState } from "react";

const KEY = "think-rs-token";

/** The token this tab keeps, or null. */
export function storedToken() {
  try {
    return sessionStorage.getItem(KEY) || null;
  } catch {
    return null;
  }
}

function keepToken(token) {
  if (token) sessionStorage.setItem(KEY, token);
  else sessionStorage.removeItem(KEY);
}

/** Request headers that carry the tab's token, for the page's own fetches. */
export function authHeaders() {
  const token = storedToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** Renders `children(token, forget)` once the agent admits this tab to instance `name`. */
export function AccessGate({ name, children }) {
  const [token, setToken] = useState(storedToken);
  const [state, setState] = useState({ phase: "checking", message: null, status: 0 });
  const [draft, setDraft] = useState("");

  useEffect(() => {
    let live = true;
    setState({ phase: "checking", message: null, status: 0 });
    fetch(`/agents/think-agent/${encodeURIComponent(name)}/get-messages`, { headers: token ? { Authorization: `Bearer ${token}` } : {} })
      .then(async (r) => {
        if (!live) return;
        if (r.ok) setState({ phase: "open", message: null, status: r.status });
        else setState({ phase: "locked", message: (await r.text()).trim(), status: r.status });
      })
      .catch((e) => live && setState({ phase: "locked", message: `The agent could not be reached: ${e.message}`, status: 0 }));
    return () => {
      live = false;
    };
  }, [name, token]);

  const use = (next) => {
    keepToken(next);
    setToken(next);
  };

  if (state.phase === "open") return children(token, () => use(null));
  return (
    <div className="access" data-testid="access">
      <h1>think-rs</h1>
      {state.phase === "checking" ? (
        <p className="empty">Checking access to {name}…</p>
      ) : (
        <form
          onSubmit={(event) => {
            event.preventDefault();
            if (draft.trim()) use(draft.trim());
            setDraft("");
          }}
        >
          <p>
            {state.status === 403
              ? `This token does not reach the instance "${name}".`
              : token
                ? "The agent refused this token."
                : `The agent "${name}" asks for a token.`}
          </p>
          {state.message && <pre className="access-reason" data-testid="access-reason">{state.message}</pre>}
          <label>
            Token
            <input type="password" autoComplete="off" value={draft} onChange={(e) => setDraft(e.target.value)} data-testid="token" autoFocus />
          </label>
          <button type="submit" disabled={!draft.trim()}>
            Open
          </button>
          <p className="hint">Kept in this tab's session storage only.</p>
        </form>
      )}
    </div>
  );
}
