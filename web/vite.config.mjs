// Builds the chat page into web/dist, which the Worker serves as static assets.
// JSX goes through Vite's esbuild (no React plugin: it does not install beside vite 7 here).
import { defineConfig } from "vite";

export default defineConfig({
  root: import.meta.dirname,
  base: "/",
  logLevel: "warn",
  // The page runs on the newest `agents` client (installed as `agents-next` beside the pinned
  // 0.21 the integration tests also run against); its source imports `agents/...` as an app does.
  resolve: { alias: [{ find: /^agents(\/.*)?$/, replacement: "agents-next$1" }] },
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1024,
    rollupOptions: {
      // Dependencies' "use client" directives and misplaced /* @__PURE__ */ comments are harmless.
      onwarn(warning, warn) {
        if (warning.code === "MODULE_LEVEL_DIRECTIVE" || warning.code === "INVALID_ANNOTATION") return;
        warn(warning);
      },
    },
  },
});
