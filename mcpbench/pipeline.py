"""The main job, `mcpbench run`: capture → trace → (replay, load) → report, on the built-in defaults.

Today it records sessions of the reference stdio server through the tee,
driven by the official SDK client in both eras, and prints their timelines.
Each stage is a function taking the run's folder and returning a short line
for the final summary, so later stages (replay, load, report) slot in.
"""

import sys
import time
from collections.abc import Callable
from pathlib import Path

from mcpbench.protocol.errors import TargetError

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


STAGES: list[tuple[str, Stage]] = [("record", record_stdio)]


def run(out: Path | None = None, say: Callable[[str], None] = print) -> Path:
    """Run every stage into `out` (default `results/run-<time>/`) and return that folder."""
    run_dir = out or RESULTS / time.strftime("run-%Y%m%dT%H%M%S", time.gmtime())
    run_dir.mkdir(parents=True, exist_ok=True)
    summary = [f"{name}: {stage(run_dir, say)}" for name, stage in STAGES]
    say("== summary")
    for line in summary:
        say(f"  {line}")
    return run_dir
