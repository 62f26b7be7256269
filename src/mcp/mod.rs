//! The MCP client: remote MCP servers whose tools join every turn.
