"""Click commands `replay`, `diff` and `serve-trace`: parse, call the library, report.

Registered by the main CLI (`main.add_command(replay)` etc.). Expected failures
are `McpbenchError`s, turned into one line and their exit status by `cliutil.map_errors`.
"""

import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from mcpbench import cliutil
from mcpbench.auth.options import ClientArgs, client_options
from mcpbench.ci.outputs import check_ci_outputs, ci_options, write_ci_outputs
from mcpbench.cliutil import NON_NEGATIVE, POSITIVE, check_output, map_errors, redact_option, signal_status
from mcpbench.companions.options import DEFAULT_SERVICE_NAME, TelemetryOptions
from mcpbench.files.outputs import refuse_overwrite
from mcpbench.protocol.transports import TRANSPORTS

# Click's choices, spelled here so that importing the commands imports no replay module.
PER = ("trace", "call")  # replay/cases.py: a JUnit test case per trace or per call
FAIL_ON = ("breaking", "any")  # replay/contract.py: which contract changes fail the gate



def compare_options(func):
    """Options shared by `replay` and `diff`: ignore rules, latency judgement, output."""
    options = [
        click.option("--ignore", "ignore", multiple=True, metavar="[METHOD[@NAME]:]PATH",
                     help="Do not compare values at this JSON path (wildcards * and **). Repeatable."),
        click.option("--ignore-file", "ignore_files", multiple=True, type=click.Path(dir_okay=False),
                     help="Rules from a file (JSON list, {\"ignore\": [...]}, or one a line). Repeatable."),
        click.option("--no-default-rules", is_flag=True, help="Compare UUIDs, timestamps, session ids and progress tokens too."),
        click.option("--latency-factor", type=NON_NEGATIVE, default=None, show_default=False,
                     help="Flag a call FACTOR x slower than recorded beside it (default 3; 0 turns it off)."),
        click.option("--latency-slack-ms", type=NON_NEGATIVE, default=None,
                     help="…and slower by more than this (default 250 ms)."),
        click.option("--fail-on-latency", type=POSITIVE, default=None, metavar="FACTOR",
                     help="Count a call FACTOR x slower than recorded (and by the slack) as changed: exit 1. "
                          "Off by default: latency is reported, not judged."),
        click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Also write the report as JSON."),
        click.option("--verbose", "-v", is_flag=True, help="List every call, also in long sessions."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass(frozen=True, kw_only=True)
class JudgedArgs:
    """The options `replay` and `diff` share (`compare_options`, `suite_options`), as given."""

    ignore: tuple[str, ...]
    ignore_files: tuple[str, ...]
    no_default_rules: bool
    latency_factor: float | None
    latency_slack_ms: float | None
    fail_on_latency: float | None
    report_path: str | None
    verbose: bool
    contract: bool
    fail_on: str
    junit_per: str
    junit_xml: str | None
    summary_md: str | None

    def judging(self):
        """The `report.Judging` these options give."""
        from mcpbench.replay.compare import IgnoreRules, load_rules
        from mcpbench.replay.report import Judging

        texts = list(self.ignore)
        for path in self.ignore_files:
            texts += load_rules(path)
        rules = IgnoreRules(texts, defaults=not self.no_default_rules)
        return Judging.of(rules, self.latency_factor, self.latency_slack_ms, self.fail_on_latency)


@dataclass(frozen=True, kw_only=True)
class ReplayArgs(JudgedArgs, ClientArgs):
    """`replay`'s options, as given."""

    traces: tuple[str, ...]
    target_text: str
    sessions: tuple[str, ...]
    protocol_version: str | None
    pace: str
    max_gap: float | None
    timeout: float | None
    out: str | None
    foreign_host: str
    learn_noise: bool
    noise_file: str | None
    rules_beside: bool
    otlp: str | None
    service_name: str
    redact: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class DiffArgs(JudgedArgs):
    """`diff`'s options, as given."""

    trace_a: str
    trace_b: str


def _finish(report, args: JudgedArgs, recording_failed=None) -> None:
    from mcpbench.protocol.errors import TargetError, TraceWriteError
    from mcpbench.replay.report import render

    click.echo(render(report, verbose=args.verbose))
    if args.report_path:
        report.write_json(args.report_path)
    if report.aborted:
        raise TargetError(report.aborted)  # only the target breaks a replay off once it runs
    if recording_failed:  # the replay ran, its own trace is incomplete (said when it happened)
        raise TraceWriteError(recording_failed, reported=True)
    sys.exit(report.exit_code)


def _failed_report(kind, trace, target, error, report_path) -> None:
    """The report of a replay that could not start, written before the error propagates."""
    from mcpbench.protocol.errors import OutputError

    if report_path and not isinstance(error, OutputError):  # an unwritable report path stays unwritten
        from mcpbench.replay.report import Report

        Report(kind, str(trace), str(target), [], aborted=str(error), abort_status=error.exit_code).write_json(report_path)


def suite_options(func):
    """Options of `replay` and `diff` for CI: the contract gate, JUnit and Markdown outputs."""
    options = [
        click.option("--contract", is_flag=True,
                     help="Compare the declared surface (capabilities, tools/resources/templates/prompts lists with "
                          "their schemas) instead of every answer; each change is breaking or compatible."),
        click.option("--fail-on", type=click.Choice(FAIL_ON), default="breaking", show_default=True,
                     help="With --contract: exit 1 on breaking changes only, or on any change."),
        click.option("--junit-per", type=click.Choice(PER), default="trace", show_default=True,
                     help="JUnit XML: a test case per trace, or per recorded call."),
    ]
    for option in reversed(options):
        func = option(func)
    return ci_options(func)


@click.command()
@click.argument("traces", nargs=-1, required=True, metavar="TRACE_DIR_OR_GLOB...")
@click.option("--target", "-t", "target_text", required=True,
              help="stdio:COMMAND ARGS…, http(s)://HOST:PORT/mcp or sse+http(s)://HOST:PORT/sse.")
@click.option("--session", "sessions", multiple=True, metavar="ID", help="Replay only this recorded session. Repeatable.")
@click.option("--protocol-version", metavar="VERSION", help="Replay the same calls in this protocol version (e.g. 2026-07-28).")
@click.option("--pace", default="fast", show_default=True, metavar="fast|original|xN",
              help="Gaps between client messages: none, as recorded, or recorded divided by N.")
@click.option("--max-gap", type=POSITIVE, metavar="SECONDS", help="Cap any one gap (with --pace original or xN).")
@click.option("--timeout", type=POSITIVE, default=None,
              help="Seconds one request may wait for its answer (default: per call, twice its recorded latency "
                   "plus 10 s, at least 30 s).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the replay's own trace here.")
@click.option("--foreign-host", type=click.Choice(("recorded", "target")), default="recorded", show_default=True,
              help="HTTP: a request recorded with a Host foreign to its upstream and refused there (a DNS-rebinding "
                   "check) goes with that Host, as the client sent it, or with the target's.")
@click.option("--learn-noise", is_flag=True, help="Replay twice; every path that differs between the runs becomes an ignore rule.")
@click.option("--noise-file", type=click.Path(dir_okay=False),
              help="Where --learn-noise saves its rules (default: TRACE with .noise.json); reuse with --ignore-file.")
@click.option("--rules-beside", is_flag=True,
              help="Also apply the rules kept beside each trace: TRACE.noise.json (--learn-noise's) and TRACE.ignore.")
@click.option("--otlp", metavar="URL", help="Send the replay's calls as spans (and metrics) over OTLP/HTTP to URL as they go.")
@click.option("--service-name", metavar="NAME", default=DEFAULT_SERVICE_NAME, show_default=True, help="The service.name of those spans.")
@redact_option
@compare_options
@suite_options
@client_options
@map_errors
def replay(**given):
    """Replay the client side of each TRACE against TARGET and report every answer that changed.

    TRACE may be a file, a folder (every trace under it) or a glob ('traces/**/*.jsonl'); several
    make a suite with one report. Sessions go in recorded order, each client message in recorded
    order, requests that were in flight together are sent together; server requests (sampling,
    elicitation, roots) are answered from the recording. Recorded credentials are hashed in traces:
    give your own (--header, --bearer-token-env, --oauth-*). Exit status: 0 nothing changed, 1
    something changed (with --contract: a breaking change, or any with --fail-on any), 2 unusable
    input, 3 the target could not be reached, broke off or is not an MCP server.

    Example: mcpbench replay tests/mcp_traces --target "stdio:python -m my_server" --junit-xml replay.xml
    """
    _replay(ReplayArgs(**given))


def _replay(args: ReplayArgs) -> None:
    from mcpbench.protocol.errors import McpbenchError
    from mcpbench.replay import plan as plans
    from mcpbench.replay.engine import Pace
    from mcpbench.replay.suite import ReplayOptions, expand, noise_path, rules_beside as kept_rules
    from mcpbench.system.target import parse_target

    paths = expand(args.traces)
    single = len(paths) == 1
    if not single:
        for given, option in ((args.out, "--out"), (args.noise_file, "--noise-file"), (args.sessions, "--session")):
            if given:
                raise click.UsageError(f"{option} is for one trace; {len(paths)} traces were named")
    trace = paths[0]
    noise = (args.noise_file or noise_path(trace)) if args.learn_noise and single else None
    refuse_overwrite(
        [("--out", args.out), ("--report", args.report_path), ("--noise-file", noise), ("--junit-xml", args.junit_xml),
         ("--summary-md", args.summary_md)],
        [*((f"the trace {path}" if not single else "the trace being replayed", path) for path in paths),
         *(("--ignore-file", name) for name in args.ignore_files)],
    )
    try:
        for path, option in ((args.out, "--out"), (args.report_path, "--report"), (args.noise_file, "--noise-file")):
            check_output(path, option)
        check_ci_outputs(args.junit_xml, args.summary_md)
        target = parse_target(args.target_text)
        access = args.client.resolve(target.url)
        judging = args.judging()
        pacing = Pace.parse(args.pace, args.max_gap)
        recorded = [plans.load(path, sessions=args.sessions or None) for path in paths]
        beside = [judging.with_rules(judging.rules.extend(kept_rules(path))) if args.rules_beside else judging for path in paths]
        access.headers_now()  # a token endpoint that says no, or cannot be found: one line, now
    except McpbenchError as exc:
        _failed_report("replay", trace, args.target_text, exc, args.report_path)
        raise
    if any(plan.credentials for plan in recorded) and not access.credentials:
        click.echo("mcpbench: the recording sent Authorization (hashed in the trace, never replayed); this replay "
                   "sends none: give --header, --bearer-token-env or --oauth-* for a protected server", err=True)
    options = ReplayOptions(protocol_version=args.protocol_version, pace=pacing, timeout=args.timeout, redact=args.redact,
                            telemetry=TelemetryOptions.parse(args.otlp, None, args.service_name), access=access,
                            foreign_host=args.foreign_host)
    if args.contract:
        from mcpbench.replay.suite import replay_contracts

        result = replay_contracts(recorded, target, options, args.fail_on, each=lambda report: click.echo(report.render()))
        _contract_finish(result, args)
    if single:
        _replay_one(args, recorded[0], target, beside[0], options, noise)
    _replay_suite(args, recorded, target, beside, options)


def _replay_one(args: ReplayArgs, recorded, target, judging, options, noise) -> None:
    """One trace, reported as `replay` always has; the CI outputs besides."""
    from pathlib import Path

    from mcpbench.replay.cases import report_suite
    from mcpbench.replay.suite import replay_one

    outcome = replay_one(recorded, target, judging, options, learn_to=Path(noise) if noise else None, out=args.out)
    report = outcome.report
    if outcome.learned is not None:
        click.echo(f"mcpbench: learned {len(outcome.learned)} noise rule(s) → {noise}", err=True)
    if outcome.run is not None and outcome.run.interrupted:
        report.abort_status = signal_status(cliutil.received or signal.SIGINT)
    if outcome.wrote:
        click.echo(f"mcpbench: replay trace → {args.out}", err=True)
    write_ci_outputs([report_suite(report, args.junit_per)], "mcpbench replay", args.junit_xml, args.summary_md)
    _finish(report, args, outcome.recording_failed)


def _replay_suite(args: ReplayArgs, recorded, target, judgings, options) -> None:
    """Several traces: each replayed and reported in turn, then one verdict, one JSON report, one suite each."""
    from mcpbench.protocol.errors import EXIT_ENVIRONMENT
    from mcpbench.replay.cases import report_suite
    from mcpbench.replay.report import render
    from mcpbench.replay.suite import SuiteResult, noise_path, replay_one

    result = SuiteResult()
    for plan, judging in zip(recorded, judgings):
        learn_to = noise_path(plan.path) if args.learn_noise else None
        outcome = replay_one(plan, target, judging, options, learn_to=learn_to)
        if outcome.learned is not None:
            click.echo(f"mcpbench: learned {len(outcome.learned)} noise rule(s) → {learn_to}", err=True)
        result.reports.append(outcome.report)
        click.echo(render(outcome.report, verbose=args.verbose))
        if outcome.run is not None and outcome.run.interrupted:
            outcome.report.abort_status = signal_status(cliutil.received or signal.SIGINT)
            break
    click.echo(f"mcpbench: {result.summary()}")
    if args.report_path:
        result.write_json(args.report_path)
    write_ci_outputs([report_suite(report, args.junit_per) for report in result.reports], "mcpbench replay",
                     args.junit_xml, args.summary_md)
    if result.aborted and result.exit_code == EXIT_ENVIRONMENT:
        click.echo(f"mcpbench: {result.aborted[0].source}: {result.aborted[0].aborted}", err=True)
    sys.exit(result.exit_code)


def _contract_finish(result, args: JudgedArgs) -> None:
    from mcpbench.protocol.errors import TargetError
    from mcpbench.replay.report import write_json

    if args.report_path:
        write_json(args.report_path, result.to_json())
    write_ci_outputs(result.suites(), "mcpbench contract", args.junit_xml, args.summary_md)
    if result.aborted:
        raise TargetError(result.aborted.aborted)
    sys.exit(result.exit_code)


@click.command(name="diff")
@click.argument("trace_a", type=click.Path(dir_okay=False))
@click.argument("trace_b", type=click.Path(dir_okay=False))
@compare_options
@suite_options
@map_errors
def diff(**given):
    """Compare two traces call by call, without any server (sessions paired in order).

    With --contract, compare what the server declared (capabilities, listings, schemas) and class
    each change as breaking or compatible. Exit status: 0 nothing changed, 1 something changed
    (with --contract: as --fail-on says), 2 a trace could not be read.

    Example: mcpbench diff build-41.jsonl build-42.jsonl --ignore 'result.content[*].text.id'
    """
    _diff(DiffArgs(**given))


def _diff(args: DiffArgs) -> None:
    from mcpbench.protocol.errors import McpbenchError
    from mcpbench.replay import plan as plans
    from mcpbench.replay.cases import report_suite
    from mcpbench.replay.report import diff_traces

    refuse_overwrite(
        [("--report", args.report_path), ("--junit-xml", args.junit_xml), ("--summary-md", args.summary_md)],
        [("TRACE_A", args.trace_a), ("TRACE_B", args.trace_b), *(("--ignore-file", name) for name in args.ignore_files)],
    )
    try:
        check_output(args.report_path, "--report")
        check_ci_outputs(args.junit_xml, args.summary_md)
        judging = args.judging()
        a, b = plans.load(args.trace_a), plans.load(args.trace_b)
    except McpbenchError as exc:
        _failed_report("diff", args.trace_a, args.trace_b, exc, args.report_path)
        raise
    if args.contract:
        from mcpbench.replay.contract import ContractResult, diff_contract

        report = diff_contract(a, b)
        click.echo(report.render())
        _contract_finish(ContractResult([report], args.fail_on), args)
    report = diff_traces(a, b, judging)
    write_ci_outputs([report_suite(report, args.junit_per)], "mcpbench diff", args.junit_xml, args.summary_md)
    _finish(report, args)


@click.command(name="serve-trace")
@click.argument("trace", type=click.Path(dir_okay=False))
@click.argument("forward_url", metavar="[URL]", required=False)
@click.option("--transport", type=click.Choice(TRANSPORTS), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (HTTP transports).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (HTTP transports).")
@click.option("--json-response", is_flag=True, help="Streamable HTTP: answer JSON bodies even where the recording had SSE.")
@click.option("--session", "sessions", multiple=True, metavar="ID", help="Serve only this recorded session's answers. Repeatable.")
@click.option("--on-miss", type=click.Choice(("error", "forward")), default="error", show_default=True,
              help="An unrecorded request gets an error naming the nearest recorded one, or (forward URL) the "
                   "answer of the live server at URL: stdio:CMD, http(s)://HOST/mcp or sse+http(s)://HOST/sse.")
@click.option("--pace", default="original", show_default=True, metavar="original|fast|xN",
              help="Gaps between the messages of one call (progress, then the answer): as recorded, none, or "
                   "recorded divided by N.")
@click.option("--max-gap", type=POSITIVE, metavar="SECONDS",
              help="Cap any one gap between the messages of a call (default: 1 s).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="HOST",
              help="HTTP: also accept this Host header (name:* for any port, * for any). Repeatable.")
@click.option("--allowed-origin", "allowed_origins", multiple=True, metavar="ORIGIN",
              help="HTTP: also accept this Origin header (http://name:* for any port, * for any). Repeatable.")
@client_options
@map_errors
def serve_trace(**given):
    """Serve TRACE as a mock MCP server that answers exactly as recorded.

    Requests match on method and params (ids and _meta ignored); repeated identical requests get
    their answers in recorded order. An unrecorded request gets a JSON-RPC error naming the nearest
    recorded one, or with `--on-miss forward URL` the answer of a live server (one upstream session
    per client session, opened on its first miss), sent with the credentials and through the proxy
    the options give (--header, --bearer-token-env, --oauth-*, --proxy).

    Example: mcpbench serve-trace s.jsonl --transport streamable-http --on-miss forward http://127.0.0.1:8101/mcp
    """
    _serve_trace(ServeTraceArgs(**given))


@dataclass(frozen=True, kw_only=True)
class ServeTraceArgs(ClientArgs):
    """`serve-trace`'s options, as given."""

    trace: str
    forward_url: str | None
    transport: str
    host: str
    port: int
    json_response: bool
    sessions: tuple[str, ...]
    on_miss: str
    pace: str
    max_gap: float | None
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]


def _serve_trace(args: ServeTraceArgs) -> None:
    from mcpbench.replay import plan as plans
    from mcpbench.replay.engine import Pace
    from mcpbench.replay.forward import Forwarder
    from mcpbench.replay.mock_play import DEFAULT_MAX_GAP
    from mcpbench.replay.serve_trace import serve
    from mcpbench.system.target import parse_target

    forward_url = args.forward_url
    if args.on_miss == "forward" and not forward_url:
        raise click.UsageError("--on-miss forward needs the live server's URL: --on-miss forward URL")
    if args.on_miss != "forward" and forward_url:
        raise click.UsageError(f"unexpected argument {forward_url!r} (a URL goes after --on-miss forward)")
    pacing = Pace.parse(args.pace, DEFAULT_MAX_GAP if args.max_gap is None else args.max_gap)
    if args.client.given and not forward_url:
        raise click.UsageError("--header, --bearer-token-env, --oauth-* and --proxy are for --on-miss forward URL")
    forward = None
    if forward_url:
        upstream = parse_target(forward_url)
        access = args.client.resolve(upstream.url)
        access.headers_now()  # a token endpoint that says no: one line at start, not an error per request
        forward = Forwarder(upstream, access=access)
    serve(plans.load(args.trace, sessions=args.sessions or None), args.transport, host=args.host, port=args.port,
          json_response=args.json_response, forward=forward, pace=pacing, allowed_hosts=args.allowed_hosts,
          allowed_origins=args.allowed_origins)
