"""What happens when a session is lost: `plan_recovery` under the load, replay and forward policies."""

import pytest

from mcpbench.protocol.http import Failure
from mcpbench.protocol.reconnect import NONE, REINITIALIZE, REISSUE, REPORT, RESUME, RETRY, ReconnectPolicy
from mcpbench.protocol.recovery import LOSSES, REOPENING, REPORTING, Plan, plan_recovery
from mcpbench.protocol.session import LOSSES as CAUSES
from mcpbench.protocol.session import Trigger

GONE = Trigger.SESSION_NOT_FOUND  # a lost session whose transport still answers


def test_every_cause_of_a_loss_has_its_meaning():
    assert set(LOSSES) == set(CAUSES)
    assert {cause for cause, loss in LOSSES.items() if not loss.carrier_gone} == {Trigger.SESSION_NOT_FOUND}


# Load: the scenario's `reconnect:` policy. `lost`: None while the session stands.
@pytest.mark.parametrize(
    ("mode", "failure", "lost", "resumable", "expected"),
    [
        (NONE, Failure.STREAM_CLOSED, None, True, NONE),
        (REINITIALIZE, Failure.SESSION_NOT_FOUND, GONE, False, REINITIALIZE),
        (REINITIALIZE, Failure.STREAM_CLOSED, None, True, REINITIALIZE),
        (RESUME, Failure.STREAM_CLOSED, None, True, RESUME),
        (RESUME, Failure.STREAM_CLOSED, None, False, REINITIALIZE),
        (RESUME, Failure.SESSION_NOT_FOUND, GONE, False, REINITIALIZE),
        (RESUME, Failure.STREAM_CLOSED, Trigger.STREAM_ENDED, False, REINITIALIZE),
        (REINITIALIZE, Failure.HTTP_5XX, None, False, RETRY),
        (REINITIALIZE, Failure.HTTP_5XX, Trigger.STDOUT_CLOSED, False, REINITIALIZE),
        (REINITIALIZE, Failure.TOOL_ERROR, None, False, REPORT),
        (REINITIALIZE, Failure.ANSWER_LOST, None, False, REPORT),
    ],
)
def test_load_does_what_its_reconnect_policy_says(mode, failure, lost, resumable, expected):
    assert plan_recovery(ReconnectPolicy(mode=mode), failure, lost=lost, resumable=resumable).action == expected


def test_only_calls_that_did_not_run_or_are_idempotent_go_again():
    policy = ReconnectPolicy(idempotent=frozenset({"echo"}))
    assert plan_recovery(policy, Failure.SESSION_NOT_FOUND, lost=GONE, tool="transfer").resend
    assert plan_recovery(policy, Failure.STREAM_CLOSED, tool="echo").resend
    assert not plan_recovery(policy, Failure.STREAM_CLOSED, tool="transfer").resend
    assert plan_recovery(policy, Failure.HTTP_5XX, tool="transfer", status=503).resend
    assert not plan_recovery(policy, Failure.HTTP_5XX, tool="transfer", status=502).resend
    # A query asks the same question twice, whatever the policy names (the soak's cut `tools/list`).
    assert plan_recovery(policy, Failure.STREAM_CLOSED, method="tools/list").resend
    assert not plan_recovery(policy, Failure.STREAM_CLOSED, method="tools/call", tool="transfer").resend


@pytest.mark.parametrize("cause", list(LOSSES))
def test_replay_reports_and_ends_a_session_whose_carrier_went_with_it(cause):
    plan = plan_recovery(REPORTING, LOSSES[cause].failure, lost=cause)
    assert plan == Plan(NONE if LOSSES[cause].carrier_gone else REPORT)
    assert plan_recovery(REPORTING, None, lost=cause) == plan  # found outside a call: the same
    assert plan_recovery(REPORTING, Failure.STREAM_CLOSED, lost=None) == Plan(REPORT)  # a cut stream of a live session


@pytest.mark.parametrize("cause", list(LOSSES))
def test_forward_reopens_and_sends_again_what_did_not_run(cause):
    failure = LOSSES[cause].failure
    plan = plan_recovery(REOPENING, failure, lost=cause, tool="echo")
    assert plan.action == REINITIALIZE
    assert plan.resend == (failure in (Failure.SESSION_NOT_FOUND, Failure.CONNECT))  # a cut stream's call may have run
    assert plan_recovery(REOPENING, None, lost=cause) == Plan(REINITIALIZE)  # found lost before a call: nothing to resend
    assert plan_recovery(REOPENING, Failure.HTTP_5XX, lost=None, status=503) == Plan(REPORT)  # the session stands


def test_one_loss_three_policies():
    """The same event, the three clients: a call found the session gone (404)."""
    plans = {name: plan_recovery(policy, Failure.SESSION_NOT_FOUND, lost=GONE, tool="add")
             for name, policy in [("load", ReconnectPolicy()), ("replay", REPORTING), ("forward", REOPENING)]}
    assert plans == {"load": Plan(REINITIALIZE, True), "replay": Plan(REPORT), "forward": Plan(REINITIALIZE, True)}


@pytest.mark.parametrize(
    ("mode", "failure", "lost", "expected"),
    [
        (RESUME, Failure.STREAM_CLOSED, None, Plan(REISSUE, True)),  # no Last-Event-ID in 2026-07-28
        (REINITIALIZE, Failure.STREAM_CLOSED, None, Plan(REISSUE, True)),  # no session to start again
        (RESUME, Failure.STREAM_CLOSED, Trigger.STDOUT_CLOSED, Plan(REISSUE, True)),  # stdio: a new process, then again
        (REINITIALIZE, Failure.CONNECT, Trigger.CONNECTION_BROKE, Plan(REISSUE, True)),
        (REINITIALIZE, Failure.HTTP_5XX, None, Plan(REISSUE, True)),  # a gateway's 502: the answer's connection broke
        (NONE, Failure.STREAM_CLOSED, None, Plan(NONE)),
        (RESUME, Failure.TOOL_ERROR, None, Plan(REPORT)),
    ],
)
def test_2026_07_28_reissues_a_broken_request_with_a_new_id(mode, failure, lost, expected):
    """Whatever its tool: the spec has the client reissue it, and the closed stream cancelled the first."""
    plan = plan_recovery(ReconnectPolicy(mode=mode), failure, lost=lost, resumable=True, tool="transfer", stateless=True)
    assert plan == expected
    assert plan_recovery(ReconnectPolicy(mode=mode), failure, lost=lost, resumable=True, tool="transfer").action != REISSUE
