"""The generic locustfile: builds the users of the scenario named in the environment.

    MCPBENCH_SCENARIO   path of the scenario as JSON (written by `mcpbench load`)
    MCPBENCH_TARGET     the target as given, when the scenario file's has its secrets redacted
    MCPBENCH_SAMPLES    directory for raw samples (samples.<pid>.jsonl); unset: none
    MCPBENCH_PROCESSES  how many load processes share the open-model rate (default 1)
    MCPBENCH_STATUS_FD  an inherited pipe where a sample file that cannot be written is reported

`mcpbench load` sets them; to run it by hand::

    MCPBENCH_SCENARIO=results/run/scenario.json locust -f mcpbench/load/locustfile.py --headless -u 5 -r 5 -t 10s

With several eras the scenario gets one user class per era, and `request_type`
becomes `<transport> <era>` so Locust's table compares them side by side. A run
with workers uses the run's own locustfile instead (runfile.py), which the
master ships to its workers; both set up their process with `roles.install`.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from mcpbench.load.roles import install
from mcpbench.load.scenario import Scenario


def _scenario() -> Scenario:
    path = os.environ.get("MCPBENCH_SCENARIO")
    if not path:
        raise SystemExit("mcpbench locustfile: set MCPBENCH_SCENARIO to a scenario JSON (mcpbench load writes one)")
    scenario = Scenario.from_json(orjson.loads(Path(path).read_bytes()))
    if target := os.environ.get("MCPBENCH_TARGET"):  # the scenario file has it with secrets redacted
        scenario = scenario.with_overrides(target=target)
    return scenario


globals().update(install(_scenario(), workers=max(1, int(os.environ.get("MCPBENCH_PROCESSES", "1")))))
