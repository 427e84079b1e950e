"""No false violations: every official-SDK session, in every client mode, on every transport, records clean.

stdio through the tee; legacy HTTP+SSE and Streamable HTTP (SSE answers, JSON answers, stateless)
through `mcpbench record`; legacy HTTP+SSE also through mitmdump with the addon. The SDK client and
server work in all of these, so any violation recorded is a rule applied where it does not hold.
"""

import sys
from collections import Counter
from pathlib import Path

import pytest

from mcpbench.lab.peers.drive import drive, sdk_target
from mcpbench.trace import read_trace
from tests.record.helpers import mitmdump, record_proxy
from tests.support.servers import ENDPOINT_PATHS, serve_argv, stdio_params

MODES = ("legacy", "auto")
# What each SDK client mode settles on with the SDK server.
NEGOTIATED = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def violations(trace: Path) -> Counter:
    return Counter((e.get("transport"), e["code"]) for e in read_trace(trace) if e["kind"] == "violation")


def transports_of_messages(trace: Path) -> Counter:
    return Counter(e["transport"] for e in read_trace(trace) if e["kind"] == "message")


@pytest.mark.slow
def test_stdio_through_the_tee(tmp_path: Path) -> None:
    for mode in MODES:
        trace = tmp_path / f"{mode}.jsonl"
        argv = [sys.executable, "-m", "mcpbench", "tee", "--out", str(trace), "--", *serve_argv("stdio")]
        assert drive(stdio_params(argv), mode)["protocol_version"] == NEGOTIATED[mode]
        assert transports_of_messages(trace)["stdio"] > 20
        assert violations(trace) == Counter(), mode


@pytest.mark.parametrize(
    ("transport", "server"),
    [("sse", "sse_server"), ("streamable-http", "http_server"), ("streamable-http", "json_http_server"), ("streamable-http", "stateless_http_server")],
    ids=["legacy-sse", "sse-answers", "json-answers", "stateless"],
)
@pytest.mark.slow
def test_http_through_mcpbench_record(tmp_path: Path, transport: str, server: str, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(server)  # the shared reference server of that configuration
    for mode in MODES:
        trace = tmp_path / f"{mode}.jsonl"
        with record_proxy(f"http://127.0.0.1:{server.port}{ENDPOINT_PATHS[transport]}", trace) as (url, _):
            assert drive(sdk_target(url, transport), mode)["protocol_version"] == NEGOTIATED[mode]
        assert transports_of_messages(trace)[transport] > 20
        assert violations(trace) == Counter(), mode


@pytest.mark.slow
def test_legacy_sse_through_mitmdump(tmp_path: Path, sse_server) -> None:
    """The case that once failed: 2026-07-28 over legacy HTTP+SSE got Streamable HTTP's header rules."""
    for mode in MODES:
        trace = tmp_path / f"{mode}.jsonl"
        with mitmdump(sse_server.port, trace) as proxy:
            assert drive(sdk_target(proxy.url("/sse"), "sse"), mode)["protocol_version"] == NEGOTIATED[mode]
        assert transports_of_messages(trace)["sse"] > 20
        assert violations(trace) == Counter(), mode
