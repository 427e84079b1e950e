"""A stdio trace's spool: the raw bytes the tee copied, and their one decoding into trace events.

The stdio tee appends each chunk it copies to `<trace>.spool` (mode 0600) before it forwards it;
its recorder process (`stdio/recorder.py`) decodes the spool as it grows into the trace's events
with a `SpoolDecoder`, and deletes the spool once the trace is complete. A spool outlives its
recording only when the tee and its recorder were killed together (a host killing its process
group, the OOM killer). Such a trace reads complete all the same: the reader (`TraceReader`)
decodes the spool's tail in memory (`leftover`) and changes neither file. Writing the finished
trace to disk is one explicit step, `finish`: `mcpbench trace finish TRACE`, and the next
`mcpbench tee` recording to that path before it starts.

Frames: a header `<B q I` (frame kind, wall-clock time in integer µs, payload length) and the
payload. The first frame (`START`) names the session and the redaction rules, so that a spool
read back is encoded exactly as its recorder would have; data frames carry raw bytes (an empty
one is that stream's end); `EVENT` frames carry a ready trace event (process start and exit).
"""

import fcntl
import os
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcpbench.protocol.framing import Line, LineFramer
from mcpbench.protocol.observer import Observed, StdioObserver
from mcpbench.protocol.session import C2S, S2C, Direction, Session, Violation
from mcpbench.protocol.transports import STDIO
from mcpbench.trace.compress import GZIP_MAGIC, ZSTD_MAGIC, Compressor, read_blocks
from mcpbench.trace.format import Kind, text_or_b64
from mcpbench.trace.redact import Redactor
from mcpbench.trace.writer import TraceWriter

SUFFIX = ".spool"

HEADER = struct.Struct("<BqI")

# Frame kinds. Data frames carry raw bytes; an empty data frame is that stream's EOF.
C2S_DATA, S2C_DATA, STDERR_DATA, EVENT, START = 1, 2, 3, 4, 5

# The `detail` of the `error` event written for each client request still unanswered at the end.
UNANSWERED = "the session ended before its answer"

# A direction's name in a trace line (an enum's `.value` is a Python-level property: ~0.1 µs a read).
_NAMES = {direction: direction.value for direction in Direction}

# How much of a trace is read at once while it is compared with its spool.
READ_BYTES = 1024 * 1024

# A trace line names its session within its first bytes (`{"v":2,"ts":…,"session":…`).
HEAD_BYTES = 96


def spool_path(trace: str | os.PathLike) -> Path:
    return Path(f"{os.fspath(trace)}{SUFFIX}")


def frame(kind: int, ts: int, payload: bytes = b"") -> list[bytes]:
    """The pieces of one spool frame (for `os.writev`, so the payload is not copied)."""
    return [HEADER.pack(kind, ts, len(payload)), payload]


def event_frame(ts: int, event: dict[str, Any]) -> list[bytes]:
    """A frame carrying a ready trace event (process start and exit)."""
    return frame(EVENT, ts, orjson.dumps(event))


def start_frame(session_id: str, redactor: Redactor) -> list[bytes]:
    """The spool's first frame: the session and the `--redact` rules that make a `Redactor` equal
    to `redactor` (its defaults aside)."""
    rules = sorted(redactor.keys) + [".".join(path) for path in redactor.paths]
    return frame(START, 0, orjson.dumps({"session": session_id, "redact": rules}))


class SpoolDecoder:
    """Turns spool frames into the trace lines of one stdio session: the one decoding there is.

    The tee's recorder process feeds it the spool as it grows; a reader of a spool left behind
    feeds it the whole spool at once, and gets the same lines. Each direction is read by the
    protocol core's `StdioObserver`; its messages go through the session's `Session`.
    """

    def __init__(self, writer: TraceWriter, session_id: str) -> None:
        self.writer = writer  # only its encoding is used: the caller writes the lines
        self.session_id = session_id
        self.session = Session(transport=STDIO)
        self.observers = {C2S_DATA: StdioObserver(C2S), S2C_DATA: StdioObserver(S2C)}  # by frame kind
        # CRs kept: a stderr line is recorded byte for byte.
        self.stderr = LineFramer(keep_cr=True)
        self.last_ts = 0.0  # of the last frame decoded: the time the session's end is written with

    def take(self, buf: bytes | bytearray, filled: int) -> tuple[int, list[bytes]]:
        """Decode the whole frames at the start of `buf[:filled]`: (bytes they took, the trace lines they make)."""
        records: list[bytes] = []
        unpack = HEADER.unpack_from
        observers = self.observers
        offset = 0
        last_us = None  # of the last whole frame (a frame cut short has its header read, not decoded)
        while filled - offset >= HEADER.size:
            kind, us, length = unpack(buf, offset)
            end = offset + HEADER.size + length
            if end > filled:
                break
            payload = bytes(buf[offset + HEADER.size : end])
            observer = observers.get(kind)
            if observer is not None and payload:  # the client's or the server's bytes: most frames
                if events := observer.feed(payload):
                    self._events(observer.direction, events, us / 1e6, records)
            else:
                self._frame(kind, us / 1e6, payload, records)
            offset = end
            last_us = us
        if last_us is not None:
            self.last_ts = last_us / 1e6
        return offset, records

    def finish(self) -> list[bytes]:
        """Close the session: one `error` event per client request still awaiting its answer (one the
        client cancelled awaits none: a listen stream it closed, a call it gave up on).

        Stamped with the last frame's time, so that a spool read back ends as its recorder ended it.
        """
        records = [
            self._encode(Kind.ERROR, C2S, self.last_ts, detail=f"{pending.request.method}: {UNANSWERED}", id=request_id)
            for (direction, request_id), pending in self.session.pending.items()
            if direction is C2S and not pending.cancelled
        ]
        self.session.close()
        return records

    def _frame(self, kind: int, ts: float, payload: bytes, records: list[bytes]) -> None:
        """A frame other than the client's or the server's bytes, or the end of those."""
        if kind in self.observers:  # the stream's end: a last line without its newline comes now
            observer = self.observers[kind]
            self._end(observer.direction, observer.feed(payload), ts, records)
        elif kind == STDERR_DATA:
            for item in self.stderr.lines(payload):
                text = item if type(item) is bytes else item.data if type(item) is Line else item.head
                records.append(self._encode(Kind.STDERR, S2C, ts, text=text_or_b64(text)))
        elif kind == EVENT:
            records.append(self.writer.encode({"session": self.session_id, **orjson.loads(payload), "ts": ts}))
        # START is read by `_decode_spool`; the running recorder was told the same at fork.

    def _events(self, direction: Direction, events: list, ts: float, records: list[bytes]) -> None:
        """Check and encode what one chunk's lines were (the recorder's hot loop).

        Messages in a row are encoded with one join (`encode_messages`); violations go one at a
        time, in their place.
        """
        observe = self.session.observe  # bound once per chunk: this loop runs ~100,000 times a second
        run: list[bytes] = []
        for event in events:
            if type(event) is Observed:
                run.append(event.raw)
                if found := observe(direction, event.message, ts):
                    self._flush(direction, run, ts, records)
                    for item in found:
                        if type(item) is Violation:
                            records.append(self._violation(item, ts))
                continue
            self._flush(direction, run, ts, records)
            records.append(self._violation(event, ts))
        if run:  # (inline: a call less per chunk)
            records.append(self.writer.encode_messages(self.session_id, _NAMES[direction], run, ts))

    def _end(self, direction: Direction, events: list, ts: float, records: list[bytes]) -> None:
        """The events of a stream's end (a last line without its newline): the line and its
        `unterminated-line` first, then what the session says of its message."""
        found = []
        for event in events:
            if type(event) is Observed:
                records.append(self.writer.encode_messages(self.session_id, direction.value, [event.raw], ts))
                found += self.session.observe(direction, event.message, ts)
            else:
                records.append(self._violation(event, ts))
        records += [self._violation(item, ts) for item in found if type(item) is Violation]

    def _flush(self, direction: Direction, run: list[bytes], ts: float, records: list[bytes]) -> None:
        if run:
            records.append(self.writer.encode_messages(self.session_id, _NAMES[direction], run, ts))
            run.clear()

    def _violation(self, violation: Violation, ts: float) -> bytes:
        fields: dict[str, Any] = {"code": violation.code, "detail": violation.detail}
        if violation.raw is not None:
            fields["raw"] = text_or_b64(violation.raw)
        return self._encode(Kind.VIOLATION, violation.direction, ts, **fields)

    def _encode(self, kind: str, direction: Direction | None, ts: float, **fields: Any) -> bytes:
        return self.writer.encode(
            {"ts": ts, "session": self.session_id, "dir": direction.value if direction else None, "kind": kind, **fields}
        )


# --- a spool left behind ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leftover:
    """What a killed recording left in its spool and not in its trace.

    `kept` is how many bytes of the trace (decompressed) its whole lines take: a torn line past
    them was cut short by the kill and is replaced. `lines` are the trace lines that complete it,
    each without its newline. `compressed` names the trace's compression (`gzip`, `zstd`) or is None.
    """

    kept: int
    lines: list[bytes]
    compressed: str | None


def leftover(trace: str | os.PathLike) -> Leftover | None:
    """The events a spool beside `trace` holds beyond the trace's own, decoded in memory.

    None when there is no spool, when a running tee or its recorder holds it (the recording is
    live), or when it is not this trace's (the trace's events are not the beginning of the
    spool's). Neither file is changed.
    """
    with _claimed(trace) as found:
        return found


def finish(trace: str | os.PathLike) -> Leftover | None:
    """Write `trace` complete from the spool a killed recording left beside it, then delete the spool.

    The trace reads the same before and after (`leftover` gives what this appends). A plain trace
    has its torn last line, if any, cut and the rest appended; a compressed one is written anew
    beside it and renamed over it. Returns what was added, or None when there was nothing to
    finish (see `leftover`).

    Raises:
        OSError: the trace cannot be written (read-only, say); both files are left as they were.
    """
    path = Path(trace)
    with _claimed(path) as found:
        if found is None:
            return None
        added = b"".join(line + b"\n" for line in found.lines)
        if found.compressed is None:
            with open(path, "r+b") as out:
                out.truncate(found.kept)
                out.seek(found.kept)
                out.write(added)
        else:
            _rewrite(path, found, added)
        os.unlink(spool_path(path))  # before our lock goes: no reader finds it half done
    return found


def live(trace: str | os.PathLike) -> bool:
    """Whether a running tee or its recorder holds the spool beside `trace` (the recording goes on)."""
    try:
        fd = os.open(spool_path(trace), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return not _exclusive(fd)
    finally:
        os.close(fd)


def _exclusive(fd: int) -> bool:
    """Lock the spool `fd` exclusively unless a running tee or its recorder holds it (each holds it shared)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def _claimed(trace: str | os.PathLike) -> Iterator[Leftover | None]:
    """The spool beside `trace` held exclusively (no recording holds it), with its leftover; or None."""
    try:
        fd = os.open(spool_path(trace), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # none (the usual case), or one this user may not read: the trace is read as it is
        yield None
        return
    with os.fdopen(fd, "rb") as handle:
        yield _compare(trace, handle.read()) if _exclusive(fd) else None  # else the recording is live


def _compare(trace: str | os.PathLike, data: bytes) -> Leftover | None:
    """The leftover of the spool `data` for `trace`, or None when the trace is not the spool's."""
    decoded = _decode_spool(data)
    if decoded is None:
        return None
    session, wanted = decoded
    try:
        with open(trace, "rb") as handle:
            start = handle.read(len(GZIP_MAGIC) + len(ZSTD_MAGIC))
            handle.seek(0)
            blocks, _ = read_blocks(handle, READ_BYTES, trace)
            have = b"".join(blocks)
    except OSError:
        return None  # no trace to continue: the reader says so in its own words
    compressed = "gzip" if start.startswith(GZIP_MAGIC) else "zstd" if start.startswith(ZSTD_MAGIC) else None
    kept = have.rfind(b"\n") + 1  # past the last whole line
    lines = have[:kept].split(b"\n")[1:-1]  # the recorders' lines, after the header line
    # A trace several tees share (`trace/shared.py`) holds other sessions too: the spool's session's
    # own lines are the ones it continues. One that holds others' and none of its own is not its trace.
    head = b'"session":%s,' % orjson.dumps(session)
    mine = [line for line in lines if head in line[:HEAD_BYTES]]
    if (not mine and lines) or mine != wanted[: len(mine)]:
        return None
    return Leftover(kept, wanted[len(mine) :], compressed)


def _decode_spool(data: bytes) -> tuple[str, list[bytes]] | None:
    """The spool's session and every trace line a whole spool makes, as its recorder makes them (a
    session seen to its end).

    A torn last frame (its writer killed inside the `writev`) was never forwarded, so dropping it
    loses nothing that crossed the tee. None when `data` is no spool.
    """
    if len(data) < HEADER.size or HEADER.unpack_from(data)[0] != START:
        return None
    length = HEADER.unpack_from(data)[2]
    try:
        start = orjson.loads(data[HEADER.size : HEADER.size + length])
        session, rules = start["session"], start["redact"]
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return None  # a START frame the tee did not write
    encoder = TraceWriter(os.devnull, transport=STDIO, redactor=Redactor(rules))
    encoder.close()  # only its encoding is used
    decoder = SpoolDecoder(encoder, session)
    _, records = decoder.take(data, len(data))
    records += decoder.finish()  # as the recorder ends a session it saw to the end
    return session, b"".join(records).split(b"\n")[:-1]


def _rewrite(path: Path, found: Leftover, added: bytes) -> None:
    """Write a compressed trace anew with `added` after its whole lines, and rename it over the old one
    (a compressed stream cut short cannot be continued in place)."""
    with open(path, "rb") as handle:
        blocks, _ = read_blocks(handle, READ_BYTES, path)
        whole = b"".join(blocks)[: found.kept]
    compressor = Compressor(found.compressed)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600, as every trace
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(compressor.data(whole + added) + compressor.end())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
