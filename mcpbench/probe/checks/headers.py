"""2026-07-28 check: a POST whose `Mcp-Method` disagrees with its body gets 400 with -32020; one naming a
version the server does not speak gets 400 with -32022.

Streamable HTTP, 2026-07-28: the headers let a gateway route without reading the body, so the
server must refuse a request whose headers and body disagree ("HeaderMismatch", -32020), or a
gateway could route (and authorize) one method while the server runs another; an unsupported
protocol version is -32022 with the versions it does support. A gateway that sets the headers from
the body (or drops them) hides the mismatch from the server: the deployment, not the server, fails here.
"""

from mcpbench.probe import newest
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow
from mcpbench.protocol.http import METHOD, PROTOCOL_VERSION
from mcpbench.protocol.jsonrpc import Request
from mcpbench.protocol.versions import envelope

NAME, TITLE, BOUND = "headers", "Mcp-Method and version refusals (2026-07-28)", 6.0
HEADER_MISMATCH, UNSUPPORTED_VERSION = -32020, -32022
BAD_REQUEST = 400
# The body's method and the header's: a listing sent as a tool call, which a gateway would route as one.
SENT, CLAIMED = "tools/list", "tools/call"
BOGUS_VERSION = "1999-01-01"
FIX_METHOD = ("Pass Mcp-Method and Mcp-Name through exactly as the client sent them (a gateway must not set them from the "
              "body, nor drop them), and have the server compare them with the body and answer 400 with -32020 (the SDKs "
              "speaking 2026-07-28 do).")
FIX_VERSION = (f"Answer a request for a version the server does not speak with 400 and -32022, listing the versions it "
               f"supports (the SDKs do); a proxy must pass {PROTOCOL_VERSION} and the body's _meta through.")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if (row := newest.skip(NAME, target, deadline)) is not None:
        return row
    session = newest.session(target)
    try:
        mismatch = session.call(SENT, deadline=deadline, extra={METHOD: CLAIMED})
        out = session.conn.send(Request(id=session.conn.next_id(), method=SENT, params={"_meta": envelope(BOGUS_VERSION)},
                                        _parsed=True))
        bogus = session.send(out, deadline=deadline, extra={PROTOCOL_VERSION: BOGUS_VERSION})
    finally:
        session.close()
    return judge({"mismatch": _seen(mismatch), "bogus_version": _seen(bogus)})


def _seen(ex) -> dict:
    error = ex.answered.answer if ex.answered is not None and not ex.ok else None
    failure = ex.failure()
    return {"status": ex.status, "code": getattr(error, "code", None), "message": getattr(error, "message", None),
            "detail": failure[1] if failure else None, "instance": ex.instance}


def _said(seen: dict) -> str:
    if seen["status"] is None:
        return f"no answer ({seen['detail']})"
    code = f" JSON-RPC {seen['code']}" if seen["code"] is not None else " (a result)" if seen["status"] < 300 else ""
    return f"HTTP {seen['status']}{code}"


def judge(figures: dict) -> CheckRow:
    mismatch, bogus = figures["mismatch"], figures["bogus_version"]
    evidence = (f"{SENT} sent with {METHOD}: {CLAIMED} → {_said(mismatch)}; "
                f"{PROTOCOL_VERSION}: {BOGUS_VERSION} → {_said(bogus)}")
    served = mismatch["status"] is not None and mismatch["status"] < 300
    if served:
        return CheckRow(NAME, FAIL, evidence + ": a header that disagrees with the body was served (something between sets "
                   "Mcp-Method from the body, or the server does not compare them)", FIX_METHOD, figures)
    if bogus["status"] is not None and bogus["status"] < 300:
        return CheckRow(NAME, FAIL, evidence + ": a version the server does not speak was served", FIX_VERSION, figures)
    wrong = [(seen, code, fix) for seen, code, fix in ((mismatch, HEADER_MISMATCH, FIX_METHOD), (bogus, UNSUPPORTED_VERSION, FIX_VERSION))
             if (seen["status"], seen["code"]) != (BAD_REQUEST, code)]
    if wrong:
        seen, code, fix = wrong[0]
        return CheckRow(NAME, WARN, evidence + f": refused, but not with HTTP {BAD_REQUEST} and {code}", fix, figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)
