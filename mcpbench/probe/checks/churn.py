"""Check 7, session churn: a spike of sessions opened and ended, and a steady session's latency before and after.

A steady session makes `STEADY` calls; then `--spike N` sessions are opened (at most
`CONCURRENCY` at once) and ended with `DELETE` (legacy: their streams closed); then the steady
session makes its calls again, and one more session is opened. A server that keeps what ended
sessions held, or cannot end them at all, shows it here: sessions refused during or after the spike
(the SDK answers 503 at its session limit), calls slower after than before.
"""

import time
from collections import Counter

from mcpbench.probe import routing
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.probe.wire import each
from mcpbench.measures.stats import percentile

NAME, TITLE, BOUND = "churn", "Session churn", 25.0
STEADY = 20  # calls of the steady session, before and after the spike
CONCURRENCY = 20  # spike sessions opened at once
# Of the bound, kept for the calls after the spike and the last session.
AFTER = 5.0
# Slower after the spike: a failure beyond SLOWER × before + SLOWER_MS, a warning beyond WORSE × before + WORSE_MS.
SLOWER, SLOWER_MS, WORSE, WORSE_MS = 3.0, 20.0, 1.5, 10.0
FIX_DELETE = "Support DELETE of a session (the SDKs do), so clients that end sessions free what they held."
FIX_LEAK = ("Release what ended sessions held: support DELETE, expire idle sessions (the Python SDK's session_idle_timeout), "
            "and size the session limit for the clients' churn.")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if not target.keeps_sessions:
        return not_applicable(NAME, "the server keeps no sessions: nothing to churn")
    if why := target.unsettled():
        return not_applicable(NAME, why)
    steady = target.session()
    try:
        if not steady.open(deadline=deadline).ok:
            return CheckRow(NAME, WARN, "could not open the steady session")
        before = _calls(steady, deadline)
        spike = _spike(target, deadline - AFTER)
        after = _calls(steady, deadline)
        fresh = target.session()
        try:
            opened = fresh.open(deadline=deadline)
            fresh_failure = opened.failure()
            fresh.end(deadline=deadline)
        finally:
            fresh.close()
        steady.end(deadline=deadline)
    finally:
        steady.close()
    return judge({"before_ms": before["ms"], "after_ms": after["ms"], "before_failed": before["failed"],
                  "after_failed": after["failed"], "spike": spike, "legacy": target.legacy,
                  "lost_calls": before["lost"] + after["lost"],
                  "fresh": None if fresh_failure is None else f"{fresh_failure[0]}: {fresh_failure[1]}"[:160]})


def _calls(session, deadline: float) -> dict:
    ms, failed, lost = [], 0, 0
    for _ in range(STEADY):
        if time.monotonic() >= deadline:
            break
        ex = session.call("tools/list", deadline=deadline)
        if ex.ok and ex.latency is not None:
            ms.append(round(ex.latency * 1000.0, 3))
        else:
            failed += 1
            lost += routing.lost(ex)
    return {"ms": ms, "failed": failed, "lost": lost}


def _spike(target: ProbeTarget, deadline: float) -> dict:
    def one(_: int) -> tuple[str | None, int | None]:
        if time.monotonic() >= deadline:
            return "not started: the time bound came first", None
        session = target.session()
        try:
            opened = session.open(deadline=deadline)
            failure = opened.failure()
            if failure is not None:
                return f"{failure[0]}: {failure[1]}"[:120], None
            return None, session.end(deadline=deadline).status
        finally:
            session.close()

    started = time.monotonic()
    results = each(one, range(target.settings.spike), CONCURRENCY)
    failures = Counter(f for f, _ in results if f is not None)
    return {"sessions": len(results), "failed": sum(failures.values()), "failures": dict(failures.most_common(3)),
            "delete": {str(k): v for k, v in Counter(s for f, s in results if f is None and s is not None).items()},
            "seconds": round(time.monotonic() - started, 3)}


def judge(figures: dict) -> CheckRow:
    spike, before, after = figures["spike"], figures["before_ms"], figures["after_ms"]
    # A DELETE of a session just opened, answered 404: it reached an instance that never held the session.
    lost_calls, lost_deletes = figures.get("lost_calls", 0), spike["delete"].get("404", 0)
    if lost_calls or lost_deletes:
        seen = [f"{lost_calls} steady call(s)"] if lost_calls else []
        seen += [f"{lost_deletes} DELETE(s) of {spike['sessions']}"] if lost_deletes else []
        return routing.row(NAME, f"{' and '.join(seen)} got HTTP 404 session not found", "churn", figures,
                           legacy=figures["legacy"])
    p_before, p_after = percentile(before, 50) if before else None, percentile(after, 50) if after else None
    figures["p50_before_ms"], figures["p50_after_ms"] = p_before, p_after
    deletes = spike["delete"]
    parts = [f"{spike['sessions']} sessions opened and ended in {spike['seconds']:.1f} s, {spike['failed']} failed"]
    if spike["failures"]:
        parts[-1] += f" ({next(iter(spike['failures']))})"
    if not figures["legacy"]:
        parts.append("DELETE → " + (", ".join(f"HTTP {status} ×{n}" for status, n in sorted(deletes.items())) or "not sent"))
    if p_before is not None and p_after is not None:
        parts.append(f"steady p50 {p_before:.1f} ms before, {p_after:.1f} ms after")
    if figures["fresh"]:
        parts.append(f"a new session after the spike: {figures['fresh']}")
    if figures["after_failed"]:
        parts.append(f"{figures['after_failed']} steady call(s) failed after")
    evidence = "; ".join(parts)
    if spike["failed"] or figures["fresh"] or figures["after_failed"]:
        return CheckRow(NAME, FAIL, evidence, FIX_LEAK, figures)
    if p_before is not None and p_after is not None and p_after > SLOWER * p_before + SLOWER_MS:
        return CheckRow(NAME, FAIL, evidence + ": slower after the spike", FIX_LEAK, figures)
    if any(not status.startswith("2") for status in deletes):
        return CheckRow(NAME, WARN, evidence, FIX_DELETE, figures)
    if p_before is not None and p_after is not None and p_after > WORSE * p_before + WORSE_MS:
        return CheckRow(NAME, WARN, evidence + ": slower after the spike", FIX_LEAK, figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)
