"""Stop signals, the cases of one command each: the tee's server, replay, lab serve, the main job's load stage.

The table of every stop signal to every long-running command is test_signal_table.py; these are
what it does not cover. Each case waits for the command to be ready on an event (a port
accepting, a line on a pipe, a line in a file), signals it, then asserts: exit status 130 (SIGINT)
or 143 (SIGTERM), no traceback, ports and child processes released, and what was recorded before
the signal kept (in-flight requests written as error events). Every process a case starts, it stops.
"""

import signal
import subprocess
import sys
import time

import orjson
import pytest

from mcpbench.trace.reader import read_trace
from tests.hostile.helpers import MCPBENCH, assert_no_traceback
from tests.hostile.helpers import run as run_mcpbench
from tests.hostile.hostile_peers import LATE_SERVER, counter_trace
from tests.hostile.stops import (
    READY_WAIT, STOP_SIGNALS, STOP_WAIT, assert_port_free, command, read_bytes_with, read_line_with, server_pid, signal_id,
    status_of, stop, wait_for_text,
)
from tests.support.peers import peer_process
from tests.support.processes import children, wait_for_exit
from tests.support.servers import HOST, free_port, reference_server, wait_for_port

SIGNALS = [signal.SIGINT, signal.SIGTERM]
# The tee kills a server that ignores a forwarded stop after its grace (stdio/tee.py KILL_GRACE).
TEE_KILL_WAIT = 5.0 + STOP_WAIT


# --- servers: serve-trace on each transport, lab serve ---------------------------------------------


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.slow
def test_lab_serve_stops_and_releases_its_port(sig):
    port = free_port()
    with command(["lab", "serve", "--transport", "streamable-http", "--port", str(port)]) as proc:
        wait_for_port(HOST, port, proc=proc)
        stop(proc, sig)
    assert_port_free(port)


# --- tee: signals reach the server, which never outlives the tee -----------------------------------


def test_a_killed_tee_takes_its_server_with_it(tmp_path):
    trace = tmp_path / "tee.jsonl"
    server = "import sys, time\nprint('ready', file=sys.stderr, flush=True)\ntime.sleep(600)\n"
    with command(["tee", "--out", str(trace), "--", sys.executable, "-c", server], stdin=subprocess.PIPE) as proc:
        read_line_with(proc.stderr, b"ready")
        pid = server_pid(trace)
        proc.kill()  # SIGKILL: the tee cannot forward anything
        proc.wait(STOP_WAIT)
        wait_for_exit(pid, STOP_WAIT)  # the kernel ends the server (PR_SET_PDEATHSIG)


@pytest.mark.slow
def test_the_tee_kills_a_server_that_ignores_sigterm(tmp_path):
    trace = tmp_path / "tee.jsonl"
    server = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "print('ready', file=sys.stderr, flush=True)\ntime.sleep(600)\n")
    with command(["tee", "--out", str(trace), "--", sys.executable, "-c", server], stdin=subprocess.PIPE) as proc:
        read_line_with(proc.stderr, b"ready")
        pid = server_pid(trace)
        proc.send_signal(signal.SIGTERM)
        proc.wait(TEE_KILL_WAIT)
        stderr = proc.stderr.read().decode(errors="replace")
        assert_no_traceback(stderr)
        assert proc.returncode == status_of(signal.SIGTERM) and "Traceback" not in stderr, (proc.returncode, stderr)
        wait_for_exit(pid, STOP_WAIT)
    exits = [e for e in read_trace(trace) if e["kind"] == "process" and e.get("event") == "exit"]
    assert exits and exits[0]["signal"] == signal.SIGKILL


# --- replay: the report of what ran is kept ---------------------------------------------------------


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_replay_interrupted_keeps_its_report_and_trace(tmp_path, sig):
    trace = counter_trace(tmp_path / "t.jsonl", answers=("1",))
    report, out = tmp_path / "r.json", tmp_path / "replay.jsonl"
    with peer_process([sys.executable, "-c", LATE_SERVER], stderr=subprocess.PIPE) as (url, server), command(
        ["replay", str(trace), "--target", url, "--report", str(report), "--out", str(out)]
    ) as proc:
        read_line_with(server.stderr, b"called")  # tools/call is in flight
        stop(proc, sig)
    data = orjson.loads(report.read_bytes())
    assert data["exit_code"] == status_of(sig) and "interrupted" in data["aborted"]
    calls = data["sessions"][0]["calls"]
    assert calls[0]["status"] == "identical" and calls[-1]["status"] == "failed"
    errors = [e for e in read_trace(out) if e["kind"] == "error"]
    assert any("interrupted" in e["detail"] for e in errors), errors
    assert not any("cannot connect" in e["detail"] for e in errors), errors  # our own close is no failure


# --- run: the main job passes a stop on to the command it is running ----------------------------------


@pytest.mark.slow
def test_run_interrupted_during_its_load_stage_leaves_no_process(tmp_path):
    out = tmp_path / "run"
    with command(["run", "--out", str(out)], start_new_session=True) as proc:
        read_line_with(proc.stdout, b"== load", timeout=300)  # the load stage has started its command
        wait_for_text(out / "load-streamable-http" / "locust.log", b"", timeout=READY_WAIT)  # and Locust its log
        stop(proc, signal.SIGTERM)
        leftovers = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout.split()
        assert not leftovers, leftovers  # neither `mcpbench load` nor its Locust outlive the run


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("through_tee", [False, True], ids=["lab-serve", "tee-lab-serve"])
@pytest.mark.slow
def test_a_stdio_server_stops_without_a_traceback(tmp_path, sig, through_tee):
    """The reference stdio server, alone or behind the tee (which forwards the signal), mid-session."""
    serve = ["lab", "serve", "--transport", "stdio"]
    args = ["tee", "--out", str(tmp_path / "tee.jsonl"), "--", *MCPBENCH, *serve] if through_tee else serve
    with command(args, stdin=subprocess.PIPE) as proc:
        proc.stdin.write(orjson.dumps(INITIALIZE) + b"\n")
        proc.stdin.flush()
        read_line_with(proc.stdout, b'"id":1')  # the session is up
        stop(proc, sig)
    if through_tee:
        exits = [e for e in read_trace(tmp_path / "tee.jsonl") if e["kind"] == "process" and e.get("event") == "exit"]
        assert [e["exit_code"] for e in exits] == [status_of(sig)]


# A stdio server that answers `initialize` only, and says on stderr which requests it got.
SILENT_SERVER = """\
import json, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)  # a stop ends it as it ends a C server: no traceback
for line in iter(sys.stdin.buffer.readline, b""):
    message = json.loads(line)
    if message.get("method") == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "silent", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}, separators=(",", ":")), flush=True)
    elif "id" in message:
        print(f"got {message['id']}", file=sys.stderr, flush=True)
"""


@pytest.mark.parametrize("end", ["SIGINT", "SIGTERM", "eof"])
@pytest.mark.slow
def test_tee_writes_requests_in_flight_as_error_events(tmp_path, end):
    """However the tee ends, each client request still unanswered becomes one `error` event, readable by all."""
    trace = tmp_path / "tee.jsonl"
    calls = [{"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {}}},
             {"jsonrpc": "2.0", "id": "three", "method": "tools/list"}]
    with command(["tee", "--out", str(trace), "--", sys.executable, "-c", SILENT_SERVER], stdin=subprocess.PIPE) as proc:
        proc.stdin.write(orjson.dumps(INITIALIZE) + b"\n")
        proc.stdin.flush()
        read_line_with(proc.stdout, b'"id":1')  # answered: the session is up
        proc.stdin.write(b"".join(orjson.dumps(call) + b"\n" for call in calls))
        proc.stdin.flush()
        read_bytes_with(proc.stderr.fileno(), b"got three")  # both requests reached the server: in flight
        if end == "eof":
            proc.stdin.close()
            proc.wait(STOP_WAIT)
            assert proc.returncode == 0, proc.stderr.read()
        else:
            stop(proc, getattr(signal, end))
    errors = [e for e in read_trace(trace) if e["kind"] == "error"]
    assert [(e["dir"], e["id"]) for e in errors] == [("c2s", 2), ("c2s", "three")], errors  # not the answered one
    assert errors[0]["detail"] == "tools/call: the session ended before its answer", errors
    # Every reader takes such a trace: inspect, diff, the replay plan, the pandas loader.
    for args in (["inspect", str(trace)], ["diff", str(trace), str(trace)]):
        result = run_mcpbench(args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr)
    from mcpbench.analysis.traces import load_trace
    from mcpbench.replay.plan import load as load_plan

    assert load_plan(trace).sessions
    frames = load_trace(trace)
    assert len(frames.calls) >= 3 and "error" in set(frames.events["kind"])


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.slow
def test_serve_trace_stops_the_live_server_it_forwards_to(tmp_path, sig):
    """serve-trace --on-miss forward stdio:…: the upstream child process ends with the mock."""
    from tests.support.servers import serve_argv

    trace = counter_trace(tmp_path / "t.jsonl")
    upstream = "stdio:" + subprocess.list2cmdline(serve_argv("stdio"))
    miss = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}  # not in the recording: forwarded
    with command(["serve-trace", str(trace), "--on-miss", "forward", upstream], stdin=subprocess.PIPE) as proc:
        for message in (INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, miss):
            proc.stdin.write(orjson.dumps(message) + b"\n")
            proc.stdin.flush()
        assert b'"tools"' in read_line_with(proc.stdout, b'"id":2')  # answered live: the upstream runs
        upstreams = children(proc.pid)
        assert upstreams
        stop(proc, sig)
    for pid in upstreams:
        wait_for_exit(pid, STOP_WAIT)


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=signal_id)
def test_a_probe_stopped_mid_check_ends_with_the_signals_status(tmp_path, sig):
    """`mcpbench probe` takes every stop signal while its checks talk to the server: the documented
    status, one line, no traceback, nothing left running (its connections closed with it)."""
    requests = tmp_path / "requests.jsonl"
    with reference_server("streamable-http", extra_args=["--request-log", str(requests)]) as server, \
            command(["probe", server.url]) as proc:
        wait_for_text(requests, b'"POST"')  # the first check is talking to the server
        stderr = stop(proc, sig)
    assert stderr.strip().endswith(f"stopped by {signal_id(sig)}")
