// The isolate side of an extension (src/extensions/isolate.rs): loaded as a module next to
// the extension's source (`think_extension.js`, `export default (<source>);`) in a fresh
// Code Mode sandbox isolate, it runs one operation: describe the tools and hooks, run one
// tool, or run one hook. `host` reaches the agent only through the sandbox's connector
// `__think_ext_host`, whose every call the host checks against the manifest's permissions.
import ext from "./think_extension.js";

const HOST = "__think_ext_host";

function hostObject() {
  const ns = globalThis[HOST];
  return Object.freeze({
    readFile: (path) => ns.readFile({ path }),
    listFiles: (dir) => ns.listFiles({ dir: dir ?? "/" }),
    find: (pattern) => ns.find({ pattern }),
    grep: (options) => ns.grep({ options: options ?? {} }),
    writeFile: (path, content) => ns.writeFile({ path, content }),
    deleteFile: (path) => ns.deleteFile({ path }),
    getContext: (label) => ns.getContext({ label }),
    setContext: (label, content) => ns.setContext({ label, content }),
    getMessages: (limit) => ns.getMessages(limit === undefined ? {} : { limit }),
  });
}

function parts() {
  if (!ext || typeof ext !== "object") {
    throw new TypeError("The extension source must be an object expression: ({ tools: {...}, hooks: {...} })");
  }
  if (!("tools" in ext) && !("hooks" in ext)) {
    throw new TypeError(
      "Invalid extension source format. Expected { tools: {...}, hooks: {...} } but got a flat object. Wrap your tools in a 'tools' key.",
    );
  }
  return { tools: ext.tools || {}, hooks: ext.hooks || {} };
}

/** Refuses a value whose JSON is over `max` characters, before it leaves the isolate. */
function bounded(value, max) {
  const json = JSON.stringify(value === undefined ? null : value);
  if (json !== undefined && json.length > max) {
    throw new RangeError("The result is " + json.length + " characters of JSON, over the limit of " + max);
  }
  return value === undefined ? null : value;
}

function describe({ tools, hooks }) {
  const described = Object.entries(tools).map(([name, def]) => {
    if (!def || typeof def !== "object") throw new TypeError("tools." + name + " must be an object");
    if (typeof def.execute !== "function") throw new TypeError("tools." + name + " has no execute function");
    return {
      name,
      description: typeof def.description === "string" ? def.description : name,
      parameters: def.parameters ?? {},
      required: def.required ?? [],
    };
  });
  return { tools: described, hooks: Object.keys(hooks).filter((k) => typeof hooks[k] === "function") };
}

/** Runs one operation: `{kind: "describe"}`, `{kind: "tool", name, args, maxChars}` or `{kind: "hook", name, context, maxChars}`. */
export async function run(op) {
  const p = parts();
  if (op.kind === "describe") return describe(p);
  if (op.kind === "tool") {
    const def = p.tools[op.name];
    if (!def || typeof def.execute !== "function") throw new Error("Unknown tool: " + op.name);
    return bounded(await def.execute(op.args, hostObject()), op.maxChars);
  }
  if (op.kind === "hook") {
    const fn = p.hooks[op.name];
    if (typeof fn !== "function") return null;
    return bounded(await fn(op.context, hostObject()), op.maxChars);
  }
  throw new Error("unknown operation " + op.kind);
}
