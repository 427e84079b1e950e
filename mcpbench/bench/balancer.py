"""`mcpbench bench balancer`: what the built-in balancer costs against bare mitmdump and HAProxy.

Three reference-server instances (Streamable HTTP, stateful, JSON answers, so no path streams and
every path does the same work per exchange) and, in front of them, in one run:

- `direct`: the client talks to instance s1 (the floor);
- `bare`: `mitmdump` in reverse mode to s1, no addon;
- `builtin`: the lab's balancer process as `lab up` runs it (`python -m mcpbench.proxies.balancer`:
  `proxies/balancer.py` in mitmproxy through `mcpbench.proxies.host`, without mitmdump's idle addons),
  policy `sticky` over the three instances (sticky, so that sessions hold; its `request` hook reads
  the session header and the responses teach it);
- `haproxy`: HAProxy with the sticky stick-table configuration (skipped when not on PATH).

For each path: sequential calls on one session (latency p50/p99) and a few concurrent sessions
(calls/s), in turns, round after round, medians over rounds; and the balancer process's CPU time
per exchange (psutil), which a busy machine disturbs less than wall-clock figures.

Targets (issue 11): built-in CPU per exchange <= bare mitmdump's + 10 %; p50 added <= 0.5 ms over
bare mitmdump.
"""

import contextlib
import os
import statistics
import tempfile
from pathlib import Path

from mcpbench.bench.common import save_figure, write_result
from mcpbench.bench.proxy import measure_rounds
from mcpbench.lab.peers.servers import HOST, start_listening
from mcpbench.system.processes import free_port, stop_process
from mcpbench.lab.topology.cluster import haproxy_path, mitmdump_path, running_balancer, running_instances

NAME = "balancer"
INSTANCES = 3
# Same sizes as `bench proxy`: about a minute per round set on 2 cores; --quick is a smoke run.
FULL = {"rounds": 3, "latency_calls": 300, "sessions": 4, "calls_per_session": 200}
QUICK = {"rounds": 1, "latency_calls": 30, "sessions": 2, "calls_per_session": 20}
TARGET_CPU_RATIO = 1.10
TARGET_ADDED_P50_MS = 0.5


def run(quick: bool = False) -> Path:
    """Measure direct, bare mitmdump, the built-in balancer and HAProxy; write results/bench/balancer.json."""
    config = QUICK if quick else FULL
    paths = ["direct", "bare", "builtin"] + (["haproxy"] if haproxy_path() else [])
    with tempfile.TemporaryDirectory(prefix="mcpbench-bench-balancer-") as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        servers = stack.enter_context(running_instances(INSTANCES, "streamable-http", json_response=True))
        ports = {"direct": servers[0].port}
        procs = {}
        bare_port = free_port()
        with open(folder / "bare.log", "wb") as log:
            bare = start_listening(
                [mitmdump_path(), "-q", "--mode", f"reverse:http://{HOST}:{servers[0].port}", "--listen-host", HOST, "-p", str(bare_port)],
                bare_port, stdout=log, stderr=log,
            )
        stack.callback(stop_process, bare)
        ports["bare"], procs["bare"] = bare_port, bare
        for kind in paths[2:]:
            front = stack.enter_context(running_balancer(kind, "sticky", "streamable-http", servers, folder=folder))
            ports[kind], procs[kind] = front.port, front.proc
        rounds = measure_rounds({name: ports[name] for name in paths}, procs, config, "balancer_cpu_us_per_exchange")
    medians = {name: {key: statistics.median(r[name][key] for r in rounds) for key in rounds[0][name]} for name in paths}
    ratios = {
        "builtin_vs_bare_cpu": medians["builtin"]["balancer_cpu_us_per_exchange"] / medians["bare"]["balancer_cpu_us_per_exchange"],
        "builtin_minus_bare_p50_ms": medians["builtin"]["p50_ms"] - medians["bare"]["p50_ms"],
        "builtin_vs_bare_throughput": medians["builtin"]["calls_per_s"] / medians["bare"]["calls_per_s"],
    }
    if "haproxy" in medians:
        ratios["haproxy_vs_builtin_throughput"] = medians["haproxy"]["calls_per_s"] / medians["builtin"]["calls_per_s"]
    data = {
        "quick": quick,
        "workload": {
            "instances": f"{INSTANCES} x mcpbench lab serve --transport streamable-http --json-response (stateful)",
            "call": "tools/call echo",
            "policy": "sticky (builtin and haproxy); bare mitmdump and direct go to instance s1",
            **config,
        },
        "note": "measured on a shared, busy 2-core machine: wall-clock figures are noisy; CPU per exchange less so",
        "load_average_after": os.getloadavg(),
        "medians": medians,
        "ratios": ratios,
        "targets": {"cpu_ratio_max": TARGET_CPU_RATIO, "added_p50_ms_max": TARGET_ADDED_P50_MS},
        "met": {
            "cpu": ratios["builtin_vs_bare_cpu"] <= TARGET_CPU_RATIO,
            "added_p50": ratios["builtin_minus_bare_p50_ms"] <= TARGET_ADDED_P50_MS,
        },
        "rounds": rounds,
    }
    path = write_result(NAME, data)
    chart(medians, path.with_suffix(".png"))
    return path


def chart(medians: dict, path: Path) -> Path:
    """Two panels: calls/s per path, and the balancer process's CPU per exchange."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(medians)
    proxies = [n for n in names if "balancer_cpu_us_per_exchange" in medians[n]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    bars = left.bar(names, [medians[n]["calls_per_s"] for n in names], color="#4c72b0")
    left.bar_label(bars, fmt="%.0f")
    left.set_ylabel("calls/s (4 concurrent sessions)")
    left.set_title("throughput")
    bars = right.bar(proxies, [medians[n]["balancer_cpu_us_per_exchange"] for n in proxies], color="#dd8452")
    right.bar_label(bars, fmt="%.0f")
    right.set_ylabel("balancer CPU per exchange (µs)")
    right.set_title("balancer CPU")
    fig.suptitle("tools/call echo, 3 instances: direct, bare mitmdump, built-in balancer, HAProxy (medians)")
    return save_figure(fig, path)
