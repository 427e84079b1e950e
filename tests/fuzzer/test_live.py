"""A fuzzed call judged by its signs of life (`FuzzSession.call(..., live=Live(...))`), against real stdio servers:
a tool sleeping as long as it was asked is not a hang, whether it reports progress or only answers a ping; a tool
that never answers is one, at the silence bound or, showing life, at the live bound."""

import pytest

from mcpbench.fuzz.session import FuzzSession, Live
from mcpbench.target import parse_target
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
