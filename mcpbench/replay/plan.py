"""A trace, read into what a replay needs: per session, the client's steps in order.

A recorded session becomes a `SessionPlan`:

- `calls`: every client→server request with the answer it got, its latency,
  the server notifications that belonged to it (by progress token, or by the
  HTTP response stream that carried them) and the server→client requests
  asked while it ran;
- `steps`: the client's requests and notifications in recorded order. Each
  step lists the calls whose answers had arrived, in the recording, before it
  was sent (`wait_for`): the replayer waits for exactly those, so requests the
  recording shows in flight together are sent together again;
- `asks`: the server→client requests (sampling, roots, elicitation) with the
  client's recorded answers, and the 2026-07-28 `input_required` rounds with
  the `inputResponses` the client sent back, so a replay can answer either
  form from the recording.

Client answers to server requests are not steps: the replayer sends them
when the live server asks. `listens` says the server spoke outside any call
(a Streamable HTTP GET stream was recorded, or a server message came while no
request was in flight): a replay over Streamable HTTP then opens the GET stream.
"""

import os
from collections.abc import Iterable
from urllib.parse import urlsplit
from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import ReplayError
from mcpbench.protocol.http import AUTHORIZATION, PROTOCOL_VERSION, pair_with_post
from mcpbench.protocol.jsonrpc import Batch, ErrorResponse, Notification, Request, Response
from mcpbench.protocol.server import LOOPBACK_BINDS, HostCheck
from mcpbench.protocol.versions import (
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    Era,
    asks_for_input,
    call_name,
    era_of,
    meta_version,
    progress_token,
)
from mcpbench.trace.format import Kind
from mcpbench.trace.reader import TraceReader, collector_paused

NO_SESSION = "-"

# Event fields that can name the HTTP exchange a message travelled in (`_stream_key`).
STREAM_FIELDS = frozenset({"stream", "flow", "exchange", "http"})


def answer_obj(answer: Response | ErrorResponse | None) -> dict | None:
    """What is compared of an answer: `{"result": …}` or `{"error": …}`."""
    if answer is None:
        return None
    if isinstance(answer, Response):
        return {"result": answer.result}
    error: dict[str, Any] = {"code": answer.code, "message": answer.message}
    if answer.data is not None:
        error["data"] = answer.data
    return {"error": error}


def is_input_required(answer: Response | ErrorResponse | None) -> bool:
    """Whether `answer` asks the client for input (2026-07-28's `input_required` result)."""
    return isinstance(answer, Response) and asks_for_input(answer.result)


@dataclass(slots=True)
class Ask:
    """A question the server put to the client, and the client's recorded answer.

    `answer` is the JSON-RPC answer object (`{"result": …}` or `{"error": …}`).
    """

    method: str
    params: dict | None
    answer: dict | None = None
    recorded_id: Any = None


@dataclass(slots=True)
class RecordedCall:
    """One client→server request of the recording and what came back."""

    index: int  # position among the session's calls
    request: Request
    sent: float
    answer: Response | ErrorResponse | None = None
    answered: float | None = None
    notifications: list[dict] = field(default_factory=list)  # {"method", "params"} in arrival order
    asks: list[Ask] = field(default_factory=list)
    # The two above in arrival order, with their times: (ts, {"method", "params"}) or (ts, Ask).
    server: list[tuple[float, dict | Ask]] = field(default_factory=list)
    via: str | None = None  # how the answer came: "stdio", "json", "sse"
    status: int | None = None  # the HTTP status of its answer (an error status with no answer says how it failed)
    retry_of: int | None = None  # the input_required call this request answers (2026-07-28)
    retried: bool = False  # a later call answers this call's input_required result
    host: str | None = None  # the `Host` it was recorded with (HTTP)
    # Its recorded `Host` when that was deliberately foreign to the upstream (`mark_foreign_hosts`).
    foreign_host: str | None = None

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def name(self) -> str | None:
        return call_name(self.request.method, self.request.params)

    @property
    def label(self) -> str:
        return f"{self.method} {self.name}" if self.name else self.method

    @property
    def latency(self) -> float | None:
        return None if self.answered is None else max(0.0, self.answered - self.sent)


@dataclass(slots=True)
class Step:
    """One client message to send, in recorded order.

    `wait_for` holds the indexes of the calls whose answers the recording shows
    before this message left: they must be answered before it is sent.
    """

    message: Request | Notification
    ts: float
    wait_for: tuple[int, ...] = ()
    call: RecordedCall | None = None  # the call a request step starts


@dataclass(slots=True)
class SessionPlan:
    id: str
    transport: str | None
    calls: list[RecordedCall] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    asks: list[Ask] = field(default_factory=list)
    notifications: list[dict] = field(default_factory=list)  # server notifications no call claimed
    final_wait: tuple[int, ...] = ()
    version: str | None = None  # the protocol version the recording spoke
    client_capabilities: dict | None = None
    client_info: dict | None = None
    server_capabilities: dict | None = None
    notes: list[str] = field(default_factory=list)
    listens: bool = False  # the server sent outside any call: open the optional GET stream
    handshake: bool = False  # the recording has its `initialize` (sessionless HTTP traffic may have none)

    @property
    def era(self) -> Era | None:
        return era_of(self.version)


@dataclass(slots=True)
class TracePlan:
    path: str
    transport: str | None
    header: dict | None
    sessions: list[SessionPlan]
    torn: str | None = None
    bytes_read: int = 0
    credentials: bool = False  # a recorded request carried Authorization (hashed in the trace: not replayable)


class _Builder:
    """Builds one SessionPlan from its events, in file order."""

    def __init__(self, session_id: str, transport: str | None) -> None:
        self.plan = SessionPlan(session_id, transport)
        self.open_calls: dict[Any, RecordedCall] = {}  # recorded request id -> call not yet answered
        self.open_asks: dict[Any, Ask] = {}  # recorded server request id -> ask not yet answered
        self.answered: list[int] = []  # answered since the last client step
        self.tokens: dict[Any, RecordedCall] = {}  # progress token -> call
        self.streams: dict[Any, RecordedCall] = {}  # HTTP stream key -> call

    def message(self, direction: str, obj: Any, ts: float, event: dict) -> None:
        try:
            message = jsonrpc.from_obj(obj)
        except jsonrpc.InvalidMessage as exc:
            self.plan.notes.append(f"skipped an invalid {direction} message: {exc.reason}")
            return
        handle = self._client if direction == "c2s" else self._server if direction == "s2c" else None
        if handle is None:
            return
        if type(message) is Batch:
            for item in message.items:
                handle(item, ts, event)
        else:
            handle(message, ts, event)

    def _client(self, message: jsonrpc.Message, ts: float, event: dict) -> None:
        plan = self.plan
        if isinstance(message, Request):
            call = RecordedCall(len(plan.calls), message, ts, host=_host(event))
            plan.calls.append(call)
            self.open_calls[message.id] = call
            token = progress_token(message.params)
            if token is not None:
                self.tokens[token] = call
            if (key := _stream_key(event)) is not None:
                self.streams[key] = call
            if plan.version is None or message.method == "initialize" or (
                message.params and INPUT_RESPONSES in message.params
            ):
                self._learn_client(message, event)  # otherwise there is nothing to learn
            plan.steps.append(Step(message, ts, tuple(self.answered), call))
            self.answered.clear()
        elif isinstance(message, Notification):
            plan.steps.append(Step(message, ts, tuple(self.answered)))
            self.answered.clear()
        else:  # the client answering a server request
            ask = self.open_asks.pop(message.id, None)
            if ask is not None:
                ask.answer = answer_obj(message)

    def _learn_client(self, request: Request, event: dict) -> None:
        plan, params = self.plan, request.params or {}
        if request.method == "initialize":
            plan.version = params.get("protocolVersion") if isinstance(params.get("protocolVersion"), str) else None
            plan.client_capabilities = params.get("capabilities")
            plan.client_info = params.get("clientInfo")
            plan.handshake = True
        elif plan.version is None and (version := meta_version(params)) is not None:
            plan.version = version
            meta = params.get("_meta") or {}
            plan.client_capabilities = meta.get(META_CLIENT_CAPABILITIES)
            plan.client_info = meta.get(META_CLIENT_INFO)
        elif plan.version is None and (version := _header_version(event)) is not None:
            plan.version = version  # sessionless HTTP traffic whose handshake went on another connection
        # A retry carrying inputResponses answers the previous input_required round.
        responses = params.get(INPUT_RESPONSES)
        if isinstance(responses, dict):
            for call in reversed(self.plan.calls[:-1]):
                if call.method == request.method and is_input_required(call.answer):
                    call.retried = True
                    self.plan.calls[-1].retry_of = call.index
                    wanted = call.answer.result.get(INPUT_REQUESTS) or {}
                    for key, asked in wanted.items():
                        if key in responses and isinstance(asked, dict):
                            self.plan.asks.append(
                                Ask(asked.get("method", ""), asked.get("params"), {"result": responses[key]})
                            )
                    break

    def _server(self, message: jsonrpc.Message, ts: float, event: dict) -> None:
        plan = self.plan
        if not isinstance(message, (Response, ErrorResponse)) and (not self.open_calls or _on_get_stream(event)):
            plan.listens = True
        if isinstance(message, Request):
            ask = Ask(message.method, message.params, recorded_id=message.id)
            self.open_asks[message.id] = ask
            plan.asks.append(ask)
            owner = self._owner(event)
            if owner is not None:
                owner.asks.append(ask)
                owner.server.append((ts, ask))
        elif isinstance(message, Notification):
            note = {"method": message.method, "params": message.params}
            token = (message.params or {}).get("progressToken")
            owner = self.tokens.get(token) if token is not None else None
            if owner is None and (key := _stream_key(event)) is not None:
                owner = self.streams.get(key)
            if owner is not None:
                owner.notifications.append(note)
                owner.server.append((ts, note))
            else:
                plan.notifications.append(note)
        else:
            status = _status(event)
            call = self.open_calls.pop(message.id, None)
            if call is None and (carrier := self._carrier(event)) is not None:
                if (paired := pair_with_post(message, carrier.request.id, status)) is not None:
                    call, message = self.open_calls.pop(carrier.request.id), paired  # the POST pairs it
            if call is None:
                if not (isinstance(message, ErrorResponse) and status is not None and status >= 400 and _http_method(event) != "POST"):
                    plan.notes.append(f"an answer to id {message.id!r}, which no recorded request had")
                # else: the refusal of a GET or a DELETE, which carried no request (inspect says so)
                return
            call.answer, call.answered, call.status = message, ts, status
            call.via = _via(event)
            self.answered.append(call.index)
            if call.request.method == "initialize" and isinstance(message, Response) and isinstance(message.result, dict):
                plan.server_capabilities = message.result.get("capabilities")
                if isinstance(message.result.get("protocolVersion"), str):
                    plan.version = message.result["protocolVersion"]

    def _carrier(self, event: dict) -> RecordedCall | None:
        """The call still waiting whose POST the answer of `event` came in, if the recorder says."""
        key = _stream_key(event)
        call = self.streams.get(key) if key is not None else None
        return call if call is not None and call.request.id in self.open_calls and call.answer is None else None

    def http_status(self, event: dict) -> None:
        """An HTTP exchange's end: an error status that carried no answer says how its call failed."""
        status = event.get("status")
        if isinstance(status, int) and status >= 400 and (call := self._carrier(event)) is not None:
            call.status = status
            del self.open_calls[call.request.id]
            self.answered.append(call.index)  # its exchange ended before the next step: it is waited for

    def _owner(self, event: dict) -> RecordedCall | None:
        """The call a server request belongs to: the stream it came on, else the only call in flight."""
        if (key := _stream_key(event)) is not None and key in self.streams:
            return self.streams[key]
        if len(self.open_calls) == 1:
            return next(iter(self.open_calls.values()))
        return None

    def finish(self) -> SessionPlan:
        self.plan.final_wait = tuple(self.answered)
        return self.plan


def _stream_key(event: dict) -> Any:
    """The HTTP exchange a message travelled in, when the recorder says so."""
    if STREAM_FIELDS.isdisjoint(event):  # stdio events: one C-level pass over the keys
        return None
    for key in ("stream", "flow", "exchange"):
        value = event.get(key)
        if isinstance(value, (str, int)):
            return value
    http = event.get("http")
    if isinstance(http, dict):
        for key in ("stream", "flow", "id"):
            if isinstance(http.get(key), (str, int)):
                return http[key]
    return None


def _status(event: dict) -> int | None:
    """The HTTP status of the answer a message came in, where the recorder says."""
    http = event.get("http")
    status = http.get("status") if isinstance(http, dict) else None
    return status if isinstance(status, int) else None


def _http_method(event: dict) -> str | None:
    """The HTTP method of the exchange a message travelled in, where the recorder says."""
    http = event.get("http")
    return http.get("method") if isinstance(http, dict) else None


def _host(event: dict) -> str | None:
    """The `Host` an HTTP request carried, if the recorder kept it."""
    http = event.get("http")
    headers = http.get("headers") if isinstance(http, dict) else None
    host = headers.get("host") if isinstance(headers, dict) else None
    return host if isinstance(host, str) else None


def mark_foreign_hosts(plans: list[SessionPlan], upstream: str | None) -> None:
    """Mark each call whose recorded `Host` was deliberately foreign to the upstream: a DNS-rebinding
    check (a client sending an attacker's name), which the upstream refused when recorded.

    Foreign: refused (an HTTP error without an answer, or an error answer), with a `Host` no
    accepted request of the trace carried, and, for a loopback upstream, one its own rebinding
    check (the SDK's, `HostCheck.for_bind`) refuses. A recorder's address that every request
    carried (a remote upstream recorded through `record`) is never foreign: requests were accepted with it.
    """
    calls = [call for plan in plans for call in plan.calls if call.host is not None]
    accepted = {call.host for call in calls if isinstance(call.answer, Response)}
    bind = urlsplit(upstream).hostname if upstream else None
    check = HostCheck.for_bind(bind) if bind in LOOPBACK_BINDS else None
    for call in calls:
        refused = isinstance(call.answer, ErrorResponse) or (call.answer is None and call.status is not None)
        if refused and call.host not in accepted and (check is None or check.refusal({"host": call.host}) is not None):
            call.foreign_host = call.host


def _header_version(event: dict) -> str | None:
    """The `MCP-Protocol-Version` an HTTP request carried, if any."""
    http = event.get("http")
    headers = http.get("headers") if isinstance(http, dict) else None
    version = headers.get(PROTOCOL_VERSION) if isinstance(headers, dict) else None
    return version if isinstance(version, str) else None


def _on_get_stream(event: dict) -> bool:
    """Whether a server message came on a Streamable HTTP GET stream (HTTP recordings say so)."""
    http = event.get("http")
    return isinstance(http, dict) and http.get("method") == "GET" and event.get("transport") != "sse"


def _via(event: dict) -> str | None:
    """How an answer was carried: "sse" or "json" for HTTP traces, "stdio" otherwise."""
    if event.get("transport") == "stdio":
        return "stdio"
    for key in ("via", "framing"):
        if event.get(key) in ("sse", "json"):
            return event[key]
    if event.get("sse") is True or "sse" in event and isinstance(event["sse"], dict):
        return "sse"
    http = event.get("http")
    content_type = event.get("content_type") or (http.get("content_type") if isinstance(http, dict) else None)
    if isinstance(content_type, str):
        return "sse" if "event-stream" in content_type else "json"
    return None


def _session_key(event: dict) -> str:
    sid = event.get("session")
    return NO_SESSION if sid is None else str(sid)


def load(path: str | os.PathLike, *, sessions: Iterable[str] | None = None) -> TracePlan:
    """Read the trace at `path` into per-session plans, in the order sessions first appear.

    Pauses the cyclic garbage collector while it reads (see `trace.reader.collector_paused`).

    Args:
        sessions: keep only these session ids.

    Raises:
        TraceError: the file cannot be read, is empty, or has a newer format.
        ReplayError: the trace holds no client message to replay.
    """
    reader = TraceReader(path)
    builders: dict[str, _Builder] = {}
    listening: set[str] = set()  # sessions with a recorded Streamable HTTP GET stream
    transport = None
    wanted = set(sessions) if sessions else None
    message_kind, trace_kind, stream_kind, http_kind = Kind.MESSAGE, Kind.TRACE, Kind.STREAM, Kind.HTTP
    credentials = False
    with collector_paused():
        for event in reader:
            kind = event.get("kind")
            if kind != message_kind:
                if kind == trace_kind:
                    transport = event.get("transport")
                elif kind == stream_kind and event.get("method") == "GET" and event.get("transport") != "sse":
                    listening.add(_session_key(event))
                elif kind == http_kind:
                    credentials = credentials or AUTHORIZATION in (event.get("request_headers") or ())
                    if (builder := builders.get(_session_key(event))) is not None:
                        builder.http_status(event)
                continue
            sid = _session_key(event)
            if wanted is not None and sid not in wanted:
                continue
            builder = builders.get(sid)
            if builder is None:
                builder = builders[sid] = _Builder(sid, event.get("transport"))
            builder.message(event.get("dir"), event.get("msg"), event.get("ts") or 0.0, event)
    plans = [builder.finish() for builder in builders.values()]
    for plan in plans:
        plan.listens |= plan.id in listening
    header = reader.header
    mark_foreign_hosts(plans, header.get("upstream") if isinstance(header, dict) else None)
    size = os.path.getsize(path) if os.path.exists(path) else 0
    trace = TracePlan(str(path), transport, header, plans, reader.torn, size, credentials)
    if wanted is not None:
        missing = sorted(wanted - {plan.id for plan in plans})
        if missing:
            raise ReplayError(f"{path}: no session {', '.join(missing)} in this trace")
    if not plans:
        raise ReplayError(f"{path}: the trace holds no MCP messages to replay")
    if not any(plan.steps for plan in plans):
        raise ReplayError(f"{path}: the trace holds only server messages: nothing to replay")
    return trace
