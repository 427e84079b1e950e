"""Reference servers as separate processes on ephemeral loopback ports (main job, lab, tests).

Every process started here is stopped (terminate, then kill) and reaped when its context exits,
also when the caller fails.
"""

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mcpbench.lab.peers.quirks import Quirks
from mcpbench.system.processes import ServerStartError, free_port, start, stop_process, wait_for_port
from mcpbench.protocol.transports import LEGACY_SSE, STREAMABLE_HTTP

HOST: Final = "127.0.0.1"
REPO_ROOT: Final = Path(__file__).resolve().parents[3]  # where `python -m mcpbench` runs from
# A port from free_port() can be taken by someone else before the server binds it; a server that
# exits before accepting is restarted on a fresh port this many times in all.
START_ATTEMPTS: Final = 3
# The path each HTTP transport serves (the official SDK's defaults).
ENDPOINT_PATHS: Final = {LEGACY_SSE: "/sse", STREAMABLE_HTTP: "/mcp"}


def start_listening(argv: Sequence[str], port: int, **popen: object) -> subprocess.Popen:
    """Start `argv` and return once it accepts on 127.0.0.1:`port`; stop it if it never does."""
    proc = start(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, **popen)
    try:
        wait_for_port(HOST, port, proc=proc)
    except BaseException:
        stop_process(proc)
        raise
    return proc


def serve_argv(
    transport: str,
    *,
    port: int | None = None,
    json_response: bool = False,
    stateless: bool = False,
    extra_args: Sequence[str] = (),
    resumable: bool = False,
    quirks: Quirks | None = None,
) -> list[str]:
    """The command line that runs the reference server (`quirks`: `lab/peers/quirks.py`)."""
    argv = [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", transport]
    if port is not None:
        argv += ["--host", HOST, "--port", str(port)]
    if json_response:
        argv.append("--json-response")
    if stateless:
        argv.append("--stateless")
    if resumable:
        argv.append("--resumable")
    return argv + (quirks.argv() if quirks is not None else []) + list(extra_args)


@dataclass(frozen=True, slots=True)
class RunningServer:
    """A reference server process listening on 127.0.0.1."""

    transport: str
    port: int
    url: str  # http://127.0.0.1:P/mcp (Streamable HTTP) or http://127.0.0.1:P/sse (legacy SSE)
    proc: subprocess.Popen
    stderr_path: Path

    def stderr(self) -> str:
        """What the server wrote on stderr so far (for failure messages)."""
        return self.stderr_path.read_text(errors="replace")


@contextlib.contextmanager
def reference_server(
    transport: str,
    *,
    json_response: bool = False,
    stateless: bool = False,
    extra_args: Sequence[str] = (),
    resumable: bool = False,
    quirks: Quirks | None = None,
) -> Iterator[RunningServer | list[str]]:
    """Run `mcpbench lab serve` for the duration of the block.

    HTTP transports ("sse", "streamable-http"): start the server on an ephemeral port, wait until it
    accepts, and yield a RunningServer. "stdio": yield the argv that launches the server (the client
    starts it, e.g. through stdio_params), since a stdio server belongs to one client.
    """
    if transport == "stdio":
        yield serve_argv(transport, extra_args=extra_args)
        return
    if transport not in ENDPOINT_PATHS:
        raise ValueError(f"unknown transport {transport!r}")
    with tempfile.TemporaryDirectory(prefix="mcpbench-server-") as tmp:
        for attempt in range(1, START_ATTEMPTS + 1):
            port = free_port()
            stderr_path = Path(tmp) / f"stderr-{attempt}.log"
            argv = serve_argv(
                transport, port=port, json_response=json_response, stateless=stateless, extra_args=extra_args,
                resumable=resumable, quirks=quirks,
            )
            # stderr goes to a file: a pipe nobody reads would block the server once it fills.
            with stderr_path.open("wb") as err:
                proc = start(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
            try:
                try:
                    wait_for_port(HOST, port, proc=proc)
                except ServerStartError as exc:
                    if proc.poll() is not None and attempt < START_ATTEMPTS:
                        continue  # most likely lost the port race: try another port
                    raise ServerStartError(f"{exc}\n{' '.join(argv)}\nstderr:\n{stderr_path.read_text()}") from None
                yield RunningServer(
                    transport=transport,
                    port=port,
                    url=f"http://{HOST}:{port}{ENDPOINT_PATHS[transport]}",
                    proc=proc,
                    stderr_path=stderr_path,
                )
                return
            finally:
                stop_process(proc)
