"""A real Prometheus server (Debian's `prometheus`) scrapes `record --metrics` during a short load;
PromQL (its HTTP API) returns the counts the trace holds."""

import contextlib
import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpbench.analysis.inspect import summarize
from tests.record.helpers import record_proxy
from tests.support.servers import HOST, REPO_ROOT, free_port, reference_server, stop_process, wait_for_port

PROMETHEUS = shutil.which("prometheus")
SCRAPE_SECONDS = 1
# How long the figures may take to settle: the companion's poll, a scrape, a query.
SETTLE_TIMEOUT = 30.0
LOAD_TIMEOUT = 120

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian's package `prometheus`; .ci/run installs it)")


@contextlib.contextmanager
def prometheus(folder: Path, target: str) -> Iterator[str]:
    """Prometheus scraping `target` (HOST:PORT) every second; yields its base URL."""
    port = free_port()
    config = folder / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_SECONDS}s\n"
        f"scrape_configs:\n  - job_name: mcpbench\n    static_configs:\n      - targets: ['{target}']\n"
    )
    argv = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address={HOST}:{port}"]
    with (folder / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        wait_for_port(HOST, port, proc=proc)
        yield f"http://{HOST}:{port}"
    finally:
        stop_process(proc)


def query(base: str, promql: str) -> dict[tuple, float]:
    """An instant PromQL query: {label values (sorted pairs): value}."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    return {tuple(sorted(row["metric"].items())): float(row["value"][1]) for row in body["data"]["result"]}


def settled(base: str, promql: str, expected: dict) -> dict:
    """The query's result once it equals `expected`, or the last one seen after SETTLE_TIMEOUT."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        got = query(base, promql)
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def scenario(folder: Path, target: str) -> Path:
    path = folder / "short.yaml"
    path.write_text(
        f"name: short\ntarget: {target}\nsession: long_lived\nera: handshake\n"
        "mix:\n  - call: tools/call\n    tool: echo\n    arguments: {text: hi}\n    weight: 3\n"
        "  - call: tools/call\n    tool: fail\n    arguments: {}\n  - call: tools/list\n"
        "think_time: [0.01, 0.02]\nusers: 3\nspawn_rate: 10\nduration: 3s\ntimeout: 10s\n"
    )
    return path


@pytest.mark.slow
def test_prometheus_scrapes_the_recorder_during_a_load_and_promql_gives_the_traces_counts(tmp_path):
    metrics = f"{HOST}:{free_port()}"
    trace = tmp_path / "load.jsonl"
    with reference_server("streamable-http", json_response=True) as server, prometheus(tmp_path, metrics) as base:
        with record_proxy(server.url, trace, extra=["--metrics", metrics]) as (url, proc):
            load = subprocess.run(
                [sys.executable, "-m", "mcpbench", "load", str(scenario(tmp_path, url)), "--out", str(tmp_path / "run")],
                cwd=REPO_ROOT, capture_output=True, text=True, timeout=LOAD_TIMEOUT,
            )
            assert load.returncode in (0, 1), load.stderr  # 1: a threshold; none is set, so 0 expected
            report = summarize(trace)
            calls = Counter((entry.name, entry.outcome) for session in report.sessions for entry in session.calls)
            echo, fail = calls[("tools/call echo", "ok")], calls[("tools/call fail", "tool-error")]
            assert echo > 10 and fail > 0, calls
            # Answered calls: the load's end may cut a last call short, which both count as unanswered.
            by_tool = settled(base, 'sum by (gen_ai_tool_name, mcpbench_outcome) '
                                    '(mcpbench_calls_total{mcp_method_name="tools/call", mcpbench_outcome=~"ok|tool-error"})', {
                (("gen_ai_tool_name", "echo"), ("mcpbench_outcome", "ok")): float(echo),
                (("gen_ai_tool_name", "fail"), ("mcpbench_outcome", "tool-error")): float(fail),
            })
            # The duration histogram counts every operation, as the calls counter does: an answered `echo`
            # as `ok`, one the load's end cut short as `unanswered` (which the trace's `ok` leaves out).
            histogram = settled(base, 'sum(mcp_client_operation_duration_seconds_count{gen_ai_tool_name="echo", mcpbench_outcome="ok"})',
                                {(): float(echo)})
            # One query, so both come from the same scrape: 0 for each outcome.
            disagree = query(base, 'sum by (mcpbench_outcome) (mcp_client_operation_duration_seconds_count{gen_ai_tool_name="echo"})'
                                   ' - sum by (mcpbench_outcome) (mcpbench_calls_total{gen_ai_tool_name="echo"})')
            errors = query(base, 'sum by (mcpbench_error_class) (mcpbench_errors_total)')
            recorded = query(base, "sum(mcpbench_recorded_bytes_total)")
            service = query(base, "target_info")
    assert by_tool == {
        (("gen_ai_tool_name", "echo"), ("mcpbench_outcome", "ok")): float(echo),
        (("gen_ai_tool_name", "fail"), ("mcpbench_outcome", "tool-error")): float(fail),
    }
    assert histogram == {(): float(echo)}
    assert disagree and set(disagree.values()) == {0.0}, disagree  # two instruments, one count of each outcome
    assert errors.get((("mcpbench_error_class", "tool_error"),)) == float(fail)
    assert list(recorded.values())[0] > 0
    assert any(dict(labels).get("service_name") == "mcpbench" for labels in service)
