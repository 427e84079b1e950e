"""`mcpbench bench analysis`: a big trace into the `calls` frame, and reading beside a replay.

1. A synthetic trace of realistic traffic (EVENTS events: sessions of a handshake,
   then mostly small tool calls, a few large results, progress notifications
   and stderr lines) is loaded with `load_trace(..., events=False)`; the time
   and the peak memory (tracemalloc's peak of Python's allocations, which numpy
   reports to it, and the peak resident size a fresh process adds while
   loading; the larger counts) are compared with the file's size.
2. A trace recorded by a plain client loop (bench replay's) is replayed against
   the reference stdio server and, separately, loaded with `load_trace`: the
   loading time as a share of the replay's wall time.

3. `inspect` of the same trace (the trace model's sessions and operations, rendered as text).
4. Before and after, in the same run: the `calls` frame, `inspect` and a replay's plan (of a
   PLAN_EVENTS trace) each timed (CPU) in fresh processes, with this code and with the code of
   BASELINE (exported from the git history), taking turns so both see the same machine. Without a
   git checkout (an installed package) the before side is left out, said in the JSON.

Targets (issue 33, after issue 13's 10 s and 3x): 1,000,000 events into `calls` in <= 3 s, peak
memory <= 1.5x the file's size, `inspect` in <= 10 s; reading <= 5 % of a replay's wall time.
"""

import gc
import os
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

import orjson

from mcpbench.bench.common import write_result
from mcpbench.protocol.versions import LATEST_HANDSHAKE
from mcpbench.trace.writer import TraceWriter

EVENTS = 1_000_000
QUICK_EVENTS = 20_000
LOAD_SECONDS = 3.0
MEMORY_FACTOR = 1.5
INSPECT_SECONDS = 10.0
READ_SHARE = 0.05
# Timed loads: the best round counts, so one noisy moment on a shared 2-core machine does not decide.
ROUNDS = 2
REPLAY_CALLS = 2_000
QUICK_REPLAY_CALLS = 200

# The traffic mix: most calls small, a few with large results (a file read, a search).
CALLS_PER_SESSION = 200
LARGE_SHARE = 0.01
LARGE_BYTES = 32 * 1024
PROGRESS_SHARE = 0.05
TOOL_ERROR_SHARE = 0.01
LINES_PER_WRITE = 5000

# Before and after: the code this wave began from (issue 33's model as it was, columns included).
BASELINE = "fd6ed80"
PLAN_EVENTS = 200_000
QUICK_PLAN_EVENTS = 5_000
# One timing in a fresh process: `sys.path` is the code's folder and the interpreter's packages only
# (`-S`: no `.pth` file, so an editable install of this checkout cannot take the baseline's place).
TIMING_PROBE = """
import json, os, sys, time
code, packages, what, trace = sys.argv[1:5]
sys.path[:0] = [code, *packages.split(os.pathsep)]
if what == "calls":
    from mcpbench.analysis import load_trace
    work = lambda: load_trace(trace, events=False)
elif what == "inspect":
    from mcpbench.analysis.inspect import render, summarize
    work = lambda: render(summarize(trace))
else:
    from mcpbench.replay.plan import load
    work = lambda: load(trace)
started, started_cpu = time.perf_counter(), time.process_time()
work()
import mcpbench
print(json.dumps({"cpu_seconds": time.process_time() - started_cpu, "seconds": time.perf_counter() - started, "code": mcpbench.__file__}))
"""


def synthetic_trace(path: Path, events: int, seed: int = 13) -> Path:
    """Write a stdio trace of about `events` events of realistic traffic."""
    rng = random.Random(seed)
    big_text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(LARGE_BYTES))
    ts = 1_796_000_000.0
    written = 0
    with TraceWriter(path, transport="stdio", header={"command": ["synthetic"]}) as writer:
        session_no = 0
        while written < events:
            session_no += 1
            session = f"s{session_no:06d}"
            lines: list[bytes] = []

            def put(direction: str, obj: dict) -> None:
                nonlocal ts
                ts += rng.uniform(0.0002, 0.003)
                lines.append(writer.encode_message(session, direction, orjson.dumps(obj), round(ts, 6)))

            put("c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": LATEST_HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench-client", "version": "1.0"}}})
            put("s2c", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": LATEST_HANDSHAKE, "capabilities": {"tools": {}}, "serverInfo": {"name": "bench-server", "version": "2.0"}}})
            put("c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"})
            for call in range(1, CALLS_PER_SESSION + 1):
                draw = rng.random()
                if draw < LARGE_SHARE:
                    put("c2s", {"jsonrpc": "2.0", "id": call, "method": "tools/call", "params": {"name": "big", "arguments": {"size": LARGE_BYTES}}})
                    put("s2c", {"jsonrpc": "2.0", "id": call, "result": {"content": [{"type": "text", "text": big_text}], "isError": False}})
                    continue
                if draw < LARGE_SHARE + PROGRESS_SHARE:
                    put("c2s", {"jsonrpc": "2.0", "id": call, "method": "tools/call", "params": {"name": "slow", "arguments": {"steps": 2}, "_meta": {"progressToken": call}}})
                    for step in (1, 2):
                        put("s2c", {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": call, "progress": step, "total": 2}})
                    put("s2c", {"jsonrpc": "2.0", "id": call, "result": {"content": [{"type": "text", "text": "done"}], "isError": False}})
                    continue
                text = f"message {call} of session {session_no}"
                put("c2s", {"jsonrpc": "2.0", "id": call, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}})
                failed = rng.random() < TOOL_ERROR_SHARE
                put("s2c", {"jsonrpc": "2.0", "id": call, "result": {"content": [{"type": "text", "text": "boom" if failed else text}], "isError": failed}})
            lines.append(writer.encode({"kind": "stderr", "session": session, "dir": "s2c", "ts": round(ts, 6), "text": "INFO session done"}))
            for start in range(0, len(lines), LINES_PER_WRITE):
                writer.write_lines(lines[start : start + LINES_PER_WRITE])
            written += len(lines)
    return path


def measure_load(trace: Path) -> dict:
    """Time and peak memory of `load_trace(trace, events=False)`, and the rows it made."""
    from mcpbench.analysis import load_trace

    rounds, cpu = [], []
    load_before = os.getloadavg()  # the machine is shared: wall time says little without it
    for _ in range(ROUNDS):
        gc.collect()
        started, started_cpu = time.perf_counter(), time.process_time()
        frames = load_trace(trace, events=False)
        rounds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        rows = len(frames.calls)
        del frames
    load_after = os.getloadavg()
    seconds = min(rounds)
    gc.collect()
    started = time.perf_counter()
    load_trace(trace)  # all four frames, `events` too: for the record, no target
    all_frames = time.perf_counter() - started
    gc.collect()
    tracemalloc.start()
    load_trace(trace, events=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    size = trace.stat().st_size
    rss = peak_rss(trace)
    return {
        # cpu_seconds: this process's CPU time, what the load costs when other work shares the cores
        "bytes": size, "seconds": seconds, "rounds": rounds, "cpu_seconds": min(cpu), "all_frames_seconds": all_frames, "calls": rows, "peak_bytes": peak, "peak_over_size": peak / size,
        "rss_added_bytes": rss, "rss_added_over_size": rss / size,
        # 1-, 5- and 15-minute load averages around the timed rounds (2 cores: above 2, others wait)
        "load_average_before": load_before, "load_average_after": load_after,
    }


# VmHWM (peak resident size of this process image), not ru_maxrss: a child started by a
# big parent inherits the parent's ru_maxrss across fork and exec.
RSS_PROBE = """
import sys
from mcpbench.analysis.traces import load_trace
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
before = peak()
load_trace(sys.argv[1], events=False)
print(peak() - before)
"""


def measure_inspect(trace: Path) -> dict:
    """Time of `inspect` on the trace: the model's report and its text."""
    from mcpbench.analysis.inspect import render, summarize

    gc.collect()
    load_before = os.getloadavg()
    started, started_cpu = time.perf_counter(), time.process_time()
    render(summarize(trace))
    return {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - started_cpu,
            "load_average_before": load_before, "load_average_after": os.getloadavg()}


def peak_rss(trace: Path) -> int:
    """The peak resident memory `load_trace` adds, in a fresh process (bytes), beyond what its imports use."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", RSS_PROBE, str(trace)], capture_output=True, text=True, check=True)
    return int(proc.stdout.strip())


def measure_share(folder: Path, calls: int) -> dict:
    """A replay's wall time and `load_trace`'s time on the same recorded trace."""
    from mcpbench.analysis import load_trace
    from mcpbench.bench.replay import plain_loop, server_argv
    from mcpbench.replay import plan as plans
    from mcpbench.replay.engine import Replayer
    from mcpbench.system.target import Target

    trace = folder / "recorded.jsonl"
    plain_loop(calls, trace)
    started = time.perf_counter()
    Replayer(Target("stdio", argv=tuple(server_argv()))).run(plans.load(trace))
    replay_seconds = time.perf_counter() - started
    started = time.perf_counter()
    load_trace(trace)
    read_seconds = time.perf_counter() - started
    return {"calls": calls, "bytes": trace.stat().st_size, "replay_seconds": replay_seconds, "load_seconds": read_seconds, "share": read_seconds / replay_seconds}


def baseline_code(folder: Path) -> Path | None:
    """BASELINE's `mcpbench` package, exported from the git history into `folder` (None without git)."""
    import io
    import subprocess
    import tarfile

    repo = Path(__file__).resolve().parents[2]
    try:
        tar = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", BASELINE, "mcpbench"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(folder, filter="data")
    return folder


def measure_before_after(base: Path | None, traces: dict[str, Path], rounds: int = ROUNDS) -> dict:
    """CPU (and wall) seconds of the calls frame, `inspect` and a replay's plan, with BASELINE's code
    and with this one, each in a fresh process, the two sides taking turns; the best round counts."""
    import subprocess
    import sys
    import sysconfig

    import mcpbench

    if base is None:
        return {"baseline": BASELINE, "skipped": "no git history here: the baseline's code cannot be exported"}
    packages = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    sides = {"before": str(base), "after": str(Path(mcpbench.__file__).resolve().parents[1])}
    out: dict = {"baseline": BASELINE}
    for what, trace in traces.items():
        timings: dict[str, list[dict]] = {side: [] for side in sides}
        load_before = os.getloadavg()
        for _ in range(rounds):
            for side, code in sides.items():
                proc = subprocess.run([sys.executable, "-S", "-c", TIMING_PROBE, code, packages, what, str(trace)],
                                      capture_output=True, text=True, check=True)
                timings[side].append(orjson.loads(proc.stdout.strip().splitlines()[-1]))
        out[what] = {
            **{f"{side}_cpu_seconds": min(t["cpu_seconds"] for t in runs) for side, runs in timings.items()},
            "rounds": timings, "load_average_before": load_before, "load_average_after": os.getloadavg(),
        }
        out[what]["after_over_before"] = out[what]["after_cpu_seconds"] / out[what]["before_cpu_seconds"]
    return out


def run(quick: bool = False) -> Path:
    events = QUICK_EVENTS if quick else EVENTS
    with tempfile.TemporaryDirectory(prefix="mcpbench-bench-analysis-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        trace = synthetic_trace(folder / "traffic.jsonl", events)
        made = time.perf_counter() - started
        load = measure_load(trace)
        inspected = measure_inspect(trace)
        planned = synthetic_trace(folder / "plan.jsonl", QUICK_PLAN_EVENTS if quick else PLAN_EVENTS)
        compared = measure_before_after(baseline_code(folder / "baseline"), {"calls": trace, "inspect": trace, "plan": planned})
        trace.unlink()
        share = measure_share(folder, QUICK_REPLAY_CALLS if quick else REPLAY_CALLS)
    data = {
        "events": events,
        "trace_written_seconds": made,
        "load": load,
        "inspect": inspected,
        "read_vs_replay": share,
        "before_after": compared,
        "targets": {"load_seconds": LOAD_SECONDS, "peak_over_size": MEMORY_FACTOR, "inspect_seconds": INSPECT_SECONDS, "read_share": READ_SHARE},
        "pass": {
            # CPU time: the loader's own cost; wall time on a shared machine is the other programs' too
            "load_seconds": load["cpu_seconds"] <= LOAD_SECONDS,
            "inspect_seconds": inspected["cpu_seconds"] <= INSPECT_SECONDS,
            "peak_memory": max(load["peak_over_size"], load["rss_added_over_size"]) <= MEMORY_FACTOR,
            "read_share": share["share"] <= READ_SHARE,
        },
        "quick": quick,
    }
    path = write_result("analysis", data)
    _chart(path.with_suffix(".png"), data)
    return path


def _chart(path: Path, data: dict) -> Path:
    """Four measured figures beside their targets, each on its own scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    load, share, compared = data["load"], data["read_vs_replay"], data["before_after"]

    def sides(what: str, in_process: float) -> tuple[float, float | None]:
        """This code's CPU seconds and BASELINE's, both timed the same way (fresh processes) when the
        baseline was measured; else this process's figure alone (a fresh process also pays its page faults)."""
        if what in compared:
            return compared[what]["after_cpu_seconds"], compared[what]["before_cpu_seconds"]
        return in_process, None

    calls, calls_before = sides("calls", load["cpu_seconds"])
    inspected, inspected_before = sides("inspect", data["inspect"]["cpu_seconds"])
    panels = [
        (f"{data['events']:,} events -> calls (CPU)", "seconds", calls, LOAD_SECONDS, calls_before),
        (f"inspect of {data['events']:,} events (CPU)", "seconds", inspected, INSPECT_SECONDS, inspected_before),
        ("peak memory / file size", "ratio", max(load["peak_over_size"], load["rss_added_over_size"]), MEMORY_FACTOR, None),
        ("load_trace / replay wall time", "share (%)", share["share"] * 100, READ_SHARE * 100, None),
    ]
    if "plan" in compared:
        panels.append((f"replay plan of {PLAN_EVENTS if not data['quick'] else QUICK_PLAN_EVENTS:,} events (CPU)", "seconds",
                       compared["plan"]["after_cpu_seconds"], None, compared["plan"]["before_cpu_seconds"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.6))
    for ax, (title, unit, value, target, earlier) in zip(axes, panels):
        # Each value in its bar's name, not over the bar, where a value near its target sat on the target's line.
        if earlier is not None:
            ax.bar([f"before ({BASELINE})\n{earlier:.2f}", f"after\n{value:.2f}"], [earlier, value], color=["#8c8c8c", "#4c72b0"])
        else:
            ax.bar([f"measured\n{value:.2f}"], [value], color="#4c72b0", label="measured")
        ax.set_ylim(top=1.3 * max(v for v in (value, earlier, target) if v is not None))  # room for the legend
        if target is not None:
            ax.axhline(target, color="#c44e52", linestyle="--", label=f"target <= {target:g}")
        ax.set_title(title)
        ax.set_ylabel(unit)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize=8)
    fig.suptitle(f"bench analysis: before and after in one run (load average {compared.get('calls', {}).get('load_average_before', [float('nan')])[0]:.1f}; a busy 2-core machine's figures are noisy)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
