"""Tasks and listen streams on traffic real processes sent, through the recorders (issue 33, items 4, 5, 7).

The reference server's `work` runs as a task (`lab serve --tasks`, `lab/peers/tasks.py`) in both
forms: the official SDK client asks for one in 2025-11-25 (`legacy`) and declares the
`io.modelcontextprotocol/tasks` extension in 2026-07-28 (`auto`), then polls it to its end, and a
second task is cancelled. Recorded through the tee (stdio) and `record` (Streamable HTTP, legacy SSE),
the client got every poll's status as the server sent it (the recorders pass the polls untouched),
and the trace model shows each call as one operation that became a task: open until the task ends,
its polls counted, its statuses in order. A `subscriptions/listen` stream through `record` delivers
its notification while it is still open (nothing buffered), and the model shows a stream (on
Streamable HTTP, its own POST; on legacy SSE, the session's one stream). Every
view agrees on these traces as on the rest of the suite's (tests/support/views.py).
"""

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcpbench.analysis.inspect import summarize
from mcpbench.lab.peers.drive import sdk_target
from mcpbench.replay import plan as plans
from tests.support.peers import recording_proxy
from tests.support.operations import MODES, WORK_MS, drive_tasks
from tests.support.recordings import tee_argv
from tests.support.servers import RunningServer, reference_server, serve_argv, stdio_params
from tests.support.views import assert_views_agree

SESSION_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def task_servers() -> Iterator[dict[str, RunningServer]]:
    """The reference server with `--tasks` on both HTTP transports."""
    with reference_server("streamable-http", extra_args=["--tasks"]) as http, reference_server("sse", extra_args=["--tasks"]) as sse:
        yield {"streamable-http": http, "sse": sse}


def recorded(transport: str, servers: dict, trace: Path) -> dict[str, list[dict]]:
    """Each era's tasks, driven by the SDK client through the tee (stdio) or `record` (HTTP) into `trace`."""
    if transport == "stdio":
        return {mode: anyio.run(drive_tasks, stdio_params(tee_argv(trace, serve_argv("stdio", extra_args=["--tasks"]))), mode)
                for mode in MODES}
    with recording_proxy(servers[transport].url, trace) as url:
        return {mode: anyio.run(drive_tasks, sdk_target(url, transport), mode) for mode in MODES}


@pytest.mark.slow  # two SDK sessions per transport, each with a task polled to its end
@pytest.mark.parametrize("transport", ["stdio", "streamable-http", "sse"])
def test_tasks_of_both_forms_pass_the_recorders_untouched_and_the_model_shows_them(transport, task_servers, tmp_path):
    trace = tmp_path / f"tasks-{transport}.jsonl"
    seen = recorded(transport, task_servers, trace)
    assert_views_agree(trace)  # inspect, the frames, telemetry, the live view and replay's plan alike
    report = summarize(trace)
    sessions = {s.session.version: s for s in report.sessions if s.operations}
    assert set(sessions) == set(MODES.values()), [s.id for s in report.sessions]
    for mode, version in MODES.items():
        done, cancelled = seen[mode]
        assert done["statuses"][-1] == "completed" and cancelled["statuses"] == ["working", "cancelled"]
        session = sessions[version]
        owners = [op for op in session.operations if op.task is not None and op.task.op is op]
        assert [op.name for op in owners] == ["tools/call work", "tools/call work"], version
        work, stopped = owners
        # open until the task ended, not done when the handle came
        assert work.outcome == "ok" and work.task.status == "completed" and work.latency >= WORK_MS / 1000, version
        assert work.task.polls == len(done["statuses"]) and work.task.create_time < work.latency, version
        assert [status for _, status in work.task.statuses] == ["working", "completed"], version
        assert stopped.outcome == "cancelled" and [status for _, status in stopped.task.statuses] == ["working", "cancelled"]
        assert not [e for e in session.entries if e.kind == "violation"], version
        # the polls as recorded are the polls the client got: the recorders changed nothing
        (plan,) = [p for p in plans.load(trace).sessions if p.version == version and any(c.method == "tasks/get" for c in p.calls)]
        polled = [c.answer.result["status"] for c in plan.calls if c.method in ("tasks/get", "tasks/cancel")]
        assert polled == done["statuses"] + cancelled["statuses"], version
        if version == "2025-11-25":
            assert [c.method for c in plan.calls if c.method in ("tasks/result", "tasks/list")] == ["tasks/result", "tasks/list"]
            (result,) = [c for c in plan.calls if c.method == "tasks/result"]
            assert result.answer.result == done["result"]


async def listen_through(target) -> tuple[str, float]:
    """A 2026-07-28 listen stream, and `toggle_tool` announcing a change on it: the notification
    must reach the client while the stream is open (the client leaves the stream only after it)."""
    from mcp import Client

    with anyio.fail_after(SESSION_TIMEOUT):  # a recorder that held the stream back would end here
        async with Client(target, mode="auto") as client:
            async with client.listen(tools_list_changed=True) as subscription:
                await client.call_tool("toggle_tool", {})
                async for event in subscription:
                    return type(event).__name__, anyio.current_time()
    raise AssertionError("the listen stream ended without its notification")


@pytest.mark.slow  # an SDK session through `record`
@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_record_passes_a_listen_stream_through_unbuffered_and_the_model_shows_a_stream(transport, task_servers, tmp_path):
    # Legacy SSE carries it too (2026-07-28 over the one GET stream): it ends with that stream.
    trace = tmp_path / f"listen-{transport}.jsonl"
    with recording_proxy(task_servers[transport].url, trace) as url:
        anyio.run(listen_through, sdk_target(url, transport))
    assert_views_agree(trace)
    (session,) = [s for s in summarize(trace).sessions if any(op.stream is not None for op in s.operations)]
    (listening,) = [op for op in session.operations if op.stream is not None]
    stream = listening.stream
    methods = [method for _, method in stream.notifications]
    assert methods == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed"]
    # the change was recorded (and so passed on) before the stream closed: not held back to its end
    changed = stream.notifications[1][0]
    assert stream.closed is not None and changed < stream.closed and listening.outcome == "closed"
    assert not [op for op in session.operations if op.outcome == "unanswered"]
