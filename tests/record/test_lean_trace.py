"""`mcpbench record` writes trace format v2: lean, and read back with every message and HTTP fact.

Official SDK client sessions (`legacy` and `auto` mode) against the reference server with JSON
answers and with SSE answers, through `mcpbench record`; what the client sent and got is noted by
an httpx transport and compared with the trace as the reader gives it back.
"""

import signal
from collections import Counter
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcpbench.record.har import to_har
from mcpbench.trace import TraceReader
from tests.record.helpers import Capture, assert_same_messages, kinds, messages, record_command

# The goal of issue 15 for HTTP traces (v1 wrote 1.17-1.72 KB per message on this workload).
MAX_BYTES_PER_MESSAGE = 600
SESSION_TIMEOUT = 60.0
HOP_BY_HOP = ("host",)  # mitmproxy's reverse mode rewrites Host to the upstream's


class HttpCapture(Capture):
    """Also notes each exchange's method, request headers and answer status, as the client saw them."""

    def __init__(self) -> None:
        super().__init__()
        self.exchanges: list[tuple] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        headers = tuple(sorted((k.lower(), v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP))
        self.exchanges.append((request.method, headers, response.status_code, response.headers.get("mcp-session-id")))
        return response


async def session(url: str, mode: str, capture: HttpCapture) -> None:
    with anyio.fail_after(SESSION_TIMEOUT):
        await _session(url, mode, capture)


async def _session(url: str, mode: str, capture: HttpCapture) -> None:
    http = httpx2.AsyncClient(transport=capture, timeout=httpx2.Timeout(30, read=60))
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        await client.list_tools()
        for number in range(3):
            await client.call_tool("echo", {"text": f"hi {number}"})
            await client.call_tool("add", {"a": number, "b": 3})
        await client.call_tool("fail", {})
        await client.read_resource("mcpbench://greeting")
        await client.get_prompt("summarize", {"topic": "MCP"})


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("answers", ["json", "sse"])
def test_record_writes_a_lean_trace_that_reads_back_whole(tmp_path: Path, answers: str, request: pytest.FixtureRequest) -> None:
    out = tmp_path / "t.jsonl"
    capture = HttpCapture()
    server = request.getfixturevalue("json_http_server" if answers == "json" else "http_server")
    with record_command(server.url, out) as (proc, url):
        for mode in ("legacy", "auto"):
            anyio.run(session, url, mode, capture)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130  # 128 + SIGINT: stopped as asked, the trace complete
    reader = TraceReader(out)
    trace = list(reader)
    assert reader.header["v"] == 2 and reader.torn is None
    assert_same_messages(trace, capture)
    assert not kinds(trace, "violation") and not kinds(trace, "error")
    # Every exchange the client made, with its request headers and answer, is in an `http` event.
    http = kinds(trace, "http")
    recorded = Counter(
        (e["method"], tuple(sorted((k, v) for k, v in e["request_headers"].items() if k not in HOP_BY_HOP)),
         e["status"], e["response_headers"].get("mcp-session-id"))
        for e in http
    )
    assert recorded == Counter(capture.exchanges)
    for event in messages(trace):
        exchange = next(e for e in http if e["flow"] == event["flow"])
        side = "request_headers" if event["dir"] == "c2s" else "response_headers"
        assert event["http"]["headers"] == exchange[side] and event["http"]["method"] == exchange["method"]
        assert event["session"] == exchange["session"] and event["transport"] == "streamable-http"
        assert ("sse" in event) == (event["dir"] == "s2c" and exchange.get("streamed", False))
    assert any(e.get("streamed") and e["method"] == "POST" for e in http) == (answers == "sse")
    assert len(to_har(iter(trace))["log"]["entries"]) == len(http)
    per_message = out.stat().st_size / len(messages(trace))
    print(f"{answers} answers: {per_message:.0f} bytes per message ({len(messages(trace))} messages)")
    assert per_message <= MAX_BYTES_PER_MESSAGE
