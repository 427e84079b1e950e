"""`serve-trace` answers each client session from the start of its recording, in the client's era,
and stands up to hostile clients: bad bodies, rebinding requests, resets.

The traces call one tool (`count`) repeatedly and each call got a different answer, so a mock
that carries state from one client session to the next answers the second client wrongly.
"""

import contextlib
import http.client
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from tests.hostile.helpers import EXIT_FAILED, EXIT_OK, run
from tests.hostile.hostile_peers import HANDSHAKE, STATELESS, counter_session, counter_trace, write_trace
from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port


@contextlib.contextmanager
def mock(trace: Path, transport: str, *extra: str, stderr: Any = subprocess.DEVNULL) -> Iterator[str]:
    """`serve-trace TRACE` on `transport` (with `extra` options); yields its URL as a replay target."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpbench", "serve-trace", str(trace), "--transport", transport, "--port", str(port), *extra],
        cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
    )
    try:
        wait_for_port(HOST, port, proc=proc)
        yield f"sse+http://{HOST}:{port}/sse" if transport == "sse" else f"http://{HOST}:{port}/mcp"
    finally:
        stop_process(proc)


def replay(trace: Path, target: str, report: Path, *extra: str):
    result = run(["replay", str(trace), "--target", target, "--report", str(report), *extra])
    return result, orjson.loads(report.read_bytes())


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
@pytest.mark.slow
def test_replaying_one_trace_twice_against_one_mock_gives_the_same_result(tmp_path, transport):
    trace = counter_trace(tmp_path / "t.jsonl", answers=("1", "2", "3"))
    with mock(trace, transport) as url:
        runs = [replay(trace, url, tmp_path / f"r{n}.json") for n in range(3)]
    for result, report in runs:
        assert result.returncode == EXIT_OK, result.stdout + result.stderr
        assert report["counts"]["identical"] == 4 and report["counts"]["changed"] == 0


def mixed_trace(path: Path) -> Path:
    """Two recorded sessions: "h" in the handshake era (answers 1, 2), "s" in 2026-07-28 (a, b)."""
    return write_trace(path, counter_session("h", HANDSHAKE, ["1", "2"]),
                       counter_session("s", STATELESS, ["a", "b"], start=5.0))


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("session", ["h", "s"])
def test_each_client_gets_the_session_of_its_own_era(tmp_path, session):
    trace = mixed_trace(tmp_path / "mixed.jsonl")
    with mock(trace, "streamable-http") as url:
        runs = [replay(trace, url, tmp_path / f"r{n}.json", "--session", session) for n in range(2)]
    for result, report in runs:
        assert result.returncode == EXIT_OK, result.stdout + result.stderr
        assert report["counts"]["changed"] == 0 and report["counts"]["identical"] == 3


@pytest.mark.parametrize(("recorded", "asked", "missing"), [
    (HANDSHAKE, STATELESS, "no 2026-07-28 session"),
    (STATELESS, HANDSHAKE, "no handshake-era"),
])
def test_a_client_in_an_era_the_recording_lacks_gets_a_clear_error(tmp_path, recorded, asked, missing):
    trace = counter_trace(tmp_path / "t.jsonl", version=recorded)
    with mock(trace, "streamable-http") as url:
        result, report = replay(trace, url, tmp_path / "r.json", "--protocol-version", asked)
    assert result.returncode in (EXIT_FAILED, 3) and "Traceback" not in result.stderr, result.stderr
    assert missing in result.stdout + result.stderr + orjson.dumps(report).decode()


# Requests a hostile or broken client sends: each gets a 400, none stops the mock or prints a traceback.
# (Their Host is a loopback name: a foreign one gets 421 first, see the rebinding test below.)
HOSTILE_REQUESTS = [
    b"POST /mcp HTTP/1.1\r\nHost: localhost:8000\r\nContent-Length: abc\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: localhost:8000\r\nContent-Length: -5\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: localhost:8000\r\nContent-Length: 4\r\n\r\n{\"a\"",
    b"POST /mcp HTTP/1.1\r\nHost: localhost:8000\r\nContent-Length: 5\r\n\r\n[1,2]",
    b"NONSENSE\r\n\r\n",
]


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_hostile_clients_get_400_and_the_mock_keeps_serving(tmp_path):
    trace, log, port = counter_trace(tmp_path / "t.jsonl"), tmp_path / "mock.stderr", free_port()
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcpbench", "serve-trace", str(trace), "--transport", "streamable-http", "--port", str(port)],
            cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        )
        try:
            wait_for_port(HOST, port, proc=proc)
            for raw in HOSTILE_REQUESTS:
                with socket.create_connection((HOST, port), timeout=30) as sock:
                    sock.sendall(raw)
                    sock.shutdown(socket.SHUT_WR)
                    answer = b""
                    while chunk := sock.recv(4096):
                        answer += chunk
                    assert b"400" in answer.split(b"\n")[0] or b"Error code: 400" in answer, (raw, answer)
            result, report = replay(trace, f"http://{HOST}:{port}/mcp", tmp_path / "r.json")
            assert result.returncode == EXIT_OK and report["counts"]["identical"] == 3, result.stdout + result.stderr
        finally:
            stop_process(proc)
    assert "Traceback" not in log.read_text(), log.read_text()


INITIALIZE = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}})


def status_of(url: str, headers: dict[str, str]) -> int:
    """The status a request to the mock at `url` gets with `headers` (a POST of `initialize`, or legacy's GET)."""
    parts = urlsplit(url.removeprefix("sse+"))
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        if parts.path == "/sse":
            conn.request("GET", "/sse", headers={"accept": "text/event-stream", **headers})
        else:
            conn.request("POST", "/mcp", body=INITIALIZE, headers={
                "content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_a_rebinding_request_is_refused_as_the_sdk_refuses_it(tmp_path, transport):
    """Bound to loopback, the mock checks Host (421) and Origin (403) as the official SDK does."""
    trace = counter_trace(tmp_path / "t.jsonl")
    with mock(trace, transport) as url:
        port = urlsplit(url.removeprefix("sse+")).port
        assert status_of(url, {"host": "evil.example"}) == 421
        assert status_of(url, {"host": f"127.0.0.1:{port}", "origin": "http://evil.example"}) == 403
        assert status_of(url, {"host": f"localhost:{port}", "origin": f"http://localhost:{port}"}) == 200
    with mock(trace, transport, "--allowed-host", "evil.example:*", "--allowed-origin", "http://evil.example") as url:
        assert status_of(url, {"host": "evil.example:80", "origin": "http://evil.example"}) == 200
        assert status_of(url, {"host": "other.example:80"}) == 421


def read_until(sock: socket.socket, end: bytes) -> None:
    data = b""
    while end not in data:
        chunk = sock.recv(4096)
        assert chunk and not data.startswith(b"HTTP/1.1 4"), data
        data += chunk


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a client that is killed or gives up does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_a_client_that_resets_its_connection_gets_no_traceback(tmp_path, transport):
    trace, log = counter_trace(tmp_path / "t.jsonl"), tmp_path / "mock.stderr"
    with open(log, "wb") as stderr, mock(trace, transport, stderr=stderr) as url:
        parts = urlsplit(url.removeprefix("sse+"))
        host = f"localhost:{parts.port}".encode()
        kept = socket.create_connection((parts.hostname, parts.port), timeout=30)
        if transport == "sse":  # reset with the stream open
            kept.sendall(b"GET /sse HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n" % host)
            read_until(kept, b"event: endpoint")
        else:  # reset between two requests of a kept-alive connection
            kept.sendall(b"POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (host, len(INITIALIZE), INITIALIZE))
            read_until(kept, b"0\r\n\r\n")  # the end of the chunked SSE answer
        reset(kept)
        half = socket.create_connection((parts.hostname, parts.port), timeout=30)  # reset inside a request
        half.sendall(b"POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{" % host)
        reset(half)
        result, report = replay(trace, url, tmp_path / "r.json")  # the mock serves on
        assert result.returncode == EXIT_OK and report["counts"]["identical"] == 3, result.stdout + result.stderr
    said = [line for line in log.read_text().splitlines() if not line.startswith(("mcpbench: serving", "mcpbench: stopped"))]
    assert said == [], said
