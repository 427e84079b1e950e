"""A server with planted faults, for `mcpbench fuzz` to find: one tool per finding class.

Run: python -m mcpbench.lab.peers.faulty_server [--transport stdio|streamable-http|sse] [--port P] [--seal-state]
(the official SDK, every transport as the reference server serves it).

Tools and their faults:

- `divide(a, b)`: the process exits (status 3) when `b` is 0: a crash.
- `lookup(key)`: never answers when `key` is empty: a hang.
- `parse(text)`: a text that is not a number is answered with the Python traceback: a leak.
- `store(count)`: its schema asks for an integer, but it takes anything: accepted-invalid.
- `stats(n)`: its outputSchema says `total` is a string; it answers a number: output-schema.
- `remember(note)`: keeps 16 MiB per call (up to 192 MiB): a stdio server's memory grows (memory).
- `roll(sides)`: annotated readOnlyHint, answers differently each time: non-deterministic.
- `render(pages)`: takes 2 s when `pages` is past 1,000: slow.
- `describe(topic)`: publishes an inputSchema that is not valid JSON Schema: protocol (about the listing).
- `confirm(action)`: 2026-07-28 only, asks again (`resultType: input_required`) with a `requestState`
  it does not protect, and takes any state echoed back, altered or not: protocol (`--seal-state` puts the
  SDK's sealing back, and the altered state is refused as a well-behaved server refuses it).
- `wipe()`: annotated destructiveHint, and crashes if called: the fuzzer must leave it alone.
- `ping_tool()`: behaves, read-only.

The schemas the fuzzer sees are set after registration (the SDK derives them from the functions,
and validates what they take and give against those; a server with a fault publishes one thing
and does another). That uses the SDK's private tool manager, as `variant_server.py` does.
"""

import argparse
import os
import secrets
import traceback
from typing import Any, Final, TypedDict

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import InputRequiredResult, ToolAnnotations
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcpbench import __version__
from mcpbench.protocol.transports import STDIO, TRANSPORTS
from mcpbench.system.processes import settled

SERVER_NAME: Final = "mcpbench-faulty"
CRASH_STATUS: Final = 3
# The store tool's published schema: what it claims to take.
STORE_SCHEMA: Final = {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}},
                       "required": ["count"], "additionalProperties": False}
# The stats tool's published output schema: what it claims to give.
STATS_OUTPUT_SCHEMA: Final = {"type": "object", "properties": {"total": {"type": "string"}}, "required": ["total"]}


# The describe tool's published input schema: `type` names no JSON Schema type (not valid JSON Schema).
DESCRIBE_SCHEMA: Final = {"type": "object", "properties": {"topic": {"type": "text"}}}
# Past this many pages, render takes RENDER_SLOW seconds (a loopback call takes milliseconds).
RENDER_PAGES: Final = 1000
RENDER_SLOW: Final = 2.0
# The state confirm asks to be echoed (in the clear: the planted fault is that it is not sealed).
CONFIRM_STATE: Final = "confirm-step-1"

# What `remember` keeps per call.
HOARD_BYTES: Final = 16 << 20
# At most this many kept (192 MiB): enough to show the growth, bounded on a shared machine.
HOARD_BLOCKS: Final = 12


class Stats(TypedDict):
    total: int


def build_server(seal_state: bool = False) -> MCPServer:
    server = MCPServer(SERVER_NAME, version=__version__, log_level="WARNING")
    if not seal_state:  # the SDK seals and checks every requestState in this middleware: the planted fault removes it
        lowlevel = server._lowlevel_server
        lowlevel.middleware = [layer for layer in lowlevel.middleware if type(layer).__name__ != "RequestStateBoundary"]

    @server.tool()
    def divide(a: int, b: int) -> str:
        """Divide a by b (a zero b ends the process: the planted crash)."""
        if b == 0:
            os._exit(CRASH_STATUS)
        return str(a // b)

    @server.tool()
    async def lookup(key: str) -> str:
        """Look a key up (an empty key is never answered: the planted hang)."""
        if not key:
            await anyio.sleep_forever()
        return f"value of {key[:20]}"

    @server.tool()
    def parse(text: str) -> str:
        """Parse a number (a failure is answered with the traceback: the planted leak)."""
        try:
            return str(int(text))
        except ValueError:
            return traceback.format_exc()

    @server.tool()
    def store(count: Any = None) -> str:
        """Store a count (takes anything, whatever its schema says: planted accepted-invalid)."""
        return "stored"

    @server.tool()
    def stats(n: int = 1) -> Stats:
        """Sum 0..n (its published output schema says total is a string: planted output-schema)."""
        return {"total": sum(range(max(0, min(n, 1000))))}

    @server.tool()
    async def render(pages: int = 1) -> str:
        """Render pages (more than 1,000 take 2 s: the planted slow call)."""
        if pages > RENDER_PAGES:
            await anyio.sleep(RENDER_SLOW)
        return f"rendered {min(max(pages, 0), RENDER_PAGES)} pages"

    @server.tool()
    def describe(topic: str = "") -> str:
        """Describe a topic (its published inputSchema is not valid JSON Schema: planted protocol)."""
        return f"about {topic[:20]}"

    @server.tool()
    def confirm(action: str, ctx: Context) -> str | InputRequiredResult:
        """2026-07-28: asks again with a requestState, and takes back any state (planted protocol)."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return f"confirmed {action[:20]}"
        if ctx.request_state is None:
            return InputRequiredResult(request_state=CONFIRM_STATE)
        return f"confirmed {action[:20]} ({str(ctx.request_state)[:40]})"

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def wipe() -> str:
        """Destructive: never to be called by a fuzzer unless allowed (it crashes the process)."""
        os._exit(CRASH_STATUS)

    hoard: list[bytearray] = []

    @server.tool()
    def remember(note: str = "") -> str:
        """Keeps 16 MiB per call (the last 12): planted memory growth."""
        block = bytearray(HOARD_BYTES)
        block[::4096] = b"x" * len(block[::4096])  # touched: resident, not only reserved
        hoard.append(block)
        del hoard[:-HOARD_BLOCKS]  # bounded: a lab server must not take the machine's memory
        return f"remembered {len(hoard)}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def roll(sides: int = 6) -> str:
        """Read-only, yet a new answer each time: planted non-deterministic."""
        return str(secrets.randbelow(max(2, min(sides, 1000))) + 1) + "/" + secrets.token_hex(4)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def ping_tool() -> str:
        """Behaves."""
        return "pong"

    manager = server._tool_manager
    manager.get_tool("store").parameters = STORE_SCHEMA
    manager.get_tool("stats").fn_metadata.output_schema = STATS_OUTPUT_SCHEMA
    manager.get_tool("describe").parameters = DESCRIBE_SCHEMA
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="faulty_server", description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=TRANSPORTS, default=STDIO)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--seal-state", action="store_true", help="Seal requestState as the SDK does (confirm then behaves).")
    args = parser.parse_args(argv)
    server = build_server(args.seal_state)
    if args.transport == STDIO:
        settled()
        server.run(transport="stdio")
        return
    from mcpbench.lab.peers.reference_server import _serve_http
    from mcpbench.lab.peers.quirks import Quirks

    anyio.run(_serve_http, server, args.transport, args.host, args.port, False, False, False, Quirks(), None)


if __name__ == "__main__":
    main()
