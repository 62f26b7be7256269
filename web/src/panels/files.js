// Moving files between the browser and the agent's workspace through its callables
// (`readWorkspaceFile`, `writeWorkspaceFile`), as base64 inside one WebSocket message.

/** The largest file the agent accepts through `writeWorkspaceFile` (MAX_TRANSFER_BYTES). */
export const MAX_UPLOAD_BYTES = 8 * 1024 * 1024;

function toBase64(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Writes a dropped `File` into folder `dir`; resolves with `{path, size}`. */
export async function uploadFile(agent, dir, file) {
  if (file.size > MAX_UPLOAD_BYTES) {
    throw new Error(`${file.name} is ${file.size} bytes; the page uploads files of at most ${MAX_UPLOAD_BYTES} bytes`);
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  const path = `${dir.replace(/\/$/, "")}/${file.name}`;
  return agent.call("writeWorkspaceFile", [path, toBase64(bytes), file.type || null]);
}

/** Saves workspace file `path` through the browser's download. */
export async function downloadFile(agent, path) {
  const file = await agent.call("readWorkspaceFile", [path, "base64"]);
  const blob = new Blob([fromBase64(file.base64)], { type: file.mimeType || "application/octet-stream" });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = path.split("/").pop();
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
