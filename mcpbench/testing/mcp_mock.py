"""What a client-code test talks to: a trace served as a mock, or the real server behind a recorder.

`open_mock(settings, server)` is a context manager yielding an `McpMock`, the target the test points
its client at, and does what the record mode says (`settings.Action`):

- REPLAY: the trace served by serve-trace's parts (`replay/mock*.py`). Streamable HTTP and legacy
  SSE run in this process, in a thread, on an ephemeral port; stdio is a command the client starts
  (`python -m mcpbench serve-trace TRACE`), since a stdio server belongs to its client.
- RECORD: the real server behind the recorder of its transport (stdio: `mcpbench tee` per server
  start; HTTP: `mcpbench record` on an ephemeral port); when the test ends the recordings become
  the trace.
- EXTEND: the trace served as in REPLAY, its unrecorded requests forwarded (`--on-miss forward`)
  to the real server through a recorder; when the test ends what was forwarded is added to it.

An HTTP real server may be started here too: `command` with `{port}` (and `{port}` in `server`)
runs it on a free port for the test's duration. Every process started here is stopped when the
block ends, its recordings merged afterwards.
"""

import contextlib
import queue
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpbench.system.processes import STARTUP_TIMEOUT, STOP_TIMEOUT, free_port, start, stop_process, wait_for_port
from mcpbench.protocol.transports import LEGACY_SSE, STDIO
from mcpbench.system.target import Target, parse_target
from mcpbench.testing.settings import Action, FixtureSettings, SettingsError

# How often the in-process HTTP mock looks whether it should stop: each test's teardown waits for it
# (at most this long; 200 idle wake-ups a second cost nothing measurable).
POLL_INTERVAL = 0.005
# How long a stdio recording may still be written once the test is over (its tee's recorder drains
# the spool after the client closed the server; milliseconds on an idle machine).
RECORDING_DRAIN = 10.0


@dataclass(frozen=True, slots=True)
class McpMock:
    """The target a test points its client at.

    `url` for Streamable HTTP and legacy SSE; `argv` (`command` + `args`) for stdio, a command the
    client starts. `recording` is true when the real server answers (record modes once, all and
    new_episodes' unrecorded requests).
    """

    transport: str
    trace: Path
    mode: str
    action: Action
    url: str | None = None
    argv: tuple[str, ...] = ()

    @property
    def recording(self) -> bool:
        return self.action is not Action.REPLAY

    @property
    def command(self) -> str | None:
        return self.argv[0] if self.argv else None

    @property
    def args(self) -> list[str]:
        return list(self.argv[1:])

    @property
    def target(self) -> str:
        """As mcpbench's commands write a target: `stdio:CMD`, `http://…/mcp` or `sse+http://…/sse`."""
        return str(Target(self.transport, url=self.url, argv=self.argv))

    def sdk_target(self) -> Any:
        """What the official SDK's `mcp.Client` takes: the URL, `sse_client(url)` or `StdioServerParameters`."""
        if self.transport == STDIO:
            from mcp import StdioServerParameters

            return StdioServerParameters(command=self.argv[0], args=list(self.argv[1:]))
        if self.transport == LEGACY_SSE:
            from mcp.client.sse import sse_client

            return sse_client(self.url)
        return self.url


@contextlib.contextmanager
def open_mock(settings: FixtureSettings, server: str | None) -> Iterator[McpMock]:
    """Serve, record or extend `settings.trace` (see the module docstring) for the block's duration.

    `server` is the real server as a target (`stdio:CMD`, a URL; `{port}` for `settings.command`).

    Raises:
        SettingsError: mode none without the trace, a recording mode without a server, a transport
            the recording cannot give.
        McpbenchError: the trace cannot be read, the server cannot be started (one line each).
    """
    from mcpbench.replay import plan as plans

    action = settings.action
    if action is Action.MISSING:
        raise SettingsError(f"{settings.trace}: no such trace, and record mode 'none' never records "
                            "(run once with --mcp-record-mode=once to record it)")
    recorded = plans.load(settings.trace) if action is not Action.RECORD else None
    if action is Action.REPLAY:
        transport = settings.transport or _transport_of(recorded) or STDIO
        with _serve(settings, recorded, transport, None, action) as mock:
            yield mock
        return
    if not server:
        raise SettingsError(f"record mode {settings.mode!r} needs the real server: server='stdio:CMD' or a URL in "
                            "the mcp_trace marker or mcp_config, or an mcp_server fixture")
    speaks = parse_target(server.replace("{port}", "0")).transport
    if action is Action.RECORD and settings.transport not in (None, speaks):
        raise SettingsError(f"record mode {settings.mode!r} records through the real server, which speaks "
                            f"{speaks}: transport={settings.transport!r} cannot be recorded")
    with tempfile.TemporaryDirectory(prefix="mcpbench-recording-") as tmp:
        parts = Path(tmp)
        served = False
        try:
            with _real_server(settings, server) as real, _recorder(real, parts) as through:
                if action is Action.RECORD:
                    served = True
                    yield McpMock(real.transport, settings.trace, settings.mode, action, url=through.url, argv=through.argv)
                else:
                    transport = settings.transport or _transport_of(recorded) or real.transport
                    with _serve(settings, recorded, transport, through, action) as mock:
                        served = True
                        yield mock
        finally:
            if served:
                _keep(action, settings.trace, parts)


def _transport_of(recorded: Any) -> str | None:
    """The transport a trace was recorded on: its sessions' (an HTTP recorder's header names one for both)."""
    return next((session.transport for session in recorded.sessions if session.transport), recorded.transport)


@contextlib.contextmanager
def _serve(settings: FixtureSettings, recorded: Any, transport: str, forward_to: Target | None, action: Action) -> Iterator[McpMock]:
    """The trace as a mock on `transport`; unrecorded requests go to `forward_to` when given."""
    trace, mode = settings.trace, settings.mode
    if transport == STDIO:
        argv = [sys.executable, "-m", "mcpbench", "serve-trace", str(trace.resolve()), "--transport", STDIO,
                "--pace", settings.pace]
        if forward_to is not None:
            argv += ["--on-miss", "forward", str(forward_to)]
        yield McpMock(STDIO, trace, mode, action, argv=tuple(argv))
        return
    from mcpbench.replay.engine import Pace
    from mcpbench.replay.forward import Forwarder
    from mcpbench.replay.serve_trace import MockHttpServer, TraceAnswers
    from mcpbench.replay.mock_play import DEFAULT_MAX_GAP

    forward = Forwarder(forward_to) if forward_to is not None else None
    server = MockHttpServer(TraceAnswers(recorded), transport=transport, port=0, json_response=settings.json_response,
                            forward=forward, pace=Pace.parse(settings.pace, DEFAULT_MAX_GAP))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL},
                              name="mcpbench-mock", daemon=True)
    thread.start()
    try:
        yield McpMock(transport, trace, mode, action, url=server.url)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(STOP_TIMEOUT)
        if forward is not None:
            forward.close()


@contextlib.contextmanager
def _real_server(settings: FixtureSettings, server: str) -> Iterator[Target]:
    """The real server as a target; with `settings.command`, started on a free port (`{port}`) until the block ends."""
    port = str(free_port()) if "{port}" in server or any("{port}" in part for part in settings.command) else None
    target = parse_target(server.replace("{port}", port) if port else server)
    if not settings.command:
        yield target
        return
    if target.transport == STDIO:
        raise SettingsError("command= starts an HTTP server; a stdio server is given as server='stdio:COMMAND'")
    argv = [part.replace("{port}", port) if port else part for part in settings.command]
    with tempfile.TemporaryFile() as errors:
        try:
            proc = start(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors)
        except OSError as exc:
            raise SettingsError(f"command={shlex.join(argv)!r}: cannot start: {exc.strerror}") from None
        try:
            try:
                wait_for_port(target.host, target.port, proc=proc)
            except RuntimeError as exc:
                raise SettingsError(f"command={shlex.join(argv)!r}: {exc}{_last_line(errors)}") from None
            yield target
        finally:
            stop_process(proc)


@contextlib.contextmanager
def _recorder(real: Target, parts: Path) -> Iterator[Target]:
    """`real` behind the recorder of its transport, recording into `parts`; the target that reaches it so."""
    if real.transport == STDIO:
        yield Target(STDIO, argv=(sys.executable, "-m", "mcpbench.testing.record_stdio", str(parts), "--", *real.argv))
        return
    upstream = real.url
    argv = [sys.executable, "-m", "mcpbench", "record", "--upstream", upstream, "--listen", "127.0.0.1:0",
            "--out", str(parts / "http.jsonl")]
    with tempfile.TemporaryFile() as errors:
        proc = start(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            url = _first_line(proc, errors)
            yield Target(real.transport, url=url)
        finally:
            _interrupt(proc)


def _first_line(proc: subprocess.Popen, errors: Any) -> str:
    """The URL `mcpbench record` prints once it listens."""
    lines: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=STARTUP_TIMEOUT).strip()
    except queue.Empty:
        line = ""
    if not line:
        raise SettingsError(f"the recorder did not start within {STARTUP_TIMEOUT:g} s{_last_line(errors)}")
    return line


def _interrupt(proc: subprocess.Popen) -> None:
    """Stop a recorder as Ctrl-C does (its trace complete), then as SIGTERM does, killing it if it does not stop in time."""
    stop_process(proc, signals=(signal.SIGINT, signal.SIGTERM))
    if proc.stdout is not None:
        proc.stdout.close()


def _last_line(errors: Any) -> str:
    """`: <the last line a process wrote on stderr>`, or nothing."""
    errors.seek(0)
    lines = [line for line in errors.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return f": {lines[-1].strip()}" if lines else ""


def _keep(action: Action, trace: Path, parts: Path) -> None:
    """The test is over: its recordings become the trace (RECORD) or are added to it (EXTEND)."""
    from mcpbench.trace import spool
    from mcpbench.trace.merge import merge_traces

    found = sorted(path for path in parts.glob("*.jsonl") if path.stat().st_size)
    deadline = time.monotonic() + RECORDING_DRAIN
    while any(spool.live(path) for path in found) and time.monotonic() < deadline:
        time.sleep(0.01)  # a tee's recorder still draining its spool: bounded, and rare
    found = [path for path in found if _has_messages(path)]
    if not found:
        return  # nothing was recorded (no session, or nothing unrecorded was asked)
    trace.parent.mkdir(parents=True, exist_ok=True)
    merge_traces([trace, *found] if action is Action.EXTEND else found, trace)


def _has_messages(path: Path) -> bool:
    from mcpbench.trace.format import Kind
    from mcpbench.trace.reader import TraceReader

    return any(event.get("kind") == Kind.MESSAGE for event in TraceReader(path))

