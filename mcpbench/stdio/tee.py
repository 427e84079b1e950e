"""`mcpbench tee`: sit between an MCP host and a stdio server, record everything.

The host starts us instead of the server; we start the server as our child and
copy bytes both ways. Three threads each copy one pipe (host→server stdin,
server stdout→host, server stderr→our stderr) with blocking reads and writes,
so neither direction can stall the other.

Bytes pass through unchanged, as soon as they are read: a chunk is forwarded
whole, even mid-line. The complete lines in a chunk are recorded *before* the
chunk is forwarded, so the trace's order is causal: a request is always in the
file before the server can have seen it, hence before its answer.
"""

import os
import shlex
import signal
import subprocess
import sys
import threading
import uuid

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import TargetError
from mcpbench.protocol.framing import Line, LineFramer, LineTooLong
from mcpbench.protocol.session import C2S, S2C, Direction, Session, Violation
from mcpbench.trace.format import Kind, now, text_or_b64
from mcpbench.trace.writer import TraceWriter

# One read takes at most a pipe's default capacity on Linux: larger reads only
# allocate more for the common small message.
READ_SIZE = 64 * 1024

# After the server exits, how long its stdout and stderr may stay open (held by
# a grandchild, say) before we stop waiting and exit anyway.
DRAIN_TIMEOUT = 5.0

TRANSPORT = "stdio"


class Tee:
    """One server process behind a recording tee.

    Args:
        argv: the server command.
        writer: where events go; None passes bytes through without recording.
        stdin, stdout, stderr: our own file descriptors (the host's pipes).
    """

    def __init__(self, argv: list[str], writer: TraceWriter | None, *, stdin: int = 0, stdout: int = 1, stderr: int = 2) -> None:
        if not argv:
            raise TargetError("no server command given (usage: mcpbench tee -- COMMAND [ARGS…])")
        self.argv = argv
        self.writer = writer
        self.session_id = uuid.uuid4().hex[:12]
        self.session = Session()
        self.fds = (stdin, stdout, stderr)
        self._lock = threading.Lock()  # one Session, three threads
        self.proc: subprocess.Popen | None = None

    def run(self) -> int:
        """Start the server, copy until it exits, return its exit status.

        Raises:
            TargetError: the command cannot be started.
        """
        try:
            # A process group of its own: a Ctrl-C in the host's terminal then
            # reaches the server once, through us, not twice.
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, process_group=0
            )
        except OSError as exc:
            raise TargetError(f"cannot start {shlex.join(self.argv)}: {exc.strerror}") from None
        proc = self.proc
        self._event(Kind.PROCESS, None, event="start", argv=self.argv, pid=proc.pid)
        previous = {sig: signal.signal(sig, self._forward_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        stdin, stdout, stderr = self.fds
        pumps = [
            threading.Thread(target=self._pump, args=(stdin, proc.stdin.fileno(), C2S, proc.stdin.close), daemon=True),
            threading.Thread(target=self._pump, args=(proc.stdout.fileno(), stdout, S2C, lambda: os.close(stdout)), daemon=True),
            threading.Thread(target=self._pump_stderr, args=(proc.stderr.fileno(), stderr), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        try:
            code = proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        for pump in pumps[1:]:  # the host's stdin may stay open: don't wait for it
            pump.join(DRAIN_TIMEOUT)
        status = 128 - code if code < 0 else code
        with self._lock:
            self.session.close()
        self._event(Kind.PROCESS, None, event="exit", exit_code=status, signal=-code if code < 0 else None)
        return status

    def _forward_signal(self, signum: int, frame: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signum)

    def _pump(self, src: int, dst: int, direction: Direction, close_dst) -> None:
        framer = LineFramer()
        forwarding = True
        while True:
            try:
                chunk = os.read(src, READ_SIZE)
            except OSError:
                chunk = b""
            ts = now()
            events = framer.feed(chunk) if self.writer else ()
            if events:
                records: list[bytes] = []
                with self._lock:
                    for event in events:
                        self._record_line(direction, event, ts, records)
                self.writer.write_lines(records)
            if not chunk:
                break
            if forwarding:
                try:
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(dst, view) :]
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

    def _pump_stderr(self, src: int, dst: int) -> None:
        framer = LineFramer()
        while True:
            try:
                chunk = os.read(src, READ_SIZE)
            except OSError:
                chunk = b""
            ts = now()
            if self.writer:
                for event in framer.feed(chunk):
                    text = event.data if isinstance(event, Line) else event.head
                    self._event(Kind.STDERR, S2C, ts=ts, text=text_or_b64(text))
            if not chunk:
                return
            try:
                os.write(dst, chunk)
            except OSError:
                pass

    def _record_line(self, direction: Direction, event: Line | LineTooLong, ts: float, records: list[bytes]) -> None:
        """Check one line and append its trace records to `records`."""
        if isinstance(event, LineTooLong):
            records.append(self._violation(direction, ts, "line-too-long", f"a line of {event.size} bytes", event.head))
            return
        data = event.data
        try:
            message = jsonrpc.decode(data)
        except jsonrpc.NotJson as exc:
            code = "stdout-pollution" if direction is S2C else "not-json"
            records.append(self._violation(direction, ts, code, exc.reason, data))
            return
        except jsonrpc.InvalidMessage as exc:
            records.append(self._violation(direction, ts, "invalid-message", exc.reason, data))
            return
        records.append(self.writer.encode_message(self.session_id, direction.value, data, ts))
        if not event.terminated:
            records.append(self._violation(direction, ts, "unterminated-line", "the stream ended inside a line", None))
        for item in self.session.observe(direction, message, ts):
            if isinstance(item, Violation):
                records.append(self._violation(item.direction, ts, item.code, item.detail, None))

    def _violation(self, direction: Direction | None, ts: float, code: str, detail: str, raw: bytes | None) -> bytes:
        fields = {"code": code, "detail": detail}
        if raw is not None:
            fields["raw"] = text_or_b64(raw)
        return self._encode(Kind.VIOLATION, direction, ts, **fields)

    def _encode(self, kind: str, direction: Direction | None, ts: float | None = None, **fields: object) -> bytes:
        return self.writer.encode(
            {"ts": ts or now(), "session": self.session_id, "dir": direction.value if direction else None, "kind": kind, **fields}
        )

    def _event(self, kind: str, direction: Direction | None, ts: float | None = None, **fields: object) -> None:
        if self.writer:
            self.writer.write_lines([self._encode(kind, direction, ts, **fields)])


def run_tee(argv: list[str], out: str | None, redact: tuple[str, ...] = (), *, record: bool = True) -> int:
    """Run `argv` behind a tee recording to `out` (or the default folder); return its exit status."""
    from mcpbench.trace.redact import Redactor
    from mcpbench.trace.writer import default_trace_path

    writer = None
    if record:
        path = out or default_trace_path(os.path.basename(argv[0]) if argv else "session")
        writer = TraceWriter(path, transport=TRANSPORT, header={"command": argv}, redactor=Redactor(redact))
        print(f"mcpbench: recording to {writer.path}", file=sys.stderr, flush=True)
    try:
        status = Tee(argv, writer).run()
    finally:
        if writer:
            writer.close()
    if status != 0:
        print(f"mcpbench: {shlex.join(argv)} exited with status {status}", file=sys.stderr, flush=True)
    return status
