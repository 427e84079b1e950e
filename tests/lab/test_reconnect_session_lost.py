"""A session lost mid-call, on each transport, in load, replay and forward alike (real processes).

One loss per transport, made the same way for the three clients: stdio, the server child killed while
`slow` runs (`mcpbench faults stdio`); legacy SSE, the session's stream cut while `slow` runs (the lab's
balancer); Streamable HTTP, the server restarted between two calls, so the next one finds its session
unknown (404). Each client then does what `plan_recovery` says under its policy: the load user
reinitializes (as its `reconnect:` says), the replay reports, the forwarding mock reopens its upstream
session (the replay drives the mock there: `serve-trace --on-miss forward`).
"""

import shlex
import sys
from pathlib import Path

import orjson
import pytest

from mcpbench.lab.topology.cluster import RestartPlan, running_lab
from mcpbench.protocol.http import Failure
from mcpbench.protocol.reconnect import NONE, REINITIALIZE, REPORT, ReconnectPolicy
from mcpbench.protocol.recovery import REOPENING, REPORTING, plan_recovery
from mcpbench.protocol.session import Trigger
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.replay import plan as plans
from mcpbench.replay.engine import Replayer
from mcpbench.system.target import Target
from tests.support.load_client import Run
from tests.support.servers import serve_argv
from tests.support.traces import handshake, header, tool_call, tool_text, write_trace

TIMEOUT = 20.0
LOAD = ReconnectPolicy(mode=REINITIALIZE, backoff=0.01, budget_floor=50)
# The call under which the session is lost runs far longer than the fault takes to land.
SLOW = {"seconds": 4.0, "steps": 2}
# The server gets SIGKILL once this many client messages passed: initialize, initialized, echo, slow.
KILL_AT = 4
# The balancer cuts every SSE stream this long after it began: inside `slow`, after the handshake and `echo`.
CUT = "1s"
MANUAL = RestartPlan(at=3600.0)  # a lab with a restarter, called by the test

# (tool, arguments, the recorded answer's text) in order; the first and last are answered in every run.
BEFORE, AFTER = ("echo", {"text": "before"}, "before"), ("echo", {"text": "after"}, "after")
CALLS = [BEFORE, ("slow", SLOW, "slept 4s in 2 steps"), AFTER]
CALLS_404 = [BEFORE, ("echo", {"text": "lost"}, "lost"), AFTER]


def recorded(path: Path, calls, *, handshake_only: bool = False) -> Path:
    """A recorded stdio session: the handshake, then each call and its answer."""
    events = handshake(2.0, id_=1, step=0.1, capabilities={"tools": {}}, server="reference")
    for index, (tool, arguments, text) in enumerate([] if handshake_only else calls, start=2):
        events += [tool_call(3.0 + index, index, tool, arguments), tool_text(3.5 + index, index, text)]
    return write_trace(path, events, header=header())


class Spy:
    """A replay's trace writer that keeps the error events it reports, and runs `on_answer` once the
    answer carrying `text` has come (on the replay's thread: nothing is sent before it returns)."""

    def __init__(self, text: str = "", on_answer=None) -> None:
        self.errors: list[str] = []
        self.text, self.on_answer = orjson.dumps(text), on_answer

    def message(self, _session, direction, data, _ts, _extra=None) -> None:
        if direction == "s2c" and self.on_answer is not None and self.text in data:
            on_answer, self.on_answer = self.on_answer, None
            on_answer()

    def write(self, event: dict) -> None:
        if event["kind"] == "error":
            self.errors.append(event["detail"])


def replay(target: Target, trace: Path, spy: Spy):
    """Replay `trace` against `target`: the one session's run."""
    (session,) = Replayer(target, timeout=TIMEOUT, writer=spy).run(plans.load(trace)).sessions
    return session


def forwarding(trace: Path, upstream: Target) -> Target:
    """The mock (`serve-trace`, stdio) holding `trace`'s handshake and forwarding the rest to `upstream`."""
    text = f"stdio:{shlex.join(upstream.argv)}" if upstream.transport == STDIO else (
        f"sse+{upstream.url}" if upstream.transport == LEGACY_SSE else upstream.url)
    hello = recorded(trace.with_name("handshake.jsonl"), [], handshake_only=True)
    return Target(STDIO, argv=(sys.executable, "-m", "mcpbench", "serve-trace", str(hello), "--on-miss", "forward", text))


def tool_calls(session) -> list:
    return [live for live in session.calls if live.call.request.method == "tools/call"]


def texts(session) -> list[str | None]:
    """Each tool call's live answer text, or None where it failed or got an error."""
    return [live.answer.result["content"][0]["text"] if live.answer is not None and hasattr(live.answer, "result") else None
            for live in tool_calls(session)]


def expected(failure: str, cause: Trigger, tool: str):
    """What each client does about this loss, by the one function."""
    return (plan_recovery(LOAD, failure, lost=cause, tool=tool), plan_recovery(REPORTING, failure, lost=cause),
            plan_recovery(REOPENING, failure, lost=cause, tool=tool))


def check_load(run: Run, results: list, failure: str, plan) -> None:
    record = run.reconnects[0]  # the loss's (a lost call that is not sent again still closes the new session)
    assert (record["noticed"], record["action"], record["ok"]) == (failure, plan.action, True), record
    assert (record["resent"], record["uncertain"]) == (int(plan.resend), int(not plan.resend)), record
    assert results[0] is not None and results[2]["content"][0]["text"] == "after", run.steps
    assert (results[1] is not None) == plan.resend


def check_forward(session, lost_call: str, plan) -> None:
    """The mock reopened its upstream session: the call after the loss is answered live, and the lost one
    too when it went again; otherwise the client got the forwarding error."""
    assert plan.action == REINITIALIZE and not session.aborted, session.aborted
    answers = texts(session)
    assert answers[0] == "before" and answers[2] == "after", session.calls
    if plan.resend:
        assert answers[1] == lost_call
    else:
        assert "forwarding to" in tool_calls(session)[1].answer.message, session.calls


@pytest.mark.slow  # a load, then two replays of a call that sleeps 4 s
def test_stdio_server_killed_mid_call(tmp_path):
    server = [sys.executable, "-m", "mcpbench", "faults", "stdio", "--kill-after-messages", str(KILL_AT),
              "--count", "to-server", "--", *serve_argv("stdio")]
    target = Target(STDIO, argv=tuple(server))
    trace = recorded(tmp_path / "trace.jsonl", CALLS)
    load, report, reopen = expected(Failure.STREAM_CLOSED, Trigger.STDOUT_CLOSED, "slow")

    run = Run(target, LOAD)
    check_load(run, run.calls(*[(tool, args) for tool, args, _ in CALLS]), Failure.STREAM_CLOSED, load)

    spy = Spy()
    session = replay(target, trace, spy)
    assert report.action == NONE  # the process went with the session: the replay ends there
    assert session.aborted == "the server process exited with status 137" == spy.errors[0]
    assert f"the server process closed its stdout ({Failure.STREAM_CLOSED})" in spy.errors
    assert texts(session) == ["before", None, None] and tool_calls(session)[2].failure == "not answered: " + session.aborted

    check_forward(replay(forwarding(trace, target), trace, Spy()), "slept 4s in 2 steps", reopen)


@pytest.mark.slow  # a load, then two replays of a call that sleeps 4 s
def test_legacy_stream_cut_mid_call(tmp_path):
    trace = recorded(tmp_path / "trace.jsonl", CALLS)
    load, report, reopen = expected(Failure.STREAM_CLOSED, Trigger.STREAM_ENDED, "slow")
    with running_lab(1, LEGACY_SSE, policy="round-robin", folder=tmp_path / "lab", faults={"cut_streams_after": CUT}) as lab:
        target = Target(LEGACY_SSE, url=lab.url)
        run = Run(target, LOAD)
        check_load(run, run.calls(*[(tool, args) for tool, args, _ in CALLS]), Failure.STREAM_CLOSED, load)

        spy = Spy()
        session = replay(target, trace, spy)
        assert report.action == NONE
        assert session.aborted == "the server closed the SSE stream" == spy.errors[0]
        assert texts(session) == ["before", None, None]

        check_forward(replay(forwarding(trace, target), trace, Spy()), "slept 4s in 2 steps", reopen)


@pytest.mark.slow  # the instance restarted three times
def test_streamable_http_session_unknown_after_a_restart(tmp_path):
    trace = recorded(tmp_path / "trace.jsonl", CALLS_404)
    load, report, reopen = expected(Failure.SESSION_NOT_FOUND, Trigger.SESSION_NOT_FOUND, "echo")
    with running_lab(1, STREAMABLE_HTTP, policy="round-robin", folder=tmp_path / "lab", restarts=MANUAL) as lab:
        target = Target(STREAMABLE_HTTP, url=lab.url)

        def restart() -> None:
            lab.restarter.restart(0)  # returns once the new process accepts

        run = Run(target, LOAD)
        results = run.calls(*[(tool, args) for tool, args, _ in CALLS_404], before=lambda index: index == 1 and restart())
        check_load(run, results, Failure.SESSION_NOT_FOUND, load)

        spy = Spy("before", restart)
        session = replay(target, trace, spy)
        assert report.action == REPORT  # HTTP still answers: the later calls go, and fail on their own
        assert not session.aborted and texts(session) == ["before", None, None]
        assert [(live.failure or "").endswith(f"({Failure.SESSION_NOT_FOUND})") for live in tool_calls(session)] == [False, True, True]
        # (a note of its own when the restart cut `notifications/initialized`'s POST, which no call waits for)
        assert [note for note in session.notes if note.startswith("the server lost the session: HTTP 404")], session.notes

        spy = Spy("before", restart)
        check_forward(replay(forwarding(trace, target), trace, spy), "lost", reopen)
        assert spy.on_answer is None  # the restart did happen
