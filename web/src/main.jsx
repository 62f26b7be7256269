// The chat page served at `/`: the unmodified `agents` React hooks talking to the Rust agent,
// with panels for what the agent holds (workspace, MCP servers, activity). The agent instance
// comes from `?name=` (default "default").
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App.jsx";
import "./style.css";

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App name={new URLSearchParams(location.search).get("name") || "default"} />
  </StrictMode>,
);
