"""Short, bounded headless Locust runs against the reference server on 127.0.0.1 (real processes)."""

import csv
import os
import shlex
import signal
from pathlib import Path

import orjson
import pytest

from tests.load.helpers import RUN_TIMEOUT, load_running, run_load, samples_written
from tests.support.servers import REPO_ROOT, reference_server, serve_argv

KNOWN_FAILURES = {
    "session-not-found", "answer-lost/timeout", "stream-closed", "http-4xx", "http-5xx",
    "jsonrpc-error", "tool-error", "connect-failed",
}

MIX = """\
mix:
  - call: tools/call
    tool: echo
    arguments: {text: "{{string 32}}"}
    weight: 3
  - call: tools/list
  - call: resources/read
    uri: mcpbench://greeting
  - call: prompts/get
    prompt: summarize
    arguments: {topic: MCP}
"""


def stats_rows(out: Path) -> dict[tuple[str, str], dict]:
    with open(out / "locust_stats.csv", newline="") as handle:
        return {(r["Type"], r["Name"]): r for r in csv.DictReader(handle) if r["Name"] != "Aggregated"}


def assert_clean_run(proc, out, request_type, steps, *, min_calls=5):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = stats_rows(out)
    for step in steps:
        row = rows.get((request_type, step))
        assert row is not None, f"{step} missing from {sorted(rows)}"
        assert int(row["Failure Count"]) == 0, row
        assert int(row["Request Count"]) >= 1
    calls = sum(int(r["Request Count"]) for (t, n), r in rows.items() if t == request_type and n.startswith(("tools/", "resources/", "prompts/")))
    assert calls >= min_calls
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["total"]["failures"] == 0
    samples = [orjson.loads(line) for line in (out / "samples.jsonl").read_bytes().splitlines()]
    assert len(samples) == summary["total"]["count"] == sum(int(r["Request Count"]) for r in rows.values())
    return rows, summary


CALL_STEPS = ["tools/call echo", "tools/list", "resources/read", "prompts/get"]


@pytest.mark.slow
def test_streamable_http_handshake_long_lived(tmp_path, http_server):
    proc, out = run_load(tmp_path, f"target: {http_server.url}\n{MIX}users: 3\nspawn_rate: 10\nduration: 3s\nthresholds: ['fail_ratio < 0.01']\n")
    rows, summary = assert_clean_run(proc, out, "streamable-http", ["initialize", "notifications/initialized", *CALL_STEPS])
    assert int(rows[("streamable-http", "initialize")]["Request Count"]) == 3  # one session per user
    assert any("ttfe" in s for s in summary["steps"])  # SSE answers: time to first event reported
    assert "PASS  fail_ratio < 0.01" in proc.stdout


@pytest.mark.slow
def test_streamable_http_both_eras_session_per_task(tmp_path, http_server):
    scenario = (
        f"target: {http_server.url}\nsession: session_per_task\ncalls_per_session: 3\nera: [handshake, 2026-07-28]\n"
        f"{MIX}users: 4\nspawn_rate: 10\nduration: 4s\n"
    )
    proc, out = run_load(tmp_path, scenario)
    rows, _ = assert_clean_run(proc, out, "streamable-http handshake", ["initialize", "notifications/initialized", "DELETE", *CALL_STEPS[:1]])
    stateless = {n for (t, n) in rows if t == "streamable-http 2026-07-28"}
    assert "tools/call echo" in stateless and not stateless & {"initialize", "DELETE"}
    handshake = rows[("streamable-http handshake", "initialize")]
    assert int(handshake["Request Count"]) >= int(rows[("streamable-http handshake", "DELETE")]["Request Count"]) >= 1


@pytest.mark.slow
def test_sse_session_per_task(tmp_path, sse_server):
    scenario = f"target: sse+{sse_server.url}\nsession: session_per_task\ncalls_per_session: 4\n{MIX}  - call: ping\nusers: 3\nspawn_rate: 10\nduration: 3s\n"
    proc, out = run_load(tmp_path, scenario)
    assert_clean_run(proc, out, "sse", ["connect", "initialize", "notifications/initialized", "tools/call echo"])


@pytest.mark.slow
def test_stdio_long_lived(tmp_path):
    argv = " ".join(serve_argv("stdio"))
    proc, out = run_load(tmp_path, f"target: 'stdio:{argv}'\n{MIX}users: 2\nspawn_rate: 10\nduration: 10s\n")
    rows, _ = assert_clean_run(proc, out, "stdio", ["initialize", "notifications/initialized", *CALL_STEPS])
    assert int(rows[("stdio", "initialize")]["Request Count"]) == 2


@pytest.mark.slow
def test_stdio_session_per_task(tmp_path):
    """Each task starts a server process, does the handshake and its calls, and ends the process."""
    # Each server process writes its pid first, so sessions can be matched to processes.
    pids = tmp_path / "pids"
    command = f"echo $$ >> {shlex.quote(str(pids))}; exec {shlex.join(serve_argv('stdio'))}"
    target = orjson.dumps("stdio:sh -c " + shlex.quote(command)).decode()
    # The run ends when its 4 sessions have (`sessions:`), not after a fixed time a loaded machine's
    # server start-ups can eat (a server takes seconds to start there); the duration only bounds it.
    scenario = f"target: {target}\nsession: session_per_task\ncalls_per_session: 2\nsessions: 4\n{MIX}users: 2\nspawn_rate: 10\nduration: 60s\n"
    proc, out = run_load(tmp_path, scenario, timeout=RUN_TIMEOUT + 60)
    rows, _ = assert_clean_run(proc, out, "stdio", ["initialize", "notifications/initialized"], min_calls=2)
    assert "sessions kept: 4/4" in proc.stdout, proc.stdout
    sessions = int(rows[("stdio", "initialize")]["Request Count"])
    started = pids.read_text().split()
    # A process of its own for every session, and none besides (a run of K sessions has no pre-flight session).
    assert sessions == 4 and len(set(started)) == len(started) == sessions, (sessions, started)
    calls = sum(int(r["Request Count"]) for (t, n), r in rows.items() if n.startswith(("tools/", "resources/", "prompts/")))
    assert calls == 2 * sessions  # each session made its own calls; a long-lived session would go on calling


@pytest.mark.slow
def test_two_workers(tmp_path, http_server):
    proc, out = run_load(tmp_path, f"target: {http_server.url}\n{MIX}users: 4\nspawn_rate: 20\nduration: 3s\n", "--workers", "2")
    _, summary = assert_clean_run(proc, out, "streamable-http", ["initialize", "tools/call echo"])
    # One sample file per Locust process, merged: the master's is empty (it runs no users), and
    # each of the two workers ran users and wrote samples.
    per_process = sorted(summary["samples_per_process"])
    assert len(per_process) == 3 and per_process[0] == 0 and per_process[1] > 0, per_process
    assert sum(per_process) == summary["total"]["count"]
    assert not list(out.glob("samples.*.jsonl"))
    assert "--expect-workers" not in proc.stderr


@pytest.mark.slow
def test_threshold_that_must_fail_exits_non_zero(tmp_path, http_server):
    proc, out = run_load(tmp_path, f"target: {http_server.url}\n{MIX}users: 2\nspawn_rate: 10\nduration: 2s\nthresholds: ['p50 < 0.001ms']\n")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL  p50 < 0.001ms" in proc.stdout
    assert orjson.loads((out / "summary.json").read_bytes())["thresholds"][0]["ok"] is False


@pytest.mark.slow
def test_server_killed_mid_run_gives_classified_failures(tmp_path):
    with reference_server("streamable-http") as server, load_running(
            tmp_path, f"target: {server.url}\n{MIX}users: 3\nspawn_rate: 10\nduration: 6s\ntimeout: 2s\nthresholds: ['fail_ratio < 0.01']\n") as (run, out):
        # Once the samples show answered calls, kill the server.
        samples_written(run, out, lambda parts: sum(p.read_bytes().count(b'"failure":null') for p in parts) >= 20)
        server.proc.kill()  # dies, no graceful shutdown (uvicorn would keep serving busy connections)
        server.proc.wait()
        stdout, stderr = run.communicate(timeout=RUN_TIMEOUT)
    assert run.returncode == 1, stdout + stderr  # the fail_ratio threshold fails; no crash
    assert "Traceback" not in stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["total"]["failures"] > 0
    assert set(summary["failure_classes"]) <= KNOWN_FAILURES
    assert summary["total"]["count"] > summary["total"]["failures"]  # calls succeeded before the kill


@pytest.mark.slow
@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "terminated"])
def test_locust_gone_mid_run_is_exit_3_and_said_however_good_its_samples(tmp_path, kill):
    """Killed (a crash) or stopped cleanly by a SIGTERM that was not ours, Locust leaves a run that is
    no whole measurement: exit 3 and one line saying so, its samples kept and its rate over their span."""
    with reference_server("streamable-http") as server, load_running(
            tmp_path, f"target: {server.url}\n{MIX}users: 2\nspawn_rate: 10\nduration: 60s\nthresholds: ['fail_ratio < 0.01']\n") as (run, out):
        parts = samples_written(run, out, lambda parts: sum(p.read_bytes().count(b"\n") for p in parts) >= 5)
        os.kill(int(parts[0].name.split(".")[1]), kill)  # the Locust process: its pid names its samples
        stdout, stderr = run.communicate(timeout=RUN_TIMEOUT)
    assert run.returncode == 3, stdout + stderr  # the thresholds passed: only the cut says it is no measurement
    assert "Traceback" not in stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("mcpbench: locust ") and "of a 60 s run" in line, stderr
    assert ("killed by SIGKILL" if kill == signal.SIGKILL else "locust stopped after") in line
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["locust_cut_short"] in line and summary["total"]["count"] >= 5
    assert summary["duration_s"] < 60 and summary["total"]["rps"] == pytest.approx(summary["total"]["count"] / summary["duration_s"])


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("target: http://127.0.0.1:{port}/mcp\nmix: [{{call: tools/call, tool: echo}}]\n", "cannot reach http://127.0.0.1:{port}/mcp"),
        ("target: http://127.0.0.1:{port}/mcp\nmix:\n  - call: tools/call\n    tools: echo\n", "scenario.yaml:4: unknown key 'tools' in a mix entry (did you mean 'tool'?)"),
        ("target: stdio:no-such-command-xyz\nmix: [{{call: tools/list}}]\n", "command 'no-such-command-xyz' not found"),
    ],
)
def test_unusable_input_exits_2_with_one_line(tmp_path, scenario, expected):
    from tests.support.servers import free_port

    port = free_port()
    proc, out = run_load(tmp_path, scenario.format(port=port), timeout=30)
    unreachable = "cannot reach" in expected or "not found" in expected  # the environment: exit 3
    assert proc.returncode == (3 if unreachable else 2), proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected.format(port=port) in lines[0], proc.stderr
    assert not (out / "locust_stats.csv").exists()  # failed before any user spawned


def test_unknown_tool_exits_2(tmp_path, http_server):
    proc, _ = run_load(tmp_path, f"target: {http_server.url}\nmix:\n  - call: tools/call\n    tool: ecko\n", timeout=30)
    assert proc.returncode == 2
    assert "scenario.yaml:3: unknown tool 'ecko'" in proc.stderr and "echo" in proc.stderr


@pytest.mark.slow
def test_a_2026_07_28_run_of_ask_reports_whole_operations_with_their_rounds(tmp_path, http_server):
    scenario = (f"target: {http_server.url}\nera: 2026-07-28\n"
                "mix:\n  - {call: tools/call, tool: ask, arguments: {question: \"ready?\"}}\n"
                "input_responses:\n  sampling: sampled by the scenario\n  roots: [file:///tmp]\n  think_time: 0.01\n"
                # Bounded in calls, not time: on a loaded machine a 2 s run once ended before any call
                # had its answer (0 samples; the users' start-up took the run), and no row was there.
                "users: 2\nspawn_rate: 10\ncalls: 4\nduration: 60s\n")
    proc, out = run_load(tmp_path, scenario)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    (row,) = [r for r in summary["steps"] if r["step"] == "tools/call ask"]
    assert row["failures"] == 0 and row["operation"]["rounds"] == 2.0 and row["operation"]["wait_p50"] == pytest.approx(10.0)
    assert summary["input_asked"] == ["sampling/createMessage"] and summary["input_never_asked"] == ["roots/list"]
    assert "tools/call ask: 2.00 rounds and 0.00 polls a step" in proc.stdout
    assert "warning: input_responses answers roots/list, which the server never asked for" in proc.stdout
