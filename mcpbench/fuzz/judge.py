"""What an answer to a case is: nothing to report, or a finding of one class.

Pure: a case, its outcome and the tool's schemas in, verdicts out (no I/O). `slow` is judged over
the whole run (`slow_calls`), since it compares a call with the server's own median.
"""

import re
from dataclasses import dataclass
from typing import Any

from mcpbench.fuzz.cases import VALID, CallCase, dumps
from mcpbench.fuzz.session import RequestOutcome
from mcpbench.protocol.versions import REQUEST_STATE, asks_for_input
from mcpbench.measures.stats import percentile

CRASH, HANG, LEAK, ACCEPTED_INVALID, OUTPUT_SCHEMA, PROTOCOL, SLOW, NON_DETERMINISTIC, MEMORY = (
    "crash", "hang", "leak", "accepted-invalid", "output-schema", "protocol", "slow", "non-deterministic", "memory")
CLASSES = (CRASH, HANG, LEAK, ACCEPTED_INVALID, OUTPUT_SCHEMA, PROTOCOL, SLOW, NON_DETERMINISTIC, MEMORY)

# What gives a server's insides away in an answer: a stack trace, a file path, a secret.
LEAKS: tuple[tuple[str, re.Pattern], ...] = (
    ("a stack trace", re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|\bat [\w.$<>]+\([\w.]+\.(?:java|kt|cs|js|ts):\d+\)|^\s+at .+ \(.+:\d+:\d+\)", re.M)),
    ("a file path", re.compile(r"(?<![\w/.:])/(?:home|root|Users|usr|var|opt|srv|app|work|tmp)/[\w.\-]+(?:/[\w.\-]+)+|\b[A-Z]:\\\\?(?:[\w .-]+\\\\?){2,}")),
    ("a secret", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}|\bAKIA[0-9A-Z]{16}\b|-----BEGIN [A-Z ]*PRIVATE KEY-----|\bgh[pousr]_[A-Za-z0-9]{30,}|\bxox[abprs]-[A-Za-z0-9-]{10,}|\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}")),
)

# A call counts as slow past this many times the median latency of the run's answered calls, and at
# least SLOW_MARGIN seconds past it (loopback medians are a millisecond: a scheduler hiccup is not slow).
SLOW_FACTOR = 20.0
SLOW_MARGIN = 1.0
# An answer larger than this is not judged slow: moving it takes its time (the reference server's
# `big` at its 16 MiB bound takes a second over Streamable HTTP on a busy machine).
SLOW_MAX_BYTES = 1 << 20
# Fewer answered calls than this give no median worth comparing with.
SLOW_MIN_CALLS = 20

# An evidence string is cut to this many characters for the table.
EVIDENCE_CHARS = 160


@dataclass(frozen=True)
class Verdict:
    cls: str
    evidence: str


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= EVIDENCE_CHARS else text[:EVIDENCE_CHARS - 1] + "…"


def schema_problem(schema: Any, value: Any) -> str | None:
    """Why `value` breaks `schema` (the first error's message), None when it fits; a schema that is not
    valid JSON Schema breaks nothing here (the runner reports it once, a protocol finding: `invalid_schema`)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        validator = Draft202012Validator(schema if isinstance(schema, dict) else {})
        error = next(iter(validator.iter_errors(value)), None)
    except (SchemaError, Exception):  # noqa: BLE001 - an unusable schema or a $ref that cannot resolve
        return None
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


def invalid_schema(schema: Any) -> str | None:
    """Why a tool's published schema is not valid JSON Schema 2020-12 (None: it is)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        return f"not a JSON object: {_texts(schema)[:60]}"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        return f"{where + ': ' if where else ''}{exc.message}"
    return None


def _texts(value: Any) -> str:
    return dumps(value).decode(errors="replace") if value is not None else ""


def leak(answer_text: str, request_text: str) -> str | None:
    """The first stack trace, path or secret in an answer that the request did not itself carry."""
    for what, pattern in LEAKS:
        for match in pattern.finditer(answer_text):
            found = match.group(0).strip()
            if found and found not in request_text:
                return f"{what}: {found}"
    return None


def judge(case: CallCase, outcome: RequestOutcome, input_schema: dict | None, output_schema: dict | None) -> list[Verdict]:
    """The findings in one call's outcome (none: the server behaved)."""
    if outcome.lost:
        return [Verdict(CRASH, _short(outcome.detail or "the session was lost"))]
    if outcome.status is not None and outcome.status >= 500:
        return [Verdict(CRASH, _short(f"HTTP {outcome.status}: {outcome.detail or ''}"))]
    if outcome.timed_out:
        return [Verdict(HANG, _short(outcome.detail or "no answer"))]
    verdicts: list[Verdict] = []
    if outcome.garbled:
        verdicts.append(Verdict(PROTOCOL, _short(outcome.garbled[0])))
    if outcome.answer is None:
        if outcome.failure is not None:
            verdicts.append(Verdict(PROTOCOL, _short(f"{outcome.failure}: {outcome.detail}")))
        return verdicts
    request_text = _texts(case.arguments)
    if outcome.result is None:  # a JSON-RPC error
        error = outcome.answer
        found = leak(f"{error.message}\n{_texts(getattr(error, 'data', None))}", request_text)
        if found:
            verdicts.append(Verdict(LEAK, _short(found)))
        return verdicts
    result = outcome.result
    if asks_for_input(result):  # 2026-07-28: the tool asks for input (no content yet); a tampered retry is `state_accepted`'s
        found = leak(_texts(result), request_text)
        return verdicts + ([Verdict(LEAK, _short(found))] if found else [])
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        verdicts.append(Verdict(PROTOCOL, _short(f"a tools/call result without a content list: {_texts(result)}")))
        return verdicts
    text = "\n".join(str(part.get("text", "")) for part in result["content"] if isinstance(part, dict))
    found = leak(text + "\n" + _texts(result.get("structuredContent")), request_text)
    if found:
        verdicts.append(Verdict(LEAK, _short(found)))
    if result.get("isError"):
        return verdicts
    if case.kind != VALID and input_schema is not None:
        problem = schema_problem(input_schema, case.arguments)
        if problem is not None:
            verdicts.append(Verdict(ACCEPTED_INVALID, _short(f"answered as a success although {problem}")))
    if output_schema is not None:
        structured = result.get("structuredContent")
        if structured is None:
            verdicts.append(Verdict(OUTPUT_SCHEMA, "the tool declares an outputSchema but answered without structuredContent"))
        elif (problem := schema_problem(output_schema, structured)) is not None:
            verdicts.append(Verdict(OUTPUT_SCHEMA, _short(f"structuredContent breaks the outputSchema: {problem}")))
    return verdicts


def state_accepted(outcome: RequestOutcome, state: str) -> Verdict | None:
    """A retry carrying an altered `requestState` answered as done: a server must treat the state as
    attacker-controlled (integrity-protected), so a well-behaved one refuses it (an error, an `isError`
    result, or asking again)."""
    result = outcome.result
    if result is None or not isinstance(result, dict) or asks_for_input(result) or result.get("isError"):
        return None
    return Verdict(PROTOCOL, _short(f"a retry with the requestState altered ({state}) was answered as done: {_texts(result)}"))


def repeatable(annotations: dict) -> bool:
    """Whether a tool says the same input gives the same answer (annotated read-only or idempotent)."""
    return annotations.get("readOnlyHint") is True or annotations.get("idempotentHint") is True


def differs(first: RequestOutcome, second: RequestOutcome) -> Verdict | None:
    """A repeatable tool answering the same call differently (`_meta` and a 2026-07-28 `requestState` aside:
    a sealed state differs each time by design): non-deterministic."""
    if type(first.answer) is not type(second.answer):
        return Verdict(NON_DETERMINISTIC, "the same call answered once with a result, once with an error")
    if first.result is None or second.result is None:
        return None
    one, two = ({k: v for k, v in result.items() if k not in ("_meta", REQUEST_STATE)} if isinstance(result, dict) else result
                for result in (first.result, second.result))
    if one == two:
        return None
    return Verdict(NON_DETERMINISTIC, _short(f"the same call answered {_texts(one)} then {_texts(two)}"))


# A stdio server's resident memory has grown, over one process's calls, when it rose by more than
# MEMORY_GROWTH bytes and to more than MEMORY_FACTOR times what it was after its first calls (an SDK
# server warms its caches in the first few), over at least MEMORY_MIN_CALLS calls.
MEMORY_GROWTH = 64 << 20
MEMORY_FACTOR = 1.5
MEMORY_MIN_CALLS = 5


def memory_grew(first: int, last: int, calls: int) -> Verdict | None:
    """`first` and `last` resident bytes of one process, `calls` calls apart: a memory finding, or None."""
    if calls < MEMORY_MIN_CALLS or last - first <= MEMORY_GROWTH or last <= first * MEMORY_FACTOR:
        return None
    return Verdict(MEMORY, f"resident memory rose from {first / 2**20:.0f} MiB to {last / 2**20:.0f} MiB over {calls} calls")


def slow_bound(latencies: list[float]) -> float | None:
    """The latency past which a call is slow, from the run's answered calls (None: too few to say)."""
    if len(latencies) < SLOW_MIN_CALLS:
        return None
    median = percentile(sorted(latencies), 50)
    return max(median * SLOW_FACTOR, median + SLOW_MARGIN)


__all__ = ["CLASSES", "Verdict", "differs", "memory_grew", "judge", "leak", "repeatable", "invalid_schema", "schema_problem", "slow_bound",
           "state_accepted"]
