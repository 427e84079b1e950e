"""A capacity run's steps judged from its samples: the highest rate held, the knee, the break, the recovery.

Every step of the timeline (`ramp.json`, written while the run went) is judged again here with every
answer the run got, by the same rule as live (`mcpbench.load.ramp.judge`, over the calls that started
before the step's last `grace` seconds; a call short of its rate counts as slower than any bound).

- **a rate held or broke**: a step that broke was held once more at its rate (`ramp.py`, a retry);
  the rate broke when every step at it broke, and held when one did (a step that broke and whose
  retry held is `transient`: a moment's stall, named in the result).
- **capacity**: the last rate that held before the first that broke (a ramp that never
  broke: its last rate, a lower bound, `broke` false).
- **knee**, where latency began to bend: over the ramp's steps up to the break, each step's first SLO
  metric (p95 for `p95<200ms`, over its answered calls) against its rate, both scaled to [0, 1]; the
  knee is the step furthest below the straight line from the first step to the last (the Kneedle
  rule, Satopää et al. 2011, for a rising convex curve). Fewer than 3 steps, or a curve that never
  rises faster than the rate, have none.
- **failures past the knee**: the failure classes of the steps above the knee's rate, and the
  calls of each that went unanswered.
- **recovery**: the low step after the break cut in windows of `RECOVERY_WINDOWS`ths of a step;
  the server recovered at the start of the first window from which on every window holds the SLO;
  the time from the drop of the rate to then. A last window that breaks: not recovered.

Pure functions over plain data; reading the files is `read_run`'s only I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcpbench.load.ramp import PHASE_RECOVERY, RAMP_FILE, Ramp, judge
from mcpbench.load.samples import records
from mcpbench.protocol.errors import McpbenchError
from mcpbench.measures.stats import percentile

# The recovery step is judged in this many windows.
RECOVERY_WINDOWS = 5
# Percentiles shown per step (ms).
SHOWN = (50, 90, 95, 99)
KNEE_RULE = ("Kneedle: the step furthest below the line from the first step's (rate, SLO metric) to the "
             "last's, both scaled to [0, 1]")


class CapacityError(McpbenchError):
    """A run folder without what a capacity analysis needs."""


@dataclass(frozen=True)
class CallSample:
    start: float  # wall-clock intended start (the sample's `t`)
    ms: float
    failure: str | None


def read_run(folder: Path) -> tuple[dict, list[CallSample]]:
    """The ramp's timeline and the run's calls (sorted by start).

    Raises:
        CapacityError: the folder has no timeline (the ramp never started).
    """
    try:
        timeline = orjson.loads((folder / RAMP_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise CapacityError(f"{folder / RAMP_FILE}: no ramp timeline ({getattr(exc, 'strerror', None) or exc})") from None
    calls = [CallSample(r["t"], r["latency_ms"], r.get("failure")) for r in records(folder / "samples.jsonl", missing_ok=True)
             if "uncorrected_ms" in r and r.get("t") is not None]  # the schedule's calls, not the handshakes
    calls.sort(key=lambda c: c.start)
    return timeline, calls


def _between(calls: list[CallSample], start: float, end: float) -> list[CallSample]:
    return [c for c in calls if start <= c.start < end]


def _judge(calls: list[CallSample], ramp: Ramp, rate: float, start: float, end: float):
    latencies = [c.ms for c in calls]
    classes: dict[str, int] = {}
    for c in calls:
        if c.failure:
            classes[c.failure] = classes.get(c.failure, 0) + 1
    return judge(latencies, classes, expected=rate * max(0.0, end - start), slos=ramp.thresholds, max_errors=ramp.max_errors)


def step_rows(timeline: dict, calls: list[CallSample]) -> list[dict]:
    """One row per step: rate, achieved rate, percentiles, errors, failure classes, unanswered, held and why."""
    ramp = Ramp.from_json(timeline["ramp"])
    grace = timeline.get("grace_s", ramp.grace)
    rows = []
    for step in timeline["steps"]:
        end = step["end"] if step.get("end") is not None else (calls[-1].start if calls else step["start"])
        until = end - grace if step["phase"] != PHASE_RECOVERY else end
        inside = _between(calls, step["start"], end)
        verdict = _judge(_between(inside, step["start"], until), ramp, step["rate"], step["start"], until)
        latencies = [c.ms for c in inside]
        row = {
            "index": step["index"], "phase": step["phase"], "rate": step["rate"], "start": step["start"], "end": end,
            # a timeline from before retries: every ramp step its own rung
            "rung": step.get("rung", step["index"]), "retry": step.get("retry", False),
            "count": len(inside), "achieved_rate": len(inside) / (end - step["start"]) if end > step["start"] else 0.0,
            **{f"p{q}": percentile(latencies, q) if latencies else None for q in SHOWN},
            "errors": sum(1 for c in inside if c.failure),
            "error_ratio": verdict.error_ratio, "failure_classes": verdict.failure_classes,
            "unanswered": verdict.unanswered,
            "slo_values": {k: (None if math.isinf(v) else v) for k, v in verdict.values.items()},
        }
        if step["phase"] != PHASE_RECOVERY:
            row["held"], row["why"] = verdict.held, verdict.broken
        rows.append(row)
    return rows


def knee(rows: list[dict], metric: str) -> dict | None:
    """The step where latency began to bend (see the module docstring), or None."""
    points = [(r["rate"], r[metric]) for r in rows if r.get(metric) is not None]
    if len(points) < 3:
        return None
    (x0, y0), (x1, y1) = points[0], points[-1]
    if x1 <= x0 or y1 <= y0:
        return None  # latency did not rise over the ramp
    best, where = 0.0, None
    for x, y in points[1:-1]:
        below = (x - x0) / (x1 - x0) - (y - y0) / (y1 - y0)
        if below > best:
            best, where = below, (x, y)
    if where is None:
        return None
    return {"rate": where[0], metric: where[1], "distance": round(best, 4)}


def recovery(row: dict, calls: list[CallSample], ramp: Ramp) -> dict:
    """When the server held its SLO again in the low step after the break (see the module docstring)."""
    start, end = row["start"], row["end"]
    width = (end - start) / RECOVERY_WINDOWS
    held = []
    for i in range(RECOVERY_WINDOWS):
        a, b = start + i * width, start + (i + 1) * width
        held.append(_judge(_between(calls, a, b), ramp, row["rate"], a, b).held)
    if not held or not held[-1]:
        return {"rate": row["rate"], "recovered": False, "seconds": None, "within_s": round(end - start, 3), "windows_held": held}
    first = len(held)
    while first > 0 and held[first - 1]:
        first -= 1
    return {"rate": row["rate"], "recovered": True, "seconds": round(first * width, 3), "window_s": round(width, 3), "windows_held": held}


def analyse(timeline: dict, calls: list[CallSample]) -> dict[str, Any]:
    """The capacity result (what `capacity.json` holds, without the run's own facts)."""
    ramp = Ramp.from_json(timeline["ramp"])
    rows = step_rows(timeline, calls)
    steps = [r for r in rows if r["phase"] != PHASE_RECOVERY]
    # A rate held when one of its steps (a step and its retry) held; it broke when all did.
    rung_held = {r["rung"]: False for r in steps}
    for r in steps:
        rung_held[r["rung"]] |= r["held"]
    broken = next((r for r in steps if not rung_held[r["rung"]] and r is _last_of_rung(steps, r["rung"])), None)
    held = [r for r in steps if r["held"] and (broken is None or r["index"] < broken["index"])]
    transient = [{"rate": r["rate"], "why": r["why"]} for r in steps if not r["held"] and rung_held[r["rung"]]]
    metric = ramp.thresholds[0].metric if ramp.thresholds[0].metric.startswith("p") else "p95"
    # The curve of the knee: one point a rate, the step that decided it (its retry when there was one).
    curve = [r for r in steps if (broken is None or r["index"] <= broken["index"]) and r is _last_of_rung(steps, r["rung"])]
    found = knee(curve, metric if metric in {f"p{q}" for q in SHOWN} else "p95")
    past = [r for r in curve if found is not None and r["rate"] > found["rate"]]
    classes: dict[str, int] = {}
    for r in past:
        for name, count in r["failure_classes"].items():
            classes[name] = classes.get(name, 0) + count
    low = next((r for r in rows if r["phase"] == PHASE_RECOVERY), None)
    return {
        "slo": list(ramp.slos), "max_errors": ramp.max_errors, "step_s": ramp.step_s, "planned_rates": list(ramp.rates),
        "grace_s": timeline.get("grace_s", ramp.grace),
        "broke": broken is not None,
        "capacity_rate": held[-1]["rate"] if held else None,
        "break": None if broken is None else {"rate": broken["rate"], "why": broken["why"], "failure_classes": broken["failure_classes"],
                                               "unanswered": broken["unanswered"]},
        "transient": transient,
        "knee": found, "knee_rule": KNEE_RULE,
        "past_knee": None if found is None else {"failure_classes": classes,
                                                 "unanswered": {str(r["rate"]): r["unanswered"] for r in past}},
        "recovery": None if low is None else recovery(low, calls, ramp),
        "steps": rows,
    }


def _last_of_rung(steps: list[dict], rung: int) -> dict:
    """The last step at a rate of the ramp: its retry when it had one."""
    return [r for r in steps if r["rung"] == rung][-1]


def verdict_line(result: dict) -> str:
    """What the run found, in one line."""
    if not result["steps"]:
        return "no step ran"
    if not result["broke"]:
        top = max(r["rate"] for r in result["steps"])
        if result.get("interrupted"):
            return f"interrupted: every step that ran held {', '.join(result['slo'])}, up to {top:g}/s (the last one cut short)"
        return (f"never broke: every step held {', '.join(result['slo'])} up to {top:g}/s, the ramp's bound; the capacity is "
                "at least that (raise --max-time, --rate-step or --max-rate to find the break)")
    brk = result["break"]
    if result["capacity_rate"] is None:
        return f"the first step ({brk['rate']:g}/s) already broke the SLO: {'; '.join(brk['why'])}"
    return f"capacity {result['capacity_rate']:g}/s: {brk['rate']:g}/s broke it ({'; '.join(brk['why'])})"
