"""Stopping commands with signals, as the signal tests do it: start, wait for a moment, signal, check.

Every wait is on an event (a port accepting, a line on a pipe, a line in a file, a signal taken by
the process), bounded in time; every process started here is stopped by the context that started it.
"""

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from mcpbench.system.processes import STOP_SIGNALS  # noqa: F401 (the signal tests take it from here)
from mcpbench.trace.reader import read_trace
from tests.hostile.helpers import MCPBENCH, assert_no_traceback
from tests.support.processes import descendants, wait_for_exit
from tests.support.servers import HOST, REPO_ROOT, stop_process

# Bounds on waits for events; a case that reaches one is broken, not slow.
READY_WAIT: Final = 60.0
STOP_WAIT: Final = 30.0
# How often a file or /proc is polled for an event (a bounded poll, not a synchronising sleep).
POLL: Final = 0.02


# Runs argv[2:] with the signals numbered in argv[1] (comma-separated) blocked: the mask survives exec.
_BLOCK_AND_EXEC: Final = ("import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, [int(n) for n in sys.argv[1].split(',')]); "
                          "os.execv(sys.argv[2], sys.argv[2:])")


def started_blocking(signals: tuple[int, ...], argv: list[str]) -> list[str]:
    """`argv` as a host starts it from a thread that blocks `signals` (the child inherits the mask)."""
    return [sys.executable, "-c", _BLOCK_AND_EXEC, ",".join(str(int(sig)) for sig in signals), *argv]


def status_of(sig: int) -> int:
    """The documented exit status of a command a stop signal ended: 128 + its number (130, 143, 129)."""
    return 128 + sig


def signal_id(sig: int) -> str:
    return signal.Signals(sig).name


@contextlib.contextmanager
def command(args: list[str], **popen) -> Iterator[subprocess.Popen]:
    """`mcpbench ARGS` as a process of its own; stopped (and its stderr logged) at the end."""
    proc = subprocess.Popen([*MCPBENCH, *args], cwd=popen.pop("cwd", REPO_ROOT), stdout=popen.pop("stdout", subprocess.PIPE),
                            stderr=subprocess.PIPE, stdin=popen.pop("stdin", subprocess.DEVNULL), **popen)
    try:
        yield proc
    finally:
        stop_process(proc)
        for stream in (proc.stdout, proc.stdin, proc.stderr):
            if stream is not None:
                stream.close()


def stop(proc: subprocess.Popen, sig: int, *, status: int | tuple[int, ...] | None = None, again: bool = False) -> str:
    """Send `sig` (`again`: a second time once the first was taken, while the command stops), wait
    (bounded) for the end and for every process it had started to end too; return stderr, after
    checking the exit status (default `status_of(sig)`; a tuple: any of them; -N: ended by signal N)
    and that no traceback was printed."""
    started = descendants(proc.pid)
    proc.send_signal(sig)
    if again:
        taken(proc.pid, sig)
        if proc.poll() is None:
            proc.send_signal(sig)
    proc.wait(STOP_WAIT)  # stdin stays open: the stop, not an EOF, must end it
    stderr = proc.stderr.read().decode(errors="replace")
    assert_no_traceback(stderr)
    assert "Traceback" not in stderr, stderr
    expected = (status_of(sig),) if status is None else status if isinstance(status, tuple) else (status,)
    assert proc.returncode in expected, (proc.returncode, expected, stderr)
    for pid in started:  # no child outlives the command (a daemon's grandchild included)
        wait_for_exit(pid, STOP_WAIT)
    return stderr


def taken(pid: int, sig: int, timeout: float = STOP_WAIT) -> None:
    """Wait until `pid` has taken `sig` (no longer pending in /proc/PID/status), or has ended."""
    bit = 1 << (sig - 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        except OSError:
            return
        if fields.get("State", "").strip().startswith("Z"):
            return
        pending = int(fields.get("ShdPnd", "0"), 16) | int(fields.get("SigPnd", "0"), 16)
        if not pending & bit:
            return
        time.sleep(POLL)
    raise AssertionError(f"process {pid} did not take {signal_id(sig)} within {timeout} s")


# Per pipe: what `read_line_with` read past the line it returned, for its next call.
_AFTER: "weakref.WeakKeyDictionary[object, bytes]" = weakref.WeakKeyDictionary()


def read_line_with(stream, marker: bytes, timeout: float = READY_WAIT) -> bytes:
    """Read lines from a pipe until one holds `marker` (bounded by `timeout`).

    Unbuffered (`os.read` on its descriptor): lines that come in one read are all seen, and what
    follows the line returned is kept for the next call on that pipe.
    """
    fd = stream.fileno()
    pending = _AFTER.pop(stream, b"")
    deadline = time.monotonic() + timeout
    seen = b""
    while True:
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            seen += line + b"\n"
            if marker in line:
                _AFTER[stream] = pending
                return line + b"\n"
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0] or not (chunk := os.read(fd, 65536)):
            break
        pending += chunk
    raise AssertionError(f"no line with {marker!r} within {timeout} s: {seen + pending!r}")


def read_bytes_with(fd: int, marker: bytes, timeout: float = READY_WAIT) -> bytes:
    """Read a pipe unbuffered until what came holds `marker` (lines that come together stay found)."""
    deadline = time.monotonic() + timeout
    seen = b""
    while marker not in seen and (remaining := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], remaining)[0] or not (chunk := os.read(fd, 65536)):
            break
        seen += chunk
    assert marker in seen, f"no {marker!r} within {timeout} s: {seen!r}"
    return seen


def wait_for_text(path: Path, text: bytes, timeout: float = READY_WAIT) -> None:
    """Wait (bounded, polling the file) until `path` holds `text`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_bytes():
            return
        time.sleep(POLL)
    raise AssertionError(f"{path} never held {text!r}")


def wait_for_file(folder: Path, pattern: str, proc: subprocess.Popen, timeout: float = READY_WAIT) -> Path:
    """Wait (bounded, polling) until a non-empty file matching `pattern` is under `folder`, while `proc` runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for path in folder.glob(pattern):
            if path.stat().st_size:
                return path
        time.sleep(POLL)
    raise AssertionError(f"no {pattern} under {folder} within {timeout} s (exit status {proc.poll()})")


def assert_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no holder
        sock.bind((HOST, port))  # raises when a process still listens there
        sock.listen()


def server_pid(trace: Path) -> int:
    """The server's pid from the tee's trace: its start event, which the recorder may write a moment
    after the server's first stderr line has passed through (bounded wait)."""
    wait_for_text(trace, b'"event":"start"')
    for event in read_trace(trace):
        if event["kind"] == "process" and event.get("event") == "start":
            return event["pid"]
    raise AssertionError(f"no process start event in {trace}")
