"""Recorded traffic as load (`mcpbench load --from-trace T --speed 2x`): the recording's sessions,
reissued at their recorded arrival times scaled by the speed.

`recorded_load(path)` reads the trace with the replayer's reader (`replay.plan.load`, whose sessions
and operations are the trace model's): each recorded session that made a call a load user can make
(tools/call, resources/read, prompts/get, the lists, ping) becomes a `RecordedSession`, with `offset`
(when its first client message left, from the first session's) and its calls, each at its recorded
time from the session's start, in recorded order. A 2026-07-28 later round of an operation (the
model links it) is not a new call and is left out, as are a recording's `_meta` envelopes (the load
client writes its own).

In the Locust process, a user takes the next session from the `SessionQueue` (in arrival order),
waits for its due time (`start + offset / speed`), opens a session in the session's recorded era,
and makes each call at `start + (offset + at) / speed`: an open model driven by the recording.
A call's latency counts from that due time and its sample's `lag_ms` says how late it left (the
schedule falling behind: too few users, a slow handshake, a slow machine). `max` speed: every
session is due at once and every call as soon as the one before it is answered.

Nothing here imports Locust.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mcpbench.load.scenario import CALLS, ScenarioError

# Speeds as written: `2x`, `0.5x`, `1x` (or without the x), and `max`.
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*x?\s*$")
MAX_SPEED = "max"
# The users of a replay: one per recorded session, at most this many (a session waits for a free one).
MAX_USERS = 100


def parse_speed(text: str) -> float:
    """`2x` -> 2.0, `0.5x` -> 0.5, `max` -> inf.

    Raises:
        ScenarioError: not a speed (naming it).
    """
    if str(text).strip().lower() == MAX_SPEED:
        return math.inf
    match = _SPEED.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise ScenarioError(f"--speed {text!r}: expected a factor like 1x, 2x, 0.5x, or max")
    return float(match.group(1))


@dataclass(frozen=True)
class ScheduledCall:
    at: float  # seconds from the session's start, as recorded
    method: str
    params: dict | None
    step: str  # the step name of the samples (as a mix entry's)


@dataclass(frozen=True)
class RecordedSession:
    id: str
    offset: float  # seconds from the first session's start, as recorded
    version: str | None
    calls: tuple[ScheduledCall, ...]


def recorded_load(path: str) -> tuple[RecordedSession, ...]:
    """The trace's sessions as load, by arrival (see the module docstring).

    Raises:
        TraceError: the trace cannot be read.
        ScenarioError: no session holds a call a load run can make.
    """
    from mcpbench.protocol.errors import ReplayError
    from mcpbench.replay.plan import load

    try:
        plan = load(path)
    except ReplayError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    found: list[tuple[float, str, str | None, list[tuple[float, ScheduledCall]]]] = []
    for session in plan.sessions:
        if not session.steps:
            continue
        begun = session.steps[0].ts
        calls = []
        for call in session.calls:
            if call.method not in CALLS or call.retry_of is not None:
                continue
            params = {k: v for k, v in (call.request.params or {}).items() if k != "_meta"} if isinstance(call.request.params, dict) else None
            name = call.name if call.method == "tools/call" else None
            calls.append((call.sent, ScheduledCall(max(0.0, call.sent - begun), call.method, params or None,
                                                  f"{call.method} {name}" if name else call.method)))
        if calls:
            found.append((begun, session.id, session.version, calls))
    if not found:
        raise ScenarioError(f"{path}: no recorded session makes a call a load run can repeat (tools/call, resources/read, prompts/get, …)")
    found.sort(key=lambda item: item[0])
    first = found[0][0]
    return tuple(RecordedSession(sid, begun - first, version, tuple(c for _, c in sorted(calls, key=lambda item: item[0])))
                 for begun, sid, version, calls in found)


def span(sessions: tuple[RecordedSession, ...]) -> float:
    """Seconds from the first session's start to the last call's, as recorded."""
    return max((s.offset + (s.calls[-1].at if s.calls else 0.0) for s in sessions), default=0.0)


def to_json(sessions: tuple[RecordedSession, ...], speed: float) -> dict:
    """What a scenario carries (`Scenario.replay`): the speed (None: max) and the sessions."""
    return {"speed": None if math.isinf(speed) else speed,
            "sessions": [{"id": s.id, "offset": s.offset, "version": s.version,
                          "calls": [{"at": c.at, "method": c.method, "params": c.params, "step": c.step} for c in s.calls]}
                         for s in sessions]}


def from_json(obj: dict) -> tuple[float, tuple[RecordedSession, ...]]:
    speed = math.inf if obj.get("speed") is None else float(obj["speed"])
    sessions = tuple(RecordedSession(s["id"], s["offset"], s.get("version"),
                                     tuple(ScheduledCall(c["at"], c["method"], c.get("params"), c["step"]) for c in s["calls"]))
                     for s in obj["sessions"])
    return speed, sessions


class SessionQueue:
    """The recorded sessions of one process, handed out in arrival order to users of each era."""

    def __init__(self, sessions: tuple[RecordedSession, ...], speed: float, versions: tuple[str, ...], users: int = MAX_USERS) -> None:
        self.speed = speed
        self.pool = users  # the users of every era together
        self.start: float | None = None  # perf_counter time the schedule began (the first claim)
        # Each session runs in its recorded era when the run speaks it, else in the run's first.
        self.waiting: dict[str, list[RecordedSession]] = {v: [] for v in versions}
        for session in sessions:
            self.waiting[session.version if session.version in self.waiting else versions[0]].append(session)
        self.running = 0
        self.ended = False

    def users(self, version: str) -> int:
        """How many users the era's sessions get: one each, the pool shared by the eras as their sessions are."""
        total = sum(len(q) for q in self.waiting.values())
        mine = len(self.waiting[version])
        return min(mine, max(1, self.pool * mine // total)) if mine else 0

    def claim(self, version: str, now: float) -> RecordedSession | None:
        if self.start is None:
            self.start = now
        queue = self.waiting[version]
        if not queue:
            return None
        self.running += 1
        return queue.pop(0)

    def due(self, session: RecordedSession, at: float = 0.0) -> float:
        """The perf_counter time `at` seconds into `session` is due at this speed."""
        return self.start + (0.0 if math.isinf(self.speed) else (session.offset + at) / self.speed)

    def done(self) -> bool:
        """A session ended: whether it was the last (no session waits and none runs)."""
        self.running -= 1
        return self.running == 0 and not any(self.waiting.values())
