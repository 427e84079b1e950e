"""Exit statuses and one-line errors: 2 unusable input, 3 the environment (README "Exit status").

Each case asserts the status, the one line naming the culprit, no traceback, and that what was
written before the failure (a report, a replay trace) is kept.
"""

import orjson
import pytest

from mcpbench.trace.reader import read_trace
from tests.hostile.helpers import EXIT_ENVIRONMENT, EXIT_INPUT, assert_clean_failure, run
from tests.hostile.hostile_peers import HEADER, busy_port, counter_trace, event, not_mcp_server, write_trace

# --- the environment: exit 3 ----------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    ["serve-trace", "{trace}", "--transport", "streamable-http", "--port", "{port}"],
    ["serve-trace", "{trace}", "--transport", "sse", "--port", "{port}"],
    ["lab", "serve", "--transport", "streamable-http", "--port", "{port}"],
    ["record", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:{port}", "--out", "{out}"],
    ["load", "--target", "http://127.0.0.1:9/mcp", "--from-trace", "{trace}", "--ui", "--web-port", "{port}", "--out", "{out}"],
])
@pytest.mark.slow
def test_a_busy_port_is_one_line_and_exit_3(tmp_path, command):
    trace = counter_trace(tmp_path / "t.jsonl")
    with busy_port() as port:
        args = [a.format(trace=trace, port=port, out=tmp_path / "r.jsonl") for a in command]
        result = run(args)
    line = assert_clean_failure(result, EXIT_ENVIRONMENT, f"127.0.0.1:{port}", "in use")
    assert "reference server" not in line  # no banner before the failure


@pytest.mark.parametrize("command", [
    ["serve-trace", "{trace}", "--transport", "streamable-http", "--host", "no-such-host.invalid"],
    ["lab", "serve", "--transport", "sse", "--host", "no-such-host.invalid"],
    ["record", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "no-such-host.invalid:0", "--out", "{out}"],
])
@pytest.mark.slow
def test_a_bad_host_is_one_line_and_exit_3(tmp_path, command):
    trace = counter_trace(tmp_path / "t.jsonl")
    result = run([a.format(trace=trace, out=tmp_path / "r.jsonl") for a in command])
    assert_clean_failure(result, EXIT_ENVIRONMENT, "no-such-host.invalid")


def test_an_unreachable_target_is_exit_3_and_the_report_is_kept(tmp_path):
    trace, report, out = counter_trace(tmp_path / "t.jsonl"), tmp_path / "r.json", tmp_path / "replay.jsonl"
    result = run(["replay", str(trace), "--target", "http://127.0.0.1:9/mcp", "--report", str(report), "--out", str(out)])
    lines = [line for line in result.stderr.splitlines() if "replay trace →" not in line]
    result.stderr = "\n".join(lines)
    assert_clean_failure(result, EXIT_ENVIRONMENT, "http://127.0.0.1:9/mcp", "Connection refused")
    data = orjson.loads(report.read_bytes())
    assert data["exit_code"] == EXIT_ENVIRONMENT and data["counts"]["failed"] == 3
    assert [e["kind"] for e in read_trace(out)][0] == "trace"


@pytest.mark.parametrize("status", [200, 404, 405, 500])
@pytest.mark.parametrize("scheme", ["http", "sse+http"])
def test_a_target_that_is_not_mcp_says_so(tmp_path, status, scheme):
    trace, report = counter_trace(tmp_path / "t.jsonl"), tmp_path / "r.json"
    with not_mcp_server() as base:
        url = f"{scheme}://{base.removeprefix('http://')}/{status}"
        result = run(["replay", str(trace), "--target", url, "--report", str(report)])
    line = assert_clean_failure(result, EXIT_ENVIRONMENT, f"/{status}")
    assert "not an MCP server" in line or "not an SSE stream" in line, line
    assert "answer-lost" not in line and "timeout" not in line
    assert orjson.loads(report.read_bytes())["exit_code"] == EXIT_ENVIRONMENT


def test_load_against_a_web_page_says_not_mcp(tmp_path):
    trace = counter_trace(tmp_path / "t.jsonl")
    with not_mcp_server() as base:
        result = run(["load", "--target", f"{base}/200", "--from-trace", str(trace), "--duration", "1s",
                      "--out", str(tmp_path / "run")])
    line = assert_clean_failure(result, EXIT_ENVIRONMENT, f"{base}/200", "not-mcp")
    assert "answer-lost" not in line


def test_a_stdio_target_that_is_not_a_command_is_exit_3(tmp_path):
    trace = counter_trace(tmp_path / "t.jsonl")
    result = run(["replay", str(trace), "--target", "stdio:/no/such/server"])
    assert_clean_failure(result, EXIT_ENVIRONMENT, "/no/such/server")


# --- unusable input: exit 2 -----------------------------------------------------------------------

# (line 2 of the trace becomes this event; the message names the field)
BAD_FIELDS = {
    "ts": {"ts": "yesterday"},
    "session": {"session": 5},
    "dir": {"dir": "sideways"},
    "kind": {"kind": ["message"]},
    "msg": {"msg": 7},
    "v": {"v": "1"},
}


@pytest.mark.parametrize("field", sorted(BAD_FIELDS))
@pytest.mark.parametrize("command", ["inspect", "diff", "replay", "serve-trace", "export"])
def test_a_field_of_the_wrong_type_names_file_and_line(tmp_path, field, command):
    good = counter_trace(tmp_path / "good.jsonl")
    lines = good.read_bytes().splitlines()
    bad_event = {**orjson.loads(lines[1]), **BAD_FIELDS[field]}
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join([lines[0], orjson.dumps(bad_event), *lines[2:]]) + b"\n")
    args = {
        "inspect": ["inspect", str(bad)],
        "diff": ["diff", str(bad), str(good)],
        "replay": ["replay", str(bad), "--target", "http://127.0.0.1:9/mcp"],
        "serve-trace": ["serve-trace", str(bad)],
        "export": ["export", "--har", str(bad)],
    }[command]
    line = assert_clean_failure(run(args, input=b""), EXIT_INPUT, f"{bad}:2")
    assert field in line


@pytest.mark.parametrize("command", [
    ["replay", "{trace}", "--target", "http://127.0.0.1:9/mcp", "--report", "{blocked}/r.json"],
    ["replay", "{trace}", "--target", "http://127.0.0.1:9/mcp", "--out", "{blocked}/r.jsonl"],
    ["diff", "{trace}", "{trace}", "--report", "{blocked}/r.json"],
    ["export", "--har", "{trace}", "--out", "{blocked}/x.har"],
    ["tee", "--out", "{blocked}/t.jsonl", "--", "true"],
    ["record", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0", "--out", "{blocked}/t.jsonl"],
    ["load", "--target", "http://127.0.0.1:9/mcp", "--from-trace", "{trace}", "--out", "{blocked}/run"],
    ["run", "--out", "{blocked}/run"],
])
def test_an_output_folder_that_cannot_be_made_is_exit_2_before_any_work(tmp_path, command):
    trace = counter_trace(tmp_path / "t.jsonl")
    blocked = tmp_path / "a-file"  # a file where a folder should be: no one, root included, can make it
    blocked.write_text("in the way")
    args = [a.format(trace=trace, blocked=blocked) for a in command]
    option = "--report" if "--report" in args else "--out"
    assert_clean_failure(run(args), EXIT_INPUT, option, str(blocked))
    assert blocked.read_text() == "in the way"


def test_load_from_a_trace_with_params_of_the_wrong_type_is_exit_2(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl", [event(2.0, "s", "c2s", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                                       "params": "not an object"})], header=HEADER)
    result = run(["load", "--target", "http://127.0.0.1:9/mcp", "--from-trace", str(trace), "--duration", "1s"])
    assert_clean_failure(result, EXIT_INPUT, str(trace))


def test_usage_errors_are_one_line(tmp_path):
    assert_clean_failure(run(["replay"]), EXIT_INPUT, "TRACE")
    assert_clean_failure(run(["lab", "serve", "--transport", "carrier-pigeon"]), EXIT_INPUT, "--transport")
    assert_clean_failure(run(["inspect", str(tmp_path)]), EXIT_INPUT, str(tmp_path))


def http_trace(path, kind: str, field: str, value) -> object:
    """A small HTTP trace (an exchange, a GET stream and one SSE event) with one field set to `value`."""
    http = {"session": "s", "transport": "streamable-http"}
    events = [
        event(1.0, direction=None, kind="http", flow="f1", method="POST", path="/mcp", status=200, started=1.0, responded=1.1,
              ended=1.2, request_headers={}, response_headers={}, **http),
        event(1.3, direction=None, kind="stream", flow="f2", event="open", method="GET", path="/mcp", status=200, **http),
        event(1.4, direction="s2c", kind="sse", flow="f2", event="message", data="x", **http),
    ]
    line = next(number for number, e in enumerate(events, 2) if e["kind"] == kind)
    events[line - 2][field] = value
    write_trace(path, events, header={**HEADER, "transport": "streamable-http"})
    return line


@pytest.mark.parametrize(("kind", "field", "value"), [
    ("http", "status", "200"), ("http", "started", "yesterday"), ("http", "request_headers", ["a"]),
    ("http", "flow", ["f"]), ("stream", "event", 5), ("sse", "data", 5),
])
@pytest.mark.parametrize("command", ["inspect", "export"])
def test_an_http_field_of_the_wrong_type_names_file_and_line(tmp_path, kind, field, value, command):
    trace = tmp_path / "http.jsonl"
    line = http_trace(trace, kind, field, value)
    args = ["inspect", str(trace)] if command == "inspect" else ["export", "--har", str(trace)]
    message = assert_clean_failure(run(args), EXIT_INPUT, f"{trace}:{line}")
    assert repr(field) in message


def test_the_same_http_trace_with_the_right_types_exports(tmp_path):
    trace = tmp_path / "http.jsonl"
    http_trace(trace, "http", "status", 200)
    result = run(["export", "--har", str(trace)])
    assert result.returncode == 0 and len(orjson.loads(result.stdout)["log"]["entries"]) == 1, result.stderr


@pytest.mark.parametrize(("server", "says"), [
    ("import time; time.sleep(60)", "sent nothing within 2 s"),  # silent: each call would wait 2 s
    ("print('hello')", "exited with status"),  # prints a line and leaves
])
@pytest.mark.slow
def test_a_stdio_target_that_does_not_speak_mcp_is_exit_3(tmp_path, server, says):
    import subprocess
    import sys

    trace, report = counter_trace(tmp_path / "t.jsonl", answers=("1", "2", "3")), tmp_path / "r.json"
    target = "stdio:" + subprocess.list2cmdline([sys.executable, "-c", server])
    result = run(["replay", str(trace), "--target", target, "--timeout", "2", "--report", str(report)])
    assert_clean_failure(result, EXIT_ENVIRONMENT, says)
    data = orjson.loads(report.read_bytes())
    assert data["exit_code"] == EXIT_ENVIRONMENT and data["counts"]["identical"] == 0


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_inspect_strict_exits_1_on_a_violation_and_0_without(tmp_path):
    clean = counter_trace(tmp_path / "clean.jsonl")
    broken = tmp_path / "broken.jsonl"
    lines = clean.read_bytes().splitlines()
    bad = orjson.loads(lines[4])
    bad["msg"]["id"] = [2]  # JSON, but no valid JSON-RPC id: an invalid-message violation
    broken.write_bytes(b"\n".join([*lines[:4], orjson.dumps(bad), *lines[5:]]) + b"\n")
    assert run(["inspect", "--strict", str(clean)]).returncode == 0
    result = run(["inspect", "--strict", str(broken)])
    assert result.returncode == 1 and "Traceback" not in result.stderr and "invalid-message" in result.stdout
    assert run(["inspect", str(broken)]).returncode == 0  # without --strict a violation is reported, not failed
