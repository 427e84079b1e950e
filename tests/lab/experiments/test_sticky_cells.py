"""The sticky experiment's cells, rows and scenario errors (lab/experiments/sticky.py), without processes."""

import pytest

from mcpbench.lab.experiments.sticky import CSV_BASE, StickyCell, cell_stats, csv_text, plan_from_node
from mcpbench.load.scenario import ScenarioError
from mcpbench.load.sessions import verdict


def _step(session, step, t, instance, failure=None, detail=None):
    return {"session": session, "step": step, "t": t, "instance": instance, "failure": failure, "detail": detail}


def test_cell_stats_verdict_and_csv_contract():
    records = [
        _step("a", "connect", 1, "s1"), _step("a", "initialize", 2, "s1"), _step("a", "tools/call echo", 3, "s1"),
        _step("b", "initialize", 1, "s1"),
        _step("b", "notifications/initialized", 2, "s2", "session-not-found", "HTTP 404 JSON-RPC -32600 Session not found"),
        _step("c", "initialize", 1, "s3"), _step("c", "tools/call echo", 2, "s3", "answer-lost/timeout", "no answer within 5 s"),
        {"step": "initialize", "t": 1, "failure": None},  # no session tag: not counted
    ]
    result = cell_stats(StickyCell("stateful-sse", "round-robin", "builtin", 3), records)
    assert (result.sessions, result.calls, result.failed_calls, result.failed_sessions) == (3, 6, 2, 2)
    assert result.first_instance_share == pytest.approx((1 + 0.5 + 1) / 3)
    assert dict(result.sessions_by_class) == {"session-not-found": 1, "timeout": 1}
    assert verdict(result).startswith("sessions broken: 2/3, ")
    header, row = csv_text([result]).splitlines()
    assert header.split(",")[: len(CSV_BASE)] == list(CSV_BASE)
    assert "failed_calls:session-not-found" in header and "failed_sessions:timeout" in header
    assert row.startswith("streamable-http,stateful-sse,round-robin,builtin,3,3,6,2,2,")
    kept = cell_stats(StickyCell("stateless", "random", "builtin", 3), records[:3])
    assert verdict(kept) == "sessions kept: 1/1"


def test_sticky_scenario_errors_name_the_line():
    import yaml

    text = "modes: [legacy-sse]\npolicies: [sticky, nope]\nmix:\n  - {call: tools/list}\n"
    with pytest.raises(ScenarioError, match=r"s\.yaml:2: policies: unknown 'nope'"):
        plan_from_node(yaml.compose(text), "s.yaml")
    with pytest.raises(ScenarioError, match=r"s\.yaml:1: a sticky scenario sets no 'target'"):
        plan_from_node(yaml.compose("target: http://x/mcp\nmix:\n  - {call: tools/list}\n"), "s.yaml")
    plan = plan_from_node(yaml.compose("modes: [stateless]\ninstances: [1, 3]\nmix:\n  - {call: tools/list}\n"), "s.yaml")
    assert [c.slug for c in plan.cells][:2] == ["stateless-round-robin-builtin-1", "stateless-round-robin-builtin-3"]
