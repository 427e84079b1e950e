"""`mcpbench inspect`: what happened in a trace, session by session.

Requests are paired with their answers by the protocol core's `Session`, the
same one the recorders use; the violations shown are the ones the recorder
wrote, so nothing is counted twice.
"""

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpbench.analysis.stats import percentile
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response
from mcpbench.protocol.http import FOREIGN_ANSWER_ID, PROTOCOL_VERSION, foreign_id_warning, pair_with_post
from mcpbench.protocol.session import C2S, S2C, Direction, Exchange, Session
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.protocol.versions import INPUT_REQUESTS, asks_for_input, meta_version, step_name
from mcpbench.trace.format import Kind
from mcpbench.trace.reader import TraceReader

ARROWS = {"c2s": "→", "s2c": "←", None: "·"}


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
    kind: str  # request | notification | violation | warning | stderr | http | error | process | stream
    name: str
    latency: float | None = None  # seconds, requests only
    outcome: str = ""
    detail: str = ""


@dataclass
class SessionReport:
    id: str
    transport: str
    start: float
    entries: list[Entry] = field(default_factory=list)
    session: Session = field(default_factory=Session)
    exit_code: int | None = None
    open_calls: dict[tuple[str, Any], Entry] = field(default_factory=dict)
    sessionless: bool = False  # sessionless Streamable HTTP: a logical stream of one protocol version

    @property
    def calls(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "request"]

    def of_kind(self, kind: str) -> list[Entry]:
        return [e for e in self.entries if e.kind == kind]


@dataclass
class Report:
    path: str
    header: dict | None
    sessions: list[SessionReport]
    torn: str | None

    def to_json(self) -> dict[str, Any]:
        methods: dict[str, dict[str, Any]] = {}
        violations: Counter = Counter()
        warnings: Counter = Counter()
        for session in self.sessions:
            for entry in session.entries:
                if entry.kind == "violation":
                    violations[entry.name] += 1
                elif entry.kind == "warning":
                    warnings[entry.name] += 1
                elif entry.kind == "request":
                    stats = methods.setdefault(entry.name, {"count": 0, "outcomes": Counter(), "latencies": []})
                    stats["count"] += 1
                    stats["outcomes"][entry.outcome] += 1
                    if entry.latency is not None:
                        stats["latencies"].append(entry.latency * 1000)
        for stats in methods.values():
            samples = stats.pop("latencies")
            stats["outcomes"] = dict(stats["outcomes"])
            stats["latency_ms"] = {q: round(percentile(samples, n), 3) if samples else None for q, n in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))}
        return {
            "trace": self.path,
            "header": self.header,
            "torn": self.torn,
            "sessions": [
                {
                    "id": s.id,
                    "transport": s.transport,
                    "era": s.session.era.value if s.session.era else None,
                    "version": s.session.version,
                    "handshake_ms": None if s.session.handshake_time is None else round(s.session.handshake_time * 1000, 3),
                    "requests": len(s.calls),
                    "notifications": len(s.of_kind("notification")),
                    "violations": len(s.of_kind("violation")),
                    "warnings": len(s.of_kind("warning")),
                    "sessionless": s.sessionless,
                    "stderr_lines": len(s.of_kind("stderr")),
                    "exit_code": s.exit_code,
                }
                for s in self.sessions
            ],
            "methods": methods,
            "violations": dict(violations),
            "warnings": dict(warnings),
        }


# The recorders' key of sessionless Streamable HTTP traffic: one per client connection
# (docs/trace-format-http.md). `inspect` shows such traffic as one logical stream per version.
SESSIONLESS_PREFIX = "conn-"
SESSIONLESS = "sessionless"
# HTTP exchanges that are not MCP (an OAuth discovery probe, a favicon): no session of any transport.
NOT_MCP = "(not MCP)"
# mitmproxy's word for a stream its client closed: the client's own close, not a failure.
CLIENT_CLOSED = "Client disconnected."


@dataclass(slots=True)
class _Flow:
    """What `inspect` learned of one HTTP exchange: its request's version, id and label, and an error
    answer under another id that the POST paired (`http.pair_with_post`)."""

    version: str | None = None
    request_id: Any = None
    label: str = ""
    foreign: str | None = None  # the warning an `unknown-answer` violation of this flow really is


def summarize(path: str | Path) -> Report:
    """Read a trace and build its report.

    Sessionless Streamable HTTP traffic (a stateless server, a refused probe) is one logical stream
    per protocol version, labelled with it, each request paired with its answer by its HTTP exchange.

    Raises:
        TraceError: the file is missing or malformed (names file and line).
    """
    reader = TraceReader(path)
    sessions: dict[str, SessionReport] = {}
    flows: dict[Any, _Flow] = {}
    for event in reader:
        kind = event["kind"]
        if kind == Kind.TRACE:
            continue
        key = event.get("session") or "-"
        alias = event.get("conn_session")
        if alias and alias != key and key not in sessions and alias in sessions:
            # A legacy GET /sse stream opens under its connection's key; its `endpoint` event
            # names the session: one session, not an empty one per stream.
            sessions = {key if name == alias else name: value for name, value in sessions.items()}
            sessions[key].id = key
        transport = event.get("transport", "?")
        version = None
        if key.startswith(SESSIONLESS_PREFIX) and transport == STREAMABLE_HTTP:
            version = _sessionless_version(event, flows)
            key = f"{SESSIONLESS} {version or '-'}"
        elif event.get("session") is None and kind == Kind.HTTP and event.get("mcp") is False:
            key, transport = NOT_MCP, "http"
        report = sessions.get(key)
        if report is None:
            report = sessions[key] = SessionReport(key, transport, event["ts"], sessionless=key.startswith(SESSIONLESS))
            if report.sessionless:
                report.session = Session.joined(version, transport) if version else Session(None, transport)
        _take(report, event, flows)
    for report in sessions.values():
        for entry in report.open_calls.values():
            entry.outcome = "unanswered"
    return Report(str(path), reader.header, list(sessions.values()), reader.torn)


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


def _take(report: SessionReport, event: dict[str, Any], flows: dict[Any, _Flow]) -> None:
    kind, ts, direction = event["kind"], event["ts"], event.get("dir")
    flow = event.get("flow")
    if kind == Kind.MESSAGE:
        try:
            message = jsonrpc.from_obj(event.get("msg"))
        except InvalidMessage as exc:
            report.entries.append(Entry(ts, direction, "violation", "invalid-message", detail=exc.reason))
            return
        http = event.get("http") if isinstance(event.get("http"), dict) else {}
        _message(report, message, Direction(direction), ts, flow, http, flows)
    elif kind == Kind.VIOLATION:
        code, detail = event.get("code", "?"), event.get("detail", "")
        known = flows.get(flow) if flow is not None else None
        if code == "unknown-answer" and known is not None and known.foreign is not None:
            # A recorder before `pair_with_post` took a refusal's foreign id for a stray answer.
            report.entries.append(Entry(ts, direction, "warning", FOREIGN_ANSWER_ID, detail=known.foreign))
            return
        report.entries.append(Entry(ts, direction, "violation", code, detail=detail))
    elif kind == Kind.WARNING:
        report.entries.append(Entry(ts, direction, "warning", event.get("code", "?"), detail=event.get("detail", "")))
    elif kind == Kind.STDERR:
        text = event.get("text")
        report.entries.append(Entry(ts, direction, "stderr", "stderr", detail=text if isinstance(text, str) else "<binary>"))
    elif kind == Kind.PROCESS:
        if event.get("event") == "exit":
            report.exit_code = event.get("exit_code")
        report.entries.append(Entry(ts, None, "process", event.get("event", "?"), detail=str(event.get("exit_code", event.get("argv", "")))))
    elif kind == Kind.HTTP:
        status = event.get("status")
        if status is not None and status >= 400:
            report.entries.append(Entry(ts, direction, "http", f"{event.get('method')} {event.get('path')}", outcome=str(status)))
    elif kind == Kind.STREAM:
        step = event.get("event", "?")
        detail = event.get("error") or event.get("reason") or ""
        if step == "error" and detail == CLIENT_CLOSED:  # the client closed it: its normal end
            step, detail = "close", "by the client"
        if event.get("method") == "POST" and step in ("open", "close"):
            return  # one per SSE answer: the request line already shows it
        name = f"{event.get('method', '')} {event.get('path', '')} stream {step}".strip()
        report.entries.append(Entry(ts, direction, kind, name, detail=detail))
    elif kind == Kind.ERROR:
        report.entries.append(Entry(ts, direction, kind, event.get("code") or kind, detail=event.get("detail") or event.get("error") or ""))


def _message(report: SessionReport, message: jsonrpc.Message, direction: Direction, ts: float, flow: Any,
             http: dict[str, Any], flows: dict[Any, _Flow]) -> None:
    items = message.items if isinstance(message, jsonrpc.Batch) else (message,)
    for item in items:
        if isinstance(item, Request):
            entry = Entry(ts, direction.value, "request", step_name(item.method, item.params))
            report.entries.append(entry)
            report.open_calls[(direction.value, _call_id(report, flow, item.id))] = entry
            if direction is C2S and flow is not None:
                known = flows.setdefault(flow, _Flow())
                known.request_id, known.label = item.id, f"{item.method} (id {item.id!r})"
        elif isinstance(item, Notification):
            report.entries.append(Entry(ts, direction.value, "notification", item.method))
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


# The narrowest request-name column of `render`.
NAME_WIDTH = 34


def render(report: Report) -> str:
    """The human timeline of every session in the report."""
    header = report.header or {}
    source = header.get("command") or header.get("upstream") or ""
    if isinstance(source, list):
        source = " ".join(source)
    lines = [f"trace {report.path} (mcpbench {header.get('mcpbench', '?')}){': ' + source if source else ''}"]
    for session in report.sessions:
        core = session.session
        era = f"{core.version or '?'} ({core.era.value if core.era else 'unknown era'})"
        handshake = f", handshake {core.handshake_time * 1000:.1f} ms" if core.handshake_time is not None else ""
        calls = session.calls
        width = max([NAME_WIDTH] + [len(entry.name) for entry in calls])  # long names widen, never cut
        lines.append("")
        if session.sessionless:  # one logical stream of every client connection that spoke this version
            era = era if core.version else "no protocol version said"
            lines.append(f"sessionless  {session.transport}  {era}  {len(calls)} requests")
        elif session.id == NOT_MCP:
            lines.append(f"not MCP  {len(session.entries)} HTTP exchanges")
        else:
            lines.append(f"session {session.id}  {session.transport}  {era}{handshake}  {len(calls)} requests")
        for entry in session.entries:
            at = f"+{entry.ts - session.start:8.3f}s"
            arrow = ARROWS.get(entry.dir, "·")
            if entry.kind == "request":
                latency = f"{entry.latency * 1000:9.2f} ms" if entry.latency is not None else " " * 12
                tail = f"  {entry.outcome}" + (f": {entry.detail}" if entry.detail else "")
                lines.append(f"  {at} {arrow} {entry.name:<{width}} {latency}{tail}")
            elif entry.kind == "notification":
                lines.append(f"  {at} {arrow} {entry.name}")
            elif entry.kind == "violation":
                lines.append(f"  {at} {arrow} ! {entry.name}: {entry.detail[:160]}")
            elif entry.kind == "warning":
                lines.append(f"  {at} {arrow} warning {entry.name}: {entry.detail[:200]}")
            elif entry.kind == "stderr":
                lines.append(f"  {at}   stderr: {entry.detail[:160]}")
            elif entry.kind == "process":
                lines.append(f"  {at}   process {entry.name}: {entry.detail}")
            elif entry.kind == "stream":
                lines.append(f"  {at}   {entry.name}" + (f": {entry.detail}" if entry.detail else ""))
            else:
                lines.append(f"  {at} {arrow} {entry.kind} {entry.name} {entry.outcome} {entry.detail}".rstrip())
        outcomes = Counter(e.outcome for e in calls)
        violations = Counter(e.name for e in session.of_kind("violation"))
        lines.append(
            f"  = {len(calls)} requests ({', '.join(f'{n} {k}' for k, n in outcomes.most_common()) or 'none'}), "
            f"{len(session.of_kind('notification'))} notifications, "
            f"{sum(violations.values())} violations{' (' + ', '.join(f'{n} {k}' for k, n in violations.most_common()) + ')' if violations else ''}, "
            + (f"{len(session.of_kind('warning'))} warnings, " if session.of_kind("warning") else "")
            + f"{len(session.of_kind('stderr'))} stderr lines"
            + (f", exit {session.exit_code}" if session.exit_code is not None else "")
        )
    if report.torn:
        lines.append("")
        lines.append(f"note: {report.torn}")
    return "\n".join(lines)
