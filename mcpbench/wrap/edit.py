"""Wrapping and unwrapping server entries in a host config, by editing its text in place.

A stdio entry `{"command": C, "args": A, …}` becomes `{"command": MCPBENCH, "args": ["tee",
"--wrapped-by", MARK, "--out", TRACE, "--", C, *A], …}`: only the bytes of the `command` and `args`
values change (`args` is added after `command` when the entry had none), so the file keeps its
indentation, key order, comments and every key mcpbench does not own (`env`, `cwd`, `type`, …).
`MARK` names the format of the wrapping: an entry wrapped by another mcpbench version (another
mark) is refused, not rewritten.

Unwrapping puts back the entry's exact original text, kept in the ledger (`Ledger`, a JSON file in
the state folder) as long as the entry still reads as wrap wrote it; an entry edited since (or
whose ledger entry is gone) gets `command` and `args` back from the wrapped command line itself.
"""

import difflib
import json
import os
import shutil
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mcpbench.files.outputs import atomic_path
from mcpbench.protocol.errors import ConfigError
from mcpbench.protocol.transports import STDIO
from mcpbench.wrap.hosts import ConfigFile, Server
from mcpbench.wrap.jsonc import Node, line_col

# The format of a wrapped entry: bump it when the wrapped command line changes shape, so that a
# later mcpbench tells entries it cannot read back from its own.
MARK = "mcpbench-wrap/1"
MARK_OPTION = "--wrapped-by"
URL_KEYS = ("url", "serverUrl")  # Windsurf names a remote server's URL `serverUrl`

# An entry's shape: a stdio server (`STDIO`, the transport's name), an HTTP one, or one of ours.
HTTP, WRAPPED, FOREIGN, BY_HAND = "http", "wrapped", "foreign", "by-hand"


@dataclass(frozen=True, slots=True)
class Shape:
    """What an entry is: `kind` (one of the four above) or None for an unknown shape (`why`)."""

    kind: str | None
    why: str = ""
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    mark: str = ""
    trace: str = ""


def shape_of(node: Node) -> Shape:
    entry = node.value
    if not isinstance(entry, dict):
        return Shape(None, f"a {type(entry).__name__}, not an object")
    url = next((entry[key] for key in URL_KEYS if key in entry), None)
    command, args = entry.get("command"), entry.get("args", [])
    if url is not None and command is None:
        return Shape(HTTP, url=url) if isinstance(url, str) else Shape(None, "a url that is not a string")
    if not isinstance(command, str) or not command:
        return Shape(None, "neither a `command` string nor a `url`" if url is None else "both `command` and `url`")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        return Shape(None, "`args` is not a list of strings")
    if MARK_OPTION in args:
        at = args.index(MARK_OPTION)
        mark = args[at + 1] if at + 1 < len(args) else ""
        if mark != MARK:
            return Shape(FOREIGN, command=command, args=tuple(args), mark=mark)
        try:
            end = args.index("--", at)
        except ValueError:
            return Shape(None, f"marked {MARK} but without `--` before the server's command")
        trace = args[args.index("--out", at) + 1] if "--out" in args[at:end] else ""
        original = args[end + 1:]
        if not original:
            return Shape(None, f"marked {MARK} but without the server's command")
        return Shape(WRAPPED, command=original[0], args=tuple(original[1:]), mark=mark, trace=trace)
    if _runs_tee(command, args):
        return Shape(BY_HAND, command=command, args=tuple(args))
    return Shape(STDIO, command=command, args=tuple(args))


def _runs_tee(command: str, args: list[str]) -> bool:
    """Whether an entry already starts `mcpbench tee` (put there by hand, as the README showed)."""
    name = os.path.basename(command).lower().removesuffix(".exe")
    return (name == "mcpbench" and args[:1] == ["tee"]) or (name.startswith("python") and args[:3] == ["-m", "mcpbench", "tee"])


def tee_prefix() -> list[str]:
    """The absolute command line that runs this mcpbench: its script beside this Python, else the
    one on PATH, else this Python with `-m mcpbench`. A host starts it without a shell or our PATH."""
    beside = Path(sys.executable).with_name("mcpbench")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("mcpbench")
    if found:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "mcpbench"]


def trace_path(traces: Path, server: Server) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in server.name) or "server"
    return traces / f"{safe}.jsonl"


def _dump(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _indent_before(text: str, pos: int) -> str | None:
    """The whitespace that starts the line `pos` is on, or None when `pos` shares its line with more."""
    line_start = text.rfind("\n", 0, pos) + 1
    head = text[line_start:pos]
    return head if not head.strip() else None


def wrap_edits(text: str, node: Node, prefix: list[str], trace: Path, shape: Shape) -> list[tuple[int, int, str]]:
    """The (start, end, new text) edits that wrap the stdio entry `node`."""
    args = [*prefix[1:], "tee", MARK_OPTION, MARK, "--out", str(trace), "--", shape.command, *shape.args]
    key_start, command = node.members["command"]
    edits = [(command.start, command.end, _dump(prefix[0]))]
    if "args" in node.members:
        old = node.members["args"][1]
        edits.append((old.start, old.end, _dump(args)))
    else:
        indent = _indent_before(text, key_start)
        line_start = text.rfind("\n", 0, key_start)
        newline = "\r\n" if line_start > 0 and text[line_start - 1] == "\r" else "\n"  # the file's own line ends
        joint = ", " if indent is None else f",{newline}{indent}"
        edits.append((command.end, command.end, f'{joint}"args": {_dump(args)}'))
    return edits


def unwrap_edits(node: Node, shape: Shape) -> list[tuple[int, int, str]]:
    """Edits that give a wrapped entry its `command` and `args` back from its command line (when
    its original text is not known): `args` stays, as a list, even if the original had none."""
    return [
        (node.members["command"][1].start, node.members["command"][1].end, _dump(shape.command)),
        (node.members["args"][1].start, node.members["args"][1].end, _dump(list(shape.args))),
    ]


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


@dataclass(slots=True)
class ConfigEdit:
    """One config's planned new text, and what to say about it."""

    config: ConfigFile
    before: str
    after: str
    lines: list[str] = field(default_factory=list)
    remember: dict[str, dict] = field(default_factory=dict)  # server label -> ledger record
    forget: list[str] = field(default_factory=list)

    def diff(self) -> str:
        name = str(self.config.path)
        return "".join(difflib.unified_diff(
            self.before.splitlines(keepends=True), self.after.splitlines(keepends=True), name, name + " (wrapped)",
        ))


def check_writable(config: ConfigFile) -> None:
    """Refuse a read-only config: its owner made it so (root may write anyway; mcpbench does not)."""
    path = config.path
    mode = path.stat().st_mode
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise ConfigError(f"{path}: read-only: make it writable to wrap its servers; nothing written")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{path.parent}: cannot write in this folder (the new file is made beside the old); nothing written")


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` (a symlink's target) with `text` whole or not at all, keeping its permission bits."""
    mode = stat.S_IMODE(path.stat().st_mode)
    with atomic_path(path) as temp:
        with open(temp, "wb") as out:
            out.write(text.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)


class Ledger:
    """What wrap wrote and what each entry held before: `<state>/ledger.json`, and the backups
    beside it (`<state>/backups/`, one copy of each config as it was before each write)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.path = state / "ledger.json"
        self.records: dict[str, dict[str, dict]] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text("utf-8"))
                self.records = data.get("configs", {}) if isinstance(data, dict) else {}
            except ValueError:
                raise ConfigError(f"{self.path}: not JSON: mcpbench's record of wrapped entries is damaged; "
                                  "move it away to go on (entries are then unwrapped from their command lines)") from None

    def of(self, config: ConfigFile) -> dict[str, dict]:
        return self.records.get(_key(config), {})

    def backup(self, config: ConfigFile, text: str) -> Path:
        folder = self.state / "backups"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"_{time.time_ns() % 10**9:09d}"
        name = _key(config).strip("/").replace("/", "__")
        target = folder / f"{name}.{stamp}"
        _write_private(target, text)  # a config's env may hold secrets
        return target

    def commit(self, change: ConfigEdit) -> None:
        records = self.records.setdefault(_key(change.config), {})
        for label in change.forget:
            records.pop(label, None)
        records.update(change.remember)
        if not records:
            self.records.pop(_key(change.config), None)
        self.state.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            _write_private(self.path, "{}")
        write_atomically(self.path, json.dumps({"version": 1, "configs": self.records}, indent=2, ensure_ascii=False) + "\n")


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(text.encode("utf-8"))


def _key(config: ConfigFile) -> str:
    return os.path.realpath(config.path)


def where(text: str, node: Node) -> str:
    return line_col(text, node.start)
