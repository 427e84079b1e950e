"""The main job end to end, as `./dev run` runs it."""

import subprocess
import sys

import orjson

from mcpbench.analysis import load_trace


def test_main_job_records_replays_loads_and_reports(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mcpbench", "run", "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert list(summary) == ["record", "replay", "load", "report", "elapsed_s"]
    assert "with no change" in summary["replay"] and "1 changed" in summary["replay"]
    assert summary["load"].count(" 0 failed") == 3
    frames = load_trace(sorted(tmp_path.glob("*.jsonl")))
    assert frames.violations.empty
    eras = frames.calls.groupby("trace", observed=True)["era"].agg(lambda s: set(s.astype(str)))
    assert eras["stdio-legacy.jsonl"] == eras["http-legacy.jsonl"] == eras["sse-legacy.jsonl"] == {"handshake"}
    assert eras["stdio-auto.jsonl"] == eras["http-auto.jsonl"] == {"stateless"}
    for transport in ("stdio", "streamable-http", "sse"):
        report = orjson.loads((tmp_path / f"replay-{transport}.json").read_bytes())
        assert report["exit_code"] == 0 and report["counts"]["identical"] == 10
    modified = orjson.loads((tmp_path / "replay-modified.json").read_bytes())
    changed = [c for s in modified["sessions"] for c in s["calls"] if c["status"] == "changed"]
    assert [c["name"] for c in changed] == ["echo"]
    lines = proc.stdout.rstrip().splitlines()
    assert lines[-4] == f"report: {tmp_path / 'report.html'}" and (tmp_path / "report.html").stat().st_size > 10_000
    assert [line.split(":")[0].strip() for line in lines[-3:]] == ["traces", "load", "replay"]
    assert all(line.startswith("[") for line in lines[:-5])  # every progress line carries elapsed time and stage
    assert "4/5 load]" in proc.stdout and "5/5 report]" in proc.stdout
