"""What the replay tests share: targets, the CLI, the mock as a process, and a trace with a GET stream."""

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import mcp_types as types
import orjson

from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port

VARIANT_SERVER: Final = Path(__file__).with_name("variant_server.py")
# Whole-session budget inside an event loop: far above a loopback session.
TIMEOUT: Final = 30.0
LIST_CHANGED: Final = "notifications/tools/list_changed"


def variant_target(mode: str) -> str:
    """The reference server with one change (see variant_server.py) as a TARGET string."""
    return "stdio:" + subprocess.list2cmdline([sys.executable, str(VARIANT_SERVER), mode])


def cli(*args: str, timeout: float = 90.0) -> subprocess.CompletedProcess:
    """Run `python -m mcpbench ARGS`."""
    return subprocess.run(
        [sys.executable, "-m", "mcpbench", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )


@contextlib.contextmanager
def mock_server(trace: Path, transport: str, *extra: str) -> Iterator[str]:
    """`mcpbench serve-trace TRACE` on an HTTP transport; yields its URL and stops it on exit."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpbench", "serve-trace", str(trace), "--transport", transport, "--port", str(port),
         *extra],
        cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(HOST, port, proc=proc)
        yield f"http://{HOST}:{port}/{'sse' if transport == 'sse' else 'mcp'}"
    finally:
        stop_process(proc)


def text_of(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


def notify_trace(path: Path) -> Path:
    """A recorded session of the peer server: handshake, GET stream, `notify` (its notification came on GET)."""
    base = {"v": 1, "session": "s1", "transport": "streamable-http"}
    post = {"method": "POST", "path": "/mcp"}
    get = {"method": "GET", "path": "/mcp", "status": 200, "content_type": "text/event-stream"}
    events = [
        {"v": 1, "ts": 1.0, "session": None, "transport": "streamable-http", "dir": None, "kind": "trace"},
        {**base, "ts": 2.0, "dir": "c2s", "kind": "message", "flow": "f1", "http": post, "msg": {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}},
        {**base, "ts": 2.1, "dir": "s2c", "kind": "message", "flow": "f1", "msg": {
            "jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}},
                                                  "serverInfo": {"name": "peer", "version": "1"}}}},
        {**base, "ts": 2.2, "dir": "c2s", "kind": "message", "flow": "f2", "http": post,
         "msg": {"jsonrpc": "2.0", "method": "notifications/initialized"}},
        {**base, "ts": 2.3, "dir": None, "kind": "stream", "flow": "f3", "event": "open", "conn": "c", **get},
        {**base, "ts": 3.0, "dir": "c2s", "kind": "message", "flow": "f4", "http": post, "msg": {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "notify", "arguments": {}}}},
        {**base, "ts": 3.1, "dir": "s2c", "kind": "message", "flow": "f3", "http": get,
         "msg": {"jsonrpc": "2.0", "method": LIST_CHANGED}},
        {**base, "ts": 3.2, "dir": "s2c", "kind": "message", "flow": "f4", "msg": {
            "jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "sent"}], "isError": False}}},
    ]
    path.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events))
    return path
