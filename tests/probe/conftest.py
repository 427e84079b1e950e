"""Reference servers in the states the probe's checks tell apart, each started once for the probe tests."""

from collections.abc import Iterator

import pytest

from mcpbench.lab.peers.quirks import Quirks
from tests.support.servers import RunningServer, reference_server

# Everything the specification asks done wrong that one server can show at once.
QUIRKY = Quirks(unknown_session_status=400, host_check=False, version_header=False, leaky_events=True)
# A server that cannot end sessions and has room for few: a spike of sessions leaves it full.
LEAKING = Quirks(delete=False, max_sessions=40)


@pytest.fixture(scope="session")
def resumable_server() -> Iterator[RunningServer]:
    """The SDK's defaults plus an event store: what the probe's checks pass on."""
    with reference_server("streamable-http", resumable=True) as server:
        yield server


@pytest.fixture(scope="session")
def quirky_server() -> Iterator[RunningServer]:
    with reference_server("streamable-http", resumable=True, quirks=QUIRKY) as server:
        yield server


@pytest.fixture(scope="session")
def leaking_server() -> Iterator[RunningServer]:
    with reference_server("streamable-http", quirks=LEAKING) as server:
        yield server
