"""`mcpbench fuzz` against the lab: every planted fault found and replayed, the reference server clean, a seed repeated."""

import json
import signal
import subprocess

import pytest

from tests.fuzzer.helpers import (
    FAULTY_STDIO, FRAGILE_STDIO, MCPBENCH, REFERENCE_STDIO, RUN_TIMEOUT, check_sarif, faulty_http, found, fuzz, fuzz_json,
    lax_http, replay_row,
)
from tests.support.servers import REPO_ROOT

pytestmark = pytest.mark.slow  # server processes, restarted after each crash and hang

# (class, tool) planted in lab/peers/faulty_server.py, but for the crash, which ends an HTTP server.
PLANTED = {("hang", "lookup"), ("leak", "parse"), ("accepted-invalid", "store"), ("output-schema", "stats"),
           ("non-deterministic", "roll")}
# Found on stdio only: the resident memory of a process the fuzzer started.
STDIO_ONLY = {("crash", "divide"), ("memory", "remember")}
# What a replay of each class's trace shows: the server again not answering, or answering as recorded.
REPLAYED = {"crash": "unanswered", "hang": "unanswered", "leak": "identical", "accepted-invalid": "identical",
            "output-schema": "identical", "non-deterministic": "changed"}


def test_every_planted_fault_is_found_on_stdio_the_destructive_tool_left_alone_and_each_trace_replays(tmp_path):
    junit, summary, sarif = tmp_path / "fuzz.xml", tmp_path / "fuzz.md", tmp_path / "fuzz.sarif"
    result, data = fuzz_json(FAULTY_STDIO, tmp_path, "--cases", "96", "--seed", "1", "--hang-after", "2", "--no-protocol",
                             "--junit-xml", str(junit), "--summary-md", str(summary), "--sarif", str(sarif))
    assert result.returncode == 1, result.stderr
    assert PLANTED | STDIO_ONLY <= found(data), result.stdout
    assert "exited with status 3" in next(f["evidence"] for f in data["findings"] if f["class"] == "crash")
    assert junit.read_text().count("<failure") == len(data["findings"]) and "fuzz" in summary.read_text()
    log = json.loads(sarif.read_text())
    check_sarif(log)
    assert {(r["ruleId"], r["locations"][0]["logicalLocations"][0]["name"]) for r in log["runs"][0]["results"]} == found(data)
    assert "wipe" not in data["tools"] and "destructiveHint" in data["skipped"]["wipe"]
    assert "class" in result.stdout.splitlines()[0] and "seed 1" in result.stderr
    for finding in data["findings"]:
        if finding["class"] in REPLAYED:
            assert REPLAYED[finding["class"]] in replay_row(finding["trace"], FAULTY_STDIO, finding["tool"]), finding


def test_streamable_http_faults_are_found_and_replay_and_a_crash_ends_the_run_cleanly(tmp_path):
    with faulty_http() as url:
        result, data = fuzz_json(url, tmp_path / "a", "--cases", "40", "--seed", "2", "--hang-after", "2", "--skip", "divide")
        assert result.returncode == 1, result.stderr
        assert PLANTED <= found(data), result.stdout
        leak = next(f for f in data["findings"] if f["class"] == "leak")
        assert "identical" in replay_row(leak["trace"], url, "parse")
        crashed, data = fuzz_json(url, tmp_path / "b", "--cases", "20", "--seed", "2", "--tool", "divide")
    assert crashed.returncode == 1 and ("crash", "divide") in found(data), crashed.stderr
    assert data["ended"] and "could not be reached again" in data["ended"]


def test_the_reference_server_gives_no_finding(tmp_path):
    # `slow` sleeps up to 30 s by design: a hang by any bound a short run can wait.
    result, data = fuzz_json(REFERENCE_STDIO, tmp_path, "--cases", "60", "--seed", "3", "--skip", "slow")
    assert result.returncode == 0, result.stdout + result.stderr
    assert data["findings"] == [] and data["calls"] >= 50 and "echo" in data["tools"] and data["protocol_cases"] == 16


def test_the_seed_repeats_a_run_exactly(tmp_path):
    runs = [fuzz_json(REFERENCE_STDIO, tmp_path / str(i), "--cases", "20", "--seed", seed, "--tool", "echo", "--tool", "add")[1]
            for i, seed in enumerate(("11", "11", "12"))]
    assert runs[0]["calls"] == runs[1]["calls"] == 20
    assert runs[0]["cases_digest"] == runs[1]["cases_digest"] != runs[2]["cases_digest"]


@pytest.mark.parametrize("target", ["stdio:python3 -c \"print('hello')\"", "stdio:true"])
def test_a_target_that_is_not_mcp_is_one_line_exit_3(tmp_path, target):
    result = fuzz(target, "--cases", "5", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "handshake" in result.stderr and "Traceback" not in result.stderr


def test_ctrl_c_mid_run_keeps_the_findings_so_far(tmp_path):
    out = tmp_path / "fuzz.json"
    proc = subprocess.Popen([*MCPBENCH, "fuzz", FAULTY_STDIO, "--budget", "5m", "--hang-after", "2", "--seed", "1", "--json", str(out),
                             "--out", str(tmp_path / "findings"), "--tool", "divide", "--tool", "lookup"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        for line in proc.stderr:  # bounded by the run's own budget and the test's timeout
            if line.startswith("mcpbench: found"):
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    data = json.loads(out.read_text())
    assert data["interrupted"] and data["findings"] and all(f["trace"] for f in data["findings"])


def test_recorded_calls_are_sent_first_as_they_were(tmp_path):
    from mcpbench.trace.writer import TraceWriter

    recorded = tmp_path / "recorded.jsonl"
    with TraceWriter(recorded, transport="stdio") as writer:
        writer.message("s1", "c2s", b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"parse","arguments":{"text":"seven"}}}', 1.0)
    result, data = fuzz_json(FAULTY_STDIO, tmp_path, "--trace", str(recorded), "--tool", "parse", "--cases", "1", "--seed", "4")
    assert result.returncode == 1 and data["calls"] == 1, result.stderr
    [leak] = data["findings"]
    assert leak["class"] == "leak" and leak["seeded"] and leak["arguments"] == {"text": "seven"}


def test_a_server_that_dies_on_a_protocol_case_is_a_crash_whose_trace_keeps_the_bytes(tmp_path):
    from mcpbench.trace.reader import read_trace

    result, data = fuzz_json(FRAGILE_STDIO, tmp_path, "--cases", "1", "--seed", "5")
    assert result.returncode == 1, result.stderr
    crash = next(f for f in data["findings"] if f["tool"] == "(protocol)")
    assert crash["class"] == "crash" and crash["kind"] == "malformed-json"
    [violation] = [e for e in read_trace(crash["trace"]) if e["kind"] == "violation"]
    assert violation["raw"].startswith('{"jsonrpc": "2.0", "id": "fz-1"')


def test_legacy_sse_faults_are_found_and_replay(tmp_path):
    with faulty_http("sse") as url:
        result, data = fuzz_json(url, tmp_path, "--cases", "40", "--seed", "3", "--tool", "parse", "--tool", "store", "--no-protocol")
        assert result.returncode == 1, result.stderr
        assert {("leak", "parse"), ("accepted-invalid", "store")} <= found(data), result.stdout
        leak = next(f for f in data["findings"] if f["class"] == "leak")
        assert "identical" in replay_row(leak["trace"], url, "parse")


def test_a_server_answering_calls_whatever_their_headers_is_a_protocol_finding(tmp_path):
    with lax_http() as url:
        result, data = fuzz_json(url, tmp_path, "--cases", "5", "--seed", "6", "--hang-after", "5")
    assert result.returncode == 1, result.stderr
    protocol = {f["kind"]: f["evidence"] for f in data["findings"] if f["class"] == "protocol"}
    assert set(protocol) == {"call-before-handshake", "wrong-version-header", "method-header-mismatch",
                             "name-header-mismatch", "version-header-mismatch"}, data["findings"]
    assert "Missing session ID" in protocol["call-before-handshake"] and "Unsupported" in protocol["wrong-version-header"]
    assert "where the rules answer 400" in protocol["name-header-mismatch"] and "Mcp-Name" in protocol["name-header-mismatch"]
