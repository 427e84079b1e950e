"""`mcpbench record`, `mcpbench addon-path`: thin commands over `mcpbench.record` (`mcpbench export`: `telemetry/cli.py`).

Registered in the main group by `mcpbench.cli`. mitmproxy is imported only inside `record`.
"""

from dataclasses import dataclass

import click

from mcpbench.cliutil import check_output, map_errors, redact_option
from mcpbench.companions.options import TelemetryOptions, telemetry_options
from mcpbench.record import DEFAULT_UPSTREAM_TIMEOUT


@click.command()
@click.option("--upstream", required=True, metavar="URL", help="The HTTP MCP server, e.g. http://127.0.0.1:8000/mcp.")
@click.option("--listen", default="127.0.0.1:8081", show_default=True, metavar="HOST:PORT", help="Where clients connect (port 0: any free port).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Trace file (default: results/traces/<time>-<upstream>.jsonl).")
@click.option(
    "--redact", multiple=True, metavar="NAME|PATH",
    help="Also redact this header / JSON key (name) or JSON path (a.b.*.c). Repeatable.",
)
@click.option("--upstream-timeout", type=click.IntRange(0), default=DEFAULT_UPSTREAM_TIMEOUT, show_default=True, metavar="SECONDS",
              help="An upstream that has not begun its answer by then: the client gets a 504, the trace an error (0: no limit).")
@click.option("--upstream-ca", type=click.Path(dir_okay=False), metavar="FILE",
              help="Trust the CA certificates in this PEM file (only them) for an https upstream, e.g. a private or self-signed one.")
@click.option("--upstream-insecure", is_flag=True, help="Do not verify an https upstream's certificate at all.")
@click.option("--live", is_flag=True, help="Show the live view of the recording on this terminal (q closes it, Ctrl-C stops; see README).")
@click.option("--host-header", type=click.Choice(("auto", "client", "upstream")), default="auto", show_default=True,
              help="The Host the upstream gets: the client's, the upstream's address, or auto (the client's for a "
                   "loopback upstream, which may check it against DNS rebinding; the upstream's for a remote one). "
                   "The trace records the client's either way.")
@telemetry_options
@map_errors
def record(**given):
    """Record an HTTP MCP server's traffic: a reverse proxy (mitmproxy, in-process) in front of --upstream.

    Prints the URL clients should use instead of the server's. Streamable HTTP (every era) and
    legacy HTTP+SSE; SSE passes through unbuffered. Ctrl-C stops it with the trace complete.

    Example: mcpbench record --upstream http://127.0.0.1:8000/mcp --listen 127.0.0.1:8081 --out s.jsonl
    """
    _record(RecordArgs(**given))


@dataclass(frozen=True, kw_only=True)
class RecordArgs:
    """`record`'s options, as given (click's names and values)."""

    upstream: str
    listen: str
    out: str | None
    redact: tuple[str, ...]
    upstream_timeout: int
    upstream_ca: str | None
    upstream_insecure: bool
    live: bool
    host_header: str
    otlp: str | None
    metrics: str | None
    service_name: str


def _record(args: RecordArgs) -> None:
    from mcpbench.proxies.host import UpstreamTls
    from mcpbench.record.proxy import run_record

    check_output(args.out, "--out")
    telemetry = TelemetryOptions.parse(args.otlp, args.metrics, args.service_name)
    tls = UpstreamTls(ca=args.upstream_ca, insecure=args.upstream_insecure)
    run_record(args.upstream, listen=args.listen, out=args.out, redact=args.redact, upstream_timeout=args.upstream_timeout,
               tls=tls, live=args.live, telemetry=telemetry, host_header=args.host_header)


@click.command("import")
@click.option("--har", "har", required=True, type=click.Path(dir_okay=False), help="The HAR file (a browser's network panel, a proxy, `mcpbench export --har`).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Trace file (default: results/traces/<time>-<HAR name>.jsonl).")
@redact_option
@map_errors
def trace_import(**given):
    """Make a trace of the MCP exchanges in a HAR file, for inspect, replay, diff and serve-trace.

    Both HTTP transports, SSE answers as far as the HAR kept their bodies; what the HAR lacks (a
    time per SSE event, bodies it left out) is said on stderr, not invented.

    Exit status: 0; 2 for a file that is not a HAR (not JSON, cut short) or holds no MCP exchange
    (nothing written then).

    Example: mcpbench trace import --har session.har --out s.jsonl
    """
    _trace_import(TraceImportArgs(**given))


@dataclass(frozen=True, kw_only=True)
class TraceImportArgs:
    """`trace import`'s options, as given."""

    har: str
    out: str | None
    redact: tuple[str, ...]


def _trace_import(args: TraceImportArgs) -> None:
    from pathlib import Path

    from mcpbench.files.outputs import refuse_overwrite
    from mcpbench.record.har_import import import_har
    from mcpbench.trace.writer import default_trace_path

    check_output(args.out, "--out")
    refuse_overwrite([("--out", args.out)], [("the HAR", args.har)])
    result = import_har(args.har, args.out or default_trace_path(Path(args.har).stem), args.redact)
    for note in result.notes:
        click.echo(f"mcpbench: note: {note}", err=True)
    click.echo(f"mcpbench: wrote {result.path}: {result.entries} HAR entries, {result.sessions} sessions, "
               f"{result.calls} calls, {result.mcp_messages} messages")


@click.command("addon-path")
def addon_path():
    """Print the absolute path of the mitmproxy addon, for mitmdump/mitmproxy/mitmweb -s.

    Options: --set mcpbench_out=FILE (trace file), --set mcpbench_redact=NAME (repeatable),
    --set mcpbench_upstream_timeout=SECONDS (a 504 for an upstream that has not begun its answer; default 30, 0: none),
    --set mcpbench_host_header=auto|client|upstream (the Host a reverse-mode upstream gets; auto: the client's
    for a loopback upstream).

    Example: mitmdump --mode reverse:http://127.0.0.1:8000 -s "$(mcpbench addon-path)" --set mcpbench_out=s.jsonl
    """
    from mcpbench.record import ADDON_PATH

    click.echo(str(ADDON_PATH))
