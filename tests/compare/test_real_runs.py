"""Real load runs against the reference server, compared: the same build within noise; one tool
slowed on purpose (`lab serve --slow slow=+2s`) slower on its step and only on it.

Each side is two runs bounded in calls; in each of two rounds the three (base and a second base
against one server, new against the slowed one) run side by side, base and the second base swapping
places in the order of starting (on a busy 2-core machine the order sets a run's latency by tens of
percent): judged between runs (t over 2 + 2 runs). The same build's runs load one server process; the
slowed comparison needs two (two processes of one build were seen 80 % apart on `echo` for a whole
run at a load of 15, docs/compare.md), so the step not slowed is held to "not slower" rather than to
"within noise". The slowdown (2 s on a 200 ms sleep) is ten times the call and the sleep holds the
spread between runs under a factor of 2, so the t interval over 2 degrees of freedom (t = 4.3)
still lies wholly above zero;
`mcpbench bench compare` measures the 20 % a longer run can judge.
"""

import subprocess

import orjson
import pytest

from tests.compare.helpers import SLOWDOWN, compare_cmd, interleaved_runs
from tests.support.servers import REPO_ROOT, reference_server

pytestmark = pytest.mark.slow


def judged(bases, news, out, confidence: float) -> tuple[int, dict[str, str], str]:
    sides = [arg for base in bases for arg in ("--base", base)] + [arg for new in news for arg in ("--new", new)]
    # No --trim: the runs are bounded in calls, and a base run is over in about a second.
    proc = subprocess.run(compare_cmd(*sides, "--out", out, "--fail-on", "p50>+10%", "--confidence", confidence),
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    output = proc.stdout + proc.stderr
    steps = orjson.loads((out / "compare.json").read_bytes())["steps"]
    return proc.returncode, {s["step"]: s["verdict"] for s in steps}, output


def test_the_same_build_within_noise_and_a_slowed_tool_slower_on_its_step_alone(tmp_path):
    with (reference_server("streamable-http") as one,
          reference_server("streamable-http", extra_args=["--slow", SLOWDOWN]) as slowed):
        runs = interleaved_runs(tmp_path, {"base": one.url, "same": one.url, "slowed": slowed.url})

    # No rule broken, judged at 99.9 % (t = 31.6). At 95 % the same build failed p50>+10% in 4 of 9
    # runs of this test at a load of 10 to 12 (e.g. echo +37 %, interval +3.5 % to +81 %): the run of
    # a pair that really starts first (launching it first does not decide that) runs through the
    # other's Python and Locust start-up, and its echo p50 was up to 10 times the other's (11 pairs of 12).
    status, verdicts, output = judged(runs["base"], runs["same"], tmp_path / "same-compare", confidence=0.999)
    assert status == 0 and "FAIL" not in output, output
    assert "2 + 2 runs: each run's quantile is one observation" in output

    status, verdicts, output = judged(runs["base"], runs["slowed"], tmp_path / "slowed-compare", confidence=0.95)
    assert verdicts["tools/call slow"] == "slower", output
    assert verdicts["tools/call echo"] != "slower", output
    assert status == 1 and "FAIL  tools/call slow: p50" in output and "FAIL  tools/call echo" not in output
    assert (runs["base"][0] / "histograms.json").is_file()  # what the load wrote, and compare read
