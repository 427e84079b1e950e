"""Writing traces: one `os.write` per event, so nothing written is lost on a crash.

The file is created (or truncated) with O_APPEND and mode 0600 (traces hold real traffic).
Events are encoded whole and written with unbuffered `os.write`s: one per
event, or one for all the events of one read (the tee), made before the bytes
they describe are forwarded. After a kill -9 every event already written reads
back, and at most the last line is torn, which the reader reports and skips.
A path ending in `.gz` or `.zst` is written compressed, flushed at every write
(`trace/compress.py`), with the same guarantee.
"""

import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from mcpbench import __version__
from mcpbench.files.fdio import write_all
from mcpbench.protocol.errors import TraceError, TraceWriteError
from mcpbench.trace.compact import BOUNDS, Compactor, header_bounds
from mcpbench.trace.compress import compressor_for
from mcpbench.trace.format import BOM, FORMAT_VERSION, Kind, now
from mcpbench.trace.redact import Redactor

TRACE_DIR_ENV = "MCPBENCH_TRACE_DIR"
DEFAULT_TRACE_DIR = Path("results") / "traces"


def default_trace_path(label: str) -> Path:
    """`results/traces/<UTC time>-<label>.jsonl`, or under `$MCPBENCH_TRACE_DIR`."""
    folder = Path(os.environ.get(TRACE_DIR_ENV) or DEFAULT_TRACE_DIR)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:60] or "session"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{time.time() % 1:.6f}"[1:].replace(".", "_")
    return folder / f"{stamp}-{safe}.jsonl"


# Compressed writers of this process. After a fork (the tee hands its writer to the recorder it
# forks), the child writes on: the parent closing its copy must not end the stream under it.
_COMPRESSING: "weakref.WeakSet[TraceWriter]" = weakref.WeakSet()


def _handed_over_after_fork() -> None:
    for writer in list(_COMPRESSING):
        writer._handed_over = True


os.register_at_fork(after_in_parent=_handed_over_after_fork)


# The magic numbers of compressed streams (gzip, zstd): a compressed trace may be replaced too.
COMPRESSED_STARTS = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")
# How much of a file is read to find its first line (a trace header is far shorter).
HEADER_PEEK_BYTES = 64 * 1024


def is_replaceable(path: Path) -> bool:
    """Whether a new trace may be written over `path`: nothing there, an empty file, a device or
    pipe, or an earlier trace. Anything else is user data a mistyped `--out` must not destroy.
    """
    try:
        if not os.path.isfile(path) or os.path.getsize(path) == 0:  # never open a FIFO: it would block
            return True
        with open(path, "rb") as handle:
            start = handle.read(HEADER_PEEK_BYTES).removeprefix(BOM)
    except OSError:
        return True  # unreadable: creating it will say why
    if start.startswith(COMPRESSED_STARTS) or start.startswith(b'{"v":'):  # the latter: even a torn header
        return True
    try:
        first = orjson.loads(start.split(b"\n", 1)[0])
    except orjson.JSONDecodeError:
        return False
    return type(first) is dict and first.get("kind") == Kind.TRACE


def _fields(header_line: bytes) -> dict[str, Any]:
    """The fields of a trace's header line (none when it cannot be read: a torn one)."""
    try:
        fields = orjson.loads(header_line)
    except orjson.JSONDecodeError:
        return {}
    return fields if type(fields) is dict else {}


class TraceWriter:
    """Appends events to a trace file.

    Args:
        path: the file to create (parent folders are made).
        transport: the transport every event of this writer carries.
        header: extra fields of the `trace` header line (command, upstream, …).
        redactor: the redaction rules; the defaults when None.
        append: add to the plain trace already at `path`, under its header (`trace/shared.py`:
            only the one recording that owns the path does), instead of replacing it.

    Raises:
        TraceError: the file cannot be created.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        transport: str,
        header: dict[str, Any] | None = None,
        redactor: Redactor | None = None,
        append: bool = False,
    ) -> None:
        self.path = Path(path)
        self.transport = transport
        self.redactor = redactor or Redactor()
        self._redact_json = self.redactor.touches_json  # read once: the rules do not change
        self.failed: str | None = None  # why recording stopped (said on stderr once), or None
        self._error: str | None = None
        self.events = 0
        self._lock = threading.Lock()
        self._prefixes: dict[tuple[str | None, str], tuple[bytes, bytes]] = {}
        if not is_replaceable(self.path):
            raise TraceError(f"{self.path}: exists and is not a trace: refusing to overwrite it; choose another path")
        # `.gz` / `.zst`: compressed and flushed at every write (`trace/compress.py`).
        self._compressor = compressor_for(self.path)
        self._handed_over = False  # forked: the child writes on, so this process must not end the stream
        if self._compressor is not None:
            _COMPRESSING.add(self)
        existing = self._existing_header() if append and self._compressor is None else None
        # Events of an HTTP flow leave out what earlier lines said (format v2, `trace/compact.py`), within
        # the bounds the header records: today's in a new trace, the header's in one added to.
        fields = _fields(existing[0]) if existing is not None else {BOUNDS: header_bounds()}
        try:
            self._compactor = Compactor({"transport": transport, **(header or {}), **fields})
        except ValueError as exc:
            raise TraceError(f"{self.path}:1: {exc}") from None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            truncate = 0 if existing else os.O_TRUNC
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | truncate | os.O_APPEND | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot create trace: {exc.strerror}") from None
        # Given every line written, after it is (the tee's recorder hands them to its telemetry).
        self.tap: Callable[[bytes], None] | None = None
        if existing is not None:
            self.header_line, torn = existing
            if torn:  # a killed writer's last line stays one of its own: ours are not glued to it
                self._write(b"\n", 0)
            return
        started = now()
        self.header_line = self.encode(
            {
                "kind": Kind.TRACE,
                "session": None,
                "dir": None,
                "ts": started,
                "mcpbench": __version__,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started)) + f".{int(started % 1 * 1e6):06d}Z",
                **(header or {}),
                BOUNDS: header_bounds(),
            }
        )
        self.write_lines([self.header_line])
        if self.failed:  # not even the header fits (a full disk, /dev/full): nothing to record into
            self.close()
            raise TraceWriteError(f"{self.path}: cannot write trace: {self._error}")

    def _existing_header(self) -> tuple[bytes, bool] | None:
        """The header line of the trace at `path`, and whether its last line is torn; None when
        there is none to append to (no file, an empty one)."""
        try:
            with open(self.path, "rb") as handle:
                first = handle.readline(HEADER_PEEK_BYTES)
                handle.seek(0, os.SEEK_END)
                if handle.tell() == 0:
                    return None
                handle.seek(-1, os.SEEK_END)
                torn = handle.read(1) != b"\n"
        except OSError:
            return None
        return first if first.endswith(b"\n") else first + b"\n", torn

    def encode(self, event: dict[str, Any]) -> bytes:
        """One event as a trace line; `v`, `ts` and `transport` are filled in when absent."""
        event = dict(event)
        self.redactor.event_text(event)  # bodies, comments, lines, command lines: secrets by shape
        head = {
            "v": FORMAT_VERSION,
            "ts": event.pop("ts", None) or now(),
            "session": event.pop("session", None),
            "transport": self.transport,
            "dir": event.pop("dir", None),
            "kind": event.pop("kind"),
        }
        return self.encode_flow_event(head | event, text=False)

    def encode_flow_event(self, event: dict[str, Any], *, text: bool = True) -> bytes:
        """`encode` of an event the caller built in the line's order (`v`, `ts`, `session`,
        `transport`, `dir`, `kind`, then `flow` and the rest) and hands over: no copy, no reordering
        (the recording addon's hot path). `text`: it may hold free-text fields (redacted by shape).
        """
        if text:
            self.redactor.event_text(event)
        if "flow" in event:
            event = self._compactor.compact(event)
        return orjson.dumps(event) + b"\n"

    def encode_message(
        self,
        session: str | None,
        direction: str,
        raw: bytes,
        ts: float,
        extra: dict[str, Any] | None = None,
        obj: Any = None,
    ) -> bytes:
        """One JSON-RPC message whose exact JSON text is `raw`, as a trace line.

        `raw` must already be known to be valid JSON (the caller decoded it); it
        is spliced into the line unchanged, so the trace keeps the bytes as sent
        (key order, number spelling) and the hot path needs no re-encoding.
        Whitespace around it, if any, is valid JSON inside the line too.
        `obj`, the parsed value, is only needed when JSON redaction rules exist.
        """
        raw = self._message_text(raw, obj)
        if extra:
            event = {"v": FORMAT_VERSION, "ts": ts, "session": session, "transport": self.transport, "dir": direction, "kind": Kind.MESSAGE} | extra
            if "flow" in event:
                event = self._compactor.compact(event)
            return orjson.dumps(event)[:-1] + b',"msg":' + raw + b"}\n"
        return self._head(session, direction, ts) + raw + b"}\n"

    def _message_text(self, raw: bytes, obj: Any = None) -> bytes:
        """A message's JSON text as a line holds it: redacted by the JSON rules, if any; on one line."""
        if self._redact_json:
            redacted, changed = self.redactor.json(obj if obj is not None else orjson.loads(raw))
            if changed:
                raw = orjson.dumps(redacted)
        if raw.find(b"\n") >= 0:  # pretty-printed (an HTTP body): a trace line must stay one line
            raw = orjson.dumps(orjson.loads(raw))
        return raw

    def encode_flow_message(
        self,
        session: str | None,
        direction: str,
        raw: bytes,
        ts: float,
        flow: str,
        http: tuple,
        transport: str | None = None,
        sse: dict | None = None,
    ) -> bytes:
        """`encode_message` of a message of an HTTP flow, from its parts (the recording addon's hot path).

        The same line as `encode_message(session, direction, raw, ts, extra)` with `extra` =
        `{flow, http: {method, path, [status], content_type, headers}, [sse], [transport]}`, where
        `http` is (method, path, status, content_type, headers) and `status` is left out for c2s.
        """
        method, path, status, content_type, headers = http
        if direction == "s2c":
            fields = {"method": method, "path": path, "status": status, "content_type": content_type, "headers": headers}
        else:
            fields = {"method": method, "path": path, "content_type": content_type, "headers": headers}
        event = {
            "v": FORMAT_VERSION, "ts": ts, "session": session, "transport": transport or self.transport,
            "dir": direction, "kind": Kind.MESSAGE, "flow": flow, "http": fields,
        }
        if sse is not None:
            event["sse"] = sse
        return orjson.dumps(self._compactor.compact(event))[:-1] + b',"msg":' + self._message_text(raw) + b"}\n"

    def encode_flow_stream(
        self, ts: float, flow: str, session: str | None, transport: str, name: str, conn: str, method: str, path: str,
        tail: dict,
    ) -> bytes:
        """The `stream` event of an SSE answer opening (`tail`: status, content_type, headers) or
        closing (events, bytes), from its values (the recording addon's hot path): the line
        `encode_flow_event` makes of the full event."""
        event = {
            "v": FORMAT_VERSION, "ts": ts, "session": session, "transport": transport, "dir": None,
            "kind": Kind.STREAM, "flow": flow, "event": name, "conn": conn, "method": method, "path": path,
        }
        event.update(tail)
        return orjson.dumps(self._compactor.compact(event)) + b"\n"

    def encode_messages(self, session: str | None, direction: str, raws: list[bytes], ts: float) -> bytes:
        """Several messages read at the same time `ts`, as trace lines in one bytes.

        The stdio recorder's hot path: every line but its `msg` is the same, so
        one join builds them all. Each raw must be valid JSON without a newline,
        as `LineFramer.lines` gives them once decoded (`encode_message` says why).
        """
        if self._redact_json:
            return b"".join([self.encode_message(session, direction, raw, ts) for raw in raws])
        head = self._head(session, direction, ts)
        return head + (b"}\n" + head).join(raws) + b"}\n"

    def _head(self, session: str | None, direction: str, ts: float) -> bytes:
        """A message line up to its `msg` value: everything but ts is the same per session and direction."""
        prefix = self._prefixes.get((session, direction))
        if prefix is None:
            fields = orjson.dumps({"session": session, "transport": self.transport, "dir": direction, "kind": Kind.MESSAGE})
            prefix = self._prefixes[(session, direction)] = (b'{"v":%d,"ts":' % FORMAT_VERSION, b"," + fields[1:-1] + b',"msg":')
        return prefix[0] + orjson.dumps(ts) + prefix[1]

    def write(self, event: dict[str, Any]) -> None:
        """Write one event (see `encode`)."""
        self.write_lines([self.encode(event)])

    def message(self, session: str | None, direction: str, raw: bytes, ts: float, extra: dict[str, Any] | None = None, obj: Any = None) -> None:
        """Write one JSON-RPC message (see `encode_message`)."""
        self.write_lines([self.encode_message(session, direction, raw, ts, extra, obj)])

    def write_lines(self, lines: list[bytes]) -> None:
        """Write whole encoded events with one `os.write`.

        The tee hands over all events of one read at once, before it forwards
        those bytes: each is on disk (in the kernel's page cache, which survives
        a crash of this process) before the peer can have seen the message.
        """
        self._write(lines[0] if len(lines) == 1 else b"".join(lines), len(lines))

    def _write(self, line: bytes, count: int = 1) -> None:
        if self.failed:
            return
        with self._lock:
            try:
                data = line
                if self._compressor is not None:
                    data = self._compressor.data(line)
                    self._handed_over = False  # this process writes: it owns the stream's end
                write_all(self._fd, data)  # a regular file takes it all at once; a pipe or full disk may not
                self.events += count
                if self.tap is not None:
                    self.tap(line)
            except OSError as exc:
                self._error = exc.strerror
                # Never break the observed session: stop recording, say so once.
                self._fail(f"trace write failed: {exc.strerror}; recording stopped, traffic still passes")

    def _fail(self, reason: str) -> None:
        """Note why the trace is incomplete and say so once, at once (the command ends non-zero later)."""
        self.failed = f"{self.path}: {reason}"
        if self.events:  # a header that cannot be written is reported by the caller, as an exception
            self.announce(f"mcpbench: {self.failed}")

    def announce(self, line: str) -> None:
        """Say a recording failure on stderr (the tee's recorder replaces this: one line per tee)."""
        print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                if not self.failed and os.fstat(self._fd).st_nlink == 0:
                    self._fail("the trace file was removed while recording; its events are lost")
                if self._compressor is not None and not self._handed_over and not self.failed:
                    try:
                        os.write(self._fd, self._compressor.end())
                    except OSError:
                        pass  # the stream stays unended: a reader still reads every line
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
