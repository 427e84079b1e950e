"""N reference-server instances behind a balancer on 127.0.0.1: what `mcpbench lab up` runs.

`running_instances()` starts the instances (through `servers.reference_server`, which picks ports
and stops them), `running_balancer()` puts the built-in balancer (`mitmdump` with
`lab/balancer.py`) or HAProxy in front of them. Every process is stopped and reaped when its
context exits, also on failure or a signal turned into an exception.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from mcpbench.lab.servers import (
    ENDPOINT_PATHS,
    HOST,
    START_ATTEMPTS,
    RunningServer,
    ServerStartError,
    free_port,
    reference_server,
    stop_process,
    wait_for_port,
)
from mcpbench.protocol.errors import McpbenchError

BALANCERS: Final = ("builtin", "haproxy")
POLICIES: Final = ("random", "round-robin", "sticky", "source")
BALANCER_SCRIPT: Final = Path(__file__).with_name("balancer.py")
# Instances a lab may run at once: each is a Python process of some 60 MB.
MAX_INSTANCES: Final = 16


class LabError(McpbenchError):
    """The lab could not be set up (a tool missing, a port taken, an instance that did not start)."""

    exit_code = 3


@dataclass(frozen=True, slots=True)
class Balancer:
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
    balancer: Balancer
    folder: Path
    names: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.balancer.url


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
    count: int, transport: str, *, json_response: bool = False, stateless: bool = False
) -> Iterator[list[RunningServer]]:
    """Start `count` reference servers on ephemeral ports; stop them all when the block ends."""
    if not 1 <= count <= MAX_INSTANCES:
        raise LabError(f"--instances must be between 1 and {MAX_INSTANCES}")
    with contextlib.ExitStack() as stack:
        try:
            servers = [
                stack.enter_context(reference_server(transport, json_response=json_response, stateless=stateless))
                for _ in range(count)
            ]
        except ServerStartError as exc:
            raise LabError(f"an instance did not start: {exc}") from None
        yield servers


def balancer_argv(kind: str, policy: str, transport: str, servers: Sequence[RunningServer], *, port: int, folder: Path) -> tuple[list[str], Path | None]:
    """The command line of a balancer on 127.0.0.1:`port`, and HAProxy's config file (written here)."""
    names = instance_names(len(servers))
    if kind == "builtin":
        instances = ",".join(f"{name}={HOST}:{server.port}" for name, server in zip(names, servers))
        return [
            mitmdump_path(), "--mode", f"reverse:http://{HOST}:{servers[0].port}",
            "--listen-host", HOST, "--listen-port", str(port),
            # lazy: connect upstream once the request has picked its instance, not on accept
            "--set", "connection_strategy=lazy", "--set", "flow_detail=0", "--set", "termlog_verbosity=warn",
            "-s", str(BALANCER_SCRIPT),
            "--set", f"mcpbench_balancer_instances={instances}", "--set", f"mcpbench_balancer_policy={policy}",
        ], None
    from mcpbench.lab.haproxy import write_config

    binary = haproxy_path()
    if binary is None:
        raise LabError("haproxy is not on PATH (install it, e.g. apt-get install haproxy, or use --balancer builtin)")
    config = write_config(policy, transport, [(name, HOST, s.port) for name, s in zip(names, servers)], port=port, folder=folder)
    return [binary, "-f", str(config), "-db"], config


@contextlib.contextmanager
def running_balancer(
    kind: str, policy: str, transport: str, servers: Sequence[RunningServer], *, folder: Path, port: int | None = None
) -> Iterator[Balancer]:
    """Run a balancer in front of `servers` until the block ends (an ephemeral port unless `port`)."""
    if kind not in BALANCERS:
        raise LabError(f"unknown balancer {kind!r} ({', '.join(BALANCERS)})")
    if policy not in POLICIES:
        raise LabError(f"unknown policy {policy!r} ({', '.join(POLICIES)})")
    folder.mkdir(parents=True, exist_ok=True)
    if port is not None:
        _check_free(port)  # else a connect to whoever holds it would pass for the balancer's
    for attempt in range(1, START_ATTEMPTS + 1):
        chosen = port or free_port()
        argv, config = balancer_argv(kind, policy, transport, servers, port=chosen, folder=folder)
        log = folder / f"{kind}-{transport}-{policy}.log"
        with log.open("wb") as err:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
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
            yield Balancer(kind, policy, f"http://{HOST}:{chosen}{ENDPOINT_PATHS[transport]}", chosen, proc, log, config)
            return
        finally:
            stop_process(proc)


def _check_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise LabError(f"{HOST}:{port} is not free for the balancer ({exc.strerror})") from None


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
) -> Iterator[Lab]:
    """`count` instances and a balancer in front of them, for the duration of the block."""
    if balancer == "haproxy" and haproxy_path() is None:
        raise LabError("haproxy is not on PATH (install it, e.g. apt-get install haproxy, or use --balancer builtin)")
    if port is not None:
        _check_free(port)  # before the instances start: a lab that cannot listen need not start them
    with running_instances(count, transport, json_response=json_response, stateless=stateless) as servers:
        with running_balancer(balancer, policy, transport, servers, folder=folder, port=port) as front:
            yield Lab(transport, servers, front, folder, instance_names(count))
