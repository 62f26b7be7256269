// The Rewind action on a user message: finds the checkpoint its turn started from, previews
// the files a rewind would restore (diffCheckpoint), and on confirmation rewinds files and
// transcript. The agent then pushes the new messages and workspace to every tab.
import { useState } from "react";
import { errorText } from "../panels/Panel.jsx";

const KIND = { added: "removed by rewind", modified: "restored", deleted: "brought back" };

export function Rewind({ agent, message, disabled }) {
  const [preview, setPreview] = useState(null);
  const [error, setError] = useState(null);

  async function open() {
    setError(null);
    try {
      const list = await agent.call("checkpoints", []);
      const checkpoint = list.find((c) => c.turnId === message.id);
      if (!checkpoint) throw new Error("No checkpoint is kept for this message.");
      setPreview({ checkpoint, changes: await agent.call("diffCheckpoint", [checkpoint.id]) });
    } catch (e) {
      setError(errorText(e));
    }
  }

  async function confirm() {
    try {
      await agent.call("rewind", [preview.checkpoint.id]);
      setPreview(null);
    } catch (e) {
      setError(errorText(e));
    }
  }

  return (
    <div className="rewind" data-testid="rewind">
      {!preview && (
        <button type="button" className="rewind-open" onClick={open} disabled={disabled} title="Undo this message, what followed it, and its file changes">
          Rewind
        </button>
      )}
      {preview && (
        <div className="rewind-preview" data-testid="rewind-preview">
          <p>Rewinding removes this message and everything after it.{preview.changes.length === 0 ? " No file changes." : " Files:"}</p>
          <ul>
            {preview.changes.map((c) => (
              <li key={c.path} data-kind={c.kind}>
                <details>
                  <summary><code>{c.path}</code> <span className={`kind kind-${c.kind}`}>{KIND[c.kind] ?? c.kind}</span></summary>
                  {c.diff ? <pre className="diff">{c.diff}</pre> : <p className="panel-note">No diff shown (binary or large).</p>}
                </details>
              </li>
            ))}
          </ul>
          <button type="button" className="rewind-confirm" onClick={confirm} disabled={disabled}>Rewind</button>
          <button type="button" onClick={() => setPreview(null)}>Cancel</button>
        </div>
      )}
      {error && <div className="status bad" role="alert">{error}</div>}
    </div>
  );
}
