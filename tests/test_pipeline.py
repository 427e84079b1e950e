"""The main job end to end, as `./dev run` runs it."""

import signal
import subprocess
import sys
from pathlib import Path

import orjson

from mcpbench.analysis.report import collect, findings
import pytest

from mcpbench.analysis import load_trace


def test_main_job_records_replays_loads_and_reports(main_job):
    proc, folder = main_job  # the session's one run (tests/conftest.py)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = orjson.loads((folder / "summary.json").read_bytes())
    assert list(summary) == ["record", "replay", "load", "sticky", "reconnect", "report", "elapsed_s"]
    assert "with no change" in summary["replay"] and "1 changed" in summary["replay"]
    assert summary["load"].count(" 0 failed") == 3
    for name in ("streamable-http", "sse", "stdio"):  # failures are measured there, judged by thresholds only
        assert orjson.loads((folder / f"load-{name}" / "summary.json").read_bytes())["exit_code_on_error"] == 0
    # Measured, not assumed: on 3 instances round-robin breaks exactly the modes that keep sessions.
    broken = summary["sticky"].split("sessions broken in: ", 1)[1].split(" (other failures: ")[0]
    assert broken == "legacy-sse round-robin, stateful-sse round-robin", summary["sticky"]
    # Stream cuts: `none` recovers from nothing, `resume` loses and duplicates no answer.
    policies = dict(part.split(" ", 1) for part in summary["reconnect"].split("; "))
    assert policies["none"].startswith("0/") and policies["resume"].endswith(" 0 lost, 0 duplicated")
    assert set(policies) == {"none", "reinitialize", "resume", "sdk"}
    frames = load_trace(sorted(folder.glob("*.jsonl")))
    assert frames.violations.empty
    eras = frames.calls.groupby("trace", observed=True)["era"].agg(lambda s: set(s.astype(str)))
    assert eras["stdio-legacy.jsonl"] == eras["http-legacy.jsonl"] == eras["sse-legacy.jsonl"] == {"handshake"}
    assert eras["stdio-auto.jsonl"] == eras["http-auto.jsonl"] == {"stateless"}
    for transport in ("stdio", "streamable-http", "sse"):
        report = orjson.loads((folder / f"replay-{transport}.json").read_bytes())
        assert report["exit_code"] == 0 and report["counts"]["identical"] == 10
    modified = orjson.loads((folder / "replay-modified.json").read_bytes())
    changed = [c for s in modified["sessions"] for c in s["calls"] if c["status"] == "changed"]
    assert [c["name"] for c in changed] == ["echo"]
    # The report lists what the job set out to show failing apart from what failed: the modified server's
    # replay, the round-robin cells of stateful modes, the control that recovers nothing.
    found = findings(collect([folder]))
    purpose = [f.text for f in found if f.severity == "shown"]
    assert any(t.startswith("replay replay-modified.json: 1 changed, as it must") for t in purpose), purpose
    assert sum(t.startswith("sticky cell") and "round-robin" in t for t in purpose) == 2, purpose
    assert not [f.text for f in found if f.severity == "bad" and ("modified" in f.text or "round-robin" in f.text or "policy none" in f.text)]
    lines = proc.stdout.rstrip().splitlines()
    assert lines[-4] == f"report: {folder / 'report.html'}" and (folder / "report.html").stat().st_size > 10_000
    assert [line.split(":")[0].strip() for line in lines[-3:]] == ["traces", "load", "replay"]
    assert all(line.startswith("[") for line in lines[:-5])  # every progress line carries elapsed time and stage
    assert "4/7 load]" in proc.stdout and "5/7 sticky]" in proc.stdout and "6/7 reconnect]" in proc.stdout and "7/7 report]" in proc.stdout


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(cmdline)
    return found


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.slow
def test_a_signal_stops_the_main_job_cleanly(tmp_path, signum, status):
    proc = subprocess.Popen([sys.executable, "-m", "mcpbench", "run", "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in proc.stdout:  # ends when the job does: bounded by the job's own stages
            seen.append(line)
            if "2/7 record] SDK client (auto) -> mcpbench record" in line:
                break
        assert seen and "record]" in seen[-1], "".join(seen)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == status, err
    assert err.strip().splitlines()[-1] == f"mcpbench: stopped by {signal.Signals(signum).name}; what was done so far is in {tmp_path}"
    assert "Traceback" not in err
    assert _processes_mentioning(str(tmp_path)) == []  # the record proxy and the tee are gone
    assert (tmp_path / "stdio-legacy.jsonl").stat().st_size > 0  # what was recorded is kept


# Stands in for `mcpbench record`: listens where it is told and ignores SIGINT, as a stuck proxy would.
DEAF_PROXY = """\
import signal, socket, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
host, port = sys.argv[sys.argv.index("--listen") + 1].rsplit(":", 1)
listener = socket.create_server((host, int(port)))
signal.pause()  # until SIGTERM (the default action ends it)
"""


def test_a_record_proxy_that_does_not_stop_is_one_line_and_exit_3(tmp_path, monkeypatch):
    from mcpbench.cli import pipeline
    from mcpbench.system.processes import start as start_process
    from mcpbench.protocol.errors import EXIT_ENVIRONMENT, EnvironmentProblem

    started = []

    def start(argv, **kwargs):
        started.append(start_process([sys.executable, "-c", DEAF_PROXY, *argv[argv.index("--listen"):]], **kwargs))
        return started[-1]

    monkeypatch.setattr(pipeline, "start", start)
    monkeypatch.setattr(pipeline, "PROXY_STOP_TIMEOUT", 0.5)
    trace = tmp_path / "t.jsonl"
    with pytest.raises(EnvironmentProblem) as raised:
        with pipeline.recording_proxy("http://127.0.0.1:9/mcp", trace):
            pass
    assert raised.value.exit_code == EXIT_ENVIRONMENT
    assert str(raised.value) == f"mcpbench record did not stop within 0.5 s of SIGINT; {trace} may be incomplete (see {trace.with_suffix('.record.log')})"
    assert started[0].poll() is not None  # stopped all the same
