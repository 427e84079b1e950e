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
from mcpbench.protocol.session import Direction, Exchange, Session
from mcpbench.protocol.versions import INPUT_REQUESTS, asks_for_input, step_name
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
    kind: str  # request | notification | violation | stderr | http | error | process
    name: str
    latency: float | None = None  # seconds, requests only
    outcome: str = ""
    detail: str = ""
    line: int | None = None  # the trace line it came from (violations)


@dataclass
class SessionReport:
    id: str
    transport: str
    start: float
    entries: list[Entry] = field(default_factory=list)
    session: Session = field(default_factory=Session)
    exit_code: int | None = None
    open_calls: dict[tuple[str, Any], Entry] = field(default_factory=dict)

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
        for session in self.sessions:
            for entry in session.entries:
                if entry.kind == "violation":
                    violations[entry.name] += 1
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
                    "stderr_lines": len(s.of_kind("stderr")),
                    "exit_code": s.exit_code,
                }
                for s in self.sessions
            ],
            "methods": methods,
            "violations": dict(violations),
        }


def summarize(path: str | Path) -> Report:
    """Read a trace and build its report.

    Raises:
        TraceError: the file is missing or malformed (names file and line).
    """
    reader = TraceReader(path)
    sessions: dict[str, SessionReport] = {}
    for line, event in enumerate(reader, 1):  # a trace line per event: writers write no blank lines
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
        report = sessions.get(key)
        if report is None:
            report = sessions[key] = SessionReport(key, event.get("transport", "?"), event["ts"])
        known = len(report.entries)
        _take(report, event)
        for entry in report.entries[known:]:
            entry.line = line
    for report in sessions.values():
        for entry in report.open_calls.values():
            entry.outcome = "unanswered"
    return Report(str(path), reader.header, list(sessions.values()), reader.torn)


def _take(report: SessionReport, event: dict[str, Any]) -> None:
    kind, ts, direction = event["kind"], event["ts"], event.get("dir")
    if kind == Kind.MESSAGE:
        try:
            message = jsonrpc.from_obj(event.get("msg"))
        except InvalidMessage as exc:
            report.entries.append(Entry(ts, direction, "violation", "invalid-message", detail=exc.reason))
            return
        _message(report, message, Direction(direction), ts)
    elif kind == Kind.VIOLATION:
        report.entries.append(Entry(ts, direction, "violation", event.get("code", "?"), detail=event.get("detail", "")))
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
        if event.get("method") == "POST" and step in ("open", "close"):
            return  # one per SSE answer: the request line already shows it
        name = f"{event.get('method', '')} {event.get('path', '')} stream {step}".strip()
        report.entries.append(Entry(ts, direction, kind, name, detail=event.get("error") or event.get("reason") or ""))
    elif kind == Kind.ERROR:
        report.entries.append(Entry(ts, direction, kind, event.get("code") or kind, detail=event.get("detail") or event.get("error") or ""))


def _message(report: SessionReport, message: jsonrpc.Message, direction: Direction, ts: float) -> None:
    items = message.items if isinstance(message, jsonrpc.Batch) else (message,)
    for item in items:
        if isinstance(item, Request):
            entry = Entry(ts, direction.value, "request", step_name(item.method, item.params))
            report.entries.append(entry)
            report.open_calls[(direction.value, item.id)] = entry
        elif isinstance(item, Notification):
            report.entries.append(Entry(ts, direction.value, "notification", item.method))
    for result in report.session.observe(direction, message, ts):
        if isinstance(result, Exchange):
            entry = report.open_calls.pop((result.direction.value, result.request.id), None)
            if entry is not None:
                entry.latency = result.latency
                entry.outcome, entry.detail = outcome(result.answer)


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
            f"{len(session.of_kind('stderr'))} stderr lines"
            + (f", exit {session.exit_code}" if session.exit_code is not None else "")
        )
    if report.torn:
        lines.append("")
        lines.append(f"note: {report.torn}")
    return "\n".join(lines)


def suite(report: Report) -> "Suite":
    """The trace's sessions as a CI suite: each violation a failure naming session, line and rule;
    a session without any, one passing case."""
    from mcpbench.ci.cases import FAILED, Case, Suite

    out = Suite(report.path, stats={"sessions": len(report.sessions),
                                    "requests": sum(len(session.calls) for session in report.sessions),
                                    "violations": sum(len(session.of_kind("violation")) for session in report.sessions)})
    if report.torn:
        out.notes.append(report.torn)
    for session in report.sessions:
        violations = session.of_kind("violation")
        for entry in violations:
            where = f"{report.path}:{entry.line}" if entry.line else report.path
            out.cases.append(Case(f"session {session.id} line {entry.line}: {entry.name}", "mcpbench.inspect", FAILED,
                                  message=f"{entry.name}: {entry.detail[:200]}",
                                  detail=f"{where}: session {session.id}: {entry.name}: {entry.detail}"))
        if not violations:
            out.cases.append(Case(f"session {session.id}", "mcpbench.inspect"))
    return out
