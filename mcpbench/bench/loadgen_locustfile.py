"""Locustfile of `mcpbench bench loadgen`: the MCP user or a raw FastHttpUser posting the same bytes.

    MCPBENCH_BENCH_USER   "mcp" (StreamableHttpUser, tools/call echo) or "raw" (FastHttpUser, same POST)
    MCPBENCH_BENCH_URL    the MCP endpoint
    MCPBENCH_BENCH_OUT    directory for one JSON per load process: calls, failures, CPU seconds, wall seconds
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
from locust import events, task
from locust.contrib.fasthttp import FastHttpUser
from locust.runners import MasterRunner

from mcpbench.load.users import StreamableHttpUser
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.http import post_headers
from mcpbench.protocol.jsonrpc import Request
from mcpbench.protocol.versions import LATEST_HANDSHAKE

URL = os.environ.get("MCPBENCH_BENCH_URL", "http://127.0.0.1:8101/mcp")
KIND = os.environ.get("MCPBENCH_BENCH_USER", "mcp")
ARGS = {"text": "hello"}

if KIND == "mcp":

    class McpEcho(StreamableHttpUser):
        host = URL

        @task
        def echo(self) -> None:
            self.call_tool("echo", ARGS)

else:
    _REQUEST = Request(id=1, method="tools/call", params={"name": "echo", "arguments": ARGS})
    _BODY = jsonrpc.encode(_REQUEST)

    class RawEcho(FastHttpUser):
        host = URL.rsplit("/", 1)[0]
        path = "/" + URL.rsplit("/", 1)[1]

        def on_start(self) -> None:
            # The same session setup an MCP client does, then the same POST bytes for every call.
            init = jsonrpc.encode(Request(id=0, method="initialize", params={"protocolVersion": LATEST_HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}))
            resp = self.client.post(self.path, data=init, headers=post_headers(_REQUEST, version=None), name="initialize")
            self.headers = post_headers(_REQUEST, version=LATEST_HANDSHAKE, session_id=resp.headers.get("mcp-session-id"))

        @task
        def echo(self) -> None:
            self.client.post(self.path, data=_BODY, headers=self.headers, name="tools/call echo")


_state = {"calls": 0, "failures": 0, "cpu0": 0.0, "wall0": 0.0}


@events.request.add_listener
def _count(name, exception=None, **_kw) -> None:
    if name == "tools/call echo":
        if not _state["calls"]:  # measure from the first call: startup and spawning are not per-call costs
            _state.update(cpu0=time.process_time(), wall0=time.perf_counter())
        _state["calls"] += 1
        if exception is not None:
            _state["failures"] += 1


@events.test_start.add_listener
def _start(environment, **_kw) -> None:
    _state.update(calls=0, failures=0, cpu0=time.process_time(), wall0=time.perf_counter())


@events.test_stop.add_listener
def _stop(environment, **_kw) -> None:
    if isinstance(environment.runner, MasterRunner) or not (out := os.environ.get("MCPBENCH_BENCH_OUT")):
        return
    record = {
        "kind": KIND, "calls": _state["calls"], "failures": _state["failures"],
        "cpu_s": time.process_time() - _state["cpu0"], "wall_s": time.perf_counter() - _state["wall0"],
    }
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{KIND}.{os.getpid()}.json").write_bytes(orjson.dumps(record))
