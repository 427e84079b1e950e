"""`scenarios/sticky-probe.yaml`: its verdict against the lab's non-sticky and sticky set-ups."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcpbench.lab.topology.cluster import running_balancer, running_instances
from tests.support.servers import REPO_ROOT

pytestmark = pytest.mark.slow  # seconds each: `./dev test -m "not slow"` leaves them out

PROBE = REPO_ROOT / "scenarios" / "sticky-probe.yaml"


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


def test_balancer_stacks_with_the_recorder(tmp_path):
    """One mitmdump with the recorder first and the balancer second: sticky legacy sessions hold
    on 3 instances and every session is recorded."""
    import gevent
    import orjson

    from mcpbench.lab.peers.servers import HOST, free_port, start_listening, stop_process
    from mcpbench.lab.topology.cluster import mitmdump_path
    from mcpbench.load.client import McpClient
    from mcpbench.load.transports import SseTransport, http_client
    from mcpbench.proxies.balancer import __file__ as balancer_script
    from mcpbench.record import ADDON_PATH

    class Steps:
        def __init__(self):
            self.seen = []

        def fire(self, **kw):
            self.seen.append(kw)

    trace = tmp_path / "t.jsonl"
    with running_instances(3, "sse") as servers:
        port = free_port()
        instances = ",".join(f"{HOST}:{s.port}" for s in servers)
        with open(tmp_path / "mitmdump.log", "wb") as log:
            proxy = start_listening(
                [mitmdump_path(), "-q", "--mode", f"reverse:http://{HOST}:{servers[0].port}", "--listen-host", HOST, "-p", str(port),
                 "--set", "connection_strategy=lazy", "-s", str(ADDON_PATH), "--set", f"mcpbench_out={trace}",
                 "-s", balancer_script, "--set", f"mcpbench_balancer_instances={instances}",
                 "--set", "mcpbench_balancer_policy=sticky"],
                port, stdout=log, stderr=log,
            )
        try:
            url = f"http://{HOST}:{port}/sse"
            steps = Steps()
            client = McpClient(lambda: SseTransport(url, http_client(url, timeout=10, concurrency=2), timeout=10), steps,
                               request_type="sse", timeout=10)

            def sessions():
                for _ in range(6):
                    with client.session() as ok:
                        if ok:
                            client.call_tool("echo", {"text": "hi"})

            gevent.spawn(sessions).join(120)
        finally:
            stop_process(proxy)
    assert len(steps.seen) == 6 * 4 and not [s for s in steps.seen if s["exception"]], steps.seen
    landed = {s["context"]["session"]: set() for s in steps.seen}
    for s in steps.seen:
        landed[s["context"]["session"]].add(s["context"]["instance"])
    assert all(len(where) == 1 for where in landed.values()) and len(set().union(*landed.values())) == 3
    messages = [orjson.loads(line) for line in trace.read_bytes().splitlines()]
    assert sum(1 for m in messages if (m.get("msg") or {}).get("method") == "initialize") == 6
