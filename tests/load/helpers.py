"""What the load tests share: `mcpbench load` as a bounded subprocess."""

import subprocess
import sys
from pathlib import Path

from tests.support.servers import REPO_ROOT

# Every load run is bounded: load seconds plus locust startup/shutdown, well under this.
RUN_TIMEOUT = 90


def load_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "mcpbench", "load", *map(str, args)]


def run_load(tmp_path: Path, scenario: str | None, *args, timeout: float = RUN_TIMEOUT) -> tuple[subprocess.CompletedProcess, Path]:
    """`mcpbench load` of `scenario` (YAML text; None: none, say --target and --from-trace) into `tmp_path`/out."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "scenario.yaml"
    if scenario is not None:
        path.write_text(scenario)
    out = tmp_path / "out"
    given = [path] if scenario is not None else []
    proc = subprocess.run(load_cmd(*given, "--out", out, *args), cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
    return proc, out
