"""Trace events → sessions, one event at a time: what `inspect` and the live view both show.

Requests are paired with their answers by the protocol core's `Session`, the same one the
recorders use; the violations shown are the ones the recorder wrote, so nothing is counted twice.
`Rebuild.take` takes the events of a whole trace (`inspect`) or of one that is still growing (the
live view, through `trace/follow.py`) and says what each one added: the timeline entries it made
and the requests it answered.
"""

from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.http import FOREIGN_ANSWER_ID, PROTOCOL_VERSION, foreign_id_warning, pair_with_post
from mcpbench.protocol.jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response
from mcpbench.protocol.session import C2S, CLOSED, LOST, S2C, Direction, Exchange, Session, Trigger
from mcpbench.protocol.transports import LEGACY_SSE, STREAMABLE_HTTP
from mcpbench.protocol.versions import INPUT_REQUESTS, asks_for_input, meta_version, step_name
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


def outcome(answer: Response | ErrorResponse) -> tuple[str, str]:
    """("ok" | "tool-error" | "error" | "input-required", detail) of an answer."""
    if isinstance(answer, ErrorResponse):
        return "error", f"{answer.code}: {answer.message}"
    result = answer.result
    if asks_for_input(result):
        return "input-required", ", ".join(sorted(result.get(INPUT_REQUESTS) or {}))
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

    @property
    def calls(self) -> list[Entry]:
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


@dataclass(slots=True)
class Step:
    """What one trace event did to its session: the entries it added, the requests it answered
    (their `latency` and `outcome` now set)."""

    session: SessionReport
    added: list[Entry]
    answered: list[Entry]


class Rebuild:
    """Sessions rebuilt from trace events as they come.

    Args:
        keep: keep each session's timeline in `SessionReport.entries` (`inspect`); without it the
            caller keeps what `take` returns for as long as it wants (a live view, bounded).
    """

    def __init__(self, *, keep: bool = True) -> None:
        self.keep = keep
        self.sessions: dict[str, SessionReport] = {}
        self.flows: dict[Any, _Flow] = {}  # HTTP exchanges by flow (bounded by `forget_flow`)

    def take(self, event: dict[str, Any]) -> Step | None:
        """Take one trace event; None for the header."""
        kind = event["kind"]
        if kind == Kind.TRACE:
            return None
        key = event.get("session") or "-"
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
        step = Step(report, [], [])
        _take(step, event, self.flows)
        if kind == Kind.HTTP:
            self.flows.pop(event.get("flow"), None)  # the exchange is over
        if self.keep and step.added:
            report.entries += step.added
        return step

    def forget(self, key: str) -> None:
        """Drop a session (a live view keeps a bounded number)."""
        self.sessions.pop(key, None)

    def finish(self) -> None:
        """The trace is read to its end: the calls still open were never answered."""
        for report in self.sessions.values():
            for entry in report.open_calls.values():
                entry.outcome = "unanswered"


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
            added.append(Entry(ts, direction, "violation", "invalid-message", detail=exc.reason))
            return
        http = event.get("http") if isinstance(event.get("http"), dict) else {}
        _message(step, message, Direction(direction), ts, flow, http, flows)
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
            added.append(Entry(ts, direction, "http", f"{event.get('method')} {event.get('path')}", outcome=str(status)))
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
        if event.get("method") == "POST" and step_ in ("open", "close"):
            return  # one per SSE answer: the request line already shows it
        if report.transport == LEGACY_SSE and event.get("method") == "GET" and step_ in ("close", "error"):
            report.session.lose(Trigger.STREAM_ENDED, step_)  # a legacy session lives on its stream
        name = f"{event.get('method', '')} {event.get('path', '')} stream {step_}".strip()
        added.append(Entry(ts, direction, kind, name + (" (by the client)" if by_client else ""), detail=detail))
    elif kind == Kind.ERROR:
        added.append(Entry(ts, direction, kind, event.get("code") or kind, detail=event.get("detail") or event.get("error") or ""))


def _message(step: Step, message: jsonrpc.Message, direction: Direction, ts: float, flow: Any,
             http: dict[str, Any], flows: dict[Any, _Flow]) -> None:
    report = step.session
    items = message.items if isinstance(message, jsonrpc.Batch) else (message,)
    for item in items:
        if isinstance(item, Request):
            entry = Entry(ts, direction.value, "request", step_name(item.method, item.params), id=item.id)
            step.added.append(entry)
            report.requests += 1
            report.open_calls[(direction.value, _call_id(report, flow, item.id))] = entry
            if direction is C2S and flow is not None:
                known = flows.setdefault(flow, _Flow())
                known.request_id, known.label = item.id, f"{item.method} (id {item.id!r})"
        elif isinstance(item, Notification):
            step.added.append(Entry(ts, direction.value, "notification", item.method))
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
        if isinstance(result, Exchange):
            entry = report.open_calls.pop((result.direction.value, result.request.id), None)
            if entry is not None:
                entry.latency = result.latency
                entry.outcome, entry.detail = outcome(result.answer)
                step.answered.append(entry)


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
