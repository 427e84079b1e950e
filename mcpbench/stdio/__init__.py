"""The stdio transport: a transparent tee between a host and a server process."""
