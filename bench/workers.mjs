// The Miniflare worker entry of a bench-crate build (bench/rust-worker/build or a copy of it),
// shared by bench/run.mjs and bench/cpu-ab.mjs so both run it with the same settings.
import path from "node:path";

/** A worker of Miniflare's options (`rust` unless named), running the build in directory `build`. */
export function rustWorker(build, name = "rust") {
  return {
    name,
    modules: true,
    modulesRoot: path.dirname(build),
    scriptPath: path.join(build, "index.js"),
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
    compatibilityDate: "2025-11-01",
    // The bash tool's just-bash bundle imports node:zlib, as in the agent.
    compatibilityFlags: ["nodejs_compat"],
    durableObjects: { BENCH_RUST: { className: "BenchRust", useSQLite: true } },
    r2Buckets: ["WORKSPACE_R2"],
    // The idle reset's threshold (crates/think-worker/js/shim.mjs; README "Memory"): the product's default
    // unless THINK_IDLE_RESET_MB is set (0 turns it off, for a comparison).
    ...(process.env.THINK_IDLE_RESET_MB ? { bindings: { THINK_IDLE_RESET_MB: process.env.THINK_IDLE_RESET_MB } } : {}),
  };
}
