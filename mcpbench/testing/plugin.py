"""mcpbench's pytest plugin, in pytest-recording's conventions (registered as the `pytest11` entry point).

Client code against a recorded server::

    @pytest.mark.mcp_trace(server="stdio:python -m weather_server")
    def test_agent(mcp_mock):
        run_my_agent(mcp_mock.sdk_target())    # or mcp_mock.url / mcp_mock.command + mcp_mock.args

Server code against its recordings::

    @pytest.mark.mcp_trace("session.jsonl", server="stdio:python -m weather_server")
    def test_server(mcp_replay):
        mcp_replay()                            # fails naming each changed path, old → new

Traces live in `<test folder>/mcp_traces/<module>/<test>.jsonl` (`mcp_trace_dir`, `default_mcp_trace_name`);
`--mcp-record-mode=none|once|new_episodes|all` (default none) says whether a real server is reached
(`settings.py`). A project's defaults go in an `mcp_config` fixture; a real server that needs a
fixture of its own (a URL it started) in an `mcp_server` fixture, asked for only while recording.
Nothing here runs, and nothing heavy is imported, unless a test asks for a fixture.
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpbench.testing.settings import DEFAULT_MODE, RECORD_MODES, Action, FixtureSettings, SettingsError, build, default_trace_name

MARKER = "mcp_trace"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpbench", "MCP record and replay (mcpbench)")
    group.addoption("--mcp-record-mode", choices=RECORD_MODES, default=None,
                    help=f"When the mcp_mock fixture reaches the real server (default {DEFAULT_MODE}: never; once: "
                         "to record a missing trace; new_episodes: for what a trace lacks; all: always, re-recording).")
    group.addoption("--mcp-learn-noise", action="store_true", default=False,
                    help="mcp_replay: replay each trace twice first and keep the paths that differ as noise rules "
                         "beside it (TRACE.noise.json).")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(name=None, *, server=None, command=None, transport=None, record_mode=None, pace=None, "
        "json_response=False, dir=None, ignore=(), timeout=30, protocol_version=None, learn_noise=False): "
        "the MCP trace of this test (mcpbench) and the real server behind it.",
    )


@pytest.fixture(scope="session")
def mcp_record_mode(request: pytest.FixtureRequest) -> str:
    """The record mode from the command line (`--mcp-record-mode`), default none."""
    return request.config.getoption("--mcp-record-mode") or DEFAULT_MODE


@pytest.fixture
def mcp_config() -> dict[str, Any]:
    """A project's defaults for every test (override in a conftest); the marker's keywords win over them."""
    return {}


@pytest.fixture(scope="module")
def mcp_trace_dir(request: pytest.FixtureRequest) -> Path:
    """Each test module's traces in a folder of their own: `<module folder>/mcp_traces/<module name>/`."""
    module = Path(str(request.node.path))
    return module.parent / "mcp_traces" / module.stem


@pytest.fixture
def default_mcp_trace_name(request: pytest.FixtureRequest) -> str:
    """`<test name>.jsonl`, or `<Class>.<test name>.jsonl` for a method (parameters in the name)."""
    return default_trace_name(request.node.name, request.cls.__name__ if request.cls else None)


@pytest.fixture
def mcp_server() -> str | None:
    """The real server, as a target string; override it when a fixture of yours starts the server."""
    return None


@pytest.fixture
def mcp_settings(request: pytest.FixtureRequest, mcp_config: dict, mcp_trace_dir: Path, default_mcp_trace_name: str,
                 mcp_record_mode: str) -> FixtureSettings:
    """This test's settings: `mcp_config`, then its `mcp_trace` marker, then the command line's mode."""
    marker = request.node.get_closest_marker(MARKER)
    try:
        return build(mcp_config, marker.args if marker else (), marker.kwargs if marker else {},
                     trace_dir=mcp_trace_dir, default_name=default_mcp_trace_name, cli_mode=mcp_record_mode)
    except SettingsError as exc:
        failure = f"mcpbench: {exc}"
    pytest.fail(failure, pytrace=False)  # outside the handler: pytest would show the error it chains


@pytest.fixture
def mcp_mock(request: pytest.FixtureRequest, mcp_settings: FixtureSettings) -> Iterator[Any]:
    """The target to point client code at: the trace served as a mock, or (recording) the real server.

    An `McpMock`: `url` (HTTP transports), `command` and `args` (stdio), `target`, `sdk_target()`.
    """
    from mcpbench.protocol.errors import McpbenchError
    from mcpbench.testing.mcp_mock import open_mock

    server = mcp_settings.server
    if server is None and mcp_settings.action in (Action.RECORD, Action.EXTEND):
        server = request.getfixturevalue("mcp_server")
    try:
        with open_mock(mcp_settings, server) as mock:
            yield mock
        return
    except (SettingsError, McpbenchError) as exc:  # setting up or saving: the test body never raises in here
        failure = f"mcpbench: {exc}"
    pytest.fail(failure, pytrace=False)


@pytest.fixture
def mcp_replay(request: pytest.FixtureRequest, mcp_settings: FixtureSettings) -> Callable[..., Any]:
    """`mcp_replay(trace=None, target=None, **options)`: replay a trace against the server under test.

    Defaults: this test's trace and the marker's (or `mcp_server`'s) server. The test fails with
    every changed path, old → new; options are `replay_trace`'s (`ignore`, `learn_noise`,
    `protocol_version`, `timeout`, `pace`, `latency`, `out`, `client`: a protected server's
    credentials). Returns the replay's report.
    """
    settings = mcp_settings
    learn = settings.learn_noise or request.config.getoption("--mcp-learn-noise")

    def replay(trace: str | Path | None = None, target: str | None = None, **options: Any) -> Any:
        __tracebackhide__ = True
        from mcpbench.protocol.errors import McpbenchError
        from mcpbench.testing.regress import ReplayChanged, replay_trace

        target = target or settings.server or request.getfixturevalue("mcp_server")
        if not target:
            pytest.fail("mcpbench: mcp_replay needs the server under test: server='stdio:CMD' or a URL in the "
                        "mcp_trace marker or mcp_config, an mcp_server fixture, or mcp_replay(target=...)", pytrace=False)
        options = {"ignore": [*settings.ignore, *options.pop("ignore", ())], "learn_noise": learn,
                   "protocol_version": settings.protocol_version, "timeout": settings.timeout, **options}
        try:
            return replay_trace(trace or settings.trace, target, **options)
        except ReplayChanged as exc:
            failure = str(exc)
        except McpbenchError as exc:
            failure = f"mcpbench: {exc}"
        pytest.fail(failure, pytrace=False)

    return replay
