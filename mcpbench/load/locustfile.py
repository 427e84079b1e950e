"""The generic locustfile: builds the users of the scenario named in the environment.

    MCPBENCH_SCENARIO   path of the scenario as JSON (written by `mcpbench load`)
    MCPBENCH_TARGET     the target as given, when the scenario file's has its secrets redacted
    MCPBENCH_SAMPLES    directory for raw samples (samples.<pid>.jsonl); unset: none
    MCPBENCH_PROCESSES  how many load processes share the open-model rate (default 1)
    MCPBENCH_STATUS_FD  an inherited pipe where a sample file that cannot be written is reported
    MCPBENCH_ACCESS     the headers as read and --proxy as given (`ClientAccess.to_env`): secrets stay
                        out of the scenario file; the OAuth secret comes from its own variable

`mcpbench load` sets them; to run it by hand::

    MCPBENCH_SCENARIO=results/run/scenario.json locust -f mcpbench/load/locustfile.py --headless -u 5 -r 5 -t 10s

With several eras the scenario gets one user class per era, and `request_type`
becomes `<transport> <era>` so Locust's table compares them side by side.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from locust import events

from mcpbench.auth.options import ClientAccess
from mcpbench.load.openmodel import ArrivalSchedule
from mcpbench.load.samples import SampleWriter
from mcpbench.load.scenario import Scenario
from mcpbench.load.users import McpUser, build_user_class
from mcpbench.protocol.versions import era_name
from mcpbench.target import parse_target


def _build() -> tuple[dict[str, type], ArrivalSchedule | None]:
    path = os.environ.get("MCPBENCH_SCENARIO")
    if not path:
        raise SystemExit("mcpbench locustfile: set MCPBENCH_SCENARIO to a scenario JSON (mcpbench load writes one)")
    scenario = Scenario.from_json(orjson.loads(Path(path).read_bytes()))
    if target := os.environ.get("MCPBENCH_TARGET"):  # the scenario file has it with secrets redacted
        scenario = scenario.with_overrides(target=target)
    target = parse_target(scenario.target)
    transport = target.transport
    access = ClientAccess.from_env(os.environ.get("MCPBENCH_ACCESS"), scenario.client, target.url)
    processes = max(1, int(os.environ.get("MCPBENCH_PROCESSES", "1")))
    schedule = None
    if scenario.open_model is not None:
        schedule = ArrivalSchedule(scenario.open_model.rate / processes, scenario.open_model.max_lateness)
    classes = {}
    for version in scenario.versions:
        label = f"{transport} {era_name(version)}" if len(scenario.versions) > 1 else None
        # One schedule per process, shared by every user class: the rate is the whole process's rate.
        cls = build_user_class(scenario, version, label=label, schedule=schedule, access=access)
        classes[cls.__name__] = cls
    return classes, schedule


_classes, _schedule = _build()
globals().update(_classes)

_writer: SampleWriter | None = None
if samples_dir := os.environ.get("MCPBENCH_SAMPLES"):
    _status_fd = int(fd) if (fd := os.environ.get("MCPBENCH_STATUS_FD")) else None
    _writer = SampleWriter(Path(samples_dir) / f"samples.{os.getpid()}.jsonl", _status_fd)
    events.request.add_listener(_writer.on_request)
    McpUser.reconnect_sink = _writer.on_reconnect


@events.test_stop.add_listener
def _on_test_stop(environment, **_kw) -> None:
    if _writer is not None and _schedule is not None and _schedule.scheduled:
        _writer.write_extra({"open": _schedule.stats()})


@events.quitting.add_listener
def _on_quitting(environment, **_kw) -> None:
    if _writer is not None:
        _writer.close()


_environment = None


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    global _environment
    _environment = environment


@events.quit.add_listener
def _final_csv(exit_code, **_kw) -> None:
    """Rewrite `<prefix>_stats.csv` and `_failures.csv` with the final numbers.

    Locust's CSV writer runs once a second and does not write again at shutdown, so its files miss
    up to the last second, including the steps users run when they stop (DELETE). The new files
    replace the old ones (new inodes), so a late write by Locust's writer cannot corrupt them.
    """
    from locust.runners import WorkerRunner
    from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

    env = _environment
    prefix = getattr(getattr(env, "parsed_options", None), "csv_prefix", None)
    if env is None or not prefix or isinstance(env.runner, WorkerRunner):
        return
    import csv

    writer = StatsCSV(env, PERCENTILES_TO_REPORT)
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
