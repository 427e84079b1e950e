"""`mcpbench lab run` on a reconnect scenario: cells, reconnect.csv, the charts, the loader."""

import csv

from mcpbench.analysis.results import load_lab, load_reconnect

def test_a_reconnect_run_writes_its_table_csv_and_charts(reconnect_run):
    proc, out = reconnect_run
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    with open(out / "reconnect.csv", newline="") as handle:
        rows = {row["policy"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {"none", "resume", "sdk"}
    none, resume = rows["none"], rows["resume"]
    # none: the first cut ends the session and every later call fails; resume: the cut answers come back
    assert int(none["breaks"]) == 1 and int(none["recovered_breaks"]) == 0 and int(none["ok_calls"]) == 0
    assert int(none["failed_calls"]) > 1
    assert int(resume["breaks"]) >= 1 and int(resume["recovered_breaks"]) == int(resume["breaks"])
    assert int(resume["lost"]) == 0 and int(resume["duplicated"]) == 0 and int(resume["failed_calls"]) == 0
    for chart in ("reconnect-timeline.png", "recovery.png"):
        assert (out / chart).stat().st_size > 10_000
    assert "resume" in proc.stdout and "results in" in proc.stdout
    data = load_reconnect(out)
    assert set(data.calls["policy"].astype(str)) >= {"none", "resume"}
    assert (data.faults["kind"].astype(str) == "cut-stream").sum() >= 2
    assert data.breaks.loc[data.breaks["policy"] == "resume", "recover_ms"].notna().all()
    assert load_lab(out).reconnect["policy"].tolist() == ["none", "resume", "sdk"]
