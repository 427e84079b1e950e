"""Check 3, unknown and restarted sessions: a session id the server does not know must get 404.

Streamable HTTP: "The server MAY terminate the session at any time, after which it MUST respond to
requests containing that session ID with HTTP 404 Not Found. When a client receives HTTP 404 in
response to a request containing an Mcp-Session-Id, it MUST start a new session." A 400, 500 or
200 leaves a client holding a dead id. Two ids are tried: one made up (as after a restart, when
the server has forgotten every session) and one the server gave and `DELETE` ended.
"""

import secrets

from mcpbench.probe import routing
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.protocol.http import SESSION_ID

NAME, TITLE, BOUND = "unknown", "Unknown and restarted sessions", 6.0
FIX = ("Answer 404 to an unknown or ended Mcp-Session-Id (the specification's rule): clients start a new session on 404 "
       "only, and keep failing with a dead id on anything else.")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if not target.keeps_sessions:
        return not_applicable(NAME, "the server keeps no sessions (no Mcp-Session-Id): nothing to forget")
    if target.legacy and (why := target.unsettled()):
        return not_applicable(NAME, why)
    made_up = _made_up(target, deadline)
    ended = _ended(target, deadline)
    return judge({"made_up": made_up, "ended": ended}, legacy=target.legacy)


def _made_up(target: ProbeTarget, deadline: float) -> dict:
    """A request with a session id the server never gave."""
    if target.legacy:  # the session is named in the POST URL: name another
        session = target.session()
        try:
            if not session.open(deadline=deadline).ok:
                return {"status": None, "detail": "no session to start from"}
            session.conn.endpoint = session.conn.endpoint.replace(session.session_id, secrets.token_hex(16))
            return _seen(session.call("tools/list", deadline=deadline))
        finally:
            session.close()
    return _asked_with(target, secrets.token_hex(16), deadline)


def _ended(target: ProbeTarget, deadline: float) -> dict | None:
    """A request with a session id that DELETE ended (None for legacy: its sessions end with their stream).

    Not tried (status None, with `detail`; `routed` when routing is why) where sessions do not stay
    on their instance: the DELETE may reach one that never held the session.
    """
    if target.legacy:
        return None
    if why := target.unsettled():
        return {"status": None, "detail": why, "routed": True}
    session = target.session()
    try:
        if not session.open(deadline=deadline).ok:
            return {"status": None, "detail": "no session to start from"}
        sid = session.session_id
        ended = session.end(deadline=deadline)
    finally:
        session.close()
    if routing.lost(ended):
        return {"status": None, "delete_status": ended.status, "routed": True,
                "detail": f"DELETE got HTTP {ended.status}: it reached an instance that does not hold the session"}
    if ended.status is None or ended.status >= 300:
        return {"status": None, "delete_status": ended.status,
                "detail": f"DELETE did not end the session (HTTP {ended.status})" if ended.status else "DELETE got no answer"}
    return {**_asked_with(target, sid, deadline), "delete_status": ended.status}


def _asked_with(target: ProbeTarget, sid: str, deadline: float) -> dict:
    """`tools/list` from a fresh session, sent with `sid` as its Mcp-Session-Id."""
    session = target.session()
    try:
        if not session.open(deadline=deadline).ok:
            return {"status": None, "detail": "no session to start from"}
        seen = _seen(session.call("tools/list", deadline=deadline, extra={SESSION_ID: sid}))
        session.end(deadline=deadline)
        return seen
    finally:
        session.close()


def _seen(ex) -> dict:
    failure = ex.failure()
    detail = failure[1].removeprefix(f"HTTP {ex.status}: ") if failure else "answered"
    return {"status": ex.status, "detail": detail[:160]}


def judge(figures: dict, *, legacy: bool = False) -> CheckRow:
    made_up, ended = figures["made_up"], figures.get("ended")
    tried = [("made-up id", made_up)] + ([("ended id", ended)] if ended and ended.get("status") is not None else [])
    evidence = "; ".join(f"{what} → HTTP {seen['status']} ({seen['detail']})" for what, seen in tried)
    if ended and ended.get("status") is None:  # said, never dropped in silence
        evidence += f"; ended id not tried: {ended['detail']}"
    statuses = [seen["status"] for _, seen in tried]
    if made_up.get("status") is None:
        return CheckRow(NAME, WARN, f"could not be tried: {made_up['detail']}", figures=figures)
    if all(status == 404 for status in statuses):
        if ended and ended.get("routed"):  # the made-up id passed; the ended one was not measured
            return CheckRow(NAME, WARN, evidence, routing.fix(legacy), figures)
        return CheckRow(NAME, PASS, evidence, figures=figures)
    if legacy:  # HTTP+SSE (2024-11-05) names no status for a lost session: 404 is what clients look for
        return CheckRow(NAME, WARN, evidence, FIX.replace("Mcp-Session-Id", "session"), figures)
    return CheckRow(NAME, FAIL, evidence, FIX, figures)
