"""What every hostile case asserts: the exit status, one line on stderr naming the culprit, no traceback.

Every command runs as its own process (`python -m mcpbench`), as a user would run it. Each
command's stderr, whatever the case expects of it, passes `assert_no_traceback` (`run` does it; the
cases that start a command themselves call it), so no hostile case's stderr holds a traceback,
whatever order the cases run in and on whichever worker.
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
    assert_no_traceback(result.stderr)
    return result


def assert_no_traceback(stderr: str) -> None:
    """Assert one command's stderr holds no traceback (`grep -c Traceback` is 0), showing where one is."""
    at = stderr.find("Traceback")
    assert at < 0, stderr[max(0, at - 2000):][:6000]


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
