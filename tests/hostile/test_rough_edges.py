"""Rough edges a user sees: cut or misaligned tables, empty outputs that exit 0, sessions that are
not there, a load run in the wrong era, a diff that speaks of a live server."""

import orjson
import pytest

from mcpbench.load.samples import render as render_load
from tests.hostile.helpers import EXIT_INPUT, EXIT_OK, assert_clean_failure, run
from tests.hostile.hostile_peers import HANDSHAKE, STATELESS, counter_session, counter_trace, event, write_trace

LONG_TOOL = "summarize_the_quarterly_report_of_every_region_in_great_detail"


def test_har_export_of_a_stdio_trace_is_a_clear_error(tmp_path):
    trace, har = counter_trace(tmp_path / "t.jsonl"), tmp_path / "t.har"
    result = run(["export", "--har", str(trace), "--out", str(har)])
    assert_clean_failure(result, EXIT_INPUT, str(trace), "stdio")
    assert not har.exists() and result.stdout == ""


def call_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.lstrip().startswith("#")]


def test_diff_keeps_long_names_whole_and_aligned_and_names_no_live_session(tmp_path):
    a = write_trace(tmp_path / "a.jsonl", counter_session("sa", HANDSHAKE, ["1", "2"], tool=LONG_TOOL))
    b = write_trace(tmp_path / "b.jsonl", counter_session("sb", HANDSHAKE, ["1", "3"], tool=LONG_TOOL))
    result = run(["diff", str(a), str(b)])
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    lines = call_lines(result.stdout)
    assert len(lines) == 3 and all(LONG_TOOL in line for line in lines[1:]), result.stdout
    status_columns = {line.index(status) for line in lines for status in ("identical", "changed") if status in line}
    assert len(status_columns) == 1, result.stdout  # one column, whatever the name's length
    assert "live" not in result.stdout and "recorded" not in result.stdout and "(B sb)" in result.stdout


def test_load_table_keeps_long_step_names_whole_and_aligned():
    row = {"type": "streamable-http", "count": 3, "failures": 0, "p50": 1.0, "p95": 2.0, "p99": 3.0}
    summary = {"steps": [{**row, "step": f"tools/call {LONG_TOOL}"}, {**row, "step": "tools/list"}],
               "total": {**row, "count": 6, "rps": 1.0}, "failure_classes": {}}
    lines = render_load(summary).splitlines()
    assert f"tools/call {LONG_TOOL}" in lines[1]
    assert len({line.index(" 3 ") if " 3 " in line else line.index(" 6 ") for line in lines[1:4]}) == 1, lines


def test_inspect_shows_one_session_per_legacy_sse_stream(tmp_path):
    sse = {"transport": "sse"}
    trace = write_trace(tmp_path / "sse.jsonl", [
        event(1.0, "conn-1", None, kind="stream", event="open", method="GET", path="/sse", flow="f1", **sse),
        event(1.1, "S1", "s2c", kind="sse", event="endpoint", data="/messages/?session_id=S1", conn_session="conn-1", flow="f1", **sse),
        *[{**e, **sse} for e in counter_session("S1", HANDSHAKE, ["1"], start=1.2)],
    ])
    result = run(["inspect", str(trace)])
    assert result.returncode == EXIT_OK and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.count("\nsession ") == 1 and "session S1" in result.stdout, result.stdout
    assert "GET /sse stream open" in result.stdout
    summary = orjson.loads(run(["inspect", "--json", str(trace)]).stdout)
    assert len(summary["sessions"]) == 1


@pytest.mark.parametrize("version", [STATELESS, HANDSHAKE])
@pytest.mark.slow
def test_load_from_trace_runs_in_the_recorded_era(tmp_path, version, http_server):
    trace = write_trace(tmp_path / "t.jsonl", counter_session("s", version, ["hi"], tool="echo", arguments={"text": "hi"}))
    out = tmp_path / "run"
    result = run(["load", "--target", http_server.url, "--from-trace", str(trace), "--duration", "1s", "--out", str(out)])
    assert result.returncode == EXIT_OK and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert orjson.loads((out / "scenario.json").read_bytes())["versions"] == [version]
