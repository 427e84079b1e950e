"""Click commands `replay`, `diff` and `serve-trace`: parse, call the library, report.

Registered by the main CLI (`main.add_command(replay)` etc.). Expected failures
are `McpbenchError`s, turned into one line and their exit status by `cliutil.map_errors`.
"""

import signal
import sys
from pathlib import Path

import click

from mcpbench import cliutil
from mcpbench.auth.options import client_options
from mcpbench.cliutil import NON_NEGATIVE, POSITIVE, check_output, map_errors, redact_option, signal_status
from mcpbench.outputs import refuse_overwrite
from mcpbench.protocol.transports import TRANSPORTS



def compare_options(func):
    """Options shared by `replay` and `diff`: ignore rules, latency judgement, output."""
    options = [
        click.option("--ignore", "ignore", multiple=True, metavar="[METHOD[@NAME]:]PATH",
                     help="Do not compare values at this JSON path (wildcards * and **). Repeatable."),
        click.option("--ignore-file", "ignore_files", multiple=True, type=click.Path(dir_okay=False),
                     help="Rules from a file (JSON list, {\"ignore\": [...]}, or one a line). Repeatable."),
        click.option("--no-default-rules", is_flag=True, help="Compare UUIDs, timestamps, session ids and progress tokens too."),
        click.option("--latency-factor", type=NON_NEGATIVE, default=None, show_default=False,
                     help="Report a call as changed when FACTOR x slower than recorded (default 3; 0 turns it off)."),
        click.option("--latency-slack-ms", type=NON_NEGATIVE, default=None,
                     help="…and slower by more than this (default 250 ms)."),
        click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Also write the report as JSON."),
        click.option("--verbose", "-v", is_flag=True, help="List every call, also in long sessions."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _rules(ignore, ignore_files, no_default_rules, extra=()):
    from mcpbench.replay.compare import Rules, load_rules

    texts = list(ignore)
    for path in ignore_files:
        texts += load_rules(path)
    return Rules(texts + list(extra), defaults=not no_default_rules)


def _latency(factor, slack_ms):
    from mcpbench.replay.report import LATENCY_FACTOR, LATENCY_SLACK

    factor = LATENCY_FACTOR if factor is None else factor
    slack = LATENCY_SLACK if slack_ms is None else slack_ms / 1000
    return None if factor <= 0 else (factor, slack)


def _finish(report, report_path, verbose, recording_failed=None) -> None:
    from mcpbench.protocol.errors import TargetError, TraceWriteError
    from mcpbench.replay.report import render

    click.echo(render(report, verbose=verbose))
    if report_path:
        report.write_json(report_path)
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


@click.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--target", "-t", "target_text", required=True,
              help="stdio:COMMAND ARGS…, http(s)://HOST:PORT/mcp or sse+http(s)://HOST:PORT/sse.")
@click.option("--session", "sessions", multiple=True, metavar="ID", help="Replay only this recorded session. Repeatable.")
@click.option("--protocol-version", metavar="VERSION", help="Replay the same calls in this protocol version (e.g. 2026-07-28).")
@click.option("--pace", default="fast", show_default=True, metavar="fast|original|xN",
              help="Gaps between client messages: none, as recorded, or recorded divided by N.")
@click.option("--max-gap", type=POSITIVE, metavar="SECONDS", help="Cap any one gap (with --pace original or xN).")
@click.option("--timeout", type=POSITIVE, default=30.0, show_default=True, help="Seconds one request may wait for its answer.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the replay's own trace here.")
@click.option("--learn-noise", is_flag=True, help="Replay twice; every path that differs between the runs becomes an ignore rule.")
@click.option("--noise-file", type=click.Path(dir_okay=False),
              help="Where --learn-noise saves its rules (default: TRACE with .noise.json); reuse with --ignore-file.")
@redact_option
@compare_options
@client_options
@map_errors
def replay(trace, target_text, sessions, protocol_version, pace, max_gap, timeout, out, learn_noise, noise_file, redact,
           ignore, ignore_files, no_default_rules, latency_factor, latency_slack_ms, report_path, verbose, client):
    """Replay the client side of TRACE against TARGET and report every answer that changed.

    Sessions go in recorded order, each client message in recorded order, requests that were in
    flight together are sent together; server requests (sampling, elicitation, roots) are answered
    from the recording. Recorded credentials are hashed in traces: give your own (--header,
    --bearer-token-env, --oauth-*). Exit status: 0 nothing changed, 1 something changed, 2 unusable
    input, 3 the target could not be reached, broke off or is not an MCP server.

    Example: mcpbench replay s.jsonl --target "stdio:python -m my_server" --report r.json
    """
    from mcpbench.protocol.errors import McpbenchError
    from mcpbench.replay import plan as plans
    from mcpbench.replay.compare import save_rules
    from mcpbench.replay.engine import Pace, Replayer
    from mcpbench.replay.report import build, learn_noise as learn
    from mcpbench.target import STDIO, parse_target
    from mcpbench.trace.redact import Redactor
    from mcpbench.trace.writer import TraceWriter

    noise_path = (noise_file or Path(str(trace)).with_suffix(".noise.json")) if learn_noise else None
    refuse_overwrite(
        [("--out", out), ("--report", report_path), ("--noise-file", noise_path)],
        [("the trace being replayed", trace), *(("--ignore-file", name) for name in ignore_files)],
    )
    try:
        for path, option in ((out, "--out"), (report_path, "--report"), (noise_file, "--noise-file")):
            check_output(path, option)
        target = parse_target(target_text)
        access = client.resolve(target.url)
        rules = _rules(ignore, ignore_files, no_default_rules)
        pacing = Pace.parse(pace, max_gap)
        recorded = plans.load(trace, sessions=sessions or None)
        access.headers_now()  # a token endpoint that says no, or cannot be found: one line, now
    except McpbenchError as exc:
        _failed_report("replay", trace, target_text, exc, report_path)
        raise
    if recorded.credentials and not access.credentials:
        click.echo("mcpbench: the recording sent Authorization (hashed in the trace, never replayed); this replay "
                   "sends none: give --header, --bearer-token-env or --oauth-* for a protected server", err=True)

    def run_once(writer=None):
        replayer = Replayer(target, protocol_version=protocol_version, pace=pacing, timeout=timeout, writer=writer, access=access)
        return replayer.run(recorded)

    if learn_noise:
        first = run_once()
        if first.aborted:
            report = build(first, rules, latency=_latency(latency_factor, latency_slack_ms), stdio_target=target.transport == STDIO)
            _finish(report, report_path, verbose)
    redactor = Redactor(redact)
    writer = TraceWriter(out, transport=target.transport, redactor=redactor,
                         header={"replay_of": str(trace), "target": redactor.url(str(target)), "protocol_version": protocol_version}) if out else None
    try:
        run = run_once(writer)
    finally:
        if writer:
            writer.close()
    if learn_noise and not run.aborted:
        learned = learn(first, run, rules)
        path = Path(noise_path)
        save_rules(path, learned, source=str(trace))
        click.echo(f"mcpbench: learned {len(learned)} noise rule(s) → {path}", err=True)
        rules = rules.extend(learned)
    report = build(run, rules, latency=_latency(latency_factor, latency_slack_ms), stdio_target=target.transport == STDIO,
                   redactor=redactor if redact else None)
    if run.interrupted:
        report.abort_status = signal_status(cliutil.received or signal.SIGINT)
    if writer and not writer.failed:
        click.echo(f"mcpbench: replay trace → {writer.path}", err=True)
    _finish(report, report_path, verbose, writer.failed if writer else None)


@click.command(name="diff")
@click.argument("trace_a", type=click.Path(dir_okay=False))
@click.argument("trace_b", type=click.Path(dir_okay=False))
@compare_options
@map_errors
def diff(trace_a, trace_b, ignore, ignore_files, no_default_rules, latency_factor, latency_slack_ms, report_path, verbose):
    """Compare two traces call by call, without any server (sessions paired in order).

    Exit status: 0 nothing changed, 1 something changed, 2 a trace could not be read.

    Example: mcpbench diff build-41.jsonl build-42.jsonl --ignore 'result.content[*].text.id'
    """
    from mcpbench.protocol.errors import McpbenchError
    from mcpbench.replay import plan as plans
    from mcpbench.replay.report import diff_traces

    refuse_overwrite(
        [("--report", report_path)],
        [("TRACE_A", trace_a), ("TRACE_B", trace_b), *(("--ignore-file", name) for name in ignore_files)],
    )
    try:
        check_output(report_path, "--report")
        rules = _rules(ignore, ignore_files, no_default_rules)
        a, b = plans.load(trace_a), plans.load(trace_b)
    except McpbenchError as exc:
        _failed_report("diff", trace_a, trace_b, exc, report_path)
        raise
    report = diff_traces(a, b, rules, latency=_latency(latency_factor, latency_slack_ms))
    _finish(report, report_path, verbose)


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
def serve_trace(trace, forward_url, transport, host, port, json_response, sessions, on_miss, pace, max_gap,
                allowed_hosts, allowed_origins, client):
    """Serve TRACE as a mock MCP server that answers exactly as recorded.

    Requests match on method and params (ids and _meta ignored); repeated identical requests get
    their answers in recorded order. An unrecorded request gets a JSON-RPC error naming the nearest
    recorded one, or with `--on-miss forward URL` the answer of a live server (one upstream session
    per client session, opened on its first miss), sent with the credentials and through the proxy
    the options give (--header, --bearer-token-env, --oauth-*, --proxy).

    Example: mcpbench serve-trace s.jsonl --transport streamable-http --on-miss forward http://127.0.0.1:8101/mcp
    """
    from mcpbench.replay import plan as plans
    from mcpbench.replay.engine import Pace
    from mcpbench.replay.forward import Forwarder
    from mcpbench.replay.mock import serve
    from mcpbench.replay.mock_play import DEFAULT_MAX_GAP
    from mcpbench.target import parse_target

    if on_miss == "forward" and not forward_url:
        raise click.UsageError("--on-miss forward needs the live server's URL: --on-miss forward URL")
    if on_miss != "forward" and forward_url:
        raise click.UsageError(f"unexpected argument {forward_url!r} (a URL goes after --on-miss forward)")
    pacing = Pace.parse(pace, DEFAULT_MAX_GAP if max_gap is None else max_gap)
    if client.given and not forward_url:
        raise click.UsageError("--header, --bearer-token-env, --oauth-* and --proxy are for --on-miss forward URL")
    forward = None
    if forward_url:
        upstream = parse_target(forward_url)
        access = client.resolve(upstream.url)
        access.headers_now()  # a token endpoint that says no: one line at start, not an error per request
        forward = Forwarder(upstream, access=access)
    serve(plans.load(trace, sessions=sessions or None), transport, host=host, port=port, json_response=json_response,
          forward=forward, pace=pacing, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
