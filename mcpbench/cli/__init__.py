"""The `mcpbench` command line: thin click commands over the library.

Imports stay inside commands: `mcp` is slow to import and `locust` patches the
whole process with gevent at import time, so neither may load for `tee`.
"""

import importlib
import os
import sys
from dataclasses import dataclass

import click

from mcpbench.ci.outputs import check_ci_outputs, ci_options, write_ci_outputs
from mcpbench.cliutil import LazyGroup, OneLineErrors, check_output, map_errors, redact_option
from mcpbench.companions.options import TelemetryOptions, telemetry_options

# Exit status for a command that could not be started (as shells use).
EXIT_NOT_FOUND = 127


@click.group(cls=OneLineErrors)
@click.version_option(package_name="mcpbench")
def main() -> None:
    """Record, replay and load-test Model Context Protocol traffic."""


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Trace file (default: results/traces/<time>-<command>.jsonl).")
@redact_option
@click.option("--live", is_flag=True, help="Show the live view of the recording on the terminal stderr is on (q closes it; see README).")
@click.option("--wrapped-by", hidden=True, metavar="MARK", help="Set by `mcpbench wrap` in a host's config: marks the entry as its own.")
@telemetry_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@map_errors
def tee(**given):
    """Run a stdio MCP server COMMAND and record its traffic, passing it through untouched.

    Put it in front of the server command in a host's mcpServers config.

    Example: mcpbench tee --out s.jsonl -- python -m my_server
    """
    _tee(TeeArgs(**given))


@dataclass(frozen=True, kw_only=True)
class TeeArgs:
    """`tee`'s options, as given (click's names and values)."""

    out: str | None
    redact: tuple[str, ...]
    live: bool
    wrapped_by: str | None
    otlp: str | None
    metrics: str | None
    service_name: str
    command: tuple[str, ...]


def _tee(args: TeeArgs) -> None:
    from mcpbench.files.outputs import refuse_overwrite
    from mcpbench.protocol.errors import TargetError
    from mcpbench.stdio.tee import run_tee

    check_output(args.out, "--out")
    # `tee --out s.jsonl -- mcpbench serve-trace s.jsonl` would empty the recording it serves.
    files = [part.partition("=")[2] if part.startswith("-") else part for part in args.command[1:]]
    refuse_overwrite(
        [("--out", args.out)],
        # The trace in the host's stream (`--out /dev/stdout`) would break the session it records.
        [*((f"the session's {name}", fd) for name, fd in (("stdin", 0), ("stdout", 1)) if not _is_device(fd)),
         *(("a file the server command names", name) for name in files if os.path.isfile(name))],
    )
    options = TelemetryOptions.parse(args.otlp, args.metrics, args.service_name)
    telemetry = None
    if options.any:
        from mcpbench.telemetry.sink import LineFeed

        def telemetry(writer):  # called in the recorder process
            return LineFeed(options, str(writer.path), writer.header_line)
    try:
        status = run_tee(list(args.command), args.out, args.redact, live=args.live, telemetry=telemetry)
    except TargetError as exc:
        from mcpbench.trace.redact import Redactor

        click.echo(f"mcpbench: {Redactor(args.redact).text(str(exc))}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    sys.exit(status)


def _is_device(fd: int) -> bool:
    """Whether `fd` is a terminal or /dev/null (not a stream a trace could corrupt), or closed."""
    import stat

    try:
        return stat.S_ISCHR(os.fstat(fd).st_mode)
    except OSError:
        return True


@main.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="A machine summary: counts and latency percentiles per method, violations.")
@click.option("--strict", is_flag=True, help="Exit 1 when the trace shows protocol violations.")
@click.option("--follow", "-f", is_flag=True, help="Watch the trace as it is written: a live view on a terminal, one line per event in a pipe.")
@ci_options
@map_errors
def inspect(**given):
    """Show the sessions of a TRACE: handshake, requests with latency and outcome, violations, stderr.

    Exit status: 0, or 1 with --strict when a session broke a protocol rule; 2 for an unreadable trace.
    With --follow: 0 on `q` (or once a piped trace is complete), 2 for a trace that cannot be
    followed, 3 for a terminal too small for the view, 130 on Ctrl-C. --junit-xml and --summary-md
    name each violation as a failure (session, trace line, rule).

    Example: mcpbench inspect results/traces/session.jsonl
    """
    _inspect(InspectArgs(**given))


@dataclass(frozen=True, kw_only=True)
class InspectArgs:
    """`inspect`'s options, as given."""

    trace: str
    as_json: bool
    strict: bool
    follow: bool
    junit_xml: str | None
    summary_md: str | None


def _inspect(args: InspectArgs) -> None:
    if args.follow:
        if args.as_json or args.strict or args.junit_xml or args.summary_md:
            raise click.UsageError("--follow shows the trace as it grows: it takes neither --json, --strict, "
                                   "--junit-xml nor --summary-md")
        from mcpbench.live import run_live

        sys.exit(run_live(args.trace))
    import orjson

    from mcpbench.analysis.inspect import render, suite, summarize
    from mcpbench.files.outputs import refuse_overwrite

    refuse_overwrite([("--junit-xml", args.junit_xml), ("--summary-md", args.summary_md)], [("the trace being inspected", args.trace)])
    check_ci_outputs(args.junit_xml, args.summary_md)
    report = summarize(args.trace)
    write_ci_outputs([suite(report)], "mcpbench inspect", args.junit_xml, args.summary_md)
    if args.as_json:
        sys.stdout.buffer.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        click.echo(render(report))
    if report.torn:
        click.echo(f"mcpbench: note: {report.torn}", err=True)
    sys.exit(report.exit_code(strict=args.strict))


@main.command("run")
@click.option("--out", type=click.Path(file_okay=False), help="Folder for this run (default: results/<time>-run/).")
@map_errors
def run_main_job(out):
    """The main job on the built-in defaults: record, replay, load and report; ends with report.html's path.

    Example: mcpbench run
    """
    from pathlib import Path

    from mcpbench.cli.pipeline import run

    check_output(out, "--out", folder=True)
    run(Path(out) if out else None, say=click.echo)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="The HTML file (default: report.html beside the first PATH, or in it when it is a folder).")
@map_errors
def report(paths, out):
    """Write one self-contained report.html from PATHS: traces, load runs, replay reports, lab runs, run folders.

    Example: mcpbench report results/20261203T120000-run
    """
    from mcpbench.analysis.report import write_report

    path, lines = write_report(list(paths), out)
    for line in lines:
        click.echo(line)
    click.echo(f"mcpbench: wrote {path}")


@main.group("trace", cls=LazyGroup)
def trace_group() -> None:
    """Work on trace files."""


@trace_group.command("finish")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@map_errors
def finish_traces(traces):
    """Write each stdio TRACE whose tee was killed complete, from the spool beside it, and delete the spool.

    A tee killed with its recorder (a host killing its process group, the OOM killer) leaves the
    rest of its trace in TRACE.spool. Every command reads such a trace complete and changes
    neither file; this writes the trace complete. A trace still being recorded is left alone, so
    is one without a spool. A tee killed while another recorded to the same --out left its sessions
    in a part beside TRACE: they are added. The next `mcpbench tee` to the same --out does this first too.

    Exit status: 0; 2 for a trace that cannot be read or written, or whose spool does not continue it.

    Example: mcpbench trace finish results/traces/*.jsonl
    """
    from mcpbench.protocol.errors import TraceError
    from mcpbench.trace import shared, spool

    for path in traces:
        if not os.path.isfile(path) and not shared.parts(path):
            raise TraceError(f"{path}: cannot read trace: no such file")
        if (claim := shared.claim(path)) is not None:  # no tee records to it: the parts killed tees left go in
            try:
                for part in shared.fold(path):
                    click.echo(f"mcpbench: added the sessions of {part.name} to {path} (its tee was killed)")
            finally:
                os.close(claim)
        if not spool.spool_path(path).exists():
            click.echo(f"mcpbench: {path}: complete (no spool beside it)")
        elif (added := spool.finish(path)) is not None:
            click.echo(f"mcpbench: finished {path} ({len(added.lines)} events from its spool)")
        elif spool.live(path):
            click.echo(f"mcpbench: {path}: still being recorded (its tee holds the spool): left alone")
        else:
            raise TraceError(f"{path}: its spool {spool.spool_path(path)} does not continue it (another recording's?): both left as they are")


@trace_group.command("merge")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="The merged trace (may be one of TRACES).")
@map_errors
def merge_command(**given):
    """Write the events of TRACES, source after source, as one trace: each keeps its sessions.

    The header is the first trace's. A trace whose tee was killed is read complete (from its spool).

    Exit status: 0; 2 for a trace that cannot be read, or an --out that cannot be written.

    Example: mcpbench trace merge probe.jsonl calls.jsonl --out session.jsonl
    """
    _merge(MergeArgs(**given))


@dataclass(frozen=True, kw_only=True)
class MergeArgs:
    """`trace merge`'s options, as given."""

    traces: tuple[str, ...]
    out: str


def _merge(args: MergeArgs) -> None:
    from pathlib import Path

    from mcpbench.protocol.errors import TraceError
    from mcpbench.trace.merge import merge_traces
    from mcpbench.trace.writer import is_replaceable

    check_output(args.out, "--out")
    if not is_replaceable(Path(args.out)):
        raise TraceError(f"{args.out}: exists and is not a trace: refusing to overwrite it; choose another path")
    merged = merge_traces(list(args.traces), args.out)
    click.echo(f"mcpbench: merged {len(args.traces)} trace(s) into {merged}")


BENCHMARKS = (
    "tee", "proxy", "replay", "loadgen", "analysis", "balancer", "mock", "live", "telemetry", "soak", "compare", "fuzz",
)


@main.command()
@click.argument("name", type=click.Choice(BENCHMARKS))
@click.option("--quick", is_flag=True, help="A short run (for smoke tests), not for figures.")
@map_errors
def bench(name, quick):
    """Run benchmark NAME; writes results/bench/NAME.json and a chart.

    Example: mcpbench bench tee
    """
    module = importlib.import_module(f"mcpbench.bench.{name}")
    path = module.run(quick=quick)
    click.echo(f"mcpbench: wrote {path}")


def _register() -> None:
    # Each capability owns its commands; they are imported when one of them runs (cliutil.LazyGroup), so a
    # command's process loads its own capability only (0.1 s less CPU at each start, `lab serve` included).
    trace_group.lazy["import"] = "mcpbench.record.cli:trace_import"
    main.lazy.update({
        "lab": "mcpbench.lab.cli:lab", "faults": "mcpbench.proxies.cli:faults", "record": "mcpbench.record.cli:record",
        "addon-path": "mcpbench.record.cli:addon_path", "export": "mcpbench.telemetry.cli:export",
        "replay": "mcpbench.replay.cli:replay", "diff": "mcpbench.replay.cli:diff", "serve-trace": "mcpbench.replay.cli:serve_trace",
        "load": "mcpbench.load.cli:load", "capacity": "mcpbench.capacity.cli:capacity", "compare": "mcpbench.compare.cli:compare",
        "probe": "mcpbench.probe.cli:probe", "fuzz": "mcpbench.fuzz.cli:fuzz", "wrap": "mcpbench.wrap.cli:wrap",
        "unwrap": "mcpbench.wrap.cli:unwrap",
    })


_register()
