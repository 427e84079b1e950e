"""The lab's peers: the reference MCP server (official SDK, every transport) and its variant, its
event store, starting them as processes, and the official SDK client that drives them."""
