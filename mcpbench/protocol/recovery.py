"""What happens when a session is lost, or a call on it fails: one decision for every client.

The client core moves a session to LOST for one of its causes (`session.LOSSES`)
and emits `SessionLost`; every request in flight fails with the cause's failure
class (`LOSSES`). What the shell does next is `plan_recovery`'s word, given the
shell's policy, with no I/O and no clock; the shell carries the plan out:

- load (`ReconnectPolicy` from the scenario's `reconnect:`): as the policy says
  (`none`, `reinitialize`, `resume`; `protocol/reconnect.py`), within its budget;
  in 2026-07-28 (`stateless`) both recovering modes reissue the request with a new
  id (`REISSUE`): the era has no session to start again and no stream to resume;
- replay (`REPORTING`): nothing is recovered; the call fails with its class, and
  a session whose process or stream went with it ends there (`NONE`);
- forward (`REOPENING`, `serve-trace --on-miss forward`): a new upstream session
  (a new handshake), and the request again when it did not run.

::

    plan = plan_recovery(policy, failed.failure, lost=conn.lost_by, status=failed.status, tool=...)
    plan.action    # REPORT, NONE, RETRY, RESUME, REINITIALIZE or REISSUE
    plan.resend    # once the session stands again, send the call again
"""

from dataclasses import dataclass

from mcpbench.protocol.http import QUERY_METHODS, Failure
from mcpbench.protocol.reconnect import (
    BREAKS,
    DROPPED,
    NONE,
    NOT_HANDLED,
    NOT_RUN,
    REINITIALIZE,
    REISSUE,
    REOPEN,
    REPORT,
    RESUME,
    RETRY,
    ReconnectPolicy,
)
from mcpbench.protocol.session import Trigger


@dataclass(frozen=True, slots=True)
class Loss:
    """What one cause of a lost session means for a client."""

    failure: str  # the failure class of the requests it leaves unanswered
    carrier_gone: bool  # the process, stream or connection the session lived on went with it: nothing more can be sent


# The causes of a lost session (`session.LOSSES`), and what each means.
LOSSES: dict[Trigger, Loss] = {
    Trigger.SESSION_NOT_FOUND: Loss(Failure.SESSION_NOT_FOUND, carrier_gone=False),  # HTTP still answers
    Trigger.STDOUT_CLOSED: Loss(Failure.STREAM_CLOSED, carrier_gone=True),
    Trigger.STREAM_ENDED: Loss(Failure.STREAM_CLOSED, carrier_gone=True),
    Trigger.CONNECTION_BROKE: Loss(Failure.CONNECT, carrier_gone=True),
    Trigger.ENDPOINT_REFUSED: Loss(Failure.CONNECT, carrier_gone=True),
}

# The replay's policy: report what happened, recover nothing.
REPORTING = ReconnectPolicy(mode=REPORT)
# The forwarder's: one new upstream session per loss, the request again when it did not run.
REOPENING = ReconnectPolicy(mode=REOPEN, attempts=1, backoff=0.0, max_backoff=0.0)


@dataclass(frozen=True, slots=True)
class Plan:
    """What the shell does: `action`, then, once the session stands again, the call again if `resend`."""

    action: str  # REPORT, NONE, RETRY, RESUME, REINITIALIZE, REISSUE
    resend: bool = False  # the call did not run (refused, 503, 429), is a query, or its tool is idempotent; REISSUE: always


def plan_recovery(policy: ReconnectPolicy, failure: str | None, *, lost: Trigger | None = None, resumable: bool = False,
                  tool: str | None = None, status: int | None = None, method: str | None = None,
                  stateless: bool = False) -> Plan:
    """What happens when a session is lost, or a call on it fails: the one decision, per policy.

    Args:
        policy: the shell's (`REPORTING`, `REOPENING`, or a load scenario's `ReconnectPolicy`).
        failure: the call's failure class (`http.Failure`); None when the loss came outside a call.
        lost: why the session is gone (`ClientConnection.lost_by`: a cause of `session.LOSSES`, or
            CLOSE); None while it stands.
        resumable: the cut stream had an event id and the transport can resume it.
        tool, status, method: the failed call's tool, HTTP status and method (may it go again? a
            query always may: `http.QUERY_METHODS`).
        stateless: the era has no sessions (2026-07-28): a break is recovered by reissuing the request.

    Returns:
        The plan. `REPORT`: nothing to recover, the failure is the outcome. `NONE`: the session is
        given up, nothing more is sent on it. `RETRY`: the session stands, only the call goes again.
        `RESUME`: reopen the cut stream from its last event id (and `REINITIALIZE` if that brings
        no answer). `REINITIALIZE`: a new session (stdio: a new process; legacy SSE: a new stream).
        `REISSUE` (2026-07-28): the request again with a new id, on a new process or stream first
        when the old one went with the break; `resend` is always true: the spec has the client
        reissue it, and the closed stream cancelled the first on the server.
    """
    mode = policy.mode
    resend = (failure in NOT_RUN or status in NOT_HANDLED or (tool is not None and tool in policy.idempotent)
              or method in QUERY_METHODS)
    if mode == REPORT:
        return Plan(NONE if lost in LOSSES and LOSSES[lost].carrier_gone else REPORT)
    if mode == REOPEN:
        return Plan(REINITIALIZE, failure is not None and resend) if lost is not None else Plan(REPORT)
    if failure not in BREAKS and failure not in DROPPED:
        return Plan(REPORT)
    if mode == NONE:
        return Plan(NONE)
    if stateless:  # a gateway's 5xx too: the answer's connection broke behind it
        return Plan(REISSUE, True)  # "the client re-issues it with a new id": no session, no resumption
    if lost is None and failure not in BREAKS:
        return Plan(RETRY, resend)  # a dropped request on a live session
    if mode == RESUME and resumable and failure == Failure.STREAM_CLOSED:
        return Plan(RESUME, resend)
    return Plan(REINITIALIZE, resend)


__all__ = ["LOSSES", "Loss", "Plan", "REOPENING", "REPORTING", "plan_recovery"]
