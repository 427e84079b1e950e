"""The official SDK client as a second client under faults (`lab/peers/sdk_client.py`), real processes.

What the SDK client does is measured by these runs, not assumed: with a resumable server it
answers calls whose stream was cut (Last-Event-ID), after a restart every call fails with the
session gone (it never re-initialises), and the legacy SSE client dies with its stream.
"""

import json
import subprocess
import sys
import threading
import time

import pytest

from mcpbench.lab.peers.sdk_client import CLIENT_CLOSED, main, run_sdk_client
from mcpbench.lab.topology.cluster import RestartPlan, running_lab
from mcpbench.protocol.http import Failure
from tests.support.faults import fault_records, wait_for
from tests.support.servers import REPO_ROOT, free_port, stop_process

TIMEOUT = 10.0  # bound of each SDK call: far above any call here, short enough for a test
ECHO = ("echo", {"text": "x"})
# Longer than the cut below: its answer stream is cut while the tool still runs.
SLOW = ("slow", {"seconds": 1.6, "steps": 8})
CUT = "1s"
# A restart far in the future: the lab then has a restarter, which the test calls by hand.
MANUAL = RestartPlan(at=3600.0)
# What a CLI run may take beyond its --duration: starting Python and the SDK on a busy machine.
CLI_SLACK = 60.0


def read_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_consistent(summary: dict, lines: list[dict]) -> None:
    """The returned counts are the file's, every line is well formed, every failure has a class."""
    assert summary["calls"] == len(lines) > 0
    assert summary["ok"] == sum(line["ok"] for line in lines)
    assert summary["failed"] == summary["calls"] - summary["ok"]
    failed = [line for line in lines if not line["ok"]]
    assert sum(summary["failures"].values()) == len(failed)
    for line in lines:
        assert line["client"] == "sdk" and line["step"].startswith("tools/call ")
        assert (line["failure"] is None) == line["ok"] and len(line["detail"]) <= 120
    assert all(line["failure"] for line in failed)
    assert summary["first_failure_t"] == (failed[0]["t"] if failed else None)
    assert summary["last_ok_t"] == max((line["t"] for line in lines if line["ok"]), default=None)


@pytest.mark.slow
def test_without_faults_every_call_is_answered(http_server, tmp_path):
    out = tmp_path / "sdk.jsonl"
    summary = run_sdk_client(http_server.url, "streamable-http", duration=3.0, calls=[ECHO, ("add", {"a": 1, "b": 2})],
                             out=out, timeout=TIMEOUT)
    lines = read_lines(out)
    check_consistent(summary, lines)
    assert summary["ok"] == summary["calls"] >= 2 and summary["survived"] and not summary["session_lost"]
    assert {line["step"] for line in lines} == {"tools/call echo", "tools/call add"}


def test_a_tool_error_is_classed_and_bad_arguments_exit_2(http_server, tmp_path, capsys):
    out = tmp_path / "sdk.jsonl"
    summary = run_sdk_client(http_server.url, "streamable-http", duration=0.3, calls=[("fail", {})], out=out, timeout=TIMEOUT)
    assert summary["failures"] == {Failure.TOOL_ERROR: summary["calls"]} and summary["survived"]
    assert "this tool always fails" in read_lines(out)[0]["detail"]
    assert main(["--target", http_server.url, "--duration", "1", "--out", str(out), "--call", "echo={"]) == 2
    assert main(["--target", "nowhere", "--duration", "1", "--out", str(out), "--call", "echo"]) == 2
    assert capsys.readouterr().err.count("\n") == 2  # one line each


def test_an_unreachable_target_exits_3(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    assert main(["--target", url, "--duration", "1", "--out", str(tmp_path / "x.jsonl"), "--call", "echo"]) == 3
    assert "could not connect" in capsys.readouterr().err


@pytest.mark.slow
def test_a_cut_answer_stream_is_resumed_by_the_sdk_client(tmp_path):
    """The balancer cuts every SSE stream after 1 s; `slow` lasts 1.6 s. With a resumable server the
    SDK client reopens the stream with Last-Event-ID: cut calls still get their answer, and every
    progress notification once."""
    out = tmp_path / "sdk.jsonl"
    with running_lab(1, "streamable-http", policy="round-robin", folder=tmp_path / "lab", resumable=True,
                     faults={"cut_streams_after": CUT}) as lab:
        summary = run_sdk_client(lab.url, "streamable-http", duration=5.0, calls=[SLOW, ECHO], out=out, timeout=TIMEOUT)
    lines = read_lines(out)
    check_consistent(summary, lines)
    cuts = [r["t"] for r in fault_records(lab.fault_log) if r["kind"] == "cut-stream" and r["method"] == "POST"]
    slow = [line for line in lines if line["step"] == "tools/call slow"]
    cut_slow = [line for line in slow if any(line["t"] < t < line["t"] + line["latency_ms"] / 1000 for t in cuts)]
    assert cut_slow, (cuts, slow)  # the cut hit calls under way
    answered = [line for line in cut_slow if line["ok"]]
    assert answered, cut_slow  # an answer came after its stream was cut
    steps = SLOW[1]["steps"]
    assert all(line["progress"] == steps and line["progress_repeated"] == 0 for line in answered), answered
    assert summary["progress_repeated"] == sum(line["progress_repeated"] for line in lines)
    assert summary["survived"] and not summary["session_lost"]
    assert set(summary["failures"]) <= {Failure.STREAM_CLOSED, Failure.ANSWER_LOST}, summary


@pytest.mark.slow
def test_after_a_restart_every_call_fails_with_the_session_gone(tmp_path):
    """The CLI in its own process; the instance is killed and restarted under it. The SDK client keeps
    its dead session id: no call succeeds after the restart (it does not re-initialise)."""
    out = tmp_path / "sdk.jsonl"
    with running_lab(1, "streamable-http", policy="round-robin", folder=tmp_path / "lab", resumable=True,
                     restarts=MANUAL) as lab:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcpbench.lab.peers.sdk_client", "--target", lab.url, "--transport", "streamable-http",
             "--duration", "8", "--timeout", str(TIMEOUT), "--out", str(out), "--call", 'echo={"text": "x"}',
             "--call", 'slow={"seconds": 0.5, "steps": 2}'],
            cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            wait_for(lambda: out.exists() and any(line["ok"] for line in read_lines(out)), CLI_SLACK, "a first answer")
            lab.restarter.restart(0)
            up = [r["t"] for r in fault_records(lab.fault_log) if r.get("phase") == "up"][-1]
            stdout, _ = proc.communicate(timeout=CLI_SLACK)
        finally:
            stop_process(proc)
    assert proc.returncode == 0
    summary = json.loads(stdout)
    lines = read_lines(out)
    check_consistent(summary, lines)
    after = [line for line in lines if line["t"] > up]
    assert after and not any(line["ok"] for line in after), after
    assert Failure.SESSION_NOT_FOUND in {line["failure"] for line in after}
    assert summary["session_lost"] and summary["last_ok_t"] < up


@pytest.mark.slow
def test_a_cut_legacy_sse_stream_ends_the_sdk_client(tmp_path):
    """Legacy HTTP+SSE: the SDK client has no reconnect. Once the balancer cuts its stream every
    call fails, and the client counts as dead."""
    out = tmp_path / "sdk.jsonl"
    with running_lab(1, "sse", policy="round-robin", folder=tmp_path / "lab", faults={"cut_streams_after": "2s"}) as lab:
        summary = run_sdk_client(lab.url, "sse", duration=4.0, calls=[ECHO], out=out, timeout=TIMEOUT)
    lines = read_lines(out)
    check_consistent(summary, lines)
    (cut,) = [r["t"] for r in fault_records(lab.fault_log) if r["kind"] == "cut-stream"]
    before = [line for line in lines if line["t"] + line["latency_ms"] / 1000 < cut]
    after = [line for line in lines if line["t"] > cut]
    assert before and all(line["ok"] for line in before)
    assert after and not any(line["ok"] for line in after)
    assert not summary["survived"] and summary["death"]
    assert summary["failures"].get(CLIENT_CLOSED, 0) >= len(after) - 1  # all but the one that saw it close


@pytest.mark.slow
def test_a_killed_stdio_server_ends_the_sdk_client(tmp_path):
    """stdio: the server is killed after 20 messages (handshake and a few calls); the SDK client does
    not start it again, so it is dead from then on. The run is counted, not timed: 15 calls, the kill
    within about 9 (on a busy machine 4 s did not reach it), 30 s the bound."""
    out = tmp_path / "sdk.jsonl"
    argv = [sys.executable, "-m", "mcpbench", "faults", "stdio", "--kill-after-messages", "20", "--",
            sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"]
    summary = run_sdk_client(argv, "stdio", duration=30.0, calls=[ECHO], out=out, timeout=TIMEOUT, max_calls=15)
    lines = read_lines(out)
    check_consistent(summary, lines)
    first_failed = next(i for i, line in enumerate(lines) if not line["ok"])
    assert first_failed >= 1 and all(line["ok"] for line in lines[:first_failed])
    assert not any(line["ok"] for line in lines[first_failed:])
    assert not summary["survived"] and CLIENT_CLOSED in summary["failures"]
    assert summary["calls"] == 15
