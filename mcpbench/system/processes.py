"""Child processes, one way of each: start, wait until they listen, stop gracefully then kill, free ports, the stop signals.

The servers, proxies, Locust processes and companions that commands and tests start go through
here, so none is left running. (The stdio shells that own a session's pipes, the tee and the
replay and load transports, end their server with the session, their own way.)

- `start` starts one with the stop signals held: a Ctrl-C landing between the fork and the
  return would leave a child nobody owns, and so nobody stops. `dying_with_parent` makes a
  command line whose process is killed when this one dies, even by SIGKILL.
- `wait_for_port` returns once a started server accepts (or fails as soon as it exits).
- `stop_process` asks a child to stop (its signals in turn, a grace period after each), kills it
  if it will not, and reaps it.
- `entered_side_by_side` starts several (servers, say) at once, each in its own thread, so their
  start-ups overlap instead of adding up.
- `ended` says how a child ended (its exit status, or the signal that killed it).
- `free_port` is a port the OS just gave out; `STOP_SIGNALS` are the signals that end a
  long-running command cleanly (cliutil.py maps them to exit statuses).
- `settled` is what a long-running process (a server, a proxy, a Locust process) calls once it is
  loaded and built, before it serves.
"""

import contextlib
import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from typing import Final, TypeVar

T = TypeVar("T")

# The signals that end a long-running command cleanly (exit 128 + N: 130, 143, 129): Ctrl-C, a
# kill, and the hang-up a command gets when its terminal or SSH session goes away.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# `python -m mcpbench` imports mcp and uvicorn (about 2 s on an idle 2-core machine); 30 s leaves
# room for a machine busy with other tests without letting a broken server hang the suite.
STARTUP_TIMEOUT: Final = 30.0
# How long a process gets to exit on a stop signal before SIGKILL: uvicorn waits for open connections.
STOP_TIMEOUT: Final = 5.0
# Poll interval while waiting for a port: short against the ~2 s startup, cheap in CPU.
POLL_INTERVAL: Final = 0.02


class ServerStartError(RuntimeError):
    """A server process did not start accepting connections."""


# ---- the stop signals ---------------------------------------------------------------------------


@contextlib.contextmanager
def _holding(held: list[int]) -> Iterator[None]:
    """Within: a stop signal is only appended to `held`. A no-op outside the main thread, where no
    handler can be set (and where no handler runs either)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda signum, frame: held.append(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Hold the stop signals within, then deliver the first that came (to the handler set before).

    A Python-level hold, not a blocked mask: a child inherits the mask across exec, and one
    started with the stop signals blocked never stops on them.
    """
    held: list[int] = []
    try:
        with _holding(held):
            yield
    finally:
        if held:
            signal.raise_signal(held[0])


# ---- start and stop -----------------------------------------------------------------------------


def start(argv: Sequence[str], **popen: object) -> subprocess.Popen:
    """`subprocess.Popen(argv, **popen)` with the stop signals held while the child starts.

    A stop that came meanwhile is delivered once the child runs; if it raises (Ctrl-C), the child
    is stopped first (`stop_process`): the caller, interrupted, never gets it to stop.
    """
    held: list[int] = []
    with _holding(held):
        proc = subprocess.Popen(list(argv), **popen)
    if held:
        try:
            signal.raise_signal(held[0])
        except BaseException:
            stop_process(proc)
            raise
    return proc


def stop_process(
    proc: subprocess.Popen,
    grace: float = STOP_TIMEOUT,
    *,
    signals: Sequence[int] = (signal.SIGTERM,),
    communicate: bool = False,
) -> int:
    """Stop `proc`, gracefully if it will, and reap it; its exit status.

    Each of `signals` is sent in turn while it runs, each followed by up to `grace` seconds for it
    to exit; then SIGKILL. No `signals`: the caller has asked it to stop already (closed its stdin,
    say), and it gets `grace` seconds.

    Args:
        communicate: the caller reads the child's pipes with `communicate`; they are read on while
            it stops (a child blocked writing to a full pipe would never exit).
    """
    for signum in signals or (None,):
        if proc.poll() is not None:
            break
        if signum is not None:
            proc.send_signal(signum)
        try:
            if communicate:
                proc.communicate(timeout=grace)
            else:
                proc.wait(grace)
            break
        except subprocess.TimeoutExpired:
            pass
    else:
        proc.kill()
    return proc.wait()


def wait_for_port(
    host: str, port: int, timeout: float = STARTUP_TIMEOUT, *, proc: subprocess.Popen | None = None
) -> None:
    """Return once a TCP connect to host:port succeeds; raise ServerStartError after `timeout` s.

    With `proc`, fail as soon as that process exits instead of waiting out the timeout.
    """
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise ServerStartError(f"process {proc.pid} exited with {proc.returncode} before {host}:{port} accepted")
        try:
            with socket.create_connection((host, port), timeout=max(POLL_INTERVAL, 0.5)):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise ServerStartError(f"nothing accepted on {host}:{port} within {timeout:g} s ({exc})") from None
        time.sleep(POLL_INTERVAL)


def entered_side_by_side(stack: ExitStack, managers: Sequence[AbstractContextManager[T]]) -> list[T]:
    """Enter every one of `managers` at once, each in a thread of its own; what they gave, in order.

    Every one that entered is left when `stack` closes (the failed ones are not). The first failure is
    raised once all have finished entering; so is a stop signal that came meanwhile: a start still
    under way is never abandoned with its process left running.
    """
    pool = ThreadPoolExecutor(max_workers=max(1, len(managers)))
    futures = [pool.submit(manager.__enter__) for manager in managers]
    stopped: BaseException | None = None
    while True:  # each start is bounded (STARTUP_TIMEOUT): so is this wait
        try:
            pool.shutdown(wait=True)
            break
        except BaseException as exc:  # a stop signal: wait for the starts, then let the stack stop them
            stopped = stopped or exc
    for manager, future in zip(managers, futures):
        if future.exception() is None:
            stack.push(manager.__exit__)
    if stopped is not None:
        raise stopped
    return [future.result() for future in futures]


def ended(status: int) -> str:
    """How a child ended, from its `returncode`: its exit status, or the signal that killed it."""
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port on `host` (the OS picks it; IPv6 for a host with a colon)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


# ---- a child that dies with its parent ----------------------------------------------------------
#
# The kernel sends a child a chosen signal when its parent dies once the child has asked with
# `prctl(PR_SET_PDEATHSIG)`. That call must run in the child, but `preexec_fn` is unsafe in a
# process that has threads, so the child first runs a small stub (`python -I -S -c`) that makes the
# call, checks its parent is still the one that started it (it may have died before the call),
# restores the signals Python's start set aside, and execs the command: same pid, file
# descriptors and signal mask. The stub costs a bare interpreter start (~10-20 ms), once per child.

PR_SET_PDEATHSIG = 1

STUB = (
    "import ctypes, os, signal, sys\n"
    f"ctypes.CDLL(None, use_errno=True).prctl({PR_SET_PDEATHSIG}, int(sys.argv[2]), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(128 + int(sys.argv[2]))  # the parent died before prctl: as if the signal came\n"
    "for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # ignored by Python's start, not by the server's\n"
    "    signal.signal(sig, signal.SIG_DFL)\n"
    "try:\n"
    "    os.execvp(sys.argv[3], sys.argv[3:])\n"
    "except OSError as exc:\n"
    "    sys.stderr.write(f'mcpbench: cannot start {sys.argv[3]}: {exc.strerror}\\n')\n"
    "    os._exit(127)\n"
)


def dying_with_parent(argv: list[str], sig: int = signal.SIGKILL) -> list[str]:
    """The command line that runs `argv` so that it gets `sig` (SIGKILL: it is killed) when this process dies."""
    return [sys.executable, "-I", "-S", "-c", STUB, str(os.getpid()), str(int(sig)), *argv]


def findable(command: str) -> bool:
    """Whether `command` names an executable (a path, or a name on PATH) that exec could start."""
    return shutil.which(command) is not None


def settled() -> None:
    """This process is loaded and built and about to serve: what it holds now (its libraries' classes, the
    SDK's ~600 pydantic models, its app) stays until it ends, so the garbage collector stops walking it
    (`gc.freeze`), at each full pass while it serves and at its exit, where that walk cost 0.1-0.3 s of
    CPU in every server, proxy and Locust process."""
    gc.freeze()
