// The chat page served at `/`: the unmodified `agents` React hooks talking to the Rust agent,
// with panels for what the agent holds (workspace, MCP servers, activity). The agent instance
// comes from `?name=` (default "default"); the access gate asks for a token first when the
// deploy wants one.
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App.jsx";
import { AccessGate } from "./access.jsx";
import "./style.css";

const name = new URLSearchParams(location.search).get("name") || "default";
createRoot(document.getElementById("root")).render(
  <StrictMode>
    <AccessGate name={name}>{(token, forget) => <App name={name} token={token} forget={forget} />}</AccessGate>
  </StrictMode>,
);
