"""Locustfile of `mcpbench bench soak`: long-lived MCP users, each keeping a ledger of its messages.

    MCPBENCH_SOAK   JSON: {"path": name, "url": MCP endpoint, "mix": "soak" | "echo",
                           "reconnect": policy text or null, "out": directory}

`soak`: every user holds its session's GET stream open and runs a weighted mix of `echo` (a text
of its own), `slow` with a progress token (progress notifications on the answer's stream), `ask`
(a sampling request back to the client, answered canned: a server request) and `tools/list`.
`echo`: only `echo`, as fast as it goes (the throughput rounds).

Every message a user sends or receives goes to the process's `MessageLedger`; at the end the process
writes `<out>/ledger.<path>.<pid>.jsonl` (one line per client session) and
`<out>/calls.<path>.<pid>.json`: calls by step, outcomes by failure class (`unclassified` for a
failure that is no `McpFailure`) and the most common failures, answers that came twice, GET streams opened, the reconnect
records summed, and completed calls per second of wall time; and what tells a starved machine from a
slow path: each step's answered times (p50, p95, max), the second each failure ended in, and how late
the process's own event loop ran (a greenlet asking to wake every `LAG_EVERY`: while it is late, every
user of the process is late too, whatever the server does).
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path

import gevent
import orjson
from locust import between, events, task
from locust.runners import MasterRunner

from mcpbench.bench.ledger import MessageLedger
from mcpbench.transport.green import McpFailure
from mcpbench.load.users import McpUser, StreamableHttpUser
from mcpbench.protocol.reconnect import ReconnectPolicy

CONFIG = orjson.loads(os.environ.get("MCPBENCH_SOAK") or b'{"path": "soak", "url": "http://127.0.0.1:8101/mcp", "mix": "soak"}')
SAMPLING_RESULT = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "canned"}
# `slow`: three progress notifications over 1.5 s, so a stream cut after 1 s catches it mid-call.
SLOW_ARGS = {"seconds": 1.5, "steps": 3}

# The event-loop lag probe: how often it asks to wake (seconds).
LAG_EVERY = 0.1

LEDGER = MessageLedger()
_names = itertools.count(1)
_state: dict = {"steps": Counter(), "failures": Counter(), "details": Counter(), "per_second": Counter(),
                "reconnects": Counter(), "users": [], "transports": [], "times": defaultdict(list),
                "failed_at": defaultdict(Counter), "lags": [], "failed": []}
# The failure each greenlet's latest step reported (`_count`), for `_SoakBase.call` to name the call.
_last_failure: dict = {}
# How many failed calls a process names in `failures.<path>.<pid>.jsonl` (the first ones).
MAX_NAMED = 200


def _probe_lag() -> None:
    """How late each wake-up of this process's event loop came (seconds), for as long as the process runs."""
    lags = _state["lags"]
    while True:
        asked = time.perf_counter()
        gevent.sleep(LAG_EVERY)
        lags.append(time.perf_counter() - asked - LAG_EVERY)


@events.init.add_listener
def _start_probe(environment, **_kw) -> None:
    if not isinstance(environment.runner, MasterRunner):
        gevent.spawn(_probe_lag)


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

    def call(self, method: str, params: dict | None = None, **kw):
        """A call, and when it failed, which one: its session, its request's unique argument and what
        its failure said (`failures.<path>.<pid>.jsonl`), to be found in the trace and the servers' logs."""
        me = gevent.getcurrent()
        _last_failure.pop(me, None)
        sent = time.time()
        conn = self.mcp.conn
        before = conn.session_id if conn is not None else None
        result = super().call(method, params, **kw)
        failed = _last_failure.pop(me, None)
        if failed is not None and len(_state["failed"]) < MAX_NAMED:
            conn = self.mcp.conn
            arguments = (params or {}).get("arguments") or {}
            _state["failed"].append({
                "sent": round(sent, 3), "ended": round(time.time(), 3), "method": method, "name": (params or {}).get("name"),
                "unique": arguments.get("text") or arguments.get("question") or (params or {}).get("_meta", {}).get("progressToken"),
                "session": before, "session_after": conn.session_id if conn is not None else None,
                "kind": failed[0], "detail": failed[1],
            })
        return result

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
    ended = int((start_time or time.time()) + response_time / 1000.0)
    if exception is None:
        _state["per_second"][ended] += 1
        _state["times"][name].append(response_time)
    else:
        kind = exception.kind if isinstance(exception, McpFailure) else "unclassified"
        _state["failures"][kind] += 1
        _state["details"][f"{name}: {exception}"] += 1
        _state["failed_at"][kind][ended] += 1
        _last_failure[gevent.getcurrent()] = (kind, str(exception))


def _quantiles(values: list[float]) -> dict:
    """p50, p95 and max of `values` (milliseconds or seconds, as given), with their count."""
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"n": len(ordered), "p50": round(pick(0.5), 3), "p95": round(pick(0.95), 3), "p99": round(pick(0.99), 3),
            "max": round(ordered[-1], 3), "mean": round(statistics.fmean(ordered), 3)}


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
        "answered_ms": {name: _quantiles(times) for name, times in sorted(_state["times"].items())},
        "failed_at": {kind: {str(k): v for k, v in sorted(seconds.items())} for kind, seconds in _state["failed_at"].items()},
        "loop_lag_s": _quantiles(_state["lags"]) | {"over_1s": sum(lag > 1.0 for lag in _state["lags"])},
    }
    (folder / f"calls.{stem}.json").write_bytes(orjson.dumps(record))
    with open(folder / f"failures.{stem}.jsonl", "wb") as handle:
        for failed in _state["failed"]:
            handle.write(orjson.dumps(failed) + b"\n")
