"""A fuzzed call judged by its signs of life (`FuzzSession.call(..., live=Live(...))`), against real stdio servers:
a tool sleeping as long as it was asked is not a hang, whether it reports progress or only answers a ping; a tool
that never answers is one, at the silence bound or, showing life, at the live bound."""

import shlex
import sys

import pytest

from mcpbench.fuzz.session import FuzzSession, Live
from mcpbench.system.target import parse_target
from tests.fuzzer.helpers import FAULTY_STDIO, REFERENCE_STDIO

pytestmark = pytest.mark.slow  # two server processes and calls that take seconds by design

OPEN = 60.0  # a stdio cold start on a busy machine


@pytest.fixture(scope="module")
def reference():
    session = FuzzSession(parse_target(REFERENCE_STDIO))
    try:
        session.open(OPEN)
        yield session
    finally:
        session.close()


def call(session: FuzzSession, tool: str, arguments: dict, live: Live):
    return session.call("tools/call", {"name": tool, "arguments": arguments}, live.silence, live)


def test_a_long_sleep_reporting_progress_is_alive(reference):
    outcome = call(reference, "slow", {"seconds": 2.4, "steps": 4}, Live(silence=1.0, limit=20.0))
    assert outcome.result is not None and not outcome.timed_out
    assert outcome.live.progress == 4 and outcome.live.pings == 0


def test_a_long_silent_sleep_answering_pings_is_alive(reference):
    outcome = call(reference, "slow", {"seconds": 2.5, "steps": 1}, Live(silence=1.0, limit=20.0))
    assert outcome.result is not None and not outcome.timed_out
    assert outcome.live.pings >= 1


def test_a_parked_call_is_settled_later(reference):
    outcome = call(reference, "slow", {"seconds": 2.5, "steps": 1}, Live(silence=1.0, limit=20.0, park=True))
    assert outcome.parked and outcome.answer is None
    assert reference.settle(outcome).result is not None and not outcome.parked


def test_a_call_never_answered_is_a_hang_at_the_live_bound_when_the_server_shows_life():
    session = FuzzSession(parse_target(FAULTY_STDIO))
    try:
        session.open(OPEN)
        outcome = call(session, "lookup", {"key": ""}, Live(silence=1.0, limit=3.0))
        assert outcome.timed_out and outcome.alive and "the bound for a live call" in outcome.detail
        assert outcome.live.pings >= 1
    finally:
        session.close()


# Answers the handshake, then stops reading at its first tools/call: a server stuck whole (no ping answered).
STUCK_SERVER = """
import json, sys, time
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "tools/call":
        time.sleep(3600)  # stuck: killed by the test's session close
    if "id" in message:
        result = {"protocolVersion": message.get("params", {}).get("protocolVersion", "2025-11-25"), "capabilities": {"tools": {}},
                  "serverInfo": {"name": "stuck", "version": "1"}} if message.get("method") == "initialize" else {}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def test_a_call_with_no_progress_and_no_ping_answered_is_a_hang_at_the_silence_bound():
    session = FuzzSession(parse_target("stdio:" + shlex.join([sys.executable, "-c", STUCK_SERVER])))
    try:
        session.open(OPEN)
        outcome = call(session, "any", {}, Live(silence=1.0, limit=30.0))
        assert outcome.timed_out and not outcome.alive and "then a ping unanswered" in outcome.detail
        assert outcome.live.pings == 0 and outcome.live.progress == 0
    finally:
        session.close()
