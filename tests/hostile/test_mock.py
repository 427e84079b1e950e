"""`serve-trace` answers each client session from the start of its recording, in the client's era.

The traces call one tool (`count`) repeatedly and each call got a different answer, so a mock
that carries state from one client session to the next answers the second client wrongly.
"""

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.hostile.helpers import EXIT_FAILED, EXIT_OK, run
from tests.hostile.hostile_peers import HANDSHAKE, STATELESS, counter_session, counter_trace, write_trace
from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port


@contextlib.contextmanager
def mock(trace: Path, transport: str) -> Iterator[str]:
    """`serve-trace TRACE` on `transport`; yields its URL as a replay target."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpbench", "serve-trace", str(trace), "--transport", transport, "--port", str(port)],
        cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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
HOSTILE_REQUESTS = [
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n{\"a\"",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n[1,2]",
    b"NONSENSE\r\n\r\n",
]


def test_hostile_clients_get_400_and_the_mock_keeps_serving(tmp_path):
    import socket

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
