"""`mcpbench bench fuzz`: cases a second `mcpbench fuzz` sends the reference server, on each transport and in each era.

The fuzzer (`mcpbench/fuzz/run.py`) runs as the command runs it, bounded by a number of cases,
against a fresh reference server per transport and era; `slow` is left out (it sleeps by design).
The figure is calls per second over the whole run (handshake, discovery and judging included), and
the findings, which should be none.
"""

import sys
from pathlib import Path

from mcpbench.bench.common import Panel, bar_panels, write_result
from mcpbench.lab.peers.servers import reference_server
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import LATEST_HANDSHAKE, V2026_07_28
from mcpbench.system.target import parse_target

NAME = "fuzz"
FULL = {"cases": 600, "seed": 1}
QUICK = {"cases": 120, "seed": 1}
BENCHED = (STDIO, STREAMABLE_HTTP, LEGACY_SSE)  # the transports, in the chart's order
ERAS = {"handshake": LATEST_HANDSHAKE, "2026-07-28": V2026_07_28}


def _target(transport: str, server) -> str:
    if transport == STDIO:
        import shlex

        return "stdio:" + shlex.join(server)
    return ("sse+" if transport == LEGACY_SSE else "") + server.url


def measure(transport: str, config: dict, version: str = LATEST_HANDSHAKE) -> dict:
    from mcpbench.fuzz.run import Fuzzer, FuzzSettings

    with reference_server(transport) as server:
        settings = FuzzSettings(seed=config["seed"], cases=config["cases"], skip=("slow",), protocol=False, versions=(version,))
        run = Fuzzer(parse_target(_target(transport, server)), settings).execute()
    return {"calls": run.calls, "seconds": run.seconds, "cases_per_second": run.calls / run.seconds if run.seconds else 0.0,
            "findings": [f.to_json() for f in run.findings], "tools": [tool.name for tool in run.tools]}


def run(quick: bool = False) -> Path:
    """Fuzz the reference server on each transport; write results/bench/fuzz.json and its chart."""
    import os

    config = QUICK if quick else FULL
    results: dict[str, dict] = {era: {} for era in ERAS}
    for era, version in ERAS.items():
        for transport in BENCHED:
            one = results[era][transport] = measure(transport, config, version)
            one["load_1m"] = load = os.getloadavg()[0]
            print(f"mcpbench bench fuzz: {transport}, {era}: {one['cases_per_second']:.1f} cases/s "
                  f"({one['calls']} calls, {len(one['findings'])} findings; load {load:.1f})", file=sys.stderr, flush=True)
    path = write_result(NAME, {"config": config, "transports": results["handshake"], "eras": results, "quick": quick})
    bar_panels(path.with_suffix(".png"), "mcpbench fuzz against the reference server: cases per second",
               [Panel(era, list(runs), [r["cases_per_second"] for r in runs.values()], "cases/s") for era, runs in results.items()])
    return path
