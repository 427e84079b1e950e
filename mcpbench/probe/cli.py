"""`mcpbench probe URL`: the command (register with `main.add_command(probe)`)."""

import sys
from dataclasses import dataclass

import click

from mcpbench.auth.options import ClientArgs, client_options
from mcpbench.cliutil import check_output, map_errors
from mcpbench.protocol.http import INSTANCE

# One request may take at most this long: the shortest check's bound leaves room for one request.
MAX_TIMEOUT = 6.0


class BadProbeOption(click.UsageError):
    """An option value the probe cannot use (exit 2)."""


def _seconds(value: str | None, option: str, low: float, high: float) -> float | None:
    from mcpbench.measures.durations import parse_duration

    if value is None:
        return None
    try:
        seconds = parse_duration(value, option)
    except ValueError as exc:
        raise BadProbeOption(str(exc)) from None
    if not low <= seconds <= high:
        raise BadProbeOption(f"{option} {value}: a time bound of {low:g} s to {high:g} s ({_why(option)})")
    return seconds


def _why(option: str) -> str:
    return "the checks' own bounds are 6 to 25 s" if option == "--timeout" else "shorter shows no deployment's timeout, longer is no probe"


@click.command("probe")
@click.argument("url")
@click.option("--only", multiple=True, metavar="CHECK[,CHECK]", help="Run only these checks: versions, sessions, unknown, resume, buffering, idle, churn, origin, auth, "
              "discover, headers, results, listen, cancel, state, tasks.")
@click.option("--skip", multiple=True, metavar="CHECK[,CHECK]", help="Leave these checks out.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write every figure measured to FILE (JSON).")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Write the table and a chart per check to FILE (self-contained HTML).")
@click.option("--strict", is_flag=True, help="Exit 1 on a warning too, not only on a failed check.")
@click.option("--sessions", type=click.IntRange(1, 1000), default=50, show_default=True, help="Check sessions: concurrent sessions.")
@click.option("--calls", type=click.IntRange(1, 100), default=5, show_default=True, help="Check sessions: calls per session.")
@click.option("--spike", type=click.IntRange(1, 5000), default=100, show_default=True, help="Check churn: sessions opened and ended in the spike.")
@click.option("--idle", "idle_up_to", metavar="UP_TO", help="Run the idle check (opt-in): watch idle streams this long (2s to 30m, such as 2m).")
@click.option("--direct", metavar="URL", help="Check buffering: the same server without the deployment in front, as the reference.")
@click.option("--progress-tool", metavar="'NAME {JSON}'", help="A tool that reports progress, with its arguments (default: the lab's slow, when the server has it).")
@click.option("--timeout", default="5s", show_default=True, metavar="T", help=f"How long one request may take (at most {MAX_TIMEOUT:g} s).")
@click.option("--instance-header", default=INSTANCE, show_default=True, metavar="NAME", help="The response header naming the instance that served a request.")
@client_options
@map_errors
def probe(**given):
    """Is this deployment ready? Run bounded checks against an HTTP MCP endpoint and print one table.

    URL is a Streamable HTTP endpoint (http(s)://HOST/mcp) or legacy HTTP+SSE (sse+http(s)://HOST/sse).
    Each check says pass, warn, fail or n/a, with the evidence measured and what to change. The
    default probe takes under 2 minutes; --idle adds its watch.

    Requests carry the headers, bearer token or OAuth token of the options below (as replay and load
    take them) and go through --proxy or HTTPS_PROXY/HTTP_PROXY; the auth check's own request leaves
    the credentials out, to see the challenge.

    Exit status: 0, or 1 when a check failed (--strict: or warned); 2 for unusable input (a bad
    option, credentials needed or refused); 3 when the endpoint cannot be reached or is not MCP.

    Example: mcpbench probe http://127.0.0.1:8101/mcp --json probe.json
    """
    _probe(ProbeArgs(**given))


@dataclass(frozen=True, kw_only=True)
class ProbeArgs(ClientArgs):
    """`probe`'s options, as given (click's names and values)."""

    url: str
    only: tuple[str, ...]
    skip: tuple[str, ...]
    json_out: str | None
    html_out: str | None
    strict: bool
    sessions: int
    calls: int
    spike: int
    idle_up_to: str | None
    direct: str | None
    progress_tool: str | None
    timeout: str
    instance_header: str


def _probe(args: ProbeArgs) -> None:
    import orjson

    from mcpbench.files.outputs import write_atomic
    from mcpbench.probe.checks.idle import MAX_IDLE, MIN_IDLE
    from mcpbench.probe.run import probe as run_probe
    from mcpbench.probe.run import select
    from mcpbench.probe.target import ProbeSettings, ProgressCall, parse_url
    from mcpbench.probe.verdicts import render
    from mcpbench.probe.wire import ProbeOptions

    url = args.url
    _, http_url = parse_url(url)
    access = args.client.resolve(http_url)  # a header, variable, file or proxy that cannot be used: one line, exit 2
    if args.direct is not None:
        parse_url(args.direct)
    checks = select(args.only, args.skip, idle_asked=args.idle_up_to is not None)
    settings = ProbeSettings(
        sessions=args.sessions, calls=args.calls, spike=args.spike, direct=args.direct,
        idle=_seconds(args.idle_up_to, "--idle", MIN_IDLE, MAX_IDLE),
        progress=ProgressCall.parse(args.progress_tool) if args.progress_tool else None,
    )
    options = ProbeOptions(access=access, timeout=_seconds(args.timeout, "--timeout", 0.1, MAX_TIMEOUT),
                           instance_header=args.instance_header.lower())
    check_output(args.json_out, "--json")
    check_output(args.html_out, "--html")
    access.headers_now()  # a token endpoint that refuses or cannot be found: one line, before any check
    run = run_probe(url, checks, options=options, settings=settings, say=lambda line: click.echo(line, err=True))
    click.echo(render(run.rows))
    data = run.to_json()
    if args.json_out:
        write_atomic(args.json_out, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    if args.html_out:
        from mcpbench.analysis.report import probe_page

        write_atomic(args.html_out, probe_page(data).encode("utf-8"))
    click.echo(f"mcpbench: probe of {url} took {run.seconds:.1f} s", err=True)
    sys.exit(run.exit_code(strict=args.strict, credentials_given=bool(access.credentials)))
