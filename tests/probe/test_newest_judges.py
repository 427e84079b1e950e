"""The 2026-07-28 checks' judges without I/O: each verdict both ways, with its evidence and its fix."""

from mcpbench.probe.checks import cancel, discover, headers, listen, results, state, tasks
from mcpbench.probe.newest import speaks_newest
from mcpbench.probe.verdicts import FAIL, NA, PASS, WARN


def test_discover_passes_versions_and_capabilities_and_fails_without():
    good = discover.judge({"ok": True, "status": 200, "result": {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                                                                   "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x"}}}})
    assert good.verdict == PASS and "versions 2026-07-28; capabilities tools; server x" in good.evidence
    bare = discover.judge({"ok": True, "status": 200, "result": {"supportedVersions": ["2026-07-28"]}})
    assert bare.verdict == FAIL and "no capabilities" in bare.evidence and "supportedVersions" in bare.fix
    old = discover.judge({"ok": False, "status": 200, "detail": "JSON-RPC -32601 Method not found", "result": None})
    assert old.verdict == NA and "does not speak 2026-07-28" in old.evidence
    assert speaks_newest({"ok": True, "result": {"supportedVersions": ["2026-07-28"]}})
    assert not speaks_newest({"ok": True, "result": {"supportedVersions": ["2025-11-25"]}})


def _seen(status, code=None):
    return {"status": status, "code": code, "message": None, "detail": None, "instance": None}


def test_headers_pass_on_400_with_their_codes_and_fail_when_a_mismatch_is_served():
    ok = headers.judge({"mismatch": _seen(400, -32020), "bogus_version": _seen(400, -32022)})
    assert ok.verdict == PASS and "→ HTTP 400 JSON-RPC -32020" in ok.evidence and "→ HTTP 400 JSON-RPC -32022" in ok.evidence
    rewritten = headers.judge({"mismatch": _seen(200), "bogus_version": _seen(400, -32022)})
    assert rewritten.verdict == FAIL and "(a result)" in rewritten.evidence and "not set them from the body" in rewritten.fix
    version = headers.judge({"mismatch": _seen(400, -32020), "bogus_version": _seen(200)})
    assert version.verdict == FAIL and "-32022" in version.fix
    other = headers.judge({"mismatch": _seen(400, -32600), "bogus_version": _seen(400, -32022)})
    assert other.verdict == WARN and "not with HTTP 400 and -32020" in other.evidence


def test_results_fail_without_result_type_and_warn_without_cache_hints():
    typed = {"answered": True, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    ok = results.judge({"results": {"server/discover": typed, "tools/list": typed}})
    assert ok.verdict == PASS and "2 with resultType, 1 of 1 cacheable" in ok.evidence
    untyped = results.judge({"results": {"tools/list": {**typed, "resultType": None}}})
    assert untyped.verdict == FAIL and "without resultType: tools/list" in untyped.evidence
    unhinted = results.judge({"results": {"tools/list": {**typed, "cacheScope": "everyone"}}})
    assert unhinted.verdict == WARN and "ttlMs" in unhinted.fix and unhinted.figures["unhinted"] == ["tools/list"]


def test_listen_fails_held_back_streams_and_passes_a_timely_change():
    held = listen.judge({"held": True, "error": "no answer within 3 s"})
    assert held.verdict == FAIL and "not even its head" in held.evidence and "buffering off" in held.fix
    unacked = listen.judge({"status": 200, "instance": "s1"})
    assert unacked.verdict == FAIL and "no acknowledgement" in unacked.evidence
    change = {"tries": 2, "on": "s1", "answer_after": 0.05, "heard_after": 0.06}
    heard = listen.judge({"status": 200, "instance": "s1", "ack_after": 0.04, "change": change})
    assert heard.verdict == PASS and "tools/list_changed 0.06 s after toggle_tool" in heard.evidence
    lost = listen.judge({"status": 200, "ack_after": 0.04, "change": {**change, "heard_after": None}})
    assert lost.verdict == FAIL and "no tools/list_changed came" in lost.evidence
    late = listen.judge({"status": 200, "ack_after": 0.04, "change": {**change, "heard_after": 2.0}})
    assert late.verdict == WARN


def test_cancel_passes_a_cancelled_call_and_fails_one_that_ran_on():
    base = {"call": "slow", "cut": True, "answered": False, "progress_seen": 1, "first_progress_at": 0.25, "waited": 0.3}
    stopped = cancel.judge({**base, "ledger": {"sent": 1, "of": 8, "ended": "cancelled"}})
    assert stopped.verdict == PASS and "sent 1 of 8 and the call cancelled" in stopped.evidence
    ran = cancel.judge({**base, "ledger": {"sent": 8, "of": 8, "ended": "completed"}})
    assert ran.verdict == FAIL and "did not reach it" in ran.evidence and "upstream" in ran.fix
    unknown = cancel.judge({**base, "ledger": {"unknown": "t"}})
    assert unknown.verdict == WARN


def _op(rounds, ended="done", carried=True, detail=None):
    return {"rounds": rounds, "state": carried, "ended": ended, "detail": detail}


def test_state_fails_refused_retries_and_accepted_tampering():
    refused = state.judge({"operations": [_op(["s1", "s2"], "state-rejected", detail="-32602: Invalid or expired requestState"),
                                          _op(["s2", "s2"])], "tampered": _op(["s1", "s2"], "state-rejected")})
    assert refused.verdict == FAIL and "1 refused (e.g. sealed on s1, retried on s2" in refused.evidence
    assert "RequestStateSecurity(keys=" in refused.fix
    shared = state.judge({"operations": [_op(["s1", "s2"]), _op(["s2", "s1"])], "tampered": _op(["s1", "s2"], "state-rejected")})
    assert shared.verdict == PASS and "2 reached another instance" in shared.evidence and "a tampered one refused" in shared.evidence
    trusting = state.judge({"operations": [_op(["s1", "s1"])], "tampered": _op(["s1", "s1"])})
    assert trusting.verdict == FAIL and "tampered requestState was accepted" in trusting.evidence and "HMAC" in trusting.fix
    stateless = state.judge({"operations": [_op([None, None], carried=False)]})
    assert stateless.verdict == PASS and "none carried a requestState" in stateless.evidence


def test_tasks_fail_when_a_poll_elsewhere_does_not_find_the_task():
    def poll(on, found):
        return {"on": on, "found": found, "status": "working" if found else None, "detail": None if found else "-32602 unknown task"}

    lost = tasks.judge({"handle": True, "created_on": "s1", "polls": [poll("s2", False), poll("s1", True)]})
    assert lost.verdict == FAIL and "1 on another instance; 1 did not find it (-32602 unknown task on s2)" in lost.evidence
    assert "Mcp-Name" in lost.fix
    found = tasks.judge({"handle": True, "created_on": "s1", "polls": [poll("s2", True), poll("s1", True)]})
    assert found.verdict == PASS and "statuses working" in found.evidence
    assert tasks.judge({"handle": False, "detail": "a result"}).verdict == WARN
