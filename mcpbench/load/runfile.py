"""The run's own locustfile: the scenario inside, so that a worker needs nothing but mcpbench.

A run with workers gives its Locust master this file (`-f`), and each worker asks the master for it
(Locust's file distribution, `-f -`): the scenario travels whole in it, with its argument templates
and a mix derived from a trace (`--from-trace`), and with the target as given (secrets included:
the file lives in a private folder and only crosses the master–worker link). The file first checks
that the worker runs the master's mcpbench version, with nothing but `mcpbench.__version__`, so a
worker of any version refuses with one line. Nothing here imports Locust.
"""

from __future__ import annotations

import orjson

from mcpbench.load.scenario import Scenario

# The name the file has on the master and, once shipped, on each worker.
RUNFILE_NAME = "mcpbench_run.py"

_TEMPLATE = '''\
"""A run of `mcpbench load`, written by its master; Locust ships it to the workers."""

import json

import mcpbench

MASTER_VERSION = {version!r}
if mcpbench.__version__ != MASTER_VERSION:
    raise SystemExit(
        f"this worker runs mcpbench {{mcpbench.__version__}}, the master {{MASTER_VERSION}}: install the master's version on every machine"
    )

from mcpbench.load.roles import install  # noqa: E402 (after the version check: it may not exist elsewhere)

RUN = {name!r}
SCENARIO = {scenario!r}
globals().update(install(json.loads(SCENARIO), workers={workers}))
'''


def runfile_text(scenario: Scenario, *, workers: int, version: str) -> str:
    """The locustfile of a run of `scenario` whose open-model rate starts split over `workers`."""
    text = orjson.dumps(scenario.to_json()).decode()
    return _TEMPLATE.format(name=scenario.name, version=version, scenario=text, workers=max(1, workers))
