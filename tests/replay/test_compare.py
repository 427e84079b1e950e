"""Normalisation, ignore rules and diffs, without any process."""

import pytest

from mcpbench.protocol.errors import ReplayError
from mcpbench.replay.compare import IgnoreRule, IgnoreRules, compare, diff, format_path, generalise, normalise, parse_path, slower


def paths(changes):
    return {change.path for change in changes}


def test_default_rules_hide_uuids_timestamps_session_ids_and_progress_tokens():
    old = {"result": {"id": "0b5c7e3a-1f2d-4c3b-9a8e-7d6c5b4a3f21", "at": "2026-12-02T09:24:55Z", "sessionId": "a",
                      "text": "run 8d3f0c2e9b1a4d5e8f7a6b5c4d3e2f1a at 2026-12-02 09:24:55.123+00:00"},
           "notifications": [{"method": "notifications/progress", "params": {"progressToken": 4, "progress": 1}}]}
    new = {"result": {"id": "11111111-2222-4333-8444-555555555555", "at": "2027-01-01T00:00:00Z", "sessionId": "b",
                      "text": "run 00000000000000000000000000000000 at 2027-01-01 00:00:00+00:00"},
           "notifications": [{"method": "notifications/progress", "params": {"progressToken": 9, "progress": 1}}]}
    assert compare(old, new, IgnoreRules()) == []
    assert paths(compare(old, new, IgnoreRules(defaults=False))) == {
        "result.id", "result.at", "result.sessionId", "result.text", "notifications[0].params.progressToken"}


def test_json_inside_content_text_is_compared_field_by_field():
    old = {"result": {"content": [{"type": "text", "text": '{"a": 1, "b": [1, 2]}'}]}}
    new = {"result": {"content": [{"type": "text", "text": '{"b": [1, 3], "a": 1}'}]}}
    (change,) = compare(old, new, IgnoreRules())
    assert (change.path, change.old, change.new) == ("result.content[0].text.b[1]", 2, 3)
    assert compare(old, new, IgnoreRules(["result.content[*].text.b"])) == []


def test_user_rules_wildcards_depth_and_scope():
    old = {"result": {"items": [{"x": 1, "keep": 1}, {"x": 2, "keep": 1}], "deep": {"a": {"stamp": 1}}}}
    new = {"result": {"items": [{"x": 5, "keep": 2}, {"x": 6, "keep": 1}], "deep": {"a": {"stamp": 2}}}}
    assert paths(compare(old, new, IgnoreRules(["result.items[*].x", "**.stamp"]))) == {"result.items[0].keep"}
    scoped = IgnoreRules(["tools/call@echo:result.items[*].x"])
    assert "result.items[0].x" in paths(compare(old, new, scoped, method="tools/call", name="add"))
    assert "result.items[0].x" not in paths(compare(old, new, scoped, method="tools/call", name="echo"))


def test_a_removed_list_item_is_one_change():
    tools = [{"name": n} for n in ("echo", "add", "slow", "fail", "big")]
    changes = diff({"tools": tools}, {"tools": tools[:3] + tools[4:]})
    assert [(c.path, c.kind, c.old) for c in changes] == [("tools[3]", "removed", {"name": "fail"})]


def test_paths_round_trip_and_generalise():
    for text in ('result.content[0].text', 'result._meta["io.modelcontextprotocol/serverInfo"]', "a[*].b", "**.x"):
        assert format_path(parse_path(text)) == text
    assert generalise("result.items[3].x") == "result.items[*].x"
    assert str(IgnoreRule.parse("tools/call@echo:result.x")) == "tools/call@echo:result.x"
    with pytest.raises(ReplayError):
        parse_path("")


def test_empty_meta_equals_no_meta_and_era_rules():
    old = {"result": {"content": []}}
    new = {"result": {"content": [], "resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": {}}}}
    assert paths(compare(old, new, IgnoreRules())) == {"result.resultType", 'result._meta'}
    assert compare(old, new, IgnoreRules(era=True)) == []
    assert normalise({"_meta": {}}) == {}


def test_latency_regression_needs_factor_and_slack():
    assert slower(0.004, 1.0, factor=3, slack=0.25)
    assert not slower(0.004, 0.2, factor=3, slack=0.25)  # noise: under the slack
    assert not slower(2.0, 5.0, factor=3, slack=0.25)  # under the factor
    assert not slower(0.004, 1.0, factor=0, slack=0.25)  # off


def test_a_refused_version_probe_is_one_outcome_whatever_its_code():
    # An `auto` client's server/discover, refused by one server as unknown and by another as a version
    # it does not speak: the client falls back to a handshake either way.
    lacks = {"error": {"code": -32601, "message": "Method not found"}}
    other = {"error": {"code": -32602, "message": "Unsupported protocol version", "data": {"supported": ["2025-11-25"]}}}
    assert compare(lacks, other, IgnoreRules(), method="server/discover") == []
    answered = {"result": {"supportedVersions": ["2026-07-28"], "capabilities": {}}}
    assert paths(compare(lacks, answered, IgnoreRules(), method="server/discover")) == {"error", "result"}  # refused vs served
    assert paths(compare(lacks, other, IgnoreRules(), method="tools/call")) == {"error.code", "error.message", "error.data"}
