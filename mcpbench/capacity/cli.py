"""`mcpbench capacity`: ramp a scenario's open-model rate until it breaks an SLO (register with `main.add_command`)."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from mcpbench.auth.options import ClientArgs, client_options
from mcpbench.cliutil import POSITIVE, check_output, map_errors, positive_duration
from mcpbench.load.cli import FleetArgs


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
def capacity(**given):
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
    _capacity(CapacityArgs(**given))


@dataclass(frozen=True, kw_only=True)
class CapacityArgs(FleetArgs, ClientArgs):
    """`capacity`'s options, as given (click's names and values)."""

    scenario: str
    slos: tuple[str, ...]
    max_errors: str
    start_rate: float
    rate_step: str
    step_length: str
    max_time: str
    max_rate: float | None
    recovery_rate: float | None
    target: str | None
    users: int | None
    out: str | None


def _capacity(args: CapacityArgs) -> None:
    from mcpbench.capacity.run import find_capacity, render
    from mcpbench.load.ramp import Ramp, SloError, min_calls, parse_share, parse_slo, plan_rates
    from mcpbench.load.runner import JOIN_TIMEOUT
    from mcpbench.load.scenario import OpenModel, ScenarioError, load_scenario
    from mcpbench.files.outputs import new_run_folder

    slos, target = args.slos, args.target
    try:
        thresholds = [parse_slo(text) for text in slos]
        errors = parse_share(args.max_errors)
        step_s = positive_duration(args.step_length, "--step-length")
        bound = positive_duration(args.max_time, "--max-time")
        rates = plan_rates(args.start_rate, args.rate_step, max_time=bound, step_s=step_s, max_rate=args.max_rate)
    except SloError as exc:
        raise ScenarioError(str(exc)) from None
    ramp = Ramp(rates, step_s, tuple(slos), errors, args.recovery_rate)
    judged = step_s - ramp.grace
    need = min_calls(thresholds)
    if rates[0] * judged < need:
        raise ScenarioError(f"--step-length {args.step_length}: at {rates[0]:g}/s a step judges {math.floor(rates[0] * judged)} "
                            f"calls ({judged:g} s), and {', '.join(slos)} needs {need}: raise --step-length or --start-rate")
    wait = JOIN_TIMEOUT if args.join_timeout is None else positive_duration(args.join_timeout, "--join-timeout")
    fleet = args.fleet(wait)
    if args.join_timeout is not None and fleet is None:
        raise click.UsageError("--join-timeout goes with --master or --workers")
    check_output(args.out, "--out", folder=True)
    loaded = load_scenario(args.scenario, target=target)
    lateness = loaded.open_model.max_lateness if loaded.open_model else OpenModel(1.0).max_lateness
    client = args.client
    try:
        run = loaded.with_overrides(
            target=target, users=args.users, open_model=OpenModel(rates[0], lateness), ramp=ramp.to_json(),
            duration=ramp.longest,  # the users' start, the steps and the low step
            thresholds=(), exit_code_on_error=0, client=client.over(loaded.client) if client.given else None,
        )
    except ScenarioError as exc:
        raise ScenarioError(f"{loaded.source}: {exc}") from None
    folder = Path(args.out) if args.out else new_run_folder(Path("results"), f"capacity-{loaded.name}")
    result = find_capacity(run, ramp, folder, fleet=fleet, echo=click.echo)
    click.echo(render(result.found))
    click.echo(f"mcpbench: results in {result.out_dir}")
    sys.exit(result.exit_code)
