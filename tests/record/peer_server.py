"""An official-SDK `MCPServer` for the recorder tests, with what the reference server lacks.

- `tick(token)`: counts its executions per token; `ticks()` returns the counts as JSON, so a test
  can prove each call ran exactly once behind the proxy.
- `notify()`: sends `notifications/tools/list_changed` without a related request, which the SDK
  routes to the session's standalone GET stream (handshake era).

Run: python tests/record/peer_server.py --port P [--transport sse|streamable-http] [--json-response]
"""

import argparse
import collections
import json

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("mcpbench-record-peer", log_level="WARNING")
counts: collections.Counter[str] = collections.Counter()


@server.tool()
def tick(token: str) -> str:
    """Count one execution for `token`."""
    counts[token] += 1
    return token


@server.tool()
def ticks() -> str:
    """The execution count of every token, as JSON."""
    return json.dumps(counts)


@server.tool()
async def notify(ctx: Context) -> str:
    """Send tools/list_changed on the session's GET stream."""
    await ctx.session.send_tool_list_changed()
    return "sent"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--transport", default="streamable-http", choices=("sse", "streamable-http"))
    parser.add_argument("--json-response", action="store_true")
    args = parser.parse_args()
    if args.transport == "sse":
        server.run(transport="sse", host="127.0.0.1", port=args.port)
    else:
        server.run(transport="streamable-http", host="127.0.0.1", port=args.port, json_response=args.json_response)
