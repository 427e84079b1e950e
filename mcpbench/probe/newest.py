"""What the 2026-07-28 checks share: whether the endpoint speaks that version, a session of it, and calls
that must reach a given instance.

2026-07-28 has no handshake and no session: every request stands alone, carries its version and the
client's capabilities in `_meta`, and a balancer may send each to another instance. The checks in
`probe/checks/` about it (discover, headers, results, listen, cancel, state, tasks) each ask
`skip(target, deadline)` first: a legacy HTTP+SSE endpoint (they speak Streamable HTTP), or one whose
`server/discover` is not answered in 2026-07-28, is not theirs to judge (the versions check says which versions it speaks)::

    if (row := newest.skip(NAME, target, deadline)) is not None:
        return row
    session = newest.session(target)                     # an HttpSession speaking 2026-07-28
    ex, tries = newest.on_instance(target, "s2", lambda s: s.call(...), deadline=d)   # until it lands on s2
"""

import json
from collections.abc import Callable
from typing import Any

from mcpbench.probe.sessions import HttpSession, ProbeExchange
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import CheckRow, not_applicable
from mcpbench.protocol.versions import DISCOVER, LATEST, has_handshake, rules

# Calls a check makes to reach one instance behind a balancer (round-robin over up to 4 reaches each in
# 4; random over 3 misses 8 in a row 1 time in 26).
INSTANCE_TRIES = 8


def discovered(target: ProbeTarget, deadline: float) -> dict:
    """`server/discover` in 2026-07-28, asked once per probe: {ok, status, result, detail, instance}."""
    if target.discovered is None:
        session = HttpSession(target.wire, LATEST)
        try:
            ex = session.call(DISCOVER, deadline=deadline)
        finally:
            session.close()
        failure = ex.failure()
        target.discovered = {"ok": ex.ok, "status": ex.status, "result": ex.result if ex.ok else None,
                             "detail": failure[1] if failure else None, "instance": ex.instance}
    return target.discovered


def speaks_newest(found: dict) -> bool:
    """Whether a `server/discover` answer says the server speaks the handshake-free era (2026-07-28)."""
    result = found.get("result")
    versions = result.get("supportedVersions") if isinstance(result, dict) else None
    return bool(found.get("ok")) and (not isinstance(versions, list) or handshake_free(versions))


def handshake_free(versions: list) -> bool:
    """Whether `versions` (a `supportedVersions` list) holds a version of the handshake-free era."""
    return any(isinstance(v, str) and rules(v) is not None and not has_handshake(v) for v in versions)


def skip(name: str, target: ProbeTarget, deadline: float) -> CheckRow | None:
    """The n/a row of a 2026-07-28 check that does not apply here, or None: it does."""
    if target.legacy:
        return not_applicable(name, f"the {LATEST} checks speak Streamable HTTP (its headers, a stream per request): "
                                    "probe the deployment's Streamable HTTP endpoint")
    found = discovered(target, deadline)
    if not speaks_newest(found):
        said = found.get("detail") or f"supportedVersions {found['result'].get('supportedVersions')}"
        return not_applicable(name, f"the server does not speak {LATEST} ({DISCOVER}: {said})")
    return None


def session(target: ProbeTarget, **options: Any) -> HttpSession:
    """A 2026-07-28 session on the target (`options`: `HttpSession`'s policy and capabilities)."""
    return HttpSession(target.wire, LATEST, **options)


# The lab's reference server names itself so (lab/peers/reference_server.py). The checks that need a
# server to act (ask for input, change its tools, run a task, say how a call ended) call the lab's
# tools only there: a tool of the same name elsewhere may do anything.
LAB_SERVER = "mcpbench-reference"


def has_tool(target: ProbeTarget, tool: str) -> bool:
    """Whether the lab's `tool` can be called here: the lab's reference server, offering it."""
    return target.server.get("name") == LAB_SERVER and tool in target.tools


def on_instance(target: ProbeTarget, instance: str | None, call: Callable[[HttpSession], ProbeExchange], *,
                deadline: float, tries: int = INSTANCE_TRIES) -> tuple[ProbeExchange, int]:
    """`call` made on fresh sessions until one reaches `instance` (None, or no instance header: the first
    answer), at most `tries` times; (its last exchange, the calls made)."""
    ex = ProbeExchange()
    for made in range(1, tries + 1):
        one = session(target)
        try:
            ex = call(one)
        finally:
            one.close()
        if instance is None or ex.instance is None or ex.instance == instance:
            return ex, made
    return ex, tries


def text_of(ex: ProbeExchange) -> str | None:
    """The text of a `tools/call` result's first text block, or None."""
    content = (ex.result or {}).get("content") if isinstance(ex.result, dict) else None
    for block in content or ():
        if isinstance(block, dict) and block.get("type") == "text":
            return block.get("text")
    return None


def json_text(ex: ProbeExchange) -> Any:
    """A `tools/call` result whose text is JSON, parsed; None when it is not."""
    text = text_of(ex)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def where(ex: ProbeExchange) -> str:
    """`on s2` when the answer named its instance, else ``."""
    return f" on {ex.instance}" if ex.instance else ""


__all__ = ["INSTANCE_TRIES", "discovered", "handshake_free", "has_tool", "json_text", "on_instance", "session", "skip", "speaks_newest",
           "text_of", "where"]
