"""Every view on the trace model, each reduced to what they must agree on (tests/analysis/test_views_agree.py
and the tests of real recordings that check it too): `inspect` (its report and --json), the pandas
frames, the telemetry calls, the live view's method rows and replay's plan."""

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from mcpbench.analysis.inspect import summarize
from mcpbench.analysis.traces import load_trace
from mcpbench.cli import main
from mcpbench.live.feed import LiveStats
from mcpbench.protocol.errors import ReplayError
from mcpbench.protocol.jsonrpc import ErrorResponse
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.replay import plan as plans
from mcpbench.telemetry import conventions as otel
from mcpbench.telemetry.calls import CallTracker, TracedCall
from mcpbench.trace.model import NOT_MCP, SESSIONLESS, SESSIONLESS_PREFIX, Rebuild
from mcpbench.trace.reader import TraceReader


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
                   if op.outcome not in ("unanswered", "listening", "input-required") and not op.outcome.startswith("task-")
                   and not (op.outcome == "cancelled" and op.end is None))  # cancelled, and the trace ended with no answer


def by_telemetry(path: Path) -> Counter:
    rebuild, tracker, finished = Rebuild(keep=False), CallTracker(), []
    for event in TraceReader(path):
        finished += tracker.take(event, rebuild.take(event))
    finished += tracker.finish()
    return Counter((c.session.key, c.attributes[otel.METHOD], c.outcome) for c in finished if isinstance(c, TracedCall))


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


def assert_views_agree(path: Path) -> dict:
    """Every view sees the same sessions, operations and outcomes in `path`; returns inspect's --json."""
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
    return report
