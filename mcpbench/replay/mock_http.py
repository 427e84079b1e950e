"""`serve-trace` over HTTP: Streamable HTTP and legacy HTTP+SSE, a shell around `ServerConnection`.

The connection decides what each request is and what it gets (session ids,
the answer forms, Host and Origin); this shell reads requests with
`http.server`, writes what it is told, and runs each call's reply. Every
answer leaves in one write with Nagle off: a kept-alive client's delayed ACK
must not hold a second small segment back (about 44 ms per answer). An SSE
answer to a POST is chunked, so its connection stays alive as with the SDK
servers; the long-lived streams (`GET`) end with their connection.
"""

import errno
import http.server
import queue
import select
import socket
import sys
import threading
from typing import Any

from mcpbench.protocol.server import (
    Accepted,
    Call,
    HostCheck,
    HttpRequest,
    Refused,
    ServerReply,
    ServerConnection,
    SessionEnded,
    StreamOpened,
)
from mcpbench.protocol.versions import CANCELLED
from mcpbench.replay.engine import Pace
from mcpbench.replay.forward import Forwarder
from mcpbench.replay.mock_answers import TraceAnswers, answer_for
from mcpbench.replay.mock_play import DEFAULT_PACE, Player

# How often a stream's thread looks up from its queue to see whether the server is stopping.
STREAM_POLL = 0.5

LAST_CHUNK = b"0\r\n\r\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: each write leaves at once
    server: "MockHttpServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self._handle()

    def do_GET(self) -> None:  # noqa: N802
        self._handle()

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle()

    def _handle(self) -> None:
        body = self._body()
        if body is None:
            return
        server = self.server
        with server.lock:
            event = server.conn.http(HttpRequest(method=self.command, target=self.path, headers=self.headers, body=body))
        kind = type(event)
        if kind is Call:
            self._call(event)
        elif kind is StreamOpened:
            self._stream(event)
        elif kind is Accepted:
            self._write(event.reply)
            if event.waiter is not None:
                event.waiter.put(event.message)
            elif getattr(event.message, "method", None) == CANCELLED:
                server.answers.cancelled(event.session, event.message.params)
        elif kind is SessionEnded:
            server.ended(event.session)
            self._write(event.reply)
        elif kind is Refused:
            self._write(event.reply)

    def _body(self) -> bytes | None:
        """The request body; None (after a 400 answer) when its Content-Length is not a length."""
        text = (self.headers.get("content-length") or "0").strip()
        if not text.isdigit():
            self.close_connection = True
            self._write(ServerReply(status=400, headers=(("content-type", "text/plain"),),
                              body=b"Content-Length must be a number of bytes"))
            return None
        length = int(text)
        return self.rfile.read(length) if length else b""

    def _head(self, reply: ServerReply, *, length: int | None = None, stream: bool = False, chunked: bool = False) -> bytes:
        phrase = self.responses.get(reply.status, ("",))[0]
        lines = [f"HTTP/1.1 {reply.status} {phrase}\r\n"]
        lines += [f"{name}: {value}\r\n" for name, value in reply.headers]
        if chunked:
            lines.append("transfer-encoding: chunked\r\n")
        elif stream:
            lines.append("connection: close\r\n")
            self.close_connection = True
        else:
            lines.append(f"content-length: {length}\r\n")
        lines.append("\r\n")
        return "".join(lines).encode("latin-1")

    def _write(self, reply: ServerReply) -> None:
        """A whole answer, head and body in one write."""
        self.wfile.write(self._head(reply, length=len(reply.body)) + reply.body)

    def _call(self, call: Call) -> None:
        server = self.server
        if call.reply is not None:  # legacy: accepted now; the answer goes on the session's stream
            self._write(call.reply)
        reply = answer_for(server.answers, call.request, server.forward, call.session)
        if call.reply is not None:
            outbox = server.streams.get(call.session)
            write = outbox.put if outbox is not None else _nowhere
            threading.Thread(target=server.player.play, args=(call, reply, write), daemon=True).start()
            return
        if reply.via == "json" or server.json_response or not call.sse:
            answer = server.player.final(call, reply)
            with server.lock:
                whole = server.conn.respond(call, answer)
            self._write(whole)
            if reply.after is not None:
                reply.after()
            return
        with server.lock:
            head = server.conn.stream(call)
        wfile = self.wfile
        chunked = self.request_version == "HTTP/1.1"  # an HTTP/1.0 client reads to the connection's end

        def write(data: bytes) -> None:
            wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)

        wfile.write(self._head(head, chunked=chunked, stream=not chunked))
        server.player.play(call, reply, write, self._gone if reply.hold is not None else None)
        try:
            if chunked:
                wfile.write(LAST_CHUNK)
        except OSError:
            self.close_connection = True

    def _gone(self) -> bool:
        """Whether the client closed this connection (a held listen stream's end on Streamable HTTP:
        closing the response stream cancels the request). Nothing else is read from it meanwhile."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _stream(self, opened: StreamOpened) -> None:
        """Write the stream's head, then what reaches the session's outbox, until the stream or the server ends."""
        server, sid = self.server, opened.session
        outbox: queue.SimpleQueue = queue.SimpleQueue()
        server.streams[sid] = outbox
        forward = server.forward
        push = lambda message: outbox.put(server.conn.push(message))  # noqa: E731 - detached by identity
        if forward is not None:
            forward.attach(sid, push)
        try:
            self.wfile.write(self._head(opened.reply, stream=True) + opened.reply.body)
            while not server.stopping.is_set():
                try:
                    data = outbox.get(timeout=STREAM_POLL)
                except queue.Empty:
                    continue
                if data is None:
                    break
                self.wfile.write(data)
        except OSError:
            pass  # the client closed the stream
        finally:
            if server.streams.get(sid) is outbox:
                del server.streams[sid]
            if forward is not None:
                forward.detach(sid, push)
            if opened.endpoint is not None:  # a legacy session lasts as long as its stream
                with server.lock:
                    server.conn.end(sid)
                server.ended(sid)


def _nowhere(data: bytes) -> None:
    """Where a legacy answer goes when its session's stream has just closed."""


class MockHttpServer(http.server.ThreadingHTTPServer):
    """A Streamable HTTP or legacy HTTP+SSE server answering from `answers`.

    Args:
        host_check: Host and Origin validation; by default the SDK's: on for a loopback `host`.
    """

    daemon_threads = True

    def __init__(self, answers: TraceAnswers, *, transport: str, host: str = "127.0.0.1", port: int = 0,
                 json_response: bool = False, forward: Forwarder | None = None, pace: Pace = DEFAULT_PACE,
                 host_check: HostCheck | None = None) -> None:
        super().__init__((host, port), _Handler)
        self.answers = answers
        self.forward = forward
        self.transport = transport
        self.json_response = json_response
        self.lock = threading.Lock()  # the connection's: handler threads share it
        # Only a forwarded live session has anything to send outside calls: then a GET opens a stream.
        self.conn = ServerConnection(transport, host_check=host_check or HostCheck.for_bind(host),
                                     get_stream=forward is not None)
        self.player = Player(self.conn, self.lock, pace)
        self.streams: dict[str, queue.SimpleQueue] = {}
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}{self.conn.path}"

    def ended(self, session: str) -> None:
        """A client session is over: its cursor, its upstream session and its GET stream go."""
        self.answers.end(session)
        if self.forward is not None:
            self.forward.end(session)
        if (outbox := self.streams.get(session)) is not None:
            outbox.put(None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that resets or drops its connection is normal: nothing to say; so is a connection
        the stop cuts short (a Ctrl-C while the connection is handed to its thread closes its socket
        under it: EBADF). Anything else is a bug."""
        exc = sys.exc_info()[1]
        if self.stopping.is_set() or isinstance(exc, (ConnectionError, TimeoutError)) or getattr(exc, "errno", None) == errno.EBADF:
            return
        super().handle_error(request, client_address)

    def server_close(self) -> None:
        answers = getattr(self, "answers", None)  # (none yet when the bind failed: the base class closes then)
        if answers is not None:
            answers.listens.stop()  # held listen streams end with the mock
        super().server_close()

    def shutdown(self) -> None:
        self.stopping.set()
        self.answers.listens.stop()
        for outbox in list(self.streams.values()):
            outbox.put(None)
        super().shutdown()
