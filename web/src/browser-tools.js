// Tools the page runs itself; their schemas travel with every chat request as `clientTools`.
export const browserTools = {
  getUserTimezone: {
    description: "Returns the user's IANA time zone (for example Europe/Berlin), read from their browser.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
    execute: () => ({ timezone: Intl.DateTimeFormat().resolvedOptions().timeZone }),
  },
};

/** Runs a browser tool the model called and reports its output (or error) to the agent. */
export async function runBrowserTool(toolCall, addToolOutput) {
  const tool = browserTools[toolCall.toolName];
  if (!tool) return;
  try {
    addToolOutput({ toolCallId: toolCall.toolCallId, output: await tool.execute(toolCall.input) });
  } catch (e) {
    addToolOutput({ toolCallId: toolCall.toolCallId, state: "output-error", errorText: String(e?.message ?? e) });
  }
}
