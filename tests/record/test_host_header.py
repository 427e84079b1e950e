"""The client's Host reaches the upstream (DNS-rebinding protection keeps working through the recorder), the
trace records what the client sent, and the balancer checks Host and Origin as the SDK does (real processes)."""

import http.client
import json
import subprocess
import sys
import urllib.parse

import pytest

from mcpbench.trace.reader import read_trace
from tests.record.helpers import mitmdump, record_proxy
from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port

FOREIGN = "rebound.example"  # a name that resolves to 127.0.0.1 only in an attacker's DNS
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def post(url: str, host: str | None = None, origin: str | None = None) -> int:
    """The status of an `initialize` POST to `url` sent with this Host (and Origin)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("POST", parts.path, skip_host=host is not None)
        headers = {"host": host, "origin": origin, "content-type": "application/json", "accept": "application/json, text/event-stream"}
        for name, value in headers.items():
            if value is not None:
                conn.putheader(name, value)
        body = json.dumps(INITIALIZE).encode()
        conn.putheader("content-length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        response.read() if response.status != 200 else None
        return response.status
    finally:
        conn.close()


def recorded_hosts(trace) -> list[str]:
    return [e["request_headers"]["host"] for e in read_trace(trace) if e.get("kind") == "http" and isinstance(e.get("request_headers"), dict)]


@pytest.mark.slow
def test_a_rebinding_request_is_refused_through_record_and_the_addon_as_it_is_directly(http_server, tmp_path):
    assert post(http_server.url, FOREIGN) == 421  # the SDK, bound to loopback, checks Host
    with record_proxy(http_server.url, tmp_path / "record.jsonl") as (url, _):
        through = post(url, FOREIGN)
        local = post(url)  # the recorder's own 127.0.0.1:PORT: a loopback Host the SDK allows
    with mitmdump(http_server.port, tmp_path / "addon.jsonl") as proxy:
        addon = post(proxy.url("/mcp"), FOREIGN)
    with record_proxy(http_server.url, tmp_path / "upstream.jsonl", extra=["--host-header", "upstream"]) as (url, _):
        rewritten = post(url, FOREIGN)  # asked for: the upstream's own address, as mitmproxy sends it by default
    assert (through, local, addon, rewritten) == (421, 200, 421, 200)
    for trace in ("record.jsonl", "addon.jsonl", "upstream.jsonl"):
        assert FOREIGN in recorded_hosts(tmp_path / trace)  # the trace has what the client sent


@pytest.mark.slow
def test_the_balancer_refuses_a_foreign_host_or_origin_as_the_sdk_does(http_server):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcpbench.proxies.balancer", "--upstream", http_server.url,
                             "--listen", f"{HOST}:{port}", "--set", f"mcpbench_balancer_instances={HOST}:{http_server.port}"],
                            cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(HOST, port, proc=proc)
        url = f"http://{HOST}:{port}/mcp"
        statuses = [post(url, FOREIGN), post(url, origin="http://rebound.example"), post(url, f"localhost:{port}"),
                    post(url, origin=f"http://127.0.0.1:{port}")]
    finally:
        stop_process(proc)
    assert statuses == [421, 403, 200, 200]


@pytest.mark.slow
def test_a_rebinding_check_recorded_through_record_replays_as_it_was_made(http_server, tmp_path):
    # Before: the foreign-Host initialize went with the target's own Host, got an answer, and the
    # replay exited 1 ("extra"). Now it goes with the Host the client sent, and the report says so.
    from tests.support import peers
    from mcpbench.lab.peers.drive import sdk_target

    trace = tmp_path / "rebinding.jsonl"
    with record_proxy(http_server.url, trace) as (url, _):
        assert post(url, FOREIGN) == 421
        peers.session(sdk_target(url, "streamable-http"), "legacy")

    def replay(*extra):
        argv = [sys.executable, "-m", "mcpbench", "replay", str(trace), "--target", http_server.url, *extra]
        return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)

    same = replay()
    assert same.returncode == 0, same.stdout + same.stderr
    assert "failed as recorded: HTTP 421" in same.stdout and f"sent with its recorded Host '{FOREIGN}'" in same.stdout
    chosen = replay("--foreign-host", "target")  # the user's choice: the target's Host, which it accepts
    assert chosen.returncode == 1 and "1 extra" in chosen.stdout, chosen.stdout + chosen.stderr
    assert "as --foreign-host target asks" in chosen.stdout
