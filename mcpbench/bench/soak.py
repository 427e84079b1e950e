"""`mcpbench bench soak`: many concurrent sessions through the proxies for minutes, every message accounted for.

At each level of concurrency (20, then 100 sessions) one run starts four resumable reference
servers (Streamable HTTP, SSE answers) and soaks four paths **in turn**, each with the machine to
itself (its proxies are started for it and stopped after it):

- `direct`: the users straight at instance s4, no proxy: the control (what the servers and the
  users do by themselves, which no proxy can be blamed for);
- `record`: `mcpbench record` in front of instance s1, writing a trace;
- `balancer`: the built-in balancer (sticky) in front of s1-s3;
- `both`: `mcpbench record` in front of a second built-in balancer that also cuts every SSE stream
  (the GET streams and the answers of `slow`) `cut_after` after its headers passed (the fault
  addon), so the users resume cut streams (`Last-Event-ID`) and reopen their GET streams.

Why in turn: side by side (100 sessions x 4 paths + 4 servers on 2 cores) the CPU pressure was 1.0
and each server got 3-7 % of a core, so calls waited users / rate (about 15 s) for the CPU and
some ran past their 30 s: the machine's pace, not a path's fault, and no path's figure could be
read alone. In turn, a path's figures are its own; each path's `cpu` (how busy the machine was, the
CPU pressure and the load average while it ran) says whether it had the machine to itself.

Times (the default, about 15 minutes in all): each path soaks `soak_s` = 90 s per level, so the
8 soaks take 12 minutes, and the throughput rounds and start-ups the rest. The flatness check of
memory and fds starts after `warmup_s` = 30 s (the sessions are all open and every proxy has seen
each kind of call, cut and resume many times by then: 100 users make thousands of calls in 30 s)
and judges the 60 s that follow along a least-squares line through a sample a second: a leak of
a few KB per call shows as a trend over those thousands of calls, where two 15 s windows would
read the swing of the open connections as growth.

Each path gets that many Locust users (`bench/soak_locustfile.py`): long-lived sessions holding
their GET stream open, calling `echo`, `slow` with progress, `ask` (a sampling request back to the
client) and `tools/list`; on `both` they recover as `RECONNECT` says. Each user keeps a ledger of
every message it sent and received; once the path is over its trace is reconciled with the
ledgers of its users (`bench/ledger.py`): 0 messages lost (sent or received by a client, missing
from the trace) and 0 duplicated (in the trace more often than a client saw it) is the target,
and every call must be answered or failed with a failure class; `unanswered` counts the calls that got
no answer (answer-lost/timeout, stream-closed), which the target is 0 of on every path, and each
failed call is named in `failures.<path>.<pid>.jsonl` (its session, its unique argument, what its
failure said) to be found in the trace. The resident memory and open file descriptors of every
proxy process are sampled every `sample_s`; the target is that they are flat after warm-up: at
most +10 % from `warmup_s` to the end along the least-squares line through the samples
(`_flatness`; the medians of the windows at both ends are reported too).
The CPU of every process of a path (its servers, proxies and Locust process) is sampled too, with
how busy the machine's cores were in all (`cpu`): a path that falls behind on a saturated machine
(the direct path too, which has no proxy to blame) is the machine's pace, not a proxy's fault.
What tells them apart, per path: each step's answered times, the second each failure came, and
the users' own event-loop lag; and for the machine its CPU pressure (the share of time a runnable
task waited for a core) and the kernel's listen overflows. Users whose loop runs on time, waiting
about `users / calls per second` for answers (a closed loop on a server that got a few % of a
core), are waiting for the CPU, not for a lost message.

Before the soak, at the same concurrency, `mcpbench record` and bare mitmdump in front of s1
are timed in turns (`rounds` x `throughput_s` each, users calling `echo` back to back): the
recorder's calls/s against bare mitmdump's, in one run. Both are also reconciled, the recorder's
trace with its users' ledgers.

`--quick` runs the same with fewer users for seconds (a smoke run, and the test's short mode).
Writes results/bench/soak.json and soak.png (memory, file descriptors and calls/s over the
seconds of each path's own soak, per level).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from mcpbench.bench.common import save_figure, write_result
from mcpbench.lab.peers.servers import HOST, REPO_ROOT, free_port, start_listening, stop_process
from mcpbench.lab.topology.cluster import mitmdump_path, running_balancer, running_instances
from mcpbench.bench import ledger
from mcpbench.protocol.http import Failure
from mcpbench.proxies.faultplan import addon_settings
from mcpbench.trace.reader import TraceReader

NAME = "soak"
SOAK_LOCUSTFILE = Path(__file__).with_name("soak_locustfile.py")
PATHS = ("direct", "record", "balancer", "both")
TRACED = ("record", "both")
INSTANCES = 3  # behind the balancers; the direct path has one more of its own
# The failure classes of a call that got no answer (a refusal, an error or a proxy's 5xx is an answer).
UNANSWERED = (Failure.ANSWER_LOST, Failure.STREAM_CLOSED)
# How users on the faulty path recover: resume a cut answer stream, re-send `echo` when unsure.
RECONNECT = "resume,attempts=10,backoff=50ms,max_backoff=1s,budget=50%,idempotent=echo"
# The default: two levels of about 7.5 minutes each (start-up, 2 x 2 x 10 s of throughput, 4 paths
# x 90 s of soak in turn): about 15 minutes in all (see the module's docstring). Quick: a few minutes.
FULL = {"levels": [20, 100], "soak_s": 90, "warmup_s": 30, "window_s": 15, "sample_s": 1,
        "throughput_s": 10, "rounds": 2, "cut_after": "1s"}
QUICK = {"levels": [4, 8], "soak_s": 12, "warmup_s": 4, "window_s": 3, "sample_s": 1,
         "throughput_s": 5, "rounds": 1, "cut_after": "1s"}
TARGET_GROWTH = 0.10  # memory and fds from warm-up to the end
# Locust's own start-up and shutdown (imports, users ending their sessions), on top of its run time.
LOCUST_MARGIN = 60.0
STOP_TIMEOUT = 15  # seconds Locust gives users to finish the call under way when the time is up


def run(quick: bool = False, *, out_dir: Path | None = None, config: dict | None = None) -> Path:
    """Soak every path at each level; write results/bench/soak.json (and soak.png)."""
    config = config or (QUICK if quick else FULL)
    levels = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mcpbench-bench-soak-") as tmp:
        for users in config["levels"]:
            levels.append(_level(users, config, Path(tmp) / f"u{users}"))
    data = {
        "quick": quick,
        "workload": {
            "servers": f"{INSTANCES + 1} x mcpbench lab serve --transport streamable-http --resumable (SSE answers)",
            "paths": {"direct": f"no proxy -> s{INSTANCES + 1}", "record": "mcpbench record -> s1", "balancer": "built-in balancer (sticky) -> s1-s3",
                      "both": f"mcpbench record -> built-in balancer (sticky, cut SSE streams after {config['cut_after']}) -> s1-s3"},
            "users": "long-lived sessions with their GET stream open; mix echo 5, slow (progress) 1, ask (sampling) 1, "
                     "tools/list 1; think time 0-0.1 s; both: reconnect " + RECONNECT,
            "throughput": "echo back to back; mcpbench record and bare mitmdump -> s1, in turns",
            "paths_ran": "in turn, each with the machine to itself",
            **config,
        },
        "seconds": round(time.monotonic() - started, 1),
        "load_average_after": os.getloadavg(),
        "levels": levels,
        "met": {f"u{level['users']}_{name}": ok for level in levels for name, ok in level["met"].items()},
    }
    path = write_result(NAME, data, out_dir)
    chart(levels, path.with_suffix(".png"))
    return path


def _level(users: int, config: dict, folder: Path) -> dict:
    """One level of concurrency: the throughput rounds, then the soak of each path in turn."""
    folder.mkdir(parents=True)
    paths: dict[str, dict] = {}
    memory: dict[str, dict] = {}
    series: dict[str, list] = {}
    cpus: dict[str, dict] = {}
    rates: dict[str, list] = {}
    with running_instances(INSTANCES + 1, "streamable-http", resumable=True) as instances:
        *servers, control = instances
        print(f"mcpbench: {users} sessions: throughput, mcpbench record against bare mitmdump", file=sys.stderr, flush=True)
        throughput = _throughput(users, servers[0].url, config, folder / "throughput")
        for path in config.get("paths", PATHS):
            print(f"mcpbench: {users} sessions on {path} alone for {config['soak_s']} s", file=sys.stderr, flush=True)
            figures, samples, cpus[path], rates[path] = _soak_path(path, users, config, folder, servers, control)
            paths[path] = figures
            memory |= {name: _flatness(values, config) for name, values in samples.items()}
            series |= samples
    met = {f"{path}_accounted": _accounted(figures) for path, figures in paths.items()}
    met |= {f"{path}_answered": figures["unanswered"] == 0 for path, figures in paths.items()}
    met |= {f"{name}_flat": figures["flat"] for name, figures in memory.items()}
    return {
        "users": users, "ran": "in turn", "throughput": throughput, "paths": paths, "processes": memory, "met": met,
        "faults_injected": _count_lines(folder / "faults.jsonl"), "cpu": _cpu_of_level(cpus),
        "series": {name: [[round(t, 1), round(rss / 2**20, 1), fds] for t, rss, fds, _cpu in samples] for name, samples in series.items()},
        "calls_per_second": rates,
    }


def _soak_path(path: str, users: int, config: dict, folder: Path, servers: list, control) -> tuple[dict, dict, dict, list]:
    """One path with the machine to itself: its proxies started, its users run for `soak_s`, its
    proxies stopped. Its figures (with its own `cpu`: how busy the machine was while it ran), the
    memory and fd samples of its proxies, that cpu, and its calls per second."""
    with contextlib.ExitStack() as stack:
        procs: dict[str, subprocess.Popen] = {}
        if path == "direct":
            url, upstream = control.url, {f"server.s{INSTANCES + 1}": control.proc}
        else:
            upstream = {f"server.s{n}": server.proc for n, server in enumerate(servers, 1)}
            if path == "record":
                upstream = {"server.s1": servers[0].proc}
                url, procs["record"] = _record(servers[0].url, folder / "record.jsonl", folder / "record.log")
                stack.callback(stop_process, procs["record"])
            elif path == "balancer":
                front = stack.enter_context(running_balancer("builtin", "sticky", "streamable-http", servers, folder=folder))
                url, procs["balancer"] = front.url, front.proc
            else:
                faults = addon_settings({"cut_streams_after": config["cut_after"]}, str(folder / "faults.jsonl"))
                faulty = stack.enter_context(running_balancer("builtin", "sticky", "streamable-http", servers,
                                                              folder=folder / "faulty", faults=faults))
                procs["both.balancer"] = faulty.proc
                url, procs["both.record"] = _record(faulty.url, folder / "both.jsonl", folder / "both.log")
                stack.callback(stop_process, procs["both.record"])
        locust = _locust(path, url, users, "soak", RECONNECT if path == "both" else None, config["soak_s"], folder / "soak")
        # Every process of the path is sampled: the proxies' memory and fds must stay flat; the CPU of
        # each (servers and users too) says whether the machine, not the path, set the pace.
        sampler = Sampler(procs | upstream | {f"users.{path}": locust}, config["sample_s"])
        exits = _wait({path: locust}, config["soak_s"])
        samples = {name: values for name, values in sampler.stop().items() if name in procs}
        cpu = sampler.cpu()
        for name in ("record", "both.record"):  # a trace is complete once its recorder stopped
            if name in procs:
                stop_process(procs[name])
    soak = _read_calls(folder / "soak")
    if path not in soak:  # its Locust process died before writing: the run says so, not a traceback
        raise RuntimeError(f"the {path} users wrote no counts (locust exit {exits[path]}; log: {folder / 'soak'})")
    figures = _path_figures(soak[path], sampler.started) | {"locust_exit": exits[path], "cpu": cpu,
                                                            "failed_calls": _failed_calls(folder / "soak", path)}
    if path in TRACED:
        figures["trace"] = _reconcile(folder / f"{path}.jsonl", folder / "soak", path)
    return figures, samples, cpu, _per_second(soak[path], sampler.started)


def _cpu_of_level(cpus: dict[str, dict]) -> dict:
    """The level's CPU figures from its paths' (each measured while that path ran alone): each
    process's share of a core, and the busiest the machine was in any path's window."""
    if not cpus:
        return {}
    first, last = next(iter(cpus.values())), list(cpus.values())[-1]
    worst = lambda key: max((cpu[key] for cpu in cpus.values() if cpu.get(key) is not None), default=None)  # noqa: E731
    overflows: Counter = Counter()
    for cpu in cpus.values():
        overflows.update(cpu["listen_overflows"])
    return {
        "share_of_a_core": {name: share for cpu in cpus.values() for name, share in cpu["share_of_a_core"].items()},
        "cores": first["cores"], "seconds": round(sum(cpu["seconds"] for cpu in cpus.values()), 1),
        "machine_busy": worst("machine_busy"), "these_processes": worst("these_processes"), "cpu_pressure": worst("cpu_pressure"),
        "load_average_before": first["load_average_before"], "load_average_after": last["load_average_after"],
        "listen_overflows": dict(overflows), "by_path": {path: {key: cpu[key] for key in ("machine_busy", "cpu_pressure")}
                                                         for path, cpu in cpus.items()},
    }


def _throughput(users: int, upstream: str, config: dict, folder: Path) -> dict:
    """`mcpbench record` and bare mitmdump in front of `upstream`, timed in turns at `users` sessions."""
    procs: dict[str, subprocess.Popen] = {}
    urls: dict[str, str] = {}
    try:
        urls["record"], procs["record"] = _record(upstream, folder / "record.jsonl", folder / "record.log")
        port = free_port()
        origin = upstream.rsplit("/", 1)[0]
        with open(folder / "bare.log", "wb") as log:
            procs["bare"] = start_listening([mitmdump_path(), "-q", "--mode", f"reverse:{origin}", "--listen-host", HOST, "-p", str(port)],
                                            port, stdout=log, stderr=log)
        urls["bare"] = f"http://{HOST}:{port}/mcp"
        rates: dict[str, list[float]] = {"record": [], "bare": []}
        for number in range(config["rounds"]):
            for name in rates:
                out = folder / f"{name}-{number}"
                _wait({name: _locust(name, urls[name], users, "echo", None, config["throughput_s"], out)}, config["throughput_s"])
                rates[name].append(_rate(_read_calls(out)[name]))
            print(f"mcpbench: round {number + 1}/{config['rounds']}: record {rates['record'][-1]:.0f}/s, "
                  f"bare mitmdump {rates['bare'][-1]:.0f}/s", file=sys.stderr, flush=True)
    finally:
        for proc in procs.values():
            stop_process(proc)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    calls = Counter()
    for out in folder.glob("record-*"):
        calls.update(_read_calls(out)["record"]["failures"])
    return {
        "calls_per_s": rates, "median_calls_per_s": medians,
        "record_vs_bare": medians["record"] / medians["bare"] if medians["bare"] else None,
        "record_trace": _reconcile(folder / "record.jsonl", folder, "record", pattern="record-*/ledger.record.*.jsonl"),
        "record_failures": dict(calls),
    }


def _record(upstream: str, trace: Path, log: Path) -> tuple[str, subprocess.Popen]:
    """`mcpbench record` in front of `upstream` on a free port: its MCP URL and process."""
    port = free_port()
    argv = [sys.executable, "-m", "mcpbench", "record", "--upstream", upstream, "--listen", f"{HOST}:{port}", "--out", str(trace)]
    trace.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as err:
        proc = start_listening(argv, port, stdout=subprocess.DEVNULL, stderr=err)
    return f"http://{HOST}:{port}/mcp", proc


def _locust(path: str, url: str, users: int, mix: str, reconnect: str | None, seconds: float, out: Path) -> subprocess.Popen:
    """A headless Locust process of `users` soak users on `url` for `seconds`."""
    out.mkdir(parents=True, exist_ok=True)
    soak = {"path": path, "url": url, "mix": mix, "reconnect": reconnect, "out": str(out)}
    env = dict(os.environ, MCPBENCH_SOAK=orjson.dumps(soak).decode(), PYTHONPATH=str(REPO_ROOT))
    argv = [sys.executable, "-m", "locust", "-f", str(SOAK_LOCUSTFILE), "--headless", "--only-summary", "--loglevel", "ERROR",
            "-u", str(users), "-r", str(max(1, users // 2)), "--run-time", f"{max(1, round(seconds))}s",
            "--stop-timeout", str(STOP_TIMEOUT)]
    log = open(out / f"locust.{path}.log", "wb")
    try:
        return subprocess.Popen(argv, env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    finally:
        log.close()


def _wait(procs: dict[str, subprocess.Popen], seconds: float) -> dict[str, int]:
    """Wait for the Locust processes to end (bounded), stopping any that outlive the bound; their exit statuses."""
    deadline = time.monotonic() + seconds + STOP_TIMEOUT + LOCUST_MARGIN
    try:
        for proc in procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for proc in procs.values():
            stop_process(proc)
    return {name: proc.returncode for name, proc in procs.items()}


class Sampler:
    """Samples each process's resident memory, open file descriptors and CPU seconds every `every`
    seconds, in a thread, and the machine's busy CPU time from the first sample to the last."""

    def __init__(self, procs: dict[str, subprocess.Popen], every: float) -> None:
        import psutil  # a dependency of locust

        self._procs = {name: psutil.Process(proc.pid) for name, proc in procs.items()}
        self._every = every
        self._stop = threading.Event()
        self.started = time.time()
        self._machine = [(time.monotonic(), psutil.cpu_times(), os.getloadavg(), _cpu_stalled(), _listen_drops())]
        self.series: dict[str, list[tuple[float, int, int, float]]] = {name: [] for name in procs}
        self._thread = threading.Thread(target=self._run, name="mcpbench-soak-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while True:
            now = time.time() - self.started
            for name, proc in self._procs.items():
                try:
                    with proc.oneshot():
                        times = proc.cpu_times()
                        self.series[name].append((now, proc.memory_info().rss, proc.num_fds(), times.user + times.system))
                except psutil.Error:
                    pass  # it ended: the run reports that elsewhere
            if self._stop.wait(self._every):
                return

    def stop(self) -> dict[str, list[tuple[float, int, int, float]]]:
        import psutil

        self._stop.set()
        self._thread.join()
        self._machine.append((time.monotonic(), psutil.cpu_times(), os.getloadavg(), _cpu_stalled(), _listen_drops()))
        return self.series

    def cpu(self) -> dict:
        """Each process's share of one core over its samples, and the machine's: its cores, how busy
        they were in all, how much of that was these processes, and the load average at both ends."""
        shares = {}
        ours = 0.0
        for name, samples in self.series.items():
            if len(samples) >= 2 and samples[-1][0] > samples[0][0]:
                used = samples[-1][3] - samples[0][3]
                ours += used
                shares[name] = round(used / (samples[-1][0] - samples[0][0]), 3)
        (t0, first, load0, stall0, drops0), (t1, last, load1, stall1, drops1) = self._machine[0], self._machine[-1]
        idle = (last.idle + getattr(last, "iowait", 0.0)) - (first.idle + getattr(first, "iowait", 0.0))
        total = sum(last) - sum(first)
        cores = os.cpu_count() or 1
        return {
            "share_of_a_core": shares, "cores": cores, "seconds": round(t1 - t0, 1),
            "machine_busy": round(1.0 - idle / total, 3) if total > 0 else None,  # of all its cores
            "these_processes": round(ours / ((t1 - t0) * cores), 3) if t1 > t0 else None,  # of all its cores
            "load_average_before": [round(x, 2) for x in load0], "load_average_after": [round(x, 2) for x in load1],
            # Linux's pressure stall information: the share of the time at least one runnable task
            # waited for a core (None where the kernel has none). Near 1: every process of the soak
            # queued for the CPU, the direct path's too.
            "cpu_pressure": round((stall1 - stall0) / ((t1 - t0) * 1e6), 3) if None not in (stall0, stall1) and t1 > t0 else None,
            # The kernel's count of connections a listener had no room for (its accept queue full):
            # machine-wide, so other work's too. A client's connect then waits out SYN retries (1, 3, 7 s…).
            "listen_overflows": {k: drops1[k] - drops0[k] for k in drops1 if k in drops0},
        }


def _cpu_stalled() -> int | None:
    """Microseconds that some runnable task waited for a CPU since boot (`/proc/pressure/cpu`), or None."""
    try:
        with open("/proc/pressure/cpu") as pressure:
            for line in pressure:
                if line.startswith("some "):
                    return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _listen_drops() -> dict[str, int]:
    """The kernel's TcpExt ListenOverflows and ListenDrops counters (`/proc/net/netstat`), or nothing."""
    try:
        lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines() if line.startswith("TcpExt:")]
        names, values = lines[0], lines[1]
    except (OSError, IndexError):
        return {}
    return {name: int(value) for name, value in zip(names[1:], values[1:]) if name in ("ListenOverflows", "ListenDrops")}


def _read_calls(folder: Path) -> dict[str, dict]:
    """The `calls.<path>.<pid>.json` files of `folder`, by path."""
    out: dict[str, dict] = {}
    for file in sorted(folder.glob("calls.*.json")):
        record = orjson.loads(file.read_bytes())
        out[record["path"]] = record
    return out


def _failed_calls(folder: Path, path: str, most: int = 20) -> list[dict]:
    """The first failed calls the users of `path` named (`failures.<path>.<pid>.jsonl`), earliest first."""
    named = [orjson.loads(line) for file in sorted(folder.glob(f"failures.{path}.*.jsonl")) for line in file.read_bytes().splitlines() if line]
    return sorted(named, key=lambda call: call["sent"])[:most]


def _rate(calls: dict) -> float:
    """Completed calls per second over the run's whole seconds but its first and last (spawning, stopping)."""
    per_second = {int(k): v for k, v in calls["per_second"].items()}
    if len(per_second) < 3:
        return 0.0
    window = [per_second.get(second, 0) for second in range(min(per_second) + 1, max(per_second))]
    return sum(window) / len(window)


def _per_second(calls: dict, started: float) -> list[list[float]]:
    return [[int(k) - started, v] for k, v in sorted(calls["per_second"].items(), key=lambda kv: int(kv[0]))]


def _path_figures(calls: dict, started: float) -> dict[str, Any]:
    steps = sum(calls["steps"].values())
    failures = calls["failures"]
    rates = [v for _, v in _per_second(calls, started)[1:-1]]
    return {
        "steps": steps, "ok": steps - sum(failures.values()), "failures": failures,
        "unanswered": sum(failures.get(kind, 0) for kind in UNANSWERED),
        "unclassified": failures.get("unclassified", 0), "calls_per_s_median": statistics.median(rates) if rates else 0.0,
        "duplicate_answers": calls["duplicate_answers"], "get_streams": calls["get_streams"], "reconnects": calls["reconnects"],
        "calls_by_step": calls["steps"], "failure_details": calls["failure_details"],
        # What tells the machine from the path: answered times per step, when failures came (seconds
        # into the soak), and how late the users' own event loop ran.
        "answered_ms": calls.get("answered_ms", {}), "loop_lag_s": calls.get("loop_lag_s", {}),
        "failed_at_s": {kind: {str(round(int(k) - started)): v for k, v in seconds.items()}
                        for kind, seconds in calls.get("failed_at", {}).items()},
    }


def _reconcile(trace: Path, folder: Path, path: str, *, pattern: str | None = None) -> dict:
    """The trace's messages against the ledgers of the users of `path`."""
    client = ledger.merge(ledger.read_records(folder, pattern or f"ledger.{path}.*.jsonl"))
    return ledger.reconcile(client, ledger.trace_counts(TraceReader(trace)))


def _accounted(figures: dict) -> bool:
    """Every call answered or failed with a class, and (traced paths) no message lost or duplicated."""
    trace = figures.get("trace")
    return figures["unclassified"] == 0 and figures["steps"] > 0 and figures.get("locust_exit") in (0, 1, None) and (
        trace is None or (trace["lost"]["total"] == 0 and trace["duplicated"]["total"] == 0 and trace["client"]["total"] > 0)
    )


def _flatness(samples: list[tuple[float, int, int]], config: dict) -> dict:
    """Memory and fds at warm-up (the median of the window at `warmup_s`: minute 2) and at the end (of
    the last window), and their growth from the one to the other along the least-squares line through
    every sample from warm-up on: flat when it is at most `TARGET_GROWTH`. The line, not two windows,
    decides: a proxy's open descriptors swing with the connections open at the instant (streams cut
    and reopened), which two windows would take for growth or shrinkage; a leak is a trend."""
    warm = [s for s in samples if config["warmup_s"] <= s[0] < config["warmup_s"] + config["window_s"]]
    end_from = samples[-1][0] - config["window_s"] if samples else 0.0
    end = [s for s in samples if s[0] > end_from]
    after = [s for s in samples if s[0] >= config["warmup_s"]]
    out: dict[str, Any] = {"samples": len(samples)}
    flat = bool(warm and end and len(after) >= 2)
    for index, name, scale in ((1, "rss_mb", 2**20), (2, "fds", 1)):
        at_warmup = statistics.median(s[index] for s in warm) / scale if warm else None
        at_end = statistics.median(s[index] for s in end) / scale if end else None
        growth = _trend_growth([s[0] for s in after], [s[index] for s in after]) if len(after) >= 2 else None
        out |= {f"{name}_at_warmup": at_warmup, f"{name}_at_end": at_end, f"{name}_growth": growth,
                f"{name}_max": max(s[index] for s in samples) / scale if samples else None}
        flat = flat and growth is not None and growth <= TARGET_GROWTH
    out["flat"] = flat
    return out


def _trend_growth(times: list[float], values: list[float]) -> float | None:
    """From the first time to the last, the relative growth of the least-squares line through the points."""
    slope, intercept = statistics.linear_regression(times, values)
    first = intercept + slope * times[0]
    return slope * (times[-1] - times[0]) / first if first > 0 else None


def _count_lines(path: Path) -> int:
    return sum(1 for _ in path.open("rb")) if path.exists() else 0


def chart(levels: list[dict], path: Path) -> Path:
    """Per level (a column): the proxies' resident memory and fds, and each path's calls/s, over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, len(levels), figsize=(6 * len(levels), 9), squeeze=False, sharex="col")
    for column, level in enumerate(levels):
        mem, fds, rate = axes[0][column], axes[1][column], axes[2][column]
        for name, samples in level["series"].items():
            mem.plot([s[0] for s in samples], [s[1] for s in samples], label=name)
            fds.plot([s[0] for s in samples], [s[2] for s in samples], label=name)
        for name, points in level["calls_per_second"].items():
            rate.plot([p[0] for p in points], [p[1] for p in points], label=name, linewidth=0.8)
        mem.set_title(f"{level['users']} sessions per path")
        mem.set_ylabel("resident memory (MiB)")
        fds.set_ylabel("open file descriptors")
        rate.set_ylabel("calls/s completed")
        rate.set_xlabel("seconds into the path's own soak")
        for ax in (mem, fds, rate):
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
    fig.suptitle("mcpbench bench soak: each path in turn, with the machine to itself\n"
                 "direct (the control), record, balancer, record + balancer cutting streams", fontsize=9)
    return save_figure(fig, path, dpi=100)
