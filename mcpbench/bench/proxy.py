"""`mcpbench bench proxy`: what recording through mitmproxy costs.

One run measures three paths to the same reference server (Streamable HTTP, SSE answers,
handshake era, `tools/call echo`):

- `direct`: the client talks to the server;
- `bare`: through `mitmdump` in reverse mode without any addon;
- `stream`: through `mitmdump` with a pass-through stream callable on SSE answers and nothing else
  (mitmproxy's streaming path alone);
- `addon`: through `mitmdump` with the mcpbench addon recording a trace.

For each path: the latency of sequential calls on one session (p50/p99) and the throughput of a
few concurrent sessions (calls/s). Paths are measured in turns, round after round, and the
figures reported are medians over rounds, so a slow moment of the machine hits every path alike.
Then the time to the first SSE event: a `slow` call's first progress notification on its POST
stream, and a legacy `GET /sse` stream's `endpoint` event, direct and through both proxies (bare
mitmdump buffers SSE: the first event arrives with the last, or never for `/sse`).

Targets (issue 3): the addon keeps >= 90 % of bare mitmdump's throughput, adds <= 0.5 ms p50, and
the first SSE event through it arrives <= 5 ms after the direct one.

Wall-clock figures on a shared 2-core machine are noisy, so the run also reports the CPU time the
mitmdump process spends per exchange (`proxy_cpu_us_per_exchange`, from psutil): the addon's cost
against bare mitmdump without the scheduling noise. Part of that cost is mitmproxy's own streaming
path, which the addon must switch on for every SSE answer (bare mitmdump buffers them: see
`first_event_ms`), so it is not a like-for-like comparison for SSE answers.

The load is a plain `http.client` loop speaking the protocol through the protocol core.
"""

import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mcpbench.bench.common import bar_chart, summary, write_result
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.client import ClientProtocol
from mcpbench.protocol.http import SESSION_ID, is_event_stream, post_headers
from mcpbench.protocol.sse import SseEvent, SseParser

HOST = "127.0.0.1"
NAME = "proxy"
PATHS = ("direct", "bare", "stream", "addon")

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
FULL = {"rounds": 3, "latency_calls": 300, "sessions": 4, "calls_per_session": 200, "ttfe_samples": 10}
QUICK = {"rounds": 1, "latency_calls": 30, "sessions": 2, "calls_per_session": 20, "ttfe_samples": 2}

# Targets from issue 3.
TARGET_THROUGHPUT_RATIO = 0.90
TARGET_ADDED_P50_MS = 0.5
TARGET_TTFE_EXTRA_MS = 5.0

# `slow` with 4 steps over 0.2 s: the first progress event comes after ~50 ms, the answer after
# ~200 ms, so a buffering proxy shows as ~150 ms extra.
SLOW_ARGS = {"seconds": 0.2, "steps": 4}
# How long to wait for a first event before calling it lost (bare mitmdump never delivers `/sse`).
TTFE_TIMEOUT = 2.0
STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0


def _bin(name: str) -> str:
    """An executable next to this interpreter (the venv's mitmdump), else from PATH."""
    candidate = Path(sys.executable).with_name(name)
    return str(candidate) if candidate.exists() else name


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = STARTUP_TIMEOUT) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before port {port} opened")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {HOST}:{port} after {timeout:g} s") from None
        time.sleep(0.02)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


def _start(argv: list[str], port: int, log: Path) -> subprocess.Popen:
    with open(log, "wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait_port(port, proc)
    except BaseException:
        _stop(proc)
        raise
    return proc


class _Client:
    """One Streamable HTTP session over one keep-alive connection (blocking, for load)."""

    def __init__(self, port: int, path: str = "/mcp") -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)
        self.path = path
        self.protocol = ClientProtocol()
        self.session_id: str | None = None

    def exchange(self, message: jsonrpc.Message) -> list[jsonrpc.Message]:
        body, _ = self.protocol.send(message)
        headers = post_headers(message, version=self.protocol.session.version, session_id=self.session_id)
        self.conn.request("POST", self.path, body, headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status >= 400:
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
        self.session_id = response.getheader(SESSION_ID) or self.session_id
        if not data:
            return []
        if is_event_stream(response.getheader("content-type")):
            parser = SseParser()
            events = parser.feed(data) + parser.feed(b"")
            return [jsonrpc.decode(e.data) for e in events if isinstance(e, SseEvent) and e.data]
        return [jsonrpc.decode(data)]

    def start(self) -> None:
        self.exchange(self.protocol.initialize())
        self.exchange(self.protocol.initialized())

    def echo(self) -> None:
        answers = self.exchange(self.protocol.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
        if not answers or not isinstance(answers[-1], jsonrpc.Response):
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


def _first_event(port: int, method: str, path: str, body: bytes | None, headers: dict) -> float | None:
    """Milliseconds from sending a request to the first complete SSE event; None if none came in time."""
    conn = http.client.HTTPConnection(HOST, port, timeout=TTFE_TIMEOUT)
    try:
        started = time.perf_counter()
        conn.request(method, path, body, headers)
        response = conn.getresponse()
        parser = SseParser()
        while True:
            chunk = response.read1(65536)
            if not chunk:
                return None
            if any(isinstance(e, SseEvent) for e in parser.feed(chunk)):
                return (time.perf_counter() - started) * 1000
    except TimeoutError:
        return None
    finally:
        conn.close()


def _ttfe_slow(port: int) -> float | None:
    client = _Client(port)
    try:
        client.start()
        request = client.protocol.request(
            "tools/call", {"name": "slow", "arguments": SLOW_ARGS, "_meta": {"progressToken": "bench"}}
        )
        body, _ = client.protocol.send(request)
        headers = post_headers(request, version=client.protocol.session.version, session_id=client.session_id)
        return _first_event(port, "POST", "/mcp", body, headers)
    finally:
        client.close()


def _ttfe_legacy(port: int) -> float | None:
    return _first_event(port, "GET", "/sse", None, {"accept": "text/event-stream"})


def _cpu(proc: subprocess.Popen | None) -> float:
    """CPU seconds (user + system) a process has used so far."""
    if proc is None:
        return 0.0
    import psutil  # a dependency of locust

    times = psutil.Process(proc.pid).cpu_times()
    return times.user + times.system


def _diff(figures: dict, a: str, b: str) -> float | None:
    return figures[a] - figures[b] if figures[a] is not None and figures[b] is not None else None


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
            ports["server"] = _free_port()
            procs.append(_start(
                [python, "-m", "mcpbench", "lab", "serve", "--transport", "streamable-http", "--host", HOST, "--port", str(ports["server"])],
                ports["server"], tmpdir / "server.log",
            ))
            ports["legacy"] = _free_port()
            procs.append(_start(
                [python, "-m", "mcpbench", "lab", "serve", "--transport", "sse", "--host", HOST, "--port", str(ports["legacy"])],
                ports["legacy"], tmpdir / "legacy.log",
            ))
            stream_only = tmpdir / "stream_only.py"
            stream_only.write_text(STREAM_ONLY_ADDON)
            proxy_procs = {}
            for upstream in ("server", "legacy"):
                for kind in ("bare", "stream", "addon"):
                    port = ports[f"{kind}-{upstream}"] = _free_port()
                    argv = [mitmdump, "-q", "--mode", f"reverse:http://{HOST}:{ports[upstream]}", "--listen-host", HOST, "-p", str(port)]
                    if kind == "stream":
                        argv += ["-s", str(stream_only)]
                    if kind == "addon":
                        argv += ["-s", addon_path, "--set", f"mcpbench_out={tmpdir / f'{upstream}.jsonl'}"]
                    procs.append(_start(argv, port, tmpdir / f"{kind}-{upstream}.log"))
                    if upstream == "server":
                        proxy_procs[kind] = procs[-1]
            targets = {name: ports["server"] if name == "direct" else ports[f"{name}-server"] for name in PATHS}
            legacy_targets = {name: ports["legacy"] if name == "direct" else ports[f"{name}-legacy"] for name in PATHS}
            exchanges = 3 + config["latency_calls"] + config["sessions"] * (2 + config["calls_per_session"])
            rounds = []
            for number in range(config["rounds"]):
                figures = {}
                for name, port in targets.items():
                    cpu = _cpu(proxy_procs.get(name))
                    samples = _latency(port, config["latency_calls"])
                    rate = _throughput(port, config["sessions"], config["calls_per_session"])
                    figures[name] = {"calls_per_s": rate, **{f"{k}_ms": v for k, v in summary(samples).items() if k != "count"}}
                    if name in proxy_procs:
                        figures[name]["proxy_cpu_us_per_exchange"] = (_cpu(proxy_procs[name]) - cpu) / exchanges * 1e6
                rounds.append(figures)
                print(f"mcpbench: round {number + 1}/{config['rounds']}: "
                      + ", ".join(f"{n} {f['calls_per_s']:.0f}/s p50 {f['p50_ms']:.2f} ms" for n, f in figures.items()),
                      file=sys.stderr, flush=True)
            ttfe = {name: [_ttfe_slow(port) for _ in range(config["ttfe_samples"])] for name, port in targets.items()}
            legacy = {name: [_ttfe_legacy(port) for _ in range(config["ttfe_samples"])] for name, port in legacy_targets.items()}
            procs_to_stop = procs  # the addon's trace is complete once its mitmdump has stopped
            for proc in reversed(procs_to_stop):
                _stop(proc)
            trace_events = sum(1 for _ in open(tmpdir / "server.jsonl", "rb")) if (tmpdir / "server.jsonl").exists() else 0
        finally:
            for proc in reversed(procs):
                _stop(proc)

    medians = {
        name: {key: statistics.median(r[name][key] for r in rounds) for key in rounds[0][name]} for name in PATHS
    }
    load = os.getloadavg()
    ttfe_median = {name: _median(values) for name, values in ttfe.items()}
    legacy_median = {name: _median(values) for name, values in legacy.items()}
    ratios = {
        "addon_vs_bare_throughput": medians["addon"]["calls_per_s"] / medians["bare"]["calls_per_s"],
        "addon_cpu_us_per_exchange": medians["addon"]["proxy_cpu_us_per_exchange"] - medians["bare"]["proxy_cpu_us_per_exchange"],
        "bare_vs_addon_cpu": medians["bare"]["proxy_cpu_us_per_exchange"] / medians["addon"]["proxy_cpu_us_per_exchange"],
        "addon_minus_bare_p50_ms": medians["addon"]["p50_ms"] - medians["bare"]["p50_ms"],
        "bare_minus_direct_p50_ms": medians["bare"]["p50_ms"] - medians["direct"]["p50_ms"],
        "addon_vs_stream_throughput": medians["addon"]["calls_per_s"] / medians["stream"]["calls_per_s"],
        "addon_minus_stream_p50_ms": medians["addon"]["p50_ms"] - medians["stream"]["p50_ms"],
        "addon_minus_stream_cpu_us_per_exchange": medians["addon"]["proxy_cpu_us_per_exchange"] - medians["stream"]["proxy_cpu_us_per_exchange"],
        "ttfe_addon_minus_direct_ms": _diff(ttfe_median, "addon", "direct"),
        "ttfe_addon_minus_stream_ms": _diff(ttfe_median, "addon", "stream"),
        "legacy_endpoint_addon_minus_direct_ms": _diff(legacy_median, "addon", "direct"),
        "legacy_endpoint_addon_minus_stream_ms": _diff(legacy_median, "addon", "stream"),
    }
    met = {
        "throughput": ratios["addon_vs_bare_throughput"] >= TARGET_THROUGHPUT_RATIO,
        "added_p50": ratios["addon_minus_bare_p50_ms"] <= TARGET_ADDED_P50_MS,
        "first_event": ratios["ttfe_addon_minus_direct_ms"] is not None
        and ratios["ttfe_addon_minus_direct_ms"] <= TARGET_TTFE_EXTRA_MS,
    }
    data = {
        "quick": quick,
        "workload": {
            "server": "mcpbench lab serve --transport streamable-http (SSE answers, handshake era)",
            "call": "tools/call echo",
            **config,
            "slow_args": SLOW_ARGS,
            "mitmdump_flags": "-q --mode reverse:… (stream: -s stream_only.py; addon: -s addon.py --set mcpbench_out=…)",
            "addon_trace_events": trace_events,
        },
        "load_average_after": load,
        "medians": medians,
        "first_event_ms": {"slow_progress": ttfe_median, "legacy_endpoint": legacy_median},
        "first_event_samples_ms": {"slow_progress": ttfe, "legacy_endpoint": legacy},
        "ratios": ratios,
        "targets": {
            "throughput_ratio_min": TARGET_THROUGHPUT_RATIO,
            "added_p50_ms_max": TARGET_ADDED_P50_MS,
            "first_event_extra_ms_max": TARGET_TTFE_EXTRA_MS,
        },
        "met": met,
        "rounds": rounds,
    }
    path = write_result(NAME, data)
    bar_chart(
        path.with_suffix(".png"),
        "tools/call echo throughput: direct vs mitmdump vs mitmdump + mcpbench addon",
        list(PATHS),
        [medians[name]["calls_per_s"] for name in PATHS],
        "calls/s",
    )
    return path
