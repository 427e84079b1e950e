"""Check 4, resumability: a streamed answer is cut by the probe, and resumed with `Last-Event-ID`.

A call (the progress tool when there is one, else `tools/list`) is cut right after the first SSE
event of its answer, as a proxy's timeout cuts a stream. What the stream must have had to survive
that: an id on every event, a priming event first (2025-11-25: an id and no data, so that even a
cut before the first message can be resumed) and a `retry`. A `GET` with the last id seen must then
bring exactly the missed events and the answer once; with a progress tool the resumed stream is
cut once more and resumed again. Last, a second session sends the first session's event id: its
`GET` must bring none of the first session's events (replay across sessions leaks one client's
answers to another).
"""

import dataclasses
import time
from typing import Any

from mcpbench.probe import routing
from mcpbench.probe.sessions import ProbeExchange
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.probe.wire import left
from mcpbench.protocol.client import Answered, Pushed, Unmatched

NAME, TITLE, BOUND = "resume", "Resumability", 20.0
# The longest `retry` waited before resuming: a server asking for more is not waited on longer.
MAX_RETRY_WAIT = 2.0
# How long the second session's GET with a foreign Last-Event-ID is read: a leaking store replays at once.
FOREIGN_READ = 3.0
PROGRESS_TOKEN = "probe-resume"  # the first session's call's: its progress is told apart by it
FIX_STORE = ("Give the server an event store (every SSE event gets an id, a priming event comes first with a retry), "
             "so that a client resumes a cut stream with Last-Event-ID.")
FIX_RESUME = ("Pass a GET with Last-Event-ID through, unbuffered, to the instance that holds the stream, and replay "
              "each missed event once.")
FIX_LEAK = ("File events per session: a Last-Event-ID from another session must replay nothing "
            "(a store keyed by event id alone leaks one client's answers to another).")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if target.legacy:
        return not_applicable(NAME, "legacy HTTP+SSE has no resumption (Streamable HTTP only)")
    if not target.keeps_sessions:
        return not_applicable(NAME, "the server keeps no sessions: a stream cannot be resumed without one")
    if not target.streams:
        return not_applicable(NAME, "the server answers with JSON bodies: no answer streams, nothing to cut")
    if why := target.unsettled():
        return not_applicable(NAME, why)
    session = target.session()
    try:
        if not session.open(deadline=deadline).ok:
            return CheckRow(NAME, WARN, "could not open a session to try it")
        figures = _cut_and_resume(target, session, deadline)
        if figures.get("first_id"):
            figures["foreign"] = _foreign(target, figures["first_id"], figures.get("call_id"), deadline)
        session.end(deadline=deadline)
    finally:
        session.close()
    return judge(figures)


def _cut_and_resume(target: ProbeTarget, session, deadline: float) -> dict:
    progress = target.progress
    method, params = ("tools/call", progress.params(PROGRESS_TOKEN)) if progress else ("tools/list", None)
    first = session.call(method, params, deadline=deadline, cut_after=1)
    opening = first.reader.answer.first if first.reader is not None else None
    figures = {
        "call": progress.tool if progress else method, "status": first.status,
        "first_id": opening.id if opening else None, "primed": bool(opening and opening.id and not opening.data),
        "retry_ms": first.reader.answer.retry_ms if first.reader is not None else None, "resumes": 0,
        "answered_before_cut": first.answered is not None,
    }
    if routing.lost(first):
        return {**figures, "routed": routing.lost_detail(figures["call"], first)}
    exchanges = [first]
    failed, retry = first.failed, figures["retry_ms"]
    # Cut once more on a progress call (its stream has events to cut between), then read to the answer.
    for cut_after in ((1, None) if progress else (None,)):
        if failed is None or not failed.last_event_id or time.monotonic() >= deadline:
            break
        # As a client must: wait the stream's `retry` before reconnecting (a proxy in front may
        # not yet have told the server that the cut stream is gone).
        time.sleep(min(MAX_RETRY_WAIT, (retry or 0) / 1000.0, left(deadline)))
        again = session.resume(failed, deadline=deadline, cut_after=cut_after)
        retry = again.reader.answer.retry_ms if again.reader is not None and again.reader.answer.retry_ms else retry
        exchanges.append(again)
        figures["resumes"] += 1
        if routing.lost(again):
            figures["routed"] = routing.lost_detail("the GET with Last-Event-ID", again)
            break
        if again.answered is not None or again.reader is None:
            break
        failed = dataclasses.replace(failed, last_event_id=again.reader.answer.last_event_id or failed.last_event_id)
    figures.update(_tally(exchanges, first, session))
    return figures


def _tally(exchanges: list[ProbeExchange], first: ProbeExchange, session) -> dict:
    """The answers and progress the stream and its resumptions brought, counted once each."""
    request_id = first.failed.request.id if first.failed and first.failed.request else (
        first.answered.request.id if first.answered else None)
    answers = sum(1 for ex in exchanges for _, e in ex.arrivals
                  if (type(e) is Answered and e.request.id == request_id) or (type(e) is Unmatched and e.answer.id == request_id))
    progress = [e.message.params.get("progress") for ex in exchanges for _, e in ex.arrivals
                if type(e) is Pushed and isinstance(e.message.params, dict) and "progress" in e.message.params]
    totals = [e.message.params.get("total") for ex in exchanges for _, e in ex.arrivals
              if type(e) is Pushed and isinstance(e.message.params, dict) and e.message.params.get("total") is not None]
    return {"call_id": request_id, "answers": answers, "progress": progress, "total": totals[-1] if totals else None,
            "duplicated_events": session.conn.replayed, "statuses": [ex.status for ex in exchanges],
            "details": [ex.detail for ex in exchanges if ex.detail]}


def _foreign(target: ProbeTarget, event_id: str, call_id: Any, deadline: float) -> dict:
    """A second session's GET with the first session's `Last-Event-ID`: what it brought of the first
    session's call (`call_id`), and what else."""
    other = target.session()
    try:
        if not other.open(deadline=deadline).ok:
            return {"status": None}
        ex = other.get(other.conn.headers("resume", event_id), deadline=min(deadline, time.monotonic() + FOREIGN_READ),
                       cut_after=1, until_answered=False)
        other.end(deadline=deadline)
        leaked = sum(_of_call(event, call_id) for _, event in ex.arrivals)
        return {"status": ex.status, "leaked": leaked, "other": len(ex.arrivals) - leaked}
    finally:
        other.close()


def _of_call(event: Any, call_id: Any) -> bool:
    """Whether a message is the first session's call's: its answer, or its progress.

    Behind a balancer each instance numbers its events itself, so the first session's event id may
    name an event of the second session's own on another instance: resuming that replays the second
    session's own events (its `initialize` answer), which is no leak."""
    if type(event) is Pushed:  # its progress (`notifications/progress` names the token)
        params = event.message.params
        return isinstance(params, dict) and params.get("progressToken") == PROGRESS_TOKEN
    answer = event.answer if type(event) in (Answered, Unmatched) else None
    return answer is not None and call_id is not None and answer.id == call_id


def judge(figures: dict) -> CheckRow:
    call = figures["call"]
    if figures.get("routed"):
        return routing.row(NAME, figures["routed"], "resumption", figures, legacy=False)
    if not figures.get("first_id"):
        evidence = (f"{call}: the server gives its stream's events no ids (it keeps no event store, its configuration, "
                    "not the deployment's): a cut stream cannot be resumed, its answer is lost")
        return CheckRow(NAME, FAIL, evidence, FIX_STORE, figures)
    retry = f"retry {figures['retry_ms']} ms" if figures.get("retry_ms") is not None else "no retry"
    parts = [f"{call}: events carry ids; {'a priming event came first' if figures['primed'] else 'no priming event'}; {retry}"]
    problems: list[tuple[str, str]] = []  # (what, its fix)
    if figures["answered_before_cut"]:
        parts.append("the answer was the first event: nothing was left to resume")
    else:
        answers, progress, total = figures["answers"], figures["progress"], figures.get("total")
        parts.append(f"cut after 1 event, resumed {figures['resumes']}×: answer ×{answers}")
        if progress:
            parts.append(f"progress {len(progress)}{f'/{total:g}' if total is not None else ''}")
        if answers != 1:
            seen = f" ({figures['details'][-1]})" if figures.get("details") else ""
            problems.append((f"the answer came {answers}× after resuming{seen}", FIX_RESUME))
        if progress and (len(progress) != len(set(progress)) or progress != sorted(progress) or (total is not None and len(progress) != total)):
            problems.append(("progress events missed or repeated", FIX_RESUME))
        if figures["duplicated_events"]:
            problems.append((f"{figures['duplicated_events']} event(s) came twice", FIX_RESUME))
    foreign = figures.get("foreign")
    if foreign is not None and foreign.get("status") is not None:
        parts.append(f"another session's Last-Event-ID → HTTP {foreign['status']}, {foreign.get('leaked', 0)} event(s) of the first session")
        if foreign.get("leaked"):
            problems.append(("events replayed across sessions", FIX_LEAK))
    evidence = "; ".join(parts + [what for what, _ in problems])
    if problems:
        return CheckRow(NAME, FAIL, evidence, " ".join(dict.fromkeys(fix for _, fix in problems)), figures)
    if not figures["primed"] or figures.get("retry_ms") is None:
        return CheckRow(NAME, WARN, evidence, FIX_STORE, figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)
