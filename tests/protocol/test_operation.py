"""`protocol/operation.py`: input rounds and tasks followed to their end, through a real `ClientConnection`.

Each test plays the server's answers as bytes on a Streamable HTTP connection (the JSON body of each
POST), so what is checked is what goes on the wire: ids, `inputResponses`, the echoed `requestState`,
the task requests and their headers.
"""

import orjson
import pytest

from mcpbench.protocol.asks import Canned, Refuse
from mcpbench.protocol.client import Answered, ClientConnection, PostHead
from mcpbench.protocol.http import Failure
from mcpbench.protocol.operation import (
    DEFAULT_POLL,
    MAX_POLL,
    MAX_ROUNDS,
    MIN_POLL,
    Done,
    Operation,
    Send,
    Stop,
    task_handle,
)
from mcpbench.protocol.versions import TASKS_EXTENSION

URL = "http://127.0.0.1:9/mcp"
NEW, OLD = "2026-07-28", "2025-11-25"
SAMPLING = {"method": "sampling/createMessage",
            "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "why?"}}], "maxTokens": 256}}
ELICIT = {"method": "elicitation/create",
          "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "because"}, "model": "canned"}
ACCEPTED = {"action": "accept", "content": {"answer": "yes"}}
# A state as an AEAD-sealing server sends it: opaque bytes, escapes included, echoed as they came.
STATE = "v1.AbC-_x\u00e9\\\"/\u2028=="
ANSWERS = Canned({"sampling/createMessage": SAMPLED, "elicitation/create": ACCEPTED})


class Wire:
    """A 2026-07-28 (or handshake-era) Streamable HTTP client connection whose server is a script."""

    def __init__(self, version: str = NEW) -> None:
        self.conn = ClientConnection("streamable-http", version, url=URL, policy=ANSWERS)
        self.sent: list = []  # the Outgoing of every request, in order

    def exchange(self, action: Send, result: dict | None = None, error: dict | None = None) -> Answered:
        out = self.conn.send(self.conn.prepare(action.method, action.params))
        self.sent.append(out)
        body = {"jsonrpc": "2.0", "id": out.request_id}
        body.update({"error": error} if error is not None else {"result": result})
        reader = self.conn.reader(PostHead(out, 200, "application/json"))
        events = reader.feed(orjson.dumps(body)) + reader.feed(b"")
        (answered,) = [e for e in events if type(e) is Answered]
        return answered

    def run(self, op: Operation, script: list, ts: list | None = None):
        """Play `script` (each a result dict, or `("error", {...})`) as the answers; the last action."""
        action = op.start()
        for index, step in enumerate(script):
            assert type(action) is Send, f"the operation ended after {index} answers: {action}"
            answered = self.exchange(action, error=step[1]) if type(step) is tuple else self.exchange(action, step)
            action = op.take(answered.answer, ts[index] if ts else 0.0)
        return action


def ask_round(state: str | None = STATE, requests: dict | None = None) -> dict:
    result = {"resultType": "input_required"}
    if requests is not False:
        result["inputRequests"] = requests or {"ask": SAMPLING}
    if state is not None:
        result["requestState"] = state
    return result


def complete(text: str = "because") -> dict:
    return {"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": False}


# --- input rounds -----------------------------------------------------------------------------------


def test_a_retry_has_a_new_id_the_answers_under_the_servers_keys_and_the_state_byte_for_byte():
    wire = Wire()
    op = Operation("tools/call", {"name": "ask", "arguments": {"question": "why?"}}, NEW, answers=ANSWERS)
    last = wire.run(op, [ask_round(requests={"ask": SAMPLING, "who": ELICIT}), complete()])
    assert last == Done(complete())
    first, retry = wire.sent
    assert first.request_id != retry.request_id
    params = retry.message.params
    assert params["name"] == "ask" and params["arguments"] == {"question": "why?"}
    assert params["inputResponses"] == {"ask": SAMPLED, "who": ACCEPTED}
    assert params["requestState"] == STATE
    # On the wire: the same JSON string the server sent, not a value rebuilt from a parse.
    assert orjson.dumps(STATE) in retry.data
    assert "inputResponses" not in first.message.params and "requestState" not in first.message.params
    assert op.rounds == 1 and op.asked == {"sampling/createMessage": 1, "elicitation/create": 1}
    # Both rounds carry the envelope and name the tool in the headers.
    assert retry.headers["mcp-name"] == "ask" and retry.headers["mcp-method"] == "tools/call"


def test_a_retry_without_a_state_sends_none_and_a_later_round_replaces_the_answers():
    wire = Wire()
    op = Operation("prompts/get", {"name": "p"}, NEW, answers=ANSWERS)
    last = wire.run(op, [ask_round(state=None), ask_round(state="s2", requests={"who": ELICIT}), complete()])
    assert type(last) is Done and op.rounds == 2
    _, second, third = (out.message.params for out in wire.sent)
    assert "requestState" not in second and second["inputResponses"] == {"ask": SAMPLED}
    assert third["requestState"] == "s2" and third["inputResponses"] == {"who": ACCEPTED}  # not the first round's


def test_the_send_says_which_kinds_it_answers_so_a_user_thinks_before_it():
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS)
    op.start()
    from mcpbench.protocol.jsonrpc import Response

    retry = op.take(Response(id=1, result=ask_round()))
    assert retry.kind == "retry" and retry.answers == ("sampling/createMessage",) and retry.wait == 0.0


def test_a_server_that_keeps_asking_stops_at_the_round_bound():
    wire = Wire()
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS, max_rounds=3)
    last = wire.run(op, [ask_round()] * 4)
    assert type(last) is Stop and last.failure == Failure.INPUT_ROUNDS_EXCEEDED
    assert "4 times" in last.detail and "3 rounds" in last.detail
    assert len(wire.sent) == 4  # the fourth ask is not answered


def test_the_default_bound_is_the_sdks():
    assert MAX_ROUNDS == 10


def test_state_only_rounds_wait_with_a_backoff_that_a_round_with_requests_resets():
    wire = Wire()
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS)
    action = op.start()
    waits = []
    for step in [ask_round(requests=False)] * 4 + [ask_round(), ask_round(requests=False)]:
        action = op.take(wire.exchange(action, step).answer)
        waits.append(action.wait)
    assert waits == [0.05, 0.1, 0.2, 0.25, 0.0, 0.05]
    assert all("inputResponses" not in out.message.params for out in wire.sent[1:5])


def test_the_sdks_refusal_of_an_echoed_state_is_state_rejected():
    # mcp 2.3's RequestStateBoundary: -32602, a frozen message, data.reason.
    refusal = {"code": -32602, "message": "Invalid or expired requestState", "data": {"reason": "invalid_request_state"}}
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS)
    last = Wire().run(op, [ask_round(), ("error", refusal)])
    assert type(last) is Stop and last.failure == Failure.STATE_REJECTED
    assert "round 2 refused the requestState it was sent back" in last.detail and last.answer.code == -32602


def test_an_invalid_params_error_to_a_retry_that_echoed_a_state_is_state_rejected_other_errors_are_not():
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS)
    assert Wire().run(op, [ask_round(), ("error", {"code": -32602, "message": "bad"})]).failure == Failure.STATE_REJECTED
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS)
    assert Wire().run(op, [ask_round(state=None), ("error", {"code": -32602, "message": "bad"})]).failure == Failure.JSONRPC_ERROR
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS)
    assert Wire().run(op, [("error", {"code": -32603, "message": "boom"})]).failure == Failure.JSONRPC_ERROR


def test_input_the_user_has_no_answer_for_stops_the_operation_unsent():
    wire = Wire()
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=Refuse())
    last = wire.run(op, [ask_round()])
    assert type(last) is Stop and last.failure == Failure.INPUT_UNANSWERED
    assert "sampling/createMessage" in last.detail and len(wire.sent) == 1


@pytest.mark.parametrize("bad", [{"ask": "not a request"}, ["ask"], {"ask": {"params": {}}}])
def test_malformed_input_requests_stop_the_operation(bad):
    last = Wire().run(Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS), [ask_round(requests=bad)])
    assert type(last) is Stop and last.failure == Failure.INPUT_UNANSWERED


def test_an_input_required_result_with_nothing_to_answer_or_echo_stops():
    last = Wire().run(Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS), [ask_round(state=None, requests=False)])
    assert type(last) is Stop and "neither" in last.detail


def test_a_result_without_result_type_is_complete():
    last = Wire().run(Operation("tools/call", {"name": "echo"}, NEW), [{"content": []}])
    assert last == Done({"content": []})


def test_a_broken_round_ends_the_operation_and_later_answers_change_nothing():
    op = Operation("tools/call", {"name": "ask"}, NEW, answers=ANSWERS)
    op.start()
    stop = op.broke(Failure.STREAM_CLOSED, "cut")
    from mcpbench.protocol.jsonrpc import Response

    assert op.take(Response(id=1, result=complete())) is stop


# --- tasks: the 2026-07-28 extension ------------------------------------------------------------------


def handle(status: str = "working", state: str | None = "t0", **extra) -> dict:
    out = {"resultType": "task", "taskId": "task-1", "status": status, "createdAt": "2026-12-06T10:00:00Z",
           "lastUpdatedAt": "2026-12-06T10:00:00Z", "ttlSeconds": 60, "pollIntervalMilliseconds": 50, **extra}
    if state is not None:
        out["requestState"] = state
    return out


def polled(status: str, state: str | None = None, **extra) -> dict:
    out = {**handle(status, state, **extra), "resultType": "complete"}
    return out if state is not None else {k: v for k, v in out.items() if k != "requestState"}


def test_an_extension_task_is_polled_at_its_interval_with_the_latest_state_and_its_inline_result():
    wire = Wire()
    op = Operation("tools/call", {"name": "job"}, NEW)
    last = wire.run(op, [handle(), polled("working", "t1"), polled("working"), polled("completed", result=complete("done"))])
    assert last == Done(complete("done"))
    polls = [out.message for out in wire.sent[1:]]
    assert [m.method for m in polls] == ["tasks/get"] * 3
    assert [m.params.get("requestState") for m in polls] == ["t0", "t1", None]  # the latest; none when none came
    assert all(m.params["taskId"] == "task-1" for m in polls)
    assert wire.sent[1].headers["mcp-name"] == "task-1" and wire.sent[1].headers["mcp-method"] == "tasks/get"
    assert op.polls == 3 and op.task.statuses == ["working", "completed"]


def test_poll_intervals_are_the_servers_within_bounds():
    op = Operation("tools/call", {"name": "job"}, NEW, poll_bounds=(0.1, 2.0))
    op.start()
    from mcpbench.protocol.jsonrpc import Response

    assert op.take(Response(id=1, result=handle(pollIntervalMilliseconds=1))).wait == 0.1
    assert op.take(Response(id=2, result=polled("working", pollIntervalMilliseconds=3_600_000))).wait == 2.0
    assert op.take(Response(id=3, result=polled("working", pollIntervalMilliseconds=700))).wait == 0.7
    no_interval = {k: v for k, v in polled("working").items() if k != "pollIntervalMilliseconds"}
    assert op.take(Response(id=4, result=no_interval)).wait == 0.7  # the last one the server gave
    assert MIN_POLL <= DEFAULT_POLL <= MAX_POLL


def test_a_task_asking_for_input_gets_one_update_per_request_and_keeps_polling():
    wire = Wire()
    op = Operation("tools/call", {"name": "job"}, NEW, answers=ANSWERS)
    asking = polled("input_required", "t2", inputRequests={"name": ELICIT})
    last = wire.run(op, [handle(), asking, {"resultType": "complete"}, asking, polled("completed", result=complete())])
    assert type(last) is Done
    methods = [out.message.method for out in wire.sent]
    # The second poll still shows the request (the update is eventually consistent): it is not answered twice.
    assert methods == ["tools/call", "tasks/get", "tasks/update", "tasks/get", "tasks/get"]
    update = {k: v for k, v in wire.sent[2].message.params.items() if k != "_meta"}
    assert update == {"taskId": "task-1", "requestState": "t2", "inputResponses": {"name": ACCEPTED}}
    assert op.rounds == 1


@pytest.mark.parametrize("final, failure, said", [
    (polled("failed", error={"code": -32603, "message": "disk full"}), Failure.TASK_FAILED, "disk full"),
    (polled("cancelled", statusMessage="by an operator"), Failure.TASK_CANCELLED, "by an operator"),
])
def test_a_task_ending_badly_is_classed(final, failure, said):
    last = Wire().run(Operation("tools/call", {"name": "job"}, NEW), [handle(), final])
    assert type(last) is Stop and last.failure == failure and said in last.detail


def test_a_task_the_server_does_not_know_within_its_ttl_is_not_found_and_past_it_has_expired():
    """-32602 on a poll: within the ttl the server never knew the task (another instance's); past it,
    the server let it go. Any other error is the server's own."""
    unknown = ("error", {"code": -32602, "message": "Unknown task: task-1"})
    last = Wire().run(Operation("tools/call", {"name": "job"}, NEW), [handle(ttlSeconds=60), unknown], ts=[10.0, 10.5])
    assert last.failure == Failure.TASK_NOT_FOUND and "Unknown task" in last.detail
    last = Wire().run(Operation("tools/call", {"name": "job"}, NEW), [handle(ttlSeconds=1), unknown], ts=[10.0, 12.0])
    assert last.failure == Failure.TASK_EXPIRED
    broken = ("error", {"code": -32603, "message": "store down"})
    last = Wire().run(Operation("tools/call", {"name": "job"}, NEW), [handle(), broken])
    assert last.failure == Failure.JSONRPC_ERROR and "store down" in last.detail


def test_a_task_still_working_past_its_ttl_has_expired():
    op = Operation("tools/call", {"name": "job"}, NEW)
    last = Wire().run(op, [handle(ttlSeconds=1), polled("working"), polled("working")], ts=[10.0, 10.5, 11.5])
    assert last.failure == Failure.TASK_EXPIRED and "past its ttl of 1 s" in last.detail


def test_a_task_given_up_is_cancelled_with_its_state():
    wire = Wire()
    op = Operation("tools/call", {"name": "job"}, NEW)
    action = op.start()
    action = op.take(wire.exchange(action, handle()).answer)
    cancel = op.cancel()
    assert cancel.method == "tasks/cancel" and cancel.params == {"taskId": "task-1", "requestState": "t0"}
    last = op.take(wire.exchange(cancel, {"resultType": "complete"}).answer)
    assert last.failure == Failure.TASK_CANCELLED and "acknowledged" in last.detail
    assert op.cancel() is None


def test_nothing_to_cancel_without_a_task():
    op = Operation("tools/call", {"name": "echo"}, NEW)
    op.start()
    assert op.cancel() is None


def test_a_task_handle_after_input_rounds_is_followed_too():
    last = Wire().run(Operation("tools/call", {"name": "job"}, NEW, answers=ANSWERS),
                      [ask_round(), handle(), polled("completed", result=complete())])
    assert type(last) is Done


# --- tasks: 2025-11-25 ----------------------------------------------------------------------------------


def old_task(status: str = "working", **extra) -> dict:
    return {"taskId": "t-9", "status": status, "createdAt": "x", "lastUpdatedAt": "x", "ttl": 60000, "pollInterval": 100, **extra}


def test_a_2025_11_25_task_is_asked_for_polled_then_fetched_with_tasks_result():
    wire = Wire(OLD)
    op = Operation("tools/call", {"name": "job"}, OLD, as_task=True, task_ttl=30)
    last = wire.run(op, [{"task": old_task()}, old_task(), old_task("completed"), complete("done")])
    assert last == Done(complete("done"))
    assert wire.sent[0].message.params["task"] == {"ttl": 30000}
    assert [out.message.method for out in wire.sent] == ["tools/call", "tasks/get", "tasks/get", "tasks/result"]
    assert wire.sent[3].message.params == {"taskId": "t-9"}
    assert "mcp-name" not in wire.sent[1].headers  # no method headers before 2026-07-28


def test_a_2025_11_25_task_that_failed_reports_the_error_tasks_result_gives():
    last = Wire(OLD).run(Operation("tools/call", {"name": "job"}, OLD, as_task=True),
                         [{"task": old_task()}, old_task("failed"), ("error", {"code": -32603, "message": "crashed"})])
    assert last.failure == Failure.TASK_FAILED and "crashed" in last.detail


def test_as_task_adds_no_task_param_in_2026_07_28_the_capability_asks_instead():
    op = Operation("tools/call", {"name": "job"}, NEW, as_task=True)
    assert "task" not in op.start().params
    assert TASKS_EXTENSION == "io.modelcontextprotocol/tasks"


def test_task_handles_of_both_shapes_and_results_that_are_none():
    assert task_handle({"task": {"taskId": "a"}}) == {"taskId": "a"}
    assert task_handle({"resultType": "task", "taskId": "b"})["taskId"] == "b"
    assert task_handle({"resultType": "complete", "taskId": "b"}) is None
    assert task_handle({"task": "b"}) is None and task_handle([]) is None
