"""Replay's plan (`replay/plan.py`) on the trace model: what it takes from the model (sessions, pairing,
operations) where the plan before it decided alone, on doctored traces (tests/support/traces.py)."""

from mcpbench.replay import plan as plans
from tests.support.traces import answered, asks, done, over_http, request, result, sent, task_status, write_trace


def test_a_retry_on_another_connection_is_replayed_with_the_round_it_answers(tmp_path):
    # Sessionless 2026-07-28: each recorded connection replays apart, but an operation's rounds go
    # together (the live requestState maps there). Before: two sessions, the retry linked to nothing.
    path = write_trace(tmp_path / "t.jsonl", [
        over_http(request(1.0, 1), "f1", session="conn-1"), over_http(asks(1.1, 1, state="S"), "f1", session="conn-1"),
        over_http(request(1.5, 2, responses=answered(), state="S"), "f2", session="conn-2"), over_http(done(1.6, 2), "f2", session="conn-2")])
    (session,) = plans.load(path).sessions
    first, retry = session.calls
    assert session.id == "conn-1" and first.retried and retry.retry_of == first.index
    assert [ask.method for ask in session.asks] == ["sampling/createMessage"] and retry.answer is not None


def test_rounds_follow_their_exact_request_state_not_the_latest_round(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [
        request(1.0, 1), request(1.0, 2), asks(1.1, 1, state="A"), asks(1.1, 2, state="B"),
        request(1.2, 3, responses=answered(), state="B"), request(1.2, 4, responses=answered(), state="A"), done(1.3, 3), done(1.4, 4)])
    (session,) = plans.load(path).sessions
    assert [(call.request.id, call.retry_of) for call in session.calls] == [(1, None), (2, None), (3, 1), (4, 0)]


def test_a_tasks_status_after_its_call_was_answered_is_the_sessions_not_the_calls(tmp_path):
    # The model ties it to the task's operation; a replay compares a call with what came while it was in flight.
    path = write_trace(tmp_path / "t.jsonl", [
        request(1.0, 1, "work"), result(1.01, 1, {"resultType": "task", **task_status("t1", "working")}),
        {**sent(1.2, 0, "notifications/tasks/status", task_status("t1", "completed"), direction="s2c"), "msg": {
            "jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task_status("t1", "completed")}}])
    (session,) = plans.load(path).sessions
    assert session.calls[0].notifications == [] and [n["method"] for n in session.notifications] == ["notifications/tasks/status"]
