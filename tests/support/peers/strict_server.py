"""A handshake-era MCP server that holds clients to the letter, on the core's `ServerConnection`.

    python strict_server.py stdio
    python strict_server.py streamable-http PORT [--require-session]

It differs from the official SDK 2.x servers as the specification allows:

- it speaks the handshake era only: `server/discover` gets JSON-RPC -32601 (an `auto` client then
  falls back to `initialize`);
- Streamable HTTP: an `MCP-Protocol-Version` header must name the version of the body (what
  `initialize` offers) or the session's (what it settled): otherwise HTTP 400;
- `--require-session`: every POST but `initialize` needs its `Mcp-Session-Id`, a probe's too
  (HTTP 400 with a plain-text body, no JSON-RPC: "Bad Request: Missing session ID").

Tools `echo` and `add`; JSON answers.
"""

import http.server
import sys
import threading

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.http import PROTOCOL_VERSION, SESSION_ID
from mcpbench.protocol.jsonrpc import ErrorResponse, Request, Response
from mcpbench.protocol.server import Call, HttpRequest, Refused, ServerReply, ServerConnection, SessionEnded

TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}},
]
VERSION = "2025-11-25"


def answer(request: Request) -> Response | ErrorResponse:
    params = request.params or {}
    if request.method == "initialize":
        return Response(id=request.id, result={"protocolVersion": params.get("protocolVersion", VERSION), "capabilities": {"tools": {}},
                                               "serverInfo": {"name": "strict-peer", "version": "1"}})
    if request.method == "tools/list":
        return Response(id=request.id, result={"tools": TOOLS})
    if request.method == "tools/call":
        args = params.get("arguments") or {}
        text = args.get("text", "") if params.get("name") == "echo" else str(args.get("a", 0) + args.get("b", 0))
        return Response(id=request.id, result={"content": [{"type": "text", "text": text}], "isError": False})
    if request.method == "ping":
        return Response(id=request.id, result={})
    return ErrorResponse(id=request.id, code=jsonrpc.METHOD_NOT_FOUND, message=f"Method not found: {request.method}")


def refuse(status: int, message: str) -> ServerReply:
    body = jsonrpc.encode(ErrorResponse(id=None, code=jsonrpc.INVALID_REQUEST, message=message))
    return ServerReply(status=status, headers=(("content-type", "application/json"),), body=body)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "StrictServer"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self._write(self.server.post(self.headers, body))

    def do_GET(self) -> None:  # noqa: N802
        self._write(ServerReply(status=405, headers=(("allow", "POST, DELETE"),)))

    def do_DELETE(self) -> None:  # noqa: N802
        with self.server.lock:
            event = self.server.conn.http(HttpRequest(method="DELETE", target=self.path, headers=self.headers))
        self._write(event.reply)

    def _write(self, reply: ServerReply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)


class StrictServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, require_session: bool) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.conn = ServerConnection("streamable-http")
        self.require_session = require_session
        self.versions: dict[str, str] = {}  # session id -> the version its initialize settled
        self.lock = threading.Lock()

    def post(self, headers, body: bytes) -> ServerReply:
        try:
            message = jsonrpc.decode(body)
        except jsonrpc.InvalidMessage as exc:
            return refuse(400, f"Parse error: {exc.reason}")
        sid, header = headers.get(SESSION_ID), headers.get(PROTOCOL_VERSION)
        initialize = type(message) is Request and message.method == "initialize"
        if self.require_session and not initialize and not sid:
            return ServerReply(status=400, headers=(("content-type", "text/plain"),), body=b"Bad Request: Missing session ID")
        expected = (message.params or {}).get("protocolVersion") if initialize else self.versions.get(sid or "")
        if header is not None and expected is not None and header != expected:
            return refuse(400, f"Bad Request: MCP-Protocol-Version {header} is not the session's {expected}")
        with self.lock:
            event = self.conn.http(HttpRequest(method="POST", target="/mcp", headers=headers, body=body))
        if type(event) is Refused:
            return event.reply
        if type(event) is SessionEnded or type(event) is not Call:
            return event.reply or ServerReply(status=202)
        reply = answer(event.request)
        if initialize and event.session is not None and type(reply) is Response:
            self.versions[event.session] = reply.result["protocolVersion"]
        with self.lock:
            return self.conn.respond(event, reply)


def serve_stdio() -> None:
    conn = ServerConnection("stdio")
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        for event in conn.receive_stdin(line):
            if type(event) is Call:
                out.write(conn.event(event, answer(event.request)))
            elif type(event) is Refused:
                out.write(event.reply.body)
        out.flush()


def main() -> None:
    if sys.argv[1] == "stdio":
        serve_stdio()
        return
    StrictServer(int(sys.argv[2]), "--require-session" in sys.argv).serve_forever()


if __name__ == "__main__":
    main()
