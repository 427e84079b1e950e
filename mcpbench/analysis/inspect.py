"""`mcpbench inspect`: what happened in a trace, session by session, operation by operation.

Sessions and operations come from the trace model (`trace/model.py`), which every view shares: the
protocol core's `Session` pairs requests with their answers, a 2026-07-28 multi round-trip request
is one operation with its rounds under it, and the violations shown are the ones the recorder wrote
plus the model's operation rules, so nothing is counted twice. Sessionless Streamable HTTP traffic
(a stateless server, a refused probe) is one logical stream per protocol version, each request
paired with its answer by its HTTP exchange.
"""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpbench.protocol.errors import EXIT_FAILED, EXIT_OK
from mcpbench.trace.model import NOT_MCP, Entry, Rebuild, SessionReport, TracedOperation, outcome
from mcpbench.measures.stats import percentile
from mcpbench.trace import shared
from mcpbench.trace.reader import TraceReader, collector_paused

__all__ = ["ARROWS", "Entry", "SessionReport", "TraceSummary", "TracedOperation", "outcome", "render", "suite", "summarize"]

ARROWS = {"c2s": "→", "s2c": "←", None: "·"}


@dataclass
class TraceSummary:
    path: str
    header: dict | None
    sessions: list[SessionReport]
    torn: str | None

    def exit_code(self, *, strict: bool = False) -> int:
        """`inspect`'s verdict: 1 under `strict` when a session broke a protocol rule, else 0."""
        violated = any(session.of_kind("violation") for session in self.sessions)
        return EXIT_FAILED if strict and violated else EXIT_OK

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
            for op in session.operations:  # one per operation: a multi round-trip request counts once
                stats = methods.setdefault(op.name, {"count": 0, "rounds": 0, "outcomes": Counter(), "latencies": [], "client_wait": 0.0})
                stats["count"] += 1
                stats["rounds"] += len(op.rounds)
                stats["outcomes"][op.outcome] += 1
                stats["client_wait"] += op.client_wait
                if op.latency is not None:
                    stats["latencies"].append(op.latency * 1000)
        for stats in methods.values():
            samples = stats.pop("latencies")
            stats["outcomes"] = dict(stats["outcomes"])
            stats["client_wait_ms"] = round(stats.pop("client_wait") * 1000, 3)
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
                    "operations": len(s.operations),
                    "client": s.client,
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
            "operations": [_op_json(s.id, op) for s in self.sessions for op in s.operations if len(op.rounds) > 1],
            "tasks": [_task_json(s.id, task) for s in self.sessions for task in s.tasks.values()],
            "streams": [_stream_json(s.id, op) for s in self.sessions for op in s.operations if op.stream is not None],
            "violations": dict(violations),
            "warnings": dict(warnings),
        }


def _op_json(session: str, op: TracedOperation) -> dict[str, Any]:
    """A multi round-trip operation with its rounds (`--json`'s `operations`)."""
    ms = lambda seconds: None if seconds is None else round(seconds * 1000, 3)  # noqa: E731
    return {
        "session": session, "name": op.name, "outcome": op.outcome, "latency_ms": ms(op.latency),
        "client_wait_ms": ms(op.client_wait), "line": op.first.line,
        "rounds": [{"id": r.id, "line": r.line, "latency_ms": ms(r.latency), "outcome": r.outcome, "detail": r.detail} for r in op.rounds],
    }


def _task_json(session: str, task: Any) -> dict[str, Any]:
    """A task with the operation it ended (`--json`'s `tasks`)."""
    ms = lambda seconds: None if seconds is None else round(seconds * 1000, 3)  # noqa: E731
    return {
        "session": session, "task": task.id, "operation": task.op.name, "line": task.op.first.line,
        "outcome": task.op.outcome, "status": task.status, "statuses": [status for _, status in task.statuses],
        "polls": task.polls, "create_ms": ms(task.create_time), "complete_ms": ms(task.complete_time),
    }


def _stream_json(session: str, op: TracedOperation) -> dict[str, Any]:
    """A listen stream (`--json`'s `streams`)."""
    stream = op.stream
    assert stream is not None
    return {
        "session": session, "id": op.first.id, "line": op.first.line, "outcome": op.outcome, "opened": stream.opened,
        "acknowledged": stream.acknowledged, "closed": stream.closed, "ending": stream.ending,
        "notifications": [{"ts": ts, "method": method} for ts, method in stream.notifications],
    }


def summarize(path: str | Path) -> TraceSummary:
    """Read a trace and build its report.

    Raises:
        TraceError: the file is missing or malformed (names file and line).
    """
    reader = TraceReader(path)
    rebuild = Rebuild()
    # The report keeps every session's timeline: a collection while it grows walks it all and frees nothing.
    with collector_paused():
        rebuild.take_all(reader)  # its entries numbered with their lines: writers write no blank lines
        rebuild.finish()
    notes = [reader.torn] if reader.torn else []
    if pending := shared.parts(path):  # tees sharing the path: sessions not in it yet
        notes.append(f"{len(pending)} session part(s) beside it not added yet (a tee still recording to it, or one "
                     f"killed: mcpbench trace finish {path} adds them)")
    return TraceSummary(str(path), reader.header, list(rebuild.sessions.values()), "; ".join(notes) or None)


# The narrowest request-name column of `render`.
NAME_WIDTH = 34


def _task_tail(op: TracedOperation) -> str:
    """An operation that became a task: open until the task ends, its statuses and polls."""
    task = op.task
    assert task is not None
    latency = f"{op.latency * 1000:9.2f} ms" if op.latency is not None else " " * 12
    statuses = " → ".join(status for _, status in task.statuses)
    return (f"{latency}  {op.outcome or 'open'}" + (f": {op.detail}" if op.detail else "")
            + f"  (task {task.id}: {statuses}; created in {task.create_time * 1000:.2f} ms, {task.polls} polls)")


def _stream_tail(op: TracedOperation) -> str:
    """A `subscriptions/listen` stream: how long it lasted, its acknowledgement and notifications."""
    stream = op.stream
    assert stream is not None
    lasted = f"{(stream.closed - stream.opened) * 1000:9.2f} ms" if stream.closed is not None else " " * 12
    acked = f"acknowledged after {(stream.acknowledged - stream.opened) * 1000:.2f} ms" if stream.acknowledged is not None else "never acknowledged"
    kinds = Counter(method.removeprefix("notifications/") for _, method in stream.notifications if not method.endswith("/acknowledged"))
    said = ", ".join(f"{n} {kind}" for kind, n in kinds.items()) or "no notifications"
    return f"{lasted}  {op.outcome or 'listening'}" + (f": {op.detail}" if op.detail else "") + f"  (listen stream: {acked}; {said})"


def _operation_lines(session: SessionReport, op: TracedOperation, at: str, arrow: str, width: int) -> list[str]:
    """A multi round-trip operation: once, its latency first request to final answer, its rounds under it."""
    latency = f"{op.latency * 1000:9.2f} ms" if op.latency is not None else " " * 12
    wait = f", client {op.client_wait * 1000:.2f} ms between rounds" if op.client_wait else ""
    tail = f"  {op.outcome or 'open'}" + (f": {op.detail}" if op.detail else "") + f"  ({len(op.rounds)} rounds{wait})"
    lines = [f"  {at} {arrow} {op.name:<{width}} {latency}{tail}"]
    for number, entry in enumerate(op.rounds, 1):
        r_at = f"+{entry.ts - session.start:8.3f}s"
        r_latency = f"{entry.latency * 1000:9.2f} ms" if entry.latency is not None else " " * 12
        r_tail = f"  {entry.outcome}" + (f": {entry.detail}" if entry.detail else "")
        label = f"  round {number} (id {entry.id!r}) {r_at.replace(' ', '')}"
        lines.append(f"  {' ' * len(r_at)}   {label:<{width}} {r_latency}{r_tail}")
    return lines


def render(report: TraceSummary) -> str:
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
        calls = session.operations
        width = max([NAME_WIDTH] + [len(op.name) for op in calls])  # long names widen, never cut
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
                op = entry.op
                if op is not None and op.rounds[0] is not entry:
                    continue  # a later round: shown under its operation
                if op is not None and op.task is not None and op.task.op is op:
                    lines.append(f"  {at} {arrow} {entry.name:<{width}} {_task_tail(op)}")
                elif op is not None and op.stream is not None:
                    lines.append(f"  {at} {arrow} {entry.name:<{width}} {_stream_tail(op)}")
                elif op is None or len(op.rounds) == 1:
                    latency = f"{entry.latency * 1000:9.2f} ms" if entry.latency is not None else " " * 12
                    tail = f"  {entry.outcome}" + (f": {entry.detail}" if entry.detail else "")
                    lines.append(f"  {at} {arrow} {entry.name:<{width}} {latency}{tail}")
                else:
                    lines += _operation_lines(session, op, at, arrow, width)
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
        outcomes = Counter(op.outcome for op in calls)
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


def suite(report: TraceSummary) -> "Suite":
    """The trace's sessions as a CI suite: each violation a failure naming session, line and rule;
    a session without any, one passing case."""
    from mcpbench.ci.cases import FAILED, Case, Suite

    out = Suite(report.path, stats={"sessions": len(report.sessions),
                                    "requests": sum(len(session.operations) for session in report.sessions),
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
