"""The main job, `mcpbench run`: the whole story on the built-in defaults, in a few minutes.

1. servers: the reference servers (Streamable HTTP, legacy SSE) start once for the whole run.
2. record: official SDK sessions in both eras through the tee (stdio) and through the record
   proxy (Streamable HTTP), plus a legacy HTTP+SSE session through the proxy.
3. replay: the stdio recording against the same server on all three transports (nothing may
   change), then against a modified server (`lab/peers/variant_server.py`: the change must show).
4. load: short Locust runs on Streamable HTTP (both eras in one run), legacy SSE and stdio.
5. sticky: `mcpbench lab run scenarios/sticky-short.yaml`, 3 instances behind the built-in balancer,
   which modes need sticky sessions (`lab/sticky.csv`, `lab/sticky.png`).
6. reconnect: `mcpbench lab run scenarios/reconnect-short.yaml`, stream cuts under each reconnect
   policy and under the official SDK client (`reconnect/reconnect.csv` and its charts).
7. report: `report.html` from everything in the run's folder, and three headline lines.

Each stage takes the run's folder and a `Progress`, returns a short line for `summary.json`.
Replay, load and the proxy run as `mcpbench` subprocesses, as a user would run them (Locust must
have a process of its own anyway); a subprocess that runs long prints a heartbeat line.
"""

import contextlib
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from mcpbench import cliutil
from mcpbench.lab.peers.servers import HOST, reference_server
from mcpbench.files.outputs import new_run_folder, write_atomic
from mcpbench.system.processes import free_port, start, stop_process, wait_for_port
from mcpbench.protocol.errors import EnvironmentProblem, McpbenchError, TargetError

RESULTS = Path("results")
REPO = Path(__file__).resolve().parents[2]

# Bounds for the subprocess stages: generous for a busy 2-core machine, finite.
REPLAY_TIMEOUT = 300.0
# (users, seconds) per load run. A stdio user starts a server process of its own (a Python start and
# the SDK's imports, seconds of CPU on a busy 2-core machine): fewer users, longer.
LOAD_HTTP = (4, 4)
LOAD_STDIO = (2, 8)
LOAD_TIMEOUT = 180.0
# 8 cells of a 2 s load each, plus Locust's and the instances' start-up on a busy machine.
STICKY_TIMEOUT = 300.0
# 4 cells of a 9 s run each, plus start-up.
RECONNECT_TIMEOUT = 300.0
PROXY_STOP_TIMEOUT = 30.0
# How long a stage's command may take to stop after the run is interrupted (Locust writes its CSVs).
CHILD_STOP_WAIT = 30.0
# A subprocess running longer than this gets a "still running" line, so the job never looks stuck.
HEARTBEAT = 10.0


class Progress:
    """Prints each line with the elapsed time and the current stage: `[ 12.3s 2/6 record] …`."""

    def __init__(self, say: Callable[[str], None], stages: int) -> None:
        self.say, self.stages = say, stages
        self.started = time.monotonic()
        self.stage, self.number = "", 0
        self.headlines: list[str] = []  # the report stage's headline figures

    def begin(self, name: str) -> None:
        self.number += 1
        self.stage = name
        self(f"== {name}")

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, line: str) -> None:
        prefix = f"[{self.elapsed():6.1f}s {self.number}/{self.stages} {self.stage}]"
        for part in line.splitlines() or [""]:
            self.say(f"{prefix} {part}")


Stage = Callable[[Path, Progress, dict], str]


def _server_argv() -> list[str]:
    return [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"]


def _variant_argv(mode: str) -> list[str]:
    return [sys.executable, "-m", "mcpbench.lab.peers.variant_server", mode]


def _mcpbench(args: list[str], say: Progress, timeout: float) -> subprocess.CompletedProcess:
    """Run `mcpbench ARGS`, printing its output indented and a heartbeat while it runs."""
    say("$ mcpbench " + shlex.join(args))
    done = threading.Event()

    def heartbeat() -> None:
        started = time.monotonic()
        while not done.wait(HEARTBEAT):
            say(f"  … still running: mcpbench {args[0]} ({time.monotonic() - started:.0f} s)")

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    child = None
    try:
        child = start([sys.executable, "-m", "mcpbench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = child.communicate(timeout=timeout)
    except (KeyboardInterrupt, subprocess.TimeoutExpired):
        if child is None:
            raise
        # Ctrl-C, SIGTERM or SIGHUP, or the stage ran out of time: pass a stop on so the child stops its
        # own children (Locust, a lab cell's instances and balancer) too, which a kill would orphan.
        stop_process(child, CHILD_STOP_WAIT, communicate=True)
        raise
    finally:
        done.set()
        beat.join()
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    for line in (proc.stdout + proc.stderr).rstrip().splitlines():
        say("  " + line)
    return proc


@contextlib.contextmanager
def recording_proxy(upstream: str, trace: Path) -> Iterator[str]:
    """`mcpbench record` in front of `upstream`; yields its base URL; the trace is whole afterwards (SIGINT)."""
    port = free_port()
    log_path = trace.with_suffix(".record.log")
    proc = None
    try:
        with log_path.open("wb") as log:
            proc = start(
                [sys.executable, "-m", "mcpbench", "record", "--upstream", upstream, "--listen", f"{HOST}:{port}", "--out", str(trace)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )
        wait_for_port(HOST, port, proc=proc)
        yield f"http://{HOST}:{port}"
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(PROXY_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:  # the `finally` kills it; the trace may lack its end
            raise EnvironmentProblem(
                f"mcpbench record did not stop within {PROXY_STOP_TIMEOUT:g} s of SIGINT; {trace} may be incomplete (see {log_path})"
            ) from None
    finally:
        if proc is not None:
            stop_process(proc)


def _session(target: object, mode: str, what: str) -> dict:
    from mcpbench.lab.peers.drive import drive

    try:
        return drive(target, mode)
    except Exception as exc:  # the SDK raises many kinds; the one line is what matters
        raise TargetError(f"{what} failed: {exc}") from None


def record(run_dir: Path, say: Progress, servers: dict) -> str:
    """SDK sessions in both eras through the tee and through the proxy; one legacy SSE session."""
    from mcp import StdioServerParameters

    from mcpbench.analysis.inspect import summarize
    from mcpbench.lab.peers.drive import sdk_target

    lines = []
    for mode in ("legacy", "auto"):
        trace = run_dir / f"stdio-{mode}.jsonl"
        argv = [sys.executable, "-m", "mcpbench", "tee", "--out", str(trace), "--", *_server_argv()]
        say(f"SDK client ({mode}) -> mcpbench tee -> reference stdio server")
        results = _session(StdioServerParameters(command=argv[0], args=argv[1:]), mode, "session through the tee")
        lines.append(f"{trace.name} ({results['protocol_version']})")
    for mode in ("legacy", "auto"):
        trace = run_dir / f"http-{mode}.jsonl"
        say(f"SDK client ({mode}) -> mcpbench record -> reference Streamable HTTP server")
        with recording_proxy(servers["streamable-http"], trace) as base:
            results = _session(base + "/mcp", mode, "session through the record proxy")
        lines.append(f"{trace.name} ({results['protocol_version']})")
    trace = run_dir / "sse-legacy.jsonl"
    say("SDK client (legacy) -> mcpbench record -> reference legacy HTTP+SSE server")
    with recording_proxy(servers["sse"], trace) as base:
        results = _session(sdk_target(base + "/sse", "sse"), "legacy", "legacy SSE session through the record proxy")
    lines.append(f"{trace.name} ({results['protocol_version']})")
    calls = sum(len(s.calls) for name in ("stdio-legacy", "stdio-auto", "http-legacy", "http-auto", "sse-legacy") for s in summarize(run_dir / f"{name}.jsonl").sessions)
    say(f"recorded {calls} requests in 5 traces")
    return "recorded " + ", ".join(lines)


def replay(run_dir: Path, say: Progress, servers: dict) -> str:
    """The stdio recording on all three transports (no change), then against a modified server."""
    trace = run_dir / "stdio-legacy.jsonl"
    targets = {
        "stdio": "stdio:" + shlex.join(_server_argv()),
        "streamable-http": servers["streamable-http"],
        "sse": "sse+" + servers["sse"],
    }
    for transport, target in targets.items():
        say(f"replay {trace.name} on {transport} (nothing may change)")
        report = run_dir / f"replay-{transport}.json"
        proc = _mcpbench(["replay", str(trace), "--target", target, "--report", str(report)], say, REPLAY_TIMEOUT)
        if proc.returncode != 0:
            raise McpbenchError(f"replay against {target} exited {proc.returncode}; see {report}")
    variant = "stdio:" + shlex.join(_variant_argv("echo-text"))
    say(f"replay {trace.name} against a modified server (echo answers changed): the change must show")
    report = run_dir / "replay-modified.json"
    proc = _mcpbench(["replay", str(trace), "--target", variant, "--report", str(report)], say, REPLAY_TIMEOUT)
    if proc.returncode != 1:
        raise McpbenchError(f"replay against the modified server exited {proc.returncode}, not 1 (changed); see {report}")
    counts = orjson.loads(report.read_bytes())["counts"]
    from mcpbench.analysis.report import DEMONSTRATIONS

    # The report lists this replay's changes as what the run set out to show, not as a failure.
    write_atomic(run_dir / DEMONSTRATIONS, orjson.dumps({report.name: "the modified server's echo answers differ from the recording"}))
    return f"{trace.name} replayed on {', '.join(targets)} with no change; against the modified server {counts['changed']} changed"


def load(run_dir: Path, say: Progress, servers: dict) -> str:
    """Short load runs: Streamable HTTP in both eras (one run), legacy SSE, stdio."""
    scenarios = REPO / "scenarios"
    runs = [
        ("streamable-http", scenarios / "era-comparison.yaml", servers["streamable-http"], LOAD_HTTP),
        ("sse", scenarios / "sse.yaml", "sse+" + servers["sse"], LOAD_HTTP),
        ("stdio", scenarios / "stdio.yaml", "stdio:" + shlex.join(_server_argv()), LOAD_STDIO),
    ]
    lines = []
    for name, scenario, target, (users, seconds) in runs:
        out = run_dir / f"load-{name}"
        say(f"load {scenario.name} on {name}: {users} users, {seconds} s")
        # Failures are measured and reported here, judged by the scenarios' fail_ratio thresholds only.
        args = ["load", str(scenario), "--target", target, "--users", str(users), "--spawn-rate", str(users), "--duration", f"{seconds}s",
                "--out", str(out), "--exit-code-on-error", "0"]
        proc = _mcpbench(args, say, LOAD_TIMEOUT)
        if proc.returncode == 2 or not (out / "summary.json").is_file():
            raise McpbenchError(f"load run on {name} could not run (exit {proc.returncode}); see {out}")
        summary = orjson.loads((out / "summary.json").read_bytes())
        verdict = "thresholds met" if proc.returncode == 0 else "a threshold failed"
        lines.append(f"{name}: {_load_line(summary)} ({verdict})")
    return "; ".join(lines)


def _load_line(summary: dict) -> str:
    total = summary["total"]
    return (
        f"{total['count']} calls, {total['failures']} failed, {total['rps']:.0f}/s, "
        f"p50 {total.get('p50', float('nan')):.1f} ms, p95 {total.get('p95', float('nan')):.1f} ms"
    )


def sticky(run_dir: Path, say: Progress, servers: dict) -> str:
    """The short sticky-session experiment, into `run_dir / "lab"` where the report finds it."""
    out = run_dir / "lab"
    proc = _mcpbench(["lab", "run", str(REPO / "scenarios" / "sticky-short.yaml"), "--out", str(out)], say, STICKY_TIMEOUT)
    if proc.returncode != 0 or not (out / "sticky.csv").is_file():
        raise McpbenchError(f"the sticky-session experiment exited {proc.returncode}; see {out}")
    from mcpbench.analysis import load_lab

    return sticky_line(load_lab(out).sticky, out / "sticky.csv")


def sticky_line(cells, csv: Path) -> str:
    """The cells where the balancer broke sessions; failures of any other class named apart.

    A session sent to the wrong instance fails in a routing class (`ROUTING_CLASSES`); a timeout on
    a starved machine or a refused connection is not the balancer's verdict, and is not hidden either.
    """
    from mcpbench.load.sessions import ROUTING_CLASSES

    columns = [f"failed_sessions:{name}" for name in ROUTING_CLASSES if f"failed_sessions:{name}" in cells]
    lost = cells[columns].fillna(0).sum(axis=1).astype(int)
    names = ", ".join(f"{row.mode} {row.policy}" for row in cells[lost > 0].itertuples()) or "none"
    line = f"{len(cells)} cells on 3 instances; sessions broken in: {names}"
    other = cells.failed_sessions - lost
    if other.any():
        counts = ", ".join(f"{cells.at[i, 'mode']} {cells.at[i, 'policy']} ×{n}" for i, n in other[other > 0].items())
        line += f" (other failures: {counts}; see {csv})"
    return line


def reconnect(run_dir: Path, say: Progress, servers: dict) -> str:
    """The short reconnect experiment, into `run_dir / "reconnect"` where the report finds it."""
    out = run_dir / "reconnect"
    proc = _mcpbench(["lab", "run", str(REPO / "scenarios" / "reconnect-short.yaml"), "--out", str(out)], say, RECONNECT_TIMEOUT)
    if proc.returncode != 0 or not (out / "reconnect.csv").is_file():
        raise McpbenchError(f"the reconnect experiment exited {proc.returncode}; see {out}")
    from mcpbench.analysis import load_lab
    from mcpbench.analysis.report import reconnect_line

    return reconnect_line(load_lab(out).reconnect)


def report(run_dir: Path, say: Progress, servers: dict) -> str:
    """`report.html` from everything in the run's folder."""
    from mcpbench.analysis.report import write_report

    say(f"mcpbench report {run_dir}")
    path, lines = write_report([run_dir])
    say.headlines = lines
    return str(path)


STAGES: list[tuple[str, Stage]] = [
    ("record", record), ("replay", replay), ("load", load), ("sticky", sticky), ("reconnect", reconnect), ("report", report),
]


@contextlib.contextmanager
def _servers(say: Progress) -> Iterator[dict]:
    with reference_server("streamable-http") as http, reference_server("sse") as sse:
        say(f"reference servers: Streamable HTTP {http.url}, legacy SSE {sse.url}, stdio per session")
        yield {"streamable-http": http.url, "sse": sse.url}


class Interrupted(McpbenchError):
    """A stop signal ended the job; its exit status is 128 + the signal's number (130, 143, 129)."""

    def __init__(self, signum: int, run_dir: Path) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}; what was done so far is in {run_dir}")
        self.exit_code = cliutil.signal_status(signum)


def run(out: Path | None = None, say: Callable[[str], None] = print) -> Path:
    """Run every stage into `out` (default `results/<time>-run/`) and return that folder.

    A stop signal raises as Ctrl-C does (cliutil's handlers: SIGTERM and SIGHUP as `Terminated`), so
    every `with` block on the way out stops its processes.

    Raises:
        McpbenchError: a stage failed (one line); `Interrupted` on a stop signal, after every
            server and subprocess the job started has been stopped.
    """
    if out is None:
        run_dir = new_run_folder(RESULTS, "run")
    else:
        run_dir = out
        run_dir.mkdir(parents=True, exist_ok=True)
    cliutil.install_stop_handlers()  # the command's already; again for a caller that is not one
    try:
        return _run(run_dir, say)
    except KeyboardInterrupt:
        raise Interrupted(cliutil.received or signal.SIGINT, run_dir) from None


def _run(run_dir: Path, say: Callable[[str], None]) -> Path:
    progress = Progress(say, len(STAGES) + 1)
    progress.begin("servers")
    progress(f"run folder: {run_dir}")
    summary: dict[str, str] = {}
    with _servers(progress) as servers:
        for name, stage in STAGES:
            progress.begin(name)
            summary[name] = stage(run_dir, progress, servers)
            progress(summary[name])
    summary["elapsed_s"] = f"{progress.elapsed():.1f}"
    write_atomic(run_dir / "summary.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    say("")
    say(f"report: {summary['report']}")
    for line in progress.headlines[:3]:
        say(f"  {line}")
    return run_dir
