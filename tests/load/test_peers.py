"""Load runs from recordings of a probing client, and what failed steps mean for the exit status (issue 28)."""

import orjson
import pytest

from mcpbench.load.scenario import ScenarioError, versions_from_trace
from tests.load.helpers import run_load, scenario_from_text
from tests.support import peers

FAILING = "mix:\n  - {call: tools/call, tool: fail}\nusers: 2\nspawn_rate: 10\nduration: 2s\n"


def test_a_from_trace_workload_takes_the_era_each_session_settled_on(probe_stdio_recording, probe_http_recording):
    # The `auto` client's failed server/discover probe settled nothing: its session went on in the
    # handshake era (before: versions [2025-11-25, 2026-07-28], a third of the users failing every step).
    assert versions_from_trace(probe_stdio_recording) == ("2025-11-25",)  # probe and handshake in one session
    assert versions_from_trace(probe_http_recording) == ("2025-11-25",)  # the probe in a session key of its own


def test_exit_code_on_error_is_a_scenario_key():
    assert scenario_from_text("target: http://h/mcp\nmix: [{call: tools/list}]\n").exit_code_on_error == 1
    assert scenario_from_text("target: http://h/mcp\nmix: [{call: tools/list}]\nexit_code_on_error: 0\n").exit_code_on_error == 0
    with pytest.raises(ScenarioError, match=r"<text>:3: exit_code_on_error: must be an exit status"):
        scenario_from_text("target: http://h/mcp\nmix: [{call: tools/list}]\nexit_code_on_error: yes\n")


@pytest.mark.slow
def test_from_trace_against_a_server_that_wants_a_session_for_the_probe(tmp_path, probe_http_recording, session_http_server):
    proc, out = run_load(tmp_path, None, "--target", session_http_server, "--from-trace", probe_http_recording,
                         "--users", "2", "--duration", "2s")  # before: exit 3, no 2026-07-28 session there
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["total"]["failures"] == 0 and summary["total"]["count"] > 0


@pytest.mark.slow
def test_failed_steps_exit_1_unless_failures_are_the_measurement(tmp_path, http_server):
    proc, out = run_load(tmp_path / "default", f"target: {http_server.url}\n{FAILING}")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # as Locust's --exit-code-on-error (before: 0)
    assert "FAIL  no failed step" in proc.stdout
    measured, _ = run_load(tmp_path / "measured", f"target: {http_server.url}\n{FAILING}", "--exit-code-on-error", "0")
    assert measured.returncode == 0, measured.stdout + measured.stderr
    assert "NOTE  " in measured.stdout and "no failed step" not in measured.stdout  # before: "PASS  no failed step (N of M failed)"
    judged, _ = run_load(tmp_path / "judged", f"target: {http_server.url}\n{FAILING}thresholds: ['fail_ratio <= 1']\n")
    assert judged.returncode == 0, judged.stdout + judged.stderr  # a fail_ratio threshold decides instead


@pytest.mark.slow
def test_from_trace_runs_a_2026_07_28_session_recorded_over_legacy_sse(tmp_path, sse_server):
    # The SDK's `auto` client speaks 2026-07-28 over legacy SSE to the reference server; record, inspect,
    # replay and the mock took it, and load refused it ("era 2026-07-28 has no legacy SSE transport").
    trace = peers.record_http(sse_server.url, tmp_path / "sse-2026.jsonl")
    assert versions_from_trace(trace) == ("2026-07-28",)
    proc, out = run_load(tmp_path, None, "--target", f"sse+{sse_server.url}", "--from-trace", trace,
                         "--users", "2", "--duration", "2s")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["total"]["failures"] == 0 and summary["total"]["count"] > 0
    steps = {row["step"] for row in summary["steps"]}
    assert "tools/call echo" in steps and "initialize" not in steps  # no handshake: the recording's era
