"""Reading traces: lazily, one event at a time, with errors that name file and line."""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from mcpbench.protocol.errors import TraceError
from mcpbench.trace.format import FORMAT_VERSION, Kind

REQUIRED = ("v", "ts", "kind")


class TraceReader:
    """Iterates over the events of one trace file.

    A last line that is cut short (the writer was killed mid-write) is skipped
    and described in `torn`; any other bad line raises `TraceError` naming the
    file and line. `header` is the `trace` line, once read.

    Example:
        reader = TraceReader("session.jsonl")
        for event in reader: ...
        if reader.torn: print(reader.torn)
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.header: dict[str, Any] | None = None
        self.torn: str | None = None
        self.lines = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            handle = open(self.path, "rb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read trace: {exc.strerror}") from None
        with handle:
            number = 0
            for number, line in enumerate(handle, 1):
                self.lines = number
                if not line.strip():
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    # Only the file's last line can lack a newline: the writer died mid-write.
                    if not line.endswith(b"\n"):
                        self.torn = f"{self.path}:{number}: torn last line skipped ({len(line)} bytes, no newline: the writer stopped mid-write)"
                        return
                    raise TraceError(f"{self.path}:{number}: not JSON: {exc}") from None
                yield self._check(event, number)
            if number == 0:
                raise TraceError(f"{self.path}: empty trace")

    def _check(self, event: Any, number: int) -> dict[str, Any]:
        where = f"{self.path}:{number}"
        if not isinstance(event, dict):
            raise TraceError(f"{where}: not a trace event (a JSON {type(event).__name__})")
        for key in REQUIRED:
            if key not in event:
                raise TraceError(f"{where}: not a trace event: no {key!r}")
        if not isinstance(event["v"], int) or event["v"] > FORMAT_VERSION:
            raise TraceError(
                f"{where}: trace format v{event['v']} is newer than this mcpbench reads (v{FORMAT_VERSION}); upgrade mcpbench"
            )
        if event["kind"] == Kind.TRACE and self.header is None:
            self.header = event
        elif number == 1:
            raise TraceError(f"{where}: no trace header: the first line must have kind 'trace'")
        return event


def read_trace(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The events of one trace, lazily (see `TraceReader` for the torn-line report)."""
    return iter(TraceReader(path))
