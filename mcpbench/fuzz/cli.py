"""`mcpbench fuzz TARGET`: the command (registered in `mcpbench/cli/__init__.py`)."""

import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from mcpbench.auth.options import ClientArgs, client_options
from mcpbench.ci.outputs import check_ci_outputs, ci_options, write_ci_outputs
from mcpbench.cliutil import POSITIVE, check_output, map_errors, positive_duration, stop_signals_noted

# Without --budget or --cases a run takes this long.
DEFAULT_BUDGET = "60s"


def seeds_from_traces(paths: tuple[str, ...]) -> dict[str, list]:
    """The arguments of every recorded tools/call, by tool, in recorded order (duplicates once)."""
    from mcpbench.trace.reader import read_trace

    seeds: dict[str, list] = {}
    for path in paths:
        for event in read_trace(path):
            msg = event.get("msg") if event.get("kind") == "message" and event.get("dir") == "c2s" else None
            if not isinstance(msg, dict) or msg.get("method") != "tools/call" or not isinstance(msg.get("params"), dict):
                continue
            name, arguments = msg["params"].get("name"), msg["params"].get("arguments") or {}
            if isinstance(name, str) and isinstance(arguments, dict) and arguments not in seeds.setdefault(name, []):
                seeds[name].append(arguments)
    return seeds


def eras(name: str) -> tuple[str, ...]:
    """The versions `--era` names: an era's (its latest version), a known version, or both eras' (handshake first)."""
    from mcpbench.protocol.versions import ERA_NAMES, era_version

    names = tuple(ERA_NAMES.values()) if name == "both" else (name,)
    versions = tuple(era_version(one) for one in names)
    if None in versions:
        raise click.BadParameter(f"{name!r}: not an era (handshake, 2026-07-28, both) or a known protocol version", param_hint="--era")
    return versions


@click.command("fuzz")
@click.argument("target")
@click.option("--trace", "traces", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="TRACE",
              help="Start from the tools/call arguments recorded in TRACE (repeatable): mutated before random ones.")
@click.option("--budget", metavar="T", help=f"Stop after this long (such as 30s, 5m; default {DEFAULT_BUDGET} unless --cases).")
@click.option("--cases", type=click.IntRange(1, 10_000_000), help="Stop after about this many calls (shrinking adds a few).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), help="The seed: the same seed against the same server sends the same cases.")
@click.option("--allow", multiple=True, metavar="TOOL", help="Call TOOL even if it is annotated destructive (repeatable).")
@click.option("--read-only-only", is_flag=True, help="Call only tools annotated readOnlyHint (and those --allow names).")
@click.option("--tool", "only", multiple=True, metavar="TOOL", help="Fuzz only TOOL (repeatable).")
@click.option("--skip", multiple=True, metavar="TOOL", help="Leave TOOL out (repeatable).")
@click.option("--protocol/--no-protocol", default=True, show_default=True,
              help="Also send the protocol cases (malformed JSON, odd ids, a batch, an oversized message, ...), each followed by a ping.")
@click.option("--era", default="handshake", show_default=True, metavar="ERA",
              help="The protocol era to fuzz in: handshake (initialize, then calls), 2026-07-28 (no handshake, each request's _meta "
                   "carries version and capabilities), both (one after the other, the bounds shared), or a handshake-era version.")
@click.option("--rate", type=POSITIVE, metavar="R", help="At most R calls a second (a shared server stays usable).")
@click.option("--hang-after", default="10s", show_default=True, metavar="T",
              help="A call this long without an answer or a sign of life (progress, a ping answered) is a hang.")
@click.option("--live-limit", default="60s", show_default=True, metavar="T",
              help="A call still showing life is waited for this long, then is a hang.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), metavar="FILE", help="Write the run and its findings to FILE (JSON).")
@click.option("--sarif", "sarif_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the findings as SARIF 2.1.0 to FILE (for code scanning): a rule per class, a result per finding.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Where the findings' traces go (default results/fuzz/<time>).")
@ci_options
@client_options
@map_errors
def fuzz(**given):
    """Find the inputs that crash, hang or leak in an MCP server; every finding a trace `mcpbench replay` reproduces.

    TARGET is a stdio command (stdio:CMD ARGS, run in a temporary folder of its own), a Streamable
    HTTP URL or a legacy SSE URL (sse+http://HOST/sse). The tools are discovered, and each is called
    with arguments generated from its inputSchema (Hypothesis), valid ones and ones breaking the
    schema one way at a time (a missing required property, a wrong type, an extra property, a
    boundary number, an odd or huge string, deep nesting), the --trace calls' arguments first.
    Each answer is judged: crash, hang, leak, accepted-invalid, output-schema, protocol,
    non-deterministic (a read-only or idempotent tool), slow, memory (a stdio server's).
    Protocol cases (malformed JSON, a wrong jsonrpc, odd ids, an unknown method, a notification for
    a request, a batch, an oversized message; on Streamable HTTP a call without a session, a wrong or no
    version header, 2026-07-28 Mcp-Method/Mcp-Name headers disagreeing with the body) go first, each followed by a ping the server must answer.
    On stdio and legacy SSE a call before the handshake is a session of its own. --era 2026-07-28 fuzzes
    without a handshake (server/discover first, the _meta envelope on every request); a tool answering
    input_required with a requestState is sent the retry with that state altered, which a server must refuse.
    A tool whose inputSchema is not valid JSON Schema is a protocol finding about the server.
    Tools annotated destructiveHint are never called unless --allow names them.

    Exit status: 0 nothing found, 1 findings, 2 unusable input, 3 the target cannot be reached or is not MCP.

    Example: mcpbench fuzz "stdio:python server.py" --budget 30s --seed 7 --json fuzz.json
    """
    _fuzz(FuzzArgs(**given))


@dataclass(frozen=True, kw_only=True)
class FuzzArgs(ClientArgs):
    """`fuzz`'s options, as given (click's names and values)."""

    target: str
    traces: tuple[str, ...]
    budget: str | None
    cases: int | None
    seed: int | None
    allow: tuple[str, ...]
    read_only_only: bool
    only: tuple[str, ...]
    skip: tuple[str, ...]
    protocol: bool
    era: str
    rate: float | None
    hang_after: str
    live_limit: str
    json_out: str | None
    sarif_out: str | None
    out_dir: str | None
    junit_xml: str | None
    summary_md: str | None


def _fuzz(args: FuzzArgs) -> None:
    from mcpbench.fuzz.cases import dumps
    from mcpbench.fuzz.findings import suite, table, write_traces
    from mcpbench.fuzz.judge import CLASSES
    from mcpbench.fuzz.run import Fuzzer, FuzzSettings
    from mcpbench.files.outputs import write_atomic
    from mcpbench.system.target import parse_target
    from mcpbench.trace.writer import DEFAULT_TRACE_DIR

    target = args.target
    parsed = parse_target(target)
    access = args.client.resolve(parsed.url)
    check_output(args.json_out, "--json")
    check_output(args.sarif_out, "--sarif")
    check_output(args.out_dir, "--out", folder=True)
    check_ci_outputs(args.junit_xml, args.summary_md)
    seconds = None if args.cases and not args.budget else positive_duration(args.budget or DEFAULT_BUDGET, "--budget")
    hang = positive_duration(args.hang_after, "--hang-after")
    live = max(hang, positive_duration(args.live_limit, "--live-limit"))
    versions = eras(args.era)
    seed = secrets.randbits(32) if args.seed is None else args.seed
    settings = FuzzSettings(seed=seed, budget=seconds, cases=args.cases, hang_after=hang, live_limit=live, rate=args.rate,
                        allow=args.allow, read_only_only=args.read_only_only, only=args.only, skip=args.skip,
                        seeds=seeds_from_traces(args.traces), protocol=args.protocol, versions=versions)
    if parsed.url:
        access.headers_now()  # a token that cannot be had: one line before any case
    run = Fuzzer(parsed, settings, access=access, say=lambda line: click.echo(line, err=True)).execute()
    with stop_signals_noted():  # the findings so far are written whole, even after Ctrl-C
        folder = Path(args.out_dir) if args.out_dir else DEFAULT_TRACE_DIR.parent / "fuzz" / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        if run.findings:
            write_traces(run.findings, folder, parsed.transport, str(parsed))
        for name, why in run.skipped.items():
            click.echo(f"mcpbench: not called: {name}: {why}", err=True)
        for note in run.notes:
            click.echo(f"mcpbench: note: {note}", err=True)
        click.echo(table(run.findings))
        tools = [tool.name for tool in run.tools]
        ended = " (interrupted)" if run.interrupted else f" ({run.ended})" if run.ended else ""
        click.echo(f"mcpbench: {run.calls} calls to {len(tools)} tools in {run.seconds:.1f} s, "
                   f"{len(run.findings)} findings{ended}; seed {seed} (--seed {seed} repeats this run)", err=True)
        if run.findings:
            click.echo(f"mcpbench: each finding's trace is in {folder}/ (mcpbench replay TRACE {target!r} reproduces it)", err=True)
        if args.json_out:
            write_atomic(args.json_out, dumps(run.to_json(), indent=True) + b"\n")
        if args.sarif_out:
            from mcpbench import __version__
            from mcpbench.fuzz.sarif import to_sarif

            log = to_sarif(run.findings, target=str(parsed), seed=seed, version=__version__, base=Path.cwd())
            write_atomic(args.sarif_out, dumps(log, indent=True) + b"\n")
        write_ci_outputs([suite(run.findings, tools, CLASSES, run.seconds)], "mcpbench fuzz", args.junit_xml, args.summary_md)
    if run.interrupted:
        raise KeyboardInterrupt
    sys.exit(run.exit_code)
