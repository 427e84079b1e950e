"""The reference servers (`mcpbench.lab.servers`) shared by every test module: one process per
configuration, started when a test first asks for it and stopped when the test session ends.

Tests that stop, kill or overload a server, or need one of an unusual configuration, start their
own with `tests.support.servers.reference_server`.
"""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import REPO_ROOT, RunningServer, reference_server


@pytest.fixture(scope="session")
def http_server() -> Iterator[RunningServer]:
    """Streamable HTTP with sessions and SSE answers (the SDK's defaults)."""
    with reference_server("streamable-http") as server:
        yield server


@pytest.fixture(scope="session")
def json_http_server() -> Iterator[RunningServer]:
    """Streamable HTTP with sessions and JSON answers (`--json-response`)."""
    with reference_server("streamable-http", json_response=True) as server:
        yield server


@pytest.fixture(scope="session")
def stateless_http_server() -> Iterator[RunningServer]:
    """Streamable HTTP without sessions (`--stateless`): no Mcp-Session-Id is minted."""
    with reference_server("streamable-http", stateless=True) as server:
        yield server


@pytest.fixture(scope="session")
def sse_server() -> Iterator[RunningServer]:
    """Legacy HTTP+SSE (`GET /sse` and its endpoint)."""
    with reference_server("sse") as server:
        yield server


# A small reconnect experiment: one cut Streamable HTTP cell per policy, the SDK client too.
RECONNECT_SCENARIO = """\
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


@pytest.fixture(scope="session")
def reconnect_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """`mcpbench lab run` on a small reconnect scenario, once per session: (the process, its folder)."""
    folder = tmp_path_factory.mktemp("reconnect")
    path = folder / "reconnect.yaml"
    path.write_text(RECONNECT_SCENARIO)
    out = folder / "out"
    proc = subprocess.run([sys.executable, "-m", "mcpbench", "lab", "run", str(path), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    return proc, out
