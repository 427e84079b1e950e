"""What a check concludes (a `CheckRow`), the table the probe prints, and the exit status it ends with (no I/O)."""

import textwrap
from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol.errors import EXIT_FAILED, EXIT_OK

PASS, WARN, FAIL, NA = "pass", "warn", "fail", "n/a"


@dataclass
class CheckRow:
    """One check's line of the table: its verdict, the evidence measured, and what to change when it is not a pass.

    `figures` holds every number behind the evidence (for `--json` and the charts).
    """

    check: str
    verdict: str
    evidence: str
    fix: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    title: str = ""

    def to_json(self) -> dict:
        return {"check": self.check, "title": self.title, "verdict": self.verdict, "evidence": self.evidence,
                "fix": self.fix, "seconds": round(self.seconds, 3), "figures": self.figures}


def not_applicable(check: str, why: str, **figures: Any) -> CheckRow:
    return CheckRow(check, NA, why, figures=figures)


def exit_status(rows: list[CheckRow], *, strict: bool = False) -> int:
    """1 when a check failed (or, with `strict`, warned); else 0."""
    bad = {FAIL, WARN} if strict else {FAIL}
    return EXIT_FAILED if any(row.verdict in bad for row in rows) else EXIT_OK


# Column widths of the printed table: the evidence and the fix wrap within theirs.
CHECK_WIDTH, VERDICT_WIDTH, EVIDENCE_WIDTH, FIX_WIDTH = 12, 7, 58, 58


def render(rows: list[CheckRow]) -> str:
    """The table: check, verdict, evidence, fix; long cells wrap within their column."""
    head = f"{'check':<{CHECK_WIDTH}} {'verdict':<{VERDICT_WIDTH}} {'evidence':<{EVIDENCE_WIDTH}} fix"
    lines = [head, "-" * len(head.rstrip()) + "-" * (FIX_WIDTH - 3)]
    for row in rows:
        evidence = textwrap.wrap(row.evidence, EVIDENCE_WIDTH) or [""]
        fix = textwrap.wrap(row.fix, FIX_WIDTH) or [""]
        for i in range(max(len(evidence), len(fix))):
            first = i == 0
            lines.append(
                f"{row.check if first else '':<{CHECK_WIDTH}} {row.verdict if first else '':<{VERDICT_WIDTH}} "
                f"{evidence[i] if i < len(evidence) else '':<{EVIDENCE_WIDTH}} {fix[i] if i < len(fix) else ''}".rstrip()
            )
    return "\n".join(lines)


def markdown(rows: list[CheckRow]) -> str:
    """The table in Markdown (for a README or an issue)."""
    lines = ["| check | verdict | evidence | fix |", "|---|---|---|---|"]
    lines += [f"| {r.check} | {r.verdict} | {_cell(r.evidence)} | {_cell(r.fix)} |" for r in rows]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


__all__ = ["FAIL", "NA", "PASS", "CheckRow", "WARN", "exit_status", "markdown", "not_applicable", "render"]
