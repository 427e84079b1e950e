"""Options that cannot work are refused at parse time (exit 2, one line naming the option);
every timeout is enforced: an answer later than `replay --timeout` does not count."""

import subprocess
import sys

import orjson
import pytest

from tests.hostile.helpers import EXIT_FAILED, EXIT_INPUT, assert_clean_failure, run
from tests.hostile.hostile_peers import LATE_SERVER, counter_trace
from tests.support.servers import HOST, free_port, stop_process, wait_for_port


@pytest.mark.parametrize(("option", "value"), [
    ("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "nan"), ("--timeout", "inf"),
    ("--max-gap", "0"), ("--max-gap", "-3"),
    ("--latency-factor", "-1"), ("--latency-factor", "nan"), ("--latency-slack-ms", "-5"),
    ("--pace", "x0"), ("--pace", "x-2"), ("--pace", "xinf"), ("--pace", "sometimes"),
])
def test_replay_refuses_numbers_that_cannot_work(tmp_path, option, value):
    trace, report = counter_trace(tmp_path / "t.jsonl"), tmp_path / "r.json"
    # The target does not exist: a refused option must stop the command before it is tried.
    result = run(["replay", str(trace), "--target", "http://127.0.0.1:9/mcp", option, value, "--report", str(report)])
    assert_clean_failure(result, EXIT_INPUT, option)
    assert "Connection refused" not in result.stderr


@pytest.mark.parametrize(("option", "value"), [("--latency-factor", "-0.5"), ("--latency-slack-ms", "inf")])
def test_diff_refuses_numbers_that_cannot_work(tmp_path, option, value):
    trace = counter_trace(tmp_path / "t.jsonl")
    assert_clean_failure(run(["diff", str(trace), str(trace), option, value]), EXIT_INPUT, option)


@pytest.mark.parametrize(("option", "value"), [
    ("--users", "0"), ("--spawn-rate", "0"), ("--spawn-rate", "nan"), ("--duration", "0"), ("--duration", "-1s"),
    ("--workers", "-1"), ("--web-port", "70000"),
])
def test_load_refuses_numbers_that_cannot_work(tmp_path, option, value):
    trace = counter_trace(tmp_path / "t.jsonl")
    result = run(["load", "--target", "http://127.0.0.1:9/mcp", "--from-trace", str(trace), option, value,
                  "--out", str(tmp_path / "run")])
    assert_clean_failure(result, EXIT_INPUT, option)
    assert not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize("line", ["timeout: 0", "timeout: .nan", "timeout: .inf", "spawn_rate: .nan", "think_time: [-1, 2]"])
def test_load_scenario_numbers_that_cannot_work(tmp_path, line):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"target: http://127.0.0.1:9/mcp\nmix: [{{call: tools/list}}]\n{line}\n")
    assert_clean_failure(run(["load", str(scenario)]), EXIT_INPUT, f"{scenario}:3", line.split(":")[0])


@pytest.mark.parametrize(("command", "option", "value"), [
    (["serve-trace", "{trace}", "--transport", "sse"], "--port", "-1"),
    (["serve-trace", "{trace}", "--transport", "sse"], "--port", "65536"),
    (["lab", "serve", "--transport", "sse"], "--port", "0"),
])
def test_ports_out_of_range(tmp_path, command, option, value):
    trace = counter_trace(tmp_path / "t.jsonl")
    args = [a.format(trace=trace) for a in command] + [option, value]
    assert_clean_failure(run(args), EXIT_INPUT, option)


@pytest.mark.parametrize(("option", "value"), [("--pace", "x0"), ("--pace", "sometimes"), ("--max-gap", "0")])
def test_serve_trace_refuses_a_pace_that_cannot_work(tmp_path, option, value):
    trace = counter_trace(tmp_path / "t.jsonl")
    # A refused option stops the command before it serves anything (else `run` times out).
    assert_clean_failure(run(["serve-trace", str(trace), "--transport", "sse", "--port", "9", option, value]), EXIT_INPUT, option)


def test_record_listen_port_out_of_range(tmp_path):
    result = run(["record", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:70000"])
    assert_clean_failure(result, EXIT_INPUT, "--listen")


@pytest.mark.parametrize("value", ["-1", "1.5", "nan", "soon"])
def test_record_refuses_an_upstream_timeout_that_cannot_work(value):
    result = run(["record", "--upstream", "http://127.0.0.1:9/mcp", "--listen", f"{HOST}:{free_port()}", "--upstream-timeout", value])
    assert_clean_failure(result, EXIT_INPUT, "--upstream-timeout")


TIMEOUT = "2"  # the replay's per-request timeout: far below LATE_SERVER's delay


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
@pytest.mark.slow
def test_replay_timeout_is_enforced_per_request(tmp_path, transport):
    trace, report = counter_trace(tmp_path / "t.jsonl", answers=("1",)), tmp_path / "r.json"
    script = tmp_path / "late_server.py"
    script.write_text(LATE_SERVER)
    proc = None
    try:
        if transport == "stdio":
            target = f"stdio:{sys.executable} {script} stdio"
        else:
            port = free_port()
            proc = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_port(HOST, port, proc=proc)
            target = f"http://{HOST}:{port}/mcp"
        result = run(["replay", str(trace), "--target", target, "--timeout", TIMEOUT, "--latency-factor", "0",
                      "--report", str(report)])
    finally:
        if proc is not None:
            stop_process(proc)
    assert result.returncode == EXIT_FAILED and "Traceback" not in result.stderr, result.stdout + result.stderr
    calls = orjson.loads(report.read_bytes())["sessions"][0]["calls"]
    late = [call for call in calls if call["method"] == "tools/call"]
    assert len(late) == 1 and late[0]["status"] == "failed", late
    assert "timeout" in orjson.dumps(late[0]).decode()
    assert calls[0]["status"] == "identical"  # the handshake, answered in time, still counts
