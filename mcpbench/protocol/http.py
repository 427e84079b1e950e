"""HTTP rules of both MCP HTTP transports, as pure functions, and the reading of a POST's answer.

Streamable HTTP (2025-03-26 on) and legacy HTTP+SSE (2024-11-05). The recorder,
the replayer and the load users all build and read HTTP through these, so a
rule lives in one place.
"""

from dataclasses import dataclass

from mcpbench.protocol import uri
from mcpbench.protocol.auth import Challenge
from mcpbench.protocol.errors import RemoteProtocolError
from mcpbench.protocol.jsonrpc import Batch, ErrorResponse, InvalidMessage, Message, MessageId, Request, Response, decode
# What a body is (its media type, its content coding) is read in `media.py`; imported here for
# the callers that take it with the other HTTP rules.
from mcpbench.protocol.media import EVENT_STREAM, JSON, is_event_stream, is_json, media_type, stream_decoder  # noqa: F401
from mcpbench.protocol.observer import EndpointEvent
from mcpbench.protocol.observer import Observed, SseObserver, Violation
from mcpbench.protocol.rules import applies
from mcpbench.protocol.sse import SseEvent, SseParser, SseTruncated
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.protocol.versions import NAMED_METHODS, header_name_key, rules

# Header names, lower case: HTTP header names are case-insensitive and every
# HTTP library here hands them over in lower case.
SESSION_ID = "mcp-session-id"
PROTOCOL_VERSION = "mcp-protocol-version"
METHOD = "mcp-method"
NAME = "mcp-name"
LAST_EVENT_ID = "last-event-id"
# Not MCP: set by the lab's balancers (mcpbench's addon, HAProxy) to name the instance that served a request.
INSTANCE = "x-mcpbench-instance"
# RFC 9110 §11.6: the challenge of a 401 (and of a 403 for a token without the scope it needs).
AUTHENTICATE = "www-authenticate"
AUTHORIZATION = "authorization"

# Streamable HTTP, "Sending Messages to the Server": the client MUST list both.
POST_ACCEPT = "application/json, text/event-stream"
GET_ACCEPT = "text/event-stream"

# Keep-alive: a connection kept for the next request (by a client, or by a proxy towards its
# upstream) is not used again once it has been idle this long. A server closes an idle connection
# on a timer of its own (uvicorn, Node, Apache and hypercorn after 5 s, gunicorn after 2 s), and a
# request written as that close is under way gets no answer, with no way to know whether the server
# read it. Checking the idle socket first (readable: the server's FIN is in) sees a close that is
# done, not one under way; below the usual timers none is (HAProxy's and Node agents' answer too).
KEEP_ALIVE_EXPIRY = 1.0

# Requests that change nothing on the server, by the protocol's definition: queries and the
# liveness check. Asking one twice asks the same question twice.
QUERY_METHODS = frozenset({
    "ping", "server/discover", "tools/list", "prompts/list", "prompts/get", "resources/list",
    "resources/templates/list", "resources/read", "completion/complete", "tasks/get", "tasks/list",
})


def may_send_again(message: Message) -> bool:
    """Whether a POST of `message` whose connection closed before any byte of an answer came back
    may go once more, on another connection, without the caller being told.

    The rule: the request may have reached the server (a close is not a refusal), so it goes again
    only when running it twice does no more than running it once: a query (`QUERY_METHODS`; RFC
    9110 §9.2.2 lets a client retry what is idempotent). Anything else (a `tools/call`, the
    handshake, a notification) fails, saying it may have run; a reconnect policy that names the
    tool idempotent may send it again, and a reply to a server's request goes again from the
    client that answers (the server drops a second answer to the same id).
    """
    return isinstance(message, Request) and message.method in QUERY_METHODS
def post_headers(message: Message, *, version: str | None, session_id: str | None = None) -> dict[str, str]:
    """The MCP headers of a Streamable HTTP POST carrying `message`.

    `version` is the negotiated protocol version (None before `initialize` has
    been answered: the version header is sent from then on, 2025-06-18 on).
    """
    headers = {"content-type": JSON, "accept": POST_ACCEPT}
    if session_id:
        headers[SESSION_ID] = session_id
    known = rules(version)
    if known is not None and known.protocol_version_header:
        headers[PROTOCOL_VERSION] = version
    if known is not None and known.method_headers and (method := getattr(message, "method", None)):
        headers[METHOD] = method
        key = header_name_key(method)
        if key and isinstance(message, Request) and message.params and isinstance(message.params.get(key), str):
            headers[NAME] = message.params[key]
    return headers


def resolve_endpoint(stream_url: str, data: str) -> str:
    """The absolute POST URL named by a legacy `endpoint` event.

    2024-11-05: the event's data is a URI, relative or absolute; mcpbench treats
    it as opaque (the session parameter may be `sessionId`, `session_id`, …).
    """
    return uri.join(stream_url, data.strip())


def same_origin(a: str, b: str) -> bool:
    pa, pb = uri.split(a), uri.split(b)
    return (pa.scheme, pa.netloc) == (pb.scheme, pb.netloc)


class Failure:
    """Failure classes shared by the load runner, the replayer and the lab."""

    SESSION_NOT_FOUND = "session-not-found"
    ANSWER_LOST = "answer-lost/timeout"
    STREAM_CLOSED = "stream-closed"
    HTTP_4XX = "http-4xx"
    HTTP_5XX = "http-5xx"
    JSONRPC_ERROR = "jsonrpc-error"
    TOOL_ERROR = "tool-error"
    CONNECT = "connect-failed"
    NOT_MCP = "not-mcp"  # a success status whose body is no JSON-RPC at all (an HTML page, say)
    AUTH_REQUIRED = "auth-required"  # 401: no credentials, or ones the server no longer takes
    AUTH_FORBIDDEN = "auth-forbidden"  # 403 with a Bearer challenge: the token lacks a scope (insufficient_scope)
    AUTH_TOKEN_FAILED = "auth-token-failed"  # the token endpoint refused, or could not be asked
    # A whole operation of the newest protocol (`protocol/operation.py`, `protocol/listen.py`):
    INPUT_ROUNDS_EXCEEDED = "input-rounds-exceeded"  # the server kept asking for input past the round bound
    INPUT_UNANSWERED = "input-unanswered"  # it asked for input the client has no answer for (or no request)
    STATE_REJECTED = "state-rejected"  # a retry's echoed requestState was refused
    TASK_FAILED = "task-failed"
    TASK_CANCELLED = "task-cancelled"
    TASK_EXPIRED = "task-expired"  # its ttl passed unfinished (a poll refused after it: the server let it go)
    TASK_NOT_FOUND = "task-not-found"  # a poll or update refused within the ttl: the server does not know the
    # task (-32602; a task created on another instance, a per-process store behind a round-robin balancer)
    LISTEN_DROPPED = "listen-dropped"  # a subscriptions/listen stream ended, unacknowledged or cut


# The failure classes of authentication (`auth-*`): a sample of one carries the challenge.
AUTH_FAILURES = frozenset({Failure.AUTH_REQUIRED, Failure.AUTH_FORBIDDEN, Failure.AUTH_TOKEN_FAILED})


def classify_status(status: int, *, has_session: bool, body: bytes = b"", challenge: Challenge | None = None) -> str | None:
    """The failure class of an HTTP status, or None for success.

    A 404 on a request that carried a session id means the session is gone
    (Streamable HTTP: "the client MUST start a new session"), whatever its body
    (a JSON-RPC error, or nothing). Some servers answer an unknown session with
    400 instead ("Bad Request: No valid session ID provided"): a 400 whose body
    names the session counts as the same. A 401 asks for authentication (RFC 9110
    §15.5.2); a 403 is about authorization only when it carries a Bearer challenge
    (RFC 6750 §3.1 `insufficient_scope`): a Host or Origin refusal is a plain 403.
    """
    if status < 400:
        return None
    if has_session and (status == 404 or (status == 400 and b"session" in body[:MAX_SESSION_TEXT].lower())):
        return Failure.SESSION_NOT_FOUND
    if status == 401:
        return Failure.AUTH_REQUIRED
    if status == 403 and challenge is not None and challenge.scheme == "bearer":
        return Failure.AUTH_FORBIDDEN
    return Failure.HTTP_4XX if status < 500 else Failure.HTTP_5XX


# Of a 400's body, this much is searched for the word "session": error texts are short.
MAX_SESSION_TEXT = 512


def legacy_session_key(endpoint: str) -> str:
    """The session named by a legacy `endpoint` event's data (an opaque URI).

    `/messages/?session_id=ab12` -> `ab12` (any parameter name); a query with several parameters ->
    the whole query; no query -> the whole URI.
    """
    endpoint = endpoint.strip()
    query = uri.split(endpoint).query
    if not query:
        return endpoint
    pairs = uri.query_pairs(query)
    if len(pairs) == 1 and pairs[0][1]:
        return pairs[0][1]
    return query


def method_header_problems(message: Message, headers, *, version: str | None, transport: str = STREAMABLE_HTTP) -> list[tuple[str, str]]:
    """Where a POST's `Mcp-Method` / `Mcp-Name` headers disagree with its body.

    2026-07-28 (Streamable HTTP, "Request headers"): every POST carries
    `Mcp-Method`, and `Mcp-Name` for the methods in `NAMED_METHODS`; both must
    equal the body. Headers sent in an older version are checked for equality
    only; a legacy HTTP+SSE POST (`transport` "sse") has no such rules, whatever
    its version (`rules.RULES` says where each holds). `headers` is any mapping
    whose `.get` is case-insensitive or keyed by lower-case names; `version` is
    the request's `_meta` version, else its `MCP-Protocol-Version` header.

    Returns:
        `(code, detail)` pairs: `missing-method-header`, `method-header-mismatch`,
        `missing-name-header`, `name-header-mismatch`; empty for answers and batches.
    """
    method = getattr(message, "method", None)
    if method is None:
        return []
    problems: list[tuple[str, str]] = []
    known = rules(version) is not None  # a missing header is a fault only in a version that requires it
    sent = headers.get(METHOD)
    if sent is None:
        if known and applies("missing-method-header", transport, version):
            problems.append(("missing-method-header", f"{method} without an Mcp-Method header in {version}"))
    elif sent != method and applies("method-header-mismatch", transport, version):
        problems.append(("method-header-mismatch", f"Mcp-Method {sent!r} but the body's method is {method!r}"))
    key = NAMED_METHODS.get(method)
    if key is not None and isinstance(message, Request):
        target = (message.params or {}).get(key)
        name = headers.get(NAME)
        if name is None:
            if known and applies("missing-name-header", transport, version):
                problems.append(("missing-name-header", f"{method} without an Mcp-Name header (body names {target!r})"))
        elif name != target and applies("name-header-mismatch", transport, version):
            problems.append(("name-header-mismatch", f"Mcp-Name {name!r} but the body names {target!r}"))
    return problems


# --- the answer to a POST --------------------------------------------------------------------


# The `warning` an error answer under a foreign id gets (docs/trace-format.md): the recorders and
# `inspect` say what it is, and pair it as the POST does; it is no violation.
FOREIGN_ANSWER_ID = "foreign-answer-id"


def foreign_id_warning(answer_id: MessageId, status: int | None, request: str, *, paired: bool = True) -> str:
    """What a `FOREIGN_ANSWER_ID` warning says: the error under id `answer_id` answered the POST of
    `request` (its method and id) and is paired with it; not `paired`: it refused `request` (a GET,
    a DELETE), which carried no JSON-RPC request to answer."""
    head = f"HTTP {status}" if status is not None else "the answer"
    if not paired:
        return f"{head} to {request} is a JSON-RPC error with id {answer_id!r}: an answer to no request (the {request} carried none)"
    return (f"{head} to the POST of {request} is a JSON-RPC error with id {answer_id!r}, not the request's "
            "(as SDK 1.x servers answer): paired by its POST")


def pair_with_post(answer: Message, request_id: MessageId | None, status: int | None) -> ErrorResponse | None:
    """An error that answers the POST of request `request_id` under another id, with the request's id.

    Streamable HTTP pairs an answer with the request its POST carried. A server that could not read
    the request answers with a null id; the official Python SDK 1.x answers every request it refuses
    (HTTP 400 "Missing session ID", 404 "Session not found", …) with the id "server-error". Either is
    the answer to that request: None when `answer` needs no pairing (its id is the request's, it is
    no error, or a foreign id came with a success status, which is a mismatch, not a refusal).
    """
    if type(answer) is not ErrorResponse or request_id is None or answer.id == request_id:
        return None
    if answer.id is not None and (status is None or status < 400):
        return None
    return ErrorResponse(id=request_id, code=answer.code, message=answer.message, data=answer.data, _parsed=True)



@dataclass(slots=True)
class Carried:
    """One JSON-RPC message an HTTP answer carried (a batch's items come one by one)."""

    message: Message
    raw: bytes  # the JSON text it came in: an SSE event's data or the whole body
    via: str  # "sse" or "json"
    event_id: str | None = None  # the SSE event's id, when it had one (resumable streams)


@dataclass(slots=True)
class Problem:
    """Something wrong with an HTTP answer: a `Failure` class, what happened, and the JSON-RPC error
    the refusing answer's body carried (a message the server sent, which a ledger counts)."""

    failure: str
    detail: str
    message: ErrorResponse | None = None


class PostAnswer:
    """What the HTTP answer to one POSTed message carries, read as it arrives (no I/O).

    Streamable HTTP answers a POST with a JSON body, an SSE stream (with
    notifications and server requests before the answer), or a bare status
    (202 for a notification). The replayer and the load users (and the lab, to
    come) read answers through this, so "what did the server say" has one meaning.

        answer = PostAnswer(request_id, status, content_type, has_session=...)
        for chunk in body: items = answer.feed(chunk)    # Carried and Problem
        items = answer.feed(b"")                         # the body's end

    `failure` is the HTTP status's failure class (None below 400): a load user
    counts it whatever the body says, a replayer compares the body's answer.
    `answer` is the response to `request_id`, once it has come; an error
    response with a null id (the server could not read the request) counts as
    that answer. `challenge` is the answer's `WWW-Authenticate` challenge, read.
    """

    # Of an error body, at most this much text goes into a problem's detail.
    DETAIL_CHARS = 200

    def __init__(self, request_id: MessageId | None, status: int, content_type: str | None, *, has_session: bool,
                 challenge: Challenge | None = None, resumed: bool = False) -> None:
        self.request_id = request_id
        self.resumed = resumed  # a stream reopened with `Last-Event-ID`: its cursor starts where that one was
        self.status = status
        self.has_session = has_session
        self.challenge = challenge
        self.failure = classify_status(status, has_session=has_session, challenge=challenge)
        kind = media_type(content_type)
        self.streamed = status < 300 and kind == EVENT_STREAM
        self.json_body = kind == JSON or kind.endswith("+json")
        self.content_type = content_type
        self.answer: Response | ErrorResponse | None = None
        self.foreign_id: MessageId | None = None  # the id an error answer came with instead of the request's
        self.events = 0  # SSE events seen, of any type
        self.first: SseEvent | None = None  # the stream's first event (2025-11-25 priming: an id, empty data)
        self.size = 0  # body bytes
        self._cursor: str | None = None  # where `Last-Event-ID` resumes (`last_event_id`)
        self._parser = SseParser() if self.streamed else None
        self._body = bytearray() if not self.streamed else None

    def feed(self, chunk: bytes) -> list[Carried | Problem]:
        """The messages and problems `chunk` completes; `b""` marks the body's end."""
        self.size += len(chunk)
        if self._parser is None:
            if chunk:
                self._body += chunk
                return []
            return self._body_end(bytes(self._body))
        out: list[Carried | Problem] = []
        for event in self._parser.feed(chunk):
            if type(event) is SseEvent:
                self.events += 1
                self.first = self.first or event
                if event.id is not None and (event.data or (self._cursor is None and not self.resumed)):
                    self._cursor = event.id
                if event.data and event.type == "message":
                    self._carry(event.data.encode(), "sse", out, event.id)
            elif type(event) is SseTruncated:
                out.append(Problem(Failure.STREAM_CLOSED, "the answer stream ended inside an SSE event"))
        if not chunk and self.answer is None and self.request_id is not None:
            out.append(Problem(Failure.STREAM_CLOSED, "the answer stream closed without an answer"))
        return out

    @property
    def last_event_id(self) -> str | None:
        """Where `Last-Event-ID` resumes this stream: the id of its last event that carried data; the id
        of an event with none (a 2025-11-25 priming event) only while nothing came before it on a stream
        that was not itself resumed. None: nothing to resume from here (a resumed stream: resume from
        where it was resumed from).

        A server mints a priming event when it reopens a stream, after replaying what the client
        missed, and the official SDK stores what the request sends meanwhile (its answer, say) before
        that priming event but sends it on no stream (its replay-to-live window). Resuming from the
        priming event's id would skip that answer for good; resuming from the last message's id
        replays it, and nothing the client already has."""
        return self._cursor or None

    @property
    def retry_ms(self) -> int | None:
        """The stream's reconnection time (its last `retry:` field, ms), once it set one."""
        return self._parser.retry_ms if self._parser is not None else None

    def _body_end(self, data: bytes) -> list[Carried | Problem]:
        out: list[Carried | Problem] = []
        if self.status == 400:  # the body tells a lost session from a plain bad request
            self.failure = classify_status(self.status, has_session=self.has_session, body=data)
        if data.strip() and (self.json_body or data.lstrip()[:1] in (b"{", b"[")):
            self._carry(data, "json", out)
        if self.failure == Failure.SESSION_NOT_FOUND:
            self.answer = None  # whatever the body says, the session is gone: that is the outcome
        elif self.answer is not None:
            return out
        if self.failure in AUTH_FAILURES:  # the challenge says more than any body: what to authenticate with
            named = self.challenge.summary() if self.challenge is not None else "no WWW-Authenticate challenge"
            return [Problem(self.failure, f"HTTP {self.status} ({named})")]
        if self.failure:  # one problem: the status's class, explained by the body (a JSON-RPC error's code and text)
            error = next((i.message for i in out if type(i) is Carried and type(i.message) is ErrorResponse), None)
            if error is not None:
                text = f"JSON-RPC {error.code} {error.message}"[: self.DETAIL_CHARS]
            else:
                text = data.decode("utf-8", "replace").strip().replace("\n", " ")[: self.DETAIL_CHARS]
            return [Problem(self.failure, f"HTTP {self.status}{': ' + text if text else ''}", error)]
        if any(type(item) is Problem for item in out):
            return out
        if self.request_id is not None and data.strip():
            text = data.decode("utf-8", "replace").strip().replace("\n", " ")[: self.DETAIL_CHARS]
            out.append(Problem(Failure.NOT_MCP, f"HTTP {self.status} {self.content_type!r} is not an MCP answer: {text}"))
        elif self.request_id is not None:
            out.append(Problem(Failure.ANSWER_LOST, f"HTTP {self.status} without an answer"))
        return out

    def _carry(self, data: bytes, via: str, out: list[Carried | Problem], event_id: str | None = None) -> None:
        items = _server_messages(data)
        if type(items) is Problem:
            out.append(items)
            return
        for item in items:
            if self.answer is None and (paired := pair_with_post(item, self.request_id, self.status)) is not None:
                # An error about the request whose id is none or another (`pair_with_post`): it is this one's.
                if item.id is not None:
                    self.foreign_id = item.id
                item = paired
            if type(item) in (Response, ErrorResponse) and item.id == self.request_id and self.request_id is not None:
                self.answer = item
            out.append(Carried(item, data, via, event_id))


# --- the legacy server stream ----------------------------------------------------------------


@dataclass(slots=True)
class EndpointUrl:
    """The legacy stream's `endpoint` event: the absolute URL to POST client messages to."""

    url: str


class LegacyStream:
    """The legacy HTTP+SSE server stream (`GET /sse`), read as it arrives (no I/O).

    2024-11-05: the first event, `endpoint`, names where to POST; every server
    message then comes on this stream as a `message` event, answers included.
    Read with the observer (`observer.SseObserver`), as every reader of the stream reads it.

        stream = LegacyStream(url)
        for chunk in body: items = stream.feed(chunk)    # Endpoint, Carried, Problem

    An endpoint on another origin than the stream's is refused (a Problem):
    the client would otherwise post its messages wherever the stream says.

    Raises (from `feed`):
        RemoteProtocolError: an SSE line grew past `sse.MAX_LINE_BYTES`.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.endpoint: str | None = None
        self._observer = SseObserver()

    def feed(self, chunk: bytes) -> list[EndpointUrl | Carried | Problem]:
        """What `chunk` completes; `b""` marks the stream's end."""
        out: list[EndpointUrl | Carried | Problem] = []
        for event in self._observer.feed(chunk):
            if type(event) is Observed:
                out.extend(Carried(item, event.raw, "stream") for item in _each(event.message))
            elif type(event) is EndpointEvent:
                url = resolve_endpoint(self.url, event.data)
                if same_origin(url, self.url):
                    self.endpoint = url
                    out.append(EndpointUrl(url))
                else:
                    out.append(Problem(Failure.CONNECT, f"the endpoint event names another origin: {url}"))
            elif type(event) is Violation:
                if event.code == "sse-line-too-long":
                    raise RemoteProtocolError(event.detail)
                if event.code in ("not-json", "invalid-message"):
                    out.append(Problem(Failure.JSONRPC_ERROR, f"the server sent an invalid message ({event.detail})"))
        return out


def _server_messages(data: bytes) -> tuple[Message, ...] | Problem:
    """The messages in one JSON text the server sent (a batch's items one by one), or why there are none."""
    try:
        message = decode(data)
    except InvalidMessage as exc:
        return Problem(Failure.JSONRPC_ERROR, f"the server sent an invalid message ({exc.reason})")
    return _each(message)


def _each(message: Message) -> tuple[Message, ...]:
    """A batch's items one by one, or the message alone."""
    return message.items if type(message) is Batch else (message,)
