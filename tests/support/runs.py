"""The long runs that several tests read, each made once per test session by the root conftest."""

import subprocess
import sys
from pathlib import Path
from typing import Final

from tests.support.servers import REPO_ROOT

MCPBENCH: Final = [sys.executable, "-m", "mcpbench"]
# The main job takes at most 3 minutes; more on a busy 2-core machine.
MAIN_JOB_TIMEOUT: Final = 900
LAB_TIMEOUT: Final = 300

# A small reconnect experiment: one cut Streamable HTTP cell per policy, the SDK client too.
RECONNECT_SCENARIO: Final = """\
name: reconnect-test
transports: [streamable-http]
faults:
  cut: {cut_streams_after: 1s}
policies: [none, resume]
sdk_client: true
reconnect: {idempotent: [echo]}
mix:
  - call: tools/call
    tool: slow
    arguments: {seconds: 1.5, steps: 6}
users: 1
spawn_rate: 1
duration: 5s
timeout: 10s
"""


def main_job(folder: Path) -> subprocess.CompletedProcess:
    """`mcpbench run --out FOLDER`, as `./dev run` runs it."""
    return subprocess.run([*MCPBENCH, "run", "--out", str(folder)], capture_output=True, text=True,
                          timeout=MAIN_JOB_TIMEOUT, cwd=REPO_ROOT)


def reconnect_experiment(folder: Path) -> subprocess.CompletedProcess:
    """`mcpbench lab run` on RECONNECT_SCENARIO, into `folder / "out"`."""
    path = folder / "reconnect.yaml"
    path.write_text(RECONNECT_SCENARIO)
    return subprocess.run([*MCPBENCH, "lab", "run", str(path), "--out", str(folder / "out")],
                          capture_output=True, text=True, timeout=LAB_TIMEOUT, cwd=REPO_ROOT)
