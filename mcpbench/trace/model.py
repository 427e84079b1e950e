"""The trace model: trace events → sessions → operations, one event at a time.

Every view of a trace takes its sessions and operations from here (`inspect`, the pandas loaders,
the live view, telemetry). Requests are paired with their answers by the protocol core's `Session`,
the same one the recorders use; the violations shown are the ones the recorder wrote, plus the
rules only whole operations show (multi round-trip requests, `protocol/rules.py`), so nothing is
counted twice.

An *operation* is one logical request: in 2026-07-28 a `tools/call`, `resources/read` or
`prompts/get` answered `input_required` is retried under a new id, and each exchange is a *round*
of the same operation (SEP-2322). Rounds are linked by the exact `requestState` first; without one
by method, name and the same `inputRequests` keys (a set: JSON objects have no order); when two
waiting operations fit, none is linked and a warning says so. An operation's latency runs from its
first request to its final answer; the time the client took between rounds (a human answering an
elicitation) is its `client_wait`, not the server's.

`Rebuild.take` takes the events of a whole trace (`inspect`) or of one that is still growing (the
live view, through `trace/follow.py`) and says what each one added: the timeline entries it made,
the requests it answered and the operations it finished. `Rebuild.take_all` takes a whole trace at
once (`inspect`, the pandas loader): the usual event, a plain call of an operating stdio session, on a
hot path that makes no `Step` and leaves the session to the core's lean pairing, everything else
through `take`; both give the same sessions and operations.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.auth import bearer_challenge
from mcpbench.protocol.http import (
    AUTH_FAILURES,
    AUTHENTICATE,
    FOREIGN_ANSWER_ID,
    PROTOCOL_VERSION,
    classify_status,
    foreign_id_warning,
    pair_with_post,
)
from mcpbench.protocol.jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response
from mcpbench.protocol.session import C2S, CLOSED, LOST, OPERATING, S2C, Direction, Exchange, Session, Trigger
from mcpbench.protocol.transports import LEGACY_SSE, STREAMABLE_HTTP
from mcpbench.protocol.rules import applies
from mcpbench.protocol.server import ERROR_NAMES
from mcpbench.protocol.versions import (
    INPUT_CAPABILITIES,
    INPUT_METHODS,
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    CACHE_HINTS,
    CACHEABLE_METHODS,
    LISTEN,
    LISTEN_ACKNOWLEDGED,
    LOG_MESSAGE,
    META_LOG_LEVEL,
    META_RELATED_TASK,
    META_SUBSCRIPTION_ID,
    REQUEST_STATE,
    RESULT_TYPE,
    TASK_METHODS,
    TASK_STATUS,
    TERMINAL_TASK_STATUSES,
    asks_for_input,
    call_name,
    has_input_required,
    meta_version,
    rules,
)
from mcpbench.trace.format import Kind

# The HTTP status that says the server no longer knows a session (both HTTP transports).
SESSION_NOT_FOUND = 404
# The recorders' key of sessionless Streamable HTTP traffic: one per client connection
# (docs/trace-format-http.md). It is rebuilt as one logical stream per protocol version.
SESSIONLESS_PREFIX = "conn-"
SESSIONLESS = "sessionless"
# HTTP exchanges that are not MCP (an OAuth discovery probe, a favicon): no session of any transport.
NOT_MCP = "(not MCP)"
# mitmproxy's word for a stream its client closed: the client's own close, not a failure.
CLIENT_CLOSED = "Client disconnected."
# The outcome of a request whose HTTP exchange failed (status >= 400) before any answer.
HTTP_ERROR = "http-error"
# The outcome of a round that asks the client for input (2026-07-28): the operation goes on.
INPUT_REQUIRED = "input-required"
# Warnings of the round linking: a retry two waiting operations fit, a retry that fits none.
MRTR_AMBIGUOUS = "mrtr-ambiguous"
MRTR_UNLINKED = "mrtr-unlinked"
# A message event the model could not read as JSON-RPC (its violation's name).
INVALID_MESSAGE = "invalid-message"
# A 2026-07-28 list or read result without its freshness hints (a warning: hints, not a duty we can prove).
MISSING_CACHE_HINTS = "missing-cache-hints"


def outcome(answer: Response | ErrorResponse) -> tuple[str, str]:
    """("ok" | "tool-error" | "error" | "input-required", detail) of an answer."""
    if isinstance(answer, ErrorResponse):
        name = ERROR_NAMES.get(answer.code) if type(answer.code) is int else None
        return "error", f"{answer.code}{f' ({name})' if name else ''}: {answer.message}"
    result = answer.result
    if asks_for_input(result):
        asked = result.get(INPUT_REQUESTS)
        return "input-required", ", ".join(sorted(asked)) if type(asked) is dict else ""
    if isinstance(result, dict) and result.get("isError") is True:
        texts = [c.get("text", "") for c in result.get("content") or () if isinstance(c, dict)]
        return "tool-error", " ".join(texts)[:120]
    return "ok", ""


@dataclass(slots=True)
class Entry:
    """One line of a session's timeline."""

    ts: float
    dir: str | None
    kind: str  # request | notification | violation | warning | stderr | http | stream | error | process
    name: str
    latency: float | None = None  # seconds, requests only
    outcome: str = ""
    detail: str = ""
    id: Any = None  # a request's JSON-RPC id
    line: int | None = None  # the trace line it came from (`inspect`; a live view does not count lines)
    op: "Operation | None" = None  # a request's operation (this entry is one of its rounds)
    flow: Any = None  # a request's HTTP exchange
    end: float | None = None  # when a request was answered
    error_code: Any = None  # a request answered by a JSON-RPC error: its code
    request_bytes: int | None = None  # filled by a reader that measures them (the pandas loader)
    answer_bytes: int | None = None


@dataclass(slots=True, eq=False)
class Task:
    """A task an operation became (2025-11-25's `CreateTaskResult`, or a handle the 2026-07-28
    extension returns unasked): its statuses as polls, cancels and notifications said them."""

    id: str
    op: "Operation"
    created: float  # when the handle came back
    status: str
    statuses: list[tuple[float, str]] = field(default_factory=list)
    polls: int = 0  # tasks/get requests naming it
    done: float | None = None  # when it was first seen terminal (or its result came)
    result_at: float | None = None  # when tasks/result answered it

    @property
    def create_time(self) -> float:
        """Seconds from the request to the task handle."""
        return self.created - self.op.start

    @property
    def complete_time(self) -> float | None:
        """Seconds from the request to the task's end (None while it runs)."""
        return None if self.done is None else self.done - self.op.start


@dataclass(slots=True, eq=False)
class Stream:
    """A `subscriptions/listen` stream: opened, acknowledged, its notifications, closed. Never an
    unanswered call: open while it listens."""

    opened: float
    acknowledged: float | None = None
    notifications: list[tuple[float, str]] = field(default_factory=list)  # (when, method)
    closed: float | None = None
    ending: str = ""  # "result" (the server ended it), "closed", "cut" (the stream broke)


@dataclass(slots=True, eq=False)
class Operation:
    """One logical request: its rounds (one, or a multi round-trip's retries), its outcome once final."""

    dir: str
    method: str
    name: str  # `tools/call echo`: method and what it names
    target: str | None  # what it names (tool, prompt, uri): with the method, what links its rounds
    rounds: list[Entry]
    capabilities: Any = None  # the client's declared capabilities when it asked
    outcome: str = ""  # "" while open
    detail: str = ""
    end: float | None = None  # its final answer
    state: Any = None  # the `requestState` the next round must echo (None: none sent)
    asked: frozenset | None = None  # the `inputRequests` keys the next round must answer (None: not waiting)
    notifications: int = 0  # progress notifications tied to it by their token
    inner: list["Operation"] = field(default_factory=list)  # server requests made while it ran (handshake era)
    outer: "Operation | None" = None  # a server request: the client's operation it was made in (its `inner`)
    task: Task | None = None  # the task it became, or (tasks/get, tasks/result, …) the task it names
    stream: Stream | None = None  # a `subscriptions/listen` request: its stream
    log_level: Any = None  # the log level its request asked for (2026-07-28 `_meta`)

    @property
    def start(self) -> float:
        return self.rounds[0].ts

    @property
    def first(self) -> Entry:
        return self.rounds[0]

    @property
    def last(self) -> Entry:
        return self.rounds[-1]

    @property
    def latency(self) -> float | None:
        """First request to final answer, seconds (None while open)."""
        return None if self.end is None else self.end - self.rounds[0].ts

    @property
    def client_wait(self) -> float:
        """Seconds the client took between a round's answer and its next request (not the server's)."""
        total = 0.0
        rounds = self.rounds
        for before, after in zip(rounds, rounds[1:]):
            if before.end is not None:
                total += max(0.0, after.ts - before.end)
        return total

    @property
    def server_time(self) -> float | None:
        """The rounds' own latencies added: the operation's time without the client's waits."""
        latencies = [r.latency for r in self.rounds if r.latency is not None]
        return sum(latencies) if latencies else None

    @property
    def open(self) -> bool:
        return not self.outcome


@dataclass
class SessionReport:
    id: str
    transport: str
    start: float
    entries: list[Entry] = field(default_factory=list)
    session: Session = field(default_factory=Session)
    exit_code: int | None = None
    requests: int = 0  # requests seen (kept or not)
    open_calls: dict[tuple[str, Any], Entry] = field(default_factory=dict)
    sessionless: bool = False  # sessionless Streamable HTTP: a logical stream of one protocol version
    operations: list[Operation] = field(default_factory=list)  # kept with the timeline (`Rebuild(keep=True)`)
    client: dict | None = None  # the client's name and version (initialize, or the `_meta` envelope)
    end: float = 0.0  # its last event
    awaiting: list[Operation] = field(default_factory=list)  # answered `input_required`: waiting for a retry
    running: list[Operation] = field(default_factory=list)  # the client's operations not answered yet
    progress: dict[Any, Operation] = field(default_factory=dict)  # progress token -> its open operation
    states: dict[str, Entry] = field(default_factory=dict)  # a `requestState` in flight -> its round
    tasks: dict[str, Task] = field(default_factory=dict)  # task id -> the task
    streams: dict[Any, Operation] = field(default_factory=dict)  # subscription id -> its open listen operation
    shadowed: list[Operation] = field(default_factory=list)  # open when a later request took their id

    @property
    def calls(self) -> list[Entry]:
        """Every request (each round of an operation)."""
        return [e for e in self.entries if e.kind == "request"]

    def of_kind(self, kind: str) -> list[Entry]:
        return [e for e in self.entries if e.kind == kind]


@dataclass(slots=True)
class _Flow:
    """What the rebuild learned of one HTTP exchange: its request's version, id and label, and an
    error answer under another id that the POST paired (`http.pair_with_post`)."""

    version: str | None = None
    request_id: Any = None
    label: str = ""
    foreign: str | None = None  # the warning an `unknown-answer` violation of this flow really is
    op: Any = None  # the operation of its request: the notifications on its stream are that request's


@dataclass(slots=True)
class Step:
    """What one trace event did to its session: the entries it added, the requests it answered
    (their `latency` and `outcome` now set)."""

    session: SessionReport
    added: list[Entry]
    answered: list[Entry]
    finished: list[Operation] = field(default_factory=list)  # operations whose final outcome this event gave
    opened: list[Operation] = field(default_factory=list)  # operations this event began
    # The answers themselves, beside `answered` (`Rebuild(answers=True)`: a replay needs them; a view does not).
    answers: list[Response | ErrorResponse] | None = None


class Rebuild:
    """Sessions rebuilt from trace events as they come.

    Args:
        keep: keep each session's timeline in `SessionReport.entries` (`inspect`); without it the
            caller keeps what `take` returns for as long as it wants (a live view, bounded).
        answers: give each step the answer messages of the requests it answered (`Step.answers`),
            as the replay's plan needs them; the views keep none (`take_all` leaves them out).
        measure: set each request's `request_bytes` and `answer_bytes`: the size of its event's
            message as compact JSON (what the frames' byte columns mean; a batch's whole size).
        ordered: keep every operation in the order it began, in `opened`, and its session in
            `opened_in` (the pandas loader's rows, whatever `keep` says).
    """

    def __init__(self, *, keep: bool = True, answers: bool = False, measure: bool = False, ordered: bool = False) -> None:
        self.keep = keep
        self.answers = answers
        self.measure = measure
        self.ordered = ordered
        self.sessions: dict[str, SessionReport] = {}
        self.flows: dict[Any, _Flow] = {}  # HTTP exchanges by flow (bounded by `forget_flow`)
        self.opened: list[Operation] = []  # `ordered`: every operation, in the order it began
        self.opened_in: list[SessionReport] = []  # ... and its session (two lists: no tuple per operation)

    def take_all(self, events: Iterable[dict[str, Any]], other: Callable[[dict[str, Any], Step], None] | None = None) -> None:
        """Take every event of a whole trace, numbering the entries with their trace line (a line per
        event, the header too); `other(event, step)` for each event but the usual ones.

        The usual event (one JSON-RPC object of an operating session, outside HTTP: a client's
        request, its answer, a notification) takes the hot path (`_usual`): what `take` would do to
        it, without a `Step` or the message's objects beyond the core's `Request` and answer, and
        with nothing to report (no entry but its own). Anything else, or anything the hot path
        finds unusual, goes through `take`, so both give the same sessions and operations.
        """
        take, sessions, usual = self.take, self.sessions, _usual
        message = Kind.MESSAGE
        line = 0
        for event in events:
            line += 1
            if event["kind"] == message and "flow" not in event:
                report = sessions.get(event.get("session"))
                if report is not None and report.session.state is OPERATING and usual(self, report, event, line):
                    continue
            step = take(event)
            if step is not None:
                for entry in step.added:
                    entry.line = line
                if other is not None:
                    other(event, step)

    def take(self, event: dict[str, Any]) -> Step | None:
        """Take one trace event; None for the header."""
        kind = event["kind"]
        if kind == Kind.TRACE:
            return None
        sessions = self.sessions
        key = event.get("session")
        report = sessions.get(key) if key is not None else None
        if report is None:  # a new session, or a key the rebuild renames (sessionless, not MCP, an alias)
            report = self._session(event, kind, key or "-")
        report.end = event["ts"]
        step = Step(report, [], [])
        if self.answers:
            step.answers = []
        _take(step, event, self.flows)
        if kind == Kind.HTTP:
            self.flows.pop(event.get("flow"), None)  # the exchange is over
        if self.measure:
            _measure(step, event)
        if self.ordered and step.opened:
            self.opened += step.opened
            self.opened_in += [report] * len(step.opened)
        if self.keep:
            if step.added:
                report.entries += step.added
            if step.opened:
                report.operations += step.opened
        return step

    def _session(self, event: dict[str, Any], kind: str, key: str) -> SessionReport:
        """The session of an event whose key is not a known session's."""
        sessions = self.sessions
        alias = event.get("conn_session")
        if alias and alias != key and key not in sessions and alias in sessions:
            # A legacy GET /sse stream opens under its connection's key; its `endpoint` event
            # names the session: one session, not an empty one per stream.
            self.sessions = sessions = {key if name == alias else name: value for name, value in sessions.items()}
            sessions[key].id = key
        transport = event.get("transport", "?")
        version = None
        if key.startswith(SESSIONLESS_PREFIX) and transport == STREAMABLE_HTTP:
            version = _sessionless_version(event, self.flows)
            key = f"{SESSIONLESS} {version or '-'}"
        elif event.get("session") is None and kind == Kind.HTTP and event.get("mcp") is False:
            key, transport = NOT_MCP, "http"
        report = sessions.get(key)
        if report is None:
            report = sessions[key] = SessionReport(key, transport, event["ts"], sessionless=key.startswith(SESSIONLESS))
            if report.sessionless:
                report.session = Session(version, transport)
        return report

    def forget(self, key: str) -> None:
        """Drop a session (a live view keeps a bounded number)."""
        self.sessions.pop(key, None)

    def finish(self) -> list[Operation]:
        """The trace is read to its end: the calls still open were never answered, an operation
        still waiting for its retry ends asking for input. Returns the operations this finished."""
        done: list[Operation] = []
        for report in self.sessions.values():
            for op in [entry.op for entry in report.open_calls.values()] + report.awaiting + [task.op for task in report.tasks.values()] + report.shadowed:
                if op is not None and op.open:
                    op.outcome = open_outcome(op)
                    if op.outcome == INPUT_REQUIRED:
                        op.detail, op.end = op.last.detail, op.last.end
                    done.append(op)
            for entry in report.open_calls.values():
                entry.outcome = LISTENING if entry.op is not None and entry.op.stream is not None else "unanswered"
            report.open_calls.clear()
            report.awaiting.clear()
            report.running.clear()
        return done


def _measure(step: Step, event: dict[str, Any]) -> None:
    """`Rebuild(measure=True)`: the requests the event began or answered carry its message's size."""
    size = -1
    for entry in step.added:
        if entry.kind == "request":
            if size < 0:
                size = len(orjson.dumps(event.get("msg")))
            entry.request_bytes = size
    for entry in step.answered:
        if size < 0:
            size = len(orjson.dumps(event.get("msg")))
        entry.answer_bytes = size


# Requests the hot path leaves to `take`: what changes the session (the handshake) or makes more
# than a running operation (a task, a listen stream).
_UNUSUAL_REQUESTS = frozenset({"initialize", LISTEN, *TASK_METHODS})


def _usual(rebuild: Rebuild, report: SessionReport, event: dict[str, Any], line: int) -> bool:
    """`take` of a usual message event of an operating session outside HTTP, on the hot path; False
    (nothing changed) when the event is not a usual one: `take` has it then.

    Usual: a client's request that begins a plain operation (no round of a multi round-trip
    request, no task, no listen stream, no id in flight), the server's answer to one that ends it
    (no `input_required`, no task handle, no version that checks results), a notification no task
    or stream may claim. The core's `Session` pairs them as ever, by its lean calls (`asking`,
    `answered`): in an operating session they are all that `observe` does with these messages
    but for the violations, which the recorder wrote and the model does not take from it.
    """
    msg = event["msg"]
    if type(msg) is not dict or report.sessionless:
        return False
    try:
        item = jsonrpc.from_obj(msg)  # the core's classifier, as `take`'s
    except InvalidMessage:
        return False
    direction = event.get("dir")
    kind = type(item)
    ts = event["ts"]
    if kind is Request:
        ident, method, params = item.id, item.method, item.params
        if direction != C2S_VALUE or method in _UNUSUAL_REQUESTS or method.startswith("notifications/"):
            return False
        if params is not None and (REQUEST_STATE in params or INPUT_RESPONSES in params):
            return False
        key = (C2S_VALUE, ident)
        open_calls = report.open_calls
        if key in open_calls:
            return False
        report.end = ts
        method, target, name = _names(method, call_name(method, params))
        entry = Entry(ts, C2S_VALUE, "request", name, None, "", "", ident, line)
        report.requests += 1
        open_calls[key] = entry
        op = _opened(report, entry, method, target, params)
        report.session.asking(item, ts)
        if rebuild.measure:
            entry.request_bytes = len(orjson.dumps(msg))
        if rebuild.ordered:
            rebuild.opened.append(op)
            rebuild.opened_in.append(report)
        if rebuild.keep:
            report.entries.append(entry)
            report.operations.append(op)
        return True
    if kind is Notification:
        method = item.method
        if (direction != C2S_VALUE and direction != S2C_VALUE) or method == TASK_STATUS or report.tasks or report.streams:
            return False
        report.end = ts
        entry = Entry(ts, direction, "notification", method, None, "", "", None, line)
        if method == PROGRESS and report.progress:
            op = report.progress.get(_token(item.params))
            if op is not None:
                op.notifications += 1
                entry.op = op
        if rebuild.keep:
            report.entries.append(entry)
        return True
    if kind is not Response and kind is not ErrorResponse:  # a batch
        return False
    ident = item.id
    if direction != S2C_VALUE or ident is None or "http" in event:
        return False
    entry = report.open_calls.get((C2S_VALUE, ident))
    op = entry.op if entry is not None else None
    if op is None or op.task is not None or op.stream is not None or op.dir != C2S_VALUE or report.states:
        return False
    if kind is Response and type(result := item.result) is dict and (RESULT_TYPE in result or "task" in result):
        return False
    known = rules(report.session.version)
    if known is not None and known.input_required:  # results checked (`resultType`, cache hints)
        return False
    report.end = ts
    pending = report.session.answered(item)
    if pending is None:  # an answer to nothing in flight (the recorder said so)
        return True
    del report.open_calls[(C2S_VALUE, ident)]
    entry.latency, entry.end = ts - pending.started, ts
    entry.outcome, entry.detail = outcome(item)
    if kind is ErrorResponse:
        entry.error_code = item.code
    if rebuild.measure:
        entry.answer_bytes = len(orjson.dumps(msg))
    _finished(report, op, entry.outcome, entry.detail, ts)
    return True


def open_outcome(op: Operation) -> str:
    """The outcome of an operation still open when its trace (or session) ends: a listen stream still
    listening, a task as last seen, a request that asked for input and was never retried, or unanswered."""
    if op.stream is not None:
        return LISTENING
    if op.task is not None and op.task.op is op:
        return f"task-{op.task.status}"
    if op.asked is not None and op.last.end is not None:
        return INPUT_REQUIRED
    return "unanswered"


def _sessionless_version(event: dict[str, Any], flows: dict[Any, _Flow]) -> str | None:
    """The protocol version a sessionless event belongs to: its request's (the envelope's, the
    `MCP-Protocol-Version` header's, or what `initialize` offers), else its exchange's."""
    flow = event.get("flow")
    if event["kind"] == Kind.MESSAGE and event.get("dir") == "c2s" and isinstance(msg := event.get("msg"), dict):
        params = msg.get("params") if isinstance(msg.get("params"), dict) else None
        http = event.get("http") if isinstance(event.get("http"), dict) else {}
        headers = http.get("headers") if isinstance(http.get("headers"), dict) else {}
        version = meta_version(params) or headers.get(PROTOCOL_VERSION)
        if version is None and msg.get("method") == "initialize" and params:
            version = params.get("protocolVersion") if isinstance(params.get("protocolVersion"), str) else None
        if flow is not None:
            flows.setdefault(flow, _Flow()).version = version
        return version
    known = flows.get(flow)
    return known.version if known is not None else None


def _take(step: Step, event: dict[str, Any], flows: dict[Any, _Flow]) -> None:
    report, added = step.session, step.added
    kind, ts, direction = event["kind"], event["ts"], event.get("dir")
    flow = event.get("flow")
    if kind == Kind.MESSAGE:
        try:
            message = jsonrpc.from_obj(event.get("msg"))
        except InvalidMessage as exc:
            added.append(Entry(ts, direction, "violation", INVALID_MESSAGE, detail=exc.reason))
            return
        http = event.get("http")
        _message(step, message, DIRECTIONS.get(direction) or Direction(direction), ts, flow, http if type(http) is dict else {}, flows)
    elif kind == Kind.VIOLATION:
        code = event.get("code", "?")
        known = flows.get(flow) if flow is not None else None
        if code == "unknown-answer" and known is not None and known.foreign is not None:
            # A recorder before `pair_with_post` took a refusal's foreign id for a stray answer.
            added.append(Entry(ts, direction, "warning", FOREIGN_ANSWER_ID, detail=known.foreign))
            return
        added.append(Entry(ts, direction, "violation", code, detail=event.get("detail", "")))
    elif kind == Kind.WARNING:
        added.append(Entry(ts, direction, "warning", event.get("code", "?"), detail=event.get("detail", "")))
    elif kind == Kind.STDERR:
        text = event.get("text")
        added.append(Entry(ts, direction, "stderr", "stderr", detail=text if isinstance(text, str) else "<binary>"))
    elif kind == Kind.PROCESS:
        if event.get("event") == "exit":
            report.exit_code = event.get("exit_code")
            report.session.close("the server process exited")
        added.append(Entry(ts, None, "process", event.get("event", "?"), detail=str(event.get("exit_code", event.get("argv", "")))))
    elif kind == Kind.HTTP:
        status = event.get("status")
        if status is not None and status >= 400:
            outcome_, detail = str(status), ""
            challenge = bearer_challenge((event.get("response_headers") or {}).get(AUTHENTICATE))
            failure = classify_status(status, has_session=False, challenge=challenge)
            if failure in AUTH_FAILURES:  # the request it refused: that is its outcome, with what the server asked for
                outcome_, detail = f"{status} {failure}", challenge.summary() if challenge else "no challenge"
                _refused(step, flow, flows.get(flow), failure, detail)
            else:  # a request its exchange failed before any answer came
                _refused(step, flow, flows.get(flow), HTTP_ERROR, f"HTTP {status}")
            added.append(Entry(ts, direction, "http", f"{event.get('method')} {event.get('path')}", outcome=outcome_, detail=detail))
            if status == SESSION_NOT_FOUND and event.get("session") and not report.sessionless:
                report.session.lose(Trigger.SESSION_NOT_FOUND, f"HTTP {status}")
        elif status is not None and event.get("method") == "DELETE":
            report.session.close("DELETE")
    elif kind == Kind.STREAM:
        step_ = event.get("event", "?")
        detail = event.get("error") or event.get("reason") or ""
        by_client = step_ == "error" and detail == CLIENT_CLOSED  # the client closed it: its normal end
        if by_client:
            step_, detail = "close", ""
        known = flows.get(flow) if flow is not None else None
        if known is not None and known.op is not None and known.op.stream is not None and step_ in ("close", "error"):
            _stream_ended(step, known.op, ts, "closed" if step_ == "close" else "cut", detail)
        if event.get("method") == "POST" and step_ in ("open", "close"):
            return  # one per SSE answer: the request line already shows it
        if report.transport == LEGACY_SSE and event.get("method") == "GET" and step_ in ("close", "error"):
            report.session.lose(Trigger.STREAM_ENDED, step_)  # a legacy session lives on its stream
            for op in list(report.streams.values()):  # and its listen streams ride that one stream
                _stream_ended(step, op, ts, "closed" if step_ == "close" else "cut", detail)
        name = f"{event.get('method', '')} {event.get('path', '')} stream {step_}".strip()
        added.append(Entry(ts, direction, kind, name + (" (by the client)" if by_client else ""), detail=detail))
    elif kind == Kind.ERROR:
        added.append(Entry(ts, direction, kind, event.get("code") or kind, detail=event.get("detail") or event.get("error") or ""))


def _refused(step: Step, flow: Any, known: _Flow | None, failure: str, detail: str) -> None:
    """The request of exchange `flow` got no answer but `failure` (an authentication refusal, an HTTP error)."""
    report = step.session
    if known is not None and known.request_id is not None:
        entry = report.open_calls.pop((C2S.value, _call_id(report, flow, known.request_id)), None)
        if entry is not None:
            entry.outcome, entry.detail = failure, detail
            if entry.op is not None:
                _finished(report, entry.op, failure, detail, None)
                step.finished.append(entry.op)


def _message(step: Step, message: jsonrpc.Message, direction: Direction, ts: float, flow: Any,
             http: dict[str, Any], flows: dict[Any, _Flow]) -> None:
    report = step.session
    way = C2S_VALUE if direction is C2S else S2C_VALUE
    items = message.items if type(message) is jsonrpc.Batch else (message,)
    for item in items:
        kind = type(item)
        if kind is Request:
            method, target, name = _names(item.method, call_name(item.method, item.params))
            entry = Entry(ts, way, "request", name, id=item.id, flow=flow)
            step.added.append(entry)
            report.requests += 1
            key = (way, (flow, item.id) if report.sessionless else item.id)
            shadowed = report.open_calls.get(key)
            if shadowed is not None and shadowed.op is not None:  # an id reused in flight: the earlier request
                report.shadowed.append(shadowed.op)  # can no longer be paired, and stays open
            report.open_calls[key] = entry
            carrier = known.op if direction is S2C and flow is not None and (known := flows.get(flow)) is not None else None
            _operation(step, report, item, entry, direction, method, target, flow, carrier)
            if direction is C2S and flow is not None:
                known = flows.setdefault(flow, _Flow())
                known.request_id, known.label, known.op = item.id, f"{item.method} (id {item.id!r})", entry.op
        elif kind is Notification:
            entry = Entry(ts, way, "notification", item.method)
            step.added.append(entry)
            if item.method == PROGRESS and report.progress:
                op = report.progress.get(_token(item.params))
                if op is not None:
                    op.notifications += 1
                    entry.op = op
            elif report.tasks or item.method == TASK_STATUS:
                _task_notification(step, report, item, entry)
            if entry.op is None and direction is S2C:
                _scoped(step, report, item, entry, flows.get(flow) if flow is not None else None, flow)
            elif item.method == CANCELLED and report.streams and type(item.params) is dict and type(cancelled := item.params.get("requestId")) in (str, int):
                op = report.streams.get((flow, cancelled) if report.sessionless else cancelled)
                if op is not None:  # the client closed its listen stream
                    _stream_ended(step, op, ts, "closed", "cancelled by the client")
    known = flows.get(flow) if flow is not None else None
    if direction is S2C and type(message) is ErrorResponse:
        status = http.get("status")
        paired = pair_with_post(message, known.request_id, status) if known is not None else None
        if paired is not None:
            if message.id is not None:
                known.foreign = foreign_id_warning(message.id, status, known.label)
            message = paired
        elif message.id is not None and isinstance(status, int) and status >= 400 and (known is None or known.request_id is None):
            refused = f"{http.get('method') or 'the request'} {http.get('path') or ''}".strip()
            flows.setdefault(flow, _Flow()).foreign = foreign_id_warning(message.id, status, refused, paired=False)
            return  # it refused a request that carried none: an answer to nothing
    if report.sessionless:  # ids are the client's own, and many clients share the stream: keep them apart
        message = _by_flow(message, flow)
    for result in report.session.observe(direction, message, ts):
        if type(result) is Exchange:
            entry = report.open_calls.pop((C2S_VALUE if result.direction is C2S else S2C_VALUE, result.request.id), None)
            if entry is not None:
                entry.latency, entry.end = result.latency, result.finished
                entry.outcome, entry.detail = outcome(result.answer)
                if type(result.answer) is ErrorResponse:
                    entry.error_code = result.answer.code
                step.answered.append(entry)
                if step.answers is not None:
                    step.answers.append(result.answer)
                if entry.op is not None:
                    _answered(step, report, entry, result.answer, result.finished)


# A request's method, what it names and its timeline name, one string each shared by every request
# that has them: a big trace keeps an operation per request, and a string per field each (parsed
# anew from every line) took a fifth of the file's size again. Bounded: a trace of ever new names
# (a fuzzer's) stops sharing, nothing else changes.
_NAMES: dict[tuple[str, str | None], tuple[str, str | None, str]] = {}
NAMES_SHARED = 4096


def _names(method: str, target: str | None) -> tuple[str, str | None, str]:
    """(method, target, "method target") of a request, the strings shared with earlier requests'."""
    key = (method, target)
    known = _NAMES.get(key)
    if known is None:
        known = (method, target, f"{method} {target}" if target else method)
        if len(_NAMES) < NAMES_SHARED and type(method) is str:
            _NAMES[key] = known
    return known


def _call_id(report: SessionReport, flow: Any, request_id: Any) -> Any:
    return (flow, request_id) if report.sessionless else request_id


def _by_flow(message: jsonrpc.Message, flow: Any) -> jsonrpc.Message:
    """`message` with its id made that of its HTTP exchange too: (flow, id)."""
    kind = type(message)
    if kind is Request:
        return Request(id=(flow, message.id), method=message.method, params=message.params, _parsed=True)
    if kind is Response:
        return Response(id=(flow, message.id), result=message.result, _parsed=True)
    if kind is ErrorResponse:
        return ErrorResponse(id=(flow, message.id), code=message.code, message=message.message, data=message.data, _parsed=True)
    return message


def ended(report: SessionReport) -> bool:
    """Whether the session is over: closed, or lost."""
    return report.session.state in (CLOSED, LOST)


PROGRESS = "notifications/progress"
CANCELLED = "notifications/cancelled"
C2S_VALUE, S2C_VALUE = C2S.value, S2C.value
DIRECTIONS = {C2S_VALUE: C2S, S2C_VALUE: S2C}


def _token(params: Any) -> Any:
    """A progress notification's token (hashable, else None)."""
    token = params.get("progressToken") if isinstance(params, dict) else None
    return token if isinstance(token, (str, int)) else None


def _violation(step: Step, report: SessionReport, entry: Entry, code: str, detail: str, version: str | None) -> None:
    """A rule the operation broke, where the rule holds (`protocol/rules.py`)."""
    if applies(code, report.transport, version):
        step.added.append(Entry(entry.ts if entry.end is None else entry.end, entry.dir, "violation", code, detail=detail, line=entry.line))


def _warning(step: Step, entry: Entry, code: str, detail: str) -> None:
    step.added.append(Entry(entry.ts, entry.dir, "warning", code, detail=detail))


def _version(report: SessionReport, params: Any) -> str | None:
    return meta_version(params) if isinstance(params, dict) and "_meta" in params else report.session.version


def _operation(step: Step, report: SessionReport, item: Request, entry: Entry, direction: Direction, method: str,
               target: str | None, flow: Any = None, carrier: "Operation | None" = None) -> None:
    """The operation `item` begins, or the one whose next round it is (`method`: its method, shared).
    `carrier`: a server request's, the client operation whose HTTP response stream carried it."""
    params = item.params if type(item.params) is dict else None
    if direction is not C2S:
        # A server request belongs to the request whose response stream carried it (Streamable HTTP:
        # "SHOULD relate to the originating client request"), else to the client's one running operation.
        op = Operation(direction.value, method, entry.name, None, [entry])
        entry.op = op
        outer = carrier if carrier is not None and carrier.dir == C2S_VALUE else (report.running[0] if len(report.running) == 1 else None)
        if outer is not None:
            outer.inner.append(op)
            op.outer = outer
        step.opened.append(op)
        return
    if params is not None and method in INPUT_METHODS and (INPUT_RESPONSES in params or REQUEST_STATE in params):
        op = _link(step, report, item, params, entry)
        if op is not None:
            entry.op = op
            op.rounds.append(entry)
            _in_flight(step, report, params, entry)
            report.running.append(op)
            return
    named = _named_task(step, report, method, params, entry) if method in TASK_METHODS else None
    op = _opened(report, entry, method, target, params)
    step.opened.append(op)
    if named is not None:
        op.task = named
        if method == "tasks/get":
            named.polls += 1
    if method == LISTEN:  # a stream, not a call waiting for its answer
        op.stream = Stream(entry.ts)
        report.streams[(flow, item.id) if report.sessionless else item.id] = op
        _stopped(report, op)
    if params is not None and REQUEST_STATE in params:
        _in_flight(step, report, params, entry)


def _opened(report: SessionReport, entry: Entry, method: str, target: str | None, params: dict | None) -> Operation:
    """The operation a client's request `entry` begins, running: its capabilities, log level and
    progress token, and the session's client when the request names it (both paths of `Rebuild`)."""
    meta = params.get("_meta") if params is not None else None
    if type(meta) is not dict:
        meta = None
    capabilities = meta.get(META_CLIENT_CAPABILITIES) if meta is not None else None
    op = Operation(C2S_VALUE, method, entry.name, target,
                   [entry], capabilities if capabilities is not None else report.session.client_capabilities)
    entry.op = op
    report.running.append(op)
    if meta is not None:
        if META_LOG_LEVEL in meta:
            op.log_level = meta[META_LOG_LEVEL]
        token = meta.get("progressToken")
        if token is not None and type(token) in (str, int):
            report.progress[token] = op
    if report.client is None and params is not None:
        info = params.get("clientInfo") if method == "initialize" else (meta.get(META_CLIENT_INFO) if meta is not None else None)
        if isinstance(info, dict):
            report.client = info
    return op


def _in_flight(step: Step, report: SessionReport, params: dict, entry: Entry) -> None:
    """One `requestState` carried by two requests at once: it belongs to one retry only."""
    state = params.get(REQUEST_STATE)
    if isinstance(state, str):
        other = report.states.get(state)
        if other is not None and other.end is None and other is not entry:
            _violation(step, report, entry, "mrtr-state-shared",
                       f"{entry.name} (id {entry.id!r}) carries the requestState that {other.name} (id {other.id!r}) still carries",
                       _version(report, params))
        report.states[state] = entry


def _link(step: Step, report: SessionReport, item: Request, params: dict, entry: Entry) -> "Operation | None":
    """The waiting operation a retry continues, by its exact `requestState`, else by method, name and
    the `inputRequests` keys; None when none fits or two do (a warning), never a guess."""
    state = params.get(REQUEST_STATE)
    responses = params.get(INPUT_RESPONSES)
    keys = frozenset(responses) if isinstance(responses, dict) else frozenset()
    target = call_name(item.method, params)
    version = _version(report, params)
    waiting = report.awaiting
    same = [op for op in waiting if op.method == item.method and op.target == target]
    fits = [op for op in same if op.asked == keys]
    chosen: Operation | None = None
    if state is not None:
        exact = [op for op in waiting if op.state is not None and op.state == state]
        if len(exact) > 1:
            _warning(step, entry, MRTR_AMBIGUOUS, f"{entry.name} (id {item.id!r}): {len(exact)} waiting operations sent this requestState; linked to none")
            return None
        if exact:
            chosen = exact[0]
            if chosen.method != item.method or chosen.target != target:
                _violation(step, report, entry, "mrtr-state-changed",
                           f"{entry.name} (id {item.id!r}) echoes the requestState of {chosen.name}: a retry repeats the same method and params", version)
        elif len(fits) == 1:
            chosen = fits[0]
            what = "changes the requestState it was sent" if chosen.state is not None else "invents a requestState the server never sent"
            _violation(step, report, entry, "mrtr-state-changed", f"{entry.name} (id {item.id!r}) {what}", version)
    elif len(fits) == 1:
        chosen = fits[0]
        if chosen.state is not None:
            _violation(step, report, entry, "mrtr-state-changed",
                       f"{entry.name} (id {item.id!r}) drops the requestState it was sent (echoed byte for byte on a retry)", version)
    if chosen is None:
        if len(fits) > 1 or (not fits and len(same) > 1):
            _warning(step, entry, MRTR_AMBIGUOUS, f"{entry.name} (id {item.id!r}): {len(fits) or len(same)} waiting operations fit this retry; linked to none")
            return None
        if len(same) == 1 and not fits:
            chosen = same[0]
        else:
            _warning(step, entry, MRTR_UNLINKED, f"{entry.name} (id {item.id!r}) answers input no waiting operation asked for")
            return None
    if chosen.asked != keys:
        _violation(step, report, entry, "mrtr-keys-mismatch",
                   f"{entry.name} (id {item.id!r}) answers {sorted(keys)}, the server asked {sorted(chosen.asked or ())}", version)
    if any(r.id == item.id for r in chosen.rounds):
        _violation(step, report, entry, "mrtr-id-reused", f"{entry.name}: a retry reuses the id {item.id!r} of an earlier round (each round is a new request)", version)
    waiting.remove(chosen)
    chosen.asked = None
    return chosen


def _answered(step: Step, report: SessionReport, entry: Entry, answer: Response | ErrorResponse, ts: float) -> None:
    """A round's answer: the operation waits for its retry, or ends."""
    op = entry.op
    assert op is not None
    if op.dir != C2S_VALUE:
        _finished(report, op, entry.outcome, entry.detail, ts)
        step.finished.append(op)
        return
    result = answer.result if type(answer) is Response else None
    if report.states:  # the round's requestState is no longer in flight
        for key in [key for key, held in report.states.items() if held is entry]:
            del report.states[key]
    version = report.session.version
    if op.task is not None and (type(result) is dict or op.method == "tasks/result"):
        _task_answer(step, report, op, entry, answer, result or {}, ts)
    elif type(result) is dict and type(handle := result.get("task")) is dict and type(handle.get("taskId")) is str:
        _task_created(step, report, op, entry, handle, ts)
        return
    elif type(result) is dict and result.get(RESULT_TYPE) == TASK_RESULT_TYPE and type(result.get("taskId")) is str:
        _task_created(step, report, op, entry, result, ts)  # 2026-07-28's extension: the task's fields beside resultType
        return
    if op.stream is not None:
        op.stream.closed, op.stream.ending = ts, "result"
        _forget_stream(report, op)
    elif type(result) is dict and op.method in CACHEABLE_METHODS and has_input_required(version):
        missing = [hint for hint in CACHE_HINTS if hint not in result]
        if missing:
            _warning(step, entry, MISSING_CACHE_HINTS, f"{entry.name} (id {entry.id!r}): a {version} result without {' and '.join(missing)}")
    if type(result) is dict and RESULT_TYPE not in result and has_input_required(version):
        _violation(step, report, entry, "missing-result-type", f"{entry.name} (id {entry.id!r}): a {version} result without resultType", version)
    if entry.outcome == INPUT_REQUIRED and type(result) is dict:
        if op.method not in INPUT_METHODS:
            _violation(step, report, entry, "input-required-method",
                       f"{entry.name} answered input_required: only {', '.join(sorted(INPUT_METHODS))} may", version)
        asks = result.get(INPUT_REQUESTS)
        asks = asks if isinstance(asks, dict) else {}
        declared = op.capabilities if isinstance(op.capabilities, dict) else {}
        for key, ask in asks.items():
            method = ask.get("method") if type(ask) is dict else None
            wanted = INPUT_CAPABILITIES.get(method) if type(method) is str else None
            if wanted is not None and wanted not in declared:
                _violation(step, report, entry, "input-capability-missing",
                           f"{entry.name} asks {key!r} by {ask.get('method')}, but the client declared no {wanted} capability", version)
        op.state, op.asked = result.get(REQUEST_STATE), frozenset(asks)
        _stopped(report, op)
        report.awaiting.append(op)
        return
    _finished(report, op, entry.outcome, entry.detail, ts)
    step.finished.append(op)


def _stopped(report: SessionReport, op: Operation) -> None:
    """The operation no longer waits for the server."""
    try:
        report.running.remove(op)
    except ValueError:
        pass


def _finished(report: SessionReport, op: Operation, outcome_: str, detail: str, end: float | None) -> None:
    op.outcome, op.detail, op.end = outcome_, detail, end
    _stopped(report, op)
    if report.progress:
        for token in [t for t, held in report.progress.items() if held is op]:
            del report.progress[token]


# 2026-07-28's `io.modelcontextprotocol/tasks` extension (SEP-2663): a result that is a task handle.
TASK_RESULT_TYPE = "task"
# An operation that became a task ends with its task: how each terminal status ends it.
TASK_OUTCOMES = {"completed": "ok", "failed": "failed", "cancelled": "cancelled"}


def _named_task(step: Step, report: SessionReport, method: str, params: dict | None, entry: Entry) -> Task | None:
    """The task a tasks/get, tasks/result, tasks/cancel or tasks/update names; a violation when no
    operation of the session became it."""
    task_id = params.get("taskId") if params is not None else None
    if type(task_id) is not str:
        return None
    task = report.tasks.get(task_id)
    if task is None:
        _violation(step, report, entry, "task-unknown", f"{method} names task {task_id!r}, which no request of this session created",
                   _version(report, params))
    return task


def _task_created(step: Step, report: SessionReport, op: Operation, entry: Entry, handle: dict, ts: float) -> None:
    """The answer is a task handle: the operation stays open until its task ends."""
    status = handle.get("status") if type(handle.get("status")) is str else "working"
    task = Task(handle["taskId"], op, ts, status, [(ts, status)])
    op.task = task
    report.tasks[task.id] = task
    entry.outcome, entry.detail = "task", f"task {task.id} {status}"
    _stopped(report, op)
    if status in TERMINAL_TASK_STATUSES:
        _task_status(step, report, task, status, ts, entry)


def _task_answer(step: Step, report: SessionReport, op: Operation, entry: Entry, answer: Response | ErrorResponse,
                 result: dict, ts: float) -> None:
    """A tasks/get, tasks/cancel (a status) or tasks/result (the operation's real result) answered."""
    task = op.task
    assert task is not None
    if op.method == "tasks/result":
        task.result_at = ts
        owner = task.op
        owner.outcome, owner.detail = outcome(answer)
        if owner.end is None:
            owner.end, task.done = ts, ts
            step.finished.append(owner)
        return
    status = result.get("status")
    if type(status) is str:
        _task_status(step, report, task, status, ts, entry)
        final = result.get("result")
        if type(final) is dict and task.op.end == ts and status == "completed":  # 2026-07-28: the result rides the poll
            task.op.outcome, task.op.detail = outcome(Response(id=entry.id, result=final, _parsed=True))


def _task_status(step: Step, report: SessionReport, task: Task, status: str, ts: float, entry: Entry) -> None:
    """A status the task was seen in: a change, an end, or a broken rule."""
    version = report.session.version
    if task.status in TERMINAL_TASK_STATUSES and status != task.status:
        _violation(step, report, entry, "task-status-regressed", f"task {task.id} went from {task.status} to {status}: a terminal status is final", version)
    elif status not in TERMINAL_TASK_STATUSES and task.result_at is not None:
        _violation(step, report, entry, "task-result-early", f"task {task.id} is {status} after tasks/result answered: a result before completion", version)
    if status != task.status:
        task.status = status
        task.statuses.append((ts, status))
    owner = task.op
    if status in TERMINAL_TASK_STATUSES and owner.open:
        owner.outcome, owner.end = TASK_OUTCOMES[status], ts
        task.done = ts
        step.finished.append(owner)


def _task_notification(step: Step, report: SessionReport, item: Notification, entry: Entry) -> None:
    """`notifications/tasks/status` and any notification whose `_meta` names a related task: tied to
    the task's operation."""
    params = item.params if type(item.params) is dict else {}
    if item.method == TASK_STATUS:
        task_id = params.get("taskId")
    else:
        meta = params.get("_meta")
        related = meta.get(META_RELATED_TASK) if type(meta) is dict else None
        task_id = related.get("taskId") if type(related) is dict else None
    if type(task_id) is not str:
        return
    task = report.tasks.get(task_id)
    if task is None:
        if item.method == TASK_STATUS:
            _violation(step, report, entry, "task-unknown", f"{TASK_STATUS} names task {task_id!r}, which no request of this session created", report.session.version)
        return
    entry.op = task.op
    task.op.notifications += 1
    if item.method == TASK_STATUS and type(params.get("status")) is str:
        _task_status(step, report, task, params["status"], entry.ts, entry)


# The outcome of a listen stream still open when the trace ends.
LISTENING = "listening"


def _forget_stream(report: SessionReport, op: Operation) -> None:
    for key in [key for key, held in report.streams.items() if held is op]:
        del report.streams[key]


def _stream_ended(step: Step, op: Operation, ts: float, ending: str, detail: str) -> None:
    """A listen stream's HTTP response ended without its result: the client closed it, or it broke."""
    report, stream = step.session, op.stream
    assert stream is not None
    if not op.open:
        return
    stream.closed, stream.ending = ts, ending
    entry = op.first
    report.open_calls.pop((C2S_VALUE, (entry.flow, entry.id) if report.sessionless else entry.id), None)
    entry.outcome = op.outcome = ending
    entry.detail = op.detail = detail
    op.end = ts
    _forget_stream(report, op)
    step.finished.append(op)


def _scoped(step: Step, report: SessionReport, item: Notification, entry: Entry, known: "_Flow | None", flow: Any) -> None:
    """A server notification's operation: the listen stream its subscription id names, or the request
    whose response stream carried it (HTTP); a log message for a request that asked no level."""
    params = item.params if type(item.params) is dict else None
    meta = params.get("_meta") if params is not None else None
    subscription = meta.get(META_SUBSCRIPTION_ID) if type(meta) is dict else None
    if subscription is not None and report.streams and type(subscription) in (str, int):
        op = report.streams.get((flow, subscription) if report.sessionless else subscription)
        if op is not None and op.stream is not None:
            entry.op = op
            op.notifications += 1
            op.stream.notifications.append((entry.ts, item.method))
            if item.method == LISTEN_ACKNOWLEDGED and op.stream.acknowledged is None:
                op.stream.acknowledged = entry.ts
            return
    op = known.op if known is not None else None
    if op is None:
        return
    entry.op = op
    op.notifications += 1
    if item.method == LOG_MESSAGE and op.log_level is None and op.stream is None:
        _violation(step, report, entry, "log-not-requested",
                   f"{LOG_MESSAGE} on the stream of {op.name} (id {op.first.id!r}), which asked no log level", report.session.version)
