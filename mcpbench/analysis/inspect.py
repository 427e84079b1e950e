"""`mcpbench inspect`: what happened in a trace, session by session.

Sessions are rebuilt by `analysis/rebuild.py`, which the live view shares: the protocol core's
`Session` pairs requests with their answers, and the violations shown are the ones the recorder
wrote, so nothing is counted twice. Sessionless Streamable HTTP traffic (a stateless server, a
refused probe) is one logical stream per protocol version, each request paired with its answer by
its HTTP exchange.
"""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpbench.analysis.rebuild import NOT_MCP, Entry, Rebuild, SessionReport, outcome
from mcpbench.stats import percentile
from mcpbench.trace import shared
from mcpbench.trace.reader import TraceReader

__all__ = ["ARROWS", "Entry", "Report", "SessionReport", "outcome", "render", "suite", "summarize"]

ARROWS = {"c2s": "→", "s2c": "←", None: "·"}


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


def summarize(path: str | Path) -> Report:
    """Read a trace and build its report.

    Raises:
        TraceError: the file is missing or malformed (names file and line).
    """
    reader = TraceReader(path)
    rebuild = Rebuild()
    for line, event in enumerate(reader, 1):  # a trace line per event: writers write no blank lines
        step = rebuild.take(event)
        if step is not None:
            for entry in step.added:
                entry.line = line
    rebuild.finish()
    notes = [reader.torn] if reader.torn else []
    if pending := shared.parts(path):  # tees sharing the path: sessions not in it yet
        notes.append(f"{len(pending)} session part(s) beside it not added yet (a tee still recording to it, or one "
                     f"killed: mcpbench trace finish {path} adds them)")
    return Report(str(path), reader.header, list(rebuild.sessions.values()), "; ".join(notes) or None)


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
