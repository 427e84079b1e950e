"""`mcpbench faults` (a fault proxy in front of an HTTP MCP server, `faults stdio` around a stdio one)
and the fault options `lab up` shares. mitmproxy is imported inside the commands."""

import sys
from dataclasses import dataclass

import click

from mcpbench.cliutil import check_output, map_errors
from mcpbench.companions.options import TelemetryOptions, telemetry_options

# The `parse_plan` argument each option fills (the option's name with dashes).
FAULT_OPTION_NAMES = ("cut_streams_after", "idle_timeout", "drop", "drop_as", "delay", "faults_from", "faults_until", "seed", "buffer_sse")


def fault_options(func):
    """The fault options, as `mcpbench faults` and `lab up` take them; values are checked by `parse_plan`."""
    options = [
        click.option("--cut-streams-after", metavar="T", help="Cut every SSE stream (GET stream, SSE answer, legacy /sse) T after it opened (61s, 500ms)."),
        click.option("--idle-timeout", metavar="T", help="Cut a client connection on which nothing moved for T."),
        click.option("--drop", metavar="SHARE", help="Drop this share of requests (5% or 0.05)."),
        click.option("--drop-as", type=click.Choice(("reset", "502", "503")), help="How a dropped request fails (default: reset, before it is forwarded)."),
        click.option("--delay", metavar="D±J", help="Delay each request by D with jitter J (20ms±10ms, or 20ms+-10ms)."),
        click.option("--faults-from", metavar="T", help="Faults start T after the start (default: at once)."),
        click.option("--faults-until", metavar="T", help="Faults end T after the start (default: never)."),
        click.option("--seed", metavar="N", help="Seed of the drop and jitter draws (repeatable runs)."),
        click.option("--buffer-sse", is_flag=True, default=None, help="Hold every SSE stream back until it ends, as a buffering proxy does."),
        click.option("--fault-log", type=click.Path(dir_okay=False), help="Append one JSON line per injected fault to FILE."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def fault_texts(kwargs: dict) -> dict:
    """The `parse_plan` texts out of a command's keyword arguments (removed from them)."""
    return {name: kwargs.pop(name) for name in FAULT_OPTION_NAMES}


def fault_argv(texts: dict, log: str | None) -> list[str]:
    """The fault options back as command-line arguments (for a detached `lab up`)."""
    argv = [f"--{name.replace('_', '-')}" + ("" if value is True else f"={value}") for name, value in texts.items() if value]
    return argv + ([f"--fault-log={log}"] if log else [])


@click.group(invoke_without_command=True)
@click.option("--upstream", metavar="URL", help="The HTTP MCP server, such as http://127.0.0.1:8000/mcp (or …/sse).")
@click.option("--listen", default="127.0.0.1:8082", show_default=True, metavar="HOST:PORT", help="Where clients connect (port 0: a free one).")
@fault_options
@telemetry_options
@click.pass_context
@map_errors
def faults(ctx, **given):
    """Inject faults between MCP clients and an HTTP server: cut streams, idle cuts, drops, delay.

    Prints the URL to use; runs until Ctrl-C. `mcpbench faults stdio` wraps a stdio server instead.

    Example: mcpbench faults --upstream http://127.0.0.1:8000/mcp --listen 127.0.0.1:8082 --cut-streams-after 61s --drop 5% --drop-as 503
    """
    if ctx.invoked_subcommand is not None:
        return
    texts = fault_texts(given)
    _faults(FaultsArgs(faults=texts, **given))


@dataclass(frozen=True, kw_only=True)
class FaultsArgs:
    """`faults`'s options, as given (`faults`: the fault options' texts, `fault_texts`)."""

    upstream: str | None
    listen: str
    faults: dict
    fault_log: str | None
    otlp: str | None
    metrics: str | None
    service_name: str


def _faults(args: FaultsArgs) -> None:
    if not args.upstream:
        raise click.UsageError("--upstream URL is required (or use `mcpbench faults stdio`)")
    from mcpbench.proxies.faultplan import parse_plan
    from mcpbench.proxies.faultproxy import run_faults

    parse_plan(**args.faults)  # a bad value is one line before anything starts
    check_output(args.fault_log, "--fault-log")
    telemetry = TelemetryOptions.parse(args.otlp, args.metrics, args.service_name)
    run_faults(args.upstream, listen=args.listen, texts=args.faults, log=args.fault_log, telemetry=telemetry)


@faults.command("stdio", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--kill-after-messages", type=click.IntRange(min=1), metavar="N", help="Kill the server once N messages passed (both directions, unless --count says one).")
@click.option("--kill-after", metavar="T", help="Kill the server T after it started (10s, 500ms).")
@click.option("--count", type=click.Choice(("both", "to-server", "from-server")), default="both", show_default=True, help="Which messages --kill-after-messages counts.")
@click.option("--fault-log", type=click.Path(dir_okay=False), help="Append one JSON line for the kill to FILE.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@map_errors
def stdio(**given):
    """Run a stdio MCP server COMMAND, passing bytes through untouched, and kill it at a time or after N messages.

    Exits with the server's status (a killed server: 128 + 9).

    Example: mcpbench faults stdio --kill-after-messages 6 -- mcpbench lab serve
    """
    _stdio(StdioFaultsArgs(**given))


@dataclass(frozen=True, kw_only=True)
class StdioFaultsArgs:
    """`faults stdio`'s options, as given."""

    kill_after_messages: int | None
    kill_after: str | None
    count: str
    fault_log: str | None
    command: tuple[str, ...]


def _stdio(args: StdioFaultsArgs) -> None:
    from mcpbench.proxies.faultplan import parse_time
    from mcpbench.proxies.stdio_faults import run_killer

    if args.kill_after_messages is None and args.kill_after is None:
        raise click.UsageError("give --kill-after-messages N or --kill-after T")
    seconds = parse_time(args.kill_after, "--kill-after", positive=True) if args.kill_after else None
    check_output(args.fault_log, "--fault-log")
    sys.exit(run_killer(list(args.command), messages=args.kill_after_messages, seconds=seconds, count=args.count, log=args.fault_log))
