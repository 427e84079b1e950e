"""`mcpbench bench fuzz`: cases a second `mcpbench fuzz` sends the reference server, on each transport.

The fuzzer (`mcpbench/fuzz/run.py`) runs as the command runs it, bounded by a number of cases,
against a fresh reference server per transport; `slow` is left out (it sleeps by design). The
figure is calls per second over the whole run (handshake, discovery and judging included), and
the findings, which should be none.
"""

import sys
from pathlib import Path

from mcpbench.bench.common import Panel, bar_panels, write_result
from mcpbench.lab.peers.servers import reference_server
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.target import parse_target

NAME = "fuzz"
FULL = {"cases": 600, "seed": 1}
QUICK = {"cases": 120, "seed": 1}
TRANSPORTS = (STDIO, STREAMABLE_HTTP, LEGACY_SSE)


def _target(transport: str, server) -> str:
    if transport == STDIO:
        import shlex

        return "stdio:" + shlex.join(server)
    return ("sse+" if transport == LEGACY_SSE else "") + server.url


def measure(transport: str, config: dict) -> dict:
    from mcpbench.fuzz.run import Fuzzer, Settings

    with reference_server(transport) as server:
        settings = Settings(seed=config["seed"], cases=config["cases"], skip=("slow",), protocol=False)
        run = Fuzzer(parse_target(_target(transport, server)), settings).execute()
    return {"calls": run.calls, "seconds": run.seconds, "cases_per_second": run.calls / run.seconds if run.seconds else 0.0,
            "findings": [f.to_json() for f in run.findings], "tools": [tool.name for tool in run.tools]}


def run(quick: bool = False) -> Path:
    """Fuzz the reference server on each transport; write results/bench/fuzz.json and its chart."""
    import os

    config = QUICK if quick else FULL
    results = {}
    for transport in TRANSPORTS:
        results[transport] = measure(transport, config)
        load = os.getloadavg()[0]
        results[transport]["load_1m"] = load
        print(f"mcpbench bench fuzz: {transport}: {results[transport]['cases_per_second']:.1f} cases/s "
              f"({results[transport]['calls']} calls, {len(results[transport]['findings'])} findings; load {load:.1f})",
              file=sys.stderr, flush=True)
    path = write_result(NAME, {"config": config, "transports": results, "quick": quick})
    bar_panels(path.with_suffix(".png"), "mcpbench fuzz against the reference server: cases per second",
               [Panel("", list(results), [r["cases_per_second"] for r in results.values()], "cases/s")])
    return path
