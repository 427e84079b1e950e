"""The main job, `mcpbench run`: record → replay → load → report, on the built-in defaults.

1. record: sessions of the reference stdio server through the tee, driven by
   the official SDK client in both eras; their timelines are printed.
2. replay: the handshake-era recording against the same server over stdio and,
   across transports, over Streamable HTTP and legacy SSE: nothing may change.
3. load: a short Locust run against the reference Streamable HTTP server.
4. report: `summary.json` in the run's folder, and the summary printed.

Each stage is a function taking the run's folder and a printer, returning a
short line for the summary, so later stages (the lab, an HTML report) slot in.
Replay and load run as `mcpbench` subprocesses, as a user would run them
(Locust must have a process of its own anyway).
"""

import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson

from mcpbench.lab.servers import reference_server
from mcpbench.outputs import new_run_folder
from mcpbench.protocol.errors import McpbenchError, TargetError

RESULTS = Path("results")

Stage = Callable[[Path, Callable[[str], None]], str]


def _server_argv() -> list[str]:
    return [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"]


def record_stdio(run_dir: Path, say: Callable[[str], None]) -> str:
    """Record one SDK session per era through the tee; print each timeline."""
    from mcp import StdioServerParameters

    from mcpbench.analysis.inspect import render, summarize
    from mcpbench.lab.drive import drive

    lines = []
    for mode, label in (("legacy", "handshake era"), ("auto", "2026-07-28 if both sides speak it")):
        trace = run_dir / f"stdio-{mode}.jsonl"
        argv = [sys.executable, "-m", "mcpbench", "tee", "--out", str(trace), "--", *_server_argv()]
        say(f"== record: official SDK client ({mode} mode, {label}) -> mcpbench tee -> reference stdio server")
        try:
            results = drive(StdioServerParameters(command=argv[0], args=argv[1:]), mode)
        except Exception as exc:  # the SDK raises many kinds; the one line is what matters
            raise TargetError(f"session with the reference stdio server failed: {exc}") from None
        report = summarize(trace)
        say(render(report))
        say("")
        calls = sum(len(s.calls) for s in report.sessions)
        lines.append(f"{trace} ({results['protocol_version']}, {calls} requests)")
    return "recorded " + "; ".join(lines)


# Bounds for the subprocess stages: generous for a busy 2-core machine, finite.
REPLAY_TIMEOUT = 300.0
LOAD_SECONDS = 5
LOAD_TIMEOUT = 180.0
# How long a stage's command may take to stop after the run is interrupted (Locust writes its CSVs).
CHILD_STOP_WAIT = 30.0


def _mcpbench(args: list[str], say: Callable[[str], None], timeout: float) -> subprocess.CompletedProcess:
    say("$ mcpbench " + shlex.join(args))
    child = subprocess.Popen([sys.executable, "-m", "mcpbench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: pass the stop on so the child stops its own children (Locust) too,
        # which a kill would orphan.
        child.send_signal(signal.SIGTERM)
        try:
            child.communicate(timeout=CHILD_STOP_WAIT)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        raise
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    for line in (proc.stdout + proc.stderr).rstrip().splitlines():
        say("  " + line)
    return proc


def replay_recording(run_dir: Path, say: Callable[[str], None]) -> str:
    """Replay the handshake-era recording on every transport; any change fails the job."""
    trace = run_dir / "stdio-legacy.jsonl"
    targets = {"stdio": "stdio:" + shlex.join(_server_argv())}
    outcomes = []
    with reference_server("streamable-http") as http, reference_server("sse") as sse:
        targets["streamable-http"] = http.url
        targets["sse"] = "sse+" + sse.url
        for transport, target in targets.items():
            say(f"== replay: {trace.name} -> {transport}")
            report = run_dir / f"replay-{transport}.json"
            proc = _mcpbench(["replay", str(trace), "--target", target, "--report", str(report)], say, REPLAY_TIMEOUT)
            if proc.returncode != 0:
                raise McpbenchError(f"replay against {target} exited {proc.returncode}; see {report}")
            outcomes.append(transport)
    return f"{trace.name} replayed on {', '.join(outcomes)} with no change"


def load_run(run_dir: Path, say: Callable[[str], None]) -> str:
    """A short load run on the reference Streamable HTTP server."""
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "streamable-http.yaml"
    out = run_dir / "load"
    with reference_server("streamable-http") as http:
        say(f"== load: {scenario.name} against {http.url}, {LOAD_SECONDS} s")
        args = ["load", str(scenario), "--target", http.url, "--users", "5", "--spawn-rate", "5", "--duration", f"{LOAD_SECONDS}s", "--out", str(out)]
        proc = _mcpbench(args, say, LOAD_TIMEOUT)
    if proc.returncode == 2:
        raise McpbenchError(f"load run could not run (exit 2); see {out}")
    summary = orjson.loads((out / "summary.json").read_bytes())
    verdict = "thresholds met" if proc.returncode == 0 else "a threshold failed"
    return f"{out} ({verdict}; {_load_line(summary)})"


def _load_line(summary: dict) -> str:
    total = summary["total"]
    return (
        f"{total['count']} calls, {total['failures']} failed, {total['rps']:.0f}/s, "
        f"p50 {total.get('p50', float('nan')):.1f} ms, p95 {total.get('p95', float('nan')):.1f} ms"
    )


STAGES: list[tuple[str, Stage]] = [("record", record_stdio), ("replay", replay_recording), ("load", load_run)]


def run(out: Path | None = None, say: Callable[[str], None] = print) -> Path:
    """Run every stage into `out` (default `results/<time>-run/`) and return that folder."""
    if out is None:
        run_dir = new_run_folder(RESULTS, "run")
    else:
        run_dir = out
        run_dir.mkdir(parents=True, exist_ok=True)
    summary = {name: stage(run_dir, say) for name, stage in STAGES}
    (run_dir / "summary.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    say("== report")
    for name, line in summary.items():
        say(f"  {name}: {line}")
    return run_dir
