"""What the capacity tests share: `mcpbench capacity` as a bounded subprocess, and a scenario for it."""

import subprocess
import sys
from pathlib import Path

from tests.support.servers import REPO_ROOT

# A capacity run's steps are bounded by its --max-time; Locust's start and stop come on top.
RUN_TIMEOUT = 120


def scenario_text(target: str, *, tool: str = "echo", arguments: str = "{text: hi}", users: int = 2) -> str:
    return f"target: {target}\nmix:\n  - call: tools/call\n    tool: {tool}\n    arguments: {arguments}\nusers: {users}\ntimeout: 10s\n"


def run_capacity(tmp_path: Path, scenario: str | None, *args: object, timeout: float = RUN_TIMEOUT) -> tuple[subprocess.CompletedProcess, Path]:
    """`mcpbench capacity` of `scenario` (YAML text) with `args`, into `tmp_path`/out."""
    path = tmp_path / "scenario.yaml"
    if scenario is not None:
        path.write_text(scenario)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "mcpbench", "capacity", path, "--out", out, *args]
    proc = subprocess.run([str(part) for part in cmd], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
    return proc, out
