"""Replays of the clients and servers people run, which differ from the official SDK 2.x as the
specification allows (issue 28): the SDK 2.x client's `auto` mode (a `server/discover` probe, then
the handshake), an SDK 1.x server, a server that checks `MCP-Protocol-Version`, one that wants a
session id on every POST, a stateless server (tests/support/peers, the fixtures in tests/conftest.py).
"""

import json
from pathlib import Path

import orjson
import pytest

from tests.replay.helpers import cli
from tests.support.recordings import stdio_target


def replay(trace: Path, target: str, tmp_path: Path, *args: str) -> tuple[int, str, dict]:
    """`mcpbench replay TRACE --target TARGET ARGS`: (exit status, its text, its JSON report)."""
    report = tmp_path / f"report-{len(list(tmp_path.iterdir()))}.json"
    done = cli("replay", str(trace), "--target", target, "--report", str(report), *args)
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text())


def statuses(report: dict) -> list[tuple[str, str]]:
    return [(call["method"], call["status"]) for session in report["sessions"] for call in session["calls"]]


def test_a_probe_and_its_handshake_replay_in_the_era_and_headers_they_were_sent_with(probe_stdio_recording, strict_http_server, tmp_path):
    # The strict server answers a probe without its 2026-07-28 headers -32020, and an initialize or
    # a call whose MCP-Protocol-Version is not the session's 400: before, "0 identical, 5 changed".
    status, text, report = replay(probe_stdio_recording, strict_http_server, tmp_path)
    assert status == 0, text
    assert statuses(report)[:2] == [("server/discover", "identical"), ("initialize", "identical")]
    assert report["counts"]["identical"] == len(statuses(report)) == 6


def test_a_probe_refused_as_recorded_is_identical_and_the_session_goes_on(probe_http_recording, session_http_server, tmp_path):
    # The server wants a session id for the probe too: HTTP 400 with no JSON-RPC body, when recorded
    # and now. Before: exit 3, "not an MCP server", every call failed.
    status, text, report = replay(probe_http_recording, session_http_server, tmp_path)
    assert status == 0, text
    discover = report["sessions"][0]["calls"][0]
    assert discover["status"] == "identical" and "failed as recorded: HTTP 400" in discover["detail"]
    assert report["counts"]["identical"] == len(statuses(report))


def test_a_probe_that_fails_otherwise_now_is_one_changed_call(probe_stdio_recording, session_http_server, tmp_path):
    status, text, report = replay(probe_stdio_recording, session_http_server, tmp_path)
    assert status == 1 and report["aborted"] is None, text
    assert [s for s in statuses(report) if s[1] != "identical"] == [("server/discover", "failed")]


@pytest.mark.slow  # the SDK 1.x server starts from its own virtualenv (made on first use)
def test_sdk1_refusals_pair_with_their_post(sdk1_recording, sdk1_http_server, tmp_path):
    # SDK 1.x answers the probe's POST with HTTP 400 and the JSON-RPC id "server-error".
    status, text, report = replay(sdk1_recording, sdk1_http_server, tmp_path)
    assert status == 0, text
    assert ("server/discover", "identical") in statuses(report)
    assert "which no recorded request had" not in text and "which no request in flight had" not in text


def test_a_version_asked_in_the_same_era_is_expected_not_a_change(recordings, tmp_path):
    out = tmp_path / "asked.jsonl"
    status, text, report = replay(recordings["legacy"], stdio_target(), tmp_path, "--protocol-version", "2025-06-18",
                                  "--out", str(out))
    assert status == 0, text  # before: exit 1, every initialize "changed" by the version asked for
    events = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    sent = [event["msg"] for event in events if event["kind"] == "message"]
    (init,) = [m for m in sent if m.get("method") == "initialize"]
    answer = next(m for m in sent if m.get("id") == init["id"] and "result" in m)
    assert init["params"]["protocolVersion"] == answer["result"]["protocolVersion"] == "2025-06-18"


@pytest.mark.slow  # a stdio server process per recorded connection
def test_sessionless_sessions_get_a_handshake_made_for_a_stdio_target(stateless_recording, tmp_path):
    # Recorded against a stateless server: each connection a session key, the handshake on one of
    # them only. Before: -32602 for every call of the others.
    status, text, report = replay(stateless_recording, stdio_target(), tmp_path)
    assert status == 0, text
    assert report["counts"]["identical"] == 5 and report["counts"]["failed"] == 0
    assert len([n for n in report["notes"] if "got one made for the target" in n]) == 1  # said once
    assert text.count("got one made for the target") == 1
