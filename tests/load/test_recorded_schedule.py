"""Recorded traffic as load (`load --from-trace T --speed`): the recording's sessions on their schedule, scaled."""

import json

import pytest

from mcpbench.load.samples import records
from mcpbench.load.scenario import ScenarioError
from mcpbench.load.traceload import SessionQueue, parse_speed, recorded_load, span
from tests.load.helpers import run_load, spaced_trace

# Three sessions 2 s apart, each with calls 0.5 s and 1.5 s after its handshake.
SESSIONS = [(0.0, [0.5, 1.5]), (2.0, [0.5, 1.5]), (4.0, [0.5, 1.5])]
# How late a replayed call may leave on this shared, busy machine and still count as on schedule:
# a session's handshake (before its first call) and the machine's stalls fit in it.
LAG_TOLERANCE = 1.0


def test_speeds_parse_and_bad_ones_are_named():
    assert (parse_speed("2x"), parse_speed("0.5x"), parse_speed("1"), parse_speed("max")) == (2.0, 0.5, 1.0, float("inf"))
    for bad in ("0x", "fast", "-2x"):
        with pytest.raises(ScenarioError, match=f"--speed '{bad}'"):
            parse_speed(bad)


def test_recorded_sessions_keep_their_arrival_and_spacing(tmp_path):
    sessions = recorded_load(str(spaced_trace(tmp_path / "t.jsonl", SESSIONS)))
    assert [s.offset for s in sessions] == pytest.approx([0.0, 2.0, 4.0])
    assert [[c.at for c in s.calls] for s in sessions] == [pytest.approx([0.5, 1.5])] * 3
    assert sessions[1].calls[0].params == {"name": "echo", "arguments": {"text": "s1c1"}}
    assert span(sessions) == pytest.approx(5.5)
    queue = SessionQueue(sessions, 2.0, ("2025-11-25",))
    first = queue.claim("2025-11-25", 100.0)
    assert queue.due(first, 1.5) == pytest.approx(100.75)
    assert queue.due(queue.claim("2025-11-25", 100.1), 0.5) == pytest.approx(101.25)  # (2 + 0.5) / 2 after the start
    shared = SessionQueue(sessions, 1.0, ("2025-11-25", "2026-07-28"), users=2)
    assert (shared.users("2025-11-25"), shared.users("2026-07-28")) == (2, 0)  # every recorded session is of the first era


@pytest.mark.slow
def test_recorded_sessions_replayed_at_2x_leave_on_the_halved_schedule(http_server, tmp_path):
    trace = spaced_trace(tmp_path / "recorded.jsonl", SESSIONS)
    proc, out = run_load(tmp_path, None, "--target", http_server.url, "--from-trace", trace, "--speed", "2x")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    calls = [r for r in records(out / "samples.jsonl") if r.get("step") == "tools/call echo"]
    assert len(calls) == 6 and not any(r["failure"] for r in calls)
    # Each session ran as one client session, its calls in recorded order.
    by_session: dict[str, list[dict]] = {}
    for record in sorted(calls, key=lambda r: r["t"]):
        by_session.setdefault(record["session"], []).append(record)
    assert len(by_session) == 3 and all(len(rows) == 2 for rows in by_session.values())
    # Due times: the recording's, halved (the samples' `t` is each call's due time, wall clock).
    start = min(r["t"] for r in calls) - 0.5 / 2
    recorded = sorted(offset + at for offset, ats in SESSIONS for at in ats)
    due = sorted(r["t"] - start for r in calls)
    assert due == pytest.approx([x / 2 for x in recorded], abs=0.01)
    # Achieved: when each call left (due time plus its lag), against the recording halved.
    achieved = sorted(r["t"] + r["lag_ms"] / 1000 - start for r in calls)
    assert all(abs(a - x / 2) <= LAG_TOLERANCE for a, x in zip(achieved, recorded)), (achieved, recorded)
    # Each session's handshake began when the session was due: the recorded arrivals, halved.
    arrivals = sorted(r["t"] - start for r in records(out / "samples.jsonl") if r.get("step") == "initialize")
    assert all(abs(a - offset / 2) <= LAG_TOLERANCE for a, (offset, _) in zip(arrivals, SESSIONS)), arrivals
    summary = json.loads((out / "summary.json").read_text())
    lag = summary["schedule_lag"]
    assert lag["count"] == 6 and lag["max"] == pytest.approx(max(r["lag_ms"] for r in calls))
    assert "schedule lag" in proc.stdout


@pytest.mark.parametrize("args, said", [
    (["--speed", "fast"], "--speed 'fast'"),
    (["--speed", "2x", "--workers", "1"], "--speed runs the recorded sessions in one process"),
])
def test_bad_speed_is_one_line_and_exit_2(tmp_path, args, said):
    trace = spaced_trace(tmp_path / "recorded.jsonl", SESSIONS)
    proc, _ = run_load(tmp_path, None, "--target", "http://127.0.0.1:9/mcp", "--from-trace", trace, *args)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_speed_needs_a_trace(tmp_path):
    proc, _ = run_load(tmp_path, "target: http://127.0.0.1:9/mcp\nmix: [{call: tools/list}]\n", "--speed", "2x")
    assert proc.returncode == 2 and "--speed goes with --from-trace" in proc.stderr
