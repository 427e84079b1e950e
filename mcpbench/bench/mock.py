"""`mcpbench bench mock`: the mock's latency per call against the real server's, on every transport.

The reference server's answers to `tools/call echo` are recorded once (stdio, a plain client
loop); `serve-trace` then serves that recording. One client, the same for both sides (the client
core over blocking I/O: one kept-alive HTTP connection for the POSTs, the legacy stream read in the
same thread, pipes for stdio), makes sequential calls, and each call's time from its send to its
answer is a sample. Four transports: Streamable HTTP with JSON answers (the real server with
`--json-response`, the mock with `--json-response`) and with SSE answers, legacy HTTP+SSE, stdio.

Real server and mock take turns, round after round, each with a fresh process; a side's p50 is the
median of its rounds' p50s, so a noisy moment of this shared 2-core machine moves one round, not
the figure. Target (issue 28): the mock's p50 within 1.2x the real server's on each transport.
"""

import contextlib
import functools
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from mcpbench.bench.common import Panel, bar_panels, write_result
from mcpbench.lab.peers.servers import ENDPOINT_PATHS, HOST, reference_server, serve_argv, start_listening
from mcpbench.system.processes import free_port, stop_process
from mcpbench.protocol.client import (
    STDOUT, Answered, ClientConnection, EndpointReady, Failed, LegacyHead, Outgoing, PostHead, initialize_request,
    initialized_notification,
)
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import LATEST_HANDSHAKE
from mcpbench.measures.stats import summary
from mcpbench.trace.format import now
from mcpbench.trace.writer import TraceWriter

NAME = "mock"
TARGET_RATIO = 1.2
FULL = {"rounds": 5, "calls": 1_000, "warmup": 100}
QUICK = {"rounds": 1, "calls": 200, "warmup": 20}
# (label, transport, JSON answers): the four ways a client reaches an MCP server.
CASES = (
    ("streamable-http json", STREAMABLE_HTTP, True),
    ("streamable-http sse", STREAMABLE_HTTP, False),
    ("legacy sse", LEGACY_SSE, False),
    ("stdio", STDIO, False),
)
PARAMS = {"name": "echo", "arguments": {"text": "hi"}}
READ_SIZE = 64 * 1024
# A call that has had no answer after this long means the server is broken: the run stops.
CALL_TIMEOUT = 30.0

Samples = list[float]
Calls = Callable[[int], Samples]
SendCall = Callable[[Outgoing], None]  # sends a message; for a request, returns once its answer is in


def _answered(events: list) -> bool:
    for event in events:
        if type(event) is Failed:
            raise RuntimeError(f"the call failed: {event.detail}")
    return any(type(event) is Answered for event in events)


def _session(conn: ClientConnection, exchange: SendCall) -> Calls:
    """The handshake; then a function that makes n timed `tools/call echo`s (seconds each)."""
    exchange(conn.send(initialize_request(conn)))
    exchange(conn.send(initialized_notification()))

    def calls(n: int) -> Samples:
        samples = []
        for _ in range(n):
            out = conn.prepare("tools/call", PARAMS)
            started = time.perf_counter()
            conn.send(out, ts=started)
            exchange(out)
            samples.append(time.perf_counter() - started)
        return samples

    return calls


@contextlib.contextmanager
def stdio_client(argv: list[str], log: list | None = None) -> Iterator[Calls]:
    """Calls to a stdio server started from `argv`; with `log`, every line both ways with its time."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    conn = ClientConnection(STDIO, LATEST_HANDSHAKE)
    stdin, stdout = proc.stdin.fileno(), proc.stdout.fileno()

    def exchange(out: Outgoing) -> None:
        if log is not None:
            log.append(("c2s", out.data[:-1], now()))
        os.write(stdin, out.data)
        while out.request_id is not None:
            chunk = os.read(stdout, READ_SIZE)
            if not chunk:
                raise RuntimeError("the stdio server closed its stdout")
            if log is not None:
                log.extend(("s2c", line, now()) for line in chunk.splitlines() if line.strip())
            if _answered(conn.reader(STDOUT).feed(chunk)):
                return

    try:
        yield _session(conn, exchange)
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def streamable_client(url: str) -> Iterator[Calls]:
    """Calls over Streamable HTTP: one kept-alive connection (opened again when a server closes it)."""
    parts = urlsplit(url)
    link = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CALL_TIMEOUT)
    conn = ClientConnection(STREAMABLE_HTTP, LATEST_HANDSHAKE, url=url)

    def exchange(out: Outgoing) -> None:
        link.request("POST", parts.path, body=out.data, headers=out.headers)
        resp = link.getresponse()
        reader = conn.reader(PostHead(out, resp.status, resp.getheader("content-type"), resp.getheader("mcp-session-id")))
        events = reader.feed(resp.read()) + reader.feed(b"")
        if out.request_id is not None and not _answered(events):
            raise RuntimeError(f"HTTP {resp.status} without an answer")

    try:
        yield _session(conn, exchange)
    finally:
        link.close()


@contextlib.contextmanager
def legacy_client(url: str) -> Iterator[Calls]:
    """Calls over legacy HTTP+SSE: the `GET /sse` stream read in this thread, the POSTs kept alive."""
    parts = urlsplit(url)
    stream_link = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CALL_TIMEOUT)
    post_link = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CALL_TIMEOUT)
    conn = ClientConnection(LEGACY_SSE, LATEST_HANDSHAKE, url=url)
    try:
        stream_link.request("GET", parts.path, headers=conn.headers("legacy"))
        stream = stream_link.getresponse()
        reader = conn.reader(LegacyHead(stream.status, stream.getheader("content-type")))

        def read() -> list:
            chunk = stream.read1(READ_SIZE)
            if not chunk:
                raise RuntimeError("the legacy stream ended")
            return reader.feed(chunk)

        while not any(type(event) is EndpointReady for event in read()):
            pass
        target = urlsplit(conn.endpoint)

        def exchange(out: Outgoing) -> None:
            post_link.request("POST", f"{target.path}?{target.query}", body=out.data, headers=out.headers)
            post_link.getresponse().read()
            while out.request_id is not None and not _answered(read()):
                pass

        yield _session(conn, exchange)
    finally:
        post_link.close()
        stream_link.close()


def record(trace: Path, calls: int) -> None:
    """The reference server's answers to `calls` echo calls (stdio), as a trace for the mock."""
    argv = serve_argv(STDIO)
    log: list[tuple[str, bytes, float]] = []
    with stdio_client(argv, log) as session:
        session(calls)
    with TraceWriter(trace, transport=STDIO, header={"command": argv}) as writer:
        for direction, data, ts in log:
            writer.message("bench", direction, data, ts)


def _client(transport: str, where: str | list[str]):
    """The client of `transport` for a server at URL `where` (stdio: the command that starts it)."""
    if transport == STDIO:
        return stdio_client(where)
    return (legacy_client if transport == LEGACY_SSE else streamable_client)(where)


@contextlib.contextmanager
def real_server(transport: str, json_response: bool) -> Iterator[Calls]:
    with reference_server(transport, json_response=json_response) as server:
        with _client(transport, server if transport == STDIO else server.url) as calls:
            yield calls


@contextlib.contextmanager
def mock_server(trace: Path, transport: str, json_response: bool) -> Iterator[Calls]:
    argv = [sys.executable, "-m", "mcpbench", "serve-trace", str(trace), "--transport", transport]
    if json_response:
        argv.append("--json-response")
    if transport == STDIO:
        with _client(transport, argv) as calls:
            yield calls
        return
    port = free_port()
    proc = start_listening([*argv, "--port", str(port)], port, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with _client(transport, f"http://{HOST}:{port}{ENDPOINT_PATHS[transport]}") as calls:
            yield calls
    finally:
        stop_process(proc)


def measure(side: Callable, config: dict) -> Samples:
    """One round: a fresh server, `warmup` calls untimed, then `calls` timed (in ms)."""
    with side() as calls:
        calls(config["warmup"])
        return [seconds * 1000 for seconds in calls(config["calls"])]


def run(quick: bool = False) -> Path:
    """Measure the mock against the real server on each transport; write results/bench/mock.json."""
    config = QUICK if quick else FULL
    results = {}
    with tempfile.TemporaryDirectory(prefix="mcpbench-bench-mock-") as tmp:
        trace = Path(tmp) / "echo.jsonl"
        record(trace, 1)
        for label, transport, json_response in CASES:
            rounds: dict[str, list[dict]] = {"real": [], "mock": []}
            for index in range(config["rounds"]):
                order = ("real", "mock") if index % 2 == 0 else ("mock", "real")
                for name in order:
                    side = functools.partial(real_server, transport, json_response) if name == "real" else (
                        functools.partial(mock_server, trace, transport, json_response))
                    rounds[name].append(summary(measure(side, config)))
            real = statistics.median(r["p50"] for r in rounds["real"])
            mock = statistics.median(r["p50"] for r in rounds["mock"])
            results[label] = {
                "real_p50_ms": real, "mock_p50_ms": mock, "ratio": mock / real,
                "real_p90_ms": statistics.median(r["p90"] for r in rounds["real"]),
                "mock_p90_ms": statistics.median(r["p90"] for r in rounds["mock"]),
                "rounds": rounds,
            }
            print(f"mcpbench bench mock: {label}: real p50 {real:.3f} ms, mock p50 {mock:.3f} ms ({mock / real:.2f}x)",
                  file=sys.stderr, flush=True)
    data = {
        "config": config,
        "transports": results,
        "target_ratio": TARGET_RATIO,
        "pass": {label: result["ratio"] <= TARGET_RATIO for label, result in results.items()},
        "quick": quick,
    }
    path = write_result(NAME, data)
    panels = [Panel(label, ["real server", "mock"], [r["real_p50_ms"], r["mock_p50_ms"]], "p50 per call (ms)")
              for label, r in results.items()]
    bar_panels(path.with_suffix(".png"), f"serve-trace against the reference server: p50 per echo call "
               f"(target: mock within {TARGET_RATIO}x)", panels)
    return path
