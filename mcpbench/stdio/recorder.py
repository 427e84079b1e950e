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
process drains the spool to the trace and exits; it ignores the stop signals
(SIGINT, SIGTERM, SIGHUP) for that reason. When the tee, the server and this process are killed together
(a host killing its process group, the OOM killer), the spool is left behind:
every trace reader reads the rest of the trace from it, in memory, and
`mcpbench trace finish` (or the next tee recording to that path) writes it. A
spool is deleted once its trace is complete.

The spool's frames and their decoding into trace lines are `trace/spool.py`'s
(`SpoolDecoder`): this process and every reader of a spool left behind decode
it alike.
"""

import fcntl
import mmap
import os
import select
import signal
import struct
import sys
from collections.abc import Callable
from typing import Protocol

from mcpbench.system.processes import STOP_SIGNALS
from mcpbench.protocol.errors import TraceError
from mcpbench.trace.spool import HEADER, SpoolDecoder, spool_path, start_frame
from mcpbench.trace.writer import TraceWriter

# The recorder's exit status when the trace could not be written to the end (the tee reads it).
RECORDING_FAILED = 3

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


class Tap(Protocol):
    """What takes the trace's lines as the recorder writes them (`TraceWriter.tap`), closed at the end."""

    def __call__(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class Recorder:
    """Reads the spool as it grows and writes the trace of one stdio session (`SpoolDecoder` decodes it)."""

    def __init__(self, writer: TraceWriter, session_id: str) -> None:
        self.writer = writer
        self.decoder = SpoolDecoder(writer, session_id)

    def run(self, spool: int, alive: int) -> None:
        """Record what the spool holds and gets until `alive` ends (the tee is done or dead), then close the session."""
        # Reads go into one buffer made once: `os.read(fd, 1 MiB)` allocates
        # (and the allocator maps and unmaps) 1 MiB per call, ~20 µs even when
        # the read brings one small message, as it does in an interactive session.
        buf = bytearray(SPOOL_READ)
        filled = 0
        pause = PAUSE_SECONDS
        ending = False
        take = self.decoder.take
        while True:
            with memoryview(buf) as view:
                got = os.readv(spool, [view[filled:]])
            if got:
                filled += got
                offset, records = take(buf, filled)
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
        if records := self.decoder.finish():
            self.writer.write_lines(records)


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


def fork_recorder(
    writer: TraceWriter, session_id: str, detach_fds: tuple[int, ...] = (), telemetry: "Callable[[TraceWriter], Tap] | None" = None,
) -> tuple[int, int, int, int, "FailureLine"]:
    """Create the spool, fork a recorder process; return (its pid, the spool to append to, the liveness pipe,
    the done pipe, the tee's and the recorder's one failure line).

    Call before starting any thread (fork copies only the calling thread). The
    caller appends frames to the spool (O_APPEND: one `writev` lands whole)
    and closes both fds when done; the recorder drains the spool at the
    liveness pipe's end. In the child, `detach_fds` (the host's stdin and
    stdout) are pointed at /dev/null, so a recorder still draining never holds
    the host's pipes open. `telemetry`, called in the child with the writer,
    gives the tap every written line goes to (spans and metrics, sent from this
    process, off the session's path); it is closed once the trace is complete.
    The recorder says the trace is complete on the done pipe, one byte, its exit
    status, before it closes the tap: the tee need not wait for an OTLP endpoint.

    The tee's and the recorder's spool descriptors each hold a shared `flock`:
    a reader of a spool left behind takes it exclusively (`spool.leftover`), so
    it never reads a live recording as a killed one.
    """
    spool = spool_path(writer.path)
    try:
        spool_fd = os.open(spool, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise TraceError(f"{spool}: cannot create the trace's spool: {exc.strerror}") from None
    fcntl.flock(spool_fd, fcntl.LOCK_SH)
    os.writev(spool_fd, start_frame(session_id, writer.redactor))
    alive_read, alive_write = os.pipe()
    done_read, done_write = os.pipe()
    said = FailureLine()
    pid = os.fork()
    if pid:
        os.close(alive_read)
        os.close(done_write)
        writer.close()  # only the recorder writes the trace
        return pid, spool_fd, alive_write, done_read, said
    status = 0
    try:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        background()
        os.close(alive_write)
        os.close(done_read)
        os.close(spool_fd)  # the tee's description keeps its lock; ours is our own
        reader = os.open(spool, os.O_RDONLY | os.O_CLOEXEC)
        fcntl.flock(reader, fcntl.LOCK_SH)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in detach_fds:
            os.dup2(null, fd)
        writer.announce = said
        tap = writer.tap = telemetry(writer) if telemetry is not None else None
        Recorder(writer, session_id).run(reader, alive_read)
        writer.close()
        if writer.failed:  # said on stderr when it happened; the tee ends non-zero
            status = RECORDING_FAILED  # the spool stays: readers read the rest from it, `trace finish` writes it
        else:
            os.unlink(spool)  # the trace is complete: the raw copy goes (before our lock does)
        try:
            os.write(done_write, bytes([status]))
        except OSError:
            pass  # the tee is gone
        os.close(done_write)  # the tee may exit now
        if tap is not None:
            tap.close()
    except BaseException:  # noqa: BLE001 - a child of fork must never return into the tee's code
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        os._exit(status)
