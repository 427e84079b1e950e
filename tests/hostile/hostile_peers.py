"""Hostile peers and small traces for the hostile cases: a busy port, a server that is not MCP.

Every process started here is stopped by the context manager that started it.
"""

import contextlib
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import orjson

from tests.support.peers import http_peer
from tests.support.servers import HOST

HEADER: Final = {"v": 1, "ts": 1.0, "session": None, "transport": "stdio", "dir": None, "kind": "trace",
                 "mcpbench": "0.1.0", "started": "2026-12-02T12:00:00Z", "command": ["server"]}
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


def event(ts: float, session: str, direction: str, msg: dict, **extra: Any) -> dict:
    return {"v": 1, "ts": ts, "session": session, "transport": "stdio", "dir": direction, "kind": "message",
            "msg": msg, **extra}


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


def write_trace(path: Path, *sessions: list[dict], header: dict | None = None) -> Path:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in [header or HEADER, *[e for s in sessions for e in s]]))
    return path


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
