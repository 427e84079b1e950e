"""Capacity runs against the reference server on 127.0.0.1 (real Locust processes), and bad input."""

import json

import pytest

from tests.capacity.helpers import run_capacity, scenario_text
from tests.support.servers import free_port

# Two users, each call sleeping 0.1 s in the server: at most 20 calls/s can be answered in time, so
# a ramp past it queues its calls and breaks the SLO whatever the machine's load (latency counts
# from each call's intended start).
SLOW = "{seconds: 0.1, steps: 1}"


@pytest.mark.slow
def test_ramp_finds_the_break_a_knee_and_the_recovery(http_server, tmp_path):
    proc, out = run_capacity(tmp_path, scenario_text(http_server.url, tool="slow", arguments=SLOW),
                             "--slo", "p95<300ms", "--start-rate", 10, "--rate-step", "+5", "--step-length", "3s", "--max-time", "24s")
    assert proc.returncode in (0, 1), proc.stderr
    found = json.loads((out / "capacity.json").read_text())
    assert found["broke"] and found["break"]["rate"] <= 40, proc.stdout  # 40/s is twice what two users can answer
    ramp = [row for row in found["steps"] if row["phase"] == "ramp"]
    rates = [row for row in ramp if not row["retry"]]  # each rate's first step
    assert [row["rate"] for row in rates] == [10 + 5 * i for i in range(len(rates))]
    # the rate that broke broke twice, its step and its retry
    assert not ramp[-1]["held"] and ramp[-1]["retry"] and not ramp[-2]["held"] and ramp[-2]["rate"] == ramp[-1]["rate"]
    assert found["break"]["rate"] == ramp[-1]["rate"]
    assert found["capacity_rate"] == (rates[-2]["rate"] if len(rates) > 1 else None)
    assert (proc.returncode == 0) == (found["capacity_rate"] is not None)
    if len(rates) >= 3:  # three rates or more draw a curve: the knee is one of the rates before the break
        assert found["knee"] is not None and found["knee"]["rate"] < found["break"]["rate"], found["knee"]
    low = found["steps"][-1]
    assert low["phase"] == "recovery" and low["rate"] == 10 and low["count"] > 0
    assert found["recovery"]["rate"] == 10 and len(found["recovery"]["windows_held"]) == 5
    timeline = json.loads((out / "ramp.json").read_text())
    assert timeline["done"] and timeline["steps"][-1]["end"] - timeline["steps"][0]["start"] <= 24 + 2 * len(timeline["steps"])
    assert (out / "capacity.png").read_bytes()[:4] == b"\x89PNG"
    assert f"capacity {found['capacity_rate']:g}/s" in proc.stdout or "the first step" in proc.stdout
    # the report shows the capacity run beside the load run it is: what it found, its chart, its steps
    from html import escape

    from mcpbench.analysis.report import write_report
    from mcpbench.capacity.analysis import verdict_line

    written, lines = write_report([out], tmp_path / "report.html")
    html = written.read_text()
    assert "<section id=capacity-0><h2>Capacity: " in html and escape(verdict_line(found)) in html
    assert ("knee at " if found["knee"] else "no knee") in html
    assert any(line.startswith(f"capacity ({out.name}): ") for line in lines), lines


@pytest.mark.slow
def test_ramp_that_never_breaks_says_so_with_a_worker(http_server, tmp_path):
    proc, out = run_capacity(tmp_path, scenario_text(http_server.url), "--slo", "p95<2s", "--start-rate", 20, "--rate-step", "+10",
                             "--step-length", "3s", "--max-time", "12s", "--workers", 1)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "never broke" in proc.stdout
    found = json.loads((out / "capacity.json").read_text())
    assert not found["broke"] and found["capacity_rate"] == 30 and found["recovery"] is None  # at least 30/s
    assert [row["rate"] for row in found["steps"]] == [20, 30] and all(row["held"] for row in found["steps"])
    assert found["workers"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["samples_per_worker"]) == 1  # the calls ran on the worker, and reached its master


@pytest.mark.parametrize("args, said", [
    (["--slo", "p95>200ms"], "--slo 'p95>200ms'"),
    (["--slo", "fast"], "--slo 'fast'"),
    (["--slo", "p95<200ms", "--max-errors", "lots"], "--max-errors 'lots'"),
    (["--slo", "p99<200ms", "--step-length", "2s"], "--step-length 2s: at 5/s a step judges"),
    (["--slo", "p95<200ms", "--max-time", "10s"], "--max-time 10s holds no step"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, said):
    proc, _ = run_capacity(tmp_path, scenario_text("http://127.0.0.1:9/mcp"), *args)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_unreachable_target_is_exit_3(tmp_path):
    proc, out = run_capacity(tmp_path, scenario_text(f"http://127.0.0.1:{free_port()}/mcp"), "--slo", "p95<200ms")
    assert proc.returncode == 3, proc.stderr
    assert "cannot reach" in proc.stderr and "Traceback" not in proc.stderr
    assert not (out / "capacity.json").exists()
