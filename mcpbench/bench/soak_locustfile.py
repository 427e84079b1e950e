"""Locustfile of `mcpbench bench soak`: long-lived MCP users, each keeping a ledger of its messages.

    MCPBENCH_SOAK   JSON: {"path": name, "url": MCP endpoint, "mix": "soak" | "echo",
                           "reconnect": policy text or null, "out": directory}

`soak`: every user holds its session's GET stream open and runs a weighted mix of `echo` (a text
of its own), `slow` with a progress token (progress notifications on the answer's stream), `ask`
(a sampling request back to the client, answered canned: a server request) and `tools/list`.
`echo`: only `echo`, as fast as it goes (the throughput rounds).

Every message a user sends or receives goes to the process's `Ledger`; at the end the process
writes `<out>/ledger.<path>.<pid>.jsonl` (one line per client session) and
`<out>/calls.<path>.<pid>.json`: calls by step, outcomes by failure class (`unclassified` for a
failure that is no `McpFailure`) and the most common failures, answers that came twice, GET streams opened, the reconnect
records summed, and completed calls per second of wall time.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter
from pathlib import Path

import orjson
from locust import between, events, task
from locust.runners import MasterRunner

from mcpbench.bench.ledger import Ledger
from mcpbench.load.transports import McpFailure
from mcpbench.load.users import McpUser, StreamableHttpUser
from mcpbench.protocol.reconnect import ReconnectPolicy

CONFIG = orjson.loads(os.environ.get("MCPBENCH_SOAK") or b'{"path": "soak", "url": "http://127.0.0.1:8101/mcp", "mix": "soak"}')
SAMPLING_RESULT = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "canned"}
# `slow`: three progress notifications over 1.5 s, so a stream cut after 1 s catches it mid-call.
SLOW_ARGS = {"seconds": 1.5, "steps": 3}

LEDGER = Ledger()
_names = itertools.count(1)
_state: dict = {"steps": Counter(), "failures": Counter(), "details": Counter(), "per_second": Counter(),
                "reconnects": Counter(), "users": [], "transports": []}


def _unique(kind: str) -> str:
    """A text no other message of the run carries, so each message has a digest of its own."""
    return f"{kind}-{os.getpid()}-{next(_names)}"


class _SoakBase(StreamableHttpUser):
    abstract = True
    host = CONFIG["url"]
    timeout = 30.0
    server_requests = {"sampling/createMessage": SAMPLING_RESULT}
    reconnect = ReconnectPolicy.parse(CONFIG["reconnect"]) if CONFIG.get("reconnect") else None

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.mcp.on_message = LEDGER.on_message
        _state["users"].append(self.mcp)

    def make_transport(self):
        transport = super().make_transport()
        _state["transports"].append(transport)  # counted at the end, when the users have let go of them
        return transport


if CONFIG.get("mix", "soak") == "soak":

    class SoakUser(_SoakBase):
        get_stream = True
        wait_time = between(0.0, 0.1)

        @task(5)
        def echo(self) -> None:
            self.call_tool("echo", {"text": _unique("echo")})

        @task(1)
        def slow(self) -> None:
            self.call("tools/call", {"name": "slow", "arguments": SLOW_ARGS, "_meta": {"progressToken": _unique("p")}})

        @task(1)
        def ask(self) -> None:
            self.call_tool("ask", {"question": _unique("ask")})

        @task(1)
        def tools_list(self) -> None:
            self.call("tools/list")

else:

    class EchoUser(_SoakBase):
        wait_time = between(0.0, 0.0)

        @task
        def echo(self) -> None:
            self.call_tool("echo", {"text": _unique("echo")})


@events.request.add_listener
def _count(name, exception=None, start_time=None, response_time=0.0, **_kw) -> None:
    _state["steps"][name] += 1
    if exception is None:
        _state["per_second"][int((start_time or time.time()) + response_time / 1000.0)] += 1
    else:
        kind = exception.kind if isinstance(exception, McpFailure) else "unclassified"
        _state["failures"][kind] += 1
        _state["details"][f"{name}: {exception}"] += 1


def _reconnected(record: dict) -> None:
    counts = _state["reconnects"]
    counts["breaks"] += 1
    for key in ("ok", "resent", "recovered", "lost", "uncertain", "duplicated", "replayed"):
        counts[key] += int(record.get(key) or 0)


McpUser.reconnect_sink = _reconnected


@events.quitting.add_listener
def _write(environment, **_kw) -> None:
    """After the users stopped (and ended their sessions): the ledger and the counts."""
    if isinstance(environment.runner, MasterRunner) or not (out := CONFIG.get("out")):
        return
    if environment.runner is not None:
        environment.runner.stop()  # already done when the run time is up; else the users end their sessions now
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{CONFIG['path']}.{os.getpid()}"
    with open(folder / f"ledger.{stem}.jsonl", "wb") as handle:
        for record in LEDGER.sessions():
            handle.write(orjson.dumps(record) + b"\n")
    users = _state["users"]
    record = {
        "path": CONFIG["path"], "steps": _state["steps"], "failures": _state["failures"],
        "failure_details": dict(_state["details"].most_common(10)),
        "per_second": {str(k): v for k, v in sorted(_state["per_second"].items())},
        "duplicate_answers": sum(u.duplicates for u in users),
        "get_streams": sum(getattr(t, "get_streams", 0) for t in _state["transports"]),
        "reconnects": _state["reconnects"],
    }
    (folder / f"calls.{stem}.json").write_bytes(orjson.dumps(record))
