"""Real data for the analysis tests, once per test session: the traces of every capture path (the tee,
the record proxy on both HTTP transports, a replay's --out), a replay report and a short load run, all
from the session's main-job run (tests/conftest.py), and a lab folder with a sticky.csv that follows the
lab's column contract."""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.recordings import stdio_target
from tests.support.runs import MCPBENCH
from tests.support.servers import REPO_ROOT

REPLAY_TIMEOUT = 180.0
# capture name -> the main job's trace
MAIN_JOB_TRACES = {"stdio-legacy": "stdio-legacy", "stdio-auto": "stdio-auto", "http-legacy": "http-legacy",
                   "http-auto": "http-auto", "sse": "sse-legacy"}


@pytest.fixture(scope="session")
def captures(tmp_path_factory, main_job) -> Path:
    """A folder of real traces: stdio-{legacy,auto}, http-{legacy,auto}, sse (the main job's), replay (+ replay.json)."""
    _, run = main_job
    folder = tmp_path_factory.mktemp("captures")
    for name, source in MAIN_JOB_TRACES.items():
        shutil.copy(run / f"{source}.jsonl", folder / f"{name}.jsonl")
    subprocess.run(
        [*MCPBENCH, "replay", str(folder / "stdio-legacy.jsonl"), "--target", stdio_target(), "--out", str(folder / "replay.jsonl"), "--report", str(folder / "replay.json")],
        cwd=REPO_ROOT, check=False, capture_output=True, timeout=REPLAY_TIMEOUT,
    )
    return folder


@pytest.fixture(scope="session")
def load_folder(main_job) -> Path:
    """A short real load run on the reference Streamable HTTP server, both eras: the main job's."""
    out = main_job[1] / "load-streamable-http"
    assert (out / "samples.jsonl").is_file(), main_job[0].stdout[-3000:] + main_job[0].stderr[-3000:]
    return out


STICKY_ROWS = [
    # transport, mode, policy, balancer, instances, sessions, calls, failed_calls, failed_sessions, share, expected, session-not-found calls/sessions
    ("streamable-http", "stateful-sse", "round-robin", "haproxy", 3, 30, 300, 190, 20, 0.34, "break", 190, 20),
    ("streamable-http", "stateful-sse", "sticky-header", "haproxy", 3, 30, 300, 0, 0, 0.33, "hold", 0, 0),
    ("streamable-http", "stateless", "round-robin", "haproxy", 3, 30, 300, 0, 0, 0.33, "hold", 0, 0),
    ("sse", "legacy-sse", "round-robin", "haproxy", 3, 30, 300, 200, 21, 0.35, "break", 200, 21),
    ("sse", "legacy-sse", "sticky-header", "haproxy", 3, 30, 300, 0, 0, 0.32, "hold", 0, 0),
    ("streamable-http", "2026-07-28", "round-robin", "haproxy", 3, 30, 300, 0, 0, 0.34, "hold", 0, 0),
]


@pytest.fixture(scope="session")
def lab_folder(tmp_path_factory) -> Path:
    """A lab run folder holding sticky.csv in the lab's column contract (one row per cell)."""
    folder = tmp_path_factory.mktemp("lab")
    header = "transport,mode,policy,balancer,instances,sessions,calls,failed_calls,failed_sessions,first_instance_share,expected,failed_calls:session-not-found,failed_sessions:session-not-found"
    lines = [header] + [",".join(str(v) for v in row) for row in STICKY_ROWS]
    (folder / "sticky.csv").write_text("\n".join(lines) + "\n")
    return folder
