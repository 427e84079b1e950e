"""The probe's decisions without I/O: which checks run, the table, the exit status, judges at their edges."""

import pytest

from mcpbench.probe.checks import buffering, churn, origin, resume, sessions, unknown, versions
from mcpbench.probe.run import NAMES, UnknownCheck, select
from mcpbench.probe.target import ProbeSettings, ProbeTarget, ProgressCall
from mcpbench.probe.verdicts import FAIL, NA, PASS, WARN, CheckRow, exit_status, render
from mcpbench.probe.wire import ProbeOptions, Wire
from mcpbench.protocol.client import Pushed, Unmatched
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Response


def test_selection_keeps_the_order_leaves_idle_to_opt_in_and_names_the_unknown():
    assert [c.name for c in select()] == [n for n in NAMES if n != "idle"]
    assert [c.name for c in select(idle_asked=True)] == list(NAMES)
    assert [c.name for c in select(["auth,versions"], ["auth"])] == ["versions"]
    with pytest.raises(UnknownCheck, match="'stickiness'.*versions, sessions"):
        select(["stickiness"])
    with pytest.raises(UnknownCheck, match="no check left"):
        select(["auth"], ["auth"])


def test_exit_status_fails_on_fail_and_on_warn_only_when_strict():
    rows = [CheckRow("a", PASS, ""), CheckRow("b", WARN, ""), CheckRow("c", NA, "")]
    assert exit_status(rows) == 0 and exit_status(rows, strict=True) == 1
    assert exit_status(rows + [CheckRow("d", FAIL, "")]) == 1


def test_the_table_wraps_evidence_and_fix_in_their_columns():
    text = render([CheckRow("resume", FAIL, "word " * 30, "fix " * 30)])
    lines = text.splitlines()
    assert lines[2].startswith("resume       fail    word") and len(lines) > 3
    assert all(line[:21].strip() == "" for line in lines[3:])  # continuation lines leave check and verdict empty


def test_a_progress_tool_is_a_name_and_json_arguments():
    call = ProgressCall.parse('slow {"seconds": 1}')
    assert call.params("t") == {"name": "slow", "arguments": {"seconds": 1}, "_meta": {"progressToken": "t"}}
    assert ProgressCall.parse("tick").arguments == {}


def test_buffering_is_judged_by_when_progress_came():
    spread = {"call": "slow", "deployment": {"progress_at": [0.25, 0.5, 0.75, 1.0], "answer_at": 1.0, "error": None}}
    held = {"call": "slow", "deployment": {"progress_at": [1.0, 1.0, 1.0, 1.0], "answer_at": 1.0, "error": None}}
    late = {"call": "slow", "deployment": {"progress_at": [0.6, 0.7, 0.8, 0.9], "answer_at": 1.0, "error": None}}
    assert [buffering.judge(f).verdict for f in (spread, held, late)] == [PASS, FAIL, WARN]


def test_resume_without_priming_warns_and_a_doubled_answer_fails():
    base = {"call": "slow", "first_id": "1", "primed": True, "retry_ms": 500, "answered_before_cut": False, "resumes": 1,
            "answers": 1, "progress": [1, 2], "total": 2, "duplicated_events": 0, "details": []}
    assert resume.judge(base).verdict == PASS
    assert resume.judge({**base, "primed": False}).verdict == WARN
    doubled = resume.judge({**base, "answers": 2})
    assert doubled.verdict == FAIL and "2×" in doubled.evidence and doubled.fix.startswith("Pass a GET")


def test_sessions_that_did_not_all_run_say_so():
    target = ProbeTarget("http://h/mcp", "streamable-http", Wire("http://h/mcp", ProbeOptions()), ProbeSettings())
    records = [{"session": "s0", "step": "initialize", "t": 1.0, "instance": "s1", "status": 200}]
    row = sessions.judge(records, 50, target)
    assert row.verdict == PASS and "only 1 of 50 sessions ran within the 25 s bound" in row.evidence


def _target(**changes) -> ProbeTarget:
    target = ProbeTarget("http://h/mcp", "streamable-http", Wire("http://h/mcp", ProbeOptions()), ProbeSettings())
    for name, value in changes.items():
        setattr(target, name, value)
    return target


def test_the_sessions_check_decides_whether_one_session_checks_run_not_first_contact():
    assert _target().unsettled() is None
    assert "first contact" in _target(affinity=False).unsettled()
    lucky = _target(sessions_lost=(33, 50))  # first contact's session happened to stay; 33 of 50 did not
    assert lucky.unsettled().startswith("33 of 50 sessions lost the instance") and "sessions check" in lucky.unsettled()
    assert _target(affinity=False, sessions_lost=(0, 50)).unsettled() is None  # measured: sessions stay
    assert "first contact" in _target(affinity=False, sessions_lost=(0, 0)).unsettled()  # none ran: first contact's
    assert _target(keeps_sessions=False, sessions_lost=(50, 50)).unsettled() is None


def test_a_lost_session_inside_a_check_is_routing_not_the_servers_fault():
    routed = resume.judge({"call": "slow", "first_id": None, "routed": "slow got HTTP 404: JSON-RPC -32600 Session not found"})
    assert routed.verdict == WARN and "routing, not the server" in routed.evidence and "no ids" not in routed.evidence
    assert routed.fix.startswith("Route each session")
    held = {"call": "slow", "deployment": {"progress_at": [], "answer_at": None, "error": "HTTP 404: Session not found",
                                            "routed": "slow got HTTP 404: Session not found"}}
    assert buffering.judge(held).verdict == WARN and "buffering not measured" in buffering.judge(held).evidence
    spike = {"sessions": 100, "failed": 0, "failures": {}, "delete": {"200": 35, "404": 65}, "seconds": 1.0}
    churned = churn.judge({"before_ms": [1.0], "after_ms": [1.0], "before_failed": 0, "after_failed": 0, "spike": spike,
                           "legacy": False, "fresh": None, "lost_calls": 0})
    assert churned.verdict == WARN and "65 DELETE(s) of 100 got HTTP 404" in churned.evidence and "Route each" in churned.fix


def test_a_server_without_an_event_store_is_named_as_the_server():
    row = resume.judge({"call": "slow", "first_id": None})
    assert row.verdict == FAIL and "the server gives its stream's events no ids" in row.evidence and "not the deployment" in row.evidence


def test_parts_left_out_are_said_and_no_pass():
    base = {"accepted": ["2025-11-25"], "negotiated": "2025-11-25", "discover": None, "bogus_version_status": None}
    untried = versions.judge({**base, "bogus_version_not_tried": "its tools/list got HTTP 404: Session not found"})
    assert untried.verdict == WARN and "MCP-Protocol-Version 1999-01-01 not tried" in untried.evidence
    made_up = {"status": 404, "detail": "Session not found"}
    ended = {"status": None, "routed": True, "detail": "DELETE got HTTP 404: it reached an instance that does not hold the session"}
    row = unknown.judge({"made_up": made_up, "ended": ended})
    assert row.verdict == WARN and "ended id not tried: DELETE got HTTP 404" in row.evidence
    no_delete = unknown.judge({"made_up": made_up, "ended": {"status": None, "detail": "DELETE did not end the session (HTTP 405)"}})
    assert no_delete.verdict == PASS and "ended id not tried" in no_delete.evidence  # said; the server cannot end sessions


def test_buffering_held_back_by_a_proxy_that_ignores_the_servers_x_accel_buffering():
    held = {"call": "slow", "deployment": {"progress_at": [1.0, 1.0], "answer_at": 1.0, "error": None}}
    assert buffering.judge(held).fix == buffering.FIX
    asked = buffering.judge({**held, "deployment": {**held["deployment"], "accel_buffering": "no"}})
    assert asked.verdict == FAIL and asked.fix == buffering.FIX_PROXY and "the server sent X-Accel-Buffering: no" in asked.evidence


def test_origin_served_means_an_mcp_answer_and_a_closed_connection_is_a_refusal():
    refused = {"status": 403, "mcp": False}
    page = origin.judge({"host": {"status": 200, "mcp": False}, "origin": refused, "local": True})
    assert page.verdict == PASS and "not an MCP answer" in page.evidence
    closed = origin.judge({"host": {"status": None, "closed": True, "detail": "closed"}, "origin": refused, "local": True})
    assert closed.verdict == PASS and "closed without an answer (refused)" in closed.evidence
    served = origin.judge({"host": {"status": 200, "mcp": True}, "origin": refused, "local": True})
    assert served.verdict == FAIL and "foreign Host was served" in served.evidence
    timed_out = origin.judge({"host": {"status": None, "detail": "no answer within 5 s"}, "origin": refused, "local": True})
    assert timed_out.verdict == WARN and "could not be tried" in timed_out.evidence


def test_a_misdirected_initialize_names_a_host_rewriting_proxy():
    from mcpbench.probe.sessions import ProbeExchange
    from mcpbench.probe.target import _not_mcp
    from mcpbench.protocol.client import Failed

    ex = ProbeExchange(status=421, failed=Failed(None, None, "http-4xx", "HTTP 421: Invalid Host header"))
    text = _not_mcp("http://h/mcp", ex)
    assert "not an MCP endpoint" not in text and "refused the Host it received" in text and "rewrites Host" in text


def test_a_404_on_a_sessions_get_stream_is_routing_too():
    from mcpbench.probe import routing
    from mcpbench.probe.checks import idle
    from mcpbench.probe.sessions import ProbeExchange

    get = ProbeExchange(status=404)  # a GET stream refused: no call failed, the status says it
    assert routing.lost(get) and routing.lost_detail("the GET", get) == "the GET got HTTP 404"
    assert not routing.lost(ProbeExchange(status=405))
    row = idle.judge({"up_to": 2.0, "stream": {"routed": "the session's GET stream got HTTP 404"}, "connection": {}})
    assert row.verdict == WARN and "idle streams not measured" in row.evidence and "server offers no GET stream" not in row.evidence


def test_a_foreign_event_id_counts_as_a_leak_only_what_it_brings_of_the_first_sessions_call():
    """Behind a balancer each instance numbers its events itself: the first session's event id can name
    an event of the second session's own on another instance, whose replay (its `initialize` answer) is
    no leak; the first call's answer and progress are."""
    call_id = 2
    own_answer = Unmatched(Response(id=1, result={"protocolVersion": "2025-11-25"}), late=False, via="get", duplicate=True)
    own_notice = Pushed(Notification(method="notifications/message", params={"level": "info", "data": "hi"}), None, None, "get")
    progress = Pushed(Notification(method="notifications/progress", params={"progressToken": resume.PROGRESS_TOKEN, "progress": 1}), None, None, "get")
    answer = Unmatched(Response(id=call_id, result={"content": []}), late=False, via="get")
    failed = Unmatched(ErrorResponse(id=call_id, code=-32603, message="boom"), late=False, via="get")
    assert [resume._of_call(e, call_id) for e in (own_answer, own_notice, progress, answer, failed)] == [False, False, True, True, True]
    assert not resume._of_call(answer, None)  # no call of the first session's known: no answer is its
