"""Inside the Locust processes of a load run: the scenario's users, and where their samples go.

`install(scenario, workers=N)` builds the user classes of a scenario (one per era) for the
locustfile that calls it (the run's own, `runfile.py`, or the generic `locustfile.py`) and, once
Locust says which role this process plays (its `init` event), sets that role up:

- **local** (a run without workers): each step is a line of `samples.<pid>.jsonl` (`SampleWriter`).
- **worker**: the lines go into an `Outbox` (transit.py) and to the master in batches over Locust's
  custom messages (`mcpbench_samples`, acknowledged by `mcpbench_ack`); when its test stops (or the
  master sends `mcpbench_stop`), the worker stops its users and sends the rest and its account
  (`mcpbench_done`). `mcpbench_rate` sets its share of the open model's rate. It tells the
  `mcpbench load --worker` that started it (`MCPBENCH_WORKER_FD`, a JSON object a line) that it
  joined, and what it sent.
- **master**: writes each batch to `samples.<pid>.jsonl` as it comes, keeps the `Roster`
  (`workers.json`, for the summary), splits the open model's rate over the workers present (again
  when one joins or leaves), and when the test stops asks every worker for its rest and waits for
  it (at most `DRAIN_TIMEOUT`) before Locust tells the workers to quit.

Environment: `MCPBENCH_SAMPLES` (the folder of the sample file; local and master),
`MCPBENCH_STATUS_FD` (a pipe where a sample file that cannot be written is reported),
`MCPBENCH_WORKER_FD` (worker), `MCPBENCH_ACCESS` (the headers as read and --proxy as given,
`ClientAccess.to_env`). Importing this module imports Locust.
"""

from __future__ import annotations

import csv
import os
import signal
import socket
from pathlib import Path
from typing import Any

import gevent
import orjson
from gevent.event import Event
from locust import events
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from mcpbench import __version__
from mcpbench.auth.options import ClientAccess
from mcpbench.load.openmodel import ArrivalSchedule
from mcpbench.load.samples import SampleWriter, sample_line
from mcpbench.load.scenario import Scenario
from mcpbench.load.transit import DRAIN_TIMEOUT, OPEN, RECONNECT, ROSTER_FILE, LineBatch, Outbox, Roster, WorkerDone, rate_shares
from mcpbench.load.users import McpUser, build_user_class
from mcpbench.files.outputs import write_atomic
from mcpbench.protocol.versions import era_name
from mcpbench.system.target import parse_target
from mcpbench.system.processes import settled

# A worker sends what waits at least this often (and at once when a whole batch waits).
FLUSH_INTERVAL = 0.5
# How often the master looks whether its workers changed (a leaving worker has no event).
WATCH_INTERVAL = 0.5

HELLO, SAMPLES, ACK, DONE, RATE, STOP = (f"mcpbench_{name}" for name in ("hello", "samples", "ack", "done", "rate", "stop"))


def install(scenario: Scenario | dict, *, workers: int = 1) -> dict[str, type]:
    """The scenario's user classes (for the locustfile's globals); its role is set up at Locust's `init`.

    `workers`: how many processes share the open model's rate until the master says (a run's
    expected workers; 1 without a master).
    """
    if isinstance(scenario, dict):
        scenario = Scenario.from_json(scenario)
    schedule = None
    if scenario.open_model is not None:
        schedule = ArrivalSchedule(scenario.open_model.rate / max(1, workers), scenario.open_model.max_lateness)
    target = parse_target(scenario.target)
    transport = target.transport
    # the headers as read and --proxy as given, from `mcpbench load` (a remote worker: the scenario's own)
    access = ClientAccess.from_env(os.environ.get("MCPBENCH_ACCESS"), scenario.client, target.url)
    classes: dict[str, type] = {}
    ramp = None
    if scenario.ramp is not None:  # `mcpbench capacity`: a load shape steps the open model's rate
        from mcpbench.load.ramp import Ramp
        from mcpbench.load.rampshape import RampRun, shape_class

        ramp = RampRun(Ramp.from_json(scenario.ramp), scenario.users, os.environ.get("MCPBENCH_SAMPLES"))
        classes["CapacityRamp"] = shape_class(ramp)
    replay = None
    if scenario.replay is not None:  # recorded traffic as load: the recording's sessions on their schedule
        from mcpbench.load.traceload import SessionQueue, from_json

        speed, sessions = from_json(scenario.replay)
        replay = SessionQueue(sessions, speed, scenario.versions, scenario.users)
    for version in scenario.versions:
        if replay is not None and not replay.users(version):
            continue  # no recorded session of this era
        label = f"{transport} {era_name(version)}" if len(scenario.versions) > 1 else None
        # One schedule per process, shared by every user class: the rate is the whole process's rate.
        cls = build_user_class(scenario, version, label=label, schedule=schedule, access=access, replay=replay)
        classes[cls.__name__] = cls

    def on_init(environment: Any, **_kw: Any) -> None:
        runner = environment.runner
        if isinstance(runner, WorkerRunner):
            _Worker(environment, schedule, _fd("MCPBENCH_WORKER_FD"))
        else:
            writer = None
            if folder := os.environ.get("MCPBENCH_SAMPLES"):
                writer = SampleWriter(Path(folder) / f"samples.{os.getpid()}.jsonl", _fd("MCPBENCH_STATUS_FD"))
            if isinstance(runner, MasterRunner):
                master = _Master(environment, writer, scenario.open_model.rate if scenario.open_model else None, ramp)
                if ramp is not None:
                    ramp.set_rate = master.set_rate
            else:
                if writer is not None:
                    _local(environment, writer, schedule)
                if ramp is not None:
                    environment.events.request.add_listener(ramp.on_request)
                    ramp.set_rate = schedule.retime
            _rewrite_csv_at_quit(environment)
        # The last added runs first: from the start of the shutdown on, a second stop signal (a
        # process group's Ctrl-C, then `mcpbench load` stopping its Locust) would cut it short.
        environment.events.quitting.add_listener(_hold_stop_signals)
        settled()  # Locust, gevent and the locustfile are loaded

    events.init.add_listener(on_init)
    return classes


def _hold_stop_signals(**_kw: Any) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def _fd(name: str) -> int | None:
    return int(value) if (value := os.environ.get(name)) else None


def _local(environment: Any, writer: SampleWriter, schedule: ArrivalSchedule | None) -> None:
    """One process: the steps straight to its sample file."""
    environment.events.request.add_listener(writer.on_request)
    McpUser.reconnect_sink = writer.on_reconnect

    def on_test_stop(**_kw: Any) -> None:
        if schedule is not None and schedule.scheduled:
            writer.write_extra({"open": schedule.stats()})

    environment.events.test_stop.add_listener(on_test_stop)
    environment.events.quitting.add_listener(lambda **_kw: writer.close())


class _Worker:
    """A worker's samples, batched to the master (see the module's docstring)."""

    def __init__(self, environment: Any, schedule: ArrivalSchedule | None, report_fd: int | None) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.schedule = schedule
        self.report_fd = report_fd
        self.outbox = Outbox()
        self.round = 0
        self.reported: WorkerDone | None = None
        self.wake = Event()
        self.runner.register_message(ACK, self.on_ack)
        self.runner.register_message(RATE, self.on_rate)
        # Stopping users blocks: not in the greenlet that reads the master's messages.
        self.runner.register_message(STOP, self.on_stop, concurrent=True)
        environment.events.request.add_listener(self.on_request)
        McpUser.reconnect_sink = self.on_reconnect
        environment.events.test_stop.add_listener(self.on_test_stop)
        # Added after Locust's own `quitting` listener, which tells the master this worker quits;
        # listeners run in reverse, so the rest of the samples goes first.
        environment.events.quitting.add_listener(self.on_quitting)
        gevent.spawn(self.pump)
        self.runner.send_message(HELLO, {"host": socket.gethostname(), "pid": os.getpid(), "version": __version__})
        self.report({"joined": self.runner.client_id})

    def on_request(self, request_type: str, name: str, response_time: float, response_length: int, exception: Any = None, context: Any = None, start_time: float | None = None, **_: Any) -> None:
        line = sample_line(request_type, name, response_time, response_length, exception, context, start_time)
        if self.outbox.add(line) and self.outbox.full_batch():
            self.wake.set()

    def on_reconnect(self, record: dict) -> None:
        self.outbox.add(orjson.dumps({"reconnect": record}) + b"\n", RECONNECT)

    def pump(self) -> None:
        """Send whole batches as they fill, and whatever waits every FLUSH_INTERVAL, within the window."""
        while True:
            woken = self.wake.wait(FLUSH_INTERVAL)
            self.wake.clear()
            while (batch := self.outbox.take(partial=not woken)) is not None:
                self.send(batch)

    def send(self, batch: LineBatch) -> None:
        self.runner.send_message(SAMPLES, batch.to_message())

    def on_ack(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self.outbox.acked(int(msg.data["seq"]))
        if self.outbox.waiting:
            self.wake.set()

    def on_rate(self, environment: Any, msg: Any, **_kw: Any) -> None:
        if self.schedule is not None:
            self.schedule.retime(float(msg.data["rate"]))

    def on_stop(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self.round = max(self.round, int(msg.data["round"]))
        self.runner.stop()  # fires test_stop (and with it `finish`) when users still ran
        self.finish()

    def on_test_stop(self, **_kw: Any) -> None:
        if self.schedule is not None and self.schedule.scheduled:
            self.outbox.add(orjson.dumps({"open": self.schedule.stats()}) + b"\n", OPEN)
        self.finish()

    def on_quitting(self, **_kw: Any) -> None:
        self.runner.stop()
        self.finish()

    def finish(self) -> None:
        """Send every line still waiting and the account, once per round and change."""
        batches, done = self.outbox.finish(self.round)
        if not batches and done == self.reported:
            return
        for batch in batches:
            self.send(batch)
        self.runner.send_message(DONE, done.to_message())
        self.reported = done
        self.report({"done": done.to_message()})

    def report(self, record: dict) -> None:
        if self.report_fd is not None:
            try:
                os.write(self.report_fd, orjson.dumps(record) + b"\n")
            except OSError:
                self.report_fd = None  # whoever started this worker is gone; nothing more to tell


class _Master:
    """The master's side: the workers' batches into one sample file, their accounts, the rate split."""

    def __init__(self, environment: Any, writer: SampleWriter | None, rate: float | None, ramp: Any = None) -> None:
        self.environment = environment
        self.ramp = ramp  # a capacity ramp's `RampRun`: it hears every sample
        self.runner = environment.runner
        self.writer = writer
        self.rate = rate
        self.roster = Roster()
        self.round = 0
        self.changed = Event()
        self.shares: dict[str, float] = {}
        self.roster_path = Path(writer.path.parent / ROSTER_FILE) if writer is not None else None
        self.runner.register_message(HELLO, self.on_hello)
        self.runner.register_message(SAMPLES, self.on_samples)
        self.runner.register_message(DONE, self.on_done)
        environment.events.test_stop.add_listener(self.drain)
        events.quit.add_listener(self.on_quit)
        if rate is not None:
            gevent.spawn(self.watch)

    def present(self) -> set[str]:
        """The workers connected now (Locust marks one that stopped beating missing)."""
        return {node.id for node in self.runner.clients.all if node.state != STATE_MISSING}

    def on_hello(self, environment: Any, msg: Any, **_kw: Any) -> None:
        data = msg.data or {}
        self.roster.join(msg.node_id, host=str(data.get("host", "")), pid=data.get("pid"), index=self.runner.get_worker_index(msg.node_id))
        self.save()
        self.resplit()

    def on_samples(self, environment: Any, msg: Any, **_kw: Any) -> None:
        batch = LineBatch.from_message(msg.data)
        if self.writer is not None:
            self.writer.write_lines(batch.data, batch.lines)
        if self.ramp is not None:
            self.ramp.on_lines(batch.data)
        self.roster.received(msg.node_id, batch)
        self.runner.send_message(ACK, {"seq": batch.seq}, client_id=msg.node_id)

    def on_done(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self.roster.done(msg.node_id, WorkerDone.from_message(msg.data))
        self.changed.set()

    def set_rate(self, rate: float) -> None:
        """The open model's rate over all workers from now on (a capacity ramp's step)."""
        if rate != self.rate:
            self.rate = rate
            self.resplit()

    def resplit(self) -> None:
        """Send each worker present its share of the open model's rate, when the workers changed."""
        if self.rate is None:
            return
        shares = rate_shares(self.rate, self.present())
        for worker, share in shares.items():
            if self.shares.get(worker) != share:
                self.runner.send_message(RATE, {"rate": share}, client_id=worker)
        self.shares = shares

    def watch(self) -> None:
        while True:
            gevent.sleep(WATCH_INTERVAL)
            self.resplit()

    def drain(self, **_kw: Any) -> None:
        """The test stopped: ask every worker for the rest of its samples, and wait for them (bounded)."""
        self.round += 1
        self.runner.send_message(STOP, {"round": self.round})
        with gevent.Timeout(DRAIN_TIMEOUT, False):
            while self.roster.waiting(self.present(), self.round):
                self.changed.wait(WATCH_INTERVAL)  # a worker may also go missing: look again
                self.changed.clear()
        if self.writer is not None:
            self.writer.flush()
        self.save()

    def on_quit(self, **_kw: Any) -> None:
        self.save()
        if self.writer is not None:
            self.writer.close()

    def save(self) -> None:
        if self.roster_path is not None:
            try:
                write_atomic(self.roster_path, orjson.dumps(self.roster.to_json()))
            except OSError:
                pass  # the summary then lacks the per-worker counts; the samples say the rest


def _rewrite_csv_at_quit(environment: Any) -> None:
    """At the end, rewrite `<prefix>_stats.csv` and `_failures.csv` with the final numbers.

    Locust's CSV writer runs once a second and does not write again at shutdown, so its files miss
    up to the last second, including the steps users run when they stop (DELETE). The new files
    replace the old ones (new inodes), so a late write by Locust's writer cannot corrupt them.
    """

    def final_csv(**_kw: Any) -> None:
        from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

        prefix = getattr(getattr(environment, "parsed_options", None), "csv_prefix", None)
        if not prefix:
            return
        writer = StatsCSV(environment, PERCENTILES_TO_REPORT)
        for suffix, columns, rows in (
            ("_stats.csv", writer.requests_csv_columns, writer._requests_data_rows),
            ("_failures.csv", writer.failures_columns, writer._failures_data_rows),
        ):
            path = Path(prefix + suffix)
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "w", newline="") as handle:
                out = csv.writer(handle)
                out.writerow(columns)
                rows(out)
            os.replace(tmp, path)

    events.quit.add_listener(final_csv)
