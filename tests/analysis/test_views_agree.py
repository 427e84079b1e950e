"""Every view on the trace model agrees on a trace's sessions, operations and outcomes: `inspect`
(its report and --json), the pandas frames, the telemetry calls (spans and durations), the live
view's method rows and replay's plan (its sessions, calls, answers and linked rounds), over the
suite's traces of every transport and era (stdio recordings of both eras, HTTP recordings in
tests/trace/data, legacy SSE among them) and doctored 2026-07-28 operations (rounds, a task, a
listen stream)."""

import copy
import random
from collections import Counter
from pathlib import Path

import pytest

from mcpbench.analysis.inspect import render, summarize
from mcpbench.trace.reader import TraceReader
from tests.support import traces as t
from tests.support.views import assert_views_agree, by_frames, by_inspect, by_telemetry

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


@pytest.mark.timeout(180)  # may make the stdio recordings first
def test_inspect_frames_and_telemetry_agree_on_every_trace(recordings, tmp_path):
    paths = [recordings["legacy"], recordings["auto"], *sorted(DATA.glob("*.jsonl")), *doctored(tmp_path)]
    transports, eras = set(), set()
    for path in paths:
        report = assert_views_agree(path)
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
