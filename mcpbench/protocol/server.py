"""The MCP server role, written once and free of I/O (h11's `Connection`, for MCP servers).

No sockets, no clock, no threads. A shell (serve-trace's stdio loop and HTTP
handler) hands the connection what a client sent and writes what it is told::

    conn = ServerConnection("streamable-http", host_check=HostCheck.for_bind("127.0.0.1"))
    event = conn.http(HttpRequest(method="POST", target="/mcp", headers=headers, body=body))
    # Refused:      write event.reply; that is all
    # Accepted:     write event.reply (202); a client's answer to our request comes with our waiter
    # Call:         answer event.request: conn.respond(call, answer) -> ServerReply (a JSON body), or
    #               conn.stream(call) -> ServerReply (an SSE head), then conn.event(call, message) -> bytes
    #               for each notification, server request and, last, the answer
    # StreamOpened: write event.reply (the head, and the legacy `endpoint` event), then
    #               conn.push(message) -> bytes for each message outside calls
    # SessionEnded: write event.reply (DELETE), forget what the session had

    conn = ServerConnection("stdio");  events = conn.receive_stdin(chunk)    # b"" at EOF
    conn = ServerConnection("sse", ...)    # legacy: GET /sse -> StreamOpened; POSTs -> 202, answers on the stream

The connection holds the server's transport rules once: the answer forms
(200 JSON or SSE, 202 for notifications and answers, 400, 404, 405), the
`Mcp-Session-Id`s it minted and which are still alive, the 2026-07-28 header
rules (no session; `MCP-Protocol-Version` equal to the `_meta` envelope;
`Mcp-Method`/`Mcp-Name` equal to the body), the legacy session in the endpoint
URI, DNS-rebinding protection on `Host` and `Origin` (`HostCheck`, as the
official Python SDK's `TransportSecuritySettings`), stdio's line framing, and
the server's own requests in flight (`ask`), paired with the client's answers.

A call is answered once: a message for it after its answer, or a second
answer, raises `LocalProtocolError` (the shell's mistake); so does reading
stdin after its end, or asking a 2026-07-28 client a question (server requests
are forbidden in that version).
"""

import enum
import itertools
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import LocalProtocolError
from mcpbench.protocol.framing import LineFramer, LineTooLong
from mcpbench.protocol.http import EVENT_STREAM, JSON, PROTOCOL_VERSION, SESSION_ID, media_type, method_header_problems
from mcpbench.protocol.jsonrpc import Batch, ErrorResponse, InvalidMessage, Message, Notification, NotJson, Request, Response
from mcpbench.protocol.session import C2S, S2C, Exchange, Session
from mcpbench.protocol.sse import SseEvent
from mcpbench.protocol.sse import encode as sse_encode
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import VERSIONS, allows_server_requests, has_get_stream, has_handshake, meta_version, rules

# The one session a stdio server has: its client process.
STDIO_SESSION = "stdio"

# Sessions remembered at once; past this the least recently used is forgotten (a request naming it
# then gets 404, as after a server restart). A long-running server for many short clients that
# never send DELETE must not grow without bound.
MAX_SESSIONS = 10_000

# JSON-RPC errors of the 2026-07-28 Streamable HTTP transport ("Request headers"): a header that
# disagrees with the body, and a protocol version the server does not speak. Both with HTTP 400.
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021  # a request needs a capability the client did not declare
UNSUPPORTED_PROTOCOL_VERSION = -32022
# Their names, as every view of a trace shows them beside the code.
ERROR_NAMES = {HEADER_MISMATCH: "header mismatch", MISSING_CLIENT_CAPABILITY: "missing client capability",
               UNSUPPORTED_PROTOCOL_VERSION: "unsupported protocol version"}

# DNS-rebinding protection of the official Python SDK (`mcp.server.transport_security`): on by
# default when the server binds a loopback name, with these allowed values ("name:*": any port).
LOOPBACK_BINDS = frozenset({"127.0.0.1", "localhost", "::1"})
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
ANY = "*"  # an allowed value that lets every Host (or Origin) through

SSE_EOL = b"\r\n"  # what the SDK servers end SSE lines with


# --- what a shell hands in, and writes out ---------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """One HTTP request as it arrived. `headers` is any mapping whose `.get` is case-insensitive
    or keyed by lower-case names; `target` is the path with its query."""

    method: str
    target: str
    headers: Mapping[str, str]
    body: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerReply:
    """What to write: an HTTP status, headers and body (the shell adds the framing: status line,
    `Content-Length` or the end of a stream); on stdio `status` is None and `body` is the line."""

    status: int | None
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


# --- what a request is ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerEvent:
    """Base of what the connection says a client's input is. Never instantiated itself."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused(ServerEvent):
    """The input broke a transport rule: write `reply`, nothing else happens."""

    reply: ServerReply
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted(ServerEvent):
    """A notification, or the client's answer to a request of ours (`waiter`: what `ask` was given).
    Over HTTP, write `reply` (202)."""

    message: Notification | Response | ErrorResponse
    session: str | None
    reply: ServerReply | None = None
    waiter: Any = None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Call(ServerEvent):
    """A request to answer, in `session` (None: a 2026-07-28 request, which has none), speaking
    `version` (None when nothing says). Legacy HTTP+SSE: write `reply` (202) now; the answer goes
    on the session's stream. `sse`: the client accepts an SSE answer (Streamable HTTP)."""

    request: Request
    session: str | None
    version: str | None
    reply: ServerReply | None = None
    sse: bool = True
    seq: int = 0  # the connection's number for the call: what it knows the call by


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamOpened(ServerEvent):
    """A stream for messages outside calls: Streamable HTTP's `GET`, or legacy `GET /sse` (a new
    session, its `endpoint` event in `reply.body`). Write `reply`, then what `push` gives."""

    session: str
    reply: ServerReply
    endpoint: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEnded(ServerEvent):
    """The client ended `session` (`DELETE`, stdin's end): write `reply` if any, forget the session."""

    session: str
    reply: ServerReply | None = None


# --- Host and Origin -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCheck:
    """DNS-rebinding protection, as the official Python SDK's `TransportSecuritySettings`.

    A `Host` not in `hosts` gets 421, an `Origin` not in `origins` 403 (a request without an
    Origin passes: same-origin requests need not send one). A value `name:*` allows any port,
    `*` any value at all. Disabled, nothing is checked.
    """

    enabled: bool = False
    hosts: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()

    @classmethod
    def for_bind(cls, bind: str, *, hosts: tuple[str, ...] = (), origins: tuple[str, ...] = ()) -> "HostCheck":
        """The check of a server bound to `bind`: on for a loopback name (the SDK's loopback values,
        plus `hosts` and `origins`), and elsewhere only when `hosts` or `origins` are given."""
        if bind in LOOPBACK_BINDS:
            return cls(enabled=True, hosts=(*LOOPBACK_HOSTS, *hosts), origins=(*LOOPBACK_ORIGINS, *origins))
        return cls(enabled=bool(hosts or origins), hosts=tuple(hosts), origins=tuple(origins))

    def refusal(self, headers: Mapping[str, str]) -> Refused | None:
        """Why a request with `headers` is refused, or None."""
        if not self.enabled:
            return None
        host = headers.get("host")
        if not _allowed(host, self.hosts):
            return Refused(reply=_text(421, "Invalid Host header"), reason=f"Host {host!r} is not allowed")
        origin = headers.get("origin")
        if origin and not _allowed(origin, self.origins):
            return Refused(reply=_text(403, "Invalid Origin header"), reason=f"Origin {origin!r} is not allowed")
        return None


def _allowed(value: str | None, patterns: tuple[str, ...]) -> bool:
    if not value:
        return False
    for pattern in patterns:
        if value == pattern or pattern == ANY or (pattern.endswith(":*") and value.startswith(pattern[:-1])):
            return True
    return False


# --- the connection --------------------------------------------------------------------------------


class State(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"  # stdio: stdin ended


@dataclass(slots=True)
class _Session:
    version: str | None = None  # what `initialize` settled (or asked for, until it is answered)


class ServerConnection:
    """The server side of MCP over one transport, with no I/O.

    Args:
        transport: "stdio", "sse" (legacy HTTP+SSE) or "streamable-http".
        path: the MCP endpoint (Streamable HTTP, default `/mcp`) or the stream's path (legacy, `/sse`).
        messages_path: legacy HTTP+SSE: where the `endpoint` event sends POSTs.
        host_check: Host and Origin validation (HTTP); none by default.
        get_stream: Streamable HTTP: the server has messages to send outside calls, so a `GET`
            opens a stream (otherwise 405, as the transport allows).
        delete: Streamable HTTP: a `DELETE` ends the session (otherwise 405).
        new_session_id: makes a session id (default: 32 random hex digits, as the SDKs).
    """

    def __init__(
        self,
        transport: str,
        *,
        path: str | None = None,
        messages_path: str = "/messages/",
        host_check: HostCheck | None = None,
        get_stream: bool = False,
        delete: bool = True,
        new_session_id: Callable[[], str] | None = None,
    ) -> None:
        if transport not in (STDIO, LEGACY_SSE, STREAMABLE_HTTP):
            raise ValueError(f"unknown transport {transport!r}")
        self.transport = transport
        self.path = path or ("/sse" if transport == LEGACY_SSE else "/mcp")
        self.messages_path = messages_path
        self.host_check = host_check or HostCheck()
        self.get_stream = get_stream
        self.delete = delete
        self.state = State.OPEN
        self._new_id = new_session_id or (lambda: uuid.uuid4().hex)
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        if transport == STDIO:
            self._sessions[STDIO_SESSION] = _Session()
        self._framer = LineFramer() if transport == STDIO else None
        self._asks = Session()  # our requests in flight: its `pending`, keyed (S2C, id), with the shell's waiters
        self._ask_ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._open: dict[int, Call] = {}  # calls not answered yet, by `Call.seq`

    # --- state ---------------------------------------------------------------------------------

    def alive(self, session: str) -> bool:
        """Whether `session` is one this server minted and that has not ended."""
        return session in self._sessions

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    @property
    def in_flight(self) -> int:
        """Calls not answered yet."""
        return len(self._open)

    # --- stdio ---------------------------------------------------------------------------------

    def receive_stdin(self, chunk: bytes) -> list[ServerEvent]:
        """What the client wrote on stdin; `b""` at its end (then `SessionEnded`, and the connection closes).

        A line that is no JSON-RPC message is `Refused` with the error line to write back.
        Raises:
            LocalProtocolError: stdin had ended already.
        """
        if self.transport != STDIO:
            raise LocalProtocolError(f"stdin on a {self.transport} connection")
        if self.state is State.CLOSED:
            raise LocalProtocolError("stdin has ended already")
        out: list[ServerEvent] = []
        for line in self._framer.lines(chunk):
            if type(line) is LineTooLong:
                out.append(self._stdio_refusal(jsonrpc.PARSE_ERROR, f"Parse error: a line of {line.size} bytes is too long"))
                continue
            if type(line) is not bytes:
                line = line.data  # the last line, cut off by the end of stdin
            if line and not line.isspace():
                out.append(self._stdio_message(line))
        if not chunk:
            self.state = State.CLOSED
            self._sessions.pop(STDIO_SESSION, None)
            out.append(SessionEnded(session=STDIO_SESSION))
        return out

    def _stdio_message(self, line: bytes) -> ServerEvent:
        try:
            message = jsonrpc.decode(line)
        except InvalidMessage as exc:
            refused = _invalid(exc)
            return Refused(reply=ServerReply(status=None, body=refused.reply.body + b"\n"), reason=refused.reason)
        kind = type(message)
        if kind is Request:
            session = self._sessions.get(STDIO_SESSION)
            version = _asked_version(message) or (session.version if session else None)
            return self._call(message, STDIO_SESSION, version)
        if kind is Notification:
            return Accepted(message=message, session=STDIO_SESSION)
        if kind is Batch:
            return self._stdio_refusal(jsonrpc.INVALID_REQUEST, "JSON-RPC batches are not accepted")
        return Accepted(message=message, session=STDIO_SESSION, waiter=self._answered(message))

    def _stdio_refusal(self, code: int, reason: str) -> Refused:
        error = ErrorResponse(id=None, code=code, message=reason, _parsed=True)
        return Refused(reply=ServerReply(status=None, body=jsonrpc.encode(error) + b"\n"), reason=reason)

    # --- HTTP ----------------------------------------------------------------------------------

    def http(self, request: HttpRequest) -> ServerEvent:
        """What one HTTP request is, and what to answer it with (see the event types)."""
        if self.transport == STDIO:
            raise LocalProtocolError("an HTTP request on a stdio connection")
        if (refused := self.host_check.refusal(request.headers)) is not None:
            return refused
        path, _, query = request.target.partition("?")
        if self.transport == LEGACY_SSE:
            return self._legacy(request, path, query)
        if path != self.path:
            return Refused(reply=_text(404, "Not Found"), reason=f"no MCP endpoint at {path}")
        method = request.method
        if method == "POST":
            return self._post(request)
        if method == "GET":
            return self._get(request)
        if method == "DELETE":
            return self._delete(request)
        return Refused(reply=ServerReply(status=405, headers=(("allow", "GET, POST, DELETE"),)), reason=f"{method} is not an MCP method")

    # Streamable HTTP (2025-03-26 on), "Sending Messages to the Server", "Session Management".

    def _post(self, request: HttpRequest) -> ServerEvent:
        try:
            message = jsonrpc.decode(request.body)
        except InvalidMessage as exc:
            return _invalid(exc)
        if type(message) is Batch:
            return _error(400, jsonrpc.INVALID_REQUEST, "JSON-RPC batches are not accepted")
        headers = request.headers
        header = headers.get(PROTOCOL_VERSION)
        params = getattr(message, "params", None)
        envelope = meta_version(params) if isinstance(params, dict) else None
        if not has_handshake(header) or not has_handshake(envelope):  # either names a handshake-free version
            return self._stateless_post(message, header, envelope, headers)
        if header is not None and rules(header) is None:
            return _unsupported(header, getattr(message, "id", None))
        kind = type(message)
        if kind is Request and message.method == "initialize":
            sid = self._mint(_asked_version(message))
            return self._call(message, sid, self._sessions[sid].version, sse=_accepts_sse(headers))
        sid = headers.get(SESSION_ID)
        if not sid:
            return _error(400, jsonrpc.INVALID_REQUEST, "Bad Request: Missing session ID")
        session = self._sessions.get(sid)
        if session is None:
            return _error(404, jsonrpc.INVALID_REQUEST, "Session not found")
        self._sessions.move_to_end(sid)
        if kind is Request:
            return self._call(message, sid, header or session.version, sse=_accepts_sse(headers))
        if kind is Notification:
            return Accepted(message=message, session=sid, reply=ServerReply(status=202))
        return Accepted(message=message, session=sid, reply=ServerReply(status=202), waiter=self._answered(message))

    def _stateless_post(self, message: Message, header: str | None, envelope: str | None, headers: Mapping[str, str]) -> ServerEvent:
        """2026-07-28: no session; every POST says its version in the header, and requests in `_meta` too."""
        kind = type(message)
        if kind is Notification:
            if rules(header) is None:
                return _unsupported(header, None)
            return Accepted(message=message, session=None, reply=ServerReply(status=202))
        if kind is not Request:  # the server asks nothing in 2026-07-28, so no answer is owed to it
            return _error(400, jsonrpc.INVALID_REQUEST, f"a {header or envelope} client sends no answers")
        if envelope is None:
            return _error(400, jsonrpc.INVALID_PARAMS, "params._meta must carry the request's protocol version", message.id)
        if header != envelope:
            return _error(400, HEADER_MISMATCH, f"MCP-Protocol-Version header {header!r} does not match "
                                                f"the request envelope's protocol version {envelope!r}", message.id)
        if rules(envelope) is None:
            return _unsupported(envelope, message.id)
        if problems := method_header_problems(message, headers, version=envelope):
            return _error(400, HEADER_MISMATCH, problems[0][1], message.id)
        return self._call(message, None, envelope, sse=_accepts_sse(headers))

    def _get(self, request: HttpRequest) -> ServerEvent:
        sid, refused = self._in_session(request.headers, has_get_stream, self.get_stream, allow="POST, DELETE",
                                        why="this server sends nothing outside calls")
        if refused is not None:
            return refused
        head = ServerReply(status=200, headers=(("content-type", EVENT_STREAM), ("cache-control", "no-cache, no-transform"),
                                          (SESSION_ID, sid)))
        return StreamOpened(session=sid, reply=head)

    def _delete(self, request: HttpRequest) -> ServerEvent:
        sid, refused = self._in_session(request.headers, has_handshake, self.delete, allow="GET, POST",
                                        why="sessions end only with their client")
        if refused is not None:
            return refused
        self._sessions.pop(sid, None)
        return SessionEnded(session=sid, reply=ServerReply(status=200))

    def _in_session(self, headers: Mapping[str, str], has: Callable[[str | None], bool], offered: bool, *, allow: str,
                    why: str) -> tuple[str, Refused | None]:
        """A GET or DELETE: 405 where the version (`has(version)`, a question to the version table:
        a GET stream? a session to end?) or this server (`offered`) has no such thing; then the
        session it names, or 400/404."""
        version = headers.get(PROTOCOL_VERSION)
        if not has(version):
            return "", Refused(reply=ServerReply(status=405, headers=(("allow", "POST"),)), reason=f"not in {version}")
        if not offered:
            return "", Refused(reply=ServerReply(status=405, headers=(("allow", allow),)), reason=why)
        return self._known_session(headers)

    def _known_session(self, headers: Mapping[str, str]) -> tuple[str, Refused | None]:
        sid = headers.get(SESSION_ID)
        if not sid:
            return "", _error(400, jsonrpc.INVALID_REQUEST, "Bad Request: Missing session ID")
        if sid not in self._sessions:
            return sid, _error(404, jsonrpc.INVALID_REQUEST, "Session not found")
        self._sessions.move_to_end(sid)
        return sid, None

    # Legacy HTTP+SSE (2024-11-05): `GET /sse` opens a session and names its POST URI in the
    # `endpoint` event; every POST is accepted with 202, and answers go on the stream.

    def _legacy(self, request: HttpRequest, path: str, query: str) -> ServerEvent:
        if request.method == "GET" and path == self.path:
            sid = self._mint(None)
            endpoint = f"{self.messages_path}?session_id={sid}"
            head = ServerReply(status=200, headers=(("content-type", EVENT_STREAM + "; charset=utf-8"), ("cache-control", "no-store")),
                         body=sse_encode(SseEvent(event="endpoint", data=endpoint), eol=SSE_EOL))
            return StreamOpened(session=sid, reply=head, endpoint=endpoint)
        if path not in (self.path, self.messages_path):
            return Refused(reply=_text(404, "Not Found"), reason=f"nothing at {path}")
        if request.method != "POST" or path != self.messages_path:
            allow = "GET" if path == self.path else "POST"
            return Refused(reply=ServerReply(status=405, headers=(("allow", allow),)), reason=f"{request.method} {path}")
        sid = _query_value(query, "session_id")
        if not sid:
            return Refused(reply=_text(400, "session_id is required"), reason="a POST without its session")
        session = self._sessions.get(sid)
        if session is None:
            return Refused(reply=_text(404, "Could not find session"), reason=f"no session {sid}")
        self._sessions.move_to_end(sid)
        try:
            message = jsonrpc.decode(request.body)
        except InvalidMessage as exc:
            return Refused(reply=_text(400, "Could not parse message"), reason=exc.reason)
        accepted = _text(202, "Accepted")
        kind = type(message)
        if kind is Request:
            if message.method == "initialize":
                session.version = _asked_version(message)
            return self._call(message, sid, session.version, reply=accepted)
        if kind is Notification:
            return Accepted(message=message, session=sid, reply=accepted)
        if kind is Batch:
            return Refused(reply=_text(400, "JSON-RPC batches are not accepted"), reason="a batch")
        return Accepted(message=message, session=sid, reply=accepted, waiter=self._answered(message))

    def end(self, session: str) -> bool:
        """`session` is over (a legacy stream closed, the shell gave up on it): later requests naming
        it get 404. Whether it was alive."""
        return self._sessions.pop(session, None) is not None

    def _mint(self, version: str | None) -> str:
        sid = self._new_id()
        self._sessions[sid] = _Session(version)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return sid

    # --- answering -----------------------------------------------------------------------------

    def _call(self, request: Request, session: str | None, version: str | None, *, reply: ServerReply | None = None,
              sse: bool = True) -> Call:
        call = Call(request=request, session=session, version=version, reply=reply, sse=sse, seq=next(self._seq))
        self._open[call.seq] = call
        return call

    def respond(self, call: Call, answer: Response | ErrorResponse) -> ServerReply:
        """The whole JSON answer to `call` (Streamable HTTP): 200, its body, the session's id.

        An `initialize` that failed leaves no session behind: its answer names none.
        Raises:
            LocalProtocolError: not Streamable HTTP, not an answer, or `call` was answered already.
        """
        if self.transport != STREAMABLE_HTTP:
            raise LocalProtocolError(f"a JSON answer on {self.transport}")
        if type(answer) is not Response and type(answer) is not ErrorResponse:
            raise LocalProtocolError("a JSON body carries the answer alone")
        self._answering(call, answer)
        headers: tuple[tuple[str, str], ...] = (("content-type", JSON),)
        if call.session is not None and self.alive(call.session):
            headers += ((SESSION_ID, call.session),)
        return ServerReply(status=200, headers=headers, body=jsonrpc.encode(answer))

    def stream(self, call: Call) -> ServerReply:
        """The head of an SSE answer to `call` (Streamable HTTP); then `event` for each message."""
        if self.transport != STREAMABLE_HTTP:
            raise LocalProtocolError(f"an SSE answer on {self.transport}")
        if call.seq not in self._open:
            raise LocalProtocolError(f"request {call.request.id!r} was answered already")
        headers: tuple[tuple[str, str], ...] = (("content-type", EVENT_STREAM), ("cache-control", "no-cache, no-transform"),
                                                ("x-accel-buffering", "no"))
        if call.session is not None:
            headers += ((SESSION_ID, call.session),)
        return ServerReply(status=200, headers=headers)

    def event(self, call: Call, message: Message) -> bytes:
        """The bytes of one message for `call`: an SSE event (its POST's stream, or the legacy
        stream), or a stdio line. The call's answer, last, completes it.

        Raises:
            LocalProtocolError: `call` was answered already.
        """
        if call.seq not in self._open:
            raise LocalProtocolError(f"request {call.request.id!r} was answered already")
        kind = type(message)
        if (kind is Response or kind is ErrorResponse) and message.id == call.request.id:
            self._answering(call, message)
        return self.push(message)

    def push(self, message: Message) -> bytes:
        """The bytes of a message outside any call: an SSE event (a GET or legacy stream), or a stdio line."""
        data = jsonrpc.encode(message)
        if self.transport == STDIO:
            return data + b"\n"
        return sse_encode(SseEvent(event="message", data=data.decode()), eol=SSE_EOL)

    def abandon(self, call: Call) -> None:
        """The shell will not answer `call` (its client went away)."""
        self._open.pop(call.seq, None)

    def _answering(self, call: Call, answer: Response | ErrorResponse) -> None:
        if self._open.pop(call.seq, None) is None:
            raise LocalProtocolError(f"request {call.request.id!r} was answered already")
        if call.request.method != "initialize" or call.session is None:
            return
        session = self._sessions.get(call.session)
        if type(answer) is Response and isinstance(answer.result, dict):
            if session is not None and isinstance(answer.result.get("protocolVersion"), str):
                session.version = answer.result["protocolVersion"]
        elif self.transport == STREAMABLE_HTTP:
            self._sessions.pop(call.session, None)  # a failed handshake opens no session

    # --- our requests to the client -------------------------------------------------------------

    def ask(self, call: Call, method: str, params: dict | None = None, *, waiter: Any = None) -> Request:
        """A request of the server's, sent while `call` runs (`event(call, request)` gives its bytes).

        The client's answer comes back as `Accepted` with `waiter`.
        Raises:
            LocalProtocolError: `call`'s version forbids server requests (2026-07-28).
        """
        if not allows_server_requests(call.version):
            raise LocalProtocolError(f"a server sends no requests in {call.version}")
        request = Request(id=f"mcpbench-{next(self._ask_ids)}", method=method, params=params, _parsed=True)
        self._asks.observe(S2C, request)
        self._asks.pending[(S2C, request.id)].waiter = waiter
        return request

    def give_up(self, request_id: Any) -> None:
        """The shell stopped waiting for the answer to our request `request_id`."""
        self._asks.pending.pop((S2C, request_id), None)

    def _answered(self, answer: Response | ErrorResponse) -> Any:
        """The waiter of the request of ours that `answer` answers, if any."""
        for event in self._asks.observe(C2S, answer):
            if type(event) is Exchange:
                return event.waiter
        return None


# --- helpers ---------------------------------------------------------------------------------------


def _asked_version(request: Request) -> str | None:
    """The version a request names: `initialize`'s `protocolVersion`, or the 2026-07-28 envelope's."""
    params = request.params if isinstance(request.params, dict) else {}
    if request.method == "initialize" and isinstance(params.get("protocolVersion"), str):
        return params["protocolVersion"]
    return meta_version(params)


def _query_value(query: str, name: str) -> str | None:
    """The first value of `name` in a URL query (the legacy session ids need no unquoting: hex digits)."""
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key == name:
            return value
    return None


def _accepts_sse(headers: Mapping[str, str]) -> bool:
    """Whether a POST's `Accept` lets the answer be an event stream (no `Accept`: anything goes)."""
    accept = headers.get("accept")
    if not accept:
        return True
    kinds = {media_type(part) for part in accept.split(",")}
    return EVENT_STREAM in kinds or "*/*" in kinds or "text/*" in kinds


def _text(status: int, text: str) -> ServerReply:
    return ServerReply(status=status, headers=(("content-type", "text/plain; charset=utf-8"),), body=text.encode())


def _error(status: int, code: int, message: str, request_id: Any = None, data: Any = None) -> Refused:
    """A refusal whose body is a JSON-RPC error, as the SDK servers send them."""
    body = jsonrpc.encode(ErrorResponse(id=request_id, code=code, message=message, data=data, _parsed=True))
    return Refused(reply=ServerReply(status=status, headers=(("content-type", JSON),), body=body), reason=message)


def _invalid(exc: InvalidMessage) -> Refused:
    """A body that is no JSON (-32700, JSON-RPC's parse error) or no JSON-RPC message (-32600)."""
    if isinstance(exc, NotJson):
        return _error(400, jsonrpc.PARSE_ERROR, f"Parse error: {exc.reason}")
    return _error(400, jsonrpc.INVALID_REQUEST, f"Invalid request: {exc.reason}")


def _unsupported(version: str | None, request_id: Any) -> Refused:
    supported = list(VERSIONS)
    return _error(400, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", request_id,
                  {"supported": supported, "requested": version})


__all__ = [
    "Accepted", "Call", "HostCheck", "HttpRequest", "Refused", "ServerReply", "STDIO_SESSION", "ServerConnection",
    "ServerEvent", "SessionEnded", "State", "StreamOpened",
]
