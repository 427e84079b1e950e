"""mcpbench holds itself to its own bar: its mock (`serve-trace` of a recording of the reference server)
and the reference server reached through `record` give no finding in a short fuzz run."""

import sys
from subprocess import list2cmdline

import pytest

from tests.fuzzer.helpers import fuzz_json
from tests.record.helpers import record_proxy
from tests.replay.helpers import mock_server

pytestmark = pytest.mark.slow  # a mock or a recorder and the reference server as processes


def clean(result, data: dict, protocol_cases: int = 22) -> None:
    """No finding after every protocol case (16 on stdio; the 6 header cases too on Streamable HTTP) and 30 calls."""
    assert result.returncode == 0, result.stdout + result.stderr
    assert data["findings"] == [] and data["notes"] == [], data
    assert data["calls"] >= 30 and data["protocol_cases"] == protocol_cases and "echo" in data["tools"]


def test_the_mock_over_streamable_http_gives_no_finding(recordings, tmp_path):
    with mock_server(recordings["legacy"], "streamable-http") as url:
        result, data = fuzz_json(url, tmp_path, "--cases", "40", "--seed", "5", "--hang-after", "5",
                                 "--trace", str(recordings["legacy"]))
    clean(result, data)


def test_the_mock_over_legacy_sse_gives_no_finding(recordings, tmp_path):
    # Found by this test's first run: the mock's nearest-request search took seconds over the 8 MiB
    # protocol case, and on the one SSE stream the ping after it waited past the hang bound.
    with mock_server(recordings["legacy"], "sse") as url:
        result, data = fuzz_json("sse+" + url, tmp_path, "--cases", "40", "--seed", "5", "--hang-after", "5")
    clean(result, data, 16)


def test_the_reference_server_over_legacy_sse_through_record_gives_no_finding(sse_server, tmp_path):
    with record_proxy(sse_server.url, tmp_path / "recorded.jsonl") as (url, _proc):
        result, data = fuzz_json("sse+" + url, tmp_path, "--cases", "40", "--seed", "5", "--hang-after", "5", "--skip", "slow")
    clean(result, data, 16)


def test_the_mock_over_stdio_gives_no_finding(recordings, tmp_path):
    target = "stdio:" + list2cmdline([sys.executable, "-m", "mcpbench", "serve-trace", str(recordings["legacy"])])
    result, data = fuzz_json(target, tmp_path, "--cases", "40", "--seed", "5", "--hang-after", "5")
    clean(result, data, 16)


def test_the_reference_server_through_record_gives_no_finding_and_the_run_is_recorded(http_server, tmp_path):
    trace = tmp_path / "recorded.jsonl"
    with record_proxy(http_server.url, trace) as (url, _proc):
        # `slow` sleeps up to 30 s by design: a hang by any bound a short run can wait. `toggle_tool` would
        # change the tool list of this server, which the whole suite shares (the lean-trace sizes read it).
        result, data = fuzz_json(url, tmp_path, "--cases", "40", "--seed", "5", "--hang-after", "5",
                                 "--skip", "slow", "--skip", "toggle_tool")
    clean(result, data)
    recorded = trace.read_text()
    assert recorded.count('"method":"tools/call"') >= data["calls"]
