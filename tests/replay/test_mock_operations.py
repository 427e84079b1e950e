"""`serve-trace` serves tasks and listen streams (issue 35, item 4).

The recording is real (tests/support/operations.py): the official SDK 2.x client against the reference
server through the tee, a task of `work` in both forms (2025-11-25's `task` param, polled, fetched
with `tasks/result`, listed; the 2026-07-28 extension's handle, polled until it carries the result),
a second task cancelled, and a 2026-07-28 `subscriptions/listen` stream told of two `toggle_tool`
changes. The mock serves a task as one of its own (its own id, the recorded statuses poll by poll, a
cancel honoured whatever the recording did) and holds a listen stream open, telling each recorded
change only once the live request that caused it is answered. The SDK client, run against the mock
on every transport, sees what it saw against the recorded server, ids aside.
"""

import sys
import threading
from pathlib import Path

import anyio
import pytest

from mcpbench.lab.peers.drive import sdk_target
from mcpbench.protocol.jsonrpc import INVALID_PARAMS, Request
from mcpbench.protocol.versions import LISTEN, LISTEN_ACKNOWLEDGED, META_SUBSCRIPTION_ID
from mcpbench.replay import plan as plans
from mcpbench.replay.serve_trace import MockHttpServer, TraceAnswers
from tests.replay.helpers import TIMEOUT, mock_server
from tests.support.operations import MODES, listen_twice, stdio_recording, task_input, tasks
from tests.support.servers import stdio_params

LEGACY, MODERN = MODES["legacy"], MODES["auto"]
ENVELOPE = {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}}
# The module fixture records the SDK client through the tee (some seconds): `-m "not slow"` leaves the module out.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The trace (its `ask`, tasks and listen sessions) and what the recorded client saw in it."""
    trace, seen = stdio_recording(tmp_path_factory.getbasetemp())  # (shared with test_replay_operations.py)
    return {"tasks": trace, "listen": trace, "seen": seen["tasks"], "said": seen["listen"], "asked": seen["task_input"]}


def request(n: int, method: str, params: dict | None = None, *, modern: bool = False) -> Request:
    return Request(id=n, method=method, params={**(params or {}), **(ENVELOPE if modern else {})}, _parsed=True)


def call_work(answers: TraceAnswers, ms: int, session: str) -> dict:
    """The mock's handle for a 2025-11-25 task of `work` (the session's first call, after its handshake)."""
    answers.lookup(request(1, "initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}), session)
    result = answers.lookup(request(2, "tools/call", {"name": "work", "arguments": {"ms": ms}, "task": {"ttl": 60000}}), session).answer["result"]
    return result["task"]


def test_a_task_is_the_mocks_own_its_recorded_statuses_poll_by_poll_then_its_end(recorded):
    trace = plans.load(recorded["tasks"])
    answers = TraceAnswers(trace)
    recorded_ids = {call.answer.result["task"]["taskId"] for s in trace.sessions for call in s.calls
                    if call.method == "tools/call" and "task" in call.answer.result}
    handle = call_work(answers, 150, "a")
    assert handle["status"] == "working" and handle["taskId"] not in recorded_ids  # a new id, not the recorded server's
    task = {"taskId": handle["taskId"]}
    statuses = [answers.lookup(request(3 + i, "tasks/get", task), "a").answer["result"]["status"] for i in range(5)]
    done = recorded["seen"]["legacy"][0]
    assert statuses[:len(done["statuses"])] == done["statuses"] and statuses[-1] == "completed"  # then its last, again
    result = answers.lookup(request(9, "tasks/result", task), "a").answer["result"]
    assert result["content"] == done["result"]["content"]
    assert result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == handle["taskId"]  # the mock's id throughout
    listed = answers.lookup(request(10, "tasks/list"), "a").answer["result"]["tasks"]
    assert [(t["taskId"], t["status"]) for t in listed] == [(handle["taskId"], "completed")]
    # Another client gets a task of its own.
    assert call_work(answers, 150, "b")["taskId"] != handle["taskId"]


def test_a_cancel_is_honoured_whatever_the_recording_did_and_an_ended_task_refuses_it(recorded):
    answers = TraceAnswers(plans.load(recorded["tasks"]))
    task = {"taskId": call_work(answers, 150, "a")["taskId"]}  # recorded: polled to completion, never cancelled
    assert answers.lookup(request(3, "tasks/get", task), "a").answer["result"]["status"] == "working"
    cancelled = answers.lookup(request(4, "tasks/cancel", task), "a").answer["result"]
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task["taskId"]
    assert answers.lookup(request(5, "tasks/get", task), "a").answer["result"]["status"] == "cancelled"  # from then on
    refused = answers.lookup(request(6, "tasks/result", task), "a").answer["error"]
    assert refused["code"] == INVALID_PARAMS and "was cancelled" in refused["message"]
    again = answers.lookup(request(7, "tasks/cancel", task), "a").answer["error"]
    assert again["code"] == INVALID_PARAMS and "already cancelled" in again["message"]
    # A task that ended refuses a cancel with -32602, as the spec asks.
    ended = {"taskId": call_work(answers, 150, "b")["taskId"]}
    answers.lookup(request(3, "tasks/result", ended), "b")
    late = answers.lookup(request(4, "tasks/cancel", ended), "b").answer["error"]
    assert late["code"] == INVALID_PARAMS and "already completed" in late["message"]
    unknown = answers.lookup(request(8, "tasks/get", {"taskId": "nope"}), "a").answer["error"]
    assert unknown["code"] == INVALID_PARAMS and "unknown task 'nope'" in unknown["message"]


def test_a_task_asking_for_input_waits_for_its_update_and_refuses_what_it_never_asked(recorded):
    """The recorded task asked `confirm` mid-task: its polls say so until a `tasks/update` answers that
    key; an unknown key, an unknown task, or an update when nothing is asked are refused with -32602."""
    answers = TraceAnswers(plans.load(recorded["tasks"]))
    answers.lookup(request(1, "server/discover", modern=True), "a")
    created = answers.lookup(request(2, "tools/call", {"name": "work", "arguments": {"ms": 150, "ask": True}}, modern=True),
                             "a").answer["result"]
    task = {"taskId": created["taskId"]}
    assert created["status"] == "input_required"

    def update(n: int, responses: dict, about: dict = task) -> dict:
        return answers.lookup(request(n, "tasks/update", {**about, "inputResponses": responses}, modern=True), "a").answer

    def poll(n: int) -> dict:
        return answers.lookup(request(n, "tasks/get", task, modern=True), "a").answer["result"]

    for n in (3, 4, 5):  # it waits: the poll that asked, again and again
        polled = poll(n)
        assert polled["status"] == "input_required" and set(polled["inputRequests"]) == {"confirm"}
    confirmed = {"action": "accept", "content": {"go": True}}
    wrong = update(6, {"confirm": confirmed, "extra": confirmed})["error"]
    assert wrong["code"] == INVALID_PARAMS and "never asked for input 'extra'" in wrong["message"]
    unknown = update(7, {"confirm": confirmed}, {"taskId": "nope"})["error"]
    assert unknown["code"] == INVALID_PARAMS and "unknown task 'nope'" in unknown["message"]
    assert update(8, {"confirm": confirmed})["result"]["status"] == "working"
    statuses = [poll(9 + i)["status"] for i in range(6)]
    assert statuses[0] == "working" and statuses[-1] == "completed"
    late = update(20, {"confirm": confirmed})["error"]
    assert late["code"] == INVALID_PARAMS and "asks for no input now" in late["message"]


def test_a_listen_stream_is_acknowledged_at_once_and_told_a_change_only_after_its_cause(recorded):
    answers = TraceAnswers(plans.load(recorded["listen"]))
    answers.lookup(request(1, "server/discover", modern=True))
    listen = answers.lookup(request("mine", LISTEN, {"notifications": {"toolsListChanged": True}}, modern=True))
    stream = listen.hold
    assert stream is not None  # held open (the recorded error came when its client left: how that stream ended)
    (ack,) = [note for _, note in listen.timeline]
    assert ack.method == LISTEN_ACKNOWLEDGED and ack.params["_meta"][META_SUBSCRIPTION_ID] == "mine"  # tagged as live
    answers.lookup(request(2, "tools/list", modern=True))
    assert stream.inbox.empty()  # nothing has changed yet
    toggled = answers.lookup(request(3, "tools/call", {"name": "toggle_tool", "arguments": {}}, modern=True))
    assert stream.inbox.empty()  # told once the cause's answer is written
    toggled.after()
    change = stream.inbox.get_nowait()
    assert change.method == "notifications/tools/list_changed" and change.params["_meta"][META_SUBSCRIPTION_ID] == "mine"
    answers.cancelled(None, {"requestId": "mine"})
    assert stream.closed.is_set() and stream.cancelled


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_a_held_listen_stream_ends_when_its_client_leaves(recorded, transport):
    """In process: once the SDK client has left, the mock holds no stream (its thread is not left waiting)."""
    answers = TraceAnswers(plans.load(recorded["listen"]))
    server = MockHttpServer(answers, transport=transport, port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        assert anyio.run(listen_twice, lambda: sdk_target(server.url, transport)) == recorded["said"]
        assert answers.listens.idle.wait(TIMEOUT)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)




def without_ids(seen: list[dict]) -> list[dict]:
    """What a client saw of its tasks, the task ids left out (the mock's are its own)."""
    out = []
    for task in seen:
        result = task["result"]
        if result is not None:
            result = {**result, "_meta": None}
        out.append({"statuses": task["statuses"], "result": result, "listed": task.get("listed")})
    return out


@pytest.mark.slow  # the SDK client against the mock, on three transports
@pytest.mark.parametrize("transport", ["stdio", "streamable-http", "sse"])
def test_the_sdk_clients_tasks_and_listen_complete_against_the_mock_as_against_the_server(recorded, transport):
    def run(trace: Path, drive):
        """`drive` given a maker of targets (a legacy SSE target serves one session)."""
        if transport == "stdio":
            return anyio.run(drive, lambda: stdio_params([sys.executable, "-m", "mcpbench", "serve-trace", str(trace)]))
        with mock_server(trace, transport) as url:
            return anyio.run(drive, lambda: sdk_target(url, transport))

    seen = run(recorded["tasks"], tasks)
    for mode in MODES:
        assert without_ids(seen[mode]) == without_ids(recorded["seen"][mode]), (transport, mode)
        handle = seen[mode][0]["handle"]
        task_id = handle["taskId"] if mode == "auto" else handle["task"]["taskId"]
        assert seen[mode][0]["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task_id
    assert run(recorded["listen"], listen_twice) == recorded["said"]  # each change came on the stream, after its toggle
    # a task that asked for input mid-task: answered with tasks/update, then polled to the same end
    asked = run(recorded["tasks"], task_input)
    assert without_ids([asked]) == without_ids([recorded["asked"]]), (transport, asked)
    assert "updated working" in asked["statuses"] and asked["result"]["content"][0]["text"].endswith("(accept)")
