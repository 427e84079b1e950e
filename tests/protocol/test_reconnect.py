"""Reconnect policies: parsing, the retry budget and full-jitter backoff (the action per failure: test_recovery)."""

import random

import pytest

from mcpbench.protocol.http import Failure
from mcpbench.protocol.reconnect import REOPEN, REPORT, RESUME, ReconnectPolicy, Recovery, Reissues


def test_parse_short_and_long_forms():
    assert ReconnectPolicy.parse("resume").mode == RESUME
    policy = ReconnectPolicy.parse("reinitialize, attempts=3, backoff=10ms, max_backoff=1s, budget=10%, budget_per_s=2, idempotent=echo+add")
    assert (policy.attempts, policy.backoff, policy.max_backoff, policy.budget, policy.budget_per_s) == (3, 0.01, 1.0, 0.1, 2.0)
    assert policy.idempotent == {"echo", "add"}
    assert ReconnectPolicy.from_mapping(policy.to_json()) == policy


@pytest.mark.parametrize("text", ["sometimes", "resume,attempts=0", "resume,budget=lots", "resume,backoff=1h", "resume,colour=red", "resume,attempts",
                                  REPORT, REOPEN])
def test_bad_policies_are_refused_with_a_reason(text):
    with pytest.raises(ValueError):
        ReconnectPolicy.parse(text)


def test_the_budget_is_a_token_bucket_filled_by_requests_and_time():
    recovery = Recovery(ReconnectPolicy(budget=0.1, budget_floor=3, budget_per_s=0.5))
    assert recovery.allows(3, now=0.0) and not recovery.allows(4, now=0.0)  # starts full: the floor
    recovery.count(3, extra=True)
    assert not recovery.allows(1, now=0.0) and recovery.denied == 5
    recovery.count(10)  # ten ordinary requests deposit one token
    assert recovery.allows(1, now=0.0) and not recovery.allows(2, now=0.0)
    assert recovery.allows(2, now=2.0)  # two seconds deposit one more
    recovery.count(1000)
    assert recovery.tokens == 3  # never more than the floor
    assert recovery.extra <= 3 + 0.1 * recovery.requests + 0.5 * 2.0


def test_backoff_is_full_jitter_under_an_exponential_cap():
    recovery = Recovery(ReconnectPolicy(backoff=0.1, max_backoff=0.5), random.Random(7))
    draws = {attempt: [recovery.delay(attempt) for _ in range(200)] for attempt in range(5)}
    for attempt, values in draws.items():
        cap = min(0.5, 0.1 * 2 ** attempt)
        assert all(0 <= v <= cap for v in values) and max(values) > 0.8 * cap and min(values) < 0.2 * cap


def test_a_reopen_waits_at_least_the_streams_retry_with_the_backoff_on_top():
    recovery = Recovery(ReconnectPolicy(backoff=0.1, max_backoff=0.5), random.Random(7))
    waits = [recovery.wait(attempt, 500) for attempt in range(5) for _ in range(50)]
    assert all(0.5 <= wait <= 1.0 for wait in waits) and max(waits) > 0.9
    assert all(0 <= recovery.wait(0, None) <= 0.1 for _ in range(50))


def test_the_other_clients_policies_are_no_scenarios():
    with pytest.raises(ValueError, match="unknown reconnect policy 'report'"):
        ReconnectPolicy.from_mapping({"policy": "report"})
    with pytest.raises(ValueError, match="unknown reconnect policy 'sometimes'"):
        ReconnectPolicy(mode="sometimes")
    assert ReconnectPolicy(mode=REPORT).mode == REPORT


def _steps(reissues: Reissues, failures) -> list:
    """The backoff step before each send, the sends failing with `failures` in turn, until it stops."""
    steps = []
    for failure in failures:
        if reissues.step is None:
            break
        steps.append((reissues.attempt, reissues.step))
        reissues.failed(failure)
    return steps + ([] if reissues.step is None else [(reissues.attempt, reissues.step)])


def test_a_2026_07_28_reissue_waits_for_a_server_as_a_handshake_would():
    """While no server answers (a restart), each reissue goes again as a failed re-handshake does, up to
    `attempts` times; then the next reissue: attempts=2, 2 × 3 sends, the backoff growing with each."""
    down = [Failure.CONNECT, Failure.HTTP_5XX] * 10
    assert _steps(Reissues(2), down) == [(1, 0), (1, 1), (1, 2), (2, 3), (2, 4), (2, 5)]
    # the server back after four sends: the fifth is answered (the shell stops asking)
    assert _steps(Reissues(2), down[:4]) == [(1, 0), (1, 1), (1, 2), (2, 3), (2, 4)]


def test_a_2026_07_28_reissue_cut_again_and_again_is_given_up_within_the_attempts():
    assert _steps(Reissues(3), [Failure.STREAM_CLOSED] * 10) == [(1, 0), (2, 1), (3, 2)]
    # a cut after a wait for the server: the next reissue, which may wait for a server afresh
    assert _steps(Reissues(2), [Failure.CONNECT, Failure.STREAM_CLOSED, Failure.CONNECT, Failure.CONNECT, Failure.CONNECT]) == [
        (1, 0), (1, 1), (2, 2), (2, 3), (2, 4)]
