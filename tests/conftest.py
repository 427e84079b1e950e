"""The reference servers (`mcpbench.lab.servers`) shared by every test module: one process per
configuration, started when a test first asks for it and stopped when the test session ends.

Tests that stop, kill or overload a server, or need one of an unusual configuration, start their
own with `tests.support.servers.reference_server`.
"""

from collections.abc import Iterator

import pytest

from tests.support.servers import RunningServer, reference_server


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
