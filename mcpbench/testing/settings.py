"""A test's settings for the pytest plugin, and what each record mode does with its trace (no I/O).

The record modes are pytest-recording's (VCR.py's), applied to MCP traces:

    none          replay only; a missing trace fails the test, an unrecorded request gets an error
    once          record through the real server when the trace is missing, else as `none`
    new_episodes  replay what is recorded; what is not goes to the real server and is added
    all           record everything anew through the real server

Settings come from three places, the later winning: the `mcp_config` fixture (a project's
defaults, in a conftest), then the `mcp_trace` marker's keywords, and the command line's
`--mcp-record-mode` only where neither names a mode.
"""

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpbench.protocol.transports import TRANSPORTS

NONE, ONCE, NEW_EPISODES, ALL = "none", "once", "new_episodes", "all"
RECORD_MODES = (NONE, ONCE, NEW_EPISODES, ALL)
DEFAULT_MODE = NONE  # as pytest-recording: no test reaches a real server unless asked to

# A trace name without one of these endings gets `.jsonl`.
TRACE_ENDINGS = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".gz", ".zst")
# Characters a default trace name may not hold (pytest ids carry brackets, slashes, quotes).
UNSAFE = re.compile(r'[<>?%*:|"\'/\\\s]')

# The serve-trace pacing the mock uses unless told: the recorded gaps, at most 1 s each.
DEFAULT_PACE = "original"
# Seconds one replayed request may wait for its answer (`mcp_replay`).
DEFAULT_TIMEOUT = 30.0

KEYS = ("server", "command", "transport", "record_mode", "pace", "json_response", "dir", "ignore", "timeout",
        "protocol_version", "learn_noise")


class SettingsError(ValueError):
    """A setting that cannot be used: the test fails with this one line."""


class Action(enum.Enum):
    """What a test's mock does, decided by the record mode and whether the trace exists."""

    REPLAY = "replay"  # serve the trace; an unrecorded request gets an error naming the nearest one
    RECORD = "record"  # the real server behind a recorder; the trace is written anew
    EXTEND = "extend"  # serve the trace; unrecorded requests go to the real server and are added to it
    MISSING = "missing"  # mode none and no trace: the test fails, naming both


def decide(mode: str, exists: bool) -> Action:
    """What `mode` does with a trace that exists or not."""
    if mode == ALL:
        return Action.RECORD
    if not exists:
        return Action.MISSING if mode == NONE else Action.RECORD
    return Action.EXTEND if mode == NEW_EPISODES else Action.REPLAY


def default_trace_name(test_name: str, class_name: str | None = None) -> str:
    """`Class.test_name.jsonl` (pytest-recording's cassette name), unsafe characters replaced by `-`."""
    name = f"{class_name}.{test_name}" if class_name else test_name
    return UNSAFE.sub("-", name) + ".jsonl"


@dataclass(frozen=True, slots=True)
class FixtureSettings:
    """Everything the fixtures need to know about one test."""

    trace: Path
    mode: str = DEFAULT_MODE
    server: str | None = None  # the real server: stdio:CMD, http(s)://…/mcp, sse+http(s)://…/sse; may hold {port}
    command: tuple[str, ...] = ()  # starts the real HTTP server on {port}
    transport: str | None = None  # what the mock serves (default: the server's transport, else the trace's)
    pace: str = DEFAULT_PACE
    json_response: bool = False
    ignore: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    protocol_version: str | None = None
    learn_noise: bool = False

    @property
    def action(self) -> Action:
        return decide(self.mode, self.trace.exists())


def build(config: Mapping[str, Any], args: Sequence[Any], kwargs: Mapping[str, Any], *, trace_dir: str | Path,
          default_name: str, cli_mode: str | None) -> FixtureSettings:
    """The settings of one test: `config` (the `mcp_config` fixture), then the marker's `args` and `kwargs`.

    Raises:
        SettingsError: an unknown key, a bad record mode or transport, more than one trace name.
    """
    merged: dict[str, Any] = {}
    for source, values in (("mcp_config", config), ("the mcp_trace marker", kwargs)):
        unknown = sorted(set(values) - set(KEYS))
        if unknown:
            raise SettingsError(f"{source}: unknown setting {', '.join(map(repr, unknown))} (known: {', '.join(KEYS)})")
        merged.update(values)
    if len(args) > 1:
        raise SettingsError(f"the mcp_trace marker takes one trace name, not {len(args)}: {', '.join(map(repr, args))}")
    mode = merged.get("record_mode") or cli_mode or DEFAULT_MODE
    if mode not in RECORD_MODES:
        raise SettingsError(f"unknown record mode {mode!r} (expected one of: {', '.join(RECORD_MODES)})")
    transport = merged.get("transport")
    if transport is not None and transport not in TRANSPORTS:
        raise SettingsError(f"unknown transport {transport!r} (expected one of: {', '.join(TRANSPORTS)})")
    folder = Path(merged.get("dir") or trace_dir)
    name = str(args[0]) if args else default_name
    if not name.endswith(TRACE_ENDINGS):
        name += ".jsonl"
    server = merged.get("server")
    if server is not None and not isinstance(server, str):
        raise SettingsError(f"server={server!r}: expected a target string: stdio:CMD, http(s)://HOST/mcp or sse+http(s)://HOST/sse")
    command = merged.get("command") or ()
    if isinstance(command, str):
        import shlex

        command = shlex.split(command)
    ignore = merged.get("ignore") or ()
    timeout = merged.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise SettingsError(f"timeout={timeout!r}: expected a number of seconds > 0")
    return FixtureSettings(
        trace=folder / name, mode=mode, server=server, command=tuple(map(str, command)), transport=transport,
        pace=str(merged.get("pace") or DEFAULT_PACE), json_response=bool(merged.get("json_response")),
        ignore=(ignore,) if isinstance(ignore, str) else tuple(ignore), timeout=float(timeout),
        protocol_version=merged.get("protocol_version"), learn_noise=bool(merged.get("learn_noise")),
    )
