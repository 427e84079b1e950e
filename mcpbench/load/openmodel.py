"""The open (constant-arrival-rate) model: call starts on a fixed timeline.

A closed model (N users, each waiting for its answer before the next call)
slows down with the server and under-reports latency ("coordinated omission").
Here every call has an intended start on a timeline of `rate` starts per
second; latency is measured from that intended start (corrected) as well as
from the actual send (uncorrected). A start that comes later than
`LATE_AFTER` is counted late; one that would come later than `max_lateness`
is dropped and counted, never run.

Pure Python, no gevent: the user sleeps until `slot.intended` itself. One
schedule per load process; the rate is split evenly over the processes, and
`retime` changes a process's share mid-run (a worker joined or left): the
timeline goes on from the next slot at the new pace.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

# A start this much after its intended time counts as late (timer jitter stays well below it).
LATE_AFTER = 0.010


@dataclass(frozen=True, slots=True)
class Slot:
    index: int
    intended: float  # perf_counter time


class ArrivalSchedule:
    """Hands out intended start times `t0 + i / rate`, dropping those that are already too late."""

    def __init__(self, rate: float, max_lateness: float = 1.0, *, clock=time.perf_counter) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.interval = 1.0 / rate
        self.max_lateness = max_lateness
        self._clock = clock
        self._t0: float | None = None  # when slot `_first` is due
        self._first = 0
        self._next = 0
        self.scheduled = 0  # slots handed out to users
        self.dropped = 0  # slots skipped because no user was free in time
        self.late = 0  # slots started later than LATE_AFTER
        self.started_count = 0
        self.failed_starts = 0  # slots whose user could not (re)connect

    def claim(self) -> Slot:
        """The next slot to run; slots older than `max_lateness` are skipped and counted as dropped."""
        now = self._clock()
        if self._t0 is None:
            self._t0 = now
        index = self._next
        intended = self._due(index)
        if now - intended > self.max_lateness:
            first_ok = self._first + math.ceil((now - self.max_lateness - self._t0) / self.interval)
            self.dropped += first_ok - index
            index = first_ok
            intended = self._due(index)
        self._next = index + 1
        self.scheduled += 1
        return Slot(index, intended)

    def _due(self, index: int) -> float:
        return self._t0 + (index - self._first) * self.interval

    def retime(self, rate: float) -> None:
        """From the next slot on, `rate` starts per second (the slots already handed out keep their times)."""
        if rate <= 0:
            raise ValueError("rate must be > 0")
        if self._t0 is not None:
            self._t0, self._first = self._due(self._next), self._next
        self.interval = 1.0 / rate

    def started(self, slot: Slot) -> bool:
        """Note that `slot` starts now; returns whether it is late."""
        self.started_count += 1
        late = self._clock() - slot.intended > LATE_AFTER
        if late:
            self.late += 1
        return late

    def failed_start(self) -> None:
        self.failed_starts += 1

    def stats(self) -> dict:
        return {
            "rate": 1.0 / self.interval,
            "scheduled": self.scheduled,
            "started": self.started_count,
            "late": self.late,
            "dropped": self.dropped,
            "failed_starts": self.failed_starts,
            "max_lateness": self.max_lateness,
        }
