"""`mcpbench wrap`, `unwrap` and `wrap --status` as plans over the host configs found.

Every config is read and every change decided before anything is written: a config that cannot
be read, a chosen entry of an unknown shape or wrapped by another mcpbench, a read-only file, a
name that is nowhere: one `ConfigError`, and no file changed. Then each changed config is backed
up, written whole (a temporary file renamed over it) and its entries recorded in the ledger.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from mcpbench.protocol.errors import ConfigError
from mcpbench.protocol.transports import STDIO
from mcpbench.wrap.edit import (
    BY_HAND, FOREIGN, HTTP, MARK, WRAPPED, ConfigEdit, Ledger, apply_edits, check_writable, shape_of, tee_prefix,
    trace_path, unwrap_edits, where, wrap_edits, write_atomically,
)
from mcpbench.wrap.hosts import ConfigFile, Server, find_configs, read_config, servers_of
from mcpbench.wrap.jsonc import parse

# The port `mcpbench record` listens on by default: what the hint for an HTTP server names.
RECORD_LISTEN = "127.0.0.1:8081"


@dataclass(slots=True)
class Found:
    config: ConfigFile
    text: str
    servers: list[Server]


def survey(home: Path, project: Path, hosts: Iterable[str] = ()) -> list[Found]:
    """Every host config under `home` and `project` (of `hosts`, when named), read."""
    wanted = set(hosts)
    found = []
    for config in find_configs(home, project):
        if wanted and config.location.host not in wanted:
            continue
        text, root = read_config(config)
        found.append(Found(config, text, servers_of(config, root)))
    return found


def _chosen(found: list[Found], names: tuple[str, ...], every: bool) -> list[tuple[Found, Server]]:
    chosen = [(f, s) for f in found for s in f.servers if every or s.name in names]
    missing = [name for name in names if not any(s.name == name for _, s in chosen)]
    if missing:
        where_ = ", ".join(str(f.config.path) for f in found) or "no host config found"
        raise ConfigError(f"no server named {', '.join(missing)} in {where_}; nothing written")
    return chosen


def _refuse(found: Found, server: Server, why: str) -> ConfigError:
    return ConfigError(f"{found.config.path}: {where(found.text, server.node)}: server {server.label}: {why}; nothing written")


def record_hint(server: Server, url: str, traces: Path) -> str:
    return (f"{server.label}: an HTTP server ({url}): not rewritten; record it with "
            f"`mcpbench record --upstream {url} --listen {RECORD_LISTEN} --out {trace_path(traces, server)}` "
            f"and point the host at the URL it prints")


def plan_wrap(found: list[Found], names: tuple[str, ...], every: bool, traces: Path) -> tuple[list[ConfigEdit], list[str]]:
    """The changes that wrap the chosen stdio servers, and the lines to say about the others."""
    prefix = tee_prefix()
    changes: dict[int, ConfigEdit] = {}
    notes: list[str] = []
    edits: dict[int, list] = {}
    # Two hosts may each start a server of one name: each wrapped entry gets a trace of its own.
    taken = {shape.trace for f in found for s in f.servers if (shape := shape_of(s.node)).kind == WRAPPED}
    for f, server in _chosen(found, names, every):
        shape = shape_of(server.node)
        if shape.kind is None:
            raise _refuse(f, server, f"an entry of unknown shape ({shape.why}): cannot wrap it")
        if shape.kind == FOREIGN:
            raise _refuse(f, server, f"wrapped by another mcpbench ({shape.mark or 'no mark'}; this one writes {MARK}): "
                                     "unwrap it with the mcpbench that wrapped it")
        if shape.kind == WRAPPED:
            notes.append(f"{f.config.label} {server.label}: already wrapped (trace {shape.trace})")
            continue
        if shape.kind == HTTP:
            notes.append(f"{f.config.label} {record_hint(server, shape.url, traces)}")
            continue
        if shape.kind == BY_HAND:
            notes.append(f"{f.config.label} {server.label}: runs through `mcpbench tee` already (put there by hand): left as it is")
            continue
        trace = trace_path(traces, server)
        for n in range(2, len(taken) + 3):
            if str(trace) not in taken:
                break
            trace = trace.with_name(f"{trace_path(traces, server).stem}-{n}.jsonl")
        taken.add(str(trace))
        entry_edits = wrap_edits(f.text, server.node, prefix, trace, shape)
        node = server.node
        wrapped = apply_edits(f.text[node.start:node.end], [(s - node.start, e - node.start, new) for s, e, new in entry_edits])
        change = changes.setdefault(id(f), ConfigEdit(f.config, f.text, f.text))
        edits.setdefault(id(f), []).extend(entry_edits)
        change.remember[server.label] = {"original": f.text[node.start:node.end], "wrapped": wrapped, "trace": str(trace)}
        change.lines.append(f"{f.config.label} {server.label}: wrapped, trace {trace}")
    for f in found:
        if id(f) in changes:
            changes[id(f)].after = apply_edits(f.text, edits[id(f)])
            check_writable(f.config)
    return list(changes.values()), notes


def plan_unwrap(found: list[Found], names: tuple[str, ...], every: bool, ledger: Ledger) -> tuple[list[ConfigEdit], list[str]]:
    """The changes that give the chosen wrapped entries their original text back."""
    changes: dict[int, ConfigEdit] = {}
    notes: list[str] = []
    edits: dict[int, list] = {}
    for f, server in _chosen(found, names, every):
        shape = shape_of(server.node)
        if shape.kind == FOREIGN:
            raise _refuse(f, server, f"wrapped by another mcpbench ({shape.mark or 'no mark'}; this one reads {MARK}): "
                                     "unwrap it with the mcpbench that wrapped it")
        if shape.kind != WRAPPED:
            if not every:
                notes.append(f"{f.config.label} {server.label}: not wrapped")
            continue
        node = server.node
        record = ledger.of(f.config).get(server.label)
        change = changes.setdefault(id(f), ConfigEdit(f.config, f.text, f.text))
        change.forget.append(server.label)
        if record and _as_wrapped(f, node, record.get("wrapped")):
            edits.setdefault(id(f), []).append((node.start, node.end, record["original"]))
            change.lines.append(f"{f.config.label} {server.label}: unwrapped")
        else:
            edits.setdefault(id(f), []).extend(unwrap_edits(node, shape))
            change.lines.append(f"{f.config.label} {server.label}: unwrapped from its command line (the entry changed "
                                "since it was wrapped, or its original text was not kept: other keys stay as they are now)")
    for f in found:
        if id(f) in changes:
            changes[id(f)].after = apply_edits(f.text, edits[id(f)])
            check_writable(f.config)
    return list(changes.values()), notes


def _as_wrapped(found: Found, node, wrapped: str | None) -> bool:
    """Whether an entry still holds what wrap wrote: the same text, or the same value in another
    layout (a host that rewrites its file, as Claude Code does `~/.claude.json`, re-indents it; the
    original text, in that host's own layout, then fits back as it was)."""
    if wrapped is None:
        return False
    if found.text[node.start:node.end] == wrapped:
        return True
    try:
        return parse(wrapped, "the ledger", comments=True).value == node.value
    except ConfigError:
        return False


def status(found: list[Found], traces: Path) -> list[str]:
    """One line per config and per server: wrapped (and where its trace is), or what it is."""
    lines = []
    for f in found:
        lines.append(f"{f.config.label}: {f.config.path}")
        for server in f.servers:
            shape = shape_of(server.node)
            if shape.kind == WRAPPED:
                trace = Path(shape.trace)
                size = f"{trace.stat().st_size} bytes" if trace.is_file() else "not written yet"
                lines.append(f"  {server.label}: wrapped, trace {trace} ({size})")
            elif shape.kind == STDIO:
                lines.append(f"  {server.label}: stdio, not wrapped ({' '.join([shape.command, *shape.args])})")
            elif shape.kind == HTTP:
                lines.append(f"  {record_hint(server, shape.url, traces)}")
            elif shape.kind == FOREIGN:
                lines.append(f"  {server.label}: wrapped by another mcpbench ({shape.mark or 'no mark'})")
            elif shape.kind == BY_HAND:
                lines.append(f"  {server.label}: runs through `mcpbench tee` (put there by hand; unwrap leaves it)")
            else:
                lines.append(f"  {server.label}: an entry of unknown shape ({shape.why})")
        if not f.servers:
            lines.append("  no servers")
    return lines


def apply(changes: list[ConfigEdit], ledger: Ledger, *, dry_run: bool, say: Callable[[str], None]) -> None:
    """Show (`dry_run`) or make the planned changes: each config backed up, then written whole.

    A config the host rewrote since it was read is refused before any is written; should a
    write fail, the configs already written get their text back: all of the change or none.
    """
    changes = [change for change in changes if change.after != change.before]
    if dry_run:
        for change in changes:
            say(change.diff().rstrip("\n"))
        return
    for change in changes:
        path = change.config.path
        if path.read_bytes().decode("utf-8", "replace") != change.before:
            raise ConfigError(f"{path}: changed while mcpbench read it (the host wrote it?): run again; nothing written")
    written: list[ConfigEdit] = []
    try:
        for change in changes:
            backup = ledger.backup(change.config, change.before)
            write_atomically(change.config.path, change.after)
            written.append(change)
            change.lines.append(f"wrote {change.config.path} (as it was: {backup})")
    except OSError as exc:
        for change in written:
            write_atomically(change.config.path, change.before)
        raise ConfigError(f"{exc.filename or change.config.path}: cannot write it ({exc.strerror}): every config left as it was") from None
    for change in written:
        ledger.commit(change)
        for line in change.lines:
            say(line)
