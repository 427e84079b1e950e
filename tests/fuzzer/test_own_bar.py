"""mcpbench holds itself to its own bar: its mock (`serve-trace` of a recording of the reference server)
and the reference server reached through `record` give no finding in a short fuzz run, each transport
in one era or both (the mock of a 2026-07-28 recording fuzzed in 2026-07-28)."""

import sys
from subprocess import list2cmdline

import pytest

from tests.fuzzer.helpers import fuzz_json
from tests.record.helpers import record_proxy
from tests.replay.helpers import mock_server

pytestmark = pytest.mark.slow  # a mock or a recorder and the reference server as processes


STATELESS = "2026-07-28"
# Protocol cases per run: 16 payloads everywhere; on Streamable HTTP 6 header cases in the handshake era
# (5 in 2026-07-28, which has no handshake to call before); on stdio and legacy SSE a call before the handshake.
HTTP_HANDSHAKE, HTTP_STATELESS, OTHER_HANDSHAKE, OTHER_STATELESS = 22, 21, 17, 16


def clean(result, data: dict, protocol_cases: int) -> None:
    """No finding after every protocol case and 24 calls."""
    assert result.returncode == 0, result.stdout + result.stderr
    assert data["findings"] == [] and data["notes"] == [], data
    assert data["calls"] >= 24 and data["protocol_cases"] == protocol_cases and "echo" in data["tools"]


def test_the_mock_over_streamable_http_gives_no_finding(recordings, tmp_path):
    with mock_server(recordings["legacy"], "streamable-http") as url:
        result, data = fuzz_json(url, tmp_path, "--cases", "24", "--seed", "5", "--hang-after", "5",
                                 "--trace", str(recordings["legacy"]))
    clean(result, data, HTTP_HANDSHAKE)


def test_the_mock_over_legacy_sse_gives_no_finding(recordings, tmp_path):
    # Found by this test's first run: the mock's nearest-request search took seconds over the 8 MiB
    # protocol case, and on the one SSE stream the ping after it waited past the hang bound.
    with mock_server(recordings["auto"], "sse") as url:
        result, data = fuzz_json("sse+" + url, tmp_path, "--cases", "24", "--seed", "5", "--hang-after", "5", "--era", STATELESS)
    clean(result, data, OTHER_STATELESS)


def test_the_reference_server_over_legacy_sse_through_record_gives_no_finding(sse_server, tmp_path):
    with record_proxy(sse_server.url, tmp_path / "recorded.jsonl") as (url, _proc):
        result, data = fuzz_json("sse+" + url, tmp_path, "--cases", "48", "--seed", "5", "--hang-after", "5", "--skip", "slow",
                                 "--era", "both")
    clean(result, data, OTHER_HANDSHAKE + OTHER_STATELESS)


def test_the_mock_over_stdio_gives_no_finding(recordings, tmp_path):
    target = "stdio:" + list2cmdline([sys.executable, "-m", "mcpbench", "serve-trace", str(recordings["auto"])])
    result, data = fuzz_json(target, tmp_path, "--cases", "24", "--seed", "5", "--hang-after", "5", "--era", STATELESS,
                             "--trace", str(recordings["auto"]))
    clean(result, data, OTHER_STATELESS)


def test_the_reference_server_through_record_gives_no_finding_and_the_run_is_recorded(http_server, tmp_path):
    trace = tmp_path / "recorded.jsonl"
    with record_proxy(http_server.url, trace) as (url, _proc):
        # `slow` sleeps up to 30 s by design: a hang by any bound a short run can wait. `toggle_tool` would
        # change the tool list of this server, which the whole suite shares (the lean-trace sizes read it).
        result, data = fuzz_json(url, tmp_path, "--cases", "24", "--seed", "5", "--hang-after", "5",
                                 "--skip", "slow", "--skip", "toggle_tool")
    clean(result, data, HTTP_HANDSHAKE)
    recorded = trace.read_text()
    assert recorded.count('"method":"tools/call"') >= data["calls"]
