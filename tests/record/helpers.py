"""Real peers for the recorder tests: mitmdump with the addon, the peer server, a capturing client.

Every process started here is stopped when its context exits, also when the test fails.
"""

import contextlib
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import orjson

from mcpbench.protocol.http import is_event_stream
from mcpbench.protocol.session import C2S, S2C, Session, Violation
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.sse import SseEvent, SseParser
from mcpbench.record import ADDON_PATH
from mcpbench.trace.reader import read_trace
from tests.support.servers import HOST, REPO_ROOT, ServerStartError, free_port, stop_process, wait_for_port

MITMDUMP = str(Path(sys.executable).with_name("mitmdump"))
PEER_SERVER = Path(__file__).with_name("peer_server.py")


@dataclass(frozen=True, slots=True)
class Proxy:
    """A running mitmdump with the addon; `trace` is complete once the context has exited."""

    port: int
    base: str  # http://127.0.0.1:P
    trace: Path
    proc: subprocess.Popen
    log: Path

    def url(self, path: str) -> str:
        return self.base + path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def mitmdump(upstream_port: int | None, trace: Path, *, extra: list[str] = (), addon: bool = True, **popen) -> Iterator[Proxy]:
    """mitmdump in reverse mode to 127.0.0.1:`upstream_port` (regular proxy mode when None).

    Stopped with SIGTERM, which runs the addon's `done` hooks, so the trace is complete afterwards.
    `popen`: more arguments for `subprocess.Popen` (`start_new_session`, say).
    """
    port = free_port()
    mode = f"reverse:http://{HOST}:{upstream_port}" if upstream_port else "regular"
    argv = [MITMDUMP, "-q", "--mode", mode, "--listen-host", HOST, "-p", str(port)]
    if addon:
        argv += ["-s", str(ADDON_PATH), "--set", f"mcpbench_out={trace}"]
    argv += list(extra)
    log = trace.with_suffix(".mitmdump.log")
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=err, stderr=err, **popen)
    try:
        try:
            wait_for_port(HOST, port, proc=proc)
        except ServerStartError as exc:
            raise ServerStartError(f"{exc}\n{log.read_text()}") from None
        yield Proxy(port=port, base=f"http://{HOST}:{port}", trace=trace, proc=proc, log=log)
    finally:
        stop_process(proc)


@contextlib.contextmanager
def record_proxy(upstream: str, trace: Path, *, extra: list[str] = (), **popen) -> Iterator[tuple[str, subprocess.Popen]]:
    """`mcpbench record --upstream upstream` on an ephemeral port: yields (the URL to use, the process).

    Stopped with SIGTERM (which completes the trace) when the block exits, unless already ended.
    `extra`: more options (`--otlp URL`, say).
    """
    argv = [sys.executable, "-m", "mcpbench", "record", "--upstream", upstream, "--listen", f"{HOST}:0", "--out", str(trace), *extra]
    log = trace.with_suffix(".record.log")
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, **popen)
    try:
        url = proc.stdout.readline().decode().strip()  # printed once mitmproxy listens
        if not url:
            raise ServerStartError(f"mcpbench record printed no URL\n{log.read_text(errors='replace')}")
        yield url, proc
    finally:
        stop_process(proc)
        proc.stdout.close()


@dataclass(frozen=True, slots=True)
class Peer:
    port: int
    proc: subprocess.Popen


@contextlib.contextmanager
def peer_server(transport: str = "streamable-http", *, json_response: bool = False) -> Iterator[Peer]:
    """tests/record/peer_server.py (tick/ticks/notify tools) on an ephemeral port."""
    port = free_port()
    argv = [sys.executable, str(PEER_SERVER), "--port", str(port), "--transport", transport]
    if json_response:
        argv.append("--json-response")
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        try:
            try:
                wait_for_port(HOST, port, proc=proc)
            except ServerStartError as exc:
                err.seek(0)
                raise ServerStartError(f"{exc}\n{err.read().decode(errors='replace')}") from None
            yield Peer(port=port, proc=proc)
        finally:
            stop_process(proc)


@contextlib.contextmanager
def record_command(upstream: str, out: Path, *extra: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """`mcpbench record --upstream URL --out OUT` on an ephemeral port: (the process, the URL it printed).

    Stopped when the block exits (the block itself may SIGINT it and check how it ended).
    """
    argv = [sys.executable, "-m", "mcpbench", "record", "--upstream", upstream,
            "--listen", f"{HOST}:{free_port()}", "--out", str(out), *extra]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = proc.stdout.readline().decode().strip()  # printed once mitmproxy listens
        assert url.endswith("/mcp"), proc.stderr.read()
        yield proc, url
    finally:
        stop_process(proc)


def canonical(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


class _TeeStream(httpx2.AsyncByteStream):
    """Passes a response body on, noting the JSON-RPC messages in the bytes the client read."""

    def __init__(self, inner, content_type: str, received: list[bytes]) -> None:
        self.inner = inner
        self.sse = is_event_stream(content_type)
        self.received = received
        self.parser = SseParser()
        self.body = bytearray()

    async def __aiter__(self):
        async for chunk in self.inner:
            if self.sse:
                for event in self.parser.feed(chunk):
                    if isinstance(event, SseEvent) and event.data and event.event in (None, "message"):
                        self.received.append(canonical(orjson.loads(event.data)))
            else:
                self.body += chunk
            yield chunk
        if not self.sse and self.body.lstrip()[:1] in (b"{", b"["):
            self.received.append(canonical(orjson.loads(self.body)))

    async def aclose(self) -> None:
        await self.inner.aclose()


class Capture(httpx2.AsyncBaseTransport):
    """An httpx2 transport that records the JSON-RPC messages a client sends and receives."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[bytes] = []
        self.received: list[bytes] = []
        self.post_urls: list[httpx2.URL] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            self.post_urls.append(request.url)
            body = await request.aread()
            if body.lstrip()[:1] in (b"{", b"["):
                self.sent.append(canonical(orjson.loads(body)))
        response = await self.inner.handle_async_request(request)
        response.stream = _TeeStream(response.stream, response.headers.get("content-type", ""), self.received)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def events(path: Path) -> list[dict]:
    return list(read_trace(path))


def messages(trace: list[dict], direction: str | None = None) -> list[dict]:
    return [e for e in trace if e["kind"] == "message" and (direction is None or e["dir"] == direction)]


def kinds(trace: list[dict], kind: str) -> list[dict]:
    return [e for e in trace if e["kind"] == kind]


def assert_same_messages(trace: list[dict], capture: Capture) -> None:
    """The trace holds exactly the messages the client sent and received (as multisets)."""
    assert Counter(canonical(e["msg"]) for e in messages(trace, "c2s")) == Counter(capture.sent)
    assert Counter(canonical(e["msg"]) for e in messages(trace, "s2c")) == Counter(capture.received)


def assert_paired(trace: list[dict]) -> None:
    """Every request in the trace has exactly one answer in its session, and nothing else broke."""
    sessions: dict[str, Session] = {}
    for event in messages(trace):
        session = sessions.setdefault(event["session"], Session())
        direction = C2S if event["dir"] == "c2s" else S2C
        for item in session.observe(direction, jsonrpc.from_obj(event["msg"]), event["ts"]):
            assert not isinstance(item, Violation) or item.code in (
                "request-before-initialized", "unexpected-initialized"
            ) and event["session"].startswith("conn-"), (item, event)
    for key, session in sessions.items():
        assert not session.pending, f"session {key}: unanswered {list(session.pending)}"
