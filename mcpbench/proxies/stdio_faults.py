"""`mcpbench faults stdio`: run a stdio MCP server and kill it at a time or after N messages.

A fault for the stdio clients' reconnect path: the wrapper starts the server as its child (dying
with it, `processes.py`), copies bytes both ways untouched (stderr is the server's own), and
counts the messages passing with the protocol core's `LineFramer` (a non-blank line is a message).
Once the Nth message has passed (the rest of the read that carried it passes too), or T seconds
after the start, the server gets SIGKILL; the wrapper then closes its stdout, so the client sees
the server go, and exits as the server did (137 for the kill). SIGINT, SIGTERM and SIGHUP are passed on.

From the moment the server is to die, nothing more it writes reaches the client: it is silenced
before the read that completes the Nth message to it is passed on. A server that answers faster
than SIGKILL lands would otherwise get its answer out, and the fault would depend on the machine's
load (a request killed mid-call, or answered and then a dead server).
"""

import os
import signal
import subprocess
import threading
import time
from typing import Final

from mcpbench.files.fdio import write_all
from mcpbench.protocol.errors import TargetError
from mcpbench.protocol.framing import NEED_DATA, Line, LineFramer
from mcpbench.system.processes import STOP_SIGNALS, dying_with_parent, findable
from mcpbench.proxies.faults import FaultLog

# Bytes per read: a pipe's default capacity.
READ_SIZE: Final = 64 * 1024
COUNTS: Final = ("both", "to-server", "from-server")


class Killer:
    """Counts messages per direction and decides when the server dies (thread-safe; no I/O)."""

    def __init__(self, messages: int | None, count: str = "both") -> None:
        if count not in COUNTS:
            raise ValueError(f"count must be one of {COUNTS}")
        self.messages = messages
        self.count = count
        self.seen = 0
        self._framers = {"to-server": LineFramer(), "from-server": LineFramer()}
        self._lock = threading.Lock()

    def feed(self, direction: str, chunk: bytes) -> bool:
        """Count the messages `chunk` completes in `direction`; True once the limit is reached."""
        framer = self._framers[direction]
        framer.receive_data(chunk)
        with self._lock:
            while (event := framer.next_event()) is not NEED_DATA:
                if isinstance(event, Line) and event.data.strip() and self.count in ("both", direction):
                    self.seen += 1
                elif not isinstance(event, Line):
                    break  # EOF, or a line too long to be a message we count
            return self.messages is not None and self.seen >= self.messages


def _pump(source: int, sink: int, direction: str, killer: Killer, kill, silenced: threading.Event) -> None:
    to_server = direction == "to-server"
    while True:
        try:
            chunk = os.read(source, READ_SIZE)
        except OSError:
            chunk = b""
        if not chunk:
            break
        if not to_server and silenced.is_set():
            continue  # the server is being killed: read on to its end, pass nothing
        reached = killer.feed(direction, chunk)
        if reached and to_server:
            silenced.set()  # before the server can answer what completes the count
        try:
            write_all(sink, chunk)
        except OSError:
            break
        if reached:
            kill(f"after {killer.seen} messages")
    if to_server:
        os.close(sink)  # the client's EOF reaches the server


def run_killer(argv: list[str], *, messages: int | None = None, seconds: float | None = None,
               count: str = "both", log: str | None = None) -> int:
    """Run `argv` as a stdio server between our stdin and stdout until it exits or is killed; its status.

    Raises:
        TargetError: the command cannot be started.
    """
    if not findable(argv[0]):
        raise TargetError(f"cannot start {argv[0]!r}: not found")
    killer = Killer(messages, count)
    fault_log = FaultLog(log) if log else None
    started = time.monotonic()
    proc = subprocess.Popen(dying_with_parent(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    killed = threading.Event()
    silenced = threading.Event()  # what the server writes from now on is dropped (see the module's docstring)
    lock = threading.Lock()

    def kill(why: str) -> None:
        silenced.set()
        with lock:
            if killed.is_set() or proc.poll() is not None:
                return
            killed.set()
            proc.kill()
        if fault_log is not None:
            fault_log.write({"t": round(time.time(), 6), "elapsed": round(time.monotonic() - started, 6),
                             "kind": "kill", "pid": proc.pid, "why": why, "messages": killer.seen})

    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    timer = threading.Timer(seconds, kill, (f"after {seconds:g} s",)) if seconds else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    inbound = threading.Thread(target=_pump, args=(0, proc.stdin.fileno(), "to-server", killer, kill, silenced), daemon=True)
    inbound.start()
    try:
        _pump(proc.stdout.fileno(), 1, "from-server", killer, kill, silenced)
        status = proc.wait()
    finally:
        if timer is not None:
            timer.cancel()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if fault_log is not None:
            fault_log.close()
    # The client sees the server gone (EOF on its pipe), even while our stdin stays open.
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    return 128 - status if status < 0 else status
