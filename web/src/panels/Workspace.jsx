// The workspace: its file tree (re-read on every `think_workspace_changed` push), a viewer
// with syntax highlighting, download, and upload by dropping files on the panel.
import { useCallback, useEffect, useMemo, useState } from "react";
import { Panel, errorText } from "./Panel.jsx";
import { FileViewer } from "./FileViewer.jsx";
import { downloadFile, uploadFile } from "./files.js";

const parentOf = (path) => path.slice(0, path.lastIndexOf("/")) || "/";

/** Nests the flat, path-ordered entry list into `{entry, children}` nodes under `/`. */
function buildTree(entries) {
  const root = { entry: { path: "/", type: "directory" }, children: [] };
  const byPath = new Map([["/", root]]);
  for (const entry of entries) {
    const node = { entry, children: [] };
    byPath.set(entry.path, node);
    (byPath.get(parentOf(entry.path)) ?? root).children.push(node);
  }
  const order = (a, b) => (a.entry.type === "directory") !== (b.entry.type === "directory") ? (a.entry.type === "directory" ? -1 : 1) : a.entry.path.localeCompare(b.entry.path);
  const sort = (node) => {
    node.children.sort(order);
    node.children.forEach(sort);
  };
  sort(root);
  return root;
}

function TreeNode({ node, selected, folder, onSelect, changed }) {
  const { entry } = node;
  const [open, setOpen] = useState(true);
  const name = entry.path.split("/").pop();
  const isDir = entry.type === "directory";
  const row = (
    <span
      className={`tree-row ${selected === entry.path ? "selected" : ""} ${isDir && folder === entry.path ? "target" : ""} ${changed.has(entry.path) ? "changed" : ""}`}
      data-path={entry.path}
      data-type={entry.type}
      onClick={() => onSelect(entry)}
    >
      {name}
      {!isDir && <span className="tree-size">{formatSize(entry.size)}</span>}
    </span>
  );
  if (!isDir) {
    return (
      <li>
        <span className="tree-icon">{entry.type === "symlink" ? "↪" : "·"}</span>
        {row}
      </li>
    );
  }
  // Selecting a folder (the upload target) does not fold it; its arrow does.
  return (
    <li>
      <details open={open}>
        <summary onClick={(e) => e.preventDefault()}>
          <button type="button" className="tree-icon tree-toggle" aria-label={open ? "fold" : "unfold"} onClick={() => setOpen(!open)}>
            {open ? "▾" : "▸"}
          </button>
          {row}
        </summary>
        <ul>
          {node.children.map((child) => (
            <TreeNode key={child.entry.path} node={child} selected={selected} folder={folder} onSelect={onSelect} changed={changed} />
          ))}
        </ul>
      </details>
    </li>
  );
}

export function formatSize(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function WorkspacePanel({ agent, connected, change }) {
  const [listing, setListing] = useState({ entries: [], truncated: false });
  const [error, setError] = useState(null);
  const [selected, setSelected] = useState(null);
  const [folder, setFolder] = useState("/");
  const [status, setStatus] = useState(null);
  const [dragging, setDragging] = useState(false);

  const refresh = useCallback(() => {
    agent
      .call("listWorkspace", [])
      .then((l) => {
        setListing(l);
        setError(null);
      })
      .catch((e) => setError(errorText(e)));
  }, [agent]);

  useEffect(() => {
    if (connected) refresh();
  }, [connected, refresh, change.seq]);

  const tree = useMemo(() => buildTree(listing.entries), [listing]);
  const changed = useMemo(() => new Set(change.paths ?? []), [change]);
  const selectedEntry = listing.entries.find((e) => e.path === selected);

  function select(entry) {
    if (entry.type === "directory") setFolder(entry.path);
    else {
      setSelected(entry.path);
      setFolder(parentOf(entry.path));
    }
  }

  async function onDrop(e) {
    e.preventDefault();
    setDragging(false);
    const files = [...(e.dataTransfer?.files ?? [])];
    for (const file of files) {
      setStatus({ ok: true, text: `Uploading ${file.name}…` });
      try {
        const written = await uploadFile(agent, folder, file);
        setStatus({ ok: true, text: `Uploaded ${written.path} (${formatSize(written.size)})` });
      } catch (err) {
        setStatus({ ok: false, text: `Upload of ${file.name} failed: ${errorText(err)}` });
      }
    }
  }

  return (
    <Panel
      title="Workspace"
      testId="panel-workspace"
      className={dragging ? "dragging" : ""}
      extra={<span className="panel-note">{listing.entries.filter((e) => e.type === "file").length} files</span>}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDrop={onDrop}
    >
      <div className="drop-hint" data-testid="drop-target">Drop files here to upload them into <code>{folder}</code></div>
      {status && (
        <div className={`status ${status.ok ? "ok" : "bad"}`} data-testid="upload-status">
          {status.text}
        </div>
      )}
      {error && <div className="status bad">{error}</div>}
      {listing.entries.length === 0 ? (
        <p className="empty">The workspace is empty.</p>
      ) : (
        <ul className="tree" data-testid="file-tree">
          {tree.children.map((node) => (
            <TreeNode key={node.entry.path} node={node} selected={selected} folder={folder} onSelect={select} changed={changed} />
          ))}
        </ul>
      )}
      {listing.truncated && <p className="panel-note">Only the first {listing.entries.length} entries are listed.</p>}
      {selectedEntry && (
        <FileViewer
          agent={agent}
          entry={selectedEntry}
          reload={change.paths === null || changed.has(selectedEntry.path) ? change.seq : 0}
          onDownload={() => downloadFile(agent, selectedEntry.path).catch((e) => setStatus({ ok: false, text: errorText(e) }))}
        />
      )}
    </Panel>
  );
}
