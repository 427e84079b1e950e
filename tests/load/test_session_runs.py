"""A run of K sessions (`sessions:`) against a live server: it ends when they have, and says how long it ran."""

import orjson
import pytest

from tests.load.helpers import run_load

pytestmark = pytest.mark.slow  # a Locust run

PLANNED = 60  # seconds: far more than 6 short sessions take


def test_a_sessions_run_that_ends_early_writes_the_time_it_ran(tmp_path, http_server):
    scenario = (f"target: {http_server.url}\nsession: session_per_task\nsessions: 6\ncalls_per_session: 2\n"
                f"mix:\n  - {{call: tools/list}}\nusers: 2\nspawn_rate: 10\nduration: {PLANNED}s\n")
    proc, out = run_load(tmp_path, scenario)
    assert proc.returncode == 0 and "sessions kept: 6/6" in proc.stdout, proc.stdout + proc.stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    total, seconds = summary["total"], summary["duration_s"]
    assert 0 < seconds < PLANNED / 2, summary  # before: the planned 60 s, whatever the run lasted
    assert total["rps"] == pytest.approx(total["count"] / seconds)  # steps per second over the time it ran
