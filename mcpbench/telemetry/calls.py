"""Trace events → finished calls and sessions, the things spans and metrics are made of.

`CallTracker.take(event, step)` reads what `trace/model.py`'s `Rebuild` made of one trace
event (the `EventEffect`: the entries it added, the operations it began and finished, paired and grouped
by the trace model) and returns what it finished: a `TracedCall` once an operation has its final answer
(or its session ended without it), a `SessionDone` once a session ended. A call is an operation,
not a request: a 2026-07-28 multi round-trip request is one span and one duration, each of its
rounds an event on that span (`mcp.round`, with the round's own latency and outcome) rather than a
child span, so span counts and the Prometheus durations stay per operation, as users count calls;
a task-augmented call ends when its task does. The request's and answer's fields
(tool name, `_meta.traceparent`, error code) are read from the event's message; nothing is paired
here. Notifications about a call in flight (progress, cancelled) become its events; other
notifications, violations and errors become its session's.
"""

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mcpbench.trace.model import CANCELLED_OUTCOME, INPUT_REQUIRED, NOT_MCP, Entry, EventEffect, SessionReport, TracedOperation, ended, open_outcome
from mcpbench.protocol.session import Trigger
from mcpbench.protocol.transports import STDIO
from mcpbench.protocol.versions import CANCELLED, ERA_NAMES, PROGRESS, progress_token
from mcpbench.telemetry import conventions as otel
from mcpbench.trace.format import Kind

# The trace's key for events of no session: no session span (nor for `Rebuild`'s sessionless streams).
NO_SESSION = "-"
# Events kept on one span (OpenTelemetry's SDK keeps 128 by default); the rest are counted.
MAX_EVENTS = 128
# Sessions followed at once: past it the oldest is closed as it stands (a load opens thousands).
MAX_SESSIONS = 10_000
# How a session ends without an error: its client closed it, or closed the legacy stream it lived on.
NORMAL_ENDS = frozenset({Trigger.CLOSE, Trigger.STREAM_ENDED})
# The span events of a multi round-trip operation's later requests and of each round's answer.
ROUND = "mcp.round"
ROUND_ANSWERED = "mcp.round.answered"


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A W3C `traceparent` (https://www.w3.org/TR/trace-context/#traceparent-header)."""

    trace_id: int
    span_id: int
    flags: int

    @classmethod
    def parse(cls, value: Any) -> "TraceParent | None":
        """`00-<32 hex>-<16 hex>-<2 hex>`; None for anything else (version ff, zero ids)."""
        if not isinstance(value, str):
            return None
        parts = value.strip().split("-")
        if len(parts) < 4 or parts[0] == "ff" or len(parts[0]) != 2 or len(parts[1]) != 32 or len(parts[2]) != 16 or len(parts[3]) != 2:
            return None
        try:
            trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
        except ValueError:
            return None
        return cls(trace_id, span_id, flags) if trace_id and span_id else None


@dataclass(slots=True)
class TrackedSession:
    """One session as the tracker follows it."""

    key: str
    report: SessionReport
    start: float
    last: float
    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    dropped_events: int = 0
    span_id: int | None = None  # set by the span side when it opens the session's trace
    trace_id: int | None = None
    done: bool = False  # its span has ended (closed, lost); calls made after it are still followed

    def note(self, ts: float, name: str, attributes: dict[str, Any]) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append((ts, name, attributes))
        else:
            self.dropped_events += 1

    @property
    def transport(self) -> str:
        return self.report.transport

    @property
    def version(self) -> str | None:
        return self.report.session.version

    @property
    def era(self) -> str | None:
        era = self.report.session.era
        return ERA_NAMES[era] if era is not None else None

    @property
    def sessionless(self) -> bool:
        """No MCP session: 2026-07-28 over HTTP (one logical stream per version), or not MCP at all."""
        return self.key in (NO_SESSION, NOT_MCP) or self.report.sessionless


@dataclass(slots=True)
class TracedCall:
    """A request and how it ended: what one span and one duration measurement are made of."""

    session: TrackedSession
    direction: str  # the request's: c2s (the client's call) or s2c (the server's)
    name: str  # the span name, `{mcp.method.name} {target}`
    attributes: dict[str, Any]
    start: float
    end: float | None = None
    outcome: str = ""  # ok | error | tool-error | input-required | unanswered
    error_type: str | None = None
    error_message: str | None = None
    parent: TraceParent | None = None
    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    cancelled: bool = False
    keys: list[tuple] = field(default_factory=list)  # where the tracker finds it by progress token and id

    @property
    def method(self) -> str:
        return self.attributes[otel.METHOD]


@dataclass(frozen=True, slots=True)
class SessionDone:
    """A session that ended (or the trace did): its span and its duration are made of it."""

    session: TrackedSession
    end: float
    error_type: str | None


@dataclass(frozen=True, slots=True)
class TracedProblem:
    """A violation, an error event or a failed HTTP exchange: counted by class."""

    session: TrackedSession
    kind: str  # violation | error
    name: str  # the violation code or error class


Finished = TracedCall | SessionDone | TracedProblem


def _answers(event: dict[str, Any]) -> dict[Any, dict]:
    """The answers a message event carries, by id."""
    msg = event.get("msg")
    return {item["id"]: item for item in (msg if isinstance(msg, list) else [msg])
            if isinstance(item, dict) and "method" not in item and _plain_id(item.get("id"))}


def _plain_id(value: Any) -> bool:
    """A JSON-RPC id a dict can key (a string or a number; a peer may send anything)."""
    return type(value) in (str, int, float)


class CallTracker:
    """Calls and sessions out of a trace's rebuilt steps, as they finish.

    Args:
        header: the trace's header (its `upstream` gives `server.address`).
    """

    def __init__(self, header: dict[str, Any] | None = None) -> None:
        self.header = header or {}
        self.sessions: OrderedDict[int, TrackedSession] = OrderedDict()  # by the report's identity
        self._calls: dict[int, TracedCall] = {}  # in flight, by the identity of their `TracedOperation`
        self._by_token: dict[tuple[int, Any], TracedCall] = {}
        self._by_id: dict[tuple[int, str, Any], TracedCall] = {}
        self.last_ts: float | None = None

    def take(self, event: dict[str, Any], step: EventEffect | None) -> list[Finished]:
        """What one trace event finished (often nothing)."""
        kind = event["kind"]
        if kind == Kind.TRACE:
            self.header = event
            return []
        if step is None:
            return []
        ts = event["ts"]
        self.last_ts = ts
        state = self._session(step.session, ts)
        state.last = ts
        out: list[Finished] = []
        if kind == Kind.MESSAGE:
            self._message(state, event, step, out)
        else:
            self._other(state, event, step, out)
        if step.finished:
            self._finished(step.finished, _answers(event) if kind == Kind.MESSAGE else {}, out)
        if not state.sessionless and not state.done and ended(state.report):
            self._end(state, ts, out)
        return out

    def finish(self) -> list[Finished]:
        """The trace is read to its end: the calls still open were never answered; every session ends."""
        out: list[Finished] = []
        for state in list(self.sessions.values()):
            self._end(state, state.last, out, sessionless_too=True)
        return out

    # ---- sessions -------------------------------------------------------------------------------

    def _session(self, report: SessionReport, ts: float) -> TrackedSession:
        state = self.sessions.get(id(report))
        if state is None:
            state = self.sessions[id(report)] = TrackedSession(report.id, report, report.start, ts)
            if len(self.sessions) > MAX_SESSIONS:
                self.sessions.popitem(last=False)
        state.key = report.id  # a legacy stream's connection key becomes its session's id
        return state

    def _end(self, state: TrackedSession, ts: float, out: list[Finished], *, sessionless_too: bool = False) -> None:
        """The session ended (or, `sessionless_too`, the trace did: the calls in flight end unanswered):
        its span ends once. The session is still followed: a client may go on under its key (the model does)."""
        if state.sessionless and not sessionless_too:
            return
        report = state.report
        if sessionless_too:  # the trace's end: what is still open was never answered (a call in flight when
            # its session was lost may still be answered, or its exchange fail, later in the trace)
            for op in [entry.op for entry in report.open_calls.values()] + report.awaiting + [task.op for task in report.tasks.values()] + report.shadowed:
                call = self._calls.pop(id(op), None) if op is not None else None
                if call is not None:
                    self._forget(call)
                    out.append(self._unanswered(call, ts, op))
        if not state.sessionless and not state.done:
            ending = report.session.ending
            lost = ending is not None and ending.cause not in NORMAL_ENDS
            out.append(SessionDone(state, ts, ending.cause.name.lower() if lost else None))
        state.done = True

    # ---- messages -------------------------------------------------------------------------------

    def _message(self, state: TrackedSession, event: dict[str, Any], step: EventEffect, out: list[Finished]) -> None:
        msg = event.get("msg")
        items = msg if isinstance(msg, list) else [msg]
        requests = {item["id"]: item for item in items if isinstance(item, dict) and "method" in item and _plain_id(item.get("id"))}
        notifications = iter([item for item in items if isinstance(item, dict) and "method" in item and "id" not in item])
        for entry in step.added:
            if entry.kind == "request":
                item = requests.get(entry.id)
                op = entry.op
                if op is not None and op.rounds[0] is not entry:  # a later round: an event of its operation's span
                    call = self._calls.get(id(op))
                    if call is not None and len(call.events) < MAX_EVENTS:
                        call.events.append((entry.ts, ROUND, {"mcpbench.round": len(op.rounds), otel.REQUEST_ID: str(entry.id)}))
                elif item is not None:
                    self._open(state, entry, item)
            elif entry.kind == "notification":
                item = next(notifications, None)
                if item is not None:
                    self._notification(state, entry, item)
            elif entry.kind == "violation":
                out.append(TracedProblem(state, "violation", entry.name))
                state.note(entry.ts, "mcpbench.violation", {otel.VIOLATION_CODE: entry.name, "mcpbench.detail": entry.detail[:200]})
        if step.answered:
            for entry in step.answered:
                op = entry.op
                call = self._calls.get(id(op)) if op is not None else None
                if call is not None and op is not None and (len(op.rounds) > 1 or entry.outcome == INPUT_REQUIRED) and len(call.events) < MAX_EVENTS:
                    latency = round((entry.latency or 0.0) * 1000, 3)
                    call.events.append((entry.end or entry.ts, ROUND_ANSWERED, {"mcpbench.round": op.rounds.index(entry) + 1,
                                                                                "mcpbench.outcome": entry.outcome, "mcpbench.latency_ms": latency}))

    def _finished(self, ops: list[TracedOperation], answers: dict, out: list[Finished]) -> None:
        for op in ops:
            call = self._calls.pop(id(op), None)
            if call is not None:
                self._forget(call)
                out.append(self._answered(call, op, answers.get(op.last.id)))

    def _open(self, state: TrackedSession, entry: Entry, item: dict[str, Any]) -> None:
        params = item.get("params")
        name, attributes = otel.request_attributes(item["method"], params)
        attributes[otel.REQUEST_ID] = str(entry.id)
        meta = params.get("_meta") if isinstance(params, dict) else None
        parent = TraceParent.parse(meta.get("traceparent")) if isinstance(meta, dict) else None
        call = self._calls[id(entry.op)] = TracedCall(state, entry.dir or "c2s", name, attributes, entry.ts, parent=parent)
        report_id = id(state.report)
        token = progress_token(params)
        if token is not None:
            self._by_token[(report_id, token)] = call
            call.keys.append((report_id, token))
        self._by_id[(report_id, call.direction, entry.id)] = call
        call.keys.append((report_id, call.direction, entry.id))

    def _notification(self, state: TrackedSession, entry: Entry, item: dict[str, Any]) -> None:
        params = item.get("params") if isinstance(item.get("params"), dict) else {}
        method = item["method"]
        report_id = id(state.report)
        call = None
        if method == PROGRESS:
            call = self._by_token.get((report_id, params.get("progressToken")))
            fields = {key: params[key] for key in ("progress", "total", "message") if isinstance(params.get(key), (int, float, str))}
        elif method == CANCELLED:
            call = self._by_id.get((report_id, entry.dir, params.get("requestId")))
            fields = {"mcpbench.reason": params["reason"]} if isinstance(params.get("reason"), str) else {}
            if call is not None:
                call.cancelled = True
        else:
            fields = {}
            if method in otel.RESOURCE_METHODS and isinstance(params.get("uri"), str):
                fields[otel.RESOURCE_URI] = params["uri"]
        if call is not None and len(call.events) < MAX_EVENTS:
            call.events.append((entry.ts, method, fields))
        elif call is None:
            state.note(entry.ts, method, fields)

    def _answered(self, call: TracedCall, op: TracedOperation, answer: dict[str, Any] | None) -> TracedCall:
        entry = op.last
        call.end = op.end if op.end is not None else entry.ts + (entry.latency or 0.0)
        call.outcome = op.outcome
        if len(op.rounds) > 1:
            call.attributes["mcpbench.rounds"] = len(op.rounds)
            call.attributes["mcpbench.client_wait_ms"] = round(op.client_wait * 1000, 3)
        if op.task is not None and op.task.op is op:
            call.attributes["mcpbench.task.id"] = op.task.id
            call.attributes["mcpbench.task.polls"] = op.task.polls
        error = answer.get("error") if isinstance(answer, dict) and op.last.error_code is not None else None
        if isinstance(error, dict):
            code = str(error.get("code"))
            call.error_type = code
            call.attributes[otel.STATUS_CODE] = code
            call.error_message = error.get("message") if isinstance(error.get("message"), str) else None
        elif op.outcome == "tool-error":
            call.error_type = otel.TOOL_ERROR
            call.error_message = op.detail or None
        return call

    def _unanswered(self, call: TracedCall, ts: float, op: TracedOperation | None = None) -> TracedCall:
        call.end = max(ts, call.start)
        call.outcome = open_outcome(op) if op is not None else "unanswered"
        if call.outcome == INPUT_REQUIRED:  # asked for input, never retried: it ended with that answer
            call.end = op.last.end if op is not None and op.last.end is not None else call.end
            return call
        if call.outcome not in ("unanswered", CANCELLED_OUTCOME):
            return call
        call.error_type = "cancelled" if call.cancelled or call.outcome == CANCELLED_OUTCOME else otel.UNANSWERED
        return call

    def _forget(self, call: TracedCall) -> None:
        for key in call.keys:
            table = self._by_id if len(key) == 3 else self._by_token
            if table.get(key) is call:
                del table[key]

    # ---- other events ---------------------------------------------------------------------------

    def _other(self, state: TrackedSession, event: dict[str, Any], step: EventEffect, out: list[Finished]) -> None:
        for entry in step.added:
            if entry.kind == "violation":
                out.append(TracedProblem(state, "violation", entry.name))
                state.note(entry.ts, "mcpbench.violation", {otel.VIOLATION_CODE: entry.name, "mcpbench.detail": entry.detail[:200]})
            elif entry.kind == "http":
                out.append(TracedProblem(state, "error", f"http-{entry.outcome}"))
                state.note(entry.ts, "mcpbench.http", {"mcpbench.request": entry.name, "http.response.status_code": int(entry.outcome)})
            elif entry.kind == "error" or (entry.kind == "stream" and entry.detail):
                name = entry.name if entry.kind == "error" else "stream-error"
                if state.transport == STDIO and entry.kind == "error":
                    continue  # the tee's "ended before its answer": the call itself says so
                out.append(TracedProblem(state, "error", name))
                state.note(entry.ts, "mcpbench.error", {otel.ERROR_CLASS: name, "mcpbench.detail": entry.detail[:200]})
