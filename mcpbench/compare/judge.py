"""Two sides judged step by step: quantiles with intervals, their differences, error ratios, verdicts.

A step is compared when both sides have it and each has at least `MIN_STEP_SAMPLES` successful
calls of it; a quantile when each side has at least `MIN_TAIL` samples beyond it (p95: 100, p99:
500). Fewer are "too few samples": no verdict is made up for them.

The intervals (`stats.py`): with three runs or more in all, Student's t over the runs' log quantiles
(the spread between runs); with one run a side, over stretches of each run's time (`units.py`),
paired when the two ran side by side (the variation within the runs only; the notes say so). The
values shown are each side's quantile over all its samples, the intervals around them from the
spread of the units' values (sectioning). A quantile is slower when the interval of its difference
lies wholly above zero and the change is at least `min_change` of the base's value (faster: the
mirror image); otherwise it is within noise. A
step's verdict comes from its p50 and p95 (`VERDICT_QUANTILES`): slower if either is, else faster if
either is, else within noise. The p99 is shown, and `--fail-on` may use it, but a tail that thin
moves too much between runs to lead the verdict.

A `--fail-on` rule on a quantile fails only over repeated runs. With one run a side the verdicts
compare these two runs, but what set the two processes apart as wholes is not in any interval (two
server processes of one build were measured up to +291 % apart on a 3 ms call for a whole run, and
no floor on the change that keeps those within noise still finds a 20 % slowdown): a rule the two
runs break is *inconclusive* (`Comparison.inconclusive`, exit 2), not a failure. The error ratios
are tested over calls either way.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson

from mcpbench.ci.cases import FAILED, PASSED, SKIPPED, Case, Suite
from mcpbench.compare.runs import CompareError, Side, bucket_values
from mcpbench.compare.stats import Proportions, quantiles, t_over_units, two_proportions
from mcpbench.compare.units import batch_count, batches, side_by_side
from mcpbench.compare.thresholds import QUANTILES, FailOnRule
from mcpbench.load.histograms import histogram

SLOWER, FASTER, NOISE, TOO_FEW = "slower", "faster", "within noise", "too few samples"
MORE_ERRORS, FEWER_ERRORS = "more errors", "fewer errors"
VERDICT_QUANTILES = ("p50", "p95")
# A step with fewer successful calls on either side is not judged: a p50 from fewer moves too much between runs.
MIN_STEP_SAMPLES = 50
# A quantile is judged when each side has at least this many samples beyond it.
MIN_TAIL = 5
DEFAULT_CONFIDENCE = 0.95
# With this many runs in all (two sides), the spread between runs can be estimated (1 degree of freedom).
MIN_RUNS_FOR_SPREAD = 3
# One run a side: a quantile is judged over at least this many stretches of each run (t with 2
# degrees of freedom paired, 4 unpaired; fewer give intervals too wide to say anything).
MIN_BATCHES = 3
BETWEEN_RUNS = "between runs: t over the runs' log quantiles"
SIDE_BY_SIDE = "one run a side, side by side: paired t over stretches of the time both ran"
WITHIN_RUNS = "one run a side: t over stretches of each run"
NO_BUILD_VERDICT = "one run a side cannot tell a build from a process"
ONE_RUN_A_SIDE = (f"{NO_BUILD_VERDICT} (how two processes ran as wholes is in no interval): "
                  "repeat the runs (--base A1 A2 A3 --new B1 B2 B3) to judge the rule")
# Changes smaller than this share of the base are within noise even when the interval excludes
# zero: two runs of one build differ by a few percent that nothing within one run shows.
DEFAULT_MIN_CHANGE = 0.03


class Estimate(NamedTuple):
    """A figure and its interval at the comparison's confidence (`low`, `high`; nan where none can be drawn)."""

    value: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class QuantileChange:
    """One quantile of a step on both sides (ms) and how it changed (new - base), with intervals."""

    name: str
    base: Estimate
    new: Estimate
    diff: Estimate  # ms
    rel: Estimate  # a share of the base's value: 0.1 is +10 %
    verdict: str


@dataclass
class StepComparison:
    type: str
    step: str
    verdict: str
    base_count: int
    base_failures: int
    new_count: int
    new_failures: int
    base_ok: int
    new_ok: int
    quantiles: list[QuantileChange] = field(default_factory=list)
    errors: Proportions | None = None
    error_verdict: str = NOISE
    failed: list[str] = field(default_factory=list)  # the --fail-on rules this step broke, as sentences
    # the quantile rules these two runs broke where one run a side cannot judge a build (see the module docstring)
    inconclusive: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)  # the rules this step could not be judged on, and why
    hdr: dict[str, str] = field(default_factory=dict)  # side -> the HDR histogram (V2, base64) of its latencies
    method: str = ""  # how the intervals were made: BETWEEN_RUNS, SIDE_BY_SIDE or WITHIN_RUNS, with what it had

    @property
    def name(self) -> str:
        return self.step

    def quantile(self, name: str) -> QuantileChange | None:
        return next((q for q in self.quantiles if q.name == name), None)


@dataclass
class Comparison:
    base: Side
    new: Side
    confidence: float
    min_change: float
    rules: list[FailOnRule]
    trim: float = 0.0
    steps: list[StepComparison] = field(default_factory=list)
    only_base: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def judged(self) -> list[StepComparison]:
        return [s for s in self.steps if s.verdict != TOO_FEW]

    @property
    def failed(self) -> bool:
        return any(s.failed for s in self.steps)

    @property
    def inconclusive(self) -> list[str]:
        """The steps with a rule one run a side broke (exit 2 when nothing failed: no verdict on the build)."""
        return [s.step for s in self.steps if s.inconclusive]

    @property
    def exit_code(self) -> int:
        """1 when a --fail-on rule is broken beyond noise; 2 when there is no verdict (`no_verdict`); else 0."""
        return 2 if not self.judged or (self.inconclusive and not self.failed) else 1 if self.failed else 0

    def check_common(self) -> None:
        """Raises: CompareError: the sides have no step in common (exit 2)."""
        if not self.steps:
            raise CompareError(f"no step in common: base has {', '.join(self.only_base) or 'none'}; "
                               f"new has {', '.join(self.only_new) or 'none'}")

    def no_verdict(self) -> str | None:
        """Why these runs give no verdict on the build (exit 2), or None."""
        if not self.judged:
            return "too few samples to judge any step in common (see above): no verdict"
        if self.exit_code == 2:
            return (f"one run a side: a --fail-on rule broken by these two runs on {', '.join(self.inconclusive)} is "
                    f"inconclusive ({NO_BUILD_VERDICT}): no verdict; repeat the runs (--base A1 A2 A3 --new B1 B2 B3)")
        return None


def compare(base: Side, new: Side, *, confidence: float = DEFAULT_CONFIDENCE, min_change: float = DEFAULT_MIN_CHANGE,
            rules: list[FailOnRule] | None = None, trim: float = 0.0) -> Comparison:
    """Judge every step the two sides have in common (see the module docstring); `trim`: the seconds
    the sides' runs were read without at each end (said in the notes)."""
    out = Comparison(base, new, confidence, min_change, list(rules or []), trim)
    if trim:
        out.notes.append(f"the first and last {trim:g} s of every run left out (--trim)")
    label = _labels(set(base.steps) | set(new.steps))
    out.only_base = sorted(label[k] for k in base.steps.keys() - new.steps.keys())
    out.only_new = sorted(label[k] for k in new.steps.keys() - base.steps.keys())
    scenarios = (sorted(set(base.scenarios) - {""}), sorted(set(new.scenarios) - {""}))
    if scenarios[0] and scenarios[1] and scenarios[0] != scenarios[1]:
        out.notes.append(f"different scenarios: {', '.join(scenarios[0])} (base) and {', '.join(scenarios[1])} (new): the steps in common compared")
    for side, name in ((base, "base"), (new, "new")):
        if len(set(side.scenarios)) > 1:
            out.notes.append(f"the {name} runs are of different scenarios: {', '.join(sorted(set(side.scenarios)))}")
    if out.only_base:
        out.notes.append(f"only in base (not compared): {', '.join(out.only_base)}")
    if out.only_new:
        out.notes.append(f"only in new (not compared): {', '.join(out.only_new)}")
    for key in sorted(base.steps.keys() & new.steps.keys()):
        out.steps.append(_step(base, new, key, label[key], out))
    if any(s.method.startswith(BETWEEN_RUNS) for s in out.steps):
        runs = len(base.folders) + len(new.folders)
        out.notes.append(f"{len(base.folders)} + {len(new.folders)} runs: each run's quantile is one observation and the intervals come "
                         f"from the spread between runs (Student's t, {runs - 2} degrees of freedom: with few runs they are wide)")
    if any(s.method.startswith(SIDE_BY_SIDE) for s in out.steps):
        out.notes.append("one run a side, side by side: compared stretch by stretch over the time both ran, so what the machine did to "
                         "both drops out; what set the two processes apart for a whole run (how they were scheduled) is not in the "
                         f"intervals: one run a side cannot measure it, and a change under {out.min_change:.0%} (--min-change) is within noise. "
                         "The verdicts compare these two runs; a --fail-on rule on a quantile they break is inconclusive (exit 2), "
                         "not a failure. Repeat the runs (--base A1 A2 A3 --new B1 B2 B3) to judge with the spread between runs")
    if any(s.method == WITHIN_RUNS for s in out.steps):
        out.notes.append("one run a side, not at the same time: the intervals cover the variation within each run (over stretches of it), "
                         "not what differed between the two runs' times (a machine busier during one); a change under "
                         f"{out.min_change:.0%} (--min-change) is within noise. The verdicts compare these two runs; a --fail-on rule "
                         "on a quantile they break is inconclusive (exit 2), not a failure. Run the two side by side, or repeat the runs "
                         "(--base A1 A2 A3 --new B1 B2 B3) to judge with the spread between runs")
    return out


def _labels(keys: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """A step's name as shown: the step, or "type step" when the runs have several request types."""
    several = len({kind for kind, _ in keys}) > 1
    return {key: f"{key[0]} {key[1]}" if several else key[1] for key in keys}


def _step(base: Side, new: Side, key: tuple[str, str], label: str, out: Comparison) -> StepComparison:
    merged = {"base": base.merged(key), "new": new.merged(key)}
    (base_count, base_failures), (new_count, new_failures) = base.count(key), new.count(key)
    ok = {side: int(counts.sum()) for side, counts in merged.items()}
    result = StepComparison(key[0], label, TOO_FEW, base_count, base_failures, new_count, new_failures, ok["base"], ok["new"])
    result.hdr = {side: histogram(counts).encode().decode("ascii") for side, counts in merged.items() if counts.any()}
    if base_count and new_count:
        result.errors = two_proportions(base_failures, base_count, new_failures, new_count, out.confidence)
        if result.errors.p_value < 1.0 - out.confidence:
            result.error_verdict = MORE_ERRORS if result.errors.diff > 0 else FEWER_ERRORS
    if min(ok.values()) >= MIN_STEP_SAMPLES:
        result.method, result.quantiles = _quantiles(base, new, key, merged, ok, out)
        verdicts = {q.verdict for q in result.quantiles if q.name in VERDICT_QUANTILES}
        result.verdict = SLOWER if SLOWER in verdicts else FASTER if FASTER in verdicts else NOISE
    _judge_rules(result, out)
    return result


def _quantiles(base: Side, new: Side, key, merged, ok, out: Comparison) -> tuple[str, list[QuantileChange]]:
    """The step's quantiles on both sides and their changes, and the method that gave the intervals
    (`stats.t_over_units`): over runs, or over stretches of time of one run a side."""
    # Only the buckets either side uses: a few thousand of the layout's tens of thousands.
    used = np.flatnonzero(merged["base"] + merged["new"])
    values = bucket_values(used)
    runs = [[run for run in s.steps[key] if run.chunks.any()] for s in (base, new)]
    if len(runs[0]) + len(runs[1]) >= MIN_RUNS_FOR_SPREAD:
        method, paired = f"{BETWEEN_RUNS} ({len(runs[0])} + {len(runs[1])} runs)", False
        units = [np.stack([run.chunks[:, used].sum(axis=0) for run in side]) for side in runs]
    elif aligned := side_by_side(runs[0][0], runs[1][0], used):
        method, paired = f"{SIDE_BY_SIDE} ({aligned[2]:.1f} s)", True
        units = [aligned[0], aligned[1]]
    else:
        method, paired = WITHIN_RUNS, False
        units = [runs[0][0].chunks[:, used], runs[1][0].chunks[:, used]]
    point = {side: quantiles(counts[used], tuple(QUANTILES.values()), values)[0] for side, counts in merged.items()}
    changes = []
    for column, (name, q) in enumerate(QUANTILES.items()):
        need = _tail_need(q)
        if method.startswith(BETWEEN_RUNS):  # a run counts when it has enough samples for this quantile
            found = [side[side.sum(axis=1) >= need] for side in units]
        else:  # stretches of each run, as many as have enough samples on average
            count = batch_count(units, need) if min(ok.values()) >= need else 0
            found = [batches(side, count) for side in units] if count >= MIN_BATCHES else [side[:0] for side in units]
            # A stretch with under half the samples it needs is left out (of both sides, paired).
            keep = [side.sum(axis=1) >= need / 2 for side in found]
            found = [side[keep[0] & keep[1]] for side in found] if paired else [side[k] for side, k in zip(found, keep)]
            found = found if min(len(side) for side in found) >= MIN_BATCHES else [side[:0] for side in found]
        each = [quantiles(side, (q,), values)[:, 0] if len(side) else np.zeros(0) for side in found]
        changes.append(_quantile_change(name, each, paired, (point["base"][column], point["new"][column]), out))
    return method, changes


def _quantile_change(name: str, each: list[np.ndarray], paired: bool, point: tuple[float, float], out: Comparison) -> QuantileChange:
    """A quantile's change: `point` (each side's quantile over all its samples, ms) with t intervals from
    its units' values (`each`); no interval and too few samples when the units cannot give a spread."""
    b, n = point
    usable = b > 0 and n > 0 and all(len(v) and (v > 0).all() for v in each)
    estimate = t_over_units(each[0], each[1], out.confidence, paired=paired, centre=point) if usable else None
    if estimate is None:
        nan = math.nan
        return QuantileChange(name, Estimate(b, nan, nan), Estimate(n, nan, nan), Estimate(n - b, nan, nan),
                              Estimate(n / b - 1.0 if b > 0 else nan, nan, nan), TOO_FEW)
    side_b, side_n = (Estimate(*(math.exp(v) for v in e)) for e in (estimate.base, estimate.new))
    rel = Estimate(*(math.expm1(v) for v in estimate.diff))
    # new - base = base * (new / base - 1): the difference's interval is the ratio's, in the base's ms.
    diff = Estimate(side_b.value * rel.value, side_b.value * rel.low, side_b.value * rel.high)
    return QuantileChange(name, side_b, side_n, diff, rel, _verdict(rel, out.min_change))


def _tail_need(q: float) -> int:
    """The samples a side needs for quantile `q` to have `MIN_TAIL` beyond it."""
    return math.ceil(MIN_TAIL / (1.0 - q))


def _verdict(rel: Estimate, min_change: float) -> str:
    """Slower when the change's interval lies above zero and the change is at least `min_change`; faster mirrored."""
    if rel.low > 0 and rel.value >= min_change:
        return SLOWER
    if rel.high < 0 and rel.value <= -min_change:
        return FASTER
    return NOISE


def _judge_rules(step: StepComparison, out: Comparison) -> None:
    """Fill `failed` and `unjudged` from the rules (see thresholds.py)."""
    percent = round(out.confidence * 100, 2)
    if step.verdict == TOO_FEW:
        return  # the step is named as too few samples once; its rules are not judged
    for rule in out.rules:
        if rule.metric == "errors":
            if step.errors is None:
                step.unjudged.append(f"{rule.text}: no calls")
                continue
            e = step.errors
            if e.diff * 100 > rule.value and e.p_value < 1.0 - out.confidence:
                step.failed.append(f"errors {e.base:.2%} -> {e.new:.2%} ({e.diff * 100:+.2f} pp, p={e.p_value:.2g}): past {rule.text} and not noise at {percent:g} %")
            continue
        q = step.quantile(rule.metric)
        if q is None or q.verdict == TOO_FEW:
            step.unjudged.append(f"{rule.text}: too few samples ({step.base_ok} base, {step.new_ok} new successful calls)")
            continue
        if rule.unit == "%":
            change, bound, shown = q.rel.value * 100, q.rel.low * 100, f"{q.rel.value:+.1%} (interval {q.rel.low:+.1%} to {q.rel.high:+.1%})"
        else:
            change, bound, shown = q.diff.value, q.diff.low, f"{q.diff.value:+.2f} ms (interval {q.diff.low:+.2f} to {q.diff.high:+.2f})"
        if change > rule.value and q.diff.low > 0:
            sentence = f"{q.name} {q.base.value:.2f} -> {q.new.value:.2f} ms, {shown}: past {rule.text} and not noise at {percent:g} %"
            if step.method.startswith(BETWEEN_RUNS):
                step.failed.append(sentence)
            else:
                step.inconclusive.append(f"{sentence} within these two runs; {ONE_RUN_A_SIDE}")


# ---------------------------------------------------------------------------------------------- outputs


def _estimate(e: Estimate, digits: int = 3) -> dict[str, float | None]:
    return {k: (None if math.isnan(v) else round(float(v), digits)) for k, v in (("value", e.value), ("low", e.low), ("high", e.high))}


def to_json(comparison: Comparison, exit_code: int) -> dict[str, Any]:
    """The comparison as the JSON `compare.json` holds (docs/compare.md describes it)."""
    steps = []
    for s in comparison.steps:
        row: dict[str, Any] = {
            "type": s.type, "step": s.step, "verdict": s.verdict,
            "base": {"count": s.base_count, "failures": s.base_failures, "ok": s.base_ok},
            "new": {"count": s.new_count, "failures": s.new_failures, "ok": s.new_ok},
            "quantiles": {q.name: {"base": _estimate(q.base), "new": _estimate(q.new), "diff_ms": _estimate(q.diff),
                                   "rel": _estimate(q.rel, 4), "verdict": q.verdict} for q in s.quantiles},
            "errors": None if s.errors is None else {
                "base": round(s.errors.base, 6), "new": round(s.errors.new, 6), "diff": round(s.errors.diff, 6),
                "low": round(s.errors.low, 6), "high": round(s.errors.high, 6), "p_value": float(f"{s.errors.p_value:.4g}"),
                "verdict": s.error_verdict,
            },
            "method": s.method, "failed": s.failed, "inconclusive": s.inconclusive, "unjudged": s.unjudged, "hdr": s.hdr,
        }
        steps.append(row)
    return {
        "kind": "compare",
        "confidence": comparison.confidence,
        "min_change": comparison.min_change,
        "trim_s": comparison.trim,
        "method": "quantiles: Student's t over the logs of units' quantiles; units: runs (3 or more in all; pooled variance), "
                  "else stretches of time of each run (paired when the runs ran side by side); "
                  "errors: two-proportion z-test, Newcombe interval",
        "base": {"folders": [str(f) for f in comparison.base.folders], "scenarios": comparison.base.scenarios},
        "new": {"folders": [str(f) for f in comparison.new.folders], "scenarios": comparison.new.scenarios},
        "fail_on": [r.text for r in comparison.rules],
        "steps": steps,
        "only_base": comparison.only_base,
        "only_new": comparison.only_new,
        "notes": comparison.notes,
        "exit_code": exit_code,
    }


def read_json(path: Path) -> dict[str, Any] | None:
    """A compare.json as written (`to_json`), or None when the file is not one."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("kind") == "compare" and isinstance(data.get("steps"), list) else None


def table_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A compare.json's steps as table rows: verdict, each side's p50 and p95, the p95's change, errors."""
    rows = []
    for step in data["steps"]:
        q = step["quantiles"]
        row: dict[str, Any] = {"step": step["step"], "verdict": step["verdict"], "base n": step["base"]["count"], "new n": step["new"]["count"]}
        for name in ("p50", "p95"):
            if name in q:
                row[f"base {name} ms"], row[f"new {name} ms"] = q[name]["base"]["value"], q[name]["new"]["value"]
        if "p95" in q and q["p95"]["rel"]["value"] is not None and q["p95"]["verdict"] != TOO_FEW:
            rel = q["p95"]["rel"]
            row["p95 change"] = f"{rel['value']:+.1%} [{rel['low']:+.1%}, {rel['high']:+.1%}]"
        if step["errors"]:
            e = step["errors"]
            row["errors"] = f"{e['base']:.2%} -> {e['new']:.2%}" + ("" if e["verdict"] == NOISE else f" ({e['verdict']})")
        row["failed"] = "; ".join(step["failed"] + [f"inconclusive: {i}" for i in step.get("inconclusive", [])])
        rows.append(row)
    return rows


def _ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def _change(q: QuantileChange | None) -> str:
    if q is None or q.verdict == TOO_FEW:
        return "too few"
    if math.isnan(q.rel.value):
        return f"{q.diff.value:+.2f} ms"
    return f"{q.rel.value:+.1%} [{q.rel.low:+.1%}, {q.rel.high:+.1%}]"


def _errors(s: StepComparison) -> str:
    if s.errors is None:
        return ""
    text = f"{s.errors.base:.2%} -> {s.errors.new:.2%}"
    return text + (f" ({s.error_verdict}, p={s.errors.p_value:.2g})" if s.error_verdict != NOISE else "")


def render(comparison: Comparison) -> str:
    """The comparison as a text table: per step the verdict, p50/p95/p99 of each side and the change."""
    width = max([24] + [len(s.step) for s in comparison.steps])
    percent = f"{comparison.confidence:.0%}"
    lines = [f"{'step':<{width}} {'verdict':<15} {'base p50/p95/p99 ms':>22} {'new p50/p95/p99 ms':>22}  "
             f"p50 change [{percent}]{'':<8} p95 change [{percent}]{'':<8} errors"]
    for s in comparison.steps:
        sides = []
        for side in ("base", "new"):
            values = [getattr(q, side).value for q in s.quantiles] if s.quantiles else []
            sides.append("/".join(_ms(v) for v in values) if values else f"n={getattr(s, side + '_ok')}")
        lines.append(f"{s.step:<{width}} {s.verdict:<15} {sides[0]:>22} {sides[1]:>22}  "
                     f"{_change(s.quantile('p50')):<27} {_change(s.quantile('p95')):<27} {_errors(s)}")
    few = [f"{s.step} {s.base_ok}/{s.new_ok}" for s in comparison.steps if s.verdict == TOO_FEW]
    if few:
        lines.append(f"too few samples to judge (successful calls base/new, {MIN_STEP_SAMPLES} needed on each side): {', '.join(few)}")
    for s in comparison.steps:
        for sentence in s.failed:
            lines.append(f"FAIL  {s.step}: {sentence}")
        for sentence in s.inconclusive:
            lines.append(f"INCONCLUSIVE  {s.step}: {sentence}")
        for sentence in s.unjudged:
            lines.append(f"not judged  {s.step}: {sentence}")
    lines += [f"note: {note}" for note in comparison.notes]
    return "\n".join(lines)


def suites(comparison: Comparison) -> tuple[list[Suite], list[Suite]]:
    """(JUnit, Markdown) suites: one suite with a case per step; and one suite per step, a table row each."""
    cases, rows = [], []
    for s in comparison.steps:
        status = FAILED if s.failed else SKIPPED if s.verdict == TOO_FEW or s.inconclusive else PASSED
        headline = "; ".join(s.failed) if s.failed else f"{s.verdict}; p95 {_change(s.quantile('p95'))}"
        headline = f"inconclusive ({NO_BUILD_VERDICT}): {headline}" if s.inconclusive and not s.failed else headline
        output = "\n".join(f"{q.name}: base {_ms(q.base.value)} ms, new {_ms(q.new.value)} ms, {_change(q)} ({q.verdict})" for q in s.quantiles)
        output += f"\nerrors: {_errors(s)}" if s.errors is not None else ""
        case = Case(s.step, "compare", status, headline.split("; ")[0] if s.failed else headline,
                    "\n".join(s.failed + s.inconclusive + s.unjudged), output=output.strip())
        cases.append(case)
        p95 = s.quantile("p95")
        stats = {
            "verdict": s.verdict,
            "base p50 / p95 ms": f"{_ms(s.quantile('p50').base.value)} / {_ms(p95.base.value)}" if p95 else f"n={s.base_ok}",
            "new p50 / p95 ms": f"{_ms(s.quantile('p50').new.value)} / {_ms(p95.new.value)}" if p95 else f"n={s.new_ok}",
            f"p95 change [{comparison.confidence:.0%}]": _change(p95),
            "errors": _errors(s) or "-",
        }
        rows.append(Suite(s.step, [Case(s.step, "compare", status, case.message, case.detail)], stats=stats,
                          notes=list(s.unjudged)))
    junit = Suite("compare", cases, notes=list(comparison.notes))
    if rows:
        rows[-1].notes += comparison.notes
    return [junit], rows
