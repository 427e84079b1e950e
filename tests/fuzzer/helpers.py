"""Running `mcpbench fuzz` and `mcpbench replay` as a user does, against the lab's servers."""

import contextlib
import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from jsonschema import Draft202012Validator

from mcpbench.lab.peers.servers import start_listening
from tests.support.http_thread import QuietHandler, serving
from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process

MCPBENCH: Final = (sys.executable, "-m", "mcpbench")
# The planted-fault server as a stdio target.
FAULTY_STDIO: Final = "stdio:" + shlex.join([sys.executable, "-m", "mcpbench.lab.peers.faulty_server"])
REFERENCE_STDIO: Final = "stdio:" + shlex.join([sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"])
# A command's own bound: a fuzz run in a test is a few dozen calls (stdio restarts after crashes and hangs included).
RUN_TIMEOUT: Final = 240


def fuzz(target: str, *args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*MCPBENCH, "fuzz", target, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=cwd)


def fuzz_json(target: str, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """A run writing its JSON and traces under `out`; the process and the JSON."""
    result = fuzz(target, "--json", str(out / "fuzz.json"), "--out", str(out / "findings"), *args)
    assert result.returncode in (0, 1), result.stderr
    return result, json.loads((out / "fuzz.json").read_text())


def found(data: dict) -> set[tuple[str, str]]:
    """(class, tool) of each finding of a run's JSON."""
    return {(f["class"], f["tool"]) for f in data["findings"]}


def replay_row(trace: str, target: str, tool: str, *, timeout: float | None = None) -> str:
    """The replay report's row of the trace's `tools/call` (`identical`, `unanswered`, ...); the report says the finding reproduced.
    `timeout`: replay's `--timeout` (each request's bound), else its own (30 s at least): a hang's replay waits it out."""
    bound = () if timeout is None else ("--timeout", f"{timeout:g}")
    result = subprocess.run([*MCPBENCH, "replay", trace, "-t", target, *bound], capture_output=True, text=True,
                            timeout=RUN_TIMEOUT, cwd=REPO_ROOT)
    rows = [line for line in result.stdout.splitlines() if f"tools/call {tool} " in line or (tool == "tools/list" and " tools/list " in line)]
    assert rows, result.stdout + result.stderr
    assert ": reproduced: " in result.stdout, result.stdout  # the report's note on the finding the trace records
    return rows[0]


@contextlib.contextmanager
def faulty_http(transport: str = "streamable-http", *extra: str) -> Iterator[str]:
    """The planted-fault server on an ephemeral loopback port; its URL (legacy SSE: `sse+http://...`)."""
    port = free_port()
    argv = [sys.executable, "-m", "mcpbench.lab.peers.faulty_server", "--transport", transport, "--host", HOST, "--port", str(port), *extra]
    proc = start_listening(argv, port, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://{HOST}:{port}/mcp" if transport == "streamable-http" else f"sse+http://{HOST}:{port}/sse"
    finally:
        stop_process(proc)


# A stdio server of a few lines that exits on a line that is not JSON (a protocol case's crash), and
# never answers a request before `initialize` (a call before the handshake: a hang).
FRAGILE_SERVER: Final = """
import json, sys
ready = False
for line in sys.stdin:
    message = json.loads(line)  # a line that is not JSON ends the process with a traceback
    if "id" not in message or not isinstance(message, dict):
        continue
    method = message.get("method")
    ready = ready or method == "initialize"
    if not ready:
        continue
    result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "fragile", "version": "1"}} \\
        if method == "initialize" else {"tools": []} if method == "tools/list" else {}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""
FRAGILE_STDIO: Final = "stdio:" + shlex.join([sys.executable, "-c", FRAGILE_SERVER])


# The part of the official SARIF 2.1.0 schema a consumer relies on (checked by hand against the
# specification's sections 3.13 sarifLog, 3.14 run, 3.19 tool, 3.27 result, 3.28 location, 3.49 rule),
# the official file not being available offline. Levels and versions are its enums.
MESSAGE = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}}}
SARIF_MINIMAL = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["tool", "results"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name", "rules"],
                    "properties": {"name": {"type": "string"}, "version": {"type": "string"},
                                   "rules": {"type": "array", "items": {
                                       "type": "object", "required": ["id", "shortDescription"],
                                       "properties": {"id": {"type": "string"}, "shortDescription": MESSAGE,
                                                      "defaultConfiguration": {"type": "object", "properties": {
                                                          "level": {"enum": ["none", "note", "warning", "error"]}}}}}}}}}},
                "results": {"type": "array", "items": {
                    "type": "object",
                    "required": ["ruleId", "level", "message", "locations"],
                    "properties": {
                        "ruleId": {"type": "string"},
                        "ruleIndex": {"type": "integer", "minimum": 0},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": MESSAGE,
                        "locations": {"type": "array", "minItems": 1, "items": {
                            "type": "object",
                            "anyOf": [{"required": ["logicalLocations"]}, {"required": ["physicalLocation"]}],
                            "properties": {
                                "logicalLocations": {"type": "array", "items": {"type": "object", "required": ["name"]}},
                                "physicalLocation": {"type": "object", "required": ["artifactLocation"], "properties": {
                                    "artifactLocation": {"type": "object", "required": ["uri"]}}}}}}}}}},
        }},
    },
}


def check_sarif(log: dict) -> None:
    """Fails with every structural error of `log`, and where a result's ruleIndex does not point at its rule."""
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in Draft202012Validator(SARIF_MINIMAL).iter_errors(log)]
    assert not errors, errors
    for run in log["runs"]:
        rules = run["tool"]["driver"]["rules"]
        for result in run["results"]:
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


class _LaxHandler(QuietHandler):
    """A Streamable HTTP server that answers every POST 200, whatever its headers say (no tools)."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            self.reply(202)
            return
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "lax", "version": "1"}} \
            if message["method"] == "initialize" else {"tools": []} if message["method"] == "tools/list" else {}
        data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self.reply(200, {"content-type": "application/json", "mcp-session-id": "lax-session"}, data)


@contextlib.contextmanager
def lax_http() -> Iterator[str]:
    """`_LaxHandler` on an ephemeral loopback port (a thread of the test's process); its URL."""
    with serving(_LaxHandler) as port:
        yield f"http://{HOST}:{port}/mcp"
