"""A capacity run: the ramp run as a load run, judged from its samples, written beside them and rendered.

`find_capacity` runs the scenario (already given the ramp, `load.ramp.Ramp`), analyses its steps
(`analysis.py`), writes capacity.json and capacity.png into the run's folder, and returns a
`CapacityResult` whose `exit_code` is the run's verdict.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcpbench.capacity.analysis import analyse, read_run, verdict_line
from mcpbench.capacity.chart import write_chart
from mcpbench.load.ramp import Ramp
from mcpbench.load.runner import Fleet, run_scenario
from mcpbench.load.scenario import Scenario
from mcpbench.files.outputs import write_atomic
from mcpbench.protocol.errors import EXIT_OK
from mcpbench.system.target import parse_target
from mcpbench.trace.redact import Redactor

# Exit statuses beyond the usual ones: the first step broke (no rate of the ramp held).
EXIT_NONE_HELD = 1


@dataclass(frozen=True, slots=True)
class CapacityResult:
    """What a capacity run found (capacity.json's body) and the folder it is in."""

    found: dict[str, Any]
    out_dir: Path

    @property
    def exit_code(self) -> int:
        """1 when the first step already broke (no rate held), else 0 (also when no step broke)."""
        return self.found["exit_status"]


def find_capacity(run: Scenario, ramp: Ramp, folder: Path, *, fleet: Fleet | None,
                  echo: Callable[[str], None]) -> CapacityResult:
    """Run `run` (a scenario given `ramp`) into `folder`, judge its steps, write capacity.json and its chart."""
    load_before = os.getloadavg()
    echo(f"mcpbench: ramp {', '.join(f'{r:g}' for r in ramp.rates)} calls/s, {ramp.step_s:g} s each, judged by "
         f"{', '.join(ramp.slos)}, errors <= {ramp.max_errors:.1%} (load average {load_before[0]:.2f})")
    result = run_scenario(run, folder, fleet=fleet, echo=echo)
    timeline, calls = read_run(result.out_dir)
    found = analyse(timeline, calls)
    found.update(scenario=str(run.source), target=Redactor().text(run.target),
                 transport=parse_target(run.target).transport, users=run.users, workers=fleet.expect if fleet else 0,
                 machine_load={"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()],
                               "cores": os.cpu_count()},
                 interrupted=bool(result.summary.get("interrupted")))
    found["exit_status"] = EXIT_NONE_HELD if found["broke"] and found["capacity_rate"] is None else EXIT_OK
    write_atomic(result.out_dir / "capacity.json", orjson.dumps(found, option=orjson.OPT_INDENT_2))
    if found["steps"]:
        write_chart(found, result.out_dir / "capacity.png")
    return CapacityResult(found, result.out_dir)


def render(found: dict) -> str:
    """The steps as a table, then the capacity, the knee, the failures past it and the recovery."""
    lines = [f"{'step':<9} {'rate/s':>7} {'got/s':>7} {'calls':>6} {'p50':>8} {'p95':>8} {'p99':>8} {'errors':>7} {'unans.':>6}  verdict"]
    for row in found["steps"]:
        verdict = "recovery" if row["phase"] == "recovery" else ("held" if row["held"] else "BROKE: " + "; ".join(row["why"]))
        name = "retry" if row.get("retry") else row["phase"]
        lines.append(f"{name + ' ' + str(row['index']):<9} {row['rate']:>7g} {row['achieved_rate']:>7.1f} {row['count']:>6} "
                     f"{_ms(row['p50'])} {_ms(row['p95'])} {_ms(row['p99'])} {row['error_ratio']:>7.1%} {row['unanswered']:>6}  {verdict}")
    lines.append(verdict_line(found))
    for moment in found.get("transient", []):
        lines.append(f"held on its retry at {moment['rate']:g}/s, a moment's stall: {'; '.join(moment['why'])}")
    knee = found.get("knee")
    lines.append("knee: none (fewer than 3 steps, or latency never bent)" if knee is None
                 else f"knee: {knee['rate']:g}/s (latency began to bend there; {found['knee_rule']})")
    if (past := found.get("past_knee")) and past["failure_classes"]:
        lines.append("failures past the knee: " + ", ".join(f"{k} {v}" for k, v in sorted(past["failure_classes"].items())))
    if (rec := found.get("recovery")) is not None:
        lines.append(f"recovery at {rec['rate']:g}/s: " + (f"held the SLO again after {rec['seconds']:g} s" if rec["recovered"]
                                                          else f"still breaking the SLO at the end of its {rec['within_s']:g} s step"))
    load = found["machine_load"]
    lines.append(f"machine load average {load['before'][0]:.2f} before, {load['after'][0]:.2f} after ({load['cores']} cores)")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return f"{'':>8}" if value is None else f"{value:>8.1f}"
