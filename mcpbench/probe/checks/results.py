"""2026-07-28 check: every result carries `resultType`; the cacheable ones carry `ttlMs` and `cacheScope`.

2026-07-28: "every result carries `resultType`" (`complete`, `input_required`, `task`): a client
tells a final result from a request for input by it. `tools/list`, `prompts/list`,
`resources/list`, `resources/templates/list` and `resources/read` results carry `ttlMs` (how long
the result stays fresh) and `cacheScope` (`public`: shared caches may keep it; `private`: only this
client), which a gateway's cache and the client's obey. A proxy that rewrites bodies can drop them.
"""

from mcpbench.probe import newest
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow
from mcpbench.protocol.versions import CACHE_HINTS, CACHEABLE_METHODS, DISCOVER, RESULT_TYPE

NAME, TITLE, BOUND = "results", "resultType and cache hints (2026-07-28)", 8.0
LISTINGS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
SCOPES = ("public", "private")
FIX_TYPE = (f"Put {RESULT_TYPE} in every 2026-07-28 result (\"complete\" for a final one): upgrade the server's SDK, and have "
            "any proxy that rewrites bodies keep it.")
FIX_CACHE = ("Give listings and resources/read results ttlMs (ms they stay fresh) and cacheScope (public or private), as "
             "the SDKs do (MCPServer's cache_hints); a proxy that rewrites bodies must keep them.")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if (row := newest.skip(NAME, target, deadline)) is not None:
        return row
    seen: dict[str, dict] = {}
    session = newest.session(target)
    try:
        for method in (DISCOVER, *LISTINGS):
            ex = session.call(method, deadline=deadline)
            seen[method] = _result(ex)
            if method == "resources/list" and ex.ok:
                uris = [r.get("uri") for r in ex.result.get("resources") or () if isinstance(r, dict) and r.get("uri")]
                if uris:
                    seen["resources/read"] = _result(session.call("resources/read", {"uri": uris[0]}, deadline=deadline))
    finally:
        session.close()
    return judge({"results": seen})


def _result(ex) -> dict:
    if not ex.ok:
        failure = ex.failure()
        return {"answered": False, "detail": failure[1] if failure else None}
    result = ex.result if isinstance(ex.result, dict) else {}
    return {"answered": True, RESULT_TYPE: result.get(RESULT_TYPE), **{hint: result.get(hint) for hint in CACHE_HINTS}}


def judge(figures: dict) -> CheckRow:
    answered = {m: r for m, r in figures["results"].items() if r.get("answered")}
    untyped = sorted(m for m, r in answered.items() if r.get(RESULT_TYPE) is None)
    unhinted = sorted(m for m, r in answered.items() if m in CACHEABLE_METHODS and not _hinted(r))
    cacheable = sorted(m for m in answered if m in CACHEABLE_METHODS)
    figures.update(untyped=untyped, unhinted=unhinted)
    hints = "; ".join(f"{m} ttlMs {answered[m].get('ttlMs')} {answered[m].get('cacheScope')}" for m in cacheable[:2])
    evidence = (f"{len(answered)} results ({', '.join(sorted(answered))}): {len(answered) - len(untyped)} with {RESULT_TYPE}, "
                f"{len(cacheable) - len(unhinted)} of {len(cacheable)} cacheable with ttlMs and cacheScope"
                + (f" ({hints})" if hints else ""))
    if not answered:
        return CheckRow(NAME, WARN, "no result came to look at", FIX_TYPE, figures)
    if untyped:
        return CheckRow(NAME, FAIL, f"{evidence}; without {RESULT_TYPE}: {', '.join(untyped)}", FIX_TYPE, figures)
    if unhinted:
        return CheckRow(NAME, WARN, f"{evidence}; without them: {', '.join(unhinted)}", FIX_CACHE, figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)


def _hinted(result: dict) -> bool:
    ttl = result.get("ttlMs")
    return type(ttl) is int and ttl >= 0 and result.get("cacheScope") in SCOPES
