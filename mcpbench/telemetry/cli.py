"""`mcpbench export`: a trace as HAR (`record/har.py`), or its calls as OpenTelemetry spans over OTLP."""

import sys
from dataclasses import dataclass

import click

from mcpbench.cliutil import check_output, map_errors
from mcpbench.companions.options import DEFAULT_SERVICE_NAME, TelemetryOptions


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--har", "har", is_flag=True, help="Write HAR 1.2 (opens in a browser's network panel); one TRACE.")
@click.option("--out", "-o", type=click.Path(dir_okay=False, writable=True), help="With --har: write to this file instead of stdout.")
@click.option("--otlp", metavar="URL", help="Send each call as a span over OTLP/HTTP (protobuf) to URL, e.g. http://127.0.0.1:4318.")
@click.option("--follow", "-f", is_flag=True, help="With --otlp or --metrics: follow one TRACE as it is written and send live, until the recording ends.")
@click.option("--metrics", metavar="HOST:PORT", help="With --follow: serve Prometheus metrics on http://HOST:PORT/metrics.")
@click.option("--service-name", metavar="NAME", default=DEFAULT_SERVICE_NAME, show_default=True, help="The spans' service.name resource attribute.")
@click.option("--load-samples", is_flag=True, help="With --otlp: TRACES are load runs' samples.jsonl (a span per step, a trace per client session).")
@click.option("--until-eof", is_flag=True, hidden=True, help="With --follow: stop when standard input ends (a recorder's companion).")
@map_errors
def export(**given):
    """Export TRACES in another format: --har (an HTTP trace), or --otlp (spans, any transport).

    With --otlp each request and its answer is a span named as OpenTelemetry's MCP conventions say
    (`tools/call echo`), each session the parent span of its calls; a request that carried
    `_meta.traceparent` continues that trace. Exit status: 0; 2 for a trace that cannot be read;
    3 when the endpoint does not take the spans.

    Example: mcpbench export --otlp http://127.0.0.1:4318 results/traces/session.jsonl
    """
    _export(ExportArgs(**given))


@dataclass(frozen=True, kw_only=True)
class ExportArgs:
    """`export`'s options, as given."""

    traces: tuple[str, ...]
    har: bool
    out: str | None
    otlp: str | None
    follow: bool
    metrics: str | None
    service_name: str
    load_samples: bool
    until_eof: bool


def _export(args: ExportArgs) -> None:
    if args.har == bool(args.otlp or args.follow or args.metrics):
        raise click.UsageError("choose a format: --har, or --otlp URL (with --follow, or --follow --metrics HOST:PORT)")
    if args.har:
        if len(args.traces) != 1:
            raise click.UsageError("--har exports one TRACE")
        _export_har(args.traces[0], args.out)
        return
    if args.out:
        raise click.UsageError("--out is for --har; --otlp sends to its URL")
    if args.metrics and not args.follow:
        raise click.UsageError("--metrics serves a trace followed as it is written: add --follow")
    if not args.otlp and not args.metrics:
        raise click.UsageError("--follow sends somewhere: add --otlp URL or --metrics HOST:PORT")
    if args.load_samples and (args.follow or not args.otlp):
        raise click.UsageError("--load-samples sends a finished run's samples: give --otlp URL, without --follow")
    options = TelemetryOptions.parse(args.otlp, args.metrics, args.service_name)
    if args.load_samples:
        from mcpbench.telemetry.samples import export_samples

        for line in export_samples(list(args.traces), options):
            click.echo(line, err=True)
        return
    if args.follow:
        if len(args.traces) != 1:
            raise click.UsageError("--follow follows one TRACE")
        from mcpbench.telemetry.sink import follow as follow_trace

        follow_trace(args.traces[0], options, until_eof=args.until_eof)
        return
    from mcpbench.telemetry.sink import export_trace

    for line in export_trace(list(args.traces), options):
        click.echo(line, err=True)


def _export_har(trace: str, out: str | None) -> None:
    from mcpbench.files.outputs import refuse_overwrite, write_atomic
    from mcpbench.record.har import export_har

    check_output(out, "--out")
    refuse_overwrite([("--out", out)], [("the trace being exported", trace)])
    notes: list[str] = []
    data = export_har(trace, notes)
    if out:
        write_atomic(out, data)  # a failed export leaves no half file where a good one was
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    for note in notes:
        click.echo(f"mcpbench: note: {note}", err=True)
