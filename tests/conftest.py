"""The one fixture set shared by every test module, each made once per test session when a test first asks.

- The reference servers (`mcpbench.lab.peers.servers`), one process per kind: `http_server`,
  `json_http_server`, `stateless_http_server`, `sse_server`. Tests that stop, kill or overload a
  server, or need one of another configuration, start their own with
  `tests.support.servers.reference_server`.
- `recordings`: a stdio recording of the reference server per era (tests/support/recordings.py).
- Peers that differ from the SDK 2.x as the specification allows (tests/support/peers): an SDK 1.x
  server (`sdk1_http_server`, skipped with its reason where its virtualenv cannot be made), the
  TypeScript SDK's server and client (`ts_sdk`, skipped likewise without Node.js), a strict
  handshake-only server (`strict_http_server`; `session_http_server` wants a session id on every
  POST), and recordings of the SDK 2.x client's `auto` mode (a `server/discover` probe, then the
  handshake) and of sessionless traffic (`*_recording`).
- The long runs (tests/support/runs.py): `main_job`, the folder of one `mcpbench run`, read by the
  pipeline and analysis tests; `reconnect_run`, a small reconnect experiment. When a selected test
  uses one, it starts with the session's first test and runs beside the others; the tests that use it
  run last, are marked `slow`, and get its time limit on top of theirs (the first one waits for it).
"""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import peers, runs, timings
from tests.support.fuzz import register_profiles
from tests.support.recordings import MODES, record
from tests.support.servers import RunningServer, reference_server

register_profiles()  # Hypothesis's `suite` (the default) and `long` (`--hypothesis-profile long`)

# Bytecode is cached for the session's processes: with PYTHONDONTWRITEBYTECODE (set in many container
# images) each Python process the suite starts (servers, recorders, commands, xdist's workers) compiled
# mcpbench and the test modules anew, a sixth of the CPU time of the files measured. __pycache__ is in .gitignore.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# pytest's own fixture for testing plugins (tests/testing/ run example projects with the mcpbench plugin).
pytest_plugins = ("pytester",)

# session fixture -> the seconds it may take: added to the time limit of a test that uses it
# (pytest-timeout counts fixture setup, and the first test to ask waits for the run)
LONG_RUNS = {"main_job": runs.MAIN_JOB_TIMEOUT, "reconnect_run": runs.LAB_TIMEOUT}


def long_runs_of(item: pytest.Item) -> list[str]:
    return [name for name in LONG_RUNS if name in getattr(item, "fixturenames", ())]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if extra := sum(LONG_RUNS[name] for name in long_runs_of(item)):
            own = item.get_closest_marker("timeout")
            limit = own.args[0] if own and own.args else float(config.getini("timeout"))
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.timeout(limit + extra), append=False)
    # Stable: the modules that read a long run go last, whole (xdist's `--dist loadfile` sends a
    # module to one worker, at the place of its first test). Before them, the longest modules first
    # by their stored seconds (tests/support/timings.py), the quick ones after them: the workers
    # then end together, not one running a long module alone at the end.
    reading = {item.path for item in items if long_runs_of(item)}
    seconds = timings.seconds_by_module(items)
    items.sort(key=lambda item: (item.path in reading, -seconds[timings.module_of(item.nodeid)]))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true", default=False,
                     help="write each module's seconds in this run into tests/module_seconds.json (the workers' order)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("store_durations") and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(timings.Recorder(), "module-seconds")


class LongRuns:
    """The session's long runs: started on first need, stopped (if still running) when the session ends.

    Under pytest-xdist (`shared`: the workers' common temporary folder) one worker runs each and the
    others read its outcome (tests/support/runs.py)."""

    STARTS = {"main_job": runs.main_job, "reconnect_run": runs.reconnect_experiment}

    def __init__(self, factory: pytest.TempPathFactory, shared: Path | None) -> None:
        self.factory = factory
        self.shared = shared
        self.started: dict[str, runs.BackgroundRun | runs.SharedRun | runs.AwaitedRun] = {}

    def get(self, name: str) -> runs.BackgroundRun | runs.SharedRun | runs.AwaitedRun:
        if name not in self.started:
            start = self.STARTS[name]
            folder_name = name.replace("_", "-")
            if self.shared is None:
                self.started[name] = start(self.factory.mktemp(folder_name))
            elif runs.claimed(self.shared, name):
                folder = self.shared / folder_name
                folder.mkdir()
                self.started[name] = runs.SharedRun(start(folder), self.shared / f"{name}.done")
            else:
                self.started[name] = runs.AwaitedRun(self.shared / f"{name}.done", LONG_RUNS[name])
        return self.started[name]


@pytest.fixture(scope="session", autouse=True)
def long_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LongRuns]:
    """Starts, with the first test, every long run a selected test will read."""
    # An xdist worker's temporary folder is one of its run's: their parent is the workers' common one.
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    started = LongRuns(tmp_path_factory, shared)
    try:
        for name in sorted({name for item in request.session.items for name in long_runs_of(item)}):
            started.get(name)
        yield started
    finally:
        for run in started.started.values():
            run.stop()


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
def main_job(long_runs: LongRuns) -> tuple[subprocess.CompletedProcess, Path]:
    """`mcpbench run` once per session: (the process, its folder). Read the folder, never write into it."""
    run = long_runs.get("main_job")
    return run.result(), run.out


@pytest.fixture(scope="session")
def reconnect_run(long_runs: LongRuns) -> tuple[subprocess.CompletedProcess, Path]:
    """`mcpbench lab run` on a small reconnect scenario, once per session: (the process, its folder)."""
    run = long_runs.get("reconnect_run")
    return run.result(), run.out


@pytest.fixture(scope="session")
def sdk1_python(request: pytest.FixtureRequest) -> Path:
    """A virtualenv's interpreter with the official SDK 1.x: made once, kept in pytest's cache folder."""
    return _made_or_skipped(peers.sdk1_python, request.config.cache.mkdir("sdk1-venv"))


@pytest.fixture(scope="session")
def ts_sdk(request: pytest.FixtureRequest) -> Path:
    """A folder with the official TypeScript SDK (v2) and its peers' scripts: made once, kept in pytest's cache folder."""
    return _made_or_skipped(peers.ts_sdk, request.config.cache.mkdir("ts-sdk"))


def _made_or_skipped(make, folder: Path) -> Path:
    """A peer's installation made in `folder`, or the test skipped with the one line that says why not."""
    try:
        return make(folder)
    except peers.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def sdk1_http_server(sdk1_python: Path) -> Iterator[str]:
    """An SDK 1.x Streamable HTTP server (stateful): its URL."""
    with peers.http_peer(peers.sdk1_argv(sdk1_python, "streamable-http")) as url:
        yield url


@pytest.fixture(scope="session")
def strict_http_server() -> Iterator[str]:
    """The strict handshake-only server over Streamable HTTP: its URL."""
    with peers.http_peer(peers.strict_argv("streamable-http")) as url:
        yield url


@pytest.fixture(scope="session")
def session_http_server() -> Iterator[str]:
    """The strict server wanting a session id on every POST but initialize: its URL."""
    with peers.http_peer(peers.strict_argv("streamable-http"), "--require-session") as url:
        yield url


@pytest.fixture(scope="session")
def probe_stdio_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK's `auto` client against the strict server over stdio: its failed `server/discover`
    probe and its handshake in one session."""
    return peers.record_stdio(peers.strict_argv("stdio"), tmp_path_factory.mktemp("probe") / "probe-stdio.jsonl")


@pytest.fixture(scope="session")
def probe_http_recording(tmp_path_factory: pytest.TempPathFactory, session_http_server: str) -> Path:
    """The SDK's `auto` client against the server that wants a session id for the probe too
    (HTTP 400, a plain-text body): the probe fails, the handshake follows."""
    return peers.record_http(session_http_server, tmp_path_factory.mktemp("probe") / "probe-http.jsonl")


@pytest.fixture(scope="session")
def stateless_recording(tmp_path_factory: pytest.TempPathFactory, stateless_http_server: RunningServer) -> Path:
    """The SDK's handshake against the stateless reference server: sessionless traffic, one key per connection."""
    return peers.record_http(stateless_http_server.url, tmp_path_factory.mktemp("stateless") / "stateless.jsonl", "legacy")


@pytest.fixture(scope="session")
def sse_recording(tmp_path_factory: pytest.TempPathFactory, sse_server: RunningServer) -> Path:
    """An OAuth discovery probe (not MCP), then a legacy SSE session the client closes."""
    return peers.record_http(sse_server.url, tmp_path_factory.mktemp("sse") / "sse.jsonl", "legacy",
                             probe="/.well-known/oauth-protected-resource")


@pytest.fixture(scope="session")
def sdk1_recording(tmp_path_factory: pytest.TempPathFactory, sdk1_http_server: str) -> Path:
    """The SDK 2.x `auto` client against the SDK 1.x server, after a GET without a session (a probe):
    the refusals carry the JSON-RPC id "server-error"."""
    return peers.record_http(sdk1_http_server, tmp_path_factory.mktemp("sdk1") / "sdk1.jsonl", probe="/mcp")
