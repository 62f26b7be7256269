// One workspace file: highlighted text with line numbers, or a note why there is no text,
// and a download button. Re-read when a push names the file.
import { useEffect, useMemo, useState } from "react";
import { errorText } from "./Panel.jsx";
import { highlight, languageOf } from "./highlight.js";

export function FileViewer({ agent, entry, reload, onDownload }) {
  const [file, setFile] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let live = true;
    agent
      .call("readWorkspaceFile", [entry.path])
      .then((f) => live && (setFile(f), setError(null)))
      .catch((e) => live && setError(errorText(e)));
    return () => {
      live = false;
    };
  }, [agent, entry.path, entry.updatedAt, reload]);
  const lang = languageOf(entry.path);
  const tokens = useMemo(() => (file?.text === undefined ? [] : highlight(file.text, lang)), [file, lang]);
  const lines = file?.text === undefined ? 0 : file.text.split("\n").length;

  return (
    <div className="viewer" data-testid="file-viewer" data-path={entry.path}>
      <div className="viewer-head">
        <code className="viewer-path">{entry.path}</code>
        <span className="panel-note">{file?.mimeType ?? entry.mimeType}</span>
        <button type="button" className="download" onClick={onDownload}>Download</button>
      </div>
      {error && <div className="status bad">{error}</div>}
      {file?.binary && <p className="panel-note">Binary file ({entry.size} bytes): download it to open it.</p>}
      {file?.tooLarge && <p className="panel-note">Too large to show here ({entry.size} bytes): download it.</p>}
      {file?.text !== undefined && (
        <div className="code">
          <pre className="gutter" aria-hidden="true">{Array.from({ length: lines }, (_, i) => i + 1).join("\n")}</pre>
          <pre className={`source lang-${lang ?? "text"}`} data-testid="file-text">
            {tokens.map((t, i) => (t.kind ? <span key={i} className={`tok-${t.kind}`}>{t.text}</span> : t.text))}
          </pre>
        </div>
      )}
    </div>
  );
}
