"""An upstream that does not answer in time: the client gets a 504 naming the cause, the trace an error.

mitmproxy 12 has no per-request upstream time-out (only `tcp_timeout`, an idle limit on the client's
connection that drops it with no answer), its error responses are 502 or 400 only (`ErrorCode`), and
an addon cannot answer a flow whose request has gone upstream: `flow.response` set outside a hook is
never sent, and `flow.kill()` does not stop a flow in transit. So when the time runs out, this addon
hands the flow's upstream connection a `504 Gateway Timeout` as if the upstream had sent it
(`connection: close`, so mitmproxy then closes that connection and a late answer goes nowhere). The
answer takes mitmproxy's ordinary path to the client; the flow is marked (`flow.metadata`) so the
recorder writes it as a failed exchange: an `error` event and the `http` event with its `error`.

Only the wait for the response's headers is bounded: an SSE stream that has started may stay quiet.

`UpstreamTimeout` is not an addon of its own: the recording addon calls it from its hooks, since
mitmproxy offers every event to every addon object and each one costs a dispatch per event.
"""

from __future__ import annotations

import asyncio
import time

from mitmproxy import ctx
from mitmproxy.proxy import events

from mcpbench.record import DEFAULT_UPSTREAM_TIMEOUT

# The `flow.metadata` key of a flow this addon answered.
TIMED_OUT = "mcpbench_timed_out"

# How often the flows still waiting for an answer are checked, while any wait: a time-out fires up to
# this late. One check per interval costs far less than a timer set and cancelled per request.
SWEEP_SECONDS = 0.25


def timeout_detail(seconds: float) -> str:
    return f"upstream timed out: no answer within {seconds:g} s"


def gateway_timeout(detail: str) -> bytes:
    """A 504 response as an upstream would send it, closing its connection."""
    body = f"mcpbench: {detail}\n".encode()
    return (
        b"HTTP/1.1 504 Gateway Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    ) + body


class UpstreamTimeout:
    """Answers 504 for a flow whose upstream has not begun its answer within the time-out.

    The recording addon calls `load` and `configure` with its own, `sent` from its `request` hook,
    `answered` from `responseheaders`, `response` and `error`, and `done`.
    """

    def __init__(self) -> None:
        self.seconds = DEFAULT_UPSTREAM_TIMEOUT  # the option's value (0: no limit)
        self._waiting: dict[str, tuple[float, object, float]] = {}  # flow id -> (deadline, flow, seconds)
        self._sweep: asyncio.TimerHandle | None = None

    def load(self, loader) -> None:
        loader.add_option(
            "mcpbench_upstream_timeout", int, DEFAULT_UPSTREAM_TIMEOUT,  # whole seconds: mitmproxy's --set has no floats
            "mcpbench: seconds an upstream may take to start its answer; then the client gets a 504 "
            "and the trace an error event. 0: no limit.",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import exceptions

        if "mcpbench_upstream_timeout" in updated:
            seconds = ctx.options.mcpbench_upstream_timeout
            if seconds < 0:
                raise exceptions.OptionsError("mcpbench_upstream_timeout: must be >= 0 (0: no limit)")
            self.seconds = seconds  # read once here: an option lookup per request costs

    def sent(self, flow) -> None:
        """The request goes upstream now (its `request` hook): the wait for the answer begins."""
        seconds = self.seconds
        if seconds > 0 and flow.response is None:  # not answered by another addon
            self._waiting[flow.id] = (time.monotonic() + seconds, flow, seconds)
            if self._sweep is None:
                self._sweep = asyncio.get_running_loop().call_later(SWEEP_SECONDS, self._expire)

    def answered(self, flow) -> None:
        """The answer began, or the flow failed: no time-out for it."""
        self._waiting.pop(flow.id, None)

    def done(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self._waiting.clear()

    def _expire(self) -> None:
        """Answer the flows whose time ran out; check again later while any still wait."""
        self._sweep = None
        waiting = self._waiting
        clock = time.monotonic()
        for flow_id, (deadline, flow, seconds) in list(waiting.items()):
            if deadline <= clock:
                del waiting[flow_id]
                self._time_out(flow, seconds)
        if waiting:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_SECONDS, self._expire)

    def _time_out(self, flow, seconds: float) -> None:
        server = flow.server_conn
        if flow.response is not None or flow.error is not None or not flow.live or not server.connected:
            return  # answered, failed or gone meanwhile; or still connecting (mitmproxy bounds that)
        proxyserver = ctx.master.addons.get("proxyserver")
        handler = proxyserver.connections.get(flow.client_conn.id) if proxyserver else None
        if handler is None:
            return
        detail = timeout_detail(seconds)
        flow.metadata[TIMED_OUT] = detail
        asyncio.get_running_loop().create_task(handler.server_event(events.DataReceived(server, gateway_timeout(detail))))
