"""`mcpbench tee`: sit between an MCP host and a stdio server, record everything.

The host starts us instead of the server; we start the server as our child and
copy bytes both ways. Three threads each copy one pipe (host→server stdin,
server stdout→host, server stderr→our stderr) with blocking reads and writes,
so neither direction can stall the other.

Bytes pass through unchanged, as soon as they are read: a chunk is forwarded
whole, even mid-line. Just before, it is appended to the trace's spool file,
which the recorder process (`recorder.py`) turns into events off the bytes'
path. A chunk is in the spool (in the kernel) before the peer can answer it, so
the trace's order is causal and a kill of the whole process tree loses nothing
that was forwarded.

Measured against this design and not kept (same-rotation A/B runs of `bench tee`, 2 cores):
one thread with an epoll loop (p50 4 µs slower: an `epoll_wait` more per chunk, and the GIL is
never contended here, as the pumps sleep in `read` with it released); frames stored into a shared
mapping of the spool instead of written (the lock and the call cost 0.3 µs per chunk more than
the `write` they save); reads of 1 MiB (11 µs per read: the allocator maps and unmaps them; 512 B
to 64 KiB cost the same); `readv` into a buffer made once; the recorder pausing 1 or 50 ms
between reads (all within ±1 %); the answer pump polling for 50-200 µs before it sleeps (0.86× the
plain tee's round trips: it takes the core the server needs); splicing each pipe into a spool file
per direction and `sendfile` onward, no copy in user space (0.95-0.99× before any timestamp or
index); both pumps pinned to one CPU (about 1.0× on an idle machine, but 0.43× and a 2 ms p99 when
another process is busy on that CPU: the scheduler can no longer move them). What the recording
costs the session is packing and writing each frame before the forward: ~1.1 µs in a loop, but
~2.4 µs (p50) in place, run cold right after the pump wakes up (a `write` to /dev/null or a store
into a mapping took ~2 µs there too), and time spent before a forward costs the round trip about
1.5× its length (a 1-10 µs spin there, measured); then the recorder's work on the other core. The
recorder asks the kernel for a long slice so that it never holds a core a session process wakes up
for (see `recorder.background`: that was one round trip in a hundred, ~1 ms late).
"""

import contextlib
import errno
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from mcpbench.companions.live import LiveView
from mcpbench.system.processes import STOP_SIGNALS, dying_with_parent, findable
from mcpbench.protocol.errors import TargetError, TraceError, TraceWriteError
from mcpbench.protocol.transports import STDIO
from mcpbench.stdio import recorder
from mcpbench.trace.format import Kind
from mcpbench.trace import shared
from mcpbench.trace.spool import C2S_DATA, HEADER, S2C_DATA, STDERR_DATA, event_frame, spool_path
from mcpbench.trace.spool import finish as finish_trace
from mcpbench.trace.writer import TraceWriter

# One read takes at most a pipe's default capacity on Linux: larger reads only
# allocate more for the common small message.
READ_SIZE = 64 * 1024

# Chunks below this size are appended to the spool as one joined `bytes`;
# larger ones with `writev`, which spares copying them (measured on small
# chunks: joined 0.9-1.0 µs, writev 1.3-1.6 µs per append).
COPY_LIMIT = 16 * 1024

# After the server exits, how long its stdout and stderr may stay open (held by
# a grandchild, say) before we stop waiting and exit anyway.
DRAIN_TIMEOUT = 5.0

# How long the tee waits, at exit, for the recorder to write what is still in
# the spool. Past it the recorder finishes on its own; the host need not wait.
RECORDER_TIMEOUT = 60.0

TRANSPORT = STDIO

# Signals the tee passes on to the server instead of acting on them itself: the stop signals
# (SIGINT, SIGTERM, SIGHUP). The server is in a process group of its own, so a terminal's hang-up
# reaches it through the tee too.
FORWARDED_SIGNALS = STOP_SIGNALS

# How long a server may take to stop after a forwarded stop signal before the tee
# kills it: hosts give a stdio server about this long before they kill the tee itself.
KILL_GRACE = 5.0


class Tee:
    """One server process behind a recording tee.

    Args:
        argv: the server command.
        writer: where events go; None passes bytes through without recording.
        stdin, stdout, stderr: our own file descriptors (the host's pipes).
        telemetry: makes, in the recorder process, what sends the trace's spans and metrics
            (`recorder.fork_recorder`); None sends nothing.
    """

    def __init__(
        self, argv: list[str], writer: TraceWriter | None, *, stdin: int = 0, stdout: int = 1, stderr: int = 2,
        telemetry: "Callable[[TraceWriter], recorder.Tap] | None" = None,
    ) -> None:
        if not argv:
            raise TargetError("no server command given (usage: mcpbench tee -- COMMAND [ARGS…])")
        self.argv = argv
        self.writer = writer
        self.session_id = uuid.uuid4().hex[:12]
        self.fds = (stdin, stdout, stderr)
        self.telemetry = telemetry
        self.proc: subprocess.Popen | None = None
        self._appending: int | None = None  # the spool while recording; None once appending failed
        self._spool: int | None = None  # the spool's descriptor, to close
        self._stop_lock = threading.Lock()  # for stopping: never taken on the bytes' path
        self._alive: int | None = None  # the recorder drains the spool when this pipe ends
        self._recorder_pid: int | None = None
        self._done: int | None = None  # the recorder writes its status here once the trace is complete
        self._say: recorder.FailureLine | None = None  # the one line that says recording failed
        # Why the trace is incomplete (said on stderr when it happened), or None.
        self.recording_failed: str | None = None
        self._stop_signal: int | None = None  # the first stop signal forwarded to the server
        self._killed = False  # the server ignored it for KILL_GRACE and was killed

    def run(self) -> int:
        """Start the server, copy until it exits, return its exit status.

        Raises:
            TargetError: the command cannot be started.
        """
        stdin, stdout, stderr = self.fds
        if self.writer is not None:
            # Fork before any thread exists: fork copies only the calling thread.
            self._recorder_pid, self._spool, self._alive, self._done, self._say = recorder.fork_recorder(
                self.writer, self.session_id, detach_fds=(stdin, stdout), telemetry=self.telemetry,
            )
            self._appending = self._spool
        try:
            if not findable(self.argv[0]):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
            # A process group of its own: a Ctrl-C in the host's terminal then
            # reaches the server once, through us, not twice. The server dies with us.
            self.proc = proc = subprocess.Popen(
                dying_with_parent(self.argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, bufsize=0, process_group=0,
            )
        except OSError as exc:
            self._finish_recording()
            raise TargetError(f"cannot start {shlex.join(self.argv)}: {exc.strerror}") from None
        self._event(kind=Kind.PROCESS, event="start", argv=self.argv, pid=proc.pid)
        previous = {sig: signal.signal(sig, self._forward_signal) for sig in FORWARDED_SIGNALS}
        # The host may have started us with these blocked (the server, already
        # started, keeps the host's mask); we must see them to forward them.
        # After the handlers are set: one pending since before is forwarded too.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
        pumps = [
            threading.Thread(target=self._pump, args=(stdin, proc.stdin.fileno(), C2S_DATA, proc.stdin.close), daemon=True),
            threading.Thread(target=self._pump, args=(proc.stdout.fileno(), stdout, S2C_DATA, lambda: os.close(stdout)), daemon=True),
            threading.Thread(target=self._pump, args=(proc.stderr.fileno(), stderr, STDERR_DATA, lambda: None), daemon=True),
        ]
        # Only the main thread may take the forwarded signals: one that lands on
        # a pump thread, blocked in read(), leaves the main thread blocked in
        # waitpid() until the server exits on its own. Threads inherit the mask
        # of the thread that starts them.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
        try:
            for pump in pumps:
                pump.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal that came meanwhile is handled now
        try:
            code = proc.wait()
            for pump in pumps[1:]:  # the host's stdin may stay open: don't wait for it
                pump.join(DRAIN_TIMEOUT)
            status = 128 - code if code < 0 else code
            if self._killed and self._stop_signal:
                status = 128 + self._stop_signal  # we had to kill it: report the stop we were asked for
            self._event(kind=Kind.PROCESS, event="exit", exit_code=status, signal=-code if code < 0 else None)
            self._finish_recording(pumps)
        finally:  # until the recording is complete, a stop (a second Ctrl-C) goes to a server that is gone
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return status

    def _forward_signal(self, signum: int, frame: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signum)
            if self._stop_signal is None:  # the first stop starts the grace period
                self._stop_signal = signum
                timer = threading.Timer(KILL_GRACE, self._kill_server)
                timer.daemon = True
                timer.start()

    def _kill_server(self) -> None:
        """The server outlived the grace period after a forwarded stop: SIGKILL it."""
        if self.proc and self.proc.poll() is None:
            self._killed = True
            self.proc.kill()

    def _pump(self, src: int, dst: int, kind: int, close_dst) -> None:
        # The loop runs once per message in an interactive session, with the
        # peer waiting: names are bound once and the common case takes one
        # `write` to the spool and one `write` onward. No lock: the spool is
        # opened O_APPEND, so each thread's `write` of a whole frame lands whole.
        # One `write` of header + chunk beats a `writev` of the two for the
        # small chunks an MCP session is made of (the copy costs less than the
        # iovec), a `writev` saves copying a large one; the time is packed as
        # integer µs, converted by the recorder.
        read, write, writev, pack, clock = os.read, os.write, os.writev, HEADER.pack, time.time_ns
        overhead, copy_limit = HEADER.size, COPY_LIMIT
        forwarding = True
        while True:
            try:
                chunk = read(src, READ_SIZE)
            except OSError:
                chunk = b""
            spool = self._appending  # read each time: once one pump fails, none appends any more
            if spool is not None:  # an empty chunk tells the recorder: EOF
                try:
                    size = len(chunk)
                    header = pack(kind, clock() // 1000, size)
                    written = write(spool, header + chunk) if size < copy_limit else writev(spool, (header, chunk))
                    if written < overhead + size:  # rare: finish the frame, or meet the real error (ENOSPC, EFBIG)
                        rest = memoryview(header + chunk)[written:]
                        while rest:
                            rest = rest[write(spool, rest) :]
                except OSError as exc:
                    self._spool_failed(exc)
            if not chunk:
                break
            if forwarding:
                try:
                    written = write(dst, chunk)
                    if written < len(chunk):  # a full pipe took part of it
                        view = memoryview(chunk)[written:]
                        while view:
                            view = view[write(dst, view) :]
                except OSError:
                    # The reader is gone (server exited, host closed): keep
                    # draining so the other side never blocks on a full pipe.
                    forwarding = False
        # EOF from the host closes the server's stdin; EOF from the server
        # closes our stdout, so the host sees the end too.
        try:
            close_dst()
        except OSError:
            pass

    def _event(self, **event: object) -> None:
        spool = self._appending
        if spool is not None:
            try:
                os.writev(spool, event_frame(time.time_ns() // 1000, event))
            except OSError as exc:
                self._spool_failed(exc)

    def _spool_failed(self, exc: OSError) -> None:
        """Never break the observed session (a full disk, say): stop recording, say so once."""
        with self._stop_lock:
            if self._appending is not None:
                self.recording_failed = f"{self.writer.path}: cannot append to its spool ({exc.strerror}); recording stopped, traffic still passes"
                self._say(f"mcpbench: {self.recording_failed}")
                self._appending = None  # not closed: another pump may be writing to it

    def _finish_recording(self, pumps: list[threading.Thread] = ()) -> None:
        """Tell the recorder we are done and give it time to write what it has not yet.

        The spool is closed only once no pump can write to it any more (the
        host may keep our stdin open past the server's exit); else at our exit.
        """
        with self._stop_lock:
            if self._alive is not None:
                os.close(self._alive)  # the recorder now drains the spool to its end
                self._alive = None
            if self._spool is not None and not any(pump.is_alive() for pump in pumps):
                os.close(self._spool)
                self._appending = self._spool = None
        if self._recorder_pid is None:
            return
        try:
            # Readable once the trace is complete (a byte: the recorder's status; it may send spans on
            # for a while, on its own) or the recorder is gone (end of file, no byte).
            said = os.read(self._done, 1) if select.select([self._done], [], [], RECORDER_TIMEOUT)[0] else None
        finally:
            os.close(self._done)
        if said == b"":  # gone without a word: its exit status says how
            code = os.waitstatus_to_exitcode(os.waitpid(self._recorder_pid, 0)[1])
        else:
            code = said[0] if said else 0
            os.waitpid(self._recorder_pid, os.WNOHANG)  # reaped now if it has exited; else init reaps it
        if code and not self.recording_failed:
            if code == recorder.RECORDING_FAILED:  # it said why on stderr
                self.recording_failed = "the trace could not be written to the end"
            else:  # killed: what it had not written stays in the spool, which readers read on from
                self.recording_failed = f"recorder gone (status {code}); recording stopped, traffic still passes"
                self._say(f"mcpbench: {self.recording_failed}")
        self._recorder_pid = None


def run_tee(
    argv: list[str], out: str | None, redact: tuple[str, ...] = (), *, record: bool = True, live: bool = False,
    telemetry: "Callable[[TraceWriter], recorder.Tap] | None" = None,
) -> int:
    """Run `argv` behind a tee recording to `out` (or the default folder); return its exit status.

    With `live`, the live view of the recording opens on the terminal stderr is on
    (`companions/live.py`), and the tee exits once it is left (`q`) after the server's end.
    `telemetry` (`Tee`) sends spans and metrics from the recorder process as it records.

    Raises:
        TraceWriteError: the server ended well but the trace could not be written to the end.
    """
    from mcpbench.trace.redact import Redactor
    from mcpbench.trace.writer import default_trace_path

    writer = share = tee = None
    if record:
        path = out or default_trace_path(os.path.basename(argv[0]) if argv else "session")
        share = Share.start(path)
        try:
            writer = TraceWriter(share.writes_to, transport=TRANSPORT, header={"command": argv}, redactor=Redactor(redact),
                                 append=share.appends)
            share.hold()
        except BaseException:
            share.end(complete=False)
            raise
        print(f"mcpbench: recording to {path}", file=sys.stderr, flush=True)
    view = LiveView(writer.path) if live and writer else None
    try:
        if view is None or not view.open():
            tee = Tee(argv, writer, telemetry=telemetry)
            try:
                status = tee.run()
            finally:
                if writer:
                    writer.close()
        else:
            try:
                tee, status = _run_with_view(argv, writer, view, telemetry)
            finally:
                view.close()
    finally:
        if share is not None:
            share.end(complete=tee is not None and not tee.recording_failed)
    if status != 0:
        command = shlex.join(Redactor(redact).argv(argv))
        print(f"mcpbench: {command} exited with status {status}", file=sys.stderr, flush=True)
    elif tee.recording_failed:  # the server did fine; the recording did not
        raise TraceWriteError(tee.recording_failed, reported=True)
    return status


class Share:
    """This tee's place in a trace other tees may record to as well (`trace/shared.py`).

    The owner of the path (no other tee records to it now) writes into it, appending to the
    sessions already there; a tee started while another owns it writes a part of its own, added
    to the trace once complete.
    """

    def __init__(self, path: Path, claim: int | None, part: Path | None) -> None:
        self.path, self._claim, self.part = path, claim, part
        self._held: int | None = None

    @classmethod
    def start(cls, path: str | os.PathLike) -> "Share":
        path = Path(path)
        if os.path.exists(path) and not os.path.isfile(path):  # a device or a pipe: no trace to share
            return cls(path, None, None)
        claim = shared.claim(path)
        if claim is None:  # another tee records to it: a part of our own
            return cls(path, None, shared.part_path(path, uuid.uuid4().hex[:12]))
        # A recording to this path killed with its recorder left a spool, and killed tees parts:
        # they are added first. (A path that cannot be written is said by the writer, next.)
        with contextlib.suppress(OSError, TraceError):
            finish_trace(path)
        with contextlib.suppress(OSError, TraceError):
            shared.fold(path)
        # A compressed trace cannot be continued in place: its owner writes a part too, merged at its end.
        compressed = os.path.exists(path) and os.path.getsize(path) > 0 and not shared.appendable(path)
        return cls(path, claim, shared.part_path(path, uuid.uuid4().hex[:12]) if compressed else None)

    @property
    def writes_to(self) -> Path:
        return self.part or self.path

    @property
    def appends(self) -> bool:
        return self.part is None and shared.appendable(self.path)

    def hold(self) -> None:
        """Hold the part while it is recorded (call once the writer has created it)."""
        if self.part is not None and self._held is None:
            self._held = shared.hold(self.part)

    def end(self, *, complete: bool) -> None:
        """Add a complete part to the trace (an incomplete one stays, for the next owner); give up the claim."""
        try:
            if self.part is not None and complete and not spool_path(self.part).exists():
                try:
                    shared.add_part(self.part, self.path, owned=self._claim is not None)
                except TraceError as exc:
                    print(f"mcpbench: {exc}; its sessions stay in {self.part} (mcpbench trace finish {self.path} adds them)",
                          file=sys.stderr, flush=True)
        finally:
            for fd in (self._held, self._claim):
                if fd is not None:
                    os.close(fd)
            self._held = self._claim = None


def _run_with_view(argv: list[str], writer: TraceWriter, view: LiveView, telemetry=None) -> tuple[Tee, int]:
    """The tee with its live view on stderr's terminal: the server's stderr (recorded, and shown in
    the view) is not also written over the view while it is open; the tee waits for the view to be
    left once the server has ended."""
    quiet = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)  # the server's stderr goes here until the view is left

    def view_left(signum: int, frame: object) -> None:  # SIGCHLD: no thread (the recorder is forked without any)
        if not view.running:
            os.dup2(2, quiet, inheritable=False)

    previous = signal.signal(signal.SIGCHLD, view_left)
    tee = Tee(argv, writer, stderr=quiet, telemetry=telemetry)
    try:
        status = tee.run()
    finally:
        signal.signal(signal.SIGCHLD, previous)
        os.dup2(2, quiet, inheritable=False)
        writer.close()
        os.close(quiet)
    view.wait()
    return tee, status

