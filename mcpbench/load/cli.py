"""`mcpbench load`: run a scenario with Locust (register with `main.add_command(load)`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from mcpbench.auth.options import ClientArgs, client_options
from mcpbench.ci.outputs import check_ci_outputs, ci_options, write_ci_outputs
from mcpbench.cliutil import POSITIVE, check_output, map_errors, positive_duration


@dataclass(frozen=True, kw_only=True)
class FleetArgs:
    """The options of `--workers N` (local workers) and `--master` (workers on other machines), as
    given; `load` and `capacity` take the same."""

    workers: int
    master: bool
    expect_workers: int | None
    master_bind: str | None
    join_timeout: str | None

    def fleet(self, join_timeout: float):
        """The `Fleet` these options ask for, or None (one process).

        Raises:
            click.UsageError: an option that goes with `--master` without it, or a bad `--master-bind`.
        """
        from mcpbench.load.runner import Fleet, parse_bind

        if (self.expect_workers or self.master_bind) and not self.master:
            raise click.UsageError(f"{'--expect-workers' if self.expect_workers else '--master-bind'} goes with --master")
        if self.master:
            try:
                host, port = parse_bind(self.master_bind or "0.0.0.0")
            except ValueError as exc:
                raise click.UsageError(f"--master-bind {exc}") from None
            return Fleet(host=host, port=port, expect=max(self.expect_workers or 1, self.workers), local=self.workers,
                         join_timeout=join_timeout)
        if self.workers:
            return Fleet(port=0, expect=self.workers, local=self.workers, join_timeout=join_timeout)
        return None


# A recorded schedule's run lasts its span at the speed, plus a call's timeout and this margin.
SCHEDULE_MARGIN = 10.0


def recorded_schedule(scenario, trace: str, speed: str, *, users: int | None, duration: float | None):
    """`scenario` running the trace's sessions on their recorded schedule at `speed` (traceload.py):
    a user per session (at most --users, else traceload.MAX_USERS), lasting the recording's span at that
    speed (or --duration)."""
    import dataclasses
    import math

    from mcpbench.load.scenario import check_consistency
    from mcpbench.load.traceload import MAX_USERS, SessionQueue, parse_speed, recorded_load, span, to_json

    factor = parse_speed(speed)
    sessions = recorded_load(trace)
    queue = SessionQueue(sessions, factor, scenario.versions, users or MAX_USERS)
    took = span(sessions) / (1.0 if math.isinf(factor) else factor)
    new = dataclasses.replace(
        scenario, replay=to_json(sessions, factor), open_model=None, session="session_per_task",
        users=sum(queue.users(v) for v in scenario.versions), spawn_rate=1000.0,
        duration=duration or took + scenario.timeout + SCHEDULE_MARGIN,
    )
    check_consistency(new)
    return new


@click.command("load")
@click.argument("scenario", type=click.Path(dir_okay=False), required=False)
@click.option("--target", help="The target, given or overridden: stdio:CMD, http(s)://HOST/mcp or sse+http(s)://HOST/sse.")
@click.option("--users", type=click.IntRange(1), help="Concurrent users (override).")
@click.option("--spawn-rate", type=POSITIVE, help="Users started per second (override).")
@click.option("--duration", help="Run time, like 30s or 2m (override).")
@click.option("--out", type=click.Path(file_okay=False), help="Result directory (default: results/<time>-<scenario>).")
@click.option("--from-trace", type=click.Path(dir_okay=False), help="Derive the call mix (methods, tools, arguments, weights) from a recorded trace.")
@click.option("--speed", metavar="1x|2x|0.5x|max", help="With --from-trace: reissue the recorded sessions at their recorded "
              "arrival times and call spacing, scaled (max: all at once, each call after the last answer).")
@click.option("--workers", type=click.IntRange(0), default=0, help="Run a Locust master with N local worker processes.")
@click.option("--master", is_flag=True, help="Run a Locust master for workers on other machines (mcpbench load --worker).")
@click.option("--expect-workers", type=click.IntRange(1), help="With --master: the workers to wait for before the load starts (default 1).")
@click.option("--master-bind", metavar="HOST:PORT", help="With --master: where to listen for workers (default 0.0.0.0:5557).")
@click.option("--worker", is_flag=True, help="Be a worker of the master at --master-host; the run comes from the master.")
@click.option("--master-host", help="With --worker: the master's host name or address.")
@click.option("--master-port", type=click.IntRange(1, 65535), help="With --worker: the master's port (default 5557).")
@click.option("--join-timeout", metavar="DURATION", help="How long the master waits for its workers, or a worker for its master (default 60s).")
@click.option("--reconnect", help="Reconnect policy when a session or stream breaks: none, reinitialize or resume "
              "(options: resume,attempts=3,budget=10%,idempotent=echo+add).")
@click.option("--exit-code-on-error", type=click.IntRange(0, 255), default=None,
              help="Exit status when a step failed and no fail_ratio threshold judges failures (default 1, as "
                   "Locust's; 0: failures are what the run measures).")
@click.option("--otlp", metavar="URL", help="Once the run is over, send its steps as spans over OTLP/HTTP to URL "
              "(a trace per client session), e.g. http://127.0.0.1:4318.")
@click.option("--service-name", metavar="NAME", help="With --otlp: the spans' service.name (default mcpbench).")
@click.option("--ui", is_flag=True, help="Open Locust's web UI instead of running headless.")
@click.option("--web-port", type=click.IntRange(1, 65535), help="Port of the web UI (with --ui).")
@ci_options
@client_options
@map_errors
def load(**given):
    """Load-test an MCP server with the call mix of SCENARIO (a YAML file) using Locust.

    Writes Locust's CSVs, samples.jsonl (one line per step) and summary.json to the
    result directory, prints the summary, and exits 1 when a threshold fails, or when a step
    failed and no fail_ratio threshold judges failures (--exit-code-on-error sets that status;
    --junit-xml and --summary-md: each threshold a test case)
    (2 for unusable input, 3 when the target cannot be reached or is not MCP, or a result
    file cannot be written: the summary then says the samples are incomplete; Ctrl-C
    reports on the time that ran and exits 130). Without SCENARIO, give --target and
    --from-trace (the run speaks the protocol versions the trace's sessions settled on).
    Headers, a bearer token, OAuth and a proxy (the scenario's headers:, auth:, proxy:, or the
    options below, which add to them) apply to every request of every user.

    --otlp URL: once the run is over, its steps as spans (an endpoint that fails is one line; the
    status stays the run's).

    On several machines: `--master` on one, `--worker --master-host HOST` on each of the others
    (they need only mcpbench: the scenario comes from the master, and their samples go to it).

    Example: mcpbench load scenarios/streamable-http.yaml --users 20 --duration 30s
    """
    _load(LoadArgs(**given))


@dataclass(frozen=True, kw_only=True)
class LoadArgs(FleetArgs, ClientArgs):
    """`load`'s options, as given (click's names and values)."""

    scenario: str | None
    target: str | None
    users: int | None
    spawn_rate: float | None
    duration: str | None
    out: str | None
    from_trace: str | None
    speed: str | None
    worker: bool
    master_host: str | None
    master_port: int | None
    reconnect: str | None
    exit_code_on_error: int | None
    otlp: str | None
    service_name: str | None
    ui: bool
    web_port: int | None
    junit_xml: str | None
    summary_md: str | None


def _load(args: LoadArgs) -> None:
    from mcpbench.measures.durations import parse_duration
    from mcpbench.load.runner import JOIN_TIMEOUT, run_scenario
    from mcpbench.load.samples import render
    from mcpbench.load.scenario import Scenario, ScenarioError, load_scenario, mix_from_trace, versions_from_trace

    wait = JOIN_TIMEOUT if args.join_timeout is None else positive_duration(args.join_timeout, "--join-timeout")
    local = {"--master": args.master, "--expect-workers": args.expect_workers, "--master-bind": args.master_bind}
    if args.worker:
        given = [name for name, value in {
            "SCENARIO": args.scenario, "--target": args.target, "--users": args.users, "--spawn-rate": args.spawn_rate, "--duration": args.duration,
            "--out": args.out, "--from-trace": args.from_trace, "--speed": args.speed, "--workers": args.workers, "--reconnect": args.reconnect, "--ui": args.ui,
            "--web-port": args.web_port, "--exit-code-on-error": args.exit_code_on_error is not None, "--junit-xml": args.junit_xml,
            "--summary-md": args.summary_md, "--otlp": args.otlp, "--service-name": args.service_name, **local,
        }.items() if value]
        if given:
            raise click.UsageError(f"--worker takes its run from the master: drop {given[0]}")
        if not args.master_host:
            raise click.UsageError("--worker needs --master-host")
        from mcpbench.load.worker import MASTER_PORT, run_worker

        sys.exit(run_worker(args.master_host, args.master_port or MASTER_PORT, join_timeout=wait, echo=click.echo))
    if args.master_host or args.master_port:
        raise click.UsageError(f"{'--master-host' if args.master_host else '--master-port'} goes with --worker")
    fleet = args.fleet(wait)
    if args.join_timeout is not None and fleet is None:
        raise click.UsageError("--join-timeout goes with --master, --workers or --worker")

    if args.service_name and not args.otlp:
        raise click.UsageError("--service-name goes with --otlp")
    telemetry = None
    if args.otlp:
        from mcpbench.companions.options import TelemetryOptions

        telemetry = TelemetryOptions.parse(args.otlp, None, args.service_name)
    check_output(args.out, "--out", folder=True)
    check_ci_outputs(args.junit_xml, args.summary_md)
    if args.scenario:
        loaded = load_scenario(args.scenario, target=args.target)  # --target supplies a missing target too
    elif args.target and args.from_trace:
        # The eras the recording spoke, not the default handshake one.
        versions = versions_from_trace(args.from_trace) or Scenario.versions
        loaded = Scenario(target=args.target, name="trace", source=args.from_trace, mix=mix_from_trace(args.from_trace), versions=versions)
    else:
        raise ScenarioError("give a SCENARIO file, or --target and --from-trace")
    seconds = None
    if args.duration is not None:
        try:
            seconds = parse_duration(args.duration, "--duration")
        except ValueError as exc:
            raise ScenarioError(str(exc)) from None
        if seconds <= 0:
            raise ScenarioError("--duration must be > 0")
    policy = None
    if args.reconnect is not None:
        from mcpbench.protocol.reconnect import ReconnectPolicy

        try:
            policy = ReconnectPolicy.parse(args.reconnect)
        except ValueError as exc:
            raise ScenarioError(f"--reconnect {args.reconnect!r}: {exc}") from None
    try:
        loaded = loaded.with_overrides(
            target=args.target, users=args.users, spawn_rate=args.spawn_rate, duration=seconds, reconnect=policy,
            exit_code_on_error=args.exit_code_on_error,
            mix=mix_from_trace(args.from_trace) if args.from_trace and args.scenario else None,
            client=args.client.over(loaded.client) if args.client.given else None,
        )
    except ScenarioError as exc:
        raise ScenarioError(f"{loaded.source}: {exc}") from None
    if args.speed is not None:
        if not args.from_trace:
            raise click.UsageError("--speed goes with --from-trace")
        if fleet is not None:
            raise click.UsageError("--speed runs the recorded sessions in one process: drop --workers/--master")
        loaded = recorded_schedule(loaded, args.from_trace, args.speed, users=args.users, duration=seconds)
    result = run_scenario(loaded, args.out, fleet=fleet, ui=args.ui, web_port=args.web_port, echo=click.echo)
    table = render(result.summary)
    write_ci_outputs([result.suite(str(loaded.source or loaded.name), table)], "mcpbench load", args.junit_xml, args.summary_md)
    click.echo(table)
    if result.summary.get("interrupted"):
        click.echo(f"interrupted: the summary and thresholds cover the {result.summary['duration_s']:.1f} s that ran")
    for verdict in result.verdicts:
        click.echo(verdict.line())
    if result.failed_steps is not None:
        click.echo(result.failed_steps.line())
    if result.sessions is not None:  # a run of K sessions (`sessions:`): were sessions kept?
        from mcpbench.load.sessions import render_sessions, verdict

        click.echo(render_sessions(result.sessions))
        click.echo(verdict(result.sessions))
    click.echo(f"mcpbench: results in {result.out_dir}")
    if telemetry is not None and (result.out_dir / "samples.jsonl").is_file():
        from mcpbench.companions.telemetry import send_samples

        send_samples(telemetry, result.out_dir / "samples.jsonl")  # says how it went; the measurement's status stands
    if result.write_errors:  # the run went on; its results did not all reach the disk
        click.echo(f"mcpbench: {result.write_errors[0]}: the samples are incomplete", err=True)
    elif result.cut_short:
        click.echo(f"mcpbench: {result.cut_short}", err=True)
    sys.exit(result.exit_code)

