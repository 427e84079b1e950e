"""A capacity run's analysis from made-up steps: the knee, the break, the recovery (no processes)."""

from mcpbench.capacity.analysis import CallSample, analyse, knee, verdict_line
from mcpbench.load.ramp import Ramp

RAMP = Ramp((10.0, 20.0, 30.0, 40.0, 50.0), 4.0, ("p95<100ms",), 0.0, 5.0)


def _calls(start: float, end: float, rate: float, ms: float) -> list[CallSample]:
    return [CallSample(start + i / rate, ms, None) for i in range(int((end - start) * rate))]


def test_knee_is_the_step_furthest_below_the_line_from_first_to_last():
    rows = [{"rate": r, "p95": v} for r, v in [(10, 10.0), (20, 11.0), (30, 12.0), (40, 30.0), (50, 200.0)]]
    assert knee(rows, "p95")["rate"] == 40
    assert knee(rows[:2], "p95") is None  # too few steps
    flat = [{"rate": r, "p95": 10.0} for r in (10, 20, 30)]
    assert knee(flat, "p95") is None  # latency never rose


def test_analysis_finds_capacity_break_knee_and_recovery():
    latencies = [10.0, 11.0, 13.0, 40.0, 300.0]
    steps, calls, t = [], [], 0.0
    for index, (rate, ms) in enumerate(zip(RAMP.rates, latencies)):
        steps.append({"index": index, "phase": "ramp", "rate": rate, "start": t, "end": t + 4.0})
        calls += _calls(t, t + 4.0, rate, ms)
        t += 4.0
    steps.append({"index": 5, "phase": "recovery", "rate": 5.0, "start": t, "end": t + 4.0})
    calls += _calls(t, t + 1.6, 5.0, 300.0) + _calls(t + 1.6, t + 4.0, 5.0, 10.0)  # slow for the first 2 of 5 windows
    found = analyse({"ramp": RAMP.to_json(), "grace_s": 0.5, "steps": steps}, calls)
    assert found["broke"] and found["capacity_rate"] == 40.0 and found["break"]["rate"] == 50.0
    assert found["knee"]["rate"] == 40.0
    assert found["recovery"] == {"rate": 5.0, "recovered": True, "seconds": 1.6, "window_s": 0.8,
                                 "windows_held": [False, False, True, True, True]}
    assert verdict_line(found).startswith("capacity 40/s: 50/s broke it (p95 300.0 ms breaks p95<100ms)")


def test_a_rate_broke_when_its_retry_broke_too_and_held_when_its_retry_held():
    # 10/s held; 20/s broke once (a stall) and held on its retry; 30/s broke twice: capacity 20/s
    plan = [(10.0, 0, False, 10.0), (20.0, 1, False, 300.0), (20.0, 1, True, 11.0), (30.0, 2, False, 300.0), (30.0, 2, True, 300.0)]
    steps, calls, t = [], [], 0.0
    for index, (rate, rung, retry, ms) in enumerate(plan):
        steps.append({"index": index, "phase": "ramp", "rate": rate, "rung": rung, "retry": retry, "start": t, "end": t + 4.0})
        calls += _calls(t, t + 4.0, rate, ms)
        t += 4.0
    steps.append({"index": 5, "phase": "recovery", "rate": 5.0, "rung": 2, "retry": False, "start": t, "end": t + 4.0})
    calls += _calls(t, t + 4.0, 5.0, 10.0)
    found = analyse({"ramp": RAMP.to_json(), "grace_s": 0.5, "steps": steps}, calls)
    assert found["broke"] and found["capacity_rate"] == 20.0 and found["break"]["rate"] == 30.0
    assert found["transient"] == [{"rate": 20.0, "why": ["p95 300.0 ms breaks p95<100ms"]}]
    assert [r["retry"] for r in found["steps"]] == [False, False, True, False, True, False]


def test_an_interrupted_ramp_does_not_claim_its_bound():
    result = {"steps": [{"rate": 20.0}, {"rate": 30.0}], "broke": False, "slo": ["p95<1s"]}
    assert verdict_line(result).startswith("never broke: every step held p95<1s up to 30/s, the ramp's bound")
    assert verdict_line(result | {"interrupted": True}).startswith("interrupted: every step that ran held p95<1s, up to 30/s")
