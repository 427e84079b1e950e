"""The probe's decisions without I/O: which checks run, the table, the exit status, judges at their edges."""

import pytest

from mcpbench.probe.checks import buffering, resume, sessions
from mcpbench.probe.run import NAMES, UnknownCheck, select
from mcpbench.probe.target import ProgressCall, Settings, Target
from mcpbench.probe.verdicts import FAIL, NA, PASS, WARN, Row, exit_status, render
from mcpbench.probe.wire import ProbeOptions, Wire


def test_selection_keeps_the_order_leaves_idle_to_opt_in_and_names_the_unknown():
    assert [c.name for c in select()] == [n for n in NAMES if n != "idle"]
    assert [c.name for c in select(idle_asked=True)] == list(NAMES)
    assert [c.name for c in select(["auth,versions"], ["auth"])] == ["versions"]
    with pytest.raises(UnknownCheck, match="'stickiness'.*versions, sessions"):
        select(["stickiness"])
    with pytest.raises(UnknownCheck, match="no check left"):
        select(["auth"], ["auth"])


def test_exit_status_fails_on_fail_and_on_warn_only_when_strict():
    rows = [Row("a", PASS, ""), Row("b", WARN, ""), Row("c", NA, "")]
    assert exit_status(rows) == 0 and exit_status(rows, strict=True) == 1
    assert exit_status(rows + [Row("d", FAIL, "")]) == 1


def test_the_table_wraps_evidence_and_fix_in_their_columns():
    text = render([Row("resume", FAIL, "word " * 30, "fix " * 30)])
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
    target = Target("http://h/mcp", "streamable-http", Wire("http://h/mcp", ProbeOptions()), Settings())
    records = [{"session": "s0", "step": "initialize", "t": 1.0, "instance": "s1", "status": 200}]
    row = sessions.judge(records, 50, target)
    assert row.verdict == PASS and "only 1 of 50 sessions ran within the 25 s bound" in row.evidence
