"""Lab peers: a reference MCP server (official SDK) for recording, replay and load tests."""
