"""`--sarif FILE`: the findings as SARIF 2.1.0, for code scanning (one rule per class, one result per finding).

Each result names its rule (the class), a level, the evidence as its message, and where it was found:
a logical location naming the tool (a fuzzed server has no source lines to point at) and, when the
finding was written as a trace, that trace as the artifact (the file `mcpbench replay` reproduces it from).
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcpbench.fuzz.findings import Finding
from mcpbench.fuzz.judge import (ACCEPTED_INVALID, CLASSES, CRASH, HANG, LEAK, MEMORY, NON_DETERMINISTIC, OUTPUT_SCHEMA,
                                 PROTOCOL, SLOW)

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

# Each class: its SARIF level and a line saying what it means (the rule's description).
RULES: dict[str, tuple[str, str]] = {
    CRASH: ("error", "The server process exited, the connection reset, or an HTTP 5xx answered a call."),
    HANG: ("error", "A call went unanswered: no sign of life (progress, a ping answered) for --hang-after, or alive past --live-limit."),
    LEAK: ("error", "An error or a result gave away a stack trace, a file path or a secret."),
    ACCEPTED_INVALID: ("warning", "Arguments that break the tool's inputSchema were answered as a success."),
    OUTPUT_SCHEMA: ("warning", "structuredContent broke the tool's outputSchema."),
    PROTOCOL: ("error", "An answer broke the protocol rules of the session's version."),
    NON_DETERMINISTIC: ("warning", "A tool annotated read-only or idempotent answered the same input differently."),
    SLOW: ("note", "A call took far longer than the server's own median."),
    MEMORY: ("warning", "A stdio server's resident memory kept rising across the calls."),
}
assert set(RULES) == set(CLASSES)


def _result(finding: Finding, base: Path | None) -> dict[str, Any]:
    location: dict[str, Any] = {"logicalLocations": [{"name": finding.case.tool, "kind": "function",
                                                      "fullyQualifiedName": f"tools/{finding.case.tool}"}]}
    if finding.trace is not None:
        trace = Path(finding.trace)
        if base is not None:
            try:
                trace = trace.resolve().relative_to(base.resolve())
            except ValueError:
                pass
        location["physicalLocation"] = {"artifactLocation": {"uri": trace.as_posix()}}
    return {
        "ruleId": finding.cls,
        "ruleIndex": CLASSES.index(finding.cls),
        "level": RULES[finding.cls][0],
        "message": {"text": f"{finding.cls} in {finding.case.tool}: {finding.evidence} "
                            f"(case: {finding.case.describe()} {finding.arguments_text()})"},
        "locations": [location],
        "properties": {"tool": finding.case.tool, "case": finding.case.describe(), "arguments": finding.case.arguments,
                       "seeded": finding.case.seeded, "protocolVersion": finding.version},
    }


def to_sarif(findings: Sequence[Finding], *, target: str, seed: int, version: str, base: Path | None = None) -> dict[str, Any]:
    """The SARIF log of one run; trace paths made relative to `base` where they lie under it."""
    rules = [{"id": cls, "name": cls.title().replace("-", ""), "shortDescription": {"text": RULES[cls][1]},
              "defaultConfiguration": {"level": RULES[cls][0]}} for cls in CLASSES]
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": "mcpbench fuzz", "version": version, "rules": rules}},
            "invocations": [{"executionSuccessful": True, "commandLine": f"mcpbench fuzz {target} --seed {seed}"}],
            "properties": {"target": target, "seed": seed},
            "results": [_result(finding, base) for finding in findings],
        }],
    }


__all__ = ["RULES", "SARIF_VERSION", "to_sarif"]
