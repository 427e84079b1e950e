"""Sessions kept or broken: a load run's step samples grouped by session.

A run of many short sessions (`session_per_task`) names, in each step's sample, the session it
belongs to and the instance that answered it (`X-Mcpbench-Instance`, behind a balancer).
`count_sessions` tallies them (calls, failures by class, the step where each broken session first
failed, how often a session stayed on its first instance) and `verdict` says in one line whether
sessions were kept. `mcpbench load` prints both for a session probe (a scenario with `sessions`);
every cell of the lab's sticky experiment is one such tally.

Failure classes (of a step; a session's is that of its first failed step):

    session-not-found  the instance did not know the session (the form seen is kept: status and error)
    answer-lost        the POST was accepted, the answer never came (on the legacy stream, or in the body)
    stream-closed      the stream or connection closed under the session
    timeout            no answer within the scenario's timeout
    …                  any other load failure class (http-4xx, http-5xx, jsonrpc-error, connect-failed)
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from mcpbench.load.samples import records
from mcpbench.protocol.http import Failure

CLASS_ORDER: Final = ("session-not-found", "answer-lost", "stream-closed", "timeout")
# How a session sent to the wrong instance fails: unknown there, or a POST taken and never answered.
ROUTING_CLASSES: Final = ("session-not-found", "answer-lost")
# Steps that are not MCP calls: the legacy stream's GET.
NOT_CALLS: Final = frozenset({"connect"})
# The handshake's steps: a session that fails in one of them never made a call.
HANDSHAKE: Final = ("connect", "initialize", "notifications/initialized")


@dataclass
class SessionTally:
    """What the sessions of a run did."""

    sessions: int = 0
    calls: int = 0
    failed_calls: int = 0
    failed_sessions: int = 0
    first_instance_share: float | None = None
    calls_by_class: Counter = field(default_factory=Counter)
    sessions_by_class: Counter = field(default_factory=Counter)
    forms: Counter = field(default_factory=Counter)  # "class: detail" of failed steps
    first_failure_at: Counter = field(default_factory=Counter)  # (class, where) of broken sessions: `failed_where`

    @property
    def kept(self) -> bool:
        """Every session held to its end, and there was one: what a run of K sessions passes on."""
        return self.sessions > 0 and not self.failed_sessions


Tally = TypeVar("Tally", bound=SessionTally)


def ordered_classes(names: Iterable[str]) -> list[str]:
    """Failure classes in a stable order: the four above first, then the others by name."""
    names = set(names)
    return [c for c in CLASS_ORDER if c in names] + sorted(names - set(CLASS_ORDER))


def failure_class(failure: str, detail: str | None) -> str:
    """The session class of a load failure (`answer-lost/timeout` split by what happened)."""
    if failure == Failure.ANSWER_LOST:
        text = detail or ""
        if "POST accepted" in text or "without an answer" in text:
            return "answer-lost"
        return "timeout"
    return failure


def read_samples(path: Path) -> Iterator[dict]:
    """The step records of a samples.jsonl (a torn last line is skipped)."""
    return (record for record in records(path) if "step" in record)


def count_sessions(records: Iterable[dict], into: Tally) -> Tally:
    """Tally step records by session into `into` (records without a session tag are not counted)."""
    sessions: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        if record.get("session"):
            sessions[record["session"]].append(record)
    shares: list[float] = []
    for steps in sessions.values():
        steps.sort(key=lambda r: r.get("t") or 0.0)
        into.sessions += 1
        instances = [r["instance"] for r in steps if r.get("instance")]
        if instances:
            shares.append(instances.count(instances[0]) / len(instances))
        first: tuple[str, str] | None = None
        calls = made = 0  # requests (the handshake's included); calls made after the handshake
        for record in steps:
            is_call = record["step"] not in NOT_CALLS
            if record.get("failure"):
                name = failure_class(record["failure"], record.get("detail"))
                into.forms[f"{name}: {record.get('detail') or record['failure']}"] += 1
                if is_call:
                    into.failed_calls += 1
                    into.calls_by_class[name] += 1
                if first is None:
                    first = (name, failed_where(record["step"], made))
            calls += is_call
            made += record["step"] not in HANDSHAKE
        into.calls += calls
        if first is not None:
            into.failed_sessions += 1
            into.sessions_by_class[first[0]] += 1
            into.first_failure_at[first] += 1
    into.first_instance_share = sum(shares) / len(shares) if shares else None
    return into


def failed_where(step: str, made: int) -> str:
    """Where a session first failed: at a step of its handshake (no call ran yet), or after `made` calls."""
    if step in HANDSHAKE:
        return f"at {step} (the handshake: no call ran)"
    return "on the first call" if made == 0 else "after the first call" if made == 1 else f"after {made} calls"


def verdict(result: SessionTally) -> str:
    """One line: "sessions kept: 50/50" or "sessions broken: 31/50, session-not-found after the first call"
    ("… at notifications/initialized (the handshake: no call ran)" when the handshake itself failed)."""
    if not result.failed_sessions:
        return f"sessions kept: {result.sessions}/{result.sessions}"
    (name, where), _ = result.first_failure_at.most_common(1)[0]
    return f"sessions broken: {result.failed_sessions}/{result.sessions}, {name} {where}"


def render_sessions(result: SessionTally) -> str:
    """A probe's session table: sessions, calls, failures by class with the forms seen, where sessions landed."""
    lines = [f"{'sessions':>8} {'broken':>8} {'calls':>6} {'failed':>6} {'1st instance':>12}"]
    share = "" if result.first_instance_share is None else f"{result.first_instance_share:.2f}"
    lines.append(f"{result.sessions:>8} {result.failed_sessions:>8} {result.calls:>6} {result.failed_calls:>6} {share:>12}")
    for name in ordered_classes(result.sessions_by_class):
        lines.append(f"  {name}: {result.sessions_by_class[name]} session(s)")
    for form, count in result.forms.most_common(3):
        lines.append(f"  seen: {form} ×{count}")
    return "\n".join(lines)
