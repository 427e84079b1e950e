"""The trace model (`trace/model.py`): 2026-07-28 multi round-trip requests as one operation, and
each of their rules broken once and kept once, on doctored traces (tests/support/traces.py)."""

from mcpbench.trace.model import MRTR_AMBIGUOUS, MRTR_UNLINKED, Rebuild, SessionReport
from mcpbench.trace.reader import TraceReader
from tests.support.traces import (
    ELICIT,
    answered,
    asks,
    done,
    event,
    handshake,
    listen,
    notified,
    on_stream,
    over_http,
    request,
    result,
    sent,
    stream_end,
    task_status,
    write_trace,
)


def model(tmp_path, *events: dict) -> SessionReport:
    rebuild = Rebuild()
    for event in TraceReader(write_trace(tmp_path / "t.jsonl", list(events))):
        rebuild.take(event)
    rebuild.finish()
    (session,) = rebuild.sessions.values()
    return session


def codes(session: SessionReport, kind: str = "violation") -> list[str]:
    return [entry.name for entry in session.entries if entry.kind == kind]


def test_rounds_linked_by_keys_are_one_operation_with_the_clients_wait_apart(tmp_path):
    session = model(tmp_path, request(2.0, 1), asks(2.1, 1), request(5.1, 2, responses=answered()), done(5.3, 2))
    (op,) = session.operations
    assert [r.id for r in op.rounds] == [1, 2] and op.outcome == "ok"
    assert round(op.latency, 6) == 3.3 and round(op.client_wait, 6) == 3.0 and round(op.server_time, 6) == 0.3
    assert codes(session) == [] and codes(session, "warning") == []


def test_parallel_rounds_follow_their_exact_request_state(tmp_path):
    session = model(tmp_path, request(1.0, 1), request(1.0, 2), asks(1.1, 1, state="A"), asks(1.1, 2, state="B"),
                    request(1.2, 3, responses=answered(), state="B"), request(1.2, 4, responses=answered(), state="A"),
                    done(1.3, 3), done(1.4, 4))
    first, second = session.operations
    assert [r.id for r in first.rounds] == [1, 4] and [r.id for r in second.rounds] == [2, 3]
    assert codes(session) == []


def test_two_waiting_operations_that_fit_one_retry_link_none_and_say_so(tmp_path):
    session = model(tmp_path, request(1.0, 1), request(1.0, 2), asks(1.1, 1), asks(1.1, 2),
                    request(1.2, 3, responses=answered()), done(1.3, 3))
    assert [len(op.rounds) for op in session.operations] == [1, 1, 1]
    assert codes(session, "warning") == [MRTR_AMBIGUOUS]
    # never guessed: both first operations stay asking for input, the retry is an operation of its own
    assert [op.outcome for op in session.operations] == ["input-required", "input-required", "ok"]


def test_a_retry_nothing_asked_for_is_unlinked_and_an_unfinished_round_stays_open(tmp_path):
    session = model(tmp_path, request(1.0, 1, responses=answered()), done(1.1, 1), request(2.0, 2), asks(2.1, 2),
                    request(2.2, 3, responses=answered()))
    assert codes(session, "warning") == [MRTR_UNLINKED]
    unlinked, unfinished = session.operations
    assert len(unlinked.rounds) == 1 and unfinished.outcome == "unanswered" and len(unfinished.rounds) == 2
    assert unfinished.latency is None


def test_request_state_changed_dropped_or_invented(tmp_path):
    changed = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered(), state="B"), done(1.3, 2))
    dropped = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered()), done(1.3, 2))
    invented = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 2, responses=answered(), state="X"), done(1.3, 2))
    kept = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered(), state="A"), done(1.3, 2))
    for session, word in ((changed, "changes"), (dropped, "drops"), (invented, "invents")):
        assert codes(session) == ["mrtr-state-changed"], word
        assert word in next(e.detail for e in session.entries if e.kind == "violation")
        assert len(session.operations) == 1  # linked all the same: method, name and keys fit
    assert codes(kept) == [] and len(kept.operations[0].rounds) == 2


def test_a_retry_reusing_an_id(tmp_path):
    broken = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 1, responses=answered()), done(1.3, 1))
    kept = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 2, responses=answered()), done(1.3, 2))
    assert codes(broken) == ["mrtr-id-reused"] and codes(kept) == []


def test_input_responses_keys_must_be_the_input_requests_keys(tmp_path):
    broken = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 2, responses=answered("other")), done(1.3, 2))
    kept = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 2, responses=answered("ask")), done(1.3, 2))
    assert codes(broken) == ["mrtr-keys-mismatch"] and len(broken.operations) == 1
    assert codes(kept) == []


def test_one_state_carried_by_two_requests_at_once(tmp_path):
    broken = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered(), state="A"),
                   request(1.2, 3, responses=answered(), state="A"), done(1.3, 2), done(1.3, 3))
    kept = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered(), state="A"),
                 asks(1.3, 2, state="B"), request(1.4, 3, responses=answered(), state="B"), done(1.5, 3))
    assert "mrtr-state-shared" in codes(broken)
    assert codes(kept) == [] and len(kept.operations[0].rounds) == 3


def test_input_required_only_from_the_three_methods(tmp_path):
    broken = model(tmp_path, request(1.0, 1, method="tools/list"), asks(1.1, 1))
    kept = model(tmp_path, request(1.0, 1, method="resources/read", name="file:///a"), asks(1.1, 1),
                 request(1.2, 2, method="resources/read", name="file:///a", responses=answered()), done(1.3, 2))
    assert codes(broken) == ["input-required-method"]
    assert codes(kept) == [] and kept.operations[0].name == "resources/read file:///a"


def test_input_asked_for_a_capability_the_client_did_not_declare(tmp_path):
    broken = model(tmp_path, request(1.0, 1, capabilities={"sampling": {}}), asks(1.1, 1, inputs={"name": ELICIT}))
    kept = model(tmp_path, request(1.0, 1, capabilities={"elicitation": {}}), asks(1.1, 1, inputs={"name": ELICIT}))
    assert codes(broken) == ["input-capability-missing"] and "elicitation" in broken.entries[-1].detail
    assert codes(kept) == []


def test_a_2026_result_without_result_type(tmp_path):
    broken = model(tmp_path, request(1.0, 1, name="echo"), done(1.1, 1, result_type=False))
    kept = model(tmp_path, request(1.0, 1, name="echo"), done(1.1, 1))
    assert codes(broken) == ["missing-result-type"] and codes(kept) == []


def task_call(ts: float = 2.0, task_id: str = "t1") -> list[dict]:
    """A task-augmented tools/call answered with its task handle (2025-11-25)."""
    return [sent(ts, 1, "tools/call", {"name": "work", "arguments": {}, "task": {"ttl": 60000}}),
            result(ts + 0.01, 1, {"task": task_status(task_id, "working")})]


def test_a_task_keeps_its_operation_open_until_it_is_terminal(tmp_path):
    session = model(tmp_path, *handshake(), *task_call(),
                    sent(2.2, 2, "tasks/get", {"taskId": "t1"}), result(2.21, 2, task_status("t1", "working")),
                    notified(2.3, "notifications/progress", {"progressToken": 9, "progress": 1,
                                                             "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}),
                    sent(2.5, 3, "tasks/get", {"taskId": "t1"}), result(2.51, 3, task_status("t1", "completed")),
                    sent(2.6, 4, "tasks/result", {"taskId": "t1"}),
                    result(2.61, 4, {"content": [{"type": "text", "text": "done"}], "isError": False}),
                    sent(2.7, 5, "tasks/list", {}), result(2.71, 5, {"tasks": [task_status("t1", "completed")]}))
    work = session.operations[1]
    assert work.name == "tools/call work" and work.outcome == "ok" and round(work.latency, 6) == 0.51
    task = work.task
    assert task.id == "t1" and task.polls == 2 and [status for _, status in task.statuses] == ["working", "completed"]
    assert round(task.create_time, 6) == 0.01 and round(task.complete_time, 6) == 0.51
    assert work.notifications == 1 and work.rounds[0].outcome == "task"
    assert [op.name for op in session.operations[2:]] == ["tasks/get", "tasks/get", "tasks/result", "tasks/list"]
    assert all(op.task is task for op in session.operations[2:5]) and codes(session) == []


def test_an_unfinished_task_says_its_last_status_and_a_status_notification_ends_one(tmp_path):
    open_ = model(tmp_path, *handshake(), *task_call(), sent(2.2, 2, "tasks/get", {"taskId": "t1"}),
                  result(2.21, 2, task_status("t1", "input_required")))
    assert open_.operations[1].outcome == "task-input_required" and open_.operations[1].latency is None
    notified_ = model(tmp_path, *handshake(), *task_call(), notified(2.4, "notifications/tasks/status", task_status("t1", "failed")))
    assert notified_.operations[1].outcome == "failed" and notified_.operations[1].notifications == 1


def test_a_2026_task_handle_comes_unasked_beside_its_result_type_and_its_result_rides_the_last_poll(tmp_path):
    # SEP-2663: `resultType: "task"` with the task's fields beside it (no `task` object), no tasks/result.
    handle = {"resultType": "task", **task_status("t1", "working")}
    done_ = {"resultType": "complete", **task_status("t1", "completed"),
             "result": {"content": [{"type": "text", "text": "no"}], "isError": True}}
    session = model(tmp_path, request(2.0, 1, "work"), result(2.01, 1, handle),
                    request(2.2, 2, method="tasks/get", taskId="t1"), result(2.21, 2, {"resultType": "complete", **task_status("t1", "working")}),
                    request(2.4, 3, method="tasks/get", taskId="t1"), result(2.41, 3, done_))
    work = session.operations[0]
    assert work.task is not None and work.task.polls == 2 and work.rounds[0].outcome == "task"
    assert work.outcome == "tool-error" and round(work.latency, 6) == 0.41  # the tool's own result, when the task ended
    assert codes(session) == []  # the polls name a task the session created (before: task-unknown, twice)


def test_a_server_request_belongs_to_the_request_whose_stream_carried_it(tmp_path):
    # two calls in flight: the one running operation cannot say; the response stream can
    ask = {**sent(1.3, 9, "sampling/createMessage", {"messages": [], "maxTokens": 8}, direction="s2c"), "flow": "f2"}
    session = model(tmp_path, *handshake(), {**sent(1.1, 1, "tools/call", {"name": "slow"}), "flow": "f1"},
                    {**sent(1.2, 2, "tools/call", {"name": "ask"}), "flow": "f2"}, ask)
    slow, asking = session.operations[1:3]
    assert asking.inner and asking.inner[0].method == "sampling/createMessage" and not slow.inner
    assert asking.inner[0].outer is asking


def test_a_poll_of_a_task_never_created(tmp_path):
    broken = model(tmp_path, *handshake(), sent(2.0, 1, "tasks/get", {"taskId": "nope"}), result(2.1, 1, task_status("nope", "working")))
    kept = model(tmp_path, *handshake(), *task_call(), sent(2.2, 2, "tasks/get", {"taskId": "t1"}), result(2.21, 2, task_status("t1", "working")))
    assert codes(broken) == ["task-unknown"] and codes(kept) == []


def test_a_status_going_back_from_terminal(tmp_path):
    broken = model(tmp_path, *handshake(), *task_call(), sent(2.2, 2, "tasks/cancel", {"taskId": "t1"}),
                   result(2.21, 2, task_status("t1", "cancelled")), notified(2.3, "notifications/tasks/status", task_status("t1", "working")))
    kept = model(tmp_path, *handshake(), *task_call(), sent(2.2, 2, "tasks/cancel", {"taskId": "t1"}),
                 result(2.21, 2, task_status("t1", "cancelled")), notified(2.3, "notifications/tasks/status", task_status("t1", "cancelled")))
    assert codes(broken) == ["task-status-regressed"]
    assert codes(kept) == [] and kept.operations[1].outcome == "cancelled"


def test_a_result_before_completion(tmp_path):
    broken = model(tmp_path, *handshake(), *task_call(), sent(2.2, 2, "tasks/result", {"taskId": "t1"}),
                   result(2.3, 2, {"content": [], "isError": False}), sent(2.4, 3, "tasks/get", {"taskId": "t1"}),
                   result(2.41, 3, task_status("t1", "working")))
    kept = model(tmp_path, *handshake(), *task_call(), sent(2.2, 2, "tasks/result", {"taskId": "t1"}),
                 result(2.3, 2, {"content": [], "isError": False}), sent(2.4, 3, "tasks/get", {"taskId": "t1"}),
                 result(2.41, 3, task_status("t1", "completed")))
    assert codes(broken) == ["task-result-early"] and codes(kept) == []
    assert kept.operations[1].outcome == "ok" and round(kept.operations[1].latency, 6) == 0.3


def test_a_listen_stream_is_a_stream_with_its_notifications_never_an_unanswered_call(tmp_path):
    session = model(tmp_path, *[over_http(e, "f1") for e in (
        listen(1.0, 7), on_stream(1.01, "notifications/subscriptions/acknowledged", 7, notifications={"toolsListChanged": True}),
        on_stream(1.5, "notifications/tools/list_changed", 7), on_stream(1.9, "notifications/tools/list_changed", 7))],
        over_http(request(1.2, 8, name="echo"), "f2"), over_http(done(1.3, 8), "f2"), stream_end(2.5, "f1"))
    listening, echo = session.operations
    stream = listening.stream
    assert stream.acknowledged == 1.01 and [m for _, m in stream.notifications].count("notifications/tools/list_changed") == 2
    assert (listening.outcome, stream.ending, stream.closed) == ("closed", "closed", 2.5) and listening.notifications == 3
    assert echo.outcome == "ok" and echo.notifications == 0
    still = model(tmp_path, listen(1.0, 1), on_stream(1.01, "notifications/subscriptions/acknowledged", 1))
    assert still.operations[0].outcome == "listening"  # the trace ended while it listened
    cut = model(tmp_path, over_http(listen(1.0, 1), "f1"), stream_end(1.5, "f1", "error"))
    assert cut.operations[0].outcome == "cut" and cut.operations[0].detail == "connection reset"


def test_a_log_message_for_a_request_that_asked_no_level(tmp_path):
    log = {"level": "info", "data": "hi"}
    broken = model(tmp_path, over_http(request(1.0, 1, name="echo"), "f1"), over_http(notified(1.1, "notifications/message", log), "f1"),
                   over_http(done(1.2, 1), "f1"))
    asked = request(1.0, 1, name="echo")
    asked["msg"]["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "info"
    kept = model(tmp_path, over_http(asked, "f1"), over_http(notified(1.1, "notifications/message", log), "f1"), over_http(done(1.2, 1), "f1"))
    assert codes(broken) == ["log-not-requested"] and codes(kept) == []
    assert kept.operations[0].notifications == 1  # a request's own notification stays with it


def test_list_and_read_results_without_freshness_hints_are_warned_about(tmp_path):
    bare = model(tmp_path, request(1.0, 1, method="tools/list"), done(1.1, 1))
    hinted = model(tmp_path, request(1.0, 1, method="tools/list"), done(1.1, 1, ttlMs=0, cacheScope="private"))
    assert codes(bare, "warning") == ["missing-cache-hints"] and codes(hinted, "warning") == []


def _fingerprint(rebuild: Rebuild) -> list:
    """All a view can read of the model: sessions, their timelines and operations, sizes included."""
    return [(key, s.id, s.requests, s.session.state, s.session.version, s.session.era, s.client, s.end,
             [(e.kind, e.name, e.line, e.dir, e.detail, e.outcome, e.latency, e.id, e.error_code, e.request_bytes, e.answer_bytes)
              for e in s.entries],
             [(o.name, o.outcome, o.detail, o.end, [r.id for r in o.rounds], o.notifications, o.log_level, len(o.inner), o.capabilities)
              for o in s.operations])
            for key, s in rebuild.sessions.items()]


def _mixed_stdio_events() -> list[dict]:
    """Plain calls and all that leaves the hot path, in two stdio sessions of both eras."""
    return [
        *handshake(1.0),
        sent(1.1, 1, "tools/call", {"name": "echo", "arguments": {}, "_meta": {"progressToken": "p"}}),
        notified(1.11, "notifications/progress", {"progressToken": "p", "progress": 1}),
        result(1.12, 1, {"content": [], "isError": True}),
        sent(1.2, 2, "tools/list"), event(1.21, "s1", "s2c", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "no"}}),
        result(1.3, 99, {}),  # an answer to nothing
        sent(1.4, 3, "tools/call", {"name": "a"}), sent(1.41, 3, "tools/call", {"name": "b"}),  # an id reused in flight
        sent(1.5, 7, "sampling/createMessage", {}, direction="s2c"), result(1.51, 7, {}, direction="c2s"),
        event(1.6, "s1", "c2s", [{"jsonrpc": "2.0", "id": 8, "method": "ping"}]),
        sent(1.7, 9, "tools/call", {"name": "work", "task": {}}), result(1.71, 9, {"task": task_status("t1", "working")}),
        sent(1.72, 10, "tasks/get", {"taskId": "t1"}), result(1.73, 10, task_status("t1", "completed")),
        notified(1.8, "notifications/message", {"level": "info", "data": "x"}),
        event(1.9, "s1", "c2s", {"jsonrpc": "1.0", "id": 11, "method": "ping"}),
        request(2.0, 1, session="s2"), asks(2.1, 1, session="s2"), request(2.2, 2, responses=answered(), session="s2"),
        done(2.3, 2, session="s2"), request(2.4, 3, "echo", session="s2"), done(2.5, 3, result_type=False, session="s2"),
        sent(3.0, 12, "tools/call", {"name": "late"}),
        event(3.1, "s1", None, kind="process", event="exit", exit_code=0),
        result(3.2, 12, {}), sent(3.3, 13, "ping"),
    ]


def test_the_hot_path_builds_the_model_take_builds(tmp_path):
    """`take_all` (a hot path for the usual events) and `take` event by event give the same sessions,
    timelines and operations, on a mixed trace and on shuffled and doctored variants of it."""
    import random

    rng = random.Random(33)
    events = _mixed_stdio_events()
    for attempt in range(30):  # bounded: 30 variants of a few dozen events
        variant = list(events)
        if attempt:
            for _ in range(3):
                i, j = rng.randrange(len(variant)), rng.randrange(len(variant))
                variant[i], variant[j] = variant[j], variant[i]
            variant[rng.randrange(len(variant))] = dict(variant[rng.randrange(len(variant))], dir=rng.choice(["c2s", "s2c"]))
        path = write_trace(tmp_path / f"mixed-{attempt}.jsonl", variant)
        one_by_one = Rebuild(measure=True, ordered=True)
        for line, event_ in enumerate(TraceReader(path), 1):
            step = one_by_one.take(event_)
            for entry in step.added if step is not None else ():
                entry.line = line
        at_once = Rebuild(measure=True, ordered=True)
        at_once.take_all(TraceReader(path))
        assert _fingerprint(at_once) == _fingerprint(one_by_one), attempt
        assert [o.name for o in at_once.opened] == [o.name for o in one_by_one.opened]
        assert [s.id for s in at_once.opened_in] == [s.id for s in one_by_one.opened_in]
        one_by_one.finish(), at_once.finish()
        assert _fingerprint(at_once) == _fingerprint(one_by_one), attempt
