"""The capacity ramp's plan, SLO and judge, and its controller driven by hand (no processes, no clock)."""

import math

import pytest

from mcpbench.load.ramp import (
    PHASE_RAMP,
    PHASE_RECOVERY,
    Ramp,
    RampController,
    SloError,
    StepMeter,
    judge,
    min_calls,
    parse_share,
    parse_slo,
    plan_rates,
)


@pytest.mark.parametrize("text, metric, value", [("p95<200ms", "p95", 200.0), ("p99 <= 1s", "p99", 1000.0), ("avg<50ms", "avg", 50.0)])
def test_slo_parses_an_upper_latency_bound(text, metric, value):
    slo = parse_slo(text)
    assert (slo.metric, slo.value) == (metric, value)


@pytest.mark.parametrize("text", ["p95>200ms", "fail_ratio<0.01", "rps>10", "tools/call echo p95<1s", "p95 200", "fast"])
def test_slo_that_is_no_latency_bound_is_refused_by_name(text):
    with pytest.raises(SloError, match=f"--slo '{text}'"):
        parse_slo(text)


def test_shares_and_the_calls_a_percentile_needs():
    assert parse_share("1%") == pytest.approx(0.01)
    assert parse_share("0.05") == pytest.approx(0.05)
    for bad in ("150%", "-1%", "lots"):
        with pytest.raises(SloError, match="--max-errors"):
            parse_share(bad)
    assert min_calls([parse_slo("p95<1s")]) == 20
    assert min_calls([parse_slo("p99<1s"), parse_slo("avg<1s")]) == 100


def test_plan_fits_the_bound_with_the_recovery_step():
    assert plan_rates(5, "+5", max_time=35, step_s=5) == (5, 10, 15, 20, 25)  # 7 steps of 5 s: a retry and the recovery
    assert plan_rates(4, "x2", max_time=60, step_s=10, max_rate=20) == (4, 8, 16)
    with pytest.raises(SloError, match="--max-time"):
        plan_rates(5, "+5", max_time=25, step_s=10)
    with pytest.raises(SloError, match="--rate-step"):
        plan_rates(5, "x0.5", max_time=60, step_s=10)


def test_judge_counts_calls_short_of_the_rate_as_slower_than_any_bound():
    slo = [parse_slo("p95<100ms")]
    held = judge([10.0] * 100, {}, expected=100, slos=slo, max_errors=0.0)
    assert held.held and held.unanswered == 0
    # 60 answers of 100 asked: 30 unanswered past the slack, p95 infinite
    broken = judge([10.0] * 60, {}, expected=100, slos=slo, max_errors=0.0)
    assert broken.unanswered == 30 and math.isinf(broken.values["p95<100ms"]) and "unanswered" in broken.broken[0]
    errors = judge([10.0] * 100, {"http-5xx": 3}, expected=100, slos=slo, max_errors=0.02)
    assert errors.broken == ["errors 3.0% above 2.0%"]
    assert judge([], {}, expected=0, slos=slo, max_errors=0.0).broken == ["no call in this step"]


def _feed(meter: StepMeter, start: float, end: float, rate: float, ms: float) -> None:
    n = int((end - start) * rate)
    for i in range(n):
        meter.add(start + i / rate, ms, None)


def test_controller_ramps_until_a_step_breaks_then_holds_one_low_step():
    ramp = Ramp((10.0, 20.0, 40.0, 80.0), 5.0, ("p95<100ms",), 0.0, 5.0)
    meter = StepMeter()
    control = RampController(ramp, meter, users=2)
    assert control.tick(0.0) == 10.0 and control.timeline == []  # warming up: no call yet
    meter.add(0.5, 10.0, None, "user-1")
    assert control.tick(0.7) == 10.0 and control.timeline == []  # one of the two users calls
    meter.add(0.8, 10.0, None, "user-2")
    assert control.tick(1.0) == 10.0 and control.current["start"] == 1.0
    _feed(meter, 1.0, 6.0, 10.0, 20.0)
    assert control.tick(6.0) == 20.0 and control.timeline[0]["held"]
    _feed(meter, 6.0, 11.0, 20.0, 500.0)  # too slow
    assert control.tick(11.0) == 20.0  # held once more at its rate
    assert control.timeline[1]["held"] is False and control.current["retry"] and control.current["rung"] == 1
    _feed(meter, 11.0, 16.0, 20.0, 500.0)  # too slow again: the rate broke
    assert control.tick(16.0) == 5.0
    assert control.timeline[2]["held"] is False and control.current["phase"] == PHASE_RECOVERY
    assert control.tick(18.0) == 5.0
    assert control.tick(21.0) is None and control.done
    assert [s["phase"] for s in control.timeline] == [PHASE_RAMP, PHASE_RAMP, PHASE_RAMP, PHASE_RECOVERY]


def test_controller_goes_on_when_the_retry_of_a_step_that_broke_holds():
    ramp = Ramp((10.0, 20.0, 40.0), 5.0, ("p95<100ms",))
    meter = StepMeter()
    control = RampController(ramp, meter)
    meter.add(0.0, 1.0, None, "user-1")
    control.tick(0.0)
    _feed(meter, 0.0, 5.0, 10.0, 20.0)
    _feed(meter, 2.0, 2.5, 10.0, 400.0)  # a stall of a moment: 5 of 50 calls slow
    assert control.tick(5.0) == 10.0 and not control.timeline[0]["held"] and control.current["retry"]
    _feed(meter, 5.0, 10.0, 10.0, 20.0)
    assert control.tick(10.0) == 20.0 and control.timeline[1]["held"]
    assert [(s["rung"], s["retry"]) for s in control.timeline] == [(0, False), (0, True), (1, False)]


def test_controller_stops_after_the_last_step_when_none_broke():
    ramp = Ramp((10.0, 20.0), 2.0, ("p95<100ms",))
    meter = StepMeter()
    control = RampController(ramp, meter)
    meter.add(0.0, 1.0, None, "user-1")
    control.tick(0.0)
    _feed(meter, 0.0, 2.0, 10.0, 5.0)
    assert control.tick(2.0) == 20.0
    _feed(meter, 2.0, 4.0, 20.0, 5.0)
    assert control.tick(4.0) is None
    assert all(step["held"] for step in control.timeline) and len(control.timeline) == 2
