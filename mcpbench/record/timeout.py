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
"""

from __future__ import annotations

import asyncio

from mitmproxy import ctx
from mitmproxy.proxy import events

from mcpbench.record import DEFAULT_UPSTREAM_TIMEOUT

# The `flow.metadata` key of a flow this addon answered.
TIMED_OUT = "mcpbench_timed_out"


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
    """Answers 504 for a flow whose upstream has not begun its answer within the time-out."""

    def __init__(self) -> None:
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def load(self, loader) -> None:
        loader.add_option(
            "mcpbench_upstream_timeout", int, DEFAULT_UPSTREAM_TIMEOUT,  # whole seconds: mitmproxy's --set has no floats
            "mcpbench: seconds an upstream may take to start its answer; then the client gets a 504 "
            "and the trace an error event. 0: no limit.",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import exceptions

        if "mcpbench_upstream_timeout" in updated and ctx.options.mcpbench_upstream_timeout < 0:
            raise exceptions.OptionsError("mcpbench_upstream_timeout: must be >= 0 (0: no limit)")

    def request(self, flow) -> None:
        seconds = ctx.options.mcpbench_upstream_timeout
        if seconds > 0 and flow.response is None:  # not answered by another addon
            self._timers[flow.id] = asyncio.get_running_loop().call_later(seconds, self._expire, flow, seconds)

    def responseheaders(self, flow) -> None:
        self._cancel(flow)

    def response(self, flow) -> None:
        self._cancel(flow)

    def error(self, flow) -> None:
        self._cancel(flow)

    def done(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _cancel(self, flow) -> None:
        if (timer := self._timers.pop(flow.id, None)) is not None:
            timer.cancel()

    def _expire(self, flow, seconds: float) -> None:
        self._timers.pop(flow.id, None)
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
