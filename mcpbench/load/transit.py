"""Samples on their way from the workers of a load run to its master: batches and counts, no I/O.

A worker's `Outbox` holds the samples.jsonl lines its users produce (steps, reconnect lines, the
open model's counts) until they leave in batches; the master's `Roster` counts, per worker, what
was sent and what arrived, and says who is still to report. `roles.py` carries them over Locust's
custom messages::

    worker                                           master
    Outbox.add(line)      (full: dropped, counted)
    Outbox.take() -> Batch ── mcpbench_samples ──>   Roster.received(worker, batch)
    Outbox.acked(seq)     <── mcpbench_ack ───────   (the batch is written)
    Outbox.finish() -> batches, Done ── mcpbench_done ──> Roster.done(worker, done)

Memory is bounded at both ends: a worker holds at most `MAX_BUFFERED` bytes of lines and sends at
most `WINDOW` batches ahead of the master's acknowledgements, so a slow master slows the batches,
never the users (a line that finds the buffer full is dropped and counted); the master writes each
batch as it comes. Nothing here imports Locust or gevent.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

# Lines per batch: one message of ~50-150 KB, a few per second at thousands of steps per second.
BATCH_LINES = 500
# Batches a worker sends ahead of the master's acknowledgements: enough to keep the link busy,
# few enough that Locust's own messages (heartbeats, statistics) never queue behind ours.
WINDOW = 4
# Bytes of lines a worker holds while the master is slow (or gone): ~150 000 steps.
MAX_BUFFERED = 32 * 1024 * 1024

# How long the master waits, when a test stops, for the workers' last samples and accounts.
DRAIN_TIMEOUT = 15.0
# The master's account of its workers, beside the samples (the runner folds it into the summary).
ROSTER_FILE = "workers.json"

# What a line is, for the counts a worker reports: a step, a reconnect line, the open model's counts.
SAMPLE, RECONNECT, OPEN = "samples", "reconnects", "open"


@dataclass(frozen=True, slots=True, kw_only=True)
class LineBatch:
    """Consecutive lines of one worker: `lines` lines from number `first` on (0-based, over the run)."""

    seq: int
    first: int
    lines: int
    data: bytes

    def to_message(self) -> dict[str, Any]:
        return {"seq": self.seq, "first": self.first, "lines": self.lines, "data": self.data}

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> LineBatch:
        return cls(seq=int(data["seq"]), first=int(data["first"]), lines=int(data["lines"]), data=bytes(data["data"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerDone:
    """A worker's account after a test stopped: lines sent (by kind) and dropped, for the master's `round`."""

    round: int
    sent: int
    dropped: int
    kinds: dict[str, int] = field(default_factory=dict)

    def to_message(self) -> dict[str, Any]:
        return {"round": self.round, "sent": self.sent, "dropped": self.dropped, "kinds": dict(self.kinds)}

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> WorkerDone:
        return cls(round=int(data["round"]), sent=int(data["sent"]), dropped=int(data["dropped"]), kinds=dict(data.get("kinds") or {}))


class Outbox:
    """A worker's lines waiting to leave, batched, bounded in bytes and in batches unacknowledged."""

    def __init__(self, *, batch_lines: int = BATCH_LINES, window: int = WINDOW, max_buffered: int = MAX_BUFFERED) -> None:
        self.batch_lines = batch_lines
        self.window = window
        self.max_buffered = max_buffered
        self._waiting: deque[bytes] = deque()
        self._waiting_bytes = 0
        self._next_seq = 0
        self._acked = -1  # the highest batch acknowledged
        self.sent = 0  # lines handed out in batches
        self.dropped = 0  # lines refused because the buffer was full
        self.kinds: dict[str, int] = {}  # lines accepted, by kind

    def add(self, line: bytes, kind: str = SAMPLE) -> bool:
        """Queue one line (ending in a newline); False when the buffer is full and it was dropped."""
        if self._waiting_bytes + len(line) > self.max_buffered:
            self.dropped += 1
            return False
        self._waiting.append(line)
        self._waiting_bytes += len(line)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        return True

    @property
    def waiting(self) -> int:
        """Lines not yet in a batch."""
        return len(self._waiting)

    @property
    def in_flight(self) -> int:
        """Batches sent and not yet acknowledged."""
        return self._next_seq - 1 - self._acked

    def full_batch(self) -> bool:
        """Whether a whole batch waits and the window lets it go."""
        return len(self._waiting) >= self.batch_lines and self.in_flight < self.window

    def take(self, *, partial: bool = False, force: bool = False) -> LineBatch | None:
        """The next batch to send, or None: nothing waits, only part of a batch does (unless
        `partial`), or the window is full (unless `force`: the end of a test sends everything)."""
        if not self._waiting or (not force and self.in_flight >= self.window):
            return None
        if not partial and not force and len(self._waiting) < self.batch_lines:
            return None
        count = min(self.batch_lines, len(self._waiting))
        lines = [self._waiting.popleft() for _ in range(count)]
        data = b"".join(lines)
        self._waiting_bytes -= len(data)
        batch = LineBatch(seq=self._next_seq, first=self.sent, lines=count, data=data)
        self._next_seq += 1
        self.sent += count
        return batch

    def acked(self, seq: int) -> None:
        """The master wrote batch `seq` (and, the link being ordered, every batch before it)."""
        self._acked = max(self._acked, seq)

    def finish(self, round: int) -> tuple[list[LineBatch], WorkerDone]:
        """Every line still waiting, in batches whatever the window, and the account for `round`."""
        batches = []
        while (batch := self.take(force=True)) is not None:
            batches.append(batch)
        return batches, WorkerDone(round=round, sent=self.sent, dropped=self.dropped, kinds=dict(self.kinds))


@dataclass
class WorkerTally:
    """What the master knows of one worker."""

    id: str
    host: str = ""
    pid: int | None = None
    index: int | None = None
    received: int = 0  # lines that arrived (and were written)
    announced: int = 0  # lines the worker said it sent: the end of its last batch, then its account
    dropped: int = 0  # lines its full buffer dropped
    kinds: dict[str, int] = field(default_factory=dict)
    done_round: int | None = None  # the last round it gave its account for

    @property
    def finished(self) -> bool:
        return self.done_round is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host, "pid": self.pid, "index": self.index, "received": self.received,
            "sent": self.announced, "dropped": self.dropped, "lost_in_transit": max(0, self.announced - self.received),
            "finished": self.finished, **({"kinds": self.kinds} if self.kinds else {}),
        }


class Roster:
    """The master's account of its workers: who joined, what each sent and what arrived."""

    def __init__(self) -> None:
        self.workers: dict[str, WorkerTally] = {}

    def _tally(self, worker: str) -> WorkerTally:
        if worker not in self.workers:  # batches before its hello (or a hello lost): known all the same
            self.workers[worker] = WorkerTally(worker)
        return self.workers[worker]

    def join(self, worker: str, *, host: str = "", pid: int | None = None, index: int | None = None) -> None:
        tally = self._tally(worker)
        tally.host, tally.pid, tally.index = host, pid, index

    def received(self, worker: str, batch: LineBatch) -> None:
        tally = self._tally(worker)
        tally.received += batch.lines
        tally.announced = max(tally.announced, batch.first + batch.lines)

    def done(self, worker: str, done: WorkerDone) -> None:
        tally = self._tally(worker)
        tally.announced = max(tally.announced, done.sent)
        tally.dropped, tally.kinds = done.dropped, done.kinds
        tally.done_round = done.round if tally.done_round is None else max(tally.done_round, done.round)

    def waiting(self, present: set[str], round: int) -> set[str]:
        """The workers still connected that have not given their account for `round`."""
        def behind(worker: str) -> bool:
            tally = self.workers.get(worker)
            return tally is None or tally.done_round is None or tally.done_round < round

        return {w for w in present if behind(w)}

    def to_json(self) -> dict[str, Any]:
        """`samples_per_worker`, `samples_lost` and `workers_died` (joined, never gave an account) for the summary."""
        workers = sorted(self.workers.values(), key=lambda t: (t.index is None, t.index or 0, t.id))
        per_worker = {t.id: t.to_json() for t in workers}
        return {
            "samples_per_worker": per_worker,
            "samples_lost": {
                "dropped": sum(t.dropped for t in workers),
                "in_transit": sum(row["lost_in_transit"] for row in per_worker.values()),
            },
            "workers_died": [t.id for t in workers if not t.finished],
        }


def rate_shares(rate: float, present: set[str]) -> dict[str, float]:
    """The open model's rate split evenly over the workers present."""
    return {worker: rate / len(present) for worker in present} if present else {}
