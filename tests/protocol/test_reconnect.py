"""Reconnect policies: parsing, the retry budget, full-jitter backoff and the action per failure."""

import random

import pytest

from mcpbench.protocol.http import Failure
from mcpbench.protocol.reconnect import NONE, REINITIALIZE, RESUME, RETRY, ReconnectPolicy, Recovery


def test_parse_short_and_long_forms():
    assert ReconnectPolicy.parse("resume").mode == RESUME
    policy = ReconnectPolicy.parse("reinitialize, attempts=3, backoff=10ms, max_backoff=1s, budget=10%, budget_per_s=2, idempotent=echo+add")
    assert (policy.attempts, policy.backoff, policy.max_backoff, policy.budget, policy.budget_per_s) == (3, 0.01, 1.0, 0.1, 2.0)
    assert policy.idempotent == {"echo", "add"}
    assert ReconnectPolicy.from_mapping(policy.to_json()) == policy


@pytest.mark.parametrize("text", ["sometimes", "resume,attempts=0", "resume,budget=lots", "resume,backoff=1h", "resume,colour=red", "resume,attempts"])
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


@pytest.mark.parametrize(
    ("mode", "failure", "usable", "resumable", "expected"),
    [
        (NONE, Failure.STREAM_CLOSED, True, True, NONE),
        (REINITIALIZE, Failure.SESSION_NOT_FOUND, False, False, REINITIALIZE),
        (REINITIALIZE, Failure.STREAM_CLOSED, True, True, REINITIALIZE),
        (RESUME, Failure.STREAM_CLOSED, True, True, RESUME),
        (RESUME, Failure.STREAM_CLOSED, True, False, REINITIALIZE),
        (RESUME, Failure.SESSION_NOT_FOUND, False, False, REINITIALIZE),
        (REINITIALIZE, Failure.HTTP_5XX, True, False, RETRY),
        (REINITIALIZE, Failure.TOOL_ERROR, True, False, None),
        (REINITIALIZE, Failure.ANSWER_LOST, True, False, None),
    ],
)
def test_the_action_for_each_failure(mode, failure, usable, resumable, expected):
    assert Recovery(ReconnectPolicy(mode=mode)).action(failure, usable=usable, resumable=resumable) == expected


def test_only_calls_that_did_not_run_or_are_idempotent_go_again():
    recovery = Recovery(ReconnectPolicy(idempotent=frozenset({"echo"})))
    assert recovery.may_resend(Failure.SESSION_NOT_FOUND, "transfer")
    assert recovery.may_resend(Failure.STREAM_CLOSED, "echo")
    assert not recovery.may_resend(Failure.STREAM_CLOSED, "transfer")
    assert recovery.may_resend(Failure.HTTP_5XX, "transfer", 503) and not recovery.may_resend(Failure.HTTP_5XX, "transfer", 502)
