"""A mitmproxy addon that injects faults into HTTP MCP traffic: cut streams, idle cuts, drops, delay.

In front of any HTTP MCP server (reverse mode), alone or stacked with the recorder and the balancer::

    mitmdump --mode reverse:http://127.0.0.1:8000 -s mcpbench/proxies/faults.py \\
        --set mcpbench_faults_cut_streams_after=61s --set mcpbench_faults_drop=5% \\
        --set mcpbench_faults_drop_as=503 --set mcpbench_faults_delay=20ms±10ms \\
        --set mcpbench_faults_from=10s --set mcpbench_faults_until=20s --set mcpbench_faults_log=faults.jsonl

`mcpbench faults --upstream URL --listen HOST:PORT` runs the same addon in-process, and `lab up`
loads it into its balancer. The options (values as in `proxies/faultplan.py`, which decides without I/O):

- cut SSE streams (a Streamable HTTP GET stream or SSE answer, the legacy `/sse` stream) T seconds
  after their headers passed: the client connection is closed under the stream. `flow.kill()` does
  nothing once a response streams, so the connection is closed through its handler in mitmproxy's
  proxyserver, from the event loop. Never before the stream's first bytes passed (within another
  T): a stream cut before its first event gave the client no event id, so what a cut tests (can the
  client resume?) has no answer there, and a proxy behind on its loop (a starved machine: its timer
  late, the server's first event received but not yet handed on) made that happen to streams whose
  first event the server had sent at once. Such a stream is cut as soon as its first bytes are on
  their way (`held: true` in the log);
- cut a client connection on which no bytes moved for T seconds (idle timeout, as a balancer does);
- drop a share of requests before they are forwarded: reset the connection, or answer 502/503;
- delay each request by a time with jitter before it is forwarded;
- buffer SSE: hold every SSE stream back until it ends, then pass it on at once (as a proxy with
  response buffering on does: progress arrives together with the answer, a GET stream never);
- a schedule: faults only from second A to second B after the proxy started (a stream whose time
  is up before A is cut at A).

Each injected fault is one JSON line in the fault log (`t` wall time, `elapsed` since the start,
`kind`, flow id, method, path, client), written at once, so experiments can line faults up with
client samples. Load this addon after the recorder, so the recorder sees a dropped request's answer.
"""

# No `from __future__ import annotations`: mitmproxy loads this file as a script (see balancer.py).
import asyncio
import logging
import os
import time
from typing import Final

import orjson

from mcpbench.protocol.http import is_event_stream
from mcpbench.proxies.faultplan import ADDON_OPTIONS, LOG_OPTION, Decider, FaultConfigError, FaultPlan, parse_plan
from mcpbench.proxies.upstream import FreshUpstream
from mcpbench.trace.redact import Redactor

# How often the idle check looks at the open connections, at most: a cut comes this late at worst.
MAX_IDLE_CHECK: Final = 0.5
# The body of a 502/503 drop, saying who answered (a client must not blame the server).
DROP_BODY: Final = b"mcpbench faults: request dropped on purpose\n"

logger = logging.getLogger(__name__)


class FaultLog:
    """Fault records as JSON Lines, one `os.write` each with O_APPEND (two processes may share a file)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: dict) -> None:
        os.write(self._fd, orjson.dumps(record) + b"\n")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _Activity:
    """A stream callable that notes when bytes passed (for the idle cut, and the stream's first ones
    for its cut), and hands each chunk to the one set before."""

    __slots__ = ("faults", "flow", "inner", "passed")

    def __init__(self, faults: "Faults", flow, inner) -> None:
        self.faults = faults
        self.flow = flow
        self.inner = inner
        self.passed = False

    def __call__(self, chunk: bytes) -> bytes:
        self.faults.touch(self.flow.client_conn.id)
        if chunk and not self.passed:
            self.passed = True
            self.faults.first_bytes(self.flow)
        return self.inner(chunk) if self.inner is not None else chunk


class Faults:
    """The addon: drops and delays in `request`, stream cuts from `responseheaders`, idle cuts by a ticker."""

    def __init__(self) -> None:
        self.plan = FaultPlan()
        self.decider = Decider(self.plan)
        self.log: FaultLog | None = None
        self.started: float | None = None
        self.redactor = Redactor()
        self._timers: dict[str, asyncio.TimerHandle] = {}  # flow id -> its stream's cut
        self._streams: dict[str, _Activity] = {}  # flow id -> its stream's callable (has it passed bytes?)
        self._held: dict[str, float] = {}  # flow id -> when its stream opened: cut due, waiting for its first bytes
        self._clients: dict[str, tuple[object, float]] = {}  # connection id -> (client, last activity)
        self._ticker: asyncio.Task | None = None
        self.upstream = FreshUpstream()  # no request on a dead or long-idle upstream connection

    # --- options ---------------------------------------------------------------------------------

    def load(self, loader) -> None:
        helps = {
            "cut_streams_after": "cut every SSE stream this long after it opened (61s, 500ms)",
            "idle_timeout": "cut a client connection on which nothing moved for this long",
            "drop": "share of requests to drop (5% or 0.05)",
            "drop_as": "how a drop fails: reset, 502 or 503",
            "delay": "delay before forwarding each request, with jitter (20ms±10ms or 20ms+-10ms)",
            "faults_from": "faults start this long after the proxy started",
            "faults_until": "faults end this long after the proxy started",
            "seed": "seed of the drop and jitter draws (an integer; empty: unseeded)",
            "buffer_sse": "hold every SSE stream back until it ends (true or false)",
        }
        for name, option in ADDON_OPTIONS.items():
            loader.add_option(option, str, "", f"mcpbench faults: {helps[name]}.")
        loader.add_option(LOG_OPTION, str, "", "mcpbench faults: append one JSON line per injected fault to this file.")

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx, exceptions

        if updated & set(ADDON_OPTIONS.values()):
            texts = {name: getattr(ctx.options, option) for name, option in ADDON_OPTIONS.items()}
            try:
                self.plan = parse_plan(**texts)
            except FaultConfigError as exc:
                raise exceptions.OptionsError(f"mcpbench faults: {exc}") from None
            self.decider = Decider(self.plan)
        if LOG_OPTION in updated:
            if self.log is not None:
                self.log.close()
                self.log = None
            if path := ctx.options.mcpbench_faults_log:
                try:
                    self.log = FaultLog(path)
                except OSError as exc:
                    raise exceptions.OptionsError(f"mcpbench faults: {path}: {exc.strerror}") from None

    def running(self) -> None:
        self.started = time.monotonic()
        self._start_ticker()

    def done(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._ticker is not None:
            self._ticker.cancel()
        if self.log is not None:
            self.log.close()
            self.log = None

    # --- time and records ------------------------------------------------------------------------

    def elapsed(self) -> float:
        now = time.monotonic()
        if self.started is None:
            self.started = now
        return now - self.started

    def record(self, kind: str, flow=None, client=None, **detail) -> None:
        """Log one injected fault (and say it on mitmproxy's log at debug level)."""
        entry: dict = {"t": round(time.time(), 6), "elapsed": round(self.elapsed(), 6), "kind": kind}
        client = client if client is not None else (flow.client_conn if flow is not None else None)
        if flow is not None:
            entry.update(flow=flow.id, method=flow.request.method, path=self.redactor.url(flow.request.path))
        if client is not None and client.peername:
            entry["client"] = f"{client.peername[0]}:{client.peername[1]}"
        entry.update(detail)
        logger.debug("mcpbench faults: %s", entry)
        if self.log is not None:
            try:
                self.log.write(entry)
            except OSError as exc:  # the traffic goes on; the experiment learns its log is short
                logger.warning("mcpbench faults: cannot write %s: %s; fault log stopped", self.log.path, exc.strerror)
                self.log.close()
                self.log = None

    # --- requests --------------------------------------------------------------------------------

    def client_connected(self, client) -> None:
        self._clients[client.id] = (client, time.monotonic())

    def client_disconnected(self, client) -> None:
        self._clients.pop(client.id, None)

    def touch(self, conn_id: str) -> None:
        entry = self._clients.get(conn_id)
        if entry is not None:
            self._clients[conn_id] = (entry[0], time.monotonic())

    def requestheaders(self, flow) -> None:
        self.touch(flow.client_conn.id)

    async def request(self, flow) -> None:
        from mitmproxy import http

        self.touch(flow.client_conn.id)
        if flow.response is not None or not self.plan.any:
            self.upstream.before(flow)
            return
        elapsed = self.elapsed()
        if self.decider.drop(elapsed):
            how = self.plan.drop_as
            self.record("drop", flow, drop_as=how)
            if how == "reset":
                flow.kill()
            else:
                flow.response = http.Response.make(int(how), DROP_BODY, {"content-type": "text/plain"})
            return
        if pause := self.decider.delay(elapsed):
            self.record("delay", flow, delay_ms=round(pause * 1000, 3))
            await asyncio.sleep(pause)
        self.upstream.before(flow)  # after any delay: the request goes upstream when this returns

    def responseheaders(self, flow) -> None:
        response = flow.response
        conn_id = flow.client_conn.id
        self.touch(conn_id)
        if not is_event_stream(response.headers.get("content-type")):
            return
        if self.plan.buffer_sse and self.decider.active(self.elapsed()):
            response.stream = False  # mitmproxy then reads the whole body before it sends any of it
            self.record("buffer-sse", flow)
            return
        if self.plan.idle_timeout is not None or self.plan.cut_streams_after is not None:
            # Bytes on a stream count as activity, and a cut waits for the stream's first ones.
            inner = response.stream if callable(response.stream) else None
            response.stream = self._streams[flow.id] = _Activity(self, flow, inner)
        elif not response.stream:
            response.stream = True  # SSE passes unbuffered, as with the recorder and the balancer
        if self.plan.cut_streams_after is not None:
            self._arm_cut(flow, opened=self.elapsed())

    def response(self, flow) -> None:
        self.upstream.after(flow)
        self.touch(flow.client_conn.id)
        self._disarm(flow)

    def error(self, flow) -> None:
        self.upstream.after(flow)
        self._disarm(flow)

    # --- cuts ------------------------------------------------------------------------------------

    def _arm_cut(self, flow, opened: float) -> None:
        plan = self.plan
        due = opened + plan.cut_streams_after
        if due < plan.faults_from:
            due = plan.faults_from  # the schedule starts later: cut then
        if plan.faults_until is not None and due >= plan.faults_until:
            return  # its time comes after the faults end
        loop = asyncio.get_running_loop()
        self._timers[flow.id] = loop.call_later(max(0.0, due - self.elapsed()), self._cut_stream, flow, opened)

    def _disarm(self, flow) -> None:
        timer = self._timers.pop(flow.id, None)
        if timer is not None:
            timer.cancel()
        self._streams.pop(flow.id, None)
        self._held.pop(flow.id, None)

    def _cut_stream(self, flow, opened: float) -> None:
        self._timers.pop(flow.id, None)
        if flow.response is None or not self.decider.cut_due(opened, self.elapsed()):
            return
        stream = self._streams.get(flow.id)
        if stream is None:
            return  # the stream ended (`_disarm`) after its first bytes were seen: nothing to cut
        if not stream.passed and flow.id not in self._held:
            # Nothing passed yet: cut once its first bytes are on their way, or one more period on.
            self._held[flow.id] = opened
            self._timers[flow.id] = asyncio.get_running_loop().call_later(self.plan.cut_streams_after, self._cut_stream, flow, opened)
            return
        held = self._held.pop(flow.id, None) is not None
        self._streams.pop(flow.id, None)
        if self._close(flow.client_conn):
            self.record("cut-stream", flow, after_s=round(self.elapsed() - opened, 6), **({"held": True} if held else {}))

    def first_bytes(self, flow) -> None:
        """A stream's first bytes are being handed on: a cut held for them goes once they are written
        (mitmproxy writes the chunk before this callback's turn of the loop ends)."""
        opened = self._held.get(flow.id)
        if opened is not None:
            timer = self._timers.pop(flow.id, None)
            if timer is not None:
                timer.cancel()
            asyncio.get_running_loop().call_soon(self._cut_stream, flow, opened)

    def _close(self, client) -> bool:
        """Close a client connection through its live handler; False when it is gone already."""
        from mitmproxy import ctx

        handler = ctx.master.addons.get("proxyserver").connections.get(client.id)
        if handler is None:
            return False
        handler.close_connection(client)
        return True

    def _start_ticker(self) -> None:
        if self.plan.idle_timeout is not None and self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._idle_loop())

    async def _idle_loop(self) -> None:
        limit = self.plan.idle_timeout
        step = min(MAX_IDLE_CHECK, limit / 4)
        while True:
            await asyncio.sleep(step)
            now = time.monotonic()
            elapsed = self.elapsed()
            for conn_id, (client, last) in list(self._clients.items()):
                if self.decider.idle_due(elapsed - (now - last), elapsed) and self._close(client):
                    self._clients.pop(conn_id, None)
                    self.record("cut-idle", client=client, idle_s=round(now - last, 6))


addons = [Faults()]
