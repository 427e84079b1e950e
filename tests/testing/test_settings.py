"""The record modes' table and a test's settings (mcpbench/testing/settings.py): no processes."""

from pathlib import Path

import pytest

from mcpbench.testing.settings import ALL, NEW_EPISODES, NONE, ONCE, Action, SettingsError, build, decide, default_trace_name


@pytest.mark.parametrize(("mode", "exists", "action"), [
    (NONE, True, Action.REPLAY), (NONE, False, Action.MISSING),
    (ONCE, True, Action.REPLAY), (ONCE, False, Action.RECORD),
    (NEW_EPISODES, True, Action.EXTEND), (NEW_EPISODES, False, Action.RECORD),
    (ALL, True, Action.RECORD), (ALL, False, Action.RECORD),
])
def test_what_each_mode_does_with_a_trace(mode, exists, action):
    assert decide(mode, exists) is action


def settings(config=None, args=(), kwargs=None, cli_mode=None):
    return build(config or {}, args, kwargs or {}, trace_dir="/t/mcp_traces/test_m", default_name="test_x.jsonl",
                 cli_mode=cli_mode)


def test_the_marker_wins_over_the_project_and_both_over_the_command_line():
    got = settings({"server": "stdio:a", "record_mode": ONCE}, ("s",), {"server": "stdio:b"}, cli_mode=ALL)
    assert (got.server, got.mode, got.trace) == ("stdio:b", ONCE, Path("/t/mcp_traces/test_m/s.jsonl"))
    assert settings(cli_mode=ALL).mode == ALL
    assert settings().mode == NONE
    assert settings(kwargs={"dir": "/elsewhere"}).trace == Path("/elsewhere/test_x.jsonl")
    assert settings(kwargs={"command": "srv --port {port}"}).command == ("srv", "--port", "{port}")


def test_the_default_name_is_pytest_recordings():
    assert default_trace_name("test_a[x/y z]") == "test_a[x-y-z].jsonl"
    assert default_trace_name("test_a", "TestThing") == "TestThing.test_a.jsonl"


@pytest.mark.parametrize(("config", "args", "kwargs", "message"), [
    ({}, (), {"record_mode": "sometimes"}, "unknown record mode 'sometimes' (expected one of: none, once, new_episodes, all)"),
    ({}, (), {"colour": "red"}, "the mcp_trace marker: unknown setting 'colour'"),
    ({"colour": "red"}, (), {}, "mcp_config: unknown setting 'colour'"),
    ({}, ("a", "b"), {}, "the mcp_trace marker takes one trace name, not 2"),
    ({}, (), {"transport": "carrier-pigeon"}, "unknown transport 'carrier-pigeon'"),
    ({}, (), {"timeout": 0}, "timeout=0: expected a number of seconds > 0"),
    ({}, (), {"server": ["python", "srv.py"]}, "server=['python', 'srv.py']: expected a target string"),
])
def test_bad_settings_are_one_line(config, args, kwargs, message):
    with pytest.raises(SettingsError) as caught:
        settings(config, args, kwargs)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
