"""Check 6 (opt-in, `--idle UP_TO`), idle streams: how long an idle GET stream and an idle connection survive.

Both are watched side by side for at most UP_TO: the session's GET stream (server messages outside
any call: nothing comes on it but the server's keep-alive comments) and a kept-alive connection
after a request. The time at which the deployment closed each is what the row reports; a stream
still open at UP_TO survived the watch. A balancer's idle timeout below the server's keep-alive
interval cuts the GET stream (and every silent call) at that timeout. An idle keep-alive connection
being closed is normal (servers do it after a few seconds; clients open another): it is reported,
not judged.
"""

import time

from mcpbench.probe import routing
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, CheckRow, not_applicable
from mcpbench.probe.wire import each

NAME, TITLE = "idle", "Idle streams"
# Beyond the watch: opening the session, and closing what was watched.
BOUND_EXTRA = 10.0
# The shortest and longest watch `--idle` may ask for: below, no timeout a deployment sets would
# show; above, a probe is no longer a probe.
MIN_IDLE, MAX_IDLE = 2.0, 1800.0
FIX = ("Raise the proxy's idle timeout above the server's SSE keep-alive interval (the SDKs send a comment every 15 s "
       "on an idle stream), or make the server send keep-alive comments more often than the proxy's timeout.")


def bound(target: ProbeTarget) -> float:
    return (target.settings.idle or 0.0) + BOUND_EXTRA


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    up_to = target.settings.idle
    if up_to is None:
        return not_applicable(NAME, "opt-in (it takes minutes): give --idle UP_TO, such as --idle 2m")
    if target.legacy or not target.keeps_sessions:
        why = "legacy HTTP+SSE" if target.legacy else "the server keeps no sessions"
        return not_applicable(NAME, f"{why}: no GET stream to watch")
    if why := target.unsettled():
        return not_applicable(NAME, why)
    stream, kept = each(lambda watch: watch(target, up_to, deadline), (_watch_stream, _watch_connection), 2)
    return judge({"up_to": up_to, "stream": stream, "connection": kept})


def _watch_stream(target: ProbeTarget, up_to: float, deadline: float) -> dict:
    session = target.session()
    try:
        if not session.open(deadline=deadline).ok:
            return {"error": "could not open a session"}
        ex = session.get(session.conn.headers("get"), deadline=min(deadline, time.monotonic() + up_to), until_answered=False,
                         timeout=up_to)
        if ex.status == 405:
            return {"offered": False}
        if routing.lost(ex):  # another instance than the session's: no stream of this server's was watched
            return {"routed": routing.lost_detail("the session's GET stream", ex)}
        session.end(deadline=deadline)
        return {"offered": ex.status == 200, "status": ex.status, "closed_at": ex.closed_at, "detail": ex.detail}
    finally:
        session.close()


def _watch_connection(target: ProbeTarget, up_to: float, deadline: float) -> dict:
    session = target.session()
    try:
        if not session.open(deadline=deadline).ok:
            return {"error": "could not open a session"}
        session.call("tools/list", deadline=deadline)
        closed = session.kept_closed_within(min(deadline, time.monotonic() + up_to))
        session.end(deadline=deadline)
        return {"closed_at": closed}
    finally:
        session.close()


def judge(figures: dict) -> CheckRow:
    up_to, stream, kept = figures["up_to"], figures["stream"], figures["connection"]
    if stream.get("routed"):
        return routing.row(NAME, stream["routed"], "idle streams", figures, legacy=False)
    if stream.get("error"):
        return CheckRow(NAME, FAIL, stream["error"], figures=figures)
    conn = (f"an idle kept-alive connection was closed after {kept['closed_at']:.1f} s (normal: clients open another)"
            if kept.get("closed_at") is not None else f"an idle kept-alive connection stayed open {up_to:g} s")
    if not stream.get("offered"):
        return not_applicable(NAME, f"the server offers no GET stream (HTTP {stream.get('status', 405)}); {conn}", **figures)
    if stream.get("closed_at") is not None and stream["closed_at"] < up_to:
        return CheckRow(NAME, FAIL, f"the idle GET stream was cut after {stream['closed_at']:.1f} s; {conn}", FIX, figures)
    return CheckRow(NAME, PASS, f"the idle GET stream stayed open the whole watch ({up_to:g} s); {conn}", figures=figures)
