"""Check 1, versions and eras: which protocol versions the server accepts, `server/discover`, `MCP-Protocol-Version`.

Each handshake version is offered in an `initialize` of its own; the server's answer says which
it speaks. A 2026-07-28 `server/discover` says whether it speaks the handshake-free era. After a
handshake in a version whose requests carry `MCP-Protocol-Version`, a request naming a version
that does not exist must get 400 ("If the server receives a request with an invalid or
unsupported MCP-Protocol-Version, it MUST respond with 400 Bad Request", Streamable HTTP).
"""

import time

from mcpbench.probe import routing
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.protocol.http import PROTOCOL_VERSION
from mcpbench.protocol.versions import DISCOVER, LATEST, LATEST_HANDSHAKE, VERSIONS, has_handshake, is_latest_handshake, rules

NAME, TITLE, BOUND = "versions", "Versions and eras", 8.0
# A version no server speaks: the answer to it shows whether the header is checked at all.
BOGUS_VERSION = "1999-01-01"


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if target.legacy and (why := target.unsettled()):
        return not_applicable(NAME, why)  # a legacy handshake is a POST beside its stream: it lands anywhere
    offered: dict[str, str | None] = {}
    for version in (v for v in VERSIONS if has_handshake(v)):
        session = target.session(version)
        try:
            ex = session.open(deadline=deadline)
            offered[version] = (ex.result or {}).get("protocolVersion") if ex.ok else None
            session.end(deadline=deadline)
        finally:
            session.close()
        if time.monotonic() >= deadline:
            break
    discover, header, skipped = None, None, None
    if not target.legacy:
        discover = _discover(target, deadline)
        header, skipped = _bogus_header(target, deadline)
    return judge({"offered": offered, "accepted": [v for v, got in offered.items() if got == v], "answered": offered,
                  "negotiated": target.version, "discover": discover, "bogus_version_status": header,
                  "bogus_version_not_tried": skipped, "legacy": target.legacy})


def _discover(target: ProbeTarget, deadline: float) -> dict:
    session = target.session(LATEST)
    try:
        ex = session.call(DISCOVER, deadline=deadline)
    finally:
        session.close()
    failure = ex.failure()
    return {"ok": ex.ok, "status": ex.status, "supported": (ex.result or {}).get("supportedVersions"),
            "detail": failure[1] if failure else None}


def _bogus_header(target: ProbeTarget, deadline: float) -> tuple[int | None, str | None]:
    """(the status of a request whose `MCP-Protocol-Version` names no version, None), or (None, why it
    was not tried); (None, None): the rule does not apply."""
    known = rules(target.version)
    if known is None or not known.protocol_version_header:
        return None, None
    if why := target.unsettled():
        return None, why
    session = target.session()
    try:
        if not session.open(deadline=deadline).ok:
            return None, "no session could be opened to try it"
        ex = session.call("tools/list", deadline=deadline, extra={PROTOCOL_VERSION: BOGUS_VERSION})
        session.end(deadline=deadline)
        if routing.lost(ex):  # the session's instance never saw the header: another one did not know the session
            return None, f"{routing.lost_detail('its tools/list', ex)}: it reached an instance that does not hold the session"
        return ex.status, None
    finally:
        session.close()


def judge(figures: dict) -> CheckRow:
    accepted, discover, bogus = figures["accepted"], figures.get("discover"), figures.get("bogus_version_status")
    parts = [f"accepts {', '.join(accepted) if accepted else 'none of the handshake versions'}"]
    if figures.get("negotiated"):
        parts.append(f"newest offered → {figures['negotiated']}")
    if discover is not None:
        parts.append(f"{DISCOVER} {'answered' if discover['ok'] else 'not answered'} ({LATEST})")
    if bogus is not None:
        parts.append(f"MCP-Protocol-Version {BOGUS_VERSION} → HTTP {bogus}")
    if skipped := figures.get("bogus_version_not_tried"):
        parts.append(f"MCP-Protocol-Version {BOGUS_VERSION} not tried: {skipped}")
    evidence = "; ".join(parts)
    if not accepted:
        return CheckRow(NAME, FAIL, evidence, "Speak one of the specification's versions: upgrade the server's MCP SDK.", figures)
    if bogus is not None and bogus < 300:
        return CheckRow(NAME, FAIL, evidence, "Answer 400 to an unsupported MCP-Protocol-Version (the specification's MUST): "
                   "the SDKs do; a proxy must pass the header through.", figures)
    if not any(is_latest_handshake(version) for version in accepted):
        return CheckRow(NAME, WARN, evidence, f"Upgrade the server's MCP SDK: clients speaking {LATEST_HANDSHAKE} are answered "
                   "in an older version.", figures)
    if skipped:  # what was tried passed; a part left out is no pass
        return CheckRow(NAME, WARN, evidence, routing.fix(figures.get("legacy", False)), figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)
