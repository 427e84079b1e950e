"""Real data for the analysis tests, made once per test session: traces from every capture path
(the tee, the record proxy on both HTTP transports, a replay's --out), a replay report, a short
load run, and a lab folder with a sticky.csv that follows the lab's column contract."""

import subprocess
import sys
from pathlib import Path

import pytest

from mcpbench.pipeline import recording_proxy
from tests.support.servers import REPO_ROOT, serve_argv, stdio_params

MCPBENCH = [sys.executable, "-m", "mcpbench"]
LOAD_TIMEOUT = 180.0


def _make_captures(folder: Path, http, sse) -> Path:
    from mcpbench.lab.drive import drive, sdk_target

    server = serve_argv("stdio")
    for mode in ("legacy", "auto"):
        argv = [*MCPBENCH, "tee", "--out", str(folder / f"stdio-{mode}.jsonl"), "--", *server]
        drive(stdio_params(argv), mode)
    for mode in ("legacy", "auto"):
        with recording_proxy(http.url, folder / f"http-{mode}.jsonl") as base:
            drive(base + "/mcp", mode)
    with recording_proxy(sse.url, folder / "sse.jsonl") as base:
        drive(sdk_target(base + "/sse", "sse"), "legacy")
    target = "stdio:" + " ".join(server)
    subprocess.run(
        [*MCPBENCH, "replay", str(folder / "stdio-legacy.jsonl"), "--target", target, "--out", str(folder / "replay.jsonl"), "--report", str(folder / "replay.json")],
        cwd=REPO_ROOT, check=False, capture_output=True, timeout=LOAD_TIMEOUT,
    )
    return folder


@pytest.fixture(scope="session")
def captures(tmp_path_factory, http_server, sse_server) -> Path:
    """A folder of real traces: stdio-{legacy,auto}, http-{legacy,auto}, sse, replay (+ replay.json)."""
    return _make_captures(tmp_path_factory.mktemp("captures"), http_server, sse_server)


@pytest.fixture(scope="session")
def load_folder(tmp_path_factory, http_server) -> Path:
    """A short real load run on the reference Streamable HTTP server."""
    out = tmp_path_factory.mktemp("load") / "run"
    scenario = REPO_ROOT / "scenarios" / "streamable-http.yaml"
    proc = subprocess.run(
        [*MCPBENCH, "load", str(scenario), "--target", http_server.url, "--users", "3", "--spawn-rate", "3", "--duration", "3s", "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=LOAD_TIMEOUT,
    )
    assert (out / "samples.jsonl").is_file(), proc.stdout + proc.stderr
    return out


STICKY_ROWS = [
    # transport, mode, policy, balancer, instances, sessions, calls, failed_calls, failed_sessions, share, session-not-found calls/sessions
    ("streamable-http", "stateful-sse", "round-robin", "haproxy", 3, 30, 300, 190, 20, 0.34, 190, 20),
    ("streamable-http", "stateful-sse", "sticky-header", "haproxy", 3, 30, 300, 0, 0, 0.33, 0, 0),
    ("streamable-http", "stateless", "round-robin", "haproxy", 3, 30, 300, 0, 0, 0.33, 0, 0),
    ("sse", "legacy-sse", "round-robin", "haproxy", 3, 30, 300, 200, 21, 0.35, 200, 21),
    ("sse", "legacy-sse", "sticky-header", "haproxy", 3, 30, 300, 0, 0, 0.32, 0, 0),
    ("streamable-http", "2026-07-28", "round-robin", "haproxy", 3, 30, 300, 0, 0, 0.34, 0, 0),
]


@pytest.fixture(scope="session")
def lab_folder(tmp_path_factory) -> Path:
    """A lab run folder holding sticky.csv in the lab's column contract (one row per cell)."""
    folder = tmp_path_factory.mktemp("lab")
    header = "transport,mode,policy,balancer,instances,sessions,calls,failed_calls,failed_sessions,first_instance_share,failed_calls:session-not-found,failed_sessions:session-not-found"
    lines = [header] + [",".join(str(v) for v in row) for row in STICKY_ROWS]
    (folder / "sticky.csv").write_text("\n".join(lines) + "\n")
    return folder
