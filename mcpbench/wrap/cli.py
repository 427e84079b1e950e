"""`mcpbench wrap`, `mcpbench unwrap`: thin commands over `mcpbench.wrap.run`.

Registered in the main group by `mcpbench.cli`.
"""

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import click

from mcpbench.cliutil import map_errors
from mcpbench.wrap.hosts import HOSTS


def _where_options(func):
    """--home, --project, --host: which configs (the tests point --home at a temporary folder)."""

    @click.option("--home", type=click.Path(file_okay=False), help="The home folder whose host configs to use (default: yours).")
    @click.option("--project", type=click.Path(file_okay=False), help="The project folder (default: the current one): "
                  ".mcp.json, .cursor/mcp.json, .vscode/mcp.json.")
    @click.option("--host", "hosts", multiple=True, type=click.Choice(HOSTS), help="Only this host's configs. Repeatable.")
    @functools.wraps(func)
    def wrapper(*args, home, project, hosts, **kwargs):
        home_path = Path(home or os.path.expanduser("~")).absolute()
        project_path = Path(project or os.getcwd()).absolute()
        return func(*args, home=home_path, project=project_path, hosts=hosts, **kwargs)

    return wrapper


@dataclass(frozen=True, kw_only=True)
class WhereArgs:
    """Which configs `wrap` and `unwrap` work on (`_where_options`)."""

    home: Path
    project: Path
    hosts: tuple[str, ...]


def _state(home: Path) -> Path:
    return home / ".mcpbench" / "wrap"


@click.command()
@click.argument("names", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Wrap every stdio server of every config found.")
@click.option("--traces", type=click.Path(file_okay=False), help="The folder for the traces, one NAME.jsonl per server "
              "(default: ~/.mcpbench/traces).")
@click.option("--status", is_flag=True, help="Show each config's servers: wrapped (and where the trace is) or not.")
@click.option("--dry-run", is_flag=True, help="Show the change as a diff; write nothing.")
@_where_options
@map_errors
def wrap(**given):
    """Record the stdio servers of your MCP hosts: run each through `mcpbench tee`.

    Finds the configs of Claude Desktop, Claude Code (.mcp.json, ~/.claude.json), Cursor, VS Code
    (.vscode/mcp.json) and Windsurf in your home folder and the current project, and rewrites the
    NAMES given (or --all) so that the host starts `mcpbench tee --out TRACES/NAME.jsonl -- <the
    server's command>` instead (env, cwd and every other key untouched). Only the `command` and
    `args` values change; the rest of the file stays byte for byte as it was. Each config is
    backed up first (~/.mcpbench/wrap/backups/) and written whole. An HTTP server is not
    rewritten: the `mcpbench record` command that records it is printed. Without NAMES or --all
    (or with --status): the servers found and what is wrapped. `mcpbench unwrap` undoes it.

    Exit status: 0; 2 for a config that cannot be read, a chosen entry of unknown shape or wrapped
    by another mcpbench version, a read-only config, a NAME in no config (nothing written then).

    Example: mcpbench wrap weather --traces ~/mcp-traces
    """
    _wrap(WrapArgs(**given))


@dataclass(frozen=True, kw_only=True)
class WrapArgs(WhereArgs):
    """`wrap`'s options, as given (the configs' folders made absolute)."""

    names: tuple[str, ...]
    every: bool
    traces: str | None
    status: bool
    dry_run: bool


def _wrap(args: WrapArgs) -> None:
    from mcpbench.wrap.edit import Ledger
    from mcpbench.wrap.run import apply, plan_wrap, status as show_status, survey

    trace_dir = Path(args.traces).expanduser().absolute() if args.traces else args.home / ".mcpbench" / "traces"
    found = survey(args.home, args.project, args.hosts)
    if args.status or not (args.names or args.every):
        if args.status and (args.names or args.every or args.dry_run):
            raise click.UsageError("--status only shows: it takes no NAMES, --all or --dry-run")
        for line in show_status(found, trace_dir) or ["no MCP host config found"]:
            click.echo(line)
        if not args.status and found:
            click.echo("wrap NAME… (or --all) to record them; unwrap to undo")
        return
    ledger = Ledger(_state(args.home))
    changes, notes = plan_wrap(found, args.names, args.every, trace_dir)
    for line in notes:
        click.echo(line)
    if changes and not args.dry_run:
        trace_dir.mkdir(parents=True, exist_ok=True)
    apply(changes, ledger, dry_run=args.dry_run, say=click.echo)
    if not changes:
        click.echo("nothing to change")


@click.command()
@click.argument("names", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Unwrap every wrapped server.")
@click.option("--dry-run", is_flag=True, help="Show the change as a diff; write nothing.")
@_where_options
@map_errors
def unwrap(**given):
    """Give wrapped servers their own command back, each config byte for byte as it was.

    An entry still as `mcpbench wrap` wrote it gets its exact original text back (kept in
    ~/.mcpbench/wrap/ledger.json); one edited since gets its `command` and `args` back from the
    wrapped command line. Each config is backed up first and written whole.

    Exit status: 0; 2 as for `wrap` (nothing written then).

    Example: mcpbench unwrap --all
    """
    _unwrap(UnwrapArgs(**given))


@dataclass(frozen=True, kw_only=True)
class UnwrapArgs(WhereArgs):
    """`unwrap`'s options, as given (the configs' folders made absolute)."""

    names: tuple[str, ...]
    every: bool
    dry_run: bool


def _unwrap(args: UnwrapArgs) -> None:
    from mcpbench.wrap.edit import Ledger
    from mcpbench.wrap.run import apply, plan_unwrap, survey

    if not (args.names or args.every):
        raise click.UsageError("name the servers to unwrap, or --all")
    found = survey(args.home, args.project, args.hosts)
    ledger = Ledger(_state(args.home))
    changes, notes = plan_unwrap(found, args.names, args.every, ledger)
    for line in notes:
        click.echo(line)
    apply(changes, ledger, dry_run=args.dry_run, say=click.echo)
    if not changes:
        click.echo("nothing to change")
