"""A trace, read into what a replay needs: per session, the client's steps in order.

The sessions, the pairing of requests with answers, the operations (a 2026-07-28 retry linked to the
round it answers, a server request or notification tied to the request it belongs to) are the trace
model's (`trace/model.py`), as every view's; this keeps the messages themselves, which a replay sends
and compares. One difference, on purpose: the model reads sessionless Streamable HTTP as one
logical stream per version (it may mix clients), a replay sends each recorded connection apart as
the stateless server took it, and an operation's later rounds with its first.

A recorded session becomes a `SessionPlan`:

- `calls`: every client→server request with the answer it got, its latency,
  the server notifications that belonged to it (by progress token, task,
  listen stream, or the HTTP response stream that carried them) and the
  server→client requests asked while it ran;
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

from mcpbench.protocol.errors import ReplayError
from mcpbench.protocol.http import AUTHORIZATION, PROTOCOL_VERSION
from mcpbench.protocol.jsonrpc import Batch, ErrorResponse, Notification, Request, Response
from mcpbench.protocol.server import LOOPBACK_BINDS, HostCheck
from mcpbench.protocol.versions import (
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    LISTEN,
    META_CLIENT_CAPABILITIES,
    Era,
    asks_for_input,
    call_name,
    era_of,
)
from mcpbench.trace.format import Kind
from mcpbench.trace.model import INVALID_MESSAGE, Entry, Rebuild, SessionReport
from mcpbench.trace.model import EventEffect
from mcpbench.trace.reader import TraceReader, collector_paused

NO_SESSION = "-"



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
class SendStep:
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
    steps: list[SendStep] = field(default_factory=list)
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


class _Unit:
    """One SessionPlan being built: a session of the trace model, or one recorded connection of a
    sessionless stream."""

    def __init__(self, key: str, transport: str | None, report: SessionReport) -> None:
        self.plan = SessionPlan(key, transport)
        self.report = report
        self.answered: list[int] = []  # answered since the last client step
        self.open = 0  # its calls not answered yet
        self.header_version: str | None = None  # the first `MCP-Protocol-Version` its requests carried

    def finish(self) -> SessionPlan:
        plan, session = self.plan, self.report.session
        if not self.report.sessionless:
            plan.id = self.report.id  # the model may have renamed it since (a legacy stream's endpoint)
        plan.version = session.version or session.requested_version or self.header_version
        plan.client_capabilities = session.client_capabilities
        if self.report.sessionless:  # one logical stream of many clients: what this one's requests declared
            plan.client_capabilities = next((caps for call in plan.calls if isinstance(caps := _declared(call.request.params), dict)),
                                            plan.client_capabilities)
        plan.client_info = self.report.client
        plan.server_capabilities = session.server_capabilities
        plan.final_wait = tuple(self.answered)
        return plan


class _Planner:
    """The trace model's sessions and operations, as replay plans: one event at a time, each with the
    step the model made of it (`Rebuild.take`). The model pairs, groups and links; this keeps the
    messages themselves (a replay sends and compares them) and the order a replay must keep."""

    def __init__(self) -> None:
        self.units: dict[Any, _Unit] = {}  # by the model's session (id of its report) or the recorded connection
        self.calls: dict[int, tuple[Entry, RecordedCall, _Unit]] = {}  # id of a request's entry -> its call
        self.asks: dict[int, tuple[Entry, Ask]] = {}  # id of a server request's entry -> its ask
        self.listens: list[tuple[Entry, _Unit]] = []  # sessionless listen requests with their plans

    def unit(self, event: dict, report: SessionReport, create: bool) -> "_Unit | None":
        """The plan an event goes to. Sessionless Streamable HTTP is one logical stream in the model, and
        may mix clients: a replay sends each recorded connection apart, as a stateless server took it,
        except while a listen stream is open: a connection that starts then joins the listen's plan,
        so that the replay holds the stream while it sends the requests that change what it tells."""
        key: Any = _session_key(event) if report.sessionless else id(report)
        unit = self.units.get(key)
        if unit is None and create:
            if report.sessionless and (listening := self._listening(report)) is not None:
                unit = self.units[key] = listening
                return unit
            unit = self.units[key] = _Unit(_session_key(event) if report.sessionless else report.id, event.get("transport"), report)
        return unit

    def _listening(self, report: SessionReport) -> "_Unit | None":
        """The plan of a listen stream of this sessionless stream still open, if any."""
        for entry, unit in reversed(self.listens):
            op = entry.op
            if unit.report is report and op is not None and op.stream is not None and op.stream.closed is None and entry.end is None:
                return unit
        return None

    def take(self, event: dict, step: EventEffect) -> None:
        kind = event.get("kind")
        if kind == Kind.MESSAGE:
            self._message(event, step)
        elif kind == Kind.HTTP:
            self._http(event, step)
        elif kind == Kind.STREAM and event.get("method") == "GET" and event.get("transport") != "sse":
            if (unit := self.unit(event, step.session, False)) is not None:
                unit.plan.listens = True  # a Streamable HTTP GET stream was recorded

    def _message(self, event: dict, step: EventEffect) -> None:
        direction, ts = event.get("dir"), event.get("ts") or 0.0
        unit = self.unit(event, step.session, True)
        assert unit is not None
        added = step.added
        if added and added[0].name == INVALID_MESSAGE and added[0].kind == "violation":  # the model could not read it
            unit.plan.notes.append(f"skipped an invalid {direction} message: {added[0].detail}")
            return
        if direction not in ("c2s", "s2c"):
            return
        # The message is valid (the model read it): its items are taken as they are, not parsed again;
        # a client's requests and notifications as the core read them (`step.message`).
        msg = event.get("msg")
        items = msg if type(msg) is list else (msg,)
        # The model's entries of this event's requests and notifications, in the order of the items.
        entries = [e for e in added if e.kind == "request" or e.kind == "notification"] if added else added
        if direction == "c2s":
            parsed = step.message
            spoken = [item for item in (parsed.items if type(parsed) is Batch else (parsed,)) if type(item) is Request or type(item) is Notification]
            for item, entry in zip(spoken, entries):
                self._client(unit, item, entry, ts, event)
        else:
            spoken = [item for item in items if "method" in item]
            for item, entry in zip(spoken, entries):
                self._server(unit, item, entry, ts, event)
        answers = step.answers or []
        for entry, answer in zip(step.answered, answers):
            self._answered(entry, answer, ts, event, step.session)
        if direction == "s2c" and len(items) > len(spoken) + len(answers):
            answered = [item for item in items if "method" not in item]
            refusal = len(items) == 1 and "error" in msg and (status := _status(event)) is not None and status >= 400
            if not (refusal and _http_method(event) != "POST"):
                # (the refusal of a GET or a DELETE carried no request: inspect says so)
                unit.plan.notes.append(f"an answer to id {answered[-1].get('id')!r}, which no recorded request had")

    def _client(self, unit: _Unit, item: Request | Notification, entry: Entry, ts: float, event: dict) -> None:
        if type(item) is Notification:
            unit.plan.steps.append(SendStep(item, ts, tuple(unit.answered)))
            unit.answered.clear()
            return
        op = entry.op
        owner = unit
        earlier = None
        if op is not None and len(op.rounds) > 1 and op.rounds[-1] is entry:  # a retry: its operation's next round
            earlier = self.calls.get(id(op.rounds[-2]))
            if earlier is not None:
                owner = earlier[2]  # a replay sends an operation's rounds in one session (the state maps there)
        plan = owner.plan
        call = RecordedCall(len(plan.calls), item, ts, host=_host(event))
        plan.calls.append(call)
        owner.open += 1
        self.calls[id(entry)] = (entry, call, owner)
        if item.method == "initialize":
            plan.handshake = True
        elif item.method == LISTEN and owner.report.sessionless:
            self.listens.append((entry, owner))
        if owner.header_version is None:
            owner.header_version = _header_version(event)
        if earlier is not None:
            _retry(plan, earlier[1], call)
        plan.steps.append(SendStep(item, ts, tuple(owner.answered), call))
        owner.answered.clear()

    def _server(self, unit: _Unit, item: dict, entry: Entry, ts: float, event: dict) -> None:
        """A server request or notification (`item` as recorded, read by the model)."""
        request = "id" in item
        op = entry.op
        owner = op.outer if request and op is not None else op
        known = self.calls.get(id(owner.last)) if owner is not None else None
        if known is not None and (known[1].answer is not None or known[1].status is not None):
            # The model ties it to an operation whose round was answered (a task's status while it is
            # polled): a replay compares a call with what came while it was in flight, so it is the session's.
            known = None
        call = known[1] if known is not None else None
        plan = known[2].plan if known is not None else unit.plan
        if not unit.open or _on_get_stream(event):
            unit.plan.listens = True  # the server spoke outside any call: a replay opens the GET stream
        if request:
            ask = Ask(item["method"], item.get("params"), recorded_id=item["id"])
            self.asks[id(entry)] = (entry, ask)
            plan.asks.append(ask)
            if call is not None:
                call.asks.append(ask)
                call.server.append((ts, ask))
            return
        note = {"method": item["method"], "params": item.get("params")}
        if call is not None:
            call.notifications.append(note)
            call.server.append((ts, note))
        else:
            plan.notifications.append(note)

    def _answered(self, entry: Entry, answer: Response | ErrorResponse, ts: float, event: dict, report: SessionReport) -> None:
        if report.sessionless:  # the model keeps sessionless ids apart by their exchange: the recorded id again
            answer = _recorded_id(answer, entry.id)
        if entry.dir == "s2c":  # the client answered a server request
            known = self.asks.get(id(entry))
            if known is not None:
                known[1].answer = answer_obj(answer)
            return
        known = self.calls.get(id(entry))
        if known is None:
            return
        _, call, owner = known
        call.answer, call.answered, call.status, call.via = answer, ts, _status(event), _via(event)
        owner.open -= 1
        owner.answered.append(call.index)

    def _http(self, event: dict, step: EventEffect) -> None:
        """An HTTP exchange's end: an error status that carried no answer says how its call failed
        (the model ended its operation with it)."""
        status = event.get("status")
        if not (isinstance(status, int) and status >= 400):
            return
        for op in step.finished:
            for entry in op.rounds:
                known = self.calls.get(id(entry))
                if known is not None and known[1].answer is None and known[1].status is None and entry.end is None:
                    _, call, owner = known
                    call.status = status
                    owner.open -= 1
                    owner.answered.append(call.index)  # its exchange ended before the next step: it is waited for


def _retry(plan: SessionPlan, earlier: RecordedCall, call: RecordedCall) -> None:
    """A retry carrying `inputResponses` answers its operation's previous `input_required` round: the
    answers it sent are the recording's answers to what that round asked."""
    earlier.retried = True
    call.retry_of = earlier.index
    params = call.request.params or {}
    responses = params.get(INPUT_RESPONSES)
    if not is_input_required(earlier.answer) or not isinstance(responses, dict):
        return
    wanted = earlier.answer.result.get(INPUT_REQUESTS) or {}
    for key, asked in wanted.items():
        if key in responses and isinstance(asked, dict):
            plan.asks.append(Ask(asked.get("method", ""), asked.get("params"), {"result": responses[key]}))


def _declared(params: Any) -> Any:
    """The client capabilities a 2026-07-28 request's `_meta` declares."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None


def _recorded_id(answer: Response | ErrorResponse, recorded: Any) -> Response | ErrorResponse:
    if type(answer) is Response:
        return Response(id=recorded, result=answer.result, _parsed=True)
    return ErrorResponse(id=recorded, code=answer.code, message=answer.message, data=answer.data, _parsed=True)


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
    rebuild, planner = Rebuild(keep=False, answers=True), _Planner()
    transport = None
    credentials = False
    with collector_paused():
        for event in reader:
            step = rebuild.take(event)
            if step is None:  # the header
                transport = event.get("transport")
                continue
            if event["kind"] == Kind.HTTP:
                credentials = credentials or AUTHORIZATION in (event.get("request_headers") or ())
            planner.take(event, step)
    wanted = set(sessions) if sessions else None
    # (a connection whose only message answered a round of an operation replayed elsewhere holds nothing;
    # a connection that joined a listen's plan is that plan's, listed once)
    plans = [unit.finish() for unit in dict.fromkeys(planner.units.values()) if unit.plan.calls or unit.plan.steps or unit.plan.asks or unit.plan.notifications or unit.plan.notes]
    if wanted is not None:
        plans = [plan for plan in plans if plan.id in wanted]
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
