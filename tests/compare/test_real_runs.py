"""Real load runs against the reference server, compared: the same build within noise; one tool
slowed on purpose (`lab serve --slow slow=20%`) slower on its step and only on it.

The two runs of a pair go side by side, so they share the machine's load as runs minutes apart on
a shared machine would not. The same build's pair loads one server process (two processes of the
same build differ by how a busy 2-core machine schedules them: tens of percent on a 3 ms call, a
real difference no resampling of the runs can tell from a change); the slowed pair needs two, so
the step not slowed is held to "not slower" rather than to "within noise".
"""

import os
import subprocess

import orjson
import pytest

from tests.compare.helpers import TRIM, compare_cmd, loads_side_by_side
from tests.support.servers import REPO_ROOT, reference_server

pytestmark = pytest.mark.slow


def judged(base, new, out) -> tuple[int, dict[str, str], str]:
    proc = subprocess.run(compare_cmd(base, new, "--out", out, "--fail-on", "p50>+10%", "--trim", TRIM), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    output = proc.stdout + proc.stderr
    if proc.returncode == 2 and "too few samples to judge any step" in proc.stderr:
        # a machine so busy that 4 users made under 50 calls of a step in 4 s: no verdict is the right answer
        pytest.skip(f"the machine is too busy for these runs (load {os.getloadavg()[0]:.0f}): {output.splitlines()[-1]}")
    steps = orjson.loads((out / "compare.json").read_bytes())["steps"]
    return proc.returncode, {s["step"]: s["verdict"] for s in steps}, output


def test_the_same_build_within_noise_and_a_slowed_tool_slower_on_its_step_alone(tmp_path):
    with (reference_server("streamable-http") as one,
          reference_server("streamable-http", extra_args=["--slow", "slow=20%"]) as slowed):
        same = loads_side_by_side(tmp_path / "same", {"base": one.url, "new": one.url})
        status, verdicts, output = judged(same["base"], same["new"], tmp_path / "same-compare")
        assert status == 0, output
        assert verdicts["tools/call echo"] == verdicts["tools/call slow"] == "within noise", output

        pair = loads_side_by_side(tmp_path / "slowed", {"base": one.url, "new": slowed.url})
        status, verdicts, output = judged(pair["base"], pair["new"], tmp_path / "slowed-compare")
    assert verdicts["tools/call slow"] == "slower", output
    assert verdicts["tools/call echo"] != "slower", output
    assert status == 1 and "FAIL  tools/call slow: p50" in output and "FAIL  tools/call echo" not in output
    assert (pair["base"] / "histograms.json").is_file()  # what the load wrote, and compare read
