"""The names of MCP's three transports, as traces, targets, options and the core spell them."""

STDIO = "stdio"
LEGACY_SSE = "sse"  # HTTP+SSE (2024-11-05): GET /sse + POSTs to the endpoint it names
STREAMABLE_HTTP = "streamable-http"

TRANSPORTS = (STDIO, LEGACY_SSE, STREAMABLE_HTTP)
HTTP_TRANSPORTS = (LEGACY_SSE, STREAMABLE_HTTP)
