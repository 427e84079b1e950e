"""`mcpbench bench telemetry`: what sending spans and metrics costs the recorders, and a big export.

1. The tee, with `--otlp` on against off, in the same run and with `bench tee`'s harness
   (`rotations`: sequential round trips to the echo server, servers taking turns every 100 round
   trips, fresh processes per rotation): direct against the tee, direct against the tee with
   `--otlp`, and the two tees against each other. The added p99 is each tee's p99 minus direct's
   from its own pairing.
2. `mcpbench record`, with `--otlp` on against off (JSON answers, `bench proxy`'s client and
   rounds): the record process's CPU per exchange, and with `--otlp` its companion's (the process
   that follows the trace and sends the spans and metrics).
3. The time to export a synthetic 1,000,000-event stdio trace (`bench analysis`'s) over OTLP.

Every OTLP endpoint here is a null receiver in a process of its own (`otlp_sink.py`): it takes each
request and answers 200, so the figures are the sender's cost, not a collector's.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpbench.bench.analysis import EVENTS, QUICK_EVENTS, synthetic_trace
from mcpbench.bench.common import write_result
from mcpbench.bench.proxy import FULL, HOST, QUICK, _start, measure_rounds
from mcpbench.bench.tee import ECHO, ROTATIONS, paired_added_p50, rotations, tee_argv
from mcpbench.companions.options import TelemetryOptions
from mcpbench.system.processes import free_port, stop_process
from mcpbench.measures.stats import summary

SINK = [sys.executable, "-m", "mcpbench.bench.otlp_sink"]


def start_sink() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(SINK, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def stop_sink(proc: subprocess.Popen) -> tuple[int, int]:
    """(requests, bytes) the sink took."""
    out, _ = proc.communicate("", timeout=30)
    requests, size = out.split()
    return int(requests), int(size)


def tee_figures(url: str, count: int, times: int, folder: Path) -> dict:
    off, on = tee_argv(folder / "off.jsonl"), tee_argv(folder / "on.jsonl")[:-1] + ["--otlp", url, "--"]
    plain = rotations({"direct": ECHO, "tee": off + ECHO}, count, times)
    otlp = rotations({"direct": ECHO, "tee otlp": on + ECHO}, count, times)
    both = rotations({"tee": off + ECHO, "tee otlp": on + ECHO}, count, times)
    figures = {name: summary(sum(turns, [])) for name, turns in (("direct", plain["direct"]), ("tee", plain["tee"]),
                                                                ("direct_2", otlp["direct"]), ("tee_otlp", otlp["tee otlp"]))}
    return {
        "us": figures,
        "added_p99_us": {"off": figures["tee"]["p99"] - figures["direct"]["p99"], "on": figures["tee_otlp"]["p99"] - figures["direct_2"]["p99"]},
        "added_p50_us": {"off": paired_added_p50(plain["direct"], plain["tee"]), "on": paired_added_p50(otlp["direct"], otlp["tee otlp"])},
        "on_vs_off": {
            "paired_p50_us": paired_added_p50(both["tee"], both["tee otlp"]),
            "p99_us": summary(sum(both["tee otlp"], []))["p99"] - summary(sum(both["tee"], []))["p99"],
        },
    }


def record_figures(url: str, config: dict, folder: Path) -> dict:
    python = sys.executable
    procs: list[subprocess.Popen] = []
    try:
        server = free_port()
        procs.append(_start([python, "-m", "mcpbench", "lab", "serve", "--transport", "streamable-http", "--json-response",
                             "--host", HOST, "--port", str(server)], server, folder / "server.log"))
        ports, recorders = {}, {}
        for name, extra in (("record", []), ("record_otlp", ["--otlp", url])):
            ports[name] = free_port()
            recorders[name] = _start([python, "-m", "mcpbench", "record", "--upstream", f"http://{HOST}:{server}/mcp",
                                      "--listen", f"{HOST}:{ports[name]}", "--out", str(folder / f"{name}.jsonl"), *extra],
                                     ports[name], folder / f"{name}.log")
            procs.append(recorders[name])
        import psutil  # a dependency of locust

        time.sleep(1.0)  # the companion starts once record listens: let it load before it is measured
        companion = psutil.Process(recorders["record_otlp"].pid).children()[0]
        companion_cpu = sum(companion.cpu_times()[:2])
        rounds = measure_rounds(ports, recorders, config, "cpu_us_per_exchange")
        companion_cpu = sum(companion.cpu_times()[:2]) - companion_cpu
        exchanges = config["rounds"] * (3 + config["latency_calls"] + config["sessions"] * (2 + config["calls_per_session"]))
    finally:
        for proc in reversed(procs):
            stop_process(proc)
    medians = {name: {key: statistics.median(r[name][key] for r in rounds) for key in rounds[0][name]} for name in ports}
    return {
        "medians": medians,
        "cpu_us_per_exchange": {
            "off": medians["record"]["cpu_us_per_exchange"],
            "on": medians["record_otlp"]["cpu_us_per_exchange"],
            "on_companion": companion_cpu / exchanges * 1e6,
        },
        "rounds": rounds,
    }


def export_figures(url: str, events: int, folder: Path) -> dict:
    from mcpbench.telemetry.sink import export_trace

    trace = synthetic_trace(folder / "big.jsonl", events)
    started = time.perf_counter()
    (line,) = export_trace([str(trace)], TelemetryOptions(otlp=url))
    seconds = time.perf_counter() - started
    spans = int(line.split("OTLP: ")[1].split()[0])
    return {"events": events, "trace_bytes": os.path.getsize(trace), "seconds": seconds, "spans": spans,
            "events_per_s": events / seconds, "line": line}


def run(quick: bool = False) -> Path:
    count, times = (300, 1) if quick else (1_500, ROTATIONS)
    config = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="mcpbench-bench-telemetry-") as tmp:
        folder = Path(tmp)
        sink, url = start_sink()
        try:
            tee = tee_figures(url, count, times, folder)
            print(f"mcpbench: tee added p99 {tee['added_p99_us']['off']:.0f} µs off, {tee['added_p99_us']['on']:.0f} µs with --otlp",
                  file=sys.stderr, flush=True)
            record = record_figures(url, config, folder)
            print(f"mcpbench: record CPU per exchange {record['cpu_us_per_exchange']}", file=sys.stderr, flush=True)
            export = export_figures(url, QUICK_EVENTS if quick else EVENTS, folder)
            print(export["line"], file=sys.stderr, flush=True)
        finally:
            requests, size = stop_sink(sink)
    data = {"tee": tee, "record": record, "export": export, "sink": {"requests": requests, "bytes": size},
            "settings": {"round_trips": count * times, "rotations": times, "record_rounds": config["rounds"]},
            "load": os.getloadavg()}
    return write_result("telemetry", data)
