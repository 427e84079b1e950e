"""A trace followed as it grows, its sessions rebuilt event by event: what the live view shows.

Two layers, neither of which draws anything:

- `LiveFeed` follows one trace (`trace/follow.py`) and rebuilds its sessions incrementally with
  the `Rebuild` that `inspect` uses; `poll()` returns each new event with its `EventEffect` (the entries
  it added, the requests it answered). An exporter (spans, metrics) can consume the same steps.
- `LiveStats` keeps, in bounded memory, what the view shows of them: per method and tool the
  count, errors and latency percentiles (`LogHistogram`) of the operations the trace model finished
  (a multi round-trip request once, first request to final answer; each round's answer still a row
  of the log as it happens), the violations and errors, the last events, the event rate.

Memory stays bounded however long the trace: the sessions kept (`MAX_SESSIONS`, ended ones dropped
first), the method rows (`MAX_NAMES`, the rest under `OTHER`), the last events (`LOG_ROWS`) and
problems (`PROBLEM_ROWS`) are capped; percentiles are histograms.
"""

import itertools
import os
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcpbench.trace.model import Entry, EventEffect, Rebuild, SessionReport, TracedOperation, ended
from mcpbench.protocol.transports import STDIO
from mcpbench.measures.stats import LogHistogram
from mcpbench.trace import spool
from mcpbench.trace.follow import TraceTail
from mcpbench.trace.format import Kind

# Sessions kept (a load through `record` opens thousands): past it, ended ones go first, then the oldest.
MAX_SESSIONS = 500
# Method and tool rows kept: tool names come from the traffic, so there could be any number.
MAX_NAMES = 200
OTHER = "(other)"
# The last events kept for the view to scroll through, and the last violations and errors.
LOG_ROWS = 20_000
PROBLEM_ROWS = 500
# Outcomes of an answered call that count as errors.
ERRORS = frozenset({"error", "tool-error"})
# The entries shown as violations and errors (besides calls that failed, and streams that broke).
PROBLEMS = frozenset({"violation", "error", "http", "answer"})
# How far back the event rate looks.
RATE_WINDOW = 2.0


@dataclass(slots=True)
class FeedRow:
    """One line of the event log: an entry of a session, or a call's answer (`answer`)."""

    session: str
    entry: Entry
    answer: bool = False

    @property
    def dir(self) -> str | None:
        """The direction the event travelled (an answer travels back)."""
        if self.answer:
            return "s2c" if self.entry.dir == "c2s" else "c2s"
        return self.entry.dir

    @property
    def ts(self) -> float:
        entry = self.entry
        return entry.ts + entry.latency if self.answer and entry.latency is not None else entry.ts


@dataclass(slots=True)
class MethodStats:
    count: int = 0
    errors: int = 0
    latency: LogHistogram | None = None

    def add(self, op: TracedOperation) -> None:
        self.count += 1
        if op.outcome in ERRORS:
            self.errors += 1
        latency = op.latency
        if latency is not None:
            if self.latency is None:
                self.latency = LogHistogram()
            self.latency.add(latency)


class LiveFeed:
    """One trace, followed, its sessions rebuilt as it grows.

    Attributes:
        ended: why no more events will come (the recording was killed, a compressed trace read
            whole, a stdio server's recording complete), or None while following.

    Raises (from `poll`):
        TraceError: the trace is missing, not a trace, or has a bad line (file and line).
    """

    def __init__(self, path: str | os.PathLike, *, max_sessions: int = MAX_SESSIONS) -> None:
        self.tail = TraceTail(path)
        self.path = self.tail.path
        self.max_sessions = max_sessions
        self.rebuild = Rebuild(keep=False)
        self.generation = 0
        self.ended: str | None = None
        self.last_ts: float | None = None
        self._exited = False  # a stdio server's exit was read

    @property
    def sessions(self) -> dict[str, SessionReport]:
        return self.rebuild.sessions

    @property
    def header(self) -> dict[str, Any] | None:
        return self.tail.header

    def poll(self) -> list[tuple[dict[str, Any], EventEffect | None]]:
        """The events written since the last poll, each with what it did to its session."""
        return list(self.steps())

    def steps(self) -> Iterator[tuple[dict[str, Any], EventEffect | None]]:
        """`poll`, one event at a time: each is taken as it is asked for, so its session stands as
        it did right after it (an exporter ends a session's span at the event that ended it).
        Consume it whole before the next."""
        events = self.tail.poll()
        if self.tail.generation != self.generation:  # a new recording to the same path: start over
            self.generation = self.tail.generation
            self.rebuild = Rebuild(keep=False)
            self.ended, self._exited = None, False
        take = self.rebuild.take
        for event in events:
            yield event, take(event)
        if events:
            self.last_ts = events[-1]["ts"]
            self._exited = self._exited or any(event["kind"] == Kind.PROCESS and event.get("event") == "exit" for event in events)
            if len(self.rebuild.sessions) > self.max_sessions:
                self._forget()
        self.ended = self.tail.ended or (self._complete() if not events else None)

    @property
    def following(self) -> bool:
        return self.ended is None

    def _complete(self) -> str | None:
        """A stdio recording is complete once its server exited and its recorder deleted the spool."""
        transport = (self.header or {}).get("transport")
        if transport == STDIO and self._exited and not os.path.exists(spool.spool_path(self.path)):
            return "the recording is complete (the server exited)"
        return None

    def _forget(self) -> None:
        sessions = self.rebuild.sessions
        excess = len(sessions) - self.max_sessions
        done = [key for key, report in sessions.items() if ended(report)][:excess]
        done += list(sessions)[: excess - len(done)] if len(done) < excess else []
        for key in done:
            self.rebuild.forget(key)


class LiveStats:
    """What the live view shows of a feed's steps, in bounded memory."""

    def __init__(self) -> None:
        self.events = 0
        self.methods: dict[str, MethodStats] = {}
        self.log: deque[FeedRow] = deque(maxlen=LOG_ROWS)
        self.logged = 0  # rows ever appended to `log`: where a reader of it left off
        self.problems: deque[FeedRow] = deque(maxlen=PROBLEM_ROWS)
        self.problems_seen = 0  # rows ever appended to `problems`
        self.answered = 0  # operations finished (a call answered, a multi round-trip request's last round, a task's end)
        self._rates: deque[tuple[float, int]] = deque()

    def take(self, steps: list[tuple[dict[str, Any], EventEffect | None]], now: float | None = None) -> None:
        """Count a poll's events."""
        now = time.monotonic() if now is None else now
        log, problems, appended = self.log, self.problems, 0
        for row in rows(steps):
            log.append(row)
            appended += 1
            entry = row.entry
            if row.answer:
                if entry.outcome in ERRORS:
                    problems.append(row)
                    self.problems_seen += 1
            elif entry.kind in PROBLEMS or (entry.kind == "stream" and entry.detail):
                problems.append(row)
                self.problems_seen += 1
        for _, step in steps:
            if step is not None:
                for op in step.finished:
                    self.answered += 1
                    self._method(op.name).add(op)
        self.events += len(steps)
        self.logged += appended
        self._rates.append((now, len(steps)))
        while self._rates and self._rates[0][0] < now - RATE_WINDOW:
            self._rates.popleft()

    def rate(self) -> float:
        """Events per second over the last `RATE_WINDOW` seconds."""
        return sum(count for _, count in self._rates) / RATE_WINDOW

    def new_rows(self, since: int) -> list[FeedRow]:
        """The rows appended after the first `since` ever appended (those still kept)."""
        count = min(self.logged - since, len(self.log))
        if count <= 0:
            return []
        return list(itertools.islice(reversed(self.log), count))[::-1]

    def _method(self, name: str) -> MethodStats:
        stats = self.methods.get(name)
        if stats is None:
            if len(self.methods) >= MAX_NAMES - 1:  # the last row is the others'
                name = OTHER
                stats = self.methods.get(OTHER)
            if stats is None:
                stats = self.methods[name] = MethodStats()
        return stats


def rows(steps: list[tuple[dict[str, Any], EventEffect | None]]) -> Iterator[FeedRow]:
    """The log rows of a poll's events: one per entry an event added and per call it answered (a
    batch may make several), one for an answer to no request in flight."""
    for event, step in steps:
        if step is None:
            continue
        key = step.session.id
        for entry in step.added:
            yield FeedRow(key, entry)
        for entry in step.answered:
            yield FeedRow(key, entry, answer=True)
        if not step.added and not step.answered and event["kind"] == Kind.MESSAGE:
            yield FeedRow(key, Entry(event["ts"], event.get("dir"), "answer", "to no request in flight"))


def in_flight(feed: LiveFeed) -> list[tuple[str, Entry]]:
    """The calls awaiting their answer in sessions that go on, oldest first: (session, entry)."""
    calls = [(report.id, entry) for report in feed.sessions.values() if not ended(report) for entry in report.open_calls.values()]
    calls.sort(key=lambda item: item[1].ts)
    return calls
