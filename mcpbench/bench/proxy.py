"""`mcpbench bench proxy`: what recording through mitmproxy costs.

One run measures five paths to the same reference server (Streamable HTTP, SSE answers,
handshake era, `tools/call echo`), and four more to a reference server that answers with JSON
bodies (`--json-response`): `json_direct`, `json_bare`, `json_addon`, `json_record`:

- `direct`: the client talks to the server;
- `bare`: through `mitmdump` in reverse mode without any addon;
- `stream`: through `mitmdump` with a pass-through stream callable on SSE answers and nothing else
  (mitmproxy's streaming path alone);
- `addon`: through `mitmdump` with the mcpbench addon recording a trace;
- `record`: through `mcpbench record` (the same addon in mitmproxy with only the addons a recording
  reverse proxy uses, see `mcpbench/proxies/host.py`).

For each path: the latency of sequential calls on one session (p50/p99) and the throughput of a
few concurrent sessions (calls/s). Paths are measured in turns, round after round, and the
figures reported are medians over rounds, so a slow moment of the machine hits every path alike.

Then the time to the first SSE event: a `slow` call's first progress notification on its POST
stream, and a legacy `GET /sse` stream's `endpoint` event, on every path plus `bare_slb` (bare
mitmdump with `--set stream_large_bodies=1`: mitmproxy's own streaming, no addon and no stream
callable; plain bare mitmdump buffers SSE, so its first event arrives with the last, or never for
`/sse`). One raw-socket client times every path alike (`_first_event`): the request leaves in one
`sendall`, each `recv` is timestamped as it returns, and the first event counts once the SSE parser
has it whole. Two set-ups, sampled in turns and reported as medians:

- `warm` (the target's measure): the request goes on a keep-alive connection that has already
  carried an exchange, so through a proxy the upstream connection is open too. This is how a client
  meets a stream in a session (the SDK pools its connections).
- `new_connection`: the clock starts before `connect`. Through mitmdump that adds mitmproxy's
  per-connection work (accept, `client_connected`, its upstream connect between `server_connect`
  and `server_connected`, layer set-up: some 5-6 ms here) to both events, with or without the addon.

Where a first event's time goes through mitmdump on loopback (2 cores, measured with a raw upstream
that stamps its own receive and send times into the event, and a hook-timing script): TCP_NODELAY
is set on both of mitmproxy's sockets (asyncio sets it; strace shows it), and the chunk path is
short (upstream write -> client read: direct 0.3 ms, a trivial asyncio relay 0.7 ms, mitmdump with
a pass-through callable 1.0 ms), so neither Nagle/delayed ACK nor chunk coalescing plays a part.
The cost is mitmproxy's request path: receive -> `requestheaders` -> `request` -> send upstream is
three event-loop turns of pure-Python work, about 3.3 ms on a warm connection (direct 0.2 ms, the
relay 0.3 ms) and 9.5-10 ms on a new one (relay 2.4 ms). Bare mitmdump with `stream_large_bodies`
pays the same. The addon adds its hooks' CPU to that path (`request` about 0.15 ms); its stream
callable passes each chunk on before recording it, so its chunk path equals the pass-through one.

Targets (issue 3): the addon keeps >= 90 % of bare mitmdump's throughput, adds <= 0.5 ms p50, and
the first SSE event through it arrives <= 5 ms after the direct one (warm connections; checked for
both events). Issue 15: `mcpbench record`'s CPU per exchange is at most bare mitmdump's + 10 %,
with JSON answers (`cpu_json`) and with SSE answers (`cpu_sse`). The addon inside a stock mitmdump
is reported beside it (`addon_vs_bare_cpu_*`): there mitmdump's thirty-odd idle addons are offered
every flow event too, which costs more than the recording.

Wall-clock figures on a shared 2-core machine are noisy, so the run also reports the CPU time the
mitmdump process spends per exchange (`proxy_cpu_us_per_exchange`, from psutil): the addon's cost
against bare mitmdump without the scheduling noise. Part of that cost is mitmproxy's own streaming
path, which the addon must switch on for every SSE answer (bare mitmdump buffers them: see
`first_event_ms`), so it is not a like-for-like comparison for SSE answers.

The load is a plain `http.client` loop speaking the protocol through the protocol core.
"""

import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mcpbench.bench.common import Panel, bar_panels, write_result
from mcpbench.lab.peers.servers import start_listening
from mcpbench.system.processes import free_port, stop_process
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.client import Answered, ClientConnection, PostHead, initialize_request, initialized_notification
from mcpbench.protocol.http import SESSION_ID
from mcpbench.protocol.sse import SseEvent, SseParser
from mcpbench.measures.stats import summary
from mcpbench.trace.reader import TraceReader

HOST = "127.0.0.1"
NAME = "proxy"
PATHS = ("direct", "bare", "stream", "addon", "record")
# The same calls to a server answering with JSON bodies (no streaming on any path).
JSON_PATHS = ("json_direct", "json_bare", "json_addon", "json_record")
ALL_PATHS = PATHS + JSON_PATHS
# mitmdump set-ups; `bare_slb` (bare mitmdump with `stream_large_bodies=1`: mitmproxy's own streaming,
# no addon at all) is only timed for first events.
PROXIES = ("bare", "bare_slb", "stream", "addon")
TTFE_PATHS = ("direct", "bare", "bare_slb", "stream", "addon")
# The proxies started in front of each reference server: the SSE-answer one (`server`) gets every
# set-up and `mcpbench record`; the legacy one is only timed for first events; the JSON one gets
# what its paths (`JSON_PATHS`) measure.
PROXIES_BY_UPSTREAM = {"server": (*PROXIES, "record"), "legacy": PROXIES, "json": ("bare", "addon", "record")}

# The `stream` path: mitmdump with only a pass-through stream callable on SSE answers, which is what
# any recorder that must not buffer SSE pays before recording anything.
STREAM_ONLY_ADDON = """
class StreamOnly:
    def responseheaders(self, flow):
        if "text/event-stream" in flow.response.headers.get("content-type", ""):
            flow.response.stream = lambda chunk: chunk


addons = [StreamOnly()]
"""

# Full run: 3 rounds x (300 sequential calls + 4 sessions x 200 concurrent calls) per path takes
# about a minute on 2 cores; --quick is a smoke run.
FULL = {"rounds": 3, "latency_calls": 300, "sessions": 4, "calls_per_session": 200, "ttfe_samples": 15}
QUICK = {"rounds": 1, "latency_calls": 30, "sessions": 2, "calls_per_session": 20, "ttfe_samples": 2}

# Targets from issue 3.
TARGET_THROUGHPUT_RATIO = 0.90
TARGET_ADDED_P50_MS = 0.5
TARGET_TTFE_EXTRA_MS = 5.0
# Issue 15: `mcpbench record`'s process CPU per exchange over bare mitmdump's.
TARGET_CPU_RATIO = 1.10

# `slow` with 4 steps over 0.2 s: the first progress event comes after ~50 ms, the answer after
# ~200 ms, so a buffering proxy shows as ~150 ms extra.
SLOW_ARGS = {"seconds": 0.2, "steps": 4}
# How long to wait for a first event before calling it lost (bare mitmdump never delivers `/sse`).
TTFE_TIMEOUT = 2.0


def _bin(name: str) -> str:
    """An executable next to this interpreter (the venv's mitmdump), else from PATH."""
    candidate = Path(sys.executable).with_name(name)
    return str(candidate) if candidate.exists() else name


def _start(argv: list[str], port: int, log: Path) -> subprocess.Popen:
    with open(log, "wb") as err:
        return start_listening(argv, port, stdout=subprocess.DEVNULL, stderr=err)


class _Client:
    """One Streamable HTTP session over one keep-alive connection (blocking, for load)."""

    def __init__(self, port: int, path: str = "/mcp") -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)
        self.path = path
        self.protocol = ClientConnection("streamable-http")

    def exchange(self, out) -> list:
        """POST `out`; the client core's events for its answer."""
        self.conn.request("POST", self.path, out.data, out.headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status >= 400:
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
        reader = self.protocol.reader(PostHead(out, response.status, response.getheader("content-type"), response.getheader(SESSION_ID)))
        return reader.feed(data) + reader.feed(b"")

    def start(self) -> None:
        self.exchange(self.protocol.send(initialize_request(self.protocol)))
        self.exchange(self.protocol.send(initialized_notification()))

    def echo(self) -> None:
        answers = self.exchange(self.protocol.send(self.protocol.prepare("tools/call", {"name": "echo", "arguments": {"text": "hi"}})))
        if not answers or not isinstance(answers[-1], Answered) or not isinstance(answers[-1].answer, jsonrpc.Response):
            raise RuntimeError(f"echo failed: {answers!r}")

    def close(self) -> None:
        self.conn.close()


def _latency(port: int, calls: int) -> list[float]:
    client = _Client(port)
    try:
        client.start()
        client.echo()  # warm the path
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            client.echo()
            samples.append((time.perf_counter() - started) * 1000)
        return samples
    finally:
        client.close()


def _throughput(port: int, sessions: int, calls: int) -> float:
    clients = [_Client(port) for _ in range(sessions)]
    for client in clients:
        client.start()
    barrier = threading.Barrier(sessions + 1)
    failures: list[BaseException] = []

    def work(client: _Client) -> None:
        barrier.wait()
        try:
            for _ in range(calls):
                client.echo()
        except BaseException as exc:  # reported after the run
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in clients]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for client in clients:
        client.close()
    if failures:
        raise RuntimeError(f"load failed: {failures[0]!r}")
    return sessions * calls / elapsed


def _first_event(sock, request: bytes, started: float | None = None) -> dict | None:
    """Send `request` on `sock` and time its answer up to the first complete SSE event.

    A raw-socket client, the same for every path: the request goes out in one `sendall`, every
    `recv` is timestamped as it returns (no buffered reader waiting for more bytes), h11 takes off
    the HTTP/1.1 framing and the protocol core's `SseParser` decides when an event is complete.
    The clock starts at the `sendall`, or at `started` (a `perf_counter` reading: the connection's
    set-up, when a new connection is timed). Returns milliseconds from the start to the response's
    first byte (`first_byte`), its first body byte (`first_body_byte`) and the end of the first
    SSE event (`first_event`); None when no event came within `TTFE_TIMEOUT`.
    """
    import h11  # mitmproxy's and the SDK's HTTP/1 parser

    conn = h11.Connection(h11.CLIENT)
    parser = SseParser()
    sock.settimeout(TTFE_TIMEOUT)
    sent = time.perf_counter()
    sock.sendall(request)
    origin = sent if started is None else started
    marks: dict[str, float] = {}
    try:
        while True:
            data = sock.recv(65536)
            arrived = time.perf_counter()
            if not data:
                return None
            marks.setdefault("first_byte", arrived)
            conn.receive_data(data)
            while (event := conn.next_event()) is not h11.NEED_DATA:
                if isinstance(event, h11.Response) and event.status_code >= 300:
                    raise RuntimeError(f"first event: HTTP {event.status_code}")
                if isinstance(event, h11.Data) and event.data:
                    marks.setdefault("first_body_byte", arrived)
                    if any(isinstance(e, SseEvent) for e in parser.feed(bytes(event.data))):
                        marks["first_event"] = arrived
                        return {name: (t - origin) * 1000 for name, t in marks.items()}
                if isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    return None
    except (TimeoutError, ConnectionError):
        return None


def _raw_request(method: str, path: str, port: int, headers: dict, body: bytes = b"") -> bytes:
    """One HTTP/1.1 request as bytes (headers and body, for a single `sendall`)."""
    lines = [f"{method} {path} HTTP/1.1", f"host: {HOST}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body:
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=TTFE_TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _ttfe_slow(port: int, new_connection: bool) -> dict | None:
    """The first progress event of a `slow` call.

    The session is set up (`initialize`, `initialized`) on a keep-alive connection; the call then
    goes on that same, warm connection, or with `new_connection` on a fresh one whose set-up is
    timed too (a proxy then also opens its upstream connection).
    """
    client = _Client(port)
    try:
        client.start()
        out = client.protocol.send(client.protocol.prepare("tools/call", {"name": "slow", "arguments": SLOW_ARGS, "_meta": {"progressToken": "bench"}}))
        raw = _raw_request("POST", "/mcp", port, out.headers, out.data)
        if new_connection:
            started = time.perf_counter()
            with _connect(port) as sock:
                return _first_event(sock, raw, started)
        client.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as `_connect` does
        return _first_event(client.conn.sock, raw)
    finally:
        client.close()


def _ttfe_legacy(port: int, new_connection: bool) -> dict | None:
    """The `endpoint` event of a legacy `GET /sse` stream, on a warm or a new connection.

    A warm connection has carried one exchange first (`GET /` answered 404), through the proxy too.
    """
    raw = _raw_request("GET", "/sse", port, {"accept": "text/event-stream"})
    started = time.perf_counter()
    with _connect(port) as sock:
        if new_connection:
            return _first_event(sock, raw, started)
        client = http.client.HTTPConnection(HOST, port, timeout=TTFE_TIMEOUT)
        client.sock = sock  # http.client reads the warm-up answer; the socket stays open
        client.request("GET", "/")
        client.getresponse().read()
        return _first_event(sock, raw)


def _first_events(slow_targets: dict, legacy_targets: dict, samples: int) -> dict:
    """Samples of both first events on every path, taken in turns (path after path, sample after sample)."""
    kinds = {"slow_progress": (_ttfe_slow, slow_targets), "legacy_endpoint": (_ttfe_legacy, legacy_targets)}
    out: dict = {kind: {conn: {name: [] for name in targets} for conn in ("warm", "new_connection")}
                 for kind, (_, targets) in kinds.items()}
    for number in range(samples):
        for kind, (probe, targets) in kinds.items():
            for name, port in targets.items():
                if kind == "legacy_endpoint" and name == "bare" and number > 0:
                    continue  # bare mitmdump holds `/sse` back for good: one timed-out sample says so
                for conn in ("warm", "new_connection"):
                    out[kind][conn][name].append(probe(port, conn == "new_connection"))
    return out


def _ttfe_summary(samples: list[dict | None]) -> dict:
    """Medians of the timed marks; `first_event_ms` None when no sample saw an event."""
    marks = ("first_byte", "first_body_byte", "first_event")
    return {f"{mark}_ms": _median([s.get(mark) if s else None for s in samples]) for mark in marks} | {
        "lost": sum(1 for s in samples if s is None),
    }


def measure_rounds(targets: dict[str, int], procs: dict[str, subprocess.Popen], config: dict, cpu_key: str) -> list[dict]:
    """`config["rounds"]` rounds over every target (name -> port): latency percentiles, calls/s and,
    for the targets that are a process of ours (`procs`), its CPU per exchange under `cpu_key`.

    Used by `bench proxy` and `bench balancer`; each round is one line on stderr.
    """
    exchanges = 3 + config["latency_calls"] + config["sessions"] * (2 + config["calls_per_session"])
    rounds = []
    for number in range(config["rounds"]):
        figures = {}
        for name, port in targets.items():
            cpu = _cpu(procs.get(name))
            samples = _latency(port, config["latency_calls"])
            rate = _throughput(port, config["sessions"], config["calls_per_session"])
            figures[name] = {"calls_per_s": rate, **{f"{k}_ms": v for k, v in summary(samples).items() if k != "count"}}
            if name in procs:
                figures[name][cpu_key] = (_cpu(procs[name]) - cpu) / exchanges * 1e6
        rounds.append(figures)
        print(f"mcpbench: round {number + 1}/{config['rounds']}: "
              + ", ".join(f"{n} {f['calls_per_s']:.0f}/s p50 {f['p50_ms']:.2f} ms" for n, f in figures.items()),
              file=sys.stderr, flush=True)
    return rounds


def _cpu(proc: subprocess.Popen | None) -> float:
    """CPU seconds (user + system) a process has used so far."""
    if proc is None:
        return 0.0
    import psutil  # a dependency of locust

    times = psutil.Process(proc.pid).cpu_times()
    return times.user + times.system


def _median(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def run(quick: bool = False) -> Path:
    """Measure direct vs bare mitmdump vs mitmdump with the addon; write results/bench/proxy.json."""
    config = QUICK if quick else FULL
    addon_path = str(Path(__file__).resolve().parent.parent / "record" / "addon.py")
    mitmdump = _bin("mitmdump")
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="mcpbench-bench-proxy-") as tmp:
        tmpdir = Path(tmp)
        procs: list[subprocess.Popen] = []
        try:
            ports = {}
            ports["server"] = free_port()
            procs.append(_start(
                [python, "-m", "mcpbench", "lab", "serve", "--transport", "streamable-http", "--host", HOST, "--port", str(ports["server"])],
                ports["server"], tmpdir / "server.log",
            ))
            ports["json"] = free_port()
            procs.append(_start(
                [python, "-m", "mcpbench", "lab", "serve", "--transport", "streamable-http", "--json-response",
                 "--host", HOST, "--port", str(ports["json"])],
                ports["json"], tmpdir / "json.log",
            ))
            ports["legacy"] = free_port()
            procs.append(_start(
                [python, "-m", "mcpbench", "lab", "serve", "--transport", "sse", "--host", HOST, "--port", str(ports["legacy"])],
                ports["legacy"], tmpdir / "legacy.log",
            ))
            stream_only = tmpdir / "stream_only.py"
            stream_only.write_text(STREAM_ONLY_ADDON)
            proxy_procs = {}
            for upstream, kinds in PROXIES_BY_UPSTREAM.items():
                for kind in kinds:
                    port = ports[f"{kind}-{upstream}"] = free_port()
                    if kind == "record":
                        argv = [python, "-m", "mcpbench", "record", "--upstream", f"http://{HOST}:{ports[upstream]}/mcp",
                                "--listen", f"{HOST}:{port}", "--out", str(tmpdir / f"{upstream}-record.jsonl")]
                    else:
                        argv = [mitmdump, "-q", "--mode", f"reverse:http://{HOST}:{ports[upstream]}", "--listen-host", HOST, "-p", str(port)]
                    if kind == "stream":
                        argv += ["-s", str(stream_only)]
                    if kind == "bare_slb":
                        argv += ["--set", "stream_large_bodies=1"]
                    if kind == "addon":
                        argv += ["-s", addon_path, "--set", f"mcpbench_out={tmpdir / f'{upstream}.jsonl'}"]
                    procs.append(_start(argv, port, tmpdir / f"{kind}-{upstream}.log"))
                    if upstream == "server":
                        proxy_procs[kind] = procs[-1]
                    elif upstream == "json":
                        proxy_procs[f"json_{kind}"] = procs[-1]
            targets = {name: ports["server"] if name == "direct" else ports[f"{name}-server"] for name in PATHS}
            targets |= {name: ports["json"] if name == "json_direct" else ports[f"{name.removeprefix('json_')}-json"] for name in JSON_PATHS}
            slow_targets = {name: ports["server"] if name == "direct" else ports[f"{name}-server"] for name in TTFE_PATHS}
            legacy_targets = {name: ports["legacy"] if name == "direct" else ports[f"{name}-legacy"] for name in TTFE_PATHS}
            rounds = measure_rounds(targets, proxy_procs, config, "proxy_cpu_us_per_exchange")
            first = _first_events(slow_targets, legacy_targets, config["ttfe_samples"])
            procs_to_stop = procs  # the addon's trace is complete once its mitmdump has stopped
            for proc in reversed(procs_to_stop):
                stop_process(proc)
            trace_events = sum(1 for _ in open(tmpdir / "server.jsonl", "rb")) if (tmpdir / "server.jsonl").exists() else 0
            trace_bytes_per_message = {}
            for upstream, answers in (("server", "sse"), ("json", "json")):
                trace = tmpdir / f"{upstream}.jsonl"
                messages = sum(1 for e in TraceReader(trace) if e["kind"] == "message") if trace.exists() else 0
                trace_bytes_per_message[answers] = trace.stat().st_size / messages if messages else None
        finally:
            for proc in reversed(procs):
                stop_process(proc)

    medians = {
        name: {key: statistics.median(r[name][key] for r in rounds) for key in rounds[0][name]} for name in ALL_PATHS
    }
    load = os.getloadavg()
    first_ms = {
        kind: {conn: {name: _ttfe_summary(values) for name, values in paths.items()} for conn, paths in conns.items()}
        for kind, conns in first.items()
    }

    def ttfe(kind: str, conn: str, name: str) -> float | None:
        return first_ms[kind][conn][name]["first_event_ms"]

    def extra(kind: str, conn: str, name: str, base: str) -> float | None:
        a, b = ttfe(kind, conn, name), ttfe(kind, conn, base)
        return a - b if a is not None and b is not None else None

    ratios = {
        "addon_vs_bare_throughput": medians["addon"]["calls_per_s"] / medians["bare"]["calls_per_s"],
        "addon_cpu_us_per_exchange": medians["addon"]["proxy_cpu_us_per_exchange"] - medians["bare"]["proxy_cpu_us_per_exchange"],
        "bare_vs_addon_cpu": medians["bare"]["proxy_cpu_us_per_exchange"] / medians["addon"]["proxy_cpu_us_per_exchange"],
        "addon_minus_bare_p50_ms": medians["addon"]["p50_ms"] - medians["bare"]["p50_ms"],
        "bare_minus_direct_p50_ms": medians["bare"]["p50_ms"] - medians["direct"]["p50_ms"],
        "addon_vs_stream_throughput": medians["addon"]["calls_per_s"] / medians["stream"]["calls_per_s"],
        "addon_minus_stream_p50_ms": medians["addon"]["p50_ms"] - medians["stream"]["p50_ms"],
        "addon_minus_stream_cpu_us_per_exchange": medians["addon"]["proxy_cpu_us_per_exchange"] - medians["stream"]["proxy_cpu_us_per_exchange"],
        # Issue 15: CPU per exchange over bare mitmdump, per answer kind: `mcpbench record`, and the
        # addon inside a stock mitmdump.
        "record_vs_bare_cpu_sse": medians["record"]["proxy_cpu_us_per_exchange"] / medians["bare"]["proxy_cpu_us_per_exchange"],
        "record_vs_bare_cpu_json": medians["json_record"]["proxy_cpu_us_per_exchange"] / medians["json_bare"]["proxy_cpu_us_per_exchange"],
        "record_vs_bare_throughput": medians["record"]["calls_per_s"] / medians["bare"]["calls_per_s"],
        "json_record_vs_bare_throughput": medians["json_record"]["calls_per_s"] / medians["json_bare"]["calls_per_s"],
        "addon_vs_bare_cpu_sse": medians["addon"]["proxy_cpu_us_per_exchange"] / medians["bare"]["proxy_cpu_us_per_exchange"],
        "addon_vs_bare_cpu_json": medians["json_addon"]["proxy_cpu_us_per_exchange"] / medians["json_bare"]["proxy_cpu_us_per_exchange"],
        # With SSE answers, part of that is mitmproxy's own streaming, which any recorder that must not
        # buffer them switches on: that part (a pass-through callable) and the addon's own, both over bare.
        "stream_vs_bare_cpu_sse": medians["stream"]["proxy_cpu_us_per_exchange"] / medians["bare"]["proxy_cpu_us_per_exchange"],
        "addon_own_vs_bare_cpu_sse": (medians["addon"]["proxy_cpu_us_per_exchange"] - medians["stream"]["proxy_cpu_us_per_exchange"])
        / medians["bare"]["proxy_cpu_us_per_exchange"],
        "json_addon_cpu_us_per_exchange": medians["json_addon"]["proxy_cpu_us_per_exchange"] - medians["json_bare"]["proxy_cpu_us_per_exchange"],
        "json_addon_vs_bare_throughput": medians["json_addon"]["calls_per_s"] / medians["json_bare"]["calls_per_s"],
        "json_addon_minus_bare_p50_ms": medians["json_addon"]["p50_ms"] - medians["json_bare"]["p50_ms"],
    }
    # First events, warm connections (the target's measure): what mitmproxy's streaming costs by
    # itself (`bare_slb`: no addon; `stream`: a pass-through callable) and what the addon adds.
    # The same differences on new connections add mitmproxy's per-connection set-up.
    for kind, short in (("slow_progress", "ttfe"), ("legacy_endpoint", "legacy_endpoint")):
        for conn, suffix in (("warm", ""), ("new_connection", "_new_connection")):
            for name, base in (("addon", "direct"), ("stream", "direct"), ("bare_slb", "direct"), ("addon", "stream")):
                ratios[f"{short}_{name}_minus_{base}{suffix}_ms"] = extra(kind, conn, name, base)
    met = {
        "throughput": ratios["addon_vs_bare_throughput"] >= TARGET_THROUGHPUT_RATIO,
        "added_p50": ratios["addon_minus_bare_p50_ms"] <= TARGET_ADDED_P50_MS,
        "cpu_sse": ratios["record_vs_bare_cpu_sse"] <= TARGET_CPU_RATIO,
        "cpu_json": ratios["record_vs_bare_cpu_json"] <= TARGET_CPU_RATIO,
    }
    for kind, short in (("slow_progress", "ttfe"), ("legacy_endpoint", "legacy_endpoint")):
        added = ratios[f"{short}_addon_minus_direct_ms"]
        met["first_event" if kind == "slow_progress" else "first_event_legacy_endpoint"] = (
            added is not None and added <= TARGET_TTFE_EXTRA_MS
        )
    data = {
        "quick": quick,
        "workload": {
            "server": "mcpbench lab serve --transport streamable-http (SSE answers, handshake era); "
            "json_* paths: the same with --json-response (JSON answers)",
            "call": "tools/call echo",
            **config,
            "slow_args": SLOW_ARGS,
            "mitmdump_flags": "-q --mode reverse:… (bare_slb: --set stream_large_bodies=1; stream: -s stream_only.py; "
            "addon: -s addon.py --set mcpbench_out=…); record: mcpbench record --upstream … --listen … --out …",
            "first_event_client": "raw socket, TCP_NODELAY, one sendall per request, every recv timestamped, h11 + SseParser; "
            "warm: on a keep-alive connection that has carried an exchange (through the proxy too); "
            "new_connection: the clock starts before connect",
            "addon_trace_events": trace_events,
            "addon_trace_bytes_per_message": trace_bytes_per_message,
        },
        "load_average_after": load,
        "medians": medians,
        "first_event_ms": first_ms,
        "first_event_samples_ms": {
            kind: {conn: {name: [s and round(s["first_event"], 3) for s in values] for name, values in paths.items()}
                   for conn, paths in conns.items()}
            for kind, conns in first.items()
        },
        "ratios": ratios,
        "targets": {
            "throughput_ratio_min": TARGET_THROUGHPUT_RATIO,
            "added_p50_ms_max": TARGET_ADDED_P50_MS,
            "first_event_extra_ms_max": TARGET_TTFE_EXTRA_MS,
            "record_vs_bare_cpu_max": TARGET_CPU_RATIO,
        },
        "met": met,
        "rounds": rounds,
    }
    path = write_result(NAME, data)
    chart(data, path.with_suffix(".png"))
    return path


def chart(data: dict, path: Path) -> Path:
    """Throughput on every path, and the proxy's CPU per exchange against bare mitmdump's."""
    medians, ratios = data["medians"], data["ratios"]
    proxied = [name for name in ALL_PATHS if "proxy_cpu_us_per_exchange" in medians[name]]
    return bar_panels(path, "tools/call echo: direct, bare mitmdump, mitmdump + mcpbench addon, mcpbench record", [
        Panel("calls/s (SSE answers, then json_*: JSON answers)", list(ALL_PATHS),
              [medians[name]["calls_per_s"] for name in ALL_PATHS], "calls/s"),
        Panel(f"proxy CPU per exchange (lower is better); record vs bare: {ratios['record_vs_bare_cpu_sse']:.2f}x SSE, "
              f"{ratios['record_vs_bare_cpu_json']:.2f}x JSON", proxied,
              [medians[name]["proxy_cpu_us_per_exchange"] for name in proxied], "µs per exchange"),
    ])
