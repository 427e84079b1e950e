"""Client code against a recorded server: `mcp_mock` in each record mode, run by pytester in a subprocess.

The example project (helpers.CLIENT_PROJECT) drives the reference server with the official SDK client.
The first run records through the real server; later runs replay with every real server gone
(a command that does not exist), so passing proves they never needed one.
"""

import pytest

from mcpbench.replay import plan as plans
from tests.testing.helpers import FASTMCP_PROJECT, client_project, run

NEAREST = "*not in the recording; nearest recorded request: tools/call {\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"}}*"


def echoed(trace) -> list[str]:
    """The texts the trace's echo calls sent, in recorded order."""
    return [call.request.params["arguments"]["text"] for session in plans.load(trace).sessions
            for call in session.calls if call.name == "echo"]


@pytest.mark.slow  # two pytest runs in subprocesses
def test_a_missing_or_unreadable_trace_fails_in_one_line(pytester, monkeypatch):
    client_project(pytester)
    monkeypatch.setenv("EXAMPLE_TRANSPORTS", "stdio")
    monkeypatch.setenv("EXAMPLE_MODES", "legacy")
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["mcpbench: *test_client[[]stdio-legacy[]].jsonl: no such trace, and record mode 'none' never records*"])
    assert "Traceback" not in result.stdout.str()

    trace = pytester.path / "mcp_traces" / "test_example" / "test_client[stdio-legacy].jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_text("{not json\n")
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["mcpbench: *test_client[[]stdio-legacy[]].jsonl:1: not JSON*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
@pytest.mark.timeout(360)  # 8 pytest runs, about 45 s on a quiet machine; 120 s was seen to run out under load
def test_every_record_mode_on_every_transport_in_both_eras(pytester, monkeypatch):
    """once records, none (the default) replays offline (and refuses a new request, naming the nearest
    recorded one), new_episodes adds only what is missing, all records anew, once with a trace
    replays; FastMCP's client gets the same answers."""
    traces = client_project(pytester)
    tests = 6  # 3 transports x 2 eras
    names = sorted(f"test_client[{t}-{m}].jsonl" for t in ("stdio", "streamable-http", "sse") for m in ("legacy", "auto"))

    run(pytester, "--mcp-record-mode=once").assert_outcomes(passed=tests)
    assert sorted(path.name for path in traces.iterdir()) == names
    assert all(echoed(traces / name) == ["hi"] for name in names)

    monkeypatch.setenv("EXAMPLE_SERVER_GONE", "1")
    run(pytester).assert_outcomes(passed=tests)  # mode none, the default
    run(pytester, "--mcp-record-mode=once").assert_outcomes(passed=tests)  # a trace exists: replayed
    # FastMCP's client, pointed at the mocks of the SDK's recordings. Over legacy SSE its `auto` mode
    # speaks the handshake era, where the SDK's spoke 2026-07-28: that recording has nothing for it.
    client_project(pytester, FASTMCP_PROJECT)
    result = run(pytester)
    result.assert_outcomes(passed=tests - 1, failed=1)
    result.stdout.fnmatch_lines(["*the recording has no handshake-era (2024-11-05 … 2025-11-25) session (it has 2026-07-28 only)*",
                                 "FAILED *test_client[[]sse-auto[]]*"])
    client_project(pytester)

    monkeypatch.setenv("EXAMPLE_TEXT", "bye")
    result = run(pytester, "--mcp-record-mode=none")
    result.assert_outcomes(failed=tests)
    assert result.stdout.str().count("nearest recorded request: tools/call") >= tests
    result.stdout.fnmatch_lines([NEAREST])
    assert all(echoed(traces / name) == ["hi"] for name in names)  # mode none writes nothing

    # The modes that record again, in one era (both eras record alike: the first run showed it).
    monkeypatch.setenv("EXAMPLE_MODES", "legacy")
    tests, names = 3, [name for name in names if "legacy" in name]
    monkeypatch.delenv("EXAMPLE_SERVER_GONE")
    run(pytester, "--mcp-record-mode=new_episodes").assert_outcomes(passed=tests)
    assert all(echoed(traces / name) == ["hi", "bye"] for name in names)  # the old call kept, the new one added

    monkeypatch.setenv("EXAMPLE_SERVER_GONE", "1")
    run(pytester, "--mcp-record-mode=none").assert_outcomes(passed=tests)

    monkeypatch.delenv("EXAMPLE_SERVER_GONE")
    run(pytester, "--mcp-record-mode=all").assert_outcomes(passed=tests)
    assert all(echoed(traces / name) == ["bye"] for name in names)  # recorded anew: only this run's call


@pytest.mark.slow
def test_record_and_replay_under_xdist(pytester, monkeypatch):
    """Two workers, each test its own servers on ephemeral ports and its own trace."""
    traces = client_project(pytester)
    monkeypatch.setenv("EXAMPLE_TRANSPORTS", "stdio streamable-http")
    monkeypatch.setenv("EXAMPLE_MODES", "legacy")
    run(pytester, "-n", "2", "--mcp-record-mode=once").assert_outcomes(passed=2)
    assert len(list(traces.iterdir())) == 2
    monkeypatch.setenv("EXAMPLE_SERVER_GONE", "1")
    run(pytester, "-n", "2").assert_outcomes(passed=2)

