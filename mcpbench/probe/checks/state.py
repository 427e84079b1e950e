"""2026-07-28 check: a retry's `requestState` is accepted on whichever instance it reaches; a tampered one is refused.

A multi round-trip request (SEP-2322) answers `input_required` with `inputRequests` and a
`requestState`; the client answers and retries under a new id with the state echoed. The state is
the server's memory between rounds, so it must be protected (HMAC or AEAD) and every instance must
be able to open it: the SDK seals it under a key generated per process unless one is shared
(`RequestStateSecurity(keys=[...])`), and behind a balancer that spreads requests a retry reaching
another instance is refused (-32602 "Invalid or expired requestState"). The probe runs a few
operations of the input tool (the lab's `ask`, answered as a form elicitation), noting the instance
of each round, then one whose state it alters before the retry: that one must be refused.
"""

from mcpbench.probe import newest
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.protocol.asks import Canned
from mcpbench.protocol.jsonrpc import Response
from mcpbench.protocol.operation import Done, Operation, Send
from mcpbench.protocol.versions import LATEST, REQUEST_STATE

NAME, TITLE, BOUND = "state", "requestState across instances (2026-07-28)", 10.0
TOOL, ARGUMENTS = "ask", {"question": "mcpbench probe: any answer will do"}
ANSWERS = Canned({"elicitation/create": {"action": "accept", "content": {"answer": "probe"}}})
# Operations run: with 2 or more instances in turn, most retries reach another instance than the first round.
OPERATIONS = 4
FIX = ("Seal requestState with a key every instance holds (Python SDK: MCPServer(request_state_security="
       "RequestStateSecurity(keys=[shared_secret])); the default key is generated per process), or route a retry to "
       "the instance of its first round.")
FIX_TAMPER = ("Protect requestState (HMAC or AEAD, bound to the request and a short TTL) and refuse one that does not verify "
              "with -32602: the SDKs' RequestStateBoundary does; a server that takes any state back trusts the client with "
              "its memory.")


def _operation(target: ProbeTarget, deadline: float, tamper: bool = False) -> dict:
    """One operation of the input tool, round by round: its rounds' instances, whether it carried a state, how it ended."""
    op = Operation("tools/call", {"name": TOOL, "arguments": ARGUMENTS}, LATEST, answers=ANSWERS, max_rounds=2)
    action = op.start()
    rounds: list[str | None] = []
    carried = False
    while type(action) is Send:
        one = newest.session(target, policy=ANSWERS)
        try:
            ex = one.call(action.method, action.params, deadline=deadline)
        finally:
            one.close()
        rounds.append(ex.instance)
        if ex.answered is None:
            action = op.broke(*(ex.failure() or ("answer-lost", "no answer")))
            break
        answer = ex.answered.answer
        if type(answer) is Response and isinstance(answer.result, dict) and isinstance(answer.result.get(REQUEST_STATE), str):
            carried = True
            if tamper:  # one character changed in the middle: a state that no longer verifies
                state = answer.result[REQUEST_STATE]
                middle = len(state) // 2
                altered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1:]
                answer = Response(id=answer.id, result={**answer.result, REQUEST_STATE: altered})
        action = op.take(answer)
    return {"rounds": rounds, "state": carried, "ended": "done" if type(action) is Done else action.failure,
            "detail": None if type(action) is Done else action.detail}


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if (row := newest.skip(NAME, target, deadline)) is not None:
        return row
    if not newest.has_tool(target, TOOL):
        return not_applicable(NAME, f"no tool known to ask for input here (the probe calls {TOOL} on the lab's reference "
                                    "server only): no requestState to route")
    operations = [_operation(target, deadline) for _ in range(OPERATIONS)]
    if not any(o["state"] for o in operations):
        return judge({"operations": operations})
    return judge({"operations": operations, "tampered": _operation(target, deadline, tamper=True)})


def judge(figures: dict) -> CheckRow:
    ops = figures["operations"]
    stated = [o for o in ops if o["state"]]
    if not stated:
        ended = ", ".join(sorted({str(o["ended"]) for o in ops}))
        return CheckRow(NAME, WARN if any(o["ended"] != "done" for o in ops) else PASS,
                   f"{TOOL}: {len(ops)} operations ({ended}), none carried a requestState: nothing to route", figures=figures)
    retried = [o for o in stated if len(o["rounds"]) > 1]
    moved = [o for o in retried if o["rounds"][0] is not None and o["rounds"][1] != o["rounds"][0]]
    refused = [o for o in retried if o["ended"] == "state-rejected"]
    figures.update(retries=len(retried), moved=len(moved), refused=len(refused))
    evidence = (f"{TOOL}: {len(retried)} retries echoing the state, {len(moved)} reached another instance than their first "
                f"round; {len(refused)} refused")
    if refused:
        first = refused[0]
        return CheckRow(NAME, FAIL, f"{evidence} (e.g. sealed on {first['rounds'][0]}, retried on {first['rounds'][1]}: "
                   f"{first['detail']})", FIX, figures)
    tampered = figures.get("tampered")
    if tampered is not None and tampered["ended"] == "done" and len(tampered["rounds"]) > 1:
        return CheckRow(NAME, FAIL, f"{evidence}; a tampered requestState was accepted", FIX_TAMPER, figures)
    if tampered is not None:
        evidence += f"; a tampered one {'refused' if tampered['ended'] == 'state-rejected' else tampered['ended']}"
    failed = [o for o in retried if o["ended"] != "done"]
    if failed:
        return CheckRow(NAME, WARN, f"{evidence}; {len(failed)} failed otherwise: {failed[0]['detail']}", figures=figures)
    if retried and not moved and any(o["rounds"][0] for o in retried):
        return CheckRow(NAME, PASS, evidence + " (every retry stayed on its instance: other instances not tried)", figures=figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)
