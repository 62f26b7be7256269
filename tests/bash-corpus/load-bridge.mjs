// Imports crates/think-worker/js/bash/bridge.mjs under plain Node with its bare `just-bash` import pointed at
// a chosen build:
//   JUST_BASH        just-bash package dir; default <repo>/node_modules/just-bash
//   JUST_BASH_BUILD  "browser" (default: dist/bundle/browser.js, the build wrangler and
//                    worker-build bundle for workerd) or "node" (dist/bundle/index.js)
import { register } from "node:module";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const dir = process.env.JUST_BASH ?? join(repo, "node_modules/just-bash");
export const build = process.env.JUST_BASH_BUILD ?? "browser";
export const entry = join(dir, build === "node" ? "dist/bundle/index.js" : "dist/bundle/browser.js");
if (!existsSync(entry)) {
  console.error(`just-bash not found at ${entry}; set JUST_BASH to the package directory`);
  process.exit(2);
}
export const version = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
const hook = `export async function resolve(s, c, next) {
  if (s === "just-bash") return { url: ${JSON.stringify(pathToFileURL(entry).href)}, shortCircuit: true };
  return next(s, c);
}`;
register("data:text/javascript," + encodeURIComponent(hook));
export const { runBash } = await import(pathToFileURL(join(repo, "crates/think-worker/js/bash/bridge.mjs")).href);
/** The roots whose new paths the bash tool never writes back (src/tools/workspace/bash). */
export const EXCLUDED_ROOTS = ["/tmp", "/bin", "/usr", "/dev", "/proc", "/sys"];
