"""Check 8, Host and Origin: a request with a foreign `Host`, and one with a foreign `Origin`, must be refused.

The specification's security warning (Streamable HTTP): servers "MUST validate the Origin header
on all incoming connections to prevent DNS rebinding attacks", and local servers should bind to
localhost only; the SDKs refuse a foreign Host with 421 and a foreign Origin with 403. A web page
that rebinds its own name to 127.0.0.1 reaches a local server with its own Host and Origin: a
server on a loopback address that answers them fails; a remote one only gets a warning (it may
sit behind a gateway that checks for it, and a DNS name of its own).
"""

import ipaddress

from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow
from mcpbench.probe.wire import WireError
from mcpbench.protocol.http import GET_ACCEPT, is_event_stream
from mcpbench.protocol.server import LOOPBACK_BINDS
from mcpbench.protocol.client import initialize_request

NAME, TITLE, BOUND = "origin", "Host and Origin", 6.0
FOREIGN_HOST = "rebind.mcpbench.invalid"
FOREIGN_ORIGIN = f"http://{FOREIGN_HOST}"
FIX = ("Validate Host and Origin (DNS-rebinding protection): refuse a foreign Origin with 403 and a foreign Host with 421 "
       "(the SDKs' allowed hosts and origins); a proxy in front must pass the client's Host through or check it itself.")


def is_local(host: str) -> bool:
    """Whether the URL's host is a loopback address or name."""
    if host in LOOPBACK_BINDS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    seen = {"host": _try(target, {"host": FOREIGN_HOST}, deadline), "origin": _try(target, {"origin": FOREIGN_ORIGIN}, deadline)}
    return judge({**seen, "local": is_local(target.wire.host)})


def _try(target: ProbeTarget, extra: dict, deadline: float) -> dict:
    """What a session's first request carrying `extra` got: its status, whether the answer was MCP
    (`mcp`), or that the connection was closed without one (`closed`); a session it opened is ended."""
    if target.legacy:
        try:
            reply = target.wire.request("GET", {"accept": GET_ACCEPT}, deadline=deadline, extra=extra)
        except WireError as exc:
            return {"status": None, "closed": exc.closed, "detail": str(exc)}
        reply.close()
        return {"status": reply.status, "mcp": is_event_stream(reply.content_type)}  # the session's stream
    session = target.session()
    try:
        ex = session.send(session.conn.send(initialize_request(session.conn)), deadline=deadline, extra=extra)
        if ex.ok:
            session.end(deadline=deadline)
        return {"status": ex.status, "closed": ex.unanswered_close, "mcp": ex.answered is not None, "detail": ex.detail}
    finally:
        session.close()


def _seen(seen: dict) -> str:
    if seen.get("status") is None:
        return "the connection closed without an answer (refused)" if seen.get("closed") else "no answer"
    if seen["status"] < 300 and not seen.get("mcp", True):
        return f"HTTP {seen['status']}, not an MCP answer (the front's own: the server never saw it)"
    return f"HTTP {seen['status']}"


def judge(figures: dict) -> CheckRow:
    """Served means an MCP answer: a 2xx page or empty body of the front's own never reached the server,
    and a connection closed without an answer is a refusal."""
    host, origin, local = figures["host"], figures["origin"], figures["local"]
    served = [what for what, seen in (("Host", host), ("Origin", origin))
              if seen.get("status") is not None and seen["status"] < 300 and seen.get("mcp", True)]
    evidence = f"foreign Host → {_seen(host)}; foreign Origin → {_seen(origin)}; {'a local' if local else 'a remote'} address"
    untried = [seen for seen in (host, origin) if seen.get("status") is None and not seen.get("closed")]
    if untried:
        return CheckRow(NAME, WARN, f"could not be tried: {untried[0].get('detail')}", figures=figures)
    if not served:
        return CheckRow(NAME, PASS, evidence, figures=figures)
    evidence += f": a foreign {' and a foreign '.join(served)} {'were' if len(served) > 1 else 'was'} served"
    return CheckRow(NAME, FAIL if local else WARN, evidence, FIX, figures)
