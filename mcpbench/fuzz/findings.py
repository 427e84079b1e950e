"""Findings: each one a trace `mcpbench replay` reproduces, one table, JSON and CI suites.

A finding's trace holds one session: the handshake as it went, the case's `tools/call`, and what
came of it (the answer, or an `error` event saying none came). Replayed, a crash or a hang fails
the call again; an answer that leaked or broke a schema comes again, compared with the recording.
"""

import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpbench.ci.cases import FAILED, PASSED, Case, Suite
from mcpbench.fuzz.cases import CallCase, dumps
from mcpbench.fuzz.protocol_cases import PROTOCOL_TOOL
from mcpbench.fuzz.session import RAW, Logged
from mcpbench.trace.format import Kind, text_or_b64
from mcpbench.trace.writer import TraceWriter

# The arguments shown in the table are cut to this many characters.
CASE_CHARS = 60


@dataclass
class Finding:
    cls: str
    case: CallCase
    evidence: str
    log: list[Logged] = field(default_factory=list)  # the handshake and the call, as they went
    failure: str | None = None  # why no answer came (crash, hang)
    trace: Path | None = None
    version: str | None = None  # the protocol version the session spoke
    bound: float | None = None  # slow: the latency (seconds) past which the call was slow
    grew: int | None = None  # memory: the bytes of resident memory the server gained over the finding's calls

    @property
    def key(self) -> tuple[str, str, str | None]:
        """A finding is kept once per key: a class and a tool, or a class and a protocol case; per version spoken."""
        return self.cls, self.case.tool if self.case.tool != PROTOCOL_TOOL else f"{PROTOCOL_TOOL} {self.case.kind}", self.version

    def size(self) -> int:
        """How big the case is: a smaller one replaces a larger of the same class and tool (shrinking)."""
        return len(dumps(self.case.arguments))

    def arguments_text(self, limit: int | None = CASE_CHARS) -> str:
        text = dumps(self.case.arguments).decode(errors="replace")
        return text if limit is None or len(text) <= limit else text[:limit - 1] + "…"

    def to_json(self) -> dict[str, Any]:
        return {"class": self.cls, "tool": self.case.tool, "kind": self.case.kind, "path": self.case.path,
                "seeded": self.case.seeded, "arguments": self.case.arguments, "evidence": self.evidence,
                "version": self.version, "trace": str(self.trace) if self.trace else None}


def write_trace(finding: Finding, path: Path, transport: str, target: str) -> Path:
    """The finding as a trace: one session, its messages in order, an `error` event where no answer came."""
    session = uuid.uuid4().hex[:12]
    fuzz = {"class": finding.cls, "tool": finding.case.tool, "evidence": finding.evidence}
    if finding.bound is not None:  # what a replay's latency is set against
        fuzz["slow_after_s"] = round(finding.bound, 3)
    if finding.grew is not None:  # what a replay's resident memory is set against
        fuzz["memory_grew_bytes"] = finding.grew
    with TraceWriter(path, transport=transport, header={"fuzz": fuzz, "target": target}) as writer:
        for direction, raw, ts in finding.log:
            if direction == RAW:  # a protocol case's bytes: not a message, kept as the violation they are
                writer.write({"kind": Kind.VIOLATION, "session": session, "dir": "c2s", "ts": ts,
                              "code": "invalid-message", "detail": f"fuzz protocol case {finding.case.kind}",
                              "raw": text_or_b64(raw)})
            else:
                writer.message(session, direction, raw, ts)
        if finding.failure is not None:
            writer.write({"kind": Kind.ERROR, "session": session, "dir": "c2s", "detail": f"tools/call: {finding.failure}"})
    finding.trace = path
    return path


def trace_name(index: int, finding: Finding) -> str:
    tool = re.sub(r"[^A-Za-z0-9_-]+", "_", finding.case.tool)[:40]
    return f"{index:03d}-{finding.cls}-{tool}.jsonl"


def write_traces(findings: list[Finding], folder: Path, transport: str, target: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for index, finding in enumerate(findings, 1):
        write_trace(finding, folder / trace_name(index, finding), transport, target)


def table(findings: list[Finding]) -> str:
    """One row per finding: class, tool, the case, the evidence."""
    if not findings:
        return "no findings"
    rows = [("class", "tool", "case", "evidence")]
    versions = {f.version for f in findings}
    rows += [(f.cls, f.case.tool, f"{f.case.describe()} {f.arguments_text()}",
              f"{f.version}: {f.evidence}" if len(versions) > 1 else f.evidence) for f in findings]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join("  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row)).rstrip() for row in rows)


def suite(findings: list[Finding], tools: list[str], classes: tuple[str, ...], seconds: float) -> Suite:
    """A CI suite: one case per class and tool fuzzed, failed where something was found."""
    found = {f.key[:2]: f for f in findings}
    cases = []
    for tool in tools:
        for cls in classes:
            finding = found.get((cls, tool))
            if finding is None:
                cases.append(Case(name=cls, classname=tool, status=PASSED))
            else:
                cases.append(Case(name=cls, classname=tool, status=FAILED, message=finding.evidence,
                                    detail=f"{finding.case.describe()} {finding.arguments_text(None)}\ntrace: {finding.trace}"))
    cases += [Case(name=f"{f.cls} {f.case.kind}", classname=PROTOCOL_TOOL, status=FAILED, message=f.evidence,
                     detail=f"{f.case.arguments}\ntrace: {f.trace}") for f in findings if f.case.tool == PROTOCOL_TOOL]
    return Suite(name="fuzz", cases=cases, time=seconds, stats={"tools": len(tools), "findings": len(findings)})


__all__ = ["Finding", "suite", "table", "write_trace", "write_traces"]
