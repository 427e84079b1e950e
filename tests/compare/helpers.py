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


# Short real runs bounded in calls, not time: `echo` (instant) and `slow` sleeping 200 ms, the tool
# a test slows by a fixed 2 s (`lab serve --slow slow=+2s`). On a 2-core machine at a load of 6 to 12
# the CPU queue, and a run's place among runs starting side by side, moved the p50 of a 1 ms sleep
# from 44 to 262 ms between runs (slowed by 250 ms it was judged "within noise"); on a 200 ms sleep
# the p50 stayed within 226 to 357 ms, and 2 s more is several times the whole call. About 50 calls a
# step a run, by 20 users: a base run takes a second or two, a slowed one about 5 s. 20 sessions a run
# keep the session start's steps under compare's 50 calls a side, unjudged: they overlap the other
# runs' Python and Locust start-up, which the order of starting sets (25 users: the same build's
# `notifications/initialized` came out +593 %, interval +53 % to +3038 % at 99 %).
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
    arguments: {seconds: 0.2, steps: 1}
    weight: 1
think_time: [0.0, 0.005]
users: 20
spawn_rate: 200
calls: 100
duration: 30s
timeout: 10s
"""
SLOWDOWN = "slow=+2s"


def loads_side_by_side(tmp_path: Path, urls: dict[str, str]) -> dict[str, Path]:
    """`mcpbench load` of SCENARIO against each url at the same time, started in the dict's order
    (one run folder per name).

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


def interleaved_runs(tmp_path: Path, urls: dict[str, str], rounds: int = 2) -> dict[str, list[Path]]:
    """`rounds` rounds of runs side by side, one per name a round: the first two names swap places
    in the order of starting from one round to the next, the rest start after them.

    On a busy 2-core machine a run's place in the order of starting sets its latency by tens of
    percent (the others' Python and Locust start-up take the CPU while it runs): the two sides judged
    for noise take each place once, and two runs a side let the comparison judge with the spread
    between runs. A third side, slowed many times that, starts last in every round.
    """
    names = list(urls)
    runs: dict[str, list[Path]] = {name: [] for name in names}
    for number in range(rounds):
        order = names if number % 2 == 0 else [names[1], names[0], *names[2:]]
        for name, folder in loads_side_by_side(tmp_path / f"round-{number}", {name: urls[name] for name in order}).items():
            runs[name].append(folder)
    return runs
