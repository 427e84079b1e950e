"""`mcpbench inspect` on operations (trace model): a multi round-trip request once with its rounds, a
task with its statuses, the model's rules as violations in the text, --json, --strict and JUnit."""

import json

from click.testing import CliRunner

from mcpbench.analysis.inspect import render, suite, summarize
from mcpbench.cli import main
from tests.support.traces import answered, asks, done, handshake, request, result, sent, task_status, write_trace


def test_rounds_under_their_operation_and_a_broken_rule_fails_strict_and_junit(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [request(2.0, 1), asks(2.1, 1, state="A"), request(4.1, 2, responses=answered(), state="B"),
                                              done(4.2, 2)])
    text = render(summarize(path))
    assert text.count("→ tools/call ask") == 1 and "(2 rounds, client 2000.00 ms between rounds)" in text
    assert "round 1 (id 1)" in text and "round 2 (id 2)" in text and "! mrtr-state-changed" in text
    assert CliRunner().invoke(main, ["inspect", "--strict", str(path)]).exit_code == 1
    (case,) = suite(summarize(path)).cases
    assert "line 4: mrtr-state-changed" in case.name and case.status == "failed"
    report = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(path)]).output)
    assert report["violations"] == {"mrtr-state-changed": 1} and report["methods"]["tools/call ask"]["latency_ms"]["max"] == 2200.0
    assert report["operations"][0]["client_wait_ms"] == 2000.0 and report["sessions"][0]["operations"] == 1


def test_a_kept_rule_passes_strict(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [request(2.0, 1), asks(2.1, 1, state="A"), request(2.2, 2, responses=answered(), state="A"), done(2.3, 2)])
    assert CliRunner().invoke(main, ["inspect", "--strict", str(path)]).exit_code == 0


def test_a_task_is_shown_on_its_operation(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [*handshake(), sent(2.0, 1, "tools/call", {"name": "work", "task": {"ttl": 1000}}),
                                              result(2.01, 1, {"task": task_status("t1", "working")}),
                                              sent(2.2, 2, "tasks/get", {"taskId": "t1"}), result(2.21, 2, task_status("t1", "completed"))])
    assert "tools/call work                       210.00 ms  ok  (task t1: working → completed; created in 10.00 ms, 1 polls)" in render(summarize(path))
    (task,) = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(path)]).output)["tasks"]
    assert (task["task"], task["polls"], task["statuses"], task["complete_ms"]) == ("t1", 1, ["working", "completed"], 210.0)


def test_the_2026_error_codes_are_named_in_inspect_and_the_frame_keeps_the_code(tmp_path):
    from mcpbench.analysis.traces import load_trace
    from tests.support.traces import event

    path = write_trace(tmp_path / "t.jsonl", [request(1.0, 1, name="echo"), event(1.1, "s1", "s2c", {
        "jsonrpc": "2.0", "id": 1, "error": {"code": -32021, "message": "elicitation required"}})])
    assert "error: -32021 (missing client capability): elicitation required" in render(summarize(path))
    calls = load_trace(path).calls
    assert calls["error_code"].tolist() == [-32021] and calls["detail"].tolist() == ["elicitation required"]


def test_a_call_its_client_cancelled_is_cancelled_not_unanswered_and_an_answer_after_still_pairs(tmp_path):
    from mcpbench.analysis.traces import load_trace
    from tests.support.traces import notified
    from tests.support.views import assert_views_agree

    cancel = {"requestId": 1, "reason": "the user pressed stop"}
    path = write_trace(tmp_path / "t.jsonl", [*handshake(), sent(2.0, 1, "tools/call", {"name": "slow"}),
                                              sent(2.1, 2, "tools/call", {"name": "slow"}),
                                              notified(2.5, "notifications/cancelled", cancel, direction="c2s"),
                                              notified(2.6, "notifications/cancelled", {"requestId": 2}, direction="c2s"),
                                              result(2.7, 2, {"content": []})])  # the server answered it all the same
    text = render(summarize(path))
    assert "tools/call slow                                  cancelled: the user pressed stop" in text
    assert "3 requests (2 ok, 1 cancelled)" in text and "unanswered" not in text
    assert_views_agree(path)
    frames = load_trace(path)
    assert frames.calls["outcome"].astype(str).tolist() == ["ok", "cancelled", "ok"]
    assert frames.sessions["unanswered"].tolist() == [0]  # a call its client gave up on is no server fault


def test_a_server_request_its_server_cancelled_is_cancelled(tmp_path):
    from tests.support.traces import notified
    from tests.support.views import assert_views_agree

    path = write_trace(tmp_path / "t.jsonl", [*handshake(), sent(2.0, 1, "tools/call", {"name": "ask"}),
                                              sent(2.1, "s-1", "sampling/createMessage", {"messages": []}, direction="s2c"),
                                              notified(2.5, "notifications/cancelled", {"requestId": "s-1", "reason": "gave up"}),
                                              result(2.6, 1, {"content": []})])
    text = render(summarize(path))
    assert "← sampling/createMessage                           cancelled: gave up" in text and "(2 ok, 1 cancelled)" in text
    assert_views_agree(path)
