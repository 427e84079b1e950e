"""Helpers for the fault tests: a fault proxy process, a raw HTTP/1.1 MCP handshake, stream reading."""

import contextlib
import http.client
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.servers import REPO_ROOT, stop_process

# Starting mitmproxy in a fresh Python on a busy 2-core machine.
START_TIMEOUT = 60.0
# How long a test waits for a stream to end: far above any cut a test asks for, far below the
# SDK's idle stream (which never ends by itself).
STREAM_TIMEOUT = 45.0
VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def read_first_line(proc: subprocess.Popen, timeout: float = START_TIMEOUT) -> str:
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"no line within {timeout:g} s")
    if not line:
        pytest.fail(f"process ended with {proc.wait()}: {proc.stderr.read() if proc.stderr else ''}")
    return line.strip()


@contextlib.contextmanager
def fault_proxy(upstream: str, *options: str) -> Iterator[str]:
    """`mcpbench faults --upstream UPSTREAM OPTIONS` on an ephemeral port; yields the URL to use."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpbench", "faults", "--upstream", upstream, "--listen", "127.0.0.1:0", *options],
        cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        yield read_first_line(proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        stop_process(proc)


def connection(url: str, timeout: float = STREAM_TIMEOUT) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)


def post(conn: http.client.HTTPConnection, path: str, message: dict, headers: dict | None = None) -> http.client.HTTPResponse:
    conn.request("POST", path, json.dumps(message), {"accept": ACCEPT, "content-type": "application/json", **(headers or {})})
    return conn.getresponse()


def initialize(url: str) -> dict:
    """A handshake over Streamable HTTP; the headers later requests of the session carry."""
    conn = connection(url)
    path = urlsplit(url).path
    answer = post(conn, path, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "faults-test", "version": "1"}}})
    assert answer.status == 200, answer.read()
    answer.read()
    headers = {"mcp-session-id": answer.getheader("mcp-session-id"), "mcp-protocol-version": VERSION}
    done = post(conn, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    assert done.status == 202
    done.read()
    conn.close()
    return headers


def read_until_closed(response: http.client.HTTPResponse) -> tuple[bytes, bool]:
    """Every byte of a streamed body, and whether it ended by a cut (True) or a proper end (False)."""
    got = b""
    try:
        while chunk := response.read1(65536):
            got += chunk
    except (http.client.IncompleteRead, ConnectionError) as exc:
        return got + getattr(exc, "partial", b""), True
    return got, False


def fault_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(check, timeout: float = STREAM_TIMEOUT, what: str = "a condition"):
    """Poll `check` until it returns something true; its value (fails after `timeout`)."""
    deadline = time.monotonic() + timeout
    while (value := check()) is None or value is False or value == []:
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not met within {timeout:g} s")
        time.sleep(0.05)
    return value


def start_stream_get(url: str, headers: dict, extra: Sequence[tuple[str, str]] = ()) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = connection(url)
    conn.request("GET", urlsplit(url).path, headers={"accept": "text/event-stream", **headers, **dict(extra)})
    return conn, conn.getresponse()
