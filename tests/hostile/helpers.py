"""What every hostile case asserts: the exit status, one line on stderr naming the culprit, no traceback.

Every command runs as its own process (`python -m mcpbench`), as a user would run it. When
`MCPBENCH_HOSTILE_STDERR` names a file, each run's stderr is appended to it, so the whole suite's
stderr can be searched for tracebacks at once (`grep -c Traceback`).
"""

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tests.support.servers import REPO_ROOT

MCPBENCH: Final = (sys.executable, "-m", "mcpbench")
# A bound on one command; no case waits this long unless the behaviour under test is broken.
RUN_TIMEOUT: Final = 120.0
EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_ENVIRONMENT = 0, 1, 2, 3


def run(
    args: Sequence[str],
    *,
    input: bytes | None = None,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = RUN_TIMEOUT,
) -> subprocess.CompletedProcess:
    """Run `mcpbench ARGS` to completion; stdout and stderr are captured as text."""
    result = subprocess.run(
        [*MCPBENCH, *args],
        input=input,
        capture_output=True,
        cwd=cwd or REPO_ROOT,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    result = subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
    )
    log_stderr(result.stderr)
    return result


def log_stderr(stderr: str) -> None:
    """Append one command's stderr to the suite's stderr log, when one is asked for."""
    log = os.environ.get("MCPBENCH_HOSTILE_STDERR")
    if log and stderr:
        with open(log, "a", encoding="utf-8") as file:
            file.write(stderr if stderr.endswith("\n") else stderr + "\n")


def assert_clean_failure(result: subprocess.CompletedProcess, status: int, *mentions: str) -> str:
    """Assert exit `status`, exactly one non-empty line on stderr, no traceback; return that line.

    Each of `mentions` (a file, line, option or URL) must appear in the line.
    """
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == status, (result.returncode, result.stderr)
    assert len(lines) == 1, result.stderr
    for mention in mentions:
        assert mention in lines[0], (mention, lines[0])
    return lines[0]
