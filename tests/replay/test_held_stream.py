"""A request is complete when its answer arrives, whatever the POST's SSE stream does afterwards."""

import http.server
import threading
from pathlib import Path

import orjson

from mcpbench.replay import plan as plans
from mcpbench.replay.compare import IgnoreRules
from mcpbench.replay.engine import Replayer
from mcpbench.replay.report import Judging, build
from mcpbench.system.target import parse_target
from tests.support.servers import HOST
from tests.support.traces import handshake, header, over_http, tool_call, tool_text, write_trace

VERSION = "2025-11-25"
# How long the server holds each answer stream open after the answer: far longer than the replay needs.
HOLD = 20.0
# Bounds the whole replay (three loopback calls); generous on a busy machine.
REPLAY_BUDGET = 60.0
CALLS = ("one", "two", "three")


def three_calls(path: Path) -> Path:
    """A recorded session: handshake, then three tools/call, each answered before the next."""
    post = {"method": "POST", "path": "/mcp"}
    init, answer, initialized = handshake(2.0, VERSION, id_=0, step=0.1, capabilities={"tools": {}}, server="held")
    events = [over_http(init, "f0", session="s1", http=post), over_http(answer, "f0", session="s1", via=None),
              over_http(initialized, "f1", session="s1", http=post)]
    for i, name in enumerate(CALLS, start=1):
        events += [over_http(tool_call(3.0 + i, i, name), f"c{i}", session="s1", http=post),
                   over_http(tool_text(3.1 + i, i, name), f"c{i}", session="s1", via=None)]
    return write_trace(path, events, header=header("streamable-http"))


class HoldingServer(http.server.ThreadingHTTPServer):
    """Streamable HTTP that answers each tools/call on an SSE stream, then keeps the stream open."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__((HOST, 0), _Holding)
        self.release = threading.Event()  # set by the test: the server may end its streams
        self.closed = threading.Event()  # set by the server once it has ended a held stream
        self.answered = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/mcp"


class _Holding(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HoldingServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self) -> None:  # noqa: N802 - http.server's naming
        self._reply(200)

    def do_POST(self) -> None:  # noqa: N802
        message = orjson.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in message or "method" not in message:
            self._reply(202)
            return
        if message["method"] == "initialize":
            result = {"protocolVersion": VERSION, "capabilities": {"tools": {}}, "serverInfo": {"name": "held", "version": "1"}}
            body = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            self._reply(200, body, {"content-type": "application/json", "mcp-session-id": "held-1"})
            return
        name = message["params"]["name"]
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": name}], "isError": False}}
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(b"event: message\ndata: " + orjson.dumps(answer) + b"\n\n")
        self.wfile.flush()
        self.server.answered += 1
        self.server.release.wait(HOLD)  # the stream stays open after the answer
        self.server.closed.set()


def test_a_call_is_complete_when_its_answer_arrives_though_the_stream_stays_open(tmp_path):
    recorded = plans.load(three_calls(tmp_path / "held.jsonl"))
    server = HoldingServer()
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    serving.start()
    runs = []
    try:
        replay = threading.Thread(target=lambda: runs.append(Replayer(parse_target(server.url), timeout=HOLD * 2).run(recorded)))
        replay.start()
        replay.join(REPLAY_BUDGET)
        closed_before_the_end = server.closed.is_set()
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        serving.join(REPLAY_BUDGET)
    assert runs, "the replay did not finish"
    session = runs[0].sessions[0]
    assert not session.aborted and not session.notes, (session.aborted, session.notes)
    assert server.answered == len(CALLS)
    assert [live.answer.result["content"][0]["text"] for live in session.calls[1:]] == list(CALLS)
    assert build(runs[0], Judging(IgnoreRules())).counts()["identical"] == 1 + len(CALLS)
    # The replay was done while the server still held every answer stream open.
    assert not closed_before_the_end
