"""`mcpbench lab up` and `lab down`: a lab starts, answers, and leaves no process or port behind."""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.processes import alive, descendants, wait_for_lines

# A lab starts Python servers and a mitmproxy balancer: generous on a busy 2-core machine.
START_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _ports(lines: list[str]) -> list[int]:
    return [urlsplit(line.split()[-1] if line.startswith("  s") else line.split()[3]).port for line in lines]


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.slow
def test_a_signal_stops_every_process_and_frees_every_port(tmp_path, sig, status):
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpbench", "lab", "up", "--instances", "2", "--transport", "sse", "--policy", "sticky"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        lines = wait_for_lines(proc, 3, START_TIMEOUT)
        assert lines[0].startswith("mcpbench: lab up: http://127.0.0.1:") and lines[0].split()[3].endswith("/sse")
        ports = _ports(lines)
        kids = descendants(proc.pid)
        assert len(kids) >= 3 and all(_accepts(port) for port in ports)
        proc.send_signal(sig)
        assert proc.wait(STOP_TIMEOUT) == status
        assert not [pid for pid in kids if alive(pid)]
        assert not [port for port in ports if _accepts(port)]
        assert not list((tmp_path / "results" / "lab-up").glob("*.json"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_detach_then_down(tmp_path):
    command = [sys.executable, "-m", "mcpbench", "lab"]
    up = subprocess.run(
        command + ["up", "--detach", "--instances", "1", "--transport", "streamable-http", "--stateless"],
        cwd=tmp_path, capture_output=True, text=True, timeout=START_TIMEOUT + 30,
    )
    states = list((tmp_path / "results" / "lab-up").glob("*.json"))
    pid = json.loads(states[0].read_text())["pid"] if states else None
    kids = descendants(pid) if pid else []
    try:
        assert up.returncode == 0, up.stderr
        lines = up.stdout.splitlines()
        assert lines[0].startswith("mcpbench: lab up: http://127.0.0.1:") and "lab down" in lines[-1]
        ports = _ports(lines[:2])
        assert alive(pid) and len(kids) >= 2 and all(_accepts(port) for port in ports)
        down = subprocess.run(command + ["down"], cwd=tmp_path, capture_output=True, text=True, timeout=STOP_TIMEOUT + 30)
        assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
        assert not alive(pid) and not [k for k in kids if alive(k)]
        assert not [port for port in ports if _accepts(port)]
        again = subprocess.run(command + ["down"], cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert again.returncode == 0 and "no lab is up" in again.stdout
    finally:
        for stray in [pid, *kids]:  # only if the test failed half-way
            if stray is not None and alive(stray):
                os.kill(stray, signal.SIGKILL)


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_busy_port_or_a_missing_haproxy_is_one_line_and_status_3(tmp_path):
    from tests.hostile.helpers import EXIT_ENVIRONMENT, EXIT_INPUT, assert_clean_failure, run

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = run(["lab", "up", "--instances", "1", "--port", str(port)], cwd=tmp_path)
    assert_clean_failure(taken, EXIT_ENVIRONMENT, f"127.0.0.1:{port}")
    missing = run(["lab", "up", "--balancer", "haproxy"], cwd=tmp_path, env={"PATH": str(tmp_path)})
    assert_clean_failure(missing, EXIT_ENVIRONMENT, "haproxy is not on PATH")
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("modes: [legacy-sse]\npolicies: [sticky]\ninstances: [0]\nmix:\n  - {call: tools/list}\n")
    assert_clean_failure(run(["lab", "run", str(scenario)], cwd=tmp_path), EXIT_INPUT, "bad.yaml:3")
