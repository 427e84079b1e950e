"""The balancer serves metrics of the traffic it routes (`--metrics`): the recorder goes first in its
chain, into a temporary trace its companion follows."""

import subprocess
import sys
import time
import urllib.request

import pytest

from mcpbench.lab.peers.drive import drive
from tests.support.servers import HOST, REPO_ROOT, free_port, reference_server, stop_process, wait_for_port

SCRAPE_TIMEOUT = 20.0


def scrape(url: str, enough) -> str:
    """The metrics page once `enough(text)` holds, or the last one after SCRAPE_TIMEOUT."""
    deadline = time.monotonic() + SCRAPE_TIMEOUT
    while True:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        if enough(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.2)


@pytest.mark.slow
def test_the_balancer_serves_metrics_of_the_calls_it_routes():
    with reference_server("streamable-http") as server:
        port, metrics = free_port(), free_port()
        argv = [sys.executable, "-m", "mcpbench.proxies.balancer", "--upstream", f"http://{HOST}:{server.port}",
                "--listen", f"{HOST}:{port}", "--set", f"mcpbench_balancer_instances={HOST}:{server.port}",
                "--metrics", f"{HOST}:{metrics}", "--service-name", "lab-balancer"]
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for_port(HOST, port, proc=proc)
            drive(f"http://{HOST}:{port}/mcp", "legacy")
            wait_for_port(HOST, metrics, proc=proc)
            text = scrape(f"http://{HOST}:{metrics}/metrics", lambda text: 'mcp_method_name="prompts/get"' in text)
        finally:
            stop_process(proc)
            proc.stderr.close()
    echo = [line for line in text.splitlines() if line.startswith("mcpbench_calls_total{") and 'gen_ai_tool_name="echo"' in line]
    assert len(echo) == 1 and echo[0].endswith(" 1.0") and 'mcpbench_outcome="ok"' in echo[0], echo
    assert 'mcp_client_operation_duration_seconds_count{' in text and 'service_name="lab-balancer"' in text
