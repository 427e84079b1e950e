"""Benchmark: how much load one load-generator core produces (`mcpbench bench loadgen`).

1. CPU time per call of `StreamableHttpUser` vs a raw `FastHttpUser` posting the same bytes to
   the same fast server, in the same benchmark run (target: ≤ 1.25×).
2. calls/s with 2 Locust workers vs 1, against a fast server that is not the bottleneck
   (target: ≥ 1.7×; needs cores for 2 workers plus the server).
3. calls per CPU-second of the load process vs the official SDK client in a loop, both against
   the reference server (aim: ≥ 3×).

The fast server is a tiny gevent HTTP server in its own process that answers every POST with a
one-event SSE body carrying the request's id (`python -m mcpbench.bench.loadgen serve PORT`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

from mcpbench.bench.common import Panel, bar_panels, machine, write_result
from mcpbench.lab.peers.servers import serve_argv, start_listening
from mcpbench.system.processes import free_port, stop_process
from mcpbench.protocol.versions import LATEST_HANDSHAKE

BENCH_LOCUSTFILE = Path(__file__).with_name("loadgen_locustfile.py")
ROOT = Path(__file__).resolve().parents[2]
# Seconds of load per measurement (full / quick).
DURATION, QUICK_DURATION = 10, 3
USERS = 20


# --- the fast server ----------------------------------------------------------------------------

_ID = re.compile(rb'"id"\s*:\s*("[^"]*"|-?\d+)')
_LENGTH = re.compile(rb"(?i)\r\ncontent-length:\s*(\d+)")
INITIALIZE_RESULT = (
    b'{"protocolVersion":"' + LATEST_HANDSHAKE.encode() + b'","capabilities":{"tools":{}},"serverInfo":{"name":"fast","version":"0"}}'
)


def _answer(body: bytes, method: bytes) -> bytes:
    if method == b"DELETE":
        return b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
    match = _ID.search(body)
    if match is None:  # a notification
        return b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
    rid = match.group(1)
    extra = b""
    if b'"initialize"' in body:
        result = INITIALIZE_RESULT
        extra = b"mcp-session-id: fast0001\r\n"
    else:
        result = b'{"content":[{"type":"text","text":"hello"}],"isError":false}'
    data = b'event: message\r\ndata: {"jsonrpc":"2.0","id":' + rid + b',"result":' + result + b"}\r\n\r\n"
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + extra
        + b"content-length: " + str(len(data)).encode() + b"\r\n\r\n" + data
    )


def serve(port: int) -> None:
    """Run the fast server on 127.0.0.1:`port` until killed (gevent, keep-alive, no parsing beyond need)."""
    from gevent.server import StreamServer

    def handle(sock, _addr) -> None:
        try:
            _handle(sock)
        except OSError:
            pass  # a client that goes away mid-request is normal at the end of a run

    def _handle(sock) -> None:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            match = _LENGTH.search(head)
            need = int(match.group(1)) if match else 0
            while len(buf) < need:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            body, buf = buf[:need], buf[need:]
            sock.sendall(_answer(body, head.split(b" ", 1)[0]))

    StreamServer(("127.0.0.1", port), handle, backlog=1024).serve_forever()


# --- helpers ------------------------------------------------------------------------------------


def _locust(kind: str, url: str, duration: int, users: int, workers: int = 0) -> dict:
    """Run the bench locustfile; returns summed calls, failures, CPU seconds and wall seconds of the load processes."""
    with tempfile.TemporaryDirectory(prefix="mcpbench-loadgen-") as tmp:
        env = dict(os.environ, MCPBENCH_BENCH_USER=kind, MCPBENCH_BENCH_URL=url, MCPBENCH_BENCH_OUT=tmp, PYTHONPATH=str(ROOT))
        base = [sys.executable, "-m", "locust", "-f", str(BENCH_LOCUSTFILE), "--loglevel", "ERROR"]
        run = ["--headless", "--only-summary", "-u", str(users), "-r", str(users * 10), "--run-time", f"{duration}s"]
        procs = []
        try:
            if workers:
                port = free_port()
                procs.append(subprocess.Popen(
                    base + run + ["--master", "--expect-workers", str(workers), "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                ))
                for _ in range(workers):
                    procs.append(subprocess.Popen(
                        base + ["--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    ))
            else:
                procs.append(subprocess.Popen(base + run, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            procs[0].wait(duration + 120)
            for proc in procs[1:]:
                proc.wait(30)
        finally:
            for proc in procs:
                stop_process(proc)
        parts = [orjson.loads(p.read_bytes()) for p in Path(tmp).glob("*.json")]
    if not parts:
        raise RuntimeError(f"locust run ({kind}, workers={workers}) reported nothing")
    return {
        "calls": sum(p["calls"] for p in parts), "failures": sum(p["failures"] for p in parts),
        "cpu_s": sum(p["cpu_s"] for p in parts), "wall_s": max(p["wall_s"] for p in parts), "processes": len(parts),
    }


SDK_LOOP = """
import sys, time, anyio
from mcp import Client
async def main(url, seconds):
    async with Client(url, mode="legacy") as client:
        await client.call_tool("echo", {"text": "hello"})
        calls, cpu0, t0 = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            await client.call_tool("echo", {"text": "hello"})
            calls += 1
        print(calls, time.process_time() - cpu0, time.perf_counter() - t0)
anyio.run(main, sys.argv[1], float(sys.argv[2]))
"""


def _sdk_loop(url: str, duration: int) -> dict:
    out = subprocess.run([sys.executable, "-c", SDK_LOOP, url, str(duration)], cwd=ROOT, capture_output=True, text=True, timeout=duration + 120, check=True)
    calls, cpu, wall = out.stdout.split()
    return {"calls": int(calls), "cpu_s": float(cpu), "wall_s": float(wall)}


# --- the benchmark ------------------------------------------------------------------------------


def run(quick: bool = False) -> Path:
    duration = QUICK_DURATION if quick else DURATION
    result: dict = {"duration_s": duration, "users": USERS}

    port = free_port()
    fast = start_listening([sys.executable, "-m", "mcpbench.bench.loadgen", "serve", str(port)], port, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        raw = _locust("raw", url, duration, USERS)
        mcp = _locust("mcp", url, duration, USERS)
        one = _locust("mcp", url, duration, USERS, workers=1)
        two = _locust("mcp", url, duration, USERS, workers=2)
    finally:
        stop_process(fast)
    raw_cpu = raw["cpu_s"] / max(raw["calls"], 1)
    mcp_cpu = mcp["cpu_s"] / max(mcp["calls"], 1)
    result["cpu_per_call"] = {
        "raw_fasthttpuser_us": raw_cpu * 1e6, "streamable_http_user_us": mcp_cpu * 1e6,
        "ratio": mcp_cpu / raw_cpu, "target_max_ratio": 1.25, "runs": {"raw": raw, "mcp": mcp},
    }
    result["workers"] = {
        "one_worker_calls_per_s": one["calls"] / one["wall_s"], "two_workers_calls_per_s": two["calls"] / two["wall_s"],
        "ratio": (two["calls"] / two["wall_s"]) / (one["calls"] / one["wall_s"]), "target_min_ratio": 1.7,
        "cores": os.cpu_count(), "runs": {"one": one, "two": two},
    }


    ref_port = free_port()
    ref = start_listening(serve_argv("streamable-http", port=ref_port), ref_port, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ref_url = f"http://127.0.0.1:{ref_port}/mcp"
    try:
        sdk = _sdk_loop(ref_url, duration)
        ours = _locust("mcp", ref_url, duration, 1)
    finally:
        stop_process(ref)
    sdk_per_core = sdk["calls"] / sdk["cpu_s"]
    ours_per_core = ours["calls"] / ours["cpu_s"]
    result["per_core_vs_sdk"] = {
        "sdk_calls_per_cpu_s": sdk_per_core, "streamable_http_user_calls_per_cpu_s": ours_per_core,
        "ratio": ours_per_core / sdk_per_core, "target_min_ratio": 3.0, "runs": {"sdk": sdk, "ours": ours},
        "note": "one client, one session, sequential calls against the reference server (SSE answers)",
    }
    path = write_result("loadgen", result)
    chart(result, path.with_suffix(".png"))
    return path


def chart(result: dict, path: Path) -> Path:
    """The three comparisons side by side, each in its own unit."""
    cpu, workers, sdk = result["cpu_per_call"], result["workers"], result["per_core_vs_sdk"]
    return bar_panels(path, f"load generator, {result['users']} users, {result['duration_s']} s per run", [
        Panel(f"CPU per call (lower is better): {cpu['ratio']:.2f}x", ["raw FastHttpUser", "MCP user"],
              [cpu["raw_fasthttpuser_us"], cpu["streamable_http_user_us"]], "µs"),
        Panel(f"Locust workers: {workers['ratio']:.2f}x on {workers['cores']} cores", ["1 worker", "2 workers"],
              [workers["one_worker_calls_per_s"], workers["two_workers_calls_per_s"]], "calls/s"),
        Panel(f"vs the SDK client, one session: {sdk['ratio']:.1f}x", ["SDK client", "MCP user"],
              [sdk["sdk_calls_per_cpu_s"], sdk["streamable_http_user_calls_per_cpu_s"]], "calls per CPU second"),
    ])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        print(run(quick="--quick" in sys.argv), machine())
