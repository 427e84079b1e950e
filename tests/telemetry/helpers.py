"""Shared by the telemetry tests: a stdio client speaking raw JSON-RPC through the tee, span lookups."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from tests.support.servers import REPO_ROOT, serve_argv

SESSION_TIMEOUT = 30.0
# The caller's span a request names in `params._meta.traceparent` (W3C Trace Context's example ids).
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"

# One handshake-era session: a call carrying a traceparent, a tool error, a JSON-RPC error.
MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"traceparent": TRACEPARENT}}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "fail", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 4, "method": "no/such/method"},
]


def tee_session(trace: Path, options: list[str]) -> subprocess.CompletedProcess:
    """The reference server behind `mcpbench tee OPTIONS`, one session of MESSAGES, each request
    answered before the next goes; the tee's output once it has exited."""
    argv = [sys.executable, "-m", "mcpbench", "tee", "--out", str(trace), *options, "--", *serve_argv("stdio")]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for message in MESSAGES:
            proc.stdin.write(orjson.dumps(message) + b"\n")
            proc.stdin.flush()
            if "id" in message:
                while orjson.loads(proc.stdout.readline()).get("id") != message["id"]:
                    pass  # a notification or log line before the answer
        stdout, stderr = proc.communicate(timeout=SESSION_TIMEOUT)  # closes stdin: the session ends
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr.decode(errors="replace"))


def by_name(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        found.setdefault(span["name"], []).append(span)
    return found


def one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    matching = by_name(spans).get(name, [])
    assert len(matching) == 1, (name, sorted(by_name(spans)))
    return matching[0]
