"""The MCP client role, written once and free of I/O (h11's `Connection`, for MCP clients).

No sockets, no clock, no threads. A shell (the replayer's blocking transports,
the load users' gevent transports, the mock's forwarder) asks the connection
what to send and feeds it what arrives, with the times it took::

    conn = ClientConnection("streamable-http", "2025-11-25", url="http://127.0.0.1:8000/mcp")
    out = conn.send(initialize_request(conn), waiter=w, ts=now)   # Outgoing: message, data, headers, url
    out = conn.send(conn.prepare("tools/list"), waiter=w, ts=now)  # a request; any message goes the same way
    reader = conn.reader(PostHead(out, status, content_type, session_id))   # the answer to that POST
    events = reader.feed(chunk, ts) + reader.feed(b"", ts)        # Answered, Pushed, ServerRequest, Failed, …

    conn = ClientConnection("stdio", …);   events = conn.reader(STDOUT).feed(chunk, ts)
    conn = ClientConnection("sse", …, url=".../sse");  reader = conn.reader(LegacyHead(status, content_type))

What went wrong is reported with `fail` (a POST not made, an answer given up on, the transport
broken); the headers of the requests the shell makes itself come from `headers(purpose)`.

The user's own headers (credentials, an API key: `headers=`, `set_headers`) go on every
HTTP request the connection builds, under the protocol's own (which win). The connection
owns the one table of requests in flight (its `Session.pending`;
each entry keeps the shell's opaque `waiter`, returned with the request's
outcome), id allocation, the headers of each transport and era
(`Mcp-Session-Id`, `MCP-Protocol-Version`, `Mcp-Method`/`Mcp-Name`,
`Last-Event-ID`), the one legacy-session parser, and the server-request policy
(`asks.py`). A session is lost in one place (`_lose`): its `Session` moves to
LOST for the cause (the table's), every request in flight fails, and one
`SessionLost` says so; `lost` and `lost_by` say why from then on. What the shell
does next is `recovery.plan_recovery`'s.
"""

import itertools
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from mcpbench import __version__
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.asks import AskPolicy, Refuse
from mcpbench.protocol.auth import Challenge, bearer_challenge
from mcpbench.protocol.framing import LineFramer, LineTooLong
from mcpbench.protocol.http import (
    GET_ACCEPT,
    JSON,
    LAST_EVENT_ID,
    PROTOCOL_VERSION,
    SESSION_ID,
    Carried,
    EndpointUrl,
    Failure,
    LegacyStream,
    PostAnswer,
    Problem,
    is_event_stream,
    legacy_session_key,
    post_headers,
)
from mcpbench.protocol.jsonrpc import ErrorResponse, InvalidMessage, Message, Notification, Request, Response
from mcpbench.protocol.recovery import LOSSES
from mcpbench.protocol.session import C2S, S2C, Session, Trigger
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP, TRANSPORTS
from mcpbench.protocol.versions import (
    LATEST_HANDSHAKE, Era, envelope, era_of, has_handshake, header_name_key, meta_version, progress_token, rules,
)

CLIENT_INFO = {"name": "mcpbench", "version": __version__}

# Answered request ids and SSE event ids remembered to tell duplicates apart: far more than a
# session has in flight or a resumed stream replays, and bounded over a long session.
REMEMBERED = 4096


# --- what to send --------------------------------------------------------------------------------


@dataclass(slots=True)
class Outgoing:
    """One message to send: `data` is the HTTP body or the stdio line (newline included);
    `headers` and `url` are where and how to POST it (None on stdio)."""

    message: Message
    data: bytes
    headers: dict[str, str] | None = None
    url: str | None = None

    @property
    def request_id(self) -> Any:
        return self.message.id if type(self.message) is Request else None


# --- what arrived --------------------------------------------------------------------------------


@dataclass(slots=True)
class Answered:
    """A request of ours got its answer."""

    request: Request
    answer: Response | ErrorResponse
    waiter: Any
    sent: float
    received: float
    via: str  # "json", "sse" (a POST's stream), "get", "stream" (legacy), "stdio"
    status: int | None = None  # the HTTP status of the answer that carried it (an error status still counts)

    @property
    def message(self) -> Message:
        return self.answer


@dataclass(slots=True)
class Failed:
    """A request of ours (None: a notification) will get no answer. `failure` is a `http.Failure` class."""

    request: Request | None
    waiter: Any
    failure: str
    detail: str
    status: int | None = None
    last_event_id: str | None = None  # the cut stream's last event id: where a resume starts
    sent: float = 0.0
    challenge: Challenge | None = None  # a 401's or 403's `WWW-Authenticate` challenge, read
    retry_ms: int | None = None  # the cut stream's last `retry:` (ms): the least wait before it is reopened
    refusal: ErrorResponse | None = None  # the JSON-RPC error the refusing answer carried (a message received)


@dataclass(slots=True)
class ServerRequest:
    """The server asked something; `reply` is the policy's answer, for the shell to send
    (None: the policy left the answer to the shell, which sends it with `send` when it has it)."""

    request: Request
    reply: Outgoing | None
    carrier: Any = None  # the id of the request whose POST stream carried it
    via: str = ""

    @property
    def message(self) -> Message:
        return self.request


@dataclass(slots=True)
class Pushed:
    """A notification from the server; `request_id` is the request it concerns, where known
    (its progress token, or the POST whose stream carried it)."""

    message: Notification
    request_id: Any
    waiter: Any
    via: str


@dataclass(slots=True)
class Unmatched:
    """An answer to no request in flight: `late` when it is one the shell gave up on,
    `duplicate` when its request was answered already (a resumed stream replaying it, say)."""

    answer: Response | ErrorResponse
    late: bool
    via: str
    duplicate: bool = False

    @property
    def message(self) -> Message:
        return self.answer


@dataclass(slots=True)
class Garbled:
    """Something the server sent that is not MCP (stdout pollution, a bad JSON text); nothing is guessed."""

    detail: str
    raw: bytes


@dataclass(slots=True)
class SessionLost:
    """The session is gone, for `cause` (one of `session.LOSSES`: the server no longer knows it,
    its process or stream ended, the connection broke); what now is `recovery.plan_recovery`'s."""

    detail: str
    cause: Trigger


@dataclass(slots=True)
class StreamEnded:
    """A stream ended: "stdio" (the server's stdout), "legacy" (the session's stream), "get"."""

    stream: str
    detail: str
    last_event_id: str | None = None


@dataclass(slots=True)
class EndpointReady:
    """Legacy HTTP+SSE: the stream named where to POST; the session can start."""

    url: str
    session_id: str


Event = Answered | Failed | ServerRequest | Pushed | Unmatched | Garbled | SessionLost | StreamEnded | EndpointReady


# --- the channels bytes come on ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stdout:
    """The server process's stdout (stdio): one channel for the session's life."""


STDOUT = Stdout()


@dataclass(frozen=True, slots=True)
class PostHead:
    """The head of the answer to the POST of `out`: its body follows.
    `authenticate` is the answer's `WWW-Authenticate` value (a 401's challenge)."""

    out: Outgoing
    status: int
    content_type: str | None
    session_id: str | None = None
    authenticate: str | None = None


@dataclass(frozen=True, slots=True)
class GetHead:
    """The head of the answer to a `GET`: the server's stream ("get") or a cut stream resumed ("resume")."""

    status: int
    content_type: str | None
    stream: str = "get"
    authenticate: str | None = None


@dataclass(frozen=True, slots=True)
class LegacyHead:
    """The head of the legacy `GET /sse` stream's answer."""

    status: int
    content_type: str | None
    authenticate: str | None = None


Channel = Stdout | PostHead | GetHead | LegacyHead


# --- what to send, built ---------------------------------------------------------------------------


def initialize_request(conn: "ClientConnection", params: dict | None = None) -> Request:
    """The `initialize` request (handshake era) with the connection's next id; `params` replace the
    default (a recording's, say). Send it with `conn.send`."""
    params = params or {"protocolVersion": conn.version, "capabilities": conn.capabilities, "clientInfo": conn.client_info}
    return Request(id=conn.next_id(), method="initialize", params=params, _parsed=True)


def initialized_notification() -> Notification:
    return Notification(method="notifications/initialized")


def notification(method: str, params: dict | None = None) -> Notification:
    return Notification(method=method, params=params, _parsed=True)


_UNSET: Any = object()


# --- the connection --------------------------------------------------------------------------------


class ClientConnection:
    """One MCP client session over one transport, with no I/O.

    The whole surface, h11's way: `send` what leaves (a message, or a request `prepare` built);
    `reader(channel)` for what arrives on a channel (stdout, a POST's answer, the GET stream, the
    legacy stream), whose `feed(chunk, ts)` returns the events; `headers(purpose)` for the HTTP
    requests the shell makes itself; `fail` for what the shell saw go wrong; `resume` to wait again
    for an answer a cut stream lost; `close`. Its state: `session` (the table's), `lost`/`lost_by`,
    `usable`, `negotiated`, `session_id`, `endpoint`.

    Args:
        transport: "stdio", "sse" (legacy HTTP+SSE) or "streamable-http".
        version: the version to speak. A handshake-era version is offered in
            `initialize` (the server's answer decides); 2026-07-28 goes in every
            request's `_meta` envelope.
        url: the MCP endpoint (Streamable HTTP) or the `GET /sse` URL (legacy).
        capabilities: the client capabilities to declare; the policy's are added.
        client_info: the `clientInfo` object.
        policy: answers server→client requests (`asks.Refuse` by default).
        headers: the user's headers for every HTTP request (names lower case), under the protocol's.
    """

    def __init__(
        self,
        transport: str,
        version: str = LATEST_HANDSHAKE,
        *,
        url: str | None = None,
        capabilities: dict | None = None,
        client_info: dict | None = None,
        policy: AskPolicy | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r}")
        if era_of(version) is None:
            raise ValueError(f"unknown protocol version {version!r}")
        self.transport = transport
        self.version = version
        self.url = url
        self._policy = policy or Refuse()
        self.capabilities = {**self._policy.capabilities(), **(capabilities or {})}
        self.client_info = client_info or CLIENT_INFO
        self.stateless = era_of(version) is Era.STATELESS
        self.session = Session(version if self.stateless else None, transport)
        self.session_id: str | None = None  # Mcp-Session-Id, or the legacy endpoint's session
        self.endpoint: str | None = None  # legacy: where to POST
        self.replayed = 0  # SSE events seen twice (a resumed stream sending again what came before)
        self.extra: dict[str, str] = dict(headers or {})  # the user's headers
        self.headers_version = 0  # changes with `set_headers`: a request built before is stale
        self._last_event_id: str | None = None  # of the GET stream, for Last-Event-ID
        self._carrier_gone = False  # a loss took the process or stream the session lived on (`_lose`)
        self._ids = itertools.count(1)
        self._tokens: dict[Any, Any] = {}  # progress token -> request id
        self._given_up: set[Any] = set()
        self._answered = Recent()  # answered ids: duplicates are told apart
        self._event_ids = Recent()  # SSE event ids seen: events replayed are told apart
        self._stdout = StdoutReader(self) if transport == STDIO else None
        self._headers: dict[tuple[str, Any], dict[str, str]] = {}  # POST headers by (method, name), for:
        self._headers_for: tuple[str | None, str | None] = (None, None)  # (negotiated version, session id)

    # --- state --------------------------------------------------------------------------------

    @property
    def lost(self) -> str | None:
        """Why the session is gone (lost, or closed by the client), once it is; None while it stands."""
        ending = self.session.ending
        return ending.detail if ending is not None else None

    @property
    def lost_by(self) -> Trigger | None:
        """The cause of the session's end (a loss's, or CLOSE); None while it stands."""
        ending = self.session.ending
        return ending.cause if ending is not None else None

    @property
    def usable(self) -> bool:
        """The session can carry requests (not lost; legacy: its endpoint is known)."""
        return self.lost is None and (self.transport != LEGACY_SSE or self.endpoint is not None)

    @property
    def negotiated(self) -> str | None:
        """The version in force: the envelope's, or the one `initialize` settled (not a probe's)."""
        if self.stateless:
            return self.version
        version = self.session.version
        return version if has_handshake(version) else None

    @property
    def in_flight(self) -> int:
        return sum(1 for direction, _ in self.session.pending if direction is C2S)

    # --- sending ------------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def prepare(self, method: str, params: dict | None = None, *, as_version: str | None = None) -> Outgoing:
        """A request with a fresh id, built but not yet sent: `send` it as it leaves. In 2026-07-28
        its `_meta` carries the envelope.

        Lets a shell build its next request while it waits for an answer (the replayer does), so
        that only the write is left for the moment the answer comes. Its headers are those of the
        session as it is now: one whose id or version changes before it leaves must be built again.

        `as_version`: send it as a client of that version does, whatever the session speaks (a
        `server/discover` probe before a handshake, as an `auto` client sends it): that version's
        envelope (unless `params` carry one) and headers. The session's version is the handshake's.
        """
        version = as_version or (self.version if self.stateless else None)
        if version is not None and not has_handshake(version) and (as_version is None or meta_version(params) is None):
            params = dict(params or {})
            meta = dict(params.get("_meta") or {})
            meta.update(envelope(version, capabilities=self.capabilities, client_info=self.client_info))
            params["_meta"] = meta
        return self._outgoing(Request(id=self.next_id(), method=method, params=params, _parsed=True), as_version)

    def send(self, message: Message | Outgoing, *, waiter: Any = None, ts: float = 0.0) -> Outgoing:
        """The session sees `message` leave: a request `prepare` built, or any message as the caller
        built it (a request keeps its id). A request's answer is awaited from now on, for `waiter`."""
        out = message if type(message) is Outgoing else None
        message = out.message if out is not None else message
        if type(message) is not Request:
            self.session.observe(C2S, message, ts)
        else:
            self.session.asking(message, ts, waiter)
            params = message.params
            if params and "_meta" in params and (token := progress_token(params)) is not None:
                self._tokens[token] = message.id
        return out if out is not None else self._outgoing(message)

    def set_headers(self, headers: dict[str, str]) -> None:
        """Send these user headers from now on (a renewed token, say); requests already built keep theirs."""
        if headers != self.extra:
            self.extra = dict(headers)
            self.headers_version += 1
            self._headers.clear()

    def headers(self, purpose: str, last_event_id: str | None = None, *, resume: bool = True) -> dict[str, str] | None:
        """Headers of an HTTP request the shell makes itself, by `purpose`:
        "get": the Streamable HTTP `GET` that opens (or, with `Last-Event-ID` unless `resume` is
        false, resumes) the server's stream; "resume": a `GET` that resumes a cut POST stream from
        `last_event_id`; "delete": the `DELETE` that ends the session (None when there is none to
        end); "legacy": the legacy `GET /sse`."""
        if purpose == "legacy":
            return self._with_extra({"accept": GET_ACCEPT})
        if purpose == "delete":
            if self.transport != STREAMABLE_HTTP or not self.session_id:
                return None
            headers = {SESSION_ID: self.session_id}
            if self.negotiated:
                headers[PROTOCOL_VERSION] = self.negotiated
            return self._with_extra(headers)
        if purpose not in ("get", "resume"):
            raise ValueError(f"no headers for {purpose!r}")
        headers = {"accept": GET_ACCEPT}
        if self.session_id:
            headers[SESSION_ID] = self.session_id
        known = rules(self.negotiated)
        if known is not None and known.protocol_version_header:
            headers[PROTOCOL_VERSION] = self.negotiated
        if purpose == "resume":
            headers[LAST_EVENT_ID] = last_event_id or ""
        elif resume and self._last_event_id:
            headers[LAST_EVENT_ID] = self._last_event_id
        return self._with_extra(headers)

    # --- receiving ----------------------------------------------------------------------------

    def reader(self, channel: Channel) -> "StdoutReader | AnswerReader | LegacyReader | None":
        """The reader of what comes on `channel` (feed it the body's chunks, `b""` at its end):
        `STDOUT`; a POST's answer (`PostHead`); a `GET` stream (`GetHead`: None when the server
        offers none, 405); the legacy stream (`LegacyHead`)."""
        kind = type(channel)
        if kind is Stdout:
            return self._stdout
        if kind is PostHead:
            out, status = channel.out, channel.status
            if channel.session_id and status < 300 and type(out.message) is Request and out.message.method == "initialize":
                self.session_id = channel.session_id  # before the answer is read: the next POST needs it
            has_session = SESSION_ID in (out.headers or ()) if self.transport == STREAMABLE_HTTP else True
            expected = out.request_id if self.transport == STREAMABLE_HTTP else None  # legacy answers come on the stream
            answer = PostAnswer(expected, status, channel.content_type, has_session=has_session,
                                challenge=_challenge(status, channel.authenticate))
            return AnswerReader(self, answer, out.request_id, "sse")
        if kind is GetHead:
            if channel.status == 405:  # Streamable HTTP: a server without the stream MUST answer 405
                return None
            resumed = channel.stream == "resume" or bool(self._last_event_id)  # opened with Last-Event-ID
            answer = PostAnswer(None, channel.status, channel.content_type, has_session=bool(self.session_id),
                                challenge=_challenge(channel.status, channel.authenticate), resumed=resumed)
            return AnswerReader(self, answer, None, "get", stream=channel.stream)
        if kind is LegacyHead:
            return LegacyReader(self, channel.status, channel.content_type, _challenge(channel.status, channel.authenticate))
        raise TypeError(f"not a channel: {channel!r}")

    # --- what went wrong ----------------------------------------------------------------------

    def fail(self, detail: str, failure: str | None = None, *, out: Outgoing | None = None, gave_up: Any = _UNSET) -> list[Event]:
        """The shell reports a failure, with its class (`http.Failure`):
        - `out=`: the POST of `out` could not be made or read (connection refused, reset, …);
        - `gave_up=`: the shell stopped waiting for that request id (its clock ran out): a late
          answer is `Unmatched` (the failure is ANSWER_LOST);
        - neither: the shell's transport broke (a child's stdin closed, a connection refused; CONNECT
          unless said): the session is lost and every request in flight has failed."""
        if out is not None:
            if out.request_id is None:
                return [Failed(None, None, failure, detail)]
            return self._fail(out.request_id, failure, detail)
        if gave_up is not _UNSET:
            pending = self.session.pending.pop((C2S, gave_up), None)
            if pending is None:
                return []
            self._given_up.add(gave_up)
            self._forget_token(gave_up)
            return [Failed(pending.request, pending.waiter, Failure.ANSWER_LOST, detail)]
        return self._lose(Trigger.CONNECTION_BROKE, detail, failure or Failure.CONNECT)

    def resume(self, failed: Failed, *, waiter: Any = None) -> dict[str, str] | None:
        """Wait again for the answer `failed` lost with its stream: the headers of the `GET` that
        resumes that stream from `failed.last_event_id` (its answer's reader: `GetHead(..., stream="resume")`).
        None when the session is gone: nothing can be resumed."""
        if not self.session.resuming(failed.request, failed.sent, waiter):
            return None
        return self.headers("resume", failed.last_event_id or "")

    def close(self) -> None:
        """The client ended the session (DELETE sent, stdin closed, stream closed)."""
        self.session.close("closed by the client")

    # --- the common path -------------------------------------------------------------------------

    def _with_extra(self, headers: dict[str, str]) -> dict[str, str]:
        return {**self.extra, **headers} if self.extra else headers

    def _outgoing(self, message: Message, as_version: str | None = None) -> Outgoing:
        data = jsonrpc.encode(message)
        if self.transport == STDIO:
            return Outgoing(message, data + b"\n")
        if self.transport == LEGACY_SSE:
            return Outgoing(message, data, self._with_extra({"content-type": JSON}), self.endpoint)
        if as_version is not None:  # a request of another version than the session's: its own headers
            headers = post_headers(message, version=as_version, session_id=self.session_id)
            return Outgoing(message, data, self._with_extra(headers), self.url)
        return Outgoing(message, data, self._post_headers(message), self.url)

    def _post_headers(self, message: Message) -> dict[str, str]:
        method = getattr(message, "method", None)
        if method == "initialize":  # before a version is settled: none said
            return self._with_extra(post_headers(message, version=None, session_id=self.session_id))
        if method is None:  # an answer to the server
            return self._with_extra(post_headers(message, version=self.negotiated, session_id=self.session_id))
        settled = (self.negotiated, self.session_id)
        if settled != self._headers_for:  # a handshake after a probe, or a new session id: new headers
            self._headers.clear()
            self._headers_for = settled
        key = header_name_key(method)
        target = message.params.get(key) if key and isinstance(message.params, dict) else None
        cache_key = (method, target if isinstance(target, str) else None)
        headers = self._headers.get(cache_key)
        if headers is None:
            headers = post_headers(message, version=self.negotiated, session_id=self.session_id)
            headers = self._headers[cache_key] = self._with_extra(headers)
        return headers


    def _carried_text(self, data: bytes, via: str, carrier: Any, ts: float, out: list[Event]) -> None:
        try:
            message = jsonrpc.decode(data)
        except InvalidMessage as exc:
            out.append(Garbled(f"not JSON-RPC ({exc.reason})", bytes(data[:200])))
            return
        for item in message.items if type(message) is jsonrpc.Batch else (message,):
            self._incoming(item, via, carrier, ts, out)

    def _incoming(self, message: Message, via: str, carrier: Any, ts: float, out: list[Event], status: int | None = None) -> None:
        kind = type(message)
        if kind is Response or kind is ErrorResponse:
            if message.id is None and carrier is not None:  # an error about a request the server could not read
                message = ErrorResponse(id=carrier, code=message.code, message=message.message, data=message.data)
            pending = self.session.answered(message)
            if pending is None:
                out.append(Unmatched(message, message.id in self._given_up, via, message.id in self._answered))
                return
            if self._tokens:
                self._forget_token(message.id)
            self._answered.add(message.id)
            out.append(Answered(pending.request, message, pending.waiter, pending.started, ts, via, status))
        elif kind is Request:
            self.session.observe(S2C, message, ts)
            reply = self._policy.answer(message)
            out.append(ServerRequest(message, self.send(reply, ts=ts) if reply is not None else None, carrier, via))
        elif kind is Notification:
            self.session.observe(S2C, message, ts)
            token = (message.params or {}).get("progressToken") if isinstance(message.params, dict) else None
            owner = self._tokens.get(token, carrier) if token is not None else carrier
            pending = self.session.pending.get((C2S, owner)) if owner is not None else None
            out.append(Pushed(message, owner, pending.waiter if pending is not None else None, via))

    def _problem(self, problem: Problem, request_id: Any, status: int | None, last_event_id: str | None,
                 answer: PostAnswer | None = None) -> list[Event]:
        if problem.failure == Failure.SESSION_NOT_FOUND:
            if request_id is None:  # a notification (or an answer) that found no session
                out: list[Event] = [Failed(None, None, problem.failure, problem.detail, status, refusal=problem.message)]
            else:
                out = self._fail(request_id, problem.failure, problem.detail, status, refusal=problem.message)
            if self.lost is None:
                out += self._lose(Trigger.SESSION_NOT_FOUND, problem.detail)
            return out
        if request_id is None:
            return [Failed(None, None, problem.failure, problem.detail, status, refusal=problem.message)]
        out = self._fail(request_id, problem.failure, problem.detail, status, last_event_id, refusal=problem.message)
        if answer is not None:
            for failed in out:
                failed.challenge, failed.retry_ms = answer.challenge, answer.retry_ms
        return out

    def _fail(self, request_id: Any, failure: str, detail: str, status: int | None = None, last_event_id: str | None = None,
              *, refusal: ErrorResponse | None = None) -> list[Event]:
        pending = self.session.pending.pop((C2S, request_id), None)
        if pending is None:
            return []
        self._forget_token(request_id)
        return [Failed(pending.request, pending.waiter, failure, detail, status, last_event_id, pending.started, refusal=refusal)]

    def _fail_all(self, failure: str, detail: str) -> list[Event]:
        out: list[Event] = []
        for direction, request_id in list(self.session.pending):
            if direction is C2S:
                out += self._fail(request_id, failure, detail)
        return out

    def _stream_ended(self, stream: str, detail: str, last_event_id: str | None = None, why: str | None = None) -> list[Event]:
        out: list[Event] = [StreamEnded(stream, why or detail, last_event_id)]
        if stream == "stdio":  # the session lived on the process: it is gone with its stdout
            out += self._lose(Trigger.STDOUT_CLOSED, why or detail, calls=detail)
        elif stream == "legacy":  # the session lived on its one stream
            out += self._lose(Trigger.STREAM_ENDED, detail)
        return out

    def _lose(self, cause: Trigger, detail: str, failure: str | None = None, *, calls: str | None = None) -> list[Event]:
        """The one place a session is lost: LOST for `cause`, and every request in flight fails with
        the cause's class (`failure` when given), as `calls` says.

        `SessionLost` says so once, and once more only when a later cause takes the carrier (the
        process, the stream) that the first left standing: then nothing more can be sent either.
        """
        first, gone = self.session.ending, LOSSES[cause].carrier_gone
        self.session.lose(cause, detail)
        news = first is None or (gone and not self._carrier_gone and first.cause is not Trigger.CLOSE)
        self._carrier_gone = self._carrier_gone or gone
        out: list[Event] = [SessionLost(detail, cause)] if news else []
        return out + self._fail_all(failure or LOSSES[cause].failure, calls or detail)

    def _forget_token(self, request_id: Any) -> None:
        if self._tokens:
            for token in [t for t, rid in self._tokens.items() if rid == request_id]:
                del self._tokens[token]


class StdoutReader:
    """Reads what the server writes on stdout (stdio): lines of JSON-RPC."""

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self._framer = LineFramer()

    def feed(self, chunk: bytes, ts: float = 0.0, *, why: str | None = None) -> list[Event]:
        """What `chunk` completes; `b""` at stdout's end (the process exited or closed it).

        `why`: at the end, what the shell knows of it (the exit status), for `StreamEnded` and
        `SessionLost` to say; the requests in flight fail as their stream closed.
        """
        conn = self.conn
        out: list[Event] = []
        for line in self._framer.lines(chunk):  # a whole line comes as bytes: no object per line
            if type(line) is LineTooLong:
                out.append(Garbled(f"the server wrote a line of {line.size} bytes", line.head))
                continue
            if type(line) is not bytes:
                line = line.data  # the last line, cut off by the end of stdout
            if line and not line.isspace():
                conn._carried_text(line, "stdio", None, ts, out)
        if not chunk:
            out += conn._stream_ended("stdio", "the server process closed its stdout", why=why)
        return out


@dataclass(eq=False)
class AnswerReader:
    """Reads the body of one HTTP answer: a POST's JSON or SSE answer, or the `GET` stream.

    `answered` turns true once the request's answer has come: the request is
    complete then, whatever the stream does afterwards.
    """

    conn: ClientConnection
    answer: PostAnswer
    request_id: Any
    via_stream: str
    _: KW_ONLY
    stream: str | None = None
    answered: bool = field(default=False, init=False)
    first_event: float | None = field(default=None, init=False)  # when the first SSE event came (time to first event)

    @property
    def status(self) -> int:
        return self.answer.status

    @property
    def size(self) -> int:
        return self.answer.size

    def feed(self, chunk: bytes, ts: float = 0.0) -> list[Event]:
        """What `chunk` completes; `b""` marks the body's end."""
        answer, conn = self.answer, self.conn
        out: list[Event] = []
        for item in answer.feed(chunk):
            if type(item) is Carried:
                if item.event_id is not None:
                    if item.event_id in conn._event_ids:
                        conn.replayed += 1
                    conn._event_ids.add(item.event_id)
                via = self.via_stream if item.via == "sse" else item.via
                conn._incoming(item.message, via, self.request_id, ts, out, answer.status)
            elif not self.answered:
                out += conn._problem(item, self.request_id, answer.status, answer.last_event_id, answer)
        if self.first_event is None and answer.events:
            self.first_event = ts
        if self.stream == "get" and answer.last_event_id:
            conn._last_event_id = answer.last_event_id
        if self.stream == "resume" and not chunk:
            return out + [StreamEnded("resume", f"the resumed stream ended (HTTP {answer.status})", answer.last_event_id)]
        if not self.answered and answer.answer is not None:
            self.answered = True
        if not chunk and self.stream == "get":
            out += conn._stream_ended("get", f"the GET stream ended (HTTP {answer.status})", answer.last_event_id)
        return out


class LegacyReader:
    """Reads the legacy `GET /sse` stream: the endpoint first, then every server message."""

    def __init__(self, conn: ClientConnection, status: int, content_type: str | None, challenge: Challenge | None = None) -> None:
        self.conn = conn
        self.status = status
        self.content_type = content_type
        self.challenge = challenge
        self._stream = LegacyStream(conn.url or "")

    def refused(self) -> str | None:
        """Why the stream's answer is not a stream, or None."""
        if self.status != 200:
            named = f" ({self.challenge.summary()})" if self.challenge is not None else ""
            return f"GET answered HTTP {self.status}{named}"
        if not is_event_stream(self.content_type):
            return f"GET answered {self.content_type!r}, not an SSE stream"
        return None

    def feed(self, chunk: bytes, ts: float = 0.0) -> list[Event]:
        conn = self.conn
        out: list[Event] = []
        for item in self._stream.feed(chunk):
            if type(item) is Carried:
                conn._incoming(item.message, "stream", None, ts, out)
            elif type(item) is EndpointUrl:
                conn.endpoint = item.url
                conn.session_id = legacy_session_key(item.url)
                out.append(EndpointReady(item.url, conn.session_id))
            elif conn.endpoint is None:  # an endpoint we must not use: the session cannot start
                out.append(Garbled(item.detail, b""))
                out += conn._lose(Trigger.ENDPOINT_REFUSED, item.detail)
            else:
                out.append(Garbled(item.detail, b""))
        if not chunk:
            out += conn._stream_ended("legacy", "the server closed the SSE stream")
        return out


def _challenge(status: int, authenticate: str | None) -> Challenge | None:
    """The challenge of a 401 or 403 answer, read; None for other statuses (a 200 need not be read)."""
    return bearer_challenge(authenticate) if status in (401, 403) and authenticate else None


class Recent:
    """The keys added lately, in bounded memory: at least the last `REMEMBERED`, at most twice that.

    Two generations of sets: when the new one is full it becomes the old one. Adding and asking
    cost O(1), unlike dropping the oldest key of an ordered dict one at a time.
    """

    __slots__ = ("_new", "_old")

    def __init__(self) -> None:
        self._new: set = set()
        self._old: set = set()

    def add(self, key: Any) -> None:
        self._new.add(key)
        if len(self._new) >= REMEMBERED:
            self._old, self._new = self._new, set()

    def __contains__(self, key: Any) -> bool:
        return key in self._new or key in self._old


__all__ = [
    "STDOUT", "Answered", "AnswerReader", "Channel", "ClientConnection", "EndpointReady", "Event", "Failed", "Garbled",
    "GetHead", "LegacyHead", "LegacyReader", "Outgoing", "PostHead", "Pushed", "ServerRequest", "SessionLost", "Stdout",
    "StdoutReader", "StreamEnded", "Unmatched", "initialize_request", "initialized_notification", "notification",
]
