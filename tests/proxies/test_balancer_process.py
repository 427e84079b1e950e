"""The lab's balancer process (`python -m mcpbench.proxies.balancer`, through `mcpbench.proxies.host`): what
it says when it cannot start. Its working path is `lab up`'s (tests/lab/topology/test_up.py, test_lab_faults.py)."""

import socket
import subprocess
import sys

import pytest

from tests.hostile.helpers import assert_clean_failure
from tests.support.servers import REPO_ROOT

BALANCER = [sys.executable, "-m", "mcpbench.proxies.balancer"]
RUN_TIMEOUT = 60


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*BALANCER, *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=RUN_TIMEOUT)


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize(("args", "mention"), [
    (["--listen", "127.0.0.1:0"], "--upstream"),
    (["--upstream", "ftp://x", "--listen", "127.0.0.1:0"], "--upstream"),
    (["--upstream", "http://127.0.0.1:1", "--listen", "8000"], "--listen"),
    (["--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--set", "mcpbench_balancer_instances=127.0.0.1:1",
      "--set", "mcpbench_balancer_policy=nope"], "unknown policy 'nope'"),
    (["--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--set", "mcpbench_faults_drop=5%"], "mcpbench_faults_drop"),
])
def test_a_bad_argument_or_option_is_one_line_and_exit_2(args: list[str], mention: str) -> None:
    line = assert_clean_failure(_run(*args), 2, mention)
    assert line.startswith("mcpbench balancer: ")


def test_a_taken_address_ends_it_with_exit_3() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run("--upstream", "http://127.0.0.1:1", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 3 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == f"mcpbench balancer: --listen 127.0.0.1:{port}: mitmproxy could not start there (see its errors above)"
