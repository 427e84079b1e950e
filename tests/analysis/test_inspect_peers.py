"""`mcpbench inspect` on recordings of peers that differ from the SDK 2.x as the specification allows
(issue 28): SDK 1.x's refusals under the id "server-error", sessionless traffic, a client's own
close of its streams, HTTP exchanges that are not MCP."""

import json

import pytest
from click.testing import CliRunner

from mcpbench.cli import main


def inspect(*args: str):
    return CliRunner().invoke(main, ["inspect", *map(str, args)])


@pytest.mark.slow  # the SDK 1.x server starts from its own virtualenv (made on first use)
def test_sdk1_refusals_are_paired_by_their_post_and_warned_about_not_violations(sdk1_recording):
    assert inspect("--strict", sdk1_recording).exit_code == 0  # before: 1, unknown-answer
    report = json.loads(inspect("--json", sdk1_recording).output)
    assert report["violations"] == {}
    assert report["warnings"] == {"foreign-answer-id": 2}  # the probe's POST, and a GET without a session
    assert report["methods"]["server/discover"]["outcomes"] == {"error": 1}  # answered, not "unanswered"
    text = inspect(sdk1_recording).output
    assert "id 'server-error', not the request's (as SDK 1.x servers answer): paired by its POST" in text


def test_stateless_traffic_is_one_stream_labelled_with_its_version(stateless_recording):
    report = json.loads(inspect("--json", stateless_recording).output)
    (stream,) = report["sessions"]  # before: one per TCP connection, "? (unknown era)"
    assert stream["sessionless"] and (stream["version"], stream["era"]) == ("2025-11-25", "handshake")
    outcomes = {method: stats["outcomes"] for method, stats in report["methods"].items()}
    assert outcomes == {"initialize": {"ok": 1}, "tools/call echo": {"ok": 1}, "tools/list": {"ok": 2}, "tools/call add": {"ok": 1}}
    assert "sessionless  streamable-http  2025-11-25 (handshake)" in inspect(stateless_recording).output


def test_a_clients_close_is_no_error_and_exchanges_that_are_not_mcp_are_no_session(sse_recording):
    text = inspect(sse_recording).output
    assert "GET /sse stream close (by the client)" in text and "Client disconnected" not in text
    report = json.loads(inspect("--json", sse_recording).output)
    assert [s["transport"] for s in report["sessions"]] == ["http", "sse"]  # the OAuth probe is no streamable-http session
    assert "not MCP  1 HTTP exchanges" in text
