"""N reference-server instances behind a balancer on 127.0.0.1: what `mcpbench lab up` runs.

`running_instances()` starts the instances side by side (through `servers.reference_server`, which picks ports
and stops them), `running_balancer()` puts the built-in balancer (`python -m mcpbench.proxies.balancer`:
`proxies/balancer.py` in mitmproxy through `mcpbench.proxies.host`) or HAProxy in front of them. Every process is stopped and reaped when its
context exits, also on failure or a signal turned into an exception.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from mcpbench.lab.peers.quirks import Quirks
from mcpbench.lab.peers.servers import (
    ENDPOINT_PATHS,
    HOST,
    START_ATTEMPTS,
    RunningServer,
    reference_server,
    serve_argv,
    start_listening,
)
from mcpbench.system.processes import ServerStartError, entered_side_by_side, free_port, start, stop_process, wait_for_port
from mcpbench.protocol.errors import McpbenchError

BALANCERS: Final = ("builtin", "haproxy")
POLICIES: Final = ("random", "round-robin", "sticky", "source", "session-hash")
# Instances a lab may run at once: each is a Python process of some 60 MB.
MAX_INSTANCES: Final = 16


class LabError(McpbenchError):
    """The lab could not be set up (a tool missing, a port taken, an instance that did not start)."""

    exit_code = 3


@dataclass(frozen=True, slots=True)
class BalancerProcess:
    """A running balancer: its kind, policy, MCP URL, process and log."""

    kind: str
    policy: str
    url: str
    port: int
    proc: subprocess.Popen
    log: Path
    config: Path | None = None  # HAProxy's configuration file


@dataclass
class Lab:
    """Instances and the balancer in front of them."""

    transport: str
    instances: list[RunningServer]
    balancer: BalancerProcess
    folder: Path
    names: list[str] = field(default_factory=list)
    fault_log: Path | None = None  # one JSON line per injected fault and restart
    restarter: "Restarter | None" = None

    @property
    def url(self) -> str:
        return self.balancer.url

    def dead_process(self) -> subprocess.Popen | None:
        """A lab process that has exited (an instance being restarted on purpose does not count)."""
        if self.restarter is not None and self.restarter.error is not None:
            raise LabError(self.restarter.error)
        busy = self.restarter.busy if self.restarter is not None else None
        if busy is not None and not busy.acquire(blocking=False):
            return self.balancer.proc if self.balancer.proc.poll() is not None else None
        try:
            procs = [self.balancer.proc] + [server.proc for server in self.instances]
            return next((p for p in procs if p.poll() is not None), None)
        finally:
            if busy is not None:
                busy.release()


def mitmdump_path() -> str:
    """`mitmdump` next to this interpreter (the venv's), else from PATH."""
    candidate = Path(sys.executable).with_name("mitmdump")
    return str(candidate) if candidate.exists() else "mitmdump"


def haproxy_path() -> str | None:
    return shutil.which("haproxy")


def instance_names(count: int) -> list[str]:
    return [f"s{n}" for n in range(1, count + 1)]


@contextlib.contextmanager
def running_instances(
    count: int, transport: str, *, json_response: bool = False, stateless: bool = False, resumable: bool = False,
    quirks: Quirks | None = None, extra_args: Sequence[str] = (),
) -> Iterator[list[RunningServer]]:
    """Start `count` reference servers on ephemeral ports; stop them all when the block ends.

    `extra_args`: more `lab serve` arguments, the same for every instance (`--seal-state shared`, a
    `--task-store` file they share, …)."""
    if not 1 <= count <= MAX_INSTANCES:
        raise LabError(f"--instances must be between 1 and {MAX_INSTANCES}")
    with contextlib.ExitStack() as stack:
        try:  # side by side: a group of 3 started in turn took three start-ups (2 s each, quiet; a minute at load 11)
            servers = entered_side_by_side(stack, [
                reference_server(transport, json_response=json_response, stateless=stateless, resumable=resumable,
                                 quirks=quirks, extra_args=extra_args)
                for _ in range(count)
            ])
        except ServerStartError as exc:
            raise LabError(f"an instance did not start: {exc}") from None
        yield servers


def balancer_argv(
    kind: str, policy: str, transport: str, servers: Sequence[RunningServer], *, port: int, folder: Path,
    faults: Sequence[str] = (),
    buffer: bool = False,
    foreign_host: str = "refuse",
) -> tuple[list[str], Path | None]:
    """The command line of a balancer on 127.0.0.1:`port`, and HAProxy's config file (written here).

    `faults`: `--set` arguments for the fault addon (`faultplan.addon_settings`), loaded after the
    balancer (builtin only). The builtin balancer is its own process (`proxies/balancer.py`'s `main`).
    `buffer`: HAProxy holds each answer back until its body is complete (the builtin balancer
    does it with the fault addon's `buffer_sse`). `foreign_host`: how the builtin balancer answers
    a foreign Host (`balancer.FOREIGN_HOST`: refuse, page, empty, close).
    """
    names = instance_names(len(servers))
    if (faults or foreign_host != "refuse") and kind != "builtin":
        raise LabError("fault options and foreign-Host answers need the builtin balancer (--balancer builtin)")
    if kind == "builtin":
        instances = ",".join(f"{name}={HOST}:{server.port}" for name, server in zip(names, servers))
        return [
            sys.executable, "-m", "mcpbench.proxies.balancer", "--upstream", f"http://{HOST}:{servers[0].port}",
            "--listen", f"{HOST}:{port}",
            "--set", f"mcpbench_balancer_instances={instances}", "--set", f"mcpbench_balancer_policy={policy}",
            *(["--set", f"mcpbench_balancer_foreign_host={foreign_host}"] if foreign_host != "refuse" else []),
            *(["--faults", *faults] if faults else []),
        ], None
    from mcpbench.lab.topology.haproxy import write_config

    binary = haproxy_path()
    if binary is None:
        raise LabError("haproxy is not on PATH (install it, e.g. apt-get install haproxy, or use --balancer builtin)")
    config = write_config(policy, transport, [(name, HOST, s.port) for name, s in zip(names, servers)], port=port, folder=folder,
                          buffer=buffer)
    return [binary, "-f", str(config), "-db"], config


@contextlib.contextmanager
def running_balancer(
    kind: str, policy: str, transport: str, servers: Sequence[RunningServer], *, folder: Path, port: int | None = None,
    faults: Sequence[str] = (),
    buffer: bool = False,
    foreign_host: str = "refuse",
) -> Iterator[BalancerProcess]:
    """Run a balancer in front of `servers` until the block ends (an ephemeral port unless `port`; `buffer`,
    `foreign_host`: see `balancer_argv`)."""
    if kind not in BALANCERS:
        raise LabError(f"unknown balancer {kind!r} ({', '.join(BALANCERS)})")
    if policy not in POLICIES:
        raise LabError(f"unknown policy {policy!r} ({', '.join(POLICIES)})")
    folder.mkdir(parents=True, exist_ok=True)
    if port is not None:
        _check_free(port)  # else a connect to whoever holds it would pass for the balancer's
    for attempt in range(1, START_ATTEMPTS + 1):
        chosen = port or free_port()
        argv, config = balancer_argv(kind, policy, transport, servers, port=chosen, folder=folder, faults=faults, buffer=buffer,
                                     foreign_host=foreign_host)
        log = folder / f"{kind}-{transport}-{policy}.log"
        with log.open("wb") as err:
            try:
                proc = start(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
            except OSError as exc:
                raise LabError(f"cannot start {argv[0]}: {exc.strerror}") from None
        try:
            try:
                wait_for_port(HOST, chosen, proc=proc)
            except ServerStartError as exc:
                if proc.poll() is not None and port is None and attempt < START_ATTEMPTS:
                    continue  # most likely lost the port race
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise LabError(f"the {kind} balancer did not start on {HOST}:{chosen}: {exc}; {' | '.join(tail)}") from None
            yield BalancerProcess(kind, policy, f"http://{HOST}:{chosen}{ENDPOINT_PATHS[transport]}", chosen, proc, log, config)
            return
        finally:
            stop_process(proc)


def _check_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise LabError(f"{HOST}:{port} is not free for the balancer ({exc.strerror})") from None


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """Instance restarts: one every `every` seconds (s1, s2, … in turn) and/or `s1` once at `at` s."""

    every: float | None = None
    at: float | None = None

    def due(self, done: int) -> float | None:
        """When (seconds from the start) restart number `done` + 1 is due, or None: no more."""
        times = [self.at] if self.at is not None else []
        if self.every is not None:
            times += [self.every * k for k in range(1, done + 2)]
        times.sort()
        return times[done] if done < len(times) else None


class Restarter:
    """Kills instances (SIGKILL: their sessions are gone) and restarts them on the same port, in a thread.

    Each restart is two lines in the fault log: `restart` with `phase: killed`, then `phase: up`
    once the new process accepts (`down_s` later). `busy` is held while an instance is down.
    """

    def __init__(self, lab: Lab, plan: RestartPlan, *, json_response: bool, stateless: bool, resumable: bool, log,
                 quirks: Quirks | None = None, extra_args: Sequence[str] = ()) -> None:
        self.lab = lab
        self.plan = plan
        self.log = log
        self.serve = {"json_response": json_response, "stateless": stateless, "resumable": resumable, "quirks": quirks,
                      "extra_args": extra_args}
        self.busy = threading.Lock()
        self.error: str | None = None
        self.restarts = 0
        self._stop = threading.Event()
        self._procs: list[subprocess.Popen] = []
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="mcpbench-restarter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (due := self.plan.due(self.restarts)) is not None:
            if self._stop.wait(max(0.0, due - (time.monotonic() - self._started))):
                return
            index = 0 if self.plan.every is None else self.restarts % len(self.lab.instances)
            try:
                self.restart(index)
            except (LabError, OSError) as exc:
                self.error = f"restart of {self.lab.names[index]} failed: {exc}"
                return

    def restart(self, index: int) -> None:
        """Kill instance `index` and start it again on its port; returns once it accepts."""
        with self.busy:
            old = self.lab.instances[index]
            name = self.lab.names[index]
            old.proc.kill()
            old.proc.wait()
            killed = time.monotonic()
            self._write(kind="restart", phase="killed", instance=name, port=old.port, pid=old.proc.pid)
            stderr_path = self.lab.folder / f"{name}-restart-{self.restarts + 1}.log"
            argv = serve_argv(old.transport, port=old.port, **self.serve)
            with stderr_path.open("wb") as err:
                try:
                    proc = start_listening(argv, old.port, stdout=subprocess.DEVNULL, stderr=err)
                except ServerStartError as exc:
                    raise LabError(f"{name} did not come back on port {old.port}: {exc}") from None
            self._procs.append(proc)
            self.lab.instances[index] = RunningServer(old.transport, old.port, old.url, proc, stderr_path)
            self.restarts += 1
            self._write(kind="restart", phase="up", instance=name, port=old.port, pid=proc.pid,
                        down_s=round(time.monotonic() - killed, 6))

    def _write(self, **record) -> None:
        if self.log is not None:
            self.log.write({"t": round(time.time(), 6), "elapsed": round(time.monotonic() - self._started, 6), **record})

    def stop(self) -> None:
        """End the thread (waiting for a restart under way) and stop every process it started."""
        self._stop.set()
        self._thread.join()
        for proc in self._procs:
            stop_process(proc)


@contextlib.contextmanager
def running_lab(
    count: int,
    transport: str,
    *,
    policy: str,
    balancer: str = "builtin",
    json_response: bool = False,
    stateless: bool = False,
    port: int | None = None,
    folder: Path,
    resumable: bool = False,
    faults: Mapping[str, str | None] | None = None,
    restarts: RestartPlan | None = None,
    fault_log: Path | None = None,
    quirks: Quirks | None = None,
    foreign_host: str = "refuse",
    serve_args: Sequence[str] = (),
) -> Iterator[Lab]:
    """`count` instances and a balancer in front of them, for the duration of the block.

    `faults`: `faultplan.parse_plan` option texts (`{"cut_streams_after": "61s", "drop": "5%"}`),
    injected by the builtin balancer (HAProxy takes `buffer_sse` alone, in its configuration);
    `restarts`: instances killed and restarted on their ports. Both write to `fault_log` (default:
    `folder/faults.jsonl` when either is given). `quirks`: the instances' (`lab/peers/quirks.py`).
    `foreign_host`: how the builtin balancer answers a foreign Host (see `balancer_argv`). `serve_args`:
    more `lab serve` arguments for every instance (`running_instances`' `extra_args`), restarts included.
    """
    from mcpbench.proxies.faultplan import addon_settings, parse_plan

    if balancer == "haproxy" and haproxy_path() is None:
        raise LabError("haproxy is not on PATH (install it, e.g. apt-get install haproxy, or use --balancer builtin)")
    texts = {name: value for name, value in (faults or {}).items() if value}
    buffer = parse_plan(**texts).buffer_sse  # a bad value fails before anything starts
    if balancer == "haproxy":
        texts.pop("buffer_sse", None)  # HAProxy buffers by its own configuration
    restarts = restarts if restarts is not None and (restarts.every or restarts.at is not None) else None
    if (texts or restarts) and fault_log is None:
        fault_log = folder / "faults.jsonl"
    if (texts or foreign_host != "refuse") and balancer != "builtin":
        raise LabError("fault options need the builtin balancer (--balancer builtin)")
    if port is not None:
        _check_free(port)  # before the instances start: a lab that cannot listen need not start them
    folder.mkdir(parents=True, exist_ok=True)
    settings = addon_settings(texts, str(fault_log)) if texts else []
    with running_instances(count, transport, json_response=json_response, stateless=stateless, resumable=resumable,
                           quirks=quirks, extra_args=serve_args) as servers:
        with running_balancer(balancer, policy, transport, servers, folder=folder, port=port, faults=settings,
                              buffer=buffer and balancer == "haproxy", foreign_host=foreign_host) as front:
            lab = Lab(transport, servers, front, folder, instance_names(count), fault_log)
            if restarts is None:
                yield lab
                return
            from mcpbench.proxies.faults import FaultLog

            log = FaultLog(fault_log)
            lab.restarter = Restarter(lab, restarts, json_response=json_response, stateless=stateless, resumable=resumable, log=log,
                                      quirks=quirks, extra_args=serve_args)
            try:
                yield lab
            finally:
                lab.restarter.stop()
                log.close()
