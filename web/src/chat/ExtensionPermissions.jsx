// What a `load_extension` call asks for, in words: the hosts it may reach and its workspace
// access, shown above the raw input so an approval is decided on what the extension gets.
const WORKSPACE = {
  none: "no access",
  read: "read only",
  "read-write": "read and write",
};

/** The permission lines of an extension: `network` hosts and `workspace` access. */
export function PermissionList({ network, workspace }) {
  const hosts = Array.isArray(network) ? network : [];
  const access = workspace ?? "none";
  return (
    <dl className="permissions">
      <dt>Network</dt>
      <dd data-permission="network">
        {hosts.length === 0 ? "none" : hosts.map((h) => <code key={h}>{h}</code>)}
      </dd>
      <dt>Workspace</dt>
      <dd data-permission="workspace" className={access === "read-write" ? "warn" : ""}>
        {WORKSPACE[access] ?? access}
      </dd>
    </dl>
  );
}

export function ExtensionPermissions({ input }) {
  if (!input || typeof input !== "object") return null;
  return (
    <div className="extension-request" data-testid="extension-permissions">
      <div>
        Extension <code>{String(input.name ?? "?")}</code>
        {input.version && <span className="panel-note"> {String(input.version)}</span>}
        {input.description && <span className="panel-note"> — {String(input.description)}</span>}
      </div>
      <PermissionList network={input.network} workspace={input.workspace_access} />
    </div>
  );
}
