"""`mcpbench capacity`: ramp a scenario's open-model rate until it breaks an SLO (register with `main.add_command`)."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import click
import orjson

from mcpbench.auth.options import client_options
from mcpbench.cliutil import POSITIVE, check_output, map_errors, positive_duration
from mcpbench.load.cli import fleet_from_options

# Exit statuses beyond the usual ones: the first step broke (no rate of the ramp held).
EXIT_NONE_HELD = 1


@click.command("capacity")
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--slo", "slos", multiple=True, required=True, metavar="BOUND",
              help="A latency bound every step must hold, like 'p95<200ms' (repeatable).")
@click.option("--max-errors", default="0%", show_default=True, metavar="SHARE",
              help="The share of failed (or unanswered) calls a step may have, like 1%.")
@click.option("--start-rate", type=POSITIVE, default=5.0, show_default=True, help="The first step's rate (calls/s).")
@click.option("--rate-step", default="x1.5", show_default=True, metavar="+N|xF",
              help="Each step's rate: N calls/s more than the last, or F times it.")
@click.option("--step-length", default="10s", show_default=True, metavar="DURATION", help="How long each step is held.")
@click.option("--max-time", default="2m", show_default=True, metavar="DURATION",
              help="The ramp's bound: its steps, the retry of a step that breaks and the low step after the break fit in it.")
@click.option("--max-rate", type=POSITIVE, help="No step above this rate.")
@click.option("--recovery-rate", type=POSITIVE, help="The rate of the step after the break (default: the first step's).")
@click.option("--target", help="The target, given or overridden: stdio:CMD, http(s)://HOST/mcp or sse+http(s)://HOST/sse.")
@click.option("--users", type=click.IntRange(1), help="The users that run the calls (default: the scenario's): "
              "at most this many calls are in flight at once.")
@click.option("--out", type=click.Path(file_okay=False), help="Result directory (default: results/<time>-capacity-<scenario>).")
@click.option("--workers", type=click.IntRange(0), default=0, help="Run a Locust master with N local worker processes.")
@click.option("--master", is_flag=True, help="Run a Locust master for workers on other machines (mcpbench load --worker).")
@click.option("--expect-workers", type=click.IntRange(1), help="With --master: the workers to wait for (default 1).")
@click.option("--master-bind", metavar="HOST:PORT", help="With --master: where to listen for workers (default 0.0.0.0:5557).")
@click.option("--join-timeout", metavar="DURATION", help="How long the master waits for its workers (default 60s).")
@client_options
@map_errors
def capacity(scenario, slos, max_errors, start_rate, rate_step, step_length, max_time, max_rate, recovery_rate, target,
             users, out, workers, master, expect_workers, master_bind, join_timeout, client):
    """Find the highest rate SCENARIO's target holds its SLO at: an open-model ramp of steps.

    Each step runs the scenario's mix at a fixed rate of call starts (latency from each call's
    intended start) for --step-length. A step that breaks an --slo or --max-errors (calls that got
    no answer count as slower than any bound) is held once more at its rate: a stall of a moment (a
    server's garbage collection) breaks one step, a rate the server cannot hold breaks both. The run
    stops at the first rate that broke twice, then holds one step at --recovery-rate to see how long
    the server takes to recover. Writes capacity.json and
    capacity.png (rate against latency percentiles and errors) beside the load run's files, and
    prints each step, the capacity, the knee (where latency began to bend), the failures past it
    and the recovery.

    Exit status: 0 when a rate held and a higher one broke, and also when no step broke within
    --max-time (it says so: the capacity is then at least the last rate); 1 when the first step
    already broke; 2 for unusable input (an SLO that does not parse, a step too short to judge
    it); 3 when the target cannot be reached or is not MCP.

    Example: mcpbench capacity scenarios/streamable-http.yaml --slo 'p95<200ms' --max-errors 1%
    """
    from mcpbench.capacity.analysis import analyse, read_run
    from mcpbench.capacity.chart import write_chart
    from mcpbench.load.ramp import Ramp, SloError, min_calls, parse_share, parse_slo, plan_rates
    from mcpbench.load.runner import JOIN_TIMEOUT, run_scenario
    from mcpbench.load.scenario import OpenModel, ScenarioError, load_scenario
    from mcpbench.outputs import new_run_folder, write_atomic

    try:
        thresholds = [parse_slo(text) for text in slos]
        errors = parse_share(max_errors)
        step_s = positive_duration(step_length, "--step-length")
        bound = positive_duration(max_time, "--max-time")
        rates = plan_rates(start_rate, rate_step, max_time=bound, step_s=step_s, max_rate=max_rate)
    except SloError as exc:
        raise ScenarioError(str(exc)) from None
    ramp = Ramp(rates, step_s, tuple(slos), errors, recovery_rate)
    judged = step_s - ramp.grace
    need = min_calls(thresholds)
    if rates[0] * judged < need:
        raise ScenarioError(f"--step-length {step_length}: at {rates[0]:g}/s a step judges {math.floor(rates[0] * judged)} calls "
                            f"({judged:g} s), and {', '.join(slos)} needs {need}: raise --step-length or --start-rate")
    wait = JOIN_TIMEOUT if join_timeout is None else positive_duration(join_timeout, "--join-timeout")
    fleet = fleet_from_options(workers, master, expect_workers, master_bind, wait)
    if join_timeout is not None and fleet is None:
        raise click.UsageError("--join-timeout goes with --master or --workers")
    check_output(out, "--out", folder=True)
    loaded = load_scenario(scenario, target=target)
    lateness = loaded.open_model.max_lateness if loaded.open_model else OpenModel(1.0).max_lateness
    try:
        run = loaded.with_overrides(
            target=target, users=users, open_model=OpenModel(rates[0], lateness), ramp=ramp.to_json(),
            duration=ramp.longest,  # the users' start, the steps and the low step
            thresholds=(), exit_code_on_error=0, client=client.over(loaded.client) if client.given else None,
        )
    except ScenarioError as exc:
        raise ScenarioError(f"{loaded.source}: {exc}") from None
    folder = Path(out) if out else new_run_folder(Path("results"), f"capacity-{loaded.name}")
    load_before = os.getloadavg()
    click.echo(f"mcpbench: ramp {', '.join(f'{r:g}' for r in rates)} calls/s, {step_s:g} s each, judged by "
               f"{', '.join(slos)}, errors <= {errors:.1%} (load average {load_before[0]:.2f})")
    result = run_scenario(run, folder, fleet=fleet, echo=click.echo)
    timeline, calls = read_run(result.out_dir)
    found = analyse(timeline, calls)
    found.update(scenario=str(loaded.source), target=_public(run.target),
                 transport=run.parsed_target.transport, users=run.users, workers=fleet.expect if fleet else 0,
                 machine_load={"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()],
                               "cores": os.cpu_count()},
                 interrupted=bool(result.summary.get("interrupted")))
    status = EXIT_NONE_HELD if found["broke"] and found["capacity_rate"] is None else 0
    found["exit_status"] = status
    write_atomic(result.out_dir / "capacity.json", orjson.dumps(found, option=orjson.OPT_INDENT_2))
    if found["steps"]:
        write_chart(found, result.out_dir / "capacity.png")
    click.echo(render(found))
    click.echo(f"mcpbench: results in {result.out_dir}")
    sys.exit(status)


def _public(target: str) -> str:
    from mcpbench.trace.redact import Redactor

    return Redactor().text(target)


def render(found: dict) -> str:
    """The steps as a table, then the capacity, the knee, the failures past it and the recovery."""
    from mcpbench.capacity.analysis import verdict_line

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
