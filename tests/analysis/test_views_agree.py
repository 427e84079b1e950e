"""Every view on the trace model agrees on a trace's sessions, operations and outcomes: `inspect`
(its report and --json), the pandas frames, the telemetry calls (spans and durations), the live
view's method rows and replay's plan (its sessions, calls, answers and linked rounds), over the
suite's traces of every transport and era (stdio recordings of both eras, HTTP recordings in
tests/trace/data, legacy SSE among them) and doctored 2026-07-28 operations (rounds, a task, a
listen stream)."""

import copy
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpbench.analysis.inspect import render, summarize
from mcpbench.analysis.traces import load_trace
from mcpbench.cli import main
from mcpbench.live.feed import LiveStats
from mcpbench.protocol.errors import ReplayError
from mcpbench.protocol.jsonrpc import ErrorResponse
from mcpbench.replay import plan as plans
from mcpbench.telemetry import conventions as otel
from mcpbench.telemetry.calls import Call, CallTracker
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.trace.model import NOT_MCP, SESSIONLESS, SESSIONLESS_PREFIX, Rebuild
from mcpbench.trace.reader import TraceReader
from tests.support import traces as t

DATA = Path(__file__).parents[1] / "trace" / "data"


def doctored(folder: Path) -> list[Path]:
    return [
        t.write_trace(folder / "rounds.jsonl", [t.request(1.0, 1), t.asks(1.1, 1), t.request(1.5, 2, responses=t.answered()), t.done(1.6, 2),
                                              t.request(2.0, 3), t.asks(2.1, 3, state="S")]),
        t.write_trace(folder / "task.jsonl", [*t.handshake(), t.sent(2.0, 1, "tools/call", {"name": "work", "task": {"ttl": 1}}),
                                            t.result(2.01, 1, {"task": t.task_status("t1", "working")}), t.sent(2.2, 2, "tasks/get", {"taskId": "t1"}),
                                            t.result(2.21, 2, t.task_status("t1", "completed")), t.sent(2.3, 3, "tools/call", {"name": "other", "task": {}}),
                                            t.result(2.31, 3, {"task": t.task_status("t2", "working")})]),
        t.write_trace(folder / "listen.jsonl", [t.over_http(t.listen(1.0, 7), "f1"), t.over_http(t.on_stream(1.01, "notifications/subscriptions/acknowledged", 7), "f1"),
                                              t.over_http(t.request(1.2, 8, name="echo"), "f2"), t.over_http(t.done(1.3, 8), "f2"), t.stream_end(2.0, "f1"),
                                              t.over_http(t.listen(3.0, 9), "f3")]),
    ]


def by_inspect(path: Path) -> Counter:
    report = summarize(path)
    return Counter((s.id, op.method, op.outcome) for s in report.sessions for op in s.operations)


def by_frames(path: Path) -> Counter:
    calls = load_trace(path).calls
    sessions = calls["session"].astype(object).fillna("-")  # the frames' null: inspect's "-", outside any session
    return Counter(zip(sessions.astype(str), calls["method"].astype(str), calls["outcome"].astype(str)))


def by_live(path: Path) -> Counter:
    """The live view's method rows: the operations finished as the events came, by name."""
    rebuild, stats = Rebuild(keep=False), LiveStats()
    stats.take([(event, rebuild.take(event)) for event in TraceReader(path)])
    return Counter({name: row.count for name, row in stats.methods.items()})


def finished_by_events(path: Path) -> Counter:
    """inspect's operations that an event finished (not the trace's end: the live view is still watching those)."""
    report = summarize(path)
    return Counter(op.name for s in report.sessions for op in s.operations
                   if op.outcome not in ("unanswered", "listening", "input-required") and not op.outcome.startswith("task-"))


def by_telemetry(path: Path) -> Counter:
    rebuild, tracker, finished = Rebuild(keep=False), CallTracker(), []
    for event in TraceReader(path):
        finished += tracker.take(event, rebuild.take(event))
    finished += tracker.finish()
    return Counter((c.session.key, c.attributes[otel.METHOD], c.outcome) for c in finished if isinstance(c, Call))


def by_plan(path: Path) -> tuple[Counter, Counter, int]:
    """Replay's plan: per session, each request with whether it was answered and whether by an error;
    the sessions; the rounds linked to an earlier one."""
    try:
        trace = plans.load(path)
    except ReplayError:  # no client message to replay
        return Counter(), Counter(), 0
    calls = Counter((call.method, call.answer is not None, type(call.answer) is ErrorResponse)
                    for session in trace.sessions for call in session.calls)
    # Sessionless Streamable HTTP is replayed per recorded connection (the model's one stream, split)
    sessions = Counter(SESSIONLESS if session.transport == STREAMABLE_HTTP and session.id.startswith(SESSIONLESS_PREFIX) else session.id
                       for session in trace.sessions if session.calls)
    return calls, +Counter(dict.fromkeys(sessions, 1)), sum(call.retry_of is not None for session in trace.sessions for call in session.calls)


def plan_as_the_model_sees_it(path: Path) -> tuple[Counter, Counter, int]:
    """What `by_plan` must find, from inspect's operations: each round a request (the client's)."""
    report = summarize(path)
    client = [(s, op) for s in report.sessions for op in s.operations if op.dir == "c2s"]
    calls = Counter((op.method, r.end is not None, r.error_code is not None) for _, op in client for r in op.rounds)
    sessions = Counter(dict.fromkeys((SESSIONLESS if s.sessionless else s.id for s, _ in client), 1))
    if not calls:
        return Counter(), Counter(), 0
    return calls, sessions, sum(len(op.rounds) - 1 for _, op in client)


@pytest.mark.timeout(180)  # may make the stdio recordings first
def test_inspect_frames_and_telemetry_agree_on_every_trace(recordings, tmp_path):
    paths = [recordings["legacy"], recordings["auto"], *sorted(DATA.glob("*.jsonl")), *doctored(tmp_path)]
    transports, eras = set(), set()
    for path in paths:
        seen = by_inspect(path)
        assert seen, path.name
        assert by_frames(path) == seen, path.name
        assert by_telemetry(path) == seen, path.name
        assert by_live(path) == finished_by_events(path), path.name
        calls, plan_sessions, retries = by_plan(path)
        want_calls, want_sessions, want_retries = plan_as_the_model_sees_it(path)
        assert (calls, retries) == (want_calls, want_retries), path.name
        assert plan_sessions == want_sessions, path.name
        report = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(path)]).output)
        sessions = {s["id"]: s for s in report["sessions"]}
        frame_sessions = load_trace(path).sessions
        assert set(frame_sessions["session"].astype(str)) == {key for key in sessions if key not in ("-", NOT_MCP)}, path.name
        for row in frame_sessions.itertuples():
            assert row.calls == sessions[str(row.session)]["operations"], path.name
        transports |= {s["transport"] for s in report["sessions"]}
        eras |= {s["era"] for s in report["sessions"]}
    assert {"stdio", "sse", "streamable-http"} <= transports and {"handshake", "stateless"} <= eras
    # the doctored operations, as every view sees them
    rounds, task, listening = (by_inspect(p) for p in doctored(tmp_path))
    assert rounds == Counter({("s1", "tools/call", "ok"): 1, ("s1", "tools/call", "input-required"): 1})
    assert task[("s1", "tools/call", "ok")] == 1 and task[("s1", "tools/call", "task-working")] == 1
    assert listening[("sessionless 2026-07-28", "subscriptions/listen", "closed")] == 1
    assert listening[("sessionless 2026-07-28", "subscriptions/listen", "listening")] == 1


# JSON a peer may put where a field is expected: the views say what they saw, never raise.
HOSTILE_VALUES = [None, [], {}, [1], {"a": []}, 1.5, True, "x", -1, {"taskId": []}, {"ask": 1}]


def _mutated(value, rng):
    if isinstance(value, dict):
        return {key: (copy.deepcopy(rng.choice(HOSTILE_VALUES)) if rng.random() < 0.1 else _mutated(item, rng)) for key, item in value.items()}
    if isinstance(value, list):
        return [_mutated(item, rng) for item in value]
    return value


def test_hostile_fields_in_operations_never_raise_and_the_views_still_agree(tmp_path):
    rng = random.Random(33)
    events = [event for path in doctored(tmp_path) for event in TraceReader(path) if event["kind"] != "trace"]
    for attempt in range(40):  # bounded: 40 doctored variants, each a few dozen events
        path = t.write_trace(tmp_path / f"hostile-{attempt}.jsonl",
                             [{**event, "msg": _mutated(event["msg"], rng)} if event["kind"] == "message" else event for event in events])
        seen = by_inspect(path)
        assert all(outcome for _, _, outcome in seen), path.name  # every operation ends with what was seen
        assert by_frames(path) == seen and by_telemetry(path) == seen, path.name
        render(summarize(path))
