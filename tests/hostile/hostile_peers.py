"""Hostile peers and small traces for the hostile cases: a busy port, a server that is not MCP.

Every process started here is stopped by the context manager that started it.
"""

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final


from tests.support.peers import http_peer, peer_process
from tests.support.servers import HOST
from tests.support.traces import HEADER, event, write_trace  # noqa: F401 (the hostile tests import them from here)

HANDSHAKE: Final = "2025-11-25"
STATELESS: Final = "2026-07-28"
META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"

# Answers GET, POST and DELETE with an HTML page, at the status its path names (/200, /404, …).
NOT_MCP_SERVER: Final = """
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        status = int(self.path.strip("/").split("?")[0] or 200)
        body = b"<html><body>a web page, not MCP</body></html>"
        self.send_response(status)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_DELETE = answer
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def counter_session(session: str, version: str, answers: list[str], *, start: float = 1.0, tool: str = "count",
                    arguments: dict | None = None) -> list[dict]:
    """One recorded session calling the tool `count` once per answer; each call got the next answer.

    Repeated identical requests with different answers: a mock that keeps state across
    client sessions answers a second client from where the first left off.
    """
    events, ts = [], start
    meta = {"_meta": {META_VERSION: version}} if version == STATELESS else {}
    next_id = 1
    if version == STATELESS:  # how a 2026-07-28 client starts
        events += [
            event(ts, session, "c2s", {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": meta}),
            event(ts + 0.01, session, "s2c", {"jsonrpc": "2.0", "id": 1, "result": {
                "supportedVersions": [STATELESS], "capabilities": {"tools": {}},
                "serverInfo": {"name": "counter", "version": "1"}}}),
        ]
        next_id, ts = 2, ts + 0.02
    else:
        events += [
            event(ts, session, "c2s", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}}),
            event(ts + 0.01, session, "s2c", {"jsonrpc": "2.0", "id": 1, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "counter", "version": "1"}}}),
            event(ts + 0.02, session, "c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ]
        next_id, ts = 2, ts + 0.03
    for number, text in enumerate(answers, next_id):
        events += [
            event(ts, session, "c2s", {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                                       "params": {"name": tool, "arguments": arguments or {}, **meta}}),
            event(ts + 0.01, session, "s2c", {"jsonrpc": "2.0", "id": number, "result": {
                "content": [{"type": "text", "text": text}], "isError": False}}),
        ]
        ts += 0.02
    return events


def counter_trace(path: Path, version: str = HANDSHAKE, answers: tuple[str, ...] = ("1", "2")) -> Path:
    return write_trace(path, counter_session("s1", version, list(answers)))


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 that something else listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        sock.listen()
        yield sock.getsockname()[1]


@contextlib.contextmanager
def not_mcp_server() -> Iterator[str]:
    """An HTTP server answering every request with an HTML page; yields its base URL."""
    with http_peer([sys.executable, "-c", NOT_MCP_SERVER], path="") as url:
        yield url


# A server that answers the handshake at once and `tools/call` only after LATE seconds:
# over stdio (argv[1] == "stdio") or Streamable HTTP with JSON bodies (argv[1] == a port).
LATE = 8.0
LATE_SERVER = f"""
import http.server, json, sys, time
LATE = {LATE}
def answer(msg):
    if "id" not in msg:
        return None
    if msg["method"] == "initialize":
        result = {{"protocolVersion": "2025-11-25", "capabilities": {{"tools": {{}}}},
                  "serverInfo": {{"name": "counter", "version": "1"}}}}
    else:
        sys.stderr.write("called\\n")  # a test waits for this line: the call is in flight
        sys.stderr.flush()
        time.sleep(LATE)
        result = {{"content": [{{"type": "text", "text": "1"}}], "isError": False}}
    return {{"jsonrpc": "2.0", "id": msg["id"], "result": result}}
if sys.argv[1] == "stdio":
    for line in sys.stdin:
        reply = answer(json.loads(line))
        if reply:
            sys.stdout.write(json.dumps(reply) + "\\n")
            sys.stdout.flush()
else:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_POST(self):
            reply = answer(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            body = json.dumps(reply).encode() if reply else b""
            self.send_response(200 if reply else 202)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def do_DELETE(self):
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


# A Streamable HTTP server (JSON answers) that answers the first `argv[2]` `initialize` requests and
# holds every later one, unanswered, saying `held` on stderr: a client's handshake stays in flight.
# It knows one tool, `echo`, and answers initialize, tools/list, tools/call and DELETE.
HOLD_SERVER: Final = """
import http.server, itertools, json, sys, threading
answered = int(sys.argv[2])
initializes = itertools.count()
RESULTS = {
    "initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "hold", "version": "1"}},
    "tools/list": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]},
    "tools/call": {"content": [{"type": "text", "text": "ok"}], "isError": False},
}
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if message.get("method") == "initialize" and next(initializes) >= answered:
            print("held", file=sys.stderr, flush=True)
            threading.Event().wait(600)  # the test stops this server long before
            return
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": RESULTS.get(message.get("method"), {})}).encode() if "id" in message else b""
        self.send_response(200 if body else 202)
        self.send_header("content-type", "application/json")
        self.send_header("mcp-session-id", "held-1")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_DELETE(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
    def do_GET(self):
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
server.serve_forever()
"""


def hold_server(answered: int = 0) -> contextlib.AbstractContextManager[tuple[str, subprocess.Popen]]:
    """HOLD_SERVER answering `answered` initialize requests: its URL and process (`held` on its stderr)."""
    return peer_process([sys.executable, "-c", HOLD_SERVER], str(answered), stderr=subprocess.PIPE)


# A stdio server for the tee, `ready` on stderr once a stop signal ends it as it ends a C server:
# an `initialize` from a client named `hold` stays unanswered (`held` on stderr); others are
# answered. A `tools/call` streams progress notifications for its progress token, one every 20 ms,
# and is never answered.
STREAMING_STDIO_SERVER: Final = """
import functools, json, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
json.dumps = functools.partial(json.dumps, separators=(",", ":"))
print("ready", file=sys.stderr, flush=True)
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize" and message["params"]["clientInfo"]["name"] == "hold":
        print("held", file=sys.stderr, flush=True)
    elif method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "streaming", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
    elif method == "tools/call":
        token = message["params"]["_meta"]["progressToken"]
        for step in range(1, 3001):  # a minute at most
            progress = {"progressToken": token, "progress": step}
            print(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}), flush=True)
            time.sleep(0.02)
"""

# The progress token of the paced call (`paced_trace`) and the gap between its notifications (s).
PACED_TOKEN: Final = "p"
PACED_GAP: Final = 0.5


def paced_trace(path: Path, notifications: int = 40) -> Path:
    """A recording whose `slow` call streams `notifications` progress notifications PACED_GAP apart
    before its answer: a mock playing it keeps a stream busy for a while."""
    events = counter_session("s1", HANDSHAKE, [])
    ts = events[-1]["ts"] + 0.01
    params = {"name": "slow", "arguments": {}, "_meta": {"progressToken": PACED_TOKEN}}
    events.append(event(ts, "s1", "c2s", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}))
    for step in range(1, notifications + 1):
        progress = {"progressToken": PACED_TOKEN, "progress": step, "total": notifications}
        events.append(event(ts + step * PACED_GAP, "s1", "s2c", {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}))
    answer = {"content": [{"type": "text", "text": "done"}], "isError": False}
    events.append(event(ts + (notifications + 1) * PACED_GAP, "s1", "s2c", {"jsonrpc": "2.0", "id": 2, "result": answer}))
    return write_trace(path, events)
