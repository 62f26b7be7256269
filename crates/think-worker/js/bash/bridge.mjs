// The JS half of think-rs's `bash` tool: runs one script in just-bash over an in-memory copy
// of the workspace and reports the final filesystem. Rust (src/tools/workspace/bash) owns
// everything else: which files are mounted, protection, write-back, output truncation.
// Imported from Rust with `#[wasm_bindgen(module = "/js/bash/bridge.mjs")]`; also used by
// tests/bash-corpus/compare.mjs under plain Node.
import { Bash } from "just-bash";

/**
 * @param {{
 *   files: Array<[string, Uint8Array]>,  // mounted files, normalized absolute paths
 *   dirs: string[],                      // every workspace directory, created before the run
 *   script: string,
 *   cwd: string,
 *   timeoutMs: number,                   // aborts the run; the result then has aborted: true
 *   network: boolean,                    // true registers curl with an empty allow-list (Think's `{}`)
 *   excludeRoots: string[],              // new paths under these roots are left out of `entries`
 * }} request
 * @returns {Promise<{
 *   stdout: string, stderr: string, exitCode: number,
 *   aborted: boolean,                    // the timeout fired
 *   error: string | null,                // exec threw (stdout/stderr are then empty)
 *   entries: Array<[string, "file" | "dir", Uint8Array | null]>,
 * }>} every path of the final filesystem except "/" (symlinks resolved; dangling ones left
 *   out); file content is null when it equals the mounted file of the same path.
 */
export async function runBash(request) {
  const { script, cwd, timeoutMs } = request;
  const initialFiles = new Map(request.files);
  const initialDirs = new Set(request.dirs);
  // Files are mounted lazily: just-bash copies a file in only when the script opens it, and a
  // file that stays lazy is known unchanged without reading it back.
  const mounted = new Map(request.files.map(([path, bytes]) => [path, () => bytes]));
  const bash = new Bash({
    files: Object.fromEntries(mounted),
    cwd,
    defenseInDepth: true,
    network: request.network ? {} : undefined,
    executionLimits: {
      // just-bash checks this deadline between commands, so it also stops CPU-bound loops
      // that never yield to the abort timer below (measured in workerd).
      maxExecutionTimeMs: timeoutMs,
      // The default (512 MiB) makes gzip ask workerd's zlib for a 256 MiB output buffer,
      // above its 128 MiB maximum; half of this stays within it.
      maxLiveBytes: 256 * 1024 * 1024,
    },
  });
  for (const dir of request.dirs) {
    await bash.fs.mkdir(dir, { recursive: true }).catch(() => {});
  }

  const controller = new AbortController();
  const started = Date.now();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  let result;
  let error = null;
  try {
    result = await bash.exec(script, { cwd, signal: controller.signal, rawScript: true });
  } catch (e) {
    error = e instanceof Error ? e.message : String(e);
    result = { stdout: "", stderr: "", exitCode: 1 };
  } finally {
    clearTimeout(timer);
  }
  // just-bash's own deadline (the same timeoutMs) can end the run a moment before the timer
  // fires; either way the timeout ended it.
  const timedOut = controller.signal.aborted || Date.now() - started >= timeoutMs;

  const excluded = (path) =>
    !initialFiles.has(path) &&
    !initialDirs.has(path) &&
    request.excludeRoots.some((root) => path === root || path.startsWith(root + "/"));
  const untouched = untouchedFiles(bash.fs, mounted);
  const entries = [];
  for (const path of bash.fs.getAllPaths()) {
    if (path === "/" || excluded(path)) continue;
    if (untouched.has(path)) {
      entries.push([path, "file", null]);
      continue;
    }
    const stat = await bash.fs.stat(path).catch(() => null);
    if (stat === null) continue;
    if (stat.isDirectory) {
      entries.push([path, "dir", null]);
    } else if (stat.isFile) {
      const bytes = await bash.fs.readFileBuffer(path).catch(() => null);
      if (bytes === null) continue;
      const before = initialFiles.get(path);
      const same = before !== undefined && (before === bytes || bytesEqual(before, bytes));
      entries.push([path, "file", same ? null : bytes]);
    }
  }
  return {
    stdout: result.stdout,
    stderr: result.stderr,
    exitCode: result.exitCode,
    aborted: timedOut,
    error,
    entries,
  };
}

/**
 * Paths whose entry is still the very lazy entry mounted there at the start: never opened,
 * never written, not moved from elsewhere. This reads just-bash's InMemoryFs entry map (pinned
 * version 3.4.2); if its shape differs, the set is empty and every file is read back and
 * compared instead.
 */
function untouchedFiles(fs, mounted) {
  const out = new Set();
  if (!(fs?.data instanceof Map)) return out;
  for (const [path, entry] of fs.data) {
    if (entry?.type === "file" && entry.lazy !== undefined && entry.lazy === mounted.get(path)) out.add(path);
  }
  return out;
}

function bytesEqual(a, b) {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
