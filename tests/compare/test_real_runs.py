"""Real load runs against the reference server, compared: the same build within noise; one tool
slowed on purpose (`lab serve --slow slow=100%`) slower on its step and only on it.

Each side is two runs, each run side by side with one of the other's, the first started alternating
between the sides (on a busy 2-core machine the run started first comes out slower, by tens of
percent on a 3 ms call): judged between runs (t over 2 + 2 runs). One pair a side is not enough
here: two server processes of one build, side by side on a machine at a load of 15, were seen 80 %
apart on `echo` for a whole run (docs/compare.md). The same build's runs load one server process;
the slowed comparison needs two, so the step not slowed is held to "not slower" rather than to
"within noise". The tool is slowed by 100 % (20 ms more): two runs a side, seconds long, judge
changes of tens of percent (`mcpbench bench compare` measures 20 %).
"""

import os
import subprocess

import orjson
import pytest

from tests.compare.helpers import TRIM, compare_cmd, interleaved_pairs
from tests.support.servers import REPO_ROOT, reference_server

pytestmark = pytest.mark.slow


def judged(bases, news, out) -> tuple[int, dict[str, str], str]:
    sides = [arg for base in bases for arg in ("--base", base)] + [arg for new in news for arg in ("--new", new)]
    proc = subprocess.run(compare_cmd(*sides, "--out", out, "--fail-on", "p50>+10%", "--trim", TRIM), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    output = proc.stdout + proc.stderr
    if proc.returncode == 2 and "too few samples to judge any step" in proc.stderr:
        # a machine so busy that 6 users made under 50 calls of a step in 4 s: no verdict is the right answer
        pytest.skip(f"the machine is too busy for these runs (load {os.getloadavg()[0]:.0f}): {output.splitlines()[-1]}")
    steps = orjson.loads((out / "compare.json").read_bytes())["steps"]
    return proc.returncode, {s["step"]: s["verdict"] for s in steps}, output


def test_the_same_build_within_noise_and_a_slowed_tool_slower_on_its_step_alone(tmp_path):
    with (reference_server("streamable-http") as one,
          reference_server("streamable-http", extra_args=["--slow", "slow=100%"]) as slowed):
        status, verdicts, output = judged(*interleaved_pairs(tmp_path / "same", one.url, one.url), tmp_path / "same-compare")
        # no rule broken: each quantile is judged at 95 %, so over two steps' p50 and p95 a verdict of
        # slower or faster by a few percent comes up by chance in some runs; a change past +10 % does not
        assert status == 0 and "FAIL" not in output, output
        assert "2 + 2 runs: each run's quantile is one observation" in output

        bases, news = interleaved_pairs(tmp_path / "slowed", one.url, slowed.url)
        status, verdicts, output = judged(bases, news, tmp_path / "slowed-compare")
    assert verdicts["tools/call slow"] == "slower", output
    assert verdicts["tools/call echo"] != "slower", output
    assert status == 1 and "FAIL  tools/call slow: p50" in output and "FAIL  tools/call echo" not in output
    assert (bases[0] / "histograms.json").is_file()  # what the load wrote, and compare read
