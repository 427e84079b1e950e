"""The one fixture set shared by every test module, each made once per test session when a test first asks.

- The reference servers (`mcpbench.lab.servers`), one process per kind: `http_server`,
  `json_http_server`, `stateless_http_server`, `sse_server`. Tests that stop, kill or overload a
  server, or need one of another configuration, start their own with
  `tests.support.servers.reference_server`.
- `recordings`: a stdio recording of the reference server per era (tests/support/recordings.py).
- The long runs (tests/support/runs.py): `main_job`, the folder of one `mcpbench run`, read by the
  pipeline and analysis tests; `reconnect_run`, a small reconnect experiment. A test that uses one is
  marked `slow`, and its time limit grows by that run's, since whichever test comes first waits for it.
"""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import runs
from tests.support.recordings import MODES, record
from tests.support.servers import RunningServer, reference_server

# session fixture -> the seconds it may take: added to the time limit of a test that uses it
# (pytest-timeout counts fixture setup, and the first test to ask waits for the run)
LONG_RUNS = {"main_job": runs.MAIN_JOB_TIMEOUT, "reconnect_run": runs.LAB_TIMEOUT}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        extra = sum(limit for name, limit in LONG_RUNS.items() if name in getattr(item, "fixturenames", ()))
        if extra:
            own = item.get_closest_marker("timeout")
            limit = own.args[0] if own and own.args else float(config.getini("timeout"))
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.timeout(limit + extra), append=False)


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


@pytest.fixture(scope="session")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"legacy": trace, "auto": trace}: one stdio recording per era. Read them, never write them."""
    folder = tmp_path_factory.mktemp("recordings")
    return {mode: record(folder / f"{mode}.jsonl", mode) for mode in MODES}


@pytest.fixture(scope="session")
def main_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    """`mcpbench run` once per session: (the process, its folder). Read the folder, never write into it."""
    folder = tmp_path_factory.mktemp("main-job")
    return runs.main_job(folder), folder


@pytest.fixture(scope="session")
def reconnect_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    """`mcpbench lab run` on a small reconnect scenario, once per session: (the process, its folder)."""
    folder = tmp_path_factory.mktemp("reconnect")
    return runs.reconnect_experiment(folder), folder / "out"
