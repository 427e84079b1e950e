"""Reading traces: lazily, with errors that name file and line.

Speed matters (a replay reads a whole trace before it starts), so the reader
parses a block of lines at a time: it reads `BLOCK_BYTES`, cuts at the last
newline, and parses the block's lines with a single `orjson.loads` of a JSON
array, about three times faster than one call per line. Only a block that does
not parse that way is parsed again line by line, to name the bad line.
"""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from mcpbench.protocol.errors import TraceError
from mcpbench.trace.format import FORMAT_VERSION, Kind

REQUIRED = ("v", "ts", "kind")

# Memory held while reading: one block and the events parsed from it.
BLOCK_BYTES = 4 * 1024 * 1024


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
            tail = b""
            while block := handle.read(BLOCK_BYTES):
                data = tail + block
                cut = data.rfind(b"\n") + 1
                tail = data[cut:]
                if cut:
                    yield from self._block(data[:cut])
            if tail:
                # Only the file's last line can lack a newline.
                try:
                    event = orjson.loads(tail)
                except orjson.JSONDecodeError:
                    self.torn = (
                        f"{self.path}:{self.lines + 1}: torn last line skipped "
                        f"({len(tail)} bytes, no newline: the writer stopped mid-write)"
                    )
                else:
                    self.lines += 1
                    yield self._check(event, self.lines)
        if self.lines == 0:
            raise TraceError(f"{self.path}: empty trace")

    def _block(self, data: bytes) -> Iterator[dict[str, Any]]:
        """The events of whole lines `data` (ending in a newline)."""
        first = self.lines + 1
        try:
            events = orjson.loads(b"[" + data[:-1].replace(b"\n", b",") + b"]")
        except orjson.JSONDecodeError:
            events = None  # a blank or bad line: go line by line to find it
        if events:
            self.lines += len(events)
            if first == 1 or self.header is None:
                yield self._check(events[0], first)
                events = events[1:]
                first += 1
            for number, event in enumerate(events, first):
                if type(event) is not dict or "kind" not in event or "ts" not in event or event.get("v") != FORMAT_VERSION:
                    self._check(event, number)  # raises with the reason
                yield event
            return
        for number, line in enumerate(data.split(b"\n")[:-1], first):
            self.lines = number
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise TraceError(f"{self.path}:{number}: not JSON: {exc}") from None
            yield self._check(event, number)

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
