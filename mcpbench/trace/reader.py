"""Reading traces: lazily, with errors that name file and line.

Speed matters (a replay reads a whole trace before it starts), so the reader
parses a batch of lines at a time: it reads `READ_BYTES`, cuts at the last
newline, and parses about `BATCH_BYTES` of whole lines with a single
`orjson.loads` of a JSON array. A batch's events are checked with C-level
passes (`map` over the list) rather than a Python loop per event; only a batch
that fails to parse or to check is gone through again line by line, to name
the bad line. A line longer than a read is gathered in pieces and joined once.

Building the Python objects is what costs: on small lines (~250 bytes, the
typical MCP message) CPython builds them at well under 100 MB/s whatever the
parser, so the batch is kept small enough for its objects to stay in the CPU
cache while the caller uses them.
"""

import contextlib
import gc
import os
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import contains, itemgetter
from pathlib import Path
from typing import Any

import orjson

from mcpbench.protocol.errors import TraceError
from mcpbench.trace.compact import Expander
from mcpbench.trace.compress import read_blocks
from mcpbench.trace.format import BOM, FORMAT_VERSION, Kind
from mcpbench.trace.spool import leftover

REQUIRED = ("v", "ts", "kind")

# One read from the file: few system calls, and the memory held at once (one
# read, plus a line longer than that while it is gathered).
READ_BYTES = 1024 * 1024

# Lines parsed per `orjson.loads`: one call per line costs ~2x more on small
# lines, while a batch of MiBs builds more objects than the CPU caches hold and
# ran 2-3x slower (measured 8 KiB … 4 MiB: best at 16-128 KiB, small and large lines).
BATCH_BYTES = 32 * 1024

_VERSION = itemgetter("v")
_KNOWN = frozenset(range(1, FORMAT_VERSION + 1))
# The known versions' objects: CPython keeps one object of each small int, and the parser hands out
# those, so a version is known when it is one of these objects. A `true` or a `1.0` is equal to 1 and
# hashes as 1 (a set of the values would take it for the 1 read before it), but is an object of its own.
_KNOWN_OBJECTS = frozenset(map(id, _KNOWN))
_TS = itemgetter("ts")
_KIND = itemgetter("kind")
_DIRECTION = itemgetter("dir")
_SESSION = itemgetter("session")

# The types the fields every event has may take (docs/trace-format.md); a field of another
# type is a bad line, named with its file and line, not a crash further on.
_NUMBER = frozenset({int, float})
_STR = frozenset({str})
_SESSION_TYPES = frozenset({str, type(None)})
_DIRECTIONS = frozenset({"c2s", "s2c", None})
_MSG_TYPES = frozenset({dict, list, type(None)})
# The fields of the HTTP kinds that readers compute with (docs/trace-format-http.md), by kind:
# each one, when present and not null, must have one of these types. A batch holding any of
# these kinds is checked event by event; message-only batches keep the fast path.
_TEXT, _INT, _NUM, _OBJ = (str,), (int,), (int, float), (dict,)
_KIND_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    Kind.HTTP: {"flow": _TEXT, "method": _TEXT, "path": _TEXT, "url": _TEXT, "status": _INT, "reason": _TEXT,
                "started": _NUM, "responded": _NUM, "ended": _NUM, "request_size": _INT, "response_size": _INT,
                "request_headers": _OBJ, "response_headers": _OBJ, "content_type": _TEXT, "request_content_type": _TEXT},
    Kind.STREAM: {"flow": _TEXT, "event": _TEXT, "method": _TEXT, "path": _TEXT, "status": _INT, "headers": _OBJ},
    Kind.SSE: {"flow": _TEXT, "event": _TEXT, "data": _TEXT, "id": _TEXT, "comment": _TEXT},
    Kind.ERROR: {"flow": _TEXT, "method": _TEXT, "path": _TEXT, "status": _INT},
}
_TYPED_KINDS = frozenset(_KIND_FIELDS)


class TraceReader:
    """Iterates over the events of one trace file.

    A last line that is cut short (the writer was killed mid-write) is skipped
    and described in `torn`; any other bad line raises `TraceError` naming the
    file and line. `header` is the `trace` line, once read. A stdio trace whose
    tee and recorder were killed together reads complete: the rest of its events
    is decoded from the spool beside it, in memory (`spool.leftover`). Reading
    changes no file; `spool.finish` writes such a trace complete.

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
        # Version 2 leaves out of HTTP events what earlier lines said: restored here (`trace/compact.py`).
        self._expander: Expander | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[dict[str, Any]]]:
        """The events as `__iter__` gives them, a list at a time: a parsed batch of lines whole (one
        `orjson.loads`), or a single event where lines are gone through one by one. A reader of
        every event (the trace model's `take_all`) saves a generator step per event."""
        # A recording killed with its recorder left the rest in a spool: read it too, changing neither file.
        rest = leftover(self.path)
        try:
            handle = open(self.path, "rb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read trace: {exc.strerror}") from None
        with handle:
            if handle.read(len(BOM)) != BOM:  # an editor may have saved the trace with one
                handle.seek(0)
            blocks, notes = read_blocks(handle, READ_BYTES, self.path)  # decompressed: `.gz`, `.zst`
            pieces: list[bytes] = []  # the start of a line that has not ended yet
            for block in blocks:
                cut = block.rfind(b"\n") + 1
                if not cut:
                    pieces.append(block)
                    continue
                yield from self._lines(block, cut, pieces)
                pieces = [block[cut:]] if cut < len(block) else []
            tail = b"".join(pieces)
            if rest is not None:
                if rest.lines:  # they replace the torn line the kill left, if any
                    yield from self._lines(b"\n".join(rest.lines) + b"\n")
            elif tail.strip():
                # Only the file's last line can lack a newline. Unless it is a whole event, it is what
                # a writer stopped mid-write leaves (or junk appended later): reported, never an event.
                try:
                    event = orjson.loads(tail)
                except orjson.JSONDecodeError:
                    event = None
                if type(event) is dict and all(key in event for key in REQUIRED):
                    self.lines += 1
                    yield [self._expand(self._check(event, self.lines), self.lines)]
                else:
                    self.torn = (
                        f"{self.path}:{self.lines + 1}: torn last line skipped "
                        f"({len(tail)} bytes, no newline: the writer stopped mid-write)"
                    )
            if notes and rest is None:
                self.torn = "; ".join(([self.torn] if self.torn else []) + notes)
        if self.header is None:  # nothing but blank lines, if anything
            raise TraceError(f"{self.path}: empty trace" + (" (only a torn line)" if self.torn else ""))

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        """The events of `data`, whole lines (each ending in a newline) that come after the lines read
        so far: how a trace that is still being written is read on (`trace/follow.py`). Lines are
        numbered on, the header is checked at line 1 and HTTP events are expanded, as when iterating.

        Raises:
            TraceError: a bad line, naming file and line.
        """
        return (event for batch in self._lines(data) for event in batch)

    def _lines(self, data: bytes, stop: int | None = None, pieces: Sequence[bytes] = ()) -> Iterator[list[dict[str, Any]]]:
        """The events of whole lines `data[:stop]` (ending in a newline), a batch at a time; `pieces`,
        if any, are the start of its first line (read before). Batches are views of `data`: each
        batch's join is the one copy of its lines (with the brackets, before the replace)."""
        stop = len(data) if stop is None else stop
        view = memoryview(data)
        start = 0
        while start < stop:
            end = data.find(b"\n", start + BATCH_BYTES - 1, stop) + 1 or stop
            yield from self._block((*pieces, view[start:end]))
            pieces = ()
            start = end

    def _block(self, parts: tuple[bytes | memoryview, ...]) -> Iterator[list[dict[str, Any]]]:
        """The events of whole lines, `parts` joined (ending in a newline): all at once when they parse
        and check as a batch, else one by one (a list each), up to the bad line, which raises."""
        first = self.lines + 1
        try:  # (the last line's comma before a null: two copies of the lines, the join and the replace)
            events = orjson.loads(b"".join((b"[", *parts, b"null]")).replace(b"\n", b","))
            events.pop()
        except orjson.JSONDecodeError:
            events = None  # a blank or bad line: go line by line to find it
        if events:
            self.lines += len(events)
            if first == 1 or self.header is None:
                yield [self._check(events[0], first)]
                events = events[1:]
                first += 1
            if _well_formed(events):
                if self._expander is None or not any(map(contains, events, repeat("flow"))):
                    yield events
                    return
                for number, event in enumerate(events, first):
                    yield [self._expand(event, number)]
                return
            for number, event in enumerate(events, first):
                yield [self._expand(self._check(event, number), number)]  # raises with the reason at a bad line
            return
        for number, line in enumerate(b"".join(parts).split(b"\n")[:-1], first):
            self.lines = number
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise TraceError(f"{self.path}:{number}: not JSON: {exc}") from None
            yield [self._expand(self._check(event, number), number)]

    def _check(self, event: Any, number: int) -> dict[str, Any]:
        where = f"{self.path}:{number}"
        if not isinstance(event, dict):
            raise TraceError(f"{where}: not a trace event (a JSON {type(event).__name__})")
        for key in REQUIRED:
            if key not in event:
                raise TraceError(f"{where}: not a trace event: no {key!r}")
        if type(event["v"]) is not int:
            raise TraceError(f"{where}: field 'v' must be an integer, not {orjson.dumps(event['v']).decode()[:40]}")
        if event["v"] > FORMAT_VERSION:
            raise TraceError(
                f"{where}: trace format v{event['v']} is newer than this mcpbench reads (v{FORMAT_VERSION}); upgrade mcpbench"
            )
        if event["kind"] == Kind.TRACE and self.header is None:
            self.header = event
            if event["v"] >= 2:
                try:
                    self._expander = Expander(event)  # with the bounds the header records (or today's)
                except ValueError as exc:
                    raise TraceError(f"{where}: {exc}") from None
        elif self.header is None:  # blank lines before it change nothing
            raise TraceError(f"{where}: no trace header: the first line must have kind 'trace'")
        _check_types(event, where)
        return event


    def _expand(self, event: dict[str, Any], number: int) -> dict[str, Any]:
        """A version-2 event of an HTTP flow, complete again (other events as they are), its
        kind's fields checked (on the complete event: a compact one leaves fields out)."""
        if self._expander is not None and "flow" in event:
            try:
                event = self._expander.expand(event)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                raise TraceError(f"{self.path}:{number}: bad version-2 event: {exc}") from None
        if event["kind"] in _TYPED_KINDS:
            _check_kind_fields(event, f"{self.path}:{number}")
        return event


def _well_formed(events: list[Any]) -> bool:
    """Whether every event is an object with a known `v` (an integer), a numeric `ts`, a string `kind` of no
    typed kind, and `session`, `dir` and `msg` of their types (one C-level pass each).

    An event that is no object fails the first pass (a JSON array, string, number or null cannot be
    subscripted by a key: TypeError), and the types of `kind` and `session` are checked on the batch's
    few distinct values (an unhashable one raises TypeError): no pass of their own.

    `ts` is checked by the batch's earliest, a cheaper pass than one over its types: `min` compares
    each `ts` with the least so far, and JSON's other values (string, array, object, null) raise
    TypeError against a number, so a least that is a number means numbers only; one above 1 means
    no bool among them (False and True compare as 0 and 1). Any other (a bool, or times from 0 as
    tests write them) is decided by the pass over the types."""
    if not events:
        return True
    try:  # a missing key (KeyError), no object or an unhashable value (TypeError): the slow path names it
        versions = set(map(id, map(_VERSION, events)))
        kinds = set(map(_KIND, events))
        earliest = min(map(_TS, events))
        try:  # the writers write both: a subscript is the cheaper pass
            directions = set(map(_DIRECTION, events))
            sessions = set(map(_SESSION, events))
        except KeyError:  # either may be left out
            directions = set(map(dict.get, events, repeat("dir")))
            sessions = set(map(dict.get, events, repeat("session")))
    except (KeyError, TypeError):
        return False
    return (
        versions <= _KNOWN_OBJECTS
        and ((type(earliest) in _NUMBER and earliest > 1) or set(map(type, map(_TS, events))) <= _NUMBER)
        and set(map(type, kinds)) <= _STR
        and _TYPED_KINDS.isdisjoint(kinds)
        and directions <= _DIRECTIONS
        and set(map(type, sessions)) <= _SESSION_TYPES
        and set(map(type, map(dict.get, events, repeat("msg")))) <= _MSG_TYPES
    )


def _check_types(event: dict[str, Any], where: str) -> None:
    """Raise `TraceError` at `where` when a field every event has is of the wrong type."""

    def wrong(name: str, expected: str) -> TraceError:
        shown = orjson.dumps(event[name]).decode()[:40]
        return TraceError(f"{where}: field {name!r} must be {expected}, not {shown}")

    if type(event["ts"]) not in _NUMBER:
        raise wrong("ts", "a number (epoch seconds)")
    if type(event["kind"]) is not str:
        raise wrong("kind", "a string")
    if type(event.get("session")) not in _SESSION_TYPES:
        raise wrong("session", "a string or null")
    if (direction := event.get("dir")) is not None and (type(direction) is not str or direction not in _DIRECTIONS):
        raise wrong("dir", '"c2s", "s2c" or null')
    # A message event without a message (null, or no `msg`) is read: the trace model makes it an
    # invalid-message violation, as the batch check lets it through (`_well_formed`).
    if type(event.get("msg")) not in _MSG_TYPES:
        raise wrong("msg", "a JSON-RPC object or batch")


def _check_kind_fields(event: dict[str, Any], where: str) -> None:
    """Raise `TraceError` at `where` when a field an HTTP kind's readers compute with has the wrong type."""

    def wrong(name: str, expected: str) -> TraceError:
        shown = orjson.dumps(event[name]).decode()[:40]
        return TraceError(f"{where}: field {name!r} must be {expected}, not {shown}")

    for name, types in _KIND_FIELDS[event["kind"]].items():
        value = event.get(name)
        if value is not None and (type(value) not in types or type(value) is bool):
            raise wrong(name, {_TEXT: "a string", _INT: "an integer", _NUM: "a number", _OBJ: "an object"}[types])


# The interpreter freezes a few objects of its own at start-up (3.12: static types' tuples): not the program's.
_FROZEN_AT_START = gc.get_freeze_count()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a trace is read into memory, then restore its state.

    A plan or a frame keeps every message it reads, so each collection during the build
    walks an ever larger heap of live objects and finds nothing to free (the
    build makes no reference cycles): about a third of a plan build's time on
    small-message traces. Memory freed by reference counting is unaffected.

    At the end, what the build made goes straight to the oldest generation (`gc.freeze` then
    `gc.unfreeze`: two list splices, no walk). Left in the youngest, the first allocation after the
    pause would walk every object the build made and free nothing (13 % of a replay plan's time),
    then again when they moved up a generation. Cycles among them (the model's entries and their
    operations) are still freed, by the next full collection, as any old object's. Skipped when the
    program froze objects itself (a replay's run does): unfreezing would hand them back to the collector.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() <= _FROZEN_AT_START:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def read_trace(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The events of one trace, lazily (see `TraceReader` for the torn-line report)."""
    return iter(TraceReader(path))
