"""A capacity ramp: open-model steps of rising rate, each judged against an SLO, then one low step.

`mcpbench capacity` gives a scenario a `Ramp`: the rates of its steps, how long each is held, the
SLO (latency thresholds, `p95<200ms`, parsed as a load threshold is) and the share of failed calls
allowed. Inside the Locust process that runs the shape (alone, or the master) a `RampController`
holds each step for `step_s`, then judges the calls that started in it (`judge`) with what a
`StepMeter` heard: the calls still unanswered count as slower than any bound (they have waited at
least `grace`, which is at least twice the slowest bound), so a server that stops answering breaks
its step too. A step that breaks is held once more at its rate (a `retry`): a stall of a moment (a
Python server's full garbage collection, 100 to 300 ms on a busy machine, or a neighbour's burst)
lands in one window of a few seconds, and a p95 over that window's calls reads it as a break; a rate
the server cannot hold breaks the retry too. So a rate broke when both its steps broke; one that
held either time held. At the first rate that broke, or after the last, the rate drops to
`recovery_rate` for one more step (`recovery`), then the run stops (a ramp whose every step held
stops after the last). Every change of step is in
`timeline`, which roles.py writes to the run folder (`ramp.json`) for the analysis afterwards
(`mcpbench.capacity`), which judges every step again with every answer.

Pure Python: no Locust, no gevent, no clock of its own (the caller passes `now`, wall-clock seconds,
the clock of the samples' `t`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from mcpbench.load.scenario import Threshold, parse_threshold
from mcpbench.measures.stats import percentile

RAMP_FILE = "ramp.json"
# Latency metrics an SLO may bound (a capacity SLO is an upper bound on latency).
SLO_METRICS = ("avg", "max")
# The calls that started in a step but had no answer when it was judged are expected to be at most
# this share short of its rate (timers, a worker's rate arriving late); fewer count as unanswered.
EXPECTED_SLACK = 0.9
# The calls of a step judged live stop this long before its end (so that answers have time to come),
# at least this long ...
MIN_GRACE = 0.5
# ... and at least this many times the slowest latency bound.
GRACE_BOUNDS = 2.0
PHASE_RAMP, PHASE_RECOVERY = "ramp", "recovery"
# The first step begins once every user has made a call (its session stands), or after this long:
# a stdio user starts a server process of its own, which takes seconds on a busy machine.
WARMUP_LIMIT = 60.0
# The steps a plan keeps free of its rates within --max-time: the retry of a step that broke, and the recovery step.
RESERVED_STEPS = 2


class SloError(ValueError):
    """An SLO or error budget that does not parse, or cannot bound a capacity run."""


def parse_slo(text: str) -> Threshold:
    """`p95<200ms`, `p99 <= 1s`, `avg<50ms`: an upper bound on latency.

    Raises:
        SloError: not a latency bound (naming the text).
    """
    try:
        threshold = parse_threshold(text)
    except ValueError as exc:
        raise SloError(f"--slo {text!r}: {exc}") from None
    if threshold.step is not None:
        raise SloError(f"--slo {text!r}: a capacity SLO bounds every call, not one step")
    if not (threshold.metric.startswith("p") or threshold.metric in SLO_METRICS) or threshold.op not in ("<", "<="):
        raise SloError(f"--slo {text!r}: expected an upper bound on latency, like 'p95<200ms' or 'avg<50ms'")
    return threshold


def parse_share(text: str, what: str = "--max-errors") -> float:
    """`1%`, `0.5%` or `0.01` -> 0.01.

    Raises:
        SloError: not a share from 0 to 1.
    """
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise SloError(f"{what} {text!r}: expected a share like 1% or 0.01") from None
    if not 0.0 <= value <= 1.0 or not math.isfinite(value):
        raise SloError(f"{what} {text!r}: a share from 0% to 100%")
    return value


def min_calls(slos: Iterable[Threshold]) -> int:
    """The fewest calls a step needs for its SLO to mean something: a pNN needs 100/(100-NN) calls
    for one of them to lie above it (p95: 20, p99: 100)."""
    need = 1
    for slo in slos:
        if slo.metric.startswith("p"):
            q = float(slo.metric[1:])
            need = max(need, math.ceil(100.0 / (100.0 - q)) if q < 100 else 1)
    return need


@dataclass(frozen=True)
class Ramp:
    """What a capacity run does: `rates` in steps of `step_s`, judged by `slos` and `max_errors`."""

    rates: tuple[float, ...]
    step_s: float
    slos: tuple[str, ...]
    max_errors: float = 0.0
    recovery_rate: float | None = None  # None: the first step's rate

    @property
    def thresholds(self) -> tuple[Threshold, ...]:
        return tuple(parse_slo(text) for text in self.slos)

    @property
    def grace(self) -> float:
        """How long before a step's end its live judgement stops taking calls (see the module docstring)."""
        slowest = max((t.value / 1000.0 for t in self.thresholds), default=0.0)
        return min(self.step_s / 2, max(MIN_GRACE, GRACE_BOUNDS * slowest))

    @property
    def low_rate(self) -> float:
        return self.recovery_rate if self.recovery_rate is not None else self.rates[0]

    @property
    def longest(self) -> float:
        """The run's longest time: the users' start, every step, a retry and the recovery step."""
        return WARMUP_LIMIT + (len(self.rates) + RESERVED_STEPS) * self.step_s

    def to_json(self) -> dict:
        return {"rates": list(self.rates), "step_s": self.step_s, "slos": list(self.slos), "max_errors": self.max_errors,
                "recovery_rate": self.recovery_rate}

    @classmethod
    def from_json(cls, obj: dict) -> "Ramp":
        return cls(tuple(obj["rates"]), obj["step_s"], tuple(obj["slos"]), obj.get("max_errors", 0.0), obj.get("recovery_rate"))


def plan_rates(start: float, step: str, *, max_time: float, step_s: float, max_rate: float | None = None) -> tuple[float, ...]:
    """The rates of a ramp from `start`, each `+N` more or `xF` times the last, that fit `max_time`
    with the retry of a step that breaks and the recovery step (and stay at most `max_rate`).

    Raises:
        SloError: `step` is not `+N` or `xF`, or not one step fits.
    """
    text = step.strip()
    try:
        if text.startswith(("x", "*")):
            factor, add = float(text[1:]), 0.0
            if not factor > 1 or not math.isfinite(factor):
                raise ValueError
        else:
            factor, add = 1.0, float(text.lstrip("+"))
            if not add > 0 or not math.isfinite(add):
                raise ValueError
    except ValueError:
        raise SloError(f"--rate-step {step!r}: expected +N (calls/s more each step) or xF (F > 1 times the last)") from None
    fits = int(max_time // step_s) - RESERVED_STEPS
    if fits < 1:
        raise SloError(f"--max-time {max_time:g}s holds no step of {step_s:g}s besides a retry and the recovery step")
    rates: list[float] = []
    rate = start
    while len(rates) < fits and (max_rate is None or rate <= max_rate + 1e-9):
        rates.append(round(rate, 3))
        rate = rate * factor + add
    if not rates:
        raise SloError(f"--start-rate {start:g} is above --max-rate {max_rate:g}")
    return tuple(rates)


@dataclass
class Judgement:
    """One step's calls against the SLO: its figures and, when it broke, why."""

    count: int  # answered calls (failed ones included)
    failures: int
    unanswered: int  # calls its rate asked for that had no answer (or never started)
    values: dict[str, float]  # each SLO's metric (ms), over the answered calls and the unanswered as infinite
    failure_classes: dict[str, int]
    broken: list[str] = field(default_factory=list)  # each reason it broke, as a line

    @property
    def held(self) -> bool:
        return not self.broken

    @property
    def error_ratio(self) -> float:
        total = self.count + self.unanswered
        return self.failures / total if total else 0.0


def judge(latencies: list[float], failure_classes: dict[str, int], *, expected: float, slos: Iterable[Threshold],
          max_errors: float) -> Judgement:
    """Judge one step: `latencies` (ms, every answered call, failed ones too), the failures by class, and
    `expected` calls at its rate. Calls short of `EXPECTED_SLACK` of `expected` are unanswered: slower
    than any bound. A step with no call at all breaks (nothing was measured)."""
    failures = sum(failure_classes.values())
    unanswered = max(0, int(expected * EXPECTED_SLACK) - len(latencies))
    judged = latencies + [math.inf] * unanswered
    out = Judgement(len(latencies), failures, unanswered, {}, dict(failure_classes))
    if not judged:
        out.broken.append("no call in this step")
        return out
    for slo in slos:
        value = _metric(judged, slo.metric)
        out.values[slo.text] = value
        if not slo.check(value):
            out.broken.append(f"{slo.metric} {_ms(value)} breaks {slo.text}")
    if out.error_ratio > max_errors:
        out.broken.append(f"errors {out.error_ratio:.1%} above {max_errors:.1%}")
    return out


def _metric(values: list[float], metric: str) -> float:
    if metric == "max":
        return max(values)
    if metric == "avg":
        return sum(values) / len(values)
    q = float(metric[1:])
    if math.isinf(sorted(values)[min(len(values) - 1, math.ceil((len(values) - 1) * q / 100))]):
        return math.inf  # the percentile lies among the unanswered calls (interpolating would give NaN)
    return percentile(values, q)


def _ms(value: float) -> str:
    return "unanswered" if math.isinf(value) else f"{value:.1f} ms"


class StepMeter:
    """The answered calls of a run so far, by start time: what the controller judges a step with."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float, str | None]] = []  # (start, ms, failure class)
        self.sessions: set[str] = set()  # the client sessions heard from (each user's)

    def add(self, start: float | None, latency_ms: float, failure: str | None, session: str | None = None) -> None:
        if start is not None:
            self.calls.append((start, latency_ms, failure))
        if session is not None:
            self.sessions.add(session)

    def window(self, start: float, end: float) -> tuple[list[float], dict[str, int]]:
        """The latencies and failures by class of the calls that started in [start, end)."""
        latencies: list[float] = []
        classes: dict[str, int] = {}
        for t, ms, failure in self.calls:
            if start <= t < end:
                latencies.append(ms)
                if failure:
                    classes[failure] = classes.get(failure, 0) + 1
        return latencies, classes

    def forget_before(self, start: float) -> None:
        self.calls = [call for call in self.calls if call[0] >= start]


class RampController:
    """Which rate runs now: `tick(now)` returns it, or None once the recovery step is over."""

    def __init__(self, ramp: Ramp, meter: StepMeter, users: int = 1) -> None:
        self.ramp = ramp
        self.meter = meter
        self.users = users
        self.thresholds = ramp.thresholds
        self.timeline: list[dict] = []  # one entry per step begun: index, phase, rate, start, end, held, why
        self.done = False
        self._warming: float | None = None  # when the first tick came (the users starting)

    @property
    def current(self) -> dict | None:
        return self.timeline[-1] if self.timeline else None

    def tick(self, now: float) -> float | None:
        step = self.current
        if self.done:
            return None
        if step is None:
            # The first step begins once every user has its session and calls, or after WARMUP_LIMIT.
            self._warming = now if self._warming is None else self._warming
            if len(self.meter.sessions) < self.users and now - self._warming < WARMUP_LIMIT:
                return self.ramp.rates[0]
            return self._begin(0, PHASE_RAMP, self.ramp.rates[0], now)
        if now - step["start"] < self.ramp.step_s:
            return step["rate"]
        step["end"] = now
        if step["phase"] == PHASE_RECOVERY:
            self.done = True
            return None
        until = now - self.ramp.grace
        latencies, classes = self.meter.window(step["start"], until)
        verdict = judge(latencies, classes, expected=step["rate"] * (until - step["start"]), slos=self.thresholds,
                        max_errors=self.ramp.max_errors)
        step["held"], step["why"] = verdict.held, verdict.broken
        self.meter.forget_before(until)
        rung = step["rung"]
        if not verdict.held and not step.get("retry"):  # once more at this rate: a moment's stall, or a rate that breaks?
            return self._begin(step["index"] + 1, PHASE_RAMP, step["rate"], now, rung, retry=True)
        if verdict.held and rung + 1 < len(self.ramp.rates):
            return self._begin(step["index"] + 1, PHASE_RAMP, self.ramp.rates[rung + 1], now, rung + 1)
        if verdict.held:  # the last rate held: no break, nothing to recover from
            self.done = True
            return None
        return self._begin(step["index"] + 1, PHASE_RECOVERY, self.ramp.low_rate, now, rung)

    def _begin(self, index: int, phase: str, rate: float, now: float, rung: int = 0, *, retry: bool = False) -> float:
        """A step of the timeline: `index` its place in it, `rung` the place of its rate in the ramp's rates."""
        self.timeline.append({"index": index, "phase": phase, "rate": rate, "rung": rung, "retry": retry, "start": now, "end": None})
        return rate

    def to_json(self) -> dict:
        return {"ramp": self.ramp.to_json(), "grace_s": self.ramp.grace, "steps": self.timeline, "done": self.done}
