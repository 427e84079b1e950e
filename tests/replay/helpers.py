"""What the replay tests share: targets, the CLI, the mock as a process, and a trace with a GET stream."""

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import mcp_types as types

from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port
from tests.support.traces import event, handshake, header, notified, over_http, tool_call, tool_text, write_trace

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
    post = {"method": "POST", "path": "/mcp"}
    get = {"method": "GET", "path": "/mcp", "status": 200, "content_type": "text/event-stream"}
    init, answer, initialized = handshake(2.0, id_=1, step=0.1, capabilities={"tools": {"listChanged": True}}, server="peer")
    return write_trace(path, [
        over_http(init, "f1", session="s1", http=post), over_http(answer, "f1", session="s1", via=None),
        over_http(initialized, "f2", session="s1", http=post),
        event(2.3, "s1", None, kind="stream", transport="streamable-http", flow="f3", event="open", conn="c", **get),
        over_http(tool_call(3.0, 2, "notify"), "f4", session="s1", http=post),
        over_http(notified(3.1, LIST_CHANGED, None), "f3", session="s1", via=None, http=get),
        over_http(tool_text(3.2, 2, "sent"), "f4", session="s1", via=None),
    ], header=header("streamable-http"))
