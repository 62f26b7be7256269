// MCP servers, from the `cf_agent_mcp_servers` push: add by URL (with optional headers),
// remove, state and error per server, the tools each offers (name, title, description and
// the hints of its annotations), and held-back tool-definition changes with an Accept button.
import { useState } from "react";
import { Panel, errorText } from "./Panel.jsx";
import { ToolHints } from "./McpHints.jsx";

/** Reads "Name: value" lines into a header object; throws on a line without a colon. */
export function parseHeaders(text) {
  const headers = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const colon = line.indexOf(":");
    if (colon <= 0) throw new Error(`Header line "${line}" is not "Name: value"`);
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}

function AddServer({ agent }) {
  const [name, setName] = useState("");
  const [url, setUrl] = useState("");
  const [headers, setHeaders] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);

  async function add(e) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const options = { headers: parseHeaders(headers) };
      const added = await agent.call("addMcpServer", [name.trim() || new URL(url).hostname, url.trim(), options]);
      if (added?.error) setError(added.error);
      setName("");
      setUrl("");
      setHeaders("");
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <form className="mcp-add" onSubmit={add} data-testid="mcp-add">
      <input name="name" placeholder="name (optional)" value={name} onChange={(e) => setName(e.target.value)} />
      <input name="url" placeholder="https://example.com/mcp" value={url} onChange={(e) => setUrl(e.target.value)} required />
      <textarea name="headers" rows={2} placeholder={"Headers, one per line (optional)\nAuthorization: Bearer …"} value={headers} onChange={(e) => setHeaders(e.target.value)} />
      <button type="submit" disabled={busy || !url.trim()}>{busy ? "Adding…" : "Add server"}</button>
      {error && <div className="status bad" data-testid="mcp-add-error">{error}</div>}
    </form>
  );
}

function Server({ agent, id, server, tools }) {
  const [error, setError] = useState(null);
  const pending = server.pendingToolChanges ?? [];
  const act = (method) => agent.call(method, [id]).then(() => setError(null), (e) => setError(errorText(e)));
  return (
    <li className={`mcp-server state-${server.state}`} data-server={id} data-state={server.state}>
      <div className="mcp-head">
        <strong>{server.name}</strong>
        <span className="badge">{server.state}</span>
        <button type="button" className="remove" onClick={() => act("removeMcpServer")}>Remove</button>
      </div>
      <code className="mcp-url">{server.server_url}</code>
      {server.error && <div className="status bad mcp-error">{server.error}</div>}
      {tools.length > 0 && (
        // Open: the tool list is what a person checks after adding a server.
        <details className="mcp-tools" open>
          <summary>{tools.length} tools</summary>
          <ul>
            {tools.map((t) => {
              const title = t.title ?? t.annotations?.title;
              return (
                <li key={t.name} data-tool-name={t.name}>
                  <code>{t.name}</code>
                  {title && title !== t.name && <span className="mcp-tool-title"> {title}</span>} <ToolHints annotations={t.annotations} />{" "}
                  <span className="panel-note mcp-tool-description">{t.description}</span>
                </li>
              );
            })}
          </ul>
        </details>
      )}
      {pending.length > 0 && (
        <div className="mcp-pending" data-testid="mcp-pending">
          <div>Changed tool definitions, held back until accepted:</div>
          <ul>
            {pending.map((p) => (
              <li key={p.tool}>
                <code>{p.tool}</code> ({p.changes.join(", ")}): <span className="panel-note">{p.current?.description}</span>
              </li>
            ))}
          </ul>
          <button type="button" className="approve accept" onClick={() => act("acceptMcpToolChanges")}>Accept</button>
        </div>
      )}
      {error && <div className="status bad">{error}</div>}
    </li>
  );
}

export function McpPanel({ agent, mcp }) {
  const servers = Object.entries(mcp.servers ?? {});
  return (
    <Panel title="MCP servers" testId="panel-mcp" extra={<span className="panel-note">{servers.length}</span>}>
      <AddServer agent={agent} />
      {servers.length === 0 ? (
        <p className="empty">No MCP servers.</p>
      ) : (
        <ul className="mcp-servers">
          {servers.map(([id, server]) => (
            <Server key={id} agent={agent} id={id} server={server} tools={(mcp.tools ?? []).filter((t) => t.serverId === id)} />
          ))}
        </ul>
      )}
    </Panel>
  );
}
