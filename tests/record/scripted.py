"""A scripted recording: the addon's hooks called on mitmproxy test flows covering every path of
`record/` (both transports, sessions minted and joined, legacy endpoints, compressed and broken
bodies and streams, failures, a client that leaves, the proxy stopping mid-exchange), with the
clock, the flow and connection ids and mitmproxy's timestamps fixed, so the trace it writes is the
same bytes on every run.

`tests/record/test_scripted_trace.py` compares it with `scripted/*.jsonl`, written by the code of
the day the script was made; regenerate those only for an intended change of the trace:

    .venv/bin/python -m tests.record.scripted tests/record/scripted
"""

import gzip
import sys
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from mitmproxy import connection, http
from mitmproxy.flow import Error
from mitmproxy.test import taddons, tflow

from mcpbench.record.addon import make_addons
from mcpbench.record.timeout import TIMED_OUT

# The runs, by golden file: the default redaction, and rules that also touch JSON bodies (another
# encoding path) and a header.
RUNS = {"default.jsonl": [], "redact-json.jsonl": ["password", "params.arguments.*", "x-api-key"]}

START_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
STEP_NS = 1_000_000  # each hook call 1 ms after the one before

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
INIT_RESULT = b'{\n  "jsonrpc": "2.0",\n  "id": 0,\n  "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}\n}'
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
CALL = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","password":"hunter2"}}}'
RESULT = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"hi"}]}}'
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
SSE = {"content-type": "text/event-stream", "cache-control": "no-cache"}


class Clock:
    """`time.time_ns` for `mcpbench.trace.format.now`: fixed within a hook call, one step per call."""

    def __init__(self) -> None:
        self.ns = START_NS

    def tick(self) -> None:
        self.ns += STEP_NS

    def time_ns(self) -> int:
        return self.ns

    def __getattr__(self, name: str):  # the rest of the `time` module
        import time

        return getattr(time, name)


class Script:
    """Builds flows with fixed ids and timestamps and calls the addon's hooks on them."""

    def __init__(self, addon, clock: Clock) -> None:
        self.addon = addon
        self.clock = clock
        self.flows = 0
        self.conns: dict[str, connection.Client] = {}

    def hook(self, name: str, *args) -> None:
        self.clock.tick()
        getattr(self.addon, name)(*args)

    def conn(self, name: str) -> connection.Client:
        if name not in self.conns:
            client = tflow.tclient_conn()
            client.id = f"{len(self.conns) + 1:08x}-{name:0>4}-4000-8000-000000000000"[:36]
            self.conns[name] = client
        return self.conns[name]

    def request(self, conn: str, method: str, url: str, body: bytes = b"", headers: dict | None = None) -> http.HTTPFlow:
        self.flows += 1
        flow = tflow.tflow(client_conn=self.conn(conn))
        flow.id = f"00000000-0000-4000-8000-{self.flows:012d}"
        flow.request = http.Request.make(method, url, body, headers or {})
        flow.request.data.content = body  # as sent (`make` would encode it by its Content-Encoding)
        seconds = self.clock.ns / 1e9
        flow.request.data.timestamp_start = seconds
        flow.request.data.timestamp_end = seconds + 0.0001
        self.hook("request", flow)
        return flow

    def answer(self, flow: http.HTTPFlow, status: int, headers: dict, body: bytes = b"") -> None:
        """The answer's head: `responseheaders`; its body is set (not streamed) here."""
        flow.response = http.Response.make(status, b"", headers)
        seconds = self.clock.ns / 1e9 + 0.0005
        flow.response.data.timestamp_start = seconds
        flow.response.data.timestamp_end = None
        self.hook("responseheaders", flow)
        if not callable(flow.response.stream):
            flow.response.data.content = body

    def finish(self, flow: http.HTTPFlow) -> None:
        flow.response.data.timestamp_end = self.clock.ns / 1e9 + 0.0009
        self.hook("response", flow)

    def exchange(self, conn: str, method: str, url: str, body: bytes, headers: dict, status: int, answer_headers: dict, answer: bytes = b"") -> http.HTTPFlow:
        flow = self.request(conn, method, url, body, headers)
        self.answer(flow, status, answer_headers, answer)
        self.finish(flow)
        return flow

    def chunks(self, flow: http.HTTPFlow, *parts: bytes) -> None:
        for part in parts:
            self.clock.tick()
            assert flow.response.stream(part) == part  # passed on unchanged


def streamable(s: Script) -> None:
    """One Streamable HTTP session from `initialize` to DELETE, and what can go wrong in it."""
    session = {"mcp-session-id": "sess-1", "mcp-protocol-version": "2025-11-25"}
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", INIT, JSON | {"authorization": "Bearer s3cret"},
               200, {"content-type": "application/json", "mcp-session-id": "sess-1", "set-cookie": "k=v"}, INIT_RESULT)
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", INITIALIZED, JSON | session, 202, {"content-length": "0"})
    # An SSE answer, cut anywhere: a comment, a priming event, a progress notification, the result.
    call = s.request("a", "POST", "http://127.0.0.1:8000/mcp?api_token=abc", CALL % 1, JSON | session | {"x-api-key": "k1"})
    s.answer(call, 200, SSE | {"mcp-session-id": "sess-1"})
    body = (
        b": ping - 2026-01-01 00:00:00\r\n\r\nid: 0\r\ndata:\r\n\r\n"
        b'event: message\r\nid: 1\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}\r\n\r\n'
        b"event: message\r\ndata: " + RESULT % 1 + b"\r\n\r\n"
    )
    s.chunks(call, body[:5], body[5:61], body[61:200], body[200:], b"")
    s.finish(call)
    # The GET stream: a server request, then an event the break cuts short.
    get = s.request("a", "GET", "http://127.0.0.1:8000/mcp", b"", {"accept": "text/event-stream"} | session)
    s.answer(get, 200, SSE)
    s.chunks(get, b'retry: 3000\n\nevent: message\ndata: {"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}\n\n',
             b'data: not json\n\ndata: {"jsonrpc":"2.0","id":"x"}\n\ndata: {"a":\ndata: 1}\n\n', b"event: message\ndata: {\"jsonrpc\":")
    get.error = Error("connection reset by peer")
    s.hook("error", get)
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", b'{"jsonrpc":"2.0","id":"srv-1","result":{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}}',
               JSON | session, 202, {})
    # Compressed bodies both ways, a compressed SSE answer, one in an encoding the recorder lacks.
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", gzip.compress(CALL % 2), JSON | session | {"content-encoding": "gzip"},
               200, {"content-type": "application/json", "content-encoding": "gzip"}, gzip.compress(RESULT % 2))
    packed = gzip.compress(b"event: message\ndata: " + RESULT % 3 + b"\n\n")
    gz = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 3, JSON | session)
    s.answer(gz, 200, SSE | {"content-encoding": "gzip"})
    s.chunks(gz, packed[:9], packed[9:], b"")
    s.finish(gz)
    zstd = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 4, JSON | session)
    s.answer(zstd, 200, SSE | {"content-encoding": "zstd"})
    s.chunks(zstd, b"\x28\xb5\x2f\xfd whatever", b"")
    s.finish(zstd)
    # A line longer than the parser takes: the stream passes on, recorded no further.
    with mock.patch("mcpbench.protocol.sse.MAX_LINE_BYTES", 64):
        long = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 12, JSON | session)
        s.answer(long, 200, SSE)
        s.chunks(long, b"event: message\n", b"data: " + RESULT % 12, b"\n\n", b"")
        s.finish(long)
    # A compressed stream broken inside an event; one whose bytes stop decoding; one said `identity`.
    cut = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 13, JSON | session)
    s.answer(cut, 200, SSE | {"content-encoding": "gzip"})
    packed = gzip.compress(b"event: message\ndata: " + RESULT % 13 + b"\n\nevent: message\ndata: {")
    s.chunks(cut, packed[:-8])
    cut.error = Error("upstream reset")
    s.hook("error", cut)
    garbled = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 14, JSON | session)
    s.answer(garbled, 200, SSE | {"content-encoding": "deflate"})
    packed = gzip.compress(b"event: message\ndata: " + RESULT % 14 + b"\n\ndata: {")
    s.chunks(garbled, packed[:-8], b"\x00not deflate at all\xff" * 3, b"")
    s.finish(garbled)
    plain = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 15, JSON | session)
    s.answer(plain, 200, SSE | {"content-encoding": "identity"})
    s.chunks(plain, b"event: message\ndata: " + RESULT % 15 + b"\n\n", b": bye\n\n", b"")
    s.finish(plain)
    # Bodies that are not messages, both ways; an empty POST; a JSON-RPC error with a 4xx.
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", b'{"jsonrpc": "2.0", "id": 5, "method": tools/call}', JSON | session,
               400, {"content-type": "text/plain"}, b"Bad Request: not JSON")
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", b'{"jsonrpc":"2.0","id":6}', JSON | session,
               200, {"content-type": "application/json"}, b"oops, not json")
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", b"", JSON | session, 400, {"content-type": "application/json"},
               b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 7, JSON | session, 200, {"content-type": "application/json"},
               b'{"jsonrpc":"2.0","id":7,"result":"not an object"}')
    # The body of an SSE answer that came with its head: the tap is never called by mitmproxy.
    whole = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 8, JSON | session)
    s.answer(whole, 200, SSE)
    whole.response.data.content = b"event: message\ndata: " + RESULT % 8 + b"\n\n"
    s.finish(whole)
    # The upstream timed out (our 504), refused, and the session's DELETE; then a call after it.
    late = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 9, JSON | session)
    late.metadata[TIMED_OUT] = "upstream timed out: no answer within 300 s"
    s.answer(late, 504, {"content-type": "text/plain", "connection": "close"}, b"mcpbench: upstream timed out\n")
    s.finish(late)
    refused = s.request("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 10, JSON | session)
    refused.error = Error("Connection refused")
    s.hook("error", refused)
    s.exchange("a", "DELETE", "http://127.0.0.1:8000/mcp", b"", session, 200, {})
    s.exchange("a", "POST", "http://127.0.0.1:8000/mcp", CALL % 11, JSON | session, 404, {"content-type": "text/plain"}, b"Not Found")


def sessionless(s: Script) -> None:
    """2026-07-28 without a session: keyed by connection; header rules; a batch; the client leaves."""
    meta = b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},' + meta + b"}}"
    s.exchange("b", "POST", "http://127.0.0.1:8000/mcp", call, JSON | {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
               200, {"content-type": "application/json"}, RESULT % 1)
    s.exchange("b", "POST", "http://127.0.0.1:8000/mcp", b"[" + CALL % 2 + b"," + INITIALIZED + b"]", JSON,
               200, {"content-type": "application/json"}, b"[" + RESULT % 2 + b"]")
    s.exchange("b", "POST", "http://127.0.0.1:8000/mcp", b'  {"jsonrpc":"2.0","id":3,"method":"ping"}', {"content-type": "text/plain"},
               200, {"content-type": "text/plain"}, b'{"jsonrpc":"2.0","id":3,"result":{}}')
    s.exchange("b", "POST", "http://127.0.0.1:8000/mcp", b'{"jsonrpc":"2.0","id":4,"method":"ping"}', JSON,
               200, {"content-type": "text/plain"}, b"{not json, and not said to be}")
    s.exchange("b", "POST", "http://127.0.0.1:8000/mcp", b'{"jsonrpc":"2.0","id":5,"method":"ping"}', JSON,
               200, {"content-type": "application/vnd.x+json"}, b'{"jsonrpc":"2.0","id":5}')
    s.hook("client_disconnected", s.conn("b"))


def legacy(s: Script) -> None:
    """Legacy HTTP+SSE: the `endpoint` event (with a secret in its query), POSTs to it, the stream's end."""
    sse = s.request("c", "GET", "http://127.0.0.1:8001/sse", b"", {"accept": "text/event-stream"})
    s.answer(sse, 200, SSE)
    s.chunks(sse, b"event: endpoint\r\ndata: /messages/?session_id=abc123&token=t0psecret\r\n\r\n")
    post = "http://127.0.0.1:8001/messages/?session_id=abc123&token=t0psecret"
    s.exchange("c", "POST", post, INIT, {"content-type": "application/json"}, 202, {}, b"Accepted")
    s.chunks(sse, b"event: message\r\ndata: " + INIT_RESULT.replace(b"\n", b"") + b"\r\n\r\n: keep-alive\r\n\r\n")
    s.exchange("c", "POST", post, INITIALIZED, {"content-type": "application/json"}, 202, {}, b"Accepted")
    s.exchange("c", "POST", post, CALL % 1, {"content-type": "application/json"}, 202, {}, b"Accepted")
    s.chunks(sse, b"event: message\r\ndata: " + RESULT % 1 + b"\r\n\r\nevent: other\r\nid: 9\r\nretry: 10\r\ndata: x\r\n\r\n")
    s.chunks(sse, b"")
    s.finish(sse)
    # A second stream whose endpoint is an absolute URL, left open when the proxy stops.
    sse2 = s.request("d", "GET", "http://127.0.0.1:8001/sse", b"", {"accept": "text/event-stream"})
    s.answer(sse2, 200, SSE)
    s.chunks(sse2, b"event: endpoint\nid: e1\nretry: 500\ndata: http://127.0.0.1:8001/messages?sessionId=XY\n\n")
    s.exchange("d", "POST", "http://127.0.0.1:8001/messages?sessionId=XY", INIT, {"content-type": "application/json"}, 202, {})


def not_mcp(s: Script) -> None:
    """Requests that are not MCP: recorded as `http` events only (a long body cut)."""
    s.exchange("e", "GET", "http://127.0.0.1:8000/favicon.ico", b"", {"accept": "image/*"}, 404, {"content-type": "text/html"}, b"<h1>nope</h1>")
    s.exchange("e", "POST", "http://127.0.0.1:8000/upload", b"x" * 100, {"content-type": "text/plain"},
               413, {"content-type": "text/plain", "reason": "big"}, b"y" * (70 * 1024))
    s.exchange("e", "PUT", "http://127.0.0.1:8000/mcp", b"{}", JSON, 405, {"allow": "GET, POST, DELETE"})


def unfinished(s: Script) -> None:
    """What is open when the proxy stops: a request without an answer, a GET waiting for its head."""
    s.request("f", "POST", "http://127.0.0.1:8000/mcp", CALL % 1, JSON | {"mcp-session-id": "sess-2"})
    s.request("f", "GET", "http://127.0.0.1:8000/mcp", b"", {"accept": "text/event-stream"})


SCRIPT = (streamable, sessionless, legacy, not_mcp, unfinished)


@contextmanager
def fixed_clock():
    clock = Clock()
    with mock.patch("mcpbench.trace.format.time", clock):
        yield clock


def record(out: Path, redact: list[str]) -> Path:
    """Run the script through a fresh addon into `out`; returns `out`."""
    with fixed_clock() as clock:
        addons = make_addons()
        (addon,) = addons
        with taddons.context(*addons) as tctx:
            tctx.configure(addon, mcpbench_out=str(out), mcpbench_redact=redact)
            script = Script(addon, clock)
            for part in SCRIPT:
                part(script)
            script.hook("done")
    return out


def main(folder: str) -> None:
    for name, redact in RUNS.items():
        record(Path(folder) / name, redact)


if __name__ == "__main__":
    main(sys.argv[1])
