"""Check 2, sessions across the deployment: N concurrent sessions, each a handshake, several calls and its end.

This is the sticky probe (it was the load scenario `sticky-probe.yaml`): each step is a record as a load
user writes it (session, step, instance, failure class and detail), and the load runs' own tally
(`load/sessions.py`) says whether sessions were kept: "sessions kept: 50/50", or "sessions
broken: 33/50, session-not-found after the first call". The instance that answered each step
comes from `X-Mcpbench-Instance` (or the header named with `--instance-header`).
"""

import time
from collections import Counter, defaultdict

from mcpbench.load.sessions import ROUTING_CLASSES, SessionTally, count_sessions, ordered_classes, verdict
from mcpbench.probe.routing import FIX_HTTP, FIX_LEGACY
from mcpbench.probe.sessions import ProbeExchange
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, CheckRow
from mcpbench.probe.wire import each

NAME, TITLE, BOUND = "sessions", "Sessions across the deployment", 25.0
# Sessions run at once, at most: one thread and one connection each.
MAX_CONCURRENT = 64
# The call each session makes, as the sticky probe's mix did.
CALL = "tools/list"


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    count, calls = target.settings.sessions, target.settings.calls
    runs = each(lambda n: _one(target, n, calls, deadline), range(count), min(count, MAX_CONCURRENT))
    records = [record for steps in runs for record in steps]
    row = judge(records, count, target)
    # The checks after this one run on one session only where sessions were measured to stay.
    lost = sum(row.figures["sessions_by_class"].get(name, 0) for name in ROUTING_CLASSES)
    target.sessions_lost = (lost if target.keeps_sessions else 0, row.figures["sessions"])
    return row


def _one(target: ProbeTarget, number: int, calls: int, deadline: float) -> list[dict]:
    """One session's step records (none when the time bound came first)."""
    if time.monotonic() >= deadline:
        return []
    session, tag, out = target.session(), f"s{number}", []

    def step(name: str, ex: ProbeExchange) -> bool:
        failure = ex.failure()
        record = {"session": tag, "step": name, "t": time.time(), "instance": ex.instance, "status": ex.status}
        if failure is not None:
            record.update(failure=failure[0], detail=failure[1])
        out.append(record)
        return failure is None

    try:
        if all([step(name, ex) for name, ex in session.open_steps(deadline=deadline)]):
            for _ in range(calls):
                if not step(CALL, session.call(CALL, deadline=deadline)):
                    break
            ended = session.end(deadline=deadline)
            if ended.status is not None and ended.status != 405:  # 405: the server lets no client end its sessions
                step("DELETE", ended)
    finally:
        session.close()
    return out


def judge(records: list[dict], asked: int, target: ProbeTarget) -> CheckRow:
    tally = count_sessions(records, SessionTally())
    per_instance: dict[str, Counter] = defaultdict(Counter)
    statuses = Counter(r["status"] for r in records if r.get("failure") and r.get("status") is not None)
    by_session: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_session[record["session"]].append(record)
    for steps in by_session.values():
        first = next((r["instance"] for r in steps if r.get("instance")), None) or "unnamed"
        per_instance[first]["broken" if any(r.get("failure") for r in steps) else "kept"] += 1
    figures = {
        "sessions": tally.sessions, "asked": asked, "calls": tally.calls, "failed_calls": tally.failed_calls,
        "broken": tally.failed_sessions, "first_instance_share": tally.first_instance_share,
        "sessions_by_class": dict(tally.sessions_by_class), "forms": dict(tally.forms.most_common(5)),
        "failed_statuses": {str(k): v for k, v in statuses.items()}, "per_instance": {k: dict(v) for k, v in sorted(per_instance.items())},
        "keeps_sessions": target.keeps_sessions,
    }
    named = sorted(name for name in per_instance if name != "unnamed")
    parts = [verdict(tally)]
    if tally.sessions < asked:
        parts.append(f"only {tally.sessions} of {asked} sessions ran within the {BOUND:g} s bound")
    if tally.failed_sessions:
        form, _ = tally.forms.most_common(1)[0]
        classes = ", ".join(f"{name} ×{tally.sessions_by_class[name]}" for name in ordered_classes(tally.sessions_by_class))
        parts.append(f"{classes}; seen: {form}")
    parts.append(f"{len(named)} instance(s) named ({', '.join(named)})" if named else "instances not named (no instance header)")
    if not target.keeps_sessions:
        parts.append("the server keeps no sessions: any instance may answer")
    evidence = "; ".join(parts)
    if tally.failed_sessions or not tally.sessions:
        return CheckRow(NAME, FAIL, evidence, FIX_LEGACY if target.legacy else FIX_HTTP, figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)


__all__ = ["BOUND", "NAME", "TITLE", "judge", "run"]
