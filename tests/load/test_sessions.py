"""Sessions kept or broken (load/sessions.py) and the session probe's scenario keys, without processes."""

import pytest

from mcpbench.load.scenario import ScenarioError
from mcpbench.load.runner import FailedSteps, RunResult
from mcpbench.load.sessions import SessionTally, failure_class


def test_failure_classes_split_answer_lost_from_timeout():
    assert failure_class("answer-lost/timeout", "POST accepted, no answer on the stream") == "answer-lost"
    assert failure_class("answer-lost/timeout", "no answer within 10 s") == "timeout"
    assert failure_class("stream-closed", "SSE stream closed") == "stream-closed"


def test_session_scenario_keys_are_checked():
    from tests.load.helpers import scenario_from_text

    base = "session: session_per_task\nmix:\n  - {call: tools/list}\n"
    probe = scenario_from_text(f"target: http://127.0.0.1:1/mcp\nsessions: 7\ndistinct_sources: true\n{base}", "p.yaml")
    assert (probe.sessions, probe.distinct_sources) == (7, True)
    assert type(probe).from_json(probe.to_json()) == probe
    with pytest.raises(ScenarioError, match="distinct_sources needs an HTTP target on loopback"):
        scenario_from_text(f"target: http://example.com/mcp\ndistinct_sources: true\n{base}", "p.yaml")
    with pytest.raises(ScenarioError, match="sessions counts whole sessions"):
        scenario_from_text("target: http://127.0.0.1:1/mcp\nsessions: 3\nmix:\n  - {call: tools/list}\n", "p.yaml")
    with pytest.raises(ScenarioError, match=r"p\.yaml:2: sessions: must be a whole number"):
        scenario_from_text(f"target: http://127.0.0.1:1/mcp\nsessions: 0\n{base}", "p.yaml")
    counted = scenario_from_text("target: http://127.0.0.1:1/mcp\ncalls: 5\nmix:\n  - {call: tools/list}\n", "p.yaml")
    assert counted.calls == 5 and type(counted).from_json(counted.to_json()) == counted
    with pytest.raises(ScenarioError, match="calls counts a long-lived session's calls"):
        scenario_from_text(f"target: http://127.0.0.1:1/mcp\ncalls: 5\n{base}", "p.yaml")


def _step(session, step, t, failure=None, detail=None):
    return {"session": session, "step": step, "t": t, "instance": "s1", "failure": failure, "detail": detail}


LOST = ("session-not-found", "HTTP 404: JSON-RPC -32600 Session not found")


def test_the_verdict_names_a_handshake_step_where_no_call_ran():
    from mcpbench.load.sessions import SessionTally, count_sessions, verdict

    in_handshake = [_step("a", "initialize", 1), _step("a", "notifications/initialized", 2, *LOST)]
    tally = count_sessions(in_handshake, SessionTally())
    assert verdict(tally) == "sessions broken: 1/1, session-not-found at notifications/initialized (the handshake: no call ran)"
    # Calls are counted after the handshake: the first call failing is "on the first call", the second "after" it.
    handshake = [_step("b", "initialize", 1), _step("b", "notifications/initialized", 2)]
    first = count_sessions(handshake + [_step("b", "tools/list", 3, *LOST)], SessionTally())
    assert verdict(first) == "sessions broken: 1/1, session-not-found on the first call"
    second = count_sessions(handshake + [_step("b", "tools/list", 3), _step("b", "tools/list", 4, *LOST)], SessionTally())
    assert verdict(second) == "sessions broken: 1/1, session-not-found after the first call"


def test_failed_steps_that_are_the_measurement_claim_no_pass():
    from mcpbench.load.runner import FailedSteps

    assert FailedSteps(0, 81, 0).line() == "PASS  no failed step  (0 of 81 failed)"
    measured = FailedSteps(37, 81, 0)
    assert measured.ok and measured.line().startswith("NOTE  37 of 81 steps failed") and "no failed step" not in measured.line()
    assert FailedSteps(37, 81, 1).line().startswith("FAIL  no failed step  (37 of 81 failed;")


@pytest.mark.parametrize(("tally", "steps", "status"), [
    (SessionTally(sessions=5), FailedSteps(0, 10, 1), 0),
    (SessionTally(sessions=5, failed_sessions=2), FailedSteps(0, 10, 1), 1),
    (SessionTally(), FailedSteps(0, 0, 1), 1),  # no session made: nothing was kept
    (SessionTally(sessions=5, failed_sessions=2), FailedSteps(3, 10, 7), 7),  # the larger status stands
    (SessionTally(sessions=5, failed_sessions=2), FailedSteps(3, 10, 0), 1),  # failures measured, sessions still judged
])
def test_the_sessions_verdict_is_in_the_runs_exit_status(tmp_path, tally, steps, status):
    # `RunResult.exit_code` is the one status of a run: the command, the main job and the lab read it.
    result = RunResult(tmp_path, {"total": {"count": 10, "failures": steps.failed}}, failed_steps=steps, sessions=tally)
    assert result.exit_code == status
    result.write_errors = ["samples.jsonl: disk full"]
    assert result.exit_code == 3
