"""What the compare tests share: synthetic load run folders, and real load runs side by side."""

import subprocess
import sys
from pathlib import Path

from mcpbench.bench.compare import synthetic_run
from tests.support.servers import REPO_ROOT

# Two steps, log-normal: echo fast, add a little slower.
MIX = {"tools/call echo": (0.7, 3.0, 0.4), "tools/call add": (0.3, 4.0, 0.4)}
# Enough samples per step for p99 to be judged (500 needed) and for a change of --min-change (3 %)
# to be twice the noise of a p50 (a same-build pair within noise but by chance), few enough to write in a blink.
SAMPLES = 8000
# Every real load run is bounded: its seconds of load plus Locust's start and stop, well under this.
RUN_TIMEOUT = 90


def run_folder(folder: Path, *, seed: int, samples: int = SAMPLES, slower: dict[str, float] | None = None,
               mix: dict | None = None, fail_ratio: float = 0.0, scenario: str = "synthetic", histograms: bool = True,
               rate: float = 2000.0, slow_start: float = 0.0, start: float = 1_796_000_000.0) -> Path:
    """A load run folder of synthetic samples (the load's own line writer, and its histograms.json)."""
    return synthetic_run(folder, samples, seed=seed, slower=slower, mix=mix or MIX, fail_ratio=fail_ratio,
                         scenario=scenario, with_histograms=histograms, rate=rate, slow_start=slow_start, start=start)


def compare_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "mcpbench", "compare", *map(str, args)]


# Short real runs: `echo` (instant) and `slow` sleeping 20 ms, the tool a test slows by 20 %.
# Side by side, two runs start a second or two apart: compare them with TRIM left out at each end.
SCENARIO = """\
name: compare-test
session: long_lived
era: handshake
mix:
  - call: tools/call
    tool: echo
    arguments: {text: "hello"}
    weight: 1
  - call: tools/call
    tool: slow
    arguments: {seconds: 0.02, steps: 1}
    weight: 1
think_time: [0.0, 0.005]
users: 6
spawn_rate: 6
duration: 6s
timeout: 10s
"""


TRIM = "0.5s"


def loads_side_by_side(tmp_path: Path, urls: dict[str, str]) -> dict[str, Path]:
    """`mcpbench load` of SCENARIO against each url at the same time (one run folder per name).

    Side by side, the runs share whatever else the machine is doing, as two runs minutes apart on a
    shared machine would not.
    """
    tmp_path.mkdir(parents=True, exist_ok=True)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    procs, outs = {}, {}
    try:
        for name, url in urls.items():
            outs[name] = tmp_path / name
            procs[name] = subprocess.Popen([sys.executable, "-m", "mcpbench", "load", str(scenario), "--target", url, "--out", str(outs[name])],
                                           cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for name, proc in procs.items():
            output, _ = proc.communicate(timeout=RUN_TIMEOUT)
            assert proc.returncode == 0, f"load against {urls[name]} exited {proc.returncode}:\n{output}"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outs


def interleaved_pairs(tmp_path: Path, base_url: str, new_url: str, pairs: int = 2) -> tuple[list[Path], list[Path]]:
    """`pairs` side-by-side pairs of runs, base started first in one pair and new in the next.

    On a busy 2-core machine the run started first of two comes out slower, by up to tens of
    percent on a 3 ms call; alternating the order puts that on both sides, and two runs a side let
    the comparison judge with the spread between runs.
    """
    bases, news = [], []
    for number in range(pairs):
        order = {"base": base_url, "new": new_url} if number % 2 == 0 else {"new": new_url, "base": base_url}
        runs = loads_side_by_side(tmp_path / f"pair-{number}", order)
        bases.append(runs["base"])
        news.append(runs["new"])
    return bases, news
