"""The tee's recorder: a forked process that turns copied bytes into trace events.

The tee appends each chunk it reads to the *spool*, a file of raw frames
beside the trace (`<trace>.spool`, mode 0600), and only then forwards it.
This process reads the spool as it grows and does the decoding, session
tracking and trace writing, on the other core and off the path the bytes take,
so the tee adds one `write` to a file per chunk to the session, not the cost
of recording (and never wakes this process: it polls).

Order: the tee writes a chunk to the spool before it forwards it, so an answer
can never be in the spool before the request that caused it: the trace's
order is causal. Durability: a chunk is in the kernel (the spool's page cache)
before the peer can have it. When the tee dies alone (even by kill -9), this
process drains the spool to the trace and exits; it ignores SIGINT and SIGTERM
for that reason. When the tee, the server and this process are killed together
(a host killing its process group, the OOM killer), the spool is left behind
and `recover` (run by the trace reader) finishes the trace from it. A spool is
deleted once its trace is complete.

Spool frames: a header `<B q I` (frame kind, wall-clock time in integer µs,
payload length) and the payload. The first frame (`START`) names the session
and the redaction rules, so that a recovery encodes exactly what this process
would have.
"""

import fcntl
import mmap
import os
import select
import signal
import struct
import sys
from pathlib import Path
from typing import Any

import orjson

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import TraceError
from mcpbench.protocol.framing import Line, LineFramer, LineTooLong
from mcpbench.protocol.rules import STDIO
from mcpbench.protocol.session import C2S, S2C, Direction, Session, Violation
from mcpbench.trace.format import Kind, text_or_b64
from mcpbench.trace.redact import Redactor
from mcpbench.trace.spool import spool_path
from mcpbench.trace.writer import TraceWriter

HEADER = struct.Struct("<BqI")

# The recorder's exit status when the trace could not be written to the end (the tee reads it).
RECORDING_FAILED = 3

# Frame kinds. Data frames carry raw bytes; an empty data frame is that stream's EOF.
C2S_DATA, S2C_DATA, STDERR_DATA, EVENT, START = 1, 2, 3, 4, 5

# The `detail` of the `error` event written for each client request still unanswered at the end.
UNANSWERED = "the session ended before its answer"

# One read of the spool: large, since a burst of small frames then costs one syscall.
SPOOL_READ = 1024 * 1024

# How much lower the recorder's scheduling priority is than the tee's.
RECORDER_NICENESS = 10
# The recorder's scheduler slice: the longest the kernel takes (see `background`).
RECORDER_SLICE_NS = 100_000_000
# sched_setattr(2), which Python's `os` does not wrap, by machine.
SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}

# After a read that brought little (an interactive session: a message or two),
# the recorder waits this long before reading again, so the messages of the
# next 10 ms come in one read. Each wake-up of the recorder costs the session
# (timers and a context switch on a shared core): measured with the earlier
# pipe hand-off, 10 ms gave 5-15 µs less p50 than 1 ms in each of 6 paired
# runs. The tee never wakes the recorder (it appends to a file), so the pause
# bounds only how far the trace lags the session; durability does not depend
# on it. A read of SMALL_READ or more skips the pause; with nothing new the
# pause doubles up to IDLE_PAUSE_SECONDS, so an idle session costs ~10 wake-ups/s.
PAUSE_SECONDS = 0.01
IDLE_PAUSE_SECONDS = 0.1
SMALL_READ = 16 * 1024


def frame(kind: int, ts: int, payload: bytes = b"") -> list[bytes]:
    """The pieces of one spool frame (for `os.writev`, so the payload is not copied)."""
    return [HEADER.pack(kind, ts, len(payload)), payload]


def event_frame(ts: int, event: dict[str, Any]) -> list[bytes]:
    """A frame carrying a ready trace event (process start and exit)."""
    return frame(EVENT, ts, orjson.dumps(event))


class Recorder:
    """Reads spool frames and writes the trace of one stdio session."""

    def __init__(self, writer: TraceWriter, session_id: str) -> None:
        self.writer = writer
        self.session_id = session_id
        self.session = Session(transport=STDIO)
        # CRs kept: a line that is not a message (junk, stderr) is recorded byte for byte.
        self.framers = {kind: LineFramer(keep_cr=True) for kind in (C2S_DATA, S2C_DATA, STDERR_DATA)}
        self.last_ts = 0.0  # of the last frame decoded: the time the session's end is written with

    def run(self, spool: int, alive: int) -> None:
        """Record what the spool holds and gets until `alive` ends (the tee is done or dead), then close the session."""
        # Reads go into one buffer made once: `os.read(fd, 1 MiB)` allocates
        # (and the allocator maps and unmaps) 1 MiB per call, ~20 µs even when
        # the read brings one small message, as it does in an interactive session.
        buf = bytearray(SPOOL_READ)
        filled = 0
        pause = PAUSE_SECONDS
        ending = False
        while True:
            with memoryview(buf) as view:
                got = os.readv(spool, [view[filled:]])
            if got:
                filled += got
                offset, records = self.take(buf, filled)
                if offset:  # keep the unfinished frame's start at the front
                    buf[: filled - offset] = buf[offset:filled]
                    filled -= offset
                if filled == len(buf):  # a frame larger than the buffer: make room for it
                    length = HEADER.unpack_from(buf)[2]
                    buf.extend(bytes(HEADER.size + length - len(buf)))
                if records:
                    self.writer.write_lines(records)
                pause = PAUSE_SECONDS
                if got >= SMALL_READ:
                    continue
            elif ending:
                break  # the tee is gone and the spool is read to its end
            else:
                pause = min(pause * 2, IDLE_PAUSE_SECONDS)
            if not ending:
                # `alive` turns readable (end of file) when the tee closes it or dies: then drain.
                ending = bool(select.select([alive], [], [], pause)[0])
        if records := self.finish():
            self.writer.write_lines(records)

    def finish(self) -> list[bytes]:
        """Close the session: one `error` event per client request still awaiting its answer.

        Stamped with the last frame's time, so that `recover` writes the same lines from the spool.
        """
        records = [
            self._encode(Kind.ERROR, C2S, self.last_ts, detail=f"{pending.request.method}: {UNANSWERED}", id=request_id)
            for (direction, request_id), pending in self.session.pending.items()
            if direction is C2S
        ]
        self.session.close()
        return records

    def take(self, buf: bytes | bytearray, filled: int) -> tuple[int, list[bytes]]:
        """Decode the whole frames at the start of `buf[:filled]`: (bytes they took, the trace lines they make)."""
        records: list[bytes] = []
        unpack = HEADER.unpack_from
        offset = 0
        last_us = None  # of the last whole frame (a frame cut short has its header read, not decoded)
        while filled - offset >= HEADER.size:
            kind, us, length = unpack(buf, offset)
            end = offset + HEADER.size + length
            if end > filled:
                break
            self._frame(kind, us / 1e6, bytes(buf[offset + HEADER.size : end]), records)
            offset = end
            last_us = us
        if last_us is not None:
            self.last_ts = last_us / 1e6
        return offset, records

    def _frame(self, kind: int, ts: float, payload: bytes, records: list[bytes]) -> None:
        if kind == START:
            return  # read by `recover`; the running recorder was told the same at fork
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


def redaction_rules(redactor: Redactor) -> list[str]:
    """The `--redact` rules that make a `Redactor` equal to `redactor` (its defaults aside)."""
    return sorted(redactor.keys) + [".".join(path) for path in redactor.paths]


class FailureLine:
    """The one line on stderr that says a recording failed, shared by the tee and its recorder.

    A full disk fails the spool's appends (in the tee) and the trace's writes (in the recorder)
    alike; the host's stderr gets the first reason only. A byte of memory shared across the fork
    says whether it was said.
    """

    def __init__(self) -> None:
        self._said = mmap.mmap(-1, 1)  # anonymous and MAP_SHARED: one byte for both processes

    def __call__(self, line: str) -> None:
        if self._said[0] == 0:
            self._said[0] = 1
            print(line, file=sys.stderr, flush=True)


def background() -> None:
    """Make this process background work: lower its priority, and ask for a long scheduler slice.

    Niceness alone left one round trip in a hundred waiting ~1 ms for the recorder: the kernel's
    scheduler (EEVDF) lets a running task finish its slice before a waking one of the same class
    may take its core. A waking task whose slice is shorter than the running one's may preempt it
    at once, so the recorder asks for the longest slice (100 ms) and every session process, on its
    default slice, goes first. `bench tee`, alternated runs: added p99 0.83-0.84 ms at nice 10 alone,
    0.09-0.12 ms with the long slice too (SCHED_IDLE gave the same, but starves the recorder when
    every core is busy: a machine running a local model, say). Kernels before 6.12 ignore the slice.
    """
    nice = os.nice(RECORDER_NICENESS)
    number = SCHED_SETATTR.get(os.uname().machine)
    policy = os.sched_getscheduler(0)
    if number is None or policy not in (os.SCHED_OTHER, os.SCHED_BATCH):  # keep a policy the host chose
        return
    import ctypes  # here, not at the top: the tee's start-up (the host waits for it) need not load it

    # struct sched_attr (its first version, 48 bytes): size, policy, flags, nice, priority, runtime, deadline, period.
    attr = struct.pack("=IIQiIQQQ", 48, policy, 0, nice, 0, RECORDER_SLICE_NS, 0, 0)
    try:
        ctypes.CDLL(None, use_errno=True).syscall(number, 0, attr, 0)  # best effort: the slice is only a hint
    except (OSError, AttributeError):
        pass


def fork_recorder(writer: TraceWriter, session_id: str, detach_fds: tuple[int, ...] = ()) -> tuple[int, int, int, "FailureLine"]:
    """Create the spool, fork a recorder process; return (its pid, the spool to append to, the liveness pipe,
    the tee's and the recorder's one failure line).

    Call before starting any thread (fork copies only the calling thread). The
    caller appends frames to the spool (O_APPEND: one `writev` lands whole)
    and closes both fds when done; the recorder drains the spool at the
    liveness pipe's end. In the child, `detach_fds` (the host's stdin and
    stdout) are pointed at /dev/null, so a recorder still draining never holds
    the host's pipes open.

    The tee's and the recorder's spool descriptors each hold a shared `flock`:
    `recover` takes it exclusively, so it never touches a live recording.
    """
    spool = spool_path(writer.path)
    try:
        spool_fd = os.open(spool, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise TraceError(f"{spool}: cannot create the trace's spool: {exc.strerror}") from None
    fcntl.flock(spool_fd, fcntl.LOCK_SH)
    start = orjson.dumps({"session": session_id, "redact": redaction_rules(writer.redactor)})
    os.writev(spool_fd, frame(START, 0, start))
    alive_read, alive_write = os.pipe()
    said = FailureLine()
    pid = os.fork()
    if pid:
        os.close(alive_read)
        writer.close()  # only the recorder writes the trace
        return pid, spool_fd, alive_write, said
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        background()
        os.close(alive_write)
        os.close(spool_fd)  # the tee's description keeps its lock; ours is our own
        reader = os.open(spool, os.O_RDONLY | os.O_CLOEXEC)
        fcntl.flock(reader, fcntl.LOCK_SH)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in detach_fds:
            os.dup2(null, fd)
        writer.announce = said
        Recorder(writer, session_id).run(reader, alive_read)
        writer.close()
        if writer.failed:  # said on stderr when it happened; the tee ends non-zero
            status = RECORDING_FAILED  # the spool stays: a later read finishes the trace from it
        else:
            os.unlink(spool)  # the trace is complete: the raw copy goes (before our lock does)
    except BaseException:  # noqa: BLE001 - a child of fork must never return into the tee's code
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        os._exit(status)


def recover(trace: Path, spool: Path) -> bool:
    """Finish `trace` from the spool its recorder left (killed with its tee); True if it was finished.

    Re-decodes the whole spool as the recorder would have, checks that the
    trace's events are the beginning of the result, and appends the rest (a
    torn last line is replaced). Leaves both files alone while a tee or its
    recorder still holds the spool, or when the trace is not the spool's.
    A torn last frame (its writer killed inside the `writev`) was never
    forwarded, so dropping it loses nothing that crossed the tee.
    """
    try:
        fd = os.open(spool, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # finished meanwhile
    with os.fdopen(fd, "rb") as handle:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live recording
        data = handle.read()
        if len(data) < HEADER.size or HEADER.unpack_from(data)[0] != START:
            return False
        length = HEADER.unpack_from(data)[2]
        start = orjson.loads(data[HEADER.size : HEADER.size + length])
        encoder = TraceWriter(os.devnull, transport=STDIO, redactor=Redactor(start["redact"]))
        encoder.close()  # only its encoding is used
        recorder = Recorder(encoder, start["session"])
        _, records = recorder.take(data, len(data))
        records += recorder.finish()  # as the recorder ends a session it saw to the end
        wanted = b"".join(records).split(b"\n")[:-1]
        with open(trace, "r+b") as out:
            have = out.read()
            whole = have.rfind(b"\n") + 1  # past the last complete line
            lines = have[:whole].split(b"\n")[1:-1]  # the recorder's lines, after the tee's header line
            if lines != wanted[: len(lines)]:
                return False
            out.truncate(whole)
            out.seek(whole)
            out.write(b"".join(line + b"\n" for line in wanted[len(lines) :]))
        os.unlink(spool)
    return True
