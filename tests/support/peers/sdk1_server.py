"""An MCP server on the official Python SDK 1.x (`FastMCP`), run by the interpreter of a virtualenv
with `mcp<2` (tests/support/peers/sdk1.py makes it).

    python sdk1_server.py stdio
    python sdk1_server.py streamable-http PORT [--stateless]
    python sdk1_server.py sse PORT

SDK 1.x speaks the handshake era only (2025-11-25 and older): a `server/discover` probe gets an error,
and its HTTP errors carry the JSON-RPC id "server-error".
"""

import sys

from mcp.server.fastmcp import FastMCP


def main() -> None:
    transport = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    server = FastMCP("sdk1-peer", host="127.0.0.1", port=port, stateless_http="--stateless" in sys.argv, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    server.run(transport=transport)


if __name__ == "__main__":
    main()
