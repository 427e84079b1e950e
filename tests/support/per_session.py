"""A stdio client that starts its server once per session, as several hosts do (issue 39): each
session its own process, `initialize`, `notifications/initialized`, one `tools/call echo`, then the
end of stdin. Every read is bounded; the process is killed if it outlives its session."""

import os
import select
import subprocess
from collections.abc import Sequence

import orjson

# A bound for one answer, and for a server process to exit after its stdin's end.
WAIT = 60.0


def echo_session(server_argv: Sequence[str], text: str) -> str:
    """One session with a server process of its own: the text `echo` answered."""
    proc = subprocess.Popen(list(server_argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "per-session", "version": "1"}}})
        assert "result" in _answer(proc), "initialize was not answered"
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}})
        answer = _answer(proc)
        proc.stdin.close()
        assert proc.wait(WAIT) == 0
        return answer["result"]["content"][0]["text"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
        proc.stdout.close()


def _send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write(orjson.dumps(message) + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen) -> dict:
    fd = proc.stdout.fileno()
    line = b""
    while not line.endswith(b"\n"):
        if not select.select([fd], [], [], WAIT)[0]:
            raise AssertionError(f"no answer within {WAIT} s")
        chunk = os.read(fd, 1)  # byte by byte: nothing is read past the line (the test's messages are short)
        if not chunk:
            raise AssertionError(f"the server closed its stdout (exit {proc.poll()})")
        line += chunk
    return orjson.loads(line)
