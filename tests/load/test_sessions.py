"""Sessions kept or broken (load/sessions.py) and the session probe's scenario keys, without processes."""

import pytest

from mcpbench.load.scenario import ScenarioError
from mcpbench.load.sessions import failure_class


def test_failure_classes_split_answer_lost_from_timeout():
    assert failure_class("answer-lost/timeout", "POST accepted, no answer on the stream") == "answer-lost"
    assert failure_class("answer-lost/timeout", "no answer within 10 s") == "timeout"
    assert failure_class("stream-closed", "SSE stream closed") == "stream-closed"


def test_session_scenario_keys_are_checked():
    from mcpbench.load.scenario import scenario_from_text

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
