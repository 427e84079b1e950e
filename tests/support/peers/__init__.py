"""Peers that differ from the official SDK 2.x the way the specification allows, and recordings of them.

- `sdk1_server.py`: an SDK 1.x (`FastMCP`) server, run by a virtualenv with `mcp<2` (`sdk1_python`,
  made once under pytest's cache folder and kept there; unavailable with a one-line reason);
- `strict_server.py`: a handshake-only server on the core's `ServerConnection` that checks
  `MCP-Protocol-Version` and, with `--require-session`, wants a session id on every POST;
- the probing client is the official SDK 2.x client in its default `auto` mode (`session`):
  it sends `server/discover` and falls back to the handshake when the server answers with an error;
- `ts/server.mjs` and `ts/client.mjs`: a server and a client on the official TypeScript SDK (v2), in
  both eras, run by Node.js from a folder where `npm ci` installed `ts/package-lock.json` (`ts_sdk`,
  made once under pytest's cache folder and kept there; unavailable with a one-line reason).
"""

import contextlib
import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import anyio

from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port

HERE: Final = Path(__file__).parent
SDK1_SERVER: Final = HERE / "sdk1_server.py"
STRICT_SERVER: Final = HERE / "strict_server.py"
SDK1_REQUIREMENT: Final = "mcp<2"
TS_PEERS: Final = HERE / "ts"
TS_FILES: Final = ("package.json", "package-lock.json", "server.mjs", "client.mjs")
NODE_MAJOR: Final = 20  # the SDK's `engines`
# Making the virtualenv downloads or unpacks a dozen packages: bounded, once per cache folder.
VENV_TIMEOUT: Final = 300
# A whole client session against a loopback peer: far above what one takes.
SESSION_TIMEOUT: Final = 30.0
RECORD_TIMEOUT: Final = 30.0


class Unavailable(Exception):
    """A peer cannot be made here (say why in one line)."""


def sdk1_python(folder: Path) -> Path:
    """The interpreter of a virtualenv in `folder` with the SDK 1.x installed, made on first use.

    Raises:
        Unavailable: the virtualenv or the package cannot be had.
    """
    python = folder / "bin" / "python"
    check = [str(python), "-c", "import mcp.server.fastmcp"]
    if python.exists() and subprocess.run(check, capture_output=True, timeout=60).returncode == 0:
        return python
    base = getattr(sys, "_base_executable", sys.executable)
    for step in ([base, "-m", "venv", "--clear", str(folder)],
                 [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", SDK1_REQUIREMENT]):
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=VENV_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"cannot make the SDK 1.x virtualenv: {exc}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise Unavailable(f"cannot make the SDK 1.x virtualenv ({' '.join(step[:3])}): {last}")
    return python


def ts_sdk(folder: Path) -> Path:
    """`folder`, with the TypeScript SDK installed (`npm ci` of ts/package-lock.json, on first use or
    when the lock changed) and the peers' scripts beside it, where Node.js resolves their imports.

    Raises:
        Unavailable: Node.js or npm is missing or too old, or the packages cannot be had.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise Unavailable("Node.js and npm are not on PATH: the TypeScript SDK peers need them")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < NODE_MAJOR:
        raise Unavailable(f"Node.js {version} is older than the TypeScript SDK's {NODE_MAJOR}")
    lock = (TS_PEERS / "package-lock.json").read_bytes()
    installed = folder / "node_modules" / ".package-lock.json"
    if not installed.exists() or (folder / "package-lock.json").read_bytes() != lock:
        folder.mkdir(parents=True, exist_ok=True)
        for name in TS_FILES[:2]:
            shutil.copyfile(TS_PEERS / name, folder / name)
        try:
            done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder,
                                  capture_output=True, text=True, timeout=VENV_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"npm ci of the TypeScript SDK took over {VENV_TIMEOUT} s") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise Unavailable(f"cannot install the TypeScript SDK (npm ci): {last}")
    for name in TS_FILES[2:]:  # each time: an edited script runs as edited
        shutil.copyfile(TS_PEERS / name, folder / name)
    return folder


def ts_server_argv(folder: Path, transport: str) -> list[str]:
    """The TypeScript server's command: `stdio`, or `http` (`http_peer` adds the port)."""
    return [shutil.which("node") or "node", str(folder / "server.mjs"), transport]


def ts_client(folder: Path, era: str, *target: str) -> dict[str, Any]:
    """One session of the TypeScript client (`era`: auto or legacy) against `target` (a URL, or `stdio`
    and a command): what it got, as it prints it. A failed step fails the test with the client's words."""
    argv = [shutil.which("node") or "node", str(folder / "client.mjs"), era, *target]
    done = subprocess.run(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=2 * SESSION_TIMEOUT)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"the TypeScript client failed ({done.returncode}): {done.stdout}{done.stderr}"
    return json.loads(lines[-1])


@contextlib.contextmanager
def peer_process(argv: list[str], *flags: str, path: str = "/mcp", stderr: int = subprocess.DEVNULL) -> Iterator[tuple[str, subprocess.Popen]]:
    """Run a peer as `ARGV PORT FLAGS…` on an ephemeral port; yield its URL and its process (with
    `stderr=subprocess.PIPE`, what it says there is read from `proc.stderr`), stop it on exit."""
    port = free_port()
    proc = subprocess.Popen([*argv, str(port), *flags], cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_for_port(HOST, port, proc=proc)
        yield f"http://{HOST}:{port}{path}", proc
    finally:
        stop_process(proc)
        if proc.stderr is not None:
            proc.stderr.close()


@contextlib.contextmanager
def http_peer(argv: list[str], *flags: str, path: str = "/mcp") -> Iterator[str]:
    """Run a peer as `ARGV PORT FLAGS…` on an ephemeral port; yield its URL, stop it on exit."""
    with peer_process(argv, *flags, path=path) as (url, _):
        yield url


def strict_argv(transport: str) -> list[str]:
    """The strict peer's command (Streamable HTTP: `http_peer` adds the port and flags)."""
    return [sys.executable, str(STRICT_SERVER), transport]


def sdk1_argv(python: Path, transport: str) -> list[str]:
    return [str(python), str(SDK1_SERVER), transport]


def session(target: Any, mode: str = "auto") -> str:
    """One short session of the official SDK 2.x client (`echo`, `tools/list`, `add`): the version it spoke."""
    from mcp import Client

    async def run() -> str:
        with anyio.fail_after(SESSION_TIMEOUT):
            async with Client(target, mode=mode) as client:
                await client.call_tool("echo", {"text": "hi"})
                await client.list_tools()
                await client.call_tool("add", {"a": 1, "b": 2})
                return client.protocol_version

    return anyio.run(run)


@contextlib.contextmanager
def recording_proxy(upstream: str, out: Path) -> Iterator[str]:
    """`mcpbench record --upstream UPSTREAM --out OUT`: yields the URL to use; the trace is complete after."""
    argv = [sys.executable, "-m", "mcpbench", "record", "--upstream", upstream, "--listen", f"{HOST}:0", "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        url = proc.stdout.readline().decode().strip()  # printed once mitmproxy listens
        assert url, f"mcpbench record printed no URL (exit {proc.poll()})"
        yield url
    finally:
        stop_process(proc)  # SIGTERM: the trace is completed
        proc.stdout.close()


def get(url: str, headers: dict[str, str] | None = None) -> int:
    """A GET (a client's probe), its status whatever it is."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=SESSION_TIMEOUT) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def record_http(upstream: str, out: Path, mode: str = "auto", *, probe: str | None = None) -> Path:
    """Record one SDK session against the HTTP peer at `upstream` through `mcpbench record`.

    `probe`: first a GET of this path (a client's probe: OAuth discovery; the MCP path itself, a
    GET stream without a session). A legacy SSE `upstream` (its URL ends in /sse) gets the SDK's
    SSE client.
    """
    from mcpbench.lab.peers.drive import sdk_target

    with recording_proxy(upstream, out) as url:
        if probe is not None:
            base, path = url.rsplit("/", 1)
            stream = probe == "/" + path  # a GET of the MCP endpoint asks for the event stream
            get(base + probe, {"accept": "text/event-stream" if stream else "application/json"})
        session(sdk_target(url, "sse" if url.endswith("/sse") else "streamable-http"), mode)
    return out


def record_stdio(server_argv: list[str], out: Path, mode: str = "auto") -> Path:
    """Record one SDK session against a stdio server through the tee."""
    from tests.support.recordings import tee_argv
    from tests.support.servers import stdio_params

    session(stdio_params(tee_argv(out, server_argv)), mode)
    return out
