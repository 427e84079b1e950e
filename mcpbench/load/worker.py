"""`mcpbench load --worker`: one worker of a load run, on any machine where mcpbench is installed.

The worker brings nothing else: it checks that a Locust master answers at HOST:PORT
(`probe_master`: a ZeroMQ peer sends its greeting as soon as it is connected to, so anything else,
or nothing, is told apart at once), then runs Locust as a worker that asks the master for the run's
locustfile (`-f -`, runfile.py: the scenario, its templates and the workload are in it). Locust writes
that file to its temporary folder, which is a private one per worker (`TMPDIR`): two workers of one
machine never share it, and it goes with the worker. The locustfile tells this process on a pipe
(`MCPBENCH_WORKER_FD`) that it joined, or it exits with one line (another mcpbench version), and
at the end what it sent; the worker ends when the master ends the run.

`start_worker` is also how `mcpbench load --workers N` starts its N local workers: one code path.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import orjson

from mcpbench.system.processes import dying_with_parent, ended, start, stop_process
from mcpbench.protocol.errors import EnvironmentProblem

# Locust's default master port.
MASTER_PORT = 5557
# A Locust master greets at once; this long without a greeting, it is something else.
PROBE_TIMEOUT = 3.0
# How often a worker started before its master (Kubernetes starts pods in any order) tries again.
RETRY_INTERVAL = 0.5
# The ZMTP 3 greeting begins with a 10-byte signature: 0xFF, 8 bytes of padding, 0x7F (rfc.zeromq.org/spec/23).
SIGNATURE_LENGTH = 10
# A worker asked to stop gets this long to send the rest of its samples before it is killed.
STOP_GRACE = 20.0
# The environment a worker's Locust gets from mcpbench's own (the run comes from the master).
RUN_VARIABLES = ("MCPBENCH_SCENARIO", "MCPBENCH_TARGET", "MCPBENCH_SAMPLES", "MCPBENCH_PROCESSES", "MCPBENCH_STATUS_FD")


class MasterError(EnvironmentProblem):
    """The master cannot be reached, is not a Locust master, or did not take this worker."""


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def probe_master(host: str, port: int, wait: float) -> None:
    """Return once a Locust master answers at `host`:`port`; refused connections are tried again for `wait` seconds.

    Raises:
        MasterError: the host is unknown, nothing answered within `wait`, or what answers is no Locust master.
    """
    where = _address(host, port)
    deadline = time.monotonic() + wait
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=PROBE_TIMEOUT)
            break
        except socket.gaierror as exc:
            raise MasterError(f"master host {host!r}: {exc.strerror}") from None
        except OSError as exc:
            if time.monotonic() + RETRY_INTERVAL >= deadline:
                raise MasterError(f"no master at {where} within {wait:g} s: {exc.strerror or exc}") from None
            time.sleep(RETRY_INTERVAL)  # a master that is still starting: bounded by `wait`
    with sock:
        greeting = b""
        try:
            while len(greeting) < SIGNATURE_LENGTH and (chunk := sock.recv(SIGNATURE_LENGTH - len(greeting))):
                greeting += chunk
        except TimeoutError:
            pass
        except OSError as exc:
            raise MasterError(f"{where} is not a Locust master: {exc.strerror or exc}") from None
    if len(greeting) == SIGNATURE_LENGTH and greeting[0] == 0xFF and greeting[-1] == 0x7F:
        return
    said = f"it said nothing in {PROBE_TIMEOUT:g} s; a master greets at once" if not greeting else f"it answered {greeting!r}"
    raise MasterError(f"{where} is not a Locust master ({said})")


def worker_command(host: str, port: int) -> list[str]:
    """Locust as a worker of the master at `host`:`port`, its locustfile from the master; it dies with us."""
    return dying_with_parent([
        sys.executable, "-m", "locust", "-f", "-", "--worker", "--master-host", host, "--master-port", str(port),
        "--loglevel", "WARNING",
    ])


def start_worker(host: str, port: int, *, log: Any, report_fd: int | None = None,
                 access: str | None = None) -> tuple[subprocess.Popen, Path]:
    """Start one worker process; returns it and its private temporary folder (remove it once it ended)."""
    folder = Path(tempfile.mkdtemp(prefix="mcpbench-worker-"))
    env = {k: v for k, v in os.environ.items() if k not in RUN_VARIABLES}
    # the package must be importable by Locust wherever the user runs from (a checkout, say)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(TMPDIR=str(folder), PYTHONUNBUFFERED="1")
    if report_fd is not None:
        env["MCPBENCH_WORKER_FD"] = str(report_fd)
    if access is not None:  # a local worker: the master's headers and proxy (`ClientAccess.to_env`)
        env["MCPBENCH_ACCESS"] = access
    try:
        proc = start(
            worker_command(host, port), env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            pass_fds=() if report_fd is None else (report_fd,),
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return proc, folder


class _Reports:
    """The JSON lines a worker's locustfile writes on its pipe: `joined`, then `done` (the last counts)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.joined: str | None = None
        self.done: dict | None = None
        self.closed = False

    def read(self, timeout: float) -> None:
        """Take what arrived within `timeout` seconds."""
        if self.closed or not select.select([self.fd], [], [], max(0.0, timeout))[0]:
            return
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.closed = True
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                self.joined = record.get("joined", self.joined)
                self.done = record.get("done", self.done)


    def drain(self) -> None:
        """What the worker wrote last, once it ended (its end of the pipe closes; bounded all the same)."""
        for _ in range(10):
            if self.closed:
                return
            self.read(0.1)


def last_line(path: Path) -> str | None:
    """The last non-blank line of a child's log (None: none, or it cannot be read)."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return None
    return lines[-1] if lines else None


def run_worker(host: str, port: int = MASTER_PORT, *, join_timeout: float, echo: Callable[[str], None] = print) -> int:
    """Be one worker of the master at `host`:`port` until it ends the run; returns the exit status.

    Raises:
        MasterError: no master, not a master, no run within `join_timeout`, or the run refused (versions).
    """
    where = _address(host, port)
    probe_master(host, port, join_timeout)
    read_fd, write_fd = os.pipe()
    reports = _Reports(read_fd)
    proc: subprocess.Popen | None = None
    folder: Path | None = None
    log_file = tempfile.NamedTemporaryFile(prefix="mcpbench-worker-", suffix=".log", delete=False)
    log_path = Path(log_file.name)
    keep_log = False
    try:
        with log_file:
            proc, folder = start_worker(host, port, log=log_file, report_fd=write_fd)
        os.close(write_fd)
        write_fd = -1
        deadline = time.monotonic() + join_timeout
        while reports.joined is None and proc.poll() is None and time.monotonic() < deadline:
            reports.read(min(0.5, deadline - time.monotonic()))
        reports.read(0)
        if reports.joined is None:
            if proc.poll() is not None:  # refused the run (another version), or Locust could not start
                raise MasterError(last_line(log_path) or f"the worker's Locust {ended(proc.returncode)}")
            raise MasterError(f"the master at {where} sent no mcpbench run within {join_timeout:g} s")
        echo(f"mcpbench: worker {reports.joined} joined the master at {where}")
        while proc.poll() is None:  # the master ends the run (and Locust quits a worker whose master is gone)
            reports.read(0.5)
        reports.drain()
        if reports.done is None:  # the log stays, named in the message
            keep_log = True
            raise MasterError(f"worker {reports.joined} ended before its run did: {last_line(log_path) or f'Locust {ended(proc.returncode)}'} (log: {log_path})")
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        if proc is not None:
            stop_process(proc, STOP_GRACE, signals=(signal.SIGINT,))  # it sends the rest of its samples, tells the master
        reports.drain()
        os.close(read_fd)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        if not keep_log:
            log_path.unlink(missing_ok=True)
    done = reports.done
    kinds = done.get("kinds") or {}
    among = [f"{kinds[kind]} {name}" for kind, name in (("reconnects", "reconnect lines"), ("open", "open-model counts")) if kinds.get(kind)]
    echo(
        f"mcpbench: worker {reports.joined} sent {done['sent']} samples to the master at {where}"
        + (f" ({', '.join(among)} among them)" if among else "") + f", {done['dropped']} dropped"
    )
    return 0
