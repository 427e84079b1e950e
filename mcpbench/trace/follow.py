"""Following a trace while it is written: its new events at each `poll`, as `tail -f` gives new lines.

`TraceTail(path).poll()` returns the events written since the last call, parsed by the trace
reader (`TraceReader.feed`: the one parser of traces). It never blocks and never writes. It reads

- a trace a recorder is writing (the tee's recorder, `record`, the mitmproxy addon): whole lines
  only, so a line still being written waits for its newline;
- a stdio trace whose tee and recorder were killed together: once the file has stopped growing
  and no recording holds its spool, the events the spool holds beyond the trace are decoded in
  memory (`spool.leftover`, as every reader does) and the recording is over (`ended` says so);
- a compressed trace (`.gz`, `.zst`): not followed but read whole, a batch of events per poll;
- a trace replaced by a new recording to the same path (truncated, or another file): read again
  from its start (`generation` counts the files followed).
"""

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcpbench.protocol.errors import TraceError
from mcpbench.trace import spool
from mcpbench.trace.compress import GZIP_MAGIC, ZSTD_MAGIC
from mcpbench.trace.format import BOM
from mcpbench.trace.reader import TraceReader

# The most read from the file at one poll: a poll must return soon (the view draws between polls),
# and a large trace that is followed from its start is caught up on over several polls.
READ_BYTES = 1024 * 1024

# The most events of a compressed trace handed out at one poll (about a MiB of small events).
COMPRESSED_BATCH = 4096


class TraceTail:
    """The events of one trace file as it grows.

    Attributes:
        compressed: the trace is compressed: read whole, not followed.
        ended: why no more events will come (the recording was killed and the rest read from its
            spool; a compressed trace read to its end), or None while following.
        generation: 0, +1 each time the path was found replaced by a new trace.
        behind: bytes on disk not yet read (a large trace being caught up on).

    Example:
        tail = TraceTail("s.jsonl")
        while True:
            for event in tail.poll(): ...
            time.sleep(0.02)

    Raises (at the first `poll`, or any later one):
        TraceError: the file is missing or unreadable, is not a trace, or has a bad line (file and line).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.compressed = False
        self.ended: str | None = None
        self.generation = 0
        self.behind = 0
        self.reader = TraceReader(self.path)
        self._handle = None
        self._offset = 0  # bytes of the file taken, in whole lines (past a BOM)
        self._partial = b""  # the start of a line that has no newline yet
        self._compressed_events: Iterator[dict[str, Any]] | None = None
        self._spool_seen: tuple[int, int] | None = None  # (size, mtime) of a spool found not to continue the trace

    @property
    def header(self) -> dict[str, Any] | None:
        return self.reader.header

    def poll(self) -> list[dict[str, Any]]:
        """The events written since the last poll (often none); never blocks."""
        if self._compressed_events is not None:
            return self._next_compressed()
        if self._handle is None:
            self._open()
            if self._compressed_events is not None:
                return self._next_compressed()
        elif self._replaced():
            self._restart()
        if self.ended:
            return []
        data = self._handle.read(READ_BYTES)
        if not data:
            self.behind = 0
            return self._leftover()
        if self._offset == 0 and not self._partial:
            if data.startswith(BOM):  # an editor may have saved the trace with one
                data, self._offset = data[len(BOM) :], len(BOM)
            if data and not data.startswith(b"{"):  # no line of it can be an event: say so now
                raise TraceError(f"{self.path}:1: not a trace (its first line is no JSON object)")
        cut = data.rfind(b"\n") + 1
        if not cut:
            self._partial += data
            return []
        lines = self._partial + data[:cut] if self._partial else data[:cut]
        self._partial = data[cut:]
        self._offset += len(lines)
        self.behind = max(0, os.fstat(self._handle.fileno()).st_size - self._handle.tell())
        return list(self.reader.feed(lines))

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _open(self) -> None:
        try:
            self._handle = open(self.path, "rb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read trace: {exc.strerror}") from None
        start = self._handle.read(len(GZIP_MAGIC) + len(ZSTD_MAGIC))
        self._handle.seek(0)
        if start.startswith((GZIP_MAGIC, ZSTD_MAGIC)):
            self.compressed = True
            self._compressed_events = iter(self.reader)

    def _next_compressed(self) -> list[dict[str, Any]]:
        events = list(itertools.islice(self._compressed_events, COMPRESSED_BATCH))
        if not events:
            self._compressed_events = iter(())
            self.ended = self.ended or "compressed: shown whole, not followed"
        return events

    def _replaced(self) -> bool:
        """Whether the path now names another file, or ours shrank below what was read (a new
        recording to the same path truncates it)."""
        try:
            now = os.stat(self.path)
        except OSError:
            return False  # removed: what was read stays; a new file at the path is found later
        mine = os.fstat(self._handle.fileno())
        return (now.st_ino, now.st_dev) != (mine.st_ino, mine.st_dev) or mine.st_size < self._offset + len(self._partial)

    def _restart(self) -> None:
        self.close()
        self.generation += 1
        self.ended = None
        self.reader = TraceReader(self.path)
        self._offset, self._partial, self._spool_seen = 0, b"", None
        self._open()

    def _leftover(self) -> list[dict[str, Any]]:
        """At the end of the file: the events a killed recording left in its spool, if it did."""
        try:
            found = os.stat(spool.spool_path(self.path))
        except OSError:
            return []  # no spool: the usual case
        if self._spool_seen == (found.st_size, found.st_mtime_ns):
            return []  # already found not to continue this trace
        rest = spool.leftover(self.path)  # None at once while a recording holds the spool
        if rest is None:
            if not spool.live(self.path):
                self._spool_seen = (found.st_size, found.st_mtime_ns)
            return []
        if rest.kept != self._offset:
            return []  # the file moved on meanwhile: read it first
        self._partial = b""  # a torn last line: the spool's events replace it
        self._offset += sum(len(line) + 1 for line in rest.lines)  # `trace finish` would append exactly these
        self.ended = "the recording was killed: its last events were read from its spool"
        return list(self.reader.feed(b"".join(line + b"\n" for line in rest.lines))) if rest.lines else []
