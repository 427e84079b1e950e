"""The tee's recorder: a forked process that turns copied bytes into trace events.

The tee forwards each chunk it reads and, just before, hands a copy to this
process through a pipe (the *channel*). Decoding, session tracking and trace
writing happen here, on the other core and off the path the bytes take, so the
tee adds a syscall per chunk to the session, not the cost of recording.

Order: the tee writes a chunk to the channel before it forwards it, so an
answer can never reach the channel before the request that caused it: the
trace's order is causal. Durability: when the tee dies (even by kill -9), the
channel still holds what it sent; the recorder drains it to the trace, then
exits at end of file. It ignores SIGINT and SIGTERM for that reason.

Channel frames: a header `<B d I` (frame kind, wall-clock time, payload
length) and the payload.
"""

import fcntl
import os
import signal
import struct
import time
from typing import Any

import orjson

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.framing import Line, LineFramer, LineTooLong
from mcpbench.protocol.session import C2S, S2C, Direction, Session, Violation
from mcpbench.trace.format import Kind, text_or_b64
from mcpbench.trace.writer import TraceWriter

HEADER = struct.Struct("<BdI")

# The recorder's exit status when the trace could not be written to the end (the tee reads it).
RECORDING_FAILED = 3

# Frame kinds. Data frames carry raw bytes; an empty data frame is that stream's EOF.
C2S_DATA, S2C_DATA, STDERR_DATA, EVENT = 1, 2, 3, 4

# One read of the channel: large, since a burst of small frames then costs one syscall.
CHANNEL_READ = 1024 * 1024

# Linux pipes hold 64 KiB by default: one tee read. A deeper channel (fcntl
# F_SETPIPE_SZ) lets the tee run ahead while the recorder works through a
# burst, instead of the two taking turns. 1 MiB is the unprivileged maximum.
CHANNEL_BYTES = 1024 * 1024
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)

# How much lower the recorder's scheduling priority is than the tee's.
RECORDER_NICENESS = 10

# After a read that brought little (an interactive session: a message or two),
# the recorder sleeps this long before reading again, so the messages of the
# next 10 ms arrive in one read. Without the pause the tee's every write to the
# channel wakes the recorder, and on a VM waking a process on an idle core costs
# the tee tens of µs, on the session's path: measured p50 round trip +40-55 µs
# with a 1 ms pause, +55-75 µs without. Every wake-up of the recorder costs the
# session too (timers and a context switch on a shared core): side by side,
# 10 ms gave 5-15 µs less than 1 ms in each of 6 paired runs. A quiet session
# still costs nothing: the read after the pause blocks. The channel holds 1 MiB,
# 10 ms of traffic at 100 MB/s, and a read of SMALL_READ or more skips the pause.
PAUSE_SECONDS = 0.01
SMALL_READ = 16 * 1024


def frame(kind: int, ts: float, payload: bytes = b"") -> list[bytes]:
    """The pieces of one channel frame (for `os.writev`, so the payload is not copied)."""
    return [HEADER.pack(kind, ts, len(payload)), payload]


def event_frame(ts: float, event: dict[str, Any]) -> list[bytes]:
    """A frame carrying a ready trace event (process start and exit)."""
    return frame(EVENT, ts, orjson.dumps(event))


class Recorder:
    """Reads channel frames and writes the trace of one stdio session."""

    def __init__(self, writer: TraceWriter, session_id: str) -> None:
        self.writer = writer
        self.session_id = session_id
        self.session = Session()
        # CRs kept: a line that is not a message (junk, stderr) is recorded byte for byte.
        self.framers = {kind: LineFramer(keep_cr=True) for kind in (C2S_DATA, S2C_DATA, STDERR_DATA)}

    def run(self, channel: int) -> None:
        """Record until the channel ends, then close the session."""
        # Reads go into one buffer made once: `os.read(fd, 1 MiB)` allocates
        # (and the allocator maps and unmaps) 1 MiB per call, ~20 µs even when
        # the read brings one small message, as it does in an interactive session.
        buf = bytearray(CHANNEL_READ)
        filled = 0
        unpack = HEADER.unpack_from
        while True:
            with memoryview(buf) as view:
                got = os.readv(channel, [view[filled:]])
            if not got:
                break
            filled += got
            records: list[bytes] = []
            offset = 0
            while filled - offset >= HEADER.size:
                kind, ts, length = unpack(buf, offset)
                end = offset + HEADER.size + length
                if end > filled:
                    if end - offset > len(buf):  # a frame larger than the buffer: make room for it
                        buf.extend(bytes(end - offset - len(buf)))
                    break
                self._frame(kind, ts, bytes(buf[offset + HEADER.size : end]), records)
                offset = end
            if offset:  # keep the unfinished frame's start at the front
                buf[: filled - offset] = buf[offset:filled]
                filled -= offset
            if records:
                self.writer.write_lines(records)
            if got < SMALL_READ:
                time.sleep(PAUSE_SECONDS)
        self.session.close()

    def _frame(self, kind: int, ts: float, payload: bytes, records: list[bytes]) -> None:
        if kind == EVENT:
            records.append(self.writer.encode({"session": self.session_id, **orjson.loads(payload), "ts": ts}))
            return
        items = self.framers[kind].lines(payload)
        if kind == STDERR_DATA:
            for item in items:
                text = item if type(item) is bytes else item.data if type(item) is Line else item.head
                records.append(self._encode(Kind.STDERR, S2C, ts, text=text_or_b64(text)))
        elif items:
            self._lines(C2S if kind == C2S_DATA else S2C, items, ts, records)

    def _lines(self, direction: Direction, items: list[bytes | Line | LineTooLong], ts: float, records: list[bytes]) -> None:
        """Decode, check and encode the lines of one chunk (the recorder's hot loop).

        Messages in a row are encoded with one join (`encode_messages`); the
        rest (violations, odd lines) go one at a time, in their place.
        """
        # Bound once per chunk, not per line: this loop runs ~100,000 times a second.
        loads, from_obj, observe = orjson.loads, jsonrpc.from_obj, self.session.observe
        run: list[bytes] = []
        for item in items:
            if type(item) is bytes:
                try:
                    message = from_obj(loads(item))
                except (orjson.JSONDecodeError, jsonrpc.InvalidMessage):
                    pass  # the odd line's path below says why
                else:
                    run.append(item[:-1] if item[-1:] == b"\r" else item)  # a trace line holds no CR
                    if found := observe(direction, message, ts):
                        self._flush(direction, run, ts, records)
                        self._session_violations(found, ts, records)
                    continue
            self._flush(direction, run, ts, records)
            self._odd_line(direction, item, ts, records)
        self._flush(direction, run, ts, records)

    def _flush(self, direction: Direction, run: list[bytes], ts: float, records: list[bytes]) -> None:
        if run:
            records.append(self.writer.encode_messages(self.session_id, direction.value, run, ts))
            run.clear()

    def _odd_line(self, direction: Direction, item: bytes | Line | LineTooLong, ts: float, records: list[bytes]) -> None:
        """A line that is not a plain message: too long, cut off by EOF, not JSON or not JSON-RPC."""
        if type(item) is LineTooLong:
            records.append(self._violation(direction, ts, "line-too-long", f"a line of {item.size} bytes", item.head))
            return
        data = item if type(item) is bytes else item.data
        torn = type(item) is Line and not item.terminated
        try:
            message = jsonrpc.decode(data)
        except jsonrpc.NotJson as exc:
            code = "stdout-pollution" if direction is S2C else "not-json"
            records.append(self._violation(direction, ts, code, exc.reason, data))
            message = None
        except jsonrpc.InvalidMessage as exc:
            records.append(self._violation(direction, ts, "invalid-message", exc.reason, data))
            message = None
        else:
            records.append(self.writer.encode_message(self.session_id, direction.value, data.removesuffix(b"\r"), ts))
        if torn:  # junk or not, a last line without its newline is reported as torn
            records.append(self._violation(direction, ts, "unterminated-line", "the stream ended inside a line", None))
        if message is not None:
            self._session_violations(self.session.observe(direction, message, ts), ts, records)

    def _session_violations(self, found: list, ts: float, records: list[bytes]) -> None:
        for item in found:
            if type(item) is Violation:
                records.append(self._violation(item.direction, ts, item.code, item.detail, None))

    def _violation(self, direction: Direction | None, ts: float, code: str, detail: str, raw: bytes | None) -> bytes:
        fields: dict[str, Any] = {"code": code, "detail": detail}
        if raw is not None:
            fields["raw"] = text_or_b64(raw)
        return self._encode(Kind.VIOLATION, direction, ts, **fields)

    def _encode(self, kind: str, direction: Direction | None, ts: float, **fields: Any) -> bytes:
        return self.writer.encode(
            {"ts": ts, "session": self.session_id, "dir": direction.value if direction else None, "kind": kind, **fields}
        )


def fork_recorder(writer: TraceWriter, session_id: str, detach_fds: tuple[int, ...] = ()) -> tuple[int, int]:
    """Fork a recorder process; return (its pid, the channel's write end).

    Call before starting any thread (fork copies only the calling thread). In
    the child, `detach_fds` (the host's stdin and stdout) are pointed at
    /dev/null, so a recorder still draining never holds the host's pipes open;
    it exits when the channel ends.
    """
    read_end, write_end = os.pipe()
    try:
        fcntl.fcntl(write_end, F_SETPIPE_SZ, CHANNEL_BYTES)
    except OSError:
        pass  # not Linux, or a lower system limit: the default pipe works, only slower
    pid = os.fork()
    if pid:
        os.close(read_end)
        writer.close()  # only the recorder writes the trace
        return pid, write_end
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # Recording is background work: when the session's processes (host,
        # tee, server) want a core, they go first; the channel absorbs bursts.
        os.nice(RECORDER_NICENESS)
        os.close(write_end)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in detach_fds:
            os.dup2(null, fd)
        Recorder(writer, session_id).run(read_end)
        writer.close()
        if writer.failed:  # said on stderr when it happened; the tee ends non-zero
            status = RECORDING_FAILED
    except BaseException:  # noqa: BLE001 - a child of fork must never return into the tee's code
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        os._exit(status)
