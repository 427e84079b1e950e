"""Routing, not the server: a session's request that reached an instance that does not hold the session.

Behind a balancer that does not keep a session on the instance that created it, a request of the
session gets 404 "Session not found" (legacy: "Could not find session") from another instance. A
check that meets this mid-way has not measured what it checks; its row says so and names the
routing fix (the sessions check's), instead of blaming the server for what routing did::

    if routing.lost(ex):
        return routing.row(NAME, routing.lost_detail("tools/call slow", ex), "resumption", figures, legacy=target.legacy)
"""

from typing import Any

from mcpbench.probe.verdicts import WARN, CheckRow
from mcpbench.protocol.http import Failure

FIX_HTTP = ("Route each session to the instance that created it: stick on the Mcp-Session-Id learned from the response "
            "that assigned it (HAProxy: stick store-response res.hdr(mcp-session-id)), or run the server stateless. "
            "Hashing on the session id does not do it: the id is minted after the routing decision.")
FIX_LEGACY = ("Route each session to the instance that holds its stream: stick on the session parameter of the POST URL, "
              "learned from the stream's endpoint event.")


def fix(legacy: bool) -> str:
    return FIX_LEGACY if legacy else FIX_HTTP


# The status of a request naming a session its instance does not know (Streamable HTTP: "MUST respond
# to requests containing that session ID with HTTP 404"; the legacy SDK server answers it too).
NOT_FOUND = 404


def lost(ex: Any) -> bool:
    """Whether an `Exchange` of a session (a call, a GET stream, a DELETE) was refused because the
    instance it reached did not know the session."""
    failure = ex.failure()
    return ex.status == NOT_FOUND or (failure is not None and failure[0] == Failure.SESSION_NOT_FOUND)


def lost_detail(what: str, ex: Any) -> str:
    """`what` and how it was refused, for `row`'s evidence."""
    failure = ex.failure()
    if failure is None or failure[0] != Failure.SESSION_NOT_FOUND:
        return f"{what} got HTTP {ex.status}"
    return f"{what} got {failure[1]}"


def row(check: str, seen: str, measured: str, figures: dict, *, legacy: bool) -> CheckRow:
    """The row of a check whose session lost its instance: `seen` (what was refused) and what was
    `measured` not (the check's own subject)."""
    evidence = (f"{seen}: the request reached an instance that does not hold the session (routing, not the server): "
                f"{measured} not measured")
    return CheckRow(check, WARN, evidence, fix(legacy), {**figures, "routed": seen})


__all__ = ["FIX_HTTP", "FIX_LEGACY", "fix", "lost", "lost_detail", "row"]
