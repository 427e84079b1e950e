"""The main job end to end, as `./dev run` runs it."""

import subprocess
import sys

import orjson

from mcpbench.trace import read_trace


def test_main_job_records_replays_loads_and_reports(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mcpbench", "run", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert list(summary) == ["record", "replay", "load"]
    assert "with no change" in summary["replay"] and "0 failed" in summary["load"]
    for mode in ("legacy", "auto"):
        events = list(read_trace(tmp_path / f"stdio-{mode}.jsonl"))
        assert [e for e in events if e["kind"] == "violation"] == []
        assert sum(e["kind"] == "message" for e in events) >= 20
    for transport in ("stdio", "streamable-http", "sse"):
        report = orjson.loads((tmp_path / f"replay-{transport}.json").read_bytes())
        assert report["exit_code"] == 0 and report["counts"]["identical"] == 10
    assert proc.stdout.count("notifications/progress") >= 2  # the recorded timelines were printed
    assert "== report" in proc.stdout
