"""`mcpbench fuzz` against the lab: every planted fault found and replayed, the reference server clean, a seed repeated."""

import json
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.fuzzer.helpers import (
    FAULTY_STDIO, FRAGILE_STDIO, MCPBENCH, REFERENCE_STDIO, RUN_TIMEOUT, check_sarif, faulty_http, found, fuzz, fuzz_json,
    lax_http, replay_row,
)
from mcpbench.fuzz.judge import CLASSES
from tests.support.servers import REPO_ROOT

pytestmark = pytest.mark.slow  # server processes, restarted after each crash and hang

# (class, tool) planted in lab/peers/faulty_server.py that every transport and era shows (the crash
# ends an HTTP server, so it is its own run there).
PLANTED = {("hang", "lookup"), ("leak", "parse"), ("accepted-invalid", "store"), ("output-schema", "stats"),
           ("non-deterministic", "roll"), ("protocol", "describe")}
# Found on stdio only: the crash (an HTTP server would be gone for the rest of the run), the resident
# memory of a process the fuzzer started; and the slow call, which needs 20 answered calls for a median.
STDIO_ONLY = {("crash", "divide"), ("memory", "remember"), ("slow", "render")}
# 2026-07-28 only: a retry with its requestState altered taken as done.
STATELESS_ONLY = {("protocol", "confirm")}
# What a replay of each class's trace shows: the server again not answering, or answering as recorded,
# or again slow, or (memory: the replay samples the stdio server it starts) growing again.
REPLAYED = {"crash": "unanswered", "hang": "unanswered", "leak": "identical", "accepted-invalid": "identical",
            "output-schema": "identical", "non-deterministic": "changed", "protocol": "identical", "slow": "identical",
            "memory": "identical"}
STATELESS = "2026-07-28"
# A replayed hang's bound on each request: the planted hang sleeps forever, so any bound past the fuzz
# run's own (--hang-after 3) shows it unanswered again; 10 s leaves a busy machine's cold start (2 s at
# load 5) room for the handshake, where replay's own bound (30 s at least) only made the test wait.
HANG_REPLAY_TIMEOUT = 10.0


@pytest.fixture(scope="module")
def stdio_run(tmp_path_factory):
    """One 2026-07-28 run of the planted-fault server over stdio, every output written; several tests read it."""
    out = tmp_path_factory.mktemp("fuzz-stdio")
    result, data = fuzz_json(FAULTY_STDIO, out, "--cases", "130", "--seed", "1", "--hang-after", "3", "--live-limit", "6", "--era", STATELESS,
                             "--junit-xml", str(out / "fuzz.xml"), "--summary-md", str(out / "fuzz.md"), "--sarif", str(out / "fuzz.sarif"))
    return result, data, out


def test_every_planted_class_is_found_on_stdio_in_2026_07_28_and_the_destructive_tool_left_alone(stdio_run):
    result, data, out = stdio_run
    assert result.returncode == 1, result.stderr
    assert PLANTED | STDIO_ONLY | STATELESS_ONLY <= found(data), result.stdout
    assert {f["class"] for f in data["findings"]} == set(CLASSES)
    assert {f["version"] for f in data["findings"]} == {STATELESS} and data["versions"] == [STATELESS]
    assert "exited with status 3" in next(f["evidence"] for f in data["findings"] if f["class"] == "crash")
    describe = next(f for f in data["findings"] if f["tool"] == "describe")
    assert describe["kind"] == "invalid-schema" and "not valid JSON Schema" in describe["evidence"]
    confirm = next(f for f in data["findings"] if f["tool"] == "confirm")
    assert confirm["kind"] == "tampered-request-state" and "requestState altered" in confirm["evidence"]
    assert "wipe" not in data["tools"] and "destructiveHint" in data["skipped"]["wipe"]
    assert "class" in result.stdout.splitlines()[0] and "seed 1" in result.stderr


def test_the_stdio_run_writes_junit_markdown_and_sarif(stdio_run):
    _, data, out = stdio_run
    assert (out / "fuzz.xml").read_text().count("<failure") == len(data["findings"]) and "fuzz" in (out / "fuzz.md").read_text()
    log = json.loads((out / "fuzz.sarif").read_text())
    check_sarif(log)
    assert {(r["ruleId"], r["locations"][0]["logicalLocations"][0]["name"]) for r in log["runs"][0]["results"]} == found(data)


def test_each_stdio_finding_replays_from_its_trace(stdio_run):
    _, data, _ = stdio_run
    mine = [f for f in data["findings"] if f["class"] in REPLAYED and f["tool"] != "(protocol)"]
    assert {f["class"] for f in mine} == set(REPLAYED)

    def replayed(finding: dict) -> str:
        return replay_row(finding["trace"], FAULTY_STDIO, "tools/list" if finding["kind"] == "invalid-schema" else finding["tool"],
                          timeout=HANG_REPLAY_TIMEOUT if finding["class"] == "hang" else None)

    # Each replay is a server process of its own, mostly waiting (a hang's 10 s, a slow call): a few at once.
    with ThreadPoolExecutor(max_workers=3) as pool:
        for finding, row in zip(mine, pool.map(replayed, mine)):
            assert REPLAYED[finding["class"]] in row, finding


def test_a_server_that_seals_its_request_state_refuses_the_tampered_retry(tmp_path):
    sealed = FAULTY_STDIO + " --seal-state"
    result, data = fuzz_json(sealed, tmp_path, "--era", STATELESS, "--tool", "confirm", "--cases", "1", "--seed", "1", "--no-protocol")
    assert result.returncode == 0 and data["findings"] == [], result.stdout + result.stderr
    assert data["calls"] == 2  # the case, answered input_required with a state, then the retry with it altered


def test_streamable_http_faults_are_found_in_both_eras_and_replay_and_a_crash_ends_the_run_cleanly(tmp_path):
    with faulty_http() as url:
        result, data = fuzz_json(url, tmp_path / "a", "--cases", "90", "--seed", "2", "--hang-after", "2", "--live-limit", "4", "--era", "both",
                                 "--skip", "divide", "--skip", "remember", "--skip", "render", "--skip", "ping_tool")
        assert result.returncode == 1, result.stderr
        by_version = {version: {(f["class"], f["tool"]) for f in data["findings"] if f["version"] == version} for version in data["versions"]}
        assert PLANTED <= by_version["2025-11-25"] and PLANTED | STATELESS_ONLY <= by_version[STATELESS], result.stdout
        leak = next(f for f in data["findings"] if f["class"] == "leak" and f["version"] == STATELESS)
        assert "identical" in replay_row(leak["trace"], url, "parse")
        crashed, data = fuzz_json(url, tmp_path / "b", "--cases", "20", "--seed", "2", "--tool", "divide", "--no-protocol")
    assert crashed.returncode == 1 and ("crash", "divide") in found(data), crashed.stderr
    assert data["ended"] and "could not be reached again" in data["ended"]


def test_the_reference_server_gives_no_finding_in_either_era(tmp_path):
    # `slow` sleeps as long as asked (up to 30 s), alive all along (test_live.py): a short run does not wait for it.
    result, data = fuzz_json(REFERENCE_STDIO, tmp_path, "--cases", "40", "--seed", "3", "--skip", "slow", "--era", "both")
    assert result.returncode == 0, result.stdout + result.stderr
    assert data["findings"] == [] and data["calls"] >= 40 and "echo" in data["tools"]
    assert data["protocol_cases"] == 17 + 16  # a call before the handshake: in the handshake era only


def test_the_seed_repeats_a_run_exactly(tmp_path):
    def run(index: int, seed: str) -> dict:
        return fuzz_json(REFERENCE_STDIO, tmp_path / str(index), "--cases", "10", "--seed", seed, "--tool", "echo", "--tool", "add",
                         "--no-protocol")[1]

    with ThreadPoolExecutor(max_workers=3) as pool:  # three runs at once: each mostly waits for its server to start
        runs = list(pool.map(run, range(3), ("11", "11", "12")))
    assert runs[0]["calls"] == runs[1]["calls"] == 10
    assert runs[0]["cases_digest"] == runs[1]["cases_digest"] != runs[2]["cases_digest"]


@pytest.mark.parametrize("target", ["stdio:python3 -c \"print('hello')\"", "stdio:true"])
def test_a_target_that_is_not_mcp_is_one_line_exit_3(tmp_path, target):
    result = fuzz(target, "--cases", "5", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "handshake" in result.stderr and "Traceback" not in result.stderr


def test_ctrl_c_mid_run_keeps_the_findings_so_far(tmp_path):
    out = tmp_path / "fuzz.json"
    proc = subprocess.Popen([*MCPBENCH, "fuzz", FAULTY_STDIO, "--budget", "5m", "--hang-after", "2", "--live-limit", "4", "--seed", "1", "--json", str(out),
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
    # No protocol cases: they are not calls (other tests judge them), and took 4 of the run's 5 s.
    result, data = fuzz_json(FAULTY_STDIO, tmp_path, "--trace", str(recorded), "--tool", "parse", "--cases", "1", "--seed", "4",
                             "--no-protocol")
    assert result.returncode == 1 and data["calls"] == 1, result.stderr
    [leak] = data["findings"]
    assert leak["class"] == "leak" and leak["seeded"] and leak["arguments"] == {"text": "seven"}


def test_a_server_that_dies_on_a_protocol_case_or_never_answers_a_call_before_the_handshake(tmp_path):
    from mcpbench.trace.reader import read_trace

    result, data = fuzz_json(FRAGILE_STDIO, tmp_path, "--cases", "1", "--seed", "5", "--hang-after", "2")
    assert result.returncode == 1, result.stderr
    protocol = {f["kind"]: f for f in data["findings"] if f["tool"] == "(protocol)"}
    crash = protocol["malformed-json"]
    assert crash["class"] == "crash"
    [violation] = [e for e in read_trace(crash["trace"]) if e["kind"] == "violation"]
    assert violation["raw"].startswith('{"jsonrpc": "2.0", "id": "fz-1"')
    early = protocol["call-before-handshake"]
    assert early["class"] == "hang" and "tools/list before initialize" in early["evidence"]


def test_legacy_sse_faults_are_found_in_both_eras_and_replay(tmp_path):
    with faulty_http("sse") as url:
        result, data = fuzz_json(url, tmp_path, "--cases", "60", "--seed", "3", "--era", "both",
                                 "--tool", "parse", "--tool", "store", "--tool", "confirm")
        assert result.returncode == 1, result.stderr
        assert {("leak", "parse", v) for v in data["versions"]} | {("accepted-invalid", "store", STATELESS), ("protocol", "confirm", STATELESS)} \
            <= {(f["class"], f["tool"], f["version"]) for f in data["findings"]}, result.stdout
        assert data["protocol_cases"] == 17 + 16  # the call before the handshake: on a stream of its own
        confirm = next(f for f in data["findings"] if f["tool"] == "confirm")
        assert "identical" in replay_row(confirm["trace"], url, "confirm")


def test_a_server_answering_calls_whatever_their_headers_is_a_protocol_finding(tmp_path):
    with lax_http() as url:
        result, data = fuzz_json(url, tmp_path, "--cases", "5", "--seed", "6", "--hang-after", "5")
    assert result.returncode == 1, result.stderr
    protocol = {f["kind"]: f["evidence"] for f in data["findings"] if f["class"] == "protocol"}
    assert set(protocol) == {"call-before-handshake", "wrong-version-header", "method-header-mismatch",
                             "name-header-mismatch", "version-header-mismatch"}, data["findings"]
    assert "Missing session ID" in protocol["call-before-handshake"] and "Unsupported" in protocol["wrong-version-header"]
    assert "where the rules answer 400" in protocol["name-header-mismatch"] and "Mcp-Name" in protocol["name-header-mismatch"]
