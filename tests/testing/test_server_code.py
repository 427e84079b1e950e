"""Server code against its recordings: `mcp_replay` passes on the server that was recorded and fails,
naming the changed path old → new, on the variant server; alike under pytest-xdist (`-n 2`)."""

import pytest

from tests.testing.helpers import REFERENCE, VARIANT, run, server_project

CHANGED = ['*tools/call echo: changed*', '*result.content[[]0[]].text: "*" → "* (v2)"*']


@pytest.mark.slow
def test_replay_passes_on_the_recorded_server_and_fails_on_the_variant(pytester, monkeypatch, recordings):
    server_project(pytester, recordings)
    monkeypatch.setenv("EXAMPLE_SERVER", REFERENCE)
    run(pytester).assert_outcomes(passed=2)

    monkeypatch.setenv("EXAMPLE_SERVER", VARIANT)
    result = run(pytester)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(CHANGED)
    assert "Traceback" not in result.stdout.str() and "mcpbench/" not in result.stdout.str()  # no internals shown


@pytest.mark.slow
def test_the_same_under_xdist(pytester, monkeypatch, recordings):
    server_project(pytester, recordings)
    monkeypatch.setenv("EXAMPLE_SERVER", VARIANT)
    result = run(pytester, "-n", "2")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*2 workers*", *CHANGED])
    monkeypatch.setenv("EXAMPLE_SERVER", REFERENCE)
    run(pytester, "-n", "2").assert_outcomes(passed=2)


def test_a_missing_trace_and_a_server_that_cannot_start_fail_in_one_line(pytester, monkeypatch, recordings):
    folder = server_project(pytester, recordings)
    (folder / "auto.jsonl").unlink()
    monkeypatch.setenv("EXAMPLE_SERVER", "stdio:/nonexistent/mcp-server")
    result = run(pytester)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["mcpbench: replay of *legacy.jsonl against stdio:/nonexistent/mcp-server: cannot start*"])
    result.stdout.fnmatch_lines(["mcpbench: *auto.jsonl: cannot read trace: No such file or directory"])
    assert "Traceback" not in result.stdout.str()
