"""`mcpbench lab run` on a reconnect scenario: cells, reconnect.csv, the charts, the loader."""

import csv
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from mcpbench.analysis.results import load_lab, load_reconnect
from tests.support.runs import RECONNECT_SCENARIO


def test_a_reconnect_run_writes_its_table_csv_and_charts(reconnect_run):
    proc, out = reconnect_run
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    with open(out / "reconnect.csv", newline="") as handle:
        rows = {row["policy"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {"none", "resume", "none@2026-07-28", "resume@2026-07-28", "sdk"}
    assert {policy: int(row["calls"]) for policy, row in rows.items()} == dict.fromkeys(rows, 3)  # `calls: 3` ends each cell
    none, resume = rows["none"], rows["resume"]
    # none: the first cut ends the session and every later call fails; resume: the cut answers come back
    assert int(none["breaks"]) == 1 and int(none["recovered_breaks"]) == 0 and int(none["ok_calls"]) == 0
    assert int(none["failed_calls"]) > 1
    assert int(resume["breaks"]) >= 1 and int(resume["recovered_breaks"]) == int(resume["breaks"])
    assert int(resume["lost"]) == 0 and int(resume["duplicated"]) == 0 and int(resume["failed_calls"]) == 0
    # 2026-07-28: no stream to resume; the cut call is reissued with a new id, and cut again (the proxy
    # cuts every stream before `slow` ends): lost, where resume read the answer from the replay
    new_none, reissue = rows["none@2026-07-28"], rows["resume@2026-07-28"]
    assert new_none["version"] == "2026-07-28" and rows["resume"]["version"] == "2025-11-25"
    assert int(new_none["breaks"]) == 1 and int(new_none["lost"]) == 1 and int(new_none["resent"]) == 0
    assert int(reissue["breaks"]) >= 1 and int(reissue["resent"]) >= int(reissue["breaks"])
    assert int(reissue["recovered_breaks"]) == 0 and int(reissue["lost"]) == int(reissue["breaks"])
    for chart in ("reconnect-timeline.png", "recovery.png"):
        assert (out / chart).stat().st_size > 10_000
    assert "resume" in proc.stdout and "results in" in proc.stdout
    data = load_reconnect(out)
    assert set(data.calls["policy"].astype(str)) >= {"none", "resume", "none@2026-07-28", "resume@2026-07-28"}
    assert set(data.breaks.loc[data.breaks["policy"] == "resume@2026-07-28", "action"]) == {"reissue"}
    assert (data.faults["kind"].astype(str) == "cut-stream").sum() >= 2
    assert data.breaks.loc[data.breaks["policy"] == "resume", "recover_ms"].notna().all()
    assert load_lab(out).reconnect["policy"].tolist() == ["none", "resume", "none@2026-07-28", "resume@2026-07-28", "sdk"]
    # the calls that failed under the cut are what a cell measures, and its load run says so (issue 28)
    cell = orjson.loads((out / "cells" / "streamable-http-cut-none" / "summary.json").read_bytes())
    assert cell["exit_code_on_error"] == 0 and cell["total"]["failures"] > 0


@pytest.mark.slow
def test_sigterm_ends_the_whole_experiment_and_keeps_what_ran(tmp_path):
    path = tmp_path / "reconnect.yaml"
    path.write_text(RECONNECT_SCENARIO)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "mcpbench", "lab", "run", str(path), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # A load process's own samples file grows while its cell runs (the merged samples.jsonl is
        # written as the cell ends, a moment before the next cell starts: too late to aim at).
        first = out / "cells" / "streamable-http-cut-none"
        deadline = time.monotonic() + 120
        while not _written(first.glob("samples.*.jsonl")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)  # polling a file the run writes, bounded: the signal must land inside a cell
        assert _written(first.glob("samples.*.jsonl")), "the first cell never wrote samples"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, stdout + stderr
    assert "stopped by SIGTERM" in stderr and "Traceback" not in stderr
    assert (out / "reconnect.csv").is_file()
    assert not (out / "cells" / "streamable-http-cut-resume").exists()  # no cell started after the signal
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(out) in _cmdline(p)]
    assert left == []


def _written(paths) -> bool:
    for path in paths:
        try:
            if path.stat().st_size:
                return True
        except FileNotFoundError:  # merged and removed as the cell ended
            pass
    return False


def _cmdline(entry) -> str:
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""
