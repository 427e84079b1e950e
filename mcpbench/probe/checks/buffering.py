"""Check 5, buffering: do the progress events of a call arrive as the server sends them, or all at the end?

The progress tool's call is made with a progress token; the arrival time of each notification and
of the answer is taken from the moment the request left. The server sends its progress spread over
the call (its order and spacing: evenly, for the lab's `slow`), so unbuffered the first one arrives
early and the rest spread over the call; a buffering proxy holds the stream until it ends and every
event arrives together with the answer. With `--direct URL` (the same server, without the
deployment in front) the same call there is the reference; otherwise the spacing alone decides.
"""

import dataclasses

from mcpbench.probe import routing
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.probe.wire import Wire
from mcpbench.protocol.client import Answered, Pushed

NAME, TITLE, BOUND = "buffering", "Buffering", 15.0
# Held back: the first progress arrived after this share of the call, and all of them within
# SPREAD of it: they came together at the end.
HELD, SPREAD = 0.8, 0.1
# Late (a warning): the first progress arrived later than this share of the call past when the
# server sent it (the direct run's, else one step's share).
LATE = 0.25
FIX = ("Turn response buffering off for text/event-stream: nginx proxy_buffering off (or X-Accel-Buffering: no from the "
       "server), HAProxy without wait-for-body or http-buffer-response, a CDN's streaming mode.")
# The server asks for no buffering already (`X-Accel-Buffering: no`, as the SDKs' SSE responses do): the proxy ignores it.
FIX_PROXY = ("The server already sends X-Accel-Buffering: no, and the proxy ignores it: turn response buffering off in the "
             "proxy itself for text/event-stream (nginx proxy_buffering off, HAProxy without wait-for-body or "
             "http-buffer-response, a CDN's streaming mode).")
ACCEL = "x-accel-buffering"


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if why := target.unsettled():
        return not_applicable(NAME, why)
    if target.progress is None:
        return not_applicable(NAME, "no tool reports progress here: name one with --progress-tool 'NAME {\"arg\": 1}'")
    if not target.streams:
        return not_applicable(NAME, "the server answers with JSON bodies: progress is not streamed")
    figures = {"call": target.progress.tool, "deployment": _measure(target, deadline), "legacy": target.legacy}
    if target.settings.direct:
        direct = dataclasses.replace(target, url=target.settings.direct, wire=Wire(target.settings.direct, target.wire.options))
        figures["direct"] = _measure(direct, deadline)
    return judge(figures)


def _measure(target: ProbeTarget, deadline: float) -> dict:
    session = target.session()
    try:
        if not session.open(deadline=deadline).ok:
            return {"error": "could not open a session"}
        ex = session.call("tools/call", target.progress.params("probe-buffering"), deadline=deadline)
        session.end(deadline=deadline)
    finally:
        session.close()
    progress = [round(t, 4) for t, e in ex.arrivals if type(e) is Pushed]
    answer = next((round(t, 4) for t, e in ex.arrivals if type(e) is Answered), None)
    failure = ex.failure()
    measured = {"progress_at": progress, "answer_at": answer, "error": failure[1] if failure else None,
                "accel_buffering": ex.headers.get(ACCEL) if ex.headers is not None else None}
    if routing.lost(ex):
        measured["routed"] = routing.lost_detail(target.progress.tool, ex)
    return measured


def shape(measured: dict) -> dict | None:
    """When the first progress came (share of the call) and how far the progress spread (share), or None."""
    progress, answer = measured.get("progress_at") or [], measured.get("answer_at")
    if not progress or not answer:
        return None
    return {"first": progress[0] / answer, "spread": (progress[-1] - progress[0]) / answer, "steps": len(progress)}


def judge(figures: dict) -> CheckRow:
    measured = figures["deployment"]
    seen, direct = shape(measured), shape(figures.get("direct") or {})
    if measured.get("routed"):
        return routing.row(NAME, measured["routed"], "buffering", figures, legacy=figures.get("legacy", False))
    if measured.get("error"):
        return CheckRow(NAME, WARN, f"{figures['call']}: {measured['error']}", figures=figures)
    if seen is None:
        return CheckRow(NAME, WARN, f"{figures['call']}: no progress arrived (the tool sent none, or something dropped it)", figures=figures)
    figures["shape"], figures["direct_shape"] = seen, direct
    answer, progress = measured["answer_at"], measured["progress_at"]
    evidence = (f"{figures['call']}: {seen['steps']} progress events, the first at {progress[0]:.2f} s "
                f"({seen['first']:.0%} of the call), spread over {progress[-1] - progress[0]:.2f} s; answer at {answer:.2f} s")
    if direct is not None:
        evidence += f"; direct: first at {direct['first']:.0%}, spread {direct['spread']:.0%}"
    asked = (measured.get("accel_buffering") or "").strip().lower() == "no"
    fix, told = (FIX_PROXY, " (the server sent X-Accel-Buffering: no)") if asked else (FIX, "")
    if seen["first"] >= HELD and seen["spread"] <= SPREAD:
        return CheckRow(NAME, FAIL, evidence + ": held back until the stream ended" + told, fix, figures)
    expected = direct["first"] if direct is not None else 1.0 / seen["steps"]
    if seen["first"] > expected + LATE:
        return CheckRow(NAME, WARN, evidence + ": the first progress came late" + told, fix, figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)
