"""The whole hostile suite's stderr holds no traceback (`grep -c Traceback` is 0).

`helpers.run` (and the signal cases) append each command's stderr to $MCPBENCH_HOSTILE_STDERR.
This module is collected with the others, before any case runs, and sets that variable when
it is unset; its case, named to run after the other files of tests/hostile/, reads the log.
Run alone (no other hostile case ran) it has nothing to check and skips.
"""

import os
import tempfile
from pathlib import Path

import pytest

LOG_ENV = "MCPBENCH_HOSTILE_STDERR"

if not os.environ.get(LOG_ENV):
    _handle, _path = tempfile.mkstemp(prefix="mcpbench-hostile-", suffix=".stderr")
    os.close(_handle)
    os.environ[LOG_ENV] = _path


def test_no_traceback_in_the_stderr_of_the_hostile_cases():
    log = Path(os.environ[LOG_ENV])
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    if not text:
        pytest.skip("no hostile case ran before this one")
    assert text.count("Traceback") == 0, text[max(0, text.index("Traceback") - 2000):][:6000]
