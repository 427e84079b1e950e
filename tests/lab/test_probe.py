"""`scenarios/sticky-probe.yaml`: its verdict against the lab's non-sticky and sticky set-ups."""

import re
import subprocess
import sys
from pathlib import Path

from mcpbench.lab.cluster import running_balancer, running_instances

PROBE = Path(__file__).resolve().parents[2] / "scenarios" / "sticky-probe.yaml"


def _probe(url: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcpbench", "load", str(PROBE), "--target", url],
        cwd=cwd, capture_output=True, text=True, timeout=180,
    )


def test_probe_verdict_against_round_robin_and_sticky(tmp_path):
    with running_instances(3, "streamable-http") as servers:
        with running_balancer("builtin", "round-robin", "streamable-http", servers, folder=tmp_path / "rr") as front:
            broken = _probe(front.url, tmp_path)
        with running_balancer("builtin", "sticky", "streamable-http", servers, folder=tmp_path / "sticky") as front:
            kept = _probe(front.url, tmp_path)
    assert broken.returncode == 1, broken.stderr[-2000:]
    match = re.search(r"^sessions broken: (\d+)/50, session-not-found after the first call$", broken.stdout, re.M)
    assert match and int(match[1]) > 25, broken.stdout
    assert kept.returncode == 0, kept.stdout + kept.stderr[-2000:]
    assert re.search(r"^sessions kept: 50/50$", kept.stdout, re.M), kept.stdout
