"""The capacity ramp as a Locust load shape (`mcpbench capacity`; the plan and its judge: ramp.py).

Locust calls a shape's `tick()` about once a second in the process that runs the test (alone, or
the master; a worker builds the class and never ticks it). The users stay as many as the scenario
says: they are the pool that runs the open model's calls, and the shape changes the rate they
run at, through `set_rate` (the process's `ArrivalSchedule` alone; the master's split over its
workers). At every change of step the timeline goes to `ramp.json` in the samples folder.

Importing this module imports Locust.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from locust import LoadTestShape

from mcpbench.load.ramp import RAMP_FILE, Ramp, RampController, StepMeter
from mcpbench.files.outputs import write_atomic


class RampRun:
    """A ramp's controller and meter in one Locust process, and where its rate and timeline go."""

    def __init__(self, ramp: Ramp, users: int, folder: str | None) -> None:
        self.meter = StepMeter()
        self.controller = RampController(ramp, self.meter, users)
        self.users = users
        self.path = Path(folder) / RAMP_FILE if folder else None
        self.set_rate: Callable[[float], None] | None = None  # set at Locust's init, by role
        self._steps = 0
        self._rate: float | None = None

    def on_request(self, response_time: float, exception: Any = None, context: Any = None, start_time: float | None = None, **_: Any) -> None:
        """A Locust request listener (this process's users)."""
        context = context or {}
        if "uncorrected" not in context:
            return  # not a call of the schedule (a handshake, a DELETE)
        failure = None if exception is None else (context.get("failure") or getattr(exception, "kind", None) or "error")
        self.meter.add(start_time, response_time, failure, context.get("session"))

    def on_lines(self, data: bytes) -> None:
        """The sample lines a worker sent the master."""
        for line in data.splitlines():
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and "uncorrected_ms" in record:  # a call of the schedule
                self.meter.add(record.get("t"), record["latency_ms"], record.get("failure"), record.get("session"))

    def tick(self) -> tuple[int, float] | None:
        rate = self.controller.tick(time.time())
        if len(self.controller.timeline) != self._steps or rate is None:
            self._steps = len(self.controller.timeline)
            self.save()
        if rate is None:
            return None
        if self.set_rate is not None and rate != self._rate:
            self._rate = rate
            self.set_rate(rate)
        return self.users, float(self.users)  # every user at once: the rate, not the users, ramps

    def save(self) -> None:
        if self.path is not None:
            try:
                write_atomic(self.path, orjson.dumps(self.controller.to_json(), option=orjson.OPT_INDENT_2))
            except OSError:
                pass  # the analysis then says the timeline is missing; the samples are what matter


def shape_class(run: RampRun) -> type:
    """A LoadTestShape whose ticks are `run`'s (Locust instantiates the class it finds in the locustfile)."""

    class CapacityRamp(LoadTestShape):
        def tick(self) -> tuple[int, float] | None:
            return run.tick()

    return CapacityRamp
